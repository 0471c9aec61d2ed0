/*
 * nft.c: nftables generations through libnftnl + libmnl.
 *
 * Every change is one nfnetlink batch (NFNL_MSG_BATCH_BEGIN, the messages,
 * NFNL_MSG_BATCH_END) sent with one sendmsg(2): nfnetlink applies all of it
 * in one transaction or none of it. Every message inside carries NLM_F_ACK,
 * so the kernel answers each one (errors and successes) once it has
 * processed the whole batch, and we read every answer before saying what
 * happened.
 *
 * Set keys are concatenations of 32-bit registers: every field of
 * `ip daddr . meta l4proto . th dport` starts on a 4-byte boundary and is
 * zero padded, because that is how the payload and meta expressions leave
 * them in the registers the lookup reads:
 *
 *   IPv4 (12 bytes): addr[4]  | proto 0 0 0 | port_hi port_lo 0 0
 *   IPv6 (24 bytes): addr[16] | proto 0 0 0 | port_hi port_lo 0 0
 *
 * An element is a range: NFTA_SET_ELEM_KEY holds the low end of every field
 * and NFTA_SET_ELEM_KEY_END the high end, which the kernel's pipapo backend
 * (chosen for NFT_SET_INTERVAL with more than one concatenated field) turns
 * into per-field ranges.
 *
 * Table userdata cannot be changed on an existing table (NEWTABLE on a table
 * that exists only updates its flags, and silently ignores new userdata), so
 * an element update records its generation in the comment of an empty,
 * unreferenced chain "generation" that it deletes and re-creates in the same
 * batch. A full generation commit re-creates the table, which drops that
 * chain, so the table's own userdata is the truth again.
 */
#include <sys/socket.h>
#include <sys/uio.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>

#include "log.h"
#include "nft.h"
#include "util.h"

/*
 * Batch pages. A message never spans pages, so the overrun area must hold
 * the largest message we build: an element message is bounded by
 * NFT_ELEMS_PER_MSG elements of at most ~80 bytes each (about 20 KiB), well
 * below both the overrun and the 64 KiB an attribute nest can describe.
 */
#define NFT_BATCH_PAGE (256 * 1024)
#define NFT_BATCH_OVERRUN (64 * 1024 + 4096)
#define NFT_ELEMS_PER_MSG 256
#define NFT_MSG_LIMIT (48 * 1024)	/* checked after each message is built */
#define NFT_ELEMS_MAX (1024 * 1024)	/* per call, all sets together */

#define NFT_ACK_TIMEOUT_MS 10000
#define NFT_DUMP_TIMEOUT_MS 10000
#define NFT_DUMP_TRIES 3
#define NFT_DUMP_RECV_MAX 100000
#define NFT_DRAIN_MAX 4096
#define NFT_ACK_TRUESIZE 2048		/* receive buffer budget per ack */
#define NFT_SOCKBUF_MAX (64 * 1024 * 1024)

#define NFT_CHAIN_ENVELOPE "envelope"
#define NFT_CHAIN_BLOCKED "blocked"
#define NFT_CHAIN_GENERATION "generation"
#define NFT_COUNTER_ALLOWED "allowed"	/* named counters: survive rule flushes */
#define NFT_COUNTER_BLOCKED "blocked"
#define NFT_OWNER_MAX 64		/* sizeof(nti_owner) */
#define NFT_CGROUP_PATH_MAX 4096

/* nftables datatype numbers (nftables include/datatype.h) and concat shift. */
#define NFT_TYPE_IPADDR 7
#define NFT_TYPE_IP6ADDR 8
#define NFT_TYPE_INET_PROTOCOL 12
#define NFT_TYPE_INET_SERVICE 13
#define NFT_TYPE_BITS 6

struct nft_ctx {
	struct mnl_socket *nc_nl;
	uint32_t nc_portid;
	uint32_t nc_seq;
	char *nc_buf;		/* MNL_SOCKET_BUFFER_SIZE receive buffer */
	size_t nc_buflen;
};

/* What each message of a batch was, to name the one the kernel refused. */
struct nft_msg {
	uint16_t nm_type;
	const char *nm_what;
};

struct nft_batch {
	struct nftnl_batch *nb_b;
	uint32_t nb_seq0;	/* NFNL_MSG_BATCH_BEGIN */
	uint32_t nb_seq;	/* next sequence number */
	struct nft_msg *nb_msgs;
	size_t nb_n, nb_cap;
};

/* The sets, their family and their transaction-local ids. */
struct nft_setdef {
	const char *sd_name;
	int sd_family;
	uint32_t sd_id;
	int sd_timeout; /* elements may carry a timeout (the allow sets, for leases) */
};

/* The policy sets: interval sets that each generation refills. */
static const struct nft_setdef nft_sets[] = {
	{ "allow4", AF_INET, 1, 1 },
	{ "allow6", AF_INET6, 2, 1 },
	{ "deny4", AF_INET, 3, 0 },
	{ "deny6", AF_INET6, 4, 0 },
};
#define NFT_SET_ALLOW4 (&nft_sets[0])
#define NFT_SET_ALLOW6 (&nft_sets[1])
#define NFT_SET_DENY4 (&nft_sets[2])
#define NFT_SET_DENY6 (&nft_sets[3])

/*
 * The evidence sets: exact tuples the packet path adds with a counter each
 * (`update @blockedN { ... counter }`), so the rejects of an operation can
 * be reported per destination. They keep their contents across refills.
 * Full, the update breaks out of its rule and the reject still happens: a
 * full set costs per-destination detail, never enforcement.
 */
static const struct nft_setdef nft_evidence_sets[] = {
	{ "blocked4", AF_INET, 5, 0 },
	{ "blocked6", AF_INET6, 6, 0 },
};
#define NFT_SET_BLOCKED4 (&nft_evidence_sets[0])
#define NFT_SET_BLOCKED6 (&nft_evidence_sets[1])

/* The name of an nf_tables message type, for causes. */
static const char *
nft_msg_name(uint16_t type)
{
	switch (type) {
	case NFT_MSG_NEWTABLE:
		return "NEWTABLE";
	case NFT_MSG_DELTABLE:
		return "DELTABLE";
	case NFT_MSG_NEWCHAIN:
		return "NEWCHAIN";
	case NFT_MSG_DELCHAIN:
		return "DELCHAIN";
	case NFT_MSG_NEWRULE:
		return "NEWRULE";
	case NFT_MSG_NEWSET:
		return "NEWSET";
	case NFT_MSG_NEWSETELEM:
		return "NEWSETELEM";
	case NFT_MSG_DELSETELEM:
		return "DELSETELEM";
	case NFT_MSG_GETTABLE:
		return "GETTABLE";
	case NFT_MSG_GETCHAIN:
		return "GETCHAIN";
	case NFT_MSG_GETRULE:
		return "GETRULE";
	}
	return "message";
}

/*
 * Only tables named NFT_TABLE_PREFIX + [A-Za-z0-9_] are ours. Every entry
 * point checks this, so a confused or hostile caller cannot make boundaryd
 * replace or delete another firewall's table (deleting `inet filter` would
 * open the host).
 */
static int
nft_table_name_ok(const char *name)
{
	size_t len, plen = strlen(NFT_TABLE_PREFIX);

	if (name == NULL)
		return 0;
	len = strlen(name);
	if (len <= plen || len >= NFT_TABLE_NAME_MAX ||
	    strncmp(name, NFT_TABLE_PREFIX, plen) != 0)
		return 0;
	for (size_t i = plen; i < len; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '_'))
			return 0;
	}
	return 1;
}

/*
 * The owner ends up inside a quoted nft comment and is parsed back from
 * userdata, so it is limited to characters that need no quoting.
 */
static int
nft_owner_ok(const char *owner)
{
	size_t len;

	if (owner == NULL)
		return 0;
	len = strlen(owner);
	if (len == 0 || len >= NFT_OWNER_MAX)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = owner[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == ':'))
			return 0;
	}
	return 1;
}

/* Address length in bytes for a family, 0 for anything else. */
static size_t
nft_addr_len(int family)
{
	if (family == AF_INET)
		return 4;
	if (family == AF_INET6)
		return 16;
	return 0;
}

/* Check one element: family, ordered ranges, protocol. */
static int
nft_elem_check(const struct nft_elem *e, const char *what, size_t i, char **cause)
{
	size_t alen = nft_addr_len(e->ne_family);

	if (alen == 0) {
		util_cause(cause, "%s element %zu: family %d is not AF_INET or AF_INET6", what, i,
		    e->ne_family);
		return -1;
	}
	if (memcmp(e->ne_addr_lo, e->ne_addr_hi, alen) > 0) {
		util_cause(cause, "%s element %zu: address range is inverted", what, i);
		return -1;
	}
	if (e->ne_proto != IPPROTO_TCP && e->ne_proto != IPPROTO_UDP) {
		util_cause(cause, "%s element %zu: protocol %u is not tcp or udp", what, i,
		    e->ne_proto);
		return -1;
	}
	if (e->ne_port_lo > e->ne_port_hi) {
		util_cause(cause, "%s element %zu: port range %u-%u is inverted", what, i,
		    e->ne_port_lo, e->ne_port_hi);
		return -1;
	}
	return 0;
}

/* Check a list of elements. */
static int
nft_elems_check(const struct nft_elem *v, size_t n, const char *what, char **cause)
{
	if (n > 0 && v == NULL) {
		util_cause(cause, "%s: %zu elements but no array", what, n);
		return -1;
	}
	if (n > NFT_ELEMS_MAX) {
		util_cause(cause, "%s: %zu elements, at most %d", what, n, NFT_ELEMS_MAX);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (nft_elem_check(&v[i], what, i, cause) != 0)
			return -1;
	return 0;
}

/* Check everything about a policy that the kernel would not check for us. */
static int
nft_policy_check(const struct nft_policy *p, char **cause)
{
	if (p == NULL) {
		util_cause(cause, "no policy");
		return -1;
	}
	if (!nft_table_name_ok(p->np_table)) {
		util_cause(cause, "table name must be %s followed by 1-%zu of [A-Za-z0-9_]",
		    NFT_TABLE_PREFIX, NFT_TABLE_NAME_MAX - 1 - strlen(NFT_TABLE_PREFIX));
		return -1;
	}
	if (!nft_owner_ok(p->np_owner)) {
		util_cause(cause, "owner must be 1-%d of [A-Za-z0-9_.:-]", NFT_OWNER_MAX - 1);
		return -1;
	}
	if (p->np_connect_family != 0 && (p->np_subject != NFT_SUBJECT_CGROUP ||
	    nft_addr_len(p->np_connect_family) == 0 || p->np_connect_port == 0)) {
		util_cause(cause, "connect guard: a cgroup subject, an address and a port");
		return -1;
	}
	if (p->np_dns_family != 0 && (nft_addr_len(p->np_dns_family) == 0 || p->np_dns_port == 0 ||
	    (p->np_subject == NFT_SUBJECT_SOURCE_ADDRESS && p->np_dns_family != p->np_src_family))) {
		util_cause(cause, "dns redirect: an address of the subject's family and a port");
		return -1;
	}
	switch (p->np_subject) {
	case NFT_SUBJECT_CGROUP:
		/*
		 * Level 0 is the root cgroup: a rule there would confine the
		 * whole host. The kernel stores the level in a u8.
		 */
		if (p->np_cgroup_level < 1 || p->np_cgroup_level > 255) {
			util_cause(cause, "cgroup level %d is outside 1-255", p->np_cgroup_level);
			return -1;
		}
		if (p->np_cgroup_id == 0) {
			util_cause(cause, "cgroup id 0");
			return -1;
		}
		break;
	case NFT_SUBJECT_SOURCE_ADDRESS:
		if (nft_addr_len(p->np_src_family) == 0) {
			util_cause(cause, "source family %d is not AF_INET or AF_INET6",
			    p->np_src_family);
			return -1;
		}
		break;
	default:
		util_cause(cause, "unknown subject %d", (int)p->np_subject);
		return -1;
	}
	switch (p->np_mode) {
	case NFT_MODE_ALLOWLIST:
	case NFT_MODE_DENYLIST:
		break;
	default:
		util_cause(cause, "unknown mode %d", (int)p->np_mode);
		return -1;
	}
	if (p->np_nallow > NFT_ELEMS_MAX || p->np_ndeny > NFT_ELEMS_MAX ||
	    p->np_nallow + p->np_ndeny > NFT_ELEMS_MAX) {
		util_cause(cause, "%zu elements, at most %d", p->np_nallow + p->np_ndeny,
		    NFT_ELEMS_MAX);
		return -1;
	}
	if (nft_elems_check(p->np_allow, p->np_nallow, "allow", cause) != 0 ||
	    nft_elems_check(p->np_deny, p->np_ndeny, "deny", cause) != 0)
		return -1;
	return 0;
}

/* Format the userdata comment "gen=N;owner=X" (owner NULL: "gen=N"). */
static void
nft_comment_format(char *buf, size_t len, uint64_t gen, const char *owner)
{
	if (owner != NULL)
		snprintf(buf, len, "gen=%" PRIu64 ";owner=%s", gen, owner);
	else
		snprintf(buf, len, "gen=%" PRIu64, gen);
}

/* Parse "gen=N[;owner=X]"; owner is "" when absent. */
static int
nft_comment_parse(const char *s, uint64_t *gen, char *owner, size_t olen)
{
	unsigned long long v;
	char *end;

	if (strncmp(s, "gen=", 4) != 0 || s[4] < '0' || s[4] > '9')
		return -1;
	errno = 0;
	v = strtoull(s + 4, &end, 10);
	if (errno != 0)
		return -1;
	owner[0] = '\0';
	if (*end == ';') {
		if (strncmp(end + 1, "owner=", 6) != 0 || !nft_owner_ok(end + 7) ||
		    util_strlcpy(owner, end + 7, olen) >= olen)
			return -1;
	} else if (*end != '\0')
		return -1;
	*gen = v;
	return 0;
}

/* Build an nftnl userdata buffer holding one comment TLV of the given type. */
static struct nftnl_udata_buf *
nft_udata_comment(uint8_t type, const char *comment)
{
	struct nftnl_udata_buf *ud = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);

	if (ud == NULL)
		return NULL;
	if (!nftnl_udata_put_strz(ud, type, comment)) {
		nftnl_udata_buf_free(ud);
		return NULL;
	}
	return ud;
}

