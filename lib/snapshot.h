/*
 * snapshot.h: workspace snapshots, diffs and transactional merges for
 * gensee-tcloned.
 *
 * Trust model: every tree handled here (a workspace, a source's or a
 * fork's view) is written by an agent, so nothing in it is trusted: each
 * component is opened on its own with O_NOFOLLOW (or beneath a directory
 * fd with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so a symlink or ".."
 * planted by an agent can never steer a root read or write outside the
 * tree it was handed. Paths that come from a request go through
 * snapshot_path_rel() first.
 */
#ifndef GENSEE_SNAPSHOT_H
#define GENSEE_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct json_object;

#define SNAPSHOT_DEPTH_MAX 128
#define SNAPSHOT_CHANGES_MAX 1000000
#define SNAPSHOT_PATHS_MAX 64

/* Whose file access checks apply while reading or writing one side of a copy. */
struct snapshot_creds {
	int sc_set;		/* 0: the caller's own (root) */
	uid_t sc_uid;
	gid_t sc_gid;
};

#define SNAPSHOT_F_OVERLAY 0x01	/* copying an overlayfs upper: keep whiteouts and trusted.overlay.* */
#define SNAPSHOT_F_INTO 0x02	/* dstname exists (an empty directory, e.g. a new subvolume): fill it */

struct snapshot_stats {
	uint64_t ss_files;
	uint64_t ss_dirs;
	uint64_t ss_links;
	uint64_t ss_bytes;
	uint64_t ss_skipped;	/* devices, fifos, sockets: never copied out of a workspace */
};

/*
 * Copy the tree at srcdir into a new directory dstname beneath dstparent
 * (which must not exist). Source reads happen with src_as's filesystem
 * identity, destination writes with dst_as's (NULL: root's, keeping owners
 * and modes). Returns 0 or -1 with *cause.
 */
int snapshot_copy(int srcdir, int dstparent, const char *dstname, int flags,
    const struct snapshot_creds *src_as, const struct snapshot_creds *dst_as,
    struct snapshot_stats *st, char **cause);

/*
 * Remove the tree name beneath parent without following symlinks. A btrfs
 * subvolume root in it is destroyed with BTRFS_IOC_SNAP_DESTROY (a
 * read-only snapshot cannot be emptied entry by entry).
 */
int snapshot_remove(int parent, const char *name, char **cause);

/*
 * Path rules for paths named by a user (merge --paths): a relative path,
 * or an absolute one under workspace (the run's workspace path) or under
 * "/workspace". Rejected: "..", ".", empty components after
 * normalisation, NUL, a path that is the workspace root itself, and an
 * absolute path anywhere else. On success rel holds the normalised
 * relative path. Returns 0 or -1 with *cause.
 */
int snapshot_path_rel(const char *workspace, const char *in, char *rel, size_t len, char **cause);

enum snapshot_change_kind {
	SC_ADDED,
	SC_MODIFIED,
	SC_DELETED,
};

enum snapshot_entry_kind {
	SE_ABSENT,
	SE_FILE,
	SE_DIR,
	SE_LINK,
	SE_OTHER,
};

struct snapshot_change {
	char *sc_path;
	enum snapshot_change_kind sc_kind;
	enum snapshot_entry_kind sc_before;
	enum snapshot_entry_kind sc_after;
	int64_t sc_size;	/* after; -1 when absent or not a file */
};

struct snapshot_changes {
	struct snapshot_change *scs_v;
	size_t scs_n;
	size_t scs_cap;
};

/*
 * The changes that turn the tree base into the tree view, in apply order:
 * a directory before what is added in it, what is deleted in a directory
 * before the directory. Returns 0 or -1 with *cause.
 */
int snapshot_diff(int basefd, int viewfd, struct snapshot_changes *out, char **cause);
void snapshot_changes_free(struct snapshot_changes *c);
struct json_object *snapshot_changes_json(const struct snapshot_changes *c);
const char *snapshot_change_kind_name(enum snapshot_change_kind k);
const char *snapshot_entry_kind_name(enum snapshot_entry_kind k);

