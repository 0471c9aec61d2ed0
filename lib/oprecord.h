/*
 * oprecord.h: the operation record (STATE/operations/ID/record.json).
 *
 * The durable identity of one supervised run. Every change goes through the
 * record store (record.h) with one of the mutators below, each of which
 * changes one portion and refuses a stale change: a lifecycle never moves
 * backwards, an exit result is recorded once, an envelope only advances to
 * a newer generation, counts only grow, lineage entries are only added or
 * completed.
 */
#ifndef GENSEE_OPRECORD_H
#define GENSEE_OPRECORD_H

#include <stdint.h>
#include <sys/types.h>

struct json_object;

#define OPRECORD_SCHEMA_VERSION 1
#define OPRECORD_FILE "record.json"
#define OPRECORD_LINEAGE_MAX 4096

/* Lifecycle states. */
#define OPSTATE_STARTING "starting"
#define OPSTATE_RUNNING "running"
#define OPSTATE_EXITED "exited"
#define OPSTATE_TIMED_OUT "timed_out"
#define OPSTATE_ENDED "ended"
#define OPSTATE_FAILED "failed"
#define OPSTATE_LOST "lost"

int oprecord_state_terminal(const char *state);
int oprecord_state_known(const char *state);

struct oprecord_init {
	const char *oi_id;
	const char *oi_source_run;
	const char *oi_action_class;
	uid_t oi_uid;
	gid_t oi_gid;
	pid_t oi_launcher_pid;
	uint64_t oi_launcher_start;
	pid_t oi_root_pid;
	uint64_t oi_root_start;
	const char *oi_root_exe;
	const char *oi_root_argv_digest;
	const char *oi_command;	/* the launcher's claim of the command line, or NULL */
	int64_t oi_timeout_seconds; /* 0: none */
	int64_t oi_kill_grace_seconds; /* SIGTERM to SIGKILL at the timeout */
	const char *oi_cgroup_path;
	uint64_t oi_cgroup_id;
	const char *oi_instance;
};

struct json_object *oprecord_new(const struct oprecord_init *in);
int oprecord_validate(struct json_object *rec, const char *expected_id, char **cause);

/* Locked update of dirfd/record.json with oprecord_validate. */
int oprecord_update(int dirfd, const char *id, int (*mutate)(struct json_object *, void *, char **),
    void *arg, struct json_object **result, char **cause);
int oprecord_read(int dirfd, const char *id, struct json_object **out, char **cause);

/* What the launcher's seccomp listener refused, by syscall (part of its exit report). */
#define OPRECORD_MAX_DENIALS 32
struct oprecord_denial {
	char od_syscall[40];
	int64_t od_count;
};

struct oprecord_lifecycle {
	const char *ol_state;	/* NULL: keep the state, only add the exit */
	const char *ol_reason;
	int ol_has_exit;
	int ol_exit_code;	/* -1 when killed by a signal */
	int ol_exit_signal;	/* 0 when it exited normally */
	const char *ol_reported_by;
	struct oprecord_denial ol_denials[OPRECORD_MAX_DENIALS];
	size_t ol_ndenials;
};
int oprecord_mut_lifecycle(struct json_object *rec, void *arg, char **cause);

struct oprecord_proc {
	pid_t op_pid;
	pid_t op_ppid;
	uint64_t op_start;
	const char *op_exe;
	const char *op_argv_digest;
	int op_exited;	/* mark exited_at now */
	int op_killed;	/* killed by the supervisor as a leftover */
	int op_has_exit; /* the exit status is known (proc connector) */
	int op_exit_code;
	int op_exit_signal;
};
struct oprecord_lineage {
	const struct oprecord_proc *ol_procs;
	size_t ol_n;
};
int oprecord_mut_lineage(struct json_object *rec, void *arg, char **cause);

struct oprecord_counts {
	int64_t oc_effects;
	int64_t oc_violations;
	int64_t oc_allowed_packets, oc_allowed_bytes;
	int64_t oc_blocked_packets, oc_blocked_bytes;
	/* fanotify decisions written to files.jsonl, and those lost on the way */
	int64_t oc_files_recorded, oc_files_dropped;
};
int oprecord_mut_counts(struct json_object *rec, void *arg, char **cause);

/* arg: a json object with an integer "generation" greater than the current one. */
int oprecord_mut_envelope(struct json_object *rec, void *arg, char **cause);

struct oprecord_cgroup {
	const char *ocg_attachment; /* NULL: unchanged */
	const char *ocg_cleanup;    /* NULL: unchanged */
	const char *ocg_detail;
	int64_t ocg_killed_leftovers;
};
int oprecord_mut_cgroup(struct json_object *rec, void *arg, char **cause);

/* arg: a json object appended to recovery_health.entries (status degraded). */
int oprecord_mut_recovery(struct json_object *rec, void *arg, char **cause);

/* Copy the supervisor instance id into the record (adoption after restart). */
int oprecord_mut_instance(struct json_object *rec, void *arg, char **cause);

#endif
