/*
 * gitmerge.c: `merge --git`, made and applied without running anything a
 * run controls.
 *
 * Threat: git started in a fork's repository reads the fork's .git/config
 * (diff.external, filter.*.clean/smudge, core.fsmonitor, core.hooksPath,
 * include.path), its .gitattributes and its hooks: an agent could make a
 * host-started merge run its code, or hide a changed file from the patch
 * (a diff.external that prints nothing made a merge "nothing_to_merge").
 * So git never sees a run's repository. tcloned copies what changed (the
 * snapshot's own delta, base -> fork) into a private work directory
 * beneath the authority root, and git runs there, as the user, on those
 * copies only:
 *
 *   repo/      an empty repository tcloned writes (GIT_DIR): its config
 *              is ours, and its info/attributes unsets every attribute
 *              that converts bytes or names a driver;
 *   a/ b/      the tracked changed files as the base and the fork have them;
 *   s0/ s/     the source's versions of those files, before and after git apply;
 *   ib/ if/    copies of the base's and the fork's .git/index, read by git
 *              ls-files as data: which files git tracks.
 *
 * The config git reads: system (GIT_CONFIG_NOSYSTEM), global
 * (GIT_CONFIG_GLOBAL=/dev/null; HOME, XDG_CONFIG_HOME nonexistent), the
 * repository's (repo/config: ours), and our -c options. The attributes:
 * system (GIT_ATTR_NOSYSTEM), core.attributesFile=/dev/null,
 * repo/info/attributes (ours, which git ranks above all others), and a
 * .gitattributes among the copies (when the fork changed one): ours unsets
 * every attribute such a file could set to change bytes or pick a driver,
 * and a driver or filter would need config to run anything. diff, apply
 * and ls-files run no hooks (core.hooksPath=/dev/null besides); diff runs
 * with --no-ext-diff --no-textconv. git starts in the work directory
 * (fchdir before it becomes the user), whose ancestors the user cannot
 * search: it reaches no other state. Git is the host's /usr/bin/git, never
 * a run's.
 *
 * Then the patch's own file list (git apply --numstat) must be exactly
 * the tracked files whose change git records, or the merge is refused
 * (merge_incomplete): a changed tracked file is never left out silently.
 * Untracked changes are listed in left_out.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "gitmerge.h"
#include "log.h"
#include "safefs.h"
#include "snapshot.h"
#include "tcloned.h"
#include "util.h"

#define GIT_TIMEOUT_MS (120 * 1000)
#define GIT_OUT_MAX (64u * 1024 * 1024)	/* a patch, a file list */
#define GIT_FSIZE_MAX (1024L * 1024 * 1024)	/* any file git writes */
#define GIT_REJ_MAX (64u * 1024)		/* hunks shown per conflicting file */

/* Unspecified, whatever a copied .gitattributes says: no conversion, no driver. */
static const char git_attributes[] =
    "* !text !eol !crlf !filter !diff !merge !ident !working-tree-encoding !binary\n";
static const char git_config[] = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n";

/*
 * Run /usr/bin/git ARGS in the work directory as user. index: a
 * GIT_INDEX_FILE relative to the work directory, or NULL. *out and *err
 * (NUL-terminated) get its stdout and stderr, *status its exit status.
 * Returns 0, or -1 with *cause when git could not be run or waited for.
 */
