/*
 * run.c: `gensee run [--timeout SECONDS] [--json] -- CMD [ARGS...]`
 *
 * The CLI is the parent of the agent. It forks the child and holds it on a
 * pipe before exec, asks boundaryd to create the operation (boundaryd checks
 * that the held process really is our child and moves it into the
 * operation's cgroup), then releases it with GENSEE_OPERATION_ID set. If the
 * operation cannot be created the child never runs the command: there is no
 * unsupervised fallback.
 *
 * With --sandbox linux the child also confines itself just before exec
 * (a private mount view, Landlock, seccomp: see run_confine), from a plan
 * the launcher builds before it forks; if any of it fails the command does
 * not run.
 *
 * The launcher itself is outside the operation (no cgroup, no filter), so
 * it must not be reachable from the agent it launches: it is non-dumpable
 * for its whole life, which keeps processes of the same uid from ptrace,
 * /proc/PID/mem and pidfd_getfd on it, and the agent's Landlock domain
 * cannot signal or ptrace it either.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include <seccomp.h> /* lib/seccomp.h, which includes libseccomp's */

#include "agent.h"
#include "cli.h"
#include "explain.h"
#include "fdpass.h"
#include "client.h"
#include "landlock.h"
#include "mountview.h"
#include "netpolicy.h"
#include "netspec.h"
#include "policy.h"
#include "proto.h"
#include "proc.h"
#include "schema.h"
#include "util.h"

#define RUN_EXIT_TIMEOUT 124
#define RUN_EXIT_GENSEE 125
#define RUN_EXIT_NOEXEC 126
#define RUN_EXIT_NOTFOUND 127
/* The launcher's own last-resort timeout, if boundaryd is gone at the deadline. */
#define RUN_FALLBACK_GRACE_MS 5000
#define RUN_OBSERVE_WAIT_MS 1000	/* for the child to exec after its release */

/*
 * Whether operation.create carries "host_controls" (what the child applies
 * before exec). boundaryd refuses unknown fields until it learns this one:
 * flip to 1 when it does.
 */
#define RUN_SEND_HOST_CONTROLS 1

/*
 * The child's last word on the status pipe, which is close-on-exec, so a
 * successful exec leaves it empty. It is one write smaller than PIPE_BUF,
 * so the parent reads all of it or nothing.
 */
struct run_status {
	int rs_kind;
	int rs_errno;		/* RUN_STATUS_EXEC: why execvp failed */
	char rs_reason[240];	/* RUN_STATUS_SETUP: why the child did not exec */
};
#define RUN_STATUS_EXEC 1
#define RUN_STATUS_SETUP 2

/* The host controls of a sandboxed run, planned before the fork. */
struct run_controls {
	struct mountview_plan rc_mountview;
	struct seccomp_profile rc_seccomp;
	struct landlock_plan rc_landlock;
	int rc_notify_sock[2];	/* the child sends the seccomp listener on [1] */
	/* The filter, written before the fork: the child only reads it. */
	struct sock_filter rc_bpf[1024];
	size_t rc_bpf_len;
};

/*
 * What the seccomp profile refused, by syscall number, counted by the
 * launcher's wait loop (run_wait) or, without a pidfd, its listener thread
 * (run_listen), and read at the end.
 */
#define RUN_MAX_NR 1024
static unsigned int run_denied[RUN_MAX_NR];

static volatile sig_atomic_t run_forward_sig;

static void
run_on_signal(int sig)
{
	run_forward_sig = sig;
}

/*
 * The agent's environment, made before the fork: the caller's without its
 * own GENSEE_OPERATION_ID (and, in re_proxy_envp, without its proxy
 * variables), then slots for ours, pointing at buffers the held child
 * fills after the go. setenv there allocated, searched and bound symbols:
 * a dozen pages, each copied first while the child shares them with the
 * launcher (about 30 us a page on our test VMs), between the go and exec.
 */
#define RUN_PROXY_VARS 6
static const char *const run_proxy_vars[RUN_PROXY_VARS] = {
	"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
};
/*
 * Loopback goes direct: the egress refuses every address, and the
 * operation's table decides what of loopback it may reach. The caller's
 * own NO_PROXY is replaced: it named exceptions to the caller's proxy.
 */
#define RUN_NO_PROXY "localhost,127.0.0.1,::1"
static struct {
	char **re_envp;		/* GENSEE_OPERATION_ID last */
	char **re_proxy_envp;	/* GENSEE_OPERATION_ID, then the proxy variables */
	char re_opid[160];
	char re_proxy[RUN_PROXY_VARS][240];
} run_env;

/* Whether the environment entry e sets name. */
static int
run_env_is(const char *e, const char *name)
{
	size_t n = strlen(name);

	return strncmp(e, name, n) == 0 && e[n] == '=';
}

static int
run_env_prepare(void)
{
	size_t n = 0, a = 0, b = 0;

	while (environ[n] != NULL)
		n++;
	run_env.re_envp = calloc(n + 2, sizeof(char *));
	run_env.re_proxy_envp = calloc(n + 2 + RUN_PROXY_VARS, sizeof(char *));
	if (run_env.re_envp == NULL || run_env.re_proxy_envp == NULL)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int proxy = 0;
		if (run_env_is(environ[i], "GENSEE_OPERATION_ID"))
			continue;
		run_env.re_envp[a++] = environ[i];
		for (size_t v = 0; v < RUN_PROXY_VARS && !proxy; v++)
			proxy = run_env_is(environ[i], run_proxy_vars[v]);
		if (!proxy)
			run_env.re_proxy_envp[b++] = environ[i];
	}
	run_env.re_envp[a] = run_env.re_opid;
	run_env.re_proxy_envp[b++] = run_env.re_opid;
	for (size_t v = 0; v < RUN_PROXY_VARS; v++)
		run_env.re_proxy_envp[b++] = run_env.re_proxy[v];
	return 0;
}

/* "NAME=value" into dst (size n), without printf's stack: 0, or -1 if too long. */
static int
run_env_fill(char *dst, size_t n, const char *name, const char *value)
{
	size_t ln = strlen(name), lv = strlen(value);

	if (ln + 1 + lv + 1 > n)
		return -1;
	memcpy(dst, name, ln);
	dst[ln] = '=';
	memcpy(dst + ln + 1, value, lv + 1);
	return 0;
}

/* In the child: report why it will not run the command, and exit. */
static void __attribute__((noreturn))
run_child_fail(int status_fd, const char *reason)
{
	struct run_status rs;

	memset(&rs, 0, sizeof(rs));
	rs.rs_kind = RUN_STATUS_SETUP;
	util_strlcpy(rs.rs_reason, reason, sizeof(rs.rs_reason));
	if (write(status_fd, &rs, sizeof(rs)) != (ssize_t)sizeof(rs))
		_exit(RUN_EXIT_GENSEE);
	_exit(RUN_EXIT_GENSEE);
}

/* Send fd over a Unix socket (SCM_RIGHTS). */
static int
run_send_fd(int sock, int fd)
{
	return fdpass_send(sock, "L", 1, fd);
}

