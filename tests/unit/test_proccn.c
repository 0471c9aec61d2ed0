/*
 * test_proccn.c: the proc connector reader (lib/proccn.c).
 *
 * The parser is fed crafted datagrams (and one the kernel sent), whole,
 * cut short, with lengths that lie, and at an odd address. The live tests
 * need root (subscribing needs CAP_NET_ADMIN in the initial namespaces):
 * they subscribe, start processes and wait, bounded, for the kernel to
 * report exactly those processes.
 */
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <poll.h>
#include <stddef.h>

#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>

#include "proccn.h"
#include "unit.h"

#define TEST_LIVE_MS 10000
#define TEST_BUF 512

/*
 * An exit event as Linux 6.18 sent it (sh -c '/bin/true; exit 3', pid
 * 2653, parent 2652): nlmsghdr (76, NLMSG_DONE), cn_msg {1,1} with the
 * kernel's per-CPU counter as seq and len 40, proc_event what 0x80000000.
 */
static const uint8_t test_kernel_exit[] = {
	0x4c, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0xc3, 0x29, 0x01, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
	0xc3, 0x29, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x9c, 0x22, 0xae, 0xc8,
	0xbc, 0x04, 0x00, 0x00, 0x5d, 0x0a, 0x00, 0x00, 0x5d, 0x0a, 0x00, 0x00,
	0x00, 0x03, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x5c, 0x0a, 0x00, 0x00,
	0x5c, 0x0a, 0x00, 0x00
};

/*
 * Append one NLMSG_DONE message at buf + off holding a cn_msg with the
 * given id and evlen bytes of ev; returns the offset after it (aligned).
 */
static size_t
test_put(uint8_t *buf, size_t off, uint32_t idx, const struct proc_event *ev, size_t evlen)
{
	struct nlmsghdr nlh;
	struct cn_msg cn;

	memset(&nlh, 0, sizeof(nlh));
	nlh.nlmsg_len = NLMSG_LENGTH(sizeof(cn) + evlen);
	nlh.nlmsg_type = NLMSG_DONE;
	memset(&cn, 0, sizeof(cn));
	cn.id.idx = idx;
	cn.id.val = CN_VAL_PROC;
	cn.len = (uint16_t)evlen;
	ck_assert_uint_le(off + NLMSG_ALIGN(nlh.nlmsg_len), TEST_BUF);
	memset(buf + off, 0, NLMSG_ALIGN(nlh.nlmsg_len));
	memcpy(buf + off, &nlh, sizeof(nlh));
	memcpy(buf + off + NLMSG_HDRLEN, &cn, sizeof(cn));
	memcpy(buf + off + NLMSG_HDRLEN + sizeof(cn), ev, evlen);
	return off + NLMSG_ALIGN(nlh.nlmsg_len);
}

/* A proc_event of the given type with a recognisable timestamp. */
static struct proc_event
test_ev(uint32_t what)
{
	struct proc_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.what = what;
	ev.cpu = 1;
	ev.timestamp_ns = 0x0102030405060708ull;
	return ev;
}

/* A fork of child 101/102 by parent 100/99. */
static size_t
test_put_fork(uint8_t *buf, size_t off)
{
	struct proc_event ev = test_ev(PROC_EVENT_FORK);

	ev.event_data.fork.parent_pid = 100;
	ev.event_data.fork.parent_tgid = 99;
	ev.event_data.fork.child_pid = 101;
	ev.event_data.fork.child_tgid = 102;
	return test_put(buf, off, CN_IDX_PROC, &ev, sizeof(ev));
}

/* An exit of 101/102 with status 3 << 8, parent 100/99. */
static size_t
test_put_exit(uint8_t *buf, size_t off)
{
	struct proc_event ev = test_ev(PROC_EVENT_EXIT);

	ev.event_data.exit.process_pid = 101;
	ev.event_data.exit.process_tgid = 102;
	ev.event_data.exit.exit_code = 3 << 8;
	ev.event_data.exit.exit_signal = SIGCHLD;
	ev.event_data.exit.parent_pid = 100;
	ev.event_data.exit.parent_tgid = 99;
	return test_put(buf, off, CN_IDX_PROC, &ev, sizeof(ev));
}

