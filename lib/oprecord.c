/*
 * oprecord.c: operation record shape and its monotonic mutators.
 */
#include <errno.h>
#include <string.h>

#include <json-c/json.h>

#include "oprecord.h"
#include "record.h"
#include "schema.h"
#include "util.h"

static const char *const oprecord_states[] = {
	OPSTATE_STARTING, OPSTATE_RUNNING, OPSTATE_EXITED, OPSTATE_TIMED_OUT,
	OPSTATE_ENDED, OPSTATE_FAILED, OPSTATE_LOST,
};

int
oprecord_state_known(const char *state)
{
	for (size_t i = 0; i < nitems(oprecord_states); i++)
		if (strcmp(state, oprecord_states[i]) == 0)
			return 1;
	return 0;
}

int
oprecord_state_terminal(const char *state)
{
	return strcmp(state, OPSTATE_STARTING) != 0 && strcmp(state, OPSTATE_RUNNING) != 0;
}

static struct json_object *
jstr(const char *s)
{
	return s != NULL ? json_object_new_string(s) : NULL;
}

static void
now_str(struct json_object *o, const char *key)
{
	char ts[40];
	util_now_rfc3339(ts, sizeof(ts));
	json_object_object_add(o, key, json_object_new_string(ts));
}

struct json_object *
oprecord_new(const struct oprecord_init *in)
{
	struct json_object *r = json_object_new_object();
	struct json_object *src = json_object_new_object();
	struct json_object *launcher = json_object_new_object();
	struct json_object *life = json_object_new_object();
	struct json_object *root = json_object_new_object();
	struct json_object *cg = json_object_new_object();
	struct json_object *cleanup = json_object_new_object();
	struct json_object *env = json_object_new_object();
	struct json_object *counts = json_object_new_object();
	struct json_object *net = json_object_new_object();
	struct json_object *rh = json_object_new_object();
	struct json_object *sup = json_object_new_object();

	json_object_object_add(r, "schema_version", json_object_new_int(OPRECORD_SCHEMA_VERSION));
	json_object_object_add(r, "operation_id", json_object_new_string(in->oi_id));
	json_object_object_add(r, "revision", json_object_new_int64(1));

	json_object_object_add(src, "run", json_object_new_string(in->oi_source_run));
	json_object_object_add(src, "action_class", json_object_new_string(in->oi_action_class));
	json_object_object_add(src, "uid", json_object_new_int64(in->oi_uid));
	json_object_object_add(src, "gid", json_object_new_int64(in->oi_gid));
	json_object_object_add(launcher, "pid", json_object_new_int64(in->oi_launcher_pid));
	json_object_object_add(launcher, "start_time_ticks",
	    json_object_new_int64((int64_t)in->oi_launcher_start));
	json_object_object_add(src, "launcher", launcher);
	json_object_object_add(r, "source", src);

	json_object_object_add(life, "state", json_object_new_string(OPSTATE_STARTING));
	now_str(life, "created_at");
	json_object_object_add(life, "started_at", NULL);
	json_object_object_add(life, "ended_at", NULL);
	json_object_object_add(life, "timeout_seconds",
	    in->oi_timeout_seconds > 0 ? json_object_new_int64(in->oi_timeout_seconds) : NULL);
	json_object_object_add(life, "kill_grace_seconds",
	    json_object_new_int64(in->oi_kill_grace_seconds));
	json_object_object_add(life, "deadline_unix_ms",
	    in->oi_timeout_seconds > 0 ?
		json_object_new_int64(util_now_ms() + in->oi_timeout_seconds * 1000) : NULL);
	json_object_object_add(life, "end_reason", NULL);
	json_object_object_add(life, "exit", NULL);
	json_object_object_add(r, "lifecycle", life);

	json_object_object_add(root, "pid", json_object_new_int64(in->oi_root_pid));
	json_object_object_add(root, "start_time_ticks",
	    json_object_new_int64((int64_t)in->oi_root_start));
	json_object_object_add(root, "executable", jstr(in->oi_root_exe));
	json_object_object_add(root, "argv_digest", jstr(in->oi_root_argv_digest));
	if (in->oi_command != NULL)
		json_object_object_add(root, "command", jstr(in->oi_command));
	json_object_object_add(r, "root_process", root);

	json_object_object_add(r, "lineage", json_object_new_array());
	json_object_object_add(r, "lineage_source", json_object_new_string("proc_poll"));
	json_object_object_add(r, "lineage_truncated", json_object_new_int(0));

	json_object_object_add(cg, "path", jstr(in->oi_cgroup_path));
	json_object_object_add(cg, "id", json_object_new_int64((int64_t)in->oi_cgroup_id));
	json_object_object_add(cg, "owned", json_object_new_boolean(1));
	json_object_object_add(cg, "attachment", json_object_new_string("pending"));
	json_object_object_add(cleanup, "state", json_object_new_string("pending"));
	json_object_object_add(cleanup, "detail", NULL);
	json_object_object_add(cleanup, "killed_leftovers", json_object_new_int(0));
	json_object_object_add(cg, "cleanup", cleanup);
	json_object_object_add(r, "cgroup", cg);

	json_object_object_add(env, "generation", json_object_new_int64(0));
	json_object_object_add(env, "grants", json_object_new_array());
	json_object_object_add(r, "envelope", env);
	json_object_object_add(r, "mediation_boundaries", json_object_new_array());
	json_object_object_add(r, "leases", json_object_new_array());

	json_object_object_add(counts, "effects", json_object_new_int64(0));
	json_object_object_add(counts, "violations", json_object_new_int64(0));
	json_object_object_add(net, "allowed_packets", json_object_new_int64(0));
	json_object_object_add(net, "allowed_bytes", json_object_new_int64(0));
	json_object_object_add(net, "blocked_packets", json_object_new_int64(0));
	json_object_object_add(net, "blocked_bytes", json_object_new_int64(0));
	json_object_object_add(counts, "network", net);
	json_object_object_add(r, "counts", counts);

	json_object_object_add(rh, "status", json_object_new_string("ok"));
	json_object_object_add(rh, "entries", json_object_new_array());
	json_object_object_add(r, "recovery_health", rh);

	json_object_object_add(sup, "instance", jstr(in->oi_instance));
	json_object_object_add(sup, "adopted", json_object_new_boolean(0));
	json_object_object_add(r, "supervisor", sup);
	return r;
}

