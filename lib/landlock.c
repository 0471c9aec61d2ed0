/*
 * landlock.c: read-only and read-write path lists through Landlock.
 *
 * Landlock denies every handled access right outside the listed
 * hierarchies, so a sandboxed agent can only read (and execute) below the
 * read_only paths and only write below the read_write paths, whatever the
 * file modes say: a prompt-injected agent cannot rewrite ~/.bashrc or read
 * ~/.ssh unless the policy lists them. The rights handled are all the
 * filesystem rights of the kernel's ABI that this code knows (REFER from
 * ABI 2, TRUNCATE from 3, IOCTL_DEV from 5), so a newer kernel never
 * leaves a known right unhandled. The raw syscalls are used: libc has no
 * wrappers.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/landlock.h>

#include <json-c/json.h>

#include "landlock.h"
#include "schema.h"
#include "util.h"

/* Older uapi headers stop at ABI 2; the values are ABI and cannot change. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

/* The rights that make sense on a file that is not a directory. */
/* ABI 7: LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (Debian 12's uapi headers predate it). */
#define LANDLOCK_LOG_NEW_EXEC_ON (1U << 1)
#define LANDLOCK_FILE_ACCESS (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
	LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
/* What a read_only entry grants. */
#define LANDLOCK_RO_ACCESS (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | \
	LANDLOCK_ACCESS_FS_READ_DIR)

static const struct schema_field landlock_fields[] = {
	{ "mode", SCHEMA_STRING, 0, 1, 32, 0 },
	{ "read_only", SCHEMA_STRING_ARRAY, 0, 0, LANDLOCK_PLAN_MAX_PATHS, PATH_MAX - 1 },
	{ "read_write", SCHEMA_STRING_ARRAY, 0, 0, LANDLOCK_PLAN_MAX_PATHS, PATH_MAX - 1 },
	{ "default_paths", SCHEMA_BOOL, 0, 0, 0, 0 },
};

/*
 * The default lists (Codex's workspace-write, and more): the toolchain
 * reads everywhere (credentials and the user's sockets are hidden by the
 * mount view, not here); the agent writes its workspace, the private /tmp,
 * $TMPDIR, the caches package managers fill, and the devices every shell
 * opens for writing. Everything else, ~/.bashrc and ~/.gensee among it,
 * is read-only.
 */
static const char *const landlock_default_ro[] = { "/" };
static const char *const landlock_default_rw[] = {
	"/tmp", "/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts",
	"/dev/shm",
};
static const char *const landlock_default_caches[] = {
	".cache", ".npm", ".cargo/registry", ".cargo/git", "go/pkg/mod", ".m2/repository",
	".gradle/caches",
};

/* Ask the kernel for its Landlock ABI version. */
int
landlock_abi(const char **why)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	if (abi > 0)
		return abi > INT_MAX ? INT_MAX : (int)abi;
	if (errno == EOPNOTSUPP) {
		*why = "the kernel has Landlock but it is disabled at boot (not in lsm=)";
		return 0;
	}
	if (errno == ENOSYS) {
		*why = "the kernel has no Landlock";
		return 0;
	}
	/*
	 * Anything else (EPERM from a seccomp filter around us, e.g. a
	 * systemd unit's SystemCallFilter=) says nothing about the kernel.
	 * Threat: reading it as "no Landlock" would run agents unconfined
	 * where Landlock is required by default; -1 keeps it required, so
	 * the plan fails closed.
	 */
	*why = "landlock_create_ruleset was refused (a seccomp filter around this process?)";
	return -1;
}

/* The filesystem rights this code knows at ABI abi. */
uint64_t
landlock_handled_access(int abi)
{
	uint64_t a = 0;

	if (abi >= 1)
		a = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;
	if (abi >= 2)
		a |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		a |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		a |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return a;
}

/* The rights one rule grants, by list and by file type. */
uint64_t
landlock_path_access(uint64_t handled, int write, int dir)
{
	uint64_t a = write ? handled : (handled & LANDLOCK_RO_ACCESS);

	/* Directory-only rights on a file are EINVAL to landlock_add_rule. */
	if (!dir)
		a &= LANDLOCK_FILE_ACCESS;
	return a;
}

/* The policy spelling of a mode. */
const char *
landlock_mode_name(enum landlock_plan_mode m)
{
	switch (m) {
	case LANDLOCK_PLAN_OFF:
		return "off";
	case LANDLOCK_PLAN_BEST_EFFORT:
		return "best_effort";
	case LANDLOCK_PLAN_REQUIRED:
		return "required";
	}
	return "?";
}