enum snapshot_plan_action {
	SP_APPLY,	/* the source still has the base state: take the fork's */
	SP_SAME,	/* the source already has the fork's state */
	SP_CONFLICT,	/* both changed it, differently */
	SP_SKIP,	/* never merged unless named: repository metadata, fifos, devices */
};

struct snapshot_plan {
	struct snapshot_changes sp_changes;	/* the fork's changes, filtered by paths */
	enum snapshot_plan_action *sp_action;	/* one per change */
	size_t sp_apply;
	size_t sp_same;
	size_t sp_conflicts;
	size_t sp_skipped;
};

/*
 * Plan merging the fork's changes (base -> fork) into src: only changes at
 * or below one of paths (relative, from snapshot_path_rel; npaths 0: all).
 * Skipped (SP_SKIP), not conflicts: a path with a ".git" component or a
 * ".gitattributes" below what a selector names (threat: a fork planting
 * hooks, config or filter attributes that the user's next git command in
 * the source runs), and fifos, sockets and device nodes.
 * Returns 0 or -1 with *cause.
 */
int snapshot_merge_plan(int basefd, int forkfd, int srcfd, const char *const *paths,
    size_t npaths, struct snapshot_plan *out, char **cause);
void snapshot_plan_free(struct snapshot_plan *p);
struct json_object *snapshot_conflicts_json(const struct snapshot_plan *p);
/* The SP_SKIP entries, one per skipped subtree: [{path, change, entries, reason}]. */
struct json_object *snapshot_skipped_json(const struct snapshot_plan *p);

/* 1 when rel has a ".git" component or ends in ".gitattributes". */
int snapshot_git_metadata(const char *rel);

/*
 * Copy the file or symlink rel of tree src (rel's parents opened without
 * symlinks, the entry never followed) to the same path beneath dst,
 * making the directories on the way (snapshot_parents). Writes take
 * dst_as's identity. Returns 1 copied, 0 when rel is absent from src,
 * -1 with *cause (also for anything that is not a file or a symlink).
 */
int snapshot_copy_path(int src, const char *rel, int dst, const struct snapshot_creds *dst_as,
    char **cause);

/* Make the directories on the way to rel beneath root (mode 0755, as as). 0 or -1. */
int snapshot_parents(int root, const char *rel, const struct snapshot_creds *as, char **cause);

/*
 * 1 when change c (base -> view) is one git records: the entry appears,
 * goes, changes kind, bytes, link target or executable bit; 0 when only
 * other permission bits changed. -1 with *cause.
 */
int snapshot_change_git_visible(int basefd, int viewfd, const struct snapshot_change *c,
    char **cause);

/*
 * Apply the SP_APPLY entries of plan to src, from fork, as one
 * transaction kept in the empty directory txnfd: every fork entry is
 * staged and every source entry it replaces is backed up, and the journal
 * (txn/journal.json) is on disk, before the source is touched. A failure
 * rolls the source back (snapshot_rollback). Set-user-ID and set-group-ID
 * bits never come along (threat: a fork planting a setuid binary the
 * user or root later runs). between(i) is called before
 * entry i is applied (tests pause there); it may be NULL.
 * Returns 0, or -1 with *cause (the source is then as it was, unless
 * *rollback_failed is set).
 */
int snapshot_apply(int forkfd, int srcfd, int txnfd, const struct snapshot_plan *plan,
    void (*between)(size_t i, void *arg), void *arg, int *rollback_failed, char **cause);

/*
 * Undo a transaction from its journal in txnfd: restore every entry the
 * journal names, newest first. Idempotent: run again after a crash in the
 * middle of it. Returns 0 or -1 with *cause.
 */
int snapshot_rollback(int srcfd, int txnfd, char **cause);

/* Journal state of a transaction directory: "applying", "committed", or NULL. */
int snapshot_txn_state(int txnfd, char *state, size_t len);

#endif
