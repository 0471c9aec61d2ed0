/*
 * fanpolicy.h: sensitive-path rules, decisions and mark plans for the
 * fanotify sensor.
 *
 * Rules, matching and decisions are pure logic. The plan and the symlink
 * resolution look at the filesystem (statx, realpath, mountinfo) but need
 * no privilege and never open a regular file, so they are safe to run while
 * fanotify permission marks are active.
 *
 * Posture (per operation) and action (per rule) are kept apart, as in the
 * seed: the posture says how much the supervisor may enforce, the action
 * what a rule asks for.
 *
 * A C comment cannot hold a slash next to a star, so patterns in comments
 * are spelled with a space there: "~/.ssh/ **" means ~/.ssh/ followed by
 * two stars, "** /.env" two stars followed by /.env.
 */
#ifndef GENSEE_FANPOLICY_H
#define GENSEE_FANPOLICY_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/fanotify.h> /* FAN_ALLOW, FAN_DENY */

#define FANPOLICY_MAX_RULES 2048
#define FANPOLICY_MAX_WARNINGS 256

enum fan_posture {
	FAN_POSTURE_MONITOR,
	FAN_POSTURE_WARN,
	FAN_POSTURE_ENFORCE,
	FAN_POSTURE_ISOLATE,
};

enum fan_action {
	FAN_ACTION_OBSERVE,
	FAN_ACTION_WARN,
	FAN_ACTION_ASK,
	FAN_ACTION_DENY,
	FAN_ACTION_SPECULATE,
};

enum fan_rule_kind {
	FAN_RULE_EXACT,		/* "/path/to/file" */
	FAN_RULE_PREFIX,	/* "/root/ **", "~/.ssh/ **": the root and everything below */
	FAN_RULE_SUFFIX,	/* "[/root]/ ** /GLOB": a last component matching GLOB below the root */
};

struct fan_rule {
	enum fan_rule_kind fr_kind;
	enum fan_action fr_action;
	int fr_builtin;
	size_t fr_index;	/* position in the policy */
	char *fr_pattern;	/* as configured, e.g. "~/.ssh/ **" */
	char *fr_path;		/* EXACT: the file; PREFIX and SUFFIX: the root ("/" allowed) */
	size_t fr_pathlen;
	char *fr_glob;		/* SUFFIX: fnmatch(3) glob for the last component */
	char *fr_real;		/* fr_path with symlinks resolved (fanpolicy_resolve), or NULL */
	size_t fr_reallen;
};

/* Human-readable notes about what is not covered; each string is owned. */
struct fan_warnings {
	char **w_v;
	size_t w_n;
	size_t w_dropped;	/* not kept beyond FANPOLICY_MAX_WARNINGS */
};

