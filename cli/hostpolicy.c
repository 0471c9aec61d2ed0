/*
 * hostpolicy.c: the administrator's floor under every user's policy.
 *
 * /etc/gensee/policy.json has the same schema as a user's policy. Each key
 * says in the key table (policy.c, pk_narrow) which way is stricter, and
 * the effective value is the stricter of the host's and the user's: a
 * user can only narrow what the host allows. Allow lists are a ceiling:
 * every entry a user gives (in the policy or on the command line) must lie
 * within one of the host's, or the run is refused.
 *
 * Threat: a prompt-injected agent cannot write this file (root's, and
 * read-only in the mount view anyway); a user who wants a looser run can
 * only get one by not running it through gensee, which the host policy
 * cannot prevent and does not claim to. The file must be root's, not
 * writable by group or others, and not a symlink, so that no other user
 * can plant a looser one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "dnsmsg.h"
#include "dnspolicy.h"
#include "frame.h"
#include "netpolicy.h"
#include "policy.h"
#include "schema.h"
#include "util.h"

/* Open path (no symlink at the end) and check it is a root-owned file or directory. */
static int
hostpolicy_open_checked(int dirfd, const char *path, int dir, char **cause)
{
	struct stat st;
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
	    (dir ? O_DIRECTORY : 0));

	if (fd < 0) {
		if (errno != ENOENT)
			util_cause(cause, "%s: %s", HOSTPOLICY_PATH, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || st.st_uid != 0 || (st.st_mode & 022) != 0 ||
	    (!dir && !S_ISREG(st.st_mode))) {
		util_cause(cause, "%s: the host policy and its directory must be root's and "
		    "writable by root only", HOSTPOLICY_PATH);
		close(fd);
		return -1;
	}
	return fd;
}

