/*
 * netpolicy.c: envelopes, restricted destinations, lease eligibility and
 * the one disposition per boundary event.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <json-c/json.h>

#include "dnspolicy.h"
#include "httpurl.h"
#include "netpolicy.h"
#include "util.h"

static size_t
np_alen(int family)
{
	return family == AF_INET ? 4 : 16;
}

const char *
netpolicy_disposition_name(enum np_disposition d)
{
	switch (d) {
	case NP_ALLOW:
		return "allow";
	case NP_LEASE:
		return "lease";
	case NP_MEDIATOR:
		return "mediator";
	case NP_DENY:
		return "deny";
	}
	return "deny";
}

int
netpolicy_parse_addr(const char *s, int *family, uint8_t addr[16])
{
	memset(addr, 0, 16);
	if (inet_pton(AF_INET, s, addr) == 1) {
		*family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, addr) == 1) {
		*family = AF_INET6;
		return 0;
	}
	return -1;
}

/* Does s look like a DNS name rather than a malformed address? */
static int
np_looks_like_hostname(const char *s)
{
	int alpha = 0;
	for (const char *p = s; *p != '\0'; p++) {
		if (isalpha((unsigned char)*p))
			alpha = 1;
		else if (!isdigit((unsigned char)*p) && *p != '.' && *p != '-')
			return 0;
	}
	return alpha;
}

int
netpolicy_parse_range(const char *s, struct np_range *out, int *hostname)
{
	char buf[128];
	char *slash;
	long prefix = -1;
	size_t len;

	if (hostname != NULL)
		*hostname = 0;
	memset(out, 0, sizeof(*out));
	if (util_strlcpy(buf, s, sizeof(buf)) >= sizeof(buf))
		return -1;
	slash = strchr(buf, '/');
	if (slash != NULL) {
		char *end;
		*slash = '\0';
		if (slash[1] == '\0' || !isdigit((unsigned char)slash[1]))
			return -1;
		errno = 0;
		prefix = strtol(slash + 1, &end, 10);
		if (errno != 0 || *end != '\0')
			return -1;
	}
	if (netpolicy_parse_addr(buf, &out->nr_family, out->nr_lo) != 0) {
		if (hostname != NULL && slash == NULL && np_looks_like_hostname(buf))
			*hostname = 1;
		return -1;
	}
	len = np_alen(out->nr_family);
	if (prefix < 0)
		prefix = (long)len * 8;
	if (prefix > (long)len * 8)
		return -1;
	for (size_t i = 0; i < len; i++) {
		int bits = (int)prefix - (int)i * 8;
		uint8_t mask = bits >= 8 ? 0xff : bits <= 0 ? 0 : (uint8_t)(0xff << (8 - bits));
		out->nr_lo[i] &= mask;
		out->nr_hi[i] = out->nr_lo[i] | (uint8_t)~mask;
	}
	return 0;
}

int
netpolicy_parse_proto(const char *s)
{
	if (strcmp(s, "tcp") == 0)
		return IPPROTO_TCP;
	if (strcmp(s, "udp") == 0)
		return IPPROTO_UDP;
	return -1;
}

const char *
netpolicy_proto_name(uint8_t proto)
{
	return proto == IPPROTO_TCP ? "tcp" : proto == IPPROTO_UDP ? "udp" : "?";
}

/* "443" or "8000-8100" into an inclusive range. */
static int
np_parse_ports(const char *s, uint16_t *lo, uint16_t *hi)
{
	int64_t a, b;
	char buf[32];
	char *dash;

	if (util_strlcpy(buf, s, sizeof(buf)) >= sizeof(buf))
		return -1;
	dash = strchr(buf, '-');
	if (dash != NULL)
		*dash = '\0';
	if (util_parse_i64(buf, 0, 65535, &a) != 0)
		return -1;
	b = a;
	if (dash != NULL && util_parse_i64(dash + 1, 0, 65535, &b) != 0)
		return -1;
	if (b < a)
		return -1;
	*lo = (uint16_t)a;
	*hi = (uint16_t)b;
	return 0;
}

int
np_grants_add(struct np_grants *g, const struct np_grant *one)
{
	if (g->g_n >= NETPOLICY_MAX_GRANTS) {
		errno = E2BIG;
		return -1;
	}
	if (g->g_n == g->g_cap) {
		size_t cap = g->g_cap ? 2 * g->g_cap : 16;
		struct np_grant *v = realloc(g->g_v, cap * sizeof(*v));
		if (v == NULL)
			return -1;
		g->g_v = v;
		g->g_cap = cap;
	}
	g->g_v[g->g_n++] = *one;
	return 0;
}

void
np_grants_free(struct np_grants *g)
{
	free(g->g_v);
	memset(g, 0, sizeof(*g));
}

