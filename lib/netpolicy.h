/*
 * netpolicy.h: network envelopes, leases and dispositions (pure logic).
 *
 * Decisions use only resolved addresses, protocols, ports, expiry and
 * whether the effect is HTTP. Every grant and every lease scope is one
 * destination/protocol/port tuple: two grants (A, tcp, 443) and (B, udp,
 * 53) authorize exactly those, never (A, udp, 53).
 */
#ifndef GENSEE_NETPOLICY_H
#define GENSEE_NETPOLICY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "nft.h"
#include "schema.h"

struct json_object;

#define NETPOLICY_MAX_GRANTS 20000
#define NETPOLICY_MAX_RESTRICTED 1024
#define NETPOLICY_MAX_LEASE_TTL (24 * 3600)

/* An inclusive address range of one family. */
struct np_range {
	int nr_family; /* AF_INET or AF_INET6 */
	uint8_t nr_lo[16];
	uint8_t nr_hi[16];
};

/* One tuple: destination range, protocol, port range. */
struct np_grant {
	struct np_range ng_dst;
	uint8_t ng_proto; /* IPPROTO_TCP or IPPROTO_UDP */
	uint16_t ng_port_lo;
	uint16_t ng_port_hi;
};

struct np_grants {
	struct np_grant *g_v;
	size_t g_n, g_cap;
};

/* The policy section of an operation network config. */
struct netpolicy {
	struct np_range *np_restricted; /* added by the policy; built-ins always apply */
	size_t np_nrestricted;
	struct np_grants np_lease_scopes;
	int64_t np_max_lease_ttl; /* 0: no in-place leases */
	int np_http_gateway_available;
	int np_prefer_http_gateway;
};

enum np_disposition {
	NP_ALLOW,	/* within the current envelope (or an active lease) */
	NP_LEASE,	/* bounded and revocable: an operation-scoped lease */
	NP_MEDIATOR,	/* an HTTP effect for the trusted mediator */
	NP_DENY,	/* anything else */
};

/* Stable reason codes. */
#define NPR_WITHIN_ENVELOPE "within_envelope"
#define NPR_ACTIVE_LEASE "active_lease"
#define NPR_LEASE_SCOPE "lease_scope"
#define NPR_MEDIATOR_UNAVAILABLE "mediator_unavailable"
#define NPR_RESTRICTED "restricted_destination"
#define NPR_NOT_ELIGIBLE "not_eligible"
#define NPR_LEASES_DISABLED "leases_disabled"
#define NPR_DENY_LIST "deny_list"
#define NPR_MONITOR "monitor_mode"

struct np_event {
	int ne_family;
	uint8_t ne_addr[16];
	uint8_t ne_proto;
	uint16_t ne_port;
	int ne_http; /* the effect is an HTTP request */
};

struct np_decision {
	enum np_disposition nd_disposition;
	const char *nd_reason;
	int64_t nd_ttl; /* NP_LEASE: granted TTL in seconds */
};

const char *netpolicy_disposition_name(enum np_disposition d);

/* "192.0.2.1", "192.0.2.0/24", "2001:db8::/32". A hostname is refused
 * with *hostname set (callers warn and skip it). */
int netpolicy_parse_range(const char *s, struct np_range *out, int *hostname);
int netpolicy_parse_addr(const char *s, int *family, uint8_t addr[16]);
/* proxy.listen: "192.0.2.1:3128" or "[2001:db8::1]:3128", port 1-65535. */
int netpolicy_parse_listen(const char *s, int *family, uint8_t addr[16], uint16_t *port);
/* The same, as a socket address for bind or connect (its length in *sl); 0 or -1. */
int netpolicy_listen_sockaddr(const char *listen, struct sockaddr_storage *ss, socklen_t *sl);
/* "tcp"/"udp" -> IPPROTO_*, else -1. */
int netpolicy_parse_proto(const char *s);
const char *netpolicy_proto_name(uint8_t proto);
/* "CIDR", "CIDR,tcp", "CIDR,tcp,443" or "CIDR,udp,5000-5100"; no protocol
 * means TCP and UDP on every port. Appends to g. */
