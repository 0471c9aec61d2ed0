/*
 * tcloned.h: gensee-tcloned, workspace sources and forks on stock kernels.
 *
 * Trust model: tcloned is root and takes requests on tclone.sock from any
 * local user. The kernel tells it who asked (SO_PEERCRED); a user may act
 * on their own runs only (root on all), and a caller inside a supervised
 * operation (an agent, whatever its uid) may do nothing there. An agent
 * reaches tcloned only through its own run's control bridge (bridge.c):
 * the socket names the run, scoped to itself and its direct children, and
 * merging, promoting or discarding needs the user's recorded approval.
 * Every tree it copies,
 * diffs or merges is agent-written and handled as hostile (snapshot.h).
 *
 * tcloned holds no authority of its own: each run's agent is an operation
 * that boundaryd creates (cgroup, network policy) over boundary.sock, for
 * a child tcloned holds before it execs. A fork is created with exactly
 * its parent's recorded authority, never more; the comparison is recorded.
 */
#ifndef GENSEE_TCLONED_H
#define GENSEE_TCLONED_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "peer.h"

struct json_object;

#define TCLONED_NAME "gensee-tcloned"
#define TCLONED_DEFAULT_ROOT "/var/lib/gensee-boundary"
#define TCLONED_DEFAULT_RUNTIME "/run/gensee"
#define TCLONED_SOCK "tclone.sock"
#define TCLONED_MAX_RUNS 256
#define TCLONED_COPIES_MAX 8
#define TCLONED_LAYERS_MAX 16
#define TCLONED_FRAME_DEADLINE_MS 5000
#define TCLONED_CONN_MAX 32
#define TCLONED_CONN_PER_UID 8
#define TCLONED_BD_TIMEOUT_MS 15000
#define TCLONED_ARGV_MAX 64
#define TCLONED_APPROACH_MAX 200
#define TCLONED_NAME_MAX 48
#define TCLONED_ID_MAX 48
#define TCLONED_SESSION "gensee-agent"
#define TCLONED_IMAGE_MAX 255
#define TCLONED_DEFAULT_PODMAN "/usr/bin/podman"
#define TCLONED_DEFAULT_IMAGE "localhost/gensee-tclone-webtop:tmux"

/* Stable error codes (besides proto.h's). */
#define TE_MERGE_CONFLICT "merge_conflict"
#define TE_MERGE_INCOMPLETE "merge_incomplete"	/* --git: the patch is not the fork's tracked delta */
#define TE_NOT_DIRECT_CHILD "not_direct_child"
#define TE_SNAPSHOT "snapshot_failed"
#define TE_LAUNCH "launch_failed"
#define TE_WORKSPACE "invalid_workspace"
#define TE_PATH "invalid_path"
#define TE_OBSERVE_ONLY "observe_only"
#define TE_NOT_IN_RUN "not_in_run"		/* bridge: the peer is not a process of the run */
#define TE_BRIDGE_SCOPE "out_of_scope"		/* bridge: not itself / not a direct child */
#define TE_APPROVAL "approval_required"	/* bridge: no recorded user approval */

/* The agent control bridge (bridge.c), relative to the runtime dir. */
#define TCLONED_BRIDGE_DIR "tclone/bridge"		/* host side: RUN.sock, root 0711 */
#define TCLONED_BRIDGE_VIEW "tclone/control.sock"	/* where the agent sees its own */
#define TCLONED_BRIDGE_CONN_MAX 16
#define TCLONED_BRIDGE_CONN_PER_RUN 4
#define TCLONED_BRIDGE_REFUSED_MAX 4		/* peers outside the run, awaiting their refusal */
#define BRIDGE_TEXT_MAX 4096
#define TCLONED_FANOTIFY_MAX (64u * 1024u)	/* boundaryd's bound of the section */			/* tclone.send */
#define TE_PODMAN_UNAVAILABLE "podman_unavailable"
#define TE_PODMAN_IMAGE "podman_image_missing"
#define TE_PODMAN_NOT_ALLOWED "podman_not_allowed"