START_TEST(test_parse_fork)
{
	uint8_t buf[TEST_BUF];
	struct proccn_event v[4];
	size_t len = test_put_fork(buf, 0), n;

	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(v[0].pe_type, PROCCN_FORK);
	ck_assert_int_eq(v[0].pe_pid, 101);
	ck_assert_int_eq(v[0].pe_tgid, 102);
	ck_assert_int_eq(v[0].pe_parent_pid, 100);
	ck_assert_int_eq(v[0].pe_parent_tgid, 99);
	ck_assert_uint_eq(v[0].pe_timestamp_ns, 0x0102030405060708ull);
}
END_TEST

START_TEST(test_parse_exec)
{
	uint8_t buf[TEST_BUF];
	struct proc_event ev = test_ev(PROC_EVENT_EXEC);
	struct proccn_event v[4];
	size_t len, n;

	ev.event_data.exec.process_pid = 7;
	ev.event_data.exec.process_tgid = 8;
	len = test_put(buf, 0, CN_IDX_PROC, &ev, sizeof(ev));
	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(v[0].pe_type, PROCCN_EXEC);
	ck_assert_int_eq(v[0].pe_pid, 7);
	ck_assert_int_eq(v[0].pe_tgid, 8);
	ck_assert_int_eq(v[0].pe_parent_pid, 0);
	ck_assert_int_eq(v[0].pe_parent_tgid, 0);

	/* exec needs only its 8 bytes of event_data */
	len = test_put(buf, 0, CN_IDX_PROC, &ev, offsetof(struct proc_event, event_data) + 8);
	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(v[0].pe_tgid, 8);
}
END_TEST

START_TEST(test_parse_exit)
{
	uint8_t buf[TEST_BUF];
	struct proc_event ev = test_ev(PROC_EVENT_EXIT);
	struct proccn_event v[4];
	size_t len = test_put_exit(buf, 0), n;

	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(v[0].pe_type, PROCCN_EXIT);
	ck_assert_int_eq(v[0].pe_pid, 101);
	ck_assert_int_eq(v[0].pe_tgid, 102);
	ck_assert(WIFEXITED(v[0].pe_exit_code) && WEXITSTATUS(v[0].pe_exit_code) == 3);
	ck_assert_uint_eq(v[0].pe_exit_signal, SIGCHLD);
	ck_assert_int_eq(v[0].pe_parent_pid, 100);
	ck_assert_int_eq(v[0].pe_parent_tgid, 99);

	/* Before Linux 4.18 the exit event ended after exit_signal. */
	ev.event_data.exit.process_pid = 5;
	ev.event_data.exit.process_tgid = 5;
	ev.event_data.exit.exit_code = SIGKILL;
	len = test_put(buf, 0, CN_IDX_PROC, &ev, offsetof(struct proc_event, event_data) +
	    offsetof(struct exit_proc_event, parent_pid));
	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert(WIFSIGNALED(v[0].pe_exit_code) && WTERMSIG(v[0].pe_exit_code) == SIGKILL);
	ck_assert_int_eq(v[0].pe_parent_tgid, 0);
}
END_TEST

