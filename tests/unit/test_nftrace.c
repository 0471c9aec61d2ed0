/*
 * test_nftrace.c: the nftables trace reader (lib/nftrace.c).
 *
 * The parser is fed NFT_MSG_TRACE messages built here with libmnl, the
 * way nf_tables_trace.c lays them out, plus one the kernel sent: IPv4+TCP,
 * IPv6+UDP, truncated headers, attributes of the wrong size (which would
 * make libnftnl's own parser exit the process), lengths that lie, an odd
 * address. The live tests need root: each runs in a forked child in a
 * fresh network namespace, so the host's ruleset is never touched, loads
 * a table with nft(8) and makes a real connection that it rejects.
 */
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>

#include "nftrace.h"
#include "unit.h"

#define NFT_BIN "/usr/sbin/nft"
#define TEST_BUF 4096
#define TEST_LIVE_MS 10000	/* waiting for trace events */
#define TEST_CHILD_MS 60000	/* one namespace child */
#define TEST_ERR_MAX 4096
#define TEST_TABLE "gensee_tracetest"
#define TEST_OTHER "gensee_othertrace"

/* An aligned message buffer. */
union test_buf {
	struct nlmsghdr h;
	uint8_t b[TEST_BUF];
};

/* A SYN from 127.0.0.1:47976 to 127.0.0.2:9, as the kernel reported it. */
static const uint8_t test_ip4[20] = {
	0x45, 0x00, 0x00, 0x3c, 0xd8, 0x72, 0x40, 0x00, 0x40, 0x06, 0x64, 0x46,
	127, 0, 0, 1, 127, 0, 0, 2
};
static const uint8_t test_tcp[20] = {
	0xbb, 0x68, 0x00, 0x09, 0x64, 0x9f, 0xd6, 0x8c, 0x00, 0x00, 0x00, 0x00,
	0xa0, 0x02, 0xff, 0xd7, 0xfe, 0x31, 0x00, 0x00
};
/* UDP from [2001:db8::1]:5353 to [2001:db8::2]:53, two bytes of payload. */
static const uint8_t test_ip6[40] = {
	0x60, 0x08, 0x9d, 0xf5, 0x00, 0x0a, 0x11, 0x40,
	0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
	0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2
};
static const uint8_t test_udp[10] = { 0x14, 0xe9, 0x00, 0x35, 0x00, 0x0a, 0x00, 0x1d, 'h', 'i' };

/*
 * The trace Linux 6.18 sent for that SYN (table gensee_tracetest, chain
 * output, rule verdict NF_DROP): NFPROTO, TYPE, ID, CHAIN, TABLE,
 * RULE_HANDLE, VERDICT{CODE}, OIF, OIFTYPE, NETWORK_HEADER (20),
 * TRANSPORT_HEADER (20).
 */
static const uint8_t test_kernel_trace[] = {
	0xa8, 0x00, 0x00, 0x00, 0x11, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x08, 0x00, 0x0f, 0x00,
	0x00, 0x00, 0x00, 0x02, 0x08, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x03,
	0x08, 0x00, 0x06, 0x00, 0xa4, 0x6e, 0x53, 0xbb, 0x0b, 0x00, 0x02, 0x00,
	0x6f, 0x75, 0x74, 0x70, 0x75, 0x74, 0x00, 0x00, 0x15, 0x00, 0x01, 0x00,
	0x67, 0x65, 0x6e, 0x73, 0x65, 0x65, 0x5f, 0x74, 0x72, 0x61, 0x63, 0x65,
	0x74, 0x65, 0x73, 0x74, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x03, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x0c, 0x00, 0x05, 0x00,
	0x08, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x0c, 0x00,
	0x00, 0x00, 0x00, 0x01, 0x06, 0x00, 0x0d, 0x00, 0x03, 0x04, 0x00, 0x00,
	0x18, 0x00, 0x08, 0x00, 0x45, 0x00, 0x00, 0x3c, 0xd8, 0x72, 0x40, 0x00,
	0x40, 0x06, 0x64, 0x46, 0x7f, 0x00, 0x00, 0x01, 0x7f, 0x00, 0x00, 0x02,
	0x18, 0x00, 0x09, 0x00, 0xbb, 0x68, 0x00, 0x09, 0x64, 0x9f, 0xd6, 0x8c,
	0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xff, 0xd7, 0xfe, 0x31, 0x00, 0x00
};

/* Start an NFT_MSG_TRACE message of table family family in a zeroed buffer. */
static struct nlmsghdr *
test_begin(union test_buf *u, uint8_t family)
{
	struct nlmsghdr *nlh;
	struct nfgenmsg *nfg;

	memset(u, 0, sizeof(*u));
	nlh = mnl_nlmsg_put_header(u->b);
	nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_TRACE;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = family;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = 0;
	return nlh;
}

/* The attributes every trace has: table, chain, type, id, nfproto. */
static void
test_std(struct nlmsghdr *nlh, const char *table, uint32_t type, uint32_t nfproto)
{
	mnl_attr_put_u32(nlh, NFTA_TRACE_NFPROTO, htonl(nfproto));
	mnl_attr_put_u32(nlh, NFTA_TRACE_TYPE, htonl(type));
	mnl_attr_put_u32(nlh, NFTA_TRACE_ID, htonl(0xa46e53bb));
	mnl_attr_put_strz(nlh, NFTA_TRACE_CHAIN, "output");
	mnl_attr_put_strz(nlh, NFTA_TRACE_TABLE, table);
}

