/*
 * agentprof.h: agent profiles, what a known coding agent needs under
 * `gensee run --sandbox linux` and what it must not change.
 *
 * A profile names the agent's state locations (honouring CODEX_HOME,
 * CLAUDE_CONFIG_DIR, GEMINI_CLI_HOME, GEMINI_HOME and the defaults under
 * $HOME), the
 * configuration inside them the agent must not rewrite (settings, hooks,
 * instruction files: the user's next unsandboxed run would execute what
 * it planted), the model API hosts it needs, and the environment and
 * arguments it needs (the documented settings that make Gensee its
 * sandbox: the agents' own cannot nest).
 *
 * The launcher applies it: each state directory becomes an overlay whose
 * upper layer is the agent's store under $GENSEE_HOME/agents/NAME (so the
 * agent keeps its sessions and logs from one Gensee run to the next while
 * the real directory never changes), the configuration is bound read-only
 * on top, and configuration the agent created in the store is removed
 * before and after every run. The hosts join the run's hostname allowlist.
 */
#ifndef GENSEE_AGENTPROF_H
#define GENSEE_AGENTPROF_H

#include <limits.h>
#include <stddef.h>

struct json_object;

#define AGENTPROF_NAME_MAX 32
#define AGENTPROF_MAX_STATE 4
#define AGENTPROF_MAX_CONFIG 16
#define AGENTPROF_MAX_HOSTS 8
#define AGENTPROF_MAX_ENV 8

struct agentprof_state {
	char as_path[PATH_MAX];		/* the real directory, absolute */
	char as_store[PATH_MAX];	/* its store: upper/ and work/ beneath */
	int as_from_env;		/* named by CODEX_HOME and the like */
	char as_env[32];		/* which */
};

struct agentprof {
	char ap_name[AGENTPROF_NAME_MAX + 1];
	char ap_how[PATH_MAX + 64];	/* why this profile: "--agent", "executable ..." */
	struct agentprof_state ap_state[AGENTPROF_MAX_STATE];
	size_t ap_nstate;
	/* Configuration, relative to a state directory (every one of them). */
	const char *ap_config[AGENTPROF_MAX_CONFIG];
	size_t ap_nconfig;
	/* Writable in the run, never kept: removed from the store before and after it. */
	const char *ap_volatile[AGENTPROF_MAX_CONFIG];
	size_t ap_nvolatile;
	const char *ap_hosts[AGENTPROF_MAX_HOSTS];	/* NAME,tcp,PORT */
	size_t ap_nhosts;
	const char *ap_env[AGENTPROF_MAX_ENV];		/* NAME=VALUE, set unless the caller set NAME */
	size_t ap_nenv;
	const char *ap_args[4];	/* inserted after the executable (or node's script) */
	size_t ap_nargs;
	char ap_pin[PATH_MAX + 32];	/* VAR=DIR naming the state directory (an ap_env) */
	char ap_fromenv[PATH_MAX + 40];	/* VAR=VALUE a caller's variable gave (an ap_env) */
	char ap_seed[PATH_MAX];		/* the home file seeded into the store, or "" */
	int ap_builtin, ap_custom;	/* where its rules came from */
	const char *ap_state_spec[AGENTPROF_MAX_STATE];	/* the policy's state list */
	size_t ap_nstate_spec;
	char ap_arena[8192];		/* the policy's strings, copied */
	size_t ap_arena_used;
};

/* The built-in profiles' names, NULL-terminated. */
const char *const *agentprof_names(void);

/*
 * Which profile the command is: forced ("--agent NAME"; "none": none), or
 * the name of the executable after following symlinks (npm's .bin links)
 * and, for `node SCRIPT`, the script's; custom (linux.agents.custom, may
 * be NULL) is looked at first. 1 with name (AGENTPROF_NAME_MAX + 1 bytes)
 * set, *argi the index in cmd after which the profile's arguments go
 * (-1 when forced: an executable we did not recognise gets none) and how
 * (a description, size howlen); 0 for none; -1 with *cause for an
 * unknown forced name.
 */
int agentprof_detect(char *const *cmd, const char *forced, struct json_object *custom,
    char *name, int *argi, char *how, size_t howlen, char **cause);

/*
 * Fill p with profile name's rules (no paths yet): the built-in's, each
 * list a linux.agents.custom profile of that name gives replacing the
 * built-in's (a custom name alone is a profile of its own). 0, or -1 with
 * *cause.
 */
int agentprof_load(const char *name, struct json_object *custom, struct agentprof *p,
    char **cause);
/*
 * One item of linux.agents.custom: {"name", "executables", "state",
 * "config", "volatile", "hosts", "env"}, strictly (where names it in
 * *cause).
 */
int agentprof_custom_check(struct json_object *item, const char *where, char **cause);
/*
 * Its state locations, from the environment (with use_env: the caller's
 * is the agent's) and home, and their stores under gensee_home/agents/NAME.
 * 0, or -1 with *cause.
 */
int agentprof_locate(struct agentprof *p, const char *home, const char *gensee_home,
    int use_env, char **cause);
/*
 * The same from env ({"CODEX_HOME": "/abs", ...}: the caller's variables,
 * passed on, not this process's); a variable used is also set for the
 * agent (an ap_env), since its environment is not the caller's.
 */
int agentprof_locate_with(struct agentprof *p, const char *home, const char *gensee_home,
    struct json_object *env, char **cause);

/*
 * Make each state directory's store (upper/, work/, 0700) and, when the
 * real directory is missing, the real directory (0700: what the agent's
 * first unsandboxed run would make), then remove from each upper layer
 * the configuration an earlier run may have planted there. The launcher
 * runs it before the agent starts and again after it ends.
 */
int agentprof_prepare(const struct agentprof *p, char **cause);
int agentprof_purge(const struct agentprof *p, char **cause);

/* The profile as the plan and the record show it (rules and where each came from). */
struct json_object *agentprof_json(const struct agentprof *p);

#endif