/*
 * Read gen/owner out of table or chain userdata: nftnl TLVs of a 1-byte
 * type and a 1-byte length. The walk is bounded here rather than trusted to
 * nftnl_udata_parse(), since any root process can write this userdata.
 */
static int
nft_udata_read(const void *data, uint32_t len, uint64_t *gen, char *owner, size_t olen)
{
	const uint8_t *p = data;
	uint32_t off = 0;

	if (p == NULL)
		return -1;
	while (len - off >= 2) {
		uint8_t type = p[off], vlen = p[off + 1];
		const char *v = (const char *)p + off + 2;

		if (vlen > len - off - 2)
			return -1;
		/* The table and chain comment types are both 0. */
		if (type == NFTNL_UDATA_TABLE_COMMENT) {
			if (vlen == 0 || vlen > NFTNL_UDATA_COMMENT_MAXLEN || v[vlen - 1] != '\0')
				return -1;
			return nft_comment_parse(v, gen, owner, olen);
		}
		off += 2u + vlen;
	}
	return -1;
}

/*
 * Batches
 */

/* Start a batch: allocate pages and put NFNL_MSG_BATCH_BEGIN. */
static int
nft_batch_init(struct nft_ctx *ctx, struct nft_batch *b, char **cause)
{
	memset(b, 0, sizeof(*b));
	b->nb_b = nftnl_batch_alloc(NFT_BATCH_PAGE, NFT_BATCH_OVERRUN);
	if (b->nb_b == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	b->nb_seq0 = ctx->nc_seq++;
	nftnl_batch_begin(nftnl_batch_buffer(b->nb_b), b->nb_seq0);
	if (nftnl_batch_update(b->nb_b) != 0) {
		nftnl_batch_free(b->nb_b);
		b->nb_b = NULL;
		util_cause(cause, "out of memory");
		return -1;
	}
	b->nb_seq = ctx->nc_seq;
	return 0;
}

/* Free a batch. */
static void
nft_batch_free(struct nft_batch *b)
{
	if (b->nb_b != NULL)
		nftnl_batch_free(b->nb_b);
	free(b->nb_msgs);
	memset(b, 0, sizeof(*b));
}

/* The buffer the next message is built in, and its sequence number. */
static char *
nft_batch_buf(struct nft_batch *b)
{
	return nftnl_batch_buffer(b->nb_b);
}

/* Account for the message just built at nlh and move past it. */
static int
nft_batch_next(struct nft_batch *b, const struct nlmsghdr *nlh, uint16_t type,
    const char *what, char **cause)
{
	if (nlh->nlmsg_len > NFT_MSG_LIMIT) {
		/* Cannot happen with the bounds above; refuse rather than send. */
		util_cause(cause, "%s (%s) message of %u bytes exceeds %d", nft_msg_name(type),
		    what, nlh->nlmsg_len, NFT_MSG_LIMIT);
		return -1;
	}
	if (b->nb_n == b->nb_cap) {
		size_t cap = b->nb_cap ? 2 * b->nb_cap : 64;
		struct nft_msg *m = reallocarray(b->nb_msgs, cap, sizeof(*m));
		if (m == NULL) {
			util_cause(cause, "out of memory");
			return -1;
		}
		b->nb_msgs = m;
		b->nb_cap = cap;
	}
	if (nftnl_batch_update(b->nb_b) != 0) {
		util_cause(cause, "out of memory");
		return -1;
	}
	b->nb_msgs[b->nb_n].nm_type = type;
	b->nb_msgs[b->nb_n].nm_what = what;
	b->nb_n++;
	b->nb_seq++;
	return 0;
}

/* Put NFNL_MSG_BATCH_END; the context's next sequence number follows it. */
static int
nft_batch_finish(struct nft_ctx *ctx, struct nft_batch *b, char **cause)
{
	ctx->nc_seq = b->nb_seq + 1;
	nftnl_batch_end(nftnl_batch_buffer(b->nb_b), b->nb_seq);
	if (nftnl_batch_update(b->nb_b) != 0) {
		util_cause(cause, "out of memory");
		return -1;
	}
	return 0;
}

/* Raise a socket buffer (SO_SNDBUF or SO_RCVBUF) to at least want bytes. */
static int
nft_sockbuf(struct nft_ctx *ctx, int opt, int force, size_t want, char **cause)
{
	int fd = mnl_socket_get_fd(ctx->nc_nl), cur = 0, v;
	socklen_t len = sizeof(cur);

	if (getsockopt(fd, SOL_SOCKET, opt, &cur, &len) != 0) {
		util_cause(cause, "getsockopt: %s", strerror(errno));
		return -1;
	}
	/* The kernel reports twice the value set; it needs the headroom. */
	if (cur > 0 && (size_t)cur / 2 >= want)
		return 0;
	if (want > NFT_SOCKBUF_MAX) {
		util_cause(cause, "batch needs a %zu byte socket buffer", want);
		return -1;
	}
	v = (int)want;
	/* FORCE ignores the sysctl maximum and needs CAP_NET_ADMIN, which we have. */
	if (setsockopt(fd, SOL_SOCKET, force, &v, sizeof(v)) != 0 &&
	    setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v)) != 0) {
		util_cause(cause, "setsockopt to %zu bytes: %s", want, strerror(errno));
		return -1;
	}
	return 0;
}

/* Wait for and receive one datagram; -1 with errno (ETIMEDOUT at deadline). */
static ssize_t
nft_recv(struct nft_ctx *ctx, int64_t deadline)
{
	for (;;) {
		struct pollfd pfd = { .fd = mnl_socket_get_fd(ctx->nc_nl), .events = POLLIN };
		int64_t left = deadline - util_monotonic_ms();
		ssize_t r;
		int n;

		if (left <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		n = poll(&pfd, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		/* ENOSPC when a datagram did not fit (MSG_TRUNC). */
		r = mnl_socket_recvfrom(ctx->nc_nl, ctx->nc_buf, ctx->nc_buflen);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		return r;
	}
}

/*
 * Throw away whatever is queued on the socket: answers to a batch or dump
 * that timed out earlier must not be taken for answers to the next one.
 */
static int
nft_drain(struct nft_ctx *ctx, char **cause)
{
	for (int i = 0; i < NFT_DRAIN_MAX; i++) {
		ssize_t r = mnl_socket_recvfrom(ctx->nc_nl, ctx->nc_buf, ctx->nc_buflen);
		if (r >= 0 || errno == EINTR || errno == ENOBUFS || errno == ENOSPC)
			continue;
		if (errno == EAGAIN)
			return 0;
		util_cause(cause, "netlink recv: %s", strerror(errno));
		return -1;
	}
	util_cause(cause, "netlink socket does not drain");
	return -1;
}

/*
 * Send a finished batch and read one ack per message. On failure *cause
 * names the first message (in batch order) the kernel refused, its type
 * and errno; then nothing of the batch was applied.
 */
static int
nft_batch_run(struct nft_ctx *ctx, struct nft_batch *b, char **cause)
{
	struct sockaddr_nl snl = { .nl_family = AF_NETLINK };
	struct msghdr msg = { 0 };
	struct iovec *iov;
	int iovlen;
	size_t total = 0, left, first = SIZE_MAX;
	int first_err = 0, batch_err = 0;
	uint8_t *seen;
	int64_t deadline;
	ssize_t r;
	int len;

	if (nft_drain(ctx, cause) != 0)
		return -1;
	iovlen = nftnl_batch_iovec_len(b->nb_b);
	if (iovlen <= 0 || iovlen > IOV_MAX) {
		util_cause(cause, "batch of %d pages", iovlen);
		return -1;
	}
	iov = calloc((size_t)iovlen, sizeof(*iov));
	seen = calloc(b->nb_n ? b->nb_n : 1, 1);
	if (iov == NULL || seen == NULL) {
		free(iov);
		free(seen);
		util_cause(cause, "out of memory");
		return -1;
	}
	nftnl_batch_iovec(b->nb_b, iov, (uint32_t)iovlen);
	for (int i = 0; i < iovlen; i++)
		total += iov[i].iov_len;

	/*
	 * The whole batch goes in one datagram (nfnetlink only treats one skb
	 * as a transaction), so the send buffer must hold all of it; every ack
	 * is queued before sendmsg returns, so the receive buffer must hold
	 * all of them or some are dropped (ENOBUFS) and the outcome is unknown.
	 */
	if (nft_sockbuf(ctx, SO_SNDBUF, SO_SNDBUFFORCE, total + 4096, cause) != 0 ||
	    nft_sockbuf(ctx, SO_RCVBUF, SO_RCVBUFFORCE, b->nb_n * NFT_ACK_TRUESIZE + 65536,
	    cause) != 0)
		goto fail;

	msg.msg_name = &snl;
	msg.msg_namelen = sizeof(snl);
	msg.msg_iov = iov;
	msg.msg_iovlen = (size_t)iovlen;
	do
		r = sendmsg(mnl_socket_get_fd(ctx->nc_nl), &msg, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0 || (size_t)r != total) {
		util_cause(cause, "sending a %zu byte batch: %s", total,
		    r < 0 ? strerror(errno) : "short send");
		goto fail;
	}

	deadline = util_monotonic_ms() + NFT_ACK_TIMEOUT_MS;
	left = b->nb_n;
	while (left > 0 && batch_err == 0) {
		r = nft_recv(ctx, deadline);
		if (r < 0) {
			if (errno == ENOBUFS)
				util_cause(cause, "acks lost (receive buffer overrun); the outcome "
				    "of the batch is unknown");
			else
				util_cause(cause, "reading acks (%zu of %zu missing): %s; the "
				    "outcome of the batch is unknown", left, b->nb_n,
				    strerror(errno));
			goto fail;
		}
		len = (int)r;
		for (const struct nlmsghdr *nlh = (const struct nlmsghdr *)ctx->nc_buf;
		    mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len)) {
			const struct nlmsgerr *ne;
			uint32_t off = nlh->nlmsg_seq - b->nb_seq0;
			int err;

			if (nlh->nlmsg_pid != ctx->nc_portid || off > b->nb_n + 1 ||
			    nlh->nlmsg_type != NLMSG_ERROR)
				continue;
			if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*ne))) {
				util_cause(cause, "truncated netlink ack");
				goto fail;
			}
			ne = mnl_nlmsg_get_payload(nlh);
			err = ne->error < 0 ? -ne->error : ne->error;
			if (off == 0 || off == b->nb_n + 1) {
				/* The batch itself was refused: no other ack follows. */
				batch_err = err ? err : EPROTO;
				break;
			}
			if (seen[off - 1])
				continue;
			seen[off - 1] = 1;
			left--;
			if (err != 0 && off - 1 < first) {
				first = off - 1;
				first_err = err;
			}
		}
	}
	if (batch_err != 0) {
		util_cause(cause, "batch refused: %s", strerror(batch_err));
		goto fail;
	}
	if (first != SIZE_MAX) {
		util_cause(cause, "%s (%s) failed: %s", nft_msg_name(b->nb_msgs[first].nm_type),
		    b->nb_msgs[first].nm_what, strerror(first_err));
		goto fail;
	}
	free(iov);
	free(seen);
	return 0;
fail:
	free(iov);
	free(seen);
	return -1;
}

/*
 * Objects in a batch
 */

