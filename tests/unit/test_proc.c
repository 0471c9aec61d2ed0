/*
 * test_proc.c: process identity from /proc (lib/proc.c).
 *
 * (pid, start ticks) is what makes a process check safe against pid reuse,
 * so the stat parser must find field 22 even when the comm, which the
 * process chooses itself, is made to look like more fields.
 */
#include <sys/prctl.h>

#include <sodium.h>

#include "proc.h"
#include "unit.h"

/* fields 5..21 (17 values) between ppid and the start time */
#define MID "5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21"

START_TEST(test_parse_plain)
{
	struct proc_stat st;

	ck_assert_int_eq(proc_parse_stat("42 (bash) S 7 " MID " 987654 23 24 25\n", &st), 0);
	ck_assert_int_eq(st.ps_pid, 42);
	ck_assert_int_eq(st.ps_ppid, 7);
	ck_assert_int_eq(st.ps_state, 'S');
	ck_assert_uint_eq(st.ps_start_ticks, 987654);
	ck_assert_str_eq(st.ps_comm, "bash");
}
END_TEST

START_TEST(test_parse_hostile_comm)
{
	struct proc_stat st;

	/* comm "a) b) c": the last ')' ends it */
	ck_assert_int_eq(proc_parse_stat("123 (a) b) c) S 1 " MID " 424242 23 24\n", &st), 0);
	ck_assert_int_eq(st.ps_pid, 123);
	ck_assert_str_eq(st.ps_comm, "a) b) c");
	ck_assert_int_eq(st.ps_state, 'S');
	ck_assert_int_eq(st.ps_ppid, 1);
	ck_assert_uint_eq(st.ps_start_ticks, 424242);

	/* A comm that forges a whole tail of fields with a fake start time. */
	ck_assert_int_eq(proc_parse_stat("77 (x) R 1 " MID " 111 ) Z 9 " MID " 555 23\n", &st),
	    0);
	ck_assert_str_eq(st.ps_comm, "x) R 1 " MID " 111 ");
	ck_assert_int_eq(st.ps_state, 'Z');
	ck_assert_int_eq(st.ps_ppid, 9);
	ck_assert_uint_eq(st.ps_start_ticks, 555);

	/* Spaces, parentheses and an empty comm. */
	ck_assert_int_eq(proc_parse_stat("8 (my (odd) prog) D 3 " MID " 99\n", &st), 0);
	ck_assert_str_eq(st.ps_comm, "my (odd) prog");
	ck_assert_int_eq(st.ps_state, 'D');
	ck_assert_uint_eq(st.ps_start_ticks, 99);
	ck_assert_int_eq(proc_parse_stat("9 () S 3 " MID " 100", &st), 0);
	ck_assert_str_eq(st.ps_comm, "");
	ck_assert_uint_eq(st.ps_start_ticks, 100);
}
END_TEST

START_TEST(test_parse_long_comm)
{
	char line[512], comm[200];
	struct proc_stat st;

	memset(comm, 'c', sizeof(comm) - 1);
	comm[sizeof(comm) - 1] = '\0';
	snprintf(line, sizeof(line), "5 (%s) S 1 " MID " 31337\n", comm);
	ck_assert_int_eq(proc_parse_stat(line, &st), 0);
	ck_assert_uint_eq(strlen(st.ps_comm), sizeof(st.ps_comm) - 1);
	ck_assert_uint_eq(st.ps_start_ticks, 31337);
}
END_TEST

START_TEST(test_parse_reject)
{
	struct proc_stat st;
	const char *bad[] = {
		"",
		"123",
		"123 bash S 1 " MID " 5",		/* no parentheses */
		"123 (bash S 1 " MID " 5",		/* no ')' */
		"123 )bash( S 1 " MID " 5",		/* ')' before '(' */
		"(bash) S 1 " MID " 5",			/* no pid */
		"0 (bash) S 1 " MID " 5",		/* pid 0 */
		"-4 (bash) S 1 " MID " 5",		/* negative pid */
		"123 (bash) S 1 " MID,			/* 21 fields */
		"123 (bash) S 1 " MID "\n",		/* 21 fields and a newline */
		"123 (bash) S 1 " MID " x",		/* start not a number */
		"123 (bash) S x " MID " 5",		/* ppid not a number */
		"123 (bash) S 1 " MID " 99999999999999999999999", /* overflow */
		"123 (a) b) c) S 1 2 3",		/* the comm's fake fields do not count */
	};

	for (size_t i = 0; i < nitems(bad); i++)
		ck_assert_msg(proc_parse_stat(bad[i], &st) == -1, "accepted: '%s'", bad[i]);
}
END_TEST

