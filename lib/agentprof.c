/*
 * agentprof.c: the built-in agent profiles and how a command is matched
 * to one (agentprof.h).
 *
 * Threat: the agent is the adversary of its own configuration. Codex's
 * config.toml and hooks, Claude Code's settings.json (hooks live there)
 * and CLAUDE.md, Gemini CLI's settings.json and GEMINI.md are read by the
 * user's next run, with or without Gensee. Inside a run the agent sees
 * them read-only; whatever else it writes under its state directories
 * lands in Gensee's store for it, never in the real directory, and
 * configuration it created there is removed before the next run reads
 * it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "agentprof.h"
#include "dnspolicy.h"
#include "snapshot.h"
#include "util.h"

struct agentprof_builtin {
	const char *ab_name;
	const char *ab_package;		/* its npm package directory, as a path segment */
	const char *ab_bins[3];		/* executable names */
	/*
	 * The variables that move its state, in order: the directory is the
	 * value followed by the suffix. Else ab_state_default under $HOME.
	 */
	struct { const char *v_name, *v_suffix; } ab_state_env[2];
	const char *ab_state_default;
	/* Arguments after the executable (or node's script): documented settings only. */
	const char *ab_args[4];
	/*
	 * A file the agent keeps in $HOME unless ab_pin_env names its state
	 * directory (Claude Code's ~/.claude.json): the profile sets the
	 * variable, and the file's first copy is seeded into the store.
	 */
	const char *ab_pin_env;
	const char *ab_home_file;
	const char *ab_config[AGENTPROF_MAX_CONFIG];
	/*
	 * What the agent itself rewrites each run but must not keep: writable
	 * in the run, removed from the store before and after it (Codex
	 * unpacks its bundled skills, Claude Code its plugin cache; a planted
	 * skill or plugin would be instructions or hooks for a later run).
	 */
	const char *ab_volatile[AGENTPROF_MAX_CONFIG];
	const char *ab_hosts[AGENTPROF_MAX_HOSTS];
	const char *ab_env[AGENTPROF_MAX_ENV];
};

static const struct agentprof_builtin agentprof_builtins[] = {
	{ .ab_name = "codex", .ab_package = "/@openai/codex/", .ab_bins = { "codex", "codex.js" },
	  .ab_state_env = { { "CODEX_HOME", "" } }, .ab_state_default = ".codex",
	  .ab_config = { "config.toml", "AGENTS.md", "AGENTS.override.md", "hooks", "hooks.json",
		"rules", "prompts" },
	  .ab_volatile = { "skills" },
	  .ab_hosts = { "api.openai.com,tcp,443" },
	  /*
	   * Gensee is its sandbox: Codex's own (bubblewrap) needs namespaces
	   * the seccomp profile refuses, and every tool call failed. A
	   * --sandbox or -s the user gives still wins over -c.
	   */
	  .ab_args = { "-c", "sandbox_mode=\"danger-full-access\"" } },
	{ .ab_name = "claude", .ab_package = "/@anthropic-ai/claude-code/",
	  .ab_bins = { "claude" },
	  .ab_state_env = { { "CLAUDE_CONFIG_DIR", "" } }, .ab_state_default = ".claude",
	  .ab_config = { "settings.json", "settings.local.json", "CLAUDE.md", "hooks", "commands",
		"agents", "output-styles", "skills" },
	  .ab_volatile = { "plugins" },
	  .ab_hosts = { "api.anthropic.com,tcp,443" },
	  /*
	   * An update would rewrite the installation from inside the run;
	   * IS_SANDBOX tells Claude Code it runs in one (its own sandbox,
	   * bubblewrap, is off unless settings turn it on, and cannot nest).
	   */
	  .ab_env = { "DISABLE_AUTOUPDATER=1", "IS_SANDBOX=1" },
	  .ab_pin_env = "CLAUDE_CONFIG_DIR", .ab_home_file = ".claude.json" },
	{ .ab_name = "gemini", .ab_package = "/@google/gemini-cli/", .ab_bins = { "gemini" },
	  /* Gemini CLI reads GEMINI_CLI_HOME (a home: .gemini inside); Antigravity GEMINI_HOME. */
	  .ab_state_env = { { "GEMINI_CLI_HOME", "/.gemini" }, { "GEMINI_HOME", "" } },
	  .ab_state_default = ".gemini",
	  .ab_config = { "settings.json", "GEMINI.md", "extensions", "commands", "policies",
		"hooks" },
	  .ab_hosts = { "generativelanguage.googleapis.com,tcp,443" },
	  /* Its own sandbox is a container (docker, podman): it cannot nest either. */
	  .ab_env = { "GEMINI_SANDBOX=false" } },
};

