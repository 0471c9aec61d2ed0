/*
 * operation.c: the operation supervisor.
 *
 * An operation is one supervised process tree: a root process the caller
 * forked and is holding, a cgroup that contains the whole tree, and a record
 * on disk. boundaryd polls the tree while it runs, kills the whole cgroup on
 * timeout, on request, or (for leftover descendants) when the root exits,
 * and releases the cgroup once it has drained.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>
#include <sodium.h>

#include "boundaryd.h"
#include "log.h"
#include "ocsf.h"
#include "oprecord.h"
#include "record.h"
#include "proc.h"
#include "safefs.h"
#include "sandbox.h"
#include "util.h"

/* Set a portion of the record once (host_controls, fanotify): never overwritten. */
struct op_portion_arg {
	const char *pa_key;
	struct json_object *pa_value;
};
static int op_mut_portion_once(struct json_object *rec, void *arg, char **cause);
static struct json_object *op_term_json(struct operation *op, int populated);

static void op_reap_cb(evutil_socket_t, short, void *);
static void op_answer_waiters(struct operation *);
static void op_answer_waiters_with(struct operation *, struct json_object *);
struct op_batch;
static void op_hc_check(struct operation *, int, struct op_batch *);
static void op_start_reap(struct operation *);
static void lineage_batch_free(struct lineage_batch *);
static int op_watch_launcher(struct operation *);
static struct lineage_entry *op_lin_find(struct operation *, pid_t, uint64_t);

void
reply_error(struct op_reply *r, const char *code, const char *fmt, ...)
{
	va_list ap;
	r->or_code = code;
	free(r->or_msg);
	r->or_msg = NULL;
	va_start(ap, fmt);
	if (vasprintf(&r->or_msg, fmt, ap) < 0)
		r->or_msg = NULL;
	va_end(ap);
}

int
operation_count(struct boundaryd *bd)
{
	struct operation *op;
	int n = 0;
	TAILQ_FOREACH(op, &bd->bd_ops, op_entry)
		n++;
	return n;
}

struct operation *
operation_find(struct boundaryd *bd, const char *id)
{
	struct operation *op;
	TAILQ_FOREACH(op, &bd->bd_ops, op_entry)
		if (strcmp(op->op_id, id) == 0)
			return op;
	return NULL;
}

static void
op_free(struct operation *op)
{
	struct op_waiter *w;

	if (op->op_create_timer != NULL)
		event_free(op->op_create_timer);
	json_object_put(op->op_create_result);
	json_object_put(op->op_fanotify);
	/* A prepared cell's table that no network state took over: it guards nothing now. */
	if (op->op_spare_table[0] != '\0' && op->op_bd->bd_nft != NULL) {
		char *cause = NULL;
		if (nft_table_delete(op->op_bd->bd_nft, op->op_spare_table, &cause) != 0) {
			log_warnx("%s: delete table %s: %s", op->op_id, op->op_spare_table, cause);
			free(cause);
		}
	}
	if (op->op_fin_lb != NULL) {
		lineage_batch_free(op->op_fin_lb);
		free(op->op_fin_lb);
	}
	while ((w = TAILQ_FIRST(&op->op_waiters)) != NULL) {
		TAILQ_REMOVE(&op->op_waiters, w, ow_entry);
		free(w);
	}
	if (op->op_pidfd_ev != NULL)
		event_free(op->op_pidfd_ev);
	if (op->op_poll_ev != NULL)
		event_free(op->op_poll_ev);
	if (op->op_timeout_ev != NULL)
		event_free(op->op_timeout_ev);
	if (op->op_term_ev != NULL)
		event_free(op->op_term_ev);
	if (op->op_reap_ev != NULL)
		event_free(op->op_reap_ev);
	if (op->op_launcher_ev != NULL)
		event_free(op->op_launcher_ev);
	if (op->op_launcher_grace_ev != NULL)
		event_free(op->op_launcher_grace_ev);
	if (op->op_launcher_pidfd >= 0)
		close(op->op_launcher_pidfd);
	if (op->op_pidfd >= 0)
		close(op->op_pidfd);
	if (op->op_dirfd >= 0)
		close(op->op_dirfd);
	if (op->op_cg_valid)
		cgroup_close(&op->op_cg);
	netop_free(op->op_net);
	free(op->op_lin);
	free(op);
}

/*
 * May this caller see op? Its own uid's (root: all), and from inside an
 * operation only that operation: the supervised tree never learns of, or
 * acts on, the other operations of its user.
 */
int
operation_visible(const struct operation *op, const struct peer *p)
{
	if (p->pr_in_op && strcmp(op->op_id, p->pr_op_id) != 0)
		return 0;
	return p->pr_uid == 0 || op->op_uid == p->pr_uid;
}

/*
 * Take one network.event/fault.submit token of op's bucket: 0, or -1 when
 * the caller is over OP_EVENT_RATE (burst OP_EVENT_BURST). Threat: a tree
 * flooding its own operation with faults to fill the disk and the loop.
 */
int
operation_take_token(struct operation *op)
{
	int64_t now = util_monotonic_ms();

	if (op->op_tokens_ms == 0) {
		op->op_tokens = OP_EVENT_BURST;
	} else {
		op->op_tokens += (double)(now - op->op_tokens_ms) * OP_EVENT_RATE / 1000.0;
		if (op->op_tokens > OP_EVENT_BURST)
			op->op_tokens = OP_EVENT_BURST;
	}
	op->op_tokens_ms = now;
	if (op->op_tokens < 1.0)
		return -1;
	op->op_tokens -= 1.0;
	return 0;
}

static int
op_mut_one_violation(struct json_object *rec, void *arg, char **cause)
{
	struct oprecord_counts c = { .oc_violations = 1 };
	(void)arg;
	return oprecord_mut_counts(rec, &c, cause);
}

static int
op_mut_one_effect(struct json_object *rec, void *arg, char **cause)
{
	struct oprecord_counts c = { .oc_effects = 1 };
	(void)arg;
	return oprecord_mut_counts(rec, &c, cause);
}

/* A lifecycle violation of a live operation (lost evidence, failed revocation ...). */
void
operation_violation(struct operation *op, const char *what)
{
	char *cause = NULL;
	log_warnx("%s: violation: %s", op->op_id, what);
	if (oprecord_update(op->op_dirfd, op->op_id, op_mut_one_violation, NULL, NULL, &cause) != 0) {
		log_warnx("%s: %s", op->op_id, cause);
		free(cause);
	}
	if (ocsf_sink_active()) {
		struct json_object *v = json_object_new_object();
		char ts[40], id[ID_MAX_LEN];
		util_now_rfc3339(ts, sizeof(ts));
		ids_new("vio_", id, sizeof(id));
		json_object_object_add(v, "time", json_object_new_string(ts));
		json_object_object_add(v, "kind", json_object_new_string(what));
		json_object_object_add(v, "violation_id", json_object_new_string(id));
		json_object_object_add(v, "operation_id", json_object_new_string(op->op_id));
		ocsf_emit("violation", v);
		json_object_put(v);
	}
}

/*
 * Lineage changes as OCSF process events: a new process or an exec is a
 * launch, an exit a termination, a member killed by cgroup.kill a
 * termination by the supervisor.
 */
static void
op_ocsf_lineage(struct operation *op, const struct oprecord_proc *v, size_t n)
{
	char ts[40];

	if (!ocsf_sink_active())
		return;
	util_now_rfc3339(ts, sizeof(ts));
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_new_object();
		json_object_object_add(e, "time", json_object_new_string(ts));
		json_object_object_add(e, "kind", json_object_new_string(v[i].op_killed ? "killed" :
		    v[i].op_exited ? "exit" : "exec"));
		json_object_object_add(e, "pid", json_object_new_int(v[i].op_pid));
		if (v[i].op_ppid > 0)
			json_object_object_add(e, "ppid", json_object_new_int(v[i].op_ppid));
		json_object_object_add(e, "start_time_ticks",
		    json_object_new_int64((int64_t)v[i].op_start));
		/* An exit seen by the poll names no image: the tracked entry knows it. */
		const struct lineage_entry *le = v[i].op_exe == NULL ?
		    op_lin_find(op, v[i].op_pid, v[i].op_start) : NULL;
		const char *exe = v[i].op_exe != NULL ? v[i].op_exe :
		    le != NULL && le->le_exe[0] != '\0' ? le->le_exe : NULL;
		if (exe != NULL)
			json_object_object_add(e, "executable", json_object_new_string(exe));
		if (v[i].op_argv_digest != NULL)
			json_object_object_add(e, "argv_digest",
			    json_object_new_string(v[i].op_argv_digest));
		if (v[i].op_exited && v[i].op_has_exit) {
			struct json_object *x = json_object_new_object();
			json_object_object_add(x, "code", v[i].op_exit_signal ? NULL :
			    json_object_new_int(v[i].op_exit_code));
			json_object_object_add(x, "signal", v[i].op_exit_signal ?
			    json_object_new_int(v[i].op_exit_signal) : NULL);
			json_object_object_add(e, "exit_status", x);
		}
		json_object_object_add(e, "operation_id", json_object_new_string(op->op_id));
		ocsf_emit("lineage", e);
		json_object_put(e);
	}
}

/* Every allow, lease, broker or deny effect counts once in the record. */
void
operation_count_effect(struct operation *op)
{
	char *cause = NULL;
	if (oprecord_update(op->op_dirfd, op->op_id, op_mut_one_effect, NULL, NULL, &cause) != 0) {
		log_warnx("%s: %s", op->op_id, cause);
		free(cause);
	}
}

void
operation_free_all(struct boundaryd *bd)
{
	struct operation *op;
	while ((op = TAILQ_FIRST(&bd->bd_ops)) != NULL) {
		TAILQ_REMOVE(&bd->bd_ops, op, op_entry);
		op_free(op);
	}
}

/*
 * Give an adopted tree back: move every member to the cgroup it was taken
 * from. Used when a root `gensee watch --linux-fanotify` ends while the
 * tree it watched keeps running.
 */
static void
op_detach_members(struct operation *op)
{
	char val[32], *cause = NULL;
	struct cgroup origin;
	pid_t *pids;
	size_t n;

	if (cgroup_open(op->op_bd->bd_cgroup_mount, op->op_origin_cg[0] ? op->op_origin_cg : ".",
	    &origin, &cause) != 0) {
		log_warnx("%s: detach: %s", op->op_id, cause);
		free(cause);
		return;
	}
	for (int round = 0; round < 8 && cgroup_members(&op->op_cg, &pids, &n, NULL) == 0; round++) {
		for (size_t i = 0; i < n; i++) {
			snprintf(val, sizeof(val), "%d", (int)pids[i]);
			if (cgroup_attach(&origin, pids[i], &cause) != 0) {
				log_warnx("%s: detach %s: %s", op->op_id, val, cause);
				free(cause);
				cause = NULL;
			}
		}
		free(pids);
		if (n == 0)
			break;
	}
	cgroup_close(&origin);
}

/* Has the root process exited? The pidfd turns readable when it does. */
static int
op_root_exited(struct operation *op)
{
	struct pollfd pfd = { .fd = op->op_pidfd, .events = POLLIN };
	if (op->op_root_gone || op->op_kind == OP_KIND_ADDRESS)
		return 1;
	if (op->op_pidfd < 0)
		return 1;
	if (poll(&pfd, 1, 0) > 0)
		op->op_root_gone = 1;
	return op->op_root_gone;
}

static struct lineage_entry *
op_lin_find(struct operation *op, pid_t pid, uint64_t start)
{
	for (size_t i = 0; i < op->op_nlin; i++)
		if (op->op_lin[i].le_pid == pid && op->op_lin[i].le_start == start)
			return &op->op_lin[i];
	return NULL;
}

/*
 * Drop exited entries once the table is three quarters full: a pid and
 * start time never come back, so nothing is lost but memory. Not while a
 * lineage pass holds indexes into the table.
 */
static void
op_lin_compact(struct operation *op)
{
	size_t w = 0;

	if (op->op_nlin < OP_LINEAGE_MAX / 4 * 3)
		return;
	for (size_t i = 0; i < op->op_nlin; i++)
		if (!op->op_lin[i].le_gone)
			op->op_lin[w++] = op->op_lin[i];
	op->op_nlin = w;
}

