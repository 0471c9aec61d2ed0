/*
 * fanotify.h: the fanotify permission engine (root: CAP_SYS_ADMIN for the
 * groups and filesystem marks, CAP_DAC_READ_SEARCH for open_by_handle_at).
 *
 * The engine marks what a fan_plan lists with FAN_OPEN_PERM and
 * FAN_OPEN_EXEC_PERM, reads permission events, resolves the path of each
 * opened file, asks a callback and answers every event exactly once. Opens
 * that match no rule are cached as inode ignore marks so that they stop
 * raising events.
 *
 * It runs on one thread, and that thread must never open a regular file
 * on a marked filesystem: the open would wait for an answer only that
 * thread can give (the wait is killable, so a stuck engine can still be
 * killed, and closing the group allows what is queued).
 *
 * FAN_OPEN_EXEC_PERM comes with every exec, before the FAN_OPEN_PERM of
 * the same open: two events, told apart by ev_mask.
 *
 * FAN_ACCESS_PERM is not used. It would put a round trip on every read(2)
 * of every file on a marked filesystem, and it does not close the gap it
 * seems to close (fds opened before the marks existed): since Linux 6.14
 * (FMODE_NONOTIFY_PERM; seen on 6.18) a file opened while its filesystem
 * had no permission watcher never raises FAN_ACCESS_PERM at all.
 */
#ifndef GENSEE_FANOTIFY_H
#define GENSEE_FANOTIFY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fanpolicy.h"

#define FANOTIFY_MASK (FAN_OPEN_PERM | FAN_OPEN_EXEC_PERM)
#define FANOTIFY_DECISION_MS 1000	/* default decision budget per event */
#define FANOTIFY_CACHE_MAX 16384	/* default ignore marks before a flush */

/* fan_decide_fn returns this when it could not decide before the deadline. */
#define FAN_DECIDE_TIMEOUT 1

/* Why coverage was lost (FAN_PHASE_LOST). */
#define FAN_LOST_QUEUE_OVERFLOW "queue_overflow"	/* events dropped: the kernel allowed them */
#define FAN_LOST_READ "read_failed"			/* the kernel denied an event it could not deliver */
#define FAN_LOST_NO_FD "event_without_fd"
#define FAN_LOST_FLUSH_WINDOW "flush_window_unmarked"	/* inode marks briefly gone while flushing */

enum fan_phase {
	FAN_PHASE_DECIDE,	/* fill the verdict; the opener is waiting */
	FAN_PHASE_ANSWERED,	/* ev_final is what the kernel got: record it */
	FAN_PHASE_LOST,		/* ev_lost says what went unseen */
};

struct fan_verdict {
	uint32_t vd_response;	/* FAN_ALLOW or FAN_DENY */
	const char *vd_reason;	/* static string, e.g. FANR_* */
	int vd_record;		/* worth evidence */
	int vd_warning;
	int vd_nocache;		/* never add an ignore mark for this inode */
};

struct fan_event {
	enum fan_phase ev_phase;
	pid_t ev_pid;			/* the opener's thread group (blocked until answered) */
	uint64_t ev_mask;		/* FAN_OPEN_PERM or FAN_OPEN_EXEC_PERM */
	int ev_fd;			/* the kernel's fd of the opened file; the engine closes it */
	const char *ev_path;		/* canonical, in the engine's mount namespace; NULL if unresolved */
	const struct fan_rule *ev_rule;	/* the first rule matching ev_path or the inode, or NULL */
	int ev_by_inode;		/* ev_rule came from a marked file reached by another name */
	const char *ev_inode_path;	/* ev_by_inode: the name the file was marked under */
	int ev_unlinked;		/* the file had no name left (ev_path is its last one) */
	dev_t ev_dev;
	ino_t ev_ino;
	nlink_t ev_nlink;		/* > 1: other names exist, which no rule may name */
	int64_t ev_deadline_ms;		/* util_monotonic_ms() by which to decide */
	const struct fan_verdict *ev_final; /* ANSWERED */
	const char *ev_lost;		/* LOST: FAN_LOST_* */
};

