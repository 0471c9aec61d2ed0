/*
 * mountview.c: the private mount view of a sandboxed run (see mountview.h).
 *
 * Threat: an agent of the same uid reaches services that run outside its
 * operation, and so outside its cgroup, seccomp filter and network table:
 * `tmux new-window` through the user's tmux server, `systemd-run --user`,
 * the D-Bus session bus, ssh ControlMaster sockets, gpg-agent, podman. All
 * of them listen on sockets under the user's runtime directories or /tmp.
 * It also reads credentials under $HOME, and rewrites $GENSEE_HOME to
 * loosen its next run. Landlock cannot hide a directory below one it
 * allows to be read, and cannot stop connect(2) to a pathname socket, so
 * the view is built with mounts, in namespaces only this tree sees.
 *
 * The user namespace maps only the caller's own uid and gid (setgroups is
 * denied, as the kernel requires for an unprivileged gid_map): inside it
 * the child has the capabilities to mount, and loses them at exec, since
 * its uid is not 0 there and no_new_privs keeps file capabilities from
 * granting any. Seccomp then refuses mount, unshare and setns, so the
 * agent cannot undo the view. Mount propagation is made private so that
 * nothing done here reaches the host, and no host mount event lands on top
 * of a hidden place.
 *
 * Abstract Unix sockets have no path to hide: Landlock's abstract-socket
 * scope (landlock.c) closes those.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "mountview.h"
#include "schema.h"
#include "util.h"

/*
 * Credentials under $HOME, hidden by default: an empty read-only directory
 * over a directory, /dev/null (read-only) over a file.
 */
static const char *const mountview_credentials[] = {
	".ssh", ".aws", ".azure", ".config/gcloud", ".config/gh", ".config/hub", ".kube",
	".gnupg", ".password-store", ".docker/config.json", ".git-credentials", ".netrc",
	".npmrc", ".pypirc", ".pgpass", ".gem/credentials", ".cargo/credentials",
	".cargo/credentials.toml", ".terraform.d/credentials.tfrc.json", ".vault-token",
};

static const struct schema_field mountview_fields[] = {
	{ "mode", SCHEMA_STRING, 0, 1, 32, 0 },
	{ "hide", SCHEMA_STRING_ARRAY, 0, 0, MOUNTVIEW_MAX_PATHS / 2, PATH_MAX - 1 },
	{ "protect_git", SCHEMA_BOOL, 0, 0, 0, 0 },
};

static const struct schema_field mountview_socket_fields[] = {
	{ "allow", SCHEMA_STRING_ARRAY, 0, 0, MOUNTVIEW_MAX_SOCKETS, PATH_MAX - 1 },
};

/* The policy spelling of a mode. */
const char *
mountview_mode_name(enum mountview_mode m)
{
	switch (m) {
	case MOUNTVIEW_OFF:
		return "off";
	case MOUNTVIEW_BEST_EFFORT:
		return "best_effort";
	case MOUNTVIEW_REQUIRED:
		return "required";
	}
	return "?";
}

/* Append "path: reason" to mv_skipped. */
static void
mountview_skip(struct mountview_plan *mv, const char *path, const char *reason)
{
	char buf[PATH_MAX + 128];

	snprintf(buf, sizeof(buf), "%s: %s", path, reason);
	json_object_array_add(mv->mv_skipped, json_object_new_string(buf));
}

/* Add a copy of path to list (of at most max), unless it is already there. */
static int
mountview_add(char **list, size_t *n, size_t max, const char *path, char **cause)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp(list[i], path) == 0)
			return 0;
	if (*n == max) {
		util_cause(cause, "mount view: too many paths");
		return -1;
	}
	if ((list[*n] = strdup(path)) == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	(*n)++;
	return 0;
}

/*
 * Plan to hide path if it exists now (canonical, so that the exposed paths
 * can be compared with it). One that appears later is covered by Landlock
 * (nothing outside the workspace is writable) but not hidden: said in
 * docs/threat-model.md.
 */
