/*
 * unit.h: helpers shared by the Check suites (header-only, static inline).
 *
 * Every suite runs each test in its own forked process (CK_FORK is forced,
 * whatever the environment says): tests rely on that for global state (the
 * log writer thread) and to keep one test's children and files away from
 * the next. A failed ck_assert ends the test process with _exit(1), so
 * atexit handlers only clean up after a passing test; what a failed or
 * timed-out test leaves behind is removed by the runner: temporary
 * directories carry the runner's pid in their name and unit_cleanup_leftovers()
 * removes them after the suite, and the runner is a child subreaper, so it
 * also reaps the orphans that Check's killpg leaves (pid 1 may not).
 */
#ifndef GENSEE_TESTS_UNIT_H
#define GENSEE_TESTS_UNIT_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "util.h"

#define UNIT_TMP_MAX 8

static pid_t unit_runner_pid __attribute__((unused));
static char unit_tmp_paths[UNIT_TMP_MAX][256] __attribute__((unused));
static int unit_tmp_count __attribute__((unused));
static int unit_tmp_registered __attribute__((unused));

/* Tests that need root fail loudly instead of passing silently. */
#define unit_require_root()                                                       \
	ck_assert_msg(geteuid() == 0,                                             \
	    "this test needs root (euid is %u); CI runs the unit suites as root", \
	    (unsigned)geteuid())

static inline int
unit_rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	/* Best effort: a failure leaves the entry, the walk goes on. */
	if (flag == FTW_DP)
		(void)rmdir(path);
	else
		(void)unlink(path);
	return 0;
}

/* rm -rf that never follows a symlink (FTW_PHYS). */
static inline void
unit_rm_rf(const char *path)
{
	nftw(path, unit_rm_cb, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static inline void
unit_tmp_atexit(void)
{
	for (int i = 0; i < unit_tmp_count; i++)
		unit_rm_rf(unit_tmp_paths[i]);
	unit_tmp_count = 0;
}

/*
 * mkdtemp BASE/gensee-unit-RUNNERPID-XXXXXX (mode 0700), removed when the
 * test process exits normally, else by the runner. Returns the path (static
 * storage) or aborts the test.
 */
static inline const char *
unit_tmpdir(const char *base)
{
	ck_assert_int_lt(unit_tmp_count, UNIT_TMP_MAX);
	char *p = unit_tmp_paths[unit_tmp_count];
	snprintf(p, sizeof(unit_tmp_paths[0]), "%s/gensee-unit-%d-XXXXXX", base,
	    (int)unit_runner_pid);
	ck_assert_msg(mkdtemp(p) != NULL, "mkdtemp %s: %s", p, strerror(errno));
	unit_tmp_count++;
	if (!unit_tmp_registered) {
		atexit(unit_tmp_atexit);
		unit_tmp_registered = 1;
	}
	return p;
}

/* A directory for heavy I/O: /dev/shm when it is there, else /tmp. */
static inline const char *
unit_fast_base(void)
{
	struct stat st;
	if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
		return "/dev/shm";
	return "/tmp";
}

/*
 * Remove whatever a failed or killed test of this runner left in /tmp and
 * /dev/shm, and reap orphaned test children.
 */
static inline void
unit_cleanup_leftovers(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	const char *bases[] = { "/tmp", "/dev/shm" };
	for (size_t b = 0; b < 2; b++) {
		char pat[128];
		glob_t g;
		snprintf(pat, sizeof(pat), "%s/gensee-unit-%d-*", bases[b], (int)unit_runner_pid);
		if (glob(pat, 0, NULL, &g) == 0) {
			for (size_t i = 0; i < g.gl_pathc; i++)
				unit_rm_rf(g.gl_pathv[i]);
			globfree(&g);
		}
	}
}

static inline void
unit_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * waitpid with a deadline. Returns 0 and fills *status, or -1 after
 * SIGKILLing and reaping the child when it did not exit in time.
 */
static inline int
unit_wait_pid(pid_t pid, int timeout_ms, int *status)
{
	int64_t deadline = util_monotonic_ms() + timeout_ms;
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
		if (util_monotonic_ms() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, status, 0);
			return -1;
		}
		unit_sleep_ms(2);
	}
}

/* dir/rel, in one of 8 rotating buffers (so a few may be used in one call). */
static inline const char *
unit_path(const char *dir, const char *rel)
{
	static char bufs[8][512];
	static int next;
	char *b = bufs[next++ % 8];

	snprintf(b, sizeof(bufs[0]), "%s/%s", dir, rel);
	return b;
}

/* Child side of unit_in_child: report the first failed check on fd rep and exit 1. */
#define CHILD_CHECK(cond, ...)                         \
	do {                                           \
		if (!(cond)) {                         \
			dprintf(rep, __VA_ARGS__);     \
			_exit(1);                      \
		}                                      \
	} while (0)

/*
 * Run fn(rep) in a forked child (at most 20 s) and return its wait status,
 * with what it reported on rep in msg. For what may only happen in a child:
 * loading a filter, restricting the process, entering namespaces.
 */
static inline int
unit_in_child(void (*fn)(int), char *msg, size_t len)
{
	int rep[2], status;
	ssize_t n;

	msg[0] = '\0';
	ck_assert_int_eq(pipe2(rep, O_CLOEXEC), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(rep[0]);
		alarm(20);
		fn(rep[1]);
		_exit(0);
	}
	close(rep[1]);
	ck_assert_int_eq(unit_wait_pid(pid, 30000, &status), 0);
	if ((n = read(rep[0], msg, len - 1)) > 0)
		msg[n] = '\0';
	close(rep[0]);
	return status;
}

/* Write a whole file (O_CREAT|O_TRUNC, mode 0600) at dirfd/name. */
static inline void
unit_write_file(int dirfd, const char *name, const void *buf, size_t len)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	ck_assert_msg(fd >= 0, "open %s: %s", name, strerror(errno));
	ck_assert_int_eq(util_write_all(fd, buf, len), 0);
	ck_assert_int_eq(close(fd), 0);
}

/* Read a whole file at dirfd/name (caller frees). */
static inline char *
unit_read_file(int dirfd, const char *name, size_t *len)
{
	char *buf = NULL;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ck_assert_msg(fd >= 0, "open %s: %s", name, strerror(errno));
	ck_assert_int_eq(util_read_fd(fd, 16u << 20, &buf, len), 0);
	close(fd);
	return buf;
}

/* Call first in main(): names this runner's temporary directories. */
static inline void
unit_init(void)
{
	unit_runner_pid = getpid();
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1);
}

#endif