/*
 * Called with FAN_PHASE_DECIDE for every permission event (vd preset to
 * deny/decision_error): return 0 with vd filled, FAN_DECIDE_TIMEOUT when
 * no decision could be made by ev_deadline_ms, or -1; anything but 0, and
 * a return after the deadline, answers FAN_DENY. Then once with
 * FAN_PHASE_ANSWERED, and FAN_PHASE_LOST when coverage was lost; the
 * return value of those is ignored. Never open a file on a marked
 * filesystem from the callback.
 */
typedef int (*fan_decide_fn)(const struct fan_event *ev, struct fan_verdict *vd, void *arg);

struct fan_stats {
	uint64_t st_events;	/* permission events read */
	uint64_t st_allowed;
	uint64_t st_denied;
	uint64_t st_failed;	/* denied because handling failed (path, callback, timeout) */
	uint64_t st_timeouts;
	uint64_t st_unanswered;	/* the answer could not be written (the opener was gone) */
	uint64_t st_cached;	/* ignore marks added */
	uint64_t st_flushes;	/* ignore cache dropped */
	uint64_t st_renames;	/* moves seen by the rename watch */
	uint64_t st_overflows;	/* permission queue overflows */
	uint64_t st_rename_overflows;
	size_t st_marks_planned;	/* marks of the plan */
	size_t st_marks_active;		/* ... the kernel accepted (fewer: see the warnings) */
};

struct fan_engine;

/*
 * fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK |
 * FAN_UNLIMITED_QUEUE | FAN_UNLIMITED_MARKS, O_RDONLY | O_LARGEFILE |
 * O_CLOEXEC), a second FAN_REPORT_DFID_NAME group watching moves (for the
 * ignore cache), then the marks of plan. A mark the kernel refuses is a
 * warning (fanotify_engine_warnings), not a failure. plan->pl_policy is
 * borrowed and must outlive the engine or the next set_plan; plan itself
 * may be freed after the call.
 */
int fanotify_engine_open(struct fan_engine **out, const struct fan_plan *plan, char **cause);
/* Replace the marks with those of a new plan and drop the ignore cache, without a gap. */
int fanotify_engine_set_plan(struct fan_engine *e, const struct fan_plan *plan, char **cause);
/* The plan's warnings followed by the engine's. */
const struct fan_warnings *fanotify_engine_warnings(const struct fan_engine *e);
/* One pollable fd (an epoll fd over both groups); readable when handle has work. */
int fanotify_engine_fd(const struct fan_engine *e);
/*
 * Read what is available without blocking: moves first (dropping the
 * ignore cache when one may have brought a cached inode under a rule),
 * then permission events, each answered exactly once. Returns the number
 * of permission events handled, or -1 when reading failed.
 */
int fanotify_engine_handle(struct fan_engine *e, fan_decide_fn cb, void *arg, char **cause);
/*
 * Handle a buffer of raw permission-group records as handle() would after
 * read(2); exposed for tests. -1 for a malformed buffer (records before the
 * damage are handled, and any fd in a record that cannot be parsed is not).
 */
int fanotify_engine_dispatch(struct fan_engine *e, const void *buf, size_t len, fan_decide_fn cb,
    void *arg, char **cause);
/* Drop every ignore mark now. */
int fanotify_engine_flush_cache(struct fan_engine *e, char **cause);
void fanotify_engine_set_timeout(struct fan_engine *e, int64_t ms);
/* 0 turns the ignore cache off. */
void fanotify_engine_set_cache_max(struct fan_engine *e, size_t n);
void fanotify_engine_stats(const struct fan_engine *e, struct fan_stats *st);
/*
 * The permission group outlives the engine when another process holds a
 * duplicate of it (boundaryd, see docs/sensors.md): its marks stay and its
 * openers wait instead of being allowed. fanotify_engine_group_fd is the
 * fd to duplicate; fanotify_engine_adopt takes such a group over in place
 * of a new engine's own (before any plan with marks), and
 * fanotify_engine_retire_stale, after the next set_plan, removes the
 * filesystem and mount marks the adopted group had that the plan lacks.
 */
int fanotify_engine_group_fd(const struct fan_engine *e);
int fanotify_engine_adopt(struct fan_engine *e, int fd, char **cause);
int fanotify_engine_retire_stale(struct fan_engine *e, char **cause);
/*
 * Close both groups. With no other holder of the permission group the
 * kernel removes its marks and allows what is still queued.
 */
void fanotify_engine_close(struct fan_engine *e);

#endif