/*
 * Track one more process, or NULL. Threat: a fork storm growing
 * boundaryd's memory without bound: at OP_LINEAGE_MAX live entries new
 * processes are counted, not tracked (the cgroup still holds and kills
 * them all).
 */
static struct lineage_entry *
op_lin_add(struct operation *op, pid_t pid, pid_t ppid, uint64_t start)
{
	if (op->op_nlin >= OP_LINEAGE_MAX) {
		if (op->op_lin_dropped++ == 0)
			log_warnx("%s: more than %d processes: lineage no longer tracked in full",
			    op->op_id, OP_LINEAGE_MAX);
		return NULL;
	}
	if (op->op_nlin == op->op_caplin) {
		size_t cap = op->op_caplin ? 2 * op->op_caplin : 16;
		struct lineage_entry *n = realloc(op->op_lin, cap * sizeof(*n));
		if (n == NULL)
			return NULL;
		op->op_lin = n;
		op->op_caplin = cap;
	}
	struct lineage_entry *e = &op->op_lin[op->op_nlin++];
	memset(e, 0, sizeof(*e));
	e->le_pid = pid;
	e->le_ppid = ppid;
	e->le_start = start;
	return e;
}

/* Lineage changes collected from one look at the cgroup, not yet written. */
struct lineage_batch {
	struct oprecord_proc *lb_procs;
	char (*lb_exes)[256];
	char (*lb_digs)[PROC_DIGEST_HEX];
	size_t lb_n;
	int lb_members;
};

static void
lineage_batch_free(struct lineage_batch *b)
{
	free(b->lb_procs);
	free(b->lb_exes);
	free(b->lb_digs);
	memset(b, 0, sizeof(*b));
}

/*
 * Compare the cgroup's members with what is known: new processes, execs and
 * exits become entries of b. With mark_killed every current member is
 * recorded as killed by the supervisor (used just before cgroup.kill).
 * Returns the number of members, or -1.
 */
static int
op_collect_lineage(struct operation *op, int mark_killed, struct lineage_batch *b)
{
	pid_t *pids;
	size_t n;
	char *cause = NULL;

	memset(b, 0, sizeof(*b));
	if (!op->op_cg_valid)
		return -1;
	op_lin_compact(op);
	if (cgroup_members(&op->op_cg, &pids, &n, &cause) != 0) {
		log_warnx("%s: %s", op->op_id, cause);
		free(cause);
		return -1;
	}
	size_t cap = n + op->op_nlin + 1;
	size_t nlin_before = op->op_nlin;
	int *seen = calloc(nlin_before + 1, sizeof(int));
	b->lb_procs = calloc(cap, sizeof(*b->lb_procs));
	b->lb_exes = calloc(cap, sizeof(*b->lb_exes));
	b->lb_digs = calloc(cap, sizeof(*b->lb_digs));
	if (seen == NULL || b->lb_procs == NULL || b->lb_exes == NULL || b->lb_digs == NULL) {
		free(seen);
		free(pids);
		lineage_batch_free(b);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct proc_stat st;
		char exe[256];

		if (proc_read_stat(pids[i], &st) != 0)
			continue; /* exited between the list and the read */
		struct lineage_entry *e = op_lin_find(op, st.ps_pid, st.ps_start_ticks);
		proc_read_exe(st.ps_pid, exe, sizeof(exe));
		int report = mark_killed;
		if (e == NULL) {
			e = op_lin_add(op, st.ps_pid, st.ps_ppid, st.ps_start_ticks);
			if (e == NULL)
				continue;
			util_strlcpy(e->le_exe, exe, sizeof(e->le_exe));
			report = 1;
		} else {
			if ((size_t)(e - op->op_lin) < nlin_before)
				seen[e - op->op_lin] = 1;
			if (strcmp(e->le_exe, exe) != 0) {
				util_strlcpy(e->le_exe, exe, sizeof(e->le_exe));
				report = 1; /* same process, new image: an execve */
			}
		}
		if (!report)
			continue;
		struct oprecord_proc *u = &b->lb_procs[b->lb_n];
		util_strlcpy(b->lb_exes[b->lb_n], exe, sizeof(b->lb_exes[b->lb_n]));
		proc_argv_digest(st.ps_pid, b->lb_digs[b->lb_n]);
		u->op_pid = st.ps_pid;
		u->op_ppid = st.ps_ppid;
		u->op_start = st.ps_start_ticks;
		u->op_exe = b->lb_exes[b->lb_n];
		u->op_argv_digest = b->lb_digs[b->lb_n];
		u->op_killed = mark_killed;
		b->lb_n++;
	}
	for (size_t i = 0; i < nlin_before; i++) {
		struct lineage_entry *e = &op->op_lin[i];
		if (e->le_gone || seen[i])
			continue;
		e->le_gone = 1;
		struct oprecord_proc *u = &b->lb_procs[b->lb_n++];
		u->op_pid = e->le_pid;
		u->op_ppid = e->le_ppid;
		u->op_start = e->le_start;
		u->op_exited = 1;
	}
	free(seen);
	free(pids);
	b->lb_members = (int)n;
	return (int)n;
}

/*
 * Apply several mutators in one locked update: one reload, one write, one
 * fsync (after the reply: syncq.c), instead of one each.
 */
struct op_batch {
	struct {
		int (*fn)(struct json_object *, void *, char **);
		void *arg;
	} ob_items[16];
	size_t ob_n;
};

static int
op_mut_batch(struct json_object *rec, void *arg, char **cause)
{
	struct op_batch *b = arg;
	int changed = 0;
	for (size_t i = 0; i < b->ob_n; i++) {
		int r = b->ob_items[i].fn(rec, b->ob_items[i].arg, cause);
		if (r < 0)
			return -1;
		if (r == 0)
			changed = 1;
	}
	return changed ? 0 : 1;
}

static void
op_batch_add(struct op_batch *b, int (*fn)(struct json_object *, void *, char **), void *arg)
{
	if (b->ob_n < nitems(b->ob_items)) {
		b->ob_items[b->ob_n].fn = fn;
		b->ob_items[b->ob_n].arg = arg;
		b->ob_n++;
	}
}

static void
op_batch_write_result(struct operation *op, struct op_batch *b, const char *what,
    struct json_object **result)
{
	char *cause = NULL;
	if (b->ob_n == 0)
		return;
	if (oprecord_update(op->op_dirfd, op->op_id, op_mut_batch, b, result, &cause) != 0) {
		log_warnx("%s: %s: %s", op->op_id, what, cause);
		free(cause);
	}
}

static void
op_batch_write(struct operation *op, struct op_batch *b, const char *what)
{
	op_batch_write_result(op, b, what, NULL);
}

/*
 * Refresh the lineage and, while it is pending, check the claimed host
 * controls (force: the launcher says the root has exec'd); what changed
 * goes into one update.
 */
static void
op_poll(struct operation *op, int force_hc)
{
	struct lineage_batch lb;
	struct op_batch b = { .ob_n = 0 };
	struct oprecord_lineage lin;
	int collected = op_collect_lineage(op, 0, &lb);

	if (collected >= 0 && lb.lb_n > 0) {
		lin.ol_procs = lb.lb_procs;
		lin.ol_n = lb.lb_n;
		op_batch_add(&b, oprecord_mut_lineage, &lin);
	}
	op_hc_check(op, force_hc, &b);
	op_batch_write(op, &b, "lineage");	/* unless the check wrote it */
	if (collected >= 0) {
		if (lb.lb_n > 0)
			op_ocsf_lineage(op, lb.lb_procs, lb.lb_n);
		lineage_batch_free(&lb);
	}
}

/*
 * Decide the terminal state, then make the tree go away. The state, the
 * refreshed lineage and the processes about to be killed are written in one
 * update before cgroup.kill, so that the launcher, woken by its child's
 * death, already reads the reason.
 */
void
operation_finish(struct operation *op, const char *state, const char *reason)
{
	struct oprecord_lifecycle l = { .ol_state = state, .ol_reason = reason };
	struct oprecord_cgroup c = { 0 };
	struct oprecord_lineage lin;
	struct lineage_batch lb;
	struct op_batch b = { .ob_n = 0 };
	char *cause = NULL;

	if (op->op_phase != OP_RUNNING)
		return;
	op->op_phase = OP_FINISHING;
	sensor_push(op->op_bd, op, "remove");
	if (op->op_poll_ev != NULL)
		event_del(op->op_poll_ev);
	if (op->op_timeout_ev != NULL)
		event_del(op->op_timeout_ev);
	if (op->op_term_ev != NULL)
		event_del(op->op_term_ev);
	if (op->op_launcher_ev != NULL)
		event_del(op->op_launcher_ev);
	if (op->op_launcher_grace_ev != NULL)
		event_del(op->op_launcher_grace_ev);
	op->op_hc_pending = 0;
	int populated = op->op_cg_valid ? cgroup_populated(&op->op_cg) : 0;
	int members = op_collect_lineage(op, populated != 0 && !op->op_detach, &lb);
	/*
	 * The usual end: the root exited on its own, nothing is left to kill,
	 * and its launcher is about to report the exit. The state then goes
	 * into the cleanup's update with the report, one write fewer between
	 * the exit and the launcher's answer. A crash in between (at most the
	 * reap's wait) leaves a running record whose root is gone: recovery
	 * ends it as for any crash.
	 */
	if (op->op_fin_may_defer && populated == 0 && !op->op_detach && !op->op_terminating &&
	    op->op_launcher && !op->op_has_exit_report) {
		op->op_fin_deferred = 1;
		op->op_fin_state = state;
		op->op_fin_reason = reason;
		if (members >= 0 && lb.lb_n > 0 &&
		    (op->op_fin_lb = malloc(sizeof(*op->op_fin_lb))) != NULL)
			*op->op_fin_lb = lb;	/* written, and freed, with the cleanup */
		else if (members >= 0)
			lineage_batch_free(&lb);
		log_info("%s: %s (%s)", op->op_id, state, reason);
		op_start_reap(op);
		return;
	}
	if (members >= 0 && lb.lb_n > 0) {
		lin.ol_procs = lb.lb_procs;
		lin.ol_n = lb.lb_n;
		op_batch_add(&b, oprecord_mut_lineage, &lin);
	}
	op_batch_add(&b, oprecord_mut_lifecycle, &l);
	op_batch_add(&b, live_mut_fanotify_ended, NULL);
	struct json_object *term = op->op_terminating ? op_term_json(op, populated) : NULL;
	struct op_portion_arg ta = { "termination", term };
	if (term != NULL)
		op_batch_add(&b, op_mut_portion_once, &ta);
	if (populated != 0 && members > 0 && !op->op_detach) {
		c.ocg_killed_leftovers = members;
		op_batch_add(&b, oprecord_mut_cgroup, &c);
	}
	op_batch_write(op, &b, state);
	json_object_put(term);
	if (members >= 0) {
		op_ocsf_lineage(op, lb.lb_procs, lb.lb_n);
		lineage_batch_free(&lb);
	}
	log_info("%s: %s (%s)", op->op_id, state, reason);
	if (op->op_detach && populated != 0) {
		op_detach_members(op);
		populated = 0;
	}
	if (populated != 0 && cgroup_kill(&op->op_cg, &cause) != 0) {
		log_warnx("%s: %s", op->op_id, cause);
		free(cause);
	}
	op_start_reap(op);
}

static void
op_start_reap(struct operation *op)
{
	op->op_reap_started = util_monotonic_ms();
	op->op_reap_delay_ms = 0;
	op->op_reap_ev = evtimer_new(op->op_bd->bd_base, op_reap_cb, op);
	struct timeval tv = { 0, 0 };
	if (op->op_reap_ev != NULL)
		evtimer_add(op->op_reap_ev, &tv);
}

/*
 * Release the cgroup of an operation whose tree is gone (populated 0) and
 * say how in c; *cause keeps the detail of a failure.
 */
