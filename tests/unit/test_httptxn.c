/*
 * test_httptxn.c: the HTTP transaction state machine (lib/httptxn.c):
 * lifecycle, one-use ids, TTL from begin, scopes, budgets, the single
 * reservation, late responses and strict persistence.
 */
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "httptxn.h"
#include "unit.h"

static struct httptxn_config cfg;
static struct httptxn_table tab;

static void
setup(void)
{
	char *cause = NULL;
	struct json_object *tx = json_tokener_parse(
	    "{\"effect\":\"external_http_read\",\"scopes\":[{\"scheme\":\"http\","
	    "\"authority\":\"api.example.test:8080\",\"path_prefix\":\"/v1/data\"}],"
	    "\"max_ttl_seconds\":120,\"max_requests\":3,\"max_request_bytes\":100,"
	    "\"max_response_bytes\":1000}");
	ck_assert_ptr_nonnull(tx);
	ck_assert_int_eq(httptxn_config_parse(tx, &cfg, &cause), 0);
	json_object_put(tx);
	httptxn_table_init(&tab);
}

static void
teardown(void)
{
	httptxn_config_free(&cfg);
	httptxn_table_free(&tab);
}

static struct httpurl u;

static const struct httpurl *
url(const char *s)
{
	ck_assert_int_eq(httpurl_parse(s, strlen(s), &u), HTTPURL_OK);
	return &u;
}

#define OK(x) ck_assert_ptr_null(x)
#define CODE(x, c) do { const char *r_ = (x); ck_assert_ptr_nonnull(r_); ck_assert_str_eq(r_, c); } while (0)

static const char *
authz(const char *s, int64_t now)
{
	uint64_t res;
	int64_t lim;
	return httptxn_authorize(&tab, &cfg, url(s), 0, 0, NULL, now, &res, &lim);
}

START_TEST(test_lifecycle)
{
	uint64_t res;
	int64_t lim;

	CODE(authz("http://api.example.test:8080/v1/data", 1000), HTXN_E_REQUIRED);
	OK(httptxn_begin(&tab, &cfg, "tx_1", "external_http_read", 60, 1000));
	/* prepared is not active */
	CODE(authz("http://api.example.test:8080/v1/data", 1000), HTXN_E_REQUIRED);
	CODE(httptxn_end(&tab, "tx_1", 1000), HTXN_E_STATE);
	OK(httptxn_activate(&tab, "tx_1", 1000));
	CODE(httptxn_activate(&tab, "tx_1", 1000), HTXN_E_STATE);
	ck_assert_ptr_null(httptxn_authorize(&tab, &cfg,
	    url("http://API.example.test:8080/v1/data/x?q=1"), 10, 0, NULL, 1000, &res, &lim));
	ck_assert_uint_gt(res, 0);
	ck_assert_int_eq(lim, 1000);
	CODE(httptxn_complete(&tab, "tx_1", res, 10, 0, 1000), HTXN_DELIVER);
	OK(httptxn_end(&tab, "tx_1", 1000));
	ck_assert_int_eq(tab.tt_cur.ht_state, HTXN_ENDED);
	CODE(authz("http://api.example.test:8080/v1/data", 1000), HTXN_E_REQUIRED);
	CODE(httptxn_revoke(&tab, "tx_1", 1000), HTXN_E_STATE);
	/* one-use ids */
	CODE(httptxn_begin(&tab, &cfg, "tx_1", NULL, 0, 2000), HTXN_E_REPLAYED);
	OK(httptxn_begin(&tab, &cfg, "tx_2", NULL, 0, 2000));
	ck_assert_int_eq(tab.tt_cur.ht_ttl_s, 120);
	CODE(httptxn_begin(&tab, &cfg, "tx_3", NULL, 0, 2000), HTXN_E_IN_PROGRESS);
	OK(httptxn_revoke(&tab, "tx_2", 2000));
	CODE(httptxn_activate(&tab, "tx_2", 2000), HTXN_E_STATE);
	CODE(httptxn_activate(&tab, "tx_1", 2000), HTXN_E_STATE);
	CODE(httptxn_activate(&tab, "tx_9", 2000), HTXN_E_UNKNOWN);
}
END_TEST

START_TEST(test_begin_refusals)
{
	CODE(httptxn_begin(&tab, &cfg, "", NULL, 0, 0), HTXN_E_BAD_ID);
	CODE(httptxn_begin(&tab, &cfg, "a b", NULL, 0, 0), HTXN_E_BAD_ID);
	CODE(httptxn_begin(&tab, &cfg, "tx/..", NULL, 0, 0), HTXN_E_BAD_ID);
	CODE(httptxn_begin(&tab, &cfg, "tx_1", "external_http_write", 10, 0),
	    HTXN_E_WRONG_EFFECT);
	CODE(httptxn_begin(&tab, &cfg, "tx_1", NULL, 121, 0), HTXN_E_TTL_CEILING);
	CODE(httptxn_begin(&tab, &cfg, "tx_1", NULL, -1, 0), HTXN_E_BAD_TTL);
	/* refused begins do not consume the id */
	OK(httptxn_begin(&tab, &cfg, "tx_1", NULL, 120, 0));
}
END_TEST