/* Receive one fd sent by run_send_fd; -1 at EOF (the child exec'd without one). */
static int
run_recv_fd(int sock)
{
	char byte;
	int fd;

	if (fdpass_recv(sock, &byte, 1, &fd) != 1) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* The count of one refusal (run_wait, run_listen). */
static void
run_count_denial(int nr, void *arg)
{
	(void)arg;
	if (nr >= 0 && nr < RUN_MAX_NR)
		__atomic_fetch_add(&run_denied[nr], 1, __ATOMIC_RELAXED);
}

/*
 * Without a pidfd, the launcher's listener thread: takes the seccomp listener from the
 * child, then answers (and counts) every refusal of the tree until the
 * process exits. It never lets a syscall through (seccomp_profile_serve).
 */
static void *
run_listen(void *arg)
{
	struct run_controls *ctl = arg;
	int fd = run_recv_fd(ctl->rc_notify_sock[0]);

	close(ctl->rc_notify_sock[0]);
	if (fd >= 0)
		seccomp_profile_serve(&ctl->rc_seccomp, fd, run_count_denial, NULL);
	return NULL;
}

/* The refusals counted so far, {"syscall": count}, most first; NULL when none. */
static struct json_object *
run_denials(void)
{
	struct json_object *o = NULL;
	int order[RUN_MAX_NR], n = 0;

	for (int nr = 0; nr < RUN_MAX_NR; nr++)
		if (__atomic_load_n(&run_denied[nr], __ATOMIC_RELAXED) > 0)
			order[n++] = nr;
	/* A handful at most: insertion sort by count, descending. */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && run_denied[order[j]] > run_denied[order[j - 1]]; j--) {
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (int i = 0; i < n; i++) {
		char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, order[i]);
		char fallback[24];
		if (o == NULL)
			o = json_object_new_object();
		snprintf(fallback, sizeof(fallback), "syscall_%d", order[i]);
		json_object_object_add(o, name != NULL ? name : fallback,
		    json_object_new_int64(run_denied[order[i]]));
		free(name);
	}
	return o;
}

/*
 * In the held child, just before exec: apply the planned host controls.
 * The mount view first (its mounts need the user namespace's capabilities
 * and are what the Landlock rules must name: the private /tmp, not the
 * host's), then the Landlock rules (which open their paths), then
 * no_new_privs, which lets an unprivileged process install both and keeps
 * a setuid exec from gaining privileges the filters were not written for,
 * then Landlock, and seccomp last so that nothing this setup needs is
 * refused. On failure the caller never execs: nothing runs with less
 * confinement than asked.
 */
static int
run_confine(struct run_controls *ctl, char **cause)
{
	const struct landlock_plan *lp = &ctl->rc_landlock;
	struct json_object *warnings;
	int rfd;

	if (!ctl->rc_seccomp.sp_enabled && !lp->lp_apply && !ctl->rc_mountview.mv_apply)
		return 0;
	warnings = json_object_new_array();
	/*
	 * The child inherited the launcher's non-dumpable flag, which makes
	 * its /proc/self files root's: it could not write its own uid_map. It
	 * becomes dumpable again at exec in any case.
	 */
	if (ctl->rc_mountview.mv_apply && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) {
		util_cause(cause, "prctl(PR_SET_DUMPABLE): %s", strerror(errno));
		json_object_put(warnings);
		return -1;
	}
	if (mountview_apply(&ctl->rc_mountview, warnings, cause) != 0 ||
	    landlock_plan_prepare(lp, &rfd, warnings, cause) != 0) {
		json_object_put(warnings);
		return -1;
	}
	for (size_t i = 0; i < json_object_array_length(warnings); i++)
		fprintf(stderr, "gensee run: warning: %s\n",
		    json_object_get_string(json_object_array_get_idx(warnings, i)));
	json_object_put(warnings);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		util_cause(cause, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
		return -1;
	}
	if (rfd != -1 && landlock_plan_restrict(rfd, cause) != 0) {
		if (lp->lp_mode == LANDLOCK_PLAN_REQUIRED)
			return -1;
		fprintf(stderr, "gensee run: warning: landlock: best_effort: not applied: %s\n",
		    *cause);
		free(*cause);
		*cause = NULL;
		close(rfd);
	}
	if (ctl->rc_seccomp.sp_enabled && seccomp_profile_load_program(&ctl->rc_seccomp,
	    ctl->rc_bpf, ctl->rc_bpf_len, cause) != 0)
		return -1;
	return 0;
}

/*
 * In the held child: wait for the operation id, confine (ctl, when
 * sandboxed), then exec. Never returns.
 */
