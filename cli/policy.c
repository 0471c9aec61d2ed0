/*
 * policy.c: the policy file and `gensee policy setup|show|get|set`.
 *
 * policy_table below is the whole schema of $GENSEE_HOME/policy.json.
 * Validation walks the document against it and refuses whatever it does
 * not describe, so a misspelt key cannot silently leave a control at its
 * default. A file that does not validate is never used and never
 * rewritten (only `setup --force` replaces it): fail closed.
 */
#include <sys/file.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "agentprof.h"
#include "cli.h"
#include "connreq.h"
#include "dnspolicy.h"
#include "frame.h"
#include "landlock.h"
#include "netpolicy.h"
#include "netspec.h"
#include "policy.h"
#include "util.h"

#define POLICY_FILE "policy.json"
#define POLICY_KEY_MAX 128
#define POLICY_ITEM_MAX (POLICY_KEY_MAX + 24)	/* "KEY[N]" */

#define POLICY_EXIT_FAIL 1
#define POLICY_EXIT_USAGE CLI_EXIT_USAGE

static struct json_object *policy_derive_network_mode(struct json_object *);
static struct json_object *policy_derive_landlock_mode(struct json_object *);

static const char *const policy_postures[] = { "monitor", "warn", "enforce", "isolate", NULL };
static const char *const policy_landlock_modes[] = { "required", "best_effort", "off", NULL };
static const char *const policy_actions[] = { "observe", "warn", "ask", "deny", "speculate",
	NULL };
static const char *const policy_network_modes[] = { "allowlist", "monitor", NULL };
/* Strictest first, for a host policy's narrowing. */
static const char *const policy_postures_strict[] = { "isolate", "enforce", "warn", "monitor",
	NULL };
static const char *const policy_actions_strict[] = { "deny", "ask", "speculate", "warn",
	"observe", NULL };
static const char *const policy_sensor_loss[] = { "freeze", "end", NULL };
static const char *const policy_sensor_loss_strict[] = { "end", "freeze", NULL };

static const struct policy_key policy_table[] = {
	{ .pk_name = "linux.posture", .pk_type = POLICY_ENUM,
	  .pk_narrow = POLICY_NARROW_ORDER, .pk_strict = policy_postures_strict,
	  .pk_values = policy_postures,
	  .pk_default = "\"enforce\"",
	  .pk_help = "posture of the Linux host controls" },
	{ .pk_name = "linux.seccomp.enabled", .pk_type = POLICY_BOOL,
	  .pk_narrow = POLICY_NARROW_TRUE, .pk_default = "true",
	  .pk_help = "install the seccomp deny filter before the agent execs" },
	{ .pk_name = "linux.seccomp.deny_ptrace", .pk_type = POLICY_BOOL,
	  .pk_narrow = POLICY_NARROW_TRUE, .pk_default = "true",
	  .pk_help = "deny ptrace, process_vm_readv/writev, pidfd_getfd, kcmp and "
	  "perf_event_open" },
	{ .pk_name = "linux.seccomp.deny_bpf", .pk_type = POLICY_BOOL,
	  .pk_narrow = POLICY_NARROW_TRUE, .pk_default = "true",
	  .pk_help = "deny bpf" },
	{ .pk_name = "linux.seccomp.deny_kernel_modules", .pk_type = POLICY_BOOL,
	  .pk_narrow = POLICY_NARROW_TRUE,
	  .pk_default = "true",
	  .pk_help = "deny init_module, finit_module and delete_module" },
	{ .pk_name = "linux.seccomp.deny_mount_namespace_changes", .pk_type = POLICY_BOOL,
	  .pk_narrow = POLICY_NARROW_TRUE,
	  .pk_default = "true",
	  .pk_help = "deny mount, umount2, pivot_root, the mount API, unshare and setns" },
	{ .pk_name = "linux.seccomp.deny_kernel_attack_surface", .pk_type = POLICY_BOOL,
	  .pk_narrow = POLICY_NARROW_TRUE,
	  .pk_default = "true",
	  .pk_help = "deny io_uring, userfaultfd, keyrings, modify_ldt, file handles and "
	  "unusual personalities" },
	{ .pk_name = "linux.seccomp.deny_terminal_injection", .pk_type = POLICY_BOOL,
	  .pk_narrow = POLICY_NARROW_TRUE,
	  .pk_default = "true",
	  .pk_help = "deny the TIOCSTI and TIOCLINUX ioctls (typing into the user's terminal)" },
	{ .pk_name = "linux.seccomp.deny_socket_families", .pk_type = POLICY_BOOL,
	  .pk_narrow = POLICY_NARROW_TRUE,
	  .pk_default = "true",
	  .pk_help = "deny sockets other than UNIX, INET, INET6 and NETLINK (AF_VSOCK ...)" },
	{ .pk_name = "linux.landlock.mode", .pk_type = POLICY_ENUM,
	  .pk_narrow = POLICY_NARROW_ORDER, .pk_strict = policy_landlock_modes,
	  .pk_values = policy_landlock_modes, .pk_derive = policy_derive_landlock_mode,
	  .pk_help = "Landlock: required fails closed without it, best_effort uses it if "
	  "present; unset: required where the kernel has it" },
	{ .pk_name = "linux.landlock.default_paths", .pk_type = POLICY_BOOL,
	  .pk_narrow = POLICY_NARROW_FALSE,
	  .pk_default = "true",
	  .pk_help = "start from the defaults: read everywhere, write the workspace, /tmp, "
	  "caches" },
	{ .pk_name = "linux.landlock.read_only", .pk_type = POLICY_PATHS,
	  .pk_narrow = POLICY_NARROW_WITHIN, .pk_default = "[]",
	  .pk_help = "absolute paths the agent may read" },
	{ .pk_name = "linux.landlock.read_write", .pk_type = POLICY_PATHS,
	  .pk_narrow = POLICY_NARROW_WITHIN, .pk_default = "[]",
	  .pk_help = "absolute paths the agent may read and write" },
	{ .pk_name = "linux.mount_view.mode", .pk_type = POLICY_ENUM,
	  .pk_narrow = POLICY_NARROW_ORDER, .pk_strict = policy_landlock_modes,
	  .pk_values = policy_landlock_modes, .pk_default = "\"required\"",
	  .pk_help = "private mount view: runtime dirs, credentials and /tmp hidden, "
	  "$GENSEE_HOME read-only" },
	{ .pk_name = "linux.mount_view.protect_git", .pk_type = POLICY_BOOL,
	  .pk_narrow = POLICY_NARROW_TRUE, .pk_default = "true",
	  .pk_help = "the workspace's .git/config, .git/hooks and core.hooksPath read-only: "
	  "git runs them later, outside" },
	{ .pk_name = "linux.mount_view.hide", .pk_type = POLICY_PATHS,
	  .pk_narrow = POLICY_NARROW_UNION, .pk_default = "[]",
	  .pk_help = "more absolute paths the mount view hides" },
	{ .pk_name = "linux.unix_sockets.allow", .pk_type = POLICY_PATHS,
	  .pk_narrow = POLICY_NARROW_WITHIN, .pk_default = "[]",
	  .pk_help = "Unix sockets the mount view lets through (an ssh-agent, docker.sock)" },
	{ .pk_name = "linux.agents.profiles", .pk_type = POLICY_BOOL,
	  .pk_narrow = POLICY_NARROW_FALSE, .pk_default = "true",
	  .pk_help = "apply the codex, claude and gemini profiles (state in an overlay, "
	  "configuration read-only, model API hosts allowed)" },
	{ .pk_name = "linux.agents.custom", .pk_type = POLICY_AGENTS,
	  .pk_narrow = POLICY_NARROW_UNION, .pk_default = "[]",
	  .pk_help = "more agent profiles, or lists that replace a built-in's: [{\"name\": N, "
	  "\"executables\", \"state\", \"config\", \"volatile\", \"hosts\", \"env\"}] "
	  "(docs/agents.md)" },
	{ .pk_name = "linux.fanotify.enabled", .pk_type = POLICY_BOOL,
	  .pk_narrow = POLICY_NARROW_TRUE, .pk_default = "false",
	  .pk_help = "fanotify sensitive-path enforcement (needs root)" },
	{ .pk_name = "linux.fanotify.paths", .pk_type = POLICY_PATTERNS,
	  .pk_narrow = POLICY_NARROW_UNION, .pk_default = "[]",
	  .pk_help = "sensitive paths added to the built-in ones (~/.ssh/**, ...)" },
	{ .pk_name = "linux.fanotify.action", .pk_type = POLICY_ENUM,
	  .pk_narrow = POLICY_NARROW_ORDER, .pk_strict = policy_actions_strict,
	  .pk_values = policy_actions,
	  .pk_default = "\"deny\"",
	  .pk_help = "the action of linux.fanotify.paths" },
	{ .pk_name = "linux.fanotify.rules", .pk_type = POLICY_RULES,
	  .pk_narrow = POLICY_NARROW_UNION, .pk_default = "[]",
	  .pk_help = "rules with their own action: [{\"path\": PATTERN, \"action\": ACTION}]" },
	{ .pk_name = "linux.fanotify.on_sensor_loss", .pk_type = POLICY_ENUM,
	  .pk_narrow = POLICY_NARROW_ORDER, .pk_strict = policy_sensor_loss_strict,
	  .pk_values = policy_sensor_loss, .pk_default = "\"freeze\"",
	  .pk_help = "when sensord's coverage is lost: freeze the tree until it is back, or end it" },
	{ .pk_name = "linux.network.mode", .pk_type = POLICY_ENUM,
	  .pk_narrow = POLICY_NARROW_ORDER, .pk_strict = policy_network_modes,
	  .pk_values = policy_network_modes, .pk_derive = policy_derive_network_mode,
	  .pk_help = "unset: monitor (deny-only) when only deny is set, else allowlist" },
	{ .pk_name = "linux.network.allow", .pk_type = POLICY_NETS,
	  .pk_narrow = POLICY_NARROW_WITHIN, .pk_default = "[]",
	  .pk_help = "destinations the agent may reach" },
	{ .pk_name = "linux.network.deny", .pk_type = POLICY_NETS,
	  .pk_narrow = POLICY_NARROW_UNION, .pk_default = "[]",
	  .pk_help = "destinations the agent may never reach" },
	{ .pk_name = "linux.network.lease_scopes", .pk_type = POLICY_NETS,
	  .pk_narrow = POLICY_NARROW_WITHIN, .pk_default = "[]",
	  .pk_help = "destinations an operation-scoped lease may open" },
	{ .pk_name = "linux.network.http_methods", .pk_type = POLICY_METHODS,
	  .pk_narrow = POLICY_NARROW_INTERSECT,
	  .pk_default = "[\"GET\", \"HEAD\", \"POST\", \"PUT\", \"PATCH\", \"DELETE\", "
	  "\"OPTIONS\"]",
	  .pk_help = "methods the egress forwards for plain http:// to an allowed name (GET and "
	  "HEAD always)" },
	{ .pk_name = "linux.network.max_lease_ttl_seconds", .pk_type = POLICY_INT,
	  .pk_narrow = POLICY_NARROW_MIN,
	  .pk_min = 0, .pk_max = NETPOLICY_MAX_LEASE_TTL, .pk_default = "0",
	  .pk_help = "longest lease in seconds (0: no in-place leases)" },
};