/* One source or fork. Its record.json is the truth; this is its cache. */
struct trun {
	char tr_id[TCLONED_ID_MAX];
	char tr_role[8];		/* source | fork */
	char tr_state[16];		/* running | exited | lost | discarded | switched */
	char tr_source[TCLONED_ID_MAX];	/* a fork's direct source */
	char tr_group[TCLONED_ID_MAX];	/* a fork's group ("" for a source) */
	char tr_name[TCLONED_NAME_MAX + 32];
	char tr_approach[TCLONED_APPROACH_MAX + 1];
	char tr_op[PEER_OP_ID_MAX];	/* boundaryd operation of the current agent */
	char tr_workspace[PATH_MAX];	/* the user's workspace path: the agent's view of ws/ */
	char tr_backend[16];		/* overlay | copy */
	char tr_runtime[8];		/* ns (our launcher) | podman */
	char tr_image[TCLONED_IMAGE_MAX + 1];	/* podman: the image */
	int tr_tmux;			/* podman: the image has tmux */
	const char *tr_errcode;		/* a launch failure's stable code (not saved) */
	char tr_layers[TCLONED_LAYERS_MAX][TCLONED_ID_MAX];	/* overlay lowers, top first */
	int tr_nlayers;
	int tr_index;			/* index in its fork group */
	int tr_observe_only;
	uid_t tr_uid;
	gid_t tr_gid;
	pid_t tr_pid;			/* the namespace init, 0 when none */
	uint64_t tr_start_ticks;
	int64_t tr_created_ms;
	struct json_object *tr_argv;	/* array of strings */
	struct json_object *tr_network;	/* the network spec of its operations */
	struct json_object *tr_landlock_rw;	/* extra writable paths (array), or NULL */
	struct json_object *tr_rec;	/* the whole record */
	int tr_bridge_fd;		/* its agent's control socket (listening) ... */
	int tr_bridge_open;		/* ... when this is set */
};

struct tcloned {
	char td_root[PATH_MAX];		/* authority root */
	char td_runtime[PATH_MAX];
	char td_cgroup_base[64];
	int td_root_fd;			/* authority root (safefs) */
	int td_tc_fd;			/* ROOT/tclone */
	int td_runtime_fd;
	int td_listen_fd;
	int td_apply_pause_ms;		/* --debug-apply-pause-ms: tests crash a merge midway */
	char td_backends[64];		/* what this host offers, best first */
	char td_backend[16];		/* the one new runs use */
	char td_podman[PATH_MAX];	/* the podman binary (--podman), never the caller's */
	char td_image[TCLONED_IMAGE_MAX + 1];	/* the default image */
	char td_criu[200];		/* why live cloning is unavailable ("" if it were) */
	struct trun *td_runs[TCLONED_MAX_RUNS];
	int td_nruns;
	const char *td_origin_run;	/* set while serving a bridge request: history names it */
	pid_t td_origin_pid;
	int td_serving_host;		/* set while serving a tclone.sock request */
};

/* tcloned.c */
int tcloned_bd_call(struct tcloned *td, const char *method, struct json_object *params,
    struct json_object **result, char *code, size_t codelen, char **cause);
void tcloned_history(struct tcloned *td, const char *tx, const char *action,
    const char *outcome, const struct trun *r, const char *group, uid_t uid,
    struct json_object *detail);
int tcloned_save(struct tcloned *td, struct trun *r, char **cause);
struct trun *tcloned_find(struct tcloned *td, const char *id);
void tcloned_forget(struct tcloned *td, struct trun *r);
int tcloned_add(struct tcloned *td, struct trun *r);
void trun_free(struct trun *r);