int
netpolicy_parse_grant_string(const char *s, struct np_grants *g, int *hostname, char **cause)
{
	char buf[160];
	char *fields[3] = { NULL, NULL, NULL };
	int nf = 0;
	struct np_grant one;

	memset(&one, 0, sizeof(one));
	if (util_strlcpy(buf, s, sizeof(buf)) >= sizeof(buf)) {
		util_cause(cause, "%.40s...: too long", s);
		return -1;
	}
	for (char *p = buf, *tok; (tok = strsep(&p, ",")) != NULL;) {
		if (nf == 3) {
			util_cause(cause, "%s: expected CIDR[,PROTO[,PORTS]]", s);
			return -1;
		}
		fields[nf++] = tok;
	}
	if (netpolicy_parse_range(fields[0], &one.ng_dst, hostname) != 0) {
		util_cause(cause, "%s: %s", fields[0],
		    hostname != NULL && *hostname ? "hostnames are not supported (DNS-aware policy "
		    "comes later)" : "not an IP address or CIDR");
		return -1;
	}
	one.ng_port_lo = 0;
	one.ng_port_hi = 65535;
	if (fields[2] != NULL && np_parse_ports(fields[2], &one.ng_port_lo, &one.ng_port_hi) != 0) {
		util_cause(cause, "%s: bad port or port range", fields[2]);
		return -1;
	}
	if (fields[1] == NULL || *fields[1] == '\0') {
		one.ng_proto = IPPROTO_TCP;
		if (np_grants_add(g, &one) != 0)
			goto nomem;
		one.ng_proto = IPPROTO_UDP;
	} else {
		int p = netpolicy_parse_proto(fields[1]);
		if (p < 0) {
			util_cause(cause, "%s: protocol must be tcp or udp", fields[1]);
			return -1;
		}
		one.ng_proto = (uint8_t)p;
	}
	if (np_grants_add(g, &one) != 0)
		goto nomem;
	return 0;
nomem:
	util_cause(cause, "too many grants");
	return -1;
}

static const struct schema_field grant_fields[] = {
	{ "destination", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
	{ "protocol", SCHEMA_STRING, SCHEMA_REQUIRED, 3, 3, 0 },
	{ "ports", SCHEMA_ARRAY, SCHEMA_REQUIRED, 1, 1024, 0 },
};

int
netpolicy_parse_grant_array(struct json_object *arr, struct np_grants *g, char **cause)
{
	struct schema_error err;
	size_t n;

	if (!json_object_is_type(arr, json_type_array)) {
		util_cause(cause, "grants: expected an array");
		return -1;
	}
	n = json_object_array_length(arr);
	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_object_array_get_idx(arr, i), *ports;
		struct np_grant one;
		int hostname, proto;

		memset(&one, 0, sizeof(one));
		if (schema_validate(o, grant_fields, nitems(grant_fields), &err) != 0) {
			util_cause(cause, "grant %zu: %s (%s)", i, err.se_message, err.se_code);
			return -1;
		}
		if (netpolicy_parse_range(schema_string(o, "destination"), &one.ng_dst,
			&hostname) != 0) {
			util_cause(cause, "grant %zu: destination %s: %s", i,
			    schema_string(o, "destination"),
			    hostname ? "hostnames are not supported" : "not an IP address or CIDR");
			return -1;
		}
		if ((proto = netpolicy_parse_proto(schema_string(o, "protocol"))) < 0) {
			util_cause(cause, "grant %zu: protocol must be tcp or udp", i);
			return -1;
		}
		one.ng_proto = (uint8_t)proto;
		ports = schema_child(o, "ports");
		for (size_t k = 0; k < json_object_array_length(ports); k++) {
			struct json_object *pv = json_object_array_get_idx(ports, k);
			if (json_object_is_type(pv, json_type_int)) {
				int64_t v = json_object_get_int64(pv);
				if (v < 0 || v > 65535) {
					util_cause(cause, "grant %zu: port %lld out of range", i,
					    (long long)v);
					return -1;
				}
				one.ng_port_lo = one.ng_port_hi = (uint16_t)v;
			} else if (!json_object_is_type(pv, json_type_string) ||
			    np_parse_ports(json_object_get_string(pv), &one.ng_port_lo,
				&one.ng_port_hi) != 0) {
				util_cause(cause, "grant %zu: ports must be integers or \"lo-hi\"", i);
				return -1;
			}
			if (np_grants_add(g, &one) != 0) {
				util_cause(cause, "too many grants");
				return -1;
			}
		}
	}
	return 0;
}

static int
np_range_contains(const struct np_range *r, int family, const uint8_t addr[16])
{
	size_t len = np_alen(family);
	return r->nr_family == family && memcmp(r->nr_lo, addr, len) <= 0 &&
	    memcmp(addr, r->nr_hi, len) <= 0;
}

ssize_t
np_grants_find(const struct np_grants *g, int family, const uint8_t addr[16], uint8_t proto,
    uint16_t port)
{
	for (size_t i = 0; i < g->g_n; i++) {
		const struct np_grant *x = &g->g_v[i];
		if (x->ng_proto == proto && port >= x->ng_port_lo && port <= x->ng_port_hi &&
		    np_range_contains(&x->ng_dst, family, addr))
			return (ssize_t)i;
	}
	return -1;
}

/*
 * Built-in restricted destinations. The policy can add to them, never
 * remove them. Documentation ranges (192.0.2.0/24, 198.51.100.0/24,
 * 203.0.113.0/24, 2001:db8::/32) are ordinary destinations.
 */