/* Network and transport headers (NULL: left out). */
static void
test_headers(struct nlmsghdr *nlh, const void *nh, size_t nhlen, const void *th, size_t thlen)
{
	if (nh != NULL)
		mnl_attr_put(nlh, NFTA_TRACE_NETWORK_HEADER, nhlen, nh);
	if (th != NULL)
		mnl_attr_put(nlh, NFTA_TRACE_TRANSPORT_HEADER, thlen, th);
}

/* A verdict nest with a code and, when chain is set, a jump target. */
static void
test_verdict(struct nlmsghdr *nlh, int32_t code, const char *chain)
{
	struct nlattr *nest = mnl_attr_nest_start(nlh, NFTA_TRACE_VERDICT);

	mnl_attr_put_u32(nlh, NFTA_VERDICT_CODE, htonl((uint32_t)code));
	if (chain != NULL)
		mnl_attr_put_strz(nlh, NFTA_VERDICT_CHAIN, chain);
	mnl_attr_nest_end(nlh, nest);
}

/* The IPv4+TCP trace: inet table, NF_DROP. */
static struct nlmsghdr *
test_ip4_msg(union test_buf *u, const char *table)
{
	struct nlmsghdr *nlh = test_begin(u, NFPROTO_INET);

	test_std(nlh, table, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	mnl_attr_put_u64(nlh, NFTA_TRACE_RULE_HANDLE, htobe64(2));
	test_verdict(nlh, NF_DROP, NULL);
	mnl_attr_put_u32(nlh, NFTA_TRACE_OIF, htonl(1));
	mnl_attr_put_u16(nlh, NFTA_TRACE_OIFTYPE, htons(772));
	test_headers(nlh, test_ip4, sizeof(test_ip4), test_tcp, sizeof(test_tcp));
	return nlh;
}

/* Parse one message; returns the rc, the event count in *n. */
static int
test_parse(const struct nlmsghdr *nlh, struct nftrace_event *e, size_t *n)
{
	errno = 0;
	return nftrace_parse(nlh, nlh->nlmsg_len, e, 1, n);
}

/* Parse one message that must be refused as malformed. */
#define test_refused(nlh) do {							\
	struct nftrace_event e_;						\
	size_t n_;								\
	ck_assert_int_eq(test_parse((nlh), &e_, &n_), -1);			\
	ck_assert_int_eq(errno, EBADMSG);					\
	ck_assert_uint_eq(n_, 0);						\
} while (0)

