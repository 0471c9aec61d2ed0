/*
 * test_schema.c: strict field validation (lib/schema.c).
 *
 * Each case is one JSON object checked against one schema table, with the
 * exact error code and field name a caller would put in its reply.
 */
#include <json-c/json.h>

#include "schema.h"
#include "unit.h"

static const struct schema_field fields[] = {
	{ "name", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 8, 0 },
	{ "count", SCHEMA_INT, 0, -5, 10, 0 },
	{ "big", SCHEMA_INT, 0, 0, INT64_MAX, 0 },
	{ "flag", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "obj", SCHEMA_OBJECT, 0, 0, 0, 0 },
	{ "list", SCHEMA_ARRAY, 0, 0, 3, 0 },
	{ "args", SCHEMA_STRING_ARRAY, 0, 1, 3, 4 },
	{ "opt", SCHEMA_STRING, SCHEMA_NULLABLE, 0, 4, 0 },
	{ "maybe", SCHEMA_INT, SCHEMA_NULLABLE, 0, 9, 0 },
};

static const struct schema_field required_nullable[] = {
	{ "must", SCHEMA_INT, SCHEMA_REQUIRED | SCHEMA_NULLABLE, 0, 9, 0 },
};

struct vcase {
	const char *json;
	const char *code; /* NULL: valid */
	const char *field;
};

static const struct vcase cases[] = {
	/* valid */
	{ "{\"name\":\"x\"}", NULL, NULL },
	{ "{\"name\":\"12345678\",\"count\":3,\"flag\":true,\"obj\":{\"any\":[1]},"
	  "\"list\":[1,\"a\",{}],\"args\":[\"ab\",\"\",\"abcd\"],\"opt\":\"abcd\"}", NULL, NULL },
	/* unknown and missing */
	{ "{\"name\":\"x\",\"zzz\":1}", SCHEMA_E_UNKNOWN, "zzz" },
	{ "{\"zzz\":1}", SCHEMA_E_UNKNOWN, "zzz" }, /* unknown is checked before missing */
	{ "{}", SCHEMA_E_MISSING, "name" },
	{ "{\"count\":1}", SCHEMA_E_MISSING, "name" },
	/* wrong types */
	{ "{\"name\":1}", SCHEMA_E_TYPE, "name" },
	{ "{\"name\":[\"x\"]}", SCHEMA_E_TYPE, "name" },
	{ "{\"name\":\"x\",\"count\":\"1\"}", SCHEMA_E_TYPE, "count" },
	{ "{\"name\":\"x\",\"count\":1.0}", SCHEMA_E_TYPE, "count" },
	{ "{\"name\":\"x\",\"count\":true}", SCHEMA_E_TYPE, "count" },
	{ "{\"name\":\"x\",\"flag\":1}", SCHEMA_E_TYPE, "flag" },
	{ "{\"name\":\"x\",\"flag\":\"true\"}", SCHEMA_E_TYPE, "flag" },
	{ "{\"name\":\"x\",\"obj\":[]}", SCHEMA_E_TYPE, "obj" },
	{ "{\"name\":\"x\",\"list\":{}}", SCHEMA_E_TYPE, "list" },
	{ "{\"name\":\"x\",\"args\":\"a\"}", SCHEMA_E_TYPE, "args" },
	/* int range edges: min-1, min, max, max+1 */
	{ "{\"name\":\"x\",\"count\":-6}", SCHEMA_E_RANGE, "count" },
	{ "{\"name\":\"x\",\"count\":-5}", NULL, NULL },
	{ "{\"name\":\"x\",\"count\":10}", NULL, NULL },
	{ "{\"name\":\"x\",\"count\":11}", SCHEMA_E_RANGE, "count" },
	{ "{\"name\":\"x\",\"big\":-1}", SCHEMA_E_RANGE, "big" },
	{ "{\"name\":\"x\",\"big\":0}", NULL, NULL },
	{ "{\"name\":\"x\",\"big\":9223372036854775807}", NULL, NULL },
	/* json-c keeps these as uint64 or clamps them; none may pass as INT64_MAX */
	{ "{\"name\":\"x\",\"big\":9223372036854775808}", SCHEMA_E_RANGE, "big" },
	{ "{\"name\":\"x\",\"big\":18446744073709551615}", SCHEMA_E_RANGE, "big" },
	{ "{\"name\":\"x\",\"big\":99999999999999999999}", SCHEMA_E_RANGE, "big" },
	/* string length bounds (bytes, not characters) */
	{ "{\"name\":\"\"}", SCHEMA_E_LENGTH, "name" },
	{ "{\"name\":\"a\"}", NULL, NULL },
	{ "{\"name\":\"123456789\"}", SCHEMA_E_LENGTH, "name" },
	{ "{\"name\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}", NULL, NULL },
	{ "{\"name\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}", SCHEMA_E_LENGTH, "name" },
	/* embedded NUL through the JSON escape */
	{ "{\"name\":\"a\\u0000b\"}", SCHEMA_E_STRING, "name" },
	{ "{\"name\":\"\\u0000\"}", SCHEMA_E_STRING, "name" },
	{ "{\"name\":\"x\",\"opt\":\"a\\u0000\"}", SCHEMA_E_STRING, "opt" },
	/* arrays: count bounds and bad items */
	{ "{\"name\":\"x\",\"list\":[]}", NULL, NULL },
	{ "{\"name\":\"x\",\"list\":[1,2,3,4]}", SCHEMA_E_LENGTH, "list" },
	{ "{\"name\":\"x\",\"args\":[]}", SCHEMA_E_LENGTH, "args" },
	{ "{\"name\":\"x\",\"args\":[\"a\",\"b\",\"c\",\"d\"]}", SCHEMA_E_LENGTH, "args" },
	{ "{\"name\":\"x\",\"args\":[\"ok\",1]}", SCHEMA_E_TYPE, "args" },
	{ "{\"name\":\"x\",\"args\":[\"ok\",null]}", SCHEMA_E_TYPE, "args" },
	{ "{\"name\":\"x\",\"args\":[\"ok\",[\"a\"]]}", SCHEMA_E_TYPE, "args" },
	{ "{\"name\":\"x\",\"args\":[\"ok\",\"abcde\"]}", SCHEMA_E_LENGTH, "args" },
	{ "{\"name\":\"x\",\"args\":[\"a\\u0000b\"]}", SCHEMA_E_STRING, "args" },
	/* null: only SCHEMA_NULLABLE fields take it, and as "absent" */
	{ "{\"name\":\"x\",\"opt\":null}", NULL, NULL },
	{ "{\"name\":\"x\",\"maybe\":null}", NULL, NULL },
	{ "{\"name\":\"x\",\"maybe\":10}", SCHEMA_E_RANGE, "maybe" },
	{ "{\"name\":\"x\",\"opt\":\"abcde\"}", SCHEMA_E_LENGTH, "opt" },
	{ "{\"name\":null}", SCHEMA_E_TYPE, "name" },
	{ "{\"name\":\"x\",\"count\":null}", SCHEMA_E_TYPE, "count" },
	{ "{\"name\":\"x\",\"flag\":null}", SCHEMA_E_TYPE, "flag" },
	{ "{\"name\":\"x\",\"obj\":null}", SCHEMA_E_TYPE, "obj" },
	{ "{\"name\":\"x\",\"args\":null}", SCHEMA_E_TYPE, "args" },
};

