/*
 * explain.c: the refusals a sandboxed run met by name, and what would
 * allow each, for the run's summary on stderr and its --json.
 *
 * The kernel's rejects (run.c, NetworkBlocked) and seccomp's refusals are
 * counted by boundaryd and the launcher; the names the DNS proxy refused
 * and the egress's refusals are evidence lines (effects.jsonl), read back
 * here through operation.evidence as `gensee timeline` reads them. A DNS
 * refusal is answered with the --allow-net entry for the name, never with
 * the resolver's address: allowing a resolver is a DNS tunnel.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "client.h"
#include "explain.h"
#include "schema.h"
#include "util.h"

#define EXPLAIN_MAX 32

/* What allows a refusal: the option or key, or NULL when nothing does. */
static const char *
explain_hint(const char *kind, const char *reason, const char *name, long long port,
    char *buf, size_t n, const char **key)
{
	*key = NULL;
	if (strcmp(reason, "name_not_allowed") == 0 || strcmp(reason, "cname_not_allowed") == 0) {
		*key = "linux.network.allow";
		if (strcmp(kind, "dns") == 0)
			snprintf(buf, n, "--allow-net %s,tcp,PORT (the port it connects to)", name);
		else
			snprintf(buf, n, "--allow-net %s,tcp,%lld", name, port);
		return buf;
	}
	if (strcmp(reason, "method_not_allowed") == 0) {
		*key = "linux.network.http_methods";
		return "add the method to linux.network.http_methods";
	}
	if (strcmp(reason, "deny_list") == 0) {
		*key = "linux.network.deny";
		return "remove the entry from --deny-net or linux.network.deny";
	}
	return NULL;	/* restricted, malformed, a lease failure: no policy by name reaches it */
}

struct json_object *
explain_refusals(const char *opid)
{
	struct json_object *p = json_object_new_object(), *res = NULL, *out;
	struct client_error err;

	json_object_object_add(p, "operation_id", json_object_new_string(opid));
	if (client_call("client.sock", "operation.evidence", p, &res, &err) != 0) {
		fprintf(stderr, "gensee run: warning: refusals not listed: %s: %s\n", err.ce_code,
		    err.ce_message);
		client_error_clear(&err);
		return NULL;
	}
	out = json_object_new_array();
	struct json_object *ev = schema_child(res, "events");
	for (size_t i = 0; ev != NULL && i < json_object_array_length(ev); i++) {
		struct json_object *e = json_object_array_get_idx(ev, i);
		const char *type = schema_string(e, "type"), *reason = schema_string(e, "reason");
		const char *decision = schema_string(e, "decision");
		if (type == NULL || reason == NULL || decision == NULL ||
		    strcmp(decision, "deny") != 0 || (strcmp(type, "dns_decision") != 0 &&
		    strcmp(type, "connect_decision") != 0))
			continue;
		int dns = strcmp(type, "dns_decision") == 0;
		const char *kind = dns ? "dns" : schema_string(e, "method") ? "http" : "connect";
		const char *name = dns ? schema_string(e, "qname") : schema_string(e, "host");
		long long port = (long long)schema_int(e, "port", 0);
		char what[2600], hint[400];
		if (name == NULL)
			continue;
		if (dns)
			snprintf(what, sizeof(what), "DNS %s %s", schema_string(e, "qtype") ?
			    schema_string(e, "qtype") : "?", name);
		else if (strcmp(kind, "http") == 0)
			snprintf(what, sizeof(what), "%s %s", schema_string(e, "method"),
			    schema_string(e, "url") ? schema_string(e, "url") : name);
		else
			snprintf(what, sizeof(what), "CONNECT %s:%lld", name, port);
		/* Once per what and why: an agent retrying a name is one line. */
		int seen = 0;
		for (size_t k = 0; k < json_object_array_length(out) && !seen; k++) {
			struct json_object *o = json_object_array_get_idx(out, k);
			seen = strcmp(schema_string(o, "what"), what) == 0 &&
			    strcmp(schema_string(o, "reason"), reason) == 0;
		}
		if (seen || json_object_array_length(out) == EXPLAIN_MAX)
			continue;
		const char *key, *allow = explain_hint(kind, reason, name, port, hint, sizeof(hint),
		    &key);
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "kind", json_object_new_string(kind));
		json_object_object_add(o, "what", json_object_new_string(what));
		json_object_object_add(o, "reason", json_object_new_string(reason));
		json_object_object_add(o, "allow_with", allow ? json_object_new_string(allow) : NULL);
		json_object_object_add(o, "policy_key", key ? json_object_new_string(key) : NULL);
		json_object_array_add(out, o);
	}
	json_object_put(res);
	return out;
}

void
explain_print(const char *opid, struct json_object *refused)
{
	size_t n = refused ? json_object_array_length(refused) : 0;

	if (n == 0)
		return;
	fprintf(stderr, "gensee: operation %s: refused by name (gensee timeline --operation %s):\n",
	    opid, opid);
	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_object_array_get_idx(refused, i);
		fprintf(stderr, "gensee:   %s (%s)\n", schema_string(o, "what"),
		    schema_string(o, "reason"));
		if (schema_string(o, "allow_with") != NULL)
			fprintf(stderr, "gensee:     to allow it: %s\n", schema_string(o, "allow_with"));
	}
}