static void __attribute__((noreturn))
run_child(int go_fd, int status_fd, char **cmd, struct run_controls *ctl, int json)
{
	char *cause = NULL;
	struct run_status rs;
	char buf[384];

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(RUN_EXIT_GENSEE);
	/*
	 * Sockets are matched by the cgroup they were created in: one
	 * inherited from before the move would escape the operation's network
	 * policy, so a sandboxed agent gets only stdin, stdout and stderr.
	 */
	if (ctl != NULL && syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
		util_cause(&cause, "close_range: %s", strerror(errno));
		run_child_fail(status_fd, cause);
	}
	/*
	 * Confine now, while boundaryd creates the operation: the two take
	 * about as long, and the child runs nothing of the agent's before the
	 * go below (it only waits on the pipe), so confining before the move
	 * into the operation's cgroup gives the agent nothing.
	 */
	if (ctl != NULL && run_confine(ctl, &cause) != 0)
		run_child_fail(status_fd, cause);
	/*
	 * Threat: whoever holds the listener answers the filter's
	 * notifications, and could let a refused syscall through. It goes to
	 * the launcher and is closed here, before anything of the agent runs.
	 */
	if (ctl != NULL && ctl->rc_seccomp.sp_notify_fd >= 0) {
		if (run_send_fd(ctl->rc_notify_sock[1], ctl->rc_seccomp.sp_notify_fd) != 0)
			run_child_fail(status_fd, "seccomp: cannot hand the listener to the launcher");
		close(ctl->rc_seccomp.sp_notify_fd);
	}
	if (util_read_line(go_fd, buf, sizeof(buf)) != 0)
		_exit(RUN_EXIT_GENSEE); /* the launcher gave up: never run unsupervised */
	close(go_fd);
	/*
	 * "ID" or "ID PROXY_URL": an operation that names hosts has a CONNECT
	 * egress; tools that honour the proxy variables use it (network.md).
	 */
	char *proxy_url = strchr(buf, ' '), **envp = run_env.re_envp;
	if (proxy_url != NULL) {
		*proxy_url++ = '\0';
		for (size_t v = 0; v < RUN_PROXY_VARS; v++)
			if (run_env_fill(run_env.re_proxy[v], sizeof(run_env.re_proxy[v]),
			    run_proxy_vars[v], strcasecmp(run_proxy_vars[v], "no_proxy") == 0 ?
			    RUN_NO_PROXY : proxy_url) != 0)
				run_child_fail(status_fd, "the proxy URL is too long");
		envp = run_env.re_proxy_envp;
	}
	if (run_env_fill(run_env.re_opid, sizeof(run_env.re_opid), "GENSEE_OPERATION_ID",
	    buf) != 0)
		run_child_fail(status_fd, "the operation id is too long");
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	prctl(PR_SET_PDEATHSIG, 0);
	/*
	 * --json: stdout carries the run's JSON alone, so a script can parse
	 * it whatever the agent prints; the agent's stdout goes to stderr.
	 */
	if (json && dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
		run_child_fail(status_fd, "dup2: cannot move stdout to stderr for --json");
	execvpe(cmd[0], cmd, envp);
	memset(&rs, 0, sizeof(rs));
	rs.rs_kind = RUN_STATUS_EXEC;
	rs.rs_errno = errno;
	if (write(status_fd, &rs, sizeof(rs)) != (ssize_t)sizeof(rs))
		_exit(RUN_EXIT_GENSEE);
	_exit(rs.rs_errno == ENOENT ? RUN_EXIT_NOTFOUND : RUN_EXIT_NOEXEC);
}

/*
 * Wait for the child; forward the terminal's signals, kill it if boundaryd
 * missed its timeout (fallback, a monotonic ms deadline, or 0), and with a
 * pidfd answer the tree's seccomp refusals here: the listener arrives on
 * rc_notify_sock[0] once the child has loaded its filter. A listener
 * thread instead made the launcher two threads, so that every
 * copy-on-write fault after the fork had to flush the other CPU's TLB, and
 * cost its own start and exit on every launch. The listener stays open
 * after the wait: a refusal of what remains of the tree waits for the
 * operation's end, which kills it.
 */
static int
run_wait(pid_t child, int pidfd, struct run_controls *ctl, const char *opid, int64_t fallback,
    int *fallback_fired, int *status)
{
	int sock = pidfd >= 0 ? ctl->rc_notify_sock[0] : -1, lfd = -1;

	for (;;) {
		pid_t w = waitpid(child, status, fallback || pidfd >= 0 ? WNOHANG : 0);
		if (w == child)
			break;
		if (w < 0 && errno != EINTR) {
			perror("gensee run: waitpid");
			return -1;
		}
		if (run_forward_sig) {
			kill(child, run_forward_sig);
			run_forward_sig = 0;
		}
		if (fallback && !*fallback_fired && util_monotonic_ms() > fallback) {
			/* boundaryd should have ended it; do not let it outlive the timeout. */
			fprintf(stderr, "gensee: supervisor did not end %s at its timeout; "
			    "killing the root process\n", opid);
			kill(child, SIGKILL);
			*fallback_fired = 1;
		}
		if (pidfd < 0) {
			if (fallback)
				usleep(20000);
			continue;
		}
		struct pollfd p[3] = {
			{ .fd = pidfd, .events = POLLIN },
			{ .fd = sock, .events = POLLIN },
			{ .fd = lfd, .events = POLLIN },
		};
		if (poll(p, 3, fallback ? 20 : -1) < 0 && errno != EINTR) {
			perror("gensee run: poll");
			return -1;
		}
		if (sock >= 0 && p[1].revents != 0) {
			/* Nothing came (the child failed before): the kernel answers ENOSYS. */
			lfd = run_recv_fd(sock);
			close(sock);
			sock = ctl->rc_notify_sock[0] = -1;
		}
		if (lfd >= 0 && p[2].revents != 0 && (!(p[2].revents & POLLIN) ||
		    seccomp_profile_answer(&ctl->rc_seccomp, lfd, run_count_denial, NULL) != 0)) {
			close(lfd);	/* no filter user left */
			lfd = -1;
		}
	}
	/* lfd stays open (see above): the process exit closes it. */
	if (pidfd >= 0)
		close(pidfd);
	return 0;
}

/*
 * In the launcher, once the create is on its way: close the child's end of
 * the listener's socket, and unless the wait loop answers the refusals
 * (in_loop: run_wait), start a thread that does.
 */
static void
run_start_controls(struct run_controls *ctl, int in_loop)
{
	if (ctl->rc_notify_sock[1] >= 0 && in_loop) {
		close(ctl->rc_notify_sock[1]);
		ctl->rc_notify_sock[1] = -1;
	} else if (ctl->rc_notify_sock[1] >= 0) {
		pthread_t t;
		close(ctl->rc_notify_sock[1]);
		ctl->rc_notify_sock[1] = -1;
		if (pthread_create(&t, NULL, run_listen, ctl) != 0 || pthread_detach(t) != 0) {
			/* Nobody to answer: the kernel answers ENOSYS, still a refusal. */
			fprintf(stderr, "gensee run: warning: seccomp refusals will not be listed\n");
		}
	}
}

static const char run_usage_text[] =
	    "usage: gensee run [--timeout SECONDS [--kill-grace SECONDS]] [--json] [--quiet]\n"
	    "                  [--sandbox linux [--allow-net CIDR[,PROTO[,PORTS]]]...\n"
	    "                  [--deny-net ...]...\n"
	    "                  [--deny-all] [--monitor] [--lease-scope ...]... [--max-lease-ttl S]\n"
	    "                  [--network-config FILE] [--linux-seccomp | --no-linux-seccomp]\n"
	    "                  [--linux-landlock-ro PATH]... [--linux-landlock-rw PATH]...\n"
	    "                  [--allow-unix SOCKET]... [--agent codex|claude|gemini|none]]\n"
	    "                  -- CMD [ARGS...]\n"
	    "       gensee run network inspect|event|revoke|transaction-* ... (see gensee run network --help)\n"
	    "       gensee run fault (--socket PATH | --operation ID) --fault FILE\n"
	    "       gensee run --runtime tclone ... -- CMD, gensee run list|fork|diff|merge|...\n"
	    "                  (the tclone lifecycle: see gensee run list --help)\n"
	    "At the timeout the tree gets SIGTERM, and SIGKILL after the kill grace\n"
	    "(default 3 s).\n"
	    "--agent: the agent profile (default: from the executable): its state in an\n"
	    "overlay kept in $GENSEE_HOME/agents/NAME, its configuration read-only, its\n"
	    "model API host allowed (gensee agent state NAME shows what runs wrote).\n"
	    "--json prints the run's JSON on stdout, alone: the command's stdout goes to\n"
	    "stderr.\n"
	    "Exit status: the command's own; 128+N if it died of signal N; 124 on timeout;\n"
	    "125 if gensee could not supervise it or was called wrongly (it did not run);\n"
	    "126/127 if it could not be executed or found.\n";

/*
 * Plan the host controls of a sandboxed run from the policy and the
 * command line. Errors here stop the run before anything starts.
 */
/*
 * What the Landlock defaults and the mount view are made of: the run's
 * directory (the workspace), $HOME, $GENSEE_HOME, $TMPDIR, gensee's and the
 * user's runtime directories. A missing $GENSEE_HOME is made now (0700),
 * so that the agent finds it read-only rather than creating a policy of
 * its own there (with create: `gensee debug plan` shares this and changes
 * nothing).
 */
int
run_host_opts(struct landlock_opts *llo, struct mountview_opts *mvo, int create, char **cause)
{
	const char *home = getenv("HOME"), *gh = getenv("GENSEE_HOME");
	static char cwd[PATH_MAX], ghome[PATH_MAX];

	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		util_cause(cause, "getcwd: %s", strerror(errno));
		return -1;
	}
	if (gh != NULL && gh[0] != '\0')
		util_strlcpy(ghome, gh, sizeof(ghome));
	else if (home != NULL && home[0] == '/')
		snprintf(ghome, sizeof(ghome), "%s/.gensee", home);
	else
		ghome[0] = '\0';
	if (create && ghome[0] != '\0' && mkdir(ghome, 0700) != 0 && errno != EEXIST &&
	    errno != ENOENT && errno != EACCES && errno != EROFS) {
		util_cause(cause, "%s: %s", ghome, strerror(errno));
		return -1;
	}
	llo->lo_workspace = cwd;
	llo->lo_home = home;
	llo->lo_tmpdir = getenv("TMPDIR");
	mvo->mo_home = home;
	mvo->mo_gensee_home = ghome[0] != '\0' ? ghome : NULL;
	mvo->mo_workspace = cwd;
	mvo->mo_runtime_dir = client_runtime_dir();
	mvo->mo_xdg_runtime_dir = getenv("XDG_RUNTIME_DIR");
	mvo->mo_uid = getuid();
	mvo->mo_gid = getgid();
	return 0;
}

static int
run_plan(struct json_object *policy, int seccomp_force, struct landlock_opts *llo,
    struct mountview_opts *mvo, struct agent_run *ar, struct run_controls *ctl, char **cause)
{
	const char *why = NULL;
	int abi = landlock_abi(&why);