static int
git_run(int work, const struct snapshot_creds *u, const char *const *args, const char *index,
    char **out, size_t *outlen, char **err, int *status, char **cause)
{
	static const char *const pre[] = { "git", "-c", "core.hooksPath=/dev/null",
	    "-c", "core.fsmonitor=false", "-c", "core.attributesFile=/dev/null",
	    "-c", "core.autocrlf=false", "-c", "core.safecrlf=false", "-c", "core.symlinks=true",
	    "-c", "core.quotepath=off" };
	const char *argv[48], *envp[20];
	char ix[PATH_MAX + 32];
	size_t n = 0, e = 0;
	int mo = -1, me = -1, rv = -1, st = 0;
	size_t errlen;

	*out = *err = NULL;
	*outlen = 0;
	for (size_t i = 0; i < nitems(pre); i++)
		argv[n++] = pre[i];
	for (size_t i = 0; args[i] != NULL && n + 1 < nitems(argv); i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	envp[e++] = "PATH=/usr/bin:/bin";
	envp[e++] = "HOME=/nonexistent";
	envp[e++] = "XDG_CONFIG_HOME=/nonexistent";
	envp[e++] = "LC_ALL=C";
	envp[e++] = "GIT_CONFIG_NOSYSTEM=1";
	envp[e++] = "GIT_CONFIG_SYSTEM=/dev/null";
	envp[e++] = "GIT_CONFIG_GLOBAL=/dev/null";
	envp[e++] = "GIT_ATTR_NOSYSTEM=1";
	envp[e++] = "GIT_DIR=repo";
	envp[e++] = "GIT_WORK_TREE=.";
	envp[e++] = "GIT_NO_REPLACE_OBJECTS=1";
	envp[e++] = "GIT_TERMINAL_PROMPT=0";
	envp[e++] = "GIT_OPTIONAL_LOCKS=0";
	envp[e++] = "GIT_PAGER=cat";
	if (index != NULL) {
		snprintf(ix, sizeof(ix), "GIT_INDEX_FILE=%s", index);
		envp[e++] = ix;
	}
	envp[e] = NULL;
	if ((mo = memfd_create("git-out", MFD_CLOEXEC)) < 0 ||
	    (me = memfd_create("git-err", MFD_CLOEXEC)) < 0) {
		util_cause(cause, "memfd: %s", strerror(errno));
		goto out;
	}
	pid_t pid = fork();
	if (pid < 0) {
		util_cause(cause, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		sigset_t none;
		struct rlimit fl = { GIT_FSIZE_MAX, GIT_FSIZE_MAX };
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* The work dir first (as root), then the user, then nothing more to gain. */
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(mo, 1) < 0 || dup2(me, 2) < 0 ||
		    fchdir(work) != 0 || setrlimit(RLIMIT_FSIZE, &fl) != 0 ||
		    setgroups(0, NULL) != 0 || setresgid(u->sc_gid, u->sc_gid, u->sc_gid) != 0 ||
		    setresuid(u->sc_uid, u->sc_uid, u->sc_uid) != 0 ||
		    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
			_exit(126);
		syscall(SYS_close_range, 3U, ~0U, 0U);
		umask(022);
		execve("/usr/bin/git", (char *const *)argv, (char *const *)envp);
		_exit(127);
	}
	int64_t deadline = util_monotonic_ms() + GIT_TIMEOUT_MS;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			util_cause(cause, "waitpid: %s", strerror(errno));
			goto out;
		}
		if (util_monotonic_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			util_cause(cause, "git did not finish in %d s", GIT_TIMEOUT_MS / 1000);
			goto out;
		}
		usleep(5000);
	}
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (lseek(mo, 0, SEEK_SET) != 0 || lseek(me, 0, SEEK_SET) != 0 ||
	    util_read_fd(mo, GIT_OUT_MAX, out, outlen) != 0 ||
	    util_read_fd(me, GIT_OUT_MAX, err, &errlen) != 0) {
		util_cause(cause, "git output: %s", strerror(errno));
		free(*out);
		*out = NULL;
		goto out;
	}
	if (*status == 126 || *status == 127) {
		util_cause(cause, "cannot run /usr/bin/git as uid %u (%d)", (unsigned)u->sc_uid,
		    *status);
		goto out;
	}
	rv = 0;
out:
	if (rv != 0) {
		free(*out);
		free(*err);
		*out = *err = NULL;
	}
	if (mo >= 0)
		close(mo);
	if (me >= 0)
		close(me);
	return rv;
}

/* -- sorted path sets -- */

struct pathset {
	char **ps_v;
	size_t ps_n, ps_cap;
};

