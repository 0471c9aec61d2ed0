/*
 * test_ocsf.c: evidence lines -> OCSF 1.1.0 events, and the bounded sink (lib/ocsf.c).
 */
#include <json-c/json.h>

#include "ocsf.h"
#include "schema.h"
#include "unit.h"

static struct json_object *
parse(const char *s)
{
	struct json_object *o = json_tokener_parse(s);
	ck_assert_ptr_nonnull(o);
	return o;
}

static struct json_object *
map(const char *kind, const char *line)
{
	struct json_object *e = parse(line);
	struct json_object *o = ocsf_map(kind, e);
	json_object_put(e);
	return o;
}

/* The base attributes every event carries. */
static void
check_base(struct json_object *o, int class_uid, int activity, int status)
{
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(schema_int(o, "class_uid", 0), class_uid);
	ck_assert_int_eq(schema_int(o, "category_uid", 0), class_uid / 1000);
	ck_assert_int_eq(schema_int(o, "activity_id", -1), activity);
	ck_assert_int_eq(schema_int(o, "type_uid", 0), (int64_t)class_uid * 100 + activity);
	ck_assert_int_eq(schema_int(o, "status_id", -1), status);
	ck_assert(schema_int(o, "severity_id", -1) >= 1);
	ck_assert_str_eq(schema_string(schema_child(o, "metadata"), "version"), "1.1.0");
	ck_assert_str_eq(schema_string(schema_child(schema_child(o, "metadata"), "product"),
	    "vendor_name"), "gensee");
	ck_assert_ptr_nonnull(schema_child(o, "unmapped"));
}

START_TEST(test_time_ms)
{
	ck_assert_int_eq(ocsf_time_ms("1970-01-01T00:00:01.5Z"), 1500);
	ck_assert_int_eq(ocsf_time_ms("2026-12-03T16:53:39.123Z"), 1796316819123LL);
	ck_assert_int_eq(ocsf_time_ms("2026-12-03T16:53:39Z"), 1796316819000LL);
	ck_assert_int_eq(ocsf_time_ms("2026-12-03T16:53:39.123456Z"), 1796316819123LL);
	ck_assert_int_eq(ocsf_time_ms("2026-12-03T16:53:39.Z"), -1);
	ck_assert_int_eq(ocsf_time_ms("2026-12-03T16:53:39+01:00"), -1);
	ck_assert_int_eq(ocsf_time_ms("yesterday"), -1);
	ck_assert_int_eq(ocsf_time_ms(NULL), -1);
}
END_TEST

START_TEST(test_network_deny)
{
	struct json_object *o = map("effect", "{\"kind\":\"deny\",\"destination\":\"192.0.2.7\","
	    "\"protocol\":\"tcp\",\"port\":8081,\"reason\":\"outside_envelope\","
	    "\"time\":\"2026-12-03T16:53:39.123Z\",\"operation_id\":\"op_x\"}");

	check_base(o, 4001, 5, 2);
	/* The event's own time, not the time of mapping. */
	ck_assert_int_eq(schema_int(o, "time", 0), 1796316819123LL);
	struct json_object *dst = schema_child(o, "dst_endpoint");
	ck_assert_str_eq(schema_string(dst, "ip"), "192.0.2.7");
	ck_assert_int_eq(schema_int(dst, "port", 0), 8081);
	ck_assert_ptr_nonnull(schema_child(o, "src_endpoint"));
	struct json_object *ci = schema_child(o, "connection_info");
	ck_assert_int_eq(schema_int(ci, "direction_id", 0), 2);
	ck_assert_int_eq(schema_int(ci, "protocol_num", 0), 6);
	ck_assert_str_eq(schema_string(schema_child(o, "metadata"), "correlation_uid"), "op_x");
	json_object_put(o);

	o = map("effect", "{\"kind\":\"allow\",\"destination\":\"2001:db8::1\",\"protocol\":\"udp\","
	    "\"port\":53}");
	check_base(o, 4001, 1, 1);
	ck_assert_int_eq(schema_int(schema_child(o, "connection_info"), "protocol_num", 0), 17);
	json_object_put(o);
}
END_TEST