	if (run_host_opts(llo, mvo, 1, cause) != 0 || agent_apply(ar, mvo, 1, cause) != 0)
		return -1;
	if (mountview_plan_build(policy, mvo, &ctl->rc_mountview, cause) != 0)
		return -1;
	/* The agent's state is writable only through its overlay (agent.c). */
	if (agent_landlock(ar, llo, ctl->rc_mountview.mv_noverlay > 0, 1, cause) != 0) {
		mountview_plan_free(&ctl->rc_mountview);
		return -1;
	}
	/*
	 * Refusals go to the launcher, which answers them with the same errno
	 * and lists them at the end: the kernel tells no one else. Where the
	 * kernel cannot, the filter answers them itself.
	 */
	int notify = seccomp_profile_notify_available();
	if (!notify)
		fprintf(stderr, "gensee run: warning: seccomp refusals will not be listed: "
		    "this kernel or libseccomp has no user notification\n");
	/* The program is written once the listener is settled (cmd_run). */
	if (seccomp_profile_plan_notify(policy, seccomp_force, notify, &ctl->rc_seccomp,
	    cause) != 0) {
		mountview_plan_free(&ctl->rc_mountview);
		return -1;
	}
	if (landlock_plan_build(policy, llo, abi, why, &ctl->rc_landlock, cause) != 0) {
		seccomp_profile_free(&ctl->rc_seccomp);
		mountview_plan_free(&ctl->rc_mountview);
		return -1;
	}
	return 0;
}

/*
 * Options on the command line replace parts of the policy; they may not go
 * around the host policy either (policy_load() narrowed the policy itself).
 */
static int
run_host_check(int seccomp_force, const struct landlock_opts *llo,
    const struct mountview_opts *mvo, struct json_object *netspec, char **cause)
{
	struct json_object *host, *v;
	const char *bad;
	int on;

	if (hostpolicy_get(&host, cause) != 0)
		return -1;
	if (host == NULL)
		return 0;
	if (netspec != NULL && hostpolicy_netspec(host, netspec, cause) != 0)
		return -1;
	v = policy_get_effective(host, "linux.seccomp.enabled");
	on = json_object_get_boolean(v);
	json_object_put(v);
	if (seccomp_force == SECCOMP_PROFILE_FORCE_OFF && on &&
	    !policy_is_unset(host, "linux.seccomp.enabled")) {
		util_cause(cause, "--no-linux-seccomp: the host policy (%s) requires seccomp",
		    HOSTPOLICY_PATH);
		return -1;
	}
	for (size_t i = 0; i < llo->lo_nro; i++)
		if (!hostpolicy_path_within(host, "linux.landlock.read_only", bad = llo->lo_ro[i]) &&
		    !hostpolicy_path_within(host, "linux.landlock.read_write", bad))
			goto outside;
	for (size_t i = 0; i < llo->lo_nrw; i++)
		if (!hostpolicy_path_within(host, "linux.landlock.read_write", bad = llo->lo_rw[i]))
			goto outside;
	for (size_t i = 0; i < mvo->mo_nallow_unix; i++)
		if (!hostpolicy_path_within(host, "linux.unix_sockets.allow",
		    bad = mvo->mo_allow_unix[i]))
			goto outside;
	return 0;
outside:
	util_cause(cause, "%s is outside what the host policy (%s) allows", bad, HOSTPOLICY_PATH);
	return -1;
}

/* Free what run_plan built. */
static void
run_controls_free(struct run_controls *ctl)
{
	mountview_plan_free(&ctl->rc_mountview);
	seccomp_profile_free(&ctl->rc_seccomp);
	landlock_plan_free(&ctl->rc_landlock);
}

/*
 * An operation that names hosts resolves them through the mediator's DNS
 * proxy, which starts listening once it has the operation's config
 * (boundaryd's config.changed asks for it at once; else its 500 ms
 * refresh). Until then the agent's first lookup would be
 * refused, so the agent is released only once the proxy's TCP listener
 * accepts (it binds UDP first), or after 3 s with a warning: lookups fail
 * closed while it is missing. This process is not in the operation's
 * cgroup, so its connect is neither redirected nor filtered.
 */
static void
run_wait_dns_proxy(const char *listen)
{
	struct sockaddr_storage ss;
	socklen_t sl;

	if (netpolicy_listen_sockaddr(listen, &ss, &sl) != 0)
		return;
	/* boundaryd's config.changed makes it listen within a round trip: look often. */
	for (int i = 0; i < 1500; i++) {
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			break;
		int ok = connect(fd, (struct sockaddr *)&ss, sl) == 0;
		close(fd);
		if (ok)
			return;
		usleep(2000);
	}
	fprintf(stderr, "gensee run: warning: the DNS proxy on %s is not listening (is "
	    "gensee-httpmediatord running?): name lookups will be refused\n", listen);
}

/* operation.create's "host_controls": what the child applies before exec. */
static struct json_object *
run_host_controls(const struct run_controls *ctl)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "seccomp", seccomp_profile_record(&ctl->rc_seccomp));
	json_object_object_add(o, "landlock", landlock_plan_record(&ctl->rc_landlock));
	json_object_object_add(o, "mount_view", mountview_plan_record(&ctl->rc_mountview));
	return o;
}

/*
 * Once the child has exec'd (its close-on-exec status pipe ends without a
 * word), ask boundaryd to look at the tree now: a command that exits
 * within boundaryd's poll interval is then still recorded as what it ran.
 * A failure report on the pipe is left for the end; errors are ignored
 * (boundaryd's own polls still run). Bounded: at most RUN_OBSERVE_WAIT_MS.
 * Sent on *conn (the launcher's connection, -1 after a failure); 1 if sent.
 */
static int
run_observe_exec(int *conn, const char *opid, int status_fd, int64_t *id)
{
	struct pollfd pfd = { .fd = status_fd, .events = POLLIN };
	struct json_object *params;
	struct client_error err = { 0 };
	int avail = 0, fd;

	if (poll(&pfd, 1, RUN_OBSERVE_WAIT_MS) != 1 || (pfd.revents & POLLHUP) == 0 ||
	    ioctl(status_fd, FIONREAD, &avail) != 0 || avail != 0)
		return 0;
	params = json_object_new_object();
	json_object_object_add(params, "operation_id", json_object_new_string(opid));
	/* The reply is read after the wait: boundaryd looks while the child runs. */
	if ((fd = client_send_on(*conn, "client.sock", "operation.observe", params, id, &err)) < 0) {
		client_error_clear(&err);
		*conn = -1;	/* closed by client_send_on */
		return 0;
	}
	*conn = fd;
	return 1;
}

/*
 * Collect the reply of run_observe_exec (its content is not needed). The
 * connection is returned for the end, or -1 if it failed.
 */
static int
run_observe_done(int fd, int64_t id)
{
	struct json_object *res = NULL;
	struct client_error err = { 0 };

	if (fd < 0)
		return -1;
	int rv = client_recv_keep(fd, id, &res, &err);
	json_object_put(res);
	if (rv != 0 && strcmp(err.ce_code, "unavailable") == 0) {
		close(fd);
		fd = -1;
	}
	client_error_clear(&err);
	return fd;
}

/*
 * How a blocked destination could be allowed, if the user wants it: the
 * option for one outside the envelope, the list to edit for a denied one,
 * and for a restricted one (loopback, link-local, metadata ...) that only
 * an exact single-address grant reaches it (network.md).
 */
