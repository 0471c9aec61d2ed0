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
	ck_assert_str_eq(t.mt_url, "https://secure.test:80/p");
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
		{ "*", MEDREQ_E_ORIGIN_FORM },
		{ "", MEDREQ_E_ORIGIN_FORM },
		{ "ftp://a.test/", "bad_scheme" },
		{ "http:/a.test/", "bad_scheme" },
		{ "http://u:p@a.test/", "userinfo" },
		{ "http://a.test/#frag", "fragment" },
		{ "http://127.0.0.1.5/", "ambiguous_numeric_host" },
		{ "http://08.0.0.1/", "ambiguous_numeric_host" },
		{ "http://a..test/", "bad_host" },
		{ "http://.a.test/", "bad_host" },
		{ "http://[fe80::1%25eth0]/", "bad_ipv6" },
		{ "http://a.test:0/", "bad_port" },
		{ "http://a.test:65536/", "bad_port" },
		{ "http://a test/", "bad_host" },
		{ "http://a.test/a%2fb", "encoded_delimiter" },
		{ "http://a.test/%2e%2e/x", "encoded_delimiter" },
		{ "http://a.test/a/../b", "dot_segment" },
		{ "http://a.test/a%252fb", "double_encoding" },
		{ "http://a.test\\@b.test/", "backslash" },
		{ "http://xn--nxasmq6b.test/", "idna_host" },
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

/* Exotic IPv4 forms parse to their one canonical address (boundaryd then judges it). */
START_TEST(test_target_canonical)
{
	struct medreq_target t;
	const char *code;

	ck_assert_int_eq(medreq_parse_target("http://2130706433:8080/a%7eb?Q=%aa", &t, &code), 0);
	ck_assert_str_eq(t.mt_host, "127.0.0.1");
	ck_assert_str_eq(t.mt_url, "http://127.0.0.1:8080/a~b?Q=%AA");
	ck_assert_str_eq(t.mt_path, "/a~b?Q=%AA");
	ck_assert_int_eq(medreq_parse_target("http://0x7f.1/", &t, &code), 0);
	ck_assert_str_eq(t.mt_url, "http://127.0.0.1/");
	ck_assert_int_eq(medreq_parse_target("http://[::FFFF:7F00:1]/", &t, &code), 0);
	ck_assert_str_eq(t.mt_host, "::ffff:127.0.0.1");
	ck_assert_str_eq(t.mt_authority, "[::ffff:127.0.0.1]");
}
END_TEST

START_TEST(test_host_check)
{
	struct medreq_target t;
	const char *code;

	ck_assert_int_eq(medreq_parse_target("http://up.test:8080/x", &t, &code), 0);
	ck_assert_int_eq(medreq_host_check(&t, "up.test:8080", &code), 0);
	ck_assert_int_eq(medreq_host_check(&t, "UP.TEST:8080", &code), 0);
	const char *bad[] = { "up.test", "other.test:8080", "up.test:8081", "up.test:08080",
		"up.test:8080@x", "up.test:8080/", "", "up.test.:8080", "192.0.2.10:8080" };
	for (size_t i = 0; i < nitems(bad); i++) {
		ck_assert_msg(medreq_host_check(&t, bad[i], &code) == -1, "%s", bad[i]);
		ck_assert_str_eq(code, MEDREQ_E_HOST_MISMATCH);
	}
	ck_assert_int_eq(medreq_host_check(&t, NULL, &code), -1);
	ck_assert_str_eq(code, MEDREQ_E_HOST_MISSING);
	ck_assert_int_eq(medreq_parse_target("http://up.test/", &t, &code), 0);
	ck_assert_int_eq(medreq_host_check(&t, "up.test", &code), 0);
	ck_assert_int_eq(medreq_host_check(&t, "up.test:80", &code), 0);
	ck_assert_int_eq(medreq_parse_target("http://2130706433/", &t, &code), 0);
	ck_assert_int_eq(medreq_host_check(&t, "127.0.0.1", &code), 0);
	ck_assert_int_eq(medreq_host_check(&t, "0x7f.1", &code), 0);
	ck_assert_int_eq(medreq_parse_target("https://[2001:db8::1]/", &t, &code), 0);
	ck_assert_int_eq(medreq_host_check(&t, "[2001:DB8::1]:443", &code), 0);
	ck_assert_int_eq(medreq_host_check(&t, "[2001:db8::2]", &code), -1);
}
END_TEST