const struct policy_key *
policy_keys(size_t *n)
{
	*n = nitems(policy_table);
	return policy_table;
}

const struct policy_key *
policy_key_find(const char *name)
{
	for (size_t i = 0; i < nitems(policy_table); i++)
		if (strcmp(policy_table[i].pk_name, name) == 0)
			return &policy_table[i];
	return NULL;
}

/* Is name a section (a proper prefix, up to a dot, of some key)? */
static int
policy_is_section(const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < nitems(policy_table); i++)
		if (strncmp(policy_table[i].pk_name, name, len) == 0 &&
		    policy_table[i].pk_name[len] == '.')
			return 1;
	return 0;
}

/* What an item of a list key must be, for messages. */
static const char *
policy_item_what(enum policy_type t)
{
	switch (t) {
	case POLICY_PATHS:
		return "an absolute path";
	case POLICY_PATTERNS:
		return "a path pattern (/PATH, /PATH/**, ~/PATH/**, **/NAME or /PATH/**/NAME)";
	case POLICY_NETS:
		return "a network entry CIDR[,tcp|udp[,PORT|LO-HI]] or NAME,tcp|udp,PORT";
	case POLICY_RULES:
		return "an object {\"path\": PATTERN, \"action\": ACTION}";
	case POLICY_METHODS:
		return "an HTTP method in capitals (POST, PUT ...; not CONNECT)";
	case POLICY_AGENTS:
		return "a profile {\"name\", \"executables\", \"state\", \"config\", \"volatile\", "
		    "\"hosts\", \"env\"}";
	case POLICY_BOOL:
	case POLICY_ENUM:
	case POLICY_INT:
		break;
	}
	return "a value";
}

/* "a, b or c" for a NULL-terminated list of words. */
static void
policy_enum_list(const char *const *values, const char *sep, char *buf, size_t len)
{
	size_t n = 0, off = 0;

	while (values[n] != NULL)
		n++;
	buf[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++) {
		const char *s = i == 0 ? "" : sep != NULL ? sep : i + 1 == n ? " or " : ", ";
		int w = snprintf(buf + off, len - off, "%s%s", s, values[i]);
		if (w < 0)
			break;
		off += (size_t)w;
	}
}

/* Is s one of values? */
static int
policy_enum_has(const char *const *values, const char *s)
{
	for (size_t i = 0; values[i] != NULL; i++)
		if (strcmp(values[i], s) == 0)
			return 1;
	return 0;
}

