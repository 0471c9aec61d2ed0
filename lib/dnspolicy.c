/*
 * dnspolicy.c: the "dns" section of an operation network config.
 *
 * It comes from a root-owned config, but it names what an agent may reach,
 * so it is read as strictly as the envelope: a pattern that could match
 * more than it says ("*" alone, "*.com", upper case, a trailing dot) is
 * refused rather than normalized.
 */
#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "connreq.h"
#include "dnspolicy.h"
#include "netpolicy.h"
#include "schema.h"
#include "util.h"

static const struct schema_field dns_fields[] = {
	{ "listen", SCHEMA_STRING, SCHEMA_REQUIRED, 3, 64, 0 },
	{ "client_address", SCHEMA_STRING, 0, 2, 64, 0 },
	{ "allow", SCHEMA_ARRAY, SCHEMA_REQUIRED, 0, DNSPOLICY_MAX_ENTRIES, 0 },
	{ "min_ttl_seconds", SCHEMA_INT, 0, 1, 3600, 0 },
	{ "max_ttl_seconds", SCHEMA_INT, 0, 1, NETPOLICY_MAX_LEASE_TTL, 0 },
	/* set by boundaryd for a gensee run operation: its CONNECT listener */
	{ "connect_listen", SCHEMA_STRING, 0, 3, 64, 0 },
	/* what its egress forwards besides GET and HEAD (gensee run: linux.network.http_methods) */
	{ "http_methods", SCHEMA_STRING_ARRAY, 0, 0, DNSPOLICY_MAX_METHODS, 16 },
};

static const struct schema_field entry_fields[] = {
	{ "name", SCHEMA_STRING, SCHEMA_REQUIRED, 1, DNSMSG_NAME_MAX, 0 },
	{ "protocol", SCHEMA_STRING, SCHEMA_REQUIRED, 3, 3, 0 },
	{ "ports", SCHEMA_ARRAY, SCHEMA_REQUIRED, 1, DNSMSG_MAX_PORTS, 0 },
};

void
dnspolicy_free(struct dnspolicy *p)
{
	free(p->dp_v);
	memset(p, 0, sizeof(*p));
}

int
dnspolicy_parse(struct json_object *dns, struct dnspolicy *p, char **cause)
{
	struct schema_error err;
	struct json_object *allow;
	uint8_t a[16];
	uint16_t port;
	int fam;

	memset(p, 0, sizeof(*p));
	if (schema_validate(dns, dns_fields, nitems(dns_fields), &err) != 0) {
		util_cause(cause, "dns: %s (%s)", err.se_message, err.se_code);
		return -1;
	}
	/* The proxy binds exactly this: an address and a port, never a name. */
	if (netpolicy_parse_listen(schema_string(dns, "listen"), &fam, a, &port) != 0) {
		util_cause(cause, "dns.listen: must be IPv4:PORT or [IPv6]:PORT");
		return -1;
	}
	util_strlcpy(p->dp_listen, schema_string(dns, "listen"), sizeof(p->dp_listen));
	if (schema_string(dns, "client_address") != NULL &&
	    netpolicy_parse_addr(schema_string(dns, "client_address"), &p->dp_client_family,
	    p->dp_client_addr) != 0) {
		util_cause(cause, "dns.client_address: not an IP address");
		return -1;
	}
	p->dp_min_ttl = schema_int(dns, "min_ttl_seconds", DNSPOLICY_DEFAULT_MIN_TTL);
	p->dp_max_ttl = schema_int(dns, "max_ttl_seconds", DNSPOLICY_DEFAULT_MAX_TTL);
	if (p->dp_min_ttl > p->dp_max_ttl) {
		util_cause(cause, "dns: min_ttl_seconds over max_ttl_seconds");
		return -1;
	}
	struct json_object *m = schema_child(dns, "http_methods");
	for (size_t i = 0; m != NULL && i < json_object_array_length(m); i++) {
		const char *s = json_object_get_string(json_object_array_get_idx(m, i));
		if (!connreq_valid_method(s) || strcmp(s, "CONNECT") == 0) {
			util_cause(cause, "dns.http_methods[%zu]: not a method (A-Z, not CONNECT)", i);
			return -1;
		}
		util_strlcpy(p->dp_methods[p->dp_nmethods++], s, sizeof(p->dp_methods[0]));
	}
	allow = schema_child(dns, "allow");
	p->dp_n = json_object_array_length(allow);
	if (p->dp_n > 0 && (p->dp_v = calloc(p->dp_n, sizeof(*p->dp_v))) == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < p->dp_n; i++) {
		struct json_object *e = json_object_array_get_idx(allow, i), *ports;
		struct dnspolicy_entry *de = &p->dp_v[i];
		int proto;
		if (schema_validate(e, entry_fields, nitems(entry_fields), &err) != 0) {
			util_cause(cause, "dns.allow[%zu]: %s (%s)", i, err.se_message, err.se_code);
			goto fail;
		}
		if (!dnsmsg_valid_pattern(schema_string(e, "name"))) {
			util_cause(cause, "dns.allow[%zu].name: not a lower-case name or *.name.tld "
			    "pattern", i);
			goto fail;
		}
		util_strlcpy(de->de_pattern, schema_string(e, "name"), sizeof(de->de_pattern));
		if ((proto = netpolicy_parse_proto(schema_string(e, "protocol"))) < 0) {
			util_cause(cause, "dns.allow[%zu].protocol: tcp or udp", i);
			goto fail;
		}
		de->de_proto = (uint8_t)proto;
		ports = schema_child(e, "ports");
		for (size_t k = 0; k < json_object_array_length(ports); k++) {
			struct json_object *pj = json_object_array_get_idx(ports, k);
			int64_t v = json_object_is_type(pj, json_type_int) ? json_object_get_int64(pj) : 0;
			if (v < 1 || v > 65535) {
				util_cause(cause, "dns.allow[%zu].ports[%zu]: a port 1-65535", i, k);
				goto fail;
			}
			de->de_ports[de->de_nports++] = (uint16_t)v;
		}
	}
	return 0;
fail:
	dnspolicy_free(p);
	return -1;
}

