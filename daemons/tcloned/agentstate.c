/*
 * agentstate.c: agent profiles (lib/agentprof.h) in tclone runs: the
 * agent's state directory is an overlay whose upper layer is its store in
 * the user's ~/.gensee/agents/NAME, and its configuration is read-only,
 * as under `gensee run --sandbox linux` (docs/agents.md).
 *
 * Trust model: tcloned is root and every path here is the user's to
 * change, at any moment. So what can be done as the user is: the stores
 * are made and planted configuration purged by a child that has become
 * the user (tagent_prepare). What needs root (the overlay mount, in the
 * run's own mount namespace) uses only directories opened with the
 * user's filesystem identity and no symlink anywhere on their paths
 * (openat2 RESOLVE_NO_SYMLINKS), checked to be the user's; the mount
 * names them by their fds, so nothing swapped in later is mounted.
 * Threat answered: an upper directory that is a link to /etc would have
 * made the agent's writes root's writes there. Configuration is bound
 * read-only through O_PATH fds opened without following a last link.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "agentprof.h"
#include "log.h"
#include "mountview.h"
#include "schema.h"
#include "tcloned.h"
#include "util.h"

/*
 * The caller's choice of profile, as the CLI read it from its policy and
 * environment: {"profiles": false} (linux.agents.profiles), "name" (--agent),
 * "custom" (linux.agents.custom) and "env" (CODEX_HOME, CLAUDE_CONFIG_DIR,
 * GEMINI_CLI_HOME, GEMINI_HOME). Checked here as the CLI checks them:
 * tcloned acts on them as root.
 */
int
tagent_check(struct json_object *agent, char **cause)
{
	static const char *const vars[] = { "CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME",
	    "GEMINI_HOME" };
	struct json_object *v;

	if (json_object_object_get_ex(agent, "profiles", &v) &&
	    !json_object_is_type(v, json_type_boolean)) {
		util_cause(cause, "profiles is not a boolean");
		return -1;
	}
	if (json_object_object_get_ex(agent, "name", &v) && (!json_object_is_type(v,
	    json_type_string) || json_object_get_string_len(v) == 0 ||
	    json_object_get_string_len(v) > AGENTPROF_NAME_MAX)) {
		util_cause(cause, "name is not a profile name");
		return -1;
	}
	if (json_object_object_get_ex(agent, "custom", &v)) {
		if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) > 16) {
			util_cause(cause, "custom is not a list of at most 16 profiles");
			return -1;
		}
		for (size_t i = 0; i < json_object_array_length(v); i++)
			if (agentprof_custom_check(json_object_array_get_idx(v, i), "custom",
			    cause) != 0)
				return -1;
	}
	if (json_object_object_get_ex(agent, "env", &v)) {
		if (!json_object_is_type(v, json_type_object)) {
			util_cause(cause, "env is not an object");
			return -1;
		}
		json_object_object_foreach(v, k, val) {
			int known = 0;
			for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
				known |= strcmp(k, vars[i]) == 0;
			const char *s = json_object_is_type(val, json_type_string) ?
			    json_object_get_string(val) : NULL;
			/* Overlay options are ','- and ':'-separated: such a path could name layers. */
			if (!known || s == NULL || s[0] != '/' || strlen(s) >= PATH_MAX - 64 ||
			    strpbrk(s, ",:\\") != NULL || strstr(s, "/..") != NULL) {
				util_cause(cause, "env %s: not a state variable with an absolute path",
				    k);
				return -1;
			}
		}
	}
	return 0;
}

