/*
 * agent.c: agent profiles in `gensee run --sandbox linux` (lib/agentprof.h),
 * and `gensee agent state NAME [--json] [--reset]`.
 *
 * The launcher chooses the profile (--agent NAME, or the executable),
 * gives the mount view one overlay per state directory and the profile's
 * configuration as read-only paths, lets Landlock write the state
 * directories (the overlay is what makes that safe: without the mount
 * view there is no profile), adds the model API hosts to the allowlist
 * and sets the profile's environment where the caller did not.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "agent.h"
#include "agentprof.h"
#include "cli.h"
#include "landlock.h"
#include "mountview.h"
#include "netspec.h"
#include "policy.h"
#include "snapshot.h"
#include "util.h"

void
agent_run_free(struct agent_run *ar)
{
	for (size_t i = 0; i < ar->ar_nconfig; i++)
		free(ar->ar_config[i]);
	free(ar->ar_argv);
	memset(ar, 0, sizeof(*ar));
}

int
agent_plan(struct agent_run *ar, char *const *cmd, const char *forced,
    struct json_object *policy, char **cause)
{
	struct json_object *on, *custom;
	int rc;

	memset(ar, 0, sizeof(*ar));
	custom = policy_get_effective(policy, "linux.agents.custom");
	rc = agentprof_detect(cmd, forced, custom, ar->ar_namebuf, &ar->ar_argi, ar->ar_how,
	    sizeof(ar->ar_how), cause);
	if (rc <= 0) {
		json_object_put(custom);
		return rc;
	}
	/* An administrator may turn profiles off (linux.agents.profiles false). */
	on = policy_get_effective(policy, "linux.agents.profiles");
	int allowed = on == NULL || json_object_get_boolean(on);
	json_object_put(on);
	if (!allowed) {
		json_object_put(custom);
		if (forced != NULL) {
			util_cause(cause, "--agent %s: linux.agents.profiles is false in the policy",
			    forced);
			return -1;
		}
		return 0;
	}
	rc = agentprof_load(ar->ar_namebuf, custom, &ar->ar_prof, cause);
	json_object_put(custom);
	if (rc != 0)
		return -1;
	util_strlcpy(ar->ar_prof.ap_how, ar->ar_how, sizeof(ar->ar_prof.ap_how));
	ar->ar_name = ar->ar_namebuf;
	ar->ar_active = 1;
	return 1;
}

int
agent_apply(struct agent_run *ar, struct mountview_opts *mvo, int create, char **cause)
{
	struct agentprof *p = &ar->ar_prof;

	if (!ar->ar_active)
		return 0;
	if (agentprof_locate(p, mvo->mo_home, mvo->mo_gensee_home, 1, cause) != 0)
		return -1;
	if (create && agentprof_prepare(p, cause) != 0)
		return -1;
	for (size_t i = 0; i < p->ap_nstate && mvo->mo_noverlay < MOUNTVIEW_MAX_OVERLAYS; i++) {
		struct agentprof_state *s = &p->ap_state[i];
		struct mountview_overlay *ov = &mvo->mo_overlay[mvo->mo_noverlay++];
		snprintf(ar->ar_upper[i], sizeof(ar->ar_upper[i]), "%s/upper", s->as_store);
		snprintf(ar->ar_work[i], sizeof(ar->ar_work[i]), "%s/work", s->as_store);
		ov->mov_target = s->as_path;
		ov->mov_upper = ar->ar_upper[i];
		ov->mov_work = ar->ar_work[i];
		for (size_t c = 0; c < p->ap_nconfig; c++) {
			char path[PATH_MAX];
			if (mvo->mo_nconfig == MOUNTVIEW_MAX_CONFIG || ar->ar_nconfig ==
			    nitems(ar->ar_config) || (size_t)snprintf(path, sizeof(path), "%s/%s",
			    s->as_path, p->ap_config[c]) >= sizeof(path) ||
			    (ar->ar_config[ar->ar_nconfig] = strdup(path)) == NULL) {
				util_cause(cause, "agent profile %s: too many configuration paths",
				    p->ap_name);
				return -1;
			}
			mvo->mo_config[mvo->mo_nconfig++] = ar->ar_config[ar->ar_nconfig++];
		}
	}
	return 0;
}