static int
pathset_add(struct pathset *s, const char *p, size_t len)
{
	if (s->ps_n == s->ps_cap) {
		size_t nc = s->ps_cap ? s->ps_cap * 2 : 64;
		char **nv = realloc(s->ps_v, nc * sizeof(*nv));
		if (nv == NULL)
			return -1;
		s->ps_v = nv;
		s->ps_cap = nc;
	}
	if ((s->ps_v[s->ps_n] = strndup(p, len)) == NULL)
		return -1;
	s->ps_n++;
	return 0;
}

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
pathset_sort(struct pathset *s)
{
	if (s->ps_n > 0)
		qsort(s->ps_v, s->ps_n, sizeof(*s->ps_v), str_cmp);
}

static int
pathset_has(const struct pathset *s, const char *p)
{
	return s->ps_n > 0 && bsearch(&p, s->ps_v, s->ps_n, sizeof(*s->ps_v), str_cmp) != NULL;
}

static void
pathset_free(struct pathset *s)
{
	for (size_t i = 0; i < s->ps_n; i++)
		free(s->ps_v[i]);
	free(s->ps_v);
	memset(s, 0, sizeof(*s));
}

/* -- the work directory -- */

static int
mkdir_user(int dfd, const char *name, const struct snapshot_creds *u, char **cause)
{
	if (mkdirat(dfd, name, 0700) != 0 ||
	    fchownat(dfd, name, u->sc_uid, u->sc_gid, AT_SYMLINK_NOFOLLOW) != 0) {
		util_cause(cause, "%s: %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

static int
write_user(int dfd, const char *name, const void *buf, size_t len, const struct snapshot_creds *u,
    char **cause)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0 || util_write_all(fd, buf, len) != 0 || fchown(fd, u->sc_uid, u->sc_gid) != 0) {
		util_cause(cause, "%s: %s", name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int
work_make(int tcfd, struct gitmerge *gm, const struct snapshot_creds *u, char **cause)
{
	static const char *const dirs[] = { "repo", "repo/objects", "repo/refs", "repo/info",
	    "a", "b", "s0", "s", "ib", "if" };
	char rel[128];
	int gw;

	if (safefs_mkdirs(tcfd, "gitwork", 0700) != 0 || (gw = safefs_opendir(tcfd, "gitwork")) < 0) {
		util_cause(cause, "gitwork: %s", strerror(errno));
		return -1;
	}
	int rv = mkdir_user(gw, gm->gm_name, u, cause);
	if (rv == 0 && (gm->gm_work = safefs_opendir(gw, gm->gm_name)) < 0) {
		util_cause(cause, "gitwork/%s: %s", gm->gm_name, strerror(errno));
		rv = -1;
	}
	close(gw);
	for (size_t i = 0; rv == 0 && i < nitems(dirs); i++)
		rv = mkdir_user(gm->gm_work, dirs[i], u, cause);
	if (rv == 0)
		rv = write_user(gm->gm_work, "repo/HEAD", "ref: refs/heads/main\n", 21, u, cause);
	if (rv == 0)
		rv = write_user(gm->gm_work, "repo/config", git_config, strlen(git_config), u, cause);
	if (rv == 0)
		rv = write_user(gm->gm_work, "repo/info/attributes", git_attributes,
		    strlen(git_attributes), u, cause);
	if (rv == 0 && ((gm->gm_s0 = safefs_opendir(gm->gm_work, "s0")) < 0 ||
	    (gm->gm_s = safefs_opendir(gm->gm_work, "s")) < 0)) {
		snprintf(rel, sizeof(rel), "gitwork/%s/s", gm->gm_name);
		util_cause(cause, "%s: %s", rel, strerror(errno));
		rv = -1;
	}
	return rv;
}

/*
 * The paths one .git/index tracks (copied into dir, read by ls-files as
 * data). A tree without an index adds nothing; an index git cannot read
 * alone (a split index, say) refuses the merge.
 */
static int
tracked_add(struct gitmerge *gm, int treefd, const char *dir, const struct snapshot_creds *u,
    struct pathset *set, char **cause)
{
	int dfd = safefs_opendir(gm->gm_work, dir), h;
	char ix[32], *out = NULL, *err = NULL;
	size_t len;
	int st;
	const char *args[] = { "ls-files", "-z", "--cached", NULL };

	if (dfd < 0) {
		util_cause(cause, "%s: %s", dir, strerror(errno));
		return -1;
	}
	h = snapshot_copy_path(treefd, ".git/index", dfd, u, cause);
	close(dfd);
	if (h <= 0)
		return h;
	snprintf(ix, sizeof(ix), "%s/.git/index", dir);
	if (git_run(gm->gm_work, u, args, ix, &out, &len, &err, &st, cause) != 0)
		return -1;
	if (st != 0) {
		util_cause(cause, "git ls-files cannot read the repository's index (%d): %.300s", st,
		    err);
		free(out);
		free(err);
		return -1;
	}
	for (size_t o = 0; o < len;) {
		size_t n = strnlen(out + o, len - o);
		if (n > 0 && pathset_add(set, out + o, n) != 0) {
			util_cause(cause, "out of memory");
			free(out);
			free(err);
			return -1;
		}
		o += n + 1;
	}
	free(out);
	free(err);
	return 0;
}

static int
is_file_or_link(enum snapshot_entry_kind k)
{
	return k == SE_FILE || k == SE_LINK;
}

static void
left_out(struct gitmerge *gm, const struct snapshot_change *c, const char *reason)
{
	if (gm->gm_left_out_total++ >= GITMERGE_LEFT_OUT_MAX)
		return;
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(c->sc_path));
	json_object_object_add(o, "change", json_object_new_string(
	    snapshot_change_kind_name(c->sc_kind)));
	json_object_object_add(o, "reason", json_object_new_string(reason));
	json_object_array_add(gm->gm_left_out, o);
}

/* Copy the entry path of tree from into the work directory's dir. */
static int
copy_into(struct gitmerge *gm, const char *dir, int from, const char *path,
    const struct snapshot_creds *u, char **cause)
{
	int dfd = safefs_opendir(gm->gm_work, dir), rv;

	if (dfd < 0) {
		util_cause(cause, "%s: %s", dir, strerror(errno));
		return -1;
	}
	rv = snapshot_copy_path(from, path, dfd, u, cause);
	close(dfd);
	return rv;
}

/*
 * The fork's changes git records, sorted out of the snapshot's delta:
 * tracked files (in the base's or the fork's index) whose change git
 * records go to a/, b/, s0/ and s/; the rest is left out, and said.
 * A path with a ".git" component is the repository itself, not a file
 * of it: neither merged nor listed.
 */
static int
sort_changes(struct gitmerge *gm, int basefd, int forkfd, int srcfd,
    const struct snapshot_changes *ch, const struct pathset *tracked, struct pathset *want,
    struct pathset *insrc, const struct snapshot_creds *u, char **cause)
{
	for (size_t i = 0; i < ch->scs_n; i++) {
		const struct snapshot_change *c = &ch->scs_v[i];
		const char *p = c->sc_path;
		int v;

		if (!is_file_or_link(c->sc_before) && !is_file_or_link(c->sc_after) &&
		    c->sc_before != SE_OTHER && c->sc_after != SE_OTHER)
			continue;	/* a directory: git records only what is in it */
		if (strcmp(p, ".git") == 0 || strncmp(p, ".git/", 5) == 0 ||
		    strstr(p, "/.git/") != NULL || (strlen(p) > 5 &&
		    strcmp(p + strlen(p) - 5, "/.git") == 0))
			continue;
		if (!pathset_has(tracked, p)) {
			left_out(gm, c, "untracked: git add it in the fork, or merge it with --paths");
			continue;
		}
		if (c->sc_before == SE_OTHER || c->sc_after == SE_OTHER) {
			left_out(gm, c, "not a file or a symlink: git cannot record it");
			continue;
		}
		if ((v = snapshot_change_git_visible(basefd, forkfd, c, cause)) < 0)
			return -1;
		if (v == 0) {
			left_out(gm, c, "permission bits only: git records only the executable bit");
			continue;
		}
		if (pathset_add(want, p, strlen(p)) != 0) {
			util_cause(cause, "out of memory");
			return -1;
		}
		if ((is_file_or_link(c->sc_before) && copy_into(gm, "a", basefd, p, u, cause) < 0) ||
		    (is_file_or_link(c->sc_after) && copy_into(gm, "b", forkfd, p, u, cause) < 0))
			return -1;
		/* s/ from s0/, not from the source again: both must start the same. */
		int h = copy_into(gm, "s0", srcfd, p, u, cause);
		if (h < 0 || (h == 1 && copy_into(gm, "s", gm->gm_s0, p, u, cause) < 0))
			return -1;
		if (h == 1 && pathset_add(insrc, p, strlen(p)) != 0) {
			util_cause(cause, "out of memory");
			return -1;
		}
	}
	pathset_sort(want);
	pathset_sort(insrc);
	return 0;
}

/* The paths a patch changes, as git apply reads it (--numstat -z, no renames). */
static int
patch_paths(const char *out, size_t len, struct pathset *got, char **cause)
{
	for (size_t o = 0; o < len;) {
		size_t n = strnlen(out + o, len - o);
		const char *t1 = memchr(out + o, '\t', n), *t2;
		if (t1 == NULL || (t2 = memchr(t1 + 1, '\t', n - (size_t)(t1 + 1 - (out + o)))) ==
		    NULL || t2 + 1 == out + o + n) {
			util_cause(cause, "git apply --numstat: unexpected output");
			return -1;
		}
		if (pathset_add(got, t2 + 1, (size_t)(out + o + n - (t2 + 1))) != 0) {
			util_cause(cause, "out of memory");
			return -1;
		}
		o += n + 1;
	}
	pathset_sort(got);
	return 0;
}

/* The first path of one set missing from the other, or NULL when they are equal. */
static const char *
pathset_differs(const struct pathset *a, const struct pathset *b, int *in_a)
{
	for (size_t i = 0; i < a->ps_n; i++)
		if (!pathset_has(b, a->ps_v[i])) {
			*in_a = 1;
			return a->ps_v[i];
		}
	for (size_t i = 0; i < b->ps_n; i++)
		if (!pathset_has(a, b->ps_v[i])) {
			*in_a = 0;
			return b->ps_v[i];
		}
	return NULL;
}

static struct json_object *
conflict_find(struct json_object *a, const char *path)
{
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		struct json_object *c = json_object_array_get_idx(a, i), *p;
		if (json_object_object_get_ex(c, "path", &p) &&
		    strcmp(json_object_get_string(p), path) == 0)
			return c;
	}
	return NULL;
}

static void
conflict_add(struct json_object *a, const char *path, const char *reason)
{
	if (conflict_find(a, path) != NULL)
		return;
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "reason", json_object_new_string(reason));
	json_object_array_add(a, o);
}

/*
 * The patch does not apply to the source: which files, why, and the hunks
 * that conflict. git apply --check says which files ("error: patch
 * failed: s/PATH:LINE", "error: s/PATH: already exists ..."); git apply
 * --reject on the copies writes each refused hunk to s/PATH.rej.
 */
static struct json_object *
conflicts_of(struct gitmerge *gm, const struct snapshot_creds *u, const char *checkerr)
{
	struct json_object *a = json_object_new_array();
	const char *args[] = { "apply", "--reject", "--directory=s", "patch", NULL };
	char *copy = strdup(checkerr != NULL ? checkerr : ""), *line, *save = NULL, *cause = NULL;
	char *out = NULL, *err = NULL;
	size_t len;
	int st;

	for (line = strtok_r(copy, "\n", &save); copy != NULL && line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char path[PATH_MAX], *c;
		const char *why;
		if (strncmp(line, "error: ", 7) != 0)
			continue;
		line += 7;
		if (strncmp(line, "patch failed: ", 14) == 0) {
			util_strlcpy(path, line + 14, sizeof(path));
			if ((c = strrchr(path, ':')) != NULL)
				*c = '\0';
			why = "the source changed the same lines";
		} else if ((c = strstr(line, ": ")) != NULL) {
			util_strlcpy(path, line, sizeof(path));
			path[c - line] = '\0';
			why = c + 2;
		} else {
			continue;
		}
		if (strncmp(path, "s/", 2) != 0)
			continue;
		if (strcmp(why, "patch does not apply") == 0)
			why = "the source changed the same lines";
		else if (strstr(why, "already exists") != NULL)
			why = "the source already has a file there";
		else if (strstr(why, "No such file") != NULL || strstr(why, "does not exist") != NULL)
			why = "the source no longer has this file";
		conflict_add(a, path + 2, why);
	}
	free(copy);
	if (git_run(gm->gm_work, u, args, NULL, &out, &len, &err, &st, &cause) != 0) {
		log_warnx("git apply --reject: %s", cause);
		free(cause);
	}
	free(out);
	free(err);
	for (size_t i = 0; i < gm->gm_npaths; i++) {
		char rej[PATH_MAX + 8], *buf = NULL;
		size_t n;
		snprintf(rej, sizeof(rej), "%s.rej", gm->gm_paths[i]);
		int fd = safefs_openat(gm->gm_s, rej, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
		if (fd < 0)
			continue;
		struct stat fst;
		if (fstat(fd, &fst) == 0 && S_ISREG(fst.st_mode) &&
		    (size_t)fst.st_size <= GIT_REJ_MAX && util_read_fd(fd, GIT_REJ_MAX, &buf, &n) == 0) {
			/* The first line is git's own header ("diff a/P b/P\t(rejected hunks)"). */
			const char *h = strchr(buf, '\n');
			conflict_add(a, gm->gm_paths[i], "the source changed the same lines");
			json_object_object_add(conflict_find(a, gm->gm_paths[i]), "hunks",
			    json_object_new_string(h != NULL ? h + 1 : buf));
		}
		free(buf);
		close(fd);
	}
	if (json_object_array_length(a) == 0)
		conflict_add(a, "", "git apply refused the patch and named no file");
	return a;
}

int
gitmerge_prepare(int tcfd, const char *name, int basefd, int forkfd, int srcfd,
    const struct snapshot_creds *user, int dry, struct gitmerge *gm, const char **code,
    char **cause)
{
	struct snapshot_changes ch;
	struct pathset tracked = { 0 }, want = { 0 }, insrc = { 0 }, got = { 0 };
	char *out = NULL, *err = NULL;
	size_t len;
	int st, rv = -1, in_a;
	const char *diff[] = { "diff", "--no-index", "--no-prefix", "--binary", "--no-renames",
	    "--full-index", "--no-ext-diff", "--no-textconv", "--no-color", "--", "a", "b", NULL };
	const char *numstat[] = { "apply", "--numstat", "-z", "patch", NULL };
	const char *check[] = { "apply", "--check", "--directory=s", "patch", NULL };
	const char *apply[] = { "apply", "--directory=s", "patch", NULL };

	memset(gm, 0, sizeof(*gm));
	memset(&ch, 0, sizeof(ch));
	gm->gm_work = gm->gm_s0 = gm->gm_s = -1;
	gm->gm_left_out = json_object_new_array();
	util_strlcpy(gm->gm_name, name, sizeof(gm->gm_name));
	*code = TE_SNAPSHOT;
	if (work_make(tcfd, gm, user, cause) != 0 || snapshot_diff(basefd, forkfd, &ch, cause) != 0)
		goto out;
	*code = TE_MERGE_INCOMPLETE;
	if (tracked_add(gm, basefd, "ib", user, &tracked, cause) != 0 ||
	    tracked_add(gm, forkfd, "if", user, &tracked, cause) != 0)
		goto out;
	pathset_sort(&tracked);
	*code = TE_SNAPSHOT;
	if (sort_changes(gm, basefd, forkfd, srcfd, &ch, &tracked, &want, &insrc, user, cause) != 0)
		goto out;
	gm->gm_paths = want.ps_v;
	gm->gm_npaths = want.ps_n;
	if (want.ps_n == 0) {
		rv = 0;
		goto out;
	}
	/* diff exits 1 when the trees differ; 0 here would mean git saw no change. */
	if (git_run(gm->gm_work, user, diff, NULL, &out, &len, &err, &st, cause) != 0)
		goto out;
	if (st != 0 && st != 1) {
		util_cause(cause, "git diff failed (%d): %.300s", st, err);
		goto out;
	}
	gm->gm_patch_bytes = len;
	if (write_user(gm->gm_work, "patch", out, len, user, cause) != 0)
		goto out;
	free(out);
	free(err);
	out = err = NULL;
	if (len > 0) {
		if (git_run(gm->gm_work, user, numstat, NULL, &out, &len, &err, &st, cause) != 0)
			goto out;
		if (st != 0) {
			util_cause(cause, "git apply --numstat failed (%d): %.300s", st, err);
			goto out;
		}
		if (patch_paths(out, len, &got, cause) != 0)
			goto out;
	}
	/* Never silently less (or more) than the files git records as changed. */
	const char *odd = pathset_differs(&want, &got, &in_a);
	if (odd != NULL) {
		*code = TE_MERGE_INCOMPLETE;
		util_cause(cause, "%s: %s", odd, in_a ? "changed in the fork and tracked, but not in "
		    "the patch" : "in the patch, but not a tracked change of the fork");
		goto out;
	}
	free(out);
	free(err);
	out = err = NULL;
	/* git apply checks every hunk before it writes anything: all or nothing. */
	if (git_run(gm->gm_work, user, check, NULL, &out, &len, &err, &st, cause) != 0)
		goto out;
	if (st != 0) {
		gm->gm_conflicts = conflicts_of(gm, user, err);
		rv = 0;
		goto out;
	}
	if (!dry) {
		free(out);
		free(err);
		out = err = NULL;
		if (git_run(gm->gm_work, user, apply, NULL, &out, &len, &err, &st, cause) != 0)
			goto out;
		if (st != 0) {
			util_cause(cause, "git apply failed after its check passed (%d): %.300s", st, err);
			goto out;
		}
		/* git apply removes directories it emptied; the source keeps them (its other files). */
		for (size_t i = 0; i < insrc.ps_n; i++)
			if (snapshot_parents(gm->gm_s, insrc.ps_v[i], user, cause) != 0)
				goto out;
	}
	rv = 0;
out:
	if (rv != 0) {
		gm->gm_paths = NULL;
		gm->gm_npaths = 0;
		pathset_free(&want);
	}
	free(out);
	free(err);
	snapshot_changes_free(&ch);
	pathset_free(&tracked);
	pathset_free(&insrc);
	pathset_free(&got);
	return rv;
}

void
gitmerge_free(int tcfd, struct gitmerge *gm)
{
	char *cause = NULL;
	int gw;

	for (size_t i = 0; i < gm->gm_npaths; i++)
		free(gm->gm_paths[i]);
	free(gm->gm_paths);
	json_object_put(gm->gm_left_out);
	json_object_put(gm->gm_conflicts);
	if (gm->gm_s0 >= 0)
		close(gm->gm_s0);
	if (gm->gm_s >= 0)
		close(gm->gm_s);
	if (gm->gm_work >= 0)
		close(gm->gm_work);
	if (gm->gm_name[0] != '\0' && (gw = safefs_opendir(tcfd, "gitwork")) >= 0) {
		if (snapshot_remove(gw, gm->gm_name, &cause) != 0)
			log_warnx("gitwork/%s: %s", gm->gm_name, cause);
		free(cause);
		close(gw);
	}
	memset(gm, 0, sizeof(*gm));
	gm->gm_work = gm->gm_s0 = gm->gm_s = -1;
}

void
gitmerge_gc(int tcfd)
{
	char *cause = NULL;

	if (snapshot_remove(tcfd, "gitwork", &cause) != 0)
		log_warnx("gitwork: %s", cause);
	free(cause);
}