START_TEST(test_parse_ip4_tcp)
{
	union test_buf u;
	struct nftrace_event e;
	struct nlmsghdr *nlh = test_ip4_msg(&u, TEST_TABLE);
	uint8_t lo[4] = { 127, 0, 0, 1 }, dst[4] = { 127, 0, 0, 2 };
	size_t n;

	ck_assert_int_eq(test_parse(nlh, &e, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(e.te_table, TEST_TABLE);
	ck_assert_str_eq(e.te_chain, "output");
	ck_assert_uint_eq(e.te_type, NFT_TRACETYPE_RULE);
	ck_assert_uint_eq(e.te_id, 0xa46e53bb);
	ck_assert_int_eq(e.te_family, AF_INET);
	ck_assert_mem_eq(e.te_saddr, lo, 4);
	ck_assert_mem_eq(e.te_daddr, dst, 4);
	ck_assert_uint_eq(e.te_proto, IPPROTO_TCP);
	ck_assert_uint_eq(e.te_sport, 47976);
	ck_assert_uint_eq(e.te_dport, 9);
	ck_assert_int_eq(e.te_has_verdict, 1);
	ck_assert_int_eq(e.te_verdict, NF_DROP);
	ck_assert_int_eq(e.te_lost, 0);
	ck_assert_int_eq(nftrace_table_matches(&e, TEST_TABLE), 1);
}
END_TEST

START_TEST(test_parse_ip6_udp)
{
	union test_buf u;
	struct nftrace_event e;
	struct nlmsghdr *nlh = test_begin(&u, NFPROTO_INET);
	uint8_t src[16], dst[16];
	size_t n;

	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV6);
	test_verdict(nlh, NFT_JUMP, "blocked");
	test_headers(nlh, test_ip6, sizeof(test_ip6), test_udp, sizeof(test_udp));
	ck_assert_int_eq(test_parse(nlh, &e, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(e.te_family, AF_INET6);
	ck_assert_int_eq(inet_pton(AF_INET6, "2001:db8::1", src), 1);
	ck_assert_int_eq(inet_pton(AF_INET6, "2001:db8::2", dst), 1);
	ck_assert_mem_eq(e.te_saddr, src, 16);
	ck_assert_mem_eq(e.te_daddr, dst, 16);
	ck_assert_uint_eq(e.te_proto, IPPROTO_UDP);
	ck_assert_uint_eq(e.te_sport, 5353);
	ck_assert_uint_eq(e.te_dport, 53);
	ck_assert_int_eq(e.te_has_verdict, 1);
	ck_assert_int_eq(e.te_verdict, NFT_JUMP);
}
END_TEST

/* Byte for byte what the kernel sent. */
START_TEST(test_parse_kernel_bytes)
{
	struct nftrace_event e;
	uint8_t dst[4] = { 127, 0, 0, 2 };
	size_t n;

	ck_assert_int_eq(nftrace_parse(test_kernel_trace, sizeof(test_kernel_trace), &e, 1, &n),
	    0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(e.te_table, TEST_TABLE);
	ck_assert_str_eq(e.te_chain, "output");
	ck_assert_uint_eq(e.te_id, 0xa46e53bb);
	ck_assert_int_eq(e.te_family, AF_INET);
	ck_assert_mem_eq(e.te_daddr, dst, 4);
	ck_assert_uint_eq(e.te_proto, IPPROTO_TCP);
	ck_assert_uint_eq(e.te_dport, 9);
	ck_assert_int_eq(e.te_verdict, NF_DROP);
}
END_TEST

/* Headers too short for their fixed part, or not what NFPROTO says. */
START_TEST(test_parse_truncated_headers)
{
	union test_buf u;
	struct nlmsghdr *nlh;
	uint8_t h[40];

	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	test_headers(nlh, test_ip4, 19, test_tcp, sizeof(test_tcp));
	test_refused(nlh);

	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV6);
	test_headers(nlh, test_ip6, 39, test_udp, sizeof(test_udp));
	test_refused(nlh);

	/* ports need 4 bytes of transport header */
	for (size_t thlen = 1; thlen < 4; thlen++) {
		nlh = test_begin(&u, NFPROTO_INET);
		test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
		test_headers(nlh, test_ip4, sizeof(test_ip4), test_tcp, thlen);
		test_refused(nlh);
	}
	/* an empty header attribute */
	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	test_headers(nlh, test_ip4, 0, NULL, 0);
	test_refused(nlh);

	/* an IPv6 header where NFPROTO says IPv4, and the reverse */
	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	test_headers(nlh, test_ip6, sizeof(test_ip6), NULL, 0);
	test_refused(nlh);
	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV6);
	memset(h, 0, sizeof(h));
	memcpy(h, test_ip4, sizeof(test_ip4));
	test_headers(nlh, h, sizeof(h), NULL, 0);
	test_refused(nlh);

	/* an IPv4 header length below 5 words */
	memcpy(h, test_ip4, sizeof(test_ip4));
	h[0] = 0x44;
	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	test_headers(nlh, h, 20, NULL, 0);
	test_refused(nlh);
}
END_TEST

/* What is not there, or not to be trusted, stays zero. */
START_TEST(test_parse_partial)
{
	union test_buf u;
	struct nftrace_event e;
	struct nlmsghdr *nlh;
	uint8_t h[20], zero[16] = { 0 };
	size_t n;

	/* a later event of a packet: no headers */
	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	test_verdict(nlh, NF_DROP, NULL);
	ck_assert_int_eq(test_parse(nlh, &e, &n), 0);
	ck_assert_int_eq(e.te_family, AF_UNSPEC);
	ck_assert_mem_eq(e.te_daddr, zero, 16);
	ck_assert_uint_eq(e.te_dport, 0);
	ck_assert_int_eq(e.te_has_verdict, 1);

	/* a network header without a transport header */
	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	test_headers(nlh, test_ip4, sizeof(test_ip4), NULL, 0);
	ck_assert_int_eq(test_parse(nlh, &e, &n), 0);
	ck_assert_int_eq(e.te_family, AF_INET);
	ck_assert_uint_eq(e.te_proto, IPPROTO_TCP);
	ck_assert_uint_eq(e.te_dport, 0);
	ck_assert_int_eq(e.te_has_verdict, 0);

	/* a non-first fragment: its "transport header" is payload */
	memcpy(h, test_ip4, sizeof(h));
	h[6] = 0x00;
	h[7] = 0xb9;
	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	test_headers(nlh, h, sizeof(h), test_tcp, sizeof(test_tcp));
	ck_assert_int_eq(test_parse(nlh, &e, &n), 0);
	ck_assert_uint_eq(e.te_proto, IPPROTO_TCP);
	ck_assert_uint_eq(e.te_sport, 0);
	ck_assert_uint_eq(e.te_dport, 0);

	/* neither TCP nor UDP: no ports (ICMP) */
	memcpy(h, test_ip4, sizeof(h));
	h[9] = IPPROTO_ICMP;
	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	test_headers(nlh, h, sizeof(h), test_tcp, sizeof(test_tcp));
	ck_assert_int_eq(test_parse(nlh, &e, &n), 0);
	ck_assert_uint_eq(e.te_proto, IPPROTO_ICMP);
	ck_assert_uint_eq(e.te_dport, 0);

	/* a bridge table: headers are not decoded */
	nlh = test_begin(&u, NFPROTO_BRIDGE);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_BRIDGE);
	test_headers(nlh, test_ip4, sizeof(test_ip4), test_tcp, sizeof(test_tcp));
	ck_assert_int_eq(test_parse(nlh, &e, &n), 0);
	ck_assert_int_eq(e.te_family, AF_UNSPEC);

	/* no NFPROTO: the table family decides (an ip table) */
	nlh = test_begin(&u, NFPROTO_IPV4);
	mnl_attr_put_u32(nlh, NFTA_TRACE_TYPE, htonl(NFT_TRACETYPE_POLICY));
	mnl_attr_put_u32(nlh, NFTA_TRACE_ID, htonl(1));
	mnl_attr_put_strz(nlh, NFTA_TRACE_TABLE, "filter");
	mnl_attr_put_u32(nlh, NFTA_TRACE_POLICY, htonl(NF_ACCEPT));
	test_headers(nlh, test_ip4, sizeof(test_ip4), test_tcp, sizeof(test_tcp));
	ck_assert_int_eq(test_parse(nlh, &e, &n), 0);
	ck_assert_int_eq(e.te_family, AF_INET);
	ck_assert_uint_eq(e.te_dport, 9);
	ck_assert_str_eq(e.te_chain, "");
	/* the policy is the verdict of a policy event */
	ck_assert_uint_eq(e.te_type, NFT_TRACETYPE_POLICY);
	ck_assert_int_eq(e.te_has_verdict, 1);
	ck_assert_int_eq(e.te_verdict, NF_ACCEPT);
}
END_TEST

/*
 * Attributes libnftnl would meet with exit() (abi_breakage), a strdup past
 * the end, or an uninitialized read: refused here, and the process lives.
 */
START_TEST(test_parse_bad_attributes)
{
	union test_buf u;
	struct nlmsghdr *nlh;
	struct nlattr *nest;
	char name[8] = { 'g', 'e', 'n', 's', 'e', 'e', '_', 'x' };

	/* no ID, no TYPE */
	nlh = test_begin(&u, NFPROTO_INET);
	mnl_attr_put_u32(nlh, NFTA_TRACE_TYPE, htonl(NFT_TRACETYPE_RULE));
	mnl_attr_put_strz(nlh, NFTA_TRACE_TABLE, TEST_TABLE);
	test_refused(nlh);
	nlh = test_begin(&u, NFPROTO_INET);
	mnl_attr_put_u32(nlh, NFTA_TRACE_ID, htonl(1));
	test_refused(nlh);
	/* an ID of 2 bytes, a TYPE of 8 */
	nlh = test_begin(&u, NFPROTO_INET);
	mnl_attr_put_u16(nlh, NFTA_TRACE_ID, 1);
	mnl_attr_put_u32(nlh, NFTA_TRACE_TYPE, htonl(NFT_TRACETYPE_RULE));
	test_refused(nlh);
	nlh = test_begin(&u, NFPROTO_INET);
	mnl_attr_put_u32(nlh, NFTA_TRACE_ID, htonl(1));
	mnl_attr_put_u64(nlh, NFTA_TRACE_TYPE, 3);
	test_refused(nlh);
	/* a u16 interface type of 4 bytes, a rule handle of 4 */
	nlh = test_ip4_msg(&u, TEST_TABLE);
	mnl_attr_put_u32(nlh, NFTA_TRACE_IIFTYPE, 1);
	test_refused(nlh);
	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	mnl_attr_put_u32(nlh, NFTA_TRACE_RULE_HANDLE, 1);
	test_refused(nlh);
	/* a table name without its NUL, one with a NUL inside, an empty one */
	nlh = test_begin(&u, NFPROTO_INET);
	mnl_attr_put_u32(nlh, NFTA_TRACE_TYPE, htonl(NFT_TRACETYPE_RULE));
	mnl_attr_put_u32(nlh, NFTA_TRACE_ID, htonl(1));
	mnl_attr_put(nlh, NFTA_TRACE_TABLE, sizeof(name), name);
	test_refused(nlh);
	name[3] = '\0';
	name[7] = '\0';
	nlh = test_begin(&u, NFPROTO_INET);
	mnl_attr_put_u32(nlh, NFTA_TRACE_TYPE, htonl(NFT_TRACETYPE_RULE));
	mnl_attr_put_u32(nlh, NFTA_TRACE_ID, htonl(1));
	mnl_attr_put(nlh, NFTA_TRACE_TABLE, sizeof(name), name);
	test_refused(nlh);
	nlh = test_begin(&u, NFPROTO_INET);
	mnl_attr_put_u32(nlh, NFTA_TRACE_TYPE, htonl(NFT_TRACETYPE_RULE));
	mnl_attr_put_u32(nlh, NFTA_TRACE_ID, htonl(1));
	mnl_attr_put(nlh, NFTA_TRACE_CHAIN, 0, NULL);
	test_refused(nlh);
	/* a verdict without a code; a jump without its target; a code of 2 bytes */
	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	nest = mnl_attr_nest_start(nlh, NFTA_TRACE_VERDICT);
	mnl_attr_put_strz(nlh, NFTA_VERDICT_CHAIN, "blocked");
	mnl_attr_nest_end(nlh, nest);
	test_refused(nlh);
	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	test_verdict(nlh, NFT_GOTO, NULL);
	test_refused(nlh);
	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	nest = mnl_attr_nest_start(nlh, NFTA_TRACE_VERDICT);
	mnl_attr_put_u16(nlh, NFTA_VERDICT_CODE, 0);
	mnl_attr_nest_end(nlh, nest);
	test_refused(nlh);
	/* an empty verdict nest */
	nlh = test_begin(&u, NFPROTO_INET);
	test_std(nlh, TEST_TABLE, NFT_TRACETYPE_RULE, NFPROTO_IPV4);
	nest = mnl_attr_nest_start(nlh, NFTA_TRACE_VERDICT);
	mnl_attr_nest_end(nlh, nest);
	test_refused(nlh);
	/* the same attribute twice */
	nlh = test_ip4_msg(&u, TEST_TABLE);
	mnl_attr_put_strz(nlh, NFTA_TRACE_TABLE, TEST_OTHER);
	test_refused(nlh);
}
END_TEST

/* Lengths that claim more than there is, at every cut. */
START_TEST(test_parse_bogus_length)
{
	union test_buf u;
	struct nftrace_event e[2];
	struct nlmsghdr *nlh = test_ip4_msg(&u, TEST_TABLE);
	size_t len = nlh->nlmsg_len, n;
	struct nlattr na;

	for (size_t cut = 1; cut < len; cut++) {
		errno = 0;
		ck_assert_msg(nftrace_parse(u.b, cut, e, 2, &n) == -1, "cut at %zu accepted", cut);
		ck_assert_int_eq(errno, EBADMSG);
	}
	/* nlmsg_len past the end, and below a header */
	nlh->nlmsg_len = (uint32_t)len + 4;
	ck_assert_int_eq(nftrace_parse(u.b, len, e, 2, &n), -1);
	nlh->nlmsg_len = 4;
	ck_assert_int_eq(nftrace_parse(u.b, len, e, 2, &n), -1);
	/* no room for the nfgenmsg */
	nlh->nlmsg_len = NLMSG_HDRLEN + 2;
	ck_assert_int_eq(nftrace_parse(u.b, NLMSG_HDRLEN + 2, e, 2, &n), -1);
	/* the first attribute's length past the message, and below its header */
	nlh = test_ip4_msg(&u, TEST_TABLE);
	memcpy(&na, u.b + NLMSG_HDRLEN + 4, sizeof(na));
	na.nla_len = 0xfff0;
	memcpy(u.b + NLMSG_HDRLEN + 4, &na, sizeof(na));
	test_refused(nlh);
	na.nla_len = 2;
	memcpy(u.b + NLMSG_HDRLEN + 4, &na, sizeof(na));
	test_refused(nlh);
	/* a message whose length cuts an attribute in two */
	nlh = test_ip4_msg(&u, TEST_TABLE);
	nlh->nlmsg_len -= 2;
	test_refused(nlh);
}
END_TEST

/* Messages skipped: not a trace, or a name that does not fit te_table. */
START_TEST(test_parse_skipped)
{
	union test_buf u;
	struct nftrace_event e;
	struct nlmsghdr *nlh;
	char longname[NFTRACE_NAME_MAX + 1];
	size_t n;

	nlh = test_ip4_msg(&u, TEST_TABLE);
	nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE;
	ck_assert_int_eq(test_parse(nlh, &e, &n), 0);
	ck_assert_uint_eq(n, 0);
	nlh->nlmsg_type = NLMSG_NOOP;
	ck_assert_int_eq(test_parse(nlh, &e, &n), 0);
	ck_assert_uint_eq(n, 0);

	/* 64 characters: cut to 63 it could pass for another table */
	memset(longname, 'a', sizeof(longname));
	memcpy(longname, "gensee_", 7);
	longname[NFTRACE_NAME_MAX] = '\0';
	nlh = test_ip4_msg(&u, longname);
	ck_assert_int_eq(test_parse(nlh, &e, &n), 0);
	ck_assert_uint_eq(n, 0);
	/* 63 fit */
	longname[NFTRACE_NAME_MAX - 1] = '\0';
	nlh = test_ip4_msg(&u, longname);
	ck_assert_int_eq(test_parse(nlh, &e, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(e.te_table, longname);
}
END_TEST

/* Two messages in one datagram; room for one; an odd address. */
START_TEST(test_parse_two_unaligned)
{
	union test_buf u, w;
	uint8_t odd[2 * TEST_BUF + 8];
	struct nftrace_event e[3], f[3];
	struct nlmsghdr *a = test_ip4_msg(&u, TEST_TABLE), *b;
	size_t alen = NLMSG_ALIGN(a->nlmsg_len), len, n, m;

	b = test_begin(&w, NFPROTO_INET);
	test_std(b, TEST_OTHER, NFT_TRACETYPE_RULE, NFPROTO_IPV6);
	test_headers(b, test_ip6, sizeof(test_ip6), test_udp, sizeof(test_udp));
	memcpy(u.b + alen, w.b, b->nlmsg_len);
	len = alen + b->nlmsg_len;
	ck_assert_int_eq(nftrace_parse(u.b, len, e, 3, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(e[0].te_table, TEST_TABLE);
	ck_assert_str_eq(e[1].te_table, TEST_OTHER);
	ck_assert_uint_eq(e[1].te_dport, 53);

	ck_assert_int_eq(nftrace_parse(u.b, len, e, 1, &n), -1);
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_uint_eq(n, 1);

	for (size_t shift = 1; shift < 8; shift++) {
		memcpy(odd + shift, u.b, len);
		ck_assert_int_eq(nftrace_parse(odd + shift, len, f, 3, &m), 0);
		ck_assert_uint_eq(m, 2);
		ck_assert_str_eq(f[0].te_table, TEST_TABLE);
		ck_assert_uint_eq(f[0].te_dport, 9);
		ck_assert_mem_eq(f[1].te_daddr, e[1].te_daddr, 16);
		ck_assert_uint_eq(f[1].te_sport, 5353);
	}
}
END_TEST

/* Exact matches only. */
START_TEST(test_table_matches)
{
	struct nftrace_event e;

	memset(&e, 0, sizeof(e));
	util_strlcpy(e.te_table, TEST_TABLE, sizeof(e.te_table));
	ck_assert_int_eq(nftrace_table_matches(&e, TEST_TABLE), 1);
	ck_assert_int_eq(nftrace_table_matches(&e, "gensee_tracetes"), 0);
	ck_assert_int_eq(nftrace_table_matches(&e, TEST_TABLE "2"), 0);
	ck_assert_int_eq(nftrace_table_matches(&e, "GENSEE_TRACETEST"), 0);
	ck_assert_int_eq(nftrace_table_matches(&e, TEST_OTHER), 0);
	ck_assert_int_eq(nftrace_table_matches(&e, ""), 0);
	ck_assert_int_eq(nftrace_table_matches(&e, NULL), 0);
	ck_assert_int_eq(nftrace_table_matches(NULL, TEST_TABLE), 0);
	e.te_lost = 1;
	ck_assert_int_eq(nftrace_table_matches(&e, TEST_TABLE), 0);
	memset(&e, 0, sizeof(e));
	ck_assert_int_eq(nftrace_table_matches(&e, ""), 0);
	/* an unterminated name is never read past its array */
	memset(e.te_table, 'a', sizeof(e.te_table));
	ck_assert_int_eq(nftrace_table_matches(&e, "a"), 0);
}
END_TEST

/*
 * Live tests: a forked child in a fresh network namespace. The child
 * reports its first failure through a pipe and its exit status.
 */

static char test_err[TEST_ERR_MAX];

/* Record a failure in the child (the first one wins). */
static void __attribute__((format(printf, 2, 3)))
test_fail(int line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (test_err[0] != '\0')
		return;
	n = snprintf(test_err, sizeof(test_err), "line %d: ", line);
	if (n < 0 || (size_t)n >= sizeof(test_err))
		return;
	va_start(ap, fmt);
	vsnprintf(test_err + n, sizeof(test_err) - (size_t)n, fmt, ap);
	va_end(ap);
}

/* In a child body: fail and return -1 unless cond holds. */
#define T_CHECK(cond, ...) do {						\
	if (!(cond)) {							\
		test_fail(__LINE__, __VA_ARGS__);			\
		return -1;						\
	}								\
} while (0)

/* Bring lo up in this namespace. */
static int
test_lo_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = -1;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	util_strlcpy(ifr.ifr_name, "lo", sizeof(ifr.ifr_name));
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) == 0)
			rc = 0;
	}
	close(fd);
	return rc;
}