static void
op_cleanup_cgroup(struct operation *op, int populated, struct oprecord_cgroup *c, char **cause)
{
	if (op->op_kind == OP_KIND_ADDRESS) {
		c->ocg_cleanup = "removed";
	} else if (populated == 0 && op->op_cg_valid) {
		if (cgroup_remove_tree(&op->op_cg, cause) == 0) {
			op->op_cg_valid = 0;
			c->ocg_attachment = "released";
			c->ocg_cleanup = "removed";
		} else {
			c->ocg_cleanup = "failed";
			c->ocg_detail = *cause;
		}
	} else if (op->op_cg_valid) {
		c->ocg_cleanup = "failed";
		c->ocg_detail = "cgroup still populated after kill";
	} else if (op->op_cg_missing) {
		c->ocg_attachment = "released";
		c->ocg_cleanup = "removed"; /* already gone when this instance looked */
	} else {
		c->ocg_cleanup = "failed";
		c->ocg_detail = "cgroup could not be opened";
	}
}

/* Wait for the root to exit and the cgroup to drain, then release it. */
static void
op_reap_cb(evutil_socket_t fd, short what, void *arg)
{
	struct operation *op = arg;
	struct boundaryd *bd = op->op_bd;
	char *cause = NULL;
	int populated = op->op_cg_valid ? cgroup_populated(&op->op_cg) : 0;
	int64_t waited = util_monotonic_ms() - op->op_reap_started;

	(void)fd;
	(void)what;
	/*
	 * Wait (bounded) for sensord to report the last lineage and decisions
	 * it holds for this operation, so its record is complete.
	 */
	int sensor_pending = op->op_sensor_pushed && !op->op_sensor_flushed &&
	    op->op_bd->bd_sensor != NULL && waited < OP_SENSOR_FLUSH_MS;
	/*
	 * A launcher reports its child's exit right after reaping it: waiting
	 * (briefly) for that puts the report into the cleanup's update.
	 */
	int report_pending = op->op_launcher && !op->op_has_exit_report &&
	    waited < OP_EXIT_REPORT_MS;
	if ((populated != 0 || !op_root_exited(op) || sensor_pending || report_pending) &&
	    waited < OP_REAP_MAX_MS) {
		if (populated > 0 && waited > OP_REAP_MAX_MS / 2 && op->op_cg_valid)
			cgroup_kill(&op->op_cg, NULL);
		/* Back off from 1 ms: most trees are gone within a few. */
		op->op_reap_delay_ms = op->op_reap_delay_ms ? 2 * op->op_reap_delay_ms : 1;
		if (op->op_reap_delay_ms > OP_REAP_POLL_MS)
			op->op_reap_delay_ms = OP_REAP_POLL_MS;
		struct timeval tv = { 0, op->op_reap_delay_ms * 1000 };
		evtimer_add(op->op_reap_ev, &tv);
		return;
	}
	/*
	 * The tree is gone (or could not be killed): only now may the network
	 * table go; deleting it earlier would give survivors open egress.
	 */
	/*
	 * A launcher waiting on operation.end (the usual case) is answered as
	 * soon as the record holds everything the answer reports: the exit,
	 * the lineage, the final network counts. The table and the cgroup go
	 * right after, in this same callback (no other request runs before
	 * them); until then the record says cleanup "pending". Both are empty
	 * of processes by now, so the order changes no enforcement.
	 */
	int early = !TAILQ_EMPTY(&op->op_waiters) && op->op_kind != OP_KIND_ADDRESS &&
	    populated == 0 && op->op_cg_valid;
	struct live_update lu;
	memset(&lu, 0, sizeof(lu));
	if (op->op_net != NULL && populated == 0) {
		/* its final counts ride on the cleanup's update */
		if (early)
			netop_end_counts(op->op_net, &lu);
		else
			netop_end_into(op->op_net, &lu);
	}
	struct oprecord_cgroup c = { 0 };
	struct oprecord_lineage lin;
	struct lineage_batch lb;
	struct op_batch b = { .ob_n = 0 };
	int collected = -1;
	/* A deferred finish first: its lineage is older than the one collected now. */
	struct oprecord_lifecycle fin = { .ol_state = op->op_fin_state, .ol_reason = op->op_fin_reason };
	struct oprecord_lineage fin_lin;
	if (op->op_fin_deferred) {
		if (op->op_fin_lb != NULL) {
			fin_lin.ol_procs = op->op_fin_lb->lb_procs;
			fin_lin.ol_n = op->op_fin_lb->lb_n;
			op_batch_add(&b, oprecord_mut_lineage, &fin_lin);
		}
		op_batch_add(&b, oprecord_mut_lifecycle, &fin);
		op_batch_add(&b, live_mut_fanotify_ended, NULL);
	}
	if (populated == 0 && op->op_cg_valid) {
		collected = op_collect_lineage(op, 0, &lb); /* every member is gone now */
		if (collected >= 0 && lb.lb_n > 0) {
			lin.ol_procs = lb.lb_procs;
			lin.ol_n = lb.lb_n;
			op_batch_add(&b, oprecord_mut_lineage, &lin);
		}
	}
	if (!early) {
		op_cleanup_cgroup(op, populated, &c, &cause);
		op_batch_add(&b, oprecord_mut_cgroup, &c);
	}
	if (op->op_has_exit_report)
		op_batch_add(&b, oprecord_mut_lifecycle, &op->op_exit_report);
	op_batch_add(&b, live_mut, &lu);
	struct json_object *written = NULL;	/* the end's answer, without reading it back */
	op_batch_write_result(op, &b, early ? "end" : "cleanup", early ? &written : NULL);
	live_update_clear(&lu);
	if (op->op_fin_lb != NULL) {
		op_ocsf_lineage(op, op->op_fin_lb->lb_procs, op->op_fin_lb->lb_n);
		lineage_batch_free(op->op_fin_lb);
		free(op->op_fin_lb);
		op->op_fin_lb = NULL;
	}
	if (collected >= 0)
		lineage_batch_free(&lb);
	if (early) {
		op_answer_waiters_with(op, written);
		written = NULL;
		struct live_update left;
		memset(&left, 0, sizeof(left));
		b.ob_n = 0;
		if (op->op_net != NULL && netop_end_release(op->op_net) != 0) {
			left.lu_boundaries[left.lu_nb++] = netop_table_left_json(op->op_net);
			op_batch_add(&b, live_mut, &left);
		}
		op_cleanup_cgroup(op, populated, &c, &cause);
		op_batch_add(&b, oprecord_mut_cgroup, &c);
		op_batch_write(op, &b, "cleanup");
		live_update_clear(&left);
	}
	index_put(bd, op->op_dirfd, op->op_id);
	if (c.ocg_detail != NULL)
		log_warnx("%s: cgroup cleanup failed: %s", op->op_id, c.ocg_detail);
	free(cause);
	op_answer_waiters(op);
	TAILQ_REMOVE(&bd->bd_ops, op, op_entry);
	op_free(op);
	spare_idle();
}

static void
op_pidfd_cb(evutil_socket_t fd, short what, void *arg)
{
	struct operation *op = arg;
	(void)fd;
	(void)what;
	op->op_root_gone = 1;
	/* A root that stops when asked ends the operation for the asker's reason. */
	if (op->op_terminating) {
		operation_finish(op, op->op_term_state, op->op_term_reason);
	} else {
		op->op_fin_may_defer = 1;
		operation_finish(op, OPSTATE_EXITED, "root_exited");
	}
}

static void
op_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct operation *op = arg;
	(void)fd;
	(void)what;
	operation_terminate(op, OPSTATE_TIMED_OUT, "timeout", op->op_kill_grace_s);
}

/* The grace ran out: what is left is killed (operation_finish, cgroup.kill). */
static void
op_term_cb(evutil_socket_t fd, short what, void *arg)
{
	struct operation *op = arg;
	(void)fd;
	(void)what;
	op->op_term_escalated = 1;
	log_info("%s: still running %lld s after SIGTERM: killing", op->op_id,
	    (long long)op->op_term_grace_s);
	operation_finish(op, op->op_term_state, op->op_term_reason);
}

/* The record's "termination": how the tree was asked to stop, and whether it did. */
static struct json_object *
op_term_json(struct operation *op, int populated)
{
	struct json_object *t = json_object_new_object();

	json_object_object_add(t, "reason", json_object_new_string(op->op_term_reason));
	json_object_object_add(t, "signal", json_object_new_string("SIGTERM"));
	json_object_object_add(t, "signaled_at", json_object_new_string(op->op_term_at));
	json_object_object_add(t, "grace_seconds", json_object_new_int64(op->op_term_grace_s));
	json_object_object_add(t, "processes_signaled", json_object_new_int(op->op_term_signaled));
	json_object_object_add(t, "escalated", json_object_new_boolean(op->op_term_escalated));
	json_object_object_add(t, "killed_after_grace",
	    json_object_new_boolean(op->op_term_escalated && populated != 0));
	return t;
}

/*
 * SIGTERM to every member, through a pidfd opened first and checked to be
 * in the operation's cgroup after: a pid reused by another process between
 * the read of cgroup.procs and the signal is never signalled. Threat: the
 * supervisor killing something outside the operation it ends.
 */
static int
op_signal_members(struct operation *op, int sig)
{
	pid_t *pids = NULL;
	size_t n = 0;
	int sent = 0;
	char cg[256];

	if (!op->op_cg_valid || cgroup_members(&op->op_cg, &pids, &n, NULL) != 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		int pfd = proc_pidfd_open(pids[i]);
		if (pfd < 0)
			continue; /* exited */
		if (cgroup_of_pid(pids[i], cg, sizeof(cg)) == 0 &&
		    strcmp(cg, op->op_cg.cg_rel) == 0 && proc_pidfd_signal(pfd, sig) == 0)
			sent++;
		close(pfd);
	}
	free(pids);
	return sent;
}

void
operation_terminate(struct operation *op, const char *state, const char *reason,
    int64_t grace_s)
{
	if (op->op_phase != OP_RUNNING)
		return;
	if (op->op_terminating) {
		/* Already asked: only a kill (no grace) changes anything, and at once. */
		if (grace_s == 0) {
			op->op_term_escalated = 1;
			operation_finish(op, op->op_term_state, op->op_term_reason);
		}
		return;
	}
	/*
	 * No grace, a frozen tree (it could not handle the signal) or a tree
	 * this instance cannot signal: the kill, as before.
	 */
	if (grace_s <= 0 || op->op_frozen || op->op_detach || !op->op_cg_valid ||
	    op->op_kind != OP_KIND_PROCESS) {
		operation_finish(op, state, reason);
		return;
	}
	if (op->op_term_ev == NULL &&
	    (op->op_term_ev = evtimer_new(op->op_bd->bd_base, op_term_cb, op)) == NULL) {
		operation_finish(op, state, reason);
		return;
	}
	op->op_terminating = 1;
	op->op_term_state = state;
	op->op_term_reason = reason;
	op->op_term_grace_s = grace_s;
	util_now_rfc3339(op->op_term_at, sizeof(op->op_term_at));
	op->op_term_signaled = op_signal_members(op, SIGTERM);
	log_info("%s: %s: SIGTERM to %d process(es), kill in %lld s", op->op_id, reason,
	    op->op_term_signaled, (long long)grace_s);
	struct timeval tv = { grace_s, 0 };
	if (evtimer_add(op->op_term_ev, &tv) != 0)
		operation_finish(op, state, reason);
}

static void
op_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct operation *op = arg;
	(void)fd;
	(void)what;
	op_poll(op, 0);
	operation_live(op, 0);
}

/* The launcher's grace is over and the operation still runs: end it. */
static void
op_launcher_grace_cb(evutil_socket_t fd, short what, void *arg)
{
	struct operation *op = arg;
	(void)fd;
	(void)what;
	if (op->op_phase != OP_RUNNING)
		return;
	operation_violation(op, "launcher_lost");
	operation_finish(op, OPSTATE_ENDED, "launcher_lost");
}

/* The launcher's pidfd turned readable: it exited. */
static void
op_launcher_cb(evutil_socket_t fd, short what, void *arg)
{
	struct operation *op = arg;
	struct timeval tv = { OP_LAUNCHER_GRACE_MS / 1000, (OP_LAUNCHER_GRACE_MS % 1000) * 1000 };
	(void)fd;
	(void)what;
	if (op->op_phase != OP_RUNNING || op->op_detach || op->op_launcher_grace_ev != NULL)
		return;
	log_info("%s: launcher %d exited before the operation ended; ending it in %d ms",
	    op->op_id, (int)op->op_launcher_pid, OP_LAUNCHER_GRACE_MS);
	op->op_launcher_grace_ev = evtimer_new(op->op_bd->bd_base, op_launcher_grace_cb, op);
	if (op->op_launcher_grace_ev == NULL || evtimer_add(op->op_launcher_grace_ev, &tv) != 0)
		op_launcher_grace_cb(-1, 0, op);
}