static const struct {
	const char *cidr;
	const char *why;
} np_builtin[] = {
	{ "0.0.0.0/8", "this_network" },
	{ "10.0.0.0/8", "private" },
	{ "100.64.0.0/10", "carrier_grade_nat" },
	{ "127.0.0.0/8", "loopback" },
	{ "169.254.169.254/32", "cloud_metadata" },
	{ "169.254.0.0/16", "link_local" },
	{ "168.63.129.16/32", "cloud_metadata" },
	{ "172.16.0.0/12", "private" },
	{ "192.0.0.0/24", "ietf_protocol_assignments" },
	{ "192.88.99.0/24", "6to4_relay" },
	{ "192.168.0.0/16", "private" },
	{ "198.18.0.0/15", "benchmark" },
	{ "224.0.0.0/4", "multicast" },
	{ "240.0.0.0/4", "reserved" },
	{ "::/128", "unspecified" },
	{ "::1/128", "loopback" },
	{ "::/96", "ipv4_compatible" },
	{ "64:ff9b:1::/48", "nat64_local" },
	{ "100::/64", "discard" },
	{ "2001:2::/48", "benchmark" },
	{ "2001:10::/28", "orchid" },
	{ "2001:20::/28", "orchid" },
	{ "fd00:ec2::254/128", "cloud_metadata" },
	{ "fc00::/7", "unique_local" },
	{ "fe80::/10", "link_local" },
	{ "fec0::/10", "site_local" },
	{ "ff00::/8", "multicast" },
};

static int
np_builtin_restricted(int family, const uint8_t addr[16], const char **why)
{
	for (size_t i = 0; i < nitems(np_builtin); i++) {
		struct np_range r;
		if (netpolicy_parse_range(np_builtin[i].cidr, &r, NULL) == 0 &&
		    np_range_contains(&r, family, addr)) {
			*why = np_builtin[i].why;
			return 1;
		}
	}
	return 0;
}

/* The IPv4 addresses an IPv6 address carries (mapped, NAT64, 6to4, Teredo). */
static size_t
np_embedded_v4(const uint8_t a[16], uint8_t out[2][4], const char **form)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };

	if (memcmp(a, mapped, 12) == 0) {
		*form = "ipv4_mapped";
		memcpy(out[0], a + 12, 4);
		return 1;
	}
	if (memcmp(a, nat64, 12) == 0) {
		*form = "nat64";
		memcpy(out[0], a + 12, 4);
		return 1;
	}
	if (a[0] == 0x20 && a[1] == 0x02) {
		*form = "6to4";
		memcpy(out[0], a + 2, 4);
		return 1;
	}
	if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) {
		*form = "teredo";
		memcpy(out[0], a + 4, 4); /* server */
		for (int i = 0; i < 4; i++)
			out[1][i] = (uint8_t)~a[12 + i]; /* client, obfuscated */
		return 2;
	}
	return 0;
}

int
netpolicy_restricted(const struct netpolicy *p, int family, const uint8_t addr[16],
    const char **why)
{
	static char buf[64];
	const char *w = NULL;

	if (np_builtin_restricted(family, addr, &w)) {
		*why = w;
		return 1;
	}
	if (family == AF_INET6) {
		uint8_t v4[2][4];
		const char *form = NULL;
		size_t n = np_embedded_v4(addr, v4, &form);
		for (size_t i = 0; i < n; i++) {
			uint8_t full[16] = { 0 };
			memcpy(full, v4[i], 4);
			if (netpolicy_restricted(p, AF_INET, full, &w)) {
				snprintf(buf, sizeof(buf), "%s_%s", form, w);
				*why = buf;
				return 1;
			}
		}
	}
	for (size_t i = 0; p != NULL && i < p->np_nrestricted; i++) {
		if (np_range_contains(&p->np_restricted[i], family, addr)) {
			*why = "policy_restricted";
			return 1;
		}
	}
	return 0;
}

/*
 * The restricted ranges of one family, as the kernel must see them: the
 * built-ins and the policy's, and for IPv6 every form that embeds a
 * restricted IPv4 address (mapped, NAT64, 6to4) plus all of Teredo (its
 * client address is obfuscated across the last 32 bits: no range holds
 * exactly the restricted ones). Caller frees *out.
 */
static int
np_restricted_ranges(const struct netpolicy *p, int family, struct np_range **out, size_t *n)
{
	size_t cap = 2 * (nitems(np_builtin) + (p != NULL ? p->np_nrestricted : 0)) * 4 + 4, k = 0;
	struct np_range *v = calloc(cap, sizeof(*v)), r;
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };

	if (v == NULL)
		return -1;
	for (size_t pass = 0; pass < 2; pass++) {
		size_t m = pass == 0 ? nitems(np_builtin) : (p != NULL ? p->np_nrestricted : 0);
		for (size_t i = 0; i < m; i++) {
			if (pass == 0) {
				if (netpolicy_parse_range(np_builtin[i].cidr, &r, NULL) != 0)
					continue;
			} else {
				r = p->np_restricted[i];
			}
			if (r.nr_family == family) {
				v[k++] = r;
				continue;
			}
			if (family != AF_INET6)
				continue;
			/* An IPv4 range, in each IPv6 form that carries it. */
			struct np_range e = { .nr_family = AF_INET6 };
			memcpy(e.nr_lo, mapped, 12);
			memcpy(e.nr_hi, mapped, 12);
			memcpy(e.nr_lo + 12, r.nr_lo, 4);
			memcpy(e.nr_hi + 12, r.nr_hi, 4);
			v[k++] = e;
			memcpy(e.nr_lo, nat64, 12);
			memcpy(e.nr_hi, nat64, 12);
			v[k++] = e;
			memset(&e, 0, sizeof(e));
			e.nr_family = AF_INET6;
			e.nr_lo[0] = e.nr_hi[0] = 0x20;
			e.nr_lo[1] = e.nr_hi[1] = 0x02;
			memcpy(e.nr_lo + 2, r.nr_lo, 4);
			memcpy(e.nr_hi + 2, r.nr_hi, 4);
			memset(e.nr_hi + 6, 0xff, 10);
			v[k++] = e;
		}
	}
	if (family == AF_INET6) {
		memset(&r, 0, sizeof(r));
		r.nr_family = AF_INET6;
		r.nr_lo[0] = r.nr_hi[0] = 0x20;
		r.nr_lo[1] = r.nr_hi[1] = 0x01;
		memset(r.nr_hi + 4, 0xff, 12);
		v[k++] = r;
	}
	*out = v;
	*n = k;
	return 0;
}