static int
mountview_plan_hide(struct mountview_plan *mv, const char *path, char **cause)
{
	char real[PATH_MAX];

	if (realpath(path, real) == NULL)
		return 0;
	if (strcmp(real, "/") == 0) {
		util_cause(cause, "mount view: refusing to hide /");
		return -1;
	}
	return mountview_add(mv->mv_hide, &mv->mv_nhide, nitems(mv->mv_hide), real, cause);
}

/* Plan to bind path back into the view if a hidden place covers it. */
static int
mountview_plan_expose(struct mountview_plan *mv, const char *path, char **cause)
{
	char real[PATH_MAX];

	if (path == NULL || realpath(path, real) == NULL)
		return 0;
	return mountview_add(mv->mv_expose, &mv->mv_nexpose, nitems(mv->mv_expose), real, cause);
}

/* An --allow-unix or linux.unix_sockets.allow entry: an existing Unix socket. */
static int
mountview_plan_socket(struct mountview_plan *mv, const char *path, const char *what,
    char **cause)
{
	char real[PATH_MAX];
	struct stat st;

	if (path[0] != '/') {
		util_cause(cause, "%s: %s: not an absolute path", what, path);
		return -1;
	}
	if (realpath(path, real) == NULL || stat(real, &st) != 0) {
		util_cause(cause, "%s: %s: %s", what, path, strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		util_cause(cause, "%s: %s: not a Unix socket", what, path);
		return -1;
	}
	if (mountview_add(mv->mv_sockets, &mv->mv_nsockets, nitems(mv->mv_sockets), real,
	    cause) != 0)
		return -1;
	return mountview_add(mv->mv_expose, &mv->mv_nexpose, nitems(mv->mv_expose), real, cause);
}

/* Read linux.mount_view and linux.unix_sockets (borrowed into hide and allow). */
static int
mountview_parse(struct json_object *policy, struct mountview_plan *mv, struct json_object **hide,
    struct json_object **allow, char **cause)
{
	struct json_object *linux_, *sec;
	struct schema_error err;
	const char *mode;

	*hide = *allow = NULL;
	if (policy == NULL || (linux_ = schema_child(policy, "linux")) == NULL)
		return 0;
	if (!json_object_is_type(linux_, json_type_object)) {
		util_cause(cause, "policy: linux must be an object");
		return -1;
	}
	if ((sec = schema_child(linux_, "unix_sockets")) != NULL) {
		if (schema_validate(sec, mountview_socket_fields, nitems(mountview_socket_fields),
		    &err) != 0) {
			util_cause(cause, "policy: linux.unix_sockets: %s", err.se_message);
			return -1;
		}
		*allow = schema_child(sec, "allow");
	}
	if ((sec = schema_child(linux_, "mount_view")) == NULL)
		return 0;
	if (schema_validate(sec, mountview_fields, nitems(mountview_fields), &err) != 0) {
		util_cause(cause, "policy: linux.mount_view: %s", err.se_message);
		return -1;
	}
	*hide = schema_child(sec, "hide");
	mv->mv_protect_git = schema_bool(sec, "protect_git", 1);
	if ((mode = schema_string(sec, "mode")) == NULL || strcmp(mode, "required") == 0)
		mv->mv_mode = MOUNTVIEW_REQUIRED;
	else if (strcmp(mode, "best_effort") == 0)
		mv->mv_mode = MOUNTVIEW_BEST_EFFORT;
	else if (strcmp(mode, "off") == 0)
		mv->mv_mode = MOUNTVIEW_OFF;
	else {
		util_cause(cause, "policy: linux.mount_view.mode: expected required, best_effort "
		    "or off, not %s", mode);
		return -1;
	}
	return 0;
}

/*
 * core.hooksPath of a repository's config file, if it sets one in a plain
 * [core] section (what git runs hooks from instead of .git/hooks): into
 * out, or "". Read, never run: the launcher parses the file itself.
 */
static void
mountview_git_hookspath(const char *config, char *out, size_t n)
{
	char *text = NULL;
	size_t len = 0;

	out[0] = '\0';
	if (util_read_path(config, 1u << 20, &text, &len) != 0)
		return;
	mountview_git_hookspath_in(text, out, n);
	free(text);
}

void
mountview_git_hookspath_in(char *text, char *out, size_t n)
{
	char *line, *save = NULL;
	int core = 0;

	out[0] = '\0';
	for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		while (*line == ' ' || *line == '\t')
			line++;
		if (*line == '[') {
			core = strncasecmp(line, "[core]", 6) == 0;
			continue;
		}
		if (!core || strncasecmp(line, "hookspath", 9) != 0)
			continue;
		char *v = line + 9;
		while (*v == ' ' || *v == '\t')
			v++;
		if (*v++ != '=')
			continue;
		while (*v == ' ' || *v == '\t')
			v++;
		size_t vl = strcspn(v, "\r#;");
		while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
			vl--;
		if (vl > 1 && v[0] == '"' && v[vl - 1] == '"') {
			v++;
			vl -= 2;
		}
		if (vl > 0 && vl < n) {
			memcpy(out, v, vl);
			out[vl] = '\0';
		}
	}
}