START_TEST(test_network_untrusted_fields)
{
	/* A range, a bad port, a wrong type: kept out of the typed attributes. */
	struct json_object *o = map("fault", "{\"kind\":\"fault\",\"capability\":{\"destination\":"
	    "\"192.0.2.0/24\",\"protocol\":\"sctp\",\"port\":70000},\"disposition\":\"deny\","
	    "\"time\":7}");
	check_base(o, 4001, 5, 2);
	struct json_object *dst = schema_child(o, "dst_endpoint");
	ck_assert_ptr_null(schema_child(dst, "ip"));
	ck_assert_str_eq(schema_string(dst, "name"), "192.0.2.0/24");
	ck_assert_ptr_null(schema_child(dst, "port"));
	ck_assert_ptr_null(schema_child(schema_child(o, "connection_info"), "protocol_num"));
	/* An unparsable time falls back to now. */
	ck_assert(schema_int(o, "time", 0) > 1000000000000LL);
	json_object_put(o);

	o = map("effect", "{\"kind\":\"NetworkBlocked\",\"destination\":\"untracked\","
	    "\"packets\":3,\"bytes\":180}");
	check_base(o, 4001, 5, 2);
	ck_assert_int_eq(schema_int(o, "count", 0), 3);
	json_object_put(o);
	/* Monitor mode let it through: traffic, not a refusal. */
	o = map("effect", "{\"kind\":\"NetworkWouldBlock\",\"destination\":\"192.0.2.1\","
	    "\"protocol\":\"tcp\",\"port\":8081,\"packets\":2}");
	check_base(o, 4001, 6, 1);
	json_object_put(o);
}
END_TEST

START_TEST(test_process)
{
	struct json_object *o = map("lineage", "{\"kind\":\"exec\",\"pid\":42,\"ppid\":41,"
	    "\"executable\":\"/usr/bin/cat\"}");
	check_base(o, 1007, 1, 1);
	struct json_object *p = schema_child(o, "process");
	ck_assert_int_eq(schema_int(p, "pid", 0), 42);
	ck_assert_str_eq(schema_string(p, "name"), "cat");
	ck_assert_int_eq(schema_int(schema_child(p, "parent_process"), "pid", 0), 41);
	/* A launch is the parent's act. */
	ck_assert_int_eq(schema_int(schema_child(schema_child(o, "actor"), "process"), "pid", 0), 41);
	ck_assert_ptr_nonnull(schema_child(schema_child(o, "device"), "type_id"));
	json_object_put(o);

	o = map("lineage", "{\"kind\":\"exit\",\"pid\":42,\"exit_status\":{\"code\":3,"
	    "\"signal\":null}}");
	check_base(o, 1007, 2, 1);
	ck_assert_int_eq(schema_int(o, "exit_code", -1), 3);
	json_object_put(o);

	o = map("lineage", "{\"kind\":\"killed\",\"pid\":42}");
	check_base(o, 1007, 2, 1);
	ck_assert_str_eq(schema_string(schema_child(schema_child(o, "actor"), "process"), "name"),
	    "gensee-boundaryd");
	json_object_put(o);

	o = map("host", "{\"kind\":\"seccomp_denied\",\"syscall\":\"ptrace\",\"count\":2}");
	check_base(o, 1007, 99, 2);
	json_object_put(o);
}
END_TEST

START_TEST(test_file)
{
	struct json_object *o = map("file", "{\"pid\":7,\"executable\":\"/usr/bin/cat\","
	    "\"path\":\"/home/u/.ssh/id_ed25519\",\"event\":\"open\",\"decision\":\"deny\","
	    "\"reason\":\"rule\"}");
	check_base(o, 1001, 14, 2);
	struct json_object *f = schema_child(o, "file");
	ck_assert_str_eq(schema_string(f, "name"), "id_ed25519");
	ck_assert_str_eq(schema_string(f, "path"), "/home/u/.ssh/id_ed25519");
	ck_assert_int_eq(schema_int(schema_child(schema_child(o, "actor"), "process"), "pid", 0), 7);
	json_object_put(o);
	/* Anything but an explicit allow is reported as a refusal. */
	o = map("file", "{\"decision\":17}");
	check_base(o, 1001, 99, 2);
	ck_assert_str_eq(schema_string(schema_child(o, "file"), "name"), "(unknown)");
	json_object_put(o);
}
END_TEST

START_TEST(test_finding)
{
	struct json_object *o = map("violation", "{\"kind\":\"launcher_lost\","
	    "\"violation_id\":\"vio_1\",\"operation_id\":\"op_x\"}");
	check_base(o, 2004, 1, 1);
	struct json_object *fi = schema_child(o, "finding_info");
	ck_assert_str_eq(schema_string(fi, "uid"), "vio_1");
	ck_assert_str_eq(schema_string(fi, "title"), "violation: launcher_lost");
	ck_assert_int_eq(schema_int(o, "severity_id", 0), 4);
	json_object_put(o);

	o = map("sensor", "{\"kind\":\"coverage_restored\",\"sensor\":\"fanotify\","
	    "\"operation_id\":\"op_x\"}");
	check_base(o, 2004, 3, 4);
	ck_assert_str_eq(schema_string(schema_child(o, "finding_info"), "uid"),
	    "op_x:coverage:fanotify");
	json_object_put(o);
}
END_TEST

