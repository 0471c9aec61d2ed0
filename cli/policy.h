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
};

struct policy_key {
	const char *pk_name;		/* dotted: "linux.seccomp.enabled" */
	enum policy_type pk_type;
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

/* `gensee policy ...`; returns the exit status. */
int cmd_policy(int argc, char **argv);

#endif
