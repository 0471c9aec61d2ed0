/*
 * test_fanpolicy.c: sensitive-path patterns, matching, the decision table
 * and the mark plan (lib/fanpolicy.c). No root needed: the plan and the
 * symlink resolution run on temporary trees in /tmp and /dev/shm.
 *
 * Patterns in comments are spelled with a space next to the stars, as in
 * fanpolicy.h.
 */
#include <limits.h>
#include <sys/stat.h>

#include "fanpolicy.h"
#include "unit.h"

#define HOME "/home/u"

/* Add one NUL-terminated pattern; returns what fanpolicy_add returns. */
static int
add(struct fanpolicy *p, const char *pat, enum fan_action a, char **cause)
{
	return fanpolicy_add(p, pat, strlen(pat), HOME, a, cause);
}

/* The rule a path matches, as "pattern" (or NULL), checking the return code. */
static const char *
hit_of(const struct fanpolicy *p, const char *path)
{
	const struct fan_rule *hit = (const struct fan_rule *)1;
	int r = fanpolicy_match(p, path, &hit);

	ck_assert_msg(r == 0 || r == 1, "match %s returned %d", path, r);
	if (r == 0) {
		ck_assert_ptr_null(hit);
		return NULL;
	}
	ck_assert_ptr_nonnull(hit);
	return hit->fr_pattern;
}

/* Does some warning contain needle? */
static int
warned(const struct fan_warnings *w, const char *needle)
{
	for (size_t i = 0; i < w->w_n; i++)
		if (strstr(w->w_v[i], needle) != NULL)
			return 1;
	return 0;
}

START_TEST(test_names)
{
	enum fan_posture p;
	enum fan_action a;
	const char *postures[] = { "monitor", "warn", "enforce", "isolate" };
	const char *actions[] = { "observe", "warn", "ask", "deny", "speculate" };

	for (size_t i = 0; i < nitems(postures); i++) {
		ck_assert_int_eq(fanpolicy_posture_from_name(postures[i], &p), 0);
		ck_assert_int_eq(p, (int)i);
		ck_assert_str_eq(fanpolicy_posture_name(p), postures[i]);
	}
	for (size_t i = 0; i < nitems(actions); i++) {
		ck_assert_int_eq(fanpolicy_action_from_name(actions[i], &a), 0);
		ck_assert_int_eq(a, (int)i);
		ck_assert_str_eq(fanpolicy_action_name(a), actions[i]);
	}
	p = FAN_POSTURE_ENFORCE;
	a = FAN_ACTION_DENY;
	const char *bad[] = { "", "Monitor", "enforce ", "deny\n", "block", "allow", "observe2" };
	for (size_t i = 0; i < nitems(bad); i++) {
		ck_assert_int_eq(fanpolicy_posture_from_name(bad[i], &p), -1);
		ck_assert_int_eq(fanpolicy_action_from_name(bad[i], &a), -1);
	}
	ck_assert_int_eq(fanpolicy_posture_from_name(NULL, &p), -1);
	ck_assert_int_eq(fanpolicy_action_from_name(NULL, &a), -1);
	/* Failures leave the output alone. */
	ck_assert_int_eq(p, FAN_POSTURE_ENFORCE);
	ck_assert_int_eq(a, FAN_ACTION_DENY);
	ck_assert_str_eq(fanpolicy_kind_name(FAN_RULE_SUFFIX), "suffix");
	ck_assert_str_eq(fanpolicy_mark_kind_name(FAN_PLAN_CHILDREN), "children");
}
END_TEST

START_TEST(test_parse_valid)
{
	struct fanpolicy p;
	char *cause = NULL;
	static const struct {
		const char *pat, *home;
		enum fan_rule_kind kind;
		const char *path, *glob;
	} ok[] = {
		{ "/etc/secret", HOME, FAN_RULE_EXACT, "/etc/secret", NULL },
		{ "/tmp/s/**", HOME, FAN_RULE_PREFIX, "/tmp/s", NULL },
		{ "/**", HOME, FAN_RULE_PREFIX, "/", NULL },
		{ "~/.ssh/**", HOME, FAN_RULE_PREFIX, "/home/u/.ssh", NULL },
		{ "~/.netrc", HOME, FAN_RULE_EXACT, "/home/u/.netrc", NULL },
		{ "~/**", HOME, FAN_RULE_PREFIX, "/home/u", NULL },
		{ "**/.env", HOME, FAN_RULE_SUFFIX, "/", ".env" },
		{ "**/.env.*", HOME, FAN_RULE_SUFFIX, "/", ".env.*" },
		{ "/work/**/.env", HOME, FAN_RULE_SUFFIX, "/work", ".env" },
		{ "~/**/*.pem", HOME, FAN_RULE_SUFFIX, "/home/u", "*.pem" },
		{ "/w/**/id_[re]*", HOME, FAN_RULE_SUFFIX, "/w", "id_[re]*" },
		{ "~/.ssh/**", "/", FAN_RULE_PREFIX, "/.ssh", NULL },
		{ "~/**", "/", FAN_RULE_PREFIX, "/", NULL },
		{ "~/x", "/", FAN_RULE_EXACT, "/x", NULL },
		{ "/a b/c\td/**", HOME, FAN_RULE_PREFIX, "/a b/c\td", NULL },
		{ "/...", HOME, FAN_RULE_EXACT, "/...", NULL },
		{ "/.x/..y/**", HOME, FAN_RULE_PREFIX, "/.x/..y", NULL },
	};

	for (size_t i = 0; i < nitems(ok); i++) {
		fanpolicy_init(&p);
		ck_assert_msg(fanpolicy_add(&p, ok[i].pat, strlen(ok[i].pat), ok[i].home,
		    FAN_ACTION_WARN, &cause) == 0, "%s: %s", ok[i].pat, cause);
		ck_assert_uint_eq(p.fp_nrules, 1);
		const struct fan_rule *r = &p.fp_rules[0];
		ck_assert_msg(r->fr_kind == ok[i].kind, "%s: kind %s", ok[i].pat,
		    fanpolicy_kind_name(r->fr_kind));
		ck_assert_str_eq(r->fr_path, ok[i].path);
		ck_assert_uint_eq(r->fr_pathlen, strlen(ok[i].path));
		ck_assert_str_eq(r->fr_pattern, ok[i].pat);
		if (ok[i].glob == NULL)
			ck_assert_ptr_null(r->fr_glob);
		else
			ck_assert_str_eq(r->fr_glob, ok[i].glob);
		ck_assert_int_eq(r->fr_action, FAN_ACTION_WARN);
		ck_assert_int_eq(r->fr_builtin, 0);
		ck_assert_ptr_null(r->fr_real);
		ck_assert_uint_eq(p.fp_warn.w_n, 0);
		fanpolicy_free(&p);
	}

	/* The length counts, not a NUL: "/a/bXYZ" with len 4 is "/a/b". */
	fanpolicy_init(&p);
	ck_assert_int_eq(fanpolicy_add(&p, "/a/bXYZ", 4, HOME, FAN_ACTION_DENY, &cause), 0);
	ck_assert_str_eq(p.fp_rules[0].fr_path, "/a/b");
	ck_assert_str_eq(p.fp_rules[0].fr_pattern, "/a/b");
	ck_assert_uint_eq(p.fp_rules[0].fr_index, 0);
	/* A pattern of PATH_MAX - 1 bytes is still fine. */
	char *longest = malloc(PATH_MAX);
	ck_assert_ptr_nonnull(longest);
	memset(longest, 'a', PATH_MAX - 1);
	for (size_t i = 0; i < PATH_MAX - 1; i += 200)
		longest[i] = '/';
	longest[PATH_MAX - 1] = '\0';
	ck_assert_msg(fanpolicy_add(&p, longest, strlen(longest), HOME, FAN_ACTION_DENY,
	    &cause) == 0, "%s", cause);
	ck_assert_uint_eq(p.fp_nrules, 2);
	ck_assert_uint_eq(p.fp_rules[1].fr_index, 1);
	free(longest);
	fanpolicy_free(&p);
	free(cause);
}
END_TEST

