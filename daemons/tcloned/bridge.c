/*
 * bridge.c: the agent host-control bridge of gensee-tcloned.
 *
 * Every agent that is not observe-only gets its own listening socket,
 * RUNTIME/tclone/bridge/RUN.sock on the host (a root directory the agent
 * does not see), bound at RUNTIME/tclone/control.sock in its mount
 * namespace. Trust model: the agent is not trusted, so the run a request
 * acts for is the run whose socket was used (never anything the request
 * says: a "caller_run_id" in it is ignored), and the connecting process
 * (SO_PEERCRED, pinned by its pidfd/start time) must sit in that run's
 * operation cgroup, which the agent cannot leave. Threat: a process of
 * the same uid outside the run (the user's shell, another run's agent
 * through /proc/PID/root) reaching the socket inode and speaking as the
 * run; the filesystem mode is not the check, the cgroup is.
 *
 * What a run may do through it, and nothing else (the seed's rules):
 * list, diff and summary of itself and its direct children; compare of a
 * group of its direct children; fork of itself; exec only in itself (the
 * CLI gets its own tmux socket through attach of itself); send to a direct
 * child; merge of a direct child into itself, switch to or discard of a
 * direct child only with a recorded user approval for that same choice,
 * consumed once the command has succeeded. The approval is recorded with
 * tclone.approve through the same bridge, by the agent's UserPromptSubmit
 * hook. This is a workflow-integrity gate, as the seed says, not a
 * boundary against the run itself (its hook runs with its identity); what
 * it does bound is every other run: no run acts on its source, siblings,
 * grandchildren or another source.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "log.h"
#include "proto.h"
#include "safefs.h"
#include "schema.h"
#include "tcloned.h"
#include "util.h"

#define BRIDGE_SEND_TIMEOUT_MS 5000

/* Make RUNTIME/tclone/bridge (root, 0711: sockets are reached by name only), emptied. */
void
bridge_init(struct tcloned *t)
{
	int fd;

	if (safefs_mkdirs(t->td_runtime_fd, TCLONED_BRIDGE_DIR, 0711) != 0 ||
	    fchmodat(t->td_runtime_fd, TCLONED_BRIDGE_DIR, 0711, 0) != 0)
		fatal("%s/" TCLONED_BRIDGE_DIR, t->td_runtime);
	/* Sockets of an earlier tcloned: nobody listens on them any more. */
	if ((fd = safefs_opendir(t->td_runtime_fd, "tclone")) < 0)
		fatal("%s/tclone", t->td_runtime);
	if (safefs_remove_dir(fd, "bridge") != 0 && errno != ENOENT)
		log_warn("%s/" TCLONED_BRIDGE_DIR ": clearing", t->td_runtime);
	close(fd);
	if (safefs_mkdirs(t->td_runtime_fd, TCLONED_BRIDGE_DIR, 0711) != 0 ||
	    fchmodat(t->td_runtime_fd, TCLONED_BRIDGE_DIR, 0711, 0) != 0)
		fatal("%s/" TCLONED_BRIDGE_DIR, t->td_runtime);
}

int
bridge_host_path(struct tcloned *t, const struct trun *r, char *out, size_t len)
{
	return (size_t)snprintf(out, len, "%s/" TCLONED_BRIDGE_DIR "/%s.sock", t->td_runtime,
	    r->tr_id) < len ? 0 : -1;
}

/*
 * Listen on the run's socket. It belongs to the run's user, 0600: another
 * user cannot even connect; the same user can, and is refused unless it
 * is inside the run (bridge_admit).
 */
