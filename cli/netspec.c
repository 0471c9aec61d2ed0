/*
 * netspec.c: building a run's network spec.
 *
 * Precedence: --deny-all, then explicit --allow-net/--deny-net overrides,
 * then linux.network from the policy. With nothing at all, a sandboxed run
 * gets no network (an empty allowlist): fail closed. Setting only deny
 * means deny-only monitor mode, as in the seed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "dnspolicy.h"
#include "frame.h"
#include "netpolicy.h"
#include "netspec.h"
#include "policy.h"
#include "schema.h"
#include "util.h"

void
netspec_opts_init(struct netspec_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->no_max_ttl = -1;
}

int
netspec_option(struct netspec_opts *o, const char *opt, const char *arg)
{
	if (strcmp(opt, "allow-net") == 0 && o->no_nallow < nitems(o->no_allow)) {
		o->no_allow[o->no_nallow++] = arg;
	} else if (strcmp(opt, "deny-net") == 0 && o->no_ndeny < nitems(o->no_deny)) {
		o->no_deny[o->no_ndeny++] = arg;
	} else if (strcmp(opt, "lease-scope") == 0 && o->no_nscopes < nitems(o->no_scopes)) {
		o->no_scopes[o->no_nscopes++] = arg;
	} else if (strcmp(opt, "deny-all") == 0) {
		o->no_deny_all = 1;
	} else if (strcmp(opt, "monitor") == 0) {
		o->no_monitor = 1;
	} else if (strcmp(opt, "max-lease-ttl") == 0) {
		if (util_parse_i64(arg, 0, NETPOLICY_MAX_LEASE_TTL, &o->no_max_ttl) != 0)
			return -1;
	} else {
		return 0;
	}
	return 1;
}

const char *
policy_path(void)
{
	static char path[4096];
	const char *home = getenv("GENSEE_HOME");
	if (home != NULL && *home != '\0')
		snprintf(path, sizeof(path), "%s/policy.json", home);
	else
		snprintf(path, sizeof(path), "%s/.gensee/policy.json",
		    getenv("HOME") ? getenv("HOME") : "/nonexistent");
	return path;
}

/* The user's policy file alone, validated; an empty document when there is none. */
static struct json_object *
policy_load_user(char **cause)
{
	char *buf, *why = NULL;
	size_t len;
	struct json_object *o = NULL;

	if (util_read_path(policy_path(), 1 << 20, &buf, &len) != 0) {
		if (errno == ENOENT)
			return json_object_new_object();
		util_cause(cause, "%s: %s", policy_path(), strerror(errno));
		return NULL;
	}
	int st = frame_parse_payload((const uint8_t *)buf, len, &o);
	free(buf);
	if (st != FRAME_OK) {
		util_cause(cause, "%s: %s", policy_path(), frame_status_code(st));
		return NULL;
	}
	/* One schema decides what a policy may say (cli/policy.c): refuse the rest. */
	if (policy_validate(o, NULL, &why) != 0) {
		util_cause(cause, "%s: %s", policy_path(), why);
		free(why);
		json_object_put(o);
		return NULL;
	}
	return o;
}