/* Require obj[key] to exist with the given json type. */
static struct json_object *
need(struct json_object *obj, const char *key, json_type t, const char *where, char **cause)
{
	struct json_object *v;
	if (obj == NULL || !json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, t)) {
		util_cause(cause, "record invalid: %s.%s missing or of the wrong type", where, key);
		return NULL;
	}
	return v;
}

int
oprecord_validate(struct json_object *rec, const char *expected_id, char **cause)
{
	struct json_object *v, *life, *counts, *net, *root, *cg, *rh;

	if (!json_object_is_type(rec, json_type_object)) {
		util_cause(cause, "record invalid: not an object");
		return -1;
	}
	if ((v = need(rec, "schema_version", json_type_int, "record", cause)) == NULL)
		return -1;
	if (json_object_get_int64(v) != OPRECORD_SCHEMA_VERSION) {
		util_cause(cause, "record invalid: schema_version %lld",
		    (long long)json_object_get_int64(v));
		return -1;
	}
	if ((v = need(rec, "operation_id", json_type_string, "record", cause)) == NULL)
		return -1;
	/* Identity: the file must describe the operation we asked for. */
	if (expected_id != NULL && strcmp(json_object_get_string(v), expected_id) != 0) {
		util_cause(cause, "record identity mismatch: holds %s, expected %s",
		    json_object_get_string(v), expected_id);
		return -1;
	}
	if (need(rec, "revision", json_type_int, "record", cause) == NULL ||
	    (life = need(rec, "lifecycle", json_type_object, "record", cause)) == NULL ||
	    (v = need(life, "state", json_type_string, "lifecycle", cause)) == NULL)
		return -1;
	if (!oprecord_state_known(json_object_get_string(v))) {
		util_cause(cause, "record invalid: unknown state %s", json_object_get_string(v));
		return -1;
	}
	if ((root = need(rec, "root_process", json_type_object, "record", cause)) == NULL ||
	    need(root, "pid", json_type_int, "root_process", cause) == NULL ||
	    need(root, "start_time_ticks", json_type_int, "root_process", cause) == NULL ||
	    need(rec, "source", json_type_object, "record", cause) == NULL ||
	    need(rec, "lineage", json_type_array, "record", cause) == NULL ||
	    (cg = need(rec, "cgroup", json_type_object, "record", cause)) == NULL ||
	    need(cg, "cleanup", json_type_object, "cgroup", cause) == NULL ||
	    need(rec, "envelope", json_type_object, "record", cause) == NULL ||
	    need(rec, "leases", json_type_array, "record", cause) == NULL ||
	    need(rec, "mediation_boundaries", json_type_array, "record", cause) == NULL ||
	    (counts = need(rec, "counts", json_type_object, "record", cause)) == NULL ||
	    need(counts, "effects", json_type_int, "counts", cause) == NULL ||
	    need(counts, "violations", json_type_int, "counts", cause) == NULL ||
	    (net = need(counts, "network", json_type_object, "counts", cause)) == NULL ||
	    (rh = need(rec, "recovery_health", json_type_object, "record", cause)) == NULL ||
	    need(rh, "entries", json_type_array, "recovery_health", cause) == NULL)
		return -1;
	/* "evidence" (kept/lost evidence counters) appears with the first file decision. */
	if ((v = schema_child(rec, "evidence")) != NULL &&
	    (!json_object_is_type(v, json_type_object) ||
	    need(v, "files_recorded", json_type_int, "evidence", cause) == NULL ||
	    need(v, "files_dropped", json_type_int, "evidence", cause) == NULL)) {
		if (!json_object_is_type(v, json_type_object))
			util_cause(cause, "record invalid: evidence is not an object");
		return -1;
	}
	(void)net;
	return 0;
}

