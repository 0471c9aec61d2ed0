/*
 * nftrace.c: the nftables trace reader (see nftrace.h for the message).
 *
 * libnftnl's trace parser is written for messages straight from the
 * kernel: an attribute of an unexpected size ends the whole process
 * (abi_breakage() calls exit), names are strdup()ed without checking for
 * their NUL, and a verdict nest without a code is read through an
 * uninitialized table. So no message reaches it as received. Each one is
 * first walked here, every length checked against what contains it; then
 * a fresh message is built in an aligned buffer from only the attributes
 * we use, each validated (exact integer sizes, NUL-terminated names,
 * headers capped), and that copy is what nftnl_trace_nlmsg_parse() sees.
 *
 * Headers are decoded from the bytes libnftnl hands back: IPv4 (version 4,
 * ihl >= 5, at least 20 bytes) or IPv6 (version 6, 40 bytes), chosen by
 * NFTA_TRACE_NFPROTO and required to agree with the version nibble; the
 * protocol is the IPv4 protocol field or the IPv6 next header (extension
 * headers are not walked); TCP and UDP ports come from the first 4 bytes
 * of the transport header, except for non-first IPv4 fragments, whose
 * "transport header" is payload.
 */
#include <sys/socket.h>
#include <sys/uio.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/trace.h>

#include "log.h"
#include "nftrace.h"
#include "util.h"

#define NFTRACE_RECV_BUF 16384		/* one datagram; traces are < 1 KiB */
#define NFTRACE_SOCKBUF (8 * 1024 * 1024)
#define NFTRACE_DRAIN_MAX 1024		/* datagrams per nftrace_read */
#define NFTRACE_MSG_MAX 2048		/* the rebuilt message (about 600 bytes at most) */
#define NFTRACE_HDR_MAX 64		/* header bytes passed on (kernel: 40 and 20) */
#define NFTRACE_JUMP_MAX 256		/* NFT_CHAIN_MAXNAMELEN */
#define NFTRACE_MSG_TYPE ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_TRACE)

/* One attribute found in a received message: its payload, unaligned. */
struct nftrace_attr {
	const uint8_t *ta_p;
	size_t ta_len;
	int ta_seen;
};

struct nftrace {
	struct mnl_socket *tr_nl;
	int tr_lost;			/* a te_lost event is owed to the caller */
	size_t tr_len, tr_off;		/* buffered datagram, next message in it */
	uint8_t tr_buf[NFTRACE_RECV_BUF];
};

/*
 * Walk the attributes in p[0..len) into a[0..max], refusing a length that
 * does not fit, trailing bytes, and a type seen twice. Types above max are
 * skipped. Returns 0 or -1.
 */
static int
nftrace_attrs(const uint8_t *p, size_t len, struct nftrace_attr *a, size_t max)
{
	size_t off = 0;

	memset(a, 0, (max + 1) * sizeof(*a));
	while (off < len) {
		struct nlattr na;
		size_t alen, step, type;

		if (len - off < NLA_HDRLEN)
			return -1;
		memcpy(&na, p + off, sizeof(na));
		alen = na.nla_len;
		if (alen < NLA_HDRLEN || alen > len - off)
			return -1;
		type = na.nla_type & NLA_TYPE_MASK;
		if (type <= max) {
			if (a[type].ta_seen)
				return -1;
			a[type].ta_seen = 1;
			a[type].ta_p = p + off + NLA_HDRLEN;
			a[type].ta_len = alen - NLA_HDRLEN;
		}
		step = NLA_ALIGN(alen);
		off += step < len - off ? step : len - off;
	}
	return 0;
}

/* An attribute that must be absent or exactly size bytes. */
static int
nftrace_attr_size(const struct nftrace_attr *a, size_t size)
{
	return !a->ta_seen || a->ta_len == size;
}

/*
 * A name: absent, or 1..max bytes with exactly one NUL, at the end (what
 * nla_put_string() writes).
 */
static int
nftrace_attr_name(const struct nftrace_attr *a, size_t max)
{
	if (!a->ta_seen)
		return 1;
	return a->ta_len >= 1 && a->ta_len <= max && a->ta_p[a->ta_len - 1] == '\0' &&
	    memchr(a->ta_p, '\0', a->ta_len) == a->ta_p + a->ta_len - 1;
}