static const char *const agentprof_name_list[] = { "codex", "claude", "gemini", NULL };

const char *const *
agentprof_names(void)
{
	return agentprof_name_list;
}

static const struct agentprof_builtin *
agentprof_find(const char *name)
{
	for (size_t i = 0; i < nitems(agentprof_builtins); i++)
		if (strcmp(agentprof_builtins[i].ab_name, name) == 0)
			return &agentprof_builtins[i];
	return NULL;
}

static const char *
agentprof_base(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* The executable cmd would run, through $PATH, with symlinks followed; 0 or -1. */
static int
agentprof_which(const char *cmd, char *out)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (strchr(cmd, '/') != NULL)
		return realpath(cmd, out) != NULL ? 0 : -1;
	for (const char *p = path ? path : "/usr/bin:/bin"; *p != '\0';) {
		size_t n = strcspn(p, ":");
		if (n > 0 && (size_t)snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, cmd) <
		    sizeof(buf) && access(buf, X_OK) == 0 && realpath(buf, out) != NULL)
			return 0;
		p += n + (p[n] == ':');
	}
	return -1;
}

/* Which built-in the executable (as given, and resolved) is; NULL for none. */
static const struct agentprof_builtin *
agentprof_match(const char *given, const char *resolved)
{
	for (size_t i = 0; i < nitems(agentprof_builtins); i++) {
		const struct agentprof_builtin *b = &agentprof_builtins[i];
		if (resolved != NULL && strstr(resolved, b->ab_package) != NULL)
			return b;
		for (size_t k = 0; k < nitems(b->ab_bins) && b->ab_bins[k] != NULL; k++)
			if (strcmp(agentprof_base(given), b->ab_bins[k]) == 0 ||
			    (resolved != NULL && strcmp(agentprof_base(resolved), b->ab_bins[k]) == 0))
				return b;
	}
	return NULL;
}

/* The custom profile (linux.agents.custom) of name, or NULL. */
static struct json_object *
agentprof_custom_find(struct json_object *custom, const char *name)
{
	for (size_t i = 0; custom != NULL && i < json_object_array_length(custom); i++) {
		struct json_object *c = json_object_array_get_idx(custom, i), *n;
		if (json_object_object_get_ex(c, "name", &n) &&
		    strcmp(json_object_get_string(n), name) == 0)
			return c;
	}
	return NULL;
}

/* Which custom profile lists the executable (as given, or resolved) among its executables. */
static const char *
agentprof_custom_match(struct json_object *custom, const char *given, const char *resolved)
{
	for (size_t i = 0; custom != NULL && i < json_object_array_length(custom); i++) {
		struct json_object *c = json_object_array_get_idx(custom, i), *n, *x;
		if (!json_object_object_get_ex(c, "name", &n) ||
		    !json_object_object_get_ex(c, "executables", &x))
			continue;
		for (size_t k = 0; k < json_object_array_length(x); k++) {
			const char *e = json_object_get_string(json_object_array_get_idx(x, k));
			if (strcmp(agentprof_base(given), e) == 0 ||
			    (resolved != NULL && strcmp(agentprof_base(resolved), e) == 0))
				return json_object_get_string(n);
		}
	}
	return NULL;
}

/* The profile of an executable: a custom one first (it may override a built-in's match). */
static const char *
agentprof_which_profile(struct json_object *custom, const char *given, const char *resolved)
{
	const struct agentprof_builtin *b;
	const char *c = agentprof_custom_match(custom, given, resolved);

	if (c != NULL)
		return c;
	b = agentprof_match(given, resolved);
	return b != NULL ? b->ab_name : NULL;
}