int
oprecord_update(int dirfd, const char *id, int (*mutate)(struct json_object *, void *, char **),
    void *arg, struct json_object **result, char **cause)
{
	return record_update(dirfd, OPRECORD_FILE, id, oprecord_validate, mutate, arg, result,
	    cause);
}

int
oprecord_read(int dirfd, const char *id, struct json_object **out, char **cause)
{
	return record_read(dirfd, OPRECORD_FILE, id, oprecord_validate, out, cause);
}

/* Is from -> to a forward step of the lifecycle? */
static int
oprecord_transition_ok(const char *from, const char *to)
{
	if (strcmp(from, OPSTATE_STARTING) == 0)
		return strcmp(to, OPSTATE_STARTING) != 0;
	if (strcmp(from, OPSTATE_RUNNING) == 0)
		return oprecord_state_terminal(to);
	return 0; /* terminal states are final */
}

int
oprecord_mut_lifecycle(struct json_object *rec, void *arg, char **cause)
{
	const struct oprecord_lifecycle *l = arg;
	struct json_object *life = schema_child(rec, "lifecycle");
	const char *cur = schema_string(life, "state");
	int changed = 0;

	if (l->ol_state != NULL && !oprecord_state_known(l->ol_state)) {
		util_cause(cause, "unknown lifecycle state %s refused", l->ol_state);
		return -1;
	}
	if (l->ol_state != NULL && strcmp(l->ol_state, cur) != 0) {
		if (!oprecord_transition_ok(cur, l->ol_state)) {
			util_cause(cause, "stale lifecycle change %s -> %s refused", cur,
			    l->ol_state);
			return -1;
		}
		json_object_object_add(life, "state", json_object_new_string(l->ol_state));
		if (strcmp(l->ol_state, OPSTATE_RUNNING) == 0)
			now_str(life, "started_at");
		if (oprecord_state_terminal(l->ol_state)) {
			now_str(life, "ended_at");
			if (l->ol_reason != NULL)
				json_object_object_add(life, "end_reason",
				    json_object_new_string(l->ol_reason));
		}
		changed = 1;
	}
	if (l->ol_has_exit) {
		struct json_object *ex = schema_child(life, "exit");
		if (ex != NULL) {
			/* The exit result is written once; a second report is stale. */
			return changed ? 0 : 1;
		}
		ex = json_object_new_object();
		json_object_object_add(ex, "reported_by",
		    json_object_new_string(l->ol_reported_by ? l->ol_reported_by : "supervisor"));
		json_object_object_add(ex, "code",
		    l->ol_exit_signal ? NULL : json_object_new_int(l->ol_exit_code));
		json_object_object_add(ex, "signal",
		    l->ol_exit_signal ? json_object_new_int(l->ol_exit_signal) : NULL);
		if (l->ol_ndenials > 0) {
			struct json_object *d = json_object_new_object();
			for (size_t i = 0; i < l->ol_ndenials; i++)
				json_object_object_add(d, l->ol_denials[i].od_syscall,
				    json_object_new_int64(l->ol_denials[i].od_count));
			json_object_object_add(ex, "seccomp_denials", d);
		}
		json_object_object_add(life, "exit", ex);
		changed = 1;
	}
	return changed ? 0 : 1;
}

