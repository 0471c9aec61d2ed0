/*
 * proccn.c: the proc connector reader (see proccn.h for the datagram layout).
 *
 * Subscribing is a PROC_CN_MCAST_LISTEN request sent to the connector
 * (nl_pid 0). The kernel answers with a PROC_EVENT_NONE "ack" event whose
 * event_data.ack.err is the request's errno (0 on success; older kernels
 * store it negated). That answer is multicast to every member of the group,
 * and the kernel overwrites cn_msg.seq (and so nlmsg_seq) with its per-CPU
 * event counter, so the request's sequence number does not come back; what
 * does come back is our cn_msg.ack plus one. We therefore take the first
 * PROC_EVENT_NONE carrying our ack + 1, so that another process's
 * subscription answer is not mistaken for ours.
 *
 * Datagrams are copied into fixed structs with memcpy: the kernel's
 * proc_event sits 4-byte aligned behind the 20-byte cn_msg although it
 * holds a u64, and proccn_parse() accepts buffers of any alignment.
 */
#include <sys/socket.h>
#include <sys/uio.h>

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>

#include "log.h"
#include "proccn.h"
#include "util.h"

#define PROCCN_RECV_BUF 8192		/* one datagram; the kernel sends 76 bytes */
#define PROCCN_SOCKBUF (8 * 1024 * 1024)	/* bursts of fork/exit (~1 KiB truesize each) */
#define PROCCN_ACK_TIMEOUT_MS 1000
#define PROCCN_ACK_DGRAMS 4096		/* datagrams looked at while waiting for the ack */
#define PROCCN_DRAIN_MAX 1024		/* datagrams per proccn_read, to stay responsive */

/* The fixed part of struct proc_event before the event_data union. */
#define PROCCN_EV_HDR offsetof(struct proc_event, event_data)
/* Exit events before Linux 4.18 end after exit_signal (no parent fields). */
#define PROCCN_EXIT_MIN offsetof(struct exit_proc_event, parent_pid)

struct proccn {
	int pc_fd;
	uint32_t pc_ack;		/* cn_msg.ack of our LISTEN request */
	int pc_lost;			/* a PROCCN_LOST is owed to the caller */
	size_t pc_len, pc_off;		/* buffered datagram, next message in it */
	uint8_t pc_buf[PROCCN_RECV_BUF];
};

/*
 * Parse the netlink message at *off, moving *off past it. Returns 1 with
 * *e filled, 0 for a message that is not a fork/exec/exit event, -1 when it
 * is malformed. Every length inside is checked against what is left.
 */
static int
proccn_parse_msg(const uint8_t *buf, size_t len, size_t *off, struct proccn_event *e)
{
	const uint8_t *m = buf + *off, *data;
	struct nlmsghdr nlh;
	struct cn_msg cn;
	size_t left = len - *off, mlen, step;
	uint32_t what;
	uint64_t ts;

	if (left < NLMSG_HDRLEN)
		return -1;
	memcpy(&nlh, m, sizeof(nlh));
	mlen = nlh.nlmsg_len;
	if (mlen < NLMSG_HDRLEN || mlen > left)
		return -1;
	/* The last message of a datagram may come without its padding. */
	step = NLMSG_ALIGN(mlen);
	*off += step < left ? step : left;
	if (nlh.nlmsg_type != NLMSG_DONE)
		return 0;
	if (mlen - NLMSG_HDRLEN < sizeof(cn))
		return -1;
	memcpy(&cn, m + NLMSG_HDRLEN, sizeof(cn));
	if (cn.len > mlen - NLMSG_HDRLEN - sizeof(cn))
		return -1;
	if (cn.id.idx != CN_IDX_PROC || cn.id.val != CN_VAL_PROC)
		return 0;
	data = m + NLMSG_HDRLEN + sizeof(cn);
	if (cn.len < PROCCN_EV_HDR)
		return -1;
	memcpy(&what, data + offsetof(struct proc_event, what), sizeof(what));
	memcpy(&ts, data + offsetof(struct proc_event, timestamp_ns), sizeof(ts));
	memset(e, 0, sizeof(*e));
	e->pe_timestamp_ns = ts;
	data += PROCCN_EV_HDR;
	switch (what) {
	case PROC_EVENT_FORK: {
		struct fork_proc_event f;

		if (cn.len < PROCCN_EV_HDR + sizeof(f))
			return -1;
		memcpy(&f, data, sizeof(f));
		e->pe_type = PROCCN_FORK;
		e->pe_pid = f.child_pid;
		e->pe_tgid = f.child_tgid;
		e->pe_parent_pid = f.parent_pid;
		e->pe_parent_tgid = f.parent_tgid;
		return 1;
	}
	case PROC_EVENT_EXEC: {
		struct exec_proc_event x;

		if (cn.len < PROCCN_EV_HDR + sizeof(x))
			return -1;
		memcpy(&x, data, sizeof(x));
		e->pe_type = PROCCN_EXEC;
		e->pe_pid = x.process_pid;
		e->pe_tgid = x.process_tgid;
		return 1;
	}
	case PROC_EVENT_EXIT: {
		struct exit_proc_event x;

		if (cn.len < PROCCN_EV_HDR + PROCCN_EXIT_MIN)
			return -1;
		memset(&x, 0, sizeof(x));
		memcpy(&x, data, cn.len - PROCCN_EV_HDR < sizeof(x) ?
		    cn.len - PROCCN_EV_HDR : sizeof(x));
		e->pe_type = PROCCN_EXIT;
		e->pe_pid = x.process_pid;
		e->pe_tgid = x.process_tgid;
		e->pe_exit_code = x.exit_code;
		e->pe_exit_signal = x.exit_signal;
		e->pe_parent_pid = x.parent_pid;
		e->pe_parent_tgid = x.parent_tgid;
		return 1;
	}
	default:
		/* acks, uid/gid/sid/ptrace/comm/coredump and future events */
		return 0;
	}
}