START_TEST(test_parse_invalid)
{
	struct fanpolicy p;
	char *cause = NULL;
	static const struct {
		const char *pat;
		const char *why;
	} bad[] = {
		{ "relative/path", "not absolute" },
		{ "./x", "not absolute" },
		{ "*.env", "not absolute" },
		{ "**", "not absolute" },
		{ "/a/../b", "\"..\"" },
		{ "/a/./b", "\"..\"" },
		{ "/..", "\"..\"" },
		{ "~/../etc/**", "\"..\"" },
		{ "/a//b", "empty" },
		{ "/a/", "empty" },
		{ "//", "empty" },
		{ "**/", "empty" },
		{ "/", "directory" },
		{ "~/", "directory" },
		{ "~", "only" },
		{ "~user/.ssh/**", "only" },
		{ "/a/*/b", "glob" },
		{ "/a/b*", "glob" },
		{ "/a?/**", "glob" },
		{ "/a/**/b/**", "glob" },
		{ "/**/**", "glob" },
		{ "/[ab]/**/x", "glob" },
		{ "/a/**/b/c", "glob" },
		{ "/a/x**/y", "glob" },
	};

	for (size_t i = 0; i < nitems(bad); i++) {
		fanpolicy_init(&p);
		free(cause);
		cause = NULL;
		ck_assert_msg(add(&p, bad[i].pat, FAN_ACTION_DENY, &cause) == -1, "%s accepted",
		    bad[i].pat);
		ck_assert_ptr_nonnull(cause);
		ck_assert_msg(strstr(cause, bad[i].why) != NULL, "%s: cause \"%s\" lacks \"%s\"",
		    bad[i].pat, cause, bad[i].why);
		/* The cause names the pattern. */
		ck_assert_msg(strstr(cause, bad[i].pat) != NULL, "%s: cause \"%s\"", bad[i].pat,
		    cause);
		ck_assert_uint_eq(p.fp_nrules, 0);
		fanpolicy_free(&p);
	}

	fanpolicy_init(&p);
	/* Empty, NUL inside, too long, too long once ~ is expanded, bad action. */
	ck_assert_int_eq(fanpolicy_add(&p, "", 0, HOME, FAN_ACTION_DENY, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "empty"));
	ck_assert_int_eq(fanpolicy_add(&p, NULL, 5, HOME, FAN_ACTION_DENY, &cause), -1);
	ck_assert_int_eq(fanpolicy_add(&p, "/a\0b/**", 7, HOME, FAN_ACTION_DENY, &cause), -1);
	ck_assert_msg(strstr(cause, "NUL") != NULL && strstr(cause, "/a\\x00b") != NULL, "%s",
	    cause);
	char *big = malloc(PATH_MAX + 10);
	ck_assert_ptr_nonnull(big);
	memset(big, 'b', PATH_MAX + 9);
	big[0] = '/';
	big[PATH_MAX + 9] = '\0';
	ck_assert_int_eq(fanpolicy_add(&p, big, PATH_MAX, HOME, FAN_ACTION_DENY, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "PATH_MAX"));
	ck_assert_ptr_nonnull(strstr(cause, "/bbbb")); /* named, if shortened */
	ck_assert_ptr_nonnull(strstr(cause, "..."));
	/* "~/" + PATH_MAX - 10 bytes fits as a pattern, not under a 20-byte home. */
	big[0] = '~';
	big[1] = '/';
	big[PATH_MAX - 10] = '\0';
	ck_assert_int_eq(fanpolicy_add(&p, big, strlen(big), "/home/a-long-username",
	    FAN_ACTION_DENY, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "expanded"));
	free(big);
	ck_assert_int_eq(fanpolicy_add(&p, "/x", 2, HOME, (enum fan_action)99, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "action"));
	ck_assert_uint_eq(p.fp_nrules, 0);
	fanpolicy_free(&p);
	free(cause);
}
END_TEST

START_TEST(test_home)
{
	struct fanpolicy p;
	char *cause = NULL;
	const char *bad_homes[] = { "home/u", "/home/u/", "/home//u", "/home/../u", "" };

	/* No home: "~/" patterns are skipped with a warning, others still parse. */
	fanpolicy_init(&p);
	ck_assert_int_eq(fanpolicy_add(&p, "~/.netrc", 8, NULL, FAN_ACTION_DENY, &cause), 0);
	ck_assert_int_eq(fanpolicy_add(&p, "/etc/x", 6, NULL, FAN_ACTION_DENY, &cause), 0);
	ck_assert_uint_eq(p.fp_nrules, 1);
	ck_assert_uint_eq(p.fp_warn.w_n, 1);
	ck_assert(warned(&p.fp_warn, "~/.netrc"));
	ck_assert(warned(&p.fp_warn, "HOME unset"));
	fanpolicy_free(&p);

	for (size_t i = 0; i < nitems(bad_homes); i++) {
		fanpolicy_init(&p);
		ck_assert_int_eq(fanpolicy_add(&p, "~/.aws/**", 9, bad_homes[i], FAN_ACTION_DENY,
		    &cause), 0);
		ck_assert_uint_eq(p.fp_nrules, 0);
		ck_assert_uint_eq(p.fp_warn.w_n, 1);
		ck_assert(warned(&p.fp_warn, "not an absolute canonical path"));
		fanpolicy_free(&p);
	}

	/* Built-ins: three deny prefixes below home. */
	fanpolicy_init(&p);
	ck_assert_int_eq(fanpolicy_add_builtins(&p, "/home/alice", &cause), 0);
	ck_assert_uint_eq(p.fp_nrules, 3);
	const char *roots[] = { "/home/alice/.ssh", "/home/alice/.aws",
		"/home/alice/.config/gcloud" };
	for (size_t i = 0; i < 3; i++) {
		ck_assert_str_eq(p.fp_rules[i].fr_path, roots[i]);
		ck_assert_str_eq(p.fp_rules[i].fr_pattern, fanpolicy_builtin_patterns[i]);
		ck_assert_int_eq(p.fp_rules[i].fr_kind, FAN_RULE_PREFIX);
		ck_assert_int_eq(p.fp_rules[i].fr_action, FAN_ACTION_DENY);
		ck_assert_int_eq(p.fp_rules[i].fr_builtin, 1);
	}
	ck_assert_ptr_null(fanpolicy_builtin_patterns[3]);
	/* Extras come on top with their own action. */
	ck_assert_int_eq(fanpolicy_add(&p, "/tmp/gensee-demo-secret/**", 26, "/home/alice",
	    FAN_ACTION_ASK, &cause), 0);
	ck_assert_int_eq(p.fp_rules[3].fr_action, FAN_ACTION_ASK);
	ck_assert_int_eq(p.fp_rules[3].fr_builtin, 0);
	fanpolicy_free(&p);

	/* Built-ins without a home: all skipped, each with a warning. */
	fanpolicy_init(&p);
	ck_assert_int_eq(fanpolicy_add_builtins(&p, NULL, &cause), 0);
	ck_assert_uint_eq(p.fp_nrules, 0);
	ck_assert_uint_eq(p.fp_warn.w_n, 3);
	ck_assert(warned(&p.fp_warn, "~/.config/gcloud/**"));
	fanpolicy_free(&p);
	free(cause);
}
END_TEST

