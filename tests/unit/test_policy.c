/*
 * test_policy.c: the policy schema (cli/policy.c, compiled in): whole
 * document validation, command-line value parsing, effective values and
 * the file commands on a private GENSEE_HOME.
 */
#include <string.h>

#include <json-c/json.h>

#include "cli/cli.h"
#include "cli/policy.h"
#include "frame.h"
#include "landlock.h"
#include "schema.h"
#include "unit.h"

/* Parse a fixed document strictly, as the file would be. */
static struct json_object *
doc(const char *text)
{
	struct json_object *o = NULL;
	ck_assert_msg(frame_parse_payload((const uint8_t *)text, strlen(text), &o) == FRAME_OK,
	    "bad test document %s", text);
	return o;
}

/* Validate text; returns the cause (caller frees) or NULL when valid. */
static char *
validate(const char *text, struct json_object *warnings)
{
	struct json_object *o = doc(text);
	char *cause = NULL;
	int r = policy_validate(o, warnings, &cause);
	json_object_put(o);
	if (r == 0) {
		ck_assert_ptr_null(cause);
		return NULL;
	}
	ck_assert_ptr_nonnull(cause);
	return cause;
}

/* text must be refused with a cause holding want (and also want2). */
static void
refused(const char *text, const char *want, const char *want2)
{
	char *cause = validate(text, NULL);
	ck_assert_msg(cause != NULL, "accepted: %s", text);
	ck_assert_msg(strstr(cause, want) != NULL, "%s: cause \"%s\" lacks \"%s\"", text, cause,
	    want);
	if (want2 != NULL)
		ck_assert_msg(strstr(cause, want2) != NULL, "%s: cause \"%s\" lacks \"%s\"", text,
		    cause, want2);
	free(cause);
}

