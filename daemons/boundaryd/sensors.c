/*
 * sensors.c: boundaryd's side of the sensor channel (gensee-sensord).
 *
 * Trust model: sensord is root and runs on boundary.sock, so its reports
 * are believed as observations, but it holds no policy authority: the
 * operation configs it applies come from here, a fault it derives from a
 * trace goes through the same decision as any other fault, and whatever
 * it reports is checked against the operation it names. Losing the sensor
 * (its connection closes, or it reports overruns) is recorded as a
 * violation of every affected operation; enforcement keeps denying.
 *
 * fanotify coverage fails closed: the kernel drops a group's marks when
 * sensord dies, so from then on nothing judges an operation's opens. Every
 * running operation that asked for fanotify is frozen (cgroup.freeze)
 * until a sensord has acknowledged its config again, or ended, per its
 * "on_sensor_loss". The channel has no idle timeout; heartbeats both ways
 * tell a hung peer from a quiet one. What boundaryd relays to sensord is
 * bounded by sensord's frame limit, so no user request can make it send a
 * frame sensord must refuse.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "boundaryd.h"
#include "fanpolicy.h"
#include "frame.h"
#include "log.h"
#include "ocsf.h"
#include "oprecord.h"
#include "proc.h"
#include "record.h"
#include "util.h"

/* What sensord needs to know about one operation. */
struct json_object *
sensor_op_config(struct operation *op)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "operation_id", json_object_new_string(op->op_id));
	json_object_object_add(o, "cgroup", op->op_cg_valid ?
	    json_object_new_string(op->op_cg.cg_rel) : NULL);
	json_object_object_add(o, "cgroup_id", json_object_new_int64((int64_t)op->op_cg.cg_id));
	json_object_object_add(o, "root_pid", json_object_new_int64(op->op_root_pid));
	json_object_object_add(o, "table", op->op_net != NULL ?
	    json_object_new_string(op->op_net->no_table) : NULL);
	json_object_object_add(o, "fanotify", json_object_get(op->op_fanotify));
	return o;
}

/*
 * Push one config change to sensord; 0 when it was queued. A config that
 * would not fit in one of sensord's frames is not sent (-1): sensord would
 * have to refuse it, and the operation must not run as if it had.
 */
int
sensor_push(struct boundaryd *bd, struct operation *op, const char *action)
{
	struct json_object *p, *msg;
	int rv;

	if (bd->bd_sensor == NULL)
		return -1;
	p = sensor_op_config(op);
	json_object_object_add(p, "action", json_object_new_string(action));
	msg = proto_event_new("operation.sensor_config", p);
	rv = control_send_max(bd->bd_sensor, msg, FRAME_MAX_DEFAULT);
	if (rv != 0)
		log_warnx("%s: sensor config not sent: over sensord's frame limit", op->op_id);
	return rv;
}

/* The on_sensor_loss of an operation's fanotify section: 1 end, 0 freeze. */
static int
sensor_loss_ends(struct operation *op)
{
	const char *s = schema_string(op->op_fanotify, "on_sensor_loss");
	return s != NULL && strcmp(s, "end") == 0;
}

/* One coverage change in STATE/operations/ID/sensors.jsonl (the timeline reads it). */
static void
sensor_coverage_event(struct operation *op, const char *kind, const char *disposition,
    const char *reason)
{
	struct json_object *e = json_object_new_object();
	char ts[40], *cause = NULL;

	util_now_rfc3339(ts, sizeof(ts));
	json_object_object_add(e, "time", json_object_new_string(ts));
	json_object_object_add(e, "kind", json_object_new_string(kind));
	json_object_object_add(e, "operation_id", json_object_new_string(op->op_id));
	json_object_object_add(e, "sensor", json_object_new_string("fanotify"));
	json_object_object_add(e, "disposition", json_object_new_string(disposition));
	json_object_object_add(e, "reason", json_object_new_string(reason));
	if (record_append_jsonl(op->op_dirfd, "sensors.jsonl", e, &cause) != 0) {
		log_warnx("%s: sensors.jsonl: %s", op->op_id, cause);
		free(cause);
	}
	ocsf_emit("sensor", e);
	json_object_put(e);
}

