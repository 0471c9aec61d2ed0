/*
 * launch.c: snapshot mounts and the agent launcher of gensee-tcloned.
 *
 * An agent runs in its own mount, pid, uts and ipc namespaces. Its init
 * (pid 1 there, a child of tcloned) is held on a pipe until boundaryd has
 * created the operation around it (cgroup, network policy), exactly as
 * `gensee run` holds its child; if the operation cannot be created the
 * agent never runs. Then the init becomes the user (no capabilities,
 * no_new_privs) and starts the agent in a `gensee-agent` tmux session.
 *
 * In the agent's mount namespace the run's snapshot is bound over the
 * user's workspace path, a fresh /proc shows only its own processes, and
 * the authority root's tclone/ directory is covered by an empty read-only
 * tmpfs (it is root 0700 as well): the agent reaches its own snapshot
 * through its workspace path and nothing else of tcloned's state.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include <seccomp.h> /* lib/seccomp.h, which includes libseccomp's */

#include "agentprof.h"
#include "fanpolicy.h"
#include "landlock.h"
#include "log.h"
#include "proc.h"
#include "proto.h"
#include "safefs.h"
#include "schema.h"
#include "tcloned.h"
#include "util.h"

#define LAUNCH_EXIT_SETUP 125

static int
run_path(struct tcloned *t, const struct trun *r, const char *leaf, char *out, size_t len)
{
	return (size_t)snprintf(out, len, "%s/tclone/runs/%s/%s", t->td_root, r->tr_id, leaf) < len ?
	    0 : -1;
}

/* 1 when the directory rel beneath the tclone dir is a mount point. */
static int
is_mounted(struct tcloned *t, const char *rel)
{
	char parent[PATH_MAX];
	struct stat a, b;
	const char *slash = strrchr(rel, '/');
	int fd, pfd;

	if (slash == NULL || (size_t)(slash - rel) >= sizeof(parent))
		return 0;
	memcpy(parent, rel, (size_t)(slash - rel));
	parent[slash - rel] = '\0';
	fd = safefs_opendir(t->td_tc_fd, rel);
	pfd = safefs_opendir(t->td_tc_fd, parent);
	int rv = fd >= 0 && pfd >= 0 && fstat(fd, &a) == 0 && fstat(pfd, &b) == 0 &&
	    a.st_dev != b.st_dev;
	if (fd >= 0)
		close(fd);
	if (pfd >= 0)
		close(pfd);
	return rv;
}

static int
overlay_mount(struct tcloned *t, const struct trun *r, const char *target, int with_upper,
    char **cause)
{
	char opts[4096], lower[3200], path[PATH_MAX];
	size_t o = 0;
	int n;

	lower[0] = '\0';
	for (int i = 0; i < r->tr_nlayers; i++) {
		n = snprintf(lower + o, sizeof(lower) - o, "%s%s/tclone/layers/%s", i ? ":" : "",
		    t->td_root, r->tr_layers[i]);
		if (n < 0 || (size_t)n >= sizeof(lower) - o) {
			util_cause(cause, "too many layers for one mount");
			return -1;
		}
		o += (size_t)n;
	}
	if (with_upper) {
		char up[PATH_MAX], work[PATH_MAX];
		if (run_path(t, r, "upper", up, sizeof(up)) != 0 ||
		    run_path(t, r, "work", work, sizeof(work)) != 0)
			return -1;
		n = snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", lower, up,
		    work);
	} else {
		n = snprintf(opts, sizeof(opts), "lowerdir=%s", lower);
	}
	if (n < 0 || (size_t)n >= sizeof(opts) || run_path(t, r, target, path, sizeof(path)) != 0) {
		util_cause(cause, "overlay options too long");
		return -1;
	}
	/*
	 * No redirects or metacopy: a renamed directory is copied up whole,
	 * so an upper layer is self-contained when a fork takes it as a lower.
	 */
	char full[4200];
	snprintf(full, sizeof(full), "%s,redirect_dir=off,metacopy=off,index=off", opts);
	if (mount("gensee-tclone", path, "overlay", MS_NOSUID | MS_NODEV |
	    (with_upper ? 0 : MS_RDONLY), full) != 0 &&
	    mount("gensee-tclone", path, "overlay", MS_NOSUID | MS_NODEV |
	    (with_upper ? 0 : MS_RDONLY), opts) != 0) {
		util_cause(cause, "mount overlay on %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int
launch_mount(struct tcloned *t, struct trun *r, char **cause)
{
	char rel[128];

	if (strcmp(r->tr_backend, "overlay") != 0)
		return 0;
	snprintf(rel, sizeof(rel), "runs/%s/ws", r->tr_id);
	if (!is_mounted(t, rel) && overlay_mount(t, r, "ws", 1, cause) != 0)
		return -1;
	if (r->tr_nlayers >= 2) {
		snprintf(rel, sizeof(rel), "runs/%s/base", r->tr_id);
		if (!is_mounted(t, rel) && overlay_mount(t, r, "base", 0, cause) != 0)
			return -1;
	}
	return 0;
}

int
launch_unmount(struct tcloned *t, struct trun *r)
{
	char path[PATH_MAX];
	int rv = 0;

	if (strcmp(r->tr_backend, "overlay") != 0)
		return 0;
	const char *leaves[] = { "ws", "base" };
	for (size_t i = 0; i < nitems(leaves); i++) {
		char rel[128];
		snprintf(rel, sizeof(rel), "runs/%s/%s", r->tr_id, leaves[i]);
		if (!is_mounted(t, rel))
			continue;
		if (run_path(t, r, leaves[i], path, sizeof(path)) != 0 ||
		    umount2(path, UMOUNT_NOFOLLOW) != 0) {
			/* Busy (someone's cwd): detach it, it goes when unused. */
			if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) != 0) {
				log_warn("umount %s", path);
				rv = -1;
			}
		}
	}
	return rv;
}