int
agentprof_detect(char *const *cmd, const char *forced, struct json_object *custom, char *name,
    int *argi, char *how, size_t howlen, char **cause)
{
	const char *found = NULL;
	char exe[PATH_MAX], script[PATH_MAX];
	int have = 0;

	name[0] = '\0';
	*argi = -1;
	if (forced != NULL) {
		if (strcmp(forced, "none") == 0)
			return 0;
		if (agentprof_find(forced) == NULL && agentprof_custom_find(custom, forced) == NULL) {
			util_cause(cause, "--agent %s: no such profile (codex, claude, gemini, a "
			    "linux.agents.custom name, or none)", forced);
			return -1;
		}
		snprintf(how, howlen, "--agent %s", forced);
		util_strlcpy(name, forced, AGENTPROF_NAME_MAX + 1);
		return 1;
	}
	if (cmd == NULL || cmd[0] == NULL)
		return 0;
	have = agentprof_which(cmd[0], exe) == 0;
	found = agentprof_which_profile(custom, cmd[0], have ? exe : NULL);
	if (found != NULL) {
		snprintf(how, howlen, "executable %s%s%s", cmd[0], have ? " -> " : "",
		    have ? exe : "");
		*argi = 0;
	} else if (have && (strcmp(agentprof_base(exe), "node") == 0 ||
	    strcmp(agentprof_base(exe), "nodejs") == 0)) {
		/* node [OPTIONS] SCRIPT: the script is the agent. */
		size_t i = 1;
		while (cmd[i] != NULL && cmd[i][0] == '-')
			i++;
		if (cmd[i] != NULL && realpath(cmd[i], script) != NULL &&
		    (found = agentprof_which_profile(custom, cmd[i], script)) != NULL) {
			snprintf(how, howlen, "node script %s -> %s", cmd[i], script);
			*argi = (int)i;
		}
	}
	if (found == NULL)
		return 0;
	util_strlcpy(name, found, AGENTPROF_NAME_MAX + 1);
	return 1;
}

/*
 * linux.agents.custom: each item a profile object, checked here so that
 * one code path decides what a profile means (the policy's validation
 * calls it too). A string list member: at most max items, each passing ok.
 */
static int
custom_list(struct json_object *v, const char *where, const char *key, size_t max,
    const char *(*problem)(const char *), char **cause)
{
	if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) > max) {
		util_cause(cause, "%s.%s: expected a list of at most %zu strings", where, key, max);
		return -1;
	}
	for (size_t i = 0; i < json_object_array_length(v); i++) {
		struct json_object *e = json_object_array_get_idx(v, i);
		const char *why = json_object_is_type(e, json_type_string) ?
		    problem(json_object_get_string(e)) : "is not a string";
		if (why != NULL) {
			util_cause(cause, "%s.%s[%zu]: %s", where, key, i, why);
			return -1;
		}
	}
	return 0;
}

static const char *
custom_name_problem(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > AGENTPROF_NAME_MAX || strcmp(s, "none") == 0)
		return "a profile name is 1-32 of a-z, 0-9 and '-', not \"none\"";
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return "a profile name is 1-32 of a-z, 0-9 and '-', not \"none\"";
	return NULL;
}

static const char *
custom_file_problem(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 128 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return "expected one file name (no '/')";
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || strchr("._+-", s[i]) != NULL))
			return "expected one file name (letters, digits, '.', '_', '+', '-')";
	return NULL;
}

static const char *
custom_state_problem(const char *s)
{
	const char *rel = strncmp(s, "~/", 2) == 0 ? s + 2 : s[0] == '/' ? s + 1 : NULL;
	if (rel == NULL || *rel == '\0' || strlen(s) > 1024)
		return "expected an absolute path or ~/PATH (not ~ itself)";
	/* Overlay options split on these; ".." would name another directory. */
	if (strpbrk(s, ",:\\") != NULL || strstr(s, "/../") != NULL || strcmp(rel, "..") == 0 ||
	    strncmp(rel, "../", 3) == 0 || (strlen(s) >= 3 && strcmp(s + strlen(s) - 3, "/..") == 0))
		return "has ',', ':', '\\' or a '..' component";
	return NULL;
}

static const char *
custom_host_problem(const char *s)
{
	char *why = NULL;
	struct json_object *e;
	if (!dnspolicy_is_hostname_entry(s))
		return "expected NAME,tcp,PORT";
	if ((e = dnspolicy_entry_from_string(s, &why)) == NULL) {
		free(why);
		return "expected NAME,tcp|udp,PORT";
	}
	json_object_put(e);
	return NULL;
}