/* What Linux 6.18 actually sent, byte for byte. */
START_TEST(test_parse_kernel_bytes)
{
	struct proccn_event v[2];
	size_t n;

	ck_assert_int_eq(proccn_parse(test_kernel_exit, sizeof(test_kernel_exit), v, nitems(v),
	    &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(v[0].pe_type, PROCCN_EXIT);
	ck_assert_int_eq(v[0].pe_pid, 2653);
	ck_assert_int_eq(v[0].pe_tgid, 2653);
	ck_assert_int_eq(v[0].pe_parent_tgid, 2652);
	ck_assert_int_eq(WEXITSTATUS(v[0].pe_exit_code), 3);
	ck_assert_uint_eq(v[0].pe_exit_signal, 17);
	ck_assert_uint_eq(v[0].pe_timestamp_ns, 0x000004bcc8ae229cull);
}
END_TEST

/* Every cut of a datagram is refused, at every length. */
START_TEST(test_parse_truncated)
{
	uint8_t buf[TEST_BUF];
	struct proccn_event v[4];
	size_t len = test_put_fork(buf, 0), n;
	struct proc_event ev = test_ev(PROC_EVENT_FORK);

	for (size_t cut = 1; cut < len; cut++) {
		errno = 0;
		ck_assert_msg(proccn_parse(buf, cut, v, nitems(v), &n) == -1,
		    "cut at %zu accepted", cut);
		ck_assert_int_eq(errno, EBADMSG);
		ck_assert_uint_eq(n, 0);
	}
	ck_assert_int_eq(proccn_parse(buf, 0, v, nitems(v), &n), 0);
	ck_assert_uint_eq(n, 0);

	/* cn_msg.len too short for the fork's event_data */
	len = test_put(buf, 0, CN_IDX_PROC, &ev, offsetof(struct proc_event, event_data) + 12);
	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), -1);
	ck_assert_int_eq(errno, EBADMSG);
	/* too short for even the proc_event header */
	len = test_put(buf, 0, CN_IDX_PROC, &ev, 12);
	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), -1);
	/* an exit without its exit_code and exit_signal */
	ev = test_ev(PROC_EVENT_EXIT);
	len = test_put(buf, 0, CN_IDX_PROC, &ev, offsetof(struct proc_event, event_data) + 8);
	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), -1);
	/* a message with no room for the cn_msg */
	struct nlmsghdr h = { .nlmsg_len = NLMSG_LENGTH(8), .nlmsg_type = NLMSG_DONE };
	memset(buf, 0, sizeof(buf));
	memcpy(buf, &h, sizeof(h));
	ck_assert_int_eq(proccn_parse(buf, NLMSG_SPACE(8), v, nitems(v), &n), -1);
}
END_TEST

/* Lengths inside that claim more than there is. */
START_TEST(test_parse_bogus_length)
{
	uint8_t buf[TEST_BUF];
	struct proccn_event v[4];
	struct nlmsghdr h;
	struct cn_msg cn;
	size_t len = test_put_fork(buf, 0), n;
	uint32_t l;

	/* nlmsg_len past the datagram */
	memcpy(&h, buf, sizeof(h));
	h.nlmsg_len = (uint32_t)len + 4;
	memcpy(buf, &h, sizeof(h));
	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), -1);
	ck_assert_int_eq(errno, EBADMSG);
	/* nlmsg_len smaller than a netlink header */
	h.nlmsg_len = 8;
	memcpy(buf, &h, sizeof(h));
	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), -1);
	/* huge, and would wrap a 32-bit sum */
	for (l = 0xffffff00u; l != 0; l += 0x40) {
		h.nlmsg_len = l;
		memcpy(buf, &h, sizeof(h));
		ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), -1);
	}
	/* cn_msg.len past the message */
	len = test_put_fork(buf, 0);
	memcpy(&cn, buf + NLMSG_HDRLEN, sizeof(cn));
	cn.len = (uint16_t)(cn.len + 1);
	memcpy(buf + NLMSG_HDRLEN, &cn, sizeof(cn));
	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), -1);
	cn.len = 0xffff;
	memcpy(buf + NLMSG_HDRLEN, &cn, sizeof(cn));
	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), -1);
	/* trailing bytes too short for another header */
	len = test_put_fork(buf, 0);
	ck_assert_int_eq(proccn_parse(buf, len + 8, v, nitems(v), &n), -1);
	ck_assert_uint_eq(n, 1);
}
END_TEST

/* Two messages in one datagram, and a caller with room for only one. */
START_TEST(test_parse_two)
{
	uint8_t buf[TEST_BUF];
	struct proccn_event v[4];
	size_t len = test_put_exit(buf, test_put_fork(buf, 0)), n;

	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(v[0].pe_type, PROCCN_FORK);
	ck_assert_int_eq(v[1].pe_type, PROCCN_EXIT);
	ck_assert_int_eq(v[1].pe_tgid, 102);

	ck_assert_int_eq(proccn_parse(buf, len, v, 1, &n), -1);
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(v[0].pe_type, PROCCN_FORK);

	/* the good first message survives a bad second one */
	len = test_put_fork(buf, 0);
	memset(buf + len, 0xff, 20);
	ck_assert_int_eq(proccn_parse(buf, len + 20, v, nitems(v), &n), -1);
	ck_assert_uint_eq(n, 1);
}
END_TEST