START_TEST(test_match_kinds)
{
	struct fanpolicy p;
	char *cause = NULL;

	fanpolicy_init(&p);
	ck_assert_int_eq(fanpolicy_add_builtins(&p, HOME, &cause), 0);
	ck_assert_int_eq(add(&p, "/etc/app/token", FAN_ACTION_OBSERVE, &cause), 0);
	ck_assert_int_eq(add(&p, "/work/**/.env", FAN_ACTION_DENY, &cause), 0);
	ck_assert_int_eq(add(&p, "**/.env.*", FAN_ACTION_WARN, &cause), 0);
	ck_assert_int_eq(add(&p, "/data/**", FAN_ACTION_ASK, &cause), 0);

	/* Prefix: the root itself and everything below, nothing beside it. */
	ck_assert_str_eq(hit_of(&p, "/home/u/.ssh/id_ed25519"), "~/.ssh/**");
	ck_assert_str_eq(hit_of(&p, "/home/u/.ssh"), "~/.ssh/**");
	ck_assert_str_eq(hit_of(&p, "/home/u/.ssh/a/b/c/d"), "~/.ssh/**");
	ck_assert_str_eq(hit_of(&p, "/home/u/.config/gcloud/credentials.db"),
	    "~/.config/gcloud/**");
	ck_assert_str_eq(hit_of(&p, "/home/u/.aws/credentials"), "~/.aws/**");
	ck_assert_ptr_null(hit_of(&p, "/home/u/.sshx/id"));
	ck_assert_ptr_null(hit_of(&p, "/home/u/.ssh2"));
	ck_assert_ptr_null(hit_of(&p, "/home/u"));
	ck_assert_ptr_null(hit_of(&p, "/home/u/.config/gcloudy"));
	ck_assert_ptr_null(hit_of(&p, "/home/v/.ssh/id"));
	ck_assert_str_eq(hit_of(&p, "/data"), "/data/**");
	ck_assert_ptr_null(hit_of(&p, "/database"));

	/* Exact: only that path. */
	ck_assert_str_eq(hit_of(&p, "/etc/app/token"), "/etc/app/token");
	ck_assert_ptr_null(hit_of(&p, "/etc/app/token2"));
	ck_assert_ptr_null(hit_of(&p, "/etc/app"));
	ck_assert_ptr_null(hit_of(&p, "/etc/app/token/x"));

	/* Suffix with a root: the name at any depth below it, not the root itself. */
	ck_assert_str_eq(hit_of(&p, "/work/a/b/.env"), "/work/**/.env");
	ck_assert_str_eq(hit_of(&p, "/work/.env"), "/work/**/.env");
	ck_assert_str_eq(hit_of(&p, "/work/a/b/c/d/e/f/.env"), "/work/**/.env");
	ck_assert_ptr_null(hit_of(&p, "/work"));
	ck_assert_ptr_null(hit_of(&p, "/other/.env"));
	ck_assert_ptr_null(hit_of(&p, "/workx/.env"));
	ck_assert_ptr_null(hit_of(&p, "/work/a/.envrc"));
	ck_assert_ptr_null(hit_of(&p, "/work/a/x.env"));
	ck_assert_ptr_null(hit_of(&p, "/work/.env/ok.txt")); /* a directory named .env */

	/* ".env.local" is "** /.env.*", not "/work/ ** /.env"; ".env" is not ".env.*". */
	ck_assert_str_eq(hit_of(&p, "/work/a/b/.env.local"), "**/.env.*");
	ck_assert_str_eq(hit_of(&p, "/x/y/.env.production"), "**/.env.*");
	ck_assert_str_eq(hit_of(&p, "/.env.x"), "**/.env.*");
	ck_assert_ptr_null(hit_of(&p, "/x/.env"));
	ck_assert_str_eq(hit_of(&p, "/x/.env."), "**/.env.*"); /* the star matches nothing */
	fanpolicy_free(&p);
	free(cause);
}
END_TEST

START_TEST(test_match_invalid_paths)
{
	struct fanpolicy p;
	const struct fan_rule *hit = (const struct fan_rule *)1;
	char *cause = NULL;
	const char *bad[] = { "", "relative", "/a//b", "/a/../b", "/a/./b", "/a/", "//",
		"/home/u/.ssh/../../etc/passwd", "/.", "/.." };

	fanpolicy_init(&p);
	ck_assert_int_eq(add(&p, "/**", FAN_ACTION_DENY, &cause), 0);
	for (size_t i = 0; i < nitems(bad); i++) {
		hit = (const struct fan_rule *)1;
		ck_assert_msg(fanpolicy_match(&p, bad[i], &hit) == -1, "%s", bad[i]);
		ck_assert_ptr_null(hit);
	}
	ck_assert_int_eq(fanpolicy_match(&p, NULL, &hit), -1);
	ck_assert_str_eq(hit_of(&p, "/"), "/**");
	char *big = malloc(PATH_MAX + 1);
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', PATH_MAX);
	big[0] = '/';
	big[PATH_MAX] = '\0';
	ck_assert_int_eq(fanpolicy_match(&p, big, &hit), -1);
	big[PATH_MAX - 1] = '\0';
	ck_assert_str_eq(hit_of(&p, big), "/**");
	free(big);
	fanpolicy_free(&p);

	/* An empty policy matches nothing, and still refuses bad paths. */
	fanpolicy_init(&p);
	ck_assert_ptr_null(hit_of(&p, "/home/u/.ssh/id"));
	ck_assert_int_eq(fanpolicy_match(&p, "x", &hit), -1);
	fanpolicy_free(&p);
	free(cause);
}
END_TEST