/* Append a formatted warning (-1 when out of memory); beyond the cap only count it. */
int fanpolicy_warn(struct fan_warnings *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int fanpolicy_vwarn(struct fan_warnings *w, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
void fanpolicy_warnings_free(struct fan_warnings *w);

/* At most this many workspaces per policy (sensord's union of every operation's). */
#define FANPOLICY_MAX_WORKSPACES 64

struct fanpolicy {
	struct fan_rule *fp_rules;
	size_t fp_nrules;
	char **fp_workspaces;	/* canonical directories where suffix rules' files are looked for */
	size_t fp_nworkspaces;
	struct fan_warnings fp_warn;
};

/* Stable reason codes, for evidence. */
#define FANR_OUTSIDE_OPERATION "outside_operation"
#define FANR_NO_RULE "no_rule"
#define FANR_MONITOR_POSTURE "monitor_posture"
#define FANR_WARN_POSTURE "warn_posture"
#define FANR_OBSERVE_ACTION "observe_action"
#define FANR_WARN_ACTION "warn_action"
#define FANR_DENY_ACTION "deny_action"
#define FANR_ASK_UNAVAILABLE "ask_unavailable"
#define FANR_SPECULATION_UNAVAILABLE "speculation_unavailable"
/* Set by the engine, never by fanpolicy_decide(). */
#define FANR_DECISION_TIMEOUT "decision_timeout"
#define FANR_DECISION_ERROR "decision_error"
#define FANR_PATH_UNRESOLVED "path_unresolved"
#define FANR_ADOPTING "rules_pending"	/* an adopted group, before its rules came */

struct fan_decision {
	uint32_t dc_response;	/* FAN_ALLOW or FAN_DENY */
	int dc_record;		/* write evidence */
	int dc_warning;		/* ... marked as a warning */
	const char *dc_reason;	/* one of FANR_* */
};

const char *fanpolicy_posture_name(enum fan_posture p);
/* "monitor", "warn", "enforce", "isolate"; -1 for anything else. */
int fanpolicy_posture_from_name(const char *s, enum fan_posture *out);
const char *fanpolicy_action_name(enum fan_action a);
/* "observe", "warn", "ask", "deny", "speculate"; -1 for anything else. */
int fanpolicy_action_from_name(const char *s, enum fan_action *out);
const char *fanpolicy_kind_name(enum fan_rule_kind k);

void fanpolicy_init(struct fanpolicy *p);
void fanpolicy_free(struct fanpolicy *p);

/*
 * Parse one pattern of len bytes (NUL is an error, not an end) into a rule
 * with action a. home expands a leading "~/"; when home is NULL or not an
 * absolute canonical path such a pattern is skipped with a warning in
 * p->fp_warn and 0 is returned. Returns -1 with *cause naming the pattern
 * for a relative path, "..", ".", an empty component, a glob outside the
 * last component of "/ ** /GLOB", or more than PATH_MAX bytes.
 */
int fanpolicy_add(struct fanpolicy *p, const char *pattern, size_t len, const char *home,
    enum fan_action a, char **cause);
/* The built-in rules ~/.ssh/ **, ~/.aws/ **, ~/.config/gcloud/ ** (deny). */
int fanpolicy_add_builtins(struct fanpolicy *p, const char *home, char **cause);
/*
 * Name a workspace (an absolute canonical directory, e.g. the directory
 * an agent runs in): the plan looks in it for existing files that SUFFIX
 * rules match, and covers its filesystem for SUFFIX rules whose root holds
 * it. Duplicates are ignored; -1 with *cause for a path that is not
 * canonical, past FANPOLICY_MAX_WORKSPACES, or out of memory.
 */
int fanpolicy_add_workspace(struct fanpolicy *p, const char *dir, char **cause);
/* The built-in patterns, NULL-terminated. */
extern const char *const fanpolicy_builtin_patterns[];

/*
 * Resolve symlinks in every rule path (the deepest existing ancestor goes
 * through realpath(3), the rest is kept), so that rules match the paths
 * the kernel reports: /home/u/.ssh configured on a host where /home is a
 * symlink to /var/home is also matched as /var/home/u/.ssh. Rules match
 * both the configured and the resolved form. Touches the filesystem.
 */
int fanpolicy_resolve(struct fanpolicy *p, char **cause);

/* 1 when the canonical path is dir or lies below it. */
int fanpolicy_within(const char *path, const char *dir);
/*
 * A non-root user's rules: 0 when every rule's path (and its resolved
 * form, after fanpolicy_resolve) lies inside one of scopes (canonical
 * directories: the user's home and workspace); -1 with *cause naming the
 * first rule that does not, or that covers "/" (a filesystem-wide mark
 * for other users' files).
 */
int fanpolicy_check_scope(const struct fanpolicy *p, char *const *scopes, size_t nscopes,
    char **cause);

/*
 * First matching rule for a canonical absolute path (no "//", ".", ".."
 * or trailing "/"). Order: every EXACT rule before every PREFIX rule
 * before every SUFFIX rule; among PREFIX and SUFFIX rules the longest
 * root wins; ties go to the rule added first. Returns 1 with *hit set, 0
 * when nothing matches, -1 (and *hit NULL) for a path that is not
 * canonical: callers fail closed on -1.
 */
int fanpolicy_match(const struct fanpolicy *p, const char *abs_path, const struct fan_rule **hit);

/*
 * Could an entry renamed or moved to path (a directory when is_dir) have
 * brought an inode under a rule? True when path matches a rule, or, for a
 * directory, when it is a rule path, lies below a rule root or is an
 * ancestor of one. Callers drop their ignore cache when it is.
 */
int fanpolicy_affects(const struct fanpolicy *p, const char *abs_path, int is_dir);

/*
 * The decision for one open under a matching rule.
 *
 *   posture \ action  observe        warn            deny             ask              speculate
 *   (outside op)      allow          allow           allow            allow            allow        not recorded, outside_operation
 *   monitor           allow rec      allow rec       allow rec        allow rec        allow rec    monitor_posture
 *   warn              allow rec      allow rec+warn  allow rec+warn   allow rec+warn   allow rec+warn
 *                     observe_action warn_action     warn_posture     warn_posture     warn_posture
 *   enforce, isolate  allow rec      allow rec+warn  DENY rec         DENY rec         DENY rec
 *                     observe_action warn_action     deny_action      ask_unavailable  speculation_unavailable
 *
 * Ask and speculate fail closed until a prompt broker and a transactional
 * backend exist. An open that matches no rule is the caller's: allow,
 * not recorded, FANR_NO_RULE.
 */
void fanpolicy_decide(enum fan_posture posture, enum fan_action action, int in_operation,
    struct fan_decision *out);

/*
 * Prefix roots: at most this many of the files already below them get
 * INODE marks per plan (hard links and renames out of the root stay
 * matched), and at most this many entries are visited per root.
 */
#define FANPOLICY_PREFIX_INODES_MAX 1024u
#define FANPOLICY_WALK_MAX 16384u
/* ... and at most this many in all, per plan (sensord replans on every launch). */
#define FANPOLICY_WALK_TOTAL_MAX 65536u

/* What to mark. */
enum fan_mark_kind {
	FAN_PLAN_INODE,		/* an existing file: inode mark, which follows its hard links */
	FAN_PLAN_CHILDREN,	/* a directory: inode mark with FAN_EVENT_ON_CHILD (direct entries) */
	FAN_PLAN_FILESYSTEM,	/* the filesystem holding a directory: FAN_MARK_FILESYSTEM */
};

struct fan_mark {
	enum fan_mark_kind fm_kind;
	char *fm_path;		/* canonical; a directory for CHILDREN and FILESYSTEM */
	dev_t fm_dev;
	ino_t fm_ino;
	uint64_t fm_mnt_id;	/* the mount fm_path was resolved through (fanpolicy_mnt_id) */
	int fm_cacheable;	/* every mark of fm_dev goes through the same mount */
	size_t fm_rule;		/* the first rule that asked for it */
};

struct fan_plan {
	const struct fanpolicy *pl_policy;	/* borrowed: must outlive the plan */
	struct fan_mark *pl_marks;
	size_t pl_nmarks;
	struct fan_warnings pl_warn;	/* the policy's warnings first, then the plan's */
	size_t pl_walked;		/* directory entries visited for INODE marks */
};

/*
 * Plan the marks of a policy:
 *   EXACT           an existing file: INODE on it and CHILDREN on its
 *                   directory (a replacement by rename is a new inode);
 *                   a missing file: CHILDREN on its directory; a missing
 *                   directory: FILESYSTEM of the nearest existing ancestor
 *   PREFIX, SUFFIX  FILESYSTEM of the root (or of its nearest existing
 *                   ancestor, with a warning), plus the path filter of
 *                   fanpolicy_match(); fanotify has no recursive marks
 *   PREFIX          and INODE on the regular files already below an
 *                   existing root on a local filesystem (bounded, see
 *                   FANPOLICY_PREFIX_INODES_MAX), so that a hard link or
 *                   rename of one out of the root is still matched
 *   SUFFIX          and INODE on the existing files it matches below its
 *                   root (when that is not "/") and below every workspace
 *                   inside its root, with the same bounds; a workspace on
 *                   another filesystem than the root also gets FILESYSTEM
 * FILESYSTEM marks are deduplicated per st_dev, INODE and CHILDREN marks
 * per inode. Warnings name what is not covered: missing roots, mounts
 * below a root, other mounts of a marked filesystem, network and FUSE
 * filesystems. Returns -1 only when out of memory.
 */
int fanpolicy_plan(const struct fanpolicy *p, struct fan_plan *plan, char **cause);
void fanpolicy_plan_free(struct fan_plan *plan);
const char *fanpolicy_mark_kind_name(enum fan_mark_kind k);

/*
 * The id of the mount dirfd/path is on (statx, AT_SYMLINK_NOFOLLOW; the
 * never-reused STATX_MNT_ID_UNIQUE where the kernel has it). The plan and
 * the engine both use this, so their ids are comparable.
 */
int fanpolicy_mnt_id(int dirfd, const char *path, int flags, uint64_t *id);
/*
 * The mount point of the mount with mountinfo id mnt_id, or (mnt_id 0) of
 * the first mount of dev, into out; -1 with ENOENT when there is none.
 */
int fanpolicy_mount_point(unsigned int mnt_id, dev_t dev, char *out, size_t len);

/*
 * The "fanotify" section of operation.create ({"enabled", "posture",
 * "rules": [{"path", "action"}], "home", "workspace"}), as gensee run
 * builds it: fanpolicy_add_spec appends the built-ins, the workspace and
 * the rules to p;
 * fanpolicy_from_spec initialises p, takes the posture and resolves.
 */
struct json_object;
int fanpolicy_add_spec(struct fanpolicy *p, struct json_object *spec, char **cause);
int fanpolicy_from_spec(struct fanpolicy *p, struct json_object *spec, enum fan_posture *posture,
    char **cause);

/*
 * Bound an operation's fanotify section (operation.create) to max_bytes
 * serialized and, for a non-root uid, keep its rules under that user's
 * home and workspace (directories the uid owns); rootless "**" + "/GLOB"
 * rules become one rule per scope; home and workspace are canonicalized in
 * place. 0, or -1 with *cause. boundaryd applies it to its callers and
 * gensee-tcloned to the users it starts agents for.
 */
struct json_object;
int fanpolicy_scope_section(uid_t uid, struct json_object *fan, size_t max_bytes,
    char **cause);

#endif