int
launch_base_path(struct tcloned *t, struct trun *r, char *out, size_t len, char **cause)
{
	int n;

	if (strcmp(r->tr_backend, "overlay") == 0 && r->tr_nlayers == 1)
		n = snprintf(out, len, "layers/%s", r->tr_layers[0]);
	else
		n = snprintf(out, len, "runs/%s/base", r->tr_id);
	if (n < 0 || (size_t)n >= len) {
		util_cause(cause, "path too long");
		return -1;
	}
	(void)t;
	return 0;
}

int
launch_runtime_dir(struct tcloned *t, struct trun *r, char **cause)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "tclone/%s", r->tr_id);
	if (safefs_mkdirs(t->td_runtime_fd, rel, 0700) != 0 ||
	    fchownat(t->td_runtime_fd, rel, r->tr_uid, r->tr_gid, AT_SYMLINK_NOFOLLOW) != 0 ||
	    fchmodat(t->td_runtime_fd, rel, 0700, 0) != 0) {
		util_cause(cause, "%s/%s: %s", t->td_runtime, rel, strerror(errno));
		return -1;
	}
	return 0;
}

void
launch_runtime_remove(struct tcloned *t, struct trun *r)
{
	int fd;

	bridge_close(t, r);
	fd = safefs_opendir(t->td_runtime_fd, "tclone");
	/* Flat: the tmux socket and the context file. */
	if (fd >= 0) {
		if (safefs_remove_dir(fd, r->tr_id) != 0 && errno != ENOENT)
			log_warn("%s/tclone/%s", t->td_runtime, r->tr_id);
		close(fd);
	}
}