START_TEST(test_unmapped_kinds)
{
	struct json_object *e = parse("{\"final\":true}");
	ck_assert_ptr_null(ocsf_map("counters", e));
	ck_assert_ptr_null(ocsf_map(NULL, e));
	ck_assert_ptr_null(ocsf_map("nonsense", e));
	json_object_put(e);
	e = parse("[1]");
	ck_assert_ptr_null(ocsf_map("effect", e));
	json_object_put(e);
}
END_TEST

START_TEST(test_sink_writes_and_rotates)
{
	const char *dir = unit_tmpdir(unit_fast_base());
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char *cause = NULL;
	char buf[1 << 16];

	ck_assert_int_ge(dfd, 0);
	/* The smallest cap (one line max) forces rotations. */
	ck_assert_int_eq(ocsf_sink_open(dfd, "o.jsonl", 1, &cause), 0);
	/* Queued before the writer starts (the daemon confines itself first). */
	struct json_object *e = parse("{\"kind\":\"deny\",\"destination\":\"192.0.2.1\"}");
	for (int i = 0; i < 40; i++)
		ocsf_emit("effect", e);
	ocsf_emit("counters", e); /* no event: neither emitted nor dropped */
	ck_assert_int_eq(ocsf_sink_start(&cause), 0);
	ocsf_sink_close();
	json_object_put(e);
	ck_assert_int_eq(ocsf_emitted() + ocsf_dropped(), 40);
	ck_assert_int_eq(ocsf_dropped(), 0);
	/* Every line in the files is one whole JSON event. */
	size_t lines = 0;
	const char *names[] = { "o.jsonl", "o.jsonl.1" };
	for (size_t k = 0; k < 2; k++) {
		int fd = openat(dfd, names[k], O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		ck_assert_int_gt(n, 0);
		buf[n] = '\0';
		close(fd);
		for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l != NULL;
		    l = strtok_r(NULL, "\n", &save)) {
			struct json_object *o = json_tokener_parse(l);
			ck_assert_ptr_nonnull(o);
			ck_assert_int_eq(schema_int(o, "class_uid", 0), 4001);
			json_object_put(o);
			lines++;
		}
	}
	ck_assert_uint_ge(lines, 1);
	ck_assert_uint_le(lines, 40);
	/* Without a sink, emitting is a no-op. */
	ocsf_emit("effect", NULL);
	close(dfd);
}
END_TEST

START_TEST(test_sink_full_drops_counted)
{
	const char *dir = unit_tmpdir(unit_fast_base());
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char *cause = NULL;

	ck_assert_int_ge(dfd, 0);
	ck_assert_int_eq(ocsf_sink_open(dfd, "o.jsonl", OCSF_FILE_MAX_DEFAULT, &cause), 0);
	/* Nothing drains before the writer starts: the queue fills, the rest is counted. */
	struct json_object *e = parse("{\"kind\":\"allow\",\"destination\":\"192.0.2.1\"}");
	for (int i = 0; i < OCSF_QUEUE_LINES + 100; i++)
		ocsf_emit("effect", e);
	ck_assert_int_eq(ocsf_dropped(), 100);
	ck_assert_int_eq(ocsf_sink_start(&cause), 0);
	ocsf_sink_close();
	json_object_put(e);
	ck_assert_int_eq(ocsf_emitted(), OCSF_QUEUE_LINES);
	ck_assert_int_eq(ocsf_dropped(), 100);
	close(dfd);
}
END_TEST

static Suite *
ocsf_suite(void)
{
	Suite *s = suite_create("ocsf");
	TCase *tc = tcase_create("ocsf");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_time_ms);
	tcase_add_test(tc, test_network_deny);
	tcase_add_test(tc, test_network_untrusted_fields);
	tcase_add_test(tc, test_process);
	tcase_add_test(tc, test_file);
	tcase_add_test(tc, test_finding);
	tcase_add_test(tc, test_unmapped_kinds);
	tcase_add_test(tc, test_sink_writes_and_rotates);
	tcase_add_test(tc, test_sink_full_drops_counted);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(ocsf_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