/* A big-endian u32 attribute (known to be 4 bytes). */
static uint32_t
nftrace_attr_u32(const struct nftrace_attr *a)
{
	uint32_t v;

	memcpy(&v, a->ta_p, sizeof(v));
	return ntohl(v);
}

/*
 * Check every trace attribute we know the type of, as the kernel writes
 * them. Returns 0, -1 when malformed, 1 when the event is to be skipped
 * (a name that does not fit our event).
 */
static int
nftrace_check(struct nftrace_attr *a, struct nftrace_attr *vd)
{
	static const int u32s[] = { NFTA_TRACE_ID, NFTA_TRACE_TYPE, NFTA_TRACE_NFPROTO,
		NFTA_TRACE_POLICY, NFTA_TRACE_IIF, NFTA_TRACE_OIF, NFTA_TRACE_MARK };
	static const int hdrs[] = { NFTA_TRACE_LL_HEADER, NFTA_TRACE_NETWORK_HEADER,
		NFTA_TRACE_TRANSPORT_HEADER };

	for (size_t i = 0; i < nitems(u32s); i++)
		if (!nftrace_attr_size(&a[u32s[i]], 4))
			return -1;
	if (!a[NFTA_TRACE_ID].ta_seen || !a[NFTA_TRACE_TYPE].ta_seen)
		return -1;
	if (!nftrace_attr_size(&a[NFTA_TRACE_IIFTYPE], 2) ||
	    !nftrace_attr_size(&a[NFTA_TRACE_OIFTYPE], 2) ||
	    !nftrace_attr_size(&a[NFTA_TRACE_RULE_HANDLE], 8))
		return -1;
	for (size_t i = 0; i < nitems(hdrs); i++)
		if (a[hdrs[i]].ta_seen && a[hdrs[i]].ta_len == 0)
			return -1;
	if (!nftrace_attr_name(&a[NFTA_TRACE_TABLE], UINT16_MAX) ||
	    !nftrace_attr_name(&a[NFTA_TRACE_CHAIN], UINT16_MAX))
		return -1;
	if (a[NFTA_TRACE_VERDICT].ta_seen) {
		const struct nftrace_attr *v = &a[NFTA_TRACE_VERDICT];
		int32_t code;

		if (nftrace_attrs(v->ta_p, v->ta_len, vd, NFTA_VERDICT_MAX) != 0 ||
		    !vd[NFTA_VERDICT_CODE].ta_seen ||
		    !nftrace_attr_size(&vd[NFTA_VERDICT_CODE], 4) ||
		    !nftrace_attr_size(&vd[NFTA_VERDICT_CHAIN_ID], 4) ||
		    !nftrace_attr_name(&vd[NFTA_VERDICT_CHAIN], NFTRACE_JUMP_MAX))
			return -1;
		code = (int32_t)nftrace_attr_u32(&vd[NFTA_VERDICT_CODE]);
		if ((code == NFT_JUMP || code == NFT_GOTO) && !vd[NFTA_VERDICT_CHAIN].ta_seen)
			return -1;
	}
	if (a[NFTA_TRACE_TABLE].ta_len > NFTRACE_NAME_MAX ||
	    a[NFTA_TRACE_CHAIN].ta_len > NFTRACE_NAME_MAX)
		return 1;
	return 0;
}

/* Copy attribute type from a into the message being built, at most cap bytes. */
static int
nftrace_put(struct nlmsghdr *nlh, uint16_t type, const struct nftrace_attr *a, size_t cap)
{
	if (!a->ta_seen)
		return 0;
	if (!mnl_attr_put_check(nlh, NFTRACE_MSG_MAX, type,
	    a->ta_len < cap ? a->ta_len : cap, a->ta_p))
		return -1;
	return 0;
}

/*
 * Build the message libnftnl will parse: the nfgenmsg of the original and
 * only the validated attributes we read, in the aligned buffer nlh.
 */
