/*
 * test_medreq.c: the HTTP mediator's request rules (lib/medreq.c) and the
 * proxy.listen parser (lib/netpolicy.c).
 */
#include <arpa/inet.h>

#include "medreq.h"
#include "netpolicy.h"
#include "unit.h"

START_TEST(test_target_accepted)
{
	struct medreq_target t;
	const char *code = "x";

	ck_assert_int_eq(medreq_parse_target("http://Up.Test:8080/a/b?q=1", &t, &code), 0);
	ck_assert_ptr_null(code);
	ck_assert_str_eq(t.mt_scheme, "http");
	ck_assert_str_eq(t.mt_host, "up.test");
	ck_assert_uint_eq(t.mt_port, 8080);
	ck_assert_str_eq(t.mt_authority, "up.test:8080");
	ck_assert_str_eq(t.mt_path, "/a/b?q=1");
	ck_assert_int_eq(medreq_parse_target("HTTP://192.0.2.10", &t, &code), 0);
	ck_assert_str_eq(t.mt_path, "/");
	ck_assert_uint_eq(t.mt_port, 80);
	ck_assert_str_eq(t.mt_authority, "192.0.2.10");
	ck_assert_int_eq(medreq_parse_target("https://Secure.Test/p", &t, &code), 0);
	ck_assert_str_eq(t.mt_scheme, "https");
	ck_assert_int_eq(t.mt_tls, 1);
	ck_assert_uint_eq(t.mt_port, 443);
	ck_assert_str_eq(t.mt_authority, "secure.test");
	ck_assert_int_eq(medreq_parse_target("https://secure.test:80/p", &t, &code), 0);
	ck_assert_str_eq(t.mt_authority, "secure.test:80");
	ck_assert_int_eq(medreq_parse_target("http://[2001:DB8::1]:81/x", &t, &code), 0);
	ck_assert_int_eq(t.mt_host_is_v6, 1);
	ck_assert_str_eq(t.mt_host, "2001:db8::1");
	ck_assert_str_eq(t.mt_authority, "[2001:db8::1]:81");
}
END_TEST

START_TEST(test_target_refused)
{
	static const struct {
		const char *uri;
		const char *code;
	} cases[] = {
		{ "/origin/form", MEDREQ_E_ORIGIN_FORM },
		{ "ftp://a.test/", MEDREQ_E_SCHEME },
		{ "http://u:p@a.test/", MEDREQ_E_USERINFO },
		{ "http://a.test/#frag", MEDREQ_E_FRAGMENT },
		{ "http://2130706433/", MEDREQ_E_AMBIGUOUS },
		{ "http://0x7f.1/", MEDREQ_E_AMBIGUOUS },
		{ "http://0177.0.0.1/", MEDREQ_E_AMBIGUOUS },
		{ "http://127.1/", MEDREQ_E_AMBIGUOUS },
		{ "http://a..test/", MEDREQ_E_HOST },
		{ "http://.a.test/", MEDREQ_E_HOST },
		{ "http://[fe80::1%25eth0]/", MEDREQ_E_MALFORMED },
		{ "http://a_b..c/", MEDREQ_E_HOST },
		{ "http://a.test:0/", MEDREQ_E_PORT },
		{ "http://a.test:65536/", MEDREQ_E_MALFORMED },
		{ "http://a test/", MEDREQ_E_MALFORMED },
		{ "", MEDREQ_E_MALFORMED },
		{ "*", MEDREQ_E_ORIGIN_FORM },
	};
	struct medreq_target t;

	for (size_t i = 0; i < nitems(cases); i++) {
		const char *code = NULL;
		ck_assert_msg(medreq_parse_target(cases[i].uri, &t, &code) == -1, "%s accepted",
		    cases[i].uri);
		ck_assert_msg(code != NULL && strcmp(code, cases[i].code) == 0, "%s: %s, not %s",
		    cases[i].uri, code ? code : "(null)", cases[i].code);
	}
}
END_TEST

START_TEST(test_headers)
{
	const char *dropped[] = { "Authorization", "proxy-authorization", "COOKIE", "Host",
		"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
		"Transfer-Encoding", "Upgrade", "Content-Length", "Proxy-Anything", "" };
	for (size_t i = 0; i < nitems(dropped); i++)
		ck_assert_msg(!medreq_request_header_forwarded(dropped[i], NULL), "%s", dropped[i]);
	ck_assert(medreq_request_header_forwarded("Accept", NULL));
	ck_assert(medreq_request_header_forwarded("X-Hop", "close"));
	ck_assert(!medreq_request_header_forwarded("X-Hop", "close, x-hop"));
	ck_assert(!medreq_request_header_forwarded("X-Hop", "X-HOP"));
	ck_assert(medreq_request_header_forwarded("X-Hop", "x-hopper"));
	ck_assert(medreq_response_header_allowed("Content-Type"));
	ck_assert(medreq_response_header_allowed("etag"));
	const char *never[] = { "Set-Cookie", "Set-Cookie2", "WWW-Authenticate",
		"Proxy-Authenticate", "Authorization", "X-Anything", "Connection" };
	for (size_t i = 0; i < nitems(never); i++)
		ck_assert_msg(!medreq_response_header_allowed(never[i]), "%s", never[i]);
}
END_TEST

START_TEST(test_listen)
{
	int fam;
	uint8_t a[16];
	uint16_t port;

	ck_assert_int_eq(netpolicy_parse_listen("198.51.100.1:3128", &fam, a, &port), 0);
	ck_assert_int_eq(fam, AF_INET);
	ck_assert_uint_eq(port, 3128);
	ck_assert_uint_eq(a[0], 198);
	ck_assert_int_eq(netpolicy_parse_listen("[2001:db8::1]:1", &fam, a, &port), 0);
	ck_assert_int_eq(fam, AF_INET6);
	ck_assert_uint_eq(port, 1);
	ck_assert_int_eq(netpolicy_parse_listen("0.0.0.0:65535", &fam, a, &port), 0);
	const char *bad[] = { "198.51.100.1", "198.51.100.1:", "198.51.100.1:0",
		"198.51.100.1:65536", "198.51.100.1:03128", "198.51.100.1:+1", "host.test:80",
		"2001:db8::1:80", "[2001:db8::1]80", "[]:80", ":80", "198.51.100.1:80 ", "" };
	for (size_t i = 0; i < nitems(bad); i++)
		ck_assert_msg(netpolicy_parse_listen(bad[i], &fam, a, &port) == -1, "%s", bad[i]);
	ck_assert_int_eq(netpolicy_parse_listen(NULL, &fam, a, &port), -1);
}
END_TEST

static Suite *
medreq_suite(void)
{
	Suite *s = suite_create("medreq");
	TCase *tc = tcase_create("medreq");

	tcase_add_test(tc, test_target_accepted);
	tcase_add_test(tc, test_target_refused);
	tcase_add_test(tc, test_headers);
	tcase_add_test(tc, test_listen);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(medreq_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