/* Parse one datagram into at most max events. */
int
proccn_parse(const void *buf, size_t len, struct proccn_event *v, size_t max, size_t *n)
{
	size_t off = 0;

	*n = 0;
	while (off < len) {
		struct proccn_event e;
		int r = proccn_parse_msg(buf, len, &off, &e);

		if (r < 0) {
			errno = EBADMSG;
			return -1;
		}
		if (r == 0)
			continue;
		if (*n == max) {
			errno = ENOSPC;
			return -1;
		}
		v[(*n)++] = e;
	}
	return 0;
}

/* Send one PROC_CN_MCAST_* operation to the connector, with cn_msg.ack = ack. */
static int
proccn_send(int fd, uint32_t ack, enum proc_cn_mcast_op op)
{
	union {
		struct nlmsghdr h;
		uint8_t b[NLMSG_SPACE(sizeof(struct cn_msg) + sizeof(op))];
	} u;
	struct sockaddr_nl sa;
	struct cn_msg cn;
	ssize_t r;

	memset(&u, 0, sizeof(u));
	u.h.nlmsg_len = NLMSG_LENGTH(sizeof(cn) + sizeof(op));
	u.h.nlmsg_type = NLMSG_DONE;
	u.h.nlmsg_seq = ack;
	memset(&cn, 0, sizeof(cn));
	cn.id.idx = CN_IDX_PROC;
	cn.id.val = CN_VAL_PROC;
	cn.seq = ack;
	cn.ack = ack;
	cn.len = sizeof(op);
	memcpy(u.b + NLMSG_HDRLEN, &cn, sizeof(cn));
	memcpy(u.b + NLMSG_HDRLEN + sizeof(cn), &op, sizeof(op));
	memset(&sa, 0, sizeof(sa));
	sa.nl_family = AF_NETLINK;	/* nl_pid 0: the kernel */
	do
		r = sendto(fd, u.b, u.h.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa));
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -1;
	if ((size_t)r != u.h.nlmsg_len) {
		errno = EMSGSIZE;
		return -1;
	}
	return 0;
}

/*
 * Receive one datagram into the context's buffer. Returns its length, or
 * -1 with errno (EAGAIN: nothing waiting, ENOBUFS: overrun, EBADMSG: it was
 * truncated, EPERM: it did not come from the kernel).
 */
static ssize_t
proccn_recv(struct proccn *p)
{
	/*
	 * Only the kernel speaks for the proc connector. Sending to our port
	 * needs CAP_NET_ADMIN already, but a datagram from any other port is
	 * dropped rather than believed: a forged exit could make the sensor
	 * forget a live process.
	 */
	return util_netlink_recv_kernel(p->pc_fd, p->pc_buf, sizeof(p->pc_buf));
}