/* Add 1 (d = 1) to or subtract 1 (d = -1) from a big-endian address of len bytes. */
static void
np_addr_step(uint8_t *a, size_t len, int d)
{
	for (size_t i = len; i-- > 0;) {
		if (d > 0 && a[i]++ != 0xff)
			return;
		if (d < 0 && a[i]-- != 0x00)
			return;
	}
}

int
netpolicy_broad_restricted(const struct netpolicy *p, int family, const uint8_t addr[16])
{
	struct np_range *v;
	size_t n;
	int hit = 0;

	if (np_restricted_ranges(p, family, &v, &n) != 0)
		return 1; /* fail closed */
	for (size_t i = 0; i < n && !hit; i++)
		hit = np_range_contains(&v[i], family, addr);
	free(v);
	return hit;
}

/*
 * Only an exact single-address grant may reach a restricted destination:
 * a grant wider than one address is cut around every restricted range
 * before it reaches the kernel, so 0.0.0.0/0 never opens loopback,
 * private, link-local or metadata addresses.
 */
int
netpolicy_grants_effective(const struct netpolicy *p, const struct np_grants *in,
    struct np_grants *out)
{
	for (size_t i = 0; i < in->g_n; i++) {
		const struct np_grant *g = &in->g_v[i];
		size_t len = np_alen(g->ng_dst.nr_family), n, np = 1;
		struct np_range *v, *pieces;

		if (memcmp(g->ng_dst.nr_lo, g->ng_dst.nr_hi, len) == 0) {
			if (np_grants_add(out, g) != 0)
				return -1;
			continue;
		}
		if (np_restricted_ranges(p, g->ng_dst.nr_family, &v, &n) != 0)
			return -1;
		/* Each restricted range splits a piece into at most two. */
		pieces = calloc(n + 2, sizeof(*pieces));
		if (pieces == NULL) {
			free(v);
			return -1;
		}
		pieces[0] = g->ng_dst;
		for (size_t k = 0; k < n; k++) {
			const struct np_range *r = &v[k];
			size_t m = np;
			for (size_t j = 0; j < m; j++) {
				struct np_range x = pieces[j];
				if (memcmp(r->nr_hi, x.nr_lo, len) < 0 || memcmp(r->nr_lo, x.nr_hi, len) > 0)
					continue; /* disjoint */
				int left = memcmp(x.nr_lo, r->nr_lo, len) < 0;
				int right = memcmp(r->nr_hi, x.nr_hi, len) < 0;
				if (left) {
					memcpy(pieces[j].nr_hi, r->nr_lo, len);
					np_addr_step(pieces[j].nr_hi, len, -1);
				}
				if (right) {
					struct np_range *y = left ? &pieces[np++] : &pieces[j];
					*y = x;
					memcpy(y->nr_lo, r->nr_hi, len);
					np_addr_step(y->nr_lo, len, 1);
				}
				if (!left && !right)
					pieces[j].nr_family = 0; /* wholly restricted */
			}
			/* Drop emptied pieces. */
			size_t w = 0;
			for (size_t j = 0; j < np; j++)
				if (pieces[j].nr_family != 0)
					pieces[w++] = pieces[j];
			np = w;
		}
		for (size_t j = 0; j < np; j++) {
			struct np_grant one = *g;
			one.ng_dst = pieces[j];
			if (np_grants_add(out, &one) != 0) {
				free(pieces);
				free(v);
				return -1;
			}
		}
		free(pieces);
		free(v);
	}
	return 0;
}

/* Does the envelope let the tuple through, as the kernel would (see above)? */
static int
np_envelope_allows(const struct netpolicy *p, const struct np_grants *g,
    const struct np_event *ev)
{
	size_t len = np_alen(ev->ne_family);
	int broad = 0;

	for (size_t i = 0; g != NULL && i < g->g_n; i++) {
		const struct np_grant *x = &g->g_v[i];
		if (x->ng_proto != ev->ne_proto || ev->ne_port < x->ng_port_lo ||
		    ev->ne_port > x->ng_port_hi ||
		    !np_range_contains(&x->ng_dst, ev->ne_family, ev->ne_addr))
			continue;
		if (memcmp(x->ng_dst.nr_lo, x->ng_dst.nr_hi, len) == 0)
			return 1;
		broad = 1;
	}
	return broad && !netpolicy_broad_restricted(p, ev->ne_family, ev->ne_addr);
}

