/*
 * test_peer.c: SO_PEERCRED identity of the other end of a socket (lib/peer.c).
 */
#include <sys/socket.h>
#include <sys/un.h>

#include "cgroup.h"
#include "peer.h"
#include "proc.h"
#include "unit.h"

START_TEST(test_identify_socketpair)
{
	int sv[2];
	struct peer p;
	struct proc_stat self;
	char *cause = NULL;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(proc_read_stat(getpid(), &self), 0);
	ck_assert_int_eq(peer_identify(sv[0], &p, &cause), 0);
	ck_assert_ptr_null(cause);
	ck_assert_int_eq(p.pr_pid, getpid());
	ck_assert_int_eq(p.pr_uid, getuid());
	ck_assert_int_eq(p.pr_gid, getgid());
	ck_assert_uint_eq(p.pr_start_ticks, self.ps_start_ticks);
	ck_assert_int_eq(peer_alive(&p), 0);
	/* Its cgroup is read at accept, the same as /proc/self/cgroup says. */
	char cg[PEER_CGROUP_MAX];
	ck_assert_int_eq(cgroup_of_pid(getpid(), cg, sizeof(cg)), 0);
	ck_assert_str_eq(p.pr_cgroup, cg);
	ck_assert_int_eq(p.pr_in_op, 0);

	/* The same pid with another start time is somebody else. */
	struct peer q = p;
	q.pr_start_ticks++;
	ck_assert_int_ne(peer_alive(&q), 0);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_identify_not_socket)
{
	int pfd[2];
	struct peer p;
	char *cause = NULL;

	ck_assert_int_eq(pipe(pfd), 0);
	ck_assert_int_eq(peer_identify(pfd[0], &p, &cause), -1);
	ck_assert_ptr_nonnull(cause);
	ck_assert_int_eq(p.pr_pid, 0);
	free(cause);
	close(pfd[0]);
	close(pfd[1]);
}
END_TEST

/*
 * A child connects to our listening socket, waits for a go byte on a pipe,
 * then exits. While it lives, the accepted socket names it; after it has
 * exited (and been reaped) peer_alive must say so.
 */
START_TEST(test_alive_after_exit)
{
	const char *dir = unit_tmpdir("/tmp");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int ls, go[2], status;
	struct peer p;
	struct proc_stat cst;
	char *cause = NULL;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/s", dir);
	ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(ls, 0);
	ck_assert_int_eq(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(ls, 1), 0);
	ck_assert_int_eq(pipe(go), 0);

	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char c;
		alarm(30);
		close(go[1]);
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0)
			_exit(2);
		if (read(go[0], &c, 1) != 1)
			_exit(3);
		_exit(0);
	}
	close(go[0]);
	int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(c, 0);
	ck_assert_int_eq(peer_identify(c, &p, &cause), 0);
	ck_assert_int_eq(p.pr_pid, pid);
	ck_assert_int_eq(p.pr_uid, getuid());
	ck_assert_int_eq(proc_read_stat(pid, &cst), 0);
	ck_assert_uint_eq(p.pr_start_ticks, cst.ps_start_ticks);
	ck_assert_int_eq(peer_alive(&p), 0);

	ck_assert_int_eq(write(go[1], "x", 1), 1);
	ck_assert_int_eq(unit_wait_pid(pid, 10000, &status), 0);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_ne(peer_alive(&p), 0);

	/* SO_PEERCRED still reports the dead pid: only the start time check saves us. */
	struct peer again;
	ck_assert_int_eq(peer_identify(c, &again, &cause), -1);
	ck_assert_ptr_nonnull(cause);
	free(cause);
	close(c);
	close(ls);
	close(go[1]);
}
END_TEST

static Suite *
peer_suite(void)
{
	Suite *s = suite_create("peer");
	TCase *tc = tcase_create("peer");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_identify_socketpair);
	tcase_add_test(tc, test_identify_not_socket);
	tcase_add_test(tc, test_alive_after_exit);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(peer_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