static struct json_object *
parse(const char *s)
{
	struct json_object *o = json_tokener_parse(s);
	ck_assert_msg(o != NULL, "test JSON does not parse: %s", s);
	return o;
}

START_TEST(test_validate_case)
{
	const struct vcase *c = &cases[_i];
	struct json_object *o = parse(c->json);
	struct schema_error err;
	int r;

	memset(&err, 0, sizeof(err));
	r = schema_validate(o, fields, nitems(fields), &err);
	if (c->code == NULL) {
		ck_assert_msg(r == 0, "case %d %s: refused with %s (%s)", _i, c->json,
		    err.se_code ? err.se_code : "?", err.se_message);
	} else {
		ck_assert_msg(r == -1, "case %d %s: accepted, expected %s", _i, c->json, c->code);
		ck_assert_ptr_nonnull(err.se_code);
		ck_assert_msg(strcmp(err.se_code, c->code) == 0, "case %d %s: code %s, expected %s",
		    _i, c->json, err.se_code, c->code);
		ck_assert_str_eq(err.se_field, c->field);
		/* The message names the field so a reply is self-explaining. */
		ck_assert_msg(strncmp(err.se_message, c->field, strlen(c->field)) == 0,
		    "message '%s' does not start with the field", err.se_message);
	}
	json_object_put(o);
}
END_TEST