/* Load ruleset text with `nft -f`; 0 or -1 with nft's output in test_err. */
static int
test_nft_load(const char *text)
{
	char path[] = "/tmp/test_nftrace.XXXXXX", out[2048];
	int fd = mkstemp(path), pfd[2], status;
	ssize_t r;
	size_t len = 0;
	pid_t pid;

	if (fd < 0)
		return -1;
	if (util_write_all(fd, text, strlen(text)) != 0 || close(fd) != 0 ||
	    pipe2(pfd, O_CLOEXEC) != 0) {
		unlink(path);
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		if (dup2(pfd[1], 1) < 0 || dup2(pfd[1], 2) < 0)
			_exit(126);
		execl(NFT_BIN, "nft", "-f", path, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	if (pid > 0) {
		/* nft's output is short: the pipe holds all of it, read after the wait. */
		if (unit_wait_pid(pid, TEST_LIVE_MS, &status) != 0)
			status = -1;
		while (len < sizeof(out) - 1 &&
		    (r = read(pfd[0], out + len, sizeof(out) - 1 - len)) > 0)
			len += (size_t)r;
	} else
		status = -1;
	out[len] = '\0';
	close(pfd[0]);
	unlink(path);
	if (status != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		test_fail(__LINE__, "nft -f: status %d: %s", status, out);
		return -1;
	}
	return 0;
}

/* Connect to addr:port over TCP; returns the errno (0 if it connected). */
static int
test_connect(const char *addr, uint16_t port)
{
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), err = 0;

	if (fd < 0)
		return errno;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		err = EINVAL;
	else if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
		err = errno;
	close(fd);
	return err;
}

/* Whether e carries the tuple of the rejected SYN: 127.0.0.2, tcp, port 9. */
static int
test_is_syn(const struct nftrace_event *e)
{
	static const uint8_t dst[4] = { 127, 0, 0, 2 }, src[4] = { 127, 0, 0, 1 };

	return !e->te_lost && e->te_family == AF_INET && memcmp(e->te_daddr, dst, 4) == 0 &&
	    memcmp(e->te_saddr, src, 4) == 0 && e->te_proto == IPPROTO_TCP &&
	    e->te_dport == 9 && e->te_sport != 0;
}

/* What a live test has seen. */
struct test_seen {
	int ts_ours, ts_other, ts_lost;
	size_t ts_events;
};

/* Account for one event; -1 (with a message) when it is wrong. */
static int
test_see(struct test_seen *s, const struct nftrace_event *e)
{
	s->ts_events++;
	if (e->te_lost) {
		s->ts_lost++;
		return 0;
	}
	if (!test_is_syn(e))
		return 0;
	if (strcmp(e->te_table, TEST_TABLE) == 0) {
		T_CHECK(nftrace_table_matches(e, TEST_TABLE), "own table not matched");
		T_CHECK(!nftrace_table_matches(e, TEST_OTHER), "own event matched as other");
		T_CHECK(!nftrace_table_matches(e, "gensee_tracetes"), "prefix matched");
		T_CHECK(strcmp(e->te_chain, "output") == 0, "chain %s", e->te_chain);
		T_CHECK(e->te_type == NFT_TRACETYPE_RULE, "type %u", e->te_type);
		T_CHECK(e->te_has_verdict && e->te_verdict == NF_DROP, "verdict %d/%d",
		    e->te_has_verdict, e->te_verdict);
		s->ts_ours++;
	} else if (strcmp(e->te_table, TEST_OTHER) == 0) {
		T_CHECK(nftrace_table_matches(e, TEST_OTHER), "other table not matched");
		T_CHECK(!nftrace_table_matches(e, TEST_TABLE),
		    "an event of %s was matched as %s", TEST_OTHER, TEST_TABLE);
		s->ts_other++;
	}
	return 0;
}

/* Poll and read until done(s) or the deadline. */
static int
test_read_until(struct nftrace *t, struct test_seen *s, int (*done)(const struct test_seen *))
{
	int64_t deadline = util_monotonic_ms() + TEST_LIVE_MS;
	struct nftrace_event v[16];
	char *cause = NULL;

	while (!done(s)) {
		struct pollfd pfd = { .fd = nftrace_fd(t), .events = POLLIN };
		int64_t left = deadline - util_monotonic_ms();
		size_t n;

		T_CHECK(left > 0, "no matching trace within %d ms (%zu events, %zu lost; "
		    "ours %d, other %d)", TEST_LIVE_MS, s->ts_events, (size_t)s->ts_lost,
		    s->ts_ours, s->ts_other);
		T_CHECK(poll(&pfd, 1, (int)left) >= 0 || errno == EINTR, "poll: %s",
		    strerror(errno));
		T_CHECK(nftrace_read(t, v, nitems(v), &n, &cause) == 0, "nftrace_read: %s",
		    cause);
		T_CHECK(n <= nitems(v), "n %zu", n);
		for (size_t i = 0; i < n; i++)
			if (test_see(s, &v[i]) != 0)
				return -1;
	}
	return 0;
}

/*
 * The operation's table rejects the SYN; another table, at an earlier
 * priority, traces the same packet first: both report it, and only the
 * table name tells them apart.
 */
static const char test_rules[] =
    "table inet " TEST_TABLE " {\n"
    "\tchain output {\n"
    "\t\ttype filter hook output priority 0; policy accept;\n"
    "\t\tip daddr 127.0.0.2 tcp dport 9 meta nftrace set 1 counter reject with tcp reset\n"
    "\t}\n"
    "}\n"
    "table inet " TEST_OTHER " {\n"
    "\tchain output {\n"
    "\t\ttype filter hook output priority -10; policy accept;\n"
    "\t\tip daddr 127.0.0.2 tcp dport 9 meta nftrace set 1\n"
    "\t}\n"
    "}\n";

/* Both tables' events seen. */
static int
test_both_done(const struct test_seen *s)
{
	return s->ts_ours > 0 && s->ts_other > 0;
}

/* Our table's event seen. */
static int
test_ours_done(const struct test_seen *s)
{
	return s->ts_ours > 0;
}

/* A refused connection becomes a trace event of our table with its tuple. */
static int
body_trace(void)
{
	struct nftrace *t;
	struct test_seen s;
	char *cause = NULL;
	int err, fl;

	T_CHECK(nftrace_open(&t, &cause) == 0, "nftrace_open: %s", cause);
	fl = fcntl(nftrace_fd(t), F_GETFL);
	T_CHECK(fl >= 0 && (fl & O_NONBLOCK), "socket is blocking");
	T_CHECK(fcntl(nftrace_fd(t), F_GETFD) & FD_CLOEXEC, "socket lacks FD_CLOEXEC");
	if (test_nft_load(test_rules) != 0)
		return -1;
	err = test_connect("127.0.0.2", 9);
	T_CHECK(err == ECONNREFUSED, "connect 127.0.0.2:9: %s (expected a reset)",
	    strerror(err));
	memset(&s, 0, sizeof(s));
	if (test_read_until(t, &s, test_both_done) != 0)
		return -1;
	nftrace_close(t);
	return 0;
}

/*
 * An overrun: with the receive queue at its minimum and many rejected
 * connections unread, the kernel drops traces and the reader says so with
 * te_lost; then reading goes on.
 */
static int
body_overrun(void)
{
	struct nftrace *t;
	struct nftrace_event v[64];
	struct test_seen s;
	char *cause = NULL;
	int one = 1, big = 1 << 20;
	size_t n;

	T_CHECK(nftrace_open(&t, &cause) == 0, "nftrace_open: %s", cause);
	T_CHECK(setsockopt(nftrace_fd(t), SOL_SOCKET, SO_RCVBUF, &one, sizeof(one)) == 0,
	    "SO_RCVBUF: %s", strerror(errno));
	if (test_nft_load(test_rules) != 0)
		return -1;
	for (int i = 0; i < 100; i++)
		T_CHECK(test_connect("127.0.0.2", 9) == ECONNREFUSED, "connect %d", i);
	memset(&s, 0, sizeof(s));
	for (int round = 0; round < 100 && s.ts_lost == 0; round++) {
		T_CHECK(nftrace_read(t, v, nitems(v), &n, &cause) == 0, "nftrace_read: %s",
		    cause);
		for (size_t i = 0; i < n; i++)
			if (test_see(&s, &v[i]) != 0)
				return -1;
		if (n == 0)
			break;
	}
	T_CHECK(s.ts_lost >= 1, "no te_lost after 100 unread rejects (%zu events)",
	    s.ts_events);
	T_CHECK(setsockopt(nftrace_fd(t), SOL_SOCKET, SO_RCVBUF, &big, sizeof(big)) == 0,
	    "SO_RCVBUF: %s", strerror(errno));
	do
		T_CHECK(nftrace_read(t, v, nitems(v), &n, &cause) == 0, "%s", cause);
	while (n > 0);
	T_CHECK(test_connect("127.0.0.2", 9) == ECONNREFUSED, "connect after the overrun");
	memset(&s, 0, sizeof(s));
	if (test_read_until(t, &s, test_ours_done) != 0)
		return -1;
	nftrace_close(t);
	return 0;
}

/* Run body in a forked child in a fresh network namespace; assert it passed. */
static void
test_in_netns(const char *what, int (*body)(void))
{
	char msg[TEST_ERR_MAX + 128];
	size_t len = 0;
	int pfd[2], status;
	pid_t pid;

	ck_assert_msg(geteuid() == 0, "test_nftrace's live tests need root (a network "
	    "namespace, nf_tables and the trace group need CAP_NET_ADMIN); euid is %u",
	    (unsigned)geteuid());
	ck_assert_msg(access(NFT_BIN, X_OK) == 0, "%s not found: install the nftables package "
	    "(apt-get install nftables)", NFT_BIN);
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int rc = -1;

		close(pfd[0]);
		if (unshare(CLONE_NEWNET) != 0)
			test_fail(__LINE__, "unshare(CLONE_NEWNET): %s", strerror(errno));
		else if (test_lo_up() != 0)
			test_fail(__LINE__, "bringing lo up: %s", strerror(errno));
		else
			rc = body();
		if (rc != 0 && test_err[0] == '\0')
			test_fail(__LINE__, "failed without a message");
		if (util_write_all(pfd[1], test_err, strlen(test_err)) != 0)
			rc = -1;
		close(pfd[1]);
		/* exit(), not _exit(): the sanitizer build checks for leaks here. */
		exit(rc == 0 ? 0 : 1);
	}
	close(pfd[1]);
	for (;;) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		ssize_t r;

		if (len >= sizeof(msg) - 1 || poll(&p, 1, TEST_CHILD_MS) <= 0)
			break;
		r = read(pfd[0], msg + len, sizeof(msg) - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	msg[len] = '\0';
	close(pfd[0]);
	ck_assert_msg(unit_wait_pid(pid, TEST_CHILD_MS, &status) == 0, "%s: child overran: %s",
	    what, msg);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: %s (status %#x)",
	    what, msg, status);
}

START_TEST(test_live_trace)
{
	test_in_netns("trace", body_trace);
}
END_TEST

START_TEST(test_live_overrun)
{
	test_in_netns("overrun", body_overrun);
}
END_TEST

/* The suite: the parser, then the live kernel tests. */
static Suite *
nftrace_suite(void)
{
	Suite *s = suite_create("nftrace");
	TCase *parse = tcase_create("parse");
	TCase *live = tcase_create("live");

	tcase_add_test(parse, test_parse_ip4_tcp);
	tcase_add_test(parse, test_parse_ip6_udp);
	tcase_add_test(parse, test_parse_kernel_bytes);
	tcase_add_test(parse, test_parse_truncated_headers);
	tcase_add_test(parse, test_parse_partial);
	tcase_add_test(parse, test_parse_bad_attributes);
	tcase_add_test(parse, test_parse_bogus_length);
	tcase_add_test(parse, test_parse_skipped);
	tcase_add_test(parse, test_parse_two_unaligned);
	tcase_add_test(parse, test_table_matches);
	suite_add_tcase(s, parse);
	tcase_set_timeout(live, 120);
	tcase_add_test(live, test_live_trace);
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
		fprintf(stderr, "test_nftrace: not root: the live tests will fail; run the unit "
		    "suite as root\n");
	sr = srunner_create(nftrace_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
