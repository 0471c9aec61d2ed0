/*
 * test_safefs.c: state roots and beneath-root access (lib/safefs.c).
 *
 * The threat is a local user steering a root write through a symlink, a
 * ".." or a directory they can rename. Root checks need real ownership, so
 * those tests need root (and say so when they do not have it); they work in
 * a mkdtemp directory under /tmp, whose sticky bit makes it a valid ancestor.
 */
#include <sys/stat.h>

#include "safefs.h"
#include "unit.h"

/* A fresh 0700 root-owned directory under /tmp, with a known good state. */
static const char *
good_root(void)
{
	const char *d = unit_tmpdir("/tmp");
	ck_assert_int_eq(chmod(d, 0700), 0);
	return d;
}

static void
join(char *out, size_t len, const char *a, const char *b)
{
	ck_assert_uint_lt((size_t)snprintf(out, len, "%s/%s", a, b), len);
}

static void
expect_refused(const char *path, const char *why)
{
	char *cause = NULL;
	int fd = safefs_open_root(path, &cause);
	if (fd >= 0)
		close(fd);
	ck_assert_msg(fd == -1, "%s accepted as a state root (%s)", path, why);
	ck_assert_ptr_nonnull(cause);
	free(cause);
}

START_TEST(test_root_good)
{
	unit_require_root();
	const char *d = good_root();
	char *cause = NULL;
	struct stat a, b;
	char sub[512];

	int fd = safefs_open_root(d, &cause);
	ck_assert_msg(fd >= 0, "%s refused: %s", d, cause);
	/* It is a real directory fd of that very directory. */
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert_int_eq(stat(d, &b), 0);
	ck_assert(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
	int fl = fcntl(fd, F_GETFL);
	ck_assert_int_eq(fl & O_PATH, 0);
	ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
	close(fd);

	/* A root-owned 0755 child is a good root too, as is a trailing slash. */
	join(sub, sizeof(sub), d, "state");
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	ck_assert_int_eq(chmod(sub, 0755), 0);
	fd = safefs_open_root(sub, &cause);
	ck_assert_msg(fd >= 0, "%s refused: %s", sub, cause);
	close(fd);
	strcat(sub, "/");
	fd = safefs_open_root(sub, &cause);
	ck_assert_msg(fd >= 0, "%s refused: %s", sub, cause);
	close(fd);
}
END_TEST

START_TEST(test_root_bad_paths)
{
	expect_refused("relative/path", "relative");
	expect_refused("", "empty");
	expect_refused("/", "slash");
	expect_refused(NULL, "NULL");
	unit_require_root();
	const char *d = good_root();
	char p[512];

	join(p, sizeof(p), d, "missing");
	expect_refused(p, "does not exist");
	join(p, sizeof(p), d, "../../tmp");
	expect_refused(p, "dot-dot");
	snprintf(p, sizeof(p), "%s/.", d);
	expect_refused(p, "dot");
	join(p, sizeof(p), d, "file");
	unit_write_file(AT_FDCWD, p, "x", 1);
	expect_refused(p, "not a directory");
}
END_TEST

START_TEST(test_root_symlink)
{
	unit_require_root();
	const char *d = good_root();
	char real[512], link[512], via[512];

	join(real, sizeof(real), d, "real");
	join(link, sizeof(link), d, "link");
	ck_assert_int_eq(mkdir(real, 0700), 0);
	ck_assert_int_eq(mkdir(strcat(strcpy(via, real), "/inner"), 0700), 0);
	ck_assert_int_eq(symlink(real, link), 0);
	/* The symlink as the root itself, and as an ancestor. */
	expect_refused(link, "final symlink");
	join(via, sizeof(via), link, "inner");
	expect_refused(via, "symlink ancestor");
	/* A relative symlink is no better. */
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(symlink("real", link), 0);
	expect_refused(link, "relative symlink");
	/* The real path is fine. */
	char *cause = NULL;
	int fd = safefs_open_root(real, &cause);
	ck_assert_msg(fd >= 0, "%s", cause);
	close(fd);
}
END_TEST

START_TEST(test_root_writable)
{
	unit_require_root();
	const char *d = good_root();

	ck_assert_int_eq(chmod(d, 0770), 0);
	expect_refused(d, "group-writable");
	ck_assert_int_eq(chmod(d, 0702), 0);
	expect_refused(d, "other-writable");
	/* Sticky does not excuse the root itself. */
	ck_assert_int_eq(chmod(d, 01777), 0);
	expect_refused(d, "world-writable sticky root");
	ck_assert_int_eq(chmod(d, 0750), 0);
	char *cause = NULL;
	int fd = safefs_open_root(d, &cause);
	ck_assert_msg(fd >= 0, "0750 refused: %s", cause);
	close(fd);
}
END_TEST

START_TEST(test_ancestor_writable)
{
	unit_require_root();
	const char *d = good_root();
	char anc[512], root[512];

	join(anc, sizeof(anc), d, "anc");
	join(root, sizeof(root), anc, "root");
	ck_assert_int_eq(mkdir(anc, 0755), 0);
	ck_assert_int_eq(mkdir(root, 0700), 0);

	/* Anyone could rename root away and put their own in its place. */
	ck_assert_int_eq(chmod(anc, 0777), 0);
	expect_refused(root, "ancestor 0777 not sticky");
	ck_assert_int_eq(chmod(anc, 0775), 0);
	expect_refused(root, "ancestor group-writable not sticky");
	/* Sticky, like /tmp, is fine: only an entry's owner may rename it. */
	ck_assert_int_eq(chmod(anc, 01777), 0);
	char *cause = NULL;
	int fd = safefs_open_root(root, &cause);
	ck_assert_msg(fd >= 0, "sticky ancestor refused: %s", cause);
	close(fd);
}
END_TEST

START_TEST(test_not_root_owned)
{
	unit_require_root();
	const char *d = good_root();
	char anc[512], root[512];

	join(anc, sizeof(anc), d, "anc");
	join(root, sizeof(root), anc, "root");
	ck_assert_int_eq(mkdir(anc, 0755), 0);
	ck_assert_int_eq(mkdir(root, 0700), 0);

	ck_assert_int_eq(chown(root, 65534, 65534), 0);
	expect_refused(root, "root owned by 65534");
	ck_assert_int_eq(chown(root, 0, 65534), 0);
	char *cause = NULL;
	int fd = safefs_open_root(root, &cause);
	ck_assert_msg(fd >= 0, "root-owned, gid 65534, 0700 refused: %s", cause);
	close(fd);

	/* An ancestor owned by someone else, even 0755, can be changed by them. */
	ck_assert_int_eq(chown(anc, 65534, 0), 0);
	expect_refused(root, "ancestor owned by 65534");
}
END_TEST

/* Open d as a plain directory fd for the openat tests. */
static int
open_dir(const char *d)
{
	int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return fd;
}

START_TEST(test_openat_beneath)
{
	const char *d = unit_tmpdir("/tmp");
	const char *outside = unit_tmpdir("/tmp");
	char p[512];
	int dfd = open_dir(d), fd;

	ck_assert_int_eq(mkdirat(dfd, "sub", 0700), 0);
	unit_write_file(dfd, "sub/file", "data", 4);
	join(p, sizeof(p), outside, "secret");
	unit_write_file(AT_FDCWD, p, "secret", 6);

	fd = safefs_openat(dfd, "sub/file", O_RDONLY, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
	close(fd);

	/* Symlinks: as the final component, as a middle one, relative or absolute. */
	ck_assert_int_eq(symlinkat(p, dfd, "abs"), 0);
	ck_assert_int_eq(symlinkat("sub", dfd, "rel"), 0);
	ck_assert_int_eq(symlinkat("file", dfd, "sub/flink"), 0);
	errno = 0;
	ck_assert_int_eq(safefs_openat(dfd, "abs", O_RDONLY, 0), -1);
	ck_assert_int_eq(errno, ELOOP);
	ck_assert_int_eq(safefs_openat(dfd, "rel/file", O_RDONLY, 0), -1);
	ck_assert_int_eq(safefs_openat(dfd, "sub/flink", O_RDONLY, 0), -1);
	/* Writing through a planted symlink neither follows nor truncates. */
	ck_assert_int_eq(safefs_openat(dfd, "abs", O_WRONLY | O_CREAT | O_TRUNC, 0600), -1);
	size_t len;
	char *s = unit_read_file(AT_FDCWD, p, &len);
	ck_assert_uint_eq(len, 6);
	free(s);

	/* ".." escapes and absolute paths. */
	char esc[512];
	snprintf(esc, sizeof(esc), "../%s/secret", strrchr(outside, '/') + 1);
	ck_assert_int_eq(safefs_openat(dfd, esc, O_RDONLY, 0), -1);
	ck_assert_int_eq(errno, EXDEV);
	ck_assert_int_eq(safefs_openat(dfd, "sub/../../x", O_RDONLY, 0), -1);
	ck_assert_int_eq(safefs_openat(dfd, p, O_RDONLY, 0), -1);
	ck_assert_int_eq(safefs_openat(dfd, "/etc/passwd", O_RDONLY, 0), -1);
	/* ".." that stays beneath is resolved normally. */
	fd = safefs_openat(dfd, "sub/../sub/file", O_RDONLY, 0);
	ck_assert_int_ge(fd, 0);
	close(fd);
	/* Magic links from /proc do not work either. */
	int pfd = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(pfd, 0);
	ck_assert_int_eq(safefs_openat(pfd, "exe", O_RDONLY, 0), -1);
	close(pfd);

	/* O_CREAT uses the mode (under the umask). */
	mode_t old = umask(022);
	fd = safefs_openat(dfd, "new", O_WRONLY | O_CREAT | O_EXCL, 0640);
	umask(old);
	ck_assert_int_ge(fd, 0);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0640);
	close(fd);
	close(dfd);
}
END_TEST

START_TEST(test_opendir)
{
	const char *d = unit_tmpdir("/tmp");
	int dfd = open_dir(d), fd;

	ck_assert_int_eq(mkdirat(dfd, "dir", 0700), 0);
	unit_write_file(dfd, "file", "x", 1);
	ck_assert_int_eq(symlinkat("dir", dfd, "dlink"), 0);
	fd = safefs_opendir(dfd, "dir");
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(safefs_opendir(dfd, "file"), -1);
	ck_assert_int_eq(errno, ENOTDIR);
	ck_assert_int_eq(safefs_opendir(dfd, "dlink"), -1);
	ck_assert_int_eq(safefs_opendir(dfd, ".."), -1);
	/* Like open(2), a mode without O_CREAT is ignored, not an error. */
	fd = safefs_openat(dfd, "dir", O_RDONLY | O_DIRECTORY, 0700);
	ck_assert_msg(fd >= 0, "O_DIRECTORY with a mode: %s", strerror(errno));
	close(fd);
	fd = safefs_openat(dfd, "file", O_RDONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	/* O_TMPFILE does take the mode. */
	fd = safefs_openat(dfd, "dir", O_RDWR | O_TMPFILE, 0600);
	if (fd >= 0) {
		struct stat st;
		ck_assert_int_eq(fstat(fd, &st), 0);
		ck_assert_int_eq(st.st_mode & 0777, 0600);
		close(fd);
	} else {
		ck_assert_int_eq(errno, EOPNOTSUPP); /* filesystem without O_TMPFILE */
	}
	close(dfd);
}
END_TEST

/*
 * Removing an operation's directory removes what is in it and nothing
 * else: a symlink inside is removed, not followed; a symlinked directory
 * name, "..", or a directory with a subdirectory is refused.
 */
START_TEST(test_remove_dir)
{
	const char *d = unit_tmpdir("/tmp");
	const char *outside = unit_tmpdir("/tmp");
	int dfd = open_dir(d), ofd = open_dir(outside), sub;
	struct stat st;

	unit_write_file(ofd, "keep", "k", 1);
	ck_assert_int_eq(mkdirat(dfd, "op", 0700), 0);
	sub = safefs_opendir(dfd, "op");
	ck_assert_int_ge(sub, 0);
	unit_write_file(sub, "record.json", "{}", 2);
	unit_write_file(sub, "record.json.lock", "", 0);
	ck_assert_int_eq(symlinkat(outside, sub, "out"), 0);
	close(sub);
	ck_assert_int_eq(safefs_remove_dir(dfd, "op"), 0);
	ck_assert_int_eq(fstatat(dfd, "op", &st, AT_SYMLINK_NOFOLLOW), -1);
	ck_assert_int_eq(fstatat(ofd, "keep", &st, 0), 0);
	/* A symlink under the name is not a directory of ours. */
	ck_assert_int_eq(symlinkat(outside, dfd, "link"), 0);
	ck_assert_int_eq(safefs_remove_dir(dfd, "link"), -1);
	ck_assert_int_eq(fstatat(ofd, "keep", &st, 0), 0);
	ck_assert_int_eq(safefs_remove_dir(dfd, ".."), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(safefs_remove_dir(dfd, "a/b"), -1);
	ck_assert_int_eq(errno, EINVAL);
	/* Not flat: nothing below a subdirectory is touched, and it fails. */
	ck_assert_int_eq(mkdirat(dfd, "deep", 0700), 0);
	sub = safefs_opendir(dfd, "deep");
	ck_assert_int_eq(mkdirat(sub, "inner", 0700), 0);
	close(sub);
	ck_assert_int_eq(safefs_remove_dir(dfd, "deep"), -1);
	ck_assert_int_eq(fstatat(dfd, "deep/inner", &st, AT_SYMLINK_NOFOLLOW), 0);
	close(dfd);
	close(ofd);
}
END_TEST

START_TEST(test_mkdirs)
{
	const char *d = unit_tmpdir("/tmp");
	const char *outside = unit_tmpdir("/tmp");
	int dfd = open_dir(d);
	struct stat st;
	char p[512];

	mode_t old = umask(022);
	ck_assert_int_eq(safefs_mkdirs(dfd, "a/b/c", 0750), 0);
	umask(old);
	ck_assert_int_eq(fstatat(dfd, "a/b/c", &st, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0750);
	ck_assert_int_eq(fstatat(dfd, "a", &st, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0750);
	/* Idempotent, and extends an existing chain. */
	ck_assert_int_eq(safefs_mkdirs(dfd, "a/b/c", 0750), 0);
	ck_assert_int_eq(safefs_mkdirs(dfd, "a/b/c/d/e", 0700), 0);
	ck_assert_int_eq(fstatat(dfd, "a/b/c/d/e", &st, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(safefs_mkdirs(dfd, "single", 0700), 0);
	ck_assert_int_eq(fstatat(dfd, "single", &st, AT_SYMLINK_NOFOLLOW), 0);

	/* A symlinked component is not followed: nothing appears outside. */
	ck_assert_int_eq(symlinkat(outside, dfd, "ln"), 0);
	ck_assert_int_eq(safefs_mkdirs(dfd, "ln/x/y", 0700), -1);
	join(p, sizeof(p), outside, "x");
	ck_assert_int_eq(stat(p, &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(symlinkat(outside, dfd, "a/b/ln2"), 0);
	ck_assert_int_eq(safefs_mkdirs(dfd, "a/b/ln2/z", 0700), -1);
	join(p, sizeof(p), outside, "z");
	ck_assert_int_eq(stat(p, &st), -1);

	/* Escapes and absolute paths are refused. */
	ck_assert_int_eq(safefs_mkdirs(dfd, "/tmp/gensee-escape", 0700), -1);
	ck_assert_int_eq(errno, EINVAL);
	char esc[512];
	snprintf(esc, sizeof(esc), "../%s/esc", strrchr(outside, '/') + 1);
	ck_assert_int_eq(safefs_mkdirs(dfd, esc, 0700), -1);
	join(p, sizeof(p), outside, "esc");
	ck_assert_int_eq(stat(p, &st), -1);
	/* A file in the way. */
	unit_write_file(dfd, "f", "x", 1);
	ck_assert_int_eq(safefs_mkdirs(dfd, "f/sub", 0700), -1);
	close(dfd);
}
END_TEST

static Suite *
safefs_suite(void)
{
	Suite *s = suite_create("safefs");
	TCase *tc = tcase_create("root");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_root_good);
	tcase_add_test(tc, test_root_bad_paths);
	tcase_add_test(tc, test_root_symlink);
	tcase_add_test(tc, test_root_writable);
	tcase_add_test(tc, test_ancestor_writable);
	tcase_add_test(tc, test_not_root_owned);
	suite_add_tcase(s, tc);

	tc = tcase_create("beneath");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_openat_beneath);
	tcase_add_test(tc, test_opendir);
	tcase_add_test(tc, test_mkdirs);
	tcase_add_test(tc, test_remove_dir);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(safefs_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
