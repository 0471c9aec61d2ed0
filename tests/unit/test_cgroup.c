/*
 * test_cgroup.c: cgroup v2 membership, kill and cleanup (lib/cgroup.c).
 *
 * The mountinfo parser runs on fixed text. The rest runs as root on the
 * real kernel in MOUNT/gensee/test_<run>_<n>. Every such cgroup is removed
 * by the tcase's unchecked teardown, which runs in the runner after the
 * tests whatever their outcome (a failed assertion _exits the test process,
 * so the atexit handler there only covers normal exits); "gensee" itself is
 * removed again if this run created it.
 */
#include <sys/prctl.h>
#include <sys/statfs.h>
#include <linux/magic.h>

#include "cgroup.h"
#include "ids.h"
#include "unit.h"

/* ---- mountinfo parsing ---- */

static int
parse_text(const char *text, char *buf, size_t len)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	ck_assert_ptr_nonnull(f);
	int r = cgroup_parse_mountinfo(f, buf, len);
	fclose(f);
	return r;
}

static const char hybrid[] =
    "22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "30 22 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:8 - tmpfs tmpfs ro,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 "
    "cgroup2 rw,nsdelegate\n"
    "32 30 0:29 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:10 - cgroup "
    "cgroup rw,xattr,name=systemd\n"
    "33 30 0:30 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:11 - cgroup "
    "cgroup rw,memory\n";

static const char pure_v2[] =
    "1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "25 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

/* No optional fields at all before the separator. */
static const char no_optional[] =
    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static const char escaped[] =
    "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
    "50 1 0:40 / /mnt/my\\040cgroup\\011dir rw,relatime shared:20 master:3 - cgroup2 none rw\n";

static const char none_v2[] =
    "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
    "30 22 0:27 / /sys/fs/cgroup ro shared:8 - tmpfs tmpfs ro,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/memory rw shared:9 - cgroup cgroup rw,memory\n"
    /* decoys: "cgroup2" as a mount point, as an option and as a source */
    "60 1 8:2 / /cgroup2 rw shared:30 - ext4 cgroup2 rw\n"
    "61 1 0:50 / /srv rw cgroup2 - tmpfs cgroup2 rw\n";