void
netpolicy_decide(const struct netpolicy *p, const struct np_boundary *b,
    const struct np_event *ev, int64_t requested_ttl, struct np_decision *out)
{
	const struct np_grants *leases = b->nb_leases;
	const char *why;

	memset(out, 0, sizeof(*out));
	out->nd_disposition = NP_DENY;
	/* The kernel checks the deny list first: nothing opens a denied tuple. */
	if (b->nb_deny != NULL &&
	    np_grants_find(b->nb_deny, ev->ne_family, ev->ne_addr, ev->ne_proto, ev->ne_port) >= 0) {
		out->nd_reason = NPR_DENY_LIST;
		return;
	}
	/* Monitor mode: the kernel lets through whatever no deny entry names. */
	if (b->nb_monitor) {
		out->nd_disposition = NP_ALLOW;
		out->nd_reason = NPR_MONITOR;
		return;
	}
	if (np_envelope_allows(p, b->nb_allow, ev)) {
		out->nd_disposition = NP_ALLOW;
		out->nd_reason = NPR_WITHIN_ENVELOPE;
		return;
	}
	if (leases != NULL &&
	    np_grants_find(leases, ev->ne_family, ev->ne_addr, ev->ne_proto, ev->ne_port) >= 0) {
		out->nd_disposition = NP_ALLOW;
		out->nd_reason = NPR_ACTIVE_LEASE;
		return;
	}
	if (ev->ne_http) {
		/* No mediator runs yet: an HTTP effect has nowhere safe to go. */
		out->nd_reason = NPR_MEDIATOR_UNAVAILABLE;
		return;
	}
	/* A restricted address is never eligible for new authority. */
	if (netpolicy_restricted(p, ev->ne_family, ev->ne_addr, &why)) {
		out->nd_reason = NPR_RESTRICTED;
		return;
	}
	if (np_grants_find(&p->np_lease_scopes, ev->ne_family, ev->ne_addr, ev->ne_proto,
		ev->ne_port) < 0) {
		out->nd_reason = NPR_NOT_ELIGIBLE;
		return;
	}
	if (p->np_max_lease_ttl <= 0) {
		out->nd_reason = NPR_LEASES_DISABLED;
		return;
	}
	out->nd_disposition = NP_LEASE;
	out->nd_reason = NPR_LEASE_SCOPE;
	out->nd_ttl = requested_ttl > 0 && requested_ttl < p->np_max_lease_ttl ? requested_ttl :
	    p->np_max_lease_ttl;
}

void
netpolicy_init(struct netpolicy *p)
{
	memset(p, 0, sizeof(*p));
}

void
netpolicy_free(struct netpolicy *p)
{
	free(p->np_restricted);
	np_grants_free(&p->np_lease_scopes);
	memset(p, 0, sizeof(*p));
}

static const struct schema_field policy_fields[] = {
	{ "schema_version", SCHEMA_INT, SCHEMA_REQUIRED, 1, 1, 0 },
	{ "restricted_destinations", SCHEMA_STRING_ARRAY, 0, 0, NETPOLICY_MAX_RESTRICTED, 64 },
	{ "in_place_lease_scopes", SCHEMA_ARRAY, 0, 0, 4096, 0 },
	{ "max_in_place_lease_ttl_seconds", SCHEMA_INT, 0, 0, NETPOLICY_MAX_LEASE_TTL, 0 },
	{ "http_gateway_available", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "prefer_http_gateway", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "http_gateway_methods", SCHEMA_STRING_ARRAY, 0, 0, 16, 16 },
};

int
netpolicy_parse_policy(struct json_object *obj, struct netpolicy *p, char **cause)
{
	struct schema_error err;
	struct json_object *v;

	if (schema_validate(obj, policy_fields, nitems(policy_fields), &err) != 0) {
		util_cause(cause, "policy: %s (%s)", err.se_message, err.se_code);
		return -1;
	}
	if ((v = schema_child(obj, "restricted_destinations")) != NULL) {
		size_t n = json_object_array_length(v);
		p->np_restricted = calloc(n + 1, sizeof(*p->np_restricted));
		if (p->np_restricted == NULL) {
			util_cause(cause, "out of memory");
			return -1;
		}
		for (size_t i = 0; i < n; i++) {
			const char *s = json_object_get_string(json_object_array_get_idx(v, i));
			if (netpolicy_parse_range(s, &p->np_restricted[i], NULL) != 0) {
				util_cause(cause, "policy.restricted_destinations: %s is not an IP "
				    "address or CIDR", s);
				return -1;
			}
			p->np_nrestricted++;
		}
	}
	if ((v = schema_child(obj, "in_place_lease_scopes")) != NULL &&
	    netpolicy_parse_grant_array(v, &p->np_lease_scopes, cause) != 0)
		return -1;
	p->np_max_lease_ttl = schema_int(obj, "max_in_place_lease_ttl_seconds", 0);
	p->np_http_gateway_available = schema_bool(obj, "http_gateway_available", 0);
	p->np_prefer_http_gateway = schema_bool(obj, "prefer_http_gateway", 0);
	if ((v = schema_child(obj, "http_gateway_methods")) != NULL) {
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			const char *m = json_object_get_string(json_object_array_get_idx(v, i));
			for (const char *c = m; *c != '\0'; c++) {
				if (!isupper((unsigned char)*c)) {
					util_cause(cause, "policy.http_gateway_methods: %s is not a "
					    "method name", m);
					return -1;
				}
			}
		}
	}
	return 0;
}

