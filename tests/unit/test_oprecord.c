/*
 * test_oprecord.c: the operation record and its monotonic mutators
 * (lib/oprecord.c).
 *
 * Each mutator changes one portion and refuses a stale change; the tests
 * apply them to an in-memory record and, where the point is the shared
 * update, to a record on disk through oprecord_update.
 */
#include <json-c/json.h>

#include "ids.h"
#include "oprecord.h"
#include "record.h"
#include "unit.h"

#define ROOT_PID 4242
#define ROOT_START 777

static char test_id[ID_MAX_LEN];

static struct json_object *
new_record(void)
{
	struct oprecord_init in = {
		.oi_id = test_id,
		.oi_source_run = "gensee run",
		.oi_action_class = "local_process",
		.oi_uid = 1000,
		.oi_gid = 1000,
		.oi_launcher_pid = 100,
		.oi_launcher_start = 50,
		.oi_root_pid = ROOT_PID,
		.oi_root_start = ROOT_START,
		.oi_root_exe = "/usr/bin/sh",
		.oi_root_argv_digest = "00",
		.oi_timeout_seconds = 60,
		.oi_cgroup_path = "/sys/fs/cgroup/gensee/op_x",
		.oi_cgroup_id = 99,
		.oi_instance = "inst_1",
	};

	if (test_id[0] == '\0') {
		ck_assert_int_eq(ids_init(), 0);
		ck_assert_int_eq(ids_new("op_", test_id, sizeof(test_id)), 0);
	}
	struct json_object *r = oprecord_new(&in);
	ck_assert_ptr_nonnull(r);
	return r;
}

/* Walk a dotted path ("lifecycle.exit.code"); NULL when absent or null. */
static struct json_object *
at(struct json_object *o, const char *path)
{
	char buf[128], *save = NULL;
	util_strlcpy(buf, path, sizeof(buf));
	for (char *k = strtok_r(buf, ".", &save); k != NULL; k = strtok_r(NULL, ".", &save)) {
		struct json_object *v;
		if (o == NULL || !json_object_object_get_ex(o, k, &v))
			return NULL;
		o = v;
	}
	return o;
}

static const char *
at_str(struct json_object *o, const char *path)
{
	struct json_object *v = at(o, path);
	ck_assert_msg(v != NULL && json_object_is_type(v, json_type_string), "%s not a string",
	    path);
	return json_object_get_string(v);
}

static int64_t
at_int(struct json_object *o, const char *path)
{
	struct json_object *v = at(o, path);
	ck_assert_msg(v != NULL && json_object_is_type(v, json_type_int), "%s not an int", path);
	return json_object_get_int64(v);
}

static void
validate_ok(struct json_object *r)
{
	char *cause = NULL;
	ck_assert_msg(oprecord_validate(r, test_id, &cause) == 0, "invalid: %s", cause);
}

START_TEST(test_new_validates)
{
	struct json_object *r = new_record();
	char *cause = NULL;

	validate_ok(r);
	ck_assert_int_eq(oprecord_validate(r, NULL, &cause), 0);
	ck_assert_str_eq(at_str(r, "operation_id"), test_id);
	ck_assert_int_eq(at_int(r, "schema_version"), OPRECORD_SCHEMA_VERSION);
	ck_assert_int_eq(at_int(r, "revision"), 1);
	ck_assert_str_eq(at_str(r, "lifecycle.state"), OPSTATE_STARTING);
	ck_assert_ptr_null(at(r, "lifecycle.exit"));
	ck_assert_ptr_null(at(r, "lifecycle.started_at"));
	ck_assert_int_eq(at_int(r, "lifecycle.timeout_seconds"), 60);
	ck_assert_int_gt(at_int(r, "lifecycle.deadline_unix_ms"), util_now_ms());
	ck_assert_int_eq(at_int(r, "root_process.pid"), ROOT_PID);
	ck_assert_int_eq(at_int(r, "root_process.start_time_ticks"), ROOT_START);
	ck_assert_int_eq(at_int(r, "source.uid"), 1000);
	ck_assert_int_eq(at_int(r, "source.launcher.pid"), 100);
	ck_assert_int_eq(at_int(r, "cgroup.id"), 99);
	ck_assert_str_eq(at_str(r, "cgroup.cleanup.state"), "pending");
	ck_assert_int_eq(at_int(r, "envelope.generation"), 0);
	ck_assert_int_eq(at_int(r, "counts.effects"), 0);
	ck_assert_int_eq(at_int(r, "counts.network.blocked_bytes"), 0);
	ck_assert_str_eq(at_str(r, "recovery_health.status"), "ok");
	ck_assert_str_eq(at_str(r, "supervisor.instance"), "inst_1");

	/* Identity: the record must be the one asked for. */
	ck_assert_int_eq(oprecord_validate(r, "op_ffffffffffffffffffffffffffffffff", &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "identity"));
	free(cause);
	json_object_put(r);
}
END_TEST

