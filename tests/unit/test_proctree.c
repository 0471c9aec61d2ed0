/*
 * test_proctree.c: tree attribution on synthetic snapshots, and a live
 * tracker run against a forked child and grandchild.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "proc.h"
#include "proctree.h"
#include "util.h"

#define ROOT_PID 200
#define ROOT_START 5000

/* Wait loops give up after this many rounds or this long, whichever is first. */
#define LIVE_ROUNDS 500
#define LIVE_MS 10000
#define LIVE_EVENTS 512

/* A snapshot node with nothing known about it yet. */
static struct proctree_node
node(pid_t pid, pid_t ppid, uint64_t start)
{
	struct proctree_node n = {
		.pn_pid = pid,
		.pn_ppid = ppid,
		.pn_start_ticks = start,
		.pn_known_depth = PROCTREE_OUTSIDE,
		.pn_depth = 12345,
	};

	return n;
}

/* The depth attribution gave pid. */
static int
depth_of(const struct proctree_node *nodes, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (nodes[i].pn_pid == pid)
			return nodes[i].pn_depth;
	ck_abort_msg("pid %d not in snapshot", (int)pid);
	return -100;
}

START_TEST(test_attribute_deep_chain)
{
	struct proctree_node nodes[16];
	size_t n = 0;

	/* Given leaf first, so chains are resolved out of order. */
	for (pid_t p = 210; p > ROOT_PID; p--)
		nodes[n++] = node(p, p - 1, ROOT_START + (uint64_t)p);
	nodes[n++] = node(ROOT_PID, 100, ROOT_START);
	nodes[n++] = node(100, 1, 10);
	nodes[n++] = node(1, 0, 1);
	ck_assert_int_eq(proctree_attribute(nodes, n, ROOT_PID, ROOT_START), 0);
	ck_assert_int_eq(depth_of(nodes, n, ROOT_PID), 0);
	for (pid_t p = 201; p <= 210; p++)
		ck_assert_int_eq(depth_of(nodes, n, p), p - ROOT_PID);
	/* The root's own ancestors are not part of its tree. */
	ck_assert_int_eq(depth_of(nodes, n, 100), PROCTREE_OUTSIDE);
	ck_assert_int_eq(depth_of(nodes, n, 1), PROCTREE_OUTSIDE);
}
END_TEST

START_TEST(test_attribute_siblings_outside)
{
	struct proctree_node nodes[] = {
		node(1, 0, 1),
		node(100, 1, 10),
		node(ROOT_PID, 100, ROOT_START),
		node(300, 100, ROOT_START + 1),	/* sibling of the root */
		node(301, 300, ROOT_START + 2),	/* the sibling's child */
		node(201, ROOT_PID, ROOT_START + 3),
		node(202, ROOT_PID, ROOT_START + 4),
		node(203, 202, ROOT_START + 5),
		node(2, 0, 1),			/* kthreadd */
		node(50, 2, 2),			/* a kernel thread */
		node(400, 999, ROOT_START + 6),	/* parent not in the snapshot */
	};
	size_t n = nitems(nodes);

	ck_assert_int_eq(proctree_attribute(nodes, n, ROOT_PID, ROOT_START), 0);
	ck_assert_int_eq(depth_of(nodes, n, 201), 1);
	ck_assert_int_eq(depth_of(nodes, n, 202), 1);
	ck_assert_int_eq(depth_of(nodes, n, 203), 2);
	ck_assert_int_eq(depth_of(nodes, n, 300), PROCTREE_OUTSIDE);
	ck_assert_int_eq(depth_of(nodes, n, 301), PROCTREE_OUTSIDE);
	ck_assert_int_eq(depth_of(nodes, n, 2), PROCTREE_OUTSIDE);
	ck_assert_int_eq(depth_of(nodes, n, 50), PROCTREE_OUTSIDE);
	ck_assert_int_eq(depth_of(nodes, n, 400), PROCTREE_OUTSIDE);
}
END_TEST