static void
run_print_hint(const char *dst, const char *proto, long long port, const char *why)
{
	if (dst == NULL || proto == NULL || why == NULL)
		return;
	/* A destination gensee prints is an address; anything else gets no hint. */
	if (strspn(dst, "0123456789abcdefABCDEF.:/") != strlen(dst))
		return;
	int ported = strcmp(proto, "tcp") == 0 || strcmp(proto, "udp") == 0;
	char opt[160];
	if (ported)
		snprintf(opt, sizeof(opt), "--allow-net %s,%s,%lld", dst, proto, port);
	else
		snprintf(opt, sizeof(opt), "--allow-net %s", dst);
	if (strcmp(why, "outside_envelope") == 0)
		fprintf(stderr, "gensee:     to allow it: %s\n", opt);
	else if (strcmp(why, "deny_list") == 0)
		fprintf(stderr, "gensee:     it is denied (--deny-net or linux.network.deny); "
		    "to allow it, remove that entry\n");
	else if (strcmp(why, "restricted_destination") == 0)
		fprintf(stderr, "gensee:     restricted; only an exact grant reaches it: %s\n", opt);
}

/*
 * A --monitor run let everything but its deny list through and counted
 * what its grants do not cover: the options that would allow it, i.e. the
 * allowlist this run needed.
 */
static void
run_print_would_block(const char *opid, struct json_object *net)
{
	struct json_object *top = schema_child(schema_child(net, "blocked_destinations"), "top");
	size_t n = top != NULL && json_object_is_type(top, json_type_array) ?
	    json_object_array_length(top) : 0, count = 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *d = json_object_array_get_idx(top, i);
		const char *dst = schema_string(d, "destination"), *proto = schema_string(d, "protocol");
		if (strcmp(schema_string(d, "reason") ? schema_string(d, "reason") : "",
		    "monitor_would_block") != 0 || dst == NULL || proto == NULL)
			continue;
		if (count++ == 0)
			fprintf(stderr, "gensee: operation %s: monitor: an allowlist of these grants "
			    "would have blocked (see gensee timeline --operation %s):\n", opid, opid);
		fprintf(stderr, "gensee:   %s %s/%lld: %lld packet(s)\n", dst, proto,
		    (long long)schema_int(d, "port", 0), (long long)schema_int(d, "packets", 0));
		run_print_hint(dst, proto, (long long)schema_int(d, "port", 0), "outside_envelope");
	}
}

/* The NetworkBlocked summary at run end: totals, then the top destinations. */
static void
run_print_blocked(const char *opid, struct json_object *net)
{
	struct json_object *bd = schema_child(net, "blocked_destinations");
	struct json_object *top = schema_child(bd, "top");
	size_t n = top != NULL && json_object_is_type(top, json_type_array) ?
	    json_object_array_length(top) : 0;

	fprintf(stderr, "gensee: operation %s: NetworkBlocked: %lld packet(s), %lld byte(s) "
	    "rejected", opid, (long long)schema_int(net, "blocked_packets", 0),
	    (long long)schema_int(net, "blocked_bytes", 0));
	if (bd != NULL)
		fprintf(stderr, ", %lld destination(s)", (long long)schema_int(bd, "destinations", 0));
	fprintf(stderr, " (see gensee timeline --operation %s)\n", opid);
	for (size_t i = 0, shown = 0; i < n && shown < 5; i++) {
		struct json_object *d = json_object_array_get_idx(top, i);
		const char *dst = schema_string(d, "destination"), *proto = schema_string(d, "protocol");
		const char *why = schema_string(d, "reason");
		long long port = (long long)schema_int(d, "port", 0);
		if (why != NULL && strcmp(why, "monitor_would_block") == 0)
			continue; /* let through: run_print_would_block */
		shown++;
		fprintf(stderr, "gensee:   %s %s/%lld: %lld packet(s) (%s)\n", dst ? dst : "?",
		    proto ? proto : "?", port, (long long)schema_int(d, "packets", 0),
		    why ? why : "?");
		run_print_hint(dst, proto, port, why);
	}
}

/*
 * What the held child wrote on its status pipe before it exited: a setup
 * failure or an exec error. Returns 1 when it reported one (printed).
 */
static int
run_child_report(int st_fd, const char *cmd)
{
	struct run_status rs;

	if (read(st_fd, &rs, sizeof(rs)) != (ssize_t)sizeof(rs))
		return 0;
	rs.rs_reason[sizeof(rs.rs_reason) - 1] = '\0';
	if (rs.rs_kind == RUN_STATUS_EXEC)
		fprintf(stderr, "gensee run: %s: %s\n", cmd, strerror(rs.rs_errno));
	else if (rs.rs_kind == RUN_STATUS_SETUP)
		fprintf(stderr, "gensee run: %s not run: %s\n", cmd, rs.rs_reason);
	else
		return 0;
	return 1;
}

/*
 * The command line for `operation list`: arguments joined by spaces, each
 * one with anything but [A-Za-z0-9_./:=@%+,-] in single quotes, ASCII
 * only, cut at RUN_COMMAND_MAX bytes. Display only: the record keeps it as the
 * launcher's claim beside what boundaryd saw (executable, argv digest).
 */
#define RUN_COMMAND_MAX 1024
static char *
run_command_line(char **cmd)
{
	char *out = malloc(RUN_COMMAND_MAX + 8);
	size_t n = 0;

	if (out == NULL)
		return NULL;
	for (size_t i = 0; cmd[i] != NULL && n < RUN_COMMAND_MAX; i++) {
		const char *a = cmd[i];
		int plain = a[0] != '\0' && strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "abcdefghijklmnopqrstuvwxyz0123456789_./:=@%+,-") == strlen(a);
		if (i > 0)
			out[n++] = ' ';
		if (!plain)
			out[n++] = '\'';
		for (; *a != '\0' && n < RUN_COMMAND_MAX; a++) {
			if (*a == '\'' && !plain) {
				if (n + 4 > RUN_COMMAND_MAX)
					break;
				memcpy(out + n, "'\\''", 4);
				n += 4;
			} else {
				/*
				 * Control characters would let a name rewrite the
				 * terminal, and bytes that are not UTF-8 would make the
				 * request invalid: both are shown as '?' (non-ASCII too).
				 */
				unsigned char ch = (unsigned char)*a;
				out[n++] = ch < 0x20 || ch >= 0x7f ? '?' : *a;
			}
		}
		if (!plain && n < RUN_COMMAND_MAX)
			out[n++] = '\'';
	}
	if (n >= RUN_COMMAND_MAX) {
		n = RUN_COMMAND_MAX;
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
	return out;
}

static struct json_object *
run_end_params(const char *opid, int status, struct json_object *denied)
{
	struct json_object *p = json_object_new_object();

	json_object_object_add(p, "operation_id", json_object_new_string(opid));
	if (denied != NULL)
		json_object_object_add(p, "seccomp_denials", json_object_get(denied));
	if (WIFEXITED(status))
		json_object_object_add(p, "exit_code", json_object_new_int(WEXITSTATUS(status)));
	else if (WIFSIGNALED(status))
		json_object_object_add(p, "exit_signal", json_object_new_int(WTERMSIG(status)));
	return p;
}

