/*
 * explain.c: the refusals a sandboxed run met by name, and what would
 * allow each, for the run's summary on stderr and its --json.
 *
 * The kernel's rejects (run.c, NetworkBlocked) and seccomp's refusals are
 * counted by boundaryd and the launcher; the names the DNS proxy refused
 * and the egress's refusals are evidence lines (effects.jsonl), read back
 * here through operation.evidence as `gensee timeline` reads them. A DNS
 * refusal is answered with the --allow-net entry for the name, never with
 * the resolver's address: allowing a resolver is a DNS tunnel. File
 * refusals come from sensord: fanotify's own decisions, and Landlock's
 * denials as the kernel's audit reported them (files.jsonl). Where a sensor
 * did not cover the run, the summary says so: no line is not no refusal.
 */
#include <limits.h>
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

/* Landlock's refusal of a path: which list would grant it. */
static const char *
explain_landlock(const char *blockers, char *buf, size_t n, const char *path, const char **key)
{
	static const char *const writes[] = { "fs.write_file", "fs.make_", "fs.remove_",
		"fs.truncate", "fs.refer" };
	*key = NULL;
	for (size_t i = 0; i < nitems(writes); i++)
		if (strstr(blockers, writes[i]) != NULL) {
			*key = "linux.landlock.read_write";
			snprintf(buf, n, "--linux-landlock-rw %s", path);
			return buf;
		}
	if (strstr(blockers, "fs.read_") != NULL || strstr(blockers, "fs.execute") != NULL) {
		*key = "linux.landlock.read_only";
		snprintf(buf, n, "--linux-landlock-ro %s", path);
		return buf;
	}
	return NULL;	/* signals, abstract sockets, devices: nothing outside is granted */
}

/* A file decision (fanotify's or Landlock's) as a refusal entry, or NULL. */
static struct json_object *
explain_file(struct json_object *e)
{
	const char *event = schema_string(e, "event"), *path = schema_string(e, "path");
	const char *rule = schema_string(e, "rule"), *key, *allow;
	char what[PATH_MAX + 200], hint[PATH_MAX + 64];
	const char *kind;

	if (event == NULL || path == NULL)
		return NULL;
	if (strcmp(event, "landlock") == 0) {
		kind = "landlock";
		snprintf(what, sizeof(what), "%s %s", rule ? rule : "landlock", path);
		allow = explain_landlock(rule ? rule : "", hint, sizeof(hint), path, &key);
	} else {
		kind = "file";
		snprintf(what, sizeof(what), "%s %s (rule %s)", event, path, rule ? rule : "?");
		key = "linux.fanotify.rules";
		allow = "a linux.fanotify.rules entry with action allow for the path";
	}
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "kind", json_object_new_string(kind));
	json_object_object_add(o, "what", json_object_new_string(what));
	json_object_object_add(o, "reason", json_object_new_string(schema_string(e, "reason") ?
	    schema_string(e, "reason") : "denied"));
	json_object_object_add(o, "allow_with", allow ? json_object_new_string(allow) : NULL);
	json_object_object_add(o, "policy_key", key ? json_object_new_string(key) : NULL);
	return o;
}

/* Append o unless the same what and reason is there (an agent retrying is one line). */
static void
explain_add(struct json_object *out, struct json_object *o)
{
	for (size_t k = 0; k < json_object_array_length(out); k++) {
		struct json_object *x = json_object_array_get_idx(out, k);
		if (strcmp(schema_string(x, "what"), schema_string(o, "what")) == 0 &&
		    strcmp(schema_string(x, "reason"), schema_string(o, "reason")) == 0) {
			json_object_put(o);
			return;
		}
	}
	if (json_object_array_length(out) == EXPLAIN_MAX) {
		json_object_put(o);
		return;
	}
	json_object_array_add(out, o);
}

struct json_object *
explain_refusals(const char *opid, struct json_object **not_reported)
{
	struct json_object *p = json_object_new_object(), *res = NULL, *out;
	struct client_error err;

	*not_reported = NULL;
	json_object_object_add(p, "operation_id", json_object_new_string(opid));
	if (client_call("client.sock", "operation.evidence", p, &res, &err) != 0) {
		fprintf(stderr, "gensee run: warning: refusals not listed: %s: %s\n", err.ce_code,
		    err.ce_message);
		client_error_clear(&err);
		return NULL;
	}
	out = json_object_new_array();
	*not_reported = json_object_new_array();
	/* Sensors that did not cover this run: what they would have listed is not here. */
	const char *ll = schema_string(schema_child(res, "sensors"), "landlock_audit");
	if (ll != NULL && strcmp(ll, "off") != 0 && strcmp(ll, "active") != 0) {
		char w[256];
		snprintf(w, sizeof(w), "landlock: %s: its denials are not listed (sensord reads them "
		    "from the kernel's audit: gensee-sensord --enable-audit, or auditctl -e 1)", ll);
		json_object_array_add(*not_reported, json_object_new_string(w));
	}
	const char *fa = schema_string(schema_child(res, "sensors"), "fanotify");
	if (fa != NULL && strcmp(fa, "off") != 0 && strcmp(fa, "active") != 0) {
		char w[160];
		snprintf(w, sizeof(w), "fanotify: %s: some file decisions may be missing", fa);
		json_object_array_add(*not_reported, json_object_new_string(w));
	}
	struct json_object *ev = schema_child(res, "events");
	for (size_t i = 0; ev != NULL && i < json_object_array_length(ev); i++) {
		struct json_object *e = json_object_array_get_idx(ev, i);
		const char *type = schema_string(e, "type"), *reason = schema_string(e, "reason");
		const char *decision = schema_string(e, "decision");
		const char *evk = schema_string(e, "evidence");
		if (evk != NULL && strcmp(evk, "file") == 0 && decision != NULL &&
		    strcmp(decision, "deny") == 0) {
			struct json_object *o = explain_file(e);
			if (o != NULL)
				explain_add(out, o);
			continue;
		}
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
		const char *key, *allow = explain_hint(kind, reason, name, port, hint, sizeof(hint),
		    &key);
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "kind", json_object_new_string(kind));
		json_object_object_add(o, "what", json_object_new_string(what));
		json_object_object_add(o, "reason", json_object_new_string(reason));
		json_object_object_add(o, "allow_with", allow ? json_object_new_string(allow) : NULL);
		json_object_object_add(o, "policy_key", key ? json_object_new_string(key) : NULL);
		explain_add(out, o);
	}
	json_object_put(res);
	return out;
}

void
explain_print(const char *opid, struct json_object *refused, struct json_object *not_reported,
    int failed)
{
	size_t n = refused ? json_object_array_length(refused) : 0;

	/* A sensor's gap matters where something went wrong; --json always has it. */
	for (size_t i = 0; (failed || n > 0) && not_reported != NULL &&
	    i < json_object_array_length(not_reported); i++)
		fprintf(stderr, "gensee: operation %s: %s\n", opid, json_object_get_string(
		    json_object_array_get_idx(not_reported, i)));
	if (n == 0)
		return;
	fprintf(stderr, "gensee: operation %s: refused (gensee timeline --operation %s):\n",
	    opid, opid);
	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_object_array_get_idx(refused, i);
		fprintf(stderr, "gensee:   %s (%s)\n", schema_string(o, "what"),
		    schema_string(o, "reason"));
		if (schema_string(o, "allow_with") != NULL)
			fprintf(stderr, "gensee:     to allow it: %s\n", schema_string(o, "allow_with"));
	}
}