START_TEST(test_ttl_from_begin)
{
	OK(httptxn_begin(&tab, &cfg, "tx_1", NULL, 10, 1000));
	/* The prepared window counts: activation after the deadline is refused. */
	CODE(httptxn_activate(&tab, "tx_1", 11000), HTXN_E_EXPIRED);
	ck_assert_int_eq(tab.tt_cur.ht_state, HTXN_EXPIRED);
	OK(httptxn_begin(&tab, &cfg, "tx_2", NULL, 10, 20000));
	OK(httptxn_activate(&tab, "tx_2", 29000));
	OK(authz("http://api.example.test:8080/v1/data", 29999));
	tab.tt_cur.ht_reservation = 0;
	CODE(authz("http://api.example.test:8080/v1/data", 30000), HTXN_E_EXPIRED);
	CODE(httptxn_end(&tab, "tx_2", 30000), HTXN_E_EXPIRED);
	ck_assert_int_eq(httptxn_expire(&tab, 40000), 0);
}
END_TEST

START_TEST(test_scope)
{
	static const char *out[] = {
		"http://api.example.test:8080/v1/database",
		"http://api.example.test:8080/v1/data-x",
		"http://api.example.test:8080/v1",
		"https://api.example.test:8080/v1/data",
		"http://api.example.test/v1/data",
		"http://api.example.test:8081/v1/data",
		"http://evil.example.test:8080/v1/data",
		"http://api.example.test.evil.test:8080/v1/data",
	};
	static const char *in[] = {
		"http://api.example.test:8080/v1/data",
		"http://api.example.test:8080/v1/data/",
		"http://api.example.test:8080/v1/data/a/b?x=/v2",
		"http://api.example.test:8080/v1/data/%7e",
	};
	uint64_t res;
	int64_t lim;
	struct httpurl v;

	OK(httptxn_begin(&tab, &cfg, "tx_1", NULL, 0, 0));
	OK(httptxn_activate(&tab, "tx_1", 0));
	for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++)
		CODE(authz(out[i], 1), HTXN_E_SCOPE);
	/* ambiguous paths never parse, so they are outside every scope */
	ck_assert_int_ne(httpurl_parse("http://api.example.test:8080/v1/data/%2e%2e/x", 45, &v),
	    HTTPURL_OK);
	ck_assert_int_ne(httpurl_parse("http://api.example.test:8080/v1/data/../x", 41, &v),
	    HTTPURL_OK);
	ck_assert_int_ne(httpurl_parse("http://api.example.test:8080/v1/data/%252e", 42, &v),
	    HTTPURL_OK);
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		OK(authz(in[i], 1));
		CODE(httptxn_complete(&tab, "tx_1", tab.tt_cur.ht_reservation, 0, 0, 1),
		    HTXN_DELIVER);
		if (i == 2)
			break;	/* max_requests 3 */
	}
	CODE(httptxn_authorize(&tab, &cfg, url(in[0]), 0, 0, NULL, 1, &res, &lim),
	    HTXN_E_REQUESTS);
}
END_TEST

START_TEST(test_budgets_and_reservation)
{
	uint64_t r1, r2;
	int64_t lim;

	OK(httptxn_begin(&tab, &cfg, "tx_1", NULL, 0, 0));
	OK(httptxn_activate(&tab, "tx_1", 0));
	CODE(httptxn_authorize(&tab, &cfg, url("http://api.example.test:8080/v1/data"), 101, 0,
	    NULL, 1, &r1, &lim), HTXN_E_REQUEST_BYTES);
	OK(httptxn_authorize(&tab, &cfg, url("http://api.example.test:8080/v1/data"), 60, 0,
	    NULL, 1, &r1, &lim));
	/* a second request while the first is in flight */
	CODE(httptxn_authorize(&tab, &cfg, url("http://api.example.test:8080/v1/data"), 0, 0,
	    NULL, 1, &r2, &lim), HTXN_E_RESERVED);
	CODE(httptxn_complete(&tab, "tx_1", r1 + 1, 0, 0, 1), HTXN_E_RESERVATION);
	CODE(httptxn_complete(&tab, "tx_1", r1, 1200, 0, 1), HTXN_OVER);
	CODE(httptxn_complete(&tab, "tx_1", r1, 10, 0, 1), HTXN_E_RESERVATION);
	/* the response budget is spent */
	CODE(httptxn_authorize(&tab, &cfg, url("http://api.example.test:8080/v1/data"), 0, 0,
	    NULL, 1, &r2, &lim), HTXN_E_RESPONSE_BYTES);
	/* request bytes are cumulative */
	tab.tt_cur.ht_response_bytes = 0;
	CODE(httptxn_authorize(&tab, &cfg, url("http://api.example.test:8080/v1/data"), 41, 0,
	    NULL, 1, &r2, &lim), HTXN_E_REQUEST_BYTES);
	OK(httptxn_authorize(&tab, &cfg, url("http://api.example.test:8080/v1/data"), 40, 0,
	    NULL, 1, &r2, &lim));
	ck_assert_uint_gt(r2, r1);
}
END_TEST