/*
 * Watch the recorded launcher (pid + start time) through a pidfd. Threat:
 * the agent kills its parent `gensee run` and runs on with nobody to
 * report its end and no timeout. A launcher already gone (or a pid now
 * naming another process) starts the grace at once. Detached (watched)
 * trees are not the launcher's to lose.
 */
static int
op_watch_launcher(struct operation *op)
{
	if (!op->op_launcher || op->op_detach || op->op_launcher_pid <= 0)
		return 0;
	op->op_launcher_pidfd = proc_pidfd_open(op->op_launcher_pid);
	if (op->op_launcher_pidfd >= 0 &&
	    proc_identity_matches(op->op_launcher_pid, op->op_launcher_start) != 0) {
		close(op->op_launcher_pidfd);
		op->op_launcher_pidfd = -1;
	}
	if (op->op_launcher_pidfd < 0) {
		op_launcher_cb(-1, 0, op);
		return 0;
	}
	op->op_launcher_ev = event_new(op->op_bd->bd_base, op->op_launcher_pidfd, EV_READ,
	    op_launcher_cb, op);
	if (op->op_launcher_ev == NULL || event_add(op->op_launcher_ev, NULL) != 0)
		return -1;
	return 0;
}


static int
op_mut_portion_once(struct json_object *rec, void *arg, char **cause)
{
	struct op_portion_arg *a = arg;
	if (schema_child(rec, a->pa_key) != NULL) {
		util_cause(cause, "%s is already recorded", a->pa_key);
		return -1;
	}
	json_object_object_add(rec, a->pa_key, json_object_get(a->pa_value));
	return 0;
}

/*
 * Check the host controls the launcher claimed against the kernel: every
 * process of the tree must show NoNewPrivs 1 (seccomp or Landlock claimed)
 * and Seccomp 2 (seccomp claimed). Threat: a launcher (any program on
 * client.sock) recording controls it never applied, so the record would
 * vouch for confinement the tree does not have. Run once the root has
 * exec'd (its argv changed, or the launcher's operation.observe says so:
 * force), or at OP_HOSTCTL_VERIFY_MS. A mismatch fails the operation
 * closed: the tree is killed and the record keeps what the kernel showed.
 */
static void
op_hc_check(struct operation *op, int force, struct op_batch *b)
{
	char dig[PROC_DIGEST_HEX], ts[40];
	struct json_object *kv, *bad = NULL;
	pid_t *pids = NULL;
	size_t n = 0;
	int checked = 0;

	if (!op->op_hc_pending || op->op_phase != OP_RUNNING)
		return;
	if (!force && util_monotonic_ms() < op->op_hc_deadline_ms) {
		if (proc_argv_digest(op->op_root_pid, dig) != 0 ||
		    strcmp(dig, op->op_root_digest) == 0)
			return; /* still the held child (or gone: the pidfd ends it) */
	}
	op->op_hc_pending = 0;
	if (op->op_cg_valid && cgroup_members(&op->op_cg, &pids, &n, NULL) != 0)
		n = 0;
	for (size_t i = 0; i < n && bad == NULL; i++) {
		int nnp, sc;
		struct proc_stat st;
		if (proc_read_stat(pids[i], &st) != 0 ||
		    proc_read_confinement(pids[i], &nnp, &sc) != 0)
			continue; /* exited meanwhile */
		checked++;
		if ((op->op_hc_nnp && nnp != 1) || (op->op_hc_seccomp && sc != 2)) {
			bad = json_object_new_object();
			json_object_object_add(bad, "pid", json_object_new_int(pids[i]));
			json_object_object_add(bad, "start_time_ticks",
			    json_object_new_int64((int64_t)st.ps_start_ticks));
			json_object_object_add(bad, "no_new_privs", json_object_new_int(nnp));
			json_object_object_add(bad, "seccomp", json_object_new_int(sc));
		}
	}
	free(pids);
	util_now_rfc3339(ts, sizeof(ts));
	kv = json_object_new_object();
	json_object_object_add(kv, "state", json_object_new_string(bad != NULL ? "mismatch" :
	    checked > 0 ? "verified" : "not_checked_tree_gone"));
	json_object_object_add(kv, "source", json_object_new_string("/proc/PID/status"));
	json_object_object_add(kv, "checked_at", json_object_new_string(ts));
	json_object_object_add(kv, "processes_checked", json_object_new_int(checked));
	struct json_object *want = json_object_new_object();
	json_object_object_add(want, "no_new_privs", op->op_hc_nnp ? json_object_new_int(1) : NULL);
	json_object_object_add(want, "seccomp", op->op_hc_seccomp ? json_object_new_int(2) : NULL);
	json_object_object_add(kv, "required", want);
	json_object_object_add(kv, "offender", bad);
	struct op_portion_arg a = { "host_controls_kernel", kv };
	op_batch_add(b, op_mut_portion_once, &a);	/* with what the caller gathered */
	op_batch_write(op, b, "host_controls_kernel");
	b->ob_n = 0;
	json_object_put(kv);
	if (bad != NULL) {
		log_warnx("%s: the launcher claimed host controls the kernel does not show; "
		    "failing the operation", op->op_id);
		operation_violation(op, "host_controls_unverified");
		operation_finish(op, OPSTATE_FAILED, "host_controls_unverified");
	}
}

/* Create the events that supervise a running operation. */
static int
op_arm(struct operation *op)
{
	struct event_base *base = op->op_bd->bd_base;
	struct timeval poll_tv = { 0, OP_POLL_MS * 1000 };

	op->op_timeout_ev = evtimer_new(base, op_timeout_cb, op);
	if (op->op_timeout_ev == NULL)
		return -1;
	if (op->op_kind == OP_KIND_PROCESS) {
		op->op_pidfd_ev = event_new(base, op->op_pidfd, EV_READ, op_pidfd_cb, op);
		op->op_poll_ev = event_new(base, -1, EV_PERSIST, op_poll_cb, op);
		if (op->op_pidfd_ev == NULL || op->op_poll_ev == NULL)
			return -1;
		if (event_add(op->op_pidfd_ev, NULL) != 0 || event_add(op->op_poll_ev, &poll_tv) != 0)
			return -1;
	}
	if (op->op_kind == OP_KIND_PROCESS && op_watch_launcher(op) != 0)
		return -1;
	if (op->op_deadline_ms > 0) {
		int64_t left = op->op_deadline_ms - util_now_ms();
		if (left < 0)
			left = 0;
		struct timeval tv = { left / 1000, (left % 1000) * 1000 };
		if (evtimer_add(op->op_timeout_ev, &tv) != 0)
			return -1;
	}
	return 0;
}

static struct operation *
op_alloc(struct boundaryd *bd)
{
	struct operation *op = calloc(1, sizeof(*op));
	if (op == NULL)
		return NULL;
	op->op_bd = bd;
	op->op_pidfd = -1;
	op->op_dirfd = -1;
	op->op_launcher_pidfd = -1;
	op->op_phase = OP_RUNNING;
	TAILQ_INIT(&op->op_waiters);
	return op;
}

/*
 * Verify that pid is the caller's held child: its parent is the caller,
 * it runs as the caller's uid, it has the start time the caller named (or,
 * not named, the one read here becomes its identity), and the pidfd we
 * hold refers to it (so a pid reused after a race is refused).
 *
 * Why a child may come without its start time: only its parent can reap
 * it, so its pid cannot be reused while the caller waits for this answer,
 * and a pid the caller let go and got back can only name another child of
 * the caller's own, which it could have named anyway. A process adopted by
 * root is no one's held child: its start time is required.
 */
static int
op_verify_child(const struct peer *p, struct proto_operation_create *c, int *pidfd,
    struct op_reply *r)
{
	int adopt = c->oc_adopt_existing && p->pr_uid == 0;
	struct proc_stat st;
	uid_t uids[4];

	if (adopt && !c->oc_start_given) {
		reply_error(r, PE_INVALID_PARAMS, "adopt_existing needs start_time_ticks");
		return -1;
	}
	*pidfd = proc_pidfd_open(c->oc_pid);
	if (*pidfd < 0) {
		reply_error(r, PE_NOT_CHILD, "process %d does not exist", (int)c->oc_pid);
		return -1;
	}
	if (proc_read_stat(c->oc_pid, &st) != 0 ||
	    (c->oc_start_given && st.ps_start_ticks != c->oc_start_ticks)) {
		reply_error(r, PE_IDENTITY, "process %d does not have start time %llu",
		    (int)c->oc_pid, (unsigned long long)c->oc_start_ticks);
		return -1;
	}
	c->oc_start_ticks = st.ps_start_ticks;
	/* Root's debug network-apply supervises a tree it did not start. */
	if ((!adopt && st.ps_ppid != p->pr_pid) || peer_alive(p) != 0) {
		reply_error(r, PE_NOT_CHILD, "process %d is not a child of the caller",
		    (int)c->oc_pid);
		return -1;
	}
	if (proc_read_uids(c->oc_pid, uids) != 0 || (!adopt && (uids[0] != p->pr_uid ||
	    uids[1] != p->pr_uid || uids[2] != p->pr_uid || uids[3] != p->pr_uid))) {
		reply_error(r, PE_IDENTITY, "process %d does not run as uid %u", (int)c->oc_pid,
		    (unsigned)p->pr_uid);
		return -1;
	}
	if (proc_pidfd_signal(*pidfd, 0) != 0) {
		reply_error(r, PE_IDENTITY, "process %d exited during verification",
		    (int)c->oc_pid);
		return -1;
	}
	return 0;
}

static void
op_fail_create(struct operation *op, const char *reason)
{
	struct oprecord_lifecycle l = { .ol_state = OPSTATE_FAILED, .ol_reason = reason };
	char *cause = NULL;

	if (op->op_net != NULL && op->op_cg_valid && cgroup_populated(&op->op_cg) > 0)
		cgroup_kill(&op->op_cg, NULL);

	if (op->op_dirfd >= 0 &&
	    oprecord_update(op->op_dirfd, op->op_id, oprecord_mut_lifecycle, &l, NULL, &cause) != 0) {
		log_warnx("%s: %s", op->op_id, cause);
		free(cause);
		cause = NULL;
	}
	if (op->op_cg_valid) {
		struct oprecord_cgroup c = { .ocg_attachment = "failed" };
		if (cgroup_populated(&op->op_cg) > 0)
			cgroup_kill(&op->op_cg, NULL);
		for (int i = 0; i < 250 && cgroup_populated(&op->op_cg) > 0; i++)
			usleep(2000);
		if (cgroup_remove_tree(&op->op_cg, &cause) == 0) {
			op->op_cg_valid = 0;
			c.ocg_cleanup = "removed";
		} else {
			c.ocg_cleanup = "failed";
			c.ocg_detail = cause;
		}
		if (op->op_dirfd >= 0)
			oprecord_update(op->op_dirfd, op->op_id, oprecord_mut_cgroup, &c, NULL, NULL);
		free(cause);
	}
	if (op->op_net != NULL)
		netop_end(op->op_net);
	if (op->op_dirfd >= 0)
		index_put(op->op_bd, op->op_dirfd, op->op_id);
	op_free(op);
}

/* Sensor coverage of an operation, in its record ("sensors": {name: state}). */
struct op_sensor_arg {
	const char *sa_sensor;
	const char *sa_state;
};

static int
op_mut_sensor(struct json_object *rec, void *arg, char **cause)
{
	struct op_sensor_arg *a = arg;
	struct json_object *s = schema_child(rec, "sensors");
	static const char *const all[] = { "nft_trace", "proc_connector", "fanotify",
		"landlock_audit" };

	(void)cause;
	if (s == NULL) {
		s = json_object_new_object();
		json_object_object_add(rec, "sensors", s);
	}
	if (strcmp(a->sa_sensor, "all") == 0) {
		for (size_t i = 0; i < nitems(all); i++) {
			const char *cur = schema_string(s, all[i]);
			if (cur != NULL && strcmp(cur, "off") != 0 && strcmp(cur, "unavailable") != 0)
				json_object_object_add(s, all[i], json_object_new_string(a->sa_state));
		}
	} else {
		json_object_object_add(s, a->sa_sensor, json_object_new_string(a->sa_state));
	}
	return 0;
}