START_TEST(test_attribute_pid_reuse)
{
	struct proctree_node nodes[] = {
		node(1, 0, 1),
		node(ROOT_PID, 1, ROOT_START + 900),	/* the root's pid, reused */
		node(201, ROOT_PID, ROOT_START + 901),
	};
	struct proctree_node parent[] = {
		node(1, 0, 1),
		node(ROOT_PID, 1, ROOT_START),
		node(201, ROOT_PID, ROOT_START + 10),
		/*
		 * 202 names 201 as its parent, but 201 started after 202: the
		 * snapshot saw 202's stat before its parent exited, and pid
		 * 201 is a new process by now.
		 */
		node(202, 201, ROOT_START + 5),
	};

	ck_assert_int_eq(proctree_attribute(nodes, nitems(nodes), ROOT_PID, ROOT_START), 0);
	ck_assert_int_eq(depth_of(nodes, nitems(nodes), ROOT_PID), PROCTREE_OUTSIDE);
	ck_assert_int_eq(depth_of(nodes, nitems(nodes), 201), PROCTREE_OUTSIDE);

	ck_assert_int_eq(proctree_attribute(parent, nitems(parent), ROOT_PID, ROOT_START), 0);
	ck_assert_int_eq(depth_of(parent, nitems(parent), 201), 1);
	ck_assert_int_eq(depth_of(parent, nitems(parent), 202), PROCTREE_OUTSIDE);
}
END_TEST

START_TEST(test_attribute_orphan_stays)
{
	struct proctree_node nodes[] = {
		node(1, 0, 1),
		node(ROOT_PID, 1, ROOT_START),
		/* Known at depth 2; its parent exited and it was reparented to 1. */
		node(250, 1, ROOT_START + 20),
		node(251, 250, ROOT_START + 30),	/* forked after the reparenting */
		/* Never known, also reparented: nothing links it to the root. */
		node(260, 1, ROOT_START + 21),
		/* Known, reparented to a subreaper outside the tree. */
		node(80, 1, 100),
		node(270, 80, ROOT_START + 22),
	};
	size_t n = nitems(nodes);

	nodes[2].pn_known_depth = 2;
	nodes[6].pn_known_depth = 3;
	ck_assert_int_eq(proctree_attribute(nodes, n, ROOT_PID, ROOT_START), 0);
	ck_assert_int_eq(depth_of(nodes, n, 250), 2);
	ck_assert_int_eq(depth_of(nodes, n, 251), 3);
	ck_assert_int_eq(depth_of(nodes, n, 260), PROCTREE_OUTSIDE);
	ck_assert_int_eq(depth_of(nodes, n, 270), 3);
	ck_assert_int_eq(depth_of(nodes, n, 80), PROCTREE_OUTSIDE);
}
END_TEST

START_TEST(test_attribute_root_gone_keeps_known)
{
	struct proctree_node nodes[] = {
		node(1, 0, 1),
		node(201, 1, ROOT_START + 1),
		node(202, 201, ROOT_START + 2),
	};

	/* The root exited; what was attributed under it still is. */
	nodes[1].pn_known_depth = 1;
	ck_assert_int_eq(proctree_attribute(nodes, nitems(nodes), ROOT_PID, ROOT_START), 0);
	ck_assert_int_eq(depth_of(nodes, nitems(nodes), 201), 1);
	ck_assert_int_eq(depth_of(nodes, nitems(nodes), 202), 2);
}
END_TEST

