/*
 * test_jsonstrict.c: the exact-grammar scanner and the duplicate-key check,
 * through frame_parse_payload as the daemons use them.
 */
#include <string.h>

#include <json-c/json.h>

#include "frame.h"
#include "jsonstrict.h"
#include "unit.h"

static int
parse(const char *s)
{
	struct json_object *o = NULL;
	int r = frame_parse_payload((const uint8_t *)s, strlen(s), &o);
	json_object_put(o);
	return r;
}

/* What json-c's strict mode lets through and we must not. */
static const char *const lenient[] = {
	"{'a':1}",
	"{\"a\":NaN}",
	"{\"a\":Infinity}",
	"{\"a\":-Infinity}",
	"{\"a\":1.}",
	"{\"a\":.5}",
	"{\"a\":01}",
	"{\"a\":+1}",
	"{\"a\":\"x\ty\"}",
	"{\"a\":\"x\ny\"}",
	"{\"a\":\"\\ud800\"}",
	"{\"a\":\"\\udc00\"}",
	"{\"a\":\"\\ud800\\u0041\"}",
	"{\"a\":\"\\u0000\"}",
	"{\"a\":\"\\x41\"}",
	"{\"a\":1,}",
	"{\"a\":[1,2,]}",
	"{\"a\" 1}",
	"{a:1}",
	"{\"a\":tru}",
	"{\"a\":nul}",
	"{\"a\":1e}",
	"{\"a\":\"unterminated}",
};

START_TEST(test_lenient_json_refused)
{
	const char *s = lenient[_i];
	ck_assert_msg(parse(s) == FRAME_ERR_JSON, "accepted or misreported: %s (%d)", s, parse(s));
}
END_TEST

START_TEST(test_valid_json_accepted)
{
	const char *ok[] = {
		"{}",
		" {\"a\" : [1, -0, 0.5, 1e10, -2.5E-3, true, false, null, \"\\u00e9\\ud83d\\ude00\"]} ",
		"{\"a\":{\"b\":{\"c\":[]}},\"d\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}",
		"{\"a\":[{\"x\":1},{\"x\":1}]}", /* same key in different objects */
	};
	for (size_t i = 0; i < nitems(ok); i++)
		ck_assert_msg(parse(ok[i]) == FRAME_OK, "refused: %s", ok[i]);
}
END_TEST

START_TEST(test_duplicate_keys_refused)
{
	const char *dup[] = {
		"{\"a\":1,\"a\":2}",
		"{\"method\":\"system.status\",\"method\":\"system.shutdown\"}",
		"{\"p\":{\"x\":1,\"y\":2,\"x\":3}}",
		"{\"l\":[{\"k\":1},{\"k\":1,\"k\":1}]}",
		"{\"a\":{\"b\":1},\"a\":{\"c\":2}}",
	};
	for (size_t i = 0; i < nitems(dup); i++)
		ck_assert_msg(parse(dup[i]) == FRAME_ERR_DUPLICATE, "%s: %d", dup[i], parse(dup[i]));
	ck_assert_str_eq(frame_status_code(FRAME_ERR_DUPLICATE), "frame_duplicate_key");
}
END_TEST

START_TEST(test_shape_errors)
{
	ck_assert_int_eq(parse("123"), FRAME_ERR_NOT_OBJECT);
	ck_assert_int_eq(parse("[1]"), FRAME_ERR_NOT_OBJECT);
	ck_assert_int_eq(parse("\"s\""), FRAME_ERR_NOT_OBJECT);
	ck_assert_int_eq(parse("{} {}"), FRAME_ERR_TRAILING);
	ck_assert_int_eq(parse("{}x"), FRAME_ERR_TRAILING);
	ck_assert_int_eq(parse("{} \n"), FRAME_OK);
}
END_TEST

START_TEST(test_depth_bound)
{
	char deep[256], *p = deep;
	/* FRAME_JSON_DEPTH containers are fine, one more is not. */
	for (int n = FRAME_JSON_DEPTH; n <= FRAME_JSON_DEPTH + 1; n++) {
		p = deep;
		*p++ = '{';
		*p++ = '"';
		*p++ = 'a';
		*p++ = '"';
		*p++ = ':';
		for (int i = 1; i < n; i++)
			*p++ = '[';
		for (int i = 1; i < n; i++)
			*p++ = ']';
		*p++ = '}';
		*p = '\0';
		ck_assert_int_eq(parse(deep), n <= FRAME_JSON_DEPTH ? FRAME_OK : FRAME_ERR_JSON);
	}
}
END_TEST

START_TEST(test_scanner_counts)
{
	struct jsonstrict js;
	const char *s = "{\"a\":{\"x\":1},\"b\":[{},{\"y\":2,\"z\":3}]}";
	ck_assert_int_eq(jsonstrict_scan((const uint8_t *)s, strlen(s), 8, &js), JSONSTRICT_OK);
	ck_assert_uint_eq(js.js_ncounts, 4);
	ck_assert_uint_eq(js.js_counts[0], 2);
	ck_assert_uint_eq(js.js_counts[1], 1);
	ck_assert_uint_eq(js.js_counts[2], 0);
	ck_assert_uint_eq(js.js_counts[3], 2);
	jsonstrict_free(&js);
}
END_TEST

static Suite *
jsonstrict_suite(void)
{
	Suite *s = suite_create("jsonstrict");
	TCase *tc = tcase_create("grammar");
	tcase_add_loop_test(tc, test_lenient_json_refused, 0, (int)nitems(lenient));
	tcase_add_test(tc, test_valid_json_accepted);
	tcase_add_test(tc, test_duplicate_keys_refused);
	tcase_add_test(tc, test_shape_errors);
	tcase_add_test(tc, test_depth_bound);
	tcase_add_test(tc, test_scanner_counts);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(jsonstrict_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