/* NEWTABLE or DELTABLE for name; comment (userdata) only on NEWTABLE. */
static int
nft_put_table(struct nft_batch *b, uint16_t type, uint16_t flags, const char *name,
    const char *comment, char **cause)
{
	struct nftnl_table *t = nftnl_table_alloc();
	struct nftnl_udata_buf *ud = NULL;
	struct nlmsghdr *nlh;
	int rc = -1;

	if (t == NULL || nftnl_table_set_str(t, NFTNL_TABLE_NAME, name) != 0)
		goto oom;
	nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
	/*
	 * No NFT_TABLE_F_OWNER: an owned table dies with our socket, and a
	 * crashed boundaryd must leave the confinement in place, not lift it.
	 */
	if (comment != NULL) {
		ud = nft_udata_comment(NFTNL_UDATA_TABLE_COMMENT, comment);
		if (ud == NULL || nftnl_table_set_data(t, NFTNL_TABLE_USERDATA,
		    nftnl_udata_buf_data(ud), nftnl_udata_buf_len(ud)) != 0)
			goto oom;
	}
	nlh = nftnl_table_nlmsg_build_hdr(nft_batch_buf(b), type, NFPROTO_INET,
	    flags | NLM_F_ACK, b->nb_seq);
	nftnl_table_nlmsg_build_payload(nlh, t);
	rc = nft_batch_next(b, nlh, type, name, cause);
	goto out;
oom:
	util_cause(cause, "out of memory");
out:
	if (ud != NULL)
		nftnl_udata_buf_free(ud);
	if (t != NULL)
		nftnl_table_free(t);
	return rc;
}

static int nft_put_chain_typed(struct nft_batch *b, uint16_t type, uint16_t flags,
    const char *table, const char *name, int hook, const char *ctype, int prio,
    const char *comment, char **cause);

/* NEWCHAIN or DELCHAIN; hook < 0 for a regular chain. */
static int
nft_put_chain(struct nft_batch *b, uint16_t type, uint16_t flags, const char *table,
    const char *name, int hook, const char *comment, char **cause)
{
	return nft_put_chain_typed(b, type, flags, table, name, hook, "filter", 0, comment, cause);
}

/* The same with a chain type ("filter", "nat") and a priority for a base chain. */
static int
nft_put_chain_typed(struct nft_batch *b, uint16_t type, uint16_t flags, const char *table,
    const char *name, int hook, const char *ctype, int prio, const char *comment, char **cause)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	struct nftnl_udata_buf *ud = NULL;
	struct nlmsghdr *nlh;
	int rc = -1;

	if (c == NULL || nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, table) != 0 ||
	    nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name) != 0)
		goto oom;
	nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
	if (hook >= 0) {
		if (nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, ctype) != 0)
			goto oom;
		nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, (uint32_t)hook);
		nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	}
	if (comment != NULL) {
		ud = nft_udata_comment(NFTNL_UDATA_CHAIN_COMMENT, comment);
		if (ud == NULL || nftnl_chain_set_data(c, NFTNL_CHAIN_USERDATA,
		    nftnl_udata_buf_data(ud), nftnl_udata_buf_len(ud)) != 0)
			goto oom;
	}
	nlh = nftnl_chain_nlmsg_build_hdr(nft_batch_buf(b), type, NFPROTO_INET,
	    flags | NLM_F_ACK, b->nb_seq);
	nftnl_chain_nlmsg_build_payload(nlh, c);
	rc = nft_batch_next(b, nlh, type, name, cause);
	goto out;
oom:
	util_cause(cause, "out of memory");
out:
	if (ud != NULL)
		nftnl_udata_buf_free(ud);
	if (c != NULL)
		nftnl_chain_free(c);
	return rc;
}

/* A set object with table, name, family and id (no key description). */
static struct nftnl_set *
nft_set_base(const char *table, const struct nft_setdef *sd)
{
	struct nftnl_set *s = nftnl_set_alloc();

	if (s == NULL)
		return NULL;
	if (nftnl_set_set_str(s, NFTNL_SET_TABLE, table) != 0 ||
	    nftnl_set_set_str(s, NFTNL_SET_NAME, sd->sd_name) != 0) {
		nftnl_set_free(s);
		return NULL;
	}
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	nftnl_set_set_u32(s, NFTNL_SET_ID, sd->sd_id);
	return s;
}

/*
 * NEWSET for `type ADDR . inet_proto . inet_service; flags interval`. The
 * key type is nft's concatenated datatype (each field's type shifted in by
 * 6 bits) so that nft(8) can list the set; the kernel needs the key length,
 * the field lengths (4 or 16, 1, 2; the kernel rounds each up to 4) and
 * INTERVAL|CONCAT, which selects the pipapo backend. An evidence set is a
 * plain hash of exact keys instead: flags dynamic, at most NFT_BLOCKED_MAX.
 */
static int
nft_put_set(struct nft_batch *b, const char *table, const struct nft_setdef *sd,
    int evidence, char **cause)
{
	struct nftnl_set *s = nft_set_base(table, sd);
	uint8_t fields[3];
	uint32_t addrtype, keytype;
	struct nlmsghdr *nlh;
	int rc;

	if (s == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	fields[0] = (uint8_t)nft_addr_len(sd->sd_family);
	fields[1] = 1;
	fields[2] = 2;
	addrtype = sd->sd_family == AF_INET ? NFT_TYPE_IPADDR : NFT_TYPE_IP6ADDR;
	keytype = (((addrtype << NFT_TYPE_BITS) | NFT_TYPE_INET_PROTOCOL) << NFT_TYPE_BITS) |
	    NFT_TYPE_INET_SERVICE;
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, keytype);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, (uint32_t)fields[0] + 4 + 4);
	if (evidence) {
		/* A bounded hash the packet path may add to (flags dynamic). */
		nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_EVAL);
		nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, NFT_BLOCKED_MAX);
	} else {
		nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_INTERVAL | NFT_SET_CONCAT |
		    (sd->sd_timeout ? NFT_SET_TIMEOUT : 0));
	}
	if (!evidence &&
	    nftnl_set_set_data(s, NFTNL_SET_DESC_CONCAT, fields, sizeof(fields)) != 0) {
		nftnl_set_free(s);
		util_cause(cause, "out of memory");
		return -1;
	}
	nlh = nftnl_set_nlmsg_build_hdr(nft_batch_buf(b), NFT_MSG_NEWSET, NFPROTO_INET,
	    NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK, b->nb_seq);
	nftnl_set_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	rc = nft_batch_next(b, nlh, NFT_MSG_NEWSET, sd->sd_name, cause);
	return rc;
}

/*
 * NEWOBJ for a named counter. Rules count into it by reference, so a
 * refill, which flushes and re-adds the rules, keeps what was counted.
 */
static int
nft_put_counter(struct nft_batch *b, const char *table, const char *name, char **cause)
{
	struct nftnl_obj *o = nftnl_obj_alloc();
	struct nlmsghdr *nlh;

	/* The setters return nothing; a failed copy leaves the attribute unset. */
	if (o != NULL) {
		nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, table);
		nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
	}
	if (o == NULL || !nftnl_obj_is_set(o, NFTNL_OBJ_TABLE) ||
	    !nftnl_obj_is_set(o, NFTNL_OBJ_NAME)) {
		if (o != NULL)
			nftnl_obj_free(o);
		util_cause(cause, "out of memory");
		return -1;
	}
	nftnl_obj_set_u32(o, NFTNL_OBJ_FAMILY, NFPROTO_INET);
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
	nlh = nftnl_nlmsg_build_hdr(nft_batch_buf(b), NFT_MSG_NEWOBJ, NFPROTO_INET,
	    NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK, b->nb_seq);
	nftnl_obj_nlmsg_build_payload(nlh, o);
	nftnl_obj_free(o);
	return nft_batch_next(b, nlh, NFT_MSG_NEWOBJ, name, cause);
}

/* Lay out the low (hi == 0) or high end of an element's key; returns its length. */
static uint32_t
nft_elem_key(const struct nft_elem *e, int hi, uint8_t *key)
{
	size_t alen = nft_addr_len(e->ne_family);
	uint16_t port = hi ? e->ne_port_hi : e->ne_port_lo;

	memset(key, 0, alen + 8);
	memcpy(key, hi ? e->ne_addr_hi : e->ne_addr_lo, alen);
	key[alen] = e->ne_proto;
	key[alen + 4] = (uint8_t)(port >> 8);	/* inet_service is big endian */
	key[alen + 5] = (uint8_t)(port & 0xff);
	return (uint32_t)(alen + 8);
}

/*
 * NEWSETELEM or DELSETELEM for the elements of v[] that belong to set sd
 * (by family), NFT_ELEMS_PER_MSG per message so every message stays far
 * below the 64 KiB an attribute nest can hold. All of them stay in the
 * same batch.
 */
static int
nft_put_elems(struct nft_batch *b, uint16_t type, const char *table,
    const struct nft_setdef *sd, const struct nft_elem *v, size_t n, char **cause)
{
	size_t i = 0;

	while (i < n) {
		struct nftnl_set *s = nft_set_base(table, sd);
		struct nlmsghdr *nlh;
		size_t k = 0;

		if (s == NULL) {
			util_cause(cause, "out of memory");
			return -1;
		}
		for (; i < n && k < NFT_ELEMS_PER_MSG; i++) {
			struct nftnl_set_elem *se;
			uint8_t key[24], end[24];
			uint32_t klen;

			if (v[i].ne_family != sd->sd_family)
				continue;
			klen = nft_elem_key(&v[i], 0, key);
			if (nft_elem_key(&v[i], 1, end) != klen) {
				nftnl_set_free(s);
				util_cause(cause, "element key length");
				return -1;
			}
			se = nftnl_set_elem_alloc();
			uint64_t tmo = v[i].ne_timeout_ms;
			if (se == NULL || nftnl_set_elem_set(se, NFTNL_SET_ELEM_KEY, key, klen) != 0 ||
			    nftnl_set_elem_set(se, NFTNL_SET_ELEM_KEY_END, end, klen) != 0 ||
			    (type == NFT_MSG_NEWSETELEM && sd->sd_timeout && tmo > 0 &&
				nftnl_set_elem_set(se, NFTNL_SET_ELEM_TIMEOUT, &tmo, sizeof(tmo)) != 0)) {
				if (se != NULL)
					nftnl_set_elem_free(se);
				nftnl_set_free(s);
				util_cause(cause, "out of memory");
				return -1;
			}
			nftnl_set_elem_add(s, se);
			k++;
		}
		if (k == 0) {
			nftnl_set_free(s);
			break;
		}
		/*
		 * No NLM_F_EXCL on NEWSETELEM: an element given twice is
		 * harmless, while an overlapping range is still refused.
		 */
		nlh = nftnl_set_elem_nlmsg_build_hdr(nft_batch_buf(b), type, NFPROTO_INET,
		    (type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0) | NLM_F_ACK, b->nb_seq);
		nftnl_set_elems_nlmsg_build_payload(nlh, s);
		nftnl_set_free(s);
		if (nft_batch_next(b, nlh, type, sd->sd_name, cause) != 0)
			return -1;
	}
	return 0;
}

/*
 * Expressions. Each adds one expression to r or returns -1 (out of memory);
 * the rule is freed by the caller.
 */

/* Set a u32 attribute (nftnl_expr_set_u32 cannot report failure). */
static int
nft_x_u32(struct nftnl_expr *e, uint16_t type, uint32_t v)
{
	return nftnl_expr_set(e, type, &v, sizeof(v));
}

/* Append e to r, or free it when building it failed. */
static int
nft_x_add(struct nftnl_rule *r, struct nftnl_expr *e, int failed)
{
	if (failed) {
		nftnl_expr_free(e);
		return -1;
	}
	nftnl_rule_add_expr(r, e);
	return 0;
}

/* meta load KEY => dreg. */
static int
nft_x_meta(struct nftnl_rule *r, uint32_t key, uint32_t dreg)
{
	struct nftnl_expr *e = nftnl_expr_alloc("meta");

	if (e == NULL)
		return -1;
	return nft_x_add(r, e, nft_x_u32(e, NFTNL_EXPR_META_KEY, key) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_META_DREG, dreg) != 0);
}

/* meta set KEY with sreg. */
static int
nft_x_meta_set(struct nftnl_rule *r, uint32_t key, uint32_t sreg)
{
	struct nftnl_expr *e = nftnl_expr_alloc("meta");

	if (e == NULL)
		return -1;
	return nft_x_add(r, e, nft_x_u32(e, NFTNL_EXPR_META_KEY, key) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_META_SREG, sreg) != 0);
}

/* payload load LEN bytes at BASE + OFF => dreg. */
static int
nft_x_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len, uint32_t dreg)
{
	struct nftnl_expr *e = nftnl_expr_alloc("payload");

	if (e == NULL)
		return -1;
	return nft_x_add(r, e, nft_x_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_PAYLOAD_DREG, dreg) != 0);
}