/* Parse a command-line value of key; returns its JSON text or NULL. */
static char *
parse(const char *key, const char *text, struct json_object *warnings, char **cause)
{
	const struct policy_key *k = policy_key_find(key);
	struct json_object *v = NULL;
	char *s;

	ck_assert_ptr_nonnull(k);
	if (policy_parse_value(k, text, warnings, &v, cause) != 0) {
		ck_assert_ptr_null(v);
		ck_assert_ptr_nonnull(*cause);
		return NULL;
	}
	s = strdup(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(v);
	return s;
}

/* key's value text must parse to want. */
static void
parses(const char *key, const char *text, const char *want)
{
	char *cause = NULL;
	char *got = parse(key, text, NULL, &cause);
	ck_assert_msg(got != NULL, "%s %s refused: %s", key, text, cause);
	ck_assert_str_eq(got, want);
	free(got);
}

/* key's value text must be refused naming the key. */
static void
parse_refused(const char *key, const char *text)
{
	char *cause = NULL;
	char *got = parse(key, text, NULL, &cause);
	ck_assert_msg(got == NULL, "%s %s accepted as %s", key, text, got);
	ck_assert_msg(strstr(cause, key) != NULL, "cause \"%s\" does not name %s", cause, key);
	free(cause);
}

START_TEST(test_valid_documents)
{
	struct json_object *w = json_object_new_array();

	ck_assert_ptr_null(validate("{}", w));
	ck_assert_ptr_null(validate("{\"linux\": {}}", w));
	/* The keys of seed 003. */
	ck_assert_ptr_null(validate("{\"linux\": {"
	    "\"seccomp\": {\"enabled\": true, \"deny_ptrace\": true, \"deny_bpf\": true,"
	    "  \"deny_kernel_modules\": true, \"deny_mount_namespace_changes\": true},"
	    "\"fanotify\": {\"paths\": [\"/tmp/gensee-demo-secret/**\"]},"
	    "\"network\": {\"mode\": \"allowlist\", \"allow\": [\"1.1.1.1\"],"
	    "  \"deny\": [\"169.254.169.254\"]}}}", w));
	ck_assert_ptr_null(validate("{\"linux\": {\"posture\": \"isolate\","
	    "\"landlock\": {\"mode\": \"best_effort\", \"read_only\": [\"/\", \"/usr\"],"
	    "  \"read_write\": [\"/home/u/.cache\", \"/tmp/x y\"]},"
	    "\"fanotify\": {\"enabled\": false, \"action\": \"speculate\","
	    "  \"paths\": [\"/etc/shadow\","
	    "  \"/root/**\", \"~/.x/**\", \"**/.env\", \"**/.env.*\", \"/root/**/.env\"],"
	    "  \"rules\": [{\"path\": \"~/.aws/**\", \"action\": \"ask\"},"
	    "    {\"action\": \"observe\", \"path\": \"**/.env\"}]},"
	    "\"network\": {\"mode\": \"monitor\", \"allow\": [\"10.0.0.0/8\", \"1.1.1.1,tcp,443\","
	    "  \"2001:db8::/32,udp,5000-5100\"], \"deny\": [],"
	    "  \"lease_scopes\": [\"192.0.2.0/24,tcp\"],"
	    "  \"max_lease_ttl_seconds\": 86400}}}", w));
	ck_assert_int_eq((int)json_object_array_length(w), 0);
	json_object_put(w);
	/* What setup writes validates. */
	struct json_object *d = policy_defaults();
	char *cause = NULL;
	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(policy_validate(d, NULL, &cause), 0);
	json_object_put(d);
}
END_TEST

START_TEST(test_unknown_keys)
{
	refused("{\"linx\": {}}", "unknown key linx", NULL);
	refused("{\"linux\": {\"postur\": \"warn\"}}", "unknown key linux.postur", NULL);
	refused("{\"linux\": {\"seccomp\": {\"deny_ptrac\": true}}}",
	    "unknown key linux.seccomp.deny_ptrac", NULL);
	refused("{\"linux\": {\"network\": {\"allow\": [], \"dns\": []}}}",
	    "unknown key linux.network.dns", NULL);
	refused("{\"linux\": {\"fanotify\": {\"rules\": [{\"path\": \"/x\", \"action\": \"deny\","
	    " \"why\": 1}]}}}", "unknown key linux.fanotify.rules[0].why", NULL);
	refused("{\"linux\": {\"landlock\": {\"mode\": \"off\", \"paths\": []}}}",
	    "unknown key linux.landlock.paths", NULL);
	/* A dotted member name is not the section it spells. */
	refused("{\"linux.posture\": \"warn\"}", "unknown key", "linux.posture");
	refused("{\"linux\": {\"seccomp.enabled\": true}}", "unknown key", NULL);
	refused("{\"linux\": {\"\": 1}}", "unknown key", NULL);
	/* Sections must be objects. */
	refused("{\"linux\": []}", "linux: expected an object", NULL);
	refused("{\"linux\": {\"network\": \"allowlist\"}}", "linux.network: expected an object",
	    NULL);
	refused("{\"linux\": null}", "linux: expected an object", NULL);
}
END_TEST

START_TEST(test_scalar_types)
{
	refused("{\"linux\": {\"seccomp\": {\"enabled\": \"yes\"}}}", "linux.seccomp.enabled",
	    "true or false");
	refused("{\"linux\": {\"seccomp\": {\"deny_bpf\": 1}}}", "linux.seccomp.deny_bpf",
	    "true or false");
	refused("{\"linux\": {\"fanotify\": {\"enabled\": null}}}", "linux.fanotify.enabled",
	    "true or false");
	refused("{\"linux\": {\"posture\": \"strict\"}}", "linux.posture",
	    "monitor, warn, enforce or isolate");
	refused("{\"linux\": {\"posture\": \"Enforce\"}}", "linux.posture", "expected");
	refused("{\"linux\": {\"posture\": true}}", "linux.posture", "expected");
	refused("{\"linux\": {\"landlock\": {\"mode\": \"best-effort\"}}}", "linux.landlock.mode",
	    "required, best_effort or off");
	refused("{\"linux\": {\"fanotify\": {\"action\": \"block\"}}}", "linux.fanotify.action",
	    "observe, warn, ask, deny or speculate");
	refused("{\"linux\": {\"network\": {\"mode\": \"deny_all\"}}}", "linux.network.mode",
	    "allowlist or monitor");
	refused("{\"linux\": {\"network\": {\"max_lease_ttl_seconds\": 86401}}}",
	    "linux.network.max_lease_ttl_seconds", "from 0 to 86400");
	refused("{\"linux\": {\"network\": {\"max_lease_ttl_seconds\": -1}}}",
	    "linux.network.max_lease_ttl_seconds", "integer");
	refused("{\"linux\": {\"network\": {\"max_lease_ttl_seconds\": 60.5}}}",
	    "linux.network.max_lease_ttl_seconds", "integer");
	refused("{\"linux\": {\"network\": {\"max_lease_ttl_seconds\": \"60\"}}}",
	    "linux.network.max_lease_ttl_seconds", "integer");
	refused("{\"linux\": {\"network\": {\"max_lease_ttl_seconds\": 99999999999999999999}}}",
	    "linux.network.max_lease_ttl_seconds", "integer");
	ck_assert_ptr_null(validate("{\"linux\": {\"network\": {\"max_lease_ttl_seconds\": 0}}}",
	    NULL));
}
END_TEST

START_TEST(test_lists)
{
	refused("{\"linux\": {\"fanotify\": {\"paths\": \"/x/**\"}}}", "linux.fanotify.paths",
	    "JSON array");
	refused("{\"linux\": {\"landlock\": {\"read_only\": [\"/usr\", 3]}}}",
	    "linux.landlock.read_only[1]", "absolute path");
	refused("{\"linux\": {\"fanotify\": {\"rules\": {\"path\": \"/x\", "
	    "\"action\": \"deny\"}}}}", "linux.fanotify.rules", "JSON array");
	refused("{\"linux\": {\"fanotify\": {\"rules\": [\"/x\"]}}}", "linux.fanotify.rules[0]",
	    "object");
	refused("{\"linux\": {\"fanotify\": {\"rules\": [{\"path\": \"/x\"}]}}}",
	    "linux.fanotify.rules[0]", "missing action");
	refused("{\"linux\": {\"fanotify\": {\"rules\": [{\"action\": \"deny\"}]}}}",
	    "linux.fanotify.rules[0]", "missing path");
	refused("{\"linux\": {\"fanotify\": {\"rules\": [{\"path\": \"/x\", "
	    "\"action\": \"nope\"}]}}}", "linux.fanotify.rules[0].action", "observe");
	refused("{\"linux\": {\"fanotify\": {\"rules\": [{\"path\": \"x\", "
	    "\"action\": \"deny\"}]}}}", "linux.fanotify.rules[0].path", "not absolute");
	/* linux.agents.custom: strict profile objects (lib/agentprof.c). */
	parses("linux.agents.custom", "{\"name\": \"aider\", \"executables\": [\"aider\"], "
	    "\"state\": [\"~/.aider\"], \"config\": [\"conf.yml\"], \"hosts\": "
	    "[\"api.example.org,tcp,443\"], \"env\": [\"AIDER_CHECK_UPDATE=false\"]}",
	    "[{\"name\":\"aider\",\"executables\":[\"aider\"],\"state\":[\"~/.aider\"],"
	    "\"config\":[\"conf.yml\"],\"hosts\":[\"api.example.org,tcp,443\"],"
	    "\"env\":[\"AIDER_CHECK_UPDATE=false\"]}]");
	parses("linux.agents.custom", "[{\"name\": \"codex\", \"hosts\": []}]",
	    "[{\"name\":\"codex\",\"hosts\":[]}]");
	static const char *const bad_agents[] = {
		"[{\"executables\": [\"x\"]}]",			/* no name */
		"[{\"name\": \"none\"}]",
		"[{\"name\": \"Bad\"}]",
		"[{\"name\": \"a\", \"shell\": \"x\"}]",	/* unknown key */
		"[{\"name\": \"a\", \"state\": [\"rel\"]}]",
		"[{\"name\": \"a\", \"state\": [\"~\"]}]",
		"[{\"name\": \"a\", \"state\": [\"~/x/../../etc\"]}]",
		"[{\"name\": \"a\", \"state\": [\"/x,upperdir=/y\"]}]",
		"[{\"name\": \"a\", \"config\": [\"a/b\"]}]",
		"[{\"name\": \"a\", \"config\": [\"..\"]}]",
		"[{\"name\": \"a\", \"executables\": [\"/usr/bin/a\"]}]",
		"[{\"name\": \"a\", \"hosts\": [\"192.0.2.1,tcp,443\"]}]",
		"[{\"name\": \"a\", \"hosts\": [\"a.example\"]}]",
		"[{\"name\": \"a\", \"env\": [\"lower=1\"]}]",
		"[{\"name\": \"a\", \"env\": [\"NOVALUE\"]}]",
		"[{\"name\": \"a\"}, {\"name\": \"a\"}]",	/* the second would be ignored */
		"\"aider\"",
	};
	for (size_t i = 0; i < nitems(bad_agents); i++)
		parse_refused("linux.agents.custom", bad_agents[i]);
	refused("{\"linux\": {\"network\": {\"http_methods\": [\"get\"]}}}",
	    "linux.network.http_methods[0]", "not a method");
	refused("{\"linux\": {\"network\": {\"http_methods\": [\"CONNECT\"]}}}",
	    "linux.network.http_methods[0]", "not a method");
	/* The bound netspec reads. */
	char big[POLICY_MAX_LIST * 8 + 64];
	size_t off = (size_t)snprintf(big, sizeof(big), "{\"linux\": {\"network\": {\"deny\": [");
	for (int i = 0; i <= POLICY_MAX_LIST; i++)
		off += (size_t)snprintf(big + off, sizeof(big) - off, "%s\"::1\"", i ? "," : "");
	snprintf(big + off, sizeof(big) - off, "]}}}");
	refused(big, "linux.network.deny", "at most 256");
}
END_TEST

START_TEST(test_paths)
{
	const char *bad_paths[] = { "tmp", "", "./x", "~/x", "/a/../b", "/a/./b", "/a//b", "/a/",
		"/..", "/a/*", "/a/**", "/a\nb" };
	const char *bad_patterns[] = { "relative/x", "", "..", "../x", "/a/../b", "/a/./x",
		"~", "~/", "~user/.ssh/**", "**", "**/", "/a/**x", "/a/x**", "/a//b", "/a/", "/",
		"/a\tb", "*/x", ".env" };
	char text[256];

	for (size_t i = 0; i < nitems(bad_paths); i++) {
		struct json_object *o = json_object_new_object();
		struct json_object *a = json_object_new_array();
		char *cause = NULL;
		ck_assert_int_eq(json_object_array_add(a, json_object_new_string(bad_paths[i])), 0);
		ck_assert_int_eq(policy_set(o, "linux.landlock.read_write", a, &cause), 0);
		ck_assert_msg(policy_validate(o, NULL, &cause) == -1, "path %s accepted",
		    bad_paths[i]);
		ck_assert_msg(strstr(cause, "linux.landlock.read_write[0]") != NULL, "%s", cause);
		free(cause);
		json_object_put(o);
	}
	for (size_t i = 0; i < nitems(bad_patterns); i++) {
		struct json_object *o = json_object_new_object();
		struct json_object *a = json_object_new_array();
		char *cause = NULL;
		ck_assert_int_eq(json_object_array_add(a, json_object_new_string(bad_patterns[i])),
		    0);
		ck_assert_int_eq(policy_set(o, "linux.fanotify.paths", a, &cause), 0);
		ck_assert_msg(policy_validate(o, NULL, &cause) == -1, "pattern %s accepted",
		    bad_patterns[i]);
		ck_assert_msg(strstr(cause, "linux.fanotify.paths[0]") != NULL, "%s", cause);
		free(cause);
		json_object_put(o);
	}
	/* The message says what is expected. */
	snprintf(text, sizeof(text), "{\"linux\": {\"fanotify\": {\"paths\": [\"/ok/**\", "
	    "\"/a/../b\"]}}}");
	refused(text, "linux.fanotify.paths[1]", "..");
	refused(text, "linux.fanotify.paths[1]", "expected a path pattern");
}
END_TEST

START_TEST(test_network_entries)
{
	const char *bad[] = { "1.2.3.4/33", "1.2.3.4,icmp", "1.2.3.4,tcp,70000", "1.2.3.4,tcp,9-1",
		"1.2.3.4,tcp,443,x", "", "2001:db8::/129", "1.2.3", "example.com/24",
		"example.com,icmp", "example.com,tcp,99999" };
	struct json_object *w = json_object_new_array();

	for (size_t i = 0; i < nitems(bad); i++) {
		char text[256];
		snprintf(text, sizeof(text), "{\"linux\": {\"network\": {\"allow\": [\"10.0.0.1\", "
		    "\"%s\"]}}}", bad[i]);
		refused(text, "linux.network.allow[1]", "CIDR[,tcp|udp[,PORT|LO-HI]]");
	}
	refused("{\"linux\": {\"network\": {\"lease_scopes\": [\"1.2.3.4,sctp\"]}}}",
	    "linux.network.lease_scopes[0]", "tcp or udp");
	/* Hostnames are accepted with a warning that enforcement skips them. */
	ck_assert_ptr_null(validate("{\"linux\": {\"network\": {\"allow\": [\"api.example.com\","
	    " \"1.1.1.1\"], \"deny\": [\"metadata.internal,tcp,80\"]}}}", w));
	ck_assert_int_eq((int)json_object_array_length(w), 2);
	const char *w0 = json_object_get_string(json_object_array_get_idx(w, 0));
	const char *w1 = json_object_get_string(json_object_array_get_idx(w, 1));
	ck_assert_msg(strstr(w0, "linux.network.allow") != NULL &&
	    strstr(w0, "api.example.com") != NULL && strstr(w0, "skipped") != NULL, "%s", w0);
	ck_assert_msg(strstr(w1, "linux.network.deny") != NULL &&
	    strstr(w1, "metadata.internal") != NULL, "%s", w1);
	json_object_put(w);
	/* No warnings array: still accepted. */
	ck_assert_ptr_null(validate("{\"linux\": {\"network\": {\"allow\": [\"example.org\"]}}}",
	    NULL));
}
END_TEST

START_TEST(test_parse_values)
{
	struct json_object *w = json_object_new_array();
	char *cause = NULL, *got;

	parses("linux.seccomp.enabled", "true", "true");
	parses("linux.seccomp.deny_bpf", "false", "false");
	parse_refused("linux.seccomp.enabled", "yes");
	parse_refused("linux.seccomp.enabled", "TRUE");
	parse_refused("linux.seccomp.enabled", "");
	parses("linux.posture", "warn", "\"warn\"");
	parse_refused("linux.posture", "strict");
	parse_refused("linux.posture", "\"warn\"");
	parses("linux.landlock.mode", "best_effort", "\"best_effort\"");
	parses("linux.network.mode", "monitor", "\"monitor\"");
	parses("linux.network.max_lease_ttl_seconds", "86400", "86400");
	parses("linux.network.max_lease_ttl_seconds", "0", "0");
	parse_refused("linux.network.max_lease_ttl_seconds", "86401");
	parse_refused("linux.network.max_lease_ttl_seconds", "-1");
	parse_refused("linux.network.max_lease_ttl_seconds", "1e3");
	parse_refused("linux.network.max_lease_ttl_seconds", "60s");
	parse_refused("linux.network.max_lease_ttl_seconds", "");
	/* One item is a list of one, as in seed 003. */
	parses("linux.fanotify.paths", "/tmp/gensee-demo-secret/**",
	    "[\"/tmp/gensee-demo-secret/**\"]");
	parses("linux.fanotify.paths", "[\"/a/**\", \"**/.env\"]", "[\"/a/**\",\"**/.env\"]");
	parses("linux.fanotify.paths", " []", "[]");
	parses("linux.landlock.read_only", "/usr", "[\"/usr\"]");
	parses("linux.network.deny", "169.254.169.254", "[\"169.254.169.254\"]");
	parses("linux.network.allow", "[\"1.1.1.1,tcp,443\", \"10.0.0.0/8\"]",
	    "[\"1.1.1.1,tcp,443\",\"10.0.0.0/8\"]");
	parse_refused("linux.fanotify.paths", "relative/**");
	parse_refused("linux.fanotify.paths", "[\"/ok\", \"../x\"]");
	parse_refused("linux.landlock.read_only", "[1]");
	parse_refused("linux.network.allow", "1.2.3.4/40");
	parse_refused("linux.network.allow", "[\"1.1.1.1\"");
	parse_refused("linux.network.allow", "['1.1.1.1']");
	/* Text that closes the value and opens another member is not one value. */
	parse_refused("linux.network.allow", "[], \"v\": [\"1.1.1.1\"]");
	parse_refused("linux.network.allow", "[], \"w\": 1");
	parse_refused("linux.network.allow", "[]} {\"v\": []");
	/* Rules: JSON only; one object is a list of one. */
	parses("linux.fanotify.rules", "{\"path\": \"~/.ssh/**\", \"action\": \"ask\"}",
	    "[{\"path\":\"~/.ssh/**\",\"action\":\"ask\"}]");
	parses("linux.fanotify.rules", "[{\"path\": \"**/.env\", \"action\": \"observe\"}]",
	    "[{\"path\":\"**/.env\",\"action\":\"observe\"}]");
	parse_refused("linux.fanotify.rules", "~/.ssh/**");
	parse_refused("linux.fanotify.rules", "{\"path\": \"~/.ssh/**\"}");
	parse_refused("linux.fanotify.rules", "[{\"path\": \"~/.ssh/**\", \"action\": \"x\"}]");
	/* Hostname entries with a protocol and a port are enforced (DNS proxy): no warning. */
	parses("linux.network.allow", "[\"api.example.com,tcp,443\", \"*.pypi.org,tcp,443\"]",
	    "[\"api.example.com,tcp,443\",\"*.pypi.org,tcp,443\"]");
	parse_refused("linux.network.allow", "[\"*.org,tcp,443\"]");
	parse_refused("linux.network.allow", "[\"api.example.com,tcp,1-5\"]");
	parse_refused("linux.network.allow", "[\"api.example.com,icmp,443\"]");
	parse_refused("linux.network.allow", "[\"api..example.com,tcp,443\"]");
	/* A bare hostname is accepted and warned about. */
	got = parse("linux.network.allow", "api.example.com", w, &cause);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, "[\"api.example.com\"]");
	free(got);
	ck_assert_int_eq((int)json_object_array_length(w), 1);
	ck_assert_ptr_nonnull(strstr(json_object_get_string(json_object_array_get_idx(w, 0)),
	    "skipped at enforcement time"));
	json_object_put(w);
}
END_TEST