START_TEST(test_required_nullable)
{
	struct schema_error err;
	struct json_object *o = parse("{\"must\":null}");

	/* null means absent, and absent is not allowed for a required field. */
	ck_assert_int_eq(schema_validate(o, required_nullable, 1, &err), -1);
	ck_assert_str_eq(err.se_code, SCHEMA_E_MISSING);
	ck_assert_str_eq(err.se_field, "must");
	json_object_put(o);
	o = parse("{\"must\":3}");
	ck_assert_int_eq(schema_validate(o, required_nullable, 1, &err), 0);
	json_object_put(o);
}
END_TEST

START_TEST(test_not_object)
{
	struct schema_error err;
	const char *bad[] = { "[]", "\"s\"", "1", "true" };

	for (size_t i = 0; i < nitems(bad); i++) {
		struct json_object *o = json_tokener_parse(bad[i]);
		ck_assert_int_eq(schema_validate(o, fields, nitems(fields), &err), -1);
		ck_assert_str_eq(err.se_code, SCHEMA_E_NOT_OBJECT);
		ck_assert_str_eq(err.se_field, "");
		json_object_put(o);
	}
	ck_assert_int_eq(schema_validate(NULL, fields, nitems(fields), &err), -1);
	ck_assert_str_eq(err.se_code, SCHEMA_E_NOT_OBJECT);
	/* A NULL error pointer is allowed. */
	ck_assert_int_eq(schema_validate(NULL, fields, nitems(fields), NULL), -1);
}
END_TEST

START_TEST(test_long_unknown_key)
{
	char key[300], json[400];
	struct schema_error err;

	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	snprintf(json, sizeof(json), "{\"%s\":1}", key);
	struct json_object *o = parse(json);
	ck_assert_int_eq(schema_validate(o, fields, nitems(fields), &err), -1);
	ck_assert_str_eq(err.se_code, SCHEMA_E_UNKNOWN);
	/* The field name is truncated into the fixed buffer, still terminated. */
	ck_assert_uint_eq(strlen(err.se_field), sizeof(err.se_field) - 1);
	ck_assert_int_eq(strncmp(err.se_field, key, sizeof(err.se_field) - 1), 0);
	ck_assert_uint_lt(strlen(err.se_message), sizeof(err.se_message));
	json_object_put(o);
}
END_TEST

START_TEST(test_empty_schema)
{
	struct schema_error err;
	struct json_object *o = parse("{}");

	ck_assert_int_eq(schema_validate(o, fields, 0, &err), 0);
	json_object_put(o);
	o = parse("{\"x\":1}");
	ck_assert_int_eq(schema_validate(o, fields, 0, &err), -1);
	ck_assert_str_eq(err.se_code, SCHEMA_E_UNKNOWN);
	json_object_put(o);
}
END_TEST

START_TEST(test_accessors)
{
	struct json_object *o = parse("{\"s\":\"str\",\"i\":-7,\"b\":true,\"n\":null,\"o\":{}}");

	ck_assert_str_eq(schema_string(o, "s"), "str");
	ck_assert_ptr_null(schema_string(o, "i"));
	ck_assert_ptr_null(schema_string(o, "absent"));
	ck_assert_int_eq(schema_int(o, "i", 5), -7);
	ck_assert_int_eq(schema_int(o, "s", 5), 5);
	ck_assert_int_eq(schema_int(o, "n", 5), 5);
	ck_assert_int_eq(schema_int(o, "absent", 5), 5);
	ck_assert_int_eq(schema_bool(o, "b", 0), 1);
	ck_assert_int_eq(schema_bool(o, "i", 0), 0);
	ck_assert_int_eq(schema_bool(o, "absent", 1), 1);
	ck_assert_ptr_nonnull(schema_child(o, "o"));
	ck_assert_ptr_null(schema_child(o, "n"));
	ck_assert_ptr_null(schema_child(o, "absent"));
	ck_assert_ptr_null(schema_child(NULL, "o"));
	ck_assert_ptr_null(schema_string(NULL, "s"));
	json_object_put(o);
}
END_TEST

static Suite *
schema_suite(void)
{
	Suite *s = suite_create("schema");
	TCase *tc = tcase_create("validate");

	tcase_add_loop_test(tc, test_validate_case, 0, (int)nitems(cases));
	tcase_add_test(tc, test_required_nullable);
	tcase_add_test(tc, test_not_object);
	tcase_add_test(tc, test_long_unknown_key);
	tcase_add_test(tc, test_empty_schema);
	suite_add_tcase(s, tc);

	tc = tcase_create("accessors");
	tcase_add_test(tc, test_accessors);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(schema_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