/* launch.c */
int launch_mount(struct tcloned *td, struct trun *r, char **cause);
int launch_unmount(struct tcloned *td, struct trun *r);
int launch_base_path(struct tcloned *td, struct trun *r, char *out, size_t len, char **cause);
int launch_agent(struct tcloned *td, struct trun *r, const char *context, char **cause);
int launch_create_operation(struct tcloned *td, struct trun *r, pid_t pid, const char *label,
    char **cause);
int launch_release(int go, const struct trun *r, const char *what, char **cause);
void launch_end(struct tcloned *td, struct trun *r, int kill_now);
void launch_reaped(struct tcloned *td, pid_t pid, int status);
int launch_runtime_dir(struct tcloned *td, struct trun *r, char **cause);
void launch_runtime_remove(struct tcloned *td, struct trun *r);

/* bridge.c */
void bridge_init(struct tcloned *td);
int bridge_host_path(struct tcloned *td, const struct trun *r, char *out, size_t len);
int bridge_open(struct tcloned *td, struct trun *r, char **cause);
void bridge_close(struct tcloned *td, struct trun *r);
const char *bridge_admit(struct tcloned *td, const char *run_id, const struct peer *p, char *op,
    size_t oplen);
struct json_object *bridge_serve(struct tcloned *td, const struct peer *p, const char *run_id,
    const char *op, const char *refused, const char *method, struct json_object *params,
    const char **code, char **message);

/* bridgescope.c: what one bridge request may do (no I/O) */
struct bridge_plan {
	struct trun *bp_target;		/* the run it acts on (NULL: tclone.list) */
	struct trun *bp_into;		/* a merge's target: the caller */
	const char *bp_need;		/* the approval it needs, or NULL */
	int bp_local;			/* tclone.approve / tclone.send: bridge.c acts */
};
struct trun *bridge_resolve(struct tcloned *td, uid_t uid, const char *id);
int bridge_is_child(const struct trun *self, const struct trun *r);
int bridge_scope(struct tcloned *td, struct trun *self, uid_t uid, const char *method,
    struct json_object *params, struct bridge_plan *bp, const char **code, char **why);
int bridge_approval_matches(const struct trun *self, const struct trun *child,
    const char *action);
/* podman.c */
int podman_image_ok(const char *s);
int podman_check(struct tcloned *td, char *code, size_t codelen, char **cause);
int podman_image_probe(struct tcloned *td, const char *image, int *has_tmux, char *code,
    size_t codelen, char **cause);
int podman_launch(struct tcloned *td, struct trun *r, char **cause);
void podman_name(const struct trun *r, char *out, size_t len);
void podman_remove(struct tcloned *td, struct trun *r);
int podman_reap_orphans(struct tcloned *td, uid_t uid, struct json_object *gone);

/* lifecycle.c */
struct json_object *lifecycle_dispatch(struct tcloned *td, const struct peer *p,
    const char *method, struct json_object *params, const char **code, char **message);
void lifecycle_recover(struct tcloned *td);

/* agentstate.c: agent profiles in tclone runs (lib/agentprof.h) */
struct agentprof;
/* The profile of r's command (1), none (0), or -1 with *cause. */
int tagent_plan(const struct trun *r, struct agentprof *p, int *argi, char **cause);
/* Its stores made and planted configuration purged, as the user. */
int tagent_prepare(const struct trun *r, const struct agentprof *p, char **cause);
/* The run ended: planted configuration purged from its stores, as the user. */
void tagent_finish(const struct trun *r);
/* In the run's mount namespace, as root: the overlays and read-only configuration. */
int tagent_mount(const struct agentprof *p, uid_t uid, gid_t gid, const char **what);
/*
 * The snapshot's .git/config and .git/hooks read-only (git runs them later,
 * outside; the rule of --sandbox linux's linux.mount_view.protect_git).
 */
/* Check a tclone.start "agent" object ({profiles, name, custom, env}): 0, or -1 with *cause. */
int tagent_check(struct json_object *agent, char **cause);
int tagent_protect_git(const char *ws, uid_t uid, gid_t gid, const char **what);

#endif
