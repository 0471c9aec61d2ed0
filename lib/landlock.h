/*
 * landlock.h: the Landlock filesystem plan of a sandboxed run.
 *
 * The plan is built by the launcher before it forks (policy errors and
 * unmeetable `required` plans stop the run before anything starts); the
 * held child prepares the ruleset from it (that is where the paths are
 * opened) and restricts itself just before exec.
 */
#ifndef GENSEE_LANDLOCK_H
#define GENSEE_LANDLOCK_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

enum landlock_plan_mode {
	LANDLOCK_PLAN_OFF,
	LANDLOCK_PLAN_BEST_EFFORT,
	LANDLOCK_PLAN_REQUIRED,
};

#define LANDLOCK_PLAN_MAX_PATHS 256

/*
 * Paths from the command line (--linux-landlock-ro/-rw) and what the
 * default lists are made of, borrowed (NULL when unknown).
 */
struct landlock_opts {
	const char *lo_ro[LANDLOCK_PLAN_MAX_PATHS];
	size_t lo_nro;
	const char *lo_rw[LANDLOCK_PLAN_MAX_PATHS];
	size_t lo_nrw;
	const char *lo_workspace;	/* the run's directory: writable */
	const char *lo_home;		/* $HOME: its caches are writable */
	const char *lo_tmpdir;		/* $TMPDIR: writable */
};

struct landlock_plan_path {
	char *lpp_path;
	int lpp_write;		/* a read_write entry */
	int lpp_dir;		/* a directory when planned */
	int lpp_optional;	/* a default path: skipped quietly when missing */
};

/* Landlock scopes (ABI 6), in ruleset_attr.scoped; stable ABI values. */
#define LANDLOCK_PLAN_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define LANDLOCK_PLAN_SCOPE_SIGNAL (1ULL << 1)

struct landlock_plan {
	enum landlock_plan_mode lp_mode;
	int lp_abi;		/* the kernel's ABI, 0 when it has no Landlock */
	int lp_apply;		/* the child restricts itself */
	int lp_mode_default;	/* no policy or option chose the mode */
	int lp_default_paths;	/* the built-in lists are in lp_paths */
	uint64_t lp_handled;	/* handled_access_fs at lp_abi */
	uint64_t lp_scoped;	/* LANDLOCK_PLAN_SCOPE_* at lp_abi */
	struct landlock_plan_path lp_paths[2 * LANDLOCK_PLAN_MAX_PATHS];
	size_t lp_npaths;
	struct json_object *lp_skipped;	/* strings: what was not applied, and why */
};

/*
 * The highest Landlock ABI of the running kernel, or 0 with *why set to a
 * static reason ("the kernel has no Landlock", ...), or -1 with *why when
 * the call was refused for another reason (a seccomp filter): unknown,
 * so a default plan stays required and fails closed.
 */
int landlock_abi(const char **why);
/* Every filesystem access right that ABI abi knows (handled_access_fs). */
uint64_t landlock_handled_access(int abi);
/* The rights a path gets: read (and execute) only, or everything handled. */
uint64_t landlock_path_access(uint64_t handled, int write, int dir);
const char *landlock_mode_name(enum landlock_plan_mode m);

/*
 * Build the plan from linux.landlock of policy and the command line paths.
 * abi and abi_why are landlock_abi()'s answer (a parameter so that tests
 * can stand in for a kernel without Landlock). Landlock is on unless the
 * policy says mode "off": with no mode anywhere it is required where the
 * kernel has Landlock and best_effort where it has not; a section that
 * lists paths, and paths on the command line, mean required unless the
 * policy says best_effort. Unless linux.landlock.default_paths is false
 * the lists start with the defaults: read everywhere, write the workspace,
 * /tmp, $TMPDIR, the usual caches and /dev/null and friends. In required
 * mode a missing Landlock or a listed path that cannot be opened is an
 * error; in best_effort mode it is appended to lp_skipped. A missing
 * default path is skipped either way.
 */
int landlock_plan_build(struct json_object *policy, const struct landlock_opts *o, int abi,
    const char *abi_why, struct landlock_plan *lp, char **cause);
void landlock_plan_free(struct landlock_plan *lp);

/*
 * In the child: create the ruleset and add a rule for every planned path.
 * Returns the ruleset fd (close-on-exec) or -1 when nothing is to be
 * applied (*rfd = -1). A path that cannot be opened now fails required mode
 * and is appended to warnings (may be NULL) in best_effort mode.
 */
int landlock_plan_prepare(const struct landlock_plan *lp, int *rfd,
    struct json_object *warnings, char **cause);
/* In the child, after no_new_privs: enforce the prepared ruleset; irreversible. */
int landlock_plan_restrict(int rfd, char **cause);

/*
 * Append to warnings (strings) what makes a plan unable to work as meant:
 * no paths at all (every access refused, the agent cannot even exec), or a
 * workspace below no read_write path.
 */
void landlock_plan_warnings(const struct landlock_plan *lp, const char *workspace,
    struct json_object *warnings);

/*
 * Restrict the calling thread (and what it starts later) to reading below
 * paths and nothing else; no_new_privs must be set. Requires Landlock.
 */
int landlock_restrict_read_only(const char *const *paths, size_t n, char **cause);

/* The operation record's host_controls.landlock. */
struct json_object *landlock_plan_record(const struct landlock_plan *lp);

#endif
