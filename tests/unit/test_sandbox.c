/*
 * test_sandbox.c: the confinement of boundaryd and tcloned (lib/sandbox.c).
 *
 * sandbox_boundaryd() is irreversible, so it runs in a forked child, which
 * then checks its own capability sets and tries the things the dropped
 * capabilities would allow. Needs root (it starts from full capabilities).
 */
#include <linux/capability.h>
#include <sched.h>
#include <sys/fanotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "sandbox.h"
#include "unit.h"

#define KEPT ((1ull << CAP_KILL) | (1ull << CAP_SYS_PTRACE) | (1ull << CAP_DAC_READ_SEARCH) | \
	(1ull << CAP_NET_ADMIN))
/* Permitted, never effective except inside sandbox_base_mkdir. */
#define PERMITTED_ONLY (1ull << CAP_DAC_OVERRIDE)

/* Parse one "Name:\tHEX" line of /proc/self/status. */
static int
status_hex(const char *status, const char *name, unsigned long long *out)
{
	char key[32];
	snprintf(key, sizeof(key), "\n%s:", name);
	const char *p = strstr(status, key);
	if (p == NULL)
		return -1;
	return sscanf(p + strlen(key), "%llx", out) == 1 ? 0 : -1;
}

static void
child(int rep, const char *dir)
{
	char *cause = NULL, *st, path[512];
	unsigned long long eff, prm, inh, bnd, amb, nnp;

	alarm(20);
	CHILD_CHECK(sandbox_boundaryd(&cause) == 0, "sandbox_boundaryd: %s", cause);
	CHILD_CHECK(util_read_path("/proc/self/status", 65536, &st, NULL) == 0, "status: %m");
	CHILD_CHECK(status_hex(st, "CapEff", &eff) == 0 && status_hex(st, "CapPrm", &prm) == 0 &&
	    status_hex(st, "CapInh", &inh) == 0 && status_hex(st, "CapBnd", &bnd) == 0 &&
	    status_hex(st, "CapAmb", &amb) == 0, "cannot parse status");
	CHILD_CHECK(sscanf(strstr(st, "\nNoNewPrivs:") + 12, "%llu", &nnp) == 1, "no NoNewPrivs");
	CHILD_CHECK(eff == KEPT, "CapEff %llx, expected %llx", eff, KEPT);
	CHILD_CHECK(prm == (KEPT | PERMITTED_ONLY), "CapPrm %llx, expected %llx", prm,
	    KEPT | PERMITTED_ONLY);
	CHILD_CHECK(inh == 0, "CapInh %llx", inh);
	CHILD_CHECK((bnd & ~KEPT) == 0, "CapBnd %llx holds more than the kept set", bnd);
	CHILD_CHECK(amb == 0, "CapAmb %llx", amb);
	CHILD_CHECK(nnp == 1, "NoNewPrivs %llu", nnp);
	CHILD_CHECK(getuid() == 0 && geteuid() == 0, "uid changed");

	/* What the dropped capabilities would have allowed now fails. */
	snprintf(path, sizeof(path), "%s/theirs", dir);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	CHILD_CHECK(fd < 0 && errno == EACCES, "wrote another user's 0600 file (no DAC_OVERRIDE)");
	fd = open(path, O_RDONLY | O_CLOEXEC); /* CAP_DAC_READ_SEARCH is kept */
	CHILD_CHECK(fd >= 0, "cannot read another user's file: %m");
	close(fd);
	snprintf(path, sizeof(path), "%s/mine", dir);
	CHILD_CHECK(chown(path, 65534, 65534) == -1 && errno == EPERM, "chown worked");
	CHILD_CHECK(setuid(65534) == -1 && errno == EPERM, "setuid worked");
	CHILD_CHECK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0) == -1,
	    "raised CAP_SYS_ADMIN");
	CHILD_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0) == -1, "cleared no_new_privs");
	/* The one use of the override: a mkdir in a 0555 directory, then it is gone again. */
	snprintf(path, sizeof(path), "%s/ro", dir);
	CHILD_CHECK(mkdirat(AT_FDCWD, path, 0755) == -1 && errno == EACCES, "mkdir in 0555 worked");
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHILD_CHECK(dfd >= 0 && sandbox_base_mkdir(dfd, "ro", 0755) == 0,
	    "sandbox_base_mkdir: %m");
	close(dfd);
	free(st);
	CHILD_CHECK(util_read_path("/proc/self/status", 65536, &st, NULL) == 0, "status: %m");
	CHILD_CHECK(status_hex(st, "CapEff", &eff) == 0 && eff == KEPT,
	    "CapEff %llx after sandbox_base_mkdir", eff);
	snprintf(path, sizeof(path), "%s/theirs", dir);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	CHILD_CHECK(fd < 0 && errno == EACCES, "override still effective after the mkdir");
	free(st);
	_exit(0);
}

START_TEST(test_boundaryd)
{
	unit_require_root();
	const char *dir = unit_tmpdir("/tmp");
	char path[512], msg[512] = "";
	int rep[2], status;

	snprintf(path, sizeof(path), "%s/theirs", dir);
	unit_write_file(AT_FDCWD, path, "x", 1);
	ck_assert_int_eq(chown(path, 65534, 65534), 0);
	ck_assert_int_eq(chmod(path, 0600), 0);
	snprintf(path, sizeof(path), "%s/mine", dir);
	unit_write_file(AT_FDCWD, path, "x", 1);
	ck_assert_int_eq(pipe2(rep, O_CLOEXEC), 0);
	ck_assert_int_eq(chmod(dir, 0555), 0);

	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(rep[0]);
		child(rep[1], dir);
	}
	close(rep[1]);
	ck_assert_int_eq(unit_wait_pid(pid, 20000, &status), 0);
	ssize_t n = read(rep[0], msg, sizeof(msg) - 1);
	if (n > 0)
		msg[n] = '\0';
	close(rep[0]);
	snprintf(path, sizeof(path), "%s/ro", dir);
	(void)rmdir(path);
	ck_assert_int_eq(chmod(dir, 0700), 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "sandboxed child: %s (0x%x)",
	    msg, status);
}
END_TEST