int
tagent_plan(const struct trun *r, struct agentprof *p, int *argi, char **cause)
{
	struct passwd *pw = getpwuid(r->tr_uid);
	struct json_object *agent = schema_child(r->tr_rec, "agent");
	struct json_object *custom = schema_child(agent, "custom"), *env = schema_child(agent, "env");
	const char *forced = schema_string(agent, "name");
	char name[AGENTPROF_NAME_MAX + 1], how[PATH_MAX + 64], ghome[PATH_MAX];
	char *cmd[3] = { NULL, NULL, NULL };
	size_t na = r->tr_argv != NULL ? json_object_array_length(r->tr_argv) : 0;
	struct stat st;
	int rc;

	*argi = -1;
	/* An administrator turned profiles off (linux.agents.profiles false). */
	if (agent != NULL && !schema_bool(agent, "profiles", 1))
		return 0;
	/* No home of its own (a system user's /nonexistent): no state, no profile. */
	if (na == 0 || pw == NULL || pw->pw_dir[0] != '/' || stat(pw->pw_dir, &st) != 0 ||
	    !S_ISDIR(st.st_mode) || st.st_uid != r->tr_uid)
		return 0;
	cmd[0] = (char *)json_object_get_string(json_object_array_get_idx(r->tr_argv, 0));
	if (na > 1)
		cmd[1] = (char *)json_object_get_string(json_object_array_get_idx(r->tr_argv, 1));
	if ((rc = agentprof_detect(cmd, forced, custom, name, argi, how, sizeof(how), cause)) != 1)
		return rc < 0 ? -1 : 0;
	snprintf(ghome, sizeof(ghome), "%s/.gensee", pw->pw_dir);
	/* The caller's variables (CODEX_HOME ...), not tcloned's fixed environment. */
	if (agentprof_load(name, custom, p, cause) != 0 ||
	    agentprof_locate_with(p, pw->pw_dir, ghome, env, cause) != 0)
		return -1;
	util_strlcpy(p->ap_how, how, sizeof(p->ap_how));
	return p->ap_nstate > 0;
}

/*
 * Threat: a CODEX_HOME (or a custom profile's state) naming a directory
 * that is not the user's, which root would then overlay in the agent's
 * view. Only the user's own directories are state (missing ones, with
 * missing_ok, are made by the user next).
 */
static int
tagent_state_owned(const struct trun *r, const struct agentprof *p, int missing_ok, char **cause)
{
	for (size_t i = 0; i < p->ap_nstate; i++) {
		struct stat st;
		if (stat(p->ap_state[i].as_path, &st) != 0 && errno == ENOENT && missing_ok)
			continue;
		if (stat(p->ap_state[i].as_path, &st) != 0 || !S_ISDIR(st.st_mode) ||
		    st.st_uid != r->tr_uid) {
			util_cause(cause, "agent profile %s: %s is not a directory of the user's",
			    p->ap_name, p->ap_state[i].as_path);
			return -1;
		}
	}
	return 0;
}

/* fn(p) in a child that has become r's user: 0, or -1 (it failed, or could not run). */
static int
tagent_as_user(const struct trun *r, const struct agentprof *p,
    int (*fn)(const struct agentprof *, char **))
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		char *why = NULL;
		if (setgroups(0, NULL) != 0 || setresgid(r->tr_gid, r->tr_gid, r->tr_gid) != 0 ||
		    setresuid(r->tr_uid, r->tr_uid, r->tr_uid) != 0)
			_exit(2);
		_exit(fn(p, &why) == 0 ? 0 : 1);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int
tagent_prepare(const struct trun *r, const struct agentprof *p, char **cause)
{
	if (tagent_state_owned(r, p, 1, cause) != 0)
		return -1;
	if (tagent_as_user(r, p, agentprof_prepare) != 0) {
		util_cause(cause, "agent profile %s: its store in %s could not be made as the user",
		    p->ap_name, p->ap_state[0].as_store);
		return -1;
	}
	if (tagent_state_owned(r, p, 0, cause) != 0)
		return -1;
	return 0;
}

/*
 * The run ended (its tree killed): the configuration it planted in its
 * store is removed now, not only at the next start, so nothing that reads
 * the store in between (a `gensee run` of the same agent, the user's own
 * tools, a backup restored as the real directory) finds it.
 */