/* Acks, other event types, other connector users and other netlink types. */
START_TEST(test_parse_ignored)
{
	uint8_t buf[TEST_BUF];
	struct proccn_event v[4];
	struct proc_event ev = test_ev(PROC_EVENT_NONE);
	struct nlmsghdr h;
	size_t len, n;

	len = test_put(buf, 0, CN_IDX_PROC, &ev, sizeof(ev));
	ev = test_ev(PROC_EVENT_UID);
	len = test_put(buf, len, CN_IDX_PROC, &ev, sizeof(ev));
	ev = test_ev(PROC_EVENT_COMM);
	len = test_put(buf, len, CN_IDX_PROC, &ev, sizeof(ev));
	ev = test_ev(PROC_EVENT_FORK);
	len = test_put(buf, len, CN_IDX_CIFS, &ev, sizeof(ev));
	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), 0);
	ck_assert_uint_eq(n, 0);

	/* a fork in an NLMSG_NOOP message is not an event */
	len = test_put_fork(buf, 0);
	memcpy(&h, buf, sizeof(h));
	h.nlmsg_type = NLMSG_NOOP;
	memcpy(buf, &h, sizeof(h));
	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), 0);
	ck_assert_uint_eq(n, 0);
}
END_TEST

/* The parser copies out with memcpy: an odd address changes nothing. */
START_TEST(test_parse_unaligned)
{
	uint8_t buf[TEST_BUF], odd[TEST_BUF + 8];
	struct proccn_event v[4], w[4];
	size_t len = test_put_exit(buf, test_put_fork(buf, 0)), n, m;

	ck_assert_int_eq(proccn_parse(buf, len, v, nitems(v), &n), 0);
	for (size_t shift = 1; shift < 8; shift++) {
		memcpy(odd + shift, buf, len);
		ck_assert_int_eq(proccn_parse(odd + shift, len, w, nitems(w), &m), 0);
		ck_assert_uint_eq(m, n);
		for (size_t i = 0; i < n; i++) {
			ck_assert_int_eq(w[i].pe_type, v[i].pe_type);
			ck_assert_int_eq(w[i].pe_tgid, v[i].pe_tgid);
			ck_assert_int_eq(w[i].pe_parent_tgid, v[i].pe_parent_tgid);
			ck_assert_uint_eq(w[i].pe_exit_code, v[i].pe_exit_code);
			ck_assert_uint_eq(w[i].pe_timestamp_ns, v[i].pe_timestamp_ns);
		}
	}
}
END_TEST

/* Fail with a clear message unless root. */
static void
test_need_root(void)
{
	ck_assert_msg(geteuid() == 0, "test_proccn's live tests need root (subscribing to the "
	    "proc connector needs CAP_NET_ADMIN in the initial namespaces); euid is %u",
	    (unsigned)geteuid());
}

/* Open a reader or fail the test with the cause. */
static struct proccn *
test_open(void)
{
	struct proccn *p = NULL;
	char *cause = NULL;

	test_need_root();
	ck_assert_msg(proccn_open(&p, &cause) == 0, "proccn_open: %s", cause);
	ck_assert_int_ge(proccn_fd(p), 0);
	ck_assert_int_ne(fcntl(proccn_fd(p), F_GETFD) & FD_CLOEXEC, 0);
	ck_assert_int_ne(fcntl(proccn_fd(p), F_GETFL) & O_NONBLOCK, 0);
	return p;
}

/* What the live test has seen of its child and grandchild. */
struct test_seen {
	pid_t ts_child, ts_grandchild;
	int ts_fork, ts_exec, ts_exit, ts_gfork, ts_gexec, ts_gexit;
	uint64_t ts_fork_ns, ts_exec_ns, ts_exit_ns;
	size_t ts_lost, ts_events;
};