static const char *
custom_env_problem(const char *s)
{
	const char *eq = strchr(s, '=');
	if (eq == NULL || eq == s || eq - s > 64 || strlen(eq + 1) > 256 ||
	    strchr(s, '\n') != NULL)
		return "expected NAME=VALUE (a name of A-Z, 0-9 and '_', a value of 256 bytes)";
	for (const char *c = s; c < eq; c++)
		if (!((*c >= 'A' && *c <= 'Z') || *c == '_' || (c > s && *c >= '0' && *c <= '9')))
			return "expected NAME=VALUE (a name of A-Z, 0-9 and '_', a value of 256 bytes)";
	return NULL;
}

int
agentprof_custom_check(struct json_object *item, const char *where, char **cause)
{
	int have_name = 0;

	if (!json_object_is_type(item, json_type_object)) {
		util_cause(cause, "%s: expected a profile object {\"name\": ...}", where);
		return -1;
	}
	json_object_object_foreach(item, key, v) {
		int rc;
		if (strcmp(key, "name") == 0) {
			const char *why = json_object_is_type(v, json_type_string) ?
			    custom_name_problem(json_object_get_string(v)) : "is not a string";
			if (why != NULL) {
				util_cause(cause, "%s.name: %s", where, why);
				return -1;
			}
			have_name = 1;
			continue;
		}
		if (strcmp(key, "executables") == 0)
			rc = custom_list(v, where, key, 8, custom_file_problem, cause);
		else if (strcmp(key, "state") == 0)
			rc = custom_list(v, where, key, AGENTPROF_MAX_STATE, custom_state_problem, cause);
		else if (strcmp(key, "config") == 0 || strcmp(key, "volatile") == 0)
			rc = custom_list(v, where, key, AGENTPROF_MAX_CONFIG, custom_file_problem,
			    cause);
		else if (strcmp(key, "hosts") == 0)
			rc = custom_list(v, where, key, AGENTPROF_MAX_HOSTS, custom_host_problem, cause);
		else if (strcmp(key, "env") == 0)
			rc = custom_list(v, where, key, AGENTPROF_MAX_ENV, custom_env_problem, cause);
		else {
			util_cause(cause, "%s: unknown key %s (name, executables, state, config, "
			    "volatile, hosts, env)", where, key);
			return -1;
		}
		if (rc != 0)
			return -1;
	}
	if (!have_name) {
		util_cause(cause, "%s: a profile needs a name", where);
		return -1;
	}
	return 0;
}

/* A copy of s in the profile's own arena (the policy it came from is freed before exec). */
static const char *
agentprof_keep(struct agentprof *p, const char *s)
{
	size_t n = strlen(s) + 1;
	if (p->ap_arena_used + n > sizeof(p->ap_arena))
		return NULL;
	char *d = p->ap_arena + p->ap_arena_used;
	memcpy(d, s, n);
	p->ap_arena_used += n;
	return d;
}

/* A custom profile's list over a built-in's (or the only one): replaced whole when given. */
static int
agentprof_take(struct agentprof *p, struct json_object *c, const char *key, const char **dst,
    size_t *n, size_t max, char **cause)
{
	struct json_object *v;

	if (c == NULL || !json_object_object_get_ex(c, key, &v))
		return 0;
	*n = 0;
	for (size_t i = 0; i < json_object_array_length(v) && *n < max; i++)
		if ((dst[(*n)++] = agentprof_keep(p, json_object_get_string(
		    json_object_array_get_idx(v, i)))) == NULL) {
			util_cause(cause, "agent profile %s: too large", p->ap_name);
			return -1;
		}
	return 0;
}