/* Each of these breaks the record in one way; validate must notice. */
static const char *const breakers[] = {
	"schema_version=2", "schema_version=\"1\"", "-schema_version", "-operation_id",
	"operation_id=5", "-revision", "revision=\"1\"", "-lifecycle", "lifecycle.state=\"paused\"",
	"-lifecycle.state", "-root_process", "-root_process.pid", "root_process.start_time_ticks=\"x\"",
	"-source", "lineage={}", "-cgroup", "-cgroup.cleanup", "envelope=[]", "-leases",
	"mediation_boundaries=null", "-counts", "counts.effects=1.5", "-counts.violations",
	"-counts.network", "-recovery_health", "recovery_health.entries={}",
};

START_TEST(test_validate_rejects)
{
	const char *b = breakers[_i];
	struct json_object *r = new_record(), *parent = r;
	char path[128], *cause = NULL;
	const char *val = NULL;

	util_strlcpy(path, b[0] == '-' ? b + 1 : b, sizeof(path));
	char *eq = strchr(path, '=');
	if (eq != NULL) {
		*eq = '\0';
		val = eq + 1;
	}
	char *dot = strrchr(path, '.');
	const char *key = path;
	if (dot != NULL) {
		*dot = '\0';
		parent = at(r, path);
		key = dot + 1;
	}
	ck_assert_ptr_nonnull(parent);
	if (b[0] == '-')
		json_object_object_del(parent, key);
	else
		json_object_object_add(parent, key, json_tokener_parse(val));
	ck_assert_msg(oprecord_validate(r, test_id, &cause) == -1, "%s still validates", b);
	ck_assert_ptr_nonnull(cause);
	free(cause);
	json_object_put(r);
	/* And a non-object. */
	r = json_object_new_array();
	ck_assert_int_eq(oprecord_validate(r, NULL, NULL), -1);
	json_object_put(r);
}
END_TEST

START_TEST(test_states)
{
	const char *all[] = { OPSTATE_STARTING, OPSTATE_RUNNING, OPSTATE_EXITED,
		OPSTATE_TIMED_OUT, OPSTATE_ENDED, OPSTATE_FAILED, OPSTATE_LOST };
	for (size_t i = 0; i < nitems(all); i++) {
		ck_assert(oprecord_state_known(all[i]));
		ck_assert_int_eq(oprecord_state_terminal(all[i]), i >= 2);
	}
	ck_assert(!oprecord_state_known("paused"));
	ck_assert(!oprecord_state_known(""));
	ck_assert(!oprecord_state_known("Running"));
}
END_TEST

static int
life(struct json_object *r, const char *state, int has_exit, int code, int sig, char **cause)
{
	struct oprecord_lifecycle l = { .ol_state = state, .ol_reason = "why",
		.ol_has_exit = has_exit, .ol_exit_code = code, .ol_exit_signal = sig,
		.ol_reported_by = "unit" };
	return oprecord_mut_lifecycle(r, &l, cause);
}