START_TEST(test_precedence)
{
	struct fanpolicy p;
	const struct fan_rule *hit;
	char *cause = NULL;

	fanpolicy_init(&p);
	ck_assert_int_eq(add(&p, "**/c", FAN_ACTION_ASK, &cause), 0);		/* 0 */
	ck_assert_int_eq(add(&p, "/a/**", FAN_ACTION_DENY, &cause), 0);		/* 1 */
	ck_assert_int_eq(add(&p, "/a/b/**", FAN_ACTION_OBSERVE, &cause), 0);	/* 2 */
	ck_assert_int_eq(add(&p, "/a/b/c", FAN_ACTION_WARN, &cause), 0);	/* 3 */
	ck_assert_int_eq(add(&p, "/a/**", FAN_ACTION_OBSERVE, &cause), 0);	/* 4: duplicate */
	ck_assert_int_eq(add(&p, "/q/**/c", FAN_ACTION_SPECULATE, &cause), 0);	/* 5 */
	ck_assert_int_eq(add(&p, "/a/b/c", FAN_ACTION_DENY, &cause), 0);	/* 6: duplicate */

	/* Exact beats prefix and suffix; the first of equal exacts wins. */
	ck_assert_int_eq(fanpolicy_match(&p, "/a/b/c", &hit), 1);
	ck_assert_uint_eq(hit->fr_index, 3);
	ck_assert_int_eq(hit->fr_action, FAN_ACTION_WARN);
	/* The longer prefix root wins, whatever the order. */
	ck_assert_int_eq(fanpolicy_match(&p, "/a/b/d", &hit), 1);
	ck_assert_uint_eq(hit->fr_index, 2);
	/* Equal prefixes: the first. */
	ck_assert_int_eq(fanpolicy_match(&p, "/a/x", &hit), 1);
	ck_assert_uint_eq(hit->fr_index, 1);
	/* Prefix beats suffix even when the suffix rule came first. */
	ck_assert_int_eq(fanpolicy_match(&p, "/a/x/c", &hit), 1);
	ck_assert_uint_eq(hit->fr_index, 1);
	ck_assert_int_eq(fanpolicy_match(&p, "/a/b/x/c", &hit), 1);
	ck_assert_uint_eq(hit->fr_index, 2);
	/* Among suffixes the longer root wins. */
	ck_assert_int_eq(fanpolicy_match(&p, "/q/r/c", &hit), 1);
	ck_assert_uint_eq(hit->fr_index, 5);
	ck_assert_int_eq(fanpolicy_match(&p, "/z/c", &hit), 1);
	ck_assert_uint_eq(hit->fr_index, 0);
	ck_assert_int_eq(fanpolicy_match(&p, "/z/d", &hit), 0);
	fanpolicy_free(&p);
	free(cause);
}
END_TEST

START_TEST(test_decide_table)
{
	static const enum fan_posture postures[] = { FAN_POSTURE_MONITOR, FAN_POSTURE_WARN,
		FAN_POSTURE_ENFORCE, FAN_POSTURE_ISOLATE };
	static const enum fan_action actions[] = { FAN_ACTION_OBSERVE, FAN_ACTION_WARN,
		FAN_ACTION_ASK, FAN_ACTION_DENY, FAN_ACTION_SPECULATE };
	/* [posture][action] inside an operation: response, warning, reason. */
	static const struct {
		uint32_t response;
		int warning;
		const char *reason;
	} table[4][5] = {
		/* monitor: everything allowed and recorded */
		{ { FAN_ALLOW, 0, "monitor_posture" }, { FAN_ALLOW, 0, "monitor_posture" },
		    { FAN_ALLOW, 0, "monitor_posture" }, { FAN_ALLOW, 0, "monitor_posture" },
		    { FAN_ALLOW, 0, "monitor_posture" } },
		/* warn: deny-actions allowed, recorded as warnings */
		{ { FAN_ALLOW, 0, "observe_action" }, { FAN_ALLOW, 1, "warn_action" },
		    { FAN_ALLOW, 1, "warn_posture" }, { FAN_ALLOW, 1, "warn_posture" },
		    { FAN_ALLOW, 1, "warn_posture" } },
		/* enforce */
		{ { FAN_ALLOW, 0, "observe_action" }, { FAN_ALLOW, 1, "warn_action" },
		    { FAN_DENY, 0, "ask_unavailable" }, { FAN_DENY, 0, "deny_action" },
		    { FAN_DENY, 0, "speculation_unavailable" } },
		/* isolate */
		{ { FAN_ALLOW, 0, "observe_action" }, { FAN_ALLOW, 1, "warn_action" },
		    { FAN_DENY, 0, "ask_unavailable" }, { FAN_DENY, 0, "deny_action" },
		    { FAN_DENY, 0, "speculation_unavailable" } },
	};
	struct fan_decision d;
	int cells = 0;

	for (size_t i = 0; i < nitems(postures); i++) {
		for (size_t j = 0; j < nitems(actions); j++) {
			/* Outside every operation: allowed, not recorded. */
			memset(&d, 0xa5, sizeof(d));
			fanpolicy_decide(postures[i], actions[j], 0, &d);
			ck_assert_uint_eq(d.dc_response, FAN_ALLOW);
			ck_assert_int_eq(d.dc_record, 0);
			ck_assert_int_eq(d.dc_warning, 0);
			ck_assert_str_eq(d.dc_reason, "outside_operation");
			cells++;

			memset(&d, 0xa5, sizeof(d));
			fanpolicy_decide(postures[i], actions[j], 1, &d);
			ck_assert_msg(d.dc_response == table[i][j].response, "%s/%s: response %u",
			    fanpolicy_posture_name(postures[i]), fanpolicy_action_name(actions[j]),
			    d.dc_response);
			ck_assert_int_eq(d.dc_record, 1);
			ck_assert_msg(d.dc_warning == table[i][j].warning, "%s/%s: warning",
			    fanpolicy_posture_name(postures[i]), fanpolicy_action_name(actions[j]));
			ck_assert_str_eq(d.dc_reason, table[i][j].reason);
			cells++;
		}
	}
	ck_assert_int_eq(cells, 40);

	/* Values outside the enums fail closed inside an operation. */
	fanpolicy_decide((enum fan_posture)17, FAN_ACTION_OBSERVE, 1, &d);
	ck_assert_uint_eq(d.dc_response, FAN_DENY);
	ck_assert_str_eq(d.dc_reason, FANR_DECISION_ERROR);
	fanpolicy_decide(FAN_POSTURE_MONITOR, (enum fan_action)17, 1, &d);
	ck_assert_uint_eq(d.dc_response, FAN_DENY);
	fanpolicy_decide(FAN_POSTURE_WARN, (enum fan_action)17, 1, &d);
	ck_assert_uint_eq(d.dc_response, FAN_DENY);
	fanpolicy_decide(FAN_POSTURE_ENFORCE, (enum fan_action)17, 1, &d);
	ck_assert_uint_eq(d.dc_response, FAN_DENY);
	fanpolicy_decide((enum fan_posture)17, (enum fan_action)17, 0, &d);
	ck_assert_uint_eq(d.dc_response, FAN_ALLOW);
}
END_TEST