void
tagent_finish(const struct trun *r)
{
	static struct agentprof ap;	/* large */
	char *cause = NULL;
	int argi;

	if (r->tr_observe_only || tagent_plan(r, &ap, &argi, &cause) <= 0) {
		free(cause);
		return;
	}
	if (tagent_state_owned(r, &ap, 1, &cause) != 0 ||
	    tagent_as_user(r, &ap, agentprof_purge) != 0) {
		log_warnx("%s: agent profile %s: its store was not purged at the run's end%s%s "
		    "(the next start purges it)", r->tr_id, ap.ap_name, cause != NULL ? ": " : "",
		    cause != NULL ? cause : "");
		free(cause);
	}
}

/* A directory of uid's, opened with its identity, no link on the way: an O_PATH fd, or -1. */
static int
tagent_open_dir(const char *path, uid_t uid)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	struct stat st;
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

static int tagent_bind_ro(int fd);

int
tagent_mount(const struct agentprof *p, uid_t uid, gid_t gid, const char **what)
{
	for (size_t i = 0; i < p->ap_nstate; i++) {
		const struct agentprof_state *s = &p->ap_state[i];
		char up[PATH_MAX + 16], wk[PATH_MAX + 16], opts[256];
		int fd[3], rc = 0;
		snprintf(up, sizeof(up), "%s/upper", s->as_store);
		snprintf(wk, sizeof(wk), "%s/work", s->as_store);
		/* The user's filesystem identity for the opens: only what the user reaches. */
		setfsgid(gid);
		setfsuid(uid);
		fd[0] = tagent_open_dir(s->as_path, uid);
		fd[1] = tagent_open_dir(up, uid);
		fd[2] = tagent_open_dir(wk, uid);
		setfsuid(0);
		setfsgid(0);
		if (fd[0] < 0 || fd[1] < 0 || fd[2] < 0) {
			*what = fd[0] < 0 ? s->as_path : fd[1] < 0 ? up : wk;
			rc = -1;
		} else {
			char target[64];
			/* userxattr: the same layer format as gensee run's unprivileged overlay. */
			snprintf(opts, sizeof(opts), "lowerdir=/proc/self/fd/%d,upperdir=/proc/self/fd/%d,"
			    "workdir=/proc/self/fd/%d,userxattr", fd[0], fd[1], fd[2]);
			snprintf(target, sizeof(target), "/proc/self/fd/%d", fd[0]);
			if (mount("gensee-agent", target, "overlay", MS_NOSUID | MS_NODEV, opts) != 0) {
				*what = s->as_path;
				rc = -1;
			}
		}
		for (int k = 0; k < 3; k++)
			if (fd[k] >= 0)
				close(fd[k]);
		if (rc != 0)
			return -1;
		/* Its configuration, read-only where it exists (never through a last link). */
		for (size_t c = 0; c < p->ap_nconfig; c++) {
			char path[PATH_MAX + 160];
			struct stat st;
			snprintf(path, sizeof(path), "%s/%s", s->as_path, p->ap_config[c]);
			int cfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0)
				continue;	/* missing: the next run's purge removes what is made */
			if (fstat(cfd, &st) != 0 || S_ISLNK(st.st_mode)) {
				close(cfd);
				continue;
			}
			rc = tagent_bind_ro(cfd);
			close(cfd);
			if (rc != 0) {
				*what = p->ap_config[c];
				return -1;
			}
		}
	}
	return 0;
}

/* Bind fd's file or tree read-only onto itself: 0, or -1. */
static int
tagent_bind_ro(int fd)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };
	int tfd = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	int rc = tfd < 0 || mount_setattr(tfd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) != 0 ||
	    move_mount(tfd, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0;

	if (tfd >= 0)
		close(tfd);
	return rc ? -1 : 0;
}

/* openat2 beneath dfd, no symlink on the way or at the end: an O_PATH fd, or -1. */
static int
tagent_beneath(int dfd, const char *rel, int flags)
{
	struct open_how how = { .flags = (uint64_t)flags | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS };

	return (int)syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
}