/* The record's "sensor_coverage" portion. */
struct sensor_cov_arg {
	const char *sc_state;	/* covered, frozen, ended */
	const char *sc_reason;
	int sc_lost;		/* 1: a loss, 0: a restore */
};

static int
sensor_mut_coverage(struct json_object *rec, void *arg, char **cause)
{
	struct sensor_cov_arg *a = arg;
	struct json_object *c = schema_child(rec, "sensor_coverage");
	const char *pol;
	char ts[40];

	(void)cause;
	if (c == NULL) {
		c = json_object_new_object();
		json_object_object_add(rec, "sensor_coverage", c);
	}
	pol = schema_string(schema_child(rec, "fanotify"), "on_sensor_loss");
	util_now_rfc3339(ts, sizeof(ts));
	json_object_object_add(c, "on_sensor_loss", json_object_new_string(pol ? pol : "freeze"));
	json_object_object_add(c, "state", json_object_new_string(a->sc_state));
	json_object_object_add(c, "reason", json_object_new_string(a->sc_reason));
	if (a->sc_lost) {
		json_object_object_add(c, "losses",
		    json_object_new_int64(schema_int(c, "losses", 0) + 1));
		json_object_object_add(c, "lost_at", json_object_new_string(ts));
	} else {
		json_object_object_add(c, "restored_at", json_object_new_string(ts));
	}
	return 0;
}

static void
sensor_coverage_record(struct operation *op, const char *state, const char *reason, int lost)
{
	struct sensor_cov_arg a = { state, reason, lost };
	char *cause = NULL;

	if (oprecord_update(op->op_dirfd, op->op_id, sensor_mut_coverage, &a, NULL, &cause) != 0) {
		log_warnx("%s: %s", op->op_id, cause);
		free(cause);
	}
}

/*
 * fanotify coverage of a running operation is gone (the channel closed,
 * missed its heartbeats, or a restarted boundaryd has not heard from a
 * sensord yet). Its opens would now go unjudged: stop the tree, or end
 * it, before it can read what its rules protect.
 */
void
sensor_coverage_lost(struct operation *op, const char *reason)
{
	char *cause = NULL;

	if (op->op_phase != OP_RUNNING || op->op_kind != OP_KIND_PROCESS ||
	    op->op_fanotify == NULL || op->op_cov_lost)
		return;
	op->op_cov_lost = 1;
	/* The freeze first: every record write before it is time the tree runs unguarded. */
	if (!sensor_loss_ends(op) && op->op_cg_valid &&
	    cgroup_freeze(&op->op_cg, 1, &cause) == 0) {
		op->op_frozen = 1;
		operation_sensor_state(op, "fanotify", "lost");
		log_warnx("%s: fanotify coverage lost (%s): frozen until sensord confirms its "
		    "rules again", op->op_id, reason);
		sensor_coverage_record(op, "frozen", reason, 1);
		sensor_coverage_event(op, "coverage_lost", "frozen", reason);
		return;
	}
	if (cause != NULL) {
		/* A tree that cannot be stopped is ended: never left running unguarded. */
		log_warnx("%s: cannot freeze: %s; ending it", op->op_id, cause);
		free(cause);
	}
	operation_sensor_state(op, "fanotify", "lost");
	log_warnx("%s: fanotify coverage lost (%s): ending the operation", op->op_id, reason);
	sensor_coverage_record(op, "ended", reason, 1);
	sensor_coverage_event(op, "coverage_lost", "ended", reason);
	operation_finish(op, OPSTATE_ENDED, "sensor_lost");
}