START_TEST(test_affects)
{
	struct fanpolicy p;
	char *cause = NULL;

	fanpolicy_init(&p);
	ck_assert_int_eq(fanpolicy_add_builtins(&p, HOME, &cause), 0);
	ck_assert_int_eq(add(&p, "/work/**/.env", FAN_ACTION_DENY, &cause), 0);
	ck_assert_int_eq(add(&p, "/etc/app/token", FAN_ACTION_DENY, &cause), 0);

	/* A file lands on a rule. */
	ck_assert_int_eq(fanpolicy_affects(&p, "/home/u/.ssh/moved", 0), 1);
	ck_assert_int_eq(fanpolicy_affects(&p, "/work/a/.env", 0), 1);
	ck_assert_int_eq(fanpolicy_affects(&p, "/etc/app/token", 0), 1);
	ck_assert_int_eq(fanpolicy_affects(&p, "/tmp/x", 0), 0);
	ck_assert_int_eq(fanpolicy_affects(&p, "/work/a/ok.txt", 0), 0);
	/* A directory: at, below or above a rule path. */
	ck_assert_int_eq(fanpolicy_affects(&p, "/home/u/.ssh/d", 1), 1);
	ck_assert_int_eq(fanpolicy_affects(&p, "/home/u/.ssh", 1), 1);
	ck_assert_int_eq(fanpolicy_affects(&p, "/home/u", 1), 1);
	ck_assert_int_eq(fanpolicy_affects(&p, "/home", 1), 1);
	ck_assert_int_eq(fanpolicy_affects(&p, "/work/a/b", 1), 1); /* may hold a .env */
	ck_assert_int_eq(fanpolicy_affects(&p, "/etc/app", 1), 1);
	ck_assert_int_eq(fanpolicy_affects(&p, "/tmp/d", 1), 0);
	ck_assert_int_eq(fanpolicy_affects(&p, "/home/v", 1), 0);
	/* What cannot be judged counts. */
	ck_assert_int_eq(fanpolicy_affects(&p, "/tmp//x", 0), 1);
	ck_assert_int_eq(fanpolicy_affects(&p, "x", 1), 1);
	/* A suffix rule below "/": every directory may hold a match. */
	ck_assert_int_eq(add(&p, "**/.env.*", FAN_ACTION_DENY, &cause), 0);
	ck_assert_int_eq(fanpolicy_affects(&p, "/tmp/d", 1), 1);
	ck_assert_int_eq(fanpolicy_affects(&p, "/tmp/x", 0), 0);
	fanpolicy_free(&p);
	free(cause);
}
END_TEST

START_TEST(test_resolve)
{
	const char *t = unit_tmpdir("/tmp");
	char real[PATH_MAX], pat[PATH_MAX + 32], path[PATH_MAX + 64], *rt, *cause = NULL;
	const struct fan_rule *hit;
	struct fanpolicy p;

	/* t/link -> t/real (relative), t/real/.ssh exists. */
	rt = realpath(t, NULL);
	ck_assert_ptr_nonnull(rt);
	snprintf(real, sizeof(real), "%s/real", rt);
	ck_assert_int_eq(mkdir(real, 0700), 0);
	snprintf(path, sizeof(path), "%s/.ssh", real);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/link", rt);
	ck_assert_int_eq(symlink("real", path), 0);

	fanpolicy_init(&p);
	snprintf(pat, sizeof(pat), "%s/link/.ssh/**", rt);
	ck_assert_int_eq(fanpolicy_add(&p, pat, strlen(pat), NULL, FAN_ACTION_DENY, &cause), 0);
	snprintf(pat, sizeof(pat), "%s/link/missing/deeper/**", rt);
	ck_assert_int_eq(fanpolicy_add(&p, pat, strlen(pat), NULL, FAN_ACTION_DENY, &cause), 0);
	snprintf(pat, sizeof(pat), "%s/real/plain", rt);
	ck_assert_int_eq(fanpolicy_add(&p, pat, strlen(pat), NULL, FAN_ACTION_DENY, &cause), 0);
	snprintf(pat, sizeof(pat), "/nonexistent-gensee/x/**");
	ck_assert_int_eq(fanpolicy_add(&p, pat, strlen(pat), NULL, FAN_ACTION_DENY, &cause), 0);
	ck_assert_msg(fanpolicy_resolve(&p, &cause) == 0, "%s", cause);

	snprintf(path, sizeof(path), "%s/.ssh", real);
	ck_assert_ptr_nonnull(p.fp_rules[0].fr_real);
	ck_assert_str_eq(p.fp_rules[0].fr_real, path);
	ck_assert_uint_eq(p.fp_rules[0].fr_reallen, strlen(path));
	snprintf(path, sizeof(path), "%s/missing/deeper", real);
	ck_assert_ptr_nonnull(p.fp_rules[1].fr_real);
	ck_assert_str_eq(p.fp_rules[1].fr_real, path);
	ck_assert_ptr_null(p.fp_rules[2].fr_real); /* no symlink on the way */
	ck_assert_ptr_null(p.fp_rules[3].fr_real);
	ck_assert(warned(&p.fp_warn, "through a symlink"));

	/* Both forms match. */
	snprintf(path, sizeof(path), "%s/.ssh/id_ed25519", real);
	ck_assert_int_eq(fanpolicy_match(&p, path, &hit), 1);
	ck_assert_uint_eq(hit->fr_index, 0);
	snprintf(path, sizeof(path), "%s/link/.ssh/id_ed25519", rt);
	ck_assert_int_eq(fanpolicy_match(&p, path, &hit), 1);
	ck_assert_uint_eq(hit->fr_index, 0);
	snprintf(path, sizeof(path), "%s/missing/deeper/x", real);
	ck_assert_int_eq(fanpolicy_match(&p, path, &hit), 1);
	ck_assert_uint_eq(hit->fr_index, 1);
	/* Resolving again is idempotent. */
	ck_assert_int_eq(fanpolicy_resolve(&p, &cause), 0);
	snprintf(path, sizeof(path), "%s/.ssh", real);
	ck_assert_str_eq(p.fp_rules[0].fr_real, path);
	fanpolicy_free(&p);
	free(rt);
	free(cause);
}
END_TEST

