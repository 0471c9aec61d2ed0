/*
 * dnspolicy.h: the "dns" section of an operation network config: which
 * names the operation may resolve through the confined DNS proxy, and for
 * which protocol and ports an answer to them is leased.
 *
 *   "dns": {"listen": "198.51.100.1:53", "client_address": "198.51.100.12",
 *           "allow": [{"name": "api.example.com", "protocol": "tcp", "ports": [443]},
 *                     {"name": "*.pypi.org", "protocol": "tcp", "ports": [443]}],
 *           "min_ttl_seconds": 5, "max_ttl_seconds": 300,
 *           "http_methods": ["GET", "HEAD", "POST"]}
 *
 * A hostname entry authorizes no address by itself: only what the proxy
 * resolved and boundaryd leased, for the TTL bounded by the two limits.
 */
#ifndef GENSEE_DNSPOLICY_H
#define GENSEE_DNSPOLICY_H

#include <stddef.h>
#include <stdint.h>

#include "dnsmsg.h"

struct json_object;

#define DNSPOLICY_MAX_ENTRIES 256
#define DNSPOLICY_DEFAULT_MIN_TTL 5
#define DNSPOLICY_DEFAULT_MAX_TTL 300
#define DNSPOLICY_MAX_METHODS 16

struct dnspolicy_entry {
	char de_pattern[DNSMSG_NAME_MAX + 1];
	uint8_t de_proto;
	uint16_t de_ports[DNSMSG_MAX_PORTS];
	size_t de_nports;
};

struct dnspolicy {
	char dp_listen[72];
	int dp_client_family;
	uint8_t dp_client_addr[16];
	struct dnspolicy_entry *dp_v;
	size_t dp_n;
	int64_t dp_min_ttl, dp_max_ttl;
	/* http_methods: what the egress may forward besides GET and HEAD */
	char dp_methods[DNSPOLICY_MAX_METHODS][17];
	size_t dp_nmethods;
};

/*
 * Is s ("NAME,PROTO,PORT") a hostname entry rather than an address one?
 * Its first field has a letter or '*' and no ':' or '/' (IPv6, CIDR).
 */
int dnspolicy_is_hostname_entry(const char *s);
/*
 * "api.example.com,tcp,443" or "*.pypi.org,tcp,443" -> the JSON form of
 * one dns.allow entry (a new object), or NULL with *cause. The name is
 * lower-cased; a protocol and exactly one port are required.
 */
struct json_object *dnspolicy_entry_from_string(const char *s, char **cause);

/*
 * Strictly: unknown keys, bad names or patterns, ports outside 1-65535 are
 * refused. Without client_address (a root_pid operation, whose queries are
 * redirected to a loopback proxy) any peer is served: what it can cause is
 * a lease for the operation's own cgroup, for a name its policy allows.
 */
int dnspolicy_parse(struct json_object *dns, struct dnspolicy *p, char **cause);
void dnspolicy_free(struct dnspolicy *p);
/* The first entry matching name at or after *from, or -1. */
ssize_t dnspolicy_match(const struct dnspolicy *p, const char *name, size_t from);
/*
 * May the egress forward an absolute-form request with method? GET and
 * HEAD always; others only when http_methods lists them (none when it is
 * absent: fail closed). CONNECT is never a forwarded method.
 */
int dnspolicy_method_allowed(const struct dnspolicy *p, const char *method);
/* ttl clamped to [min, max]. */
int64_t dnspolicy_ttl(const struct dnspolicy *p, int64_t ttl);

#endif