START_TEST(test_lifecycle_forward)
{
	struct json_object *r = new_record();
	char *cause = NULL;

	ck_assert_int_eq(life(r, OPSTATE_STARTING, 0, 0, 0, &cause), 1); /* no change */
	ck_assert_int_eq(life(r, OPSTATE_RUNNING, 0, 0, 0, &cause), 0);
	ck_assert_str_eq(at_str(r, "lifecycle.state"), OPSTATE_RUNNING);
	ck_assert_ptr_nonnull(at(r, "lifecycle.started_at"));
	ck_assert_ptr_null(at(r, "lifecycle.ended_at"));
	ck_assert_int_eq(life(r, OPSTATE_RUNNING, 0, 0, 0, &cause), 1);
	ck_assert_int_eq(life(r, OPSTATE_EXITED, 1, 3, 0, &cause), 0);
	ck_assert_str_eq(at_str(r, "lifecycle.state"), OPSTATE_EXITED);
	ck_assert_ptr_nonnull(at(r, "lifecycle.ended_at"));
	ck_assert_str_eq(at_str(r, "lifecycle.end_reason"), "why");
	ck_assert_int_eq(at_int(r, "lifecycle.exit.code"), 3);
	ck_assert_ptr_null(at(r, "lifecycle.exit.signal"));
	ck_assert_str_eq(at_str(r, "lifecycle.exit.reported_by"), "unit");
	validate_ok(r);
	json_object_put(r);

	/* starting may go straight to a terminal state (failed to start). */
	r = new_record();
	ck_assert_int_eq(life(r, OPSTATE_FAILED, 0, 0, 0, &cause), 0);
	ck_assert_str_eq(at_str(r, "lifecycle.state"), OPSTATE_FAILED);
	json_object_put(r);
}
END_TEST

START_TEST(test_lifecycle_backwards_refused)
{
	struct json_object *r = new_record();
	char *cause = NULL;

	ck_assert_int_eq(life(r, OPSTATE_RUNNING, 0, 0, 0, &cause), 0);
	ck_assert_int_eq(life(r, OPSTATE_STARTING, 0, 0, 0, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "stale"));
	ck_assert_str_eq(at_str(r, "lifecycle.state"), OPSTATE_RUNNING);
	ck_assert_int_eq(life(r, OPSTATE_EXITED, 0, 0, 0, &cause), 0);

	const char *later[] = { OPSTATE_RUNNING, OPSTATE_STARTING, OPSTATE_TIMED_OUT,
		OPSTATE_ENDED, OPSTATE_FAILED, OPSTATE_LOST };
	for (size_t i = 0; i < nitems(later); i++) {
		free(cause);
		cause = NULL;
		ck_assert_msg(life(r, later[i], 0, 0, 0, &cause) == -1, "exited -> %s allowed",
		    later[i]);
		ck_assert_ptr_nonnull(cause);
		ck_assert_str_eq(at_str(r, "lifecycle.state"), OPSTATE_EXITED);
	}
	free(cause);
	json_object_put(r);
}
END_TEST

START_TEST(test_exit_once)
{
	struct json_object *r = new_record();
	char *cause = NULL;

	ck_assert_int_eq(life(r, OPSTATE_RUNNING, 0, 0, 0, &cause), 0);
	/* exit without a state change (the launcher's report) */
	ck_assert_int_eq(life(r, NULL, 1, -1, 9, &cause), 0);
	ck_assert_ptr_null(at(r, "lifecycle.exit.code"));
	ck_assert_int_eq(at_int(r, "lifecycle.exit.signal"), 9);
	ck_assert_str_eq(at_str(r, "lifecycle.state"), OPSTATE_RUNNING);
	/* a second report is stale: unchanged, the first stays */
	ck_assert_int_eq(life(r, NULL, 1, 0, 0, &cause), 1);
	ck_assert_int_eq(at_int(r, "lifecycle.exit.signal"), 9);
	ck_assert_ptr_null(at(r, "lifecycle.exit.code"));
	/* a state change with a late exit keeps the state change, not the exit */
	ck_assert_int_eq(life(r, OPSTATE_EXITED, 1, 5, 0, &cause), 0);
	ck_assert_str_eq(at_str(r, "lifecycle.state"), OPSTATE_EXITED);
	ck_assert_int_eq(at_int(r, "lifecycle.exit.signal"), 9);
	ck_assert_ptr_null(at(r, "lifecycle.exit.code"));
	json_object_put(r);
}
END_TEST