/* A sensord acknowledged the operation's config (its marks are in place): resume. */
void
sensor_coverage_restored(struct operation *op)
{
	char *cause = NULL;

	if (!op->op_cov_lost || op->op_phase != OP_RUNNING)
		return;
	if (op->op_frozen && cgroup_freeze(&op->op_cg, 0, &cause) != 0) {
		log_warnx("%s: cannot thaw: %s", op->op_id, cause);
		free(cause);
		return;
	}
	op->op_frozen = 0;
	op->op_cov_lost = 0;
	operation_sensor_state(op, "fanotify", "active");
	sensor_coverage_record(op, "covered", "sensor_confirmed", 0);
	sensor_coverage_event(op, "coverage_restored", "thawed", "sensor_confirmed");
	log_info("%s: fanotify coverage restored: thawed", op->op_id);
}

/* Send a heartbeat; give the channel up when sensord missed too many. */
static void
sensor_heartbeat_cb(evutil_socket_t fd, short what, void *arg)
{
	struct boundaryd *bd = arg;

	(void)fd;
	(void)what;
	if (bd->bd_sensor == NULL)
		return;
	if (util_monotonic_ms() - bd->bd_sensor_seen_ms >
	    (int64_t)SENSOR_HEARTBEAT_MISSES * bd->bd_sensor_hb_ms) {
		log_warnx("sensor channel: no heartbeat for %d intervals; closing it",
		    SENSOR_HEARTBEAT_MISSES);
		control_drop(bd->bd_sensor); /* -> sensor_conn_closed */
		return;
	}
	control_send(bd->bd_sensor, proto_event_new("sensor.heartbeat", json_object_new_object()));
}

void
sensor_heartbeat(struct boundaryd *bd, struct conn *c, struct op_reply *r)
{
	if (bd->bd_sensor == c)
		bd->bd_sensor_seen_ms = util_monotonic_ms();
	r->or_result = json_object_new_object();
}

/*
 * Trust model: the section comes from any local user and is relayed to
 * sensord, whose marks act on the whole host: fanpolicy_scope_section()
 * bounds it and keeps a non-root user's rules under their own home and
 * workspace (gensee-tcloned applies the same on behalf of its users).
 */
int
sensor_fanotify_scope(struct boundaryd *bd, const struct peer *p, struct json_object *fan,
    char **cause)
{
	(void)bd;
	return fanpolicy_scope_section(p->pr_uid, fan, SENSOR_FANOTIFY_MAX, cause);
}

void
sensor_register(struct boundaryd *bd, struct conn *c, const struct peer *p,
    struct json_object *params, struct op_reply *r)
{
	struct json_object *arr = schema_child(params, "sensors"), *ops;
	struct operation *op;

	(void)p;
	if (bd->bd_sensor != NULL && bd->bd_sensor != c) {
		/* One sensor channel: a second one could split or hide coverage. */
		reply_error(r, PE_CONFLICT, "a sensor is already registered");
		return;
	}
	bd->bd_sensor = c;
	bd->bd_sensor_caps = 0;
	bd->bd_sensor_seen_ms = util_monotonic_ms();
	control_keepalive(c); /* heartbeats instead of the idle timeout */
	if (bd->bd_sensor_hb_ev == NULL) {
		struct timeval tv = { bd->bd_sensor_hb_ms / 1000, (bd->bd_sensor_hb_ms % 1000) * 1000 };
		bd->bd_sensor_hb_ev = event_new(bd->bd_base, -1, EV_PERSIST, sensor_heartbeat_cb, bd);
		if (bd->bd_sensor_hb_ev == NULL || event_add(bd->bd_sensor_hb_ev, &tv) != 0)
			log_warnx("sensor channel: cannot arm the heartbeat");
	}
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		const char *s = json_object_get_string(json_object_array_get_idx(arr, i));
		if (strcmp(s, "nft_trace") == 0)
			bd->bd_sensor_caps |= SENSOR_NFT_TRACE;
		else if (strcmp(s, "proc_connector") == 0)
			bd->bd_sensor_caps |= SENSOR_PROC_CONNECTOR;
		else if (strcmp(s, "fanotify") == 0)
			bd->bd_sensor_caps |= SENSOR_FANOTIFY;
		else if (strcmp(s, "landlock_audit") == 0)
			bd->bd_sensor_caps |= SENSOR_LANDLOCK_AUDIT;
	}
	log_info("sensor registered (pid %d):%s%s%s%s", (int)control_peer_pid(c),
	    bd->bd_sensor_caps & SENSOR_NFT_TRACE ? " nft_trace" : "",
	    bd->bd_sensor_caps & SENSOR_PROC_CONNECTOR ? " proc_connector" : "",
	    bd->bd_sensor_caps & SENSOR_FANOTIFY ? " fanotify" : "",
	    bd->bd_sensor_caps & SENSOR_LANDLOCK_AUDIT ? " landlock_audit" : "");
	/*
	 * Each running operation's config goes as its own event (each within
	 * the frame limit), ahead of this reply; the reply names them all, so
	 * a reconnecting sensord drops what it still holds of any other.
	 */
	ops = json_object_new_array();
	TAILQ_FOREACH(op, &bd->bd_ops, op_entry) {
		if (op->op_phase != OP_RUNNING)
			continue;
		if (sensor_push(bd, op, "add") == 0)
			op->op_sensor_pushed = 1;
		json_object_array_add(ops, json_object_new_string(op->op_id));
	}
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "operations", ops);
	json_object_object_add(r->or_result, "instance", json_object_new_string(bd->bd_instance));
	json_object_object_add(r->or_result, "heartbeat_ms",
	    json_object_new_int(bd->bd_sensor_hb_ms));
}

