/*
 * nft.h: nftables generations through libnftnl + libmnl (no nft binary).
 *
 * One table per operation (family inet). A generation is one netlink batch,
 * which the kernel commits atomically: a packet sees either the previous
 * generation or the new one, never a mix and never no policy. Element
 * deltas (a lease granted or revoked) are batches too.
 *
 * Table layout (the same ruleset in nft syntax is what nft_policy_text()
 * prints):
 *
 *   table inet NAME {
 *     set allow4 { type ipv4_addr . inet_proto . inet_service; flags interval,timeout; }
 *     set allow6 { type ipv6_addr . inet_proto . inet_service; flags interval,timeout; }
 *     set deny4  { ... same as allow4 ... }
 *     set deny6  { ... same as allow6 ... }
 *     set blocked4 { type ipv4_addr . inet_proto . inet_service; size 4096; flags dynamic; }
 *     set blocked6 { type ipv6_addr . inet_proto . inet_service; size 4096; flags dynamic; }
 *     counter allowed { }
 *     counter blocked { }
 *     chain output  { type filter hook output priority 0; policy accept;       (cgroup subject)
 *                     socket cgroupv2 level L <cgroup id> jump envelope }
 *     chain forward { type filter hook forward priority 0; policy accept;      (source_address subject)
 *                     ip[6] saddr SRC jump envelope }
 *     chain input   { type filter hook input priority 0; policy accept;        (source_address subject)
 *                     ip[6] saddr SRC jump envelope }
 *     chain envelope {
 *       meta nfproto ipv4 ip daddr . meta l4proto . th dport @deny4 jump blocked
 *       meta nfproto ipv6 ip6 daddr . meta l4proto . th dport @deny6 jump blocked
 *       meta nfproto ipv4 ip daddr . meta l4proto . th dport @allow4 counter name "allowed" accept
 *       meta nfproto ipv6 ip6 daddr . meta l4proto . th dport @allow6 counter name "allowed" accept
 *       jump blocked                                                                  (allowlist)
 *       meta nfproto ipv4 meta l4proto tcp update @blocked4 { ... counter }            (denylist:
 *       ... the same for ipv4 udp, ipv6 tcp and ipv6 udp ...                            what would
 *       counter name "allowed" accept                                                  be blocked)
 *     }
 *     chain blocked {
 *       meta nftrace set 1
 *       meta nfproto ipv4 meta l4proto tcp update @blocked4 { ip daddr . meta l4proto . th dport counter }
 *       ... the same for ipv4 udp, ipv6 tcp and ipv6 udp ...
 *       meta l4proto tcp counter name "blocked" reject with tcp reset
 *       counter name "blocked" reject with icmpx admin-prohibited
 *     }
 *   }
 *
 * The counters are named objects, so a refill (which flushes and re-adds
 * the rules) keeps what they counted, and so do the blocked sets, which a
 * refill leaves alone: an operation's rejects add up over its whole life,
 * per destination. A full blocked set only loses detail: the update breaks
 * out of its rule and the next rule still rejects and counts.
 *
 * The table comment (userdata) is "gen=N;owner=ID". The chain is called
 * envelope, not policy: `policy` is an nft(8) keyword, and a ruleset with a
 * chain of that name cannot be written in nft syntax.
 *
 * The kernel keeps a table's userdata fixed once the table exists, so
 * nft_elements_update() records its generation in the comment ("gen=N") of
 * an extra empty chain `generation`, re-created by each update; the next
 * full commit drops it again.
 *
 * No conntrack shortcut: every packet is checked, so removing a grant stops
 * an established flow too.
 */
#ifndef GENSEE_NFT_H
#define GENSEE_NFT_H

#include <stddef.h>
#include <stdint.h>

#define NFT_TABLE_PREFIX "gensee_"
#define NFT_TABLE_NAME_MAX 64