static struct json_object *
oprecord_find_proc(struct json_object *lineage, pid_t pid, uint64_t start)
{
	size_t n = json_object_array_length(lineage);
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(lineage, i);
		if (schema_int(e, "pid", -1) == pid &&
		    (uint64_t)schema_int(e, "start_time_ticks", -1) == start)
			return e;
	}
	return NULL;
}

int
oprecord_mut_lineage(struct json_object *rec, void *arg, char **cause)
{
	const struct oprecord_lineage *l = arg;
	struct json_object *lineage = schema_child(rec, "lineage");
	struct json_object *root = schema_child(rec, "root_process");
	int changed = 0;

	(void)cause;
	for (size_t i = 0; i < l->ol_n; i++) {
		const struct oprecord_proc *p = &l->ol_procs[i];
		struct json_object *e = oprecord_find_proc(lineage, p->op_pid, p->op_start);
		if (e == NULL) {
			if (json_object_array_length(lineage) >= OPRECORD_LINEAGE_MAX) {
				int64_t t = schema_int(rec, "lineage_truncated", 0);
				json_object_object_add(rec, "lineage_truncated",
				    json_object_new_int64(t + 1));
				changed = 1;
				continue;
			}
			e = json_object_new_object();
			json_object_object_add(e, "pid", json_object_new_int64(p->op_pid));
			json_object_object_add(e, "ppid", json_object_new_int64(p->op_ppid));
			json_object_object_add(e, "start_time_ticks",
			    json_object_new_int64((int64_t)p->op_start));
			json_object_object_add(e, "executable", jstr(p->op_exe));
			json_object_object_add(e, "argv_digest", jstr(p->op_argv_digest));
			now_str(e, "first_seen");
			json_object_object_add(e, "exited_at", NULL);
			json_object_object_add(e, "killed_by_supervisor", json_object_new_boolean(0));
			json_object_array_add(lineage, e);
			changed = 1;
		} else if (p->op_exe != NULL && *p->op_exe != '\0' &&
		    (schema_string(e, "executable") == NULL ||
			strcmp(schema_string(e, "executable"), p->op_exe) != 0)) {
			/* Same process, new image: it called execve. */
			json_object_object_add(e, "executable", jstr(p->op_exe));
			json_object_object_add(e, "argv_digest", jstr(p->op_argv_digest));
			json_object_object_add(e, "execs",
			    json_object_new_int64(schema_int(e, "execs", 0) + 1));
			changed = 1;
		}
		if (p->op_exe != NULL && schema_int(root, "pid", -1) == p->op_pid &&
		    (uint64_t)schema_int(root, "start_time_ticks", -1) == p->op_start &&
		    (schema_string(root, "executable") == NULL ||
			strcmp(schema_string(root, "executable"), p->op_exe) != 0)) {
			json_object_object_add(root, "executable", jstr(p->op_exe));
			json_object_object_add(root, "argv_digest", jstr(p->op_argv_digest));
			changed = 1;
		}
		if (p->op_exited && schema_child(e, "exited_at") == NULL) {
			now_str(e, "exited_at");
			changed = 1;
		}
		if (p->op_has_exit && schema_child(e, "exit_status") == NULL) {
			struct json_object *x = json_object_new_object();
			json_object_object_add(x, "code", p->op_exit_signal ? NULL :
			    json_object_new_int(p->op_exit_code));
			json_object_object_add(x, "signal", p->op_exit_signal ?
			    json_object_new_int(p->op_exit_signal) : NULL);
			json_object_object_add(e, "exit_status", x);
			changed = 1;
		}
		if (p->op_killed && !schema_bool(e, "killed_by_supervisor", 0)) {
			json_object_object_add(e, "killed_by_supervisor", json_object_new_boolean(1));
			changed = 1;
		}
	}
	return changed ? 0 : 1;
}

static void
add_int(struct json_object *o, const char *key, int64_t delta)
{
	if (delta == 0)
		return;
	json_object_object_add(o, key, json_object_new_int64(schema_int(o, key, 0) + delta));
}

/* Would add_int(o, key, delta) (delta >= 0) pass INT64_MAX? */
static int
add_would_overflow(struct json_object *o, const char *key, int64_t delta)
{
	return schema_int(o, key, 0) > INT64_MAX - delta;
}