/* cmp eq sreg DATA. */
static int
nft_x_cmp_eq(struct nftnl_rule *r, uint32_t sreg, const void *data, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("cmp");

	if (e == NULL)
		return -1;
	return nft_x_add(r, e, nft_x_u32(e, NFTNL_EXPR_CMP_SREG, sreg) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ) != 0 ||
	    nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len) != 0);
}

/* lookup sreg @set (by name, and by id for a set created in this batch). */
static int
nft_x_lookup(struct nftnl_rule *r, uint32_t sreg, const struct nft_setdef *sd)
{
	struct nftnl_expr *e = nftnl_expr_alloc("lookup");

	if (e == NULL)
		return -1;
	return nft_x_add(r, e, nft_x_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg) != 0 ||
	    nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, sd->sd_name) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, sd->sd_id) != 0);
}

/* counter name NAME (a named counter object of the table). */
static int
nft_x_objref_counter(struct nftnl_rule *r, const char *name)
{
	struct nftnl_expr *e = nftnl_expr_alloc("objref");

	if (e == NULL)
		return -1;
	return nft_x_add(r, e, nft_x_u32(e, NFTNL_EXPR_OBJREF_IMM_TYPE, NFT_OBJECT_COUNTER) != 0 ||
	    nftnl_expr_set_str(e, NFTNL_EXPR_OBJREF_IMM_NAME, name) != 0);
}

/* update @set { key in sreg.. counter }: the element is added if absent. */
static int
nft_x_dynset_counter(struct nftnl_rule *r, uint32_t sreg, const struct nft_setdef *sd)
{
	struct nftnl_expr *e = nftnl_expr_alloc("dynset");
	struct nftnl_expr *c;

	if (e == NULL)
		return -1;
	if (nft_x_u32(e, NFTNL_EXPR_DYNSET_SREG_KEY, sreg) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_DYNSET_OP, NFT_DYNSET_OP_UPDATE) != 0 ||
	    nftnl_expr_set_str(e, NFTNL_EXPR_DYNSET_SET_NAME, sd->sd_name) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_DYNSET_SET_ID, sd->sd_id) != 0 ||
	    (c = nftnl_expr_alloc("counter")) == NULL)
		return nft_x_add(r, e, 1);
	/* The dynset owns the counter from here on. */
	if (nftnl_expr_set(e, NFTNL_EXPR_DYNSET_EXPR, c, 0) != 0) {
		nftnl_expr_free(c);
		return nft_x_add(r, e, 1);
	}
	return nft_x_add(r, e, 0);
}

/* Verdict: accept (chain NULL) or jump chain. */
static int
nft_x_verdict(struct nftnl_rule *r, int verdict, const char *chain)
{
	struct nftnl_expr *e = nftnl_expr_alloc("immediate");

	if (e == NULL)
		return -1;
	return nft_x_add(r, e, nft_x_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict) != 0 ||
	    (chain != NULL && nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain) != 0));
}

/* immediate dreg DATA. */
static int
nft_x_imm_data(struct nftnl_rule *r, uint32_t dreg, const void *data, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("immediate");

	if (e == NULL)
		return -1;
	return nft_x_add(r, e, nft_x_u32(e, NFTNL_EXPR_IMM_DREG, dreg) != 0 ||
	    nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, data, len) != 0);
}

/* socket cgroupv2 level L => dreg (the 8-byte id of the level-L ancestor). */
static int
nft_x_socket_cgroup(struct nftnl_rule *r, uint32_t level, uint32_t dreg)
{
	struct nftnl_expr *e = nftnl_expr_alloc("socket");

	if (e == NULL)
		return -1;
	return nft_x_add(r, e, nft_x_u32(e, NFTNL_EXPR_SOCKET_KEY, NFT_SOCKET_CGROUPV2) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_SOCKET_LEVEL, level) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_SOCKET_DREG, dreg) != 0);
}

/* reject TYPE CODE. */
static int
nft_x_reject(struct nftnl_rule *r, uint32_t type, uint8_t code)
{
	struct nftnl_expr *e = nftnl_expr_alloc("reject");

	if (e == NULL)
		return -1;
	return nft_x_add(r, e, nft_x_u32(e, NFTNL_EXPR_REJECT_TYPE, type) != 0 ||
	    nftnl_expr_set(e, NFTNL_EXPR_REJECT_CODE, &code, sizeof(code)) != 0);
}

/* `meta nfproto ipv4|ipv6`. */
static int
nft_x_nfproto(struct nftnl_rule *r, int family)
{
	uint8_t nfproto = family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6;

	if (nft_x_meta(r, NFT_META_NFPROTO, NFT_REG_1) != 0 ||
	    nft_x_cmp_eq(r, NFT_REG_1, &nfproto, sizeof(nfproto)) != 0)
		return -1;
	return 0;
}

/*
 * `ip[6] daddr . meta l4proto . th dport @set`: the three fields go to
 * consecutive 32-bit registers, the layout the set key describes.
 */
static int
nft_x_envelope_match(struct nftnl_rule *r, const struct nft_setdef *sd)
{
	int v4 = sd->sd_family == AF_INET;
	uint32_t proto_reg = v4 ? NFT_REG32_01 : NFT_REG32_04;

	if (nft_x_nfproto(r, sd->sd_family) != 0 ||
	    nft_x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, v4 ? 16 : 24, v4 ? 4 : 16,
	    NFT_REG32_00) != 0 ||
	    nft_x_meta(r, NFT_META_L4PROTO, proto_reg) != 0 ||
	    nft_x_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, proto_reg + 1) != 0 ||
	    nft_x_lookup(r, NFT_REG32_00, sd) != 0)
		return -1;
	return 0;
}

/* The rules, one builder each. */
enum nft_rule_kind {
	NFT_R_CGROUP,		/* socket cgroupv2 level L ID jump envelope */
	NFT_R_SADDR,		/* ip[6] saddr SRC jump envelope */
	NFT_R_DENY4,		/* ... @deny4 jump blocked */
	NFT_R_DENY6,
	NFT_R_ALLOW4,		/* ... @allow4 counter name "allowed" accept */
	NFT_R_ALLOW6,
	NFT_R_JUMP_BLOCKED,	/* jump blocked */
	NFT_R_COUNTER_ACCEPT,	/* counter name "allowed" accept */
	NFT_R_NFTRACE,		/* meta nftrace set 1 */
	NFT_R_RECORD4_TCP,	/* meta nfproto ipv4 meta l4proto tcp update @blocked4 {... counter} */
	NFT_R_RECORD4_UDP,
	NFT_R_RECORD6_TCP,
	NFT_R_RECORD6_UDP,
	NFT_R_TCP_RESET,	/* meta l4proto tcp counter name "blocked" reject with tcp reset */
	NFT_R_ICMPX,		/* counter name "blocked" reject with icmpx admin-prohibited */
	NFT_R_DNS_UDP,		/* SUBJECT meta nfproto F udp dport 53 dnat F to PROXY */
	NFT_R_DNS_TCP,		/* SUBJECT meta nfproto F tcp dport 53 dnat F to PROXY */
	NFT_R_CONNECT_GUARD,	/* meta nfproto F ip daddr L tcp dport P reject with tcp reset */
};

#define NFT_CHAIN_DNS "dnsredirect"


/*
 * `meta nfproto F meta l4proto P update @blockedF { ADDR . meta l4proto .
 * th dport counter }`: only TCP and UDP, the protocols grants name; other
 * rejects are counted by the `blocked` counter alone.
 */
static int
nft_x_record_blocked(struct nftnl_rule *r, int family, uint8_t proto)
{
	const struct nft_setdef *sd = family == AF_INET ? NFT_SET_BLOCKED4 : NFT_SET_BLOCKED6;
	int v4 = family == AF_INET;
	uint32_t proto_reg = v4 ? NFT_REG32_01 : NFT_REG32_04;

	if (nft_x_nfproto(r, family) != 0 ||
	    nft_x_meta(r, NFT_META_L4PROTO, NFT_REG_1) != 0 ||
	    nft_x_cmp_eq(r, NFT_REG_1, &proto, sizeof(proto)) != 0 ||
	    nft_x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, v4 ? 16 : 24, v4 ? 4 : 16,
	    NFT_REG32_00) != 0 ||
	    nft_x_meta(r, NFT_META_L4PROTO, proto_reg) != 0 ||
	    nft_x_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, proto_reg + 1) != 0 ||
	    nft_x_dynset_counter(r, NFT_REG32_00, sd) != 0)
		return -1;
	return 0;
}

/*
 * `<subject> meta nfproto F meta l4proto P th dport 53 dnat F to PROXY`:
 * the subject match is the same as the envelope jump's (cgroup socket or
 * source address), so no other traffic is redirected.
 */
static int
nft_x_dns_redirect(struct nftnl_rule *r, const struct nft_policy *p, uint8_t proto)
{
	uint16_t dport = htons(53), pport = htons(p->np_dns_port);
	int v4 = p->np_dns_family == AF_INET;
	struct nftnl_expr *e;

	if (p->np_subject == NFT_SUBJECT_CGROUP) {
		if (nft_x_socket_cgroup(r, (uint32_t)p->np_cgroup_level, NFT_REG_1) != 0 ||
		    nft_x_cmp_eq(r, NFT_REG_1, &p->np_cgroup_id, sizeof(p->np_cgroup_id)) != 0 ||
		    nft_x_nfproto(r, p->np_dns_family) != 0)
			return -1;
	} else if (nft_x_nfproto(r, p->np_src_family) != 0 ||
	    nft_x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, v4 ? 12 : 8, v4 ? 4 : 16, NFT_REG_1) != 0 ||
	    nft_x_cmp_eq(r, NFT_REG_1, p->np_src_addr, v4 ? 4 : 16) != 0) {
		return -1;
	}
	if (nft_x_meta(r, NFT_META_L4PROTO, NFT_REG_1) != 0 ||
	    nft_x_cmp_eq(r, NFT_REG_1, &proto, sizeof(proto)) != 0 ||
	    nft_x_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG_1) != 0 ||
	    nft_x_cmp_eq(r, NFT_REG_1, &dport, sizeof(dport)) != 0 ||
	    nft_x_imm_data(r, NFT_REG_1, p->np_dns_addr, v4 ? 4 : 16) != 0 ||
	    nft_x_imm_data(r, NFT_REG_2, &pport, sizeof(pport)) != 0)
		return -1;
	if ((e = nftnl_expr_alloc("nat")) == NULL)
		return -1;
	return nft_x_add(r, e, nft_x_u32(e, NFTNL_EXPR_NAT_TYPE, NFT_NAT_DNAT) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_NAT_FAMILY, v4 ? NFPROTO_IPV4 : NFPROTO_IPV6) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_NAT_REG_ADDR_MIN, NFT_REG_1) != 0 ||
	    nft_x_u32(e, NFTNL_EXPR_NAT_REG_PROTO_MIN, NFT_REG_2) != 0);
}