static const struct schema_field config_fields[] = {
	{ "schema_version", SCHEMA_INT, SCHEMA_REQUIRED, 3, 3, 0 },
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 4, 64, 0 },
	{ "source_run_id", SCHEMA_STRING, 0, 1, 64, 0 },
	{ "source_address", SCHEMA_STRING, 0, 2, 64, 0 },
	{ "envelope", SCHEMA_OBJECT, SCHEMA_REQUIRED, 0, 0, 0 },
	{ "policy", SCHEMA_OBJECT, SCHEMA_REQUIRED, 0, 0, 0 },
	{ "proxy", SCHEMA_OBJECT, 0, 0, 0, 0 },
	{ "dns", SCHEMA_OBJECT, 0, 0, 0, 0 },
};

static const struct schema_field envelope_fields[] = {
	{ "grants", SCHEMA_ARRAY, SCHEMA_REQUIRED, 0, NETPOLICY_MAX_GRANTS, 0 },
};

static const struct schema_field proxy_fields[] = {
	{ "listen", SCHEMA_STRING, SCHEMA_REQUIRED, 3, 64, 0 },
	{ "client_address", SCHEMA_STRING, SCHEMA_REQUIRED, 2, 64, 0 },
	{ "max_request_bytes", SCHEMA_INT, 0, 0, (int64_t)1 << 40, 0 },
	{ "max_response_bytes", SCHEMA_INT, 0, 0, (int64_t)1 << 40, 0 },
	{ "max_redirects", SCHEMA_INT, 0, 0, 20, 0 },
	{ "connect_timeout_seconds", SCHEMA_INT, 0, 1, 3600, 0 },
	{ "io_timeout_seconds", SCHEMA_INT, 0, 1, 3600, 0 },
	{ "transaction", SCHEMA_OBJECT, 0, 0, 0, 0 },
	{ "credentials", SCHEMA_ARRAY, 0, 0, 16, 0 },
};

/* A credential is named, never given: the value lives in a host file (medlease.c). */
static const struct schema_field credential_fields[] = {
	{ "handle_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
	{ "url_prefix", SCHEMA_STRING, SCHEMA_REQUIRED, 8, 2048, 0 },
	{ "header", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
	{ "file", SCHEMA_STRING, SCHEMA_REQUIRED, 2, 1024, 0 },
};

static const struct schema_field transaction_fields[] = {
	{ "effect", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
	{ "scopes", SCHEMA_ARRAY, SCHEMA_REQUIRED, 1, 256, 0 },
	{ "max_ttl_seconds", SCHEMA_INT, SCHEMA_REQUIRED, 1, 86400, 0 },
	{ "max_requests", SCHEMA_INT, 0, 0, 1000000, 0 },
	{ "max_request_bytes", SCHEMA_INT, 0, 0, (int64_t)1 << 40, 0 },
	{ "max_response_bytes", SCHEMA_INT, 0, 0, (int64_t)1 << 40, 0 },
};

static const struct schema_field scope_fields[] = {
	{ "scheme", SCHEMA_STRING, SCHEMA_REQUIRED, 4, 5, 0 },
	{ "authority", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 255, 0 },
	{ "path_prefix", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 2048, 0 },
};

int
netpolicy_parse_listen(const char *s, int *family, uint8_t addr[16], uint16_t *port)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon, *p;
	size_t hl;
	unsigned long v = 0;

	if (s == NULL)
		return -1;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (close == NULL || close[1] != ':')
			return -1;
		hl = (size_t)(close - s - 1);
		colon = close + 1;
		if (hl == 0 || hl >= sizeof(host))
			return -1;
		memcpy(host, s + 1, hl);
		host[hl] = '\0';
		if (inet_pton(AF_INET6, host, addr) != 1)
			return -1;
		*family = AF_INET6;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL)
			return -1;
		hl = (size_t)(colon - s);
		if (hl == 0 || hl >= sizeof(host))
			return -1;
		memcpy(host, s, hl);
		host[hl] = '\0';
		memset(addr, 0, 16);
		if (inet_pton(AF_INET, host, addr) != 1)
			return -1;
		*family = AF_INET;
	}
	/* A decimal port 1-65535, digits only: no sign, no spaces, no leading zeros. */
	p = colon + 1;
	if (*p < '1' || *p > '9')
		return -1;
	for (; *p != '\0'; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (unsigned long)(*p - '0');
		if (v > 65535)
			return -1;
	}
	*port = (uint16_t)v;
	return 0;
}

int
netpolicy_listen_sockaddr(const char *listen, struct sockaddr_storage *ss, socklen_t *sl)
{
	uint8_t a[16];
	uint16_t port;
	int fam;

	if (netpolicy_parse_listen(listen, &fam, a, &port) != 0)
		return -1;
	memset(ss, 0, sizeof(*ss));
	if (fam == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		memcpy(&s4->sin_addr, a, 4);
		*sl = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(&s6->sin6_addr, a, 16);
		*sl = sizeof(*s6);
	}
	return 0;
}

/*
 * proxy.credentials: each url_prefix must be its own canonical form (so a
 * prefix is compared with canonical URLs only, and nothing two parsers
 * read differently can match it), the header a token that is not Host or
 * hop-by-hop, the file an absolute path.
 */