START_TEST(test_attribute_inconsistent)
{
	struct proctree_node loop[] = {
		node(ROOT_PID, 1, ROOT_START),
		node(500, 501, ROOT_START + 1),
		node(501, 500, ROOT_START + 1),
		node(502, 502, ROOT_START + 1),
		node(503, 500, ROOT_START + 2),
	};
	struct proctree_node dup[] = {
		node(ROOT_PID, 1, ROOT_START),
		node(201, ROOT_PID, ROOT_START + 1),
		node(201, ROOT_PID, ROOT_START + 2),
	};

	ck_assert_int_eq(proctree_attribute(loop, nitems(loop), ROOT_PID, ROOT_START), 0);
	ck_assert_int_eq(depth_of(loop, nitems(loop), ROOT_PID), 0);
	ck_assert_int_eq(depth_of(loop, nitems(loop), 500), PROCTREE_OUTSIDE);
	ck_assert_int_eq(depth_of(loop, nitems(loop), 501), PROCTREE_OUTSIDE);
	ck_assert_int_eq(depth_of(loop, nitems(loop), 502), PROCTREE_OUTSIDE);
	ck_assert_int_eq(depth_of(loop, nitems(loop), 503), PROCTREE_OUTSIDE);

	errno = 0;
	ck_assert_int_eq(proctree_attribute(dup, nitems(dup), ROOT_PID, ROOT_START), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(proctree_attribute(NULL, 0, ROOT_PID, ROOT_START), 0);
}
END_TEST

/* What the live test's callback collected. */
struct live_log {
	struct proctree_event *ll_ev;
	size_t ll_n;
	size_t ll_dropped;
};

/* proctree_scan callback: keep a copy of each event. */
static void
live_collect(const struct proctree_event *ev, void *arg)
{
	struct live_log *ll = arg;

	if (ll->ll_n == LIVE_EVENTS) {
		ll->ll_dropped++;
		return;
	}
	ll->ll_ev[ll->ll_n++] = *ev;
}

/* The last event of this type for pid, or NULL. */
static const struct proctree_event *
live_find(const struct live_log *ll, enum proctree_event_type type, pid_t pid)
{
	for (size_t i = ll->ll_n; i > 0; i--)
		if (ll->ll_ev[i - 1].pe_type == type && ll->ll_ev[i - 1].pe_pid == pid)
			return &ll->ll_ev[i - 1];
	return NULL;
}

/* An exec event for pid whose executable is sleep(1). */
static const struct proctree_event *
live_find_sleep(const struct live_log *ll, pid_t pid)
{
	const struct proctree_event *ev = live_find(ll, PROCTREE_EXEC, pid);

	if (ev == NULL)
		return NULL;
	if (strcmp(ev->pe_executable, "/bin/sleep") != 0 &&
	    strcmp(ev->pe_executable, "/usr/bin/sleep") != 0)
		return NULL;
	return ev;
}

/* Sleep 10 ms. */
static void
live_nap(void)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	while (nanosleep(&ts, &ts) != 0)
		ck_assert_int_eq(errno, EINTR);
}

/* Scan once, failing the test on error. */
static void
live_scan(struct proctree *pt, struct live_log *ll)
{
	char *cause = NULL;

	if (proctree_scan(pt, live_collect, ll, &cause) != 0)
		ck_abort_msg("proctree_scan: %s", cause);
}

/*
 * The child: fork a grandchild that waits for a byte on go and then execs
 * sleep, tell the test its pid on report, then wait to be killed.
 */