/* Read and validate the host policy; *host NULL when there is none. */
static int
hostpolicy_load(struct json_object **host, char **cause)
{
	char dir[] = HOSTPOLICY_PATH, *slash = strrchr(dir, '/');
	char *buf = NULL;
	size_t len;
	int dfd, fd, st;

	*host = NULL;
	*slash = '\0';
	if ((dfd = hostpolicy_open_checked(AT_FDCWD, dir, 1, cause)) < 0)
		return *cause != NULL ? -1 : 0;
	fd = hostpolicy_open_checked(dfd, slash + 1, 0, cause);
	close(dfd);
	if (fd < 0)
		return *cause != NULL ? -1 : 0;
	if (util_read_fd(fd, POLICY_MAX_BYTES, &buf, &len) != 0) {
		util_cause(cause, "%s: %s", HOSTPOLICY_PATH, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	st = frame_parse_payload((const uint8_t *)buf, len, host);
	free(buf);
	if (st != FRAME_OK) {
		util_cause(cause, "%s: %s", HOSTPOLICY_PATH, frame_status_code(st));
		return -1;
	}
	char *why = NULL;
	if (policy_validate(*host, NULL, &why) != 0) {
		util_cause(cause, "%s: %s", HOSTPOLICY_PATH, why);
		free(why);
		json_object_put(*host);
		*host = NULL;
		return -1;
	}
	return 0;
}

/* The host policy, loaded once (NULL: none). */
int
hostpolicy_get(struct json_object **host, char **cause)
{
	static struct json_object *cached;
	static int loaded;

	if (!loaded) {
		if (hostpolicy_load(&cached, cause) != 0)
			return -1;
		loaded = 1;
	}
	*host = cached;
	return 0;
}

/* Position of s in the strictest-first list v, or -1. */
static int
hostpolicy_rank(const char *const *v, const char *s)
{
	for (int i = 0; v[i] != NULL; i++)
		if (strcmp(v[i], s) == 0)
			return i;
	return -1;
}

/*
 * A hostname entry NAME,PROTO,PORT lies within the host's list only under
 * a hostname entry of the same protocol and port whose name is the same
 * or a "*." suffix covering it ("*.a.x" and "b.x" under "*.x"). Address
 * entries never cover a name: what it resolves to is not known here.
 */
static int
hostpolicy_name_within(const char *u, struct json_object *list)
{
	struct json_object *ue = dnspolicy_entry_from_string(u, NULL);
	int ok = 0;

	if (ue == NULL)
		return 0;
	const char *un = schema_string(ue, "name");
	const char *unbare = strncmp(un, "*.", 2) == 0 ? un + 2 : un;
	for (size_t i = 0; i < json_object_array_length(list) && !ok; i++) {
		const char *hs = json_object_get_string(json_object_array_get_idx(list, i));
		struct json_object *he;
		if (hs == NULL || !dnspolicy_is_hostname_entry(hs) ||
		    (he = dnspolicy_entry_from_string(hs, NULL)) == NULL)
			continue;
		const char *hn = schema_string(he, "name");
		ok = strcmp(schema_string(he, "protocol"), schema_string(ue, "protocol")) == 0 &&
		    json_object_get_int(json_object_array_get_idx(schema_child(he, "ports"), 0)) ==
		    json_object_get_int(json_object_array_get_idx(schema_child(ue, "ports"), 0)) &&
		    (strcmp(hn, un) == 0 ||
		    (strncmp(hn, "*.", 2) == 0 && dnsmsg_name_match(hn, unbare)));
		json_object_put(he);
	}
	json_object_put(ue);
	return ok;
}

/* Whether every tuple of grant string u lies within one tuple of the host list. */
static int
hostpolicy_net_within(const char *u, struct json_object *list)
{
	struct np_grants ug = { 0 }, hg = { 0 };
	int hostname = 0, ok = 1;
	char *why = NULL;

	if (dnspolicy_is_hostname_entry(u) && strchr(u, ',') != NULL)
		return hostpolicy_name_within(u, list);

	if (netpolicy_parse_grant_string(u, &ug, &hostname, &why) != 0) {
		free(why);
		np_grants_free(&ug);
		return 0;
	}
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		if (netpolicy_parse_grant_string(json_object_get_string(
		    json_object_array_get_idx(list, i)), &hg, &hostname, &why) != 0) {
			free(why);
			why = NULL;
		}
	}
	for (size_t i = 0; i < ug.g_n && ok; i++) {
		const struct np_grant *g = &ug.g_v[i];
		int found = 0;
		for (size_t j = 0; j < hg.g_n && !found; j++) {
			const struct np_grant *h = &hg.g_v[j];
			found = g->ng_dst.nr_family == h->ng_dst.nr_family &&
			    memcmp(h->ng_dst.nr_lo, g->ng_dst.nr_lo, 16) <= 0 &&
			    memcmp(g->ng_dst.nr_hi, h->ng_dst.nr_hi, 16) <= 0 &&
			    g->ng_proto == h->ng_proto && h->ng_port_lo <= g->ng_port_lo &&
			    g->ng_port_hi <= h->ng_port_hi;
		}
		ok = found;
	}
	np_grants_free(&ug);
	np_grants_free(&hg);
	return ok;
}

/* Whether one entry of a WITHIN key lies within the host's list. */
static int
hostpolicy_entry_within(const struct policy_key *k, const char *entry, struct json_object *list)
{
	if (k->pk_type == POLICY_NETS)
		return hostpolicy_net_within(entry, list);
	for (size_t i = 0; i < json_object_array_length(list); i++)
		if (util_path_below(entry, json_object_get_string(json_object_array_get_idx(list,
		    i))))
			return 1;
	return 0;
}

/* Add the host's entries of a list to the user's, each once. */
static struct json_object *
hostpolicy_union(struct json_object *u, struct json_object *h)
{
	struct json_object *out = json_object_new_array();

	for (int pass = 0; pass < 2; pass++) {
		struct json_object *a = pass ? h : u;
		for (size_t i = 0; a != NULL && i < json_object_array_length(a); i++) {
			struct json_object *v = json_object_array_get_idx(a, i);
			size_t j;
			for (j = 0; j < json_object_array_length(out); j++)
				if (json_object_equal(json_object_array_get_idx(out, j), v))
					break;
			if (j == json_object_array_length(out))
				json_object_array_add(out, json_object_get(v));
		}
	}
	return out;
}

/* Narrow one key of user by host. */
static int
hostpolicy_narrow_key(const struct policy_key *k, struct json_object *user,
    struct json_object *host, char **cause)
{
	struct json_object *h = policy_get_effective(host, k->pk_name);
	struct json_object *u = policy_get_effective(user, k->pk_name), *v = NULL;
	int rc = 0;

	switch (k->pk_narrow) {
	case POLICY_NARROW_UNSET:
		/* Fail closed: a floor nobody said how to apply is no floor. */
		util_cause(cause, "%s: %s: no narrowing rule for this key", HOSTPOLICY_PATH,
		    k->pk_name);
		rc = -1;
		break;
	case POLICY_NARROW_TRUE:
	case POLICY_NARROW_FALSE:
		if (json_object_get_boolean(h) == (k->pk_narrow == POLICY_NARROW_TRUE) &&
		    json_object_get_boolean(u) != json_object_get_boolean(h))
			v = json_object_get(h);
		break;
	case POLICY_NARROW_ORDER:
		if (hostpolicy_rank(k->pk_strict, json_object_get_string(h)) <
		    hostpolicy_rank(k->pk_strict, json_object_get_string(u)))
			v = json_object_get(h);
		break;
	case POLICY_NARROW_MIN:
		if (json_object_get_int64(h) < json_object_get_int64(u))
			v = json_object_get(h);
		break;
	case POLICY_NARROW_UNION:
		if (json_object_array_length(h) > 0)
			v = hostpolicy_union(u, h);
		break;
	case POLICY_NARROW_INTERSECT:
		/* What both allow: an unset user key is its default, narrowed all the same. */
		v = json_object_new_array();
		for (size_t i = 0; i < json_object_array_length(u); i++) {
			struct json_object *e = json_object_array_get_idx(u, i);
			for (size_t j = 0; j < json_object_array_length(h); j++)
				if (json_object_equal(e, json_object_array_get_idx(h, j))) {
					json_object_array_add(v, json_object_get(e));
					break;
				}
		}
		break;
	case POLICY_NARROW_WITHIN:
		/* Unset in the host: no ceiling. Unset in the user: nothing to check. */
		if (policy_is_unset(host, k->pk_name) || policy_is_unset(user, k->pk_name))
			break;
		for (size_t i = 0; i < json_object_array_length(u); i++) {
			const char *e = json_object_get_string(json_object_array_get_idx(u, i));
			if (!hostpolicy_entry_within(k, e, h)) {
				util_cause(cause, "policy: %s: %s is outside what the host policy "
				    "(%s) allows", k->pk_name, e, HOSTPOLICY_PATH);
				rc = -1;
				break;
			}
		}
		break;
	}
	json_object_put(h);
	json_object_put(u);
	if (rc == 0 && v != NULL && policy_set(user, k->pk_name, v, cause) != 0)
		rc = -1;
	return rc;
}

/* Narrow a user policy by the host policy. */
int
hostpolicy_narrow(struct json_object *user, struct json_object *host, char **cause)
{
	const struct policy_key *keys;
	size_t n;

	if (host == NULL)
		return 0;
	keys = policy_keys(&n);
	for (size_t i = 0; i < n; i++) {
		/* An unset host key narrows nothing (its default is not a floor). */
		if (policy_is_unset(host, keys[i].pk_name))
			continue;
		if (hostpolicy_narrow_key(&keys[i], user, host, cause) != 0)
			return -1;
	}
	return 0;
}

/* Whether path lies within the host's list at key (1 when the host sets none). */
int
hostpolicy_path_within(struct json_object *host, const char *key, const char *path)
{
	const struct policy_key *k = policy_key_find(key);
	struct json_object *h;
	int ok;

	if (host == NULL || k == NULL || policy_is_unset(host, key))
		return 1;
	h = policy_get_effective(host, key);
	ok = hostpolicy_entry_within(k, path, h);
	json_object_put(h);
	return ok;
}

/* Check a run's network spec against the host policy. */
int
hostpolicy_netspec(struct json_object *host, struct json_object *spec, char **cause)
{
	static const char *const within[] = { "allow", "lease_scopes" };
	const struct policy_key *k;
	struct json_object *h;
	char key[64];

	if (host == NULL)
		return 0;
	for (size_t w = 0; w < nitems(within); w++) {
		struct json_object *a = schema_child(spec, within[w]);
		snprintf(key, sizeof(key), "linux.network.%s", within[w]);
		if (policy_is_unset(host, key))
			continue;
		k = policy_key_find(key);
		h = policy_get_effective(host, key);
		for (size_t i = 0; a != NULL && i < json_object_array_length(a); i++) {
			const char *e = json_object_get_string(json_object_array_get_idx(a, i));
			if (!hostpolicy_entry_within(k, e, h)) {
				util_cause(cause, "%s %s is outside what the host policy (%s) allows",
				    within[w], e, HOSTPOLICY_PATH);
				json_object_put(h);
				return -1;
			}
		}
		json_object_put(h);
	}
	/* The host's deny entries stay, whatever the options replaced. */
	h = policy_get_effective(host, "linux.network.deny");
	json_object_object_add(spec, "deny", hostpolicy_union(schema_child(spec, "deny"), h));
	json_object_put(h);
	if (!policy_is_unset(host, "linux.network.mode")) {
		const char *hm = schema_string(schema_child(schema_child(host, "linux"), "network"),
		    "mode"), *sm = schema_string(spec, "mode");
		if (hm != NULL && sm != NULL && strcmp(hm, "allowlist") == 0 &&
		    strcmp(sm, "allowlist") != 0) {
			util_cause(cause, "network mode %s: the host policy (%s) requires allowlist",
			    sm, HOSTPOLICY_PATH);
			return -1;
		}
	}
	if (!policy_is_unset(host, "linux.network.max_lease_ttl_seconds")) {
		int64_t ht = schema_int(schema_child(schema_child(host, "linux"), "network"),
		    "max_lease_ttl_seconds", 0);
		if (schema_int(spec, "max_lease_ttl_seconds", 0) > ht)
			json_object_object_add(spec, "max_lease_ttl_seconds",
			    json_object_new_int64(ht));
	}
	return 0;
}