START_TEST(test_redirect_hop)
{
	uint64_t r;
	int64_t lim;

	OK(httptxn_begin(&tab, &cfg, "tx_1", NULL, 0, 0));
	OK(httptxn_activate(&tab, "tx_1", 0));
	CODE(httptxn_authorize(&tab, &cfg, url("http://api.example.test:8080/v1/data"), 0, 1,
	    "tx_0", 1, &r, &lim), HTXN_E_CHANGED);
	CODE(httptxn_authorize(&tab, &cfg, url("http://api.example.test:8080/v1/data"), 0, 1,
	    NULL, 1, &r, &lim), HTXN_E_CHANGED);
	OK(httptxn_authorize(&tab, &cfg, url("http://api.example.test:8080/v1/data"), 0, 1,
	    "tx_1", 1, &r, &lim));
	ck_assert_int_eq(tab.tt_cur.ht_requests, 1);
}
END_TEST

START_TEST(test_late_response)
{
	uint64_t r;
	int64_t lim;

	OK(httptxn_begin(&tab, &cfg, "tx_1", NULL, 10, 0));
	OK(httptxn_activate(&tab, "tx_1", 0));
	OK(httptxn_authorize(&tab, &cfg, url("http://api.example.test:8080/v1/data"), 0, 0,
	    NULL, 1, &r, &lim));
	OK(httptxn_revoke(&tab, "tx_1", 2));
	CODE(httptxn_complete(&tab, "tx_1", r, 5, 0, 3), HTXN_LATE);
	ck_assert_int_eq(tab.tt_cur.ht_response_bytes, 5);
	/* expiry while in flight */
	OK(httptxn_begin(&tab, &cfg, "tx_2", NULL, 10, 100));
	OK(httptxn_activate(&tab, "tx_2", 100));
	OK(httptxn_authorize(&tab, &cfg, url("http://api.example.test:8080/v1/data"), 0, 0,
	    NULL, 101, &r, &lim));
	CODE(httptxn_complete(&tab, "tx_2", r, 5, 0, 10100), HTXN_LATE);
	/* a completion for an older transaction */
	OK(httptxn_begin(&tab, &cfg, "tx_3", NULL, 10, 20000));
	CODE(httptxn_complete(&tab, "tx_2", r, 5, 0, 20000), HTXN_LATE);
	CODE(httptxn_complete(&tab, NULL, r, 5, 0, 20000), HTXN_LATE);
}
END_TEST

START_TEST(test_persist)
{
	struct httptxn_table t2;
	struct json_object *o;
	char *cause = NULL;
	uint64_t r;
	int64_t lim;

	OK(httptxn_begin(&tab, &cfg, "tx_1", NULL, 0, 0));
	OK(httptxn_revoke(&tab, "tx_1", 0));
	OK(httptxn_begin(&tab, &cfg, "tx_2", NULL, 100, 0));
	OK(httptxn_activate(&tab, "tx_2", 0));
	OK(httptxn_authorize(&tab, &cfg, url("http://api.example.test:8080/v1/data"), 0, 0,
	    NULL, 1, &r, &lim));
	o = httptxn_to_json(&tab);
	ck_assert_int_eq(httptxn_from_json(o, &t2, &cause), 0);
	json_object_put(o);
	/* a crash with a reservation in flight keeps it: fail closed until the end */
	CODE(httptxn_authorize(&t2, &cfg, url("http://api.example.test:8080/v1/data"), 0, 0,
	    NULL, 2, &r, &lim), HTXN_E_RESERVED);
	CODE(httptxn_begin(&t2, &cfg, "tx_1", NULL, 0, 200000), HTXN_E_REPLAYED);
	CODE(httptxn_begin(&t2, &cfg, "tx_2", NULL, 0, 200000), HTXN_E_REPLAYED);
	ck_assert_int_eq(t2.tt_cur.ht_state, HTXN_EXPIRED);
	httptxn_table_free(&t2);
}
END_TEST