/* A string that must be one of values; name is the key for messages. */
static int
policy_check_enum(const char *name, const char *const *values, struct json_object *v,
    char **cause)
{
	char list[256];

	if (json_object_is_type(v, json_type_string) &&
	    policy_enum_has(values, json_object_get_string(v)))
		return 0;
	policy_enum_list(values, NULL, list, sizeof(list));
	util_cause(cause, "%s: expected %s, not %.64s", name, list,
	    json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
	return -1;
}

/* Does s hold a control character (which no path should)? */
static int
policy_has_control(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
		if (*p < 0x20 || *p == 0x7f)
			return 1;
	return 0;
}

/*
 * What is wrong with the components of rest (what follows the leading
 * slash, tilde-slash or double-star-slash), or NULL. With globs, a double
 * star is allowed as a whole component and a star inside one.
 */
static const char *
policy_components_problem(const char *rest, int globs)
{
	const char *p = rest;

	if (*rest == '\0')
		return "names nothing after its prefix";
	for (;;) {
		const char *end = strchr(p, '/');
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p);

		if (len == 0)
			return "has an empty component (// or a trailing /)";
		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
			return "has a . or .. component";
		if (memchr(p, '*', len) != NULL) {
			if (!globs)
				return "has a * (a Landlock rule covers all beneath a directory)";
			if (!(len == 2 && p[0] == '*' && p[1] == '*') &&
			    memmem(p, len, "**", 2) != NULL)
				return "has ** inside a component (** must be a whole component)";
		}
		if (end == NULL)
			return NULL;
		p = end + 1;
	}
}

/* What is wrong with a Landlock path, or NULL. */
static const char *
policy_path_problem(const char *s)
{
	if (*s != '/')
		return "is not absolute";
	if (strlen(s) > POLICY_MAX_PATH)
		return "is too long";
	if (policy_has_control(s))
		return "has a control character";
	if (strcmp(s, "/") == 0)
		return NULL;
	return policy_components_problem(s + 1, 0);
}

/* What is wrong with a fanotify path pattern, or NULL. */
static const char *
policy_pattern_problem(const char *s)
{
	const char *rest;

	if (strncmp(s, "/", 1) == 0)
		rest = s + 1;
	else if (strncmp(s, "~/", 2) == 0)
		rest = s + 2;
	else if (strncmp(s, "**/", 3) == 0)
		rest = s + 3;
	else
		return "is not absolute (it must start with /, ~/ or **/)";
	if (strlen(s) > POLICY_MAX_PATH)
		return "is too long";
	if (policy_has_control(s))
		return "has a control character";
	return policy_components_problem(rest, 1);
}

/* Append a formatted warning to warnings (which may be NULL). */
static int __attribute__((format(printf, 3, 4)))
policy_warn(struct json_object *warnings, char **cause, const char *fmt, ...)
{
	struct json_object *s;
	va_list ap;
	char *w = NULL;

	if (warnings == NULL)
		return 0;
	va_start(ap, fmt);
	if (vasprintf(&w, fmt, ap) < 0)
		w = NULL;
	va_end(ap);
	s = w != NULL ? json_object_new_string(w) : NULL;
	free(w);
	if (s == NULL || json_object_array_add(warnings, s) != 0) {
		json_object_put(s);
		util_cause(cause, "out of memory");
		return -1;
	}
	return 0;
}

/*
 * One network entry, checked exactly as netspec_build() will check it. A
 * hostname is not an error (seed 003: still useful to hook policy) but
 * nftables enforcement skips it, so say so; the rest of the entry must
 * still be well formed.
 */
static int
policy_check_net(const struct policy_key *k, const char *name, const char *s,
    struct json_object *warnings, char **cause)
{
	struct np_grants g;
	char probe[192], *why = NULL;
	int hostname = 0, r;

	/* NAME,PROTO,PORT in the allow list: enforced through the DNS proxy. */
	if (strcmp(k->pk_name, "linux.network.allow") == 0 && dnspolicy_is_hostname_entry(s) &&
	    strchr(s, ',') != NULL) {
		struct json_object *e = dnspolicy_entry_from_string(s, &why);
		if (e != NULL) {
			json_object_put(e);
			return 0;
		}
		util_cause(cause, "%s: \"%.160s\": %s; expected %s", name, s, why,
		    policy_item_what(POLICY_NETS));
		free(why);
		return -1;
	}
	memset(&g, 0, sizeof(g));
	r = netpolicy_parse_grant_string(s, &g, &hostname, &why);
	np_grants_free(&g);
	if (r == 0)
		return 0;
	if (hostname) {
		const char *rest = strchr(s, ',');
		int n = snprintf(probe, sizeof(probe), "0.0.0.0%s", rest != NULL ? rest : "");

		if (n >= 0 && (size_t)n < sizeof(probe)) {
			free(why);
			why = NULL;
			memset(&g, 0, sizeof(g));
			r = netpolicy_parse_grant_string(probe, &g, NULL, &why);
			np_grants_free(&g);
			if (r == 0)
				return policy_warn(warnings, cause, "%s: hostname %s will be "
				    "skipped at enforcement time (an allowed hostname needs a "
				    "protocol and a port: NAME,tcp,443)", k->pk_name, s);
		}
	}
	util_cause(cause, "%s: \"%.160s\": %s; expected %s", name, s,
	    why != NULL ? why : "invalid", policy_item_what(POLICY_NETS));
	free(why);
	return -1;
}

/* One linux.fanotify.rules item: exactly a path pattern and an action. */
static int
policy_check_rule(const char *name, struct json_object *item, char **cause)
{
	int have_path = 0, have_action = 0;
	char sub[POLICY_ITEM_MAX + 66];	/* "KEY[N].MEMBER" */

	if (!json_object_is_type(item, json_type_object)) {
		util_cause(cause, "%s: expected %s", name, policy_item_what(POLICY_RULES));
		return -1;
	}
	json_object_object_foreach(item, member, val) {
		snprintf(sub, sizeof(sub), "%s.%.64s", name, member);
		if (strcmp(member, "path") == 0) {
			const char *why;
			if (!json_object_is_type(val, json_type_string)) {
				util_cause(cause, "%s: expected %s", sub,
				    policy_item_what(POLICY_PATTERNS));
				return -1;
			}
			if ((why = policy_pattern_problem(json_object_get_string(val))) != NULL) {
				util_cause(cause, "%s: \"%.200s\" %s; expected %s", sub,
				    json_object_get_string(val), why,
				    policy_item_what(POLICY_PATTERNS));
				return -1;
			}
			have_path = 1;
		} else if (strcmp(member, "action") == 0) {
			if (policy_check_enum(sub, policy_actions, val, cause) != 0)
				return -1;
			have_action = 1;
		} else {
			util_cause(cause, "unknown key %s", sub);
			return -1;
		}
	}
	if (!have_path || !have_action) {
		util_cause(cause, "%s: missing %s; expected %s", name,
		    have_path ? "action" : "path", policy_item_what(POLICY_RULES));
		return -1;
	}
	return 0;
}

/* A list key: an array of at most POLICY_MAX_LIST valid items. */
static int
policy_check_list(const struct policy_key *k, struct json_object *v,
    struct json_object *warnings, char **cause)
{
	char name[POLICY_ITEM_MAX];
	size_t n;

