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
		{ "get http://a.example/ HTTP/1.1\r\nProxy-Authorization: Basic " GOOD, 400,
		    "malformed_request" },
		{ "CONNECT a.example:443 HTTP/1.1\r\nProxy-Authorization: Basic " GOOD
		    "\r\nX-A : b", 400, "bad_header" },
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

/* The upstream head of an accepted absolute-form request. */
static void
forward_ok(const char *head, const char *method, const char *host, unsigned port,
    const char *path, const char *upstream)
{
	struct connreq cr;
	const char *code = NULL;
	int st = 0;

	ck_assert_msg(parse(head, &cr, &st, &code) == 0, "refused %d %s: %s", st, code, head);
	ck_assert_int_eq(cr.cr_kind, CONNREQ_FORWARD);
	ck_assert_str_eq(cr.cr_method, method);
	ck_assert_str_eq(cr.cr_host, host);
	ck_assert_uint_eq(cr.cr_port, port);
	ck_assert_str_eq(cr.cr_path, path);
	ck_assert_uint_eq(cr.cr_upstream_len, strlen(upstream));
	ck_assert_msg(memcmp(cr.cr_upstream, upstream, cr.cr_upstream_len) == 0, "upstream: %.*s",
	    (int)cr.cr_upstream_len, cr.cr_upstream);
	connreq_free(&cr);
	ck_assert_ptr_null(cr.cr_upstream);
}

START_TEST(test_forward)
{
	forward_ok("GET http://Pkgs.Example.com:8080/simple/x/?q=1 HTTP/1.1\r\nHost: evil.example\r\n"
	    "User-Agent: pip\r\nProxy-Authorization: Basic " GOOD "\r\nAccept: */*",
	    "GET", "pkgs.example.com", 8080, "/simple/x/",
	    "GET /simple/x/?q=1 HTTP/1.1\r\nHost: pkgs.example.com:8080\r\nUser-Agent: pip\r\n"
	    "Accept: */*\r\nConnection: close\r\n\r\n");
	/* Port 80 implied; an empty path is "/"; hop-by-hop headers and those Connection names go. */
	forward_ok("POST http://a.example HTTP/1.0\r\nProxy-Authorization: Basic " GOOD
	    "\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nProxy-Connection: keep-alive"
	    "\r\nKeep-Alive: 300\r\nTE: trailers\r\nUpgrade: h2c\r\nContent-Length: 3",
	    "POST", "a.example", 80, "/",
	    "POST / HTTP/1.0\r\nHost: a.example\r\nContent-Length: 3\r\nConnection: close\r\n\r\n");
	forward_ok("PUT http://a.example/x?y HTTP/1.1\r\nProxy-Authorization: Basic " GOOD
	    "\r\nTransfer-Encoding: chunked", "PUT", "a.example", 80, "/x",
	    "PUT /x?y HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n"
	    "Connection: close\r\n\r\n");
	forward_ok("GET http://a.example?only HTTP/1.1\r\nProxy-Authorization: Basic " GOOD,
	    "GET", "a.example", 80, "/", "GET /?only HTTP/1.1\r\nHost: a.example\r\n"
	    "Connection: close\r\n\r\n");
}
END_TEST

/*
 * Request smuggling and other double readings: each refused, with its
 * code (a forwarded head is read by an upstream after us).
 */