int
agent_landlock(const struct agent_run *ar, struct landlock_opts *llo, int overlaid, int create,
    char **cause)
{
	if (!ar->ar_active || ar->ar_prof.ap_nstate == 0)
		return 0;
	/*
	 * Fail closed: without the overlay a writable state directory is the
	 * real one, configuration included.
	 */
	if (!overlaid) {
		fprintf(stderr, "gensee run: warning: agent profile %s: the mount view is off: "
		    "its state directories stay read-only\n", ar->ar_prof.ap_name);
		return 0;
	}
	for (size_t i = 0; i < ar->ar_prof.ap_nstate; i++) {
		struct stat st;
		/* A plan that makes nothing (debug plan): a directory the run would make. */
		if (!create && lstat(ar->ar_prof.ap_state[i].as_path, &st) != 0)
			continue;
		if (llo->lo_nrw == nitems(llo->lo_rw)) {
			util_cause(cause, "agent profile %s: too many writable paths",
			    ar->ar_prof.ap_name);
			return -1;
		}
		llo->lo_rw[llo->lo_nrw++] = ar->ar_prof.ap_state[i].as_path;
	}
	return 0;
}

void
agent_netspec(const struct agent_run *ar, struct json_object *netspec)
{
	struct json_object *allow = netspec ? json_object_object_get(netspec, "allow") : NULL;
	const char *mode = netspec ? json_object_get_string(json_object_object_get(netspec,
	    "mode")) : NULL;

	/* Monitor mode allows everything not denied: nothing to add. */
	if (!ar->ar_active || allow == NULL || mode == NULL || strcmp(mode, "allowlist") != 0)
		return;
	for (size_t i = 0; i < ar->ar_prof.ap_nhosts; i++) {
		int have = 0;
		for (size_t k = 0; k < json_object_array_length(allow); k++)
			have |= strcmp(json_object_get_string(json_object_array_get_idx(allow, k)),
			    ar->ar_prof.ap_hosts[i]) == 0;
		if (!have)
			json_object_array_add(allow, json_object_new_string(ar->ar_prof.ap_hosts[i]));
	}
}

void
agent_environ(const struct agent_run *ar)
{
	for (size_t i = 0; ar->ar_active && i < ar->ar_prof.ap_nenv; i++) {
		const char *e = ar->ar_prof.ap_env[i], *eq = strchr(e, '=');
		char name[64];
		if (eq == NULL || (size_t)(eq - e) >= sizeof(name))
			continue;
		memcpy(name, e, (size_t)(eq - e));
		name[eq - e] = '\0';
		/* The caller's own setting wins: the profile only fills in. */
		if (getenv(name) == NULL)
			setenv(name, eq + 1, 0);
	}
}

char **
agent_argv(struct agent_run *ar, char **cmd)
{
	size_t n = 0, na = ar->ar_prof.ap_nargs;
	char **v;

	if (!ar->ar_active || ar->ar_argi < 0 || na == 0)
		return cmd;
	while (cmd[n] != NULL)
		n++;
	if ((v = calloc(n + na + 1, sizeof(*v))) == NULL)
		return cmd;	/* without the settings: the agent's own sandbox fails closed */
	size_t o = 0, at = (size_t)ar->ar_argi;
	for (size_t i = 0; i <= at; i++)
		v[o++] = cmd[i];
	for (size_t i = 0; i < na; i++)
		v[o++] = (char *)ar->ar_prof.ap_args[i];
	for (size_t i = at + 1; i < n; i++)
		v[o++] = cmd[i];
	free(ar->ar_argv);
	ar->ar_argv = v;	/* freed with the run (agent_run_free) */
	return v;
}

void
agent_finish(const struct agent_run *ar)
{
	char *cause = NULL;

	if (ar->ar_active && agentprof_purge(&ar->ar_prof, &cause) != 0) {
		fprintf(stderr, "gensee run: warning: %s (removed before the next run)\n", cause);
		free(cause);
	}
}

struct json_object *
agent_json(const struct agent_run *ar)
{
	return ar->ar_active ? agentprof_json(&ar->ar_prof) : NULL;
}

/* Every path under dir (relative to top), into a: what the runs changed. */
static void
agent_list(int dirfd, const char *rel, struct json_object *a, int depth)
{
	DIR *d;
	struct dirent *de;
	int fd = dup(dirfd);

	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL && json_object_array_length(a) < 10000) {
		char path[PATH_MAX];
		struct stat st;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		snprintf(path, sizeof(path), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "path", json_object_new_string(path));
		/* An overlay whiteout (a 0:0 character device): the run deleted it. */
		json_object_object_add(o, "change", json_object_new_string(S_ISCHR(st.st_mode) &&
		    st.st_rdev == 0 ? "deleted" : S_ISDIR(st.st_mode) ? "directory" : "written"));
		json_object_object_add(o, "bytes", S_ISREG(st.st_mode) ?
		    json_object_new_int64((int64_t)st.st_size) : NULL);
		json_object_array_add(a, o);
		if (S_ISDIR(st.st_mode) && depth < 32) {
			int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
			if (sub >= 0) {
				agent_list(sub, path, a, depth + 1);
				close(sub);
			}
		}
	}
	closedir(d);
}

/*
 * The overlay leaves work/work (and work/index) mode 0: make them ours to
 * remove. Only directories directly in work/, never through a link.
 */