/*
 * Threat: git runs what a repository's metadata names, later and outside
 * the sandbox (the user's next commit or checkout): .git/hooks, and
 * .git/config (core.hooksPath, core.fsmonitor, filters, diff.external,
 * aliases, core.pager, core.sshCommand). In a workspace that is a
 * repository they are read-only in the view, and so is a core.hooksPath
 * inside the workspace (husky's .husky/_); a missing .git/hooks is made
 * empty first (git init makes it) so that nothing can be planted there.
 * Submodules' own config and hooks (.git/modules/NAME) the same.
 */
/* One git directory's config and hooks (and, for the top one, core.hooksPath). */
static int
mountview_plan_gitdir(struct mountview_plan *mv, const char *ws, const char *gitdir, int top,
    char **cause)
{
	char path[PATH_MAX + 32], hp[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/config", gitdir);
	if (lstat(path, &st) == 0 && mountview_add(mv->mv_git, &mv->mv_ngit, nitems(mv->mv_git),
	    path, cause) != 0)
		return -1;
	if (top) {
		mountview_git_hookspath(path, hp, sizeof(hp));
		if (hp[0] != '\0') {
			char full[2 * PATH_MAX + 2], real[PATH_MAX];
			snprintf(full, sizeof(full), "%s%s%s", hp[0] == '/' ? "" : ws,
			    hp[0] == '/' ? "" : "/", hp);
			if (realpath(full, real) != NULL && util_path_below(real, ws) &&
			    mountview_add(mv->mv_git, &mv->mv_ngit, nitems(mv->mv_git), real,
			    cause) != 0)
				return -1;
		}
	}
	snprintf(path, sizeof(path), "%s/hooks", gitdir);
	return mountview_add(mv->mv_git, &mv->mv_ngit, nitems(mv->mv_git), path, cause);
}

static int
mountview_plan_git(struct mountview_plan *mv, const char *ws, char **cause)
{
	char git[PATH_MAX], sub[PATH_MAX + 300];
	struct stat st;
	struct dirent *de;
	DIR *d;
	int n = 0, rc = 0;

	if ((size_t)snprintf(git, sizeof(git), "%s/.git", ws) >= sizeof(git) ||
	    lstat(git, &st) != 0 || !S_ISDIR(st.st_mode))
		return 0;	/* not a repository (a worktree's .git file points elsewhere) */
	if (mountview_plan_gitdir(mv, ws, git, 1, cause) != 0)
		return -1;
	/* Submodules' git directories: the first 16. */
	snprintf(sub, sizeof(sub), "%s/modules", git);
	if ((d = opendir(sub)) == NULL)
		return 0;
	while (rc == 0 && n < 16 && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/modules/%s", git, de->d_name);
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
			rc = mountview_plan_gitdir(mv, ws, sub, 0, cause);
			n++;
		}
	}
	closedir(d);
	return rc;
}