struct json_object *
policy_load(char **cause)
{
	struct json_object *o = policy_load_user(cause), *host;

	/* The administrator's floor: the user's policy can only narrow it. */
	if (o != NULL && (hostpolicy_get(&host, cause) != 0 ||
	    hostpolicy_narrow(o, host, cause) != 0)) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* Check entries locally and copy them; hostnames become warnings. */
static int
netspec_copy(struct json_object *dst, const char *const *v, size_t n, const char *what,
    struct json_object *warnings, char **cause)
{
	for (size_t i = 0; i < n; i++) {
		struct np_grants g = { 0 };
		int hostname = 0;
		char *why = NULL;
		/* Allowed hostnames go to the operation's DNS proxy (network.md "DNS"). */
		if (strcmp(what, "allow") == 0 && dnspolicy_is_hostname_entry(v[i]) &&
		    strchr(v[i], ',') != NULL) {
			struct json_object *e = dnspolicy_entry_from_string(v[i], cause);
			if (e == NULL)
				return -1;
			json_object_put(e);
			json_object_array_add(dst, json_object_new_string(v[i]));
			continue;
		}
		if (netpolicy_parse_grant_string(v[i], &g, &hostname, &why) != 0) {
			np_grants_free(&g);
			if (hostname) {
				char w[256];
				snprintf(w, sizeof(w), "%s: hostname %s skipped (an allowed hostname is "
				    "NAME,PROTO,PORT; deny lists take addresses)", what, v[i]);
				json_object_array_add(warnings, json_object_new_string(w));
				free(why);
				continue;
			}
			util_cause(cause, "%s: %s", what, why);
			free(why);
			return -1;
		}
		np_grants_free(&g);
		json_object_array_add(dst, json_object_new_string(v[i]));
	}
	return 0;
}

/* The strings of a policy array (borrowed), or 0 entries. */
static size_t
netspec_policy_list(struct json_object *net, const char *key, const char **out, size_t max,
    char **cause)
{
	struct json_object *a = schema_child(net, key);
	size_t n = 0;

	if (a == NULL)
		return 0;
	if (!json_object_is_type(a, json_type_array)) {
		util_cause(cause, "%s: linux.network.%s must be an array of strings", policy_path(),
		    key);
		return (size_t)-1;
	}
	for (size_t i = 0; i < json_object_array_length(a) && n < max; i++) {
		struct json_object *s = json_object_array_get_idx(a, i);
		if (!json_object_is_type(s, json_type_string)) {
			util_cause(cause, "%s: linux.network.%s must be an array of strings",
			    policy_path(), key);
			return (size_t)-1;
		}
		out[n++] = json_object_get_string(s);
	}
	return n;
}

struct json_object *
netspec_build(const struct netspec_opts *o, struct json_object *policy,
    struct json_object *warnings, char **cause)
{
	struct json_object *net = schema_child(schema_child(policy, "linux"), "network");
	struct json_object *spec = json_object_new_object();
	struct json_object *allow = json_object_new_array(), *deny = json_object_new_array();
	struct json_object *scopes = json_object_new_array();
	const char *pallow[256], *pdeny[256], *pscopes[256];
	const char *const *a = o->no_allow, *const *d = o->no_deny, *const *sc = o->no_scopes;
	size_t na = o->no_nallow, nd = o->no_ndeny, ns = o->no_nscopes;
	const char *mode = NULL;
	int64_t ttl = o->no_max_ttl;

	json_object_object_add(spec, "allow", allow);
	json_object_object_add(spec, "deny", deny);
	json_object_object_add(spec, "lease_scopes", scopes);
	if (net != NULL && !json_object_is_type(net, json_type_object)) {
		util_cause(cause, "%s: linux.network must be an object", policy_path());
		goto fail;
	}
	int overrides = na > 0 || nd > 0 || o->no_deny_all || o->no_monitor;
	if (!overrides && net != NULL) {
		size_t x;
		if ((x = netspec_policy_list(net, "allow", pallow, nitems(pallow), cause)) == (size_t)-1)
			goto fail;
		a = pallow, na = x;
		if ((x = netspec_policy_list(net, "deny", pdeny, nitems(pdeny), cause)) == (size_t)-1)
			goto fail;
		d = pdeny, nd = x;
		mode = schema_string(net, "mode");
	}
	if (ns == 0 && net != NULL) {
		size_t x = netspec_policy_list(net, "lease_scopes", pscopes, nitems(pscopes), cause);
		if (x == (size_t)-1)
			goto fail;
		sc = pscopes, ns = x;
	}
	if (ttl < 0)
		ttl = net != NULL ? schema_int(net, "max_lease_ttl_seconds", 0) : 0;
	if (o->no_deny_all) {
		mode = "allowlist";
		na = 0;
	} else if (o->no_monitor) {
		mode = "monitor";
	} else if (mode == NULL) {
		/* Only deny entries and no mode: deny-only monitor mode. */
		mode = (na == 0 && nd > 0) ? "monitor" : "allowlist";
	}
	if (strcmp(mode, "allowlist") != 0 && strcmp(mode, "monitor") != 0) {
		util_cause(cause, "linux.network.mode: expected allowlist or monitor, not %s", mode);
		goto fail;
	}
	json_object_object_add(spec, "mode", json_object_new_string(mode));
	if (netspec_copy(allow, a, na, "allow", warnings, cause) != 0 ||
	    netspec_copy(deny, d, nd, "deny", warnings, cause) != 0 ||
	    netspec_copy(scopes, sc, ns, "lease_scopes", warnings, cause) != 0)
		goto fail;
	json_object_object_add(spec, "max_lease_ttl_seconds", json_object_new_int64(ttl));
	/* What the egress forwards for http:// (already narrowed by the host policy). */
	struct json_object *m = policy_get_effective(policy, "linux.network.http_methods");
	if (m == NULL || !json_object_is_type(m, json_type_array)) {
		json_object_put(m);
		util_cause(cause, "%s: linux.network.http_methods must be a list", policy_path());
		goto fail;
	}
	json_object_object_add(spec, "http_methods", m);
	return spec;
fail:
	json_object_put(spec);
	return NULL;
}

struct json_object *
fanspec_build(struct json_object *policy, int force, char **cause)
{
	struct json_object *linux_ = schema_child(policy, "linux");
	struct json_object *fan = schema_child(linux_, "fanotify");
	struct json_object *spec = json_object_new_object(), *rules = json_object_new_array();
	const char *posture = schema_string(linux_, "posture");
	const char *action = schema_string(fan, "action");
	struct json_object *v;

	json_object_object_add(spec, "enabled",
	    json_object_new_boolean(force || schema_bool(fan, "enabled", 0)));
	json_object_object_add(spec, "posture", json_object_new_string(posture ? posture : "enforce"));
	json_object_object_add(spec, "rules", rules);
	if (schema_string(fan, "on_sensor_loss") != NULL)
		json_object_object_add(spec, "on_sensor_loss",
		    json_object_new_string(schema_string(fan, "on_sensor_loss")));
	if (getenv("HOME") != NULL && getenv("HOME")[0] == '/')
		json_object_object_add(spec, "home", json_object_new_string(getenv("HOME")));
	/* Where the agent works: sensord looks there for the files suffix rules name. */
	char *ws = realpath(".", NULL);
	if (ws != NULL) {
		json_object_object_add(spec, "workspace", json_object_new_string(ws));
		free(ws);
	}
	if ((v = schema_child(fan, "paths")) != NULL) {
		if (!json_object_is_type(v, json_type_array)) {
			util_cause(cause, "%s: linux.fanotify.paths must be a list", policy_path());
			json_object_put(spec);
			return NULL;
		}
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			struct json_object *r = json_object_new_object();
			json_object_object_add(r, "path",
			    json_object_get(json_object_array_get_idx(v, i)));
			json_object_object_add(r, "action", json_object_new_string(action ? action :
			    "deny"));
			json_object_array_add(rules, r);
		}
	}
	if ((v = schema_child(fan, "rules")) != NULL) {
		if (!json_object_is_type(v, json_type_array)) {
			util_cause(cause, "%s: linux.fanotify.rules must be a list", policy_path());
			json_object_put(spec);
			return NULL;
		}
		for (size_t i = 0; i < json_object_array_length(v); i++)
			json_object_array_add(rules, json_object_get(json_object_array_get_idx(v, i)));
	}
	return spec;
}