START_TEST(test_read_self)
{
	struct proc_stat st, st2;
	char comm[64] = "";
	char *buf;

	ck_assert_int_eq(proc_read_stat(getpid(), &st), 0);
	ck_assert_int_eq(st.ps_pid, getpid());
	ck_assert_int_eq(st.ps_ppid, getppid());
	ck_assert_int_eq(st.ps_state, 'R');
	ck_assert_uint_gt(st.ps_start_ticks, 0);
	ck_assert_int_eq(util_read_path("/proc/self/comm", 64, &buf, NULL), 0);
	util_strlcpy(comm, buf, sizeof(comm));
	comm[strcspn(comm, "\n")] = '\0';
	free(buf);
	ck_assert_str_eq(st.ps_comm, comm);

	/* The start time is stable across reads... */
	ck_assert_int_eq(proc_read_stat(getpid(), &st2), 0);
	ck_assert_uint_eq(st.ps_start_ticks, st2.ps_start_ticks);
	ck_assert_int_eq(proc_identity_matches(getpid(), st.ps_start_ticks), 0);
	/* ... and any other start time does not name this process. */
	ck_assert_int_eq(proc_identity_matches(getpid(), st.ps_start_ticks + 1), -1);
	ck_assert_int_eq(errno, ESRCH);
	ck_assert_int_eq(proc_identity_matches(getpid(), st.ps_start_ticks - 1), -1);

	/* A comm with spaces and ')' set by the process itself. */
	ck_assert_int_eq(prctl(PR_SET_NAME, "a) b) c", 0, 0, 0), 0);
	ck_assert_int_eq(proc_read_stat(getpid(), &st2), 0);
	ck_assert_str_eq(st2.ps_comm, "a) b) c");
	ck_assert_int_eq(st2.ps_ppid, getppid());
	ck_assert_uint_eq(st2.ps_start_ticks, st.ps_start_ticks);
}
END_TEST

/* Fork a child that sleeps until killed (bounded: 30 s alarm). */
static pid_t
spawn_sleeper(void)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(30);
		for (;;)
			pause();
	}
	return pid;
}

START_TEST(test_children_start_times)
{
	struct proc_stat self, a, b;
	int status;

	ck_assert_int_eq(proc_read_stat(getpid(), &self), 0);
	pid_t pa = spawn_sleeper();
	/* Several clock ticks apart, so the start times must differ. */
	unit_sleep_ms(60 + 2000 / proc_clock_ticks());
	pid_t pb = spawn_sleeper();

	ck_assert_int_eq(proc_read_stat(pa, &a), 0);
	ck_assert_int_eq(proc_read_stat(pb, &b), 0);
	ck_assert_int_eq(a.ps_ppid, getpid());
	ck_assert_int_eq(b.ps_ppid, getpid());
	ck_assert_uint_ge(a.ps_start_ticks, self.ps_start_ticks);
	ck_assert_uint_gt(b.ps_start_ticks, a.ps_start_ticks);
	ck_assert_int_eq(proc_identity_matches(pa, a.ps_start_ticks), 0);
	ck_assert_int_eq(proc_identity_matches(pa, b.ps_start_ticks), -1);

	/* Stable across two reads. */
	struct proc_stat a2;
	ck_assert_int_eq(proc_read_stat(pa, &a2), 0);
	ck_assert_uint_eq(a2.ps_start_ticks, a.ps_start_ticks);

	/* A pidfd signals exactly that process. */
	int pfd = proc_pidfd_open(pa);
	ck_assert_int_ge(pfd, 0);
	ck_assert_int_eq(proc_pidfd_signal(pfd, SIGKILL), 0);
	ck_assert_int_eq(unit_wait_pid(pa, 5000, &status), 0);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* Once reaped, the identity no longer matches. */
	ck_assert_int_eq(proc_identity_matches(pa, a.ps_start_ticks), -1);
	ck_assert_int_eq(proc_read_stat(pa, &a2), -1);
	ck_assert_int_eq(errno, ESRCH);
	ck_assert_int_eq(proc_pidfd_signal(pfd, SIGKILL), -1);
	close(pfd);

	kill(pb, SIGKILL);
	ck_assert_int_eq(unit_wait_pid(pb, 5000, &status), 0);
}
END_TEST