/*
 * Look for the kernel's answer to our LISTEN in one datagram: 1 with *err
 * set when found, 0 otherwise. Everything else in it is skipped.
 */
static int
proccn_find_ack(const uint8_t *buf, size_t len, uint32_t ack, int *err)
{
	size_t off = 0;

	while (len - off >= NLMSG_HDRLEN) {
		const uint8_t *m = buf + off;
		struct nlmsghdr nlh;
		struct cn_msg cn;
		uint32_t what, aerr;

		memcpy(&nlh, m, sizeof(nlh));
		if (nlh.nlmsg_len < NLMSG_HDRLEN || nlh.nlmsg_len > len - off)
			return 0;
		off += NLMSG_ALIGN((size_t)nlh.nlmsg_len) < len - off ?
		    NLMSG_ALIGN((size_t)nlh.nlmsg_len) : len - off;
		if (nlh.nlmsg_type != NLMSG_DONE ||
		    nlh.nlmsg_len < NLMSG_LENGTH(sizeof(cn) + PROCCN_EV_HDR + sizeof(aerr)))
			continue;
		memcpy(&cn, m + NLMSG_HDRLEN, sizeof(cn));
		if (cn.id.idx != CN_IDX_PROC || cn.id.val != CN_VAL_PROC ||
		    cn.ack != ack + 1 || cn.len < PROCCN_EV_HDR + sizeof(aerr) ||
		    cn.len > nlh.nlmsg_len - NLMSG_LENGTH(sizeof(cn)))
			continue;
		memcpy(&what, m + NLMSG_HDRLEN + sizeof(cn), sizeof(what));
		if (what != PROC_EVENT_NONE)
			continue;
		memcpy(&aerr, m + NLMSG_HDRLEN + sizeof(cn) + PROCCN_EV_HDR, sizeof(aerr));
		/* A positive errno; older kernels stored it negated. */
		if (aerr > 0x7fffffffu)
			aerr = -aerr;
		*err = aerr <= 4095 ? (int)aerr : EPROTO;
		return 1;
	}
	return 0;
}

/*
 * Wait (at most PROCCN_ACK_TIMEOUT_MS) for the answer to our LISTEN: 0 with
 * *err its errno (0: subscribed), or -1 with errno (ETIMEDOUT: no answer).
 * Events that arrive before it are dropped: we are not subscribed yet.
 */
static int
proccn_wait_ack(struct proccn *p, int *err)
{
	int64_t deadline = util_monotonic_ms() + PROCCN_ACK_TIMEOUT_MS;

	for (size_t i = 0; i < PROCCN_ACK_DGRAMS; i++) {
		struct pollfd pfd = { .fd = p->pc_fd, .events = POLLIN };
		int64_t left = deadline - util_monotonic_ms();
		ssize_t r;
		int nready;

		if (left <= 0)
			break;
		nready = poll(&pfd, 1, (int)left);
		if (nready < 0 && errno == EINTR)
			continue;
		if (nready < 0)
			return -1;
		if (nready == 0)
			break;
		r = proccn_recv(p);
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS ||
		    errno == EBADMSG || errno == EPERM))
			continue;
		if (r < 0)
			return -1;
		if (proccn_find_ack(p->pc_buf, (size_t)r, p->pc_ack, err))
			return 0;
	}
	errno = ETIMEDOUT;
	return -1;
}