static int
nftrace_rebuild(struct nlmsghdr *nlh, const struct nfgenmsg *nfg,
    const struct nftrace_attr *a, const struct nftrace_attr *vd)
{
	static const int keep[] = { NFTA_TRACE_TABLE, NFTA_TRACE_CHAIN, NFTA_TRACE_TYPE,
		NFTA_TRACE_ID, NFTA_TRACE_NFPROTO, NFTA_TRACE_POLICY };
	struct nfgenmsg *out;
	struct nlattr *nest;

	mnl_nlmsg_put_header(nlh);
	nlh->nlmsg_type = NFTRACE_MSG_TYPE;
	out = mnl_nlmsg_put_extra_header(nlh, sizeof(*out));
	memcpy(out, nfg, sizeof(*out));
	for (size_t i = 0; i < nitems(keep); i++)
		if (nftrace_put(nlh, (uint16_t)keep[i], &a[keep[i]], SIZE_MAX) != 0)
			return -1;
	if (nftrace_put(nlh, NFTA_TRACE_NETWORK_HEADER, &a[NFTA_TRACE_NETWORK_HEADER],
	    NFTRACE_HDR_MAX) != 0 ||
	    nftrace_put(nlh, NFTA_TRACE_TRANSPORT_HEADER, &a[NFTA_TRACE_TRANSPORT_HEADER],
	    NFTRACE_HDR_MAX) != 0)
		return -1;
	if (a[NFTA_TRACE_VERDICT].ta_seen) {
		nest = mnl_attr_nest_start_check(nlh, NFTRACE_MSG_MAX, NFTA_TRACE_VERDICT);
		if (nest == NULL ||
		    nftrace_put(nlh, NFTA_VERDICT_CODE, &vd[NFTA_VERDICT_CODE], SIZE_MAX) != 0 ||
		    nftrace_put(nlh, NFTA_VERDICT_CHAIN, &vd[NFTA_VERDICT_CHAIN], SIZE_MAX) != 0)
			return -1;
		mnl_attr_nest_end(nlh, nest);
	}
	return 0;
}

/*
 * Fill the address fields of e from the network and transport headers.
 * Returns 0, or -1 when a header is too short for what we read or does
 * not match the protocol the kernel says it is.
 */
static int
nftrace_decode(struct nftrace_event *e, uint32_t nfproto, const uint8_t *nh, uint32_t nhlen,
    const uint8_t *th, uint32_t thlen)
{
	int ports = 1;

	if (nh == NULL)
		return 0;
	switch (nfproto) {
	case NFPROTO_IPV4:
		if (nhlen < 20 || (nh[0] >> 4) != 4 || (nh[0] & 0x0f) < 5)
			return -1;
		e->te_family = AF_INET;
		e->te_proto = nh[9];
		memcpy(e->te_saddr, nh + 12, 4);
		memcpy(e->te_daddr, nh + 16, 4);
		/* A non-first fragment has no transport header, only payload. */
		if ((((nh[6] & 0x1f) << 8) | nh[7]) != 0)
			ports = 0;
		break;
	case NFPROTO_IPV6:
		if (nhlen < 40 || (nh[0] >> 4) != 6)
			return -1;
		e->te_family = AF_INET6;
		e->te_proto = nh[6];
		memcpy(e->te_saddr, nh + 8, 16);
		memcpy(e->te_daddr, nh + 24, 16);
		break;
	default:
		/* bridge, netdev, arp: not decoded */
		return 0;
	}
	if (!ports || th == NULL || (e->te_proto != IPPROTO_TCP && e->te_proto != IPPROTO_UDP))
		return 0;
	if (thlen < 4)
		return -1;
	e->te_sport = (uint16_t)((th[0] << 8) | th[1]);
	e->te_dport = (uint16_t)((th[2] << 8) | th[3]);
	return 0;
}