int
agentprof_load(const char *name, struct json_object *custom, struct agentprof *p, char **cause)
{
	const struct agentprof_builtin *b = agentprof_find(name);
	struct json_object *c = agentprof_custom_find(custom, name);

	memset(p, 0, sizeof(*p));
	if (b == NULL && c == NULL) {
		util_cause(cause, "agent profile %s: no such profile", name);
		return -1;
	}
	util_strlcpy(p->ap_name, name, sizeof(p->ap_name));
	p->ap_builtin = b != NULL;
	p->ap_custom = c != NULL;
	for (size_t i = 0; b != NULL && i < AGENTPROF_MAX_CONFIG && b->ab_config[i] != NULL; i++)
		p->ap_config[p->ap_nconfig++] = b->ab_config[i];
	for (size_t i = 0; b != NULL && i < AGENTPROF_MAX_CONFIG && b->ab_volatile[i] != NULL; i++)
		p->ap_volatile[p->ap_nvolatile++] = b->ab_volatile[i];
	for (size_t i = 0; b != NULL && i < AGENTPROF_MAX_HOSTS && b->ab_hosts[i] != NULL; i++)
		p->ap_hosts[p->ap_nhosts++] = b->ab_hosts[i];
	for (size_t i = 0; b != NULL && i < AGENTPROF_MAX_ENV && b->ab_env[i] != NULL; i++)
		p->ap_env[p->ap_nenv++] = b->ab_env[i];
	for (size_t i = 0; b != NULL && i < nitems(b->ab_args) && b->ab_args[i] != NULL; i++)
		p->ap_args[p->ap_nargs++] = b->ab_args[i];
	/* The policy's profile replaces each list it gives (checked: agentprof_custom_check). */
	if (agentprof_take(p, c, "config", p->ap_config, &p->ap_nconfig, AGENTPROF_MAX_CONFIG,
	    cause) != 0 || agentprof_take(p, c, "volatile", p->ap_volatile, &p->ap_nvolatile,
	    AGENTPROF_MAX_CONFIG, cause) != 0 || agentprof_take(p, c, "hosts", p->ap_hosts, &p->ap_nhosts,
	    AGENTPROF_MAX_HOSTS, cause) != 0 || agentprof_take(p, c, "env", p->ap_env, &p->ap_nenv,
	    AGENTPROF_MAX_ENV - 1, cause) != 0 || agentprof_take(p, c, "state", p->ap_state_spec,
	    &p->ap_nstate_spec, AGENTPROF_MAX_STATE, cause) != 0)
		return -1;
	return 0;
}

/* The state directories a policy's profile names (~/ under home). */
static int
agentprof_locate_spec(struct agentprof *p, const char *home, const char *gensee_home,
    char **cause)
{
	char name[AGENTPROF_NAME_MAX + 1], path[PATH_MAX];

	/* Copies: the strings live in p, which the results are written to. */
	util_strlcpy(name, p->ap_name, sizeof(name));
	for (size_t i = 0; i < p->ap_nstate_spec; i++) {
		struct agentprof_state *s = &p->ap_state[p->ap_nstate];
		util_strlcpy(path, p->ap_state_spec[i], sizeof(path));
		if (strncmp(path, "~/", 2) == 0) {
			if (home == NULL || home[0] != '/')
				continue;	/* no home: the agent runs without that state */
			snprintf(s->as_path, sizeof(s->as_path), "%s/%s", home, path + 2);
		} else {
			util_strlcpy(s->as_path, path, sizeof(s->as_path));
		}
		if (strpbrk(s->as_path, ",:\\") != NULL) {
			util_cause(cause, "agent profile %s: %s has ',', ':' or '\\' in it",
			    p->ap_name, s->as_path);
			return -1;
		}
		s->as_from_env = 0;
		snprintf(s->as_store, sizeof(s->as_store), "%s/agents/%s/state-%zu", gensee_home,
		    name, p->ap_nstate);
		p->ap_nstate++;
	}
	return 0;
}

