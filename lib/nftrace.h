/*
 * nftrace.h: nftables trace events (rejected packets -> capability faults).
 *
 * Every rule that a packet with nftrace set passes through makes the kernel
 * multicast one NFT_MSG_TRACE message to the NFNLGRP_NFTRACE group of the
 * packet's network namespace (one message per datagram):
 *
 *   struct nlmsghdr  nlmsg_type (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_TRACE
 *   struct nfgenmsg  nfgen_family: the table's family (NFPROTO_INET ...)
 *   NFTA_TRACE_ID, TYPE, NFPROTO, (POLICY, MARK)   be32
 *   NFTA_TRACE_TABLE, CHAIN                         NUL-terminated strings
 *   NFTA_TRACE_RULE_HANDLE                          be64 (+ NFTA_TRACE_PAD)
 *   NFTA_TRACE_VERDICT { NFTA_VERDICT_CODE be32, [NFTA_VERDICT_CHAIN] }
 *   NFTA_TRACE_IIF/OIF be32, IIFTYPE/OIFTYPE be16
 *   NFTA_TRACE_LL_HEADER, NETWORK_HEADER (at most 40 bytes: the IPv4
 *   header with options or the IPv6 fixed header), TRANSPORT_HEADER (at
 *   most 20 bytes from the transport offset the kernel found)
 *
 * The packet headers are only in the first message for a packet per base
 * chain; later ones for the same packet (same te_id) carry the verdict but
 * no headers. Correlate by te_id.
 *
 * Any table may trace a packet, and once traced a packet is reported by
 * every chain it passes, including other tables' chains: an event only
 * says something about an operation when nftrace_table_matches() ties it
 * to that operation's table.
 */
#ifndef GENSEE_NFTRACE_H
#define GENSEE_NFTRACE_H

#include <stddef.h>
#include <stdint.h>

#define NFTRACE_NAME_MAX 64

struct nftrace_event {
	char te_table[NFTRACE_NAME_MAX];	/* always NUL-terminated */
	char te_chain[NFTRACE_NAME_MAX];
	uint32_t te_type;		/* NFT_TRACETYPE_* */
	uint32_t te_id;			/* the same for every event of one packet */
	int te_family;			/* AF_INET / AF_INET6 when the network header was
					   decoded, else AF_UNSPEC with zero addresses */
	uint8_t te_saddr[16], te_daddr[16];	/* network order; 4 bytes for AF_INET */
	uint8_t te_proto;		/* IPv4 protocol / IPv6 next header (no extension
					   headers are walked) */
	uint16_t te_sport, te_dport;	/* host order; TCP and UDP only, else 0 */
	int te_has_verdict;
	int32_t te_verdict;		/* NF_DROP, NF_ACCEPT, NFT_CONTINUE ...; for
					   NFT_TRACETYPE_POLICY the chain's policy */
	int te_lost;			/* events were lost (overrun): only this is set */
};

struct nftrace;

/*
 * Open a nonblocking, close-on-exec NETLINK_NETFILTER socket with a large
 * receive buffer and join NFNLGRP_NFTRACE (needs CAP_NET_ADMIN). It hears
 * the network namespace it is opened in.
 */
int nftrace_open(struct nftrace **out, char **cause);
/* The socket, for poll(2) or an event loop. */
int nftrace_fd(struct nftrace *t);
/* Close and free; NULL is ignored. */
void nftrace_close(struct nftrace *t);

/*
 * Drain what the socket holds without blocking: up to max events into v,
 * their number in *n. An overrun (ENOBUFS) becomes one event with
 * te_lost = 1 and reading goes on; malformed messages are skipped (and
 * logged). Events that did not fit are returned by the next call. Returns
 * 0, or -1 with *cause on a socket error (v up to *n stays valid).
 */
int nftrace_read(struct nftrace *t, struct nftrace_event *v, size_t max, size_t *n,
    char **cause);

/*
 * Parse one datagram (one or more netlink messages) into at most max
 * events; buf may have any alignment. Messages other than NFT_MSG_TRACE,
 * and traces whose table or chain name is longer than NFTRACE_NAME_MAX - 1
 * (no gensee table has one, and a cut name could pass for another), are
 * skipped. Returns 0, or -1 with errno EBADMSG at the first malformed
 * message (a length that does not fit, an attribute of the wrong size, an
 * unterminated name, a header too short for its fixed part), ENOSPC when
 * more than max events were found or ENOMEM; the first *n events are valid.
 */
int nftrace_parse(const void *buf, size_t len, struct nftrace_event *v, size_t max,
    size_t *n);

/* 1 when the event comes from the table named exactly table, else 0. */
int nftrace_table_matches(const struct nftrace_event *e, const char *table);

#endif