static void
agent_open_work(const char *store)
{
	char path[PATH_MAX + 8];
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof(path), "%s/work", store);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		/* A failure shows at the removal, with its reason. */
		if (de->d_name[0] != '.' && fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode) && fchmodat(fd, de->d_name, 0700, 0) != 0)
			continue;
	}
	closedir(d);
}

static const char agent_usage_text[] =
    "usage: gensee agent state NAME [--json] [--reset]\n"
    "  what Gensee runs of agent NAME (codex, claude, gemini) wrote to its state:\n"
    "  it lives in $GENSEE_HOME/agents/NAME, never in the agent's real directory;\n"
    "  --reset drops it\n";

int
cmd_agent(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "reset", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct landlock_opts llo;
	struct mountview_opts mvo;
	struct agent_run ar;
	char *cause = NULL;
	int json = 0, reset = 0, ch, rc = 0;

	if (argc < 2 || strcmp(argv[1], "state") != 0)
		return cli_usage(cli_help_asked(argc, argv), agent_usage_text);
	optind = 1;
	while ((ch = getopt_long(argc - 1, argv + 1, "", longopts, NULL)) != -1) {
		if (ch == 'j')
			json = 1;
		else if (ch == 'r')
			reset = 1;
		else
			return cli_usage(ch == 'h', agent_usage_text);
	}
	if (optind + 1 != argc - 1)
		return cli_usage(0, agent_usage_text);
	const char *name = argv[optind + 1];
	memset(&llo, 0, sizeof(llo));
	memset(&mvo, 0, sizeof(mvo));
	memset(&ar, 0, sizeof(ar));
	struct json_object *policy = policy_load(&cause);
	if (policy == NULL || agent_plan(&ar, NULL, name, policy, &cause) != 1 ||
	    run_host_opts(&llo, &mvo, 0, &cause) != 0 || agent_apply(&ar, &mvo, 0, &cause) != 0) {
		json_object_put(policy);
		fprintf(stderr, "gensee agent state: %s\n", cause ? cause : "no such profile");
		free(cause);
		agent_run_free(&ar);
		return CLI_EXIT_USAGE;
	}
	json_object_put(policy);
	struct json_object *out = json_object_new_object(), *states = json_object_new_array();
	json_object_object_add(out, "agent", json_object_new_string(ar.ar_prof.ap_name));
	for (size_t i = 0; i < ar.ar_prof.ap_nstate; i++) {
		const struct agentprof_state *s = &ar.ar_prof.ap_state[i];
		struct json_object *o = json_object_new_object(), *changes = json_object_new_array();
		int fd = open(ar.ar_upper[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			agent_list(fd, "", changes, 0);
			close(fd);
		}
		json_object_object_add(o, "path", json_object_new_string(s->as_path));
		json_object_object_add(o, "store", json_object_new_string(s->as_store));
		json_object_object_add(o, "changes", changes);
		if (reset) {
			/* The store is the user's own: remove it whole, never following a link. */
			char parent[PATH_MAX];
			util_strlcpy(parent, s->as_store, sizeof(parent));
			char *slash = strrchr(parent, '/');
			*slash = '\0';
			agent_open_work(s->as_store);
			int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (pfd >= 0 && faccessat(pfd, slash + 1, F_OK, AT_SYMLINK_NOFOLLOW) == 0 &&
			    snapshot_remove(pfd, slash + 1, &cause) != 0) {
				fprintf(stderr, "gensee agent state: --reset: %s\n", cause);
				free(cause);
				cause = NULL;
				rc = 1;
			}
			if (pfd >= 0)
				close(pfd);
			json_object_object_add(o, "reset", json_object_new_boolean(rc == 0));
		}
		json_object_array_add(states, o);
	}
	json_object_object_add(out, "state", states);
	if (json) {
		cli_print_json(out);
	} else {
		for (size_t i = 0; i < json_object_array_length(states); i++) {
			struct json_object *o = json_object_array_get_idx(states, i);
			struct json_object *c = json_object_object_get(o, "changes");
			printf("%s  %s (store %s): %zu change%s%s\n", ar.ar_prof.ap_name,
			    json_object_get_string(json_object_object_get(o, "path")),
			    json_object_get_string(json_object_object_get(o, "store")),
			    json_object_array_length(c), json_object_array_length(c) == 1 ? "" : "s",
			    reset ? (rc == 0 ? ", reset" : ", reset failed") : "");
			for (size_t k = 0; k < json_object_array_length(c); k++) {
				struct json_object *e = json_object_array_get_idx(c, k);
				printf("  %-9s %s\n", json_object_get_string(json_object_object_get(e,
				    "change")), json_object_get_string(json_object_object_get(e,
				    "path")));
			}
		}
	}
	json_object_put(out);
	agent_run_free(&ar);
	return rc;
}
