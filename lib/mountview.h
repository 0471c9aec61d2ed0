/*
 * mountview.h: the private mount view of a sandboxed run.
 *
 * The held child of `gensee run --sandbox linux` enters an identity-mapped
 * user namespace and a mount namespace of its own (as bubblewrap does),
 * and in it hides what an agent must not reach through the filesystem:
 * the user's runtime directories (the sockets of tmux, systemd --user,
 * D-Bus, gpg-agent, podman ...), credentials under $HOME, and the host's
 * /tmp (a private tmpfs instead). $GENSEE_HOME is made read-only, so the
 * agent cannot loosen the policy of the next run. Paths the user chooses
 * (Unix sockets from --allow-unix or linux.unix_sockets.allow) and what
 * the run itself needs (the workspace, gensee's runtime directory) are
 * bound back into the hidden places.
 *
 * The plan is built by the launcher before it forks, so policy errors stop
 * the run before anything starts; the child applies it before Landlock and
 * seccomp (which then forbid any further mount or namespace change).
 */
#ifndef GENSEE_MOUNTVIEW_H
#define GENSEE_MOUNTVIEW_H

#include <stddef.h>
#include <sys/types.h>

struct json_object;

enum mountview_mode {
	MOUNTVIEW_OFF,
	MOUNTVIEW_BEST_EFFORT,
	MOUNTVIEW_REQUIRED,
};

#define MOUNTVIEW_MAX_PATHS 96
#define MOUNTVIEW_MAX_SOCKETS 32
#define MOUNTVIEW_MAX_OVERLAYS 4
#define MOUNTVIEW_MAX_CONFIG 64

/*
 * An agent's state directory (agentprof.h): an overlay at target whose
 * lower layer is target itself and whose upper layer is the agent's
 * store, so what the agent writes there never reaches the real directory.
 */
struct mountview_overlay {
	const char *mov_target;
	const char *mov_upper;
	const char *mov_work;
};

/* What the launcher knows about the run (borrowed strings; NULL when unknown). */
struct mountview_opts {
	const char *mo_home;		/* $HOME */
	const char *mo_gensee_home;	/* $GENSEE_HOME or $HOME/.gensee */
	const char *mo_workspace;	/* the run's directory */
	const char *mo_runtime_dir;	/* gensee's runtime directory (client.sock) */
	const char *mo_xdg_runtime_dir;	/* $XDG_RUNTIME_DIR */
	uid_t mo_uid;
	gid_t mo_gid;
	const char *mo_allow_unix[MOUNTVIEW_MAX_SOCKETS];	/* --allow-unix */
	size_t mo_nallow_unix;
	struct mountview_overlay mo_overlay[MOUNTVIEW_MAX_OVERLAYS];	/* agent state */
	size_t mo_noverlay;
	/* Read-only in the view where they exist when it is built: agent configuration. */
	const char *mo_config[MOUNTVIEW_MAX_CONFIG];
	size_t mo_nconfig;
};

struct mountview_plan {
	enum mountview_mode mv_mode;
	int mv_apply;
	int mv_private_tmp;
	uid_t mv_uid;
	gid_t mv_gid;
	/*
	 * The uid_map and gid_map lines, made with the plan: the child that
	 * applies it shares its pages with the launcher until exec, so every
	 * page it writes (a formatting call's deep stack included) is copied
	 * first, about 30 us each on our test VMs.
	 */
	char mv_uid_map[32];
	char mv_gid_map[32];
	char *mv_hide[MOUNTVIEW_MAX_PATHS];	/* hidden: an empty read-only tmpfs or /dev/null */
	size_t mv_nhide;
	char *mv_readonly[MOUNTVIEW_MAX_PATHS];	/* bound read-only onto themselves */
	size_t mv_nreadonly;
	char *mv_expose[MOUNTVIEW_MAX_PATHS];	/* bound back where a hidden place covers them */
	size_t mv_nexpose;
	char *mv_sockets[MOUNTVIEW_MAX_SOCKETS];	/* the exposed Unix sockets, for the record */
	size_t mv_nsockets;
	char *mv_overlay[MOUNTVIEW_MAX_OVERLAYS];	/* targets */
	char *mv_overlay_opts[MOUNTVIEW_MAX_OVERLAYS];	/* lowerdir=...,upperdir=...,... */
	size_t mv_noverlay;
	char *mv_config[MOUNTVIEW_MAX_CONFIG];		/* read-only where they exist */
	size_t mv_nconfig;
	int mv_protect_git;	/* linux.mount_view.protect_git (default true) */
	char *mv_git[MOUNTVIEW_MAX_CONFIG];	/* repository metadata git runs: read-only */
	size_t mv_ngit;
	char *mv_workspace;	/* chdir here after the view is built */
	struct json_object *mv_skipped;	/* strings: what was not applied, and why */
};

const char *mountview_mode_name(enum mountview_mode m);

/*
 * Build the plan from linux.mount_view and linux.unix_sockets of policy
 * and from what the launcher knows. Errors (a bad key, an --allow-unix path
 * that is not a Unix socket) stop the run.
 */
int mountview_plan_build(struct json_object *policy, const struct mountview_opts *o,
    struct mountview_plan *mv, char **cause);
void mountview_plan_free(struct mountview_plan *mv);

/*
 * In the held child: enter the user and mount namespaces and build the
 * view. In required mode any failure is an error (the caller does not
 * exec); in best_effort mode a failure to create the namespaces is
 * appended to warnings and nothing is applied. Irreversible.
 */
int mountview_apply(const struct mountview_plan *mv, struct json_object *warnings,
    char **cause);

/* The operation record's host_controls.mount_view. */
struct json_object *mountview_plan_record(const struct mountview_plan *mv);

/*
 * core.hooksPath that a repository's config text (modified in place) sets
 * in a plain [core] section: into out, or "". Parsed, never run through git.
 */
void mountview_git_hookspath_in(char *text, char *out, size_t n);

#endif