/* Read the rebuilt message back through libnftnl into e. */
static int
nftrace_from_nftnl(const struct nlmsghdr *nlh, struct nftrace_event *e)
{
	struct nftnl_trace *t;
	const uint8_t *nh, *th;
	const char *s;
	uint32_t nhlen = 0, thlen = 0, nfproto;
	int rc;

	if ((t = nftnl_trace_alloc()) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	if (nftnl_trace_nlmsg_parse(nlh, t) != 0) {
		/* Everything was validated: only an allocation can have failed. */
		nftnl_trace_free(t);
		errno = ENOMEM;
		return -1;
	}
	memset(e, 0, sizeof(*e));
	if ((s = nftnl_trace_get_str(t, NFTNL_TRACE_TABLE)) != NULL)
		util_strlcpy(e->te_table, s, sizeof(e->te_table));
	if ((s = nftnl_trace_get_str(t, NFTNL_TRACE_CHAIN)) != NULL)
		util_strlcpy(e->te_chain, s, sizeof(e->te_chain));
	e->te_type = nftnl_trace_get_u32(t, NFTNL_TRACE_TYPE);
	e->te_id = nftnl_trace_get_u32(t, NFTNL_TRACE_ID);
	if (nftnl_trace_is_set(t, NFTNL_TRACE_VERDICT)) {
		e->te_has_verdict = 1;
		e->te_verdict = (int32_t)nftnl_trace_get_u32(t, NFTNL_TRACE_VERDICT);
	} else if (e->te_type == NFT_TRACETYPE_POLICY &&
	    nftnl_trace_is_set(t, NFTNL_TRACE_POLICY)) {
		e->te_has_verdict = 1;
		e->te_verdict = (int32_t)nftnl_trace_get_u32(t, NFTNL_TRACE_POLICY);
	}
	/* The packet's protocol; an inet table's own family says nothing. */
	nfproto = nftnl_trace_is_set(t, NFTNL_TRACE_NFPROTO) ?
	    nftnl_trace_get_u32(t, NFTNL_TRACE_NFPROTO) :
	    nftnl_trace_get_u32(t, NFTNL_TRACE_FAMILY);
	nh = nftnl_trace_get_data(t, NFTNL_TRACE_NETWORK_HEADER, &nhlen);
	th = nftnl_trace_get_data(t, NFTNL_TRACE_TRANSPORT_HEADER, &thlen);
	rc = nftrace_decode(e, nfproto, nh, nhlen, th, thlen);
	nftnl_trace_free(t);
	if (rc != 0) {
		memset(e, 0, sizeof(*e));
		errno = EBADMSG;
		return -1;
	}
	return 0;
}

/*
 * Parse the netlink message at *off, moving *off past it when its header
 * is sound. Returns 1 with *e filled, 0 for a message we skip, -1 with
 * errno (EBADMSG, ENOMEM).
 */
static int
nftrace_parse_msg(const uint8_t *buf, size_t len, size_t *off, struct nftrace_event *e)
{
	union {
		struct nlmsghdr h;
		uint8_t b[NFTRACE_MSG_MAX];
	} out;
	struct nftrace_attr a[NFTA_TRACE_MAX + 1], vd[NFTA_VERDICT_MAX + 1];
	const uint8_t *m = buf + *off;
	struct nlmsghdr nlh;
	struct nfgenmsg nfg;
	size_t left = len - *off, mlen, step, hdr = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfg));
	int r;

	errno = EBADMSG;
	if (left < NLMSG_HDRLEN)
		return -1;
	memcpy(&nlh, m, sizeof(nlh));
	mlen = nlh.nlmsg_len;
	if (mlen < NLMSG_HDRLEN || mlen > left)
		return -1;
	step = NLMSG_ALIGN(mlen);
	*off += step < left ? step : left;
	if (nlh.nlmsg_type != NFTRACE_MSG_TYPE)
		return 0;
	if (mlen < hdr)
		return -1;
	memcpy(&nfg, m + NLMSG_HDRLEN, sizeof(nfg));
	if (nftrace_attrs(m + hdr, mlen - hdr, a, NFTA_TRACE_MAX) != 0)
		return -1;
	memset(vd, 0, sizeof(vd));
	if ((r = nftrace_check(a, vd)) != 0)
		return r < 0 ? -1 : 0;
	memset(&out, 0, sizeof(out));
	if (nftrace_rebuild(&out.h, &nfg, a, vd) != 0)
		return -1;	/* cannot happen: every piece is bounded */
	if (nftrace_from_nftnl(&out.h, e) != 0)
		return -1;
	return 1;
}