/* One element: an inclusive address range, one protocol, a port range. */
struct nft_elem {
	int ne_family;		/* AF_INET or AF_INET6 */
	uint8_t ne_addr_lo[16];	/* network byte order; first 4 bytes for AF_INET */
	uint8_t ne_addr_hi[16];
	uint8_t ne_proto;	/* IPPROTO_TCP or IPPROTO_UDP */
	uint16_t ne_port_lo;	/* host byte order, inclusive */
	uint16_t ne_port_hi;
	/*
	 * Allow sets only: the kernel removes the element after this many ms
	 * (0: never). Leases carry one as a backstop, so a lease expires even
	 * while boundaryd is dead.
	 */
	uint32_t ne_timeout_ms;
};

enum nft_subject {
	NFT_SUBJECT_CGROUP,		/* output of sockets in one cgroup v2 subtree */
	NFT_SUBJECT_SOURCE_ADDRESS,	/* forward and host input from one address */
};

enum nft_mode {
	NFT_MODE_ALLOWLIST,	/* reject everything outside allow (deny checked first) */
	NFT_MODE_DENYLIST,	/* monitor: reject only deny, accept the rest, count what an
				   allowlist would have blocked in the blocked sets */
};

struct nft_policy {
	const char *np_table;
	enum nft_subject np_subject;
	uint64_t np_cgroup_id;		/* cgroup subject: directory inode */
	int np_cgroup_level;		/* depth below the v2 root (gensee/op_x: 2), 1-255 */
	int np_src_family;		/* source_address subject */
	uint8_t np_src_addr[16];
	enum nft_mode np_mode;
	const struct nft_elem *np_allow;
	size_t np_nallow;
	const struct nft_elem *np_deny;
	size_t np_ndeny;
	/*
	 * The operation's DNS proxy (0 family: none). With one, every UDP and
	 * TCP packet of the subject to port 53, whatever the destination, is
	 * DNATed to it in a "dnsredirect" nat chain (prerouting for a source
	 * address, output for a cgroup) before the envelope sees it, so the
	 * envelope decides on the proxy's address and no resolver is reached
	 * directly. Only the proxy's family is redirected.
	 */
	int np_dns_family;
	uint8_t np_dns_addr[16];
	uint16_t np_dns_port;		/* host byte order */
	/*
	 * The mediator's CONNECT listener of a cgroup operation (0 family:
	 * none): after the cgroup's jump to the envelope, every other local
	 * socket's TCP to it is reset, so only the operation reaches it.
	 */
	int np_connect_family;
	uint8_t np_connect_addr[16];
	uint16_t np_connect_port;	/* host byte order */
	uint64_t np_generation;		/* stored in the table's userdata */
	const char *np_owner;		/* stored in the table's userdata (operation id,
					   1-63 of [A-Za-z0-9_.:-]) */
};

struct nft_ctx;

int nft_open(struct nft_ctx **ctx, char **cause);
void nft_close(struct nft_ctx *ctx);

/*
 * Install a whole generation in one batch: the table is created if absent,
 * deleted and re-created with every set, element, chain and rule. Every
 * netlink ack is read; on any error nothing of the batch is applied and
 * *cause names the failing message and errno.
 */
int nft_generation_commit(struct nft_ctx *ctx, const struct nft_policy *p, char **cause);

/*
 * Replace the contents of an existing table of the same layout in one
 * batch: the sets are flushed and refilled and the chains' rules flushed
 * and re-added, but the table, sets and chains stay. Elements present
 * before and after stay visible throughout, which a delete-and-recreate of
 * the table cannot promise: a new pipapo set only becomes searchable after
 * the transaction's generation flip. Fails (changing nothing) if the table
 * or any of its sets or chains is missing; then commit a full generation.
 */
int nft_generation_refill(struct nft_ctx *ctx, const struct nft_policy *p, char **cause);

/*
 * Add and remove elements of the allow sets in one batch (lease grant or
 * revocation) and record the new generation (see the `generation` chain
 * above). Deleting an element that is not there fails the whole batch.
 */
