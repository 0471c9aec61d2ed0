/*
 * policy.h: the user's policy file ($GENSEE_HOME/policy.json) and
 * `gensee policy setup|show|get|set`.
 *
 * One table of keys in policy.c (type, allowed values, default, help) is
 * the only description of the file: validation, get, set, show and setup
 * all read it.
 */
#ifndef GENSEE_POLICY_H
#define GENSEE_POLICY_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

enum policy_type {
	POLICY_BOOL,
	POLICY_ENUM,
	POLICY_INT,
	POLICY_PATHS,		/* list of absolute paths (Landlock) */
	POLICY_PATTERNS,	/* list of fanotify path patterns */
	POLICY_NETS,		/* list of CIDR[,tcp|udp[,PORT|LO-HI]] */
	POLICY_RULES,		/* list of {"path": PATTERN, "action": ACTION} */
	POLICY_METHODS,		/* list of HTTP methods (A-Z, not CONNECT) */
	POLICY_AGENTS,		/* list of agent profile objects (lib/agentprof.c checks them) */
};

/*
 * How a host policy (/etc/gensee/policy.json) narrows a user's value: the
 * user may only make a key stricter than the host says (hostpolicy.c).
 */
enum policy_narrow {
	POLICY_NARROW_UNSET,	/* a key added without a rule: a host policy may not set it */
	POLICY_NARROW_TRUE,	/* true is stricter: host true forces true */
	POLICY_NARROW_FALSE,	/* false is stricter */
	POLICY_NARROW_ORDER,	/* the stricter of the two in pk_strict */
	POLICY_NARROW_MIN,	/* the smaller of the two */
	POLICY_NARROW_UNION,	/* the host's entries are added (deny lists, hides) */
	POLICY_NARROW_WITHIN,	/* every user entry lies within a host entry (allow lists) */
	POLICY_NARROW_INTERSECT,	/* only what both lists hold (the defaults' when unset) */
};

struct policy_key {
	const char *pk_name;		/* dotted: "linux.seccomp.enabled" */
	enum policy_type pk_type;
	enum policy_narrow pk_narrow;
	const char *const *pk_strict;	/* POLICY_NARROW_ORDER: strictest first */
	const char *const *pk_values;	/* POLICY_ENUM: NULL-terminated */
	int64_t pk_min;			/* POLICY_INT */
	int64_t pk_max;
	const char *pk_default;		/* JSON text; NULL: see pk_derive */
	/* A value that follows from other keys; never written by setup. */
	struct json_object *(*pk_derive)(struct json_object *policy);
	const char *pk_help;
};

#define POLICY_MAX_BYTES (1u << 20)	/* the same bound as policy_load() */
#define POLICY_MAX_LIST 256		/* netspec reads at most 256 entries */
#define POLICY_MAX_PATH 4095

/* The key table; *n is set to its length. */
const struct policy_key *policy_keys(size_t *n);
/* The entry of a dotted key, or NULL. */
const struct policy_key *policy_key_find(const char *name);

/*
 * Check a whole policy document: every member name must be a key or a
 * section of the table and every value of its type. Returns 0, or -1 with
 * *cause naming the full dotted key and what is expected. Hostname network
 * entries are accepted and described in warnings (a JSON array, or NULL).
 */
int policy_validate(struct json_object *policy, struct json_object *warnings, char **cause);
/* Check one value of key k the same way. */
int policy_validate_key(const struct policy_key *k, struct json_object *value,
    struct json_object *warnings, char **cause);

/*
 * Parse the command-line text of a value of k (true/false, an enum word,
 * an integer, a JSON array or one list item, a JSON object for rules) and
 * validate it. Returns 0 and *out (caller puts), or -1 with *cause.
 */
int policy_parse_value(const struct policy_key *k, const char *text,
    struct json_object *warnings, struct json_object **out, char **cause);

/*
 * The value of key in a validated policy, or its default (a new reference,
 * the caller puts it); NULL for an unknown key. linux.network.mode has no
 * fixed default: unset, it is "monitor" when only deny entries are set and
 * "allowlist" otherwise, as netspec_build() decides.
 */
struct json_object *policy_get_effective(struct json_object *policy, const char *key);
/* 1 when key is absent from policy (its value comes from the table). */
int policy_is_unset(struct json_object *policy, const char *key);

/*
 * Put value (the reference is taken, also on failure) at the dotted key,
 * creating sections as needed; every other member keeps its place.
 */
int policy_set(struct json_object *policy, const char *key, struct json_object *value,
    char **cause);
/* A new document with every fixed default made explicit. */
struct json_object *policy_defaults(void);

/*
 * The host policy, $sysconfdir/gensee/policy.json (hostpolicy.c): loaded
 * once per process, NULL when there is none. A file that is not root's,
 * is writable by others, is a symlink or does not validate is an error.
 */
#define HOSTPOLICY_PATH "/etc/gensee/policy.json"
int hostpolicy_get(struct json_object **host, char **cause);
/* Narrow a user policy by the host policy in place; -1 with *cause if a user entry is wider. */
int hostpolicy_narrow(struct json_object *user, struct json_object *host, char **cause);
/*
 * Check a run's network spec (built from options that override the
 * policy) against the host policy: allow and lease scopes within, the
 * host's deny entries added, its mode and lease TTL kept.
 */
int hostpolicy_netspec(struct json_object *host, struct json_object *spec, char **cause);
/* Whether path lies within one of the host's list at key (1 also when the host sets none). */
int hostpolicy_path_within(struct json_object *host, const char *key, const char *path);

/* `gensee policy ...`; returns the exit status. */
int cmd_policy(int argc, char **argv);

#endif