/* Add the expressions of one rule kind to r. */
static int
nft_rule_exprs(struct nftnl_rule *r, enum nft_rule_kind kind, const struct nft_policy *p)
{
	uint8_t one = 1, tcp = IPPROTO_TCP;
	int fam;

	switch (kind) {
	case NFT_R_CGROUP:
		return nft_x_socket_cgroup(r, (uint32_t)p->np_cgroup_level, NFT_REG_1) != 0 ||
		    nft_x_cmp_eq(r, NFT_REG_1, &p->np_cgroup_id, sizeof(p->np_cgroup_id)) != 0 ||
		    nft_x_verdict(r, NFT_JUMP, NFT_CHAIN_ENVELOPE) != 0 ? -1 : 0;
	case NFT_R_SADDR: {
		int v4 = p->np_src_family == AF_INET;
		return nft_x_nfproto(r, p->np_src_family) != 0 ||
		    nft_x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, v4 ? 12 : 8, v4 ? 4 : 16,
		    NFT_REG_1) != 0 ||
		    nft_x_cmp_eq(r, NFT_REG_1, p->np_src_addr, v4 ? 4 : 16) != 0 ||
		    nft_x_verdict(r, NFT_JUMP, NFT_CHAIN_ENVELOPE) != 0 ? -1 : 0;
	}
	case NFT_R_DENY4:
	case NFT_R_DENY6:
		return nft_x_envelope_match(r, kind == NFT_R_DENY4 ? NFT_SET_DENY4 :
		    NFT_SET_DENY6) != 0 ||
		    nft_x_verdict(r, NFT_JUMP, NFT_CHAIN_BLOCKED) != 0 ? -1 : 0;
	case NFT_R_ALLOW4:
	case NFT_R_ALLOW6:
		return nft_x_envelope_match(r, kind == NFT_R_ALLOW4 ? NFT_SET_ALLOW4 :
		    NFT_SET_ALLOW6) != 0 ||
		    nft_x_objref_counter(r, NFT_COUNTER_ALLOWED) != 0 ||
		    nft_x_verdict(r, NF_ACCEPT, NULL) != 0 ? -1 : 0;
	case NFT_R_JUMP_BLOCKED:
		return nft_x_verdict(r, NFT_JUMP, NFT_CHAIN_BLOCKED);
	case NFT_R_COUNTER_ACCEPT:
		return nft_x_objref_counter(r, NFT_COUNTER_ALLOWED) != 0 ||
		    nft_x_verdict(r, NF_ACCEPT, NULL) != 0 ? -1 : 0;
	case NFT_R_NFTRACE:
		/* The trace bit is what sensord's trace listener keys on. */
		return nft_x_imm_data(r, NFT_REG_1, &one, sizeof(one)) != 0 ||
		    nft_x_meta_set(r, NFT_META_NFTRACE, NFT_REG_1) != 0 ? -1 : 0;
	case NFT_R_RECORD4_TCP:
	case NFT_R_RECORD4_UDP:
	case NFT_R_RECORD6_TCP:
	case NFT_R_RECORD6_UDP:
		fam = kind == NFT_R_RECORD4_TCP || kind == NFT_R_RECORD4_UDP ? AF_INET : AF_INET6;
		return nft_x_record_blocked(r, fam, kind == NFT_R_RECORD4_TCP ||
		    kind == NFT_R_RECORD6_TCP ? IPPROTO_TCP : IPPROTO_UDP);
	case NFT_R_TCP_RESET:
		return nft_x_meta(r, NFT_META_L4PROTO, NFT_REG_1) != 0 ||
		    nft_x_cmp_eq(r, NFT_REG_1, &tcp, sizeof(tcp)) != 0 ||
		    nft_x_objref_counter(r, NFT_COUNTER_BLOCKED) != 0 ||
		    nft_x_reject(r, NFT_REJECT_TCP_RST, 0) != 0 ? -1 : 0;
	case NFT_R_ICMPX:
		return nft_x_objref_counter(r, NFT_COUNTER_BLOCKED) != 0 ||
		    nft_x_reject(r, NFT_REJECT_ICMPX_UNREACH,
		    NFT_REJECT_ICMPX_ADMIN_PROHIBITED) != 0 ? -1 : 0;
	case NFT_R_CONNECT_GUARD: {
		/* Only sockets outside the cgroup get here: its own jumped to the envelope. */
		int v4c = p->np_connect_family == AF_INET;
		uint16_t cport = htons(p->np_connect_port);
		return nft_x_nfproto(r, p->np_connect_family) != 0 ||
		    nft_x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, v4c ? 16 : 24, v4c ? 4 : 16,
		    NFT_REG_1) != 0 ||
		    nft_x_cmp_eq(r, NFT_REG_1, p->np_connect_addr, v4c ? 4 : 16) != 0 ||
		    nft_x_meta(r, NFT_META_L4PROTO, NFT_REG_1) != 0 ||
		    nft_x_cmp_eq(r, NFT_REG_1, &tcp, sizeof(tcp)) != 0 ||
		    nft_x_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG_1) != 0 ||
		    nft_x_cmp_eq(r, NFT_REG_1, &cport, sizeof(cport)) != 0 ||
		    nft_x_reject(r, NFT_REJECT_TCP_RST, 0) != 0 ? -1 : 0;
	}
	case NFT_R_DNS_UDP:
		return nft_x_dns_redirect(r, p, IPPROTO_UDP);
	case NFT_R_DNS_TCP:
		return nft_x_dns_redirect(r, p, IPPROTO_TCP);
	}
	return -1;
}

/* NEWRULE appending one rule of the given kind to table/chain. */
static int
nft_put_rule(struct nft_batch *b, const char *table, const char *chain,
    enum nft_rule_kind kind, const struct nft_policy *p, char **cause)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct nlmsghdr *nlh;
	int rc;

	if (r == NULL || nftnl_rule_set_str(r, NFTNL_RULE_TABLE, table) != 0 ||
	    nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain) != 0 ||
	    nft_rule_exprs(r, kind, p) != 0) {
		if (r != NULL)
			nftnl_rule_free(r);
		util_cause(cause, "out of memory");
		return -1;
	}
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	nlh = nftnl_rule_nlmsg_build_hdr(nft_batch_buf(b), NFT_MSG_NEWRULE, NFPROTO_INET,
	    NLM_F_CREATE | NLM_F_APPEND | NLM_F_ACK, b->nb_seq);
	nftnl_rule_nlmsg_build_payload(nlh, r);
	nftnl_rule_free(r);
	rc = nft_batch_next(b, nlh, NFT_MSG_NEWRULE, chain, cause);
	return rc;
}

/*
 * Put NEWTABLE + DELTABLE: afterwards the table is gone whether or not it
 * existed (DELTABLE alone fails on a missing table, and nf_tables on older
 * kernels has no DESTROYTABLE).
 */
static int
nft_put_table_reset(struct nft_batch *b, const char *table, char **cause)
{
	if (nft_put_table(b, NFT_MSG_NEWTABLE, NLM_F_CREATE, table, NULL, cause) != 0 ||
	    nft_put_table(b, NFT_MSG_DELTABLE, 0, table, NULL, cause) != 0)
		return -1;
	return 0;
}

/* Build the whole generation of p into b (after the batch begin). */
static int nft_build_rules(struct nft_batch *b, const struct nft_policy *p, char **cause);

static int
nft_build_generation(struct nft_batch *b, const struct nft_policy *p, char **cause)
{
	const char *t = p->np_table;
	char comment[NFTNL_UDATA_COMMENT_MAXLEN];

	nft_comment_format(comment, sizeof(comment), p->np_generation, p->np_owner);
	if (nft_put_table_reset(b, t, cause) != 0 ||
	    nft_put_table(b, NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL, t, comment,
	    cause) != 0)
		return -1;
	for (size_t i = 0; i < nitems(nft_sets); i++)
		if (nft_put_set(b, t, &nft_sets[i], 0, cause) != 0)
			return -1;
	for (size_t i = 0; i < nitems(nft_evidence_sets); i++)
		if (nft_put_set(b, t, &nft_evidence_sets[i], 1, cause) != 0)
			return -1;
	if (nft_put_counter(b, t, NFT_COUNTER_ALLOWED, cause) != 0 ||
	    nft_put_counter(b, t, NFT_COUNTER_BLOCKED, cause) != 0)
		return -1;
	if (nft_put_elems(b, NFT_MSG_NEWSETELEM, t, NFT_SET_ALLOW4, p->np_allow, p->np_nallow,
	    cause) != 0 ||
	    nft_put_elems(b, NFT_MSG_NEWSETELEM, t, NFT_SET_ALLOW6, p->np_allow, p->np_nallow,
	    cause) != 0 ||
	    nft_put_elems(b, NFT_MSG_NEWSETELEM, t, NFT_SET_DENY4, p->np_deny, p->np_ndeny,
	    cause) != 0 ||
	    nft_put_elems(b, NFT_MSG_NEWSETELEM, t, NFT_SET_DENY6, p->np_deny, p->np_ndeny,
	    cause) != 0)
		return -1;

	/*
	 * Chains in the order nft_policy_text() prints them, so that both
	 * paths list identically; rules only once every chain exists. The
	 * hooks take effect with the rest of the batch at commit.
	 */
	switch (p->np_subject) {
	case NFT_SUBJECT_CGROUP:
		if (nft_put_chain(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, t, "output",
		    NF_INET_LOCAL_OUT, NULL, cause) != 0)
			return -1;
		break;
	case NFT_SUBJECT_SOURCE_ADDRESS:
		if (nft_put_chain(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, t, "forward",
		    NF_INET_FORWARD, NULL, cause) != 0 ||
		    nft_put_chain(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, t, "input",
		    NF_INET_LOCAL_IN, NULL, cause) != 0)
			return -1;
		break;
	}
	/* dstnat priority: before the filter chains, which then see the proxy's address. */
	if (p->np_dns_family != 0 &&
	    nft_put_chain_typed(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, t, NFT_CHAIN_DNS,
	    p->np_subject == NFT_SUBJECT_CGROUP ? NF_INET_LOCAL_OUT : NF_INET_PRE_ROUTING, "nat",
	    -100, NULL, cause) != 0)
		return -1;
	if (nft_put_chain(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, t, NFT_CHAIN_ENVELOPE,
	    -1, NULL, cause) != 0 ||
	    nft_put_chain(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, t, NFT_CHAIN_BLOCKED,
	    -1, NULL, cause) != 0)
		return -1;

	return nft_build_rules(b, p, cause);
}

/* Every rule of generation p, appended to chains that exist. */
static int
nft_build_rules(struct nft_batch *b, const struct nft_policy *p, char **cause)
{
	static const enum nft_rule_kind blocked[] = { NFT_R_NFTRACE, NFT_R_RECORD4_TCP,
	    NFT_R_RECORD4_UDP, NFT_R_RECORD6_TCP, NFT_R_RECORD6_UDP, NFT_R_TCP_RESET,
	    NFT_R_ICMPX };
	static const enum nft_rule_kind allowlist[] = { NFT_R_DENY4, NFT_R_DENY6,
	    NFT_R_ALLOW4, NFT_R_ALLOW6, NFT_R_JUMP_BLOCKED };
	/*
	 * Monitor: the deny list is rejected; what the grants allow is
	 * accepted; everything else is accepted too, after its destination is
	 * counted in the blocked sets (the update is no verdict): what an
	 * allowlist of these grants would have blocked, to learn a policy from.
	 */
	static const enum nft_rule_kind denylist[] = { NFT_R_DENY4, NFT_R_DENY6,
	    NFT_R_ALLOW4, NFT_R_ALLOW6, NFT_R_RECORD4_TCP, NFT_R_RECORD4_UDP,
	    NFT_R_RECORD6_TCP, NFT_R_RECORD6_UDP, NFT_R_COUNTER_ACCEPT };
	const enum nft_rule_kind *env;
	size_t nenv;
	const char *t = p->np_table;

	switch (p->np_subject) {
	case NFT_SUBJECT_CGROUP:
		if (nft_put_rule(b, t, "output", NFT_R_CGROUP, p, cause) != 0)
			return -1;
		if (p->np_connect_family != 0 &&
		    nft_put_rule(b, t, "output", NFT_R_CONNECT_GUARD, p, cause) != 0)
			return -1;
		break;
	case NFT_SUBJECT_SOURCE_ADDRESS:
		if (nft_put_rule(b, t, "forward", NFT_R_SADDR, p, cause) != 0 ||
		    nft_put_rule(b, t, "input", NFT_R_SADDR, p, cause) != 0)
			return -1;
		break;
	}
	if (p->np_dns_family != 0 &&
	    (nft_put_rule(b, t, NFT_CHAIN_DNS, NFT_R_DNS_UDP, p, cause) != 0 ||
	    nft_put_rule(b, t, NFT_CHAIN_DNS, NFT_R_DNS_TCP, p, cause) != 0))
		return -1;
	if (p->np_mode == NFT_MODE_ALLOWLIST) {
		env = allowlist;
		nenv = nitems(allowlist);
	} else {
		env = denylist;
		nenv = nitems(denylist);
	}
	for (size_t i = 0; i < nenv; i++)
		if (nft_put_rule(b, t, NFT_CHAIN_ENVELOPE, env[i], p, cause) != 0)
			return -1;
	for (size_t i = 0; i < nitems(blocked); i++)
		if (nft_put_rule(b, t, NFT_CHAIN_BLOCKED, blocked[i], p, cause) != 0)
			return -1;
	return 0;
}

/*
 * Entry points
 */

/* Open and bind the nf_tables netlink socket. */
int
nft_open(struct nft_ctx **out, char **cause)
{
	struct nft_ctx *ctx;
	int fd, fl, one = 1;

	*out = NULL;
	ctx = calloc(1, sizeof(*ctx));
	if (ctx == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	ctx->nc_buflen = (size_t)MNL_SOCKET_BUFFER_SIZE;
	ctx->nc_buf = malloc(ctx->nc_buflen);
	if (ctx->nc_buf == NULL) {
		util_cause(cause, "out of memory");
		goto fail;
	}
	/* CLOEXEC: agents started by boundaryd must not inherit an nf_tables socket. */
	ctx->nc_nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (ctx->nc_nl == NULL) {
		util_cause(cause, "netlink socket: %s", strerror(errno));
		goto fail;
	}
	if (mnl_socket_bind(ctx->nc_nl, 0, MNL_SOCKET_AUTOPID) != 0) {
		util_cause(cause, "netlink bind: %s", strerror(errno));
		goto fail;
	}
	ctx->nc_portid = mnl_socket_get_portid(ctx->nc_nl);
	fd = mnl_socket_get_fd(ctx->nc_nl);
	/* Nonblocking: every wait is a poll() with a deadline. */
	if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
		util_cause(cause, "netlink socket: fcntl: %s", strerror(errno));
		goto fail;
	}
	/*
	 * Error acks carry only the header of the refused message, not its
	 * whole payload (up to 64 KiB for elements), so every ack fits a
	 * MNL_SOCKET_BUFFER_SIZE read.
	 */
	if (mnl_socket_setsockopt(ctx->nc_nl, NETLINK_CAP_ACK, &one, sizeof(one)) != 0) {
		util_cause(cause, "netlink NETLINK_CAP_ACK: %s", strerror(errno));
		goto fail;
	}
	ctx->nc_seq = (uint32_t)time(NULL);
	*out = ctx;
	return 0;
fail:
	nft_close(ctx);
	return -1;
}