/* The effective value of key as JSON text (caller frees). */
static char *
effective(struct json_object *policy, const char *key)
{
	struct json_object *v = policy_get_effective(policy, key);
	char *s;
	ck_assert_ptr_nonnull(v);
	s = strdup(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
	json_object_put(v);
	return s;
}

START_TEST(test_effective)
{
	struct json_object *empty = doc("{}");
	struct json_object *p = doc("{\"linux\": {\"posture\": \"warn\", \"network\": "
	    "{\"deny\": [\"192.0.2.1\"]}}}");
	struct json_object *q = doc("{\"linux\": {\"network\": {\"allow\": [\"192.0.2.1\"], "
	    "\"deny\": [\"192.0.2.2\"]}}}");
	struct json_object *r = doc("{\"linux\": {\"network\": {\"mode\": \"allowlist\", "
	    "\"deny\": [\"192.0.2.2\"]}}}");
	char *s;
	size_t n;
	const struct policy_key *keys = policy_keys(&n);

	ck_assert_ptr_null(policy_get_effective(empty, "linux.nope"));
	ck_assert_ptr_null(policy_get_effective(empty, "linux"));
	for (size_t i = 0; i < n; i++) {
		struct json_object *v = policy_get_effective(empty, keys[i].pk_name);
		char *cause = NULL;
		ck_assert_ptr_nonnull(v);
		ck_assert_msg(policy_validate_key(&keys[i], v, NULL, &cause) == 0, "%s: %s",
		    keys[i].pk_name, cause);
		ck_assert_int_eq(policy_is_unset(empty, keys[i].pk_name), 1);
		json_object_put(v);
	}
#define EQ(pol, key, want) do { s = effective(pol, key); ck_assert_str_eq(s, want); \
	free(s); } while (0)
	EQ(empty, "linux.posture", "\"enforce\"");
	EQ(empty, "linux.seccomp.enabled", "true");
	EQ(empty, "linux.fanotify.enabled", "false");
	EQ(empty, "linux.fanotify.action", "\"deny\"");
	/* Landlock is on by default: required where this kernel has it. */
	{
		const char *why = NULL;
		EQ(empty, "linux.landlock.mode", landlock_abi(&why) > 0 ? "\"required\"" :
		    "\"best_effort\"");
	}
	EQ(empty, "linux.landlock.default_paths", "true");
	EQ(empty, "linux.mount_view.mode", "\"required\"");
	EQ(empty, "linux.seccomp.deny_terminal_injection", "true");
	EQ(empty, "linux.fanotify.paths", "[]");
	EQ(empty, "linux.network.max_lease_ttl_seconds", "0");
	EQ(p, "linux.posture", "\"warn\"");
	ck_assert_int_eq(policy_is_unset(p, "linux.posture"), 0);
	/* Deny-only is monitor mode (seed 003); an explicit mode wins. */
	EQ(empty, "linux.network.mode", "\"allowlist\"");
	EQ(p, "linux.network.mode", "\"monitor\"");
	EQ(q, "linux.network.mode", "\"allowlist\"");
	EQ(r, "linux.network.mode", "\"allowlist\"");
#undef EQ
	json_object_put(empty);
	json_object_put(p);
	json_object_put(q);
	json_object_put(r);
}
END_TEST