int
bridge_open(struct tcloned *t, struct trun *r, char **cause)
{
	struct sockaddr_un sun;
	char name[TCLONED_ID_MAX + 8];
	int dfd, fd;

	if (r->tr_bridge_open)
		return 0;
	snprintf(name, sizeof(name), "%s.sock", r->tr_id);
	if ((dfd = safefs_opendir(t->td_runtime_fd, TCLONED_BRIDGE_DIR)) < 0) {
		util_cause(cause, "%s/" TCLONED_BRIDGE_DIR ": %s", t->td_runtime, strerror(errno));
		return -1;
	}
	if (unlinkat(dfd, name, 0) != 0 && errno != ENOENT) {
		util_cause(cause, "bridge socket: unlink: %s", strerror(errno));
		close(dfd);
		return -1;
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	/* Through the directory fd: the runtime dir may be longer than sun_path allows. */
	snprintf(sun.sun_path, sizeof(sun.sun_path), "/proc/self/fd/%d/%s", dfd, name);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
	    fchownat(dfd, name, r->tr_uid, r->tr_gid, AT_SYMLINK_NOFOLLOW) != 0 ||
	    fchmodat(dfd, name, 0600, 0) != 0 || listen(fd, 16) != 0) {
		util_cause(cause, "bridge socket: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		unlinkat(dfd, name, 0);
		close(dfd);
		return -1;
	}
	close(dfd);
	r->tr_bridge_fd = fd;
	r->tr_bridge_open = 1;
	return 0;
}

/* Stop serving the run's bridge (its agent is gone or the run is discarded). */
void
bridge_close(struct tcloned *t, struct trun *r)
{
	char rel[TCLONED_ID_MAX + 32];

	if (!r->tr_bridge_open)
		return;
	close(r->tr_bridge_fd);
	r->tr_bridge_open = 0;
	r->tr_bridge_fd = -1;
	snprintf(rel, sizeof(rel), TCLONED_BRIDGE_DIR "/%s.sock", r->tr_id);
	if (unlinkat(t->td_runtime_fd, rel, 0) != 0 && errno != ENOENT)
		log_warn("%s/%s", t->td_runtime, rel);
}

static struct trun *
run_by_id(struct tcloned *t, const char *id)
{
	for (int i = 0; i < t->td_nruns; i++)
		if (strcmp(t->td_runs[i]->tr_id, id) == 0)
			return t->td_runs[i];
	return NULL;
}

/*
 * At accept: is the peer a process of the run whose socket it used? Its
 * cgroup (read at accept, pid reuse excluded by peer_identify) must be the
 * run's operation cgroup or below it. NULL when admitted, else why not.
 */
const char *
bridge_admit(struct tcloned *t, const char *run_id, const struct peer *p, char *op, size_t oplen)
{
	struct trun *r = run_by_id(t, run_id);
	char want[PEER_CGROUP_MAX];
	size_t n;

	op[0] = '\0';
	if (r == NULL || !r->tr_bridge_open || strcmp(r->tr_state, "running") != 0 ||
	    r->tr_op[0] == '\0')
		return "the run is not running";
	if (p->pr_cgroup_unknown)
		return "the peer's cgroup cannot be read";
	if ((size_t)snprintf(want, sizeof(want), "%s/%s", t->td_cgroup_base, r->tr_op) >=
	    sizeof(want))
		return "cgroup path too long";
	n = strlen(want);
	if (strncmp(p->pr_cgroup, want, n) != 0 ||
	    (p->pr_cgroup[n] != '\0' && p->pr_cgroup[n] != '/'))
		return "the peer is not inside the run's operation";
	if (p->pr_uid != r->tr_uid)
		return "the peer is not the run's user";
	util_strlcpy(op, r->tr_op, oplen);
	return NULL;
}

/* -- serving one request -- */

struct breq {
	struct tcloned *bq_td;
	const struct peer *bq_peer;
	struct trun *bq_self;
	const char *bq_method;
	const char **bq_code;
	char **bq_msg;
};

static struct json_object *
bdeny(struct breq *q, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Refuse, and record the refusal (agent-originated) in the history. */
static struct json_object *
bdeny(struct breq *q, const char *code, const char *fmt, ...)
{
	va_list ap;
	char *m = NULL;

	va_start(ap, fmt);
	if (vasprintf(&m, fmt, ap) < 0)
		m = NULL;
	va_end(ap);
	*q->bq_code = code;
	free(*q->bq_msg);
	*q->bq_msg = m;
	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "method", json_object_new_string(q->bq_method));
	json_object_object_add(d, "code", json_object_new_string(code));
	json_object_object_add(d, "reason", json_object_new_string(m != NULL ? m : code));
	tcloned_history(q->bq_td, q->bq_self != NULL ? q->bq_self->tr_id : "-", "bridge", "denied",
	    q->bq_self, NULL, q->bq_peer->pr_uid, d);
	log_info("bridge: refused %s from pid %d: %s", q->bq_method, (int)q->bq_peer->pr_pid,
	    m != NULL ? m : code);
	return NULL;
}

static void
approval_consume(struct breq *q, struct trun *child, const char *action)
{
	char *cause = NULL;
	struct json_object *d = json_object_new_object();

	json_object_object_del(child->tr_rec, "approval");
	if (tcloned_save(q->bq_td, child, &cause) != 0) {
		log_warnx("approval of %s: %s", child->tr_id, cause);
		free(cause);
	}
	json_object_object_add(d, "choice", json_object_new_string(action));
	tcloned_history(q->bq_td, child->tr_id, "approve", "consumed", child, child->tr_group,
	    q->bq_peer->pr_uid, d);
}

/* Record the user's choice for a direct child (checked by bridge_scope). */
static struct json_object *
b_approve(struct breq *q, struct trun *child, struct json_object *params)
{
	const char *action = schema_string(params, "action");
	char now[40], *cause = NULL;

	if (strcmp(child->tr_state, "discarded") == 0)
		return bdeny(q, PE_STATE, "%s is discarded", child->tr_id);
	struct json_object *a = json_object_new_object();
	util_now_rfc3339(now, sizeof(now));
	json_object_object_add(a, "action", json_object_new_string(action));
	json_object_object_add(a, "by_run", json_object_new_string(q->bq_self->tr_id));
	json_object_object_add(a, "recorded_ms", json_object_new_int64(util_now_ms()));
	json_object_object_add(a, "time", json_object_new_string(now));
	json_object_object_add(a, "pid", json_object_new_int(q->bq_peer->pr_pid));
	/* A later choice replaces an earlier one: the user's last word counts. */
	json_object_object_add(child->tr_rec, "approval", json_object_get(a));
	if (tcloned_save(q->bq_td, child, &cause) != 0) {
		json_object_object_del(child->tr_rec, "approval");
		json_object_put(a);
		bdeny(q, PE_INTERNAL, "recording the approval: %s", cause);
		free(cause);
		return NULL;
	}
	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "choice", json_object_new_string(action));
	tcloned_history(q->bq_td, child->tr_id, "approve", "recorded", child, child->tr_group,
	    q->bq_peer->pr_uid, d);
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "run_id", json_object_new_string(child->tr_id));
	json_object_object_add(o, "approval", a);
	return o;
}