void
operation_sensor_state(struct operation *op, const char *sensor, const char *state)
{
	struct op_sensor_arg a = { sensor, state };
	char *cause = NULL;
	if (oprecord_update(op->op_dirfd, op->op_id, op_mut_sensor, &a, NULL, &cause) != 0) {
		log_warnx("%s: %s", op->op_id, cause);
		free(cause);
	}
}

/* Lineage reported by a sensor (proc connector): merged like the polled one. */
void
operation_merge_lineage(struct operation *op, const struct oprecord_proc *v, size_t n,
    const char *source)
{
	struct oprecord_lineage lin = { v, n };
	char *cause = NULL;
	/* What the poll did not already report: OCSF gets each change once. */
	struct oprecord_proc *fresh = calloc(n + 1, sizeof(*fresh));
	size_t nfresh = 0;

	op_lin_compact(op);
	for (size_t i = 0; i < n; i++) {
		struct lineage_entry *e = op_lin_find(op, v[i].op_pid, v[i].op_start);
		int news = e == NULL ? !v[i].op_exited : v[i].op_exited ? !e->le_gone :
		    v[i].op_exe != NULL && strcmp(e->le_exe, v[i].op_exe) != 0;
		if (e == NULL && !v[i].op_exited)
			e = op_lin_add(op, v[i].op_pid, v[i].op_ppid, v[i].op_start);
		if (e != NULL) {
			if (v[i].op_exe != NULL)
				util_strlcpy(e->le_exe, v[i].op_exe, sizeof(e->le_exe));
			if (v[i].op_exited)
				e->le_gone = 1;
		}
		if (news && fresh != NULL)
			fresh[nfresh++] = v[i];
	}
	if (oprecord_update(op->op_dirfd, op->op_id, oprecord_mut_lineage, &lin, NULL, &cause) != 0) {
		log_warnx("%s: %s lineage: %s", op->op_id, source, cause);
		free(cause);
	}
	if (fresh != NULL)
		op_ocsf_lineage(op, fresh, nfresh);
	free(fresh);
}

static void
op_create_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	operation_create_resolve(arg, 0);
}

/*
 * Release the held operation.create reply. Without sensord's ack an
 * operation that asked for fanotify fails (its sensitive paths would be
 * unguarded); others start with their coverage recorded as unconfirmed.
 */
void
operation_create_resolve(struct operation *op, int acked)
{
	struct json_object *res = op->op_create_result;

	if (res == NULL)
		return;
	op->op_create_result = NULL;
	if (op->op_create_timer != NULL)
		event_del(op->op_create_timer);
	if (!acked && op->op_fanotify != NULL) {
		if (op->op_create_conn != NULL)
			control_send(op->op_create_conn, proto_error_new(op->op_create_id, PE_SENSOR,
			    "gensee-sensord did not confirm the sensitive-path policy"));
		json_object_put(res);
		op->op_create_conn = NULL;
		operation_finish(op, OPSTATE_FAILED, "sensor_unavailable");
		return;
	}
	if (!acked)
		operation_sensor_state(op, "all", "unconfirmed");
	if (op->op_create_conn != NULL)
		control_send(op->op_create_conn, proto_result_new(op->op_create_id, res));
	else
		json_object_put(res);
	op->op_create_conn = NULL;
}

static const struct schema_field fanotify_fields[] = {
	{ "enabled", SCHEMA_BOOL, SCHEMA_REQUIRED, 0, 0, 0 },
	{ "posture", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 16, 0 },
	{ "rules", SCHEMA_ARRAY, SCHEMA_REQUIRED, 0, 1024, 0 },
	{ "home", SCHEMA_STRING, 0, 1, 4096, 0 },
	{ "workspace", SCHEMA_STRING, 0, 1, 4096, 0 },
	{ "on_sensor_loss", SCHEMA_STRING, 0, 1, 16, 0 },
};

static const struct schema_field fanotify_rule_fields[] = {
	{ "path", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 4096, 0 },
	{ "action", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 16, 0 },
};

/* The fanotify section of operation.create: shape only; sensord parses patterns. */
static int
op_check_fanotify(struct json_object *f, struct schema_error *err)
{
	struct json_object *rules;
	if (schema_validate(f, fanotify_fields, nitems(fanotify_fields), err) != 0)
		return -1;
	rules = schema_child(f, "rules");
	for (size_t i = 0; i < json_object_array_length(rules); i++)
		if (schema_validate(json_object_array_get_idx(rules, i), fanotify_rule_fields,
		    nitems(fanotify_rule_fields), err) != 0)
			return -1;
	return 0;
}

/*
 * Make sure MOUNT/BASE exists before an operation's cgroup is made in it.
 * Another tool (or a test) may have removed it while it was empty; it is
 * made again (root-owned 0755, checked like at start) instead of every
 * later operation.create failing, and system.status counts it.
 */