/* Count the plan's marks of one kind. */
static size_t
count_kind(const struct fan_plan *pl, enum fan_mark_kind k)
{
	size_t n = 0;
	for (size_t i = 0; i < pl->pl_nmarks; i++)
		n += pl->pl_marks[i].fm_kind == k;
	return n;
}

START_TEST(test_plan)
{
	const char *t1 = unit_tmpdir("/tmp"), *t2 = unit_tmpdir("/dev/shm");
	char pat[PATH_MAX + 64], path[PATH_MAX + 64], *r1, *r2, *cause = NULL;
	struct fanpolicy p;
	struct fan_plan pl;
	struct stat s1, s2, sroot, sproc;
	dev_t devs[4] = { 0 };
	size_t ndev = 0;

	r1 = realpath(t1, NULL);
	r2 = realpath(t2, NULL);
	ck_assert_ptr_nonnull(r1);
	ck_assert_ptr_nonnull(r2);
	snprintf(path, sizeof(path), "%s/a", r1);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/b", r1);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/c", r2);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	int dfd = open(r1, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dfd, 0);
	unit_write_file(dfd, "f.txt", "x", 1);
	close(dfd);

	fanpolicy_init(&p);
	const char *pats[] = { "/a/**", "/b/**", "/missing/**", "/f.txt", "/nofile", "/nodir/x",
		"/a/**/.env", "/a" };
	for (size_t i = 0; i < nitems(pats); i++) {
		snprintf(pat, sizeof(pat), "%s%s", r1, pats[i]);
		ck_assert_msg(fanpolicy_add(&p, pat, strlen(pat), NULL, FAN_ACTION_DENY,
		    &cause) == 0, "%s", cause);
	}
	snprintf(pat, sizeof(pat), "%s/c/**", r2);
	ck_assert_int_eq(fanpolicy_add(&p, pat, strlen(pat), NULL, FAN_ACTION_DENY, &cause), 0);
	ck_assert_int_eq(fanpolicy_add(&p, "**/.env", 7, NULL, FAN_ACTION_DENY, &cause), 0);
	ck_assert_int_eq(fanpolicy_add(&p, "/proc/sys/**", 12, NULL, FAN_ACTION_DENY, &cause), 0);
	ck_assert_int_eq(fanpolicy_add(&p, "~/.ssh/**", 9, NULL, FAN_ACTION_DENY, &cause), 0);
	ck_assert_int_eq(fanpolicy_resolve(&p, &cause), 0);
	ck_assert_msg(fanpolicy_plan(&p, &pl, &cause) == 0, "%s", cause);
	ck_assert_ptr_eq(pl.pl_policy, &p);

	/* One filesystem mark per device: the temp trees, "/" and /proc. */
	ck_assert_int_eq(stat(r1, &s1), 0);
	ck_assert_int_eq(stat(r2, &s2), 0);
	ck_assert_int_eq(stat("/", &sroot), 0);
	ck_assert_int_eq(stat("/proc/sys", &sproc), 0);
	dev_t cand[] = { s1.st_dev, s2.st_dev, sroot.st_dev, sproc.st_dev };
	for (size_t i = 0; i < nitems(cand); i++) {
		int seen = 0;
		for (size_t j = 0; j < ndev; j++)
			seen |= devs[j] == cand[i];
		if (!seen)
			devs[ndev++] = cand[i];
	}
	ck_assert_uint_eq(count_kind(&pl, FAN_PLAN_FILESYSTEM), ndev);
	for (size_t i = 0; i < pl.pl_nmarks; i++) {
		const struct fan_mark *m = &pl.pl_marks[i];
		ck_assert_ptr_nonnull(m->fm_path);
		ck_assert_msg(m->fm_mnt_id != 0, "%s: no mount id", m->fm_path);
		ck_assert_uint_lt(m->fm_rule, p.fp_nrules);
		for (size_t j = 0; j < i; j++)
			ck_assert_msg(!(m->fm_kind == FAN_PLAN_FILESYSTEM &&
			    pl.pl_marks[j].fm_kind == FAN_PLAN_FILESYSTEM &&
			    pl.pl_marks[j].fm_dev == m->fm_dev), "device marked twice: %s, %s",
			    pl.pl_marks[j].fm_path, m->fm_path);
	}
	/* f.txt: an inode mark; f.txt, nofile: one directory mark (deduplicated). */
	ck_assert_uint_eq(count_kind(&pl, FAN_PLAN_INODE), 1);
	ck_assert_uint_eq(count_kind(&pl, FAN_PLAN_CHILDREN), 1);
	for (size_t i = 0; i < pl.pl_nmarks; i++) {
		const struct fan_mark *m = &pl.pl_marks[i];
		if (m->fm_kind == FAN_PLAN_INODE) {
			snprintf(path, sizeof(path), "%s/f.txt", r1);
			ck_assert_str_eq(m->fm_path, path);
			struct stat sf;
			ck_assert_int_eq(stat(path, &sf), 0);
			ck_assert_uint_eq(m->fm_ino, sf.st_ino);
			ck_assert_uint_eq(m->fm_dev, sf.st_dev);
		}
		if (m->fm_kind == FAN_PLAN_CHILDREN) {
			ck_assert_str_eq(m->fm_path, r1);
			ck_assert_uint_eq(m->fm_ino, s1.st_ino);
		}
		if (m->fm_kind == FAN_PLAN_FILESYSTEM && m->fm_dev == s2.st_dev &&
		    s2.st_dev != sroot.st_dev) {
			snprintf(path, sizeof(path), "%s/c", r2);
			ck_assert_str_eq(m->fm_path, path);
		}
	}
	/* Warnings: the missing root, the missing directory, the home, submounts, /proc. */
	snprintf(path, sizeof(path), "root %s/missing is missing", r1);
	ck_assert_msg(warned(&pl.pl_warn, path), "no warning for %s", path);
	snprintf(path, sizeof(path), "directory %s/nodir does not exist", r1);
	ck_assert(warned(&pl.pl_warn, path));
	ck_assert(warned(&pl.pl_warn, "\"~/.ssh/**\" skipped"));
	ck_assert(warned(&pl.pl_warn, "is a directory"));	/* the exact rule on t1/a */
	ck_assert(warned(&pl.pl_warn, "mounted below / are not covered"));
	ck_assert(warned(&pl.pl_warn, "pseudo filesystem"));
	ck_assert_uint_eq(pl.pl_warn.w_dropped, 0);
	fanpolicy_plan_free(&pl);
	ck_assert_ptr_null(pl.pl_marks);
	fanpolicy_free(&p);

	/* An empty policy plans nothing. */
	fanpolicy_init(&p);
	ck_assert_int_eq(fanpolicy_plan(&p, &pl, &cause), 0);
	ck_assert_uint_eq(pl.pl_nmarks, 0);
	fanpolicy_plan_free(&pl);
	fanpolicy_free(&p);
	free(r1);
	free(r2);
	free(cause);
}
END_TEST

