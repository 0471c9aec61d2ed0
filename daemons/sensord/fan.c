/*
 * fan.c: the fanotify sensor of gensee-sensord.
 *
 * One engine marks the union of every operation's sensitive paths; each
 * permission event is judged by the rules of the operation the opener
 * belongs to. Processes outside every operation of this instance are
 * allowed at once (boundaryd holds each operation's start until its config
 * is acknowledged, so an unknown operation is another instance's).
 *
 * This thread answers the kernel: it must never open a regular file on a
 * marked filesystem itself (only /proc is read here).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "cgroup.h"
#include "fanotify.h"
#include "fanpolicy.h"
#include "fdpass.h"
#include "sensorfd.h"
#include "log.h"
#include "proc.h"
#include "schema.h"
#include "sensord.h"
#include "util.h"

static struct fan_engine *fan_engine;
static struct event *fan_ev;
static struct fanpolicy *fan_union;	/* what the engine's marks were planned from */
/*
 * An adopted group (a dead sensord's, handed on by boundaryd) until the
 * registration is done: the cgroups of boundaryd's running operations,
 * whose openers are denied while their rules are not here yet.
 */
static struct json_object *fan_pending;

/* What the DECIDE phase concluded, for the ANSWERED phase of the same event. */
static struct {
	char op[OP_ID_MAX];
	const char *rule;
	const char *action;
	const char *posture;
} fan_last;

int
sensord_fan_policy(struct json_object *fan, struct fanpolicy *out, int *posture, char **cause)
{
	enum fan_posture pst;

	if (fanpolicy_from_spec(out, fan, &pst, cause) != 0)
		return -1;
	*posture = (int)pst;
	return 0;
}

/* Record one answered decision for its operation (sent in the next flush). */
static void
fan_record(const struct fan_event *ev)
{
	struct sop *o = sensord_op_find(fan_last.op);
	struct json_object *d;
	struct proc_stat st;
	char exe[256], ts[40];

	if (o == NULL || ev->ev_final == NULL || !ev->ev_final->vd_record)
		return;
	if (json_object_array_length(o->so_files) >= SENSORD_BACKLOG_MAX) {
		/* Bounded backlog: the decision is lost, but counted and reported. */
		o->so_files_dropped++;
		return;
	}
	d = json_object_new_object();
	util_now_rfc3339(ts, sizeof(ts));
	json_object_object_add(d, "time", json_object_new_string(ts));
	json_object_object_add(d, "pid", json_object_new_int64(ev->ev_pid));
	if (proc_read_stat(ev->ev_pid, &st) == 0)
		json_object_object_add(d, "start_time_ticks",
		    json_object_new_int64((int64_t)st.ps_start_ticks));
	if (proc_read_exe(ev->ev_pid, exe, sizeof(exe)) == 0)
		json_object_object_add(d, "executable", json_object_new_string(exe));
	json_object_object_add(d, "path", json_object_new_string(ev->ev_path ? ev->ev_path :
	    "(unresolved)"));
	json_object_object_add(d, "event", json_object_new_string(
	    ev->ev_mask & FAN_OPEN_EXEC_PERM ? "open_exec" : "open"));
	if (fan_last.rule != NULL)
		json_object_object_add(d, "rule", json_object_new_string(fan_last.rule));
	if (fan_last.action != NULL)
		json_object_object_add(d, "action", json_object_new_string(fan_last.action));
	if (fan_last.posture != NULL)
		json_object_object_add(d, "posture", json_object_new_string(fan_last.posture));
	json_object_object_add(d, "decision", json_object_new_string(
	    ev->ev_final->vd_response == FAN_ALLOW ? "allow" : "deny"));
	json_object_object_add(d, "reason", json_object_new_string(ev->ev_final->vd_reason ?
	    ev->ev_final->vd_reason : "unknown"));
	json_object_array_add(o->so_files, d);
}