/* Type text and Enter into a direct child's session, as the user (never as root). */
static struct json_object *
b_send(struct breq *q, struct trun *child, struct json_object *params)
{
	struct tcloned *t = q->bq_td;
	const char *text = schema_string(params, "text");	/* checked by bridge_scope */
	char sock[PATH_MAX];

	if (strcmp(child->tr_state, "running") != 0)
		return bdeny(q, PE_STATE, "%s is not running (%s)", child->tr_id, child->tr_state);
	if ((size_t)snprintf(sock, sizeof(sock), "%s/tclone/%s/tmux.sock", t->td_runtime,
	    child->tr_id) >= sizeof(sock))
		return bdeny(q, PE_INTERNAL, "runtime path too long");
	/*
	 * First out of any mode (a failed exec leaves the pane in view mode):
	 * threat: typed text read as copy-mode key bindings, which run tmux
	 * commands, instead of reaching the agent.
	 */
	for (int step = 0; step < 3; step++) {
		char *a1[] = { "tmux", "-S", sock, "send-keys", "-t", TCLONED_SESSION, "-l", "--",
			(char *)text, NULL };
		char *a2[] = { "tmux", "-S", sock, "send-keys", "-t", TCLONED_SESSION, "Enter", NULL };
		char *a0[] = { "tmux", "-S", sock, "copy-mode", "-q", "-t", TCLONED_SESSION, NULL };
		char **av = step == 0 ? a0 : step == 1 ? a1 : a2;
		char *envp[] = { "PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL };
		char why[160] = "";
		int st = 0, ep[2];
		if (pipe2(ep, O_CLOEXEC) != 0)
			return bdeny(q, PE_INTERNAL, "pipe: %s", strerror(errno));
		pid_t pid = fork();
		if (pid < 0) {
			close(ep[0]);
			close(ep[1]);
			return bdeny(q, PE_INTERNAL, "fork: %s", strerror(errno));
		}
		if (pid == 0) {
			sigset_t none;
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
			int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (nul < 0 || dup2(nul, STDIN_FILENO) < 0 || dup2(ep[1], STDOUT_FILENO) < 0 ||
			    dup2(ep[1], STDERR_FILENO) < 0 || chdir("/") != 0 || setgroups(0, NULL) != 0 ||
			    setresgid(child->tr_gid, child->tr_gid, child->tr_gid) != 0 ||
			    setresuid(child->tr_uid, child->tr_uid, child->tr_uid) != 0)
				_exit(126);
			execve("/usr/bin/tmux", av, envp);
			_exit(127);
		}
		close(ep[1]);
		int64_t deadline = util_monotonic_ms() + BRIDGE_SEND_TIMEOUT_MS;
		for (;;) {
			pid_t w = waitpid(pid, &st, WNOHANG);
			if (w == pid)
				break;
			if ((w < 0 && errno != EINTR) || util_monotonic_ms() > deadline) {
				kill(pid, SIGKILL);
				waitpid(pid, NULL, 0);
				close(ep[0]);
				return bdeny(q, PE_INTERNAL, "tmux send-keys did not finish");
			}
			usleep(10000);
		}
		/* What tmux said, bounded (the pipe holds it: tmux has exited). */
		int fl = fcntl(ep[0], F_GETFL);
		if (fl >= 0 && fcntl(ep[0], F_SETFL, fl | O_NONBLOCK) == 0) {
			ssize_t n = read(ep[0], why, sizeof(why) - 1);
			why[n > 0 ? n : 0] = '\0';
			why[strcspn(why, "\n")] = '\0';
		}
		close(ep[0]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return bdeny(q, PE_STATE, "tmux send-keys (step %d) to %s failed: %s", step, child->tr_id, why);
	}
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "run_id", json_object_new_string(child->tr_id));
	json_object_object_add(o, "sent", json_object_new_boolean(1));
	return o;
}

/* The caller's list: itself and its direct children, nothing else. */
static struct json_object *
scope_list(struct breq *q, struct json_object *all)
{
	struct json_object *runs = schema_child(all, "runs"), *keep = json_object_new_array();

	for (size_t i = 0; runs != NULL && i < json_object_array_length(runs); i++) {
		struct json_object *e = json_object_array_get_idx(runs, i);
		const char *id = schema_string(e, "run_id");
		struct trun *r = id != NULL ? run_by_id(q->bq_td, id) : NULL;
		if (r != NULL && (r == q->bq_self || bridge_is_child(q->bq_self, r)))
			json_object_array_add(keep, json_object_get(e));
	}
	json_object_object_add(all, "runs", keep);
	return all;
}

struct json_object *
bridge_serve(struct tcloned *t, const struct peer *p, const char *run_id, const char *op,
    const char *refused, const char *method, struct json_object *params, const char **code,
    char **message)
{
	struct breq q = { t, p, NULL, method, code, message };
	struct json_object *clean = NULL, *res = NULL, *v;
	struct trun *self = run_by_id(t, run_id);
	struct bridge_plan bp;
	const char *need = NULL, *claimed = NULL, *scode = NULL;
	char *why = NULL;

	/* Every record this request makes names the socket it came through and the pid. */
	t->td_origin_run = run_id;
	t->td_origin_pid = p->pr_pid;
	if (refused != NULL) {
		bdeny(&q, TE_NOT_IN_RUN, "%s", refused);
		goto out;
	}
	/* The run may have ended, or been relaunched as another operation, since accept. */
	if (self == NULL || strcmp(self->tr_state, "running") != 0 || strcmp(self->tr_op, op) != 0) {
		bdeny(&q, TE_NOT_IN_RUN, "the run is not running");
		goto out;
	}
	q.bq_self = self;
	/*
	 * Whatever run the request claims to come from is ignored: the
	 * socket names the run. The CLI sends GENSEE_RUN_ID as a hint only.
	 */
	if ((v = schema_child(params, "caller_run_id")) != NULL) {
		if (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) > 200) {
			bdeny(&q, PE_INVALID_PARAMS, "caller_run_id: a string");
			goto out;
		}
		claimed = json_object_get_string(v);
		if (strcmp(claimed, self->tr_id) != 0)
			log_info("bridge: pid %d claims run %.80s, is %s: ignored", (int)p->pr_pid,
			    claimed, self->tr_id);
	}
	clean = json_object_new_object();
	json_object_object_foreach(params, k, val)
		if (strcmp(k, "caller_run_id") != 0)
			json_object_object_add(clean, k, json_object_get(val));
	if (bridge_scope(t, self, p->pr_uid, method, clean, &bp, &scode, &why) != 0) {
		bdeny(&q, scode, "%s", why != NULL ? why : scode);
		goto out;
	}
	if (bp.bp_local) {
		res = strcmp(method, "tclone.approve") == 0 ? b_approve(&q, bp.bp_target, clean) :
		    b_send(&q, bp.bp_target, clean);
		goto out;
	}
	need = bp.bp_need;
	if (need != NULL && !bridge_approval_matches(self, bp.bp_target, need)) {
		bdeny(&q, TE_APPROVAL, "%s of %s needs the user's approval, recorded by a later "
		    "UserPromptSubmit hook (gensee run approve %s --%s)", need, bp.bp_target->tr_id,
		    bp.bp_target->tr_id, need);
		goto out;
	}
	res = lifecycle_dispatch(t, p, method, clean, code, message);
	if (res != NULL && strcmp(method, "tclone.list") == 0)
		res = scope_list(&q, res);
	/* Consumed only once the command has succeeded (a conflict merged nothing). */
	if (res != NULL && need != NULL && (strcmp(need, "merge") != 0 ||
	    schema_bool(res, "merged", 0)))
		approval_consume(&q, bp.bp_target, need);
out:
	t->td_origin_run = NULL;
	free(why);
	json_object_put(clean);
	if (res != NULL && json_object_is_type(res, json_type_object))
		json_object_object_add(res, "caller_run_id", json_object_new_string(run_id));
	return res;
}