/* Open, bind to the CN_IDX_PROC group and subscribe. */
int
proccn_open(struct proccn **out, char **cause)
{
	struct proccn *p;
	struct sockaddr_nl sa;
	int v = PROCCN_SOCKBUF, err = 0;
	struct timespec ts;

	*out = NULL;
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	/* CLOEXEC: supervised agents must not inherit the lineage feed. */
	p->pc_fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    NETLINK_CONNECTOR);
	if (p->pc_fd < 0) {
		util_cause(cause, "NETLINK_CONNECTOR socket: %s", strerror(errno));
		free(p);
		return -1;
	}
	/*
	 * A fork burst must not overrun the queue between two reads; FORCE
	 * passes the rmem_max sysctl and needs CAP_NET_ADMIN, which
	 * subscribing needs anyway.
	 */
	if (setsockopt(p->pc_fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) != 0 &&
	    setsockopt(p->pc_fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) != 0) {
		util_cause(cause, "proc connector receive buffer: %s", strerror(errno));
		goto fail;
	}
	memset(&sa, 0, sizeof(sa));
	sa.nl_family = AF_NETLINK;
	sa.nl_groups = CN_IDX_PROC;
	if (bind(p->pc_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		util_cause(cause, "bind to the CN_IDX_PROC group: %s%s", strerror(errno),
		    errno == EPERM ? " (needs CAP_NET_ADMIN)" : "");
		goto fail;
	}
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
		util_cause(cause, "clock_gettime: %s", strerror(errno));
		goto fail;
	}
	/* Distinct per open, so a second reader's answer is not taken for ours. */
	p->pc_ack = (uint32_t)ts.tv_nsec ^ ((uint32_t)getpid() << 12);
	if (proccn_send(p->pc_fd, p->pc_ack, PROC_CN_MCAST_LISTEN) != 0) {
		util_cause(cause, "sending PROC_CN_MCAST_LISTEN: %s", strerror(errno));
		goto fail;
	}
	if (proccn_wait_ack(p, &err) != 0) {
		if (errno == ETIMEDOUT)
			util_cause(cause, "PROC_CN_MCAST_LISTEN not acknowledged within %d ms "
			    "(the kernel ignores subscriptions from outside its initial user and "
			    "pid namespaces)", PROCCN_ACK_TIMEOUT_MS);
		else
			util_cause(cause, "waiting for the PROC_CN_MCAST_LISTEN answer: %s",
			    strerror(errno));
		goto fail;
	}
	if (err != 0) {
		util_cause(cause, "PROC_CN_MCAST_LISTEN refused: %s%s", strerror(err),
		    err == EPERM ? " (needs CAP_NET_ADMIN)" : "");
		goto fail;
	}
	*out = p;
	return 0;
fail:
	if (close(p->pc_fd) != 0)
		log_warn("proccn: close");
	free(p);
	return -1;
}

/* The socket to poll. */
int
proccn_fd(struct proccn *p)
{
	return p->pc_fd;
}

/* Unsubscribe, close and free. */
void
proccn_close(struct proccn *p)
{
	if (p == NULL)
		return;
	/* Older kernels count listeners until told to stop, whatever close does. */
	if (proccn_send(p->pc_fd, p->pc_ack + 2, PROC_CN_MCAST_IGNORE) != 0)
		log_warn("proccn: sending PROC_CN_MCAST_IGNORE");
	if (close(p->pc_fd) != 0)
		log_warn("proccn: close");
	free(p);
}

/* Drain the socket into v without blocking. */
int
proccn_read(struct proccn *p, struct proccn_event *v, size_t max, size_t *n, char **cause)
{
	size_t dgrams = 0, bad = 0, forged = 0;
	int rc = 0;

	*n = 0;
	for (;;) {
		ssize_t r;

		if (p->pc_lost) {
			if (*n == max)
				break;
			memset(&v[*n], 0, sizeof(v[*n]));
			v[(*n)++].pe_type = PROCCN_LOST;
			p->pc_lost = 0;
			continue;
		}
		if (p->pc_off < p->pc_len) {
			struct proccn_event e;
			int m;

			if (*n == max)
				break;
			m = proccn_parse_msg(p->pc_buf, p->pc_len, &p->pc_off, &e);
			if (m < 0) {
				/* We cannot tell what the rest said: report a loss. */
				bad++;
				p->pc_off = p->pc_len;
				p->pc_lost = 1;
			} else if (m > 0)
				v[(*n)++] = e;
			continue;
		}
		if (dgrams == PROCCN_DRAIN_MAX)
			break;
		r = proccn_recv(p);
		if (r < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == ENOBUFS || errno == EBADMSG) {
				/* Overrun or a datagram too big for us: events are gone. */
				p->pc_lost = 1;
				dgrams++;
				continue;
			}
			if (errno == EPERM) {
				forged++;
				dgrams++;
				continue;
			}
			util_cause(cause, "proc connector recvmsg: %s", strerror(errno));
			rc = -1;
			break;
		}
		dgrams++;
		p->pc_len = (size_t)r;
		p->pc_off = 0;
	}
	if (bad > 0)
		log_warnx("proccn: %zu malformed datagram(s) from the kernel, reported as lost",
		    bad);
	if (forged > 0)
		log_warnx("proccn: dropped %zu datagram(s) that did not come from the kernel",
		    forged);
	return rc;
}