#define TCLONED_KEPT ((1ull << CAP_SYS_ADMIN) | (1ull << CAP_SETUID) | (1ull << CAP_SETGID) | \
	(1ull << CAP_CHOWN) | (1ull << CAP_FOWNER) | (1ull << CAP_DAC_OVERRIDE) | \
	(1ull << CAP_DAC_READ_SEARCH) | (1ull << CAP_KILL))

/* sandbox_tcloned in a child: its sets, then what its filter refuses and keeps. */
static void
tcloned_child(int rep, int podman_net)
{
	unsigned long long want = TCLONED_KEPT | (podman_net ? 1ull << CAP_NET_ADMIN : 0);
	unsigned long long eff, prm, inh, bnd, amb;
	char *cause = NULL, *st;

	(void)rep;
	alarm(20);
	CHILD_CHECK(sandbox_tcloned(podman_net, &cause) == 0, "sandbox_tcloned: %s", cause);
	CHILD_CHECK(util_read_path("/proc/self/status", 65536, &st, NULL) == 0, "status: %m");
	CHILD_CHECK(status_hex(st, "CapEff", &eff) == 0 && status_hex(st, "CapPrm", &prm) == 0 &&
	    status_hex(st, "CapInh", &inh) == 0 && status_hex(st, "CapBnd", &bnd) == 0 &&
	    status_hex(st, "CapAmb", &amb) == 0, "cannot parse status");
	CHILD_CHECK(eff == want && prm == want, "CapEff %llx CapPrm %llx, expected %llx", eff,
	    prm, want);
	/* Bounded by the kept set, not emptied: podman, exec'd as root, gets just it. */
	CHILD_CHECK(bnd == want && inh == 0 && amb == 0, "CapBnd %llx CapInh %llx CapAmb %llx",
	    bnd, inh, amb);
	CHILD_CHECK(strstr(st, "\nNoNewPrivs:\t1") != NULL, "no no_new_privs");
	CHILD_CHECK(strstr(st, "\nSeccomp:\t2") != NULL, "no seccomp filter");
	free(st);

	/* Dropped capabilities: ptrace-free, no raw devices, no new bounding bits. */
	char node[64];
	snprintf(node, sizeof(node), "/tmp/gensee-unit-mknod.%d", (int)getpid());
	int made = mknod(node, S_IFCHR | 0600, makedev(1, 3));
	if (made == 0)
		unlink(node);
	CHILD_CHECK(made == -1 && errno == EPERM, "mknod of a device worked (CAP_MKNOD)");
	CHILD_CHECK(prctl(PR_CAPBSET_DROP, CAP_KILL, 0, 0, 0) == -1, "bounding set writable");
	/* The filter: what nothing tcloned starts may do. */
	struct file_handle fh = { .handle_bytes = 0 };
	errno = 0;
	CHILD_CHECK(syscall(SYS_open_by_handle_at, AT_FDCWD, &fh, O_RDONLY) == -1 &&
	    errno == EPERM, "open_by_handle_at: %m");
	errno = 0;
	CHILD_CHECK(syscall(SYS_kexec_load, 0, 0, NULL, 0) == -1 && errno == EPERM,
	    "kexec_load: %m");
	errno = 0;
	CHILD_CHECK(syscall(SYS_bpf, 0, NULL, 0) == -1 && errno == EPERM, "bpf: %m");
	errno = 0;
	CHILD_CHECK(syscall(SYS_fanotify_init, FAN_CLASS_CONTENT, O_RDONLY) == -1 &&
	    errno == EPERM, "fanotify_init: %m");
#if !defined(__SANITIZE_ADDRESS__)
	errno = 0;
	CHILD_CHECK(syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, NULL, NULL) == -1 &&
	    errno == EPERM, "ptrace: %m");
#endif
	errno = 0;
	CHILD_CHECK(unshare(CLONE_NEWUSER) == -1 && errno == EPERM, "unshare(CLONE_NEWUSER): %m");
	errno = 0;
	CHILD_CHECK(syscall(SYS_clone3, NULL, 0) == -1 && errno == ENOSYS, "clone3: %m");
	/* What it does use still works: a mount namespace, a fork. */
	CHILD_CHECK(unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS): %m");
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	CHILD_CHECK(p > 0, "fork: %m");
	_exit(0);
}

static void
run_tcloned_child(int podman_net)
{
	char msg[512] = "";
	int rep[2], status;

	unit_require_root();
	ck_assert_int_eq(pipe2(rep, O_CLOEXEC), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(rep[0]);
		tcloned_child(rep[1], podman_net);
	}
	close(rep[1]);
	ck_assert_int_eq(unit_wait_pid(pid, 20000, &status), 0);
	ssize_t n = read(rep[0], msg, sizeof(msg) - 1);
	if (n > 0)
		msg[n] = '\0';
	close(rep[0]);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "sandboxed child: %s (0x%x)",
	    msg, status);
}

START_TEST(test_tcloned)
{
	run_tcloned_child(0);
}
END_TEST

START_TEST(test_tcloned_podman)
{
	run_tcloned_child(1);
}
END_TEST

static Suite *
sandbox_suite(void)
{
	Suite *s = suite_create("sandbox");
	TCase *tc = tcase_create("boundaryd");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_boundaryd);
	tcase_add_test(tc, test_tcloned);
	tcase_add_test(tc, test_tcloned_podman);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(sandbox_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