/* Tell boundaryd how the child ended; retried while it restarts. */
static struct json_object *
run_report_end(int conn, const char *opid, int status, struct json_object *denied)
{
	struct client_error err;
	struct json_object *res = NULL;

	/*
	 * First on the launcher's connection (the create's; boundaryd knows
	 * it already). It may have been closed as idle by a long run: then at
	 * once on a new one.
	 */
	if (conn >= 0) {
		struct json_object *p = run_end_params(opid, status, denied);
		int64_t id;
		int fd = client_send_on(conn, "client.sock", "operation.end", p, &id, &err);
		if (fd >= 0 && client_recv_keep(fd, id, &res, &err) == 0) {
			close(fd);
			return res;
		}
		if (fd >= 0)
			close(fd);
		int transport = strcmp(err.ce_code, "unavailable") == 0;
		if (!transport) {
			fprintf(stderr, "gensee: cannot report the end of %s: %s: %s\n", opid,
			    err.ce_code, err.ce_message);
			client_error_clear(&err);
			return NULL;
		}
		client_error_clear(&err);
	}
	for (int attempt = 0; attempt < 50; attempt++) {
		struct json_object *p = run_end_params(opid, status, denied);
		if (client_call("client.sock", "operation.end", p, &res, &err) == 0)
			return res;
		int retry = strcmp(err.ce_code, "unavailable") == 0;
		if (!retry || attempt == 49)
			fprintf(stderr, "gensee: cannot report the end of %s: %s: %s\n", opid,
			    err.ce_code, err.ce_message);
		client_error_clear(&err);
		if (!retry)
			break;
		usleep(200000);
	}
	return NULL;
}