/* How many INODE marks the plan of one deny rule (and a workspace, or NULL) has. */
static size_t
inodes_planned(const char *pattern, const char *workspace)
{
	struct fanpolicy p;
	struct fan_plan pl;
	char *cause = NULL;
	size_t n;

	fanpolicy_init(&p);
	ck_assert_int_eq(fanpolicy_add(&p, pattern, strlen(pattern), NULL, FAN_ACTION_DENY,
	    &cause), 0);
	if (workspace != NULL)
		ck_assert_int_eq(fanpolicy_add_workspace(&p, workspace, &cause), 0);
	ck_assert_int_eq(fanpolicy_resolve(&p, &cause), 0);
	ck_assert_int_eq(fanpolicy_plan(&p, &pl, &cause), 0);
	n = count_kind(&pl, FAN_PLAN_INODE);
	fanpolicy_plan_free(&pl);
	fanpolicy_free(&p);
	return n;
}

/* The files below a prefix root get inode marks: links and symlinks once, the rest bounded. */
START_TEST(test_plan_prefix_files)
{
	const char *t = unit_tmpdir("/tmp");
	char pat[PATH_MAX + 64], path[PATH_MAX + 64], *root, *cause = NULL;
	struct fanpolicy p;
	struct fan_plan pl;
	int dfd;

	root = realpath(t, NULL);
	ck_assert_ptr_nonnull(root);
	snprintf(path, sizeof(path), "%s/keys", root);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/keys/sub", root);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/keys", root);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dfd, 0);
	unit_write_file(dfd, "a", "a", 1);
	unit_write_file(dfd, "sub/b", "b", 1);
	unit_write_file(dfd, "c", "c", 1);
	ck_assert_int_eq(linkat(dfd, "c", dfd, "sub/c2", 0), 0);	/* one inode, two names */
	ck_assert_int_eq(symlinkat("/etc/hostname", dfd, "l"), 0);	/* never its target */
	close(dfd);

	fanpolicy_init(&p);
	snprintf(pat, sizeof(pat), "%s/keys/**", root);
	ck_assert_int_eq(fanpolicy_add(&p, pat, strlen(pat), NULL, FAN_ACTION_DENY, &cause), 0);
	ck_assert_int_eq(fanpolicy_resolve(&p, &cause), 0);
	ck_assert_msg(fanpolicy_plan(&p, &pl, &cause) == 0, "%s", cause);
	ck_assert_uint_eq(count_kind(&pl, FAN_PLAN_FILESYSTEM), 1);
	ck_assert_uint_eq(count_kind(&pl, FAN_PLAN_INODE), 3);
	for (size_t i = 0; i < pl.pl_nmarks; i++) {
		const struct fan_mark *m = &pl.pl_marks[i];
		struct stat st;
		if (m->fm_kind != FAN_PLAN_INODE)
			continue;
		ck_assert_int_eq(lstat(m->fm_path, &st), 0);
		ck_assert_msg(S_ISREG(st.st_mode), "%s is not a regular file", m->fm_path);
		ck_assert_uint_eq(m->fm_ino, st.st_ino);
		ck_assert_uint_eq(m->fm_rule, 0);
	}
	ck_assert(!warned(&pl.pl_warn, "matched by path only"));
	fanpolicy_plan_free(&pl);
	fanpolicy_free(&p);

	/* Past the bound: that many marks, and a warning naming the root. */
	snprintf(path, sizeof(path), "%s/many", root);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dfd, 0);
	for (unsigned int i = 0; i < FANPOLICY_PREFIX_INODES_MAX + 8; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%u", i);
		unit_write_file(dfd, name, "x", 1);
	}
	close(dfd);
	fanpolicy_init(&p);
	snprintf(pat, sizeof(pat), "%s/many/**", root);
	ck_assert_int_eq(fanpolicy_add(&p, pat, strlen(pat), NULL, FAN_ACTION_DENY, &cause), 0);
	ck_assert_int_eq(fanpolicy_resolve(&p, &cause), 0);
	ck_assert_int_eq(fanpolicy_plan(&p, &pl, &cause), 0);
	ck_assert_uint_eq(count_kind(&pl, FAN_PLAN_INODE), FANPOLICY_PREFIX_INODES_MAX);
	snprintf(path, sizeof(path), "more than %u files below %s/many", FANPOLICY_PREFIX_INODES_MAX,
	    root);
	ck_assert_msg(warned(&pl.pl_warn, path), "no warning: %s", path);
	fanpolicy_plan_free(&pl);
	fanpolicy_free(&p);

	/* A pseudo filesystem is not walked: /proc/sys holds thousands of files. */
	ck_assert_uint_eq(inodes_planned("/proc/sys/**", NULL), 0);
	free(root);
	free(cause);
}
END_TEST

/* Is there an INODE mark of path (for rule)? */
static int
inode_marked(const struct fan_plan *pl, const char *path, size_t rule)
{
	for (size_t i = 0; i < pl->pl_nmarks; i++)
		if (pl->pl_marks[i].fm_kind == FAN_PLAN_INODE &&
		    strcmp(pl->pl_marks[i].fm_path, path) == 0 && pl->pl_marks[i].fm_rule == rule)
			return 1;
	return 0;
}

/*
 * Suffix rules: the files they match below a workspace ("**" + "/.env" has
 * root "/", too big to walk) and below a rule's own root get inode marks;
 * other files, .git directories and workspaces outside every root do not.
 */