static void __attribute__((noreturn))
live_child(int go, int report)
{
	pid_t gc, me = getpid();
	char b;

	/* If the test dies half way, do not outlive it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1)
		_exit(1);
	gc = fork();
	if (gc < 0)
		_exit(1);
	if (gc == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != me)
			_exit(1);
		if (read(go, &b, 1) != 1)
			_exit(1);
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	if (write(report, &gc, sizeof(gc)) != (ssize_t)sizeof(gc))
		_exit(1);
	for (;;)
		pause();
}

START_TEST(test_scan_live)
{
	struct live_log ll = { 0 };
	struct proctree pt;
	const struct proctree_event *ev, *cev, *gev;
	char *cause = NULL, self[PATH_MAX];
	int go[2], report[2], status, round;
	pid_t me = getpid(), child, gc;
	uint64_t gc_start;
	int64_t t0;

	ll.ll_ev = calloc(LIVE_EVENTS, sizeof(*ll.ll_ev));
	ck_assert_ptr_nonnull(ll.ll_ev);
	ck_assert_int_eq(proc_read_exe(me, self, sizeof(self)), 0);
	if (proctree_init(&pt, me, &cause) != 0)
		ck_abort_msg("proctree_init: %s", cause);

	/* The first scan reports the running root as an initial exec. */
	live_scan(&pt, &ll);
	ev = live_find(&ll, PROCTREE_EXEC, me);
	ck_assert_ptr_nonnull(ev);
	ck_assert_int_eq(ev->pe_initial, 1);
	ck_assert_int_eq(ev->pe_depth, 0);
	ck_assert_str_eq(ev->pe_executable, self);
	ck_assert_uint_eq(strlen(ev->pe_argv_digest), PROC_DIGEST_HEX - 1);

	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(report), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		close(go[1]);
		close(report[0]);
		live_child(go[0], report[1]);
	}
	close(go[0]);
	close(report[1]);
	ck_assert_int_eq(read(report[0], &gc, sizeof(gc)), (ssize_t)sizeof(gc));
	close(report[0]);

	/* Child and grandchild, both still copies of this binary. */
	t0 = util_monotonic_ms();
	for (round = 0; round < LIVE_ROUNDS && util_monotonic_ms() - t0 < LIVE_MS; round++) {
		live_scan(&pt, &ll);
		if (live_find(&ll, PROCTREE_EXEC, child) != NULL &&
		    live_find(&ll, PROCTREE_EXEC, gc) != NULL)
			break;
		live_nap();
	}
	cev = live_find(&ll, PROCTREE_EXEC, child);
	gev = live_find(&ll, PROCTREE_EXEC, gc);
	ck_assert_ptr_nonnull(cev);
	ck_assert_ptr_nonnull(gev);
	ck_assert_int_eq(cev->pe_initial, 0);
	ck_assert_int_eq(cev->pe_depth, 1);
	ck_assert_int_eq(cev->pe_ppid, me);
	/* Both are forks of this binary (as the kernel names it, not valgrind). */
	ck_assert_str_ne(cev->pe_executable, "");
	ck_assert_str_eq(gev->pe_executable, cev->pe_executable);
	ck_assert_int_eq(gev->pe_depth, 2);
	ck_assert_int_eq(gev->pe_ppid, child);
	gc_start = gev->pe_start_ticks;

	/* Release the grandchild: its execve is an exec event in place. */
	ck_assert_int_eq(write(go[1], "x", 1), 1);
	close(go[1]);
	t0 = util_monotonic_ms();
	for (round = 0; round < LIVE_ROUNDS && util_monotonic_ms() - t0 < LIVE_MS; round++) {
		live_scan(&pt, &ll);
		if (live_find_sleep(&ll, gc) != NULL)
			break;
		live_nap();
	}
	gev = live_find_sleep(&ll, gc);
	ck_assert_ptr_nonnull(gev);
	ck_assert_int_eq(gev->pe_type, PROCTREE_EXEC);
	ck_assert_int_eq(gev->pe_start_ticks, gc_start);
	ck_assert_int_eq(gev->pe_depth, 2);
	ck_assert_str_eq(gev->pe_argv0, "sleep");
	ck_assert_uint_eq(strlen(gev->pe_argv_digest), PROC_DIGEST_HEX - 1);

	/* Kill both; each is reported as exited (a zombie counts as exited). */
	ck_assert_int_eq(kill(gc, SIGKILL), 0);
	ck_assert_int_eq(kill(child, SIGKILL), 0);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	t0 = util_monotonic_ms();
	for (round = 0; round < LIVE_ROUNDS && util_monotonic_ms() - t0 < LIVE_MS; round++) {
		live_scan(&pt, &ll);
		if (live_find(&ll, PROCTREE_EXIT, child) != NULL &&
		    live_find(&ll, PROCTREE_EXIT, gc) != NULL)
			break;
		live_nap();
	}
	ev = live_find(&ll, PROCTREE_EXIT, child);
	ck_assert_ptr_nonnull(ev);
	ck_assert_int_eq(ev->pe_depth, 1);
	ev = live_find(&ll, PROCTREE_EXIT, gc);
	ck_assert_ptr_nonnull(ev);
	ck_assert_str_eq(ev->pe_argv0, "sleep");

	/* Only the tree was reported, and the root is still alive. */
	for (size_t i = 0; i < ll.ll_n; i++) {
		pid_t p = ll.ll_ev[i].pe_pid;

		ck_assert_msg(p == me || p == child || p == gc, "event for pid %d", (int)p);
	}
	ck_assert_int_eq(live_find(&ll, PROCTREE_EXIT, me) == NULL, 1);
	ck_assert_int_eq(pt.pt_root_exited, 0);
	ck_assert_int_eq(pt.pt_nprocs, 1);
	ck_assert_uint_eq(ll.ll_dropped, 0);
	proctree_free(&pt);
	free(ll.ll_ev);
}
END_TEST