/* Append "what path: reason" to lp_skipped. */
static void
landlock_skip(struct landlock_plan *lp, const char *what, const char *path, const char *reason)
{
	char buf[PATH_MAX + 128];

	snprintf(buf, sizeof(buf), "%s%s%s: %s", what, path != NULL ? " path " : "",
	    path != NULL ? path : "", reason);
	json_object_array_add(lp->lp_skipped, json_object_new_string(buf));
}

/* Check one path and add it to the plan (or to lp_skipped). */
static int
landlock_plan_add(struct landlock_plan *lp, const char *path, int write, int optional,
    char **cause)
{
	const char *what = write ? "read_write" : "read_only";
	struct stat st;
	int fd;

	if (path[0] != '/') {
		util_cause(cause, "landlock: %s path %s: not an absolute path", what, path);
		return -1;
	}
	if (lp->lp_npaths == nitems(lp->lp_paths)) {
		util_cause(cause, "landlock: too many paths");
		return -1;
	}
	if ((fd = open(path, O_PATH | O_CLOEXEC)) < 0 || fstat(fd, &st) != 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		if (optional)
			return 0;
		if (lp->lp_mode == LANDLOCK_PLAN_REQUIRED) {
			util_cause(cause, "landlock: required, but %s path %s: %s", what, path,
			    strerror(e));
			return -1;
		}
		landlock_skip(lp, what, path, strerror(e));
		return 0;
	}
	close(fd);
	struct landlock_plan_path *p = &lp->lp_paths[lp->lp_npaths];
	if ((p->lpp_path = strdup(path)) == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	p->lpp_write = write;
	p->lpp_dir = S_ISDIR(st.st_mode);
	p->lpp_optional = optional;
	lp->lp_npaths++;
	return 0;
}

/* Read linux.landlock: mode and the two lists (borrowed into ro/rw). */
static int
landlock_parse(struct json_object *policy, struct landlock_plan *lp, struct json_object **ro,
    struct json_object **rw, char **cause)
{
	struct json_object *linux_, *ll;
	struct schema_error err;
	const char *mode;

	*ro = *rw = NULL;
	lp->lp_mode_default = 1;
	lp->lp_default_paths = 1;
	if (policy == NULL || (linux_ = schema_child(policy, "linux")) == NULL)
		return 0;
	if (!json_object_is_type(linux_, json_type_object)) {
		util_cause(cause, "policy: linux must be an object");
		return -1;
	}
	if ((ll = schema_child(linux_, "landlock")) == NULL)
		return 0;
	if (schema_validate(ll, landlock_fields, nitems(landlock_fields), &err) != 0) {
		util_cause(cause, "policy: linux.landlock: %s", err.se_message);
		return -1;
	}
	*ro = schema_child(ll, "read_only");
	*rw = schema_child(ll, "read_write");
	lp->lp_default_paths = schema_bool(ll, "default_paths", 1);
	/* Relative paths would depend on where gensee happens to be started. */
	for (int w = 0; w < 2; w++) {
		struct json_object *a = w ? *rw : *ro;
		for (size_t i = 0; a != NULL && i < json_object_array_length(a); i++) {
			const char *path = json_object_get_string(json_object_array_get_idx(a, i));
			if (path[0] != '/') {
				util_cause(cause, "policy: linux.landlock.%s: %s: not an absolute "
				    "path", w ? "read_write" : "read_only", path);
				return -1;
			}
		}
	}
	/* A section that lists paths means them: no mode is required mode. */
	mode = schema_string(ll, "mode");
	if (mode == NULL && (*ro == NULL || json_object_array_length(*ro) == 0) &&
	    (*rw == NULL || json_object_array_length(*rw) == 0))
		return 0;	/* no paths of its own: the default mode */
	lp->lp_mode_default = 0;
	if (mode == NULL || strcmp(mode, "required") == 0)
		lp->lp_mode = LANDLOCK_PLAN_REQUIRED;
	else if (strcmp(mode, "best_effort") == 0)
		lp->lp_mode = LANDLOCK_PLAN_BEST_EFFORT;
	else if (strcmp(mode, "off") == 0)
		lp->lp_mode = LANDLOCK_PLAN_OFF;
	else {
		util_cause(cause, "policy: linux.landlock.mode: expected required, best_effort or "
		    "off, not %s", mode);
		return -1;
	}
	return 0;
}

/* Add the default lists to the plan. */
static int
landlock_plan_defaults(struct landlock_plan *lp, const struct landlock_opts *o, char **cause)
{
	char path[PATH_MAX];

	for (size_t i = 0; i < nitems(landlock_default_ro); i++)
		if (landlock_plan_add(lp, landlock_default_ro[i], 0, 1, cause) != 0)
			return -1;
	for (size_t i = 0; i < nitems(landlock_default_rw); i++)
		if (landlock_plan_add(lp, landlock_default_rw[i], 1, 1, cause) != 0)
			return -1;
	/* A run started in / would otherwise make the whole host writable. */
	if (o != NULL && o->lo_workspace != NULL) {
		if (realpath(o->lo_workspace, path) != NULL && strcmp(path, "/") == 0)
			landlock_skip(lp, "workspace", "/", "the root directory is never made "
			    "writable; start the run in a project directory");
		else if (landlock_plan_add(lp, o->lo_workspace, 1, 1, cause) != 0)
			return -1;
	}
	if (o != NULL && o->lo_tmpdir != NULL && o->lo_tmpdir[0] == '/' &&
	    landlock_plan_add(lp, o->lo_tmpdir, 1, 1, cause) != 0)
		return -1;
	for (size_t i = 0; o != NULL && o->lo_home != NULL && o->lo_home[0] == '/' &&
	    i < nitems(landlock_default_caches); i++) {
		snprintf(path, sizeof(path), "%s/%s", o->lo_home, landlock_default_caches[i]);
		if (landlock_plan_add(lp, path, 1, 1, cause) != 0)
			return -1;
	}
	return 0;
}

/* Build the plan from the policy section and the command line paths. */
int
landlock_plan_build(struct json_object *policy, const struct landlock_opts *o, int abi,
    const char *abi_why, struct landlock_plan *lp, char **cause)
{
	struct json_object *ro, *rw;

	memset(lp, 0, sizeof(*lp));
	lp->lp_mode = LANDLOCK_PLAN_OFF;
	lp->lp_abi = abi;
	lp->lp_skipped = json_object_new_array();
	if (landlock_parse(policy, lp, &ro, &rw, cause) != 0)
		goto fail;
	/* On by default: required where the kernel has it, best effort where not. */
	if (lp->lp_mode_default)
		lp->lp_mode = abi != 0 ? LANDLOCK_PLAN_REQUIRED : LANDLOCK_PLAN_BEST_EFFORT;
	/* Paths on the command line ask for Landlock, even over mode "off". */
	if (o != NULL && (o->lo_nro > 0 || o->lo_nrw > 0) &&
	    lp->lp_mode != LANDLOCK_PLAN_BEST_EFFORT) {
		lp->lp_mode = LANDLOCK_PLAN_REQUIRED;
		lp->lp_mode_default = 0;
	}
	if (lp->lp_mode == LANDLOCK_PLAN_OFF)
		return 0;
	if (abi <= 0) {
		if (lp->lp_mode == LANDLOCK_PLAN_REQUIRED) {
			util_cause(cause, "landlock: required but %s", abi_why);
			goto fail;
		}
		landlock_skip(lp, "everything", NULL, abi_why);
		return 0;
	}
	lp->lp_handled = landlock_handled_access(abi);
	/*
	 * Scopes: an agent cannot signal processes outside its sandbox (its
	 * launcher, the user's shell) nor connect to abstract Unix sockets
	 * they made (X11, D-Bus, tmux-like servers), which have no path for
	 * the mount view to hide. ptrace of processes outside the sandbox
	 * (and so /proc/PID/mem, pidfd_getfd) is refused by Landlock at every
	 * ABI.
	 */
	if (abi >= 6)
		lp->lp_scoped = LANDLOCK_PLAN_SCOPE_ABSTRACT_UNIX | LANDLOCK_PLAN_SCOPE_SIGNAL;
	else
		landlock_skip(lp, "scopes", NULL, "signal and abstract-socket scoping need "
		    "Landlock ABI 6");
	if (lp->lp_default_paths && landlock_plan_defaults(lp, o, cause) != 0)
		goto fail;
	for (size_t i = 0; ro != NULL && i < json_object_array_length(ro); i++)
		if (landlock_plan_add(lp, json_object_get_string(json_object_array_get_idx(ro, i)),
		    0, 0, cause) != 0)
			goto fail;
	for (size_t i = 0; rw != NULL && i < json_object_array_length(rw); i++)
		if (landlock_plan_add(lp, json_object_get_string(json_object_array_get_idx(rw, i)),
		    1, 0, cause) != 0)
			goto fail;
	for (size_t i = 0; o != NULL && i < o->lo_nro; i++)
		if (landlock_plan_add(lp, o->lo_ro[i], 0, 0, cause) != 0)
			goto fail;
	for (size_t i = 0; o != NULL && i < o->lo_nrw; i++)
		if (landlock_plan_add(lp, o->lo_rw[i], 1, 0, cause) != 0)
			goto fail;
	lp->lp_apply = 1;
	return 0;
fail:
	landlock_plan_free(lp);
	return -1;
}

/* Free the paths and the skipped list of a plan. */
void
landlock_plan_free(struct landlock_plan *lp)
{
	for (size_t i = 0; i < lp->lp_npaths; i++)
		free(lp->lp_paths[i].lpp_path);
	lp->lp_npaths = 0;
	json_object_put(lp->lp_skipped);
	lp->lp_skipped = NULL;
	lp->lp_apply = 0;
}

/* Add the rule of one planned path to ruleset rfd; 0 or an errno. */
static int
landlock_rule_add(int rfd, const struct landlock_plan *lp, const struct landlock_plan_path *p)
{
	struct landlock_path_beneath_attr pb;
	struct stat st;
	int fd, e = 0;

	/*
	 * Opened again here, not inherited from the plan: the rule is on
	 * whatever the path names now, as the agent will see it.
	 */
	if ((fd = open(p->lpp_path, O_PATH | O_CLOEXEC)) < 0)
		return errno;
	if (fstat(fd, &st) != 0) {
		e = errno;
		close(fd);
		return e;
	}
	memset(&pb, 0, sizeof(pb));
	pb.allowed_access = landlock_path_access(lp->lp_handled, p->lpp_write,
	    S_ISDIR(st.st_mode));
	pb.parent_fd = fd;
	if (syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) != 0)
		e = errno;
	close(fd);
	return e;
}