START_TEST(test_restore_strict)
{
	static const char *bad[] = {
		"{}",
		"{\"schema_version\":2,\"generation\":0,\"used_ids\":[],\"current\":null}",
		"{\"schema_version\":1,\"generation\":0,\"used_ids\":[\"a\",\"a\"],\"current\":null}",
		"{\"schema_version\":1,\"generation\":0,\"used_ids\":[\"a b\"],\"current\":null}",
		"{\"schema_version\":1,\"generation\":0,\"used_ids\":[],\"current\":null,\"x\":1}",
		/* deadline past begin + ttl */
		"{\"schema_version\":1,\"generation\":5,\"used_ids\":[\"t\"],\"current\":{"
		"\"transaction_id\":\"t\",\"state\":\"active\",\"effect\":\"e\",\"ttl_seconds\":1,"
		"\"begun_ms\":0,\"deadline_ms\":999999,\"requests\":0,\"request_bytes\":0,"
		"\"response_bytes\":0,\"reservation\":0,\"reserved_bytes\":0,\"reason\":null}}",
		/* current id never begun */
		"{\"schema_version\":1,\"generation\":5,\"used_ids\":[],\"current\":{"
		"\"transaction_id\":\"t\",\"state\":\"active\",\"effect\":\"e\",\"ttl_seconds\":1,"
		"\"begun_ms\":0,\"deadline_ms\":1000,\"requests\":0,\"request_bytes\":0,"
		"\"response_bytes\":0,\"reservation\":0,\"reserved_bytes\":0,\"reason\":null}}",
		/* unknown state */
		"{\"schema_version\":1,\"generation\":5,\"used_ids\":[\"t\"],\"current\":{"
		"\"transaction_id\":\"t\",\"state\":\"open\",\"effect\":\"e\",\"ttl_seconds\":1,"
		"\"begun_ms\":0,\"deadline_ms\":1000,\"requests\":0,\"request_bytes\":0,"
		"\"response_bytes\":0,\"reservation\":0,\"reserved_bytes\":0,\"reason\":null}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct json_object *o = json_tokener_parse(bad[i]);
		struct httptxn_table t2;
		char *cause = NULL;
		ck_assert_ptr_nonnull(o);
		ck_assert_msg(httptxn_from_json(o, &t2, &cause) == -1, "accepted %s", bad[i]);
		free(cause);
		json_object_put(o);
	}
}
END_TEST

START_TEST(test_config_refused)
{
	static const char *bad[] = {
		"{\"effect\":\"e\",\"scopes\":[],\"max_ttl_seconds\":1}",
		"{\"effect\":\"e\",\"scopes\":[{\"scheme\":\"http\",\"authority\":\"a.test\","
		"\"path_prefix\":\"/x/../y\"}],\"max_ttl_seconds\":1}",
		"{\"effect\":\"e\",\"scopes\":[{\"scheme\":\"http\",\"authority\":\"a.test\","
		"\"path_prefix\":\"/x%2fy\"}],\"max_ttl_seconds\":1}",
		"{\"effect\":\"e\",\"scopes\":[{\"scheme\":\"http\",\"authority\":\"u@a.test\","
		"\"path_prefix\":\"/\"}],\"max_ttl_seconds\":1}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct json_object *o = json_tokener_parse(bad[i]);
		struct httptxn_config c;
		char *cause = NULL;
		ck_assert_ptr_nonnull(o);
		ck_assert_msg(httptxn_config_parse(o, &c, &cause) == -1, "accepted %s", bad[i]);
		free(cause);
		json_object_put(o);
	}
}
END_TEST

START_TEST(test_id_limit)
{
	char id[32];

	for (int i = 0; i < HTTPTXN_MAX_IDS; i++) {
		snprintf(id, sizeof(id), "tx_%d", i);
		OK(httptxn_begin(&tab, &cfg, id, NULL, 0, i));
		OK(httptxn_revoke(&tab, id, i));
	}
	CODE(httptxn_begin(&tab, &cfg, "tx_new", NULL, 0, 5000), HTXN_E_LIMIT);
}
END_TEST

static Suite *
httptxn_suite(void)
{
	Suite *s = suite_create("httptxn");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_lifecycle);
	tcase_add_test(tc, test_begin_refusals);
	tcase_add_test(tc, test_ttl_from_begin);
	tcase_add_test(tc, test_scope);
	tcase_add_test(tc, test_budgets_and_reservation);
	tcase_add_test(tc, test_redirect_hop);
	tcase_add_test(tc, test_late_response);
	tcase_add_test(tc, test_persist);
	tcase_add_test(tc, test_restore_strict);
	tcase_add_test(tc, test_config_refused);
	tcase_add_test(tc, test_id_limit);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(httptxn_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