static int
np_check_credentials(struct json_object *creds, char **cause)
{
	static const char *const forbidden[] = { "host", "connection", "content-length",
		"transfer-encoding", "te", "upgrade", "trailer", "keep-alive",
		"proxy-connection" };
	struct schema_error err;
	struct httpurl *u;

	if (creds == NULL)
		return 0;
	if ((u = malloc(sizeof(*u))) == NULL) {
		util_cause(cause, "proxy.credentials: out of memory");
		return -1;
	}
	for (size_t i = 0; i < json_object_array_length(creds); i++) {
		struct json_object *c = json_object_array_get_idx(creds, i);
		const char *prefix, *hdr, *file, *id;
		if (schema_validate(c, credential_fields, nitems(credential_fields), &err) != 0) {
			util_cause(cause, "proxy.credentials[%zu]: %s (%s)", i, err.se_message,
			    err.se_code);
			goto fail;
		}
		prefix = schema_string(c, "url_prefix");
		hdr = schema_string(c, "header");
		file = schema_string(c, "file");
		id = schema_string(c, "handle_id");
		if (httpurl_parse(prefix, strlen(prefix), u) != HTTPURL_OK ||
		    strcmp(u->hu_url, prefix) != 0 || u->hu_has_query) {
			util_cause(cause, "proxy.credentials[%zu].url_prefix: not a canonical "
			    "http(s) URL without a query", i);
			goto fail;
		}
		if (strspn(hdr, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-") !=
		    strlen(hdr)) {
			util_cause(cause, "proxy.credentials[%zu].header: not a header name", i);
			goto fail;
		}
		for (size_t k = 0; k < nitems(forbidden); k++)
			if (strcasecmp(hdr, forbidden[k]) == 0) {
				util_cause(cause, "proxy.credentials[%zu].header: %s may not be "
				    "injected", i, hdr);
				goto fail;
			}
		if (file[0] != '/' || strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		    "0123456789_-") != strlen(id)) {
			util_cause(cause, "proxy.credentials[%zu]: file must be absolute, handle_id "
			    "[A-Za-z0-9_-]", i);
			goto fail;
		}
	}
	free(u);
	return 0;
fail:
	free(u);
	return -1;
}

/* The proxy section is the mediator's: validated here, stored as given. */
static int
np_check_proxy(struct json_object *proxy, char **cause)
{
	struct schema_error err;
	struct json_object *tx, *scopes;
	int fam;
	uint8_t a[16];
	uint16_t port;

	if (schema_validate(proxy, proxy_fields, nitems(proxy_fields), &err) != 0) {
		util_cause(cause, "proxy: %s (%s)", err.se_message, err.se_code);
		return -1;
	}
	if (netpolicy_parse_addr(schema_string(proxy, "client_address"), &fam, a) != 0) {
		util_cause(cause, "proxy.client_address: not an IP address");
		return -1;
	}
	/* The mediator binds exactly this: an address and a port, never a name. */
	if (netpolicy_parse_listen(schema_string(proxy, "listen"), &fam, a, &port) != 0) {
		util_cause(cause, "proxy.listen: must be IPv4:PORT or [IPv6]:PORT");
		return -1;
	}
	if (np_check_credentials(schema_child(proxy, "credentials"), cause) != 0)
		return -1;
	if ((tx = schema_child(proxy, "transaction")) == NULL)
		return 0;
	if (schema_validate(tx, transaction_fields, nitems(transaction_fields), &err) != 0) {
		util_cause(cause, "proxy.transaction: %s (%s)", err.se_message, err.se_code);
		return -1;
	}
	scopes = schema_child(tx, "scopes");
	for (size_t i = 0; i < json_object_array_length(scopes); i++) {
		struct json_object *s = json_object_array_get_idx(scopes, i);
		if (schema_validate(s, scope_fields, nitems(scope_fields), &err) != 0) {
			util_cause(cause, "proxy.transaction.scopes[%zu]: %s (%s)", i,
			    err.se_message, err.se_code);
			return -1;
		}
		const char *scheme = schema_string(s, "scheme");
		if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
			util_cause(cause, "proxy.transaction.scopes[%zu]: scheme must be http or "
			    "https", i);
			return -1;
		}
	}
	return 0;
}

/* Operation ids in configs: op_ followed by [a-z0-9_-]; safe as a path name. */
static int
np_valid_operation_id(const char *s)
{
	if (strncmp(s, "op_", 3) != 0 || s[3] == '\0')
		return 0;
	for (const char *p = s + 3; *p != '\0'; p++)
		if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && *p != '_' &&
		    *p != '-')
			return 0;
	return 1;
}