START_TEST(test_set_preserves)
{
	struct json_object *p = doc("{\"linux\": {\"seccomp\": {\"enabled\": false}, "
	    "\"posture\": \"warn\", \"network\": {\"allow\": [\"1.1.1.1\"]}}}");
	char *cause = NULL;

	ck_assert_int_eq(policy_set(p, "linux.posture", json_object_new_string("monitor"), &cause),
	    0);
	ck_assert_int_eq(policy_set(p, "linux.fanotify.paths", json_tokener_parse("[\"/x\"]"),
	    &cause), 0);
	ck_assert_str_eq(json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE),
	    "{\"linux\":{\"seccomp\":{\"enabled\":false},\"posture\":\"monitor\","
	    "\"network\":{\"allow\":[\"1.1.1.1\"]},\"fanotify\":{\"paths\":[\"/x\"]}}}");
	ck_assert_int_eq(policy_validate(p, NULL, &cause), 0);
	/* A section that is not an object is not written through. */
	struct json_object *bad = doc("{\"linux\": 1}");
	ck_assert_int_eq(policy_set(bad, "linux.posture", json_object_new_string("warn"), &cause),
	    -1);
	ck_assert_ptr_nonnull(strstr(cause, "linux"));
	free(cause);
	json_object_put(bad);
	json_object_put(p);
	/* Defaults: every fixed default, and no derived key. */
	struct json_object *d = policy_defaults();
	ck_assert_int_eq(policy_is_unset(d, "linux.posture"), 0);
	ck_assert_int_eq(policy_is_unset(d, "linux.fanotify.rules"), 0);
	ck_assert_int_eq(policy_is_unset(d, "linux.network.mode"), 1);
	json_object_put(d);
}
END_TEST