/* Is pid in (or below) one of the pending cgroups? */
static int
fan_pending_holds(pid_t pid)
{
	char cg[256];

	if (cgroup_of_pid(pid, cg, sizeof(cg)) != 0)
		return 1; /* unknown: as if it were */
	for (size_t i = 0; i < json_object_array_length(fan_pending); i++) {
		const char *p = json_object_get_string(json_object_array_get_idx(fan_pending, i));
		size_t n = p != NULL ? strlen(p) : 0;
		if (n > 0 && strncmp(cg, p, n) == 0 && (cg[n] == '\0' || cg[n] == '/'))
			return 1;
	}
	return 0;
}

static int
fan_decide(const struct fan_event *ev, struct fan_verdict *vd, void *arg)
{
	const struct fan_rule *hit = NULL;
	struct fan_decision d;
	struct sop *o;

	(void)arg;
	if (ev->ev_phase == FAN_PHASE_ANSWERED) {
		fan_record(ev);
		return 0;
	}
	if (ev->ev_phase == FAN_PHASE_LOST) {
		log_warnx("fanotify coverage lost: %s", ev->ev_lost);
		sensord_fan_loss(ev->ev_lost);
		return 0;
	}
	memset(&fan_last, 0, sizeof(fan_last));
	o = sensord_op_of_pid(ev->ev_pid);
	if (o == NULL && fan_pending != NULL && fan_pending_holds(ev->ev_pid)) {
		/* The group's marks are an operation's whose rules have not come yet. */
		vd->vd_response = FAN_DENY;
		vd->vd_reason = FANR_ADOPTING;
		vd->vd_record = 0;
		vd->vd_nocache = 1;
		return 0;
	}
	if (o == NULL) {
		/*
		 * Not one of our operations. boundaryd holds every operation's
		 * start until we acknowledged its config, so a gensee cgroup we
		 * do not know belongs to another instance (another state root):
		 * its own sensor decides for it; denying here would break it.
		 */
		vd->vd_nocache = sensord_pid_in_gensee(ev->ev_pid);
		vd->vd_response = FAN_ALLOW;
		vd->vd_reason = FANR_OUTSIDE_OPERATION;
		vd->vd_record = 0;
		return 0;
	}
	util_strlcpy(fan_last.op, o->so_id, sizeof(fan_last.op));
	if (o->so_fan == NULL && o->so_fan_broken) {
		/* Its rules were refused: nothing it opens on a mark is judged allowed. */
		vd->vd_response = FAN_DENY;
		vd->vd_reason = FANR_DECISION_ERROR;
		vd->vd_record = 1;
		vd->vd_nocache = 1;
		return 0;
	}
	if (o->so_fan == NULL) {
		vd->vd_response = FAN_ALLOW;
		vd->vd_reason = "fanotify_off";
		vd->vd_record = 0;
		return 0;
	}
	if (ev->ev_path == NULL) {
		vd->vd_response = FAN_DENY;
		vd->vd_reason = FANR_PATH_UNRESOLVED;
		vd->vd_record = 1;
		vd->vd_nocache = 1;
		return 0;
	}
	int m = fanpolicy_match(o->so_fan, ev->ev_path, &hit);
	/*
	 * A marked file reached by another name (a hard link, or renamed out
	 * of its root) is the file it was marked as. The engine's rule comes
	 * from the union of every operation's policy, whose first match may be
	 * another operation's milder action; so this operation's own policy
	 * judges the name the file was marked under.
	 */
	if (m == 0 && ev->ev_by_inode && ev->ev_inode_path != NULL)
		m = fanpolicy_match(o->so_fan, ev->ev_inode_path, &hit);
	if (m < 0) {
		vd->vd_response = FAN_DENY;
		vd->vd_reason = FANR_PATH_UNRESOLVED;
		vd->vd_record = 1;
		vd->vd_nocache = 1;
		return 0;
	}
	if (m == 0) {
		vd->vd_response = FAN_ALLOW;
		vd->vd_reason = FANR_NO_RULE;
		vd->vd_record = 0;
		return 0;
	}
	fanpolicy_decide((enum fan_posture)o->so_posture, hit->fr_action, 1, &d);
	vd->vd_response = d.dc_response;
	vd->vd_reason = d.dc_reason;
	vd->vd_record = d.dc_record;
	vd->vd_warning = d.dc_warning;
	vd->vd_nocache = 1;
	fan_last.rule = hit->fr_pattern;
	fan_last.action = fanpolicy_action_name(hit->fr_action);
	fan_last.posture = fanpolicy_posture_name((enum fan_posture)o->so_posture);
	return 0;
}