START_TEST(test_read_uids_exe_argv)
{
	uid_t u[4];
	char exe[4096], want[4096], hex[PROC_DIGEST_HEX], hex2[PROC_DIGEST_HEX];
	char *buf;
	size_t len;
	unsigned char d[crypto_hash_sha256_BYTES];
	char whex[PROC_DIGEST_HEX];

	ck_assert_int_eq(proc_read_uids(getpid(), u), 0);
	ck_assert_int_eq(u[0], getuid());
	ck_assert_int_eq(u[1], geteuid());

	ck_assert_int_eq(proc_read_exe(getpid(), exe, sizeof(exe)), 0);
	ssize_t n = readlink("/proc/self/exe", want, sizeof(want) - 1);
	ck_assert_int_gt(n, 0);
	want[n] = '\0';
	ck_assert_str_eq(exe, want);

	ck_assert_int_eq(proc_argv_digest(getpid(), hex), 0);
	ck_assert_uint_eq(strlen(hex), 64);
	ck_assert_int_eq(util_read_path("/proc/self/cmdline", 1 << 20, &buf, &len), 0);
	ck_assert_int_eq(sodium_init() < 0, 0);
	crypto_hash_sha256(d, (unsigned char *)buf, len);
	free(buf);
	sodium_bin2hex(whex, sizeof(whex), d, sizeof(d));
	ck_assert_str_eq(hex, whex);
	ck_assert_int_eq(proc_argv_digest(getpid(), hex2), 0);
	ck_assert_str_eq(hex, hex2);

	/* A process that is gone reads as gone. */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	int status;
	ck_assert_int_eq(unit_wait_pid(pid, 5000, &status), 0);
	ck_assert_int_eq(proc_read_exe(pid, exe, sizeof(exe)), -1);
	ck_assert_str_eq(exe, "");
	ck_assert_int_eq(proc_argv_digest(pid, hex), -1);
	ck_assert_int_eq(proc_read_uids(pid, u), -1);
}
END_TEST

/* NoNewPrivs and Seccomp as the kernel shows them, before and after. */
START_TEST(test_read_confinement)
{
	int nnp, sc, st, rep[2];
	char r[2];

	ck_assert_int_eq(proc_read_confinement(getpid(), &nnp, &sc), 0);
	ck_assert_int_ge(nnp, 0);
	ck_assert_int_ge(sc, 0);
	ck_assert_int_eq(pipe2(rep, O_CLOEXEC), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int a, b;
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
		    proc_read_confinement(getpid(), &a, &b) != 0 || a != 1)
			_exit(1);
		if (write(rep[1], "k", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(rep[1]);
	ck_assert_int_eq(read(rep[0], r, 1), 1);
	close(rep[0]);
	ck_assert_int_eq(proc_read_confinement(pid, &nnp, &sc), 0);
	ck_assert_int_eq(nnp, 1);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(proc_read_confinement(pid, &nnp, &sc), -1);
}
END_TEST

START_TEST(test_list_pids)
{
	pid_t *v;
	size_t n;
	int self = 0, parent = 0;

	ck_assert_int_eq(proc_list_pids(&v, &n), 0);
	ck_assert_uint_gt(n, 0);
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_gt(v[i], 0);
		if (v[i] == getpid())
			self = 1;
		if (v[i] == getppid())
			parent = 1;
	}
	free(v);
	ck_assert(self);
	ck_assert(parent);
	ck_assert_int_ge(proc_clock_ticks(), 1);
}
END_TEST

/* A child and its grandchild are found; the parent and unrelated processes are not. */
START_TEST(test_descendants)
{
	int go[2];
	pid_t child, *v;
	size_t n;
	char c;

	ck_assert_int_eq(pipe(go), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		pid_t g = fork();
		if (g == 0) {
			close(go[1]);
			/* Waits for EOF; what it reads does not matter. */
			_exit(read(go[0], &c, 1) < 0 ? 1 : 0);
		}
		close(go[1]);
		if (read(go[0], &c, 1) < 0)
			_exit(1);
		waitpid(g, NULL, 0);
		_exit(0);
	}
	close(go[0]);
	for (int i = 0; i < 500; i++) {
		ck_assert_int_eq(proc_descendants(getpid(), &v, &n), 0);
		if (n >= 2)
			break;
		free(v);
		usleep(2000);
	}
	ck_assert_uint_eq(n, 2);
	ck_assert(v[0] == child || v[1] == child);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_ne(v[i], getppid());
	free(v);
	ck_assert_int_eq(proc_descendants(child, &v, &n), 0);
	ck_assert_uint_eq(n, 1);
	free(v);
	close(go[1]);
	waitpid(child, NULL, 0);
}
END_TEST

static Suite *
proc_suite(void)
{
	Suite *s = suite_create("proc");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_parse_plain);
	tcase_add_test(tc, test_parse_hostile_comm);
	tcase_add_test(tc, test_parse_long_comm);
	tcase_add_test(tc, test_parse_reject);
	suite_add_tcase(s, tc);

	tc = tcase_create("live");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_read_self);
	tcase_add_test(tc, test_children_start_times);
	tcase_add_test(tc, test_read_uids_exe_argv);
	tcase_add_test(tc, test_list_pids);
	tcase_add_test(tc, test_read_confinement);
	tcase_add_test(tc, test_descendants);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(proc_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
