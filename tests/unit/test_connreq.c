/*
 * test_connreq.c: the CONNECT egress's request head (lib/connreq.c).
 */
#include "connreq.h"
#include "unit.h"

#define EXPECT "gensee:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
/* base64 of EXPECT */
#define GOOD "Z2Vuc2VlOjAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

static int
parse(const char *head, struct connreq *cr, int *status, const char **code)
{
	return connreq_parse(head, strlen(head), EXPECT, cr, status, code);
}

START_TEST(test_accepted)
{
	struct connreq cr;
	const char *code = NULL;
	int st = 0;

	ck_assert_int_eq(parse("CONNECT API.Example.com:443 HTTP/1.1\r\nHost: x\r\n"
	    "Proxy-Authorization: Basic " GOOD, &cr, &st, &code), 0);
	ck_assert_str_eq(cr.cr_host, "api.example.com");
	ck_assert_uint_eq(cr.cr_port, 443);
	ck_assert_int_eq(parse("CONNECT a.example:8443 HTTP/1.0\r\nproxy-authorization:   basic "
	    GOOD "  ", &cr, &st, &code), 0);
}
END_TEST

START_TEST(test_refused)
{
	struct {
		const char *head;
		int status;
		const char *code;
	} bad[] = {
		{ "GET http://a.example/ HTTP/1.1\r\nProxy-Authorization: Basic " GOOD, 405,
		    "connect_only" },
		{ "CONNECT a.example:443 HTTP/1.1", 407, "proxy_auth_required" },
		{ "CONNECT a.example:443 HTTP/1.1\r\nProxy-Authorization: Basic Z2Vuc2VlOng=", 407,
		    "proxy_auth_required" },
		/* the right credential twice is still ambiguous */
		{ "CONNECT a.example:443 HTTP/1.1\r\nProxy-Authorization: Basic " GOOD
		    "\r\nProxy-Authorization: Basic " GOOD, 407, "proxy_auth_required" },
		{ "CONNECT a.example:443 HTTP/1.1\r\nProxy-Authorization: Bearer " GOOD, 407,
		    "proxy_auth_required" },
		{ "CONNECT 192.0.2.10:443 HTTP/1.1\r\nProxy-Authorization: Basic " GOOD, 403,
		    "address_literal" },
		{ "CONNECT 2130706433:443 HTTP/1.1\r\nProxy-Authorization: Basic " GOOD, 403,
		    "address_literal" },
		{ "CONNECT [2001:db8::1]:443 HTTP/1.1\r\nProxy-Authorization: Basic " GOOD, 403,
		    "address_literal" },
		{ "CONNECT 0x7f.1:443 HTTP/1.1\r\nProxy-Authorization: Basic " GOOD, 403,
		    "address_literal" },
		{ "CONNECT 127.1:443 HTTP/1.1\r\nProxy-Authorization: Basic " GOOD, 403,
		    "address_literal" },
		{ "CONNECT a.example:0443 HTTP/1.1\r\nProxy-Authorization: Basic " GOOD, 400,
		    "bad_target" },
		{ "CONNECT a.example:65536 HTTP/1.1\r\nProxy-Authorization: Basic " GOOD, 400,
		    "bad_target" },
		{ "CONNECT a.example HTTP/1.1\r\nProxy-Authorization: Basic " GOOD, 400,
		    "bad_target" },
		{ "CONNECT a_b..example:443 HTTP/1.1\r\nProxy-Authorization: Basic " GOOD, 400,
		    "bad_host" },
		{ "CONNECT a@b.example:443 HTTP/1.1\r\nProxy-Authorization: Basic " GOOD, 400,
		    "bad_host" },
		{ "CONNECT a.example:443 HTTP/2\r\nProxy-Authorization: Basic " GOOD, 400,
		    "malformed_request" },
		{ "CONNECT a.example:443 HTTP/1.1\nProxy-Authorization: Basic " GOOD, 400,
		    "malformed_request" },
		{ "CONNECT a.example:443 HTTP/1.1\r\n\r\nProxy-Authorization: Basic " GOOD, 400,
		    "malformed_request" },
	};
	for (size_t i = 0; i < nitems(bad); i++) {
		struct connreq cr;
		const char *code = NULL;
		int st = 0;
		ck_assert_msg(parse(bad[i].head, &cr, &st, &code) == -1, "accepted: %s", bad[i].head);
		ck_assert_msg(st == bad[i].status && strcmp(code, bad[i].code) == 0,
		    "%s: %d %s", bad[i].head, st, code);
	}
}
END_TEST

START_TEST(test_base64)
{
	unsigned char out[16];
	size_t n = 0;

	ck_assert_int_eq(connreq_b64decode("YWJj", 4, out, sizeof(out), &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(connreq_b64decode("YQ==", 4, out, sizeof(out), &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(connreq_b64decode("YQ=", 3, out, sizeof(out), &n), -1);
	/* Non-canonical: the dropped bits set (found by fuzz_connreq). */
	ck_assert_int_eq(connreq_b64decode("YR==", 4, out, sizeof(out), &n), -1);
	ck_assert_int_eq(connreq_b64decode("Z2Vuc2VlOni=", 12, out, sizeof(out), &n), -1);
	ck_assert_int_eq(connreq_b64decode("Z2Vuc2VlOng=", 12, out, sizeof(out), &n), 0);
	ck_assert_int_eq(connreq_b64decode("Y=Q=", 4, out, sizeof(out), &n), -1);
	ck_assert_int_eq(connreq_b64decode("YWJj YWJj", 9, out, sizeof(out), &n), -1);
	ck_assert_int_eq(connreq_b64decode("YWJjYWJjYWJjYWJjYWJjYWJj", 24, out, 16, &n), -1);
}
END_TEST

static Suite *
connreq_suite(void)
{
	Suite *s = suite_create("connreq");
	TCase *tc = tcase_create("connreq");

	tcase_add_test(tc, test_accepted);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_base64);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(connreq_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