/* Account for one event. */
static void
test_see(struct test_seen *s, const struct proccn_event *e)
{
	s->ts_events++;
	switch (e->pe_type) {
	case PROCCN_LOST:
		s->ts_lost++;
		break;
	case PROCCN_FORK:
		if (e->pe_tgid == s->ts_child && e->pe_pid == s->ts_child) {
			ck_assert_int_eq(e->pe_parent_tgid, getpid());
			s->ts_fork = 1;
			s->ts_fork_ns = e->pe_timestamp_ns;
		} else if (s->ts_child != 0 && e->pe_parent_tgid == s->ts_child) {
			s->ts_grandchild = e->pe_tgid;
			s->ts_gfork = 1;
		}
		break;
	case PROCCN_EXEC:
		if (e->pe_tgid == s->ts_child) {
			s->ts_exec = 1;
			s->ts_exec_ns = e->pe_timestamp_ns;
		} else if (s->ts_grandchild != 0 && e->pe_tgid == s->ts_grandchild)
			s->ts_gexec = 1;
		break;
	case PROCCN_EXIT:
		if (e->pe_tgid == s->ts_child && e->pe_pid == s->ts_child) {
			ck_assert_msg(WIFEXITED(e->pe_exit_code) &&
			    WEXITSTATUS(e->pe_exit_code) == 3, "child exit status %#x",
			    e->pe_exit_code);
			ck_assert_int_eq(e->pe_parent_tgid, getpid());
			ck_assert_uint_eq(e->pe_exit_signal, SIGCHLD);
			s->ts_exit = 1;
			s->ts_exit_ns = e->pe_timestamp_ns;
		} else if (s->ts_grandchild != 0 && e->pe_tgid == s->ts_grandchild) {
			ck_assert_msg(WIFEXITED(e->pe_exit_code) &&
			    WEXITSTATUS(e->pe_exit_code) == 0, "grandchild exit status %#x",
			    e->pe_exit_code);
			ck_assert_int_eq(e->pe_parent_tgid, s->ts_child);
			s->ts_gexit = 1;
		}
		break;
	}
}

/* Poll and read until done(s) or the deadline; returns done(s). */
static int
test_read_until(struct proccn *p, struct test_seen *s, size_t max,
    int (*done)(const struct test_seen *))
{
	int64_t deadline = util_monotonic_ms() + TEST_LIVE_MS;
	struct proccn_event v[64];
	char *cause = NULL;

	ck_assert_uint_le(max, nitems(v));
	while (!done(s)) {
		struct pollfd pfd = { .fd = proccn_fd(p), .events = POLLIN };
		int64_t left = deadline - util_monotonic_ms();
		size_t n;

		if (left <= 0)
			break;
		if (poll(&pfd, 1, (int)left) < 0) {
			ck_assert_int_eq(errno, EINTR);
			continue;
		}
		ck_assert_msg(proccn_read(p, v, max, &n, &cause) == 0, "proccn_read: %s", cause);
		ck_assert_uint_le(n, max);
		for (size_t i = 0; i < n; i++)
			test_see(s, &v[i]);
	}
	return done(s);
}

/* Everything the lineage test waits for. */
static int
test_lineage_done(const struct test_seen *s)
{
	return s->ts_fork && s->ts_exec && s->ts_exit && s->ts_gfork && s->ts_gexec &&
	    s->ts_gexit;
}

/*
 * A child that execs /bin/sh, which runs /bin/true (a grandchild) and then
 * exits 3: its fork, exec and exit with the right parent and status, and
 * the grandchild's, in order.
 */
START_TEST(test_live_lineage)
{
	struct proccn *p = test_open();
	struct test_seen s;
	int status;
	pid_t pid;

	memset(&s, 0, sizeof(s));
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", "/bin/true; exit 3", (char *)NULL);
		_exit(127);
	}
	s.ts_child = pid;
	/* A small max: events that do not fit wait for the next call. */
	int ok = test_read_until(p, &s, 3, test_lineage_done);
	ck_assert_int_eq(unit_wait_pid(pid, TEST_LIVE_MS, &status), 0);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 3);
	ck_assert_msg(ok, "after %d ms (%zu events, %zu lost): fork %d exec %d exit %d, "
	    "grandchild %d: fork %d exec %d exit %d", TEST_LIVE_MS, s.ts_events, s.ts_lost,
	    s.ts_fork, s.ts_exec, s.ts_exit, (int)s.ts_grandchild, s.ts_gfork, s.ts_gexec,
	    s.ts_gexit);
	ck_assert_uint_le(s.ts_fork_ns, s.ts_exec_ns);
	ck_assert_uint_le(s.ts_exec_ns, s.ts_exit_ns);
	proccn_close(p);
}
END_TEST

/* The child's exit has been seen. */
static int
test_exit_done(const struct test_seen *s)
{
	return s->ts_exit;
}

/* Start a child that exits 3 without exec. */
static pid_t
test_spawn_exit3(void)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(3);
	return pid;
}