int
dnspolicy_method_allowed(const struct dnspolicy *p, const char *method)
{
	if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
		return 1;
	for (size_t i = 0; i < p->dp_nmethods; i++)
		if (strcmp(p->dp_methods[i], method) == 0)
			return 1;
	return 0;
}

int
dnspolicy_is_hostname_entry(const char *s)
{
	size_t n = strcspn(s, ",");
	int name = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == ':' || s[i] == '/')
			return 0;
		if (s[i] == '*' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z'))
			name = 1;
	}
	return name;
}

struct json_object *
dnspolicy_entry_from_string(const char *s, char **cause)
{
	char name[DNSMSG_NAME_MAX + 2], proto[8], port[8];
	const char *c1 = strchr(s, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
	char *end;
	long v;

	if (c1 == NULL || c2 == NULL || strchr(c2 + 1, ',') != NULL ||
	    (size_t)(c1 - s) >= sizeof(name) || (size_t)(c2 - c1 - 1) >= sizeof(proto) ||
	    strlen(c2 + 1) >= sizeof(port)) {
		util_cause(cause, "%s: a hostname entry is NAME,PROTOCOL,PORT (api.example.com,tcp,443)",
		    s);
		return NULL;
	}
	memcpy(name, s, (size_t)(c1 - s));
	name[c1 - s] = '\0';
	for (char *p = name; *p != '\0'; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p + 32);
	memcpy(proto, c1 + 1, (size_t)(c2 - c1 - 1));
	proto[c2 - c1 - 1] = '\0';
	util_strlcpy(port, c2 + 1, sizeof(port));
	if (!dnsmsg_valid_pattern(name)) {
		util_cause(cause, "%s: not a DNS name or a *.name.tld pattern", s);
		return NULL;
	}
	if (netpolicy_parse_proto(proto) < 0) {
		util_cause(cause, "%s: the protocol must be tcp or udp", s);
		return NULL;
	}
	errno = 0;
	v = strtol(port, &end, 10);
	if (errno != 0 || end == port || *end != '\0' || v < 1 || v > 65535 || port[0] == '0') {
		util_cause(cause, "%s: one port 1-65535", s);
		return NULL;
	}
	struct json_object *o = json_object_new_object(), *ports = json_object_new_array();
	json_object_object_add(o, "name", json_object_new_string(name));
	json_object_object_add(o, "protocol", json_object_new_string(proto));
	json_object_array_add(ports, json_object_new_int((int)v));
	json_object_object_add(o, "ports", ports);
	return o;
}

ssize_t
dnspolicy_match(const struct dnspolicy *p, const char *name, size_t from)
{
	for (size_t i = from; i < p->dp_n; i++)
		if (dnsmsg_name_match(p->dp_v[i].de_pattern, name))
			return (ssize_t)i;
	return -1;
}

int64_t
dnspolicy_ttl(const struct dnspolicy *p, int64_t ttl)
{
	if (ttl < p->dp_min_ttl)
		return p->dp_min_ttl;
	if (ttl > p->dp_max_ttl)
		return p->dp_max_ttl;
	return ttl;
}