/* qsort: shorter paths first. */
static int
mountview_cmp_len(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);

	return la < lb ? -1 : la > lb;
}

/* Build the plan. */
int
mountview_plan_build(struct json_object *policy, const struct mountview_opts *o,
    struct mountview_plan *mv, char **cause)
{
	struct json_object *hide, *allow;
	char path[PATH_MAX];

	memset(mv, 0, sizeof(*mv));
	mv->mv_mode = MOUNTVIEW_REQUIRED;
	mv->mv_skipped = json_object_new_array();
	mv->mv_uid = o->mo_uid;
	mv->mv_gid = o->mo_gid;
	snprintf(mv->mv_uid_map, sizeof(mv->mv_uid_map), "%u %u 1\n", (unsigned)mv->mv_uid,
	    (unsigned)mv->mv_uid);
	snprintf(mv->mv_gid_map, sizeof(mv->mv_gid_map), "%u %u 1\n", (unsigned)mv->mv_gid,
	    (unsigned)mv->mv_gid);
	mv->mv_protect_git = 1;
	if (mountview_parse(policy, mv, &hide, &allow, cause) != 0)
		goto fail;
	if (mv->mv_mode == MOUNTVIEW_OFF) {
		if (o->mo_nallow_unix > 0 || (allow != NULL && json_object_array_length(allow) > 0))
			mountview_skip(mv, "unix_sockets.allow", "the mount view is off: every "
			    "socket is reachable");
		return 0;
	}
	/* The user's runtime directories: sockets of the services of the session. */
	if (o->mo_xdg_runtime_dir != NULL && o->mo_xdg_runtime_dir[0] == '/' &&
	    mountview_plan_hide(mv, o->mo_xdg_runtime_dir, cause) != 0)
		goto fail;
	snprintf(path, sizeof(path), "/run/user/%u", (unsigned)o->mo_uid);
	if (mountview_plan_hide(mv, path, cause) != 0 ||
	    mountview_plan_hide(mv, "/run/screen", cause) != 0)
		goto fail;
	/* /tmp: tmux, X11, ssh-agent and every other socket there; private instead. */
	mv->mv_private_tmp = 1;
	if (o->mo_home != NULL && o->mo_home[0] == '/') {
		for (size_t i = 0; i < nitems(mountview_credentials); i++) {
			snprintf(path, sizeof(path), "%s/%s", o->mo_home, mountview_credentials[i]);
			if (mountview_plan_hide(mv, path, cause) != 0)
				goto fail;
		}
	}
	for (size_t i = 0; hide != NULL && i < json_object_array_length(hide); i++) {
		const char *p = json_object_get_string(json_object_array_get_idx(hide, i));
		if (p[0] != '/') {
			util_cause(cause, "policy: linux.mount_view.hide: %s: not an absolute path",
			    p);
			goto fail;
		}
		if (mountview_plan_hide(mv, p, cause) != 0)
			goto fail;
	}
	/* Read-only: the policy the next run reads. */
	if (o->mo_gensee_home != NULL && realpath(o->mo_gensee_home, path) != NULL &&
	    mountview_add(mv->mv_readonly, &mv->mv_nreadonly, nitems(mv->mv_readonly), path,
	    cause) != 0)
		goto fail;
	/* What the run needs back: its workspace and gensee's own socket directory. */
	if (o->mo_workspace != NULL) {
		if (realpath(o->mo_workspace, path) != NULL &&
		    (mv->mv_workspace = strdup(path)) == NULL) {
			util_cause(cause, "out of memory");
			goto fail;
		}
		if (mountview_plan_expose(mv, o->mo_workspace, cause) != 0)
			goto fail;
		if (mv->mv_protect_git && mv->mv_workspace != NULL &&
		    mountview_plan_git(mv, mv->mv_workspace, cause) != 0)
			goto fail;
	}
	if (mountview_plan_expose(mv, o->mo_runtime_dir, cause) != 0)
		goto fail;
	for (size_t i = 0; allow != NULL && i < json_object_array_length(allow); i++)
		if (mountview_plan_socket(mv, json_object_get_string(
		    json_object_array_get_idx(allow, i)), "policy: linux.unix_sockets.allow",
		    cause) != 0)
			goto fail;
	for (size_t i = 0; i < o->mo_nallow_unix; i++)
		if (mountview_plan_socket(mv, o->mo_allow_unix[i], "--allow-unix", cause) != 0)
			goto fail;
	for (size_t i = 0; i < o->mo_noverlay && i < MOUNTVIEW_MAX_OVERLAYS; i++) {
		const struct mountview_overlay *ov = &o->mo_overlay[i];
		char opts[3 * PATH_MAX + 64];
		/* Comma, colon and backslash separate overlay options and layers. */
		if (strpbrk(ov->mov_target, ",:\\") != NULL || strpbrk(ov->mov_upper, ",:\\") != NULL ||
		    strpbrk(ov->mov_work, ",:\\") != NULL) {
			util_cause(cause, "mount view: %s: a ',', ':' or '\\' in an overlay path",
			    ov->mov_target);
			goto fail;
		}
		snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s,userxattr",
		    ov->mov_target, ov->mov_upper, ov->mov_work);
		if ((mv->mv_overlay[i] = strdup(ov->mov_target)) == NULL ||
		    (mv->mv_overlay_opts[i] = strdup(opts)) == NULL) {
			free(mv->mv_overlay[i]);
			util_cause(cause, "out of memory");
			goto fail;
		}
		mv->mv_noverlay++;
	}
	for (size_t i = 0; i < o->mo_nconfig; i++)
		if (mountview_add(mv->mv_config, &mv->mv_nconfig, nitems(mv->mv_config),
		    o->mo_config[i], cause) != 0)
			goto fail;
	/* Parents before children: mountview_apply binds a parent and its subtree at once. */
	qsort(mv->mv_expose, mv->mv_nexpose, sizeof(mv->mv_expose[0]), mountview_cmp_len);
	mv->mv_apply = 1;
	return 0;