/* The sensor connection closed: every running operation loses coverage. */
void
sensor_conn_closed(struct boundaryd *bd, struct conn *c)
{
	struct operation *op;

	if (bd->bd_sensor != c)
		return;
	bd->bd_sensor = NULL;
	bd->bd_sensor_caps = 0;
	if (bd->bd_sensor_hb_ev != NULL) {
		event_free(bd->bd_sensor_hb_ev);
		bd->bd_sensor_hb_ev = NULL;
	}
	log_warnx("sensor channel closed: coverage lost for running operations");
	/*
	 * Stop the fanotify trees before anything else. At our own shutdown
	 * sensord keeps its marks; the next instance freezes at adoption
	 * until sensord confirms them.
	 */
	TAILQ_FOREACH(op, &bd->bd_ops, op_entry)
		if (!bd->bd_shutdown && op->op_create_result == NULL)
			sensor_coverage_lost(op, "sensor_channel_closed");
	TAILQ_FOREACH(op, &bd->bd_ops, op_entry) {
		if (op->op_phase == OP_RUNNING && op->op_kind == OP_KIND_PROCESS) {
			operation_violation(op, "sensor_exit");
			operation_sensor_state(op, "all", "lost");
		}
		operation_create_resolve(op, 0);
	}
}

void
sensor_ack(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	struct operation *op = operation_find(bd, schema_string(params, "operation_id"));

	(void)p;
	if (op == NULL) {
		reply_error(r, PE_NOT_FOUND, "no such operation");
		return;
	}
	if (schema_string(params, "action") != NULL &&
	    strcmp(schema_string(params, "action"), "remove") == 0) {
		op->op_sensor_flushed = 1; /* its last lineage and decisions are in */
	} else if (schema_string(params, "error") != NULL) {
		/* sensord refused the config: it guards nothing of this operation. */
		log_warnx("%s: sensord refused the config: %s", op->op_id,
		    schema_string(params, "error"));
		if (op->op_create_result != NULL) {
			json_object_put(op->op_create_result);
			op->op_create_result = NULL;
			if (op->op_create_timer != NULL)
				event_del(op->op_create_timer);
			if (op->op_create_conn != NULL)
				control_send(op->op_create_conn, proto_error_new(op->op_create_id,
				    PE_INVALID_PARAMS, schema_string(params, "error")));
			op->op_create_conn = NULL;
			operation_finish(op, OPSTATE_FAILED, "sensor_config_refused");
		} else if (op->op_fanotify != NULL) {
			operation_violation(op, "sensor_config_refused");
			sensor_coverage_lost(op, "sensor_config_refused");
		}
	} else {
		operation_create_resolve(op, 1);
		sensor_coverage_restored(op);
	}
	r->or_result = json_object_new_object();
}

