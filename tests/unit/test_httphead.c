/*
 * test_httphead.c: strict request framing (lib/httphead.c), with the
 * request-smuggling table: each row raw bytes as a client sends them, and
 * accepted or refused with its stable code.
 */
#include <string.h>

#include "httphead.h"
#include "unit.h"

#define MAXH 65536

static const struct {
	const char *raw;
	const char *code;	/* NULL: accepted */
} smuggle[] = {
	/* accepted */
	{ "GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\n\r\n", NULL },
	{ "GET http://up.test/ HTTP/1.0\r\n\r\n", NULL },
	{ "POST http://up.test/ HTTP/1.1\r\nHost: up.test\r\nContent-Length: 4\r\n\r\nabcd", NULL },
	{ "POST http://up.test/ HTTP/1.1\r\nHost: up.test\r\nTransfer-Encoding: Chunked\r\n\r\n",
	    NULL },
	{ "GET http://up.test/ HTTP/1.1\r\nHost:up.test\r\nX-Empty:\r\nX-Obs: caf\xc3\xa9\r\n\r\n",
	    NULL },
	{ "GET http://up.test/ HTTP/1.1\r\nContent-Length:  0 \r\n\r\n", NULL },
	/* CL.CL: two lengths, equal or not, or a list */
	{ "POST http://up.test/ HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\n",
	    HTTPHEAD_E_DUP_CL },
	{ "POST http://up.test/ HTTP/1.1\r\nContent-Length: 4\r\ncontent-length: 4\r\n\r\n",
	    HTTPHEAD_E_DUP_CL },
	{ "POST http://up.test/ HTTP/1.1\r\nContent-Length: 4, 4\r\n\r\n", HTTPHEAD_E_BAD_CL },
	{ "POST http://up.test/ HTTP/1.1\r\nContent-Length: +4\r\n\r\n", HTTPHEAD_E_BAD_CL },
	{ "POST http://up.test/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", HTTPHEAD_E_BAD_CL },
	{ "POST http://up.test/ HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", HTTPHEAD_E_BAD_CL },
	{ "POST http://up.test/ HTTP/1.1\r\nContent-Length:\r\n\r\n", HTTPHEAD_E_BAD_CL },
	{ "POST http://up.test/ HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n", HTTPHEAD_E_BAD_CL },
	{ "POST http://up.test/ HTTP/1.1\r\nContent-Length: 18446744073709551617\r\n\r\n",
	    HTTPHEAD_E_BAD_CL },
	/* CL.TE and TE.CL */
	{ "POST http://up.test/ HTTP/1.1\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "0\r\n\r\nG", HTTPHEAD_E_CL_TE },
	{ "POST http://up.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
	    HTTPHEAD_E_CL_TE },
	/* TE obfuscations */
	{ "POST http://up.test/ HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n", HTTPHEAD_E_BAD_TE },
	{ "POST http://up.test/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	    HTTPHEAD_E_BAD_TE },
	{ "POST http://up.test/ HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
	    HTTPHEAD_E_BAD_TE },
	{ "POST http://up.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
	    "chunked\r\n\r\n", HTTPHEAD_E_BAD_TE },
	{ "POST http://up.test/ HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n", HTTPHEAD_E_BAD_TE },
	{ "POST http://up.test/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", HTTPHEAD_E_BAD_TE },
	{ "POST http://up.test/ HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n", HTTPHEAD_E_HEADER },
	{ "POST http://up.test/ HTTP/1.1\r\nTransfer-Encoding\t: chunked\r\n\r\n", HTTPHEAD_E_HEADER },
	{ "POST http://up.test/ HTTP/1.1\r\n Transfer-Encoding: chunked\r\n\r\n", HTTPHEAD_E_OBS_FOLD },
	{ "POST http://up.test/ HTTP/1.1\r\nX: y\r\n\tTransfer-Encoding: chunked\r\n\r\n",
	    HTTPHEAD_E_OBS_FOLD },
	{ "POST http://up.test/ HTTP/1.1\r\nTransfer-Encoding: \x0b" "chunked\r\n\r\n",
	    HTTPHEAD_E_HEADER },
	/* TE on a request without a body */
	{ "GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "0\r\n\r\n", HTTPHEAD_E_TE_NO_BODY },
	{ "HEAD http://up.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
	    HTTPHEAD_E_TE_NO_BODY },
	/* line ends */
	{ "GET http://up.test/ HTTP/1.1\nHost: up.test\n\n", HTTPHEAD_E_BARE_LF },
	{ "GET http://up.test/ HTTP/1.1\r\nHost: up.test\n\r\n", HTTPHEAD_E_BARE_LF },
	{ "GET http://up.test/ HTTP/1.1\r\nX: a\nContent-Length: 5\r\n\r\n", HTTPHEAD_E_BARE_LF },
	{ "GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\n\n", HTTPHEAD_E_BARE_LF },
	{ "GET http://up.test/ HTTP/1.1\rHost: up.test\r\n\r\n", HTTPHEAD_E_BARE_CR },
	{ "GET http://up.test/ HTTP/1.1\r\nX: a\rContent-Length: 5\r\n\r\n", HTTPHEAD_E_BARE_CR },
	/* obs-fold in any header */
	{ "GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\nX-A: 1\r\n 2\r\n\r\n",
	    HTTPHEAD_E_OBS_FOLD },
	/* header syntax */
	{ "GET http://up.test/ HTTP/1.1\r\nHost up.test\r\n\r\n", HTTPHEAD_E_HEADER },
	{ "GET http://up.test/ HTTP/1.1\r\n: x\r\n\r\n", HTTPHEAD_E_HEADER },
	{ "GET http://up.test/ HTTP/1.1\r\nX-\x01: x\r\n\r\n", HTTPHEAD_E_HEADER },
	{ "GET http://up.test/ HTTP/1.1\r\nX: a\x7f\r\n\r\n", HTTPHEAD_E_HEADER },
	/* request line */
	{ "\r\nGET http://up.test/ HTTP/1.1\r\n\r\n", HTTPHEAD_E_REQUEST_LINE },
	{ "GET  http://up.test/ HTTP/1.1\r\n\r\n", HTTPHEAD_E_REQUEST_LINE },
	{ "GET http://up.test/  HTTP/1.1\r\n\r\n", HTTPHEAD_E_REQUEST_LINE },
	{ "GET http://up.test/ HTTP/1.1 \r\n\r\n", HTTPHEAD_E_REQUEST_LINE },
	{ "GET\thttp://up.test/ HTTP/1.1\r\n\r\n", HTTPHEAD_E_REQUEST_LINE },
	{ "GET http://up.test/ HTTP/2.0\r\n\r\n", HTTPHEAD_E_REQUEST_LINE },
	{ "GET http://up.test/ http/1.1\r\n\r\n", HTTPHEAD_E_REQUEST_LINE },
	{ "GET http://up.test/\r\n\r\n", HTTPHEAD_E_REQUEST_LINE },
	{ "GET http://up.test/a b HTTP/1.1\r\n\r\n", HTTPHEAD_E_REQUEST_LINE },
	{ "G(T http://up.test/ HTTP/1.1\r\n\r\n", HTTPHEAD_E_REQUEST_LINE },
	{ "\r\n\r\n", HTTPHEAD_E_REQUEST_LINE },
};

START_TEST(test_smuggling_table)
{
	for (size_t i = 0; i < sizeof(smuggle) / sizeof(smuggle[0]); i++) {
		struct httphead h;
		const char *code = NULL;
		int status = 0;
		int rc;

		rc = httphead_check(smuggle[i].raw, strlen(smuggle[i].raw), MAXH, &h, &status,
		    &code);
		if (smuggle[i].code == NULL) {
			ck_assert_msg(rc == 1, "row %zu: %d %s", i, rc, code ? code : "");
			ck_assert_ptr_null(code);
		} else {
			ck_assert_msg(rc == -1 && status == 400 && code != NULL &&
			    strcmp(code, smuggle[i].code) == 0, "row %zu: %d %d %s, want %s", i, rc,
			    status, code ? code : "(accepted)", smuggle[i].code);
		}
	}
}
END_TEST

START_TEST(test_head_fields)
{
	struct httphead h;
	const char *code;
	int status;
	const char *r = "POST http://up.test/ HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcdGET";

	ck_assert_int_eq(httphead_check(r, strlen(r), MAXH, &h, &status, &code), 1);
	ck_assert_uint_eq(h.hh_len, strlen(r) - 7);
	ck_assert_uint_eq(h.hh_content_length, 4);
	ck_assert_int_eq(h.hh_chunked, 0);
	ck_assert_str_eq(h.hh_method, "POST");
	r = "PUT http://up.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
	ck_assert_int_eq(httphead_check(r, strlen(r), MAXH, &h, &status, &code), 1);
	ck_assert_int_eq(h.hh_chunked, 1);
	ck_assert_int_eq(h.hh_http10, 0);
	/* a NUL inside a value (the table's rows are C strings) */
	static const char nul[] = "GET http://up.test/ HTTP/1.1\r\nX: a\0b\r\n\r\n";
	ck_assert_int_eq(httphead_check(nul, sizeof(nul) - 1, MAXH, &h, &status, &code), -1);
	ck_assert_str_eq(code, HTTPHEAD_E_HEADER);
}
END_TEST

/* Every prefix of an accepted head asks for more; a refusal comes as soon as it is certain. */
START_TEST(test_incremental)
{
	const char *r = "GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\n\r\n";
	const char *bad = "GET http://up.test/ HTTP/1.1\nHost: up.test\r\n\r\n";
	struct httphead h;
	const char *code;
	int status;

	for (size_t n = 0; n < strlen(r); n++)
		ck_assert_int_eq(httphead_check(r, n, MAXH, &h, &status, &code), 0);
	ck_assert_int_eq(httphead_check(bad, 28, MAXH, &h, &status, &code), 0);
	ck_assert_int_eq(httphead_check(bad, 29, MAXH, &h, &status, &code), -1);
	ck_assert_str_eq(code, HTTPHEAD_E_BARE_LF);
}
END_TEST

/* Read in two parts at every split, a row's verdict and code are the same. */
START_TEST(test_check_from)
{
	for (size_t i = 0; i < sizeof(smuggle) / sizeof(smuggle[0]); i++) {
		const char *raw = smuggle[i].raw, *code, *code2;
		size_t len = strlen(raw);
		struct httphead h, h2;
		int status, status2, want;

		want = httphead_check(raw, len, MAXH, &h, &status, &code);
		for (size_t k = 0; k <= len; k++) {
			int first = httphead_check(raw, k, MAXH, &h2, &status2, &code2);
			if (first != 0)
				continue;	/* decided already within k bytes */
			ck_assert_msg(httphead_check_from(raw, len, k, MAXH, &h2, &status2,
			    &code2) == want, "row %zu split %zu", i, k);
			ck_assert_uint_eq(h2.hh_len, h.hh_len);
			ck_assert_msg((code == NULL && code2 == NULL) ||
			    (code != NULL && code2 != NULL && strcmp(code, code2) == 0),
			    "row %zu split %zu: %s %s", i, k, code ? code : "-", code2 ? code2 : "-");
		}
	}
}
END_TEST

START_TEST(test_too_large)
{
	static char big[MAXH + 10];
	struct httphead h;
	const char *code;
	int status;

	memset(big, 'a', sizeof(big));
	memcpy(big, "GET http://up.test/ HTTP/1.1\r\nX: ", 33);
	ck_assert_int_eq(httphead_check(big, MAXH - 1, MAXH, &h, &status, &code), 0);
	ck_assert_int_eq(httphead_check(big, MAXH, MAXH, &h, &status, &code), -1);
	ck_assert_int_eq(status, 431);
	ck_assert_str_eq(code, HTTPHEAD_E_TOO_LARGE);
	/* the end just past the limit is not looked for */
	memcpy(big + MAXH - 2, "\r\n\r\n", 4);
	ck_assert_int_eq(httphead_check(big, sizeof(big), MAXH, &h, &status, &code), -1);
	ck_assert_int_eq(status, 431);
}
END_TEST

START_TEST(test_chunk_size)
{
	uint64_t n;
	const char *code;

	ck_assert_int_eq(httphead_chunk_size("0", 1, &n, &code), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(httphead_chunk_size("1aF", 3, &n, &code), 0);
	ck_assert_uint_eq(n, 0x1af);
	ck_assert_int_eq(httphead_chunk_size("10;name=v", 9, &n, &code), 0);
	ck_assert_uint_eq(n, 16);
	ck_assert_int_eq(httphead_chunk_size("", 0, &n, &code), -1);
	ck_assert_int_eq(httphead_chunk_size("0x10", 4, &n, &code), -1);
	ck_assert_int_eq(httphead_chunk_size("+5", 2, &n, &code), -1);
	ck_assert_int_eq(httphead_chunk_size("5 ", 2, &n, &code), -1);
	ck_assert_int_eq(httphead_chunk_size(" 5", 2, &n, &code), -1);
	ck_assert_int_eq(httphead_chunk_size("1000000000000000", 16, &n, &code), -1);
	ck_assert_str_eq(code, HTTPHEAD_E_BAD_CHUNK);
	ck_assert_int_eq(httphead_chunk_size("5;a\nb", 5, &n, &code), -1);
	ck_assert_str_eq(code, HTTPHEAD_E_BARE_LF);
	ck_assert_int_eq(httphead_trailer_line("X-T: 1", 6, &code), 0);
	ck_assert_int_eq(httphead_trailer_line(" X-T: 1", 7, &code), -1);
	ck_assert_str_eq(code, HTTPHEAD_E_OBS_FOLD);
}
END_TEST

static Suite *
httphead_suite(void)
{
	Suite *s = suite_create("httphead");
	TCase *tc = tcase_create("httphead");

	tcase_add_test(tc, test_smuggling_table);
	tcase_add_test(tc, test_head_fields);
	tcase_add_test(tc, test_incremental);
	tcase_add_test(tc, test_check_from);
	tcase_add_test(tc, test_too_large);
	tcase_add_test(tc, test_chunk_size);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(httphead_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