int
oprecord_mut_counts(struct json_object *rec, void *arg, char **cause)
{
	const struct oprecord_counts *c = arg;
	struct json_object *counts = schema_child(rec, "counts");
	struct json_object *net = schema_child(counts, "network");

	struct json_object *evd = schema_child(rec, "evidence");

	if (c->oc_effects < 0 || c->oc_violations < 0 || c->oc_allowed_packets < 0 ||
	    c->oc_allowed_bytes < 0 || c->oc_blocked_packets < 0 || c->oc_blocked_bytes < 0 ||
	    c->oc_files_recorded < 0 || c->oc_files_dropped < 0) {
		util_cause(cause, "counts only grow");
		return -1;
	}
	/*
	 * A sum past INT64_MAX is undefined behaviour and in practice wraps the
	 * counter negative, which would make it shrink: refuse the whole change
	 * before touching any field.
	 */
	if (add_would_overflow(counts, "effects", c->oc_effects) ||
	    add_would_overflow(counts, "violations", c->oc_violations) ||
	    add_would_overflow(net, "allowed_packets", c->oc_allowed_packets) ||
	    add_would_overflow(net, "allowed_bytes", c->oc_allowed_bytes) ||
	    add_would_overflow(net, "blocked_packets", c->oc_blocked_packets) ||
	    add_would_overflow(net, "blocked_bytes", c->oc_blocked_bytes) ||
	    add_would_overflow(evd, "files_recorded", c->oc_files_recorded) ||
	    add_would_overflow(evd, "files_dropped", c->oc_files_dropped)) {
		util_cause(cause, "count overflow refused");
		return -1;
	}
	if (evd == NULL && (c->oc_files_recorded > 0 || c->oc_files_dropped > 0)) {
		evd = json_object_new_object();
		json_object_object_add(evd, "files_recorded", json_object_new_int64(0));
		json_object_object_add(evd, "files_dropped", json_object_new_int64(0));
		json_object_object_add(rec, "evidence", evd);
	}
	if (evd != NULL) {
		add_int(evd, "files_recorded", c->oc_files_recorded);
		add_int(evd, "files_dropped", c->oc_files_dropped);
	}
	add_int(counts, "effects", c->oc_effects);
	add_int(counts, "violations", c->oc_violations);
	add_int(net, "allowed_packets", c->oc_allowed_packets);
	add_int(net, "allowed_bytes", c->oc_allowed_bytes);
	add_int(net, "blocked_packets", c->oc_blocked_packets);
	add_int(net, "blocked_bytes", c->oc_blocked_bytes);
	return 0;
}

int
oprecord_mut_envelope(struct json_object *rec, void *arg, char **cause)
{
	struct json_object *env = arg;
	int64_t cur = schema_int(schema_child(rec, "envelope"), "generation", 0);
	int64_t next = schema_int(env, "generation", -1);

	if (next <= cur) {
		util_cause(cause, "stale envelope generation %lld (record has %lld)",
		    (long long)next, (long long)cur);
		return -1;
	}
	json_object_object_add(rec, "envelope", json_object_get(env));
	return 0;
}

int
oprecord_mut_cgroup(struct json_object *rec, void *arg, char **cause)
{
	const struct oprecord_cgroup *c = arg;
	struct json_object *cg = schema_child(rec, "cgroup");
	struct json_object *cleanup = schema_child(cg, "cleanup");

	(void)cause;
	if (c->ocg_attachment != NULL)
		json_object_object_add(cg, "attachment", json_object_new_string(c->ocg_attachment));
	if (c->ocg_cleanup != NULL) {
		json_object_object_add(cleanup, "state", json_object_new_string(c->ocg_cleanup));
		json_object_object_add(cleanup, "detail", jstr(c->ocg_detail));
	}
	add_int(cleanup, "killed_leftovers", c->ocg_killed_leftovers);
	return 0;
}

int
oprecord_mut_recovery(struct json_object *rec, void *arg, char **cause)
{
	struct json_object *rh = schema_child(rec, "recovery_health");
	(void)cause;
	json_object_object_add(rh, "status", json_object_new_string("degraded"));
	json_object_array_add(schema_child(rh, "entries"), json_object_get(arg));
	return 0;
}

int
oprecord_mut_instance(struct json_object *rec, void *arg, char **cause)
{
	struct json_object *sup = schema_child(rec, "supervisor");
	(void)cause;
	if (sup == NULL) {
		sup = json_object_new_object();
		json_object_object_add(rec, "supervisor", sup);
	}
	json_object_object_add(sup, "instance", json_object_new_string(arg));
	json_object_object_add(sup, "adopted", json_object_new_boolean(1));
	return 0;
}