START_TEST(test_forward_refused)
{
	struct {
		const char *head;
		int status;
		const char *code;
	} bad[] = {
		{ "GET http://a.example/ HTTP/1.1", 407, "proxy_auth_required" },
		{ "GET http://a.example/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2", 407,
		    "proxy_auth_required" },
		{ "POST http://a.example/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1", 400,
		    "duplicate_content_length" },
		{ "POST http://a.example/ HTTP/1.1\r\nContent-Length: 1\r\n"
		    "Transfer-Encoding: chunked", 400, "content_length_with_transfer_encoding" },
		{ "GET http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked", 400,
		    "transfer_encoding_not_allowed" },
		{ "HEAD http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked", 400,
		    "transfer_encoding_not_allowed" },
		{ "POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked", 400,
		    "bad_transfer_encoding" },
		{ "POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
		    "Transfer-Encoding: chunked", 400, "bad_transfer_encoding" },
		{ "POST http://a.example/ HTTP/1.1\r\nContent-Length: +5", 400,
		    "bad_content_length" },
		{ "POST http://a.example/ HTTP/1.1\r\nContent-Length: 1, 1", 400,
		    "bad_content_length" },
		{ "GET http://a.example/ HTTP/1.1\r\nHost: a\r\nHost: b", 400, "duplicate_host" },
		{ "GET http://a.example/ HTTP/1.1\r\nX-A: b\r\n c", 400, "obs_fold" },
		{ "GET http://a.example/ HTTP/1.1\r\nX-A: b\r\n\tc", 400, "obs_fold" },
		{ "GET http://a.example/ HTTP/1.1\nHost: a", 400, "malformed_request" },
		{ "GET http://a.example/ HTTP/1.1\r\nX-A: b\rc", 400, "malformed_request" },
		{ "GET http://a.example/ HTTP/1.1\r\nContent Length: 5", 400, "bad_header" },
		{ "GET http://a.example/ HTTP/1.1\r\nX-A: b\x01", 400, "bad_header" },
		{ "GET  http://a.example/ HTTP/1.1", 400, "malformed_request" },
		{ "GET http://a.example/ HTTP/1.1 ", 400, "malformed_request" },
		{ "GET / HTTP/1.1", 400, "absolute_form_required" },
		{ "GET https://a.example/ HTTP/1.1", 400, "https_needs_connect" },
		{ "GET ftp://a.example/ HTTP/1.1", 400, "bad_target" },
		{ "GET http://user:pw@a.example/ HTTP/1.1", 400, "bad_target" },
		{ "GET http://a.example/#frag HTTP/1.1", 400, "bad_target" },
		{ "GET http://a.example:/ HTTP/1.1", 400, "bad_target" },
		{ "GET http://a.example:080/ HTTP/1.1", 400, "bad_target" },
		{ "GET http:/// HTTP/1.1", 400, "bad_target" },
		{ "GET http://192.0.2.10/ HTTP/1.1", 403, "address_literal" },
		{ "GET http://[2001:db8::1]:80/ HTTP/1.1", 403, "address_literal" },
		{ "GET http://0x7f.1/ HTTP/1.1", 403, "address_literal" },
		{ "GET http://a..example/ HTTP/1.1", 400, "bad_host" },
	};
	for (size_t i = 0; i < nitems(bad); i++) {
		struct connreq cr;
		const char *code = NULL;
		char head[1024];
		int st = 0;
		/* Authenticated, unless the case is about the credential. */
		snprintf(head, sizeof(head), "%s%s", bad[i].head, bad[i].status == 407 ? "" :
		    "\r\nProxy-Authorization: Basic " GOOD);
		ck_assert_msg(parse(head, &cr, &st, &code) == -1, "accepted: %s", head);
		ck_assert_msg(st == bad[i].status && strcmp(code, bad[i].code) == 0,
		    "%s: %d %s", head, st, code);
		ck_assert_ptr_null(cr.cr_upstream);
	}
	/* A valid line of too many headers is refused, not truncated. */
	char big[CONNREQ_HEAD_MAX];
	size_t o = (size_t)snprintf(big, sizeof(big), "GET http://a.example/ HTTP/1.1");
	for (int i = 0; i < CONNREQ_MAX_LINES; i++)
		o += (size_t)snprintf(big + o, sizeof(big) - o, "\r\nX: %d", i);
	struct connreq cr;
	const char *code = NULL;
	int st = 0;
	ck_assert_int_eq(parse(big, &cr, &st, &code), -1);
	ck_assert_int_eq(st, 431);
}
END_TEST

static Suite *
connreq_suite(void)
{
	Suite *s = suite_create("connreq");
	TCase *tc = tcase_create("connreq");

	tcase_add_test(tc, test_accepted);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_forward);
	tcase_add_test(tc, test_forward_refused);
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