/*
 * Two readers at once: each takes only its own subscription's answer, and
 * both hear the same child. Closing one leaves the other subscribed.
 */
START_TEST(test_live_two_readers)
{
	struct proccn *a = test_open(), *b = test_open();
	struct test_seen sa, sb;
	int status;
	pid_t pid = test_spawn_exit3();

	memset(&sa, 0, sizeof(sa));
	memset(&sb, 0, sizeof(sb));
	sa.ts_child = sb.ts_child = pid;
	ck_assert_msg(test_read_until(a, &sa, 64, test_exit_done), "reader a: no exit");
	ck_assert_msg(test_read_until(b, &sb, 64, test_exit_done), "reader b: no exit");
	ck_assert_int_eq(sa.ts_fork, 1);
	ck_assert_int_eq(sb.ts_fork, 1);
	ck_assert_int_eq(unit_wait_pid(pid, TEST_LIVE_MS, &status), 0);
	proccn_close(a);

	pid = test_spawn_exit3();
	memset(&sb, 0, sizeof(sb));
	sb.ts_child = pid;
	ck_assert_msg(test_read_until(b, &sb, 64, test_exit_done), "reader b after a closed");
	ck_assert_int_eq(unit_wait_pid(pid, TEST_LIVE_MS, &status), 0);
	proccn_close(b);
}
END_TEST

/*
 * An overrun: with the receive queue shrunk to its minimum and many
 * children started unread, the kernel drops events and the reader says so
 * with PROCCN_LOST; then reading goes on.
 */
START_TEST(test_live_overrun)
{
	struct proccn *p = test_open();
	struct test_seen s;
	int one = 1, big = 1 << 20, status;
	pid_t pid;

	ck_assert_int_eq(setsockopt(proccn_fd(p), SOL_SOCKET, SO_RCVBUF, &one, sizeof(one)), 0);
	for (int i = 0; i < 64; i++) {
		pid = test_spawn_exit3();
		ck_assert_int_eq(unit_wait_pid(pid, TEST_LIVE_MS, &status), 0);
	}
	memset(&s, 0, sizeof(s));
	for (int round = 0; round < 100 && s.ts_lost == 0; round++) {
		struct proccn_event v[64];
		char *cause = NULL;
		size_t n;

		ck_assert_msg(proccn_read(p, v, nitems(v), &n, &cause) == 0, "%s", cause);
		for (size_t i = 0; i < n; i++)
			test_see(&s, &v[i]);
		if (n == 0)
			break;
	}
	ck_assert_msg(s.ts_lost >= 1, "no PROCCN_LOST after 64 unread children (%zu events)",
	    s.ts_events);

	ck_assert_int_eq(setsockopt(proccn_fd(p), SOL_SOCKET, SO_RCVBUF, &big, sizeof(big)), 0);
	pid = test_spawn_exit3();
	memset(&s, 0, sizeof(s));
	s.ts_child = pid;
	ck_assert_msg(test_read_until(p, &s, 64, test_exit_done), "no exit after the overrun");
	ck_assert_int_eq(unit_wait_pid(pid, TEST_LIVE_MS, &status), 0);
	proccn_close(p);
}
END_TEST

/* The suite: the parser, then the live kernel tests. */
static Suite *
proccn_suite(void)
{
	Suite *s = suite_create("proccn");
	TCase *parse = tcase_create("parse");
	TCase *live = tcase_create("live");

	tcase_add_test(parse, test_parse_fork);
	tcase_add_test(parse, test_parse_exec);
	tcase_add_test(parse, test_parse_exit);
	tcase_add_test(parse, test_parse_kernel_bytes);
	tcase_add_test(parse, test_parse_truncated);
	tcase_add_test(parse, test_parse_bogus_length);
	tcase_add_test(parse, test_parse_two);
	tcase_add_test(parse, test_parse_ignored);
	tcase_add_test(parse, test_parse_unaligned);
	suite_add_tcase(s, parse);
	tcase_set_timeout(live, 60);
	tcase_add_test(live, test_live_lineage);
	tcase_add_test(live, test_live_two_readers);
	tcase_add_test(live, test_live_overrun);
	suite_add_tcase(s, live);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	if (geteuid() != 0)
		fprintf(stderr, "test_proccn: not root: the live tests will fail; run the unit "
		    "suite as root\n");
	sr = srunner_create(proccn_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