fail:
	mountview_plan_free(mv);
	return -1;
}

/* Free what the plan holds. */
void
mountview_plan_free(struct mountview_plan *mv)
{
	for (size_t i = 0; i < mv->mv_nhide; i++)
		free(mv->mv_hide[i]);
	for (size_t i = 0; i < mv->mv_nreadonly; i++)
		free(mv->mv_readonly[i]);
	for (size_t i = 0; i < mv->mv_nexpose; i++)
		free(mv->mv_expose[i]);
	for (size_t i = 0; i < mv->mv_nsockets; i++)
		free(mv->mv_sockets[i]);
	for (size_t i = 0; i < mv->mv_noverlay; i++) {
		free(mv->mv_overlay[i]);
		free(mv->mv_overlay_opts[i]);
	}
	for (size_t i = 0; i < mv->mv_nconfig; i++)
		free(mv->mv_config[i]);
	for (size_t i = 0; i < mv->mv_ngit; i++)
		free(mv->mv_git[i]);
	free(mv->mv_workspace);
	json_object_put(mv->mv_skipped);
	memset(mv, 0, sizeof(*mv));
}

/* Write text to a /proc file of our own. */
static int
mountview_write_proc(const char *path, const char *text, char **cause)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || util_write_all(fd, text, strlen(text)) != 0) {
		util_cause(cause, "mount view: writing %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Enter a user namespace that maps only our own uid and gid, and a mount namespace. */
static int
mountview_unshare(const struct mountview_plan *mv, char **cause)
{
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
		util_cause(cause, "mount view: unshare(CLONE_NEWUSER|CLONE_NEWNS): %s "
		    "(unprivileged user namespaces may be off on this host)", strerror(errno));
		return -1;
	}
	if (mountview_write_proc("/proc/self/setgroups", "deny", cause) != 0 ||
	    mountview_write_proc("/proc/self/uid_map", mv->mv_uid_map, cause) != 0 ||
	    mountview_write_proc("/proc/self/gid_map", mv->mv_gid_map, cause) != 0)
		return -1;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		util_cause(cause, "mount view: making / private: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Attach a detached mount tree fd at path, read-only when ro. */
static int
mountview_attach(int fd, const char *path, int ro, char **cause)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };

	if (ro && mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) != 0) {
		util_cause(cause, "mount view: read-only %s: %s", path, strerror(errno));
		return -1;
	}
	if (move_mount(fd, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) != 0) {
		util_cause(cause, "mount view: mounting on %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Bind a read-only copy of src (a directory tree or a file) onto dst. */
static int
mountview_bind_ro(const char *src, const char *dst, char **cause)
{
	int fd = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	int rc;

	if (fd < 0) {
		util_cause(cause, "mount view: open_tree %s: %s", src, strerror(errno));
		return -1;
	}
	rc = mountview_attach(fd, dst, 1, cause);
	close(fd);
	return rc;
}

/* Hide one path: an empty tmpfs over a directory, read-only /dev/null over a file. */
static int
mountview_hide(const char *path, int *is_dir, char **cause)
{
	struct stat st;

	*is_dir = 0;
	if (stat(path, &st) != 0) {
		if (errno == ENOENT)
			return 0;	/* gone since the plan, or below another hidden place */
		util_cause(cause, "mount view: %s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return mountview_bind_ro("/dev/null", path, cause);
	if (mount("gensee-hidden", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "mode=0755,size=1m") != 0) {
		util_cause(cause, "mount view: hiding %s: %s", path, strerror(errno));
		return -1;
	}
	*is_dir = 1;
	return 0;
}

/* Make path's parent directories (inside a hidden tmpfs) and its mountpoint. */
static int
mountview_mountpoint(const char *path, int dir, char **cause)
{
	char buf[PATH_MAX];

	util_strlcpy(buf, path, sizeof(buf));
	for (char *p = buf + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
			util_cause(cause, "mount view: mkdir %s: %s", buf, strerror(errno));
			return -1;
		}
		*p = '/';
	}
	if (dir) {
		if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
			util_cause(cause, "mount view: mkdir %s: %s", buf, strerror(errno));
			return -1;
		}
		return 0;
	}
	int fd = open(buf, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		util_cause(cause, "mount view: creating %s: %s", buf, strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

/*
 * Does expose i need binding back: is it under the private /tmp or a
 * hidden directory (hidden_dir[h]), and not inside an expose already bound
 * back (bound[j], j < i, which brings it back with it)?
 */
static int
mountview_needs_bind(const struct mountview_plan *mv, size_t i, const int *hidden_dir,
    const int *bound)
{
	const char *p = mv->mv_expose[i];
	int covered = mv->mv_private_tmp && util_path_below(p, "/tmp");

	for (size_t h = 0; h < mv->mv_nhide && !covered; h++)
		covered = hidden_dir[h] && util_path_below(p, mv->mv_hide[h]);
	for (size_t j = 0; j < i && covered; j++)
		if (bound[j] && util_path_below(p, mv->mv_expose[j]))
			covered = 0;
	return covered;
}

/* Build the view in the child. */
int
mountview_apply(const struct mountview_plan *mv, struct json_object *warnings, char **cause)
{
	int xfd[MOUNTVIEW_MAX_PATHS], hidden_dir[MOUNTVIEW_MAX_PATHS];
	int bound[MOUNTVIEW_MAX_PATHS];
	int rc = -1;

	if (!mv->mv_apply)
		return 0;
	for (size_t i = 0; i < mv->mv_nexpose; i++) {
		xfd[i] = -1;
		bound[i] = 0;
	}
	if (mountview_unshare(mv, cause) != 0) {
		/*
		 * Only the namespaces may be missing in best_effort: nothing was
		 * changed yet. Never with agent state: Landlock lets the agent
		 * write its state directories, which without the overlay are
		 * the real ones (configuration included).
		 */
		if (mv->mv_mode == MOUNTVIEW_BEST_EFFORT && mv->mv_noverlay == 0 &&
		    warnings != NULL) {
			char w[512];
			snprintf(w, sizeof(w), "mount view: best_effort: not applied: %s", *cause);
			json_object_array_add(warnings, json_object_new_string(w));
			free(*cause);
			*cause = NULL;
			return 0;
		}
		return -1;
	}
	/*
	 * Copies of what is to be bound back, taken while it is still visible,
	 * and only of what will be covered: a copy never attached is dissolved
	 * when its fd closes, and that waits for an RCU grace period (about
	 * 1 ms here, on every launch). Which hidden places are directories is
	 * looked at now and again when hiding; if one changed in between (its
	 * owner raced us), the check below refuses the view.
	 */
	for (size_t h = 0; h < mv->mv_nhide; h++) {
		struct stat st;
		hidden_dir[h] = stat(mv->mv_hide[h], &st) == 0 && S_ISDIR(st.st_mode);
	}
	for (size_t i = 0; i < mv->mv_nexpose; i++) {
		if (!(bound[i] = mountview_needs_bind(mv, i, hidden_dir, bound)))
			continue;
		xfd[i] = open_tree(AT_FDCWD, mv->mv_expose[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
		    AT_RECURSIVE);
		if (xfd[i] < 0) {
			util_cause(cause, "mount view: open_tree %s: %s", mv->mv_expose[i],
			    strerror(errno));
			goto out;
		}
	}
	if (mv->mv_private_tmp && mount("gensee-tmp", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
	    "mode=1777") != 0) {
		util_cause(cause, "mount view: private /tmp: %s", strerror(errno));
		goto out;
	}
	/*
	 * Agent state: overlays first, so that what is hidden below them
	 * (a credential in ~/.codex, say) is hidden in the overlay too.
	 */
	for (size_t i = 0; i < mv->mv_noverlay; i++)
		if (mount("gensee-agent", mv->mv_overlay[i], "overlay", MS_NOSUID | MS_NODEV,
		    mv->mv_overlay_opts[i]) != 0) {
			util_cause(cause, "mount view: agent state overlay on %s: %s",
			    mv->mv_overlay[i], strerror(errno));
			goto out;
		}
	for (size_t i = 0; i < mv->mv_nhide; i++)
		if (mountview_hide(mv->mv_hide[i], &hidden_dir[i], cause) != 0)
			goto out;
	for (size_t i = 0; i < mv->mv_nexpose; i++) {
		const char *p = mv->mv_expose[i];
		struct stat st;

		bound[i] = 0;
		if (!mountview_needs_bind(mv, i, hidden_dir, bound))
			continue;
		/* Covered now but not copied before: it would be lost, so refuse. */
		if (xfd[i] < 0) {
			util_cause(cause, "mount view: %s: a hidden place above it changed "
			    "while the view was built", p);
			goto out;
		}
		if (fstat(xfd[i], &st) != 0 || mountview_mountpoint(p, S_ISDIR(st.st_mode),
		    cause) != 0 || mountview_attach(xfd[i], p, 0, cause) != 0)
			goto out;
		close(xfd[i]);
		xfd[i] = -1;
		bound[i] = 1;
	}
	/*
	 * A bound-back tree is a copy taken before anything was hidden: hide
	 * again what lies inside it (a $HOME inside a workspace in /tmp keeps
	 * its ~/.ssh hidden). The bound-back path itself stays visible.
	 */
	for (size_t i = 0; i < mv->mv_nhide; i++) {
		int inside = 0;
		for (size_t j = 0; j < mv->mv_nexpose && !inside; j++)
			inside = bound[j] && strcmp(mv->mv_hide[i], mv->mv_expose[j]) != 0 &&
			    util_path_below(mv->mv_hide[i], mv->mv_expose[j]);
		if (inside && mountview_hide(mv->mv_hide[i], &hidden_dir[i], cause) != 0)
			goto out;
	}
	/* Seal the hidden directories: nothing can be planted in them. */
	for (size_t i = 0; i < mv->mv_nhide; i++) {
		if (hidden_dir[i] && mount(NULL, mv->mv_hide[i], NULL, MS_REMOUNT | MS_RDONLY |
		    MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
			util_cause(cause, "mount view: sealing %s: %s", mv->mv_hide[i],
			    strerror(errno));
			goto out;
		}
	}
	for (size_t i = 0; i < mv->mv_nreadonly; i++)
		if (mountview_bind_ro(mv->mv_readonly[i], mv->mv_readonly[i], cause) != 0)
			goto out;
	/*
	 * The agent's configuration, read-only (EROFS to a write, EBUSY to a
	 * rename or unlink over it). What does not exist is left: created in
	 * the store, it is removed before the next run (agentprof_purge).
	 */
	for (size_t i = 0; i < mv->mv_nconfig; i++) {
		struct stat st;
		if (lstat(mv->mv_config[i], &st) != 0)
			continue;
		if (mountview_bind_ro(mv->mv_config[i], mv->mv_config[i], cause) != 0)
			goto out;
	}
	/* Repository metadata git runs later (mountview_plan_git); hooks made if missing. */
	for (size_t i = 0; i < mv->mv_ngit; i++) {
		struct stat st;
		const char *p = mv->mv_git[i];
		size_t pl = strlen(p);
		if (lstat(p, &st) != 0 && pl > 6 && strcmp(p + pl - 6, "/hooks") == 0 &&
		    mkdir(p, 0755) != 0 && errno != EEXIST) {
			util_cause(cause, "mount view: mkdir %s: %s", p, strerror(errno));
			goto out;
		}
		if (lstat(p, &st) != 0)
			continue;
		if (mountview_bind_ro(p, p, cause) != 0)
			goto out;
	}
	/* The old working directory may now be covered: enter the one in the view. */
	if (mv->mv_workspace != NULL && chdir(mv->mv_workspace) != 0) {
		util_cause(cause, "mount view: chdir %s: %s", mv->mv_workspace, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	for (size_t i = 0; i < mv->mv_nexpose; i++)
		if (xfd[i] >= 0)
			close(xfd[i]);
	return rc;
}

/* What the view hides, keeps read-only and lets through, for the record. */
struct json_object *
mountview_plan_record(const struct mountview_plan *mv)
{
	struct json_object *o = json_object_new_object(), *a;

	json_object_object_add(o, "mode", json_object_new_string(mountview_mode_name(mv->mv_mode)));
	json_object_object_add(o, "applied", json_object_new_boolean(mv->mv_apply));
	json_object_object_add(o, "private_tmp", json_object_new_boolean(mv->mv_private_tmp));
	a = json_object_new_array();
	for (size_t i = 0; i < mv->mv_nhide; i++)
		json_object_array_add(a, json_object_new_string(mv->mv_hide[i]));
	json_object_object_add(o, "hidden", a);
	a = json_object_new_array();
	for (size_t i = 0; i < mv->mv_nreadonly; i++)
		json_object_array_add(a, json_object_new_string(mv->mv_readonly[i]));
	json_object_object_add(o, "read_only", a);
	a = json_object_new_array();
	for (size_t i = 0; i < mv->mv_nsockets; i++)
		json_object_array_add(a, json_object_new_string(mv->mv_sockets[i]));
	json_object_object_add(o, "unix_sockets", a);
	a = json_object_new_array();
	for (size_t i = 0; i < mv->mv_noverlay; i++)
		json_object_array_add(a, json_object_new_string(mv->mv_overlay[i]));
	json_object_object_add(o, "agent_state", a);
	a = json_object_new_array();
	for (size_t i = 0; i < mv->mv_nconfig; i++)
		json_object_array_add(a, json_object_new_string(mv->mv_config[i]));
	json_object_object_add(o, "agent_config_read_only", a);
	a = json_object_new_array();
	for (size_t i = 0; i < mv->mv_ngit; i++)
		json_object_array_add(a, json_object_new_string(mv->mv_git[i]));
	json_object_object_add(o, "git_metadata_read_only", a);
	json_object_object_add(o, "skipped", mv->mv_skipped != NULL ?
	    json_object_get(mv->mv_skipped) : json_object_new_array());
	return o;
}