START_TEST(test_plan_suffix_files)
{
	const char *t = unit_tmpdir("/tmp");
	char pat[PATH_MAX + 64], path[PATH_MAX + 64], *root, *cause = NULL;
	struct fanpolicy p;
	struct fan_plan pl;
	int dfd;

	root = realpath(t, NULL);
	ck_assert_ptr_nonnull(root);
	static const char *const dirs[] = { "ws", "ws/a", "ws/a/b", "ws/.git", "ws/.git/x",
		"proj", "proj/sub", "elsewhere" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", root, dirs[i]);
		ck_assert_int_eq(mkdir(path, 0700), 0);
	}
	dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dfd, 0);
	unit_write_file(dfd, "ws/.env", "T=1", 3);
	unit_write_file(dfd, "ws/a/b/.env.local", "T=2", 3);
	unit_write_file(dfd, "ws/a/b/notes.txt", "n", 1);
	unit_write_file(dfd, "ws/.git/x/.env", "g", 1);
	unit_write_file(dfd, "proj/sub/.env.prod", "T=3", 3);
	unit_write_file(dfd, "proj/sub/.env", "T=4", 3);
	unit_write_file(dfd, "elsewhere/.env.x", "T=5", 3);
	close(dfd);

	fanpolicy_init(&p);
	ck_assert_int_eq(fanpolicy_add(&p, "**/.env", 7, NULL, FAN_ACTION_DENY, &cause), 0);
	ck_assert_int_eq(fanpolicy_add(&p, "**/.env.*", 9, NULL, FAN_ACTION_WARN, &cause), 0);
	snprintf(pat, sizeof(pat), "%s/proj/**/.env.prod", root);
	ck_assert_int_eq(fanpolicy_add(&p, pat, strlen(pat), NULL, FAN_ACTION_ASK, &cause), 0);
	snprintf(path, sizeof(path), "%s/ws", root);
	ck_assert_int_eq(fanpolicy_add_workspace(&p, path, &cause), 0);
	ck_assert_int_eq(fanpolicy_add_workspace(&p, path, &cause), 0);	/* once */
	ck_assert_uint_eq(p.fp_nworkspaces, 1);
	ck_assert_int_ne(fanpolicy_add_workspace(&p, "relative/ws", &cause), 0);
	free(cause);
	cause = NULL;
	ck_assert_int_ne(fanpolicy_add_workspace(&p, "/tmp/../etc", &cause), 0);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(fanpolicy_resolve(&p, &cause), 0);
	ck_assert_msg(fanpolicy_plan(&p, &pl, &cause) == 0, "%s", cause);

	snprintf(path, sizeof(path), "%s/ws/.env", root);
	ck_assert_msg(inode_marked(&pl, path, 0), "%s not marked", path);
	snprintf(path, sizeof(path), "%s/ws/a/b/.env.local", root);
	ck_assert_msg(inode_marked(&pl, path, 1), "%s not marked", path);
	/* The rule with its own root: walked, and matched by the rule that wins there. */
	snprintf(path, sizeof(path), "%s/proj/sub/.env.prod", root);
	ck_assert_msg(inode_marked(&pl, path, 2), "%s not marked", path);
	/* Below that root only the files some rule matches: .env is one (rule 0). */
	snprintf(path, sizeof(path), "%s/proj/sub/.env", root);
	ck_assert_msg(inode_marked(&pl, path, 0), "%s not marked", path);
	/* What no rule names, .git, and what is outside every workspace and root. */
	ck_assert_uint_eq(count_kind(&pl, FAN_PLAN_INODE), 4);
	fanpolicy_plan_free(&pl);
	fanpolicy_free(&p);

	/* Without a workspace, nothing below a "/" root is walked. */
	ck_assert_uint_eq(inodes_planned("**/.env", NULL), 0);

	/* A workspace outside the only suffix rule's root: not walked. */
	snprintf(pat, sizeof(pat), "%s/proj/**/.env.prod", root);
	snprintf(path, sizeof(path), "%s/elsewhere", root);
	ck_assert_uint_eq(inodes_planned(pat, path), 1);	/* proj/sub/.env.prod */
	free(root);
}
END_TEST

START_TEST(test_mnt_id)
{
	uint64_t a = 0, b = 0, c = 0;
	int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fanpolicy_mnt_id(AT_FDCWD, "/", 0, &a), 0);
	ck_assert_int_eq(fanpolicy_mnt_id(fd, "", AT_EMPTY_PATH, &b), 0);
	ck_assert_uint_eq(a, b);
	ck_assert_int_eq(fanpolicy_mnt_id(AT_FDCWD, "/proc", 0, &c), 0);
	ck_assert_uint_ne(a, c);
	ck_assert_int_eq(fanpolicy_mnt_id(AT_FDCWD, "/nonexistent-gensee", 0, &c), -1);
	close(fd);
}
END_TEST

/* A non-root user's rules stay under their home and workspace; "/" is never theirs. */
START_TEST(test_check_scope)
{
	char home[] = HOME, ws[] = "/srv/work/proj";
	char *scopes[] = { home, ws }, *cause = NULL;
	static const struct {
		const char *pat;
		int ok;
		const char *why;
	} cases[] = {
		{ "~/.ssh/**", 1, NULL },
		{ "~/**", 1, NULL },
		{ "/home/u/notes.txt", 1, NULL },
		{ "/srv/work/proj/**/.env", 1, NULL },
		{ "/home/u/**/.env", 1, NULL },
		{ "/**", 0, "whole filesystem" },
		{ "**/.env", 0, "whole filesystem" },
		{ "/**/.env", 0, "whole filesystem" },
		{ "/etc/**", 0, "outside" },
		{ "/home/uu/**", 0, "outside" },
		{ "/srv/work/**", 0, "outside" },
		{ "/etc/shadow", 0, "outside" },
	};

	ck_assert(fanpolicy_within("/home/u", "/home/u"));
	ck_assert(fanpolicy_within("/home/u/x", "/home/u"));
	ck_assert(!fanpolicy_within("/home/uu", "/home/u"));
	ck_assert(!fanpolicy_within("/home", "/home/u"));
	ck_assert(fanpolicy_within("/anything", "/"));
	for (size_t i = 0; i < nitems(cases); i++) {
		struct fanpolicy p;
		fanpolicy_init(&p);
		ck_assert_int_eq(add(&p, cases[i].pat, FAN_ACTION_DENY, &cause), 0);
		int r = fanpolicy_check_scope(&p, scopes, nitems(scopes), &cause);
		ck_assert_msg(r == (cases[i].ok ? 0 : -1), "%s: %d", cases[i].pat, r);
		if (!cases[i].ok) {
			ck_assert_msg(cause != NULL && strstr(cause, cases[i].why) != NULL &&
			    strstr(cause, cases[i].pat) != NULL, "%s: %s", cases[i].pat, cause);
			free(cause);
			cause = NULL;
		}
		fanpolicy_free(&p);
	}
	/* No scope at all: nothing is the caller's. */
	struct fanpolicy p;
	fanpolicy_init(&p);
	ck_assert_int_eq(add(&p, "~/.ssh/**", FAN_ACTION_DENY, &cause), 0);
	ck_assert_int_eq(fanpolicy_check_scope(&p, scopes, 0, &cause), -1);
	free(cause);
	fanpolicy_free(&p);
}
END_TEST

static Suite *
fanpolicy_suite(void)
{
	Suite *s = suite_create("fanpolicy");
	TCase *tc = tcase_create("logic");
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_parse_valid);
	tcase_add_test(tc, test_parse_invalid);
	tcase_add_test(tc, test_home);
	tcase_add_test(tc, test_match_kinds);
	tcase_add_test(tc, test_match_invalid_paths);
	tcase_add_test(tc, test_precedence);
	tcase_add_test(tc, test_decide_table);
	tcase_add_test(tc, test_affects);
	tcase_add_test(tc, test_check_scope);
	suite_add_tcase(s, tc);
	tc = tcase_create("filesystem");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_resolve);
	tcase_add_test(tc, test_plan);
	tcase_add_test(tc, test_plan_prefix_files);
	tcase_add_test(tc, test_plan_suffix_files);
	tcase_add_test(tc, test_mnt_id);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(fanpolicy_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