int netpolicy_parse_grant_string(const char *s, struct np_grants *g, int *hostname, char **cause);
/* [{"destination": CIDR, "protocol": "tcp", "ports": [443, "8000-8100"]}] */
int netpolicy_parse_grant_array(struct json_object *arr, struct np_grants *g, char **cause);

int np_grants_add(struct np_grants *g, const struct np_grant *one);
void np_grants_free(struct np_grants *g);
/* Index of the first grant holding the exact tuple, or -1. */
ssize_t np_grants_find(const struct np_grants *g, int family, const uint8_t addr[16],
    uint8_t proto, uint16_t port);

/*
 * Is addr restricted (built-in ranges, the IPv4 embedded in mapped, NAT64,
 * 6to4 and Teredo forms, or the policy's own ranges)? *why names the range.
 */
int netpolicy_restricted(const struct netpolicy *p, int family, const uint8_t addr[16],
    const char **why);

/* What the kernel enforces for an operation, so that decisions agree with it. */
struct np_boundary {
	int nb_monitor;			/* deny-only: what no deny entry names passes */
	const struct np_grants *nb_allow;	/* the baseline grants, as configured */
	const struct np_grants *nb_deny;	/* checked before anything else */
	const struct np_grants *nb_leases;	/* active leases (exact tuples) */
};

/*
 * Exactly one disposition for ev, the one the kernel's ruleset agrees
 * with: the deny list first (deny_list), monitor mode next (everything
 * else passes: monitor_mode), then the envelope (an exact grant, or a
 * broad one where the address is not restricted), the leases, and only
 * then new authority. requested_ttl <= 0 means the maximum.
 */
void netpolicy_decide(const struct netpolicy *p, const struct np_boundary *b,
    const struct np_event *ev, int64_t requested_ttl, struct np_decision *out);

/*
 * The grants the kernel gets: exact single-address grants as they are,
 * wider ones cut around every restricted range (netpolicy_broad_restricted),
 * appended to out. -1 when out of memory.
 */
int netpolicy_grants_effective(const struct netpolicy *p, const struct np_grants *in,
    struct np_grants *out);
/*
 * Is addr outside what a grant wider than one address may open: restricted,
 * or an IPv6 form embedding a restricted IPv4 address, or Teredo?
 */
int netpolicy_broad_restricted(const struct netpolicy *p, int family, const uint8_t addr[16]);

void netpolicy_init(struct netpolicy *p);
void netpolicy_free(struct netpolicy *p);
/* The policy object of a schema-version-3 config (seed 001), strictly. */
int netpolicy_parse_policy(struct json_object *obj, struct netpolicy *p, char **cause);

/*
 * A whole schema-version-3 operation network config: envelope, policy and
 * the proxy section (validated and kept for the mediator).
 */
struct np_config {
	char nc_operation_id[72];
	char nc_source_run_id[72];
	int nc_has_source_address;
	int nc_src_family;
	uint8_t nc_src_addr[16];
	struct np_grants nc_envelope;
	struct netpolicy nc_policy;
	struct json_object *nc_proxy; /* owned reference, NULL when absent */
	struct json_object *nc_dns; /* the dns section (dnspolicy.h), owned, or NULL */
};
int netpolicy_parse_config(struct json_object *obj, struct np_config *c, char **cause);
void netpolicy_config_free(struct np_config *c);

void netpolicy_grant_to_elem(const struct np_grant *g, struct nft_elem *e);
/* "192.0.2.0/24" or "192.0.2.1-192.0.2.9" */
void netpolicy_range_format(const struct np_range *r, char *buf, size_t len);
struct json_object *netpolicy_grant_json(const struct np_grant *g);

#endif