	if (!json_object_is_type(v, json_type_array)) {
		util_cause(cause, "%s: expected a list (JSON array) of %s", k->pk_name,
		    policy_item_what(k->pk_type));
		return -1;
	}
	if ((n = json_object_array_length(v)) > POLICY_MAX_LIST) {
		util_cause(cause, "%s: at most %d entries, not %zu", k->pk_name, POLICY_MAX_LIST,
		    n);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *item = json_object_array_get_idx(v, i);
		const char *s, *why = NULL;

		snprintf(name, sizeof(name), "%s[%zu]", k->pk_name, i);
		if (k->pk_type == POLICY_RULES) {
			if (policy_check_rule(name, item, cause) != 0)
				return -1;
			continue;
		}
		if (k->pk_type == POLICY_AGENTS) {
			if (agentprof_custom_check(item, name, cause) != 0)
				return -1;
			/* One profile per name: a second would be silently ignored. */
			for (size_t j = 0; j < i; j++)
				if (strcmp(json_object_get_string(json_object_object_get(item, "name")),
				    json_object_get_string(json_object_object_get(
				    json_object_array_get_idx(v, j), "name"))) == 0) {
					util_cause(cause, "%s: a second profile named %s", name,
					    json_object_get_string(json_object_object_get(item,
					    "name")));
					return -1;
				}
			continue;
		}
		if (!json_object_is_type(item, json_type_string)) {
			util_cause(cause, "%s: expected %s", name, policy_item_what(k->pk_type));
			return -1;
		}
		s = json_object_get_string(item);
		switch (k->pk_type) {
		case POLICY_PATHS:
			why = policy_path_problem(s);
			break;
		case POLICY_PATTERNS:
			why = policy_pattern_problem(s);
			break;
		case POLICY_NETS:
			if (policy_check_net(k, name, s, warnings, cause) != 0)
				return -1;
			break;
		case POLICY_METHODS:
			if (!connreq_valid_method(s) || strcmp(s, "CONNECT") == 0)
				why = "is not a method";
			break;
		case POLICY_BOOL:
		case POLICY_ENUM:
		case POLICY_INT:
		case POLICY_RULES:
		case POLICY_AGENTS:
			break;
		}
		if (why != NULL) {
			util_cause(cause, "%s: \"%.200s\" %s; expected %s", name, s, why,
			    policy_item_what(k->pk_type));
			return -1;
		}
	}
	return 0;
}

int
policy_validate_key(const struct policy_key *k, struct json_object *value,
    struct json_object *warnings, char **cause)
{
	int64_t x;

	switch (k->pk_type) {
	case POLICY_BOOL:
		if (json_object_is_type(value, json_type_boolean))
			return 0;
		util_cause(cause, "%s: expected true or false, not %.64s", k->pk_name,
		    json_object_to_json_string_ext(value, JSON_C_TO_STRING_PLAIN));
		return -1;
	case POLICY_ENUM:
		return policy_check_enum(k->pk_name, k->pk_values, value, cause);
	case POLICY_INT:
		if (json_object_is_type(value, json_type_int)) {
			/* Beyond int64 json-c saturates, which the range refuses. */
			x = json_object_get_int64(value);
			if (x >= k->pk_min && x <= k->pk_max)
				return 0;
		}
		util_cause(cause, "%s: expected an integer from %lld to %lld, not %.64s",
		    k->pk_name, (long long)k->pk_min, (long long)k->pk_max,
		    json_object_to_json_string_ext(value, JSON_C_TO_STRING_PLAIN));
		return -1;
	case POLICY_PATHS:
	case POLICY_PATTERNS:
	case POLICY_NETS:
	case POLICY_RULES:
	case POLICY_METHODS:
	case POLICY_AGENTS:
		return policy_check_list(k, value, warnings, cause);
	}
	util_cause(cause, "%s: unknown type", k->pk_name);
	return -1;
}

/* Check the members of obj, the section at prefix ("" for the top). */
static int
policy_walk(struct json_object *obj, const char *prefix, struct json_object *warnings,
    char **cause)
{
	json_object_object_foreach(obj, member, val) {
		const struct policy_key *k;
		char full[POLICY_KEY_MAX];
		int n;

		n = snprintf(full, sizeof(full), "%s%s%s", prefix, *prefix != '\0' ? "." : "",
		    member);
		/* A member "a.b" must not pass for the section a holding b. */
		if (n < 0 || (size_t)n >= sizeof(full) || *member == '\0' ||
		    strchr(member, '.') != NULL) {
			util_cause(cause, "unknown key %s%s\"%.64s\"", prefix,
			    *prefix != '\0' ? "." : "", member);
			return -1;
		}
		if ((k = policy_key_find(full)) != NULL) {
			if (policy_validate_key(k, val, warnings, cause) != 0)
				return -1;
		} else if (policy_is_section(full)) {
			if (!json_object_is_type(val, json_type_object)) {
				util_cause(cause, "%s: expected an object", full);
				return -1;
			}
			if (policy_walk(val, full, warnings, cause) != 0)
				return -1;
		} else {
			util_cause(cause, "unknown key %s", full);
			return -1;
		}
	}
	return 0;
}

int
policy_validate(struct json_object *policy, struct json_object *warnings, char **cause)
{
	if (!json_object_is_type(policy, json_type_object)) {
		util_cause(cause, "the policy must be a JSON object");
		return -1;
	}
	return policy_walk(policy, "", warnings, cause);
}

/* The member at a dotted key (borrowed), or NULL. */
static struct json_object *
policy_lookup(struct json_object *policy, const char *key)
{
	char buf[POLICY_KEY_MAX], *p = buf, *comp;
	struct json_object *o = policy, *child;

	if (util_strlcpy(buf, key, sizeof(buf)) >= sizeof(buf))
		return NULL;
	while ((comp = strsep(&p, ".")) != NULL) {
		if (o == NULL || !json_object_is_type(o, json_type_object) ||
		    !json_object_object_get_ex(o, comp, &child))
			return NULL;
		o = child;
	}
	return o;
}

/* The number of items of the list at key, 0 when absent. */
static size_t
policy_list_length(struct json_object *policy, const char *key)
{
	struct json_object *a = policy_lookup(policy, key);

	if (a == NULL || !json_object_is_type(a, json_type_array))
		return 0;
	return json_object_array_length(a);
}

/* Unset linux.network.mode: what netspec_build() uses without overrides. */
static struct json_object *
policy_derive_network_mode(struct json_object *policy)
{
	int deny_only = policy_list_length(policy, "linux.network.allow") == 0 &&
	    policy_list_length(policy, "linux.network.deny") > 0;

	return json_object_new_string(deny_only ? "monitor" : "allowlist");
}

/*
 * Unset linux.landlock.mode: what landlock_plan_build() uses, required
 * where this kernel has Landlock, else best_effort (paths of its own in
 * the section mean required, as they always did).
 */