START_TEST(test_redirect_target)
{
	struct medreq_target base, n;
	const char *d;

	ck_assert_int_eq(medreq_parse_target("http://up.test:8080/a/b?q=1", &base, &d), 0);
	ck_assert_int_eq(medreq_redirect_target(&base, "/c?r=2", &n, &d), 0);
	ck_assert_str_eq(n.mt_url, "http://up.test:8080/c?r=2");
	ck_assert_int_eq(medreq_redirect_target(&base, "//other.test/x", &n, &d), 0);
	ck_assert_str_eq(n.mt_url, "http://other.test/x");
	ck_assert_int_eq(medreq_redirect_target(&base, "HTTPS://Other.Test:8443/y", &n, &d), 0);
	ck_assert_str_eq(n.mt_url, "https://other.test:8443/y");
	ck_assert_int_eq(n.mt_tls, 1);
	ck_assert_int_eq(medreq_redirect_target(&base, "http://0251.0376.0251.0376/", &n, &d), 0);
	ck_assert_str_eq(n.mt_host, "169.254.169.254");
	ck_assert_int_eq(medreq_parse_target("http://[2001:db8::1]:81/", &base, &d), 0);
	ck_assert_int_eq(medreq_redirect_target(&base, "/z", &n, &d), 0);
	ck_assert_str_eq(n.mt_url, "http://[2001:db8::1]:81/z");
	const char *bad[] = { "", "c", "../c", "ftp://a.test/", "javascript:alert(1)",
		"http://a.test/%2e%2e/", "/a/../b", "http://u@a.test/", "/\\evil.test/",
		"http:/evil.test/", "http://evil.test/#f", "///x" };
	for (size_t i = 0; i < nitems(bad); i++)
		ck_assert_msg(medreq_redirect_target(&base, bad[i], &n, &d) == -1, "%s", bad[i]);
	ck_assert_int_eq(medreq_redirect_target(&base, NULL, &n, &d), -1);
	for (int s = 100; s < 600; s++)
		ck_assert_int_eq(medreq_is_redirect(s), s == 301 || s == 302 || s == 303 ||
		    s == 307 || s == 308);
}
END_TEST

START_TEST(test_redacted)
{
	char out[64];

	medreq_redacted_url("http://a.test/p?token=secret", out, sizeof(out));
	ck_assert_str_eq(out, "http://a.test/p?[redacted]");
	medreq_redacted_url("http://a.test/p?", out, sizeof(out));
	ck_assert_str_eq(out, "http://a.test/p?[redacted]");
	medreq_redacted_url("http://a.test/p", out, sizeof(out));
	ck_assert_str_eq(out, "http://a.test/p");
	medreq_redacted_url("http://a.test/p?token=secret", out, 20);
	ck_assert_ptr_null(strstr(out, "secret"));
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

	/* The socket address form (bind and connect use it). */
	struct sockaddr_storage ss;
	socklen_t sl;
	ck_assert_int_eq(netpolicy_listen_sockaddr("198.51.100.1:3128", &ss, &sl), 0);
	ck_assert_int_eq(ss.ss_family, AF_INET);
	ck_assert_uint_eq(sl, sizeof(struct sockaddr_in));
	ck_assert_uint_eq(ntohs(((struct sockaddr_in *)&ss)->sin_port), 3128);
	ck_assert_uint_eq(ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr), 0xc6336401u);
	ck_assert_int_eq(netpolicy_listen_sockaddr("[2001:db8::1]:53", &ss, &sl), 0);
	ck_assert_int_eq(ss.ss_family, AF_INET6);
	ck_assert_uint_eq(sl, sizeof(struct sockaddr_in6));
	ck_assert_uint_eq(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 53);
	ck_assert_uint_eq(((struct sockaddr_in6 *)&ss)->sin6_addr.s6_addr[15], 1);
	for (size_t i = 0; i < nitems(bad); i++)
		ck_assert_msg(netpolicy_listen_sockaddr(bad[i], &ss, &sl) == -1, "%s", bad[i]);
}
END_TEST

static Suite *
medreq_suite(void)
{
	Suite *s = suite_create("medreq");
	TCase *tc = tcase_create("medreq");

	tcase_add_test(tc, test_target_accepted);
	tcase_add_test(tc, test_target_refused);
	tcase_add_test(tc, test_target_canonical);
	tcase_add_test(tc, test_host_check);
	tcase_add_test(tc, test_redirect_target);
	tcase_add_test(tc, test_redacted);
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