int
op_ensure_base(struct boundaryd *bd, char **cause)
{
	struct stat st;
	int mfd = open(bd->bd_cgroup_mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (mfd < 0) {
		util_cause(cause, "%s: %s", bd->bd_cgroup_mount, strerror(errno));
		return -1;
	}
	if (fstatat(mfd, bd->bd_cgroup_base, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) {
		if (sandbox_base_mkdir(mfd, bd->bd_cgroup_base, 0755) != 0 ? errno != EEXIST :
		    fchmodat(mfd, bd->bd_cgroup_base, 0755, 0) != 0) {
			util_cause(cause, "%s/%s is missing and cannot be made again: %s",
			    bd->bd_cgroup_mount, bd->bd_cgroup_base, strerror(errno));
			close(mfd);
			return -1;
		}
		bd->bd_cgroup_base_recreated++;
		log_warnx("%s/%s had disappeared: made it again", bd->bd_cgroup_mount,
		    bd->bd_cgroup_base);
	}
	close(mfd);
	return cgroup_ensure_base(bd->bd_cgroup_mount, bd->bd_cgroup_base, cause);
}

/*
 * Adopting a running tree moves all of it, not only its root: a child
 * left behind would open files unjudged and reach the network outside the
 * table. Processes fork while they are moved, so this repeats until a
 * round finds nothing left outside (bounded). Members of another
 * operation stay where they are: moving them would lift them out of it.
 */
static int
op_adopt_tree(struct operation *op, char **cause)
{
	const char *base = op->op_bd->bd_cgroup_base;
	size_t blen = strlen(base);
	char cg[256];

	for (int round = 0; round < OP_ADOPT_ROUNDS; round++) {
		pid_t *v;
		size_t n, moved = 0;

		if (proc_descendants(op->op_root_pid, &v, &n) != 0) {
			util_cause(cause, "cannot read the process tree: %s", strerror(errno));
			return -1;
		}
		for (size_t i = 0; i < n; i++) {
			if (cgroup_of_pid(v[i], cg, sizeof(cg)) != 0 ||
			    strcmp(cg, op->op_cg.cg_rel) == 0 ||
			    (strncmp(cg, base, blen) == 0 && cg[blen] == '/') ||
			    strstr(cg, "/" CGROUP_BASE "/op_") != NULL)
				continue; /* gone, moved, or another operation's */
			if (cgroup_attach(&op->op_cg, v[i], NULL) == 0)
				moved++;
		}
		free(v);
		if (moved == 0)
			return 0;
	}
	util_cause(cause, "the tree kept forking while it was moved");
	return -1;
}

/* Where an adopted tree came from, kept in the record for a restarted boundaryd. */
static int
op_mut_adoption(struct json_object *rec, void *arg, char **cause)
{
	struct operation *op = arg;
	struct json_object *a = json_object_new_object();

	(void)cause;
	json_object_object_add(a, "origin_cgroup", json_object_new_string(op->op_origin_cg));
	json_object_object_add(a, "detach", json_object_new_boolean(op->op_detach));
	json_object_object_add(rec, "adoption", a);
	return 0;
}

/*
 * The disk refused part of a create: take it all back. The held child
 * never ran its command, so nothing happened that evidence must keep:
 * the cgroup (with the child in it) is killed and removed, the network
 * table deleted, and the operation's directories and anything pending for
 * them removed, so a full or read-only disk leaves no half operation
 * behind. Threat: an operation that runs without the record that
 * accounts for it.
 */
static void
op_abort_create_disk(struct operation *op, struct op_reply *r, const char *what)
{
	struct boundaryd *bd = op->op_bd;
	struct record_disk rd;
	char *cause = NULL;

	record_disk_status(&rd);
	reply_error(r, PE_STATE_DISK, "the state disk is %s (%s): %s; nothing was started",
	    record_disk_state_name(rd.rd_state), strerror(rd.rd_errno ? rd.rd_errno : EIO),
	    what);
	log_warnx("%s: create refused: state disk %s (%s)", op->op_id,
	    record_disk_state_name(rd.rd_state), what);
	if (op->op_cg_valid) {
		if (cgroup_populated(&op->op_cg) > 0)
			cgroup_kill(&op->op_cg, NULL);
		for (int i = 0; i < 250 && cgroup_populated(&op->op_cg) > 0; i++)
			usleep(2000);
		if (cgroup_remove_tree(&op->op_cg, &cause) == 0) {
			op->op_cg_valid = 0;
		} else {
			log_warnx("%s: %s", op->op_id, cause);
			free(cause);
			cause = NULL;
		}
	}
	if (op->op_net != NULL) {
		netop_end(op->op_net);
		if (op->op_net->no_dirfd >= 0)
			record_forget(op->op_net->no_dirfd, NULL);
		netop_free(op->op_net);
		op->op_net = NULL;
		if (safefs_remove_dir(bd->bd_netops_fd, op->op_id) != 0 && errno != ENOENT)
			log_warn("%s: remove network-operations/%s", op->op_id, op->op_id);
	}
	if (op->op_dirfd >= 0) {
		record_forget(op->op_dirfd, NULL);
		close(op->op_dirfd);
		op->op_dirfd = -1;
		if (safefs_remove_dir(bd->bd_ops_fd, op->op_id) != 0 && errno != ENOENT)
			log_warn("%s: remove operations/%s", op->op_id, op->op_id);
	}
	/* A prepared cell's network directory, empty, when its network state never came. */
	if (op->op_net == NULL && bd->bd_netops_fd >= 0)
		unlinkat(bd->bd_netops_fd, op->op_id, AT_REMOVEDIR);
	op_free(op);
}

void
operation_create(struct boundaryd *bd, struct conn *conn, const struct peer *p, int64_t reqid,
    struct json_object *params, struct op_reply *r)
{
	struct proto_operation_create c;
	struct schema_error err;
	struct operation *op;
	char rel[256], cgname[256], exe[256], dig[PROC_DIGEST_HEX], *cause = NULL;
	int pidfd = -1;

	struct netop_spec spec;
	int want_net = 0;

	if (proto_parse_operation_create(params, &c, &err) != 0) {
		reply_error(r, PE_INVALID_PARAMS, "%s", err.se_message);
		return;
	}
	/* A config file is root's authority; adopting a foreign tree is a root debug path. */
	if ((c.oc_network_config != NULL || c.oc_adopt_existing) && p->pr_uid != 0) {
		reply_error(r, PE_NOT_AUTHORIZED, "network_config and adopt_existing are root only");
		return;
	}
	if (c.oc_fanotify != NULL) {
		if (op_check_fanotify(c.oc_fanotify, &err) != 0) {
			reply_error(r, PE_INVALID_PARAMS, "fanotify.%s", err.se_message);
			return;
		}
		if (sensor_fanotify_scope(bd, p, c.oc_fanotify, &cause) != 0) {
			reply_error(r, PE_INVALID_PARAMS, "%s", cause);
			free(cause);
			return;
		}
		/* Asked-for sensitive-path enforcement that nothing applies: refuse. */
		if (schema_bool(c.oc_fanotify, "enabled", 0) &&
		    (bd->bd_sensor == NULL || !(bd->bd_sensor_caps & SENSOR_FANOTIFY))) {
			reply_error(r, PE_SENSOR, "fanotify enforcement needs gensee-sensord, "
			    "which is not connected");
			return;
		}
	}
	if (c.oc_network != NULL || c.oc_network_config != NULL) {
		int pr = c.oc_network != NULL ?
		    netop_spec_from_params(c.oc_network, &spec, &cause) :
		    netop_spec_from_file(c.oc_network_config, &spec, &cause, NULL);
		if (pr == 0 && spec.ns_subject != NFT_SUBJECT_CGROUP) {
			pr = -1;
			util_cause(&cause, "a source_address config is started with network.start");
		}
		if (pr != 0) {
			reply_error(r, c.oc_network != NULL ? PE_INVALID_PARAMS : PE_INVALID_CONFIG,
			    "%s", cause);
			free(cause);
			netop_spec_free(&spec);
			return;
		}
		if (bd->bd_nft == NULL) {
			netop_spec_free(&spec);
			reply_error(r, PE_ENFORCEMENT, "network enforcement is not available: "
			    "nftables could not be opened");
			return;
		}
		want_net = 1;
	}
	if (!bd->bd_have_cgroup) {
		reply_error(r, PE_CGROUP, "this host has no cgroup v2 mount");
		if (want_net)
			netop_spec_free(&spec);
		return;
	}
	if (p->pr_uid != 0) {
		struct operation *o;
		int held = 0;
		TAILQ_FOREACH(o, &bd->bd_ops, op_entry)
			held += o->op_uid == p->pr_uid;
		if (held >= OP_MAX_PER_UID) {
			reply_error(r, PE_LIMIT, "uid %u already has %d active operations",
			    (unsigned)p->pr_uid, held);
			if (want_net)
			netop_spec_free(&spec);
		return;
		}
	}
	/*
	 * Evidence first: while the state disk does not take writes, nothing
	 * new is started (running operations keep their truth in memory).
	 */
	struct record_disk rd;
	record_disk_status(&rd);
	if (rd.rd_state != RECORD_DISK_OK) {
		reply_error(r, PE_STATE_DISK, "the state disk is %s (%s); nothing was started",
		    record_disk_state_name(rd.rd_state), strerror(rd.rd_errno ? rd.rd_errno : EIO));
		if (want_net)
			netop_spec_free(&spec);
		return;
	}
	uint64_t disk_failures = record_disk_failures();
	if (op_verify_child(p, &c, &pidfd, r) != 0) {
		if (pidfd >= 0)
			close(pidfd);
		if (want_net)
			netop_spec_free(&spec);
		return;
	}
	/*
	 * A process already inside an operation may not be moved into a new
	 * one: that would let a supervised agent lift part of its tree out of
	 * its own cgroup (and later out of that cgroup's network policy).
	 */
	if (cgroup_of_pid(c.oc_pid, cgname, sizeof(cgname)) != 0) {
		reply_error(r, PE_IDENTITY, "cannot read the cgroup of process %d", (int)c.oc_pid);
		close(pidfd);
		if (want_net)
			netop_spec_free(&spec);
		return;
	}
	char inop[PEER_OP_ID_MAX];
	if (control_cgroup_op(bd, cgname, inop, sizeof(inop))) {
		reply_error(r, PE_CONFLICT, "process %d is already inside a supervised operation",
		    (int)c.oc_pid);
		close(pidfd);
		if (want_net)
			netop_spec_free(&spec);
		return;
	}
	if ((op = op_alloc(bd)) == NULL) {
		close(pidfd);
		reply_error(r, PE_INTERNAL, "out of memory");
		if (want_net)
			netop_spec_free(&spec);
		return;
	}
	op->op_pidfd = pidfd;
	op->op_uid = p->pr_uid;
	if (c.oc_adopt_existing) {
		op->op_adopted = 1;
		util_strlcpy(op->op_origin_cg, cgname, sizeof(op->op_origin_cg));
		/*
		 * A watched tree is someone else's: when the watch or its root
		 * ends, the rest is given back, never killed.
		 */
		op->op_detach = strcmp(c.oc_action_class, "watch") == 0;
	}
	op->op_launcher = !c.oc_adopt_existing;
	op->op_launcher_pid = p->pr_pid;
	op->op_launcher_start = p->pr_start_ticks;
	op->op_root_pid = c.oc_pid;
	op->op_root_start = c.oc_start_ticks;
	int made = 0;
	/*
	 * A prepared cell when one fits (spare.c): its id, its directory with
	 * the first record's files, its empty cgroup and, for a network
	 * operation, its network directory and deny-all table.
	 */
	int kind = bd->bd_have_cgroup ? spare_kind_for(want_net ? &spec : NULL) : -1;
	if (kind >= 0) {
		spare_take(kind, op->op_id, sizeof(op->op_id), &op->op_cg, &op->op_dirfd);
		/* Until netop_attach owns it, a failure deletes the table (op_free). */
		if (kind == SPARE_NET)
			netop_table_name(bd, op->op_id, op->op_spare_table);
	} else if (ids_new("op_", op->op_id, sizeof(op->op_id)) != 0 ||
	    (made = mkdirat(bd->bd_ops_fd, op->op_id, 0700) == 0) == 0 ||
	    (op->op_dirfd = safefs_opendir(bd->bd_ops_fd, op->op_id)) < 0) {
		int e = errno;
		if (record_disk_errno(e)) {
			record_disk_failed(e);
			log_warnx("create refused: cannot make an operation directory: %s",
			    strerror(e));
			reply_error(r, PE_STATE_DISK, "cannot create the operation directory: %s; "
			    "nothing was started", strerror(e));
		} else {
			reply_error(r, PE_STATE, "cannot create the operation directory: %s",
			    strerror(e));
		}
		if (made)	/* ours and empty: no debris */
			unlinkat(bd->bd_ops_fd, op->op_id, AT_REMOVEDIR);
		op_free(op);
		if (want_net)
			netop_spec_free(&spec);
		return;
	}
	snprintf(rel, sizeof(rel), "%s/%s", bd->bd_cgroup_base, op->op_id);
	if (kind < 0 && (op_ensure_base(bd, &cause) != 0 ||
	    cgroup_create(bd->bd_cgroup_mount, rel, &op->op_cg, &cause) != 0)) {
		reply_error(r, PE_CGROUP, "%s", cause);
		free(cause);
		op_free(op);
		if (want_net)
			netop_spec_free(&spec);
		return;
	}
	op->op_cg_valid = 1;
	proc_read_exe(c.oc_pid, exe, sizeof(exe));
	proc_argv_digest(c.oc_pid, dig);
	util_strlcpy(op->op_root_digest, dig, sizeof(op->op_root_digest));
	if (c.oc_host_controls != NULL) {
		struct json_object *sc = schema_child(c.oc_host_controls, "seccomp");
		struct json_object *ll = schema_child(c.oc_host_controls, "landlock");
		op->op_hc_seccomp = schema_bool(sc, "enabled", 0) != 0;
		op->op_landlock = schema_bool(ll, "applied", 0) != 0;
		op->op_hc_nnp = op->op_hc_seccomp || op->op_landlock;
		op->op_hc_pending = op->op_hc_seccomp || op->op_hc_nnp;
		op->op_hc_deadline_ms = util_monotonic_ms() + OP_HOSTCTL_VERIFY_MS;
	}
	struct oprecord_init in = {
		.oi_id = op->op_id,
		.oi_source_run = c.oc_source_run,
		.oi_action_class = c.oc_action_class,
		.oi_uid = p->pr_uid,
		.oi_gid = p->pr_gid,
		.oi_launcher_pid = p->pr_pid,
		.oi_launcher_start = p->pr_start_ticks,
		.oi_root_pid = c.oc_pid,
		.oi_root_start = c.oc_start_ticks,
		.oi_root_exe = exe,
		.oi_root_argv_digest = dig,
		.oi_command = c.oc_command,
		.oi_timeout_seconds = c.oc_timeout_seconds,
		.oi_kill_grace_seconds = c.oc_kill_grace_seconds,
		.oi_cgroup_path = op->op_cg.cg_path,
		.oi_cgroup_id = op->op_cg.cg_id,
		.oi_instance = bd->bd_instance,
	};
	struct json_object *rec = oprecord_new(&in);
	op->op_deadline_ms = schema_int(schema_child(rec, "lifecycle"), "deadline_unix_ms", 0);
	op->op_kill_grace_s = schema_int(schema_child(rec, "lifecycle"), "kill_grace_seconds",
	    OP_KILL_GRACE_DEFAULT_S);
	if (record_create(op->op_dirfd, OPRECORD_FILE, rec, &cause) != 0) {
		json_object_put(rec);
		if (record_disk_errno(errno)) {
			op_abort_create_disk(op, r, cause);
			free(cause);
			if (want_net)
				netop_spec_free(&spec);
			return;
		}
		reply_error(r, PE_STATE, "%s", cause);
		free(cause);
		op_fail_create(op, "record_create_failed");
		if (want_net)
			netop_spec_free(&spec);
		return;
	}
	json_object_put(rec);

	/*
	 * The policy goes onto the still empty cgroup before the process joins
	 * it: there is no moment in which the tree has ambient network access.
	 */
	if (want_net) {
		if (netop_attach(op, &spec, 1, &cause) == NULL) {
			reply_error(r, PE_ENFORCEMENT, "network enforcement failed: %s", cause);
			free(cause);
			netop_spec_free(&spec);
			op_fail_create(op, "enforcement_failed");
			return;
		}
		want_net = 0; /* the spec now belongs to the operation */
	}

	/* Attach, then prove the process we verified is the one that moved. */
	if (cgroup_attach(&op->op_cg, c.oc_pid, &cause) != 0 ||
	    cgroup_of_pid(c.oc_pid, cgname, sizeof(cgname)) != 0 || strcmp(cgname, rel) != 0 ||
	    proc_identity_matches(c.oc_pid, c.oc_start_ticks) != 0 ||
	    proc_pidfd_signal(op->op_pidfd, 0) != 0) {
		reply_error(r, PE_CGROUP, "cannot attach process %d: %s", (int)c.oc_pid,
		    cause ? cause : "identity changed during attach");
		free(cause);
		op_fail_create(op, "attach_failed");
		if (want_net)
			netop_spec_free(&spec);
		return;
	}
	if (op->op_adopted && op_adopt_tree(op, &cause) != 0) {
		reply_error(r, PE_CGROUP, "cannot adopt the tree of process %d: %s", (int)c.oc_pid,
		    cause);
		free(cause);
		/* Someone else's tree: handed back, never killed. */
		op_detach_members(op);
		op_fail_create(op, "attach_failed");
		return;
	}
	/*
	 * One write makes the operation running with everything known at
	 * create: state, attachment, first lineage, host controls, fanotify
	 * rules and sensor coverage and the envelope copy (each write is launch time).
	 */
	struct oprecord_lifecycle l = { .ol_state = OPSTATE_RUNNING };
	struct oprecord_cgroup cg = { .ocg_attachment = "attached" };
	struct oprecord_lineage lin;
	struct lineage_batch lb;
	struct op_batch b = { .ob_n = 0 };
	struct op_portion_arg hc = { "host_controls", c.oc_host_controls };
	struct op_portion_arg fa = { "fanotify", c.oc_fanotify };
	if (c.oc_fanotify != NULL && schema_bool(c.oc_fanotify, "enabled", 0))
		op->op_fanotify = json_object_get(c.oc_fanotify);
	struct op_sensor_arg sa[] = {
		{ "proc_connector", bd->bd_sensor_caps & SENSOR_PROC_CONNECTOR ? "active" :
		    "unavailable" },
		{ "nft_trace", op->op_net == NULL ? "off" :
		    bd->bd_sensor_caps & SENSOR_NFT_TRACE ? "active" : "unavailable" },
		{ "fanotify", op->op_fanotify == NULL ? "off" : "active" },
		/* Landlock enforces either way; this says whether its refusals are listed. */
		{ "landlock_audit", !schema_bool(schema_child(c.oc_host_controls, "landlock"),
		    "applied", 0) ? "off" : bd->bd_sensor_caps & SENSOR_LANDLOCK_AUDIT ? "active" :
		    "unavailable" },
	};
	op_batch_add(&b, oprecord_mut_lifecycle, &l);
	op_batch_add(&b, oprecord_mut_cgroup, &cg);
	int collected = op_collect_lineage(op, 0, &lb);
	if (collected >= 0 && lb.lb_n > 0) {
		lin.ol_procs = lb.lb_procs;
		lin.ol_n = lb.lb_n;
		op_batch_add(&b, oprecord_mut_lineage, &lin);
	}
	if (c.oc_host_controls != NULL)
		op_batch_add(&b, op_mut_portion_once, &hc);
	if (op->op_fanotify != NULL)
		op_batch_add(&b, op_mut_portion_once, &fa);
	if (op->op_adopted)
		op_batch_add(&b, op_mut_adoption, op);
	for (size_t i = 0; i < nitems(sa); i++)
		op_batch_add(&b, op_mut_sensor, &sa[i]);
	if (op->op_net != NULL)
		op_batch_add(&b, netop_mut_envelope_of, op->op_net);
	int wr = oprecord_update(op->op_dirfd, op->op_id, op_mut_batch, &b, NULL, &cause);
	if (collected >= 0)
		lineage_batch_free(&lb);
	/*
	 * Any write of this create the disk did not take (the network record,
	 * its evidence, this update kept only in memory): the child must not
	 * run on a record that exists only here.
	 */
	if (wr == 0 && record_disk_failures() != disk_failures) {
		op_abort_create_disk(op, r, "the operation's first records were not written");
		return;
	}
	if (wr != 0 || op_arm(op) != 0) {
		reply_error(r, PE_STATE, "%s", cause ? cause : "cannot arm supervision");
		free(cause);
		op_fail_create(op, "supervision_failed");
		if (want_net)
			netop_spec_free(&spec);
		return;
	}
	TAILQ_INSERT_TAIL(&bd->bd_ops, op, op_entry);
	log_info("%s: created for uid %u, root %d, cgroup %s (id %llu)", op->op_id,
	    (unsigned)op->op_uid, (int)op->op_root_pid, op->op_cg.cg_path,
	    (unsigned long long)op->op_cg.cg_id);

	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "operation_id", json_object_new_string(op->op_id));
	json_object_object_add(r->or_result, "state", json_object_new_string(OPSTATE_RUNNING));
	json_object_object_add(r->or_result, "cgroup_path",
	    json_object_new_string(op->op_cg.cg_path));
	json_object_object_add(r->or_result, "cgroup_id",
	    json_object_new_int64((int64_t)op->op_cg.cg_id));
	json_object_object_add(r->or_result, "timeout_seconds",
	    c.oc_timeout_seconds > 0 ? json_object_new_int64(c.oc_timeout_seconds) : NULL);
	char path[PATH_MAX + 128];
	snprintf(path, sizeof(path), "%s/operations/%s/%s", bd->bd_state_root, op->op_id,
	    OPRECORD_FILE);
	json_object_object_add(r->or_result, "record_path", json_object_new_string(path));
	if (op->op_net != NULL) {
		json_object_object_add(r->or_result, "warnings",
		    json_object_get(op->op_net->no_spec.ns_warnings));
		json_object_object_add(r->or_result, "network_table",
		    json_object_new_string(op->op_net->no_table));
		json_object_object_add(r->or_result, "network_generation",
		    json_object_new_int64((int64_t)op->op_net->no_generation));
		/* The CLI waits for the DNS proxy before it releases the agent. */
		if (op->op_net->no_spec.ns_dns != NULL)
			json_object_object_add(r->or_result, "dns_listen", json_object_get(
			    schema_child(op->op_net->no_spec.ns_dns, "listen")));
		/* The agent's HTTPS_PROXY: only to the operation's owner, never evidence. */
		const char *cl = op->op_net->no_spec.ns_dns != NULL ?
		    schema_string(op->op_net->no_spec.ns_dns, "connect_listen") : NULL;
		if (cl != NULL) {
			char tok[65], url[160];
			netop_connect_token(bd, op->op_id, tok);
			snprintf(url, sizeof(url), "http://gensee:%s@%s", tok, cl);
			json_object_object_add(r->or_result, "proxy_url", json_object_new_string(url));
			sodium_memzero(tok, sizeof(tok));
		}
	}
	/*
	 * With a sensor, hold the reply (and so the child) until sensord has
	 * this operation's config: its very first open is then already judged
	 * by the right rules.
	 */
	mediator_config_changed(bd, op->op_net);
	if (sensor_push(bd, op, "add") == 0) {
		if (op->op_net != NULL)
			netop_publish_installed(op->op_net);	/* the answer waits for sensord */
		op->op_sensor_pushed = 1;
		struct timeval tv = { SENSOR_ACK_MS / 1000, (SENSOR_ACK_MS % 1000) * 1000 };
		op->op_create_result = r->or_result;
		op->op_create_conn = conn;
		op->op_create_id = reqid;
		r->or_result = NULL;
		r->or_deferred = 1;
		op->op_create_timer = evtimer_new(bd->bd_base, op_create_timeout_cb, op);
		if (op->op_create_timer == NULL || evtimer_add(op->op_create_timer, &tv) != 0)
			operation_create_resolve(op, 0);
	} else if (op->op_fanotify != NULL) {
		if (op->op_net != NULL)
			netop_publish_installed(op->op_net);
		/* Rules sensord never received guard nothing: the child must not run. */
		json_object_put(r->or_result);
		r->or_result = NULL;
		reply_error(r, PE_SENSOR, "the sensitive-path policy could not be handed to "
		    "gensee-sensord");
		operation_finish(op, OPSTATE_FAILED, "sensor_unavailable");
	} else if (op->op_net != NULL) {
		/*
		 * The answer first, then the network record and its "installed"
		 * effect: the table is in the kernel and the envelope in the
		 * operation record already. A boundaryd killed in between leaves
		 * a running operation without a network record, which recovery
		 * ends closed (network_restore_failed).
		 */
		control_send(conn, proto_result_new(reqid, r->or_result));
		control_flush(conn);
		r->or_result = NULL;
		r->or_deferred = 1;
		netop_publish_installed(op->op_net);
	}
}

/*
 * Load a record the caller may see. Another user's operation answers
 * not_found, exactly like a missing one, so ids of others do not leak.
 */
static struct json_object *
op_load_visible(struct boundaryd *bd, const struct peer *p, const char *id, int *dirfd_out,
    struct op_reply *r)
{
	struct json_object *rec;
	char *cause = NULL;
	int dirfd;

	if (!ids_valid_operation(id)) {
		reply_error(r, PE_INVALID_PARAMS, "operation_id: malformed id");
		return NULL;
	}
	/* From inside an operation, every other one answers like a missing one. */
	if (p->pr_in_op && strcmp(id, p->pr_op_id) != 0) {
		reply_error(r, PE_NOT_FOUND, "no such operation");
		return NULL;
	}
	dirfd = safefs_opendir(bd->bd_ops_fd, id);
	if (dirfd < 0) {
		reply_error(r, PE_NOT_FOUND, "no such operation");
		return NULL;
	}
	if (oprecord_read(dirfd, id, &rec, &cause) != 0) {
		reply_error(r, PE_STATE, "%s", cause);
		free(cause);
		close(dirfd);
		return NULL;
	}
	if (p->pr_uid != 0 &&
	    schema_int(schema_child(rec, "source"), "uid", -1) != (int64_t)p->pr_uid) {
		json_object_put(rec);
		close(dirfd);
		reply_error(r, PE_NOT_FOUND, "no such operation");
		return NULL;
	}
	if (dirfd_out != NULL)
		*dirfd_out = dirfd;
	else
		close(dirfd);
	return rec;
}

/*
 * operation.observe: the launcher says its child has just exec'd. Nothing
 * it says is believed: boundaryd only refreshes the lineage from /proc now,
 * so a root that exits before the first poll is still recorded as what it
 * ran rather than as the launcher it was forked from. The running
 * operation is checked first and the record only loaded for the error, so
 * the look at /proc comes as early as it can.
 */
void
operation_observe(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	const char *id = schema_string(params, "operation_id");
	struct operation *op = ids_valid_operation(id) ? operation_find(bd, id) : NULL;
	struct json_object *rec;
	int observed = 0;

	if (op != NULL && operation_visible(op, p)) {
		if (op->op_phase == OP_RUNNING) {
			/* Only the launcher's word "it has exec'd" forces the check. */
			op_poll(op, p->pr_pid == op->op_launcher_pid &&
			    p->pr_start_ticks == op->op_launcher_start);
			observed = 1;
		}
	} else {
		/* Not running here: the same answers as inspect (not_found hides others'). */
		if ((rec = op_load_visible(bd, p, id, NULL, r)) == NULL)
			return;
		json_object_put(rec);
	}
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "observed", json_object_new_boolean(observed));
}