static struct json_object *
policy_derive_landlock_mode(struct json_object *policy)
{
	const char *why = NULL;
	int lists = policy_list_length(policy, "linux.landlock.read_only") > 0 ||
	    policy_list_length(policy, "linux.landlock.read_write") > 0;

	return json_object_new_string(lists || landlock_abi(&why) > 0 ? "required" :
	    "best_effort");
}

struct json_object *
policy_get_effective(struct json_object *policy, const char *key)
{
	const struct policy_key *k = policy_key_find(key);
	struct json_object *v;

	if (k == NULL)
		return NULL;
	if ((v = policy_lookup(policy, key)) != NULL)
		return json_object_get(v);
	if (k->pk_default != NULL)
		return json_tokener_parse(k->pk_default);
	return k->pk_derive != NULL ? k->pk_derive(policy) : NULL;
}

int
policy_is_unset(struct json_object *policy, const char *key)
{
	return policy_lookup(policy, key) == NULL;
}

int
policy_set(struct json_object *policy, const char *key, struct json_object *value,
    char **cause)
{
	char buf[POLICY_KEY_MAX], *p = buf, *dot;
	struct json_object *o = policy, *child;

	if (value == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	if (util_strlcpy(buf, key, sizeof(buf)) >= sizeof(buf) ||
	    !json_object_is_type(policy, json_type_object)) {
		util_cause(cause, "%.64s: cannot be set", key);
		goto fail;
	}
	while ((dot = strchr(p, '.')) != NULL) {
		*dot = '\0';
		if (!json_object_object_get_ex(o, p, &child)) {
			if ((child = json_object_new_object()) == NULL ||
			    json_object_object_add(o, p, child) != 0) {
				json_object_put(child);
				util_cause(cause, "out of memory");
				goto fail;
			}
		} else if (!json_object_is_type(child, json_type_object)) {
			util_cause(cause, "%s: expected an object", buf);
			goto fail;
		}
		*dot = '.';
		o = child;
		p = dot + 1;
	}
	/* An existing member is replaced where it is: the order is kept. */
	if (json_object_object_add(o, p, value) != 0) {
		util_cause(cause, "out of memory");
		goto fail;
	}
	return 0;
fail:
	json_object_put(value);
	return -1;
}

struct json_object *
policy_defaults(void)
{
	struct json_object *doc = json_object_new_object();

	if (doc == NULL)
		return NULL;
	for (size_t i = 0; i < nitems(policy_table); i++) {
		const struct policy_key *k = &policy_table[i];
		if (k->pk_default == NULL)
			continue;
		if (policy_set(doc, k->pk_name, json_tokener_parse(k->pk_default), NULL) != 0) {
			json_object_put(doc);
			return NULL;
		}
	}
	return doc;
}

/* A readable reason for a frame_parse_payload() status. */
static const char *
policy_frame_why(int st)
{
	switch (st) {
	case FRAME_ERR_EMPTY:
		return "empty";
	case FRAME_ERR_UTF8:
		return "not valid UTF-8 (or has a NUL byte)";
	case FRAME_ERR_JSON:
		return "not valid JSON";
	case FRAME_ERR_NOT_OBJECT:
		return "not a JSON object";
	case FRAME_ERR_TRAILING:
		return "has bytes after the JSON value";
	case FRAME_ERR_DUPLICATE:
		return "repeats a key";
	case FRAME_ERR_NOMEM:
		return "out of memory";
	default:
		return frame_status_code(st);
	}
}

/*
 * Parse text as one JSON value. frame_parse_payload() takes only objects,
 * so the text becomes the single member of one; that keeps its exact
 * grammar (no json-c leniencies), and the member count refuses text that
 * closes the value and opens another member.
 */
static int
policy_parse_json(const char *name, const char *text, struct json_object **out, char **cause)
{
	struct json_object *o = NULL, *v;
	char *buf = NULL;
	int st;

	*out = NULL;
	if (strlen(text) > POLICY_MAX_BYTES) {
		util_cause(cause, "%s: value too long", name);
		return -1;
	}
	if (asprintf(&buf, "{\"v\":%s}", text) < 0) {
		util_cause(cause, "out of memory");
		return -1;
	}
	st = frame_parse_payload((const uint8_t *)buf, strlen(buf), &o);
	free(buf);
	if (st != FRAME_OK) {
		util_cause(cause, "%s: the value is %s", name, st == FRAME_ERR_TRAILING ||
		    st == FRAME_ERR_DUPLICATE ? "not one JSON value" : policy_frame_why(st));
		return -1;
	}
	if (json_object_object_length(o) != 1 || !json_object_object_get_ex(o, "v", &v)) {
		json_object_put(o);
		util_cause(cause, "%s: the value is not one JSON value", name);
		return -1;
	}
	*out = json_object_get(v);
	json_object_put(o);
	return 0;
}

int
policy_parse_value(const struct policy_key *k, const char *text,
    struct json_object *warnings, struct json_object **out, char **cause)
{
	struct json_object *v = NULL, *item;
	const char *p = text;
	int64_t x;

	*out = NULL;
	switch (k->pk_type) {
	case POLICY_BOOL:
		if (strcmp(text, "true") != 0 && strcmp(text, "false") != 0) {
			util_cause(cause, "%s: expected true or false, not \"%.64s\"", k->pk_name,
			    text);
			return -1;
		}
		v = json_object_new_boolean(strcmp(text, "true") == 0);
		break;
	case POLICY_ENUM:
		v = json_object_new_string(text);
		break;
	case POLICY_INT:
		if (util_parse_i64(text, k->pk_min, k->pk_max, &x) != 0) {
			util_cause(cause, "%s: expected an integer from %lld to %lld, "
			    "not \"%.64s\"", k->pk_name, (long long)k->pk_min,
			    (long long)k->pk_max, text);
			return -1;
		}
		v = json_object_new_int64(x);
		break;
	case POLICY_PATHS:
	case POLICY_PATTERNS:
	case POLICY_NETS:
	case POLICY_RULES:
	case POLICY_METHODS:
	case POLICY_AGENTS:
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (*p == '[' || ((k->pk_type == POLICY_RULES || k->pk_type == POLICY_AGENTS) &&
		    *p == '{')) {
			if (policy_parse_json(k->pk_name, text, &v, cause) != 0)
				return -1;
			if (!json_object_is_type(v, json_type_object))
				break;
			/* One rule object is a list of one. */
			item = v;
			if ((v = json_object_new_array()) == NULL ||
			    json_object_array_add(v, item) != 0) {
				json_object_put(item);
				json_object_put(v);
				v = NULL;
			}
		} else if (k->pk_type == POLICY_RULES || k->pk_type == POLICY_AGENTS) {
			util_cause(cause, "%s: expected a JSON object (%s) or a JSON array of them",
			    k->pk_name, policy_item_what(k->pk_type));
			return -1;
		} else {
			/* One item is a list of one (seed 003). */
			if ((v = json_object_new_array()) == NULL ||
			    (item = json_object_new_string(text)) == NULL ||
			    json_object_array_add(v, item) != 0) {
				json_object_put(v);
				v = NULL;
			}
		}
		break;
	}
	if (v == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	if (policy_validate_key(k, v, warnings, cause) != 0) {
		json_object_put(v);
		return -1;
	}
	*out = v;
	return 0;
}

/*
 * The policy file, opened through its directory. Everything after the
 * directory is opened is relative to pf_dirfd, so the file read is the one
 * replaced.
 */
struct policy_file {
	char pf_dir[4096];
	const char *pf_path;
	int pf_dirfd;			/* -1: the directory does not exist */
	struct json_object *pf_doc;	/* validated; empty when absent */
	int pf_exists;
};

/* Split policy_path() into pf_dir and the file name. */
static int
policy_locate(struct policy_file *pf, char **cause)
{
	const char *suffix = "/" POLICY_FILE;
	size_t n, sl = strlen(suffix);

	pf->pf_path = policy_path();
	n = strlen(pf->pf_path);
	/* policy_path() truncates silently: a cut path is not ours to use. */
	if (n < sl || strcmp(pf->pf_path + n - sl, suffix) != 0 || n - sl >= sizeof(pf->pf_dir)) {
		util_cause(cause, "the policy path is too long (GENSEE_HOME or HOME)");
		return -1;
	}
	memcpy(pf->pf_dir, pf->pf_path, n - sl);
	pf->pf_dir[n - sl] = '\0';
	if (pf->pf_dir[0] == '\0') {
		pf->pf_dir[0] = '/';
		pf->pf_dir[1] = '\0';
	}
	return 0;
}

/*
 * Open the policy directory into pf_dirfd. With create a missing one is
 * made with mode 0700 (only the last component: a missing parent is an
 * error). The directory itself may be a symlink (a managed ~/.gensee);
 * the file in it may not.
 */
static int
policy_open_dir(struct policy_file *pf, int create, char **cause)
{
	pf->pf_dirfd = open(pf->pf_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pf->pf_dirfd >= 0)
		return 0;
	if (errno == ENOENT && !create)
		return 0;
	if (errno == ENOENT) {
		if (mkdir(pf->pf_dir, 0700) != 0 && errno != EEXIST) {
			util_cause(cause, "mkdir %s: %s", pf->pf_dir, strerror(errno));
			return -1;
		}
		pf->pf_dirfd = open(pf->pf_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (pf->pf_dirfd >= 0)
			return 0;
	}
	util_cause(cause, "%s: %s", pf->pf_dir, strerror(errno));
	return -1;
}

/*
 * Read and validate policy.json. O_NOFOLLOW refuses a symlink in its
 * place: a link planted there must not make us read, and then replace, a
 * file of someone else's choosing. A policy that does not validate is an
 * error (fail closed); an absent one is an empty document.
 */
static int
policy_read(struct policy_file *pf, struct json_object *warnings, char **cause)
{
	struct stat st;
	char *buf = NULL, *why = NULL;
	size_t len;
	int fd, r;

	pf->pf_exists = 0;
	fd = pf->pf_dirfd == -1 ? -1 : openat(pf->pf_dirfd, POLICY_FILE,
	    O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && (pf->pf_dirfd == -1 || errno == ENOENT)) {
		if ((pf->pf_doc = json_object_new_object()) == NULL) {
			util_cause(cause, "out of memory");
			return -1;
		}
		return 0;
	}
	if (fd < 0) {
		if (errno == ELOOP)
			util_cause(cause, "%s is a symlink; refusing to follow it", pf->pf_path);
		else
			util_cause(cause, "%s: %s", pf->pf_path, strerror(errno));
		return -1;
	}
	r = fstat(fd, &st);
	if (r != 0 || !S_ISREG(st.st_mode)) {
		util_cause(cause, "%s: %s", pf->pf_path, r != 0 ? strerror(errno) :
		    "not a regular file");
		(void)close(fd); /* read-only: nothing to lose */
		return -1;
	}
	r = util_read_fd(fd, POLICY_MAX_BYTES, &buf, &len);
	if (r != 0)
		util_cause(cause, "%s: %s", pf->pf_path, errno == EFBIG ?
		    "larger than 1 MiB" : strerror(errno));
	if (close(fd) != 0 && r == 0) {
		util_cause(cause, "%s: %s", pf->pf_path, strerror(errno));
		r = -1;
	}
	if (r != 0) {
		free(buf);
		return -1;
	}
	pf->pf_exists = 1;
	r = frame_parse_payload((const uint8_t *)buf, len, &pf->pf_doc);
	free(buf);
	if (r != FRAME_OK) {
		util_cause(cause, "%s: %s", pf->pf_path, policy_frame_why(r));
		return -1;
	}
	if (policy_validate(pf->pf_doc, warnings, &why) != 0) {
		util_cause(cause, "%s: %s", pf->pf_path, why);
		free(why);
		json_object_put(pf->pf_doc);
		pf->pf_doc = NULL;
		return -1;
	}
	return 0;
}

/*
 * Two writers each read, change and write the whole file; without a lock
 * the second rename would drop the first one's change (a lost update).
 * flock(2) on the directory serialises `set` and `setup`.
 */
static int
policy_lock(struct policy_file *pf, char **cause)
{
	while (flock(pf->pf_dirfd, LOCK_EX) != 0) {
		if (errno != EINTR) {
			util_cause(cause, "lock %s: %s", pf->pf_dir, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/*
 * Replace policy.json atomically: a new 0600 file beside it (O_EXCL, so no
 * existing name, link or not, is opened), fsync, rename over the old name,
 * fsync the directory. renameat(2) replaces a name and follows a symlink in
 * neither, so a link swapped in after policy_read() is replaced, never
 * written through; readers see the old file or the new one, never a part.
 */
static int
policy_write(struct policy_file *pf, struct json_object *doc, char **cause)
{
	char tname[64];
	size_t len;
	const char *s;
	int fd = -1;

	s = json_object_to_json_string_length(doc, JSON_C_TO_STRING_PRETTY |
	    JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	if (s == NULL || len >= POLICY_MAX_BYTES) {
		util_cause(cause, "%s: the policy is too large to write", pf->pf_path);
		return -1;
	}
	for (unsigned i = 0; fd < 0 && i < 100; i++) {
		snprintf(tname, sizeof(tname), ".%s.%ld.%u", POLICY_FILE, (long)getpid(), i);
		fd = openat(pf->pf_dirfd, tname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST) {
			util_cause(cause, "%s/%s: %s", pf->pf_dir, tname, strerror(errno));
			return -1;
		}
	}
	if (fd < 0) {
		util_cause(cause, "%s: no free temporary name", pf->pf_dir);
		return -1;
	}
	/* The umask may only narrow 0600; fchmod makes it exactly that. */
	if (fchmod(fd, 0600) != 0 || util_write_all(fd, s, len) != 0 ||
	    util_write_all(fd, "\n", 1) != 0 || fsync(fd) != 0) {
		util_cause(cause, "write %s/%s: %s", pf->pf_dir, tname, strerror(errno));
		(void)close(fd);
		(void)unlinkat(pf->pf_dirfd, tname, 0); /* best effort; the error is above */
		return -1;
	}
	if (close(fd) != 0) {
		util_cause(cause, "write %s/%s: %s", pf->pf_dir, tname, strerror(errno));
		(void)unlinkat(pf->pf_dirfd, tname, 0);
		return -1;
	}
	if (renameat(pf->pf_dirfd, tname, pf->pf_dirfd, POLICY_FILE) != 0) {
		util_cause(cause, "rename to %s: %s", pf->pf_path, strerror(errno));
		(void)unlinkat(pf->pf_dirfd, tname, 0);
		return -1;
	}
	if (fsync(pf->pf_dirfd) != 0) {
		util_cause(cause, "fsync %s: %s", pf->pf_dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* Release what a policy_file holds. */
static void
policy_file_close(struct policy_file *pf)
{
	json_object_put(pf->pf_doc);
	pf->pf_doc = NULL;
	if (pf->pf_dirfd >= 0)
		(void)close(pf->pf_dirfd); /* read-only, and the lock goes with it */
	pf->pf_dirfd = -1;
}

/* Print warnings to stderr. */
static void
policy_print_warnings(struct json_object *warnings)
{
	for (size_t i = 0; i < json_object_array_length(warnings); i++)
		fprintf(stderr, "gensee policy: warning: %s\n",
		    json_object_get_string(json_object_array_get_idx(warnings, i)));
}

/* A value as get prints it: plain scalars, JSON for the rest or with json. */
static void
policy_print_value(FILE *f, struct json_object *v, int json)
{
	if (!json && json_object_is_type(v, json_type_string))
		fprintf(f, "%s", json_object_get_string(v));
	else
		fprintf(f, "%s", json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
		    JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* Print a JSON document to stdout, pretty. */
static void
policy_print_json(struct json_object *o)
{
	printf("%s\n", json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* Open and read the policy; on failure report it and close everything. */
static int
policy_file_open(struct policy_file *pf, int create, int lock, struct json_object *warnings)
{
	char *cause = NULL;

	memset(pf, 0, sizeof(*pf));
	pf->pf_dirfd = -1;
	if (policy_locate(pf, &cause) != 0 || policy_open_dir(pf, create, &cause) != 0 ||
	    (lock && policy_lock(pf, &cause) != 0) || policy_read(pf, warnings, &cause) != 0) {
		fprintf(stderr, "gensee policy: %s\n", cause);
		free(cause);
		policy_file_close(pf);
		return -1;
	}
	return 0;
}

/* The effective policy as one document, every key present. */
static struct json_object *
policy_merged(struct json_object *policy)
{
	struct json_object *doc = json_object_new_object();

	for (size_t i = 0; doc != NULL && i < nitems(policy_table); i++) {
		struct json_object *v = policy_get_effective(policy, policy_table[i].pk_name);
		if (policy_set(doc, policy_table[i].pk_name, v, NULL) != 0) {
			json_object_put(doc);
			doc = NULL;
		}
	}
	return doc;
}

/* `gensee policy show [--json]`. */
static int
policy_cmd_show(int json)
{
	struct json_object *warnings = json_object_new_array(), *doc;
	struct policy_file pf;
	int w = 0, rc = 0;

	if (warnings == NULL || policy_file_open(&pf, 0, 0, warnings) != 0) {
		json_object_put(warnings);
		return POLICY_EXIT_FAIL;
	}
	policy_print_warnings(warnings);
	json_object_put(warnings);
	if (json) {
		if ((doc = policy_merged(pf.pf_doc)) == NULL) {
			fprintf(stderr, "gensee policy: out of memory\n");
			rc = POLICY_EXIT_FAIL;
		} else {
			policy_print_json(doc);
			json_object_put(doc);
		}
		policy_file_close(&pf);
		return rc;
	}
	printf("# %s%s\n", pf.pf_path, pf.pf_exists ? "" : " (absent: every key has its default)");
	for (size_t i = 0; i < nitems(policy_table); i++)
		if ((int)strlen(policy_table[i].pk_name) > w)
			w = (int)strlen(policy_table[i].pk_name);
	for (size_t i = 0; i < nitems(policy_table); i++) {
		const struct policy_key *k = &policy_table[i];
		struct json_object *v = policy_get_effective(pf.pf_doc, k->pk_name);
		struct json_object *d = k->pk_default != NULL ? json_tokener_parse(k->pk_default) :
		    NULL;
		const char *note = "";

		if (v == NULL) {
			fprintf(stderr, "gensee policy: out of memory\n");
			json_object_put(d);
			rc = POLICY_EXIT_FAIL;
			break;
		}
		if (d != NULL && json_object_equal(v, d))
			note = "  (default)";
		else if (d == NULL && policy_is_unset(pf.pf_doc, k->pk_name))
			note = "  (unset: derived)";
		printf("%-*s  ", w, k->pk_name);
		policy_print_value(stdout, v, 0);
		printf("%s\n", note);
		json_object_put(v);
		json_object_put(d);
	}
	policy_file_close(&pf);
	return rc;
}

/* `gensee policy get KEY [--json]`. */
static int
policy_cmd_get(const char *key, int json)
{
	struct policy_file pf;
	struct json_object *v;

	if (policy_key_find(key) == NULL) {
		fprintf(stderr, "gensee policy: unknown key %s (see gensee policy help)\n", key);
		return POLICY_EXIT_USAGE;
	}
	if (policy_file_open(&pf, 0, 0, NULL) != 0)
		return POLICY_EXIT_FAIL;
	if ((v = policy_get_effective(pf.pf_doc, key)) == NULL) {
		fprintf(stderr, "gensee policy: out of memory\n");
		policy_file_close(&pf);
		return POLICY_EXIT_FAIL;
	}
	policy_print_value(stdout, v, json);
	printf("\n");
	json_object_put(v);
	policy_file_close(&pf);
	return 0;
}

/*
 * `gensee policy set KEY VALUE [--json]`. The value is checked before the
 * file is touched, and the whole document again before it is written, so
 * a refused value leaves the file exactly as it was.
 */
static int
policy_cmd_set(const char *key, const char *text, int json)
{
	const struct policy_key *k = policy_key_find(key);
	struct json_object *warnings, *v = NULL, *out;
	struct policy_file pf;
	char *cause = NULL;
	int rc = POLICY_EXIT_FAIL;

	if (k == NULL) {
		fprintf(stderr, "gensee policy: unknown key %s (see gensee policy help)\n", key);
		return POLICY_EXIT_USAGE;
	}
	if ((warnings = json_object_new_array()) == NULL) {
		fprintf(stderr, "gensee policy: out of memory\n");
		return POLICY_EXIT_FAIL;
	}
	if (policy_parse_value(k, text, warnings, &v, &cause) != 0) {
		fprintf(stderr, "gensee policy: %s\n", cause);
		free(cause);
		json_object_put(warnings);
		return POLICY_EXIT_USAGE;
	}
	if (policy_file_open(&pf, 1, 1, NULL) != 0) {
		json_object_put(v);
		json_object_put(warnings);
		return POLICY_EXIT_FAIL;
	}
	if (policy_set(pf.pf_doc, key, json_object_get(v), &cause) != 0 ||
	    policy_validate(pf.pf_doc, NULL, &cause) != 0 ||
	    policy_write(&pf, pf.pf_doc, &cause) != 0) {
		fprintf(stderr, "gensee policy: %s\n", cause);
		free(cause);
		goto out;
	}
	policy_print_warnings(warnings);
	if (json) {
		out = json_object_new_object();
		if (out == NULL ||
		    json_object_object_add(out, "path", json_object_new_string(pf.pf_path)) != 0 ||
		    json_object_object_add(out, "key", json_object_new_string(key)) != 0 ||
		    json_object_object_add(out, "value", json_object_get(v)) != 0 ||
		    json_object_object_add(out, "warnings", json_object_get(warnings)) != 0) {
			fprintf(stderr, "gensee policy: out of memory\n");
			json_object_put(out);
			goto out;
		}
		policy_print_json(out);
		json_object_put(out);
	} else {
		printf("%s = ", key);
		policy_print_value(stdout, v, 0);
		printf(" (%s)\n", pf.pf_path);
	}
	rc = 0;
out:
	json_object_put(v);
	json_object_put(warnings);
	policy_file_close(&pf);
	return rc;
}

/*
 * `gensee policy setup [--force] [--json]`: write every default. Without
 * --force an existing file is kept (and must validate); with it, even an
 * invalid one is replaced, but never a symlink.
 */
static int
policy_cmd_setup(int force, int json)
{
	struct json_object *doc = NULL, *out;
	struct policy_file pf;
	struct stat st;
	char *cause = NULL;
	int rc = POLICY_EXIT_FAIL;

	memset(&pf, 0, sizeof(pf));
	pf.pf_dirfd = -1;
	if (policy_locate(&pf, &cause) != 0 || policy_open_dir(&pf, 1, &cause) != 0 ||
	    policy_lock(&pf, &cause) != 0)
		goto fail;
	if (fstatat(pf.pf_dirfd, POLICY_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode)) {
			util_cause(&cause, "%s is a symlink; refusing to replace it", pf.pf_path);
			goto fail;
		}
		if (!force) {
			if (policy_read(&pf, NULL, &cause) == 0)
				util_cause(&cause, "%s exists; use --force to replace it with the "
				    "defaults", pf.pf_path);
			goto fail;
		}
	} else if (errno != ENOENT) {
		util_cause(&cause, "%s: %s", pf.pf_path, strerror(errno));
		goto fail;
	}
	if ((doc = policy_defaults()) == NULL) {
		util_cause(&cause, "out of memory");
		goto fail;
	}
	if (policy_validate(doc, NULL, &cause) != 0 || policy_write(&pf, doc, &cause) != 0)
		goto fail;
	if (json) {
		if ((out = json_object_new_object()) == NULL || json_object_object_add(out, "path",
		    json_object_new_string(pf.pf_path)) != 0) {
			json_object_put(out);
			util_cause(&cause, "out of memory");
			goto fail;
		}
		policy_print_json(out);
		json_object_put(out);
	} else {
		printf("wrote %s\n", pf.pf_path);
	}
	rc = 0;
	goto done;
fail:
	fprintf(stderr, "gensee policy: %s\n", cause);
	free(cause);
done:
	json_object_put(doc);
	policy_file_close(&pf);
	return rc;
}

/* What values of a key look like, for help. */
static void
policy_type_text(const struct policy_key *k, char *buf, size_t len)
{
	switch (k->pk_type) {
	case POLICY_BOOL:
		snprintf(buf, len, "true|false");
		break;
	case POLICY_ENUM:
		policy_enum_list(k->pk_values, "|", buf, len);
		break;
	case POLICY_INT:
		snprintf(buf, len, "%lld..%lld", (long long)k->pk_min, (long long)k->pk_max);
		break;
	case POLICY_PATHS:
		snprintf(buf, len, "list of absolute paths");
		break;
	case POLICY_PATTERNS:
		snprintf(buf, len, "list of path patterns");
		break;
	case POLICY_NETS:
		snprintf(buf, len, "list of CIDR[,tcp|udp[,PORT|LO-HI]] or NAME,tcp|udp,PORT");
		break;
	case POLICY_RULES:
		snprintf(buf, len, "JSON list of rule objects");
		break;
	case POLICY_METHODS:
		snprintf(buf, len, "list of HTTP methods");
		break;
	case POLICY_AGENTS:
		snprintf(buf, len, "JSON list of agent profile objects");
		break;
	}
}

/* Print usage to f, with the key table when keys is set. */
static void
policy_usage(FILE *f, int keys)
{
	char type[256];

	fprintf(f,
	    "usage: gensee policy setup [--force] [--json]\n"
	    "       gensee policy show [--json]\n"
	    "       gensee policy get KEY [--json]\n"
	    "       gensee policy set KEY VALUE [--json]\n"
	    "       gensee policy help\n");
	if (!keys)
		return;
	fprintf(f,
	    "\n"
	    "The policy is $GENSEE_HOME/policy.json ($HOME/.gensee/policy.json).\n"
	    "A list takes a JSON array or one item; a value starting with - goes\n"
	    "after --. Keys:\n");
	for (size_t i = 0; i < nitems(policy_table); i++) {
		const struct policy_key *k = &policy_table[i];
		policy_type_text(k, type, sizeof(type));
		fprintf(f, "  %s  %s (default %s)\n      %s\n", k->pk_name, type,
		    k->pk_default != NULL ? k->pk_default : "derived", k->pk_help);
	}
}

int
cmd_policy(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sub;
	int json = 0, force = 0, ch, nargs;
	char **args;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j':
			json = 1;
			break;
		case 'f':
			force = 1;
			break;
		case 'h':
			policy_usage(stdout, 1);
			return 0;
		default:
			policy_usage(stderr, 0);
			return POLICY_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		policy_usage(stderr, 0);
		return POLICY_EXIT_USAGE;
	}
	sub = argv[optind];
	args = argv + optind + 1;
	nargs = argc - optind - 1;
	if (strcmp(sub, "help") == 0 && nargs == 0) {
		policy_usage(stdout, 1);
		return 0;
	}
	if (force && strcmp(sub, "setup") != 0) {
		fprintf(stderr, "gensee policy: --force is only for setup\n");
		return POLICY_EXIT_USAGE;
	}
	if (strcmp(sub, "setup") == 0 && nargs == 0)
		return policy_cmd_setup(force, json);
	if (strcmp(sub, "show") == 0 && nargs == 0)
		return policy_cmd_show(json);
	if (strcmp(sub, "get") == 0 && nargs == 1)
		return policy_cmd_get(args[0], json);
	if (strcmp(sub, "set") == 0 && nargs == 2)
		return policy_cmd_set(args[0], args[1], json);
	policy_usage(stderr, 0);
	return POLICY_EXIT_USAGE;
}
