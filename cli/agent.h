/*
 * agent.h: agent profiles in the launcher (agent.c, lib/agentprof.h).
 */
#ifndef GENSEE_CLI_AGENT_H
#define GENSEE_CLI_AGENT_H

#include <limits.h>

#include "agentprof.h"

struct json_object;
struct landlock_opts;
struct mountview_opts;

struct agent_run {
	int ar_active;
	const char *ar_name;
	char ar_namebuf[AGENTPROF_NAME_MAX + 1];
	int ar_argi;		/* the profile's arguments go after cmd[ar_argi] (-1: none) */
	char ar_how[PATH_MAX + 64];
	struct agentprof ar_prof;
	/* What the mount view plan borrows until it is built. */
	char ar_upper[AGENTPROF_MAX_STATE][PATH_MAX + 8];
	char ar_work[AGENTPROF_MAX_STATE][PATH_MAX + 8];
	char *ar_config[AGENTPROF_MAX_STATE * AGENTPROF_MAX_CONFIG];
	size_t ar_nconfig;
	char **ar_argv;		/* the command with the profile's arguments (agent_argv) */
};

/* Choose the profile of cmd (or forced): 1 active, 0 none, -1 with *cause. */
int agent_plan(struct agent_run *ar, char *const *cmd, const char *forced,
    struct json_object *policy, char **cause);
/*
 * Locate it against what run_host_opts found (home, GENSEE_HOME) and add
 * its overlays and read-only configuration to the mount view's options;
 * with create, make the stores and purge planted configuration first.
 */
int agent_apply(struct agent_run *ar, struct mountview_opts *mvo, int create, char **cause);
/* Its state directories writable in Landlock, when the view overlays them. */
int agent_landlock(const struct agent_run *ar, struct landlock_opts *llo, int overlaid,
    int create, char **cause);
/* Its model API hosts into an allowlist network spec. */
void agent_netspec(const struct agent_run *ar, struct json_object *netspec);
/* cmd with the profile's arguments inserted (cmd itself when it has none). */
char **agent_argv(struct agent_run *ar, char **cmd);
/* Its environment into ours (inherited by the agent) where unset. */
void agent_environ(const struct agent_run *ar);
/* After the run: remove configuration the agent planted in the store. */
void agent_finish(const struct agent_run *ar);
/* The profile for the record and --json (NULL when none). */
struct json_object *agent_json(const struct agent_run *ar);
void agent_run_free(struct agent_run *ar);

#endif