/* Close the socket and free the context. */
void
nft_close(struct nft_ctx *ctx)
{
	if (ctx == NULL)
		return;
	if (ctx->nc_nl != NULL && mnl_socket_close(ctx->nc_nl) != 0)
		log_warn("nft: closing the netlink socket");
	free(ctx->nc_buf);
	free(ctx);
}

/* Replace table p->np_table by generation p in one batch. */
int
nft_generation_commit(struct nft_ctx *ctx, const struct nft_policy *p, char **cause)
{
	struct nft_batch b;
	int rc = -1;

	if (nft_policy_check(p, cause) != 0)
		return -1;
	if (nft_batch_init(ctx, &b, cause) != 0)
		return -1;
	if (nft_build_generation(&b, p, cause) == 0 && nft_batch_finish(ctx, &b, cause) == 0 &&
	    nft_batch_run(ctx, &b, cause) == 0)
		rc = 0;
	nft_batch_free(&b);
	return rc;
}

/* DELSETELEM without elements: flush every element of set sd. */
static int
nft_put_set_flush(struct nft_batch *b, const char *table, const struct nft_setdef *sd,
    char **cause)
{
	struct nftnl_set *s = nft_set_base(table, sd);
	struct nlmsghdr *nlh;

	if (s == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	nlh = nftnl_set_elem_nlmsg_build_hdr(nft_batch_buf(b), NFT_MSG_DELSETELEM, NFPROTO_INET,
	    NLM_F_ACK, b->nb_seq);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	return nft_batch_next(b, nlh, NFT_MSG_DELSETELEM, sd->sd_name, cause);
}

/* DELRULE without a handle: flush every rule of table/chain. */
static int
nft_put_chain_flush(struct nft_batch *b, const char *table, const char *chain, char **cause)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct nlmsghdr *nlh;

	if (r == NULL || nftnl_rule_set_str(r, NFTNL_RULE_TABLE, table) != 0 ||
	    nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain) != 0) {
		if (r != NULL)
			nftnl_rule_free(r);
		util_cause(cause, "out of memory");
		return -1;
	}
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	nlh = nftnl_rule_nlmsg_build_hdr(nft_batch_buf(b), NFT_MSG_DELRULE, NFPROTO_INET,
	    NLM_F_ACK, b->nb_seq);
	nftnl_rule_nlmsg_build_payload(nlh, r);
	nftnl_rule_free(r);
	return nft_batch_next(b, nlh, NFT_MSG_DELRULE, chain, cause);
}

/* The generation marker chain (see nft.h): create, delete, create with comment. */
static int
nft_put_generation_marker(struct nft_batch *b, const char *table, uint64_t generation,
    char **cause)
{
	char comment[NFTNL_UDATA_COMMENT_MAXLEN];

	nft_comment_format(comment, sizeof(comment), generation, NULL);
	if (nft_put_chain(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE, table, NFT_CHAIN_GENERATION, -1,
	    NULL, cause) != 0 ||
	    nft_put_chain(b, NFT_MSG_DELCHAIN, 0, table, NFT_CHAIN_GENERATION, -1, NULL,
	    cause) != 0 ||
	    nft_put_chain(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, table,
	    NFT_CHAIN_GENERATION, -1, comment, cause) != 0)
		return -1;
	return 0;
}

/* Refill an existing table with generation p in one batch. */
int
nft_generation_refill(struct nft_ctx *ctx, const struct nft_policy *p, char **cause)
{
	static const char *const cgroup_chains[] = { "output", NFT_CHAIN_ENVELOPE,
	    NFT_CHAIN_BLOCKED };
	static const char *const address_chains[] = { "forward", "input", NFT_CHAIN_ENVELOPE,
	    NFT_CHAIN_BLOCKED };
	const char *const *chains = p->np_subject == NFT_SUBJECT_CGROUP ? cgroup_chains :
	    address_chains;
	size_t nchains = p->np_subject == NFT_SUBJECT_CGROUP ? nitems(cgroup_chains) :
	    nitems(address_chains);
	const char *t = p->np_table;
	struct nft_batch b;
	int rc = -1;

	if (nft_policy_check(p, cause) != 0)
		return -1;
	if (nft_batch_init(ctx, &b, cause) != 0)
		return -1;
	/*
	 * A missing table makes the marker's first NEWCHAIN fail, a missing
	 * set its flush, a missing chain its rule flush: then nothing applies.
	 */
	if (nft_put_generation_marker(&b, t, p->np_generation, cause) != 0)
		goto out;
	for (size_t i = 0; i < nitems(nft_sets); i++)
		if (nft_put_set_flush(&b, t, &nft_sets[i], cause) != 0)
			goto out;
	if (nft_put_elems(&b, NFT_MSG_NEWSETELEM, t, NFT_SET_ALLOW4, p->np_allow, p->np_nallow,
	    cause) != 0 ||
	    nft_put_elems(&b, NFT_MSG_NEWSETELEM, t, NFT_SET_ALLOW6, p->np_allow, p->np_nallow,
	    cause) != 0 ||
	    nft_put_elems(&b, NFT_MSG_NEWSETELEM, t, NFT_SET_DENY4, p->np_deny, p->np_ndeny,
	    cause) != 0 ||
	    nft_put_elems(&b, NFT_MSG_NEWSETELEM, t, NFT_SET_DENY6, p->np_deny, p->np_ndeny,
	    cause) != 0)
		goto out;
	for (size_t i = 0; i < nchains; i++)
		if (nft_put_chain_flush(&b, t, chains[i], cause) != 0)
			goto out;
	if (p->np_dns_family != 0 && nft_put_chain_flush(&b, t, NFT_CHAIN_DNS, cause) != 0)
		goto out;
	if (nft_build_rules(&b, p, cause) == 0 && nft_batch_finish(ctx, &b, cause) == 0 &&
	    nft_batch_run(ctx, &b, cause) == 0)
		rc = 0;
out:
	nft_batch_free(&b);
	return rc;
}

/* Change allow-set elements and record the generation in one batch. */
int
nft_elements_update(struct nft_ctx *ctx, const char *table, uint64_t generation,
    const struct nft_elem *add, size_t nadd, const struct nft_elem *del, size_t ndel,
    char **cause)
{
	struct nft_batch b;
	int rc = -1;

	if (!nft_table_name_ok(table)) {
		util_cause(cause, "not a %s table name", NFT_TABLE_PREFIX);
		return -1;
	}
	if (nft_elems_check(add, nadd, "add", cause) != 0 ||
	    nft_elems_check(del, ndel, "delete", cause) != 0)
		return -1;
	if (nft_batch_init(ctx, &b, cause) != 0)
		return -1;
	/*
	 * The generation marker: NEWCHAIN (creates it if missing, else a
	 * no-op), DELCHAIN, NEWCHAIN with the new comment. If the table is
	 * gone the first NEWCHAIN fails and so does the whole batch.
	 * Deletions go before additions so that a grant can be replaced by an
	 * overlapping one in one update.
	 */
	if (nft_put_generation_marker(&b, table, generation, cause) == 0 &&
	    nft_put_elems(&b, NFT_MSG_DELSETELEM, table, NFT_SET_ALLOW4, del, ndel, cause) == 0 &&
	    nft_put_elems(&b, NFT_MSG_DELSETELEM, table, NFT_SET_ALLOW6, del, ndel, cause) == 0 &&
	    nft_put_elems(&b, NFT_MSG_NEWSETELEM, table, NFT_SET_ALLOW4, add, nadd, cause) == 0 &&
	    nft_put_elems(&b, NFT_MSG_NEWSETELEM, table, NFT_SET_ALLOW6, add, nadd, cause) == 0 &&
	    nft_batch_finish(ctx, &b, cause) == 0 && nft_batch_run(ctx, &b, cause) == 0)
		rc = 0;
	nft_batch_free(&b);
	return rc;
}

/* One batch: create the table if missing, then delete it (never fails for a missing one). */
static int
nft_table_reset_run(struct nft_ctx *ctx, const char *table, char **cause)
{
	struct nft_batch b;
	int rc = -1;

	if (nft_batch_init(ctx, &b, cause) != 0)
		return -1;
	if (nft_put_table_reset(&b, table, cause) == 0 && nft_batch_finish(ctx, &b, cause) == 0 &&
	    nft_batch_run(ctx, &b, cause) == 0)
		rc = 0;
	nft_batch_free(&b);
	return rc;
}

/* Delete one of our tables; a missing one is not an error. */
int
nft_table_delete(struct nft_ctx *ctx, const char *table, char **cause)
{
	if (!nft_table_name_ok(table)) {
		util_cause(cause, "not a %s table name", NFT_TABLE_PREFIX);
		return -1;
	}
	return nft_table_reset_run(ctx, table, cause);
}

static int
nft_anchor_name_ok(const char *name)
{
	size_t plen = strlen(NFT_ANCHOR_PREFIX), len = strlen(name);

	return strncmp(name, NFT_ANCHOR_PREFIX, plen) == 0 && len > plen &&
	    len < NFT_TABLE_NAME_MAX && strspn(name + plen, "0123456789abcdef") == len - plen;
}

int
nft_anchor_install(struct nft_ctx *ctx, const char *name, char **cause)
{
	static const struct {
		const char *name;
		int hook;
	} hooks[] = {
		{ "output", NF_INET_LOCAL_OUT },
		{ "input", NF_INET_LOCAL_IN },
		{ "forward", NF_INET_FORWARD },
	};
	static const struct nft_policy pin_policy;	/* the trace rule reads none of it */
	struct nft_batch b;
	int rc = -1;

	if (!nft_anchor_name_ok(name)) {
		util_cause(cause, "not a %s table name", NFT_ANCHOR_PREFIX);
		return -1;
	}
	if (nft_batch_init(ctx, &b, cause) != 0)
		return -1;
	/* NLM_F_CREATE without EXCL: an anchor that is already there stays. */
	if (nft_put_table(&b, NFT_MSG_NEWTABLE, NLM_F_CREATE, name, NULL, cause) != 0)
		goto out;
	for (size_t i = 0; i < nitems(hooks); i++)
		if (nft_put_chain(&b, NFT_MSG_NEWCHAIN, NLM_F_CREATE, name, hooks[i].name,
		    hooks[i].hook, NULL, cause) != 0)
			goto out;
	/*
	 * The pin: a regular chain nothing jumps to, with one `meta nftrace
	 * set 1`. Never evaluated, it only holds the kernel's trace static
	 * key, which every operation's blocked chain takes: without it the
	 * first table and the last one's deletion each patch kernel code
	 * (IPIs to every CPU). Flushed first: a reused anchor keeps one rule.
	 */
	if (nft_put_chain(&b, NFT_MSG_NEWCHAIN, NLM_F_CREATE, name, NFT_ANCHOR_PIN, -1, NULL,
	    cause) != 0 || nft_put_chain_flush(&b, name, NFT_ANCHOR_PIN, cause) != 0 ||
	    nft_put_rule(&b, name, NFT_ANCHOR_PIN, NFT_R_NFTRACE, &pin_policy, cause) != 0)
		goto out;
	if (nft_batch_finish(ctx, &b, cause) == 0 && nft_batch_run(ctx, &b, cause) == 0)
		rc = 0;
out:
	nft_batch_free(&b);
	return rc;
}

int
nft_anchor_remove(struct nft_ctx *ctx, const char *name, char **cause)
{
	if (!nft_anchor_name_ok(name)) {
		util_cause(cause, "not a %s table name", NFT_ANCHOR_PREFIX);
		return -1;
	}
	return nft_table_reset_run(ctx, name, cause);
}

/*
 * Requests and dumps
 */

/*
 * Send one GET request (a dump when flags has NLM_F_DUMP) built in req and
 * feed every reply to cb until the end. -1 with errno EINTR when the
 * ruleset changed during the dump (the caller starts over).
 */