/* A record on disk in a fresh directory; returns the dir fd. */
static int
on_disk(struct json_object **initial)
{
	int dfd = open(unit_tmpdir("/tmp"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct json_object *r = new_record();
	char *cause = NULL;

	ck_assert_int_ge(dfd, 0);
	ck_assert_msg(record_create(dfd, OPRECORD_FILE, r, &cause) == 0, "%s", cause);
	if (initial != NULL)
		*initial = r;
	else
		json_object_put(r);
	return dfd;
}

START_TEST(test_exit_once_on_disk)
{
	int dfd = on_disk(NULL);
	struct json_object *out;
	char *cause = NULL;
	struct oprecord_lifecycle first = { .ol_state = OPSTATE_EXITED, .ol_has_exit = 1,
		.ol_exit_code = 3, .ol_reported_by = "supervisor" };
	struct oprecord_lifecycle second = { .ol_has_exit = 1, .ol_exit_code = 0,
		.ol_reported_by = "launcher" };

	ck_assert_int_eq(oprecord_update(dfd, test_id, oprecord_mut_lifecycle, &first, &out,
	    &cause), 0);
	int64_t rev = at_int(out, "revision");
	json_object_put(out);
	ck_assert_int_eq(oprecord_update(dfd, test_id, oprecord_mut_lifecycle, &second, &out,
	    &cause), 0);
	json_object_put(out);
	ck_assert_int_eq(oprecord_read(dfd, test_id, &out, &cause), 0);
	ck_assert_int_eq(at_int(out, "revision"), rev);
	ck_assert_int_eq(at_int(out, "lifecycle.exit.code"), 3);
	ck_assert_str_eq(at_str(out, "lifecycle.exit.reported_by"), "supervisor");
	json_object_put(out);
	close(dfd);
}
END_TEST

static struct json_object *
envelope(int64_t gen)
{
	struct json_object *e = json_object_new_object();
	json_object_object_add(e, "generation", json_object_new_int64(gen));
	json_object_object_add(e, "grants", json_object_new_array());
	return e;
}

START_TEST(test_envelope_generation)
{
	struct json_object *r = new_record(), *e;
	char *cause = NULL;

	e = envelope(1);
	ck_assert_int_eq(oprecord_mut_envelope(r, e, &cause), 0);
	json_object_put(e);
	ck_assert_int_eq(at_int(r, "envelope.generation"), 1);

	const int64_t stale[] = { 1, 0, -1 };
	for (size_t i = 0; i < nitems(stale); i++) {
		e = envelope(stale[i]);
		json_object_object_add(e, "marker", json_object_new_string("stale"));
		ck_assert_int_eq(oprecord_mut_envelope(r, e, &cause), -1);
		ck_assert_ptr_nonnull(strstr(cause, "stale"));
		json_object_put(e);
		ck_assert_int_eq(at_int(r, "envelope.generation"), 1);
		ck_assert_ptr_null(at(r, "envelope.marker"));
	}
	/* No generation at all is not newer than anything. */
	e = json_object_new_object();
	ck_assert_int_eq(oprecord_mut_envelope(r, e, &cause), -1);
	json_object_put(e);

	e = envelope(5);
	ck_assert_int_eq(oprecord_mut_envelope(r, e, &cause), 0);
	json_object_put(e); /* the record holds its own reference */
	ck_assert_int_eq(at_int(r, "envelope.generation"), 5);
	validate_ok(r);
	free(cause);
	json_object_put(r);
}
END_TEST

START_TEST(test_counts_grow_only)
{
	struct json_object *r = new_record();
	char *cause = NULL;
	struct oprecord_counts c = { .oc_effects = 2, .oc_violations = 1, .oc_allowed_packets = 10,
		.oc_allowed_bytes = 1000, .oc_blocked_packets = 3, .oc_blocked_bytes = 300 };

	ck_assert_int_eq(oprecord_mut_counts(r, &c, &cause), 0);
	ck_assert_int_eq(oprecord_mut_counts(r, &c, &cause), 0);
	ck_assert_int_eq(at_int(r, "counts.effects"), 4);
	ck_assert_int_eq(at_int(r, "counts.violations"), 2);
	ck_assert_int_eq(at_int(r, "counts.network.allowed_packets"), 20);
	ck_assert_int_eq(at_int(r, "counts.network.allowed_bytes"), 2000);
	ck_assert_int_eq(at_int(r, "counts.network.blocked_packets"), 6);
	ck_assert_int_eq(at_int(r, "counts.network.blocked_bytes"), 600);

	/* Any negative delta refuses the whole change, good fields included. */
	for (int i = 0; i < 6; i++) {
		struct oprecord_counts n = { .oc_effects = 100, .oc_violations = 100,
			.oc_allowed_packets = 100, .oc_allowed_bytes = 100,
			.oc_blocked_packets = 100, .oc_blocked_bytes = 100 };
		int64_t *f[] = { &n.oc_effects, &n.oc_violations, &n.oc_allowed_packets,
			&n.oc_allowed_bytes, &n.oc_blocked_packets, &n.oc_blocked_bytes };
		*f[i] = -1;
		ck_assert_int_eq(oprecord_mut_counts(r, &n, &cause), -1);
		ck_assert_ptr_nonnull(strstr(cause, "only grow"));
		ck_assert_int_eq(at_int(r, "counts.effects"), 4);
		ck_assert_int_eq(at_int(r, "counts.network.allowed_packets"), 20);
	}
	ck_assert_int_eq(at_int(r, "counts.violations"), 2);
	ck_assert_int_eq(at_int(r, "counts.network.blocked_bytes"), 600);
	free(cause);
	json_object_put(r);
}
END_TEST

START_TEST(test_evidence_counts)
{
	struct json_object *r = new_record();
	char *cause = NULL;
	struct oprecord_counts c = { .oc_effects = 5, .oc_files_recorded = 5, .oc_files_dropped = 2 };

	/* No "evidence" until the first file decision; then it only grows. */
	ck_assert_ptr_null(at(r, "evidence"));
	ck_assert_int_eq(oprecord_mut_counts(r, &c, &cause), 0);
	ck_assert_int_eq(oprecord_mut_counts(r, &c, &cause), 0);
	ck_assert_int_eq(at_int(r, "evidence.files_recorded"), 10);
	ck_assert_int_eq(at_int(r, "evidence.files_dropped"), 4);
	ck_assert_int_eq(oprecord_validate(r, test_id, &cause), 0);
	struct oprecord_counts n = { .oc_files_dropped = -1 };
	ck_assert_int_eq(oprecord_mut_counts(r, &n, &cause), -1);
	ck_assert_int_eq(at_int(r, "evidence.files_dropped"), 4);
	/* A record whose evidence counters are not counters is refused. */
	json_object_object_add(at(r, "evidence"), "files_dropped", json_object_new_string("4"));
	ck_assert_int_eq(oprecord_validate(r, test_id, &cause), -1);
	json_object_object_add(r, "evidence", json_object_new_array());
	ck_assert_int_eq(oprecord_validate(r, test_id, &cause), -1);
	free(cause);
	json_object_put(r);
}
END_TEST

START_TEST(test_counts_no_wrap)
{
	struct json_object *r = new_record();
	char *cause = NULL;
	struct oprecord_counts big = { .oc_allowed_bytes = INT64_MAX - 10 };
	struct oprecord_counts more = { .oc_effects = 1, .oc_allowed_bytes = 11 };

	ck_assert_int_eq(oprecord_mut_counts(r, &big, &cause), 0);
	ck_assert_int_eq(at_int(r, "counts.network.allowed_bytes"), INT64_MAX - 10);
	/* One more byte than fits must not wrap the counter negative. */
	ck_assert_int_eq(oprecord_mut_counts(r, &more, &cause), -1);
	ck_assert_int_eq(at_int(r, "counts.network.allowed_bytes"), INT64_MAX - 10);
	ck_assert_int_eq(at_int(r, "counts.effects"), 0);
	more.oc_allowed_bytes = 10;
	ck_assert_int_eq(oprecord_mut_counts(r, &more, &cause), 0);
	ck_assert_int_eq(at_int(r, "counts.network.allowed_bytes"), INT64_MAX);
	ck_assert_int_eq(at_int(r, "counts.effects"), 1);
	free(cause);
	json_object_put(r);
}
END_TEST

static struct json_object *
lineage_entry(struct json_object *r, pid_t pid, uint64_t start)
{
	struct json_object *lin = at(r, "lineage");
	for (size_t i = 0; i < json_object_array_length(lin); i++) {
		struct json_object *e = json_object_array_get_idx(lin, i);
		if (at_int(e, "pid") == pid && (uint64_t)at_int(e, "start_time_ticks") == start)
			return e;
	}
	return NULL;
}

static int
lineage(struct json_object *r, const struct oprecord_proc *p, size_t n)
{
	struct oprecord_lineage l = { .ol_procs = p, .ol_n = n };
	char *cause = NULL;
	int rc = oprecord_mut_lineage(r, &l, &cause);
	free(cause);
	return rc;
}

START_TEST(test_lineage_merge)
{
	struct json_object *r = new_record(), *e;
	struct oprecord_proc p[] = {
		{ .op_pid = ROOT_PID, .op_ppid = 1, .op_start = ROOT_START, .op_exe = "/usr/bin/sh",
		    .op_argv_digest = "00" },
		{ .op_pid = 5000, .op_ppid = ROOT_PID, .op_start = 800, .op_exe = "/usr/bin/curl",
		    .op_argv_digest = "aa" },
	};

	ck_assert_int_eq(lineage(r, p, 2), 0);
	ck_assert_uint_eq(json_object_array_length(at(r, "lineage")), 2);
	e = lineage_entry(r, 5000, 800);
	ck_assert_ptr_nonnull(e);
	ck_assert_int_eq(at_int(e, "ppid"), ROOT_PID);
	ck_assert_str_eq(at_str(e, "executable"), "/usr/bin/curl");
	ck_assert_ptr_null(at(e, "exited_at"));
	ck_assert(!json_object_get_boolean(at(e, "killed_by_supervisor")));
	/* The same observation again changes nothing. */
	ck_assert_int_eq(lineage(r, p, 2), 1);
	ck_assert_uint_eq(json_object_array_length(at(r, "lineage")), 2);

	/* Same pid, other start time: a reused pid is a new process. */
	struct oprecord_proc reused = { .op_pid = 5000, .op_ppid = ROOT_PID, .op_start = 900,
		.op_exe = "/usr/bin/nc" };
	ck_assert_int_eq(lineage(r, &reused, 1), 0);
	ck_assert_uint_eq(json_object_array_length(at(r, "lineage")), 3);
	ck_assert_str_eq(at_str(lineage_entry(r, 5000, 800), "executable"), "/usr/bin/curl");

	/* exec: same (pid, start), new image. */
	struct oprecord_proc ex = p[1];
	ex.op_exe = "/usr/bin/wget";
	ex.op_argv_digest = "bb";
	ck_assert_int_eq(lineage(r, &ex, 1), 0);
	e = lineage_entry(r, 5000, 800);
	ck_assert_str_eq(at_str(e, "executable"), "/usr/bin/wget");
	ck_assert_str_eq(at_str(e, "argv_digest"), "bb");
	ck_assert_int_eq(at_int(e, "execs"), 1);
	ck_assert_uint_eq(json_object_array_length(at(r, "lineage")), 3);

	/* The root process record follows the root's exec too. */
	struct oprecord_proc rx = p[0];
	rx.op_exe = "/usr/bin/python3";
	ck_assert_int_eq(lineage(r, &rx, 1), 0);
	ck_assert_str_eq(at_str(r, "root_process.executable"), "/usr/bin/python3");

	/* exited, then killed; each once. */
	struct oprecord_proc gone = ex;
	gone.op_exited = 1;
	ck_assert_int_eq(lineage(r, &gone, 1), 0);
	e = lineage_entry(r, 5000, 800);
	const char *t1 = at_str(e, "exited_at");
	char first[64];
	util_strlcpy(first, t1, sizeof(first));
	ck_assert_int_eq(lineage(r, &gone, 1), 1);
	ck_assert_str_eq(at_str(e, "exited_at"), first);
	gone.op_killed = 1;
	ck_assert_int_eq(lineage(r, &gone, 1), 0);
	ck_assert(json_object_get_boolean(at(e, "killed_by_supervisor")));
	ck_assert_int_eq(lineage(r, &gone, 1), 1);

	/* An observation without an executable does not erase the known one. */
	struct oprecord_proc noexe = { .op_pid = 5000, .op_start = 800 };
	ck_assert_int_eq(lineage(r, &noexe, 1), 1);
	ck_assert_str_eq(at_str(e, "executable"), "/usr/bin/wget");
	validate_ok(r);
	json_object_put(r);
}
END_TEST

START_TEST(test_lineage_bounded)
{
	struct json_object *r = new_record();
	size_t n = OPRECORD_LINEAGE_MAX + 3;
	struct oprecord_proc *p = calloc(n, sizeof(*p));

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < n; i++) {
		p[i].op_pid = (pid_t)(10000 + i);
		p[i].op_start = 1;
	}
	ck_assert_int_eq(lineage(r, p, n), 0);
	ck_assert_uint_eq(json_object_array_length(at(r, "lineage")), OPRECORD_LINEAGE_MAX);
	ck_assert_int_eq(at_int(r, "lineage_truncated"), 3);
	free(p);
	json_object_put(r);
}
END_TEST

START_TEST(test_recovery_degraded)
{
	struct json_object *r = new_record(), *entry = json_object_new_object();
	char *cause = NULL;

	json_object_object_add(entry, "kind", json_object_new_string("network"));
	json_object_object_add(entry, "detail", json_object_new_string("unvalidated table"));
	ck_assert_int_eq(oprecord_mut_recovery(r, entry, &cause), 0);
	json_object_put(entry);
	ck_assert_str_eq(at_str(r, "recovery_health.status"), "degraded");
	struct json_object *entries = at(r, "recovery_health.entries");
	ck_assert_uint_eq(json_object_array_length(entries), 1);
	ck_assert_str_eq(at_str(json_object_array_get_idx(entries, 0), "kind"), "network");
	/* Recovery health is informational: not a violation of this operation. */
	ck_assert_int_eq(at_int(r, "counts.violations"), 0);
	ck_assert_str_eq(at_str(r, "lifecycle.state"), OPSTATE_STARTING);
	validate_ok(r);
	json_object_put(r);
}
END_TEST

START_TEST(test_cgroup_and_instance)
{
	struct json_object *r = new_record();
	char *cause = NULL;
	struct oprecord_cgroup c = { .ocg_attachment = "attached" };

	ck_assert_int_eq(oprecord_mut_cgroup(r, &c, &cause), 0);
	ck_assert_str_eq(at_str(r, "cgroup.attachment"), "attached");
	ck_assert_str_eq(at_str(r, "cgroup.cleanup.state"), "pending");
	struct oprecord_cgroup done = { .ocg_cleanup = "removed", .ocg_detail = "ok",
		.ocg_killed_leftovers = 2 };
	ck_assert_int_eq(oprecord_mut_cgroup(r, &done, &cause), 0);
	ck_assert_int_eq(oprecord_mut_cgroup(r, &done, &cause), 0);
	ck_assert_str_eq(at_str(r, "cgroup.attachment"), "attached");
	ck_assert_str_eq(at_str(r, "cgroup.cleanup.state"), "removed");
	ck_assert_str_eq(at_str(r, "cgroup.cleanup.detail"), "ok");
	ck_assert_int_eq(at_int(r, "cgroup.cleanup.killed_leftovers"), 4);

	ck_assert_int_eq(oprecord_mut_instance(r, "inst_2", &cause), 0);
	ck_assert_str_eq(at_str(r, "supervisor.instance"), "inst_2");
	ck_assert(json_object_get_boolean(at(r, "supervisor.adopted")));
	validate_ok(r);
	json_object_put(r);
}
END_TEST

/*
 * The stale writer: A looked at the record while it was running; B then
 * ended it; A, still believing it runs, asks for running again. The update
 * reloads the record under the lock, so A's change meets "ended" and is
 * refused, and "ended" stays on disk.
 */
START_TEST(test_stale_writer)
{
	int dfd = on_disk(NULL);
	struct json_object *a_view, *out;
	char *cause = NULL;
	struct oprecord_lifecycle run = { .ol_state = OPSTATE_RUNNING };
	struct oprecord_lifecycle end = { .ol_state = OPSTATE_ENDED, .ol_reason = "requested" };

	ck_assert_int_eq(oprecord_update(dfd, test_id, oprecord_mut_lifecycle, &run, NULL, &cause),
	    0);
	ck_assert_int_eq(oprecord_read(dfd, test_id, &a_view, &cause), 0);	/* A reads */
	ck_assert_str_eq(at_str(a_view, "lifecycle.state"), OPSTATE_RUNNING);
	ck_assert_int_eq(oprecord_update(dfd, test_id, oprecord_mut_lifecycle, &end, NULL, &cause),
	    0);									/* B ends */
	ck_assert_int_eq(oprecord_read(dfd, test_id, &out, &cause), 0);
	int64_t rev = at_int(out, "revision");
	json_object_put(out);

	/* A's view would allow it (running -> running is a no-op, starting -> running ok)... */
	ck_assert_int_ne(oprecord_mut_lifecycle(a_view, &run, &cause), -1);
	json_object_put(a_view);
	/* ...but the locked update sees the newest record and refuses. */
	ck_assert_int_eq(oprecord_update(dfd, test_id, oprecord_mut_lifecycle, &run, &out, &cause),
	    -1);
	ck_assert_ptr_nonnull(strstr(cause, "stale"));
	ck_assert_int_eq(oprecord_read(dfd, test_id, &out, &cause), 0);
	ck_assert_str_eq(at_str(out, "lifecycle.state"), OPSTATE_ENDED);
	ck_assert_str_eq(at_str(out, "lifecycle.end_reason"), "requested");
	ck_assert_int_eq(at_int(out, "revision"), rev);
	json_object_put(out);

	/* The same holds for a stale envelope and for the count on disk. */
	struct json_object *e = envelope(3);
	ck_assert_int_eq(oprecord_update(dfd, test_id, oprecord_mut_envelope, e, NULL, &cause), 0);
	json_object_put(e);
	e = envelope(2);
	ck_assert_int_eq(oprecord_update(dfd, test_id, oprecord_mut_envelope, e, NULL, &cause), -1);
	json_object_put(e);
	ck_assert_int_eq(oprecord_read(dfd, test_id, &out, &cause), 0);
	ck_assert_int_eq(at_int(out, "envelope.generation"), 3);
	json_object_put(out);
	free(cause);
	close(dfd);
}
END_TEST

START_TEST(test_update_wrong_identity)
{
	int dfd = on_disk(NULL);
	char *cause = NULL;
	struct oprecord_counts c = { .oc_effects = 1 };

	ck_assert_int_eq(oprecord_update(dfd, "op_ffffffffffffffffffffffffffffffff",
	    oprecord_mut_counts, &c, NULL, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "identity"));
	struct json_object *out;
	ck_assert_int_eq(oprecord_read(dfd, test_id, &out, &cause), 0);
	ck_assert_int_eq(at_int(out, "counts.effects"), 0);
	ck_assert_int_eq(at_int(out, "revision"), 1);
	json_object_put(out);
	free(cause);
	close(dfd);
}
END_TEST

static Suite *
oprecord_suite(void)
{
	Suite *s = suite_create("oprecord");
	TCase *tc = tcase_create("shape");

	tcase_add_test(tc, test_new_validates);
	tcase_add_loop_test(tc, test_validate_rejects, 0, (int)nitems(breakers));
	tcase_add_test(tc, test_states);
	suite_add_tcase(s, tc);

	tc = tcase_create("mutators");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_lifecycle_forward);
	tcase_add_test(tc, test_lifecycle_backwards_refused);
	tcase_add_test(tc, test_exit_once);
	tcase_add_test(tc, test_envelope_generation);
	tcase_add_test(tc, test_counts_grow_only);
	tcase_add_test(tc, test_counts_no_wrap);
	tcase_add_test(tc, test_evidence_counts);
	tcase_add_test(tc, test_lineage_merge);
	tcase_add_test(tc, test_lineage_bounded);
	tcase_add_test(tc, test_recovery_degraded);
	tcase_add_test(tc, test_cgroup_and_instance);
	suite_add_tcase(s, tc);

	tc = tcase_create("shared");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_exit_once_on_disk);
	tcase_add_test(tc, test_stale_writer);
	tcase_add_test(tc, test_update_wrong_identity);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(oprecord_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