START_TEST(test_mountinfo_options)
{
	static const char text[] =
	    "22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n"
	    "31 22 0:28 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 "
	    "rw,nsdelegate,favordynmods,memory_recursiveprot\n";
	char mnt[64], so[128], tiny[8];
	FILE *f = fmemopen((void *)text, strlen(text), "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(cgroup_parse_mountinfo_opts(f, mnt, sizeof(mnt), so, sizeof(so)), 0);
	fclose(f);
	ck_assert_str_eq(mnt, "/sys/fs/cgroup");
	ck_assert_str_eq(so, "rw,nsdelegate,favordynmods,memory_recursiveprot");
	/* Options that do not fit are no answer, not a cut one. */
	f = fmemopen((void *)text, strlen(text), "r");
	ck_assert_int_eq(cgroup_parse_mountinfo_opts(f, mnt, sizeof(mnt), tiny, sizeof(tiny)), -1);
	fclose(f);
	/* This host: whatever it is, a definite answer. */
	ck_assert_int_ge(cgroup_favordynmods(), access("/proc/self/mountinfo", R_OK) == 0 ? 0 : -1);
}
END_TEST

START_TEST(test_mountinfo)
{
	char buf[256];

	ck_assert_int_eq(parse_text(hybrid, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/sys/fs/cgroup/unified");
	ck_assert_int_eq(parse_text(pure_v2, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/sys/fs/cgroup");
	ck_assert_int_eq(parse_text(no_optional, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/sys/fs/cgroup/unified");
	ck_assert_int_eq(parse_text(escaped, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/mnt/my cgroup\tdir");
	ck_assert_int_eq(parse_text(none_v2, buf, sizeof(buf)), -1);
	ck_assert_int_eq(parse_text("", buf, sizeof(buf)), -1);
	ck_assert_int_eq(parse_text("garbage\n\n- cgroup2\n", buf, sizeof(buf)), -1);
	/* The first cgroup2 mount wins. */
	char two[1024];
	snprintf(two, sizeof(two), "%s%s", pure_v2, no_optional);
	ck_assert_int_eq(parse_text(two, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/sys/fs/cgroup");
	/* A buffer too small for the path is a failure, not a truncated path. */
	ck_assert_int_eq(parse_text(hybrid, buf, 10), -1);
	ck_assert_int_eq(parse_text(pure_v2, buf, strlen("/sys/fs/cgroup") + 1), 0);
}
END_TEST

/* ---- the real kernel ---- */

static char cg_run[ID_MAX_LEN]; /* test_<hex>, chosen in the runner */
static int cg_base_existed = 1;
static char cg_mount[PATH_MAX];

static void
cg_rel(char *out, size_t len, int n)
{
	snprintf(out, len, "%s/%s_%d", CGROUP_BASE, cg_run, n);
}

/* Kill everything in a test cgroup, wait (bounded) for it to drain, rmdir. */
static void
cg_force_remove(const char *path)
{
	char f[PATH_MAX + 32];
	snprintf(f, sizeof(f), "%s/cgroup.kill", path);
	int fd = open(f, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)!write(fd, "1", 1);
		close(fd);
	}
	for (int i = 0; i < 500; i++) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return;
		unit_sleep_ms(10);
	}
	fprintf(stderr, "test_cgroup: could not remove %s: %s\n", path, strerror(errno));
}

static void
cg_remove_all(void)
{
	char pat[PATH_MAX + 64];
	glob_t g;

	if (cg_mount[0] == '\0' || cg_run[0] == '\0')
		return;
	snprintf(pat, sizeof(pat), "%s/%s/%s_*", cg_mount, CGROUP_BASE, cg_run);
	if (glob(pat, GLOB_ONLYDIR, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			cg_force_remove(g.gl_pathv[i]);
		globfree(&g);
	}
}

/* Unchecked fixtures run in the runner, once around the tcase. */
static void
cg_setup(void)
{
	char *cause = NULL;
	struct stat st;

	if (ids_init() != 0 || ids_new("test_", cg_run, sizeof(cg_run)) != 0)
		cg_run[0] = '\0';
	if (geteuid() != 0 || cgroup_find_mount(cg_mount, sizeof(cg_mount), &cause) != 0) {
		cg_mount[0] = '\0';
		free(cause);
		return;
	}
	char base[PATH_MAX + 16];
	snprintf(base, sizeof(base), "%s/%s", cg_mount, CGROUP_BASE);
	cg_base_existed = stat(base, &st) == 0;
}

static void
cg_teardown(void)
{
	cg_remove_all();
	if (!cg_base_existed && cg_mount[0] != '\0') {
		char base[PATH_MAX + 16];
		snprintf(base, sizeof(base), "%s/%s", cg_mount, CGROUP_BASE);
		(void)rmdir(base); /* fails harmlessly if anything else lives there */
	}
}

static pid_t cg_children[4];

/* In the test process, on a normal exit: kill and reap our children, drop our cgroups. */
static void
cg_atexit(void)
{
	int status;
	for (size_t i = 0; i < nitems(cg_children); i++)
		if (cg_children[i] > 0)
			kill(cg_children[i], SIGKILL);
	/* Reap them here (we are their subreaper) rather than leave zombies. */
	for (size_t i = 0; i < nitems(cg_children); i++)
		if (cg_children[i] > 0)
			(void)unit_wait_pid(cg_children[i], 2000, &status);
	cg_remove_all();
}

static void
cg_test_begin(char *mount, size_t len)
{
	char *cause = NULL;
	struct statfs sfs;

	unit_require_root();
	ck_assert_msg(cg_run[0] != '\0', "no random run id");
	ck_assert_msg(cgroup_find_mount(mount, len, &cause) == 0, "%s", cause);
	ck_assert_str_eq(mount, cg_mount);
	/* Independently: it really is a cgroup2 filesystem. */
	ck_assert_int_eq(statfs(mount, &sfs), 0);
	ck_assert_msg(sfs.f_type == CGROUP2_SUPER_MAGIC, "%s is not cgroup2", mount);
	atexit(cg_atexit);
	ck_assert_msg(cgroup_ensure_base(mount, CGROUP_BASE, &cause) == 0, "%s", cause);
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
}

/*
 * A child that, once told "go", forks a grandchild (which inherits its
 * cgroup), reports the grandchild's pid and sleeps. Both sleep at most 60 s.
 */
static pid_t
spawn_family(int *go_w, int *rep_r)
{
	int go[2], rep[2];

	ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(rep, O_CLOEXEC), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char c;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);
		close(go[1]);
		close(rep[0]);
		if (read(go[0], &c, 1) != 1)
			_exit(3);
		pid_t g = fork();
		if (g == 0) {
			alarm(60);
			for (;;)
				pause();
		}
		if (write(rep[1], &g, sizeof(g)) != (ssize_t)sizeof(g))
			_exit(4);
		for (;;)
			pause();
	}
	close(go[0]);
	close(rep[1]);
	*go_w = go[1];
	*rep_r = rep[0];
	return pid;
}

static int
has_pid(const pid_t *v, size_t n, pid_t p)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == p)
			return 1;
	return 0;
}

START_TEST(test_lifecycle)
{
	char mount[PATH_MAX], rel[128], path[PATH_MAX + 128], in[256], *cause = NULL;
	struct cgroup cg;
	struct stat st;
	pid_t *pids;
	size_t n;
	int status, go, rep;

	cg_test_begin(mount, sizeof(mount));
	snprintf(path, sizeof(path), "%s/%s", mount, CGROUP_BASE);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(st.st_uid, 0);
	ck_assert_int_eq(st.st_mode & (S_IWGRP | S_IWOTH), 0);
	ck_assert_msg(cgroup_ensure_base(mount, CGROUP_BASE, &cause) == 0, "second ensure: %s", cause);

	cg_rel(rel, sizeof(rel), 0);
	ck_assert_msg(cgroup_create(mount, rel, &cg, &cause) == 0, "create: %s", cause);
	snprintf(path, sizeof(path), "%s/%s", mount, rel);
	ck_assert_str_eq(cg.cg_path, path);
	ck_assert_str_eq(cg.cg_rel, rel);
	ck_assert_int_ge(cg.cg_dirfd, 0);

	/* cg_id is the directory inode, which is also the kernfs file handle id. */
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(cg.cg_id, (uint64_t)st.st_ino);
	union {
		struct file_handle fh;
		char space[sizeof(struct file_handle) + sizeof(uint64_t)];
	} h;
	int mnt_id;
	h.fh.handle_bytes = sizeof(uint64_t);
	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mnt_id, 0) == 0) {
		uint64_t hid;
		ck_assert_uint_eq(h.fh.handle_bytes, sizeof(hid));
		memcpy(&hid, h.fh.f_handle, sizeof(hid));
		ck_assert_uint_eq(cg.cg_id, hid);
	}

	ck_assert_int_eq(cgroup_populated(&cg), 0);
	ck_assert_int_eq(cgroup_members(&cg, &pids, &n, &cause), 0);
	ck_assert_uint_eq(n, 0);
	free(pids);

	pid_t child = spawn_family(&go, &rep);
	cg_children[0] = child;
	ck_assert_msg(cgroup_attach(&cg, child, &cause) == 0, "attach: %s", cause);
	ck_assert_int_eq(write(go, "g", 1), 1);
	pid_t grandchild = 0;
	ck_assert_int_eq(read(rep, &grandchild, sizeof(grandchild)), (ssize_t)sizeof(grandchild));
	ck_assert_int_gt(grandchild, 0);
	cg_children[1] = grandchild;

	ck_assert_int_eq(cgroup_members(&cg, &pids, &n, &cause), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert(has_pid(pids, n, child));
	ck_assert(has_pid(pids, n, grandchild));
	free(pids);
	ck_assert_int_eq(cgroup_of_pid(child, in, sizeof(in)), 0);
	ck_assert_str_eq(in, rel);
	ck_assert_int_eq(cgroup_of_pid(grandchild, in, sizeof(in)), 0);
	ck_assert_str_eq(in, rel);
	ck_assert_int_eq(cgroup_populated(&cg), 1);

	/* Not empty: rmdir must fail and leave the cgroup usable. */
	ck_assert_int_eq(cgroup_remove(&cg, &cause), -1);
	ck_assert_int_eq(errno, EBUSY);
	ck_assert_int_ge(cg.cg_dirfd, 0);

	ck_assert_msg(cgroup_kill(&cg, &cause) == 0, "kill: %s", cause);
	ck_assert_int_eq(unit_wait_pid(child, 10000, &status), 0);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status 0x%x",
	    status);
	/* The grandchild was reparented to us (subreaper) and killed too. */
	ck_assert_int_eq(unit_wait_pid(grandchild, 10000, &status), 0);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	    "grandchild status 0x%x", status);
	cg_children[0] = cg_children[1] = 0;

	int populated = -1;
	for (int i = 0; i < 500 && (populated = cgroup_populated(&cg)) != 0; i++)
		unit_sleep_ms(10);
	ck_assert_int_eq(populated, 0);
	ck_assert_int_eq(cgroup_members(&cg, &pids, &n, &cause), 0);
	ck_assert_uint_eq(n, 0);
	free(pids);

	ck_assert_msg(cgroup_remove(&cg, &cause) == 0, "remove: %s", cause);
	ck_assert_int_eq(cg.cg_dirfd, -1);
	ck_assert_int_eq(stat(path, &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	close(go);
	close(rep);
	free(cause);
}
END_TEST

START_TEST(test_errors)
{
	char mount[PATH_MAX], rel[128], *cause = NULL;
	struct cgroup cg, again;

	cg_test_begin(mount, sizeof(mount));
	cg_rel(rel, sizeof(rel), 1);
	ck_assert_int_eq(cgroup_open(mount, rel, &again, &cause), -1);
	ck_assert_int_eq(again.cg_dirfd, -1);
	ck_assert_msg(cgroup_create(mount, rel, &cg, &cause) == 0, "%s", cause);
	/* EEXIST is an error: an operation never adopts a cgroup by accident. */
	ck_assert_int_eq(cgroup_create(mount, rel, &again, &cause), -1);
	ck_assert_int_eq(cgroup_open(mount, rel, &again, &cause), 0);
	ck_assert_uint_eq(again.cg_id, cg.cg_id);
	cgroup_close(&again);
	ck_assert_int_eq(again.cg_dirfd, -1);
	cgroup_close(&again); /* twice is harmless */

	/* Attaching a pid that does not exist fails. */
	pid_t gone = fork();
	ck_assert_int_ge(gone, 0);
	if (gone == 0)
		_exit(0);
	int status;
	ck_assert_int_eq(unit_wait_pid(gone, 5000, &status), 0);
	ck_assert_int_eq(cgroup_attach(&cg, gone, &cause), -1);
	ck_assert_int_eq(cgroup_populated(&cg), 0);

	/* Nested: parents are made as needed, and removal is per level. */
	char nested[192], parent_path[PATH_MAX + 192];
	struct cgroup leaf;
	snprintf(nested, sizeof(nested), "%s/inner", rel);
	ck_assert_msg(cgroup_create(mount, nested, &leaf, &cause) == 0, "%s", cause);
	ck_assert_int_eq(cgroup_remove(&cg, &cause), -1); /* has a child cgroup */
	ck_assert_int_eq(cgroup_remove(&leaf, &cause), 0);
	ck_assert_int_eq(cgroup_remove(&cg, &cause), 0);
	snprintf(parent_path, sizeof(parent_path), "%s/%s", mount, rel);
	ck_assert_int_eq(access(parent_path, F_OK), -1);
	/* remove_tree also takes the empty cgroups made below (podman's runc makes them). */
	char deeper[256];
	snprintf(deeper, sizeof(deeper), "%s/inner/more", rel);
	ck_assert_msg(cgroup_create(mount, deeper, &leaf, &cause) == 0, "%s", cause);
	cgroup_close(&leaf);
	ck_assert_msg(cgroup_open(mount, rel, &cg, &cause) == 0, "%s", cause);
	ck_assert_int_eq(cgroup_remove(&cg, &cause), -1);
	ck_assert_msg(cgroup_remove_tree(&cg, &cause) == 0, "%s", cause);
	ck_assert_int_eq(access(parent_path, F_OK), -1);

	/* Nothing escapes the mount. */
	ck_assert_int_eq(cgroup_create(mount, "../gensee-escape", &again, &cause), -1);
	ck_assert_int_eq(cgroup_create(mount, "gensee/../../gensee-escape", &again, &cause), -1);
	ck_assert_int_eq(cgroup_open(mount, "..", &again, &cause), -1);
	ck_assert_int_eq(cgroup_of_pid(gone, nested, sizeof(nested)), -1);
	free(cause);
}
END_TEST

START_TEST(test_of_self)
{
	char buf[256], *data;

	/* cgroup_of_pid agrees with the 0:: line of /proc/self/cgroup. */
	ck_assert_int_eq(cgroup_of_pid(getpid(), buf, sizeof(buf)), 0);
	ck_assert_int_eq(util_read_path("/proc/self/cgroup", 65536, &data, NULL), 0);
	char *line = strstr(data, "0::/");
	ck_assert_ptr_nonnull(line);
	line += 4;
	line[strcspn(line, "\n")] = '\0';
	ck_assert_str_eq(buf, line);
	/* A buffer too small for the path is a failure, not a truncated path. */
	ck_assert_int_eq(cgroup_of_pid(getpid(), buf, strlen(line) + 1), 0);
	if (line[0] != '\0')
		ck_assert_int_eq(cgroup_of_pid(getpid(), buf, strlen(line)), -1);
	free(data);
}
END_TEST

static Suite *
cgroup_suite(void)
{
	Suite *s = suite_create("cgroup");
	TCase *tc = tcase_create("mountinfo");

	tcase_add_test(tc, test_mountinfo);
	tcase_add_test(tc, test_mountinfo_options);
	tcase_add_test(tc, test_of_self);
	suite_add_tcase(s, tc);

	tc = tcase_create("kernel");
	tcase_set_timeout(tc, 60);
	tcase_add_unchecked_fixture(tc, cg_setup, cg_teardown);
	tcase_add_test(tc, test_lifecycle);
	tcase_add_test(tc, test_errors);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(cgroup_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