int
netpolicy_parse_config(struct json_object *obj, struct np_config *c, char **cause)
{
	struct schema_error err;
	struct json_object *env;
	const char *s;

	memset(c, 0, sizeof(*c));
	netpolicy_init(&c->nc_policy);
	if (schema_validate(obj, config_fields, nitems(config_fields), &err) != 0) {
		util_cause(cause, "config: %s (%s)", err.se_message, err.se_code);
		return -1;
	}
	s = schema_string(obj, "operation_id");
	if (!np_valid_operation_id(s)) {
		util_cause(cause, "config: operation_id must be op_ followed by [a-z0-9_-]");
		return -1;
	}
	util_strlcpy(c->nc_operation_id, s, sizeof(c->nc_operation_id));
	if ((s = schema_string(obj, "source_run_id")) != NULL)
		util_strlcpy(c->nc_source_run_id, s, sizeof(c->nc_source_run_id));
	if ((s = schema_string(obj, "source_address")) != NULL) {
		if (netpolicy_parse_addr(s, &c->nc_src_family, c->nc_src_addr) != 0) {
			util_cause(cause, "config: source_address %s is not an IP address", s);
			return -1;
		}
		c->nc_has_source_address = 1;
	}
	env = schema_child(obj, "envelope");
	if (schema_validate(env, envelope_fields, nitems(envelope_fields), &err) != 0) {
		util_cause(cause, "envelope: %s (%s)", err.se_message, err.se_code);
		return -1;
	}
	if (netpolicy_parse_grant_array(schema_child(env, "grants"), &c->nc_envelope, cause) != 0)
		return -1;
	if (netpolicy_parse_policy(schema_child(obj, "policy"), &c->nc_policy, cause) != 0)
		return -1;
	if (schema_child(obj, "proxy") != NULL) {
		if (np_check_proxy(schema_child(obj, "proxy"), cause) != 0)
			return -1;
		c->nc_proxy = json_object_get(schema_child(obj, "proxy"));
	}
	if (schema_child(obj, "dns") != NULL) {
		/* Validated whole here; boundaryd and the proxy parse it again from the record. */
		struct dnspolicy dp;
		int lf;
		uint8_t la[16];
		uint16_t lp;
		if (dnspolicy_parse(schema_child(obj, "dns"), &dp, cause) != 0)
			return -1;
		dnspolicy_free(&dp);
		/*
		 * A source-address operation's proxy serves its address alone. A
		 * config used by `gensee run --network-config` (no source_address)
		 * may leave it out: the cgroup's queries reach the proxy from
		 * whatever local address the kernel picks.
		 */
		if (c->nc_has_source_address &&
		    schema_string(schema_child(obj, "dns"), "client_address") == NULL) {
			util_cause(cause, "dns.client_address: required with source_address");
			return -1;
		}
		/* The subject's port-53 traffic is DNATed to listen: one family. */
		if (c->nc_has_source_address &&
		    (netpolicy_parse_listen(schema_string(schema_child(obj, "dns"), "listen"), &lf, la,
		    &lp) != 0 || lf != c->nc_src_family)) {
			util_cause(cause, "dns.listen: not of source_address's family");
			return -1;
		}
		c->nc_dns = json_object_get(schema_child(obj, "dns"));
	}
	return 0;
}

void
netpolicy_config_free(struct np_config *c)
{
	np_grants_free(&c->nc_envelope);
	netpolicy_free(&c->nc_policy);
	json_object_put(c->nc_proxy);
	json_object_put(c->nc_dns);
	memset(c, 0, sizeof(*c));
}

void
netpolicy_grant_to_elem(const struct np_grant *g, struct nft_elem *e)
{
	memset(e, 0, sizeof(*e));
	e->ne_family = g->ng_dst.nr_family;
	memcpy(e->ne_addr_lo, g->ng_dst.nr_lo, 16);
	memcpy(e->ne_addr_hi, g->ng_dst.nr_hi, 16);
	e->ne_proto = g->ng_proto;
	e->ne_port_lo = g->ng_port_lo;
	e->ne_port_hi = g->ng_port_hi;
}

/* Bit i (from the most significant) of a big-endian address. */
static int
np_bit(const uint8_t *a, int i)
{
	return (a[i / 8] >> (7 - i % 8)) & 1;
}

void
netpolicy_range_format(const struct np_range *r, char *buf, size_t len)
{
	char lo[INET6_ADDRSTRLEN], hi[INET6_ADDRSTRLEN];
	int bits = (int)np_alen(r->nr_family) * 8, prefix = 0;

	inet_ntop(r->nr_family, r->nr_lo, lo, sizeof(lo));
	inet_ntop(r->nr_family, r->nr_hi, hi, sizeof(hi));
	/* lo..hi is lo/prefix when, after the common bits, lo is all 0 and hi all 1. */
	while (prefix < bits && np_bit(r->nr_lo, prefix) == np_bit(r->nr_hi, prefix))
		prefix++;
	for (int i = prefix; i < bits; i++) {
		if (np_bit(r->nr_lo, i) != 0 || np_bit(r->nr_hi, i) != 1) {
			snprintf(buf, len, "%s-%s", lo, hi);
			return;
		}
	}
	if (prefix == bits)
		snprintf(buf, len, "%s", lo);
	else
		snprintf(buf, len, "%s/%d", lo, prefix);
}

struct json_object *
netpolicy_grant_json(const struct np_grant *g)
{
	struct json_object *o = json_object_new_object();
	struct json_object *ports = json_object_new_array();
	char dst[128], pr[16];

	netpolicy_range_format(&g->ng_dst, dst, sizeof(dst));
	json_object_object_add(o, "destination", json_object_new_string(dst));
	json_object_object_add(o, "protocol", json_object_new_string(netpolicy_proto_name(g->ng_proto)));
	if (g->ng_port_lo == g->ng_port_hi) {
		json_object_array_add(ports, json_object_new_int(g->ng_port_lo));
	} else {
		snprintf(pr, sizeof(pr), "%u-%u", g->ng_port_lo, g->ng_port_hi);
		json_object_array_add(ports, json_object_new_string(pr));
	}
	json_object_object_add(o, "ports", ports);
	return o;
}