static int
agentprof_locate_impl(struct agentprof *p, const char *home, const char *gensee_home,
    int use_env, struct json_object *envo, char **cause)
{
	const struct agentprof_builtin *b = agentprof_find(p->ap_name);
	struct agentprof_state *s = &p->ap_state[0];
	const char *env;

	p->ap_nstate = 0;
	if (gensee_home == NULL || gensee_home[0] != '/' || strpbrk(gensee_home, ",:\\") != NULL) {
		util_cause(cause, "agent profile %s: no GENSEE_HOME for its store (or one with ',', "
		    "':' or '\\' in it)", p->ap_name);
		return -1;
	}
	/* A policy's state list replaces the built-in's locations, variables included. */
	if (p->ap_nstate_spec > 0 || b == NULL)
		return agentprof_locate_spec(p, home, gensee_home, cause);
	s->as_from_env = 0;
	for (size_t i = 0; (use_env || envo != NULL) && i < nitems(b->ab_state_env) &&
	    !s->as_from_env; i++) {
		struct json_object *v = NULL;
		if (b->ab_state_env[i].v_name == NULL)
			continue;
		if (envo != NULL)
			env = json_object_object_get_ex(envo, b->ab_state_env[i].v_name, &v) &&
			    json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
		else
			env = getenv(b->ab_state_env[i].v_name);
		if (env == NULL || env[0] != '/')
			continue;
		snprintf(s->as_path, sizeof(s->as_path), "%s%s", env, b->ab_state_env[i].v_suffix);
		util_strlcpy(s->as_env, b->ab_state_env[i].v_name, sizeof(s->as_env));
		s->as_from_env = 1;
		/* Not the agent's environment already: it gets the variable from here. */
		if (envo != NULL && p->ap_nenv < AGENTPROF_MAX_ENV &&
		    (size_t)snprintf(p->ap_fromenv, sizeof(p->ap_fromenv), "%s=%s",
		    b->ab_state_env[i].v_name, env) < sizeof(p->ap_fromenv))
			p->ap_env[p->ap_nenv++] = p->ap_fromenv;
	}
	if (s->as_from_env) {
		/* named by the environment */
	} else if (home != NULL && home[0] == '/') {
		snprintf(s->as_path, sizeof(s->as_path), "%s/%s", home, b->ab_state_default);
	} else {
		return 0;	/* nowhere to keep state: the agent runs without it */
	}
	/*
	 * The overlay's options are comma- and colon-separated: a path with
	 * either (or a backslash) could name other layers.
	 */
	if (strpbrk(s->as_path, ",:\\") != NULL) {
		util_cause(cause, "agent profile %s: %s has ',', ':' or '\\' in it", p->ap_name,
		    s->as_path);
		return -1;
	}
	snprintf(s->as_store, sizeof(s->as_store), "%s/agents/%s/state-0", gensee_home,
	    b->ab_name);
	p->ap_nstate = 1;
	if (b->ab_pin_env != NULL && !s->as_from_env && p->ap_nenv < AGENTPROF_MAX_ENV) {
		/* Its home file moves into the overlaid directory, where writing it is safe. */
		snprintf(p->ap_pin, sizeof(p->ap_pin), "%s=%s", b->ab_pin_env, s->as_path);
		p->ap_env[p->ap_nenv++] = p->ap_pin;
		if (b->ab_home_file != NULL && home != NULL)
			snprintf(p->ap_seed, sizeof(p->ap_seed), "%s/%s", home, b->ab_home_file);
	}
	return 0;
}

int
agentprof_locate(struct agentprof *p, const char *home, const char *gensee_home, int use_env,
    char **cause)
{
	return agentprof_locate_impl(p, home, gensee_home, use_env, NULL, cause);
}

int
agentprof_locate_with(struct agentprof *p, const char *home, const char *gensee_home,
    struct json_object *env, char **cause)
{
	return agentprof_locate_impl(p, home, gensee_home, 0, env, cause);
}

/*
 * The first copy of the home file into the store, so the agent keeps its
 * account and onboarding state; never over one the store or the real
 * directory has, never through a link, at most 16 MiB.
 */