/* Run `gensee policy ARGS...` in this process; returns its exit status. */
static int
run(const char *a0, const char *a1, const char *a2, const char *a3)
{
	char *argv[6] = { (char *)"policy", (char *)a0, (char *)a1, (char *)a2, (char *)a3, NULL };
	int argc = 1;
	while (argc < 5 && argv[argc] != NULL)
		argc++;
	int rc = cmd_policy(argc, argv);
	fflush(stdout);
	return rc;
}

START_TEST(test_file_commands)
{
	char home[300], link[400];
	struct stat st;
	size_t len, len2;
	char *before, *after;
	int dfd;

	snprintf(home, sizeof(home), "%s/home", unit_tmpdir("/tmp"));
	ck_assert_int_eq(setenv("GENSEE_HOME", home, 1), 0);
	/* Nothing there: defaults, and get does not create the directory. */
	ck_assert_int_eq(run("get", "linux.posture", NULL, NULL), 0);
	ck_assert_int_eq(stat(home, &st), -1);
	ck_assert_int_eq(run("get", "linux.nope", NULL, NULL), CLI_EXIT_USAGE);
	ck_assert_int_eq(run("set", "linux.posture", "bogus", NULL), CLI_EXIT_USAGE);
	ck_assert_int_eq(stat(home, &st), -1);
	ck_assert_int_eq(run("setup", NULL, NULL, NULL), 0);
	ck_assert_int_eq(stat(home, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	dfd = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dfd, 0);
	ck_assert_int_eq(fstatat(dfd, "policy.json", &st, 0), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(run("setup", NULL, NULL, NULL), 1);
	ck_assert_int_eq(run("set", "linux.fanotify.paths", "/tmp/gensee-demo-secret/**", NULL), 0);
	before = unit_read_file(dfd, "policy.json", &len);
	ck_assert_ptr_nonnull(strstr(before, "/tmp/gensee-demo-secret/**"));
	ck_assert_ptr_nonnull(strstr(before, "\"posture\""));
	/* A refused value leaves the bytes alone. */
	ck_assert_int_eq(run("set", "linux.fanotify.paths", "../x", NULL), CLI_EXIT_USAGE);
	ck_assert_int_eq(run("set", "linux.network.max_lease_ttl_seconds", "86401", NULL),
	    CLI_EXIT_USAGE);
	after = unit_read_file(dfd, "policy.json", &len2);
	ck_assert_uint_eq(len, len2);
	ck_assert_int_eq(memcmp(before, after, len), 0);
	free(after);
	/* An invalid file fails everything but setup --force. */
	unit_write_file(dfd, "policy.json", "{\"linux\": {\"postur\": 1}}",
	    strlen("{\"linux\": {\"postur\": 1}}"));
	ck_assert_int_eq(run("get", "linux.posture", NULL, NULL), 1);
	ck_assert_int_eq(run("show", NULL, NULL, NULL), 1);
	ck_assert_int_eq(run("set", "linux.posture", "warn", NULL), 1);
	ck_assert_int_eq(run("setup", NULL, NULL, NULL), 1);
	after = unit_read_file(dfd, "policy.json", &len2);
	ck_assert_str_eq(after, "{\"linux\": {\"postur\": 1}}");
	free(after);
	ck_assert_int_eq(run("setup", "--force", NULL, NULL), 0);
	ck_assert_int_eq(run("show", "--json", NULL, NULL), 0);
	/* A symlink in its place is never followed or replaced. */
	snprintf(link, sizeof(link), "%s/elsewhere", home);
	unit_write_file(dfd, "elsewhere", before, len);
	ck_assert_int_eq(unlinkat(dfd, "policy.json", 0), 0);
	ck_assert_int_eq(symlinkat(link, dfd, "policy.json"), 0);
	ck_assert_int_eq(run("get", "linux.posture", NULL, NULL), 1);
	ck_assert_int_eq(run("set", "linux.posture", "warn", NULL), 1);
	ck_assert_int_eq(run("setup", "--force", NULL, NULL), 1);
	after = unit_read_file(dfd, "elsewhere", &len2);
	ck_assert_int_eq(memcmp(before, after, len), 0);
	ck_assert_int_eq(fstatat(dfd, "policy.json", &st, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert(S_ISLNK(st.st_mode));
	free(after);
	free(before);
	close(dfd);
}
END_TEST

/* Narrow user by host; returns the effective value of key as JSON text (caller frees). */
static char *
narrowed(const char *user, const char *host, const char *key)
{
	struct json_object *u = doc(user), *h = doc(host), *v;
	char *cause = NULL, *out;

	ck_assert_msg(hostpolicy_narrow(u, h, &cause) == 0, "narrow: %s", cause);
	v = policy_get_effective(u, key);
	out = strdup(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(v);
	json_object_put(u);
	json_object_put(h);
	return out;
}

/* Narrowing must fail, with a cause containing want. */
static void
narrow_refused(const char *user, const char *host, const char *want)
{
	struct json_object *u = doc(user), *h = doc(host);
	char *cause = NULL;

	ck_assert_int_eq(hostpolicy_narrow(u, h, &cause), -1);
	ck_assert_msg(cause != NULL && strstr(cause, want) != NULL, "cause %s, want %s", cause,
	    want);
	free(cause);
	json_object_put(u);
	json_object_put(h);
}

START_TEST(test_host_narrows)
{
	char *s;
#define NARROW(u, h, key, want) do { s = narrowed(u, h, key); ck_assert_str_eq(s, want); \
	free(s); } while (0)
	/* Booleans: the host's strict value wins, the user may add strictness. */
	NARROW("{\"linux\": {\"seccomp\": {\"enabled\": false}}}",
	    "{\"linux\": {\"seccomp\": {\"enabled\": true}}}", "linux.seccomp.enabled", "true");
	NARROW("{\"linux\": {\"seccomp\": {\"deny_ptrace\": false}}}",
	    "{\"linux\": {\"seccomp\": {\"deny_ptrace\": false}}}", "linux.seccomp.deny_ptrace",
	    "false");
	NARROW("{\"linux\": {\"fanotify\": {\"enabled\": true}}}",
	    "{\"linux\": {\"fanotify\": {\"enabled\": false}}}", "linux.fanotify.enabled", "true");
	NARROW("{}", "{\"linux\": {\"landlock\": {\"default_paths\": false}}}",
	    "linux.landlock.default_paths", "false");
	/* Intersections: what both allow, the user's default included. */
	NARROW("{}", "{\"linux\": {\"network\": {\"http_methods\": [\"POST\", \"MKCOL\"]}}}",
	    "linux.network.http_methods", "[\"POST\"]");
	NARROW("{\"linux\": {\"network\": {\"http_methods\": [\"PUT\", \"POST\"]}}}",
	    "{\"linux\": {\"network\": {\"http_methods\": [\"POST\", \"DELETE\"]}}}",
	    "linux.network.http_methods", "[\"POST\"]");
	NARROW("{\"linux\": {\"network\": {\"http_methods\": [\"PUT\"]}}}", "{}",
	    "linux.network.http_methods", "[\"PUT\"]");
	/* Orders: the stricter mode. */
	NARROW("{\"linux\": {\"mount_view\": {\"mode\": \"off\"}}}",
	    "{\"linux\": {\"mount_view\": {\"mode\": \"best_effort\"}}}",
	    "linux.mount_view.mode", "\"best_effort\"");
	NARROW("{\"linux\": {\"landlock\": {\"mode\": \"required\"}}}",
	    "{\"linux\": {\"landlock\": {\"mode\": \"best_effort\"}}}",
	    "linux.landlock.mode", "\"required\"");
	NARROW("{\"linux\": {\"posture\": \"monitor\"}}", "{\"linux\": {\"posture\": \"enforce\"}}",
	    "linux.posture", "\"enforce\"");
	NARROW("{\"linux\": {\"fanotify\": {\"action\": \"observe\"}}}",
	    "{\"linux\": {\"fanotify\": {\"action\": \"deny\"}}}", "linux.fanotify.action",
	    "\"deny\"");
	/* Numbers: the smaller. */
	NARROW("{\"linux\": {\"network\": {\"max_lease_ttl_seconds\": 600}}}",
	    "{\"linux\": {\"network\": {\"max_lease_ttl_seconds\": 60}}}",
	    "linux.network.max_lease_ttl_seconds", "60");
	/* Deny lists and hides: the host's entries are added. */
	NARROW("{\"linux\": {\"network\": {\"deny\": [\"192.0.2.9\"]}}}",
	    "{\"linux\": {\"network\": {\"deny\": [\"169.254.169.254\", \"192.0.2.9\"]}}}",
	    "linux.network.deny", "[\"192.0.2.9\",\"169.254.169.254\"]");
	NARROW("{}", "{\"linux\": {\"mount_view\": {\"hide\": [\"/srv/secrets\"]}}}",
	    "linux.mount_view.hide", "[\"/srv/secrets\"]");
	/* Allow lists are a ceiling: inside is kept, unset stays unset (nothing allowed). */
	NARROW("{\"linux\": {\"network\": {\"allow\": [\"192.0.2.0/25,tcp,443\"]}}}",
	    "{\"linux\": {\"network\": {\"allow\": [\"192.0.2.0/24,tcp,1-1024\"]}}}",
	    "linux.network.allow", "[\"192.0.2.0/25,tcp,443\"]");
	NARROW("{}", "{\"linux\": {\"network\": {\"allow\": [\"192.0.2.0/24\"]}}}",
	    "linux.network.allow", "[]");
	/* A hostname lies within a host hostname entry of its protocol and port. */
	NARROW("{\"linux\": {\"network\": {\"allow\": [\"files.pypi.org,tcp,443\", "
	    "\"*.a.pypi.org,tcp,443\", \"api.example.com,tcp,443\"]}}}",
	    "{\"linux\": {\"network\": {\"allow\": [\"*.pypi.org,tcp,443\", "
	    "\"api.example.com,tcp,443\"]}}}", "linux.network.allow",
	    "[\"files.pypi.org,tcp,443\",\"*.a.pypi.org,tcp,443\",\"api.example.com,tcp,443\"]");
	NARROW("{\"linux\": {\"landlock\": {\"read_write\": [\"/srv/work/a\"]}}}",
	    "{\"linux\": {\"landlock\": {\"read_write\": [\"/srv/work\"]}}}",
	    "linux.landlock.read_write", "[\"/srv/work/a\"]");
	/* An unset host key narrows nothing. */
	NARROW("{\"linux\": {\"seccomp\": {\"enabled\": false}}}", "{}",
	    "linux.seccomp.enabled", "false");
#undef NARROW
	/* Wider than the ceiling: refused, with the entry named. */
	narrow_refused("{\"linux\": {\"network\": {\"allow\": [\"0.0.0.0/0,tcp,443\"]}}}",
	    "{\"linux\": {\"network\": {\"allow\": [\"192.0.2.0/24,tcp,443\"]}}}", "0.0.0.0/0");
	narrow_refused("{\"linux\": {\"network\": {\"allow\": [\"192.0.2.1\"]}}}",
	    "{\"linux\": {\"network\": {\"allow\": [\"192.0.2.0/24,tcp\"]}}}",
	    "192.0.2.1 is outside");	/* no protocol: udp too, which the host does not allow */
	/* Names: never under an address entry, another port, or a suffix that does not cover. */
	narrow_refused("{\"linux\": {\"network\": {\"allow\": [\"api.example.com,tcp,443\"]}}}",
	    "{\"linux\": {\"network\": {\"allow\": [\"0.0.0.0/0,tcp,443\"]}}}", "api.example.com");
	narrow_refused("{\"linux\": {\"network\": {\"allow\": [\"api.example.com,tcp,80\"]}}}",
	    "{\"linux\": {\"network\": {\"allow\": [\"api.example.com,tcp,443\"]}}}",
	    "api.example.com");
	narrow_refused("{\"linux\": {\"network\": {\"allow\": [\"pypi.org,tcp,443\"]}}}",
	    "{\"linux\": {\"network\": {\"allow\": [\"*.pypi.org,tcp,443\"]}}}", "pypi.org");
	narrow_refused("{\"linux\": {\"network\": {\"allow\": [\"*.pypi.org,tcp,443\"]}}}",
	    "{\"linux\": {\"network\": {\"allow\": [\"files.pypi.org,tcp,443\"]}}}", "pypi.org");
	narrow_refused("{\"linux\": {\"network\": {\"lease_scopes\": [\"192.0.2.1,tcp,22\"]}}}",
	    "{\"linux\": {\"network\": {\"lease_scopes\": [\"192.0.2.1,tcp,443\"]}}}",
	    "lease_scopes");
	narrow_refused("{\"linux\": {\"landlock\": {\"read_write\": [\"/srv/workshop\"]}}}",
	    "{\"linux\": {\"landlock\": {\"read_write\": [\"/srv/work\"]}}}", "/srv/workshop");
	narrow_refused("{\"linux\": {\"unix_sockets\": {\"allow\": [\"/run/docker.sock\"]}}}",
	    "{\"linux\": {\"unix_sockets\": {\"allow\": [\"/run/user/1/ssh.sock\"]}}}",
	    "docker.sock");
}
END_TEST

/* Every key says how a host policy narrows it, in a way its type allows. */
START_TEST(test_every_key_narrows)
{
	size_t n;
	const struct policy_key *k = policy_keys(&n);

	for (size_t i = 0; i < n; i++) {
		enum policy_narrow w = k[i].pk_narrow;
		ck_assert_msg(w != POLICY_NARROW_UNSET, "%s has no narrowing rule", k[i].pk_name);
		if (w == POLICY_NARROW_TRUE || w == POLICY_NARROW_FALSE)
			ck_assert_msg(k[i].pk_type == POLICY_BOOL, "%s", k[i].pk_name);
		if (w == POLICY_NARROW_ORDER) {
			ck_assert_msg(k[i].pk_type == POLICY_ENUM && k[i].pk_strict != NULL, "%s",
			    k[i].pk_name);
			/* The order names every value, and only those. */
			size_t nv = 0, ns = 0;
			while (k[i].pk_values[nv] != NULL)
				nv++;
			while (k[i].pk_strict[ns] != NULL) {
				int found = 0;
				for (size_t j = 0; j < nv; j++)
					found |= strcmp(k[i].pk_values[j], k[i].pk_strict[ns]) == 0;
				ck_assert_msg(found, "%s: %s", k[i].pk_name, k[i].pk_strict[ns]);
				ns++;
			}
			ck_assert_msg(ns == nv, "%s: %zu of %zu values ordered", k[i].pk_name, ns, nv);
		}
		if (w == POLICY_NARROW_MIN)
			ck_assert_msg(k[i].pk_type == POLICY_INT, "%s", k[i].pk_name);
		if (w == POLICY_NARROW_INTERSECT)
			ck_assert_msg(k[i].pk_type == POLICY_METHODS, "%s", k[i].pk_name);
		if (w == POLICY_NARROW_UNION || w == POLICY_NARROW_WITHIN)
			ck_assert_msg(k[i].pk_type == POLICY_PATHS || k[i].pk_type == POLICY_NETS ||
			    k[i].pk_type == POLICY_PATTERNS || k[i].pk_type == POLICY_RULES ||
			    k[i].pk_type == POLICY_AGENTS, "%s", k[i].pk_name);
	}
}
END_TEST

START_TEST(test_host_netspec)
{
	struct json_object *h = doc("{\"linux\": {\"network\": {\"mode\": \"allowlist\", "
	    "\"allow\": [\"192.0.2.0/24,tcp\"], \"deny\": [\"192.0.2.66\"], "
	    "\"max_lease_ttl_seconds\": 30}}}");
	struct json_object *spec = doc("{\"mode\": \"allowlist\", \"allow\": [\"192.0.2.7,tcp,80\"], "
	    "\"deny\": [], \"lease_scopes\": [], \"max_lease_ttl_seconds\": 600}");
	char *cause = NULL;

	ck_assert_int_eq(hostpolicy_netspec(h, spec, &cause), 0);
	ck_assert_str_eq(json_object_to_json_string_ext(schema_child(spec, "deny"),
	    JSON_C_TO_STRING_PLAIN), "[\"192.0.2.66\"]");
	ck_assert_int_eq(schema_int(spec, "max_lease_ttl_seconds", 0), 30);
	json_object_put(spec);
	/* --allow-net wider than the host's allow, and --monitor, are refused. */
	spec = doc("{\"mode\": \"allowlist\", \"allow\": [\"198.51.100.1,tcp,80\"]}");
	ck_assert_int_eq(hostpolicy_netspec(h, spec, &cause), -1);
	ck_assert_msg(strstr(cause, "198.51.100.1") != NULL, "%s", cause);
	free(cause);
	cause = NULL;
	json_object_put(spec);
	spec = doc("{\"mode\": \"monitor\", \"allow\": []}");
	ck_assert_int_eq(hostpolicy_netspec(h, spec, &cause), -1);
	ck_assert_msg(strstr(cause, "requires allowlist") != NULL, "%s", cause);
	free(cause);
	json_object_put(spec);
	json_object_put(h);
}
END_TEST

static Suite *
policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc = tcase_create("schema");
	tcase_add_test(tc, test_valid_documents);
	tcase_add_test(tc, test_unknown_keys);
	tcase_add_test(tc, test_scalar_types);
	tcase_add_test(tc, test_lists);
	tcase_add_test(tc, test_paths);
	tcase_add_test(tc, test_network_entries);
	tcase_add_test(tc, test_parse_values);
	tcase_add_test(tc, test_effective);
	tcase_add_test(tc, test_set_preserves);
	tcase_add_test(tc, test_host_narrows);
	tcase_add_test(tc, test_host_netspec);
	tcase_add_test(tc, test_every_key_narrows);
	suite_add_tcase(s, tc);
	tc = tcase_create("file");
	tcase_add_test(tc, test_file_commands);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(policy_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