void
sensor_loss(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	const char *sensor = schema_string(params, "sensor");
	const char *id = schema_string(params, "operation_id");
	struct operation *op;
	char what[96];

	(void)p;
	snprintf(what, sizeof(what), "sensor_loss:%s", sensor);
	log_warnx("sensor %s lost %lld event(s)%s%s", sensor,
	    (long long)schema_int(params, "count", 0), schema_string(params, "detail") ? ": " : "",
	    schema_string(params, "detail") ? schema_string(params, "detail") : "");
	/* Missing events mean missing evidence: a violation, never a silent gap. */
	TAILQ_FOREACH(op, &bd->bd_ops, op_entry) {
		if (op->op_phase != OP_RUNNING || (id != NULL && strcmp(id, op->op_id) != 0))
			continue;
		if (strcmp(sensor, "nft_trace") == 0 && op->op_net == NULL)
			continue;
		/*
		 * Landlock enforced either way: what its sensor lost is the
		 * explanation, said in the coverage map and the run's summary,
		 * not a missing effect.
		 */
		if (strcmp(sensor, "landlock_audit") == 0) {
			if (op->op_landlock)
				operation_sensor_state(op, sensor, "incomplete");
			continue;
		}
		operation_violation(op, what);
		operation_sensor_state(op, sensor, "incomplete");
	}
	r->or_result = json_object_new_object();
}

void
lineage_report(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	struct operation *op = operation_find(bd, schema_string(params, "operation_id"));
	struct json_object *ev = schema_child(params, "events");
	struct oprecord_proc *v;
	size_t n = json_object_array_length(ev), k = 0;

	(void)p;
	if (op == NULL) {
		reply_error(r, PE_NOT_FOUND, "no such operation");
		return;
	}
	v = calloc(n + 1, sizeof(*v));
	if (v == NULL) {
		reply_error(r, PE_INTERNAL, "out of memory");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(ev, i);
		const char *type = schema_string(e, "type");
		if (!json_object_is_type(e, json_type_object) || type == NULL ||
		    schema_int(e, "pid", 0) <= 0 || schema_int(e, "start_time_ticks", -1) < 0)
			continue;
		struct oprecord_proc *u = &v[k++];
		u->op_pid = (pid_t)schema_int(e, "pid", 0);
		u->op_ppid = (pid_t)schema_int(e, "ppid", 0);
		u->op_start = (uint64_t)schema_int(e, "start_time_ticks", 0);
		u->op_exe = schema_string(e, "executable");
		u->op_argv_digest = schema_string(e, "argv_digest");
		if (strcmp(type, "exit") == 0) {
			u->op_exited = 1;
			u->op_has_exit = schema_child(e, "exit_code") != NULL;
			u->op_exit_code = (int)schema_int(e, "exit_code", 0);
			u->op_exit_signal = (int)schema_int(e, "exit_signal", 0);
		}
	}
	operation_merge_lineage(op, v, k, "proc_connector");
	free(v);
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "merged", json_object_new_int((int)k));
}