static int
nft_request(struct nft_ctx *ctx, struct nlmsghdr *nlh, mnl_cb_t cb, void *arg, char **cause)
{
	uint16_t type = nlh->nlmsg_type & 0xff;
	uint32_t seq = nlh->nlmsg_seq;
	int64_t deadline = util_monotonic_ms() + NFT_DUMP_TIMEOUT_MS;

	if (nft_drain(ctx, cause) != 0)
		return -1;
	if (mnl_socket_sendto(ctx->nc_nl, nlh, nlh->nlmsg_len) < 0) {
		util_cause(cause, "%s: send: %s", nft_msg_name(type), strerror(errno));
		return -1;
	}
	for (int i = 0; i < NFT_DUMP_RECV_MAX; i++) {
		ssize_t r = nft_recv(ctx, deadline);
		int rc;

		if (r < 0) {
			util_cause(cause, "%s: recv: %s", nft_msg_name(type), strerror(errno));
			return -1;
		}
		rc = mnl_cb_run(ctx->nc_buf, (size_t)r, seq, ctx->nc_portid, cb, arg);
		if (rc == MNL_CB_STOP)
			return 0;
		if (rc < 0) {
			int e = errno;
			util_cause(cause, "%s: %s", nft_msg_name(type), strerror(e));
			errno = e;
			return -1;
		}
	}
	util_cause(cause, "%s: reply does not end", nft_msg_name(type));
	return -1;
}

/* What nft_tables_list() collects. */
struct nft_tables {
	struct nft_table_info *nt_v;
	size_t nt_n, nt_cap;
	int nt_err;		/* ENOMEM from a callback */
};

/* GETTABLE dump callback: keep our tables with their userdata. */
static int
nft_tables_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nft_tables *nt = arg;
	struct nftnl_table *t = nftnl_table_alloc();
	struct nft_table_info *ti;
	const char *name;
	const void *ud;
	uint32_t udlen = 0;

	if (t == NULL) {
		nt->nt_err = ENOMEM;
		errno = ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_table_nlmsg_parse(nlh, t) < 0) {
		nftnl_table_free(t);
		return MNL_CB_OK;	/* not a table we can read, so not one of ours */
	}
	name = nftnl_table_get_str(t, NFTNL_TABLE_NAME);
	if (nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY) != NFPROTO_INET ||
	    !nft_table_name_ok(name)) {
		nftnl_table_free(t);
		return MNL_CB_OK;
	}
	if (nt->nt_n == nt->nt_cap) {
		size_t cap = nt->nt_cap ? 2 * nt->nt_cap : 16;
		struct nft_table_info *v = reallocarray(nt->nt_v, cap, sizeof(*v));
		if (v == NULL) {
			nftnl_table_free(t);
			nt->nt_err = ENOMEM;
			errno = ENOMEM;
			return MNL_CB_ERROR;
		}
		nt->nt_v = v;
		nt->nt_cap = cap;
	}
	ti = &nt->nt_v[nt->nt_n++];
	memset(ti, 0, sizeof(*ti));
	util_strlcpy(ti->nti_name, name, sizeof(ti->nti_name));
	ud = nftnl_table_get_data(t, NFTNL_TABLE_USERDATA, &udlen);
	if (nft_udata_read(ud, udlen, &ti->nti_generation, ti->nti_owner,
	    sizeof(ti->nti_owner)) != 0) {
		ti->nti_generation = 0;
		ti->nti_owner[0] = '\0';
	}
	nftnl_table_free(t);
	return MNL_CB_OK;
}

/* GETCHAIN dump callback: a generation marker overrides the table's generation. */
static int
nft_marker_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nft_tables *nt = arg;
	struct nftnl_chain *c = nftnl_chain_alloc();
	const char *name, *table;
	const void *ud;
	uint32_t udlen = 0;
	uint64_t gen;
	char owner[NFT_OWNER_MAX];

	if (c == NULL) {
		nt->nt_err = ENOMEM;
		errno = ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_chain_nlmsg_parse(nlh, c) < 0) {
		nftnl_chain_free(c);
		return MNL_CB_OK;
	}
	name = nftnl_chain_get_str(c, NFTNL_CHAIN_NAME);
	table = nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE);
	ud = nftnl_chain_get_data(c, NFTNL_CHAIN_USERDATA, &udlen);
	if (name != NULL && table != NULL && strcmp(name, NFT_CHAIN_GENERATION) == 0 &&
	    nft_udata_read(ud, udlen, &gen, owner, sizeof(owner)) == 0) {
		for (size_t i = 0; i < nt->nt_n; i++)
			if (strcmp(nt->nt_v[i].nti_name, table) == 0)
				nt->nt_v[i].nti_generation = gen;
	}
	nftnl_chain_free(c);
	return MNL_CB_OK;
}

/* List our inet tables with generation and owner. */
int
nft_tables_list(struct nft_ctx *ctx, struct nft_table_info **out, size_t *n, char **cause)
{
	char req[512] __attribute__((aligned(8)));
	struct nft_tables nt;

	*out = NULL;
	*n = 0;
	for (int tries = 0; tries < NFT_DUMP_TRIES; tries++) {
		struct nlmsghdr *nlh;
		int e;

		memset(&nt, 0, sizeof(nt));
		nlh = nftnl_table_nlmsg_build_hdr(req, NFT_MSG_GETTABLE, NFPROTO_INET, NLM_F_DUMP,
		    ctx->nc_seq++);
		if (nft_request(ctx, nlh, nft_tables_cb, &nt, cause) == 0) {
			/* The chains of every inet table; only markers matter. */
			nlh = nftnl_chain_nlmsg_build_hdr(req, NFT_MSG_GETCHAIN, NFPROTO_INET,
			    NLM_F_DUMP, ctx->nc_seq++);
			if (nft_request(ctx, nlh, nft_marker_cb, &nt, cause) == 0) {
				*out = nt.nt_v;
				*n = nt.nt_n;
				return 0;
			}
		}
		e = errno;
		free(nt.nt_v);
		if (e != EINTR || nt.nt_err != 0)
			return -1;
	}
	return -1;
}

/* GETOBJ dump callback: our two named counters. */
static int
nft_counters_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nft_counters *c = arg;
	struct nftnl_obj *o = nftnl_obj_alloc();
	const char *name;

	if (o == NULL) {
		errno = ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_obj_nlmsg_parse(nlh, o) < 0) {
		nftnl_obj_free(o);
		errno = EPROTO;
		return MNL_CB_ERROR;
	}
	name = nftnl_obj_get_str(o, NFTNL_OBJ_NAME);
	if (nftnl_obj_get_u32(o, NFTNL_OBJ_TYPE) == NFT_OBJECT_COUNTER && name != NULL) {
		uint64_t pk = nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_PKTS);
		uint64_t by = nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_BYTES);
		if (strcmp(name, NFT_COUNTER_ALLOWED) == 0) {
			c->nc_allowed_packets = pk;
			c->nc_allowed_bytes = by;
			c->nc_found |= 1;
		} else if (strcmp(name, NFT_COUNTER_BLOCKED) == 0) {
			c->nc_blocked_packets = pk;
			c->nc_blocked_bytes = by;
			c->nc_found |= 2;
		}
	}
	nftnl_obj_free(o);
	return MNL_CB_OK;
}

/* Reply callback that ignores the reply (the ack is what matters). */
static int
nft_ignore_cb(const struct nlmsghdr *nlh, void *arg)
{
	(void)nlh;
	(void)arg;
	return MNL_CB_OK;
}

/* Ask for the table itself: a dump of a missing table is just empty. */
static int
nft_table_exists(struct nft_ctx *ctx, const char *table, char **cause)
{
	char req[512] __attribute__((aligned(8)));
	struct nftnl_table *t;
	struct nlmsghdr *nlh;

	t = nftnl_table_alloc();
	if (t == NULL || nftnl_table_set_str(t, NFTNL_TABLE_NAME, table) != 0) {
		if (t != NULL)
			nftnl_table_free(t);
		util_cause(cause, "out of memory");
		return -1;
	}
	nlh = nftnl_table_nlmsg_build_hdr(req, NFT_MSG_GETTABLE, NFPROTO_INET, NLM_F_ACK,
	    ctx->nc_seq++);
	nftnl_table_nlmsg_build_payload(nlh, t);
	nftnl_table_free(t);
	if (nft_request(ctx, nlh, nft_ignore_cb, NULL, cause) != 0) {
		if (errno == ENOENT)
			util_cause(cause, "no table inet %s", table);
		return -1;
	}
	return 0;
}

/* Read the named counters `allowed` and `blocked` of a table. */
int
nft_counters_read(struct nft_ctx *ctx, const char *table, struct nft_counters *out,
    char **cause)
{
	char req[512] __attribute__((aligned(8)));
	struct nlmsghdr *nlh;

	memset(out, 0, sizeof(*out));
	if (!nft_table_name_ok(table)) {
		util_cause(cause, "not a %s table name", NFT_TABLE_PREFIX);
		return -1;
	}
	if (nft_table_exists(ctx, table, cause) != 0)
		return -1;
	for (int tries = 0; tries < NFT_DUMP_TRIES; tries++) {
		struct nftnl_obj *o = nftnl_obj_alloc();

		memset(out, 0, sizeof(*out));
		if (o != NULL)
			nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, table);
		if (o == NULL || !nftnl_obj_is_set(o, NFTNL_OBJ_TABLE)) {
			if (o != NULL)
				nftnl_obj_free(o);
			util_cause(cause, "out of memory");
			return -1;
		}
		/* The dump is filtered by table (and type) in the kernel. */
		nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
		nlh = nftnl_nlmsg_build_hdr(req, NFT_MSG_GETOBJ, NFPROTO_INET, NLM_F_DUMP,
		    ctx->nc_seq++);
		nftnl_obj_nlmsg_build_payload(nlh, o);
		nftnl_obj_free(o);
		if (nft_request(ctx, nlh, nft_counters_cb, out, cause) == 0) {
			if (out->nc_found != 3) {
				/* A table of another layout: its counts cannot be read. */
				util_cause(cause, "table inet %s has no counters %s and %s", table,
				    NFT_COUNTER_ALLOWED, NFT_COUNTER_BLOCKED);
				memset(out, 0, sizeof(*out));
				return -1;
			}
			return 0;
		}
		if (errno != EINTR)
			break;
	}
	memset(out, 0, sizeof(*out));
	return -1;
}

/* What nft_blocked_read() collects. */
struct nft_blocked_walk {
	int bw_family;
	struct nft_blocked *bw_v;
	size_t bw_n, bw_cap;
	int bw_err;
};

/* nftnl_set_elem_expr_foreach callback: the element's counter. */
static int
nft_blocked_expr_cb(struct nftnl_expr *e, void *arg)
{
	struct nft_blocked *d = arg;
	const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);

	if (name != NULL && strcmp(name, "counter") == 0) {
		d->nb_packets += nftnl_expr_get_u64(e, NFTNL_EXPR_CTR_PACKETS);
		d->nb_bytes += nftnl_expr_get_u64(e, NFTNL_EXPR_CTR_BYTES);
	}
	return 0;
}

/* One element of an evidence set, from its key layout (see the top). */
static int
nft_blocked_elem(struct nftnl_set_elem *se, void *arg)
{
	struct nft_blocked_walk *w = arg;
	size_t alen = nft_addr_len(w->bw_family);
	uint32_t klen = 0;
	const uint8_t *key = nftnl_set_elem_get(se, NFTNL_SET_ELEM_KEY, &klen);
	struct nft_blocked *d;

	if (key == NULL || klen != alen + 8)
		return 0;	/* not our layout: skip, the total still counts it */
	if (w->bw_n == w->bw_cap) {
		size_t cap = w->bw_cap ? 2 * w->bw_cap : 64;
		struct nft_blocked *v = reallocarray(w->bw_v, cap, sizeof(*v));
		if (v == NULL) {
			w->bw_err = ENOMEM;
			return -1;
		}
		w->bw_v = v;
		w->bw_cap = cap;
	}
	d = &w->bw_v[w->bw_n];
	memset(d, 0, sizeof(*d));
	d->nb_family = w->bw_family;
	memcpy(d->nb_addr, key, alen);
	d->nb_proto = key[alen];
	d->nb_port = (uint16_t)(key[alen + 4] << 8 | key[alen + 5]);
	if (nftnl_set_elem_expr_foreach(se, nft_blocked_expr_cb, d) < 0)
		return 0;
	w->bw_n++;
	return 0;
}

/* GETSETELEM dump callback. */
static int
nft_blocked_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nft_blocked_walk *w = arg;
	struct nftnl_set *s = nftnl_set_alloc();

	if (s == NULL) {
		errno = ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0) {
		nftnl_set_free(s);
		errno = EPROTO;
		return MNL_CB_ERROR;
	}
	nftnl_set_elem_foreach(s, nft_blocked_elem, w);
	nftnl_set_free(s);
	if (w->bw_err != 0) {
		errno = w->bw_err;
		return MNL_CB_ERROR;
	}
	return MNL_CB_OK;
}