START_TEST(test_init_errors)
{
	struct proctree pt;
	char *cause = NULL;
	pid_t z;
	int round, status;
	struct proc_stat ps;

	/* Above any pid_max the kernel allows. */
	ck_assert_int_eq(proctree_init(&pt, 0x7fffffff, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "no such process"));
	free(cause);
	cause = NULL;

	/* An exited, unreaped child is not a tree to watch. */
	z = fork();
	ck_assert_int_ge(z, 0);
	if (z == 0)
		_exit(0);
	for (round = 0; round < LIVE_ROUNDS; round++) {
		ck_assert_int_eq(proc_read_stat(z, &ps), 0);
		if (ps.ps_state == 'Z')
			break;
		live_nap();
	}
	ck_assert_int_eq(ps.ps_state, 'Z');
	ck_assert_int_eq(proctree_init(&pt, z, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "exited"));
	free(cause);
	ck_assert_int_eq(waitpid(z, &status, 0), z);
}
END_TEST

/* The root exits: its exit is reported and the tracker says so. */
START_TEST(test_scan_root_exit)
{
	struct live_log ll = { 0 };
	struct proctree pt;
	char *cause = NULL;
	int round, status;
	pid_t root;
	int64_t t0;

	ll.ll_ev = calloc(LIVE_EVENTS, sizeof(*ll.ll_ev));
	ck_assert_ptr_nonnull(ll.ll_ev);
	root = fork();
	ck_assert_int_ge(root, 0);
	if (root == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
			_exit(1);
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	if (proctree_init(&pt, root, &cause) != 0)
		ck_abort_msg("proctree_init: %s", cause);
	/* Until the exec of sleep is seen: the fork may still be half way through it. */
	t0 = util_monotonic_ms();
	for (round = 0; round < LIVE_ROUNDS && util_monotonic_ms() - t0 < LIVE_MS; round++) {
		live_scan(&pt, &ll);
		if (live_find_sleep(&ll, root) != NULL)
			break;
		live_nap();
	}
	ck_assert_ptr_nonnull(live_find_sleep(&ll, root));
	ck_assert_int_eq(live_find(&ll, PROCTREE_EXEC, root)->pe_depth, 0);
	ck_assert_int_eq(kill(root, SIGKILL), 0);
	ck_assert_int_eq(waitpid(root, &status, 0), root);
	t0 = util_monotonic_ms();
	for (round = 0; round < LIVE_ROUNDS && util_monotonic_ms() - t0 < LIVE_MS; round++) {
		live_scan(&pt, &ll);
		if (pt.pt_root_exited)
			break;
		live_nap();
	}
	ck_assert_int_eq(pt.pt_root_exited, 1);
	ck_assert_ptr_nonnull(live_find(&ll, PROCTREE_EXIT, root));
	ck_assert_int_eq(pt.pt_nprocs, 0);
	proctree_free(&pt);
	free(ll.ll_ev);
}
END_TEST

/* The suite: synthetic attribution, then live scans. */
static Suite *
proctree_suite(void)
{
	Suite *s = suite_create("proctree");
	TCase *tc = tcase_create("attribute");
	TCase *live = tcase_create("live");

	tcase_add_test(tc, test_attribute_deep_chain);
	tcase_add_test(tc, test_attribute_siblings_outside);
	tcase_add_test(tc, test_attribute_pid_reuse);
	tcase_add_test(tc, test_attribute_orphan_stays);
	tcase_add_test(tc, test_attribute_root_gone_keeps_known);
	tcase_add_test(tc, test_attribute_inconsistent);
	suite_add_tcase(s, tc);

	tcase_set_timeout(live, 60);
	tcase_add_test(live, test_scan_live);
	tcase_add_test(live, test_init_errors);
	tcase_add_test(live, test_scan_root_exit);
	suite_add_tcase(s, live);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(proctree_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