static const struct schema_field decision_fields[] = {
	{ "time", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 40, 0 },
	{ "pid", SCHEMA_INT, SCHEMA_REQUIRED, 1, 4194304, 0 },
	{ "start_time_ticks", SCHEMA_INT, 0, 0, INT64_MAX, 0 },
	{ "executable", SCHEMA_STRING, 0, 0, 4096, 0 },
	{ "path", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 4096, 0 },
	{ "event", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 16, 0 },
	{ "rule", SCHEMA_STRING, 0, 0, 4096, 0 },
	{ "action", SCHEMA_STRING, 0, 0, 16, 0 },
	{ "posture", SCHEMA_STRING, 0, 0, 16, 0 },
	{ "decision", SCHEMA_STRING, SCHEMA_REQUIRED, 4, 5, 0 },
	{ "reason", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
};

static int
sensor_mut_files(struct json_object *rec, void *arg, char **cause)
{
	return oprecord_mut_counts(rec, arg, cause);
}

/* Write one decision line of op (files.jsonl, and OCSF either way): 0, or -1 when lost. */
static int
sensor_file_line(struct operation *op, struct json_object *d)
{
	struct json_object *line = json_object_get(d);
	char *cause = NULL;
	int rv = 0;

	json_object_object_add(line, "kind", json_object_new_string("file_decision"));
	json_object_object_add(line, "operation_id", json_object_new_string(op->op_id));
	if (record_append_jsonl(op->op_dirfd, "files.jsonl", line, &cause) != 0) {
		log_warnx("%s: files.jsonl: %s", op->op_id, cause);
		free(cause);
		rv = -1;
	}
	/* The decision was made either way. */
	ocsf_emit("file", line);
	json_object_put(line);
	return rv;
}

/* n decisions recorded and dropped lost for op: the counts, and a drop is a violation. */
static void
sensor_file_counts(struct boundaryd *bd, struct operation *op, int64_t n, int64_t dropped)
{
	struct oprecord_counts c = { 0 };
	char *cause = NULL;

	bd->bd_files_recorded += (uint64_t)n;
	bd->bd_files_dropped += (uint64_t)dropped;
	c.oc_effects = n;
	c.oc_files_recorded = n;
	c.oc_files_dropped = dropped;
	if ((n > 0 || dropped > 0) && oprecord_update(op->op_dirfd, op->op_id, sensor_mut_files,
	    &c, NULL, &cause) != 0) {
		log_warnx("%s: file decision counts: %s", op->op_id, cause);
		free(cause);
	}
	if (dropped > 0)
		operation_violation(op, "file_decisions_dropped");
}

/* A decision made here (the fanotify stand-in, fanhold.c), recorded like sensord's. */
void
sensor_file_record(struct boundaryd *bd, const char *op_id, struct json_object *d)
{
	struct operation *op = operation_find(bd, op_id);

	if (op == NULL) {
		bd->bd_files_dropped++;
		log_warnx("%s: a stand-in file decision for no running operation dropped", op_id);
		return;
	}
	if (sensor_file_line(op, d) == 0)
		sensor_file_counts(bd, op, 1, 0);
	else
		sensor_file_counts(bd, op, 0, 1);
}

/*
 * fanotify decisions from sensord. Every decision sensord answered ends as
 * a line of files.jsonl or in a drop count: the ones sensord could not keep
 * ("dropped", its bounded backlog), lines refused here, lines that could not
 * be written. The counts go to the record ("evidence") and system.status in
 * one record update per batch, and a drop is a violation: missing evidence
 * is never a silent gap.
 */
void
file_decision(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	struct operation *op = operation_find(bd, schema_string(params, "operation_id"));
	struct json_object *arr = schema_child(params, "decisions");
	struct schema_error err;
	int64_t n = 0, dropped = schema_int(params, "dropped", 0);
	size_t total = json_object_array_length(arr);

	(void)p;
	if (op == NULL) {
		bd->bd_files_dropped += (uint64_t)dropped + total;
		log_warnx("%s: %zu file decision(s) for no running operation dropped",
		    schema_string(params, "operation_id"), total + (size_t)dropped);
		reply_error(r, PE_NOT_FOUND, "no such operation");
		return;
	}
	for (size_t i = 0; i < total; i++) {
		struct json_object *d = json_object_array_get_idx(arr, i);
		if (schema_validate(d, decision_fields, nitems(decision_fields), &err) != 0) {
			log_warnx("%s: file decision refused: %s", op->op_id, err.se_message);
			dropped++;
		} else if (sensor_file_line(op, d) != 0) {
			dropped++;
		} else {
			n++;
		}
	}
	sensor_file_counts(bd, op, n, dropped);
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "recorded", json_object_new_int64(n));
	json_object_object_add(r->or_result, "dropped", json_object_new_int64(dropped));
}