int nft_elements_update(struct nft_ctx *ctx, const char *table, uint64_t generation,
    const struct nft_elem *add, size_t nadd, const struct nft_elem *del, size_t ndel,
    char **cause);

/* Delete a table; a missing table is not an error. */
int nft_table_delete(struct nft_ctx *ctx, const char *table, char **cause);

/*
 * The hook anchor: an inet table NFT_ANCHOR_PREFIX + [0-9a-f] with empty
 * accept base chains on output, input and forward, kept while boundaryd
 * runs. The first base chain at a hook point flips a kernel static key
 * (code patching and an IPI to every CPU: about 1 ms each way on a VM) and
 * the last one flips it back; with the anchor holding them, an operation's
 * table costs only its own commit and deletion. An accept in one base
 * chain never decides for another table's: enforcement is unchanged. Not a
 * NFT_TABLE_PREFIX name, so recovery never takes it for an operation's.
 * It also holds the trace static key (`meta nftrace set 1`, which every
 * operation's blocked chain has) with one rule in a regular chain nothing
 * jumps to. Install is idempotent (an anchor left by a crash is reused).
 */
#define NFT_ANCHOR_PREFIX "gsanchor_"
#define NFT_ANCHOR_PIN "pin"	/* its chain that keeps the trace key on */
int nft_anchor_install(struct nft_ctx *ctx, const char *name, char **cause);
int nft_anchor_remove(struct nft_ctx *ctx, const char *name, char **cause);

struct nft_table_info {
	char nti_name[NFT_TABLE_NAME_MAX];
	uint64_t nti_generation;	/* from the `generation` chain, else the table
					   userdata; 0 if unreadable */
	char nti_owner[64];		/* from userdata, "" if unreadable */
};
/* Every inet table whose name starts with NFT_TABLE_PREFIX (caller frees). */
int nft_tables_list(struct nft_ctx *ctx, struct nft_table_info **out, size_t *n, char **cause);

struct nft_counters {
	uint64_t nc_allowed_packets, nc_allowed_bytes;
	uint64_t nc_blocked_packets, nc_blocked_bytes;
	int nc_found;		/* internal: which counters the dump held */
};
/*
 * The named counters `allowed` and `blocked` of a table. Fails for a
 * missing table and for a table without them (another layout).
 */
int nft_counters_read(struct nft_ctx *ctx, const char *table, struct nft_counters *out,
    char **cause);

/* At most this many destinations per blocked set (per family). */
#define NFT_BLOCKED_MAX 4096

/* One rejected destination tuple with what its element counted. */
struct nft_blocked {
	int nb_family;
	uint8_t nb_addr[16];
	uint8_t nb_proto;	/* IPPROTO_TCP or IPPROTO_UDP */
	uint16_t nb_port;	/* host byte order */
	uint64_t nb_packets, nb_bytes;
};
/*
 * Every element of the blocked sets (caller frees *out). Rejects beyond
 * NFT_BLOCKED_MAX destinations, and of protocols other than TCP and UDP,
 * are only in the `blocked` counter.
 */
int nft_blocked_read(struct nft_ctx *ctx, const char *table, struct nft_blocked **out,
    size_t *n, char **cause);

/*
 * The same ruleset in nft(8) syntax (heap string), for `gensee debug
 * network-plan`, for the benchmark against `nft -f`, and for tests that
 * compare what the kernel holds after each path. The text replaces the
 * table in one transaction like nft_generation_commit() does.
 *
 * nft(8) names a cgroup only by a path, which it resolves below
 * /sys/fs/cgroup: cgroup_path is "gensee/op_x" where cgroup2 is mounted
 * there, "unified/gensee/op_x" on a hybrid host. Returns NULL for an
 * invalid policy, a cgroup subject without a usable path, or no memory.
 */
char *nft_policy_text(const struct nft_policy *p, const char *cgroup_path);

#endif