void
operation_inspect(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	struct json_object *rec = op_load_visible(bd, p, schema_string(params, "operation_id"),
	    NULL, r);
	if (rec == NULL)
		return;
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "record", rec);
}

struct json_object *
operation_summary(struct json_object *rec)
{
	struct json_object *s = json_object_new_object();
	struct json_object *life = schema_child(rec, "lifecycle");
	struct json_object *root = schema_child(rec, "root_process");
	static const char *const keys[] = { "state", "created_at", "ended_at", "end_reason" };

	json_object_object_add(s, "operation_id",
	    json_object_new_string(schema_string(rec, "operation_id")));
	for (size_t i = 0; i < nitems(keys); i++)
		json_object_object_add(s, keys[i], json_object_get(schema_child(life, keys[i])));
	json_object_object_add(s, "exit", json_object_get(schema_child(life, "exit")));
	json_object_object_add(s, "uid",
	    json_object_get(schema_child(schema_child(rec, "source"), "uid")));
	json_object_object_add(s, "root_pid", json_object_get(schema_child(root, "pid")));
	json_object_object_add(s, "executable",
	    json_object_get(schema_child(root, "executable")));
	json_object_object_add(s, "command", json_object_get(schema_child(root, "command")));
	json_object_object_add(s, "processes",
	    json_object_new_int64((int64_t)json_object_array_length(schema_child(rec, "lineage"))));
	json_object_object_add(s, "network",
	    json_object_get(schema_child(schema_child(rec, "counts"), "network")));
	json_object_object_add(s, "effects",
	    json_object_get(schema_child(schema_child(rec, "counts"), "effects")));
	return s;
}

/* The reply to operation.end: a summary plus the whole record. */
static struct json_object *
op_end_result(int dirfd, const char *id, char **cause)
{
	struct json_object *rec, *res;
	if (oprecord_read(dirfd, id, &rec, cause) != 0)
		return NULL;
	res = operation_summary(rec);
	json_object_object_add(res, "record", rec);
	return res;
}

/*
 * Answer every operation.end that waited for this operation's cleanup;
 * rec (taken, may be NULL) is the record just written, else it is read.
 */
static void
op_answer_waiters_with(struct operation *op, struct json_object *rec)
{
	struct op_waiter *w;
	while ((w = TAILQ_FIRST(&op->op_waiters)) != NULL) {
		char *cause = NULL;
		struct json_object *res;
		if (rec != NULL) {
			res = operation_summary(rec);
			json_object_object_add(res, "record", rec);
			rec = NULL;
		} else {
			res = op_end_result(op->op_dirfd, op->op_id, &cause);
		}
		TAILQ_REMOVE(&op->op_waiters, w, ow_entry);
		if (res != NULL)
			control_send(w->ow_conn, proto_result_new(w->ow_id, res));
		else
			control_send(w->ow_conn, proto_error_new(w->ow_id, PE_STATE, cause));
		control_flush(w->ow_conn);
		free(cause);
		free(w);
	}
	json_object_put(rec);
}

static void
op_answer_waiters(struct operation *op)
{
	op_answer_waiters_with(op, NULL);
}

void
operation_forget_conn(struct boundaryd *bd, struct conn *c)
{
	struct operation *op;
	struct op_waiter *w, *next;
	TAILQ_FOREACH(op, &bd->bd_ops, op_entry) {
		if (op->op_create_conn == c)
			op->op_create_conn = NULL; /* the launcher is gone; its child dies with it */
		for (w = TAILQ_FIRST(&op->op_waiters); w != NULL; w = next) {
			next = TAILQ_NEXT(w, ow_entry);
			if (w->ow_conn == c) {
				TAILQ_REMOVE(&op->op_waiters, w, ow_entry);
				free(w);
			}
		}
	}
}