static void
fan_cb(evutil_socket_t fd, short what, void *arg)
{
	char *cause = NULL;
	(void)fd;
	(void)what;
	(void)arg;
	if (fanotify_engine_handle(fan_engine, fan_decide, NULL, &cause) < 0) {
		log_warnx("fanotify: %s", cause);
		free(cause);
		sensord_fan_loss("read_failed");
	}
}

/* Is the fanotify engine open (can a config with rules be acknowledged at all)? */
int
sensord_fan_available(void)
{
	return fan_engine != NULL;
}

int
sensord_fan_init(char **cause)
{
	struct fan_plan plan;

	fan_union = calloc(1, sizeof(*fan_union));
	if (fan_union == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	fanpolicy_init(fan_union);
	if (fanpolicy_plan(fan_union, &plan, cause) != 0)
		return -1;
	int r = fanotify_engine_open(&fan_engine, &plan, cause);
	fanpolicy_plan_free(&plan);
	if (r != 0) {
		fan_engine = NULL;
		return -1;
	}
	fan_ev = event_new(sensord_base(), fanotify_engine_fd(fan_engine), EV_READ | EV_PERSIST,
	    fan_cb, NULL);
	if (fan_ev == NULL || event_add(fan_ev, NULL) != 0) {
		util_cause(cause, "cannot watch the fanotify engine");
		return -1;
	}
	return 0;
}

/*
 * Before registering on a (new) channel: trade fanotify groups with
 * boundaryd over sensorfd.sock (dirfd: the checked runtime directory).
 * boundaryd keeps a duplicate of ours, so that our death does not take
 * the marks with it; or, when it holds the group of a sensord that died,
 * hands that over, and we take it in place of our own unmarked one. See
 * daemons/boundaryd/fanhold.c. -1 (with *cause) leaves the channel down.
 */
int
sensord_fan_exchange(int dirfd, char **cause)
{
	struct sockaddr_un sun;
	struct timeval tv = { 2, 0 };
	struct sensorfd_reply rep = { 0 };
	struct rlimit rl;
	char buf[SENSORFD_MSG_MAX], *req;
	int sock, fd = -1, rv = -1, sent;
	ssize_t n;

	if (fan_engine == NULL)
		return 0;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "/proc/self/fd/%d/" SENSORFD_SOCK, dirfd);
	sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (sock < 0 || setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    connect(sock, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		util_cause(cause, SENSORFD_SOCK ": %s", strerror(errno));
		goto out;
	}
	/* The sweep after our death answers every number our table may hold. */
	req = sensorfd_request(getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (int64_t)rl.rlim_cur :
	    SENSORFD_NOFILE_DEFAULT);
	sent = req != NULL ? fdpass_send(sock, req, strlen(req),
	    fanotify_engine_group_fd(fan_engine)) : -1;
	free(req);
	if (sent != 0 || (n = fdpass_recv(sock, buf, sizeof(buf), &fd)) <= 0) {
		util_cause(cause, SENSORFD_SOCK ": %s", strerror(errno));
		goto out;
	}
	if (sensorfd_parse_reply(buf, (size_t)n, &rep, cause) != 0)
		goto out;
	if (rep.sr_error[0] != '\0') {
		util_cause(cause, SENSORFD_SOCK ": %s: %s", rep.sr_error, rep.sr_message);
		goto out;
	}
	if (!rep.sr_adopt) {
		rv = 0;
		goto out;
	}
	if (fd < 0) {
		util_cause(cause, SENSORFD_SOCK ": adopt without a group");
		goto out;
	}
	if (fanotify_engine_adopt(fan_engine, fd, cause) != 0)
		goto out;
	fd = -1;
	json_object_put(fan_pending);
	fan_pending = rep.sr_cgroups;
	rep.sr_cgroups = NULL;
	log_info("fanotify: took over the group of the previous sensord (%zu operation(s) "
	    "held until their rules come)", json_object_array_length(fan_pending));
	rv = 0;
out:
	if (fd >= 0)
		close(fd);
	if (sock >= 0)
		close(sock);
	json_object_put(rep.sr_cgroups);
	return rv;
}

/*
 * Registered: every running operation's rules are here. An adopted group
 * is planned from them now, and loses the marks the previous sensord left
 * that no operation needs any more.
 */
void
sensord_fan_registered(void)
{
	char *cause = NULL;

	if (fan_pending == NULL || fan_engine == NULL)
		return;
	if (sensord_fan_reconfigure(&cause) != 0 ||
	    fanotify_engine_retire_stale(fan_engine, &cause) != 0) {
		log_warnx("fanotify: adopted group: %s", cause);
		free(cause);
		return; /* still pending: what is not ours keeps being allowed */
	}
	json_object_put(fan_pending);
	fan_pending = NULL;
}

/*
 * Re-plan the marks from every operation's rules. The engine swaps marks
 * without a gap; the previous union stays alive until the swap is done.
 * Returns 0 once the new marks are in place, -1 (with *cause) when they
 * are not: a config is acknowledged only after this succeeded.
 */
int
sensord_fan_reconfigure(char **cause)
{
	struct fanpolicy *u;
	struct fan_plan plan;

	if (fan_engine == NULL)
		return 0;
	u = calloc(1, sizeof(*u));
	if (u == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	fanpolicy_init(u);
	for (size_t i = 0; i < sensord_nops(); i++) {
		struct sop *o = sensord_op_at(i);
		if (o->so_fan_json != NULL && fanpolicy_add_spec(u, o->so_fan_json, cause) != 0) {
			log_warnx("%s: fanotify rules: %s", o->so_id, *cause);
			free(*cause);
			*cause = NULL;
		}
	}
	if (fanpolicy_resolve(u, cause) != 0 || fanpolicy_plan(u, &plan, cause) != 0) {
		log_warnx("fanotify plan: %s", *cause);
		fanpolicy_free(u);
		free(u);
		return -1;
	}
	if (fanotify_engine_set_plan(fan_engine, &plan, cause) != 0) {
		log_warnx("fanotify marks: %s", *cause);
		fanpolicy_plan_free(&plan);
		fanpolicy_free(u);
		free(u);
		sensord_fan_loss("marks_failed");
		return -1;
	}
	const struct fan_warnings *w = fanotify_engine_warnings(fan_engine);
	for (size_t i = 0; w != NULL && i < w->w_n; i++)
		log_info("fanotify: %s", w->w_v[i]);
	fanpolicy_plan_free(&plan);
	fanpolicy_free(fan_union);
	free(fan_union);
	fan_union = u;
	return 0;
}

void
sensord_fan_shutdown(void)
{
	if (fan_ev != NULL)
		event_free(fan_ev);
	if (fan_engine != NULL)
		fanotify_engine_close(fan_engine);
	if (fan_union != NULL) {
		fanpolicy_free(fan_union);
		free(fan_union);
	}
	json_object_put(fan_pending);
	fan_ev = NULL;
	fan_engine = NULL;
	fan_union = NULL;
	fan_pending = NULL;
}