/* Write the run's context (who it is, what it came from) for the agent: 0600, the user's. */
static int
write_context(struct tcloned *t, struct trun *r, const char *context, char **cause)
{
	char rel[160];
	int fd;

	snprintf(rel, sizeof(rel), "tclone/%s/context.json", r->tr_id);
	unlinkat(t->td_runtime_fd, rel, 0);
	fd = safefs_openat(t->td_runtime_fd, rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || util_write_all(fd, context, strlen(context)) != 0 ||
	    fchown(fd, r->tr_uid, r->tr_gid) != 0) {
		util_cause(cause, "%s: %s", rel, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* mkdir -p path as root (0755 components), in the agent's namespace only. */
static int
mkdirs_root(const char *path)
{
	char buf[PATH_MAX];

	if (util_strlcpy(buf, path, sizeof(buf)) >= sizeof(buf) || buf[0] != '/')
		return -1;
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			/*
			 * tcloned's umask is 077: a made component would be
			 * root's 0700, and the user could not reach the
			 * workspace below it (chdir: Permission denied).
			 */
			if (mkdir(buf, 0755) == 0) {
				if (chmod(buf, 0755) != 0)
					return -1;
			} else if (errno != EEXIST) {
				return -1;
			}
			*p = c;
			if (c == '\0')
				return 0;
		}
	}
}

/*
 * Cover dir with an empty tmpfs (in the agent's mount namespace), then
 * bind keep (held open as keepfd) back at its path if it lies below dir.
 */
static int
cover(const char *dir, const char *opts, const char *keep, int keepfd)
{
	char fdpath[64];

	if (mount("gensee-tclone-private", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
		return -1;
	if (!util_path_below(keep, dir))
		return 0;
	if (mkdirs_root(keep) != 0)
		return -1;
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", keepfd);
	return mount(fdpath, keep, NULL, MS_BIND | MS_REC, NULL);
}

static void __attribute__((noreturn))
child_fail(int st, const char *what, const char *arg)
{
	char buf[256];
	int n = snprintf(buf, sizeof(buf), "%s%s: %s", what, arg, strerror(errno));

	if (n > 0 && write(st, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1) < 0)
		_exit(LAUNCH_EXIT_SETUP);
	_exit(LAUNCH_EXIT_SETUP);
}

static int
env_add(char **env, size_t *n, size_t max, const char *k, const char *v)
{
	char *s;

	if (*n + 1 >= max || v == NULL || asprintf(&s, "%s=%s", k, v) < 0)
		return -1;
	env[(*n)++] = s;
	env[*n] = NULL;
	return 0;
}

/*
 * The namespace init. Never returns. Everything before the go line runs
 * as root in the new namespaces; nothing of the agent's runs before it.
 */
static void __attribute__((noreturn))
launch_child(struct tcloned *t, struct trun *r, int go, int st, struct seccomp_profile *sp,
    struct landlock_plan *lp, const struct agentprof *ap, int argi)
{
	int llfd = -1;
	char ws[PATH_MAX], tc[PATH_MAX], sock[PATH_MAX], ctx[PATH_MAX], buf[128];
	char rundir[PATH_MAX], rt[PATH_MAX], fdpath[64], bhost[PATH_MAX], bview[PATH_MAX];
	char *env[32], **argv;
	size_t ne = 0, na;
	struct passwd *pw;
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/*
	 * This process never execs: drop tcloned's listening sockets now
	 * (threat: the init, once the user's, holding another run's bridge).
	 */
	close(t->td_listen_fd);
	for (int i = 0; i < t->td_nruns; i++)
		if (t->td_runs[i] != r && t->td_runs[i]->tr_bridge_open)
			close(t->td_runs[i]->tr_bridge_fd);
	/* Its own too (in td_runs or not yet): the socket is bound by its path below. */
	if (r->tr_bridge_open)
		close(r->tr_bridge_fd);
	errno = ENAMETOOLONG;
	if (run_path(t, r, "ws", ws, sizeof(ws)) != 0 ||
	    (size_t)snprintf(tc, sizeof(tc), "%s/tclone", t->td_root) >= sizeof(tc) ||
	    (size_t)snprintf(sock, sizeof(sock), "%s/tclone/%s/tmux.sock", t->td_runtime,
	    r->tr_id) >= sizeof(sock) ||
	    (size_t)snprintf(ctx, sizeof(ctx), "%s/tclone/%s/context.json", t->td_runtime,
	    r->tr_id) >= sizeof(ctx) ||
	    (size_t)snprintf(rundir, sizeof(rundir), "%s/tclone/%s", t->td_runtime, r->tr_id) >=
	    sizeof(rundir) ||
	    (size_t)snprintf(rt, sizeof(rt), "%s/tclone", t->td_runtime) >= sizeof(rt) ||
	    bridge_host_path(t, r, bhost, sizeof(bhost)) != 0 ||
	    (size_t)snprintf(bview, sizeof(bview), "%s/" TCLONED_BRIDGE_VIEW, t->td_runtime) >=
	    sizeof(bview))
		child_fail(st, "paths", "");
	/* Nothing mounted here leaks back to the host: private propagation first. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		child_fail(st, "make / private", "");
	/* What the agent keeps, held open before anything is covered. */
	int wsfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int rdfd = open(rundir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int rtfd = open(t->td_runtime, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (wsfd < 0 || rdfd < 0 || rtfd < 0)
		child_fail(st, "open the snapshot and run directory", "");
	/* The run's own control socket (none for observe-only runs), before it is covered. */
	int bfd = -1;
	if (r->tr_bridge_open && (bfd = open(bhost, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
		child_fail(st, "open the control socket ", bhost);
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		child_fail(st, "mount /proc", "");
	/* Threat: the agent reading other runs' snapshots or tcloned's records. */
	if (!util_path_below(tc, "/tmp") && mount("gensee-tclone-hidden", tc, "tmpfs",
	    MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=000") != 0)
		child_fail(st, "cover ", tc);
	/*
	 * A private /tmp (1777): no other run's or the host user's sockets
	 * and files there (the host user's tmux server, say). The runtime dir
	 * (gensee's sockets) and the workspace are bound back if below it.
	 */
	if (cover("/tmp", "mode=1777", t->td_runtime, rtfd) != 0)
		child_fail(st, "private /tmp", "");
	/*
	 * Threat: an agent driving another run's tmux server (its source's, a
	 * sibling's: the same uid owns them all) to act inside that run. Only
	 * its own run directory stays visible under RUNTIME/tclone.
	 */
	if (cover(rt, "mode=0755", rundir, rdfd) != 0)
		child_fail(st, "cover ", rt);
	close(rtfd);
	/*
	 * Its own bridge socket, and no other, at a fixed path in the covering
	 * tmpfs (root's: the agent can neither remove nor replace it). The
	 * socket decides which run a request is for.
	 */
	if (bfd >= 0) {
		int vfd = open(bview, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (vfd < 0)
			child_fail(st, "make ", bview);
		close(vfd);
		snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", bfd);
		if (mount(fdpath, bview, NULL, MS_BIND, NULL) != 0)
			child_fail(st, "bind the control socket at ", bview);
		close(bfd);
	}
	if (util_path_below(r->tr_workspace, "/tmp") && mkdirs_root(r->tr_workspace) != 0)
		child_fail(st, "make ", r->tr_workspace);
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", wsfd);
	if (mount(fdpath, r->tr_workspace, NULL, MS_BIND | MS_REC, NULL) != 0)
		child_fail(st, "bind the snapshot over ", r->tr_workspace);
	close(wsfd);
	close(rdfd);
	/* The repository metadata git runs later, read-only (agentstate.c). */
	if (schema_bool(r->tr_rec, "protect_git", 1)) {
		const char *what = "";
		if (tagent_protect_git(r->tr_workspace, r->tr_uid, r->tr_gid, &what) != 0)
			child_fail(st, "read-only ", what);
	}
	/* The agent's state: its overlay and read-only configuration (agentstate.c). */
	if (ap != NULL) {
		const char *what = "";
		if (tagent_mount(ap, r->tr_uid, r->tr_gid, &what) != 0)
			child_fail(st, "agent state overlay ", what);
	}
	/* The Landlock rules name the agent's view: prepared after the mounts, as root. */
	{
		char *lcause = NULL;
		if (landlock_plan_prepare(lp, &llfd, NULL, &lcause) != 0)
			child_fail(st, "landlock: ", lcause != NULL ? lcause : "");
	}
	if (sethostname("gensee-tclone", strlen("gensee-tclone")) != 0)
		child_fail(st, "sethostname", "");
	/* Held until boundaryd has made the operation. */
	if (util_read_line(go, buf, sizeof(buf)) != 0)
		_exit(LAUNCH_EXIT_SETUP);	/* no operation: never run unsupervised */
	close(go);
	pw = getpwuid(r->tr_uid);
	env[0] = NULL;
	if (env_add(env, &ne, nitems(env), "PATH", "/usr/local/bin:/usr/bin:/bin") != 0 ||
	    env_add(env, &ne, nitems(env), "HOME", pw != NULL ? pw->pw_dir : "/") != 0 ||
	    env_add(env, &ne, nitems(env), "USER", pw != NULL ? pw->pw_name : "agent") != 0 ||
	    env_add(env, &ne, nitems(env), "TERM", "xterm-256color") != 0 ||
	    env_add(env, &ne, nitems(env), "LANG", "C.UTF-8") != 0 ||
	    env_add(env, &ne, nitems(env), "GENSEE_OPERATION_ID", buf) != 0 ||
	    env_add(env, &ne, nitems(env), "GENSEE_RUN_ID", r->tr_id) != 0 ||
	    env_add(env, &ne, nitems(env), "GENSEE_WORKSPACE", r->tr_workspace) != 0 ||
	    env_add(env, &ne, nitems(env), "GENSEE_TCLONE_ROLE", r->tr_role) != 0 ||
	    env_add(env, &ne, nitems(env), "GENSEE_TCLONE_CONTEXT", ctx) != 0)
		child_fail(st, "environment", "");
	if (r->tr_source[0] != '\0' &&
	    env_add(env, &ne, nitems(env), "GENSEE_TCLONE_SOURCE", r->tr_source) != 0)
		child_fail(st, "environment", "");
	if (r->tr_approach[0] != '\0' &&
	    env_add(env, &ne, nitems(env), "GENSEE_TCLONE_APPROACH", r->tr_approach) != 0)
		child_fail(st, "environment", "");
	if (r->tr_observe_only &&
	    env_add(env, &ne, nitems(env), "GENSEE_TCLONE_OBSERVE_ONLY", "1") != 0)
		child_fail(st, "environment", "");
	if (r->tr_bridge_open &&
	    env_add(env, &ne, nitems(env), "GENSEE_TCLONE_BRIDGE", bview) != 0)
		child_fail(st, "environment", "");
	for (size_t i = 0; ap != NULL && i < ap->ap_nenv; i++) {
		const char *eq = strchr(ap->ap_env[i], '=');
		char k[64];
		if (eq == NULL || (size_t)(eq - ap->ap_env[i]) >= sizeof(k))
			continue;
		memcpy(k, ap->ap_env[i], (size_t)(eq - ap->ap_env[i]));
		k[eq - ap->ap_env[i]] = '\0';
		if (env_add(env, &ne, nitems(env), k, eq + 1) != 0)
			child_fail(st, "environment", "");
	}
	na = json_object_array_length(r->tr_argv);
	argv = calloc(na + 16 + AGENTPROF_MAX_ENV, sizeof(*argv));
	if (argv == NULL)
		child_fail(st, "out of memory", "");
	size_t k = 0;
	argv[k++] = "tmux";
	argv[k++] = "-S";
	argv[k++] = sock;
	argv[k++] = "-f";
	argv[k++] = "/dev/null";
	argv[k++] = "new-session";
	argv[k++] = "-d";
	argv[k++] = "-s";
	argv[k++] = TCLONED_SESSION;
	argv[k++] = "-x";
	argv[k++] = "200";
	argv[k++] = "-y";
	argv[k++] = "50";
	argv[k++] = "--";
	for (size_t i = 0; i < na; i++) {
		argv[k++] = (char *)json_object_get_string(json_object_array_get_idx(r->tr_argv, i));
		/* The profile's arguments after the executable (or node's script). */
		for (size_t a = 0; ap != NULL && argi >= 0 && (size_t)argi == i && a < ap->ap_nargs; a++)
			argv[k++] = (char *)ap->ap_args[a];
	}
	argv[k] = NULL;
	/* The user's identity, for good: no groups of root's, no way back, no gain at exec. */
	if (setgroups(0, NULL) != 0 || setresgid(r->tr_gid, r->tr_gid, r->tr_gid) != 0 ||
	    setresuid(r->tr_uid, r->tr_uid, r->tr_uid) != 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		child_fail(st, "dropping to the user", "");
	if (r->tr_uid != 0 && (setuid(0) == 0 || geteuid() == 0))
		_exit(LAUNCH_EXIT_SETUP);
	/*
	 * The default hard-deny profile of --sandbox linux (ptrace, bpf,
	 * modules, the mount API and new namespaces, non-native ABIs), last,
	 * so nothing of this setup is refused. Threat: the agent making a
	 * user namespace to mount over its view, or tracing its siblings.
	 */
	/*
	 * Landlock (the default plan of --sandbox linux: read everywhere,
	 * write the workspace, the private /tmp, the run directory, caches
	 * and --linux-landlock-rw paths), then seccomp last.
	 */
	{
		char *scause = NULL;
		if (llfd >= 0 && landlock_plan_restrict(llfd, &scause) != 0)
			child_fail(st, "landlock: ", scause != NULL ? scause : "");
		if (seccomp_profile_load(sp, &scause) != 0)
			child_fail(st, "seccomp: ", scause != NULL ? scause : "");
	}
	if (chdir(r->tr_workspace) != 0)
		child_fail(st, "chdir ", r->tr_workspace);
	prctl(PR_SET_PDEATHSIG, 0);
	pid_t tm = fork();
	if (tm < 0)
		child_fail(st, "fork", "");
	if (tm == 0) {
		execve("/usr/bin/tmux", argv, env);
		_exit(127);
	}
	/*
	 * The start is answered once the session exists: `tmux new-session -d`
	 * exits after making it. Before, a CLI attaching right after the
	 * answer could find "no sessions"; a tmux that fails now fails the
	 * start instead of leaving a run without an agent.
	 */
	int status;
	while (waitpid(tm, &status, 0) < 0)
		if (errno != EINTR)
			child_fail(st, "waiting for tmux", "");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char why[96];
		int n = snprintf(why, sizeof(why), "tmux new-session failed (wait status 0x%x)",
		    (unsigned)status);
		if (write(st, why, (size_t)n) < 0)
			_exit(LAUNCH_EXIT_SETUP);
		_exit(LAUNCH_EXIT_SETUP);
	}
	close(st);
	/* pid 1 of the namespace: reap until the session (the tmux server) is gone. */
	for (;;) {
		if (waitpid(-1, &status, 0) < 0 && errno != EINTR)
			break;
	}
	_exit(0);
}

/*
 * The run's fanotify section as its operation gets it. Threat: a rule
 * under the workspace (".env" anywhere) names the user's files, but the agent
 * opens its snapshot's copies, other inodes, so the marks sensord put on
 * the workspace's files never fired. On a copy or btrfs snapshot (the same
 * filesystem's kind of file, reached through a bind mount) each such rule
 * also names the snapshot (ROOT/tclone/runs/RUN/ws), which becomes the
 * section's workspace: sensord marks the snapshot's own files, and a file
 * the agent makes is matched by the path it has in the agent's view, the
 * workspace's. An overlay snapshot's files are opened through overlayfs,
 * whose superblock nobody marks: those rules stay listed as
 * unenforced_in_snapshot.
 */
static struct json_object *
launch_snapshot_rules(struct tcloned *t, struct trun *r)
{
	struct json_object *fan = schema_child(r->tr_rec, "fanotify"), *copy, *rules, *add;
	char snap[PATH_MAX];
	size_t wl = strlen(r->tr_workspace);

	if (strcmp(r->tr_backend, "overlay") == 0 || (size_t)snprintf(snap, sizeof(snap),
	    "%s/tclone/runs/%s/ws", t->td_root, r->tr_id) >= sizeof(snap))
		return json_object_get(fan);
	copy = json_tokener_parse(json_object_to_json_string_ext(fan, JSON_C_TO_STRING_PLAIN));
	if (copy == NULL || (rules = schema_child(copy, "rules")) == NULL ||
	    !json_object_is_type(rules, json_type_array))
		return copy;
	add = json_object_new_array();
	for (size_t i = 0; i < json_object_array_length(rules); i++) {
		struct json_object *rl = json_object_array_get_idx(rules, i), *n;
		const char *rp = schema_string(rl, "path");
		char p[PATH_MAX];
		if (rp == NULL || !fanpolicy_within(rp, r->tr_workspace) ||
		    (size_t)snprintf(p, sizeof(p), "%s%s", snap, rp + wl) >= sizeof(p))
			continue;
		n = json_tokener_parse(json_object_to_json_string_ext(rl, JSON_C_TO_STRING_PLAIN));
		if (n == NULL)
			continue;
		json_object_object_add(n, "path", json_object_new_string(p));
		json_object_array_add(add, n);
	}
	for (size_t i = 0; i < json_object_array_length(add); i++)
		json_object_array_add(rules, json_object_get(json_object_array_get_idx(add, i)));
	if (json_object_array_length(add) > 0)
		json_object_object_add(copy, "workspace", json_object_new_string(snap));
	json_object_put(add);
	return copy;
}

/*
 * operation.create for run r around pid, the process held for it (our
 * launcher's namespace init, or the podman holder): the run's network
 * envelope and, unless it only observes, its fanotify rules, so that a
 * run gets the same boundary whichever runtime starts it. label goes into
 * the recorded command. 0 with r->tr_pid, r->tr_start_ticks and r->tr_op set.
 */
int
launch_create_operation(struct tcloned *t, struct trun *r, pid_t pid, const char *label,
    char **cause)
{
	struct proc_stat ps;
	struct json_object *params, *res = NULL;
	char code[64];

	r->tr_pid = pid;
	if (proc_read_stat(pid, &ps) != 0) {
		util_cause(cause, "the run's held process is gone: %s", strerror(errno));
		return -1;
	}
	r->tr_start_ticks = ps.ps_start_ticks;
	params = json_object_new_object();
	json_object_object_add(params, "pid", json_object_new_int(pid));
	json_object_object_add(params, "start_time_ticks",
	    json_object_new_int64((int64_t)ps.ps_start_ticks));
	json_object_object_add(params, "source_run", json_object_new_string(TCLONED_NAME));
	const char *a0 = json_object_get_string(json_object_array_get_idx(r->tr_argv, 0));
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "tclone %s %s%s: %s", r->tr_role, r->tr_id, label,
	    a0 ? a0 : "");
	json_object_object_add(params, "command", json_object_new_string(cmd));
	if (r->tr_network != NULL && !r->tr_observe_only)
		json_object_object_add(params, "network", json_object_get(r->tr_network));
	/* The run's fanotify rules: boundaryd holds the create until sensord has its marks. */
	if (schema_child(r->tr_rec, "fanotify") != NULL && !r->tr_observe_only) {
		struct json_object *fan = launch_snapshot_rules(t, r);
		if (fan == NULL) {
			json_object_put(params);
			util_cause(cause, "out of memory");
			return -1;
		}
		json_object_object_add(params, "fanotify", fan);
	}
	if (tcloned_bd_call(t, "operation.create", params, &res, code, sizeof(code), cause) != 0)
		return -1;
	util_strlcpy(r->tr_op, schema_string(res, "operation_id") ? schema_string(res,
	    "operation_id") : "", sizeof(r->tr_op));
	json_object_put(res);
	if (r->tr_op[0] == '\0') {
		util_cause(cause, "boundaryd returned no operation id");
		return -1;
	}
	return 0;
}

int
launch_agent(struct tcloned *t, struct trun *r, const char *context, char **cause)
{
	int go[2], st[2];
	pid_t pid;

	if (launch_runtime_dir(t, r, cause) != 0 || write_context(t, r, context, cause) != 0)
		return -1;
	if (strcmp(r->tr_runtime, "podman") == 0)
		return podman_launch(t, r, cause);	/* no bridge in a container (tclone.md) */
	/* Observe-only runs get no host-control channel (the seed's rule). */
	if (!r->tr_observe_only && bridge_open(t, r, cause) != 0)
		return -1;
	struct seccomp_profile sp;
	struct landlock_plan lp;
	struct landlock_opts lo;
	char rundir[PATH_MAX];
	const char *why = NULL;
	struct passwd *pw = getpwuid(r->tr_uid);
	int abi = landlock_abi(&why);

	memset(&sp, 0, sizeof(sp));
	sp.sp_notify_fd = -1;
	memset(&lo, 0, sizeof(lo));
	if ((size_t)snprintf(rundir, sizeof(rundir), "%s/tclone/%s", t->td_runtime, r->tr_id) >=
	    sizeof(rundir)) {
		util_cause(cause, "runtime path too long");
		return -1;
	}
	lo.lo_workspace = r->tr_workspace;
	lo.lo_home = pw != NULL ? pw->pw_dir : NULL;
	lo.lo_tmpdir = "/tmp";
	lo.lo_rw[lo.lo_nrw++] = rundir;
	for (size_t i = 0; r->tr_landlock_rw != NULL && i < json_object_array_length(r->tr_landlock_rw) &&
	    lo.lo_nrw < nitems(lo.lo_rw); i++)
		lo.lo_rw[lo.lo_nrw++] = json_object_get_string(json_object_array_get_idx(r->tr_landlock_rw, i));
	/*
	 * An agent profile: its state writable, through the overlay the child
	 * mounts (agentstate.c), never the real directory. Static: large.
	 */
	static struct agentprof ap;
	int argi = -1, agent = r->tr_observe_only ? 0 : tagent_plan(r, &ap, &argi, cause);
	if (agent < 0 || (agent > 0 && tagent_prepare(r, &ap, cause) != 0)) {
		bridge_close(t, r);
		return -1;
	}
	for (size_t i = 0; agent > 0 && i < ap.ap_nstate && lo.lo_nrw < nitems(lo.lo_rw); i++)
		lo.lo_rw[lo.lo_nrw++] = ap.ap_state[i].as_path;
	if (landlock_plan_build(NULL, &lo, abi, why, &lp, cause) != 0) {
		bridge_close(t, r);
		return -1;
	}
	if (seccomp_profile_build(NULL, SECCOMP_PROFILE_FORCE_ON, &sp, cause) != 0) {
		landlock_plan_free(&lp);
		bridge_close(t, r);
		return -1;
	}
	if (pipe2(go, O_CLOEXEC) != 0 || pipe2(st, O_CLOEXEC) != 0) {
		util_cause(cause, "pipe: %s", strerror(errno));
		seccomp_profile_free(&sp);
		landlock_plan_free(&lp);
		bridge_close(t, r);
		return -1;
	}
	pid = (pid_t)syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
	    SIGCHLD, NULL, NULL, NULL, 0);
	if (pid < 0) {
		util_cause(cause, "clone: %s", strerror(errno));
		close(go[0]);
		close(go[1]);
		close(st[0]);
		close(st[1]);
		seccomp_profile_free(&sp);
		landlock_plan_free(&lp);
		bridge_close(t, r);
		return -1;
	}
	if (pid == 0) {
		close(go[1]);
		close(st[0]);
		launch_child(t, r, go[0], st[1], &sp, &lp, agent > 0 ? &ap : NULL, argi);
	}
	seccomp_profile_free(&sp);
	int llmode = lp.lp_mode;
	landlock_plan_free(&lp);
	{
		struct json_object *c = json_object_new_object(), *ns = json_object_new_array();
		const char *names[] = { "mnt", "pid", "uts", "ipc" };
		for (size_t i = 0; i < nitems(names); i++)
			json_object_array_add(ns, json_object_new_string(names[i]));
		json_object_object_add(c, "namespaces", ns);
		json_object_object_add(c, "seccomp", json_object_new_string("default deny profile"));
		if (llmode == LANDLOCK_PLAN_REQUIRED)
			json_object_object_add(c, "landlock", json_object_new_int(abi));
		else
			json_object_object_add(c, "landlock", json_object_new_string(why != NULL ? why :
			    "not applied"));
		json_object_object_add(c, "landlock_rw", r->tr_landlock_rw != NULL ?
		    json_object_get(r->tr_landlock_rw) : json_object_new_array());
		struct json_object *fan = schema_child(r->tr_rec, "fanotify");
		if (fan != NULL) {
			struct json_object *fc = json_object_new_object();
			json_object_object_add(fc, "posture", json_object_get(schema_child(fan,
			    "posture")));
			json_object_object_add(fc, "rules", json_object_new_int64((int64_t)
			    json_object_array_length(schema_child(fan, "rules"))));
			/*
			 * Said, not hidden: an overlay snapshot's files are
			 * opened through overlayfs, which sensord does not
			 * mark, so rules under the workspace are not enforced
			 * there (copy and btrfs snapshots get them:
			 * launch_snapshot_rules).
			 */
			struct json_object *un = json_object_new_array(), *rl = schema_child(fan,
			    "rules");
			for (size_t i = 0; rl != NULL && i < json_object_array_length(rl); i++) {
				const char *rp = schema_string(json_object_array_get_idx(rl, i), "path");
				if (rp != NULL && fanpolicy_within(rp, r->tr_workspace) &&
				    strcmp(r->tr_backend, "overlay") == 0)
					json_object_array_add(un, json_object_new_string(rp));
			}
			json_object_object_add(fc, "unenforced_in_snapshot", un);
			json_object_object_add(c, "fanotify", fc);
		}
		json_object_object_add(c, "no_new_privs", json_object_new_boolean(1));
		json_object_object_add(c, "private_tmp", json_object_new_boolean(1));
		json_object_object_add(c, "uid", json_object_new_int64(r->tr_uid));
		if (agent > 0)
			json_object_object_add(c, "agent", agentprof_json(&ap));
		json_object_object_add(r->tr_rec, "confinement", c);
	}
	close(go[0]);
	close(st[1]);
	if (launch_create_operation(t, r, pid, "", cause) != 0)
		goto fail;
	/* The child's setup before the go: a failure there is reported on st. */
	if (launch_release(go[1], r, "the agent", cause) != 0)
		goto fail_op;
	close(go[1]);
	go[1] = -1;
	{
		char reason[256];
		ssize_t n;
		while ((n = read(st[0], reason, sizeof(reason) - 1)) < 0 && errno == EINTR)
			;
		close(st[0]);
		st[0] = -1;
		if (n > 0) {
			reason[n] = '\0';
			util_cause(cause, "agent setup: %s", reason);
			goto fail_op;
		}
	}
	util_strlcpy(r->tr_state, "running", sizeof(r->tr_state));
	return 0;
fail_op:
	launch_end(t, r, 1);
fail:
	if (go[1] >= 0)
		close(go[1]);
	if (st[0] >= 0)
		close(st[0]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	r->tr_pid = 0;
	bridge_close(t, r);
	return -1;
}

/* Release a held child: its operation id on its go pipe. */
int
launch_release(int go, const struct trun *r, const char *what, char **cause)
{
	char line[160];
	int n = snprintf(line, sizeof(line), "%s\n", r->tr_op);

	if (util_write_all(go, line, (size_t)n) != 0) {
		util_cause(cause, "releasing %s: %s", what, strerror(errno));
		return -1;
	}
	return 0;
}

/* End the run's agent through boundaryd (it owns the cgroup): asked, or killed. */
void
launch_end(struct tcloned *t, struct trun *r, int kill_now)
{
	struct json_object *p, *res = NULL;
	char *cause = NULL, code[64];

	if (r->tr_op[0] == '\0' || r->tr_pid == 0)
		return;
	/* Podman stops and removes its container first (and runc its cgroup); the end kills the rest. */
	podman_remove(t, r);
	p = json_object_new_object();
	json_object_object_add(p, "operation_id", json_object_new_string(r->tr_op));
	if (kill_now)
		json_object_object_add(p, "kill", json_object_new_boolean(1));
	else
		json_object_object_add(p, "grace_seconds", json_object_new_int(1));
	if (tcloned_bd_call(t, "operation.end", p, &res, code, sizeof(code), &cause) != 0) {
		log_warnx("ending %s (%s): %s", r->tr_id, r->tr_op, cause);
		free(cause);
	}
	json_object_put(res);
	/* The operation's end killed the container's processes; podman forgets it. */
	podman_remove(t, r);
	/* Now, not at the reap: a deleted run is forgotten before its init is reaped. */
	tagent_finish(r);
}

void
launch_reaped(struct tcloned *t, pid_t pid, int status)
{
	struct json_object *p, *res = NULL;
	char *cause = NULL, code[64];

	for (int i = 0; i < t->td_nruns; i++) {
		struct trun *r = t->td_runs[i];
		if (r->tr_pid != pid)
			continue;
		r->tr_pid = 0;
		/* The agent is gone: so is its control channel. */
		bridge_close(t, r);
		p = json_object_new_object();
		json_object_object_add(p, "operation_id", json_object_new_string(r->tr_op));
		if (WIFSIGNALED(status))
			json_object_object_add(p, "exit_signal", json_object_new_int(WTERMSIG(status)));
		else
			json_object_object_add(p, "exit_code", json_object_new_int(WEXITSTATUS(status)));
		/* The tree may outlive its init; the exit report is only recorded, with kill it ends. */
		json_object_object_add(p, "kill", json_object_new_boolean(1));
		if (tcloned_bd_call(t, "operation.end", p, &res, code, sizeof(code), &cause) != 0) {
			log_info("exit of %s (%s): %s", r->tr_id, r->tr_op, cause);
			free(cause);
			cause = NULL;
		}
		json_object_put(res);
		res = NULL;
		podman_remove(t, r);
		tagent_finish(r);
		if (strcmp(r->tr_state, "running") == 0) {
			util_strlcpy(r->tr_state, "exited", sizeof(r->tr_state));
			tcloned_history(t, r->tr_op, "end", "succeeded", r, r->tr_group, r->tr_uid,
			    NULL);
		}
		if (tcloned_save(t, r, &cause) != 0) {
			log_warnx("%s", cause);
			free(cause);
		}
		return;
	}
}