void
operation_end(struct boundaryd *bd, struct conn *c, const struct peer *p, int64_t reqid,
    struct json_object *params, struct op_reply *r)
{
	struct proto_operation_end e;
	struct schema_error err;
	struct operation *op;
	struct json_object *rec;
	char *cause = NULL;
	int dirfd;

	memset(&err, 0, sizeof(err));
	if (proto_parse_operation_end(params, &e, &err) != 0) {
		reply_error(r, PE_INVALID_PARAMS, "%s", err.se_message);
		return;
	}
	rec = op_load_visible(bd, p, e.oe_id, &dirfd, r);
	if (rec == NULL)
		return;
	/*
	 * An exit report is the launcher's alone: the recorded operation.create
	 * peer, pid and start time. Threat: another process of the user (or the
	 * tree itself) writing an exit status the root never had into evidence.
	 */
	struct json_object *lj = schema_child(schema_child(rec, "source"), "launcher");
	if (e.oe_has_exit && (schema_int(lj, "pid", -1) != (int64_t)p->pr_pid ||
	    schema_int(lj, "start_time_ticks", -1) != (int64_t)p->pr_start_ticks)) {
		json_object_put(rec);
		close(dirfd);
		reply_error(r, PE_NOT_LAUNCHER, "only the operation's launcher may report its exit");
		return;
	}
	json_object_put(rec);
	op = operation_find(bd, e.oe_id);
	if (e.oe_detach && (p->pr_uid != 0 || op == NULL || !op->op_adopted)) {
		close(dirfd);
		reply_error(r, p->pr_uid != 0 ? PE_NOT_AUTHORIZED : PE_STATE,
		    "detach is for root, and only for a running tree it adopted");
		return;
	}
	if (op != NULL && op->op_phase == OP_RUNNING && e.oe_detach) {
		op->op_detach = 1;
		operation_finish(op, OPSTATE_ENDED, "detached");
	} else if (op != NULL && op->op_phase == OP_RUNNING) {
		if (e.oe_has_exit && !e.oe_kill) {
			/* An exit report is only believable once the root is gone. */
			if (!op_root_exited(op)) {
				close(dirfd);
				reply_error(r, PE_STATE,
				    "the root process is still running; use kill to end it");
				return;
			}
			operation_finish(op, OPSTATE_EXITED, "root_exited");
		} else {
			/* SIGTERM first, the kill after the grace (none with kill). */
			operation_terminate(op, OPSTATE_ENDED, "ended_by_request",
			    e.oe_grace_seconds);
		}
	}
	struct oprecord_lifecycle l = {
		.ol_has_exit = 1,
		.ol_exit_code = e.oe_exit_code,
		.ol_exit_signal = e.oe_exit_signal,
		.ol_reported_by = p->pr_uid == 0 ? "root" : "launcher",
	};
	/* The launcher's own count of what its seccomp listener refused (checked by proto). */
	if (e.oe_denials != NULL) {
		json_object_object_foreach(e.oe_denials, name, v) {
			if (l.ol_ndenials == OPRECORD_MAX_DENIALS)
				break;
			util_strlcpy(l.ol_denials[l.ol_ndenials].od_syscall, name,
			    sizeof(l.ol_denials[0].od_syscall));
			l.ol_denials[l.ol_ndenials++].od_count = json_object_get_int64(v);
		}
	}
	/*
	 * Reply once the tree is gone and the cgroup released (bounded by the
	 * grace, then the reap).
	 */
	if (op != NULL && (op->op_phase == OP_FINISHING || op->op_terminating)) {
		struct op_waiter *w = calloc(1, sizeof(*w));
		if (w != NULL) {
			/*
			 * The exit goes into the cleanup's update, one write fewer
			 * per run; the reply waits for that update anyway. The first
			 * report is kept, as the record keeps only the first.
			 */
			if (e.oe_has_exit && !op->op_has_exit_report) {
				struct timeval now = { 0, 0 };
				op->op_exit_report = l;
				op->op_has_exit_report = 1;
				if (op->op_reap_ev != NULL)
					evtimer_add(op->op_reap_ev, &now); /* it may be all the reap waits for */
			}
			w->ow_conn = c;
			w->ow_id = reqid;
			w->ow_uid = p->pr_uid;
			TAILQ_INSERT_TAIL(&op->op_waiters, w, ow_entry);
			r->or_deferred = 1;
			close(dirfd);
			return;
		}
	}
	if (e.oe_has_exit &&
	    oprecord_update(dirfd, e.oe_id, oprecord_mut_lifecycle, &l, NULL, &cause) != 0) {
		reply_error(r, PE_STATE, "%s", cause);
		free(cause);
		close(dirfd);
		return;
	}
	r->or_result = op_end_result(dirfd, e.oe_id, &cause);
	if (r->or_result == NULL) {
		reply_error(r, PE_STATE, "%s", cause);
		free(cause);
	}
	close(dirfd);
}

struct operation *
operation_new_address(struct boundaryd *bd, const char *id, char **cause)
{
	struct operation *op;

	if (operation_find(bd, id) != NULL) {
		util_cause(cause, "operation %s is already active", id);
		return NULL;
	}
	if ((op = op_alloc(bd)) == NULL) {
		util_cause(cause, "out of memory");
		return NULL;
	}
	op->op_kind = OP_KIND_ADDRESS;
	op->op_uid = 0;
	util_strlcpy(op->op_id, id, sizeof(op->op_id));
	/* An id names one operation forever: a used one is refused, not reused. */
	if (mkdirat(bd->bd_ops_fd, op->op_id, 0700) != 0 ||
	    (op->op_dirfd = safefs_opendir(bd->bd_ops_fd, op->op_id)) < 0) {
		util_cause(cause, "operation id %s cannot be used: %s", id, strerror(errno));
		op_free(op);
		return NULL;
	}
	struct oprecord_init in = {
		.oi_id = op->op_id,
		.oi_source_run = "network.start",
		.oi_action_class = "source_address",
		.oi_instance = bd->bd_instance,
	};
	struct json_object *rec = oprecord_new(&in);
	struct oprecord_lifecycle l = { .ol_state = OPSTATE_RUNNING };
	struct oprecord_cgroup cg = { .ocg_attachment = "none", .ocg_cleanup = "removed" };
	struct op_batch b = { .ob_n = 0 };
	op_batch_add(&b, oprecord_mut_lifecycle, &l);
	op_batch_add(&b, oprecord_mut_cgroup, &cg);
	if (record_create(op->op_dirfd, OPRECORD_FILE, rec, cause) != 0 ||
	    oprecord_update(op->op_dirfd, op->op_id, op_mut_batch, &b, NULL, cause) != 0 ||
	    op_arm(op) != 0) {
		json_object_put(rec);
		op_free(op);
		return NULL;
	}
	json_object_put(rec);
	TAILQ_INSERT_TAIL(&bd->bd_ops, op, op_entry);
	log_info("%s: source-address operation started", op->op_id);
	return op;
}

struct operation *
operation_adopt(struct boundaryd *bd, const char *id, int dirfd, struct json_object *rec,
    char **cause)
{
	struct json_object *root = schema_child(rec, "root_process");
	struct json_object *lineage = schema_child(rec, "lineage");
	struct operation *op = op_alloc(bd);
	char rel[256];

	if (op == NULL) {
		util_cause(cause, "out of memory");
		return NULL;
	}
	util_strlcpy(op->op_id, id, sizeof(op->op_id));
	op->op_dirfd = dirfd;
	op->op_uid = (uid_t)schema_int(schema_child(rec, "source"), "uid", -1);
	if (schema_child(rec, "fanotify") != NULL)
		op->op_fanotify = json_object_get(schema_child(rec, "fanotify"));
	/* An adopted tree keeps where it came from and whether it is given back. */
	struct json_object *ad = schema_child(rec, "adoption");
	if (ad != NULL && schema_string(ad, "origin_cgroup") != NULL) {
		op->op_adopted = 1;
		op->op_detach = schema_bool(ad, "detach", 0);
		util_strlcpy(op->op_origin_cg, schema_string(ad, "origin_cgroup"),
		    sizeof(op->op_origin_cg));
	}
	const char *ac = schema_string(schema_child(rec, "source"), "action_class");
	if (ac != NULL && strcmp(ac, "source_address") == 0)
		op->op_kind = OP_KIND_ADDRESS;
	op->op_root_pid = (pid_t)schema_int(root, "pid", 0);
	op->op_root_start = (uint64_t)schema_int(root, "start_time_ticks", 0);
	op->op_deadline_ms = schema_int(schema_child(rec, "lifecycle"), "deadline_unix_ms", 0);
	op->op_kill_grace_s = schema_int(schema_child(rec, "lifecycle"), "kill_grace_seconds",
	    OP_KILL_GRACE_DEFAULT_S);
	/* The cgroup name comes from the validated id, never from the file. */
	snprintf(rel, sizeof(rel), "%s/%s", bd->bd_cgroup_base, id);
	/* A `gensee run` (not a watch or an adopted tree): its launcher is watched again. */
	struct json_object *lj = schema_child(schema_child(rec, "source"), "launcher");
	const char *run = schema_string(schema_child(rec, "source"), "run");
	op->op_launcher = ac != NULL && strcmp(ac, "local_process") == 0 && run != NULL &&
	    strcmp(run, "gensee run") == 0 && lj != NULL;
	op->op_launcher_pid = (pid_t)schema_int(lj, "pid", 0);
	op->op_launcher_start = (uint64_t)schema_int(lj, "start_time_ticks", 0);
	if (bd->bd_have_cgroup && cgroup_open(bd->bd_cgroup_mount, rel, &op->op_cg, NULL) == 0)
		op->op_cg_valid = 1;
	else if (errno == ENOENT)
		op->op_cg_missing = 1;
	op->op_pidfd = proc_pidfd_open(op->op_root_pid);
	if (op->op_pidfd >= 0 &&
	    (proc_identity_matches(op->op_root_pid, op->op_root_start) != 0 ||
		proc_pidfd_signal(op->op_pidfd, 0) != 0)) {
		close(op->op_pidfd); /* the pid now names another process */
		op->op_pidfd = -1;
	}
	if (op->op_pidfd < 0 && op->op_kind == OP_KIND_PROCESS)
		op->op_root_gone = 1;
	for (size_t i = 0; lineage != NULL && i < json_object_array_length(lineage); i++) {
		struct json_object *le = json_object_array_get_idx(lineage, i);
		struct lineage_entry *ent = op_lin_add(op, (pid_t)schema_int(le, "pid", 0),
		    (pid_t)schema_int(le, "ppid", 0), (uint64_t)schema_int(le, "start_time_ticks", 0));
		if (ent == NULL)
			break;
		ent->le_gone = schema_child(le, "exited_at") != NULL;
		const char *x = schema_string(le, "executable");
		util_strlcpy(ent->le_exe, x ? x : "", sizeof(ent->le_exe));
	}
	oprecord_update(dirfd, id, oprecord_mut_instance, bd->bd_instance, NULL, NULL);
	TAILQ_INSERT_TAIL(&bd->bd_ops, op, op_entry);
	/* The network boundary first: a new generation from the record, expired leases gone. */
	char *ncause = NULL;
	if (netop_restore(op, &ncause) == NULL && ncause != NULL) {
		log_warnx("%s: network boundary not restored: %s", id, ncause);
		free(ncause);
		operation_violation(op, "network_restore_failed");
		operation_finish(op, OPSTATE_ENDED, "network_restore_failed");
		return op;
	}
	if (op->op_root_gone) {
		/* The root ended while no supervisor watched: clean up what is left. */
		operation_finish(op, OPSTATE_LOST, "root_exited_while_supervisor_down");
		return op;
	}
	if (op_arm(op) != 0) {
		operation_finish(op, OPSTATE_ENDED, "supervision_failed_after_restart");
		return op;
	}
	log_info("%s: adopted running operation (root %d)", id, (int)op->op_root_pid);
	return op;
}