/* Create the ruleset of a plan and add its rules, in the child. */
int
landlock_plan_prepare(const struct landlock_plan *lp, int *rfd, struct json_object *warnings,
    char **cause)
{
	/* The ABI 6 layout; older uapi headers stop at handled_access_fs. */
	struct {
		uint64_t handled_access_fs;
		uint64_t handled_access_net;	/* ABI 4; 0: the network is nftables' */
		uint64_t scoped;		/* ABI 6 */
	} attr;
	size_t attr_size = lp->lp_abi >= 6 ? sizeof(attr) : sizeof(attr.handled_access_fs);
	int r, e;

	*rfd = -1;
	if (!lp->lp_apply)
		return 0;
	memset(&attr, 0, sizeof(attr));
	attr.handled_access_fs = lp->lp_handled;
	attr.scoped = lp->lp_scoped;
	r = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
	if (r < 0) {
		util_cause(cause, "landlock: landlock_create_ruleset: %s", strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < lp->lp_npaths; i++) {
		const struct landlock_plan_path *p = &lp->lp_paths[i];
		const char *what = p->lpp_write ? "read_write" : "read_only";

		if ((e = landlock_rule_add(r, lp, p)) == 0 || (p->lpp_optional && e == ENOENT))
			continue;
		if (lp->lp_mode == LANDLOCK_PLAN_REQUIRED) {
			util_cause(cause, "landlock: required, but %s path %s: %s", what,
			    p->lpp_path, strerror(e));
			close(r);
			return -1;
		}
		if (warnings != NULL) {
			char w[PATH_MAX + 128];
			snprintf(w, sizeof(w), "landlock: best_effort: %s path %s skipped: %s",
			    what, p->lpp_path, strerror(e));
			json_object_array_add(warnings, json_object_new_string(w));
		}
	}
	*rfd = r;
	return 0;
}

/*
 * Enforce the ruleset on the calling thread and close it. The domain logs
 * its denials after exec too (ABI 7), so that sensord can report the ones
 * the agent meets; by default a domain is silent once its creator has run
 * exec, which is at once here. Older kernels refuse the flag: no log then.
 */
int
landlock_plan_restrict(int rfd, char **cause)
{
	if (syscall(SYS_landlock_restrict_self, rfd, LANDLOCK_LOG_NEW_EXEC_ON) != 0 &&
	    (errno != EINVAL || syscall(SYS_landlock_restrict_self, rfd, 0) != 0)) {
		util_cause(cause, "landlock: landlock_restrict_self: %s", strerror(errno));
		return -1;
	}
	close(rfd);
	return 0;
}

/* Warnings about a plan that cannot work as meant. */
void
landlock_plan_warnings(const struct landlock_plan *lp, const char *workspace,
    struct json_object *warnings)
{
	char w[2 * PATH_MAX + 160], real[PATH_MAX];
	int writable = 0;

	if (!lp->lp_apply)
		return;
	if (lp->lp_npaths == 0) {
		snprintf(w, sizeof(w), "landlock: %s with no paths: every file access is refused, "
		    "the agent cannot even be executed", landlock_mode_name(lp->lp_mode));
		json_object_array_add(warnings, json_object_new_string(w));
		return;
	}
	if (workspace == NULL || realpath(workspace, real) == NULL || strcmp(real, "/") == 0)
		return;
	for (size_t i = 0; i < lp->lp_npaths && !writable; i++)
		writable = lp->lp_paths[i].lpp_write &&
		    util_path_below(real, lp->lp_paths[i].lpp_path);
	if (!writable) {
		snprintf(w, sizeof(w), "landlock: the workspace %s is below no read_write path: the "
		    "agent cannot write its own files (add --linux-landlock-rw %s)", real, real);
		json_object_array_add(warnings, json_object_new_string(w));
	}
}

/* What the plan applies and skips, for the operation record. */
struct json_object *
landlock_plan_record(const struct landlock_plan *lp)
{
	struct json_object *o = json_object_new_object();
	struct json_object *ro = json_object_new_array(), *rw = json_object_new_array();

	for (size_t i = 0; i < lp->lp_npaths; i++)
		json_object_array_add(lp->lp_paths[i].lpp_write ? rw : ro,
		    json_object_new_string(lp->lp_paths[i].lpp_path));
	struct json_object *scoped = json_object_new_array();

	if (lp->lp_scoped & LANDLOCK_PLAN_SCOPE_ABSTRACT_UNIX)
		json_object_array_add(scoped, json_object_new_string("abstract_unix_socket"));
	if (lp->lp_scoped & LANDLOCK_PLAN_SCOPE_SIGNAL)
		json_object_array_add(scoped, json_object_new_string("signal"));
	json_object_object_add(o, "mode", json_object_new_string(landlock_mode_name(lp->lp_mode)));
	json_object_object_add(o, "mode_source", json_object_new_string(lp->lp_mode_default ?
	    "default" : "policy"));
	json_object_object_add(o, "abi", json_object_new_int(lp->lp_abi));
	json_object_object_add(o, "default_paths", json_object_new_boolean(lp->lp_apply &&
	    lp->lp_default_paths));
	json_object_object_add(o, "scoped", scoped);
	json_object_object_add(o, "applied", json_object_new_boolean(lp->lp_apply));
	json_object_object_add(o, "read_only", ro);
	json_object_object_add(o, "read_write", rw);
	json_object_object_add(o, "skipped", lp->lp_skipped != NULL ?
	    json_object_get(lp->lp_skipped) : json_object_new_array());
	return o;
}

/*
 * A daemon's own confinement (gensee-httpmediatord): read-only access
 * (files and directory listings, no execute) below paths, nothing else at
 * all, and at ABI 6 no abstract Unix sockets or signals outside the
 * domain. Landlock is required: without it this fails.
 */
int
landlock_restrict_read_only(const char *const *paths, size_t n, char **cause)
{
	struct {
		uint64_t handled_access_fs;
		uint64_t handled_access_net;
		uint64_t scoped;
	} attr;
	const char *why = NULL;
	int abi = landlock_abi(&why), rfd;

	if (abi <= 0) {
		util_cause(cause, "landlock: %s", why);
		return -1;
	}
	memset(&attr, 0, sizeof(attr));
	attr.handled_access_fs = landlock_handled_access(abi);
	if (abi >= 6)
		attr.scoped = LANDLOCK_PLAN_SCOPE_ABSTRACT_UNIX | LANDLOCK_PLAN_SCOPE_SIGNAL;
	rfd = (int)syscall(SYS_landlock_create_ruleset, &attr,
	    abi >= 6 ? sizeof(attr) : sizeof(attr.handled_access_fs), 0);
	if (rfd < 0) {
		util_cause(cause, "landlock: landlock_create_ruleset: %s", strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct landlock_path_beneath_attr pb;
		struct stat st;
		int fd = open(paths[i], O_PATH | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) != 0) {
			util_cause(cause, "landlock: %s: %s", paths[i], strerror(errno));
			if (fd >= 0)
				close(fd);
			close(rfd);
			return -1;
		}
		memset(&pb, 0, sizeof(pb));
		pb.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE |
		    (S_ISDIR(st.st_mode) ? LANDLOCK_ACCESS_FS_READ_DIR : 0);
		pb.parent_fd = fd;
		if (syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) != 0) {
			util_cause(cause, "landlock: %s: %s", paths[i], strerror(errno));
			close(fd);
			close(rfd);
			return -1;
		}
		close(fd);
	}
	return landlock_plan_restrict(rfd, cause);
}