static int
agentprof_seed(const struct agentprof *p, char **cause)
{
	const struct agentprof_state *s = &p->ap_state[0];
	const char *base = strrchr(p->ap_seed, '/') + 1;
	char dst[PATH_MAX + 16], inreal[PATH_MAX + 16], *buf = NULL;
	size_t len = 0;
	int in, out;

	snprintf(dst, sizeof(dst), "%s/upper/%s", s->as_store, base);
	snprintf(inreal, sizeof(inreal), "%s/%s", s->as_path, base);
	if (access(dst, F_OK) == 0 || access(inreal, F_OK) == 0 ||
	    (in = open(p->ap_seed, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return 0;
	struct stat st;
	if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() ||
	    util_read_fd(in, 16u << 20, &buf, &len) != 0) {
		close(in);
		return 0;	/* not the user's own file: the agent starts without it */
	}
	close(in);
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0 || util_write_all(out, buf, len) != 0) {
		util_cause(cause, "agent profile %s: seeding %s: %s", p->ap_name, dst,
		    strerror(errno));
		if (out >= 0)
			close(out);
		free(buf);
		return -1;
	}
	close(out);
	free(buf);
	return 0;
}

/* mkdir -p at path (absolute), the last mode mode: 0 or -1 with errno. */
static int
agentprof_mkdirs(const char *path, mode_t mode)
{
	char buf[PATH_MAX];

	util_strlcpy(buf, path, sizeof(buf));
	for (char *p = buf + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdir(buf, 0700) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, mode) != 0 && errno != EEXIST ? -1 : 0;
}

int
agentprof_prepare(const struct agentprof *p, char **cause)
{
	char path[PATH_MAX + 16];

	for (size_t i = 0; i < p->ap_nstate; i++) {
		const struct agentprof_state *s = &p->ap_state[i];
		struct stat st;
		if (lstat(s->as_path, &st) != 0 && errno == ENOENT && mkdir(s->as_path, 0700) != 0) {
			util_cause(cause, "agent profile %s: mkdir %s: %s", p->ap_name, s->as_path,
			    strerror(errno));
			return -1;
		}
		if (lstat(s->as_path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
			util_cause(cause, "agent profile %s: %s is not a directory of yours", p->ap_name,
			    s->as_path);
			return -1;
		}
		for (int k = 0; k < 2; k++) {
			snprintf(path, sizeof(path), "%s/%s", s->as_store, k ? "work" : "upper");
			if (agentprof_mkdirs(path, 0700) != 0) {
				util_cause(cause, "agent profile %s: mkdir %s: %s", p->ap_name, path,
				    strerror(errno));
				return -1;
			}
		}
	}
	if (p->ap_nstate > 0 && p->ap_seed[0] != '\0' && agentprof_seed(p, cause) != 0)
		return -1;
	return agentprof_purge(p, cause);
}

int
agentprof_purge(const struct agentprof *p, char **cause)
{
	char path[PATH_MAX + 16];

	for (size_t i = 0; i < p->ap_nstate; i++) {
		snprintf(path, sizeof(path), "%s/upper", p->ap_state[i].as_store);
		int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			util_cause(cause, "agent profile %s: %s: %s", p->ap_name, path,
			    strerror(errno));
			return -1;
		}
		for (size_t c = 0; c < p->ap_nconfig + p->ap_nvolatile; c++) {
			const char *name = c < p->ap_nconfig ? p->ap_config[c] :
			    p->ap_volatile[c - p->ap_nconfig];
			struct stat st;
			if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
				continue;
			/*
			 * A file or tree the agent wrote over its configuration,
			 * or an overlay whiteout (a deletion): either would change
			 * what the next run reads. Symlinks are removed, never
			 * followed.
			 */
			int rc = S_ISDIR(st.st_mode) ? snapshot_remove(fd, name, cause) :
			    unlinkat(fd, name, 0);
			if (rc != 0) {
				if (!S_ISDIR(st.st_mode))
					util_cause(cause, "agent profile %s: removing %s/%s: %s",
					    p->ap_name, path, name, strerror(errno));
				close(fd);
				return -1;
			}
		}
		close(fd);
	}
	return 0;
}

/* A JSON array of n strings. */
static struct json_object *
agentprof_strings(const char *const *v, size_t n)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_string(v[i]));
	return a;
}

struct json_object *
agentprof_json(const struct agentprof *p)
{
	struct json_object *o = json_object_new_object(), *a;

	json_object_object_add(o, "name", json_object_new_string(p->ap_name));
	json_object_object_add(o, "chosen_by", json_object_new_string(p->ap_how));
	a = json_object_new_array();
	for (size_t i = 0; i < p->ap_nstate; i++) {
		struct json_object *s = json_object_new_object();
		json_object_object_add(s, "path", json_object_new_string(p->ap_state[i].as_path));
		json_object_object_add(s, "store", json_object_new_string(p->ap_state[i].as_store));
		json_object_object_add(s, "from", json_object_new_string(p->ap_state[i].as_from_env ?
		    p->ap_state[i].as_env : "default"));
		json_object_array_add(a, s);
	}
	json_object_object_add(o, "state", a);
	json_object_object_add(o, "read_only_config", agentprof_strings(p->ap_config, p->ap_nconfig));
	json_object_object_add(o, "volatile", agentprof_strings(p->ap_volatile, p->ap_nvolatile));
	json_object_object_add(o, "hosts", agentprof_strings(p->ap_hosts, p->ap_nhosts));
	json_object_object_add(o, "env", agentprof_strings(p->ap_env, p->ap_nenv));
	json_object_object_add(o, "args", agentprof_strings(p->ap_args, p->ap_nargs));
	json_object_object_add(o, "source", json_object_new_string(p->ap_custom ? (p->ap_builtin ?
	    "built-in, overridden by linux.agents.custom" : "linux.agents.custom") : "built-in"));
	return o;
}