/*
 * One git directory (gd, beneath ws) of the snapshot: its config and hooks
 * read-only. A missing hooks directory is made first (as the user), so the
 * agent cannot make one and plant hooks in it.
 */
static int
tagent_protect_gitdir(int wfd, const char *gd, uid_t uid, gid_t gid, const char **what)
{
	static const char *const leaves[] = { "config", "hooks" };
	char rel[PATH_MAX];
	int gfd = tagent_beneath(wfd, gd, O_PATH | O_DIRECTORY);

	if (gfd < 0)
		return 0;	/* no repository (or .git is a file: a worktree's pointer) */
	if (mkdirat(gfd, "hooks", 0755) == 0 && fchownat(gfd, "hooks", uid, gid,
	    AT_SYMLINK_NOFOLLOW) != 0) {
		close(gfd);
		*what = "hooks";
		return -1;
	}
	close(gfd);
	for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++) {
		struct stat st;
		int fd;

		snprintf(rel, sizeof(rel), "%s/%s", gd, leaves[i]);
		if ((fd = tagent_beneath(wfd, rel, O_PATH)) < 0)
			continue;
		if (fstat(fd, &st) == 0 && !S_ISLNK(st.st_mode) && tagent_bind_ro(fd) != 0) {
			*what = leaves[i];
			close(fd);
			return -1;
		}
		close(fd);
	}
	return 0;
}

/*
 * Threat: git runs what the repository names, later and outside the run
 * (the user's next commit or checkout in a kept copy, or a merge that
 * takes .git when asked): .git/config, .git/hooks (made if missing), a
 * core.hooksPath inside the workspace (husky's .husky/_), and each
 * submodule's .git/modules/NAME the same. All read-only in the agent's
 * view; linux.mount_view.protect_git: false turns it off.
 */
int
tagent_protect_git(const char *ws, uid_t uid, gid_t gid, const char **what)
{
	char hp[PATH_MAX], rel[PATH_MAX];
	int wfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC), fd, rv = -1;
	DIR *d;

	if (wfd < 0)
		return 0;
	if (tagent_protect_gitdir(wfd, ".git", uid, gid, what) != 0)
		goto out;
	/* core.hooksPath, read (never run) from the config through its fd. */
	hp[0] = '\0';
	if ((fd = tagent_beneath(wfd, ".git/config", O_RDONLY)) >= 0) {
		char *text = NULL;
		size_t len;
		if (util_read_fd(fd, 1u << 20, &text, &len) == 0)
			mountview_git_hookspath_in(text, hp, sizeof(hp));
		free(text);
		close(fd);
		const char *h = hp;
		size_t wl = strlen(ws);
		if (h[0] == '/' && strncmp(h, ws, wl) == 0 && h[wl] == '/')
			h += wl + 1;
		if (h[0] != '\0' && h[0] != '/' && strstr(h, "..") == NULL &&
		    (fd = tagent_beneath(wfd, h, O_PATH)) >= 0) {
			struct stat st;
			if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && tagent_bind_ro(fd) != 0) {
				*what = "core.hooksPath";
				close(fd);
				goto out;
			}
			close(fd);
		}
	}
	/* Submodules keep their repositories in .git/modules/NAME. */
	if ((fd = tagent_beneath(wfd, ".git/modules", O_RDONLY | O_DIRECTORY)) >= 0 &&
	    (d = fdopendir(fd)) != NULL) {
		struct dirent *de;
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(rel, sizeof(rel), ".git/modules/%s", de->d_name);
			if (tagent_protect_gitdir(wfd, rel, uid, gid, what) != 0) {
				closedir(d);
				goto out;
			}
		}
		closedir(d);
	} else if (fd >= 0) {
		close(fd);
	}
	rv = 0;
out:
	close(wfd);
	return rv;
}