int
cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ "kill-grace", required_argument, NULL, 'G' },
		{ "json", no_argument, NULL, 'j' },
		{ "sandbox", required_argument, NULL, 's' },
		{ "network-config", required_argument, NULL, 'c' },
		{ "allow-net", required_argument, NULL, 'n' },
		{ "deny-net", required_argument, NULL, 'n' },
		{ "lease-scope", required_argument, NULL, 'n' },
		{ "max-lease-ttl", required_argument, NULL, 'n' },
		{ "deny-all", no_argument, NULL, 'n' },
		{ "monitor", no_argument, NULL, 'n' },
		{ "linux-fanotify", no_argument, NULL, 'F' },
		{ "linux-network", no_argument, NULL, 'N' },
		{ "linux-seccomp", no_argument, NULL, 'L' },
		{ "no-linux-seccomp", no_argument, NULL, 'l' },
		{ "linux-landlock-ro", required_argument, NULL, 'R' },
		{ "linux-landlock-rw", required_argument, NULL, 'W' },
		{ "allow-unix", required_argument, NULL, 'U' },
		{ "agent", required_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ "quiet", no_argument, NULL, 'q' },
		{ NULL, 0, NULL, 0 },
	};
	int64_t timeout = 0, kill_grace = -1;
	int json = 0, quiet = 0, ch, go[2], st[2], status, sandbox = 0, net_opts = 0, idx;
	int fanotify = 0;
	int seccomp_force = SECCOMP_PROFILE_FROM_POLICY, host_opts = 0;
	const char *netconfig = NULL;
	struct netspec_opts nso;
	struct landlock_opts llo;
	struct mountview_opts mvo;
	/* Static: the listener thread reads its profile until the process exits. */
	static struct run_controls ctl = {
		.rc_notify_sock = { -1, -1 },
	};
	/* Static: large, and the mount view plan borrows its paths. */
	static struct agent_run agent;
	const char *agent_forced = NULL;
	struct json_object *netspec = NULL, *hostctl = NULL;

	if (argc >= 2 && strcmp(argv[1], "network") == 0)
		return cmd_run_network(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "fault") == 0)
		return cmd_run_fault(argc - 1, argv + 1);
	/* The tclone lifecycle (cli/tclone.c); `gensee run -- list` still runs list. */
	if (argc >= 2 && tclone_is_subcommand(argv[1]))
		return cmd_tclone_sub(argc - 1, argv + 1);
	if (tclone_wanted(argc, argv))
		return cmd_tclone(argc, argv);
	netspec_opts_init(&nso);
	memset(&llo, 0, sizeof(llo));
	memset(&mvo, 0, sizeof(mvo));
	struct client_error err;
	struct json_object *params, *res = NULL;
	char opid[128];
	pid_t child;

	/*
	 * Threat: the agent writes code into its launcher through
	 * /proc/PPID/mem (same uid, no Yama), or takes its sockets with
	 * pidfd_getfd; that code would run outside the cgroup and every
	 * filter. Non-dumpable, only CAP_SYS_PTRACE reaches it.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
		perror("gensee run: prctl(PR_SET_DUMPABLE)");
		return RUN_EXIT_GENSEE;
	}
	optind = 1;
	while ((ch = getopt_long(argc, argv, "+", longopts, &idx)) != -1) {
		switch (ch) {
		case 's':
			if (strcmp(optarg, "linux") != 0) {
				fprintf(stderr, "gensee run: --sandbox: only 'linux' is supported\n");
				return CLI_EXIT_USAGE;
			}
			sandbox = 1;
			break;
		case 'c':
			netconfig = optarg;
			break;
		case 'F':
			fanotify = 1;
			break;
		case 'N':
			net_opts = 1; /* network enforcement is on with --sandbox linux anyway */
			break;
		case 'n':
			if (netspec_option(&nso, longopts[idx].name, optarg) != 1) {
				fprintf(stderr, "gensee run: --%s: bad value\n", longopts[idx].name);
				return CLI_EXIT_USAGE;
			}
			net_opts = 1;
			break;
		case 'L':
		case 'l': {
			int want = ch == 'L' ? SECCOMP_PROFILE_FORCE_ON : SECCOMP_PROFILE_FORCE_OFF;
			if (seccomp_force != SECCOMP_PROFILE_FROM_POLICY && seccomp_force != want) {
				fprintf(stderr, "gensee run: --linux-seccomp and --no-linux-seccomp "
				    "contradict each other\n");
				return CLI_EXIT_USAGE;
			}
			seccomp_force = want;
			host_opts = 1;
			break;
		}
		case 'R':
		case 'W': {
			const char **v = ch == 'R' ? llo.lo_ro : llo.lo_rw;
			size_t *n = ch == 'R' ? &llo.lo_nro : &llo.lo_nrw;
			if (*n == nitems(llo.lo_ro) || optarg[0] != '/') {
				fprintf(stderr, "gensee run: --%s: expected an absolute path "
				    "(at most %zu)\n", longopts[idx].name, nitems(llo.lo_ro));
				return CLI_EXIT_USAGE;
			}
			v[(*n)++] = optarg;
			host_opts = 1;
			break;
		}
		case 'U':
			if (mvo.mo_nallow_unix == nitems(mvo.mo_allow_unix) || optarg[0] != '/') {
				fprintf(stderr, "gensee run: --allow-unix: expected an absolute "
				    "path (at most %zu)\n", nitems(mvo.mo_allow_unix));
				return CLI_EXIT_USAGE;
			}
			mvo.mo_allow_unix[mvo.mo_nallow_unix++] = optarg;
			host_opts = 1;
			break;
		case 'A':
			agent_forced = optarg;
			break;
		case 't':
			if (util_parse_i64(optarg, 1, 7 * 24 * 3600, &timeout) != 0) {
				fprintf(stderr, "gensee run: --timeout: expected 1..604800 seconds\n");
				return CLI_EXIT_USAGE;
			}
			break;
		case 'G':
			if (util_parse_i64(optarg, 0, 30, &kill_grace) != 0) {
				fprintf(stderr, "gensee run: --kill-grace: expected 0..30 seconds\n");
				return CLI_EXIT_USAGE;
			}
			break;
		case 'j':
			json = 1;
			break;
		case 'q':
			quiet = 1;	/* only warnings and errors: the agent's output stays its own */
			break;
		case 'h':
			return cli_usage(1, run_usage_text);
		default:
			return cli_usage(0, run_usage_text);
		}
	}
	if (optind >= argc)
		return cli_usage(0, run_usage_text);
	char **cmd = argv + optind;
	if ((net_opts || netconfig != NULL || fanotify) && !sandbox) {
		fprintf(stderr, "gensee run: --linux-* and network options need --sandbox linux\n");
		return CLI_EXIT_USAGE;
	}
	/*
	 * Connect now: boundaryd authenticates the connection (this process)
	 * while the plan is made. On failure the create connects again and
	 * reports why.
	 */
	char *early_cause = NULL;
	int early_fd = client_connect("client.sock", &early_cause);
	free(early_cause);
	struct json_object *fanspec = NULL;
	if (agent_forced != NULL && !sandbox) {
		fprintf(stderr, "gensee run: --agent needs --sandbox linux\n");
		return CLI_EXIT_USAGE;
	}
	if (host_opts && !sandbox) {
		fprintf(stderr, "gensee run: --linux-seccomp, --no-linux-seccomp, "
		    "--linux-landlock-ro/-rw and --allow-unix need --sandbox linux\n");
		return CLI_EXIT_USAGE;
	}
	if (sandbox) {
		char *cause = NULL;
		struct json_object *policy = policy_load(&cause);
		int agent_rc = policy != NULL ? agent_plan(&agent, cmd, agent_forced, policy, &cause) :
		    0;
		if (agent_rc < 0) {
			fprintf(stderr, "gensee run: %s\n", cause);
			free(cause);
			json_object_put(policy);
			return CLI_EXIT_USAGE;
		}
		cmd = agent_argv(&agent, cmd);
		if (policy != NULL && netconfig == NULL) {
			struct json_object *warnings = json_object_new_array();
			netspec = netspec_build(&nso, policy, warnings, &cause);
			/* The model API hosts: a deny-all run still reaches its model. */
			agent_netspec(&agent, netspec);
			for (size_t i = 0; i < json_object_array_length(warnings); i++)
				fprintf(stderr, "gensee run: warning: %s\n",
				    json_object_get_string(json_object_array_get_idx(warnings, i)));
			json_object_put(warnings);
		}
		if (policy != NULL && (netconfig != NULL || netspec != NULL))
			fanspec = fanspec_build(policy, fanotify, &cause);
		/* --sandbox linux without enforcement would be a lie: refuse. */
		if (policy == NULL || (netconfig == NULL && netspec == NULL) || fanspec == NULL ||
		    run_host_check(seccomp_force, &llo, &mvo, netspec, &cause) != 0 ||
		    run_plan(policy, seccomp_force, &llo, &mvo, &agent, &ctl, &cause) != 0) {
			json_object_put(fanspec);
			fprintf(stderr, "gensee run: %s\n", cause);
			free(cause);
			json_object_put(policy);
			json_object_put(netspec);
			return RUN_EXIT_GENSEE;
		}
		json_object_put(policy);
		struct json_object *skipped = ctl.rc_landlock.lp_skipped;
		for (size_t i = 0; i < json_object_array_length(skipped); i++)
			fprintf(stderr, "gensee run: warning: landlock: %s: not applied: %s\n",
			    landlock_mode_name(ctl.rc_landlock.lp_mode),
			    json_object_get_string(json_object_array_get_idx(skipped, i)));
		skipped = ctl.rc_mountview.mv_skipped;
		for (size_t i = 0; i < json_object_array_length(skipped); i++)
			fprintf(stderr, "gensee run: warning: mount view: not applied: %s\n",
			    json_object_get_string(json_object_array_get_idx(skipped, i)));
		/* No listener socket: the kernel answers ENOSYS, still a refusal. */
		if (ctl.rc_seccomp.sp_notify &&
		    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl.rc_notify_sock) != 0) {
			fprintf(stderr, "gensee run: warning: seccomp refusals will not be listed: "
			    "%s\n", strerror(errno));
			ctl.rc_seccomp.sp_notify = 0;
		}
		/*
		 * The filter, written before the fork in microseconds
		 * (seccompbpf.c: libseccomp's compiler took a millisecond or
		 * more here); the child loads it from its copy of this memory.
		 */
		if (ctl.rc_seccomp.sp_enabled && seccomp_profile_program(&ctl.rc_seccomp,
		    ctl.rc_bpf, nitems(ctl.rc_bpf), &ctl.rc_bpf_len, &cause) != 0) {
			fprintf(stderr, "gensee run: %s\n", cause);
			free(cause);
			run_controls_free(&ctl);
			return RUN_EXIT_GENSEE;
		}
		hostctl = run_host_controls(&ctl);
		if (agent.ar_active) {
			json_object_object_add(hostctl, "agent", agent_json(&agent));
			agent_environ(&agent);
		}
		/*
		 * Temporary files go to the private /tmp, the one writable
		 * place for them: SQLite (Codex's state) and others otherwise
		 * try /var/tmp, which Landlock refuses, and lose their data.
		 */
		if (ctl.rc_mountview.mv_private_tmp && getenv("TMPDIR") == NULL)
			setenv("TMPDIR", "/tmp", 0);
	}

	if (pipe2(go, O_CLOEXEC) != 0 || pipe2(st, O_CLOEXEC) != 0) {
		perror("gensee run: pipe");
		return RUN_EXIT_GENSEE;
	}
	/*
	 * The request is built before the fork: after it, every page this
	 * process writes is copied first (the child shares them until exec).
	 */
	params = json_object_new_object();
	if (timeout > 0)
		json_object_object_add(params, "timeout_seconds", json_object_new_int64(timeout));
	if (kill_grace >= 0)
		json_object_object_add(params, "kill_grace_seconds", json_object_new_int64(kill_grace));
	char *cmdline = run_command_line(cmd);
	if (cmdline != NULL)
		json_object_object_add(params, "command", json_object_new_string(cmdline));
	free(cmdline);
	if (netspec != NULL)
		json_object_object_add(params, "network", netspec);
	if (fanspec != NULL && schema_bool(fanspec, "enabled", 0))
		json_object_object_add(params, "fanotify", fanspec);
	else
		json_object_put(fanspec);
	if (netconfig != NULL)
		json_object_object_add(params, "network_config", json_object_new_string(netconfig));
	if (hostctl != NULL && RUN_SEND_HOST_CONTROLS)
		json_object_object_add(params, "host_controls", hostctl);
	else
		json_object_put(hostctl);
	if (run_env_prepare() != 0) {
		perror("gensee run: the agent's environment");
		return RUN_EXIT_GENSEE;
	}
	fflush(NULL);
	child = fork();
	if (child < 0) {
		perror("gensee run: fork");
		return RUN_EXIT_GENSEE;
	}
	if (child == 0) {
		close(go[1]);
		close(st[0]);
		run_child(go[0], st[1], cmd, sandbox ? &ctl : NULL, json);
	}
	close(go[0]);
	close(st[1]);
	/*
	 * No start time: boundaryd reads the held child's itself (it cannot
	 * be reaped and its pid reused while we wait), and this read cost
	 * up to 0.7 ms here while the child starts on the other CPU.
	 */
	json_object_object_add(params, "pid", json_object_new_int(child));
	int64_t create_id = 0;
	int create_fd = client_send_on(early_fd, "client.sock", "operation.create", params,
	    &create_id, &err);
	early_fd = -1;
	/*
	 * The wait loop answers the tree's seccomp refusals itself (run_wait)
	 * when it can wait on a pidfd; else a listener thread does.
	 */
	int child_pidfd = sandbox && ctl.rc_notify_sock[0] >= 0 ?
	    (int)syscall(SYS_pidfd_open, child, 0) : -1;
	if (child_pidfd >= 0)
		fcntl(child_pidfd, F_SETFD, FD_CLOEXEC);
	if (create_fd >= 0 && sandbox)
		run_start_controls(&ctl, child_pidfd >= 0);
	if (create_fd < 0 || client_recv_keep(create_fd, create_id, &res, &err) != 0) {
		if (create_fd >= 0)
			close(create_fd);
		/*
		 * The child has run nothing of cmd (it waits for the go); it may
		 * wait for its filter as well. A report it made before is kept.
		 */
		kill(child, SIGKILL);
		close(go[1]);
		waitpid(child, NULL, 0);
		/* A child that failed its own setup is why: say that, not the symptom. */
		if (!run_child_report(st[0], cmd[0]))
			fprintf(stderr, "gensee run: cannot create the operation: %s: %s\n",
			    err.ce_code, err.ce_message);
		client_error_clear(&err);
		if (sandbox)
			run_controls_free(&ctl);
		return RUN_EXIT_GENSEE;
	}
	util_strlcpy(opid, schema_string(res, "operation_id"), sizeof(opid));
	char proxy_url[200] = "";
	if (schema_string(res, "proxy_url") != NULL &&
	    strlen(schema_string(res, "proxy_url")) < sizeof(proxy_url) &&
	    strchr(schema_string(res, "proxy_url"), ' ') == NULL &&
	    strchr(schema_string(res, "proxy_url"), '\n') == NULL)
		util_strlcpy(proxy_url, schema_string(res, "proxy_url"), sizeof(proxy_url));
	if (schema_string(res, "dns_listen") != NULL)
		run_wait_dns_proxy(schema_string(res, "dns_listen"));
	struct json_object *warn = schema_child(res, "warnings");
	for (size_t i = 0; warn != NULL && i < json_object_array_length(warn); i++)
		fprintf(stderr, "gensee run: warning: %s\n",
		    json_object_get_string(json_object_array_get_idx(warn, i)));
	if (!json && !quiet)
		fprintf(stderr, "gensee: operation %s: running %s (pid %d)\n", opid, cmd[0],
		    (int)child);
	json_object_put(res);

	/* Like system(3): the terminal's signals reach the child; we stay to report. */
	struct sigaction sa = { .sa_handler = run_on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	/* boundaryd may close our connection as idle during a long run: an error, not death. */
	signal(SIGPIPE, SIG_IGN);

	char line[384];
	int len = snprintf(line, sizeof(line), "%s%s%s\n", opid, proxy_url[0] ? " " : "", proxy_url);
	if (util_write_all(go[1], line, (size_t)len) != 0) {
		perror("gensee run: releasing the child");
		kill(child, SIGKILL);
	}
	/* The proxy credential is the agent's: not kept here. */
	explicit_bzero(line, sizeof(line));
	explicit_bzero(proxy_url, sizeof(proxy_url));
	close(go[1]);
	int64_t observe_id = 0;
	int conn = create_fd;	/* observe and end follow on the create's connection */
	int observing = run_observe_exec(&conn, opid, st[0], &observe_id);

	/* boundaryd asks with SIGTERM at the timeout and kills after the grace. */
	int64_t grace_ms = (kill_grace >= 0 ? kill_grace : PROTO_KILL_GRACE_DEFAULT) * 1000;
	int64_t fallback = timeout > 0 ?
	    util_monotonic_ms() + timeout * 1000 + grace_ms + RUN_FALLBACK_GRACE_MS : 0;
	int fallback_fired = 0;
	if (run_wait(child, child_pidfd, &ctl, opid, fallback, &fallback_fired, &status) != 0)
		return RUN_EXIT_GENSEE;
	run_child_report(st[0], cmd[0]);
	close(st[0]);
	struct json_object *denied = sandbox ? run_denials() : NULL;
	if (observing)
		conn = run_observe_done(conn, observe_id);
	res = run_report_end(conn, opid, status, denied);
	if (sandbox)
		run_controls_free(&ctl);	/* after the report: nothing waits on it */
	agent_finish(&agent);	/* configuration planted in the store goes now */
	const char *state = res ? schema_string(res, "state") : NULL;
	int rc;
	if ((state != NULL && strcmp(state, "timed_out") == 0) || fallback_fired)
		rc = RUN_EXIT_TIMEOUT;
	else if (WIFEXITED(status))
		rc = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		rc = 128 + WTERMSIG(status);
	else
		rc = RUN_EXIT_GENSEE;
	struct json_object *net = res ? schema_child(res, "network") : NULL;
	if (!quiet && net != NULL && schema_int(net, "blocked_packets", 0) > 0)
		run_print_blocked(opid, net);
	if (!quiet && net != NULL)
		run_print_would_block(opid, net);
	/* What the DNS proxy, the egress, fanotify and Landlock refused, and what was not covered. */
	struct json_object *not_reported = NULL;
	struct json_object *refused = sandbox ? explain_refusals(opid, &not_reported) : NULL;
	if (!quiet && !json)
		explain_print(opid, refused, not_reported, rc != 0);
	if (json && res != NULL) {
		/*
		 * boundaryd answers the end before it removes the cgroup and the
		 * table (record: cleanup "pending"); it serves requests in order,
		 * so the record asked for now is the final one.
		 */
		struct json_object *p = json_object_new_object(), *ins = NULL;
		struct client_error ierr;
		json_object_object_add(p, "operation_id", json_object_new_string(opid));
		if (client_call("client.sock", "operation.inspect", p, &ins, &ierr) == 0) {
			struct json_object *rec = schema_child(ins, "record");
			if (rec != NULL)
				json_object_object_add(res, "record", json_object_get(rec));
			json_object_put(ins);
		} else {
			client_error_clear(&ierr);	/* the end's own record stays */
		}
	}
	if (json) {
		struct json_object *out = json_object_new_object();
		json_object_object_add(out, "operation_id", json_object_new_string(opid));
		json_object_object_add(out, "state", state ? json_object_new_string(state) : NULL);
		json_object_object_add(out, "exit_status", json_object_new_int(rc));
		if (denied != NULL)
			json_object_object_add(out, "seccomp_denials", json_object_get(denied));
		if (refused != NULL)
			json_object_object_add(out, "refused", json_object_get(refused));
		if (not_reported != NULL)
			json_object_object_add(out, "not_reported", json_object_get(not_reported));
		if (res != NULL) {
			json_object_object_add(out, "exit",
			    json_object_get(schema_child(res, "exit")));
			json_object_object_add(out, "processes",
			    json_object_get(schema_child(res, "processes")));
			json_object_object_add(out, "record",
			    json_object_get(schema_child(res, "record")));
		}
		printf("%s\n", json_object_to_json_string_ext(out, JSON_C_TO_STRING_PRETTY |
		    JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(out);
	} else if (!quiet) {
		int64_t nproc = res ? schema_int(res, "processes", 0) : 0;

		fprintf(stderr, "gensee: operation %s: %s, exit status %d, %lld process%s recorded\n",
		    opid, state ? state : "unknown", rc, (long long)nproc, nproc == 1 ? "" : "es");
		/*
		 * Landlock's EACCES and the mount view's missing files are not
		 * reported to anyone (the kernel logs Landlock denials only to an
		 * audit daemon): say where a failure may have come from.
		 */
		if (denied != NULL) {
			const char *sep = "";
			fprintf(stderr, "gensee: operation %s: seccomp refused:", opid);
			json_object_object_foreach(denied, name, n) {
				fprintf(stderr, "%s %s (%d)", sep, name, json_object_get_int(n));
				sep = ",";
			}
			fprintf(stderr, " (see gensee debug seccomp-profile)\n");
		}
		if (sandbox && rc != 0 && rc != RUN_EXIT_TIMEOUT)
			fprintf(stderr, "gensee: operation %s: sandboxed: an EACCES on a write may be "
			    "Landlock, a missing file or socket the mount view (gensee debug plan "
			    "shows both)\n", opid);
	}
	json_object_put(denied);
	json_object_put(refused);
	json_object_put(not_reported);
	json_object_put(res);
	agent_run_free(&agent);
	return rc;
}