/* The elements of both evidence sets, with their counters. */
int
nft_blocked_read(struct nft_ctx *ctx, const char *table, struct nft_blocked **out, size_t *n,
    char **cause)
{
	char req[512] __attribute__((aligned(8)));
	struct nft_blocked_walk w;

	*out = NULL;
	*n = 0;
	if (!nft_table_name_ok(table)) {
		util_cause(cause, "not a %s table name", NFT_TABLE_PREFIX);
		return -1;
	}
	for (int tries = 0; tries < NFT_DUMP_TRIES; tries++) {
		int e = 0;

		memset(&w, 0, sizeof(w));
		for (size_t i = 0; i < nitems(nft_evidence_sets) && e == 0; i++) {
			struct nftnl_set *s = nft_set_base(table, &nft_evidence_sets[i]);
			struct nlmsghdr *nlh;

			if (s == NULL) {
				util_cause(cause, "out of memory");
				free(w.bw_v);
				return -1;
			}
			w.bw_family = nft_evidence_sets[i].sd_family;
			nlh = nftnl_set_elem_nlmsg_build_hdr(req, NFT_MSG_GETSETELEM, NFPROTO_INET,
			    NLM_F_DUMP, ctx->nc_seq++);
			nftnl_set_elems_nlmsg_build_payload(nlh, s);
			nftnl_set_free(s);
			if (nft_request(ctx, nlh, nft_blocked_cb, &w, cause) != 0)
				e = errno != 0 ? errno : EIO;
		}
		if (e == 0) {
			*out = w.bw_v;
			*n = w.bw_n;
			return 0;
		}
		free(w.bw_v);
		if (e != EINTR)
			return -1;
		if (cause != NULL) {
			free(*cause);
			*cause = NULL;
		}
	}
	return -1;
}

/*
 * Text
 */

/* Print an address range as ADDR, ADDR/LEN or LO-HI. */
static int
nft_text_addr(FILE *f, int family, const uint8_t *lo, const uint8_t *hi)
{
	char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN];
	size_t alen = nft_addr_len(family), bits = alen * 8, plen;

	if (inet_ntop(family, lo, a, sizeof(a)) == NULL ||
	    inet_ntop(family, hi, b, sizeof(b)) == NULL)
		return -1;
	if (memcmp(lo, hi, alen) == 0)
		return fprintf(f, "%s", a) < 0 ? -1 : 0;
	/* The common prefix, then lo must be all zeros and hi all ones. */
	for (plen = 0; plen < bits; plen++) {
		int m = 0x80 >> (plen % 8);
		if ((lo[plen / 8] & m) != (hi[plen / 8] & m))
			break;
	}
	for (size_t i = plen; i < bits; i++) {
		int m = 0x80 >> (i % 8);
		if ((lo[i / 8] & m) != 0 || (hi[i / 8] & m) == 0)
			return fprintf(f, "%s-%s", a, b) < 0 ? -1 : 0;
	}
	return fprintf(f, "%s/%zu", a, plen) < 0 ? -1 : 0;
}

/* Print one element: ADDR . PROTO . PORT. */
static int
nft_text_elem(FILE *f, const struct nft_elem *e)
{
	if (nft_text_addr(f, e->ne_family, e->ne_addr_lo, e->ne_addr_hi) != 0 ||
	    fprintf(f, " . %s . ", e->ne_proto == IPPROTO_TCP ? "tcp" : "udp") < 0)
		return -1;
	if ((e->ne_port_lo == e->ne_port_hi ? fprintf(f, "%u", e->ne_port_lo) :
	    fprintf(f, "%u-%u", e->ne_port_lo, e->ne_port_hi)) < 0)
		return -1;
	if (e->ne_timeout_ms > 0 && fprintf(f, " timeout %ums", e->ne_timeout_ms) < 0)
		return -1;
	return 0;
}

/* Print one set with those elements of v[] that belong to it. */
static int
nft_text_set(FILE *f, const struct nft_setdef *sd, const struct nft_elem *v, size_t n)
{
	size_t k = 0;

	if (fprintf(f, "\tset %s {\n\t\ttype %s . inet_proto . inet_service\n"
	    "\t\tflags interval%s\n", sd->sd_name,
	    sd->sd_family == AF_INET ? "ipv4_addr" : "ipv6_addr",
	    sd->sd_timeout ? ",timeout" : "") < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (v[i].ne_family != sd->sd_family)
			continue;
		if (fputs(k++ == 0 ? "\t\telements = { " : ",\n\t\t\t     ", f) < 0 ||
		    nft_text_elem(f, &v[i]) != 0)
			return -1;
	}
	if (k > 0 && fputs(" }\n", f) < 0)
		return -1;
	return fputs("\t}\n", f) < 0 ? -1 : 0;
}

/* The cgroup path goes into a quoted nft string: nothing that could end it. */
static int
nft_cgroup_path_ok(const char *s)
{
	size_t len;

	if (s == NULL)
		return 0;
	len = strlen(s);
	if (len == 0 || len > NFT_CGROUP_PATH_MAX)
		return 0;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == '"' || s[i] == '\\' || s[i] == 0x7f)
			return 0;
	return 1;
}

/* Print the whole ruleset of p. */
static int
nft_text(FILE *f, const struct nft_policy *p, const char *cgroup_path)
{
	static const char *const match[] = {
		"meta nfproto ipv4 ip daddr . meta l4proto . th dport",
		"meta nfproto ipv6 ip6 daddr . meta l4proto . th dport",
	};
	char comment[NFTNL_UDATA_COMMENT_MAXLEN], src[INET6_ADDRSTRLEN];
	const char *t = p->np_table;

	nft_comment_format(comment, sizeof(comment), p->np_generation, p->np_owner);
	/* Same as the batch: create, delete, create again, all in one transaction. */
	if (fprintf(f, "table inet %s\ndelete table inet %s\ntable inet %s {\n"
	    "\tcomment \"%s\"\n", t, t, t, comment) < 0 ||
	    nft_text_set(f, NFT_SET_ALLOW4, p->np_allow, p->np_nallow) != 0 ||
	    nft_text_set(f, NFT_SET_ALLOW6, p->np_allow, p->np_nallow) != 0 ||
	    nft_text_set(f, NFT_SET_DENY4, p->np_deny, p->np_ndeny) != 0 ||
	    nft_text_set(f, NFT_SET_DENY6, p->np_deny, p->np_ndeny) != 0)
		return -1;
	for (size_t i = 0; i < nitems(nft_evidence_sets); i++)
		if (fprintf(f, "\tset %s {\n\t\ttype %s . inet_proto . inet_service\n"
		    "\t\tsize %d\n\t\tflags dynamic\n\t}\n", nft_evidence_sets[i].sd_name,
		    nft_evidence_sets[i].sd_family == AF_INET ? "ipv4_addr" : "ipv6_addr",
		    NFT_BLOCKED_MAX) < 0)
			return -1;
	if (fprintf(f, "\tcounter %s {\n\t}\n\tcounter %s {\n\t}\n", NFT_COUNTER_ALLOWED,
	    NFT_COUNTER_BLOCKED) < 0)
		return -1;
	switch (p->np_subject) {
	case NFT_SUBJECT_CGROUP:
		if (fprintf(f, "\tchain output {\n"
		    "\t\ttype filter hook output priority 0; policy accept;\n"
		    "\t\tsocket cgroupv2 level %d \"%s\" jump %s\n",
		    p->np_cgroup_level, cgroup_path, NFT_CHAIN_ENVELOPE) < 0)
			return -1;
		if (p->np_connect_family != 0) {
			char ca[INET6_ADDRSTRLEN];
			if (inet_ntop(p->np_connect_family, p->np_connect_addr, ca, sizeof(ca)) ==
			    NULL || fprintf(f, "\t\t%s daddr %s tcp dport %u reject with tcp reset\n",
			    p->np_connect_family == AF_INET ? "ip" : "ip6", ca, p->np_connect_port) < 0)
				return -1;
		}
		if (fprintf(f, "\t}\n") < 0)
			return -1;
		break;
	case NFT_SUBJECT_SOURCE_ADDRESS:
		if (inet_ntop(p->np_src_family, p->np_src_addr, src, sizeof(src)) == NULL)
			return -1;
		for (int i = 0; i < 2; i++) {
			const char *hook = i == 0 ? "forward" : "input";
			if (fprintf(f, "\tchain %s {\n"
			    "\t\ttype filter hook %s priority 0; policy accept;\n"
			    "\t\t%s saddr %s jump %s\n\t}\n", hook, hook,
			    p->np_src_family == AF_INET ? "ip" : "ip6", src,
			    NFT_CHAIN_ENVELOPE) < 0)
				return -1;
		}
		break;
	}
	if (p->np_dns_family != 0) {
		char dns[INET6_ADDRSTRLEN];
		const char *fam = p->np_dns_family == AF_INET ? "ip" : "ip6";
		if (inet_ntop(p->np_dns_family, p->np_dns_addr, dns, sizeof(dns)) == NULL ||
		    fprintf(f, "\tchain %s {\n\t\ttype nat hook %s priority -100; policy accept;\n",
		    NFT_CHAIN_DNS, p->np_subject == NFT_SUBJECT_CGROUP ? "output" : "prerouting") < 0)
			return -1;
		for (int i = 0; i < 2; i++) {
			if (p->np_subject == NFT_SUBJECT_CGROUP) {
				if (fprintf(f, "\t\tsocket cgroupv2 level %d \"%s\" meta nfproto %s",
				    p->np_cgroup_level, cgroup_path,
				    p->np_dns_family == AF_INET ? "ipv4" : "ipv6") < 0)
					return -1;
			} else if (fprintf(f, "\t\t%s saddr %s", fam, src) < 0) {
				return -1;
			}
			if (fprintf(f, " meta l4proto %s th dport 53 dnat %s to %s%s%s:%u\n",
			    i == 0 ? "udp" : "tcp", fam, p->np_dns_family == AF_INET ? "" : "[", dns,
			    p->np_dns_family == AF_INET ? "" : "]", p->np_dns_port) < 0)
				return -1;
		}
		if (fprintf(f, "\t}\n") < 0)
			return -1;
	}
	if (fprintf(f, "\tchain %s {\n"
	    "\t\t%s @deny4 jump %s\n"
	    "\t\t%s @deny6 jump %s\n", NFT_CHAIN_ENVELOPE, match[0], NFT_CHAIN_BLOCKED,
	    match[1], NFT_CHAIN_BLOCKED) < 0)
		return -1;
	if (p->np_mode == NFT_MODE_ALLOWLIST) {
		if (fprintf(f, "\t\t%s @allow4 counter name \"%s\" accept\n"
		    "\t\t%s @allow6 counter name \"%s\" accept\n"
		    "\t\tjump %s\n", match[0], NFT_COUNTER_ALLOWED, match[1],
		    NFT_COUNTER_ALLOWED, NFT_CHAIN_BLOCKED) < 0)
			return -1;
	} else {
		if (fprintf(f, "\t\t%s @allow4 counter name \"%s\" accept\n"
		    "\t\t%s @allow6 counter name \"%s\" accept\n", match[0], NFT_COUNTER_ALLOWED,
		    match[1], NFT_COUNTER_ALLOWED) < 0)
			return -1;
		for (int i = 0; i < 4; i++)
			if (fprintf(f, "\t\tmeta nfproto %s meta l4proto %s update @%s "
			    "{ %s daddr . meta l4proto . th dport counter }\n", i < 2 ? "ipv4" :
			    "ipv6", i % 2 == 0 ? "tcp" : "udp", nft_evidence_sets[i / 2].sd_name,
			    i < 2 ? "ip" : "ip6") < 0)
				return -1;
		if (fprintf(f, "\t\tcounter name \"%s\" accept\n", NFT_COUNTER_ALLOWED) < 0)
			return -1;
	}
	if (fprintf(f, "\t}\n\tchain %s {\n\t\tmeta nftrace set 1\n", NFT_CHAIN_BLOCKED) < 0)
		return -1;
	for (int i = 0; i < 4; i++)
		if (fprintf(f, "\t\tmeta nfproto %s meta l4proto %s update @%s "
		    "{ %s daddr . meta l4proto . th dport counter }\n", i < 2 ? "ipv4" : "ipv6",
		    i % 2 == 0 ? "tcp" : "udp", nft_evidence_sets[i / 2].sd_name,
		    i < 2 ? "ip" : "ip6") < 0)
			return -1;
	if (fprintf(f, "\t\tmeta l4proto tcp counter name \"%s\" reject with tcp reset\n"
	    "\t\tcounter name \"%s\" reject with icmpx admin-prohibited\n"
	    "\t}\n}\n", NFT_COUNTER_BLOCKED, NFT_COUNTER_BLOCKED) < 0)
		return -1;
	return 0;
}

/* The ruleset of p in nft(8) syntax, or NULL. */
char *
nft_policy_text(const struct nft_policy *p, const char *cgroup_path)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	if (nft_policy_check(p, NULL) != 0)
		return NULL;
	/* nft(8) 1.0 can only name a cgroup by path, never by id. */
	if (p->np_subject == NFT_SUBJECT_CGROUP && !nft_cgroup_path_ok(cgroup_path))
		return NULL;
	f = open_memstream(&buf, &len);
	if (f == NULL)
		return NULL;
	rc = nft_text(f, p, cgroup_path);
	if (fclose(f) != 0)
		rc = -1;
	if (rc != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
