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
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "boundaryd.h"
#include "log.h"
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

/* Push one config change to sensord; 0 when it was queued. */
int
sensor_push(struct boundaryd *bd, struct operation *op, const char *action)
{
	struct json_object *p;

	if (bd->bd_sensor == NULL)
		return -1;
	p = sensor_op_config(op);
	json_object_object_add(p, "action", json_object_new_string(action));
	control_send(bd->bd_sensor, proto_event_new("operation.sensor_config", p));
	return 0;
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
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		const char *s = json_object_get_string(json_object_array_get_idx(arr, i));
		if (strcmp(s, "nft_trace") == 0)
			bd->bd_sensor_caps |= SENSOR_NFT_TRACE;
		else if (strcmp(s, "proc_connector") == 0)
			bd->bd_sensor_caps |= SENSOR_PROC_CONNECTOR;
		else if (strcmp(s, "fanotify") == 0)
			bd->bd_sensor_caps |= SENSOR_FANOTIFY;
	}
	log_info("sensor registered (pid %d):%s%s%s", (int)control_peer_pid(c),
	    bd->bd_sensor_caps & SENSOR_NFT_TRACE ? " nft_trace" : "",
	    bd->bd_sensor_caps & SENSOR_PROC_CONNECTOR ? " proc_connector" : "",
	    bd->bd_sensor_caps & SENSOR_FANOTIFY ? " fanotify" : "");
	ops = json_object_new_array();
	TAILQ_FOREACH(op, &bd->bd_ops, op_entry)
		if (op->op_phase == OP_RUNNING)
			json_object_array_add(ops, sensor_op_config(op));
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "operations", ops);
	json_object_object_add(r->or_result, "instance", json_object_new_string(bd->bd_instance));
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
	log_warnx("sensor channel closed: coverage lost for running operations");
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
	    strcmp(schema_string(params, "action"), "remove") == 0)
		op->op_sensor_flushed = 1; /* its last lineage and decisions are in */
	else
		operation_create_resolve(op, 1);
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

void
file_decision(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	struct operation *op = operation_find(bd, schema_string(params, "operation_id"));
	struct json_object *arr = schema_child(params, "decisions");
	struct schema_error err;
	int n = 0;

	(void)p;
	if (op == NULL) {
		reply_error(r, PE_NOT_FOUND, "no such operation");
		return;
	}
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *d = json_object_array_get_idx(arr, i), *line;
		char *cause = NULL;
		if (schema_validate(d, decision_fields, nitems(decision_fields), &err) != 0) {
			log_warnx("%s: file decision refused: %s", op->op_id, err.se_message);
			continue;
		}
		line = json_object_get(d);
		json_object_object_add(line, "kind", json_object_new_string("file_decision"));
		json_object_object_add(line, "operation_id", json_object_new_string(op->op_id));
		if (record_append_jsonl(op->op_dirfd, "files.jsonl", line, &cause) != 0) {
			log_warnx("%s: files.jsonl: %s", op->op_id, cause);
			free(cause);
			operation_violation(op, "evidence_append_failed");
		} else {
			operation_count_effect(op);
			n++;
		}
		json_object_put(line);
	}
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "recorded", json_object_new_int(n));
}