/* Parse one datagram into at most max events. */
int
nftrace_parse(const void *buf, size_t len, struct nftrace_event *v, size_t max, size_t *n)
{
	size_t off = 0;

	*n = 0;
	while (off < len) {
		struct nftrace_event e;
		int r = nftrace_parse_msg(buf, len, &off, &e);

		if (r < 0)
			return -1;
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

/* Whether an event comes from exactly this table. */
int
nftrace_table_matches(const struct nftrace_event *e, const char *table)
{
	size_t len;

	if (e == NULL || table == NULL || e->te_lost)
		return 0;
	len = strnlen(e->te_table, sizeof(e->te_table));
	if (len == 0 || len == sizeof(e->te_table))
		return 0;
	return strcmp(e->te_table, table) == 0;
}

/* Open a trace listener in the current network namespace. */
int
nftrace_open(struct nftrace **out, char **cause)
{
	struct nftrace *t;
	int fd, v = NFTRACE_SOCKBUF, grp = NFNLGRP_NFTRACE;

	*out = NULL;
	if ((t = calloc(1, sizeof(*t))) == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	/* CLOEXEC: supervised agents must not inherit the trace feed. */
	t->tr_nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (t->tr_nl == NULL) {
		util_cause(cause, "NETLINK_NETFILTER socket: %s", strerror(errno));
		free(t);
		return -1;
	}
	if (mnl_socket_bind(t->tr_nl, 0, MNL_SOCKET_AUTOPID) != 0) {
		util_cause(cause, "netlink bind: %s", strerror(errno));
		goto fail;
	}
	fd = mnl_socket_get_fd(t->tr_nl);
	/* Rejected packets come in bursts; FORCE passes rmem_max (CAP_NET_ADMIN). */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) != 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) != 0) {
		util_cause(cause, "trace receive buffer: %s", strerror(errno));
		goto fail;
	}
	if (mnl_socket_setsockopt(t->tr_nl, NETLINK_ADD_MEMBERSHIP, &grp, sizeof(grp)) != 0) {
		util_cause(cause, "joining NFNLGRP_NFTRACE: %s%s", strerror(errno),
		    errno == EPERM ? " (needs CAP_NET_ADMIN)" : "");
		goto fail;
	}
	*out = t;
	return 0;
fail:
	if (mnl_socket_close(t->tr_nl) != 0)
		log_warn("nftrace: close");
	free(t);
	return -1;
}

/* The socket to poll. */
int
nftrace_fd(struct nftrace *t)
{
	return mnl_socket_get_fd(t->tr_nl);
}

/* Close and free. */
void
nftrace_close(struct nftrace *t)
{
	if (t == NULL)
		return;
	if (mnl_socket_close(t->tr_nl) != 0)
		log_warn("nftrace: close");
	free(t);
}

/*
 * Receive one datagram into the buffer: its length, or -1 with errno
 * (EAGAIN: nothing waiting, ENOBUFS: overrun, EBADMSG: truncated, EPERM:
 * not from the kernel).
 */
static ssize_t
nftrace_recv(struct nftrace *t)
{
	/*
	 * Only the kernel reports traces. Another socket would need
	 * CAP_NET_ADMIN to reach our port, but a forged trace would be a
	 * forged fault against an operation, so anything else is dropped.
	 */
	return util_netlink_recv_kernel(mnl_socket_get_fd(t->tr_nl), t->tr_buf, sizeof(t->tr_buf));
}

/* Drain the socket into v without blocking. */
int
nftrace_read(struct nftrace *t, struct nftrace_event *v, size_t max, size_t *n, char **cause)
{
	size_t dgrams = 0, bad = 0, forged = 0;
	int rc = 0;

	*n = 0;
	for (;;) {
		ssize_t r;

		if (t->tr_lost) {
			if (*n == max)
				break;
			memset(&v[*n], 0, sizeof(v[*n]));
			v[(*n)++].te_lost = 1;
			t->tr_lost = 0;
			continue;
		}
		if (t->tr_off < t->tr_len) {
			struct nftrace_event e;
			size_t before = t->tr_off;
			int m;

			if (*n == max)
				break;
			m = nftrace_parse_msg(t->tr_buf, t->tr_len, &t->tr_off, &e);
			if (m < 0 && errno == ENOMEM)
				t->tr_lost = 1;	/* a real event we could not keep */
			else if (m < 0)
				bad++;
			else if (m > 0)
				v[(*n)++] = e;
			if (m < 0 && t->tr_off == before)
				t->tr_off = t->tr_len;	/* the framing is broken */
			continue;
		}
		if (dgrams == NFTRACE_DRAIN_MAX)
			break;
		r = nftrace_recv(t);
		if (r < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			dgrams++;
			if (errno == ENOBUFS || errno == EBADMSG) {
				t->tr_lost = 1;
				continue;
			}
			if (errno == EPERM) {
				forged++;
				continue;
			}
			util_cause(cause, "trace recvmsg: %s", strerror(errno));
			rc = -1;
			break;
		}
		dgrams++;
		t->tr_len = (size_t)r;
		t->tr_off = 0;
	}
	/* One line per call: a packet flood must not become a log flood. */
	if (bad > 0)
		log_warnx("nftrace: skipped %zu malformed trace message(s)", bad);
	if (forged > 0)
		log_warnx("nftrace: dropped %zu datagram(s) that did not come from the kernel",
		    forged);
	return rc;
}
