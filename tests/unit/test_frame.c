/*
 * test_frame.c: the wire format (lib/frame.c).
 *
 * The frame decoder is the first code that sees bytes from an untrusted
 * peer, so every rejection rule in frame.h has a test here: the size limit
 * must apply from the header alone, and the payload must be exactly one
 * valid-UTF-8 JSON object.
 */
#include <poll.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <json-c/json.h>

#include "frame.h"
#include "unit.h"

#define OBJ "{\"proto\":1,\"id\":42,\"method\":\"system.status\",\"params\":{}}"

/* Header + payload into out; returns the frame length. */
static size_t
mkframe(uint8_t *out, size_t cap, const void *payload, size_t len)
{
	ck_assert_uint_le(len + FRAME_HEADER_LEN, cap);
	out[0] = (uint8_t)(len >> 24);
	out[1] = (uint8_t)(len >> 16);
	out[2] = (uint8_t)(len >> 8);
	out[3] = (uint8_t)len;
	memcpy(out + FRAME_HEADER_LEN, payload, len);
	return len + FRAME_HEADER_LEN;
}

static void
mkheader(uint8_t *out, uint32_t n)
{
	out[0] = (uint8_t)(n >> 24);
	out[1] = (uint8_t)(n >> 16);
	out[2] = (uint8_t)(n >> 8);
	out[3] = (uint8_t)n;
}

/* Decode payload (len bytes, may hold NUL) framed; return the status. */
static int
decode_payload(const void *payload, size_t len)
{
	uint8_t buf[512];
	struct json_object *o = NULL;
	size_t used = 99;
	size_t n = mkframe(buf, sizeof(buf), payload, len);
	int r = frame_decode(buf, n, FRAME_MAX_DEFAULT, &o, &used);

	if (r == FRAME_OK) {
		ck_assert_ptr_nonnull(o);
		ck_assert_uint_eq(used, n);
		json_object_put(o);
	} else {
		ck_assert_ptr_null(o);
		ck_assert_uint_eq(used, 0);
	}
	return r;
}

#define decode_str(s) decode_payload((s), sizeof(s) - 1)

START_TEST(test_decode_valid)
{
	uint8_t buf[256];
	struct json_object *o = NULL, *v;
	size_t used = 0;
	size_t n = mkframe(buf, sizeof(buf), OBJ, strlen(OBJ));

	ck_assert_int_eq(frame_decode(buf, n, FRAME_MAX_DEFAULT, &o, &used), FRAME_OK);
	ck_assert_uint_eq(used, n);
	ck_assert_ptr_nonnull(o);
	ck_assert(json_object_is_type(o, json_type_object));
	ck_assert(json_object_object_get_ex(o, "id", &v));
	ck_assert_int_eq(json_object_get_int64(v), 42);
	ck_assert(json_object_object_get_ex(o, "method", &v));
	ck_assert_str_eq(json_object_get_string(v), "system.status");
	json_object_put(o);
}
END_TEST

START_TEST(test_decode_valid_utf8)
{
	/* 2-, 3- and 4-byte forms and the edges next to the forbidden ranges. */
	ck_assert_int_eq(decode_str("{\"a\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}"), FRAME_OK);
	ck_assert_int_eq(decode_str("{\"a\":\"\xc2\x80\"}"), FRAME_OK);		/* U+0080 */
	ck_assert_int_eq(decode_str("{\"a\":\"\xed\x9f\xbf\"}"), FRAME_OK);	/* U+D7FF */
	ck_assert_int_eq(decode_str("{\"a\":\"\xee\x80\x80\"}"), FRAME_OK);	/* U+E000 */
	ck_assert_int_eq(decode_str("{\"a\":\"\xf4\x8f\xbf\xbf\"}"), FRAME_OK);	/* U+10FFFF */
}
END_TEST

START_TEST(test_need_more_each_prefix)
{
	uint8_t buf[256];
	size_t n = mkframe(buf, sizeof(buf), OBJ, strlen(OBJ));

	for (size_t k = 0; k < n; k++) {
		struct json_object *o = (struct json_object *)1;
		size_t used = 99;
		ck_assert_msg(frame_decode(buf, k, FRAME_MAX_DEFAULT, &o, &used) == FRAME_NEED_MORE,
		    "prefix of %zu/%zu bytes is not NEED_MORE", k, n);
		ck_assert_ptr_null(o);
		ck_assert_uint_eq(used, 0);
	}
	struct json_object *o = NULL;
	size_t used = 0;
	ck_assert_int_eq(frame_decode(buf, n, FRAME_MAX_DEFAULT, &o, &used), FRAME_OK);
	ck_assert_uint_eq(used, n);
	json_object_put(o);
}
END_TEST

START_TEST(test_oversize_from_header)
{
	uint8_t hdr[FRAME_HEADER_LEN];
	struct json_object *o = NULL;
	size_t used = 0;

	/* Only the 4 header bytes have arrived: the length alone condemns it. */
	mkheader(hdr, 1025);
	ck_assert_int_eq(frame_decode(hdr, sizeof(hdr), 1024, &o, &used), FRAME_ERR_OVERSIZE);
	ck_assert_ptr_null(o);
	mkheader(hdr, FRAME_MAX_DEFAULT + 1);
	ck_assert_int_eq(frame_decode(hdr, sizeof(hdr), FRAME_MAX_DEFAULT, &o, &used),
	    FRAME_ERR_OVERSIZE);
	mkheader(hdr, UINT32_MAX);
	ck_assert_int_eq(frame_decode(hdr, sizeof(hdr), FRAME_MAX_HOOK, &o, &used),
	    FRAME_ERR_OVERSIZE);
	/* Exactly the maximum is allowed and waits for its payload. */
	mkheader(hdr, 1024);
	ck_assert_int_eq(frame_decode(hdr, sizeof(hdr), 1024, &o, &used), FRAME_NEED_MORE);
	ck_assert_str_eq(frame_status_code(FRAME_ERR_OVERSIZE), "frame_oversize");
}
END_TEST

START_TEST(test_zero_length)
{
	uint8_t hdr[FRAME_HEADER_LEN + 8] = { 0 };
	struct json_object *o = NULL;
	size_t used = 0;

	ck_assert_int_eq(frame_decode(hdr, FRAME_HEADER_LEN, FRAME_MAX_DEFAULT, &o, &used),
	    FRAME_ERR_EMPTY);
	ck_assert_int_eq(frame_decode(hdr, sizeof(hdr), FRAME_MAX_DEFAULT, &o, &used),
	    FRAME_ERR_EMPTY);
	ck_assert_ptr_null(o);
	ck_assert_int_eq(frame_parse_payload((const uint8_t *)"", 0, &o), FRAME_ERR_EMPTY);
}
END_TEST

START_TEST(test_invalid_utf8)
{
	/* Overlong encodings of '/' and NUL (2, 3 and 4 bytes). */
	ck_assert_int_eq(decode_str("{\"a\":\"\xc0\xaf\"}"), FRAME_ERR_UTF8);
	ck_assert_int_eq(decode_str("{\"a\":\"\xc0\x80\"}"), FRAME_ERR_UTF8);
	ck_assert_int_eq(decode_str("{\"a\":\"\xc1\xbf\"}"), FRAME_ERR_UTF8);
	ck_assert_int_eq(decode_str("{\"a\":\"\xe0\x80\xaf\"}"), FRAME_ERR_UTF8);
	ck_assert_int_eq(decode_str("{\"a\":\"\xf0\x80\x80\xaf\"}"), FRAME_ERR_UTF8);
	ck_assert_int_eq(decode_str("{\"a\":\"\xf0\x8f\xbf\xbf\"}"), FRAME_ERR_UTF8);
	/* UTF-16 surrogates encoded as UTF-8 (CESU). */
	ck_assert_int_eq(decode_str("{\"a\":\"\xed\xa0\x80\"}"), FRAME_ERR_UTF8);
	ck_assert_int_eq(decode_str("{\"a\":\"\xed\xbf\xbf\"}"), FRAME_ERR_UTF8);
	/* Beyond U+10FFFF. */
	ck_assert_int_eq(decode_str("{\"a\":\"\xf4\x90\x80\x80\"}"), FRAME_ERR_UTF8);
	/* Truncated sequences: inside the string, and at the very end of the payload. */
	ck_assert_int_eq(decode_str("{\"a\":\"\xe2\x82\"}"), FRAME_ERR_UTF8);
	ck_assert_int_eq(decode_str("{\"a\":\"\xf0\x9f\x98\"}"), FRAME_ERR_UTF8);
	ck_assert_int_eq(decode_str("{\"a\":1}\xc3"), FRAME_ERR_UTF8);
	/* Bytes that never appear in UTF-8, and a lone continuation byte. */
	ck_assert_int_eq(decode_str("{\"a\":\"\xff\"}"), FRAME_ERR_UTF8);
	ck_assert_int_eq(decode_str("{\"a\":\"\xfe\"}"), FRAME_ERR_UTF8);
	ck_assert_int_eq(decode_str("{\"a\":\"\xf8\x88\x80\x80\x80\"}"), FRAME_ERR_UTF8);
	ck_assert_int_eq(decode_str("{\"a\":\"\x80\"}"), FRAME_ERR_UTF8);
	/* A raw NUL (not the \u0000 escape), inside a string and between tokens. */
	ck_assert_int_eq(decode_str("{\"a\":\"x\0y\"}"), FRAME_ERR_UTF8);
	ck_assert_int_eq(decode_str("{\"a\":1}\0"), FRAME_ERR_UTF8);
	ck_assert_str_eq(frame_status_code(FRAME_ERR_UTF8), "frame_invalid_utf8");

	/* The validator on its own. */
	ck_assert_int_eq(frame_utf8_valid((const uint8_t *)"abc", 3), 1);
	ck_assert_int_eq(frame_utf8_valid((const uint8_t *)"\xe2\x82\xac", 3), 1);
	ck_assert_int_eq(frame_utf8_valid((const uint8_t *)"\xe2\x82\xac", 2), 0);
	ck_assert_int_eq(frame_utf8_valid((const uint8_t *)"a\0b", 3), 0);
}
END_TEST

START_TEST(test_not_object)
{
	ck_assert_int_eq(decode_str("[1,2,3]"), FRAME_ERR_NOT_OBJECT);
	ck_assert_int_eq(decode_str("[]"), FRAME_ERR_NOT_OBJECT);
	ck_assert_int_eq(decode_str("\"a string\""), FRAME_ERR_NOT_OBJECT);
	ck_assert_int_eq(decode_str("123 "), FRAME_ERR_NOT_OBJECT);
	ck_assert_int_eq(decode_str("true "), FRAME_ERR_NOT_OBJECT);
	/*
	 * A bare number that fills the payload: json-c cannot know the number
	 * ended, so it reports "incomplete" and the frame is frame_invalid_json
	 * rather than frame_not_object. Either way it must be refused.
	 */
	int r = decode_str("123");
	ck_assert_msg(r == FRAME_ERR_NOT_OBJECT || r == FRAME_ERR_JSON, "bare number gave %d", r);
	ck_assert_str_eq(frame_status_code(FRAME_ERR_NOT_OBJECT), "frame_not_object");
}
END_TEST

START_TEST(test_invalid_json)
{
	ck_assert_int_eq(decode_str("{\"a\":}"), FRAME_ERR_JSON);
	ck_assert_int_eq(decode_str("{\"a\":1"), FRAME_ERR_JSON);
	ck_assert_int_eq(decode_str("{\"a\":1,}"), FRAME_ERR_JSON);
	ck_assert_int_eq(decode_str("{a:1}"), FRAME_ERR_JSON);
	ck_assert_int_eq(decode_str("{\"a\":01}"), FRAME_ERR_JSON);
	ck_assert_int_eq(decode_str("{\"a\":1/*c*/}"), FRAME_ERR_JSON);

	/* Nesting deeper than FRAME_JSON_DEPTH is refused, within it accepted. */
	char deep[256];
	size_t k = 0;
	for (int d = 0; d < 40; d++)
		deep[k++] = '[';
	for (int d = 0; d < 40; d++)
		deep[k++] = ']';
	char wrapped[300];
	int wl = snprintf(wrapped, sizeof(wrapped), "{\"a\":%.*s}", (int)k, deep);
	ck_assert_int_eq(decode_payload(wrapped, (size_t)wl), FRAME_ERR_JSON);
	wl = snprintf(wrapped, sizeof(wrapped), "{\"a\":%.*s%.*s}", 8, deep, 8, deep + 40);
	ck_assert_int_eq(decode_payload(wrapped, (size_t)wl), FRAME_OK);
}
END_TEST

START_TEST(test_trailing)
{
	ck_assert_int_eq(decode_str("{\"a\":1}x"), FRAME_ERR_TRAILING);
	ck_assert_int_eq(decode_str("{\"a\":1}{\"b\":2}"), FRAME_ERR_TRAILING);
	ck_assert_int_eq(decode_str("{\"a\":1} 1"), FRAME_ERR_TRAILING);
	ck_assert_str_eq(frame_status_code(FRAME_ERR_TRAILING), "frame_trailing_data");
}
END_TEST

START_TEST(test_back_to_back)
{
	static const char p1[] = "{\"n\":1}";
	static const char p2[] = "{\"n\":2,\"s\":\"two\"}";
	uint8_t buf[128];
	size_t n1 = mkframe(buf, sizeof(buf), p1, sizeof(p1) - 1);
	size_t n2 = mkframe(buf + n1, sizeof(buf) - n1, p2, sizeof(p2) - 1);
	struct json_object *o = NULL, *v;
	size_t used = 0;

	ck_assert_int_eq(frame_decode(buf, n1 + n2, 4096, &o, &used), FRAME_OK);
	ck_assert_uint_eq(used, n1);
	ck_assert(json_object_object_get_ex(o, "n", &v));
	ck_assert_int_eq(json_object_get_int(v), 1);
	json_object_put(o);

	ck_assert_int_eq(frame_decode(buf + used, n1 + n2 - used, 4096, &o, &used), FRAME_OK);
	ck_assert_uint_eq(used, n2);
	ck_assert(json_object_object_get_ex(o, "n", &v));
	ck_assert_int_eq(json_object_get_int(v), 2);
	json_object_put(o);
}
END_TEST

START_TEST(test_evbuffer_split)
{
	struct evbuffer *in = evbuffer_new();
	uint8_t buf[256];
	size_t n = mkframe(buf, sizeof(buf), OBJ, strlen(OBJ));
	/* A second frame's first bytes follow the first frame in the last add. */
	size_t n2 = mkframe(buf + n, sizeof(buf) - n, "{}", 2);
	struct json_object *o = (struct json_object *)1, *v;
	size_t off = 0;
	const size_t chunks[] = { 1, 2, 1, 5, 9, 17 };

	ck_assert_ptr_nonnull(in);
	for (size_t c = 0; c < nitems(chunks); c++) {
		ck_assert_int_eq(evbuffer_add(in, buf + off, chunks[c]), 0);
		off += chunks[c];
		ck_assert_int_eq(frame_decode_evbuffer(in, FRAME_MAX_DEFAULT, &o), FRAME_NEED_MORE);
		ck_assert_ptr_null(o);
		ck_assert_uint_eq(evbuffer_get_length(in), off); /* nothing drained */
	}
	ck_assert_uint_lt(off, n);
	ck_assert_int_eq(evbuffer_add(in, buf + off, n - off + 3), 0);
	ck_assert_int_eq(frame_decode_evbuffer(in, FRAME_MAX_DEFAULT, &o), FRAME_OK);
	ck_assert(json_object_object_get_ex(o, "id", &v));
	ck_assert_int_eq(json_object_get_int64(v), 42);
	json_object_put(o);
	/* Exactly the first frame was drained; the next one's 3 bytes wait. */
	ck_assert_uint_eq(evbuffer_get_length(in), 3);
	ck_assert_int_eq(frame_decode_evbuffer(in, FRAME_MAX_DEFAULT, &o), FRAME_NEED_MORE);
	ck_assert_int_eq(evbuffer_add(in, buf + n + 3, n2 - 3), 0);
	ck_assert_int_eq(frame_decode_evbuffer(in, FRAME_MAX_DEFAULT, &o), FRAME_OK);
	ck_assert_uint_eq(evbuffer_get_length(in), 0);
	json_object_put(o);
	evbuffer_free(in);
}
END_TEST

START_TEST(test_evbuffer_errors)
{
	struct evbuffer *in = evbuffer_new();
	struct json_object *o = NULL;
	uint8_t hdr[FRAME_HEADER_LEN];

	mkheader(hdr, 4097);
	ck_assert_int_eq(evbuffer_add(in, hdr, sizeof(hdr)), 0);
	ck_assert_int_eq(frame_decode_evbuffer(in, 4096, &o), FRAME_ERR_OVERSIZE);
	ck_assert_ptr_null(o);
	evbuffer_drain(in, evbuffer_get_length(in));

	mkheader(hdr, 0);
	ck_assert_int_eq(evbuffer_add(in, hdr, sizeof(hdr)), 0);
	ck_assert_int_eq(frame_decode_evbuffer(in, 4096, &o), FRAME_ERR_EMPTY);
	evbuffer_drain(in, evbuffer_get_length(in));

	uint8_t buf[64];
	size_t n = mkframe(buf, sizeof(buf), "[1]", 3);
	ck_assert_int_eq(evbuffer_add(in, buf, n), 0);
	ck_assert_int_eq(frame_decode_evbuffer(in, 4096, &o), FRAME_ERR_NOT_OBJECT);
	ck_assert_ptr_null(o);
	evbuffer_free(in);
}
END_TEST

START_TEST(test_evbuffer_roundtrip)
{
	struct evbuffer *b = evbuffer_new();
	struct json_object *obj = json_object_new_object(), *o = NULL, *v;

	json_object_object_add(obj, "path", json_object_new_string("/a/b\xc3\xa9"));
	json_object_object_add(obj, "n", json_object_new_int64(INT64_MAX));
	ck_assert_int_eq(frame_encode_evbuffer(b, obj), 0);
	ck_assert_int_eq(frame_encode_evbuffer(b, obj), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(frame_decode_evbuffer(b, FRAME_MAX_DEFAULT, &o), FRAME_OK);
		ck_assert(json_object_object_get_ex(o, "path", &v));
		ck_assert_str_eq(json_object_get_string(v), "/a/b\xc3\xa9");
		ck_assert(json_object_object_get_ex(o, "n", &v));
		ck_assert_int_eq(json_object_get_int64(v), INT64_MAX);
		json_object_put(o);
	}
	ck_assert_uint_eq(evbuffer_get_length(b), 0);
	json_object_put(obj);
	evbuffer_free(b);
}
END_TEST

/* A relay checks the receiver's limit before it sends: nothing is appended over it. */
START_TEST(test_evbuffer_encode_max)
{
	struct evbuffer *b = evbuffer_new();
	struct json_object *obj = json_object_new_object(), *o = NULL;
	char big[300];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	json_object_object_add(obj, "v", json_object_new_string(big));
	ck_assert_int_eq(frame_encode_evbuffer_max(b, obj, 256), -1);
	ck_assert_uint_eq(evbuffer_get_length(b), 0);
	ck_assert_int_eq(frame_encode_evbuffer_max(b, obj, 512), 0);
	ck_assert_int_eq(frame_decode_evbuffer(b, 512, &o), FRAME_OK);
	json_object_put(o);
	json_object_put(obj);
	evbuffer_free(b);
}
END_TEST

static void
mksocketpair(int sv[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

START_TEST(test_fd_roundtrip)
{
	int sv[2];
	struct json_object *obj = json_tokener_parse(OBJ), *o = NULL;
	char *cause = NULL;

	mksocketpair(sv);
	ck_assert_int_eq(frame_write_fd(sv[0], obj, &cause), 0);
	ck_assert_int_eq(frame_write_fd(sv[0], obj, &cause), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(frame_read_fd(sv[1], FRAME_MAX_DEFAULT, 2000, &o, &cause), 0);
		ck_assert_str_eq(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
		    json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN));
		json_object_put(o);
	}
	ck_assert_ptr_null(cause);
	json_object_put(obj);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_fd_read_timeout_half_frame)
{
	int sv[2];
	uint8_t buf[256];
	size_t n = mkframe(buf, sizeof(buf), OBJ, strlen(OBJ));
	struct json_object *o = (struct json_object *)1;
	char *cause = NULL;

	mksocketpair(sv);
	ck_assert_int_eq(util_write_all(sv[0], buf, n / 2), 0);
	int64_t t0 = util_monotonic_ms();
	ck_assert_int_eq(frame_read_fd(sv[1], FRAME_MAX_DEFAULT, 300, &o, &cause), -1);
	int64_t dt = util_monotonic_ms() - t0;
	ck_assert_ptr_null(o);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, "timed out") != NULL, "cause: %s", cause);
	ck_assert_msg(dt >= 250 && dt < 5000, "timeout took %lld ms", (long long)dt);
	free(cause);
	cause = NULL;

	/* Header only, then the peer goes away: a clean error, not a hang. */
	close(sv[0]);
	close(sv[1]);
	mksocketpair(sv);
	ck_assert_int_eq(util_write_all(sv[0], buf, FRAME_HEADER_LEN + 3), 0);
	close(sv[0]);
	ck_assert_int_eq(frame_read_fd(sv[1], FRAME_MAX_DEFAULT, 5000, &o, &cause), -1);
	ck_assert_msg(strstr(cause, "closed") != NULL, "cause: %s", cause);
	free(cause);
	close(sv[1]);
}
END_TEST

START_TEST(test_fd_oversize_header)
{
	int sv[2];
	uint8_t hdr[FRAME_HEADER_LEN];
	struct json_object *o = NULL;
	char *cause = NULL;

	mksocketpair(sv);
	/* Only the header: a reader that waited for the payload would time out. */
	mkheader(hdr, FRAME_MAX_DEFAULT + 1);
	ck_assert_int_eq(util_write_all(sv[0], hdr, sizeof(hdr)), 0);
	int64_t t0 = util_monotonic_ms();
	ck_assert_int_eq(frame_read_fd(sv[1], FRAME_MAX_DEFAULT, 5000, &o, &cause), -1);
	ck_assert_int_lt(util_monotonic_ms() - t0, 1000);
	ck_assert_ptr_null(o);
	ck_assert_str_eq(cause, "frame_oversize");

	mkheader(hdr, 0);
	ck_assert_int_eq(util_write_all(sv[0], hdr, sizeof(hdr)), 0);
	ck_assert_int_eq(frame_read_fd(sv[1], FRAME_MAX_DEFAULT, 5000, &o, &cause), -1);
	ck_assert_str_eq(cause, "frame_empty");

	/* A complete frame with a bad payload names the payload error. */
	uint8_t buf[64];
	size_t n = mkframe(buf, sizeof(buf), "{\"a\":\"\xff\"}", 10);
	ck_assert_int_eq(util_write_all(sv[0], buf, n), 0);
	ck_assert_int_eq(frame_read_fd(sv[1], FRAME_MAX_DEFAULT, 5000, &o, &cause), -1);
	ck_assert_str_eq(cause, "frame_invalid_utf8");
	free(cause);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_status_codes)
{
	const int all[] = { FRAME_OK, FRAME_NEED_MORE, FRAME_ERR_OVERSIZE, FRAME_ERR_EMPTY,
		FRAME_ERR_UTF8, FRAME_ERR_JSON, FRAME_ERR_NOT_OBJECT, FRAME_ERR_TRAILING,
		FRAME_ERR_NOMEM };
	/* Stable and distinct: clients match on these strings. */
	for (size_t i = 0; i < nitems(all); i++) {
		ck_assert_str_ne(frame_status_code(all[i]), "frame_error");
		for (size_t j = 0; j < i; j++)
			ck_assert_str_ne(frame_status_code(all[i]), frame_status_code(all[j]));
	}
	ck_assert_str_eq(frame_status_code(-99), "frame_error");
	ck_assert_str_eq(frame_status_code(FRAME_ERR_EMPTY), "frame_empty");
	ck_assert_str_eq(frame_status_code(FRAME_ERR_JSON), "frame_invalid_json");
}
END_TEST

static Suite *
frame_suite(void)
{
	Suite *s = suite_create("frame");
	TCase *tc = tcase_create("decode");

	tcase_add_test(tc, test_decode_valid);
	tcase_add_test(tc, test_decode_valid_utf8);
	tcase_add_test(tc, test_need_more_each_prefix);
	tcase_add_test(tc, test_oversize_from_header);
	tcase_add_test(tc, test_zero_length);
	tcase_add_test(tc, test_invalid_utf8);
	tcase_add_test(tc, test_not_object);
	tcase_add_test(tc, test_invalid_json);
	tcase_add_test(tc, test_trailing);
	tcase_add_test(tc, test_back_to_back);
	tcase_add_test(tc, test_status_codes);
	suite_add_tcase(s, tc);

	tc = tcase_create("evbuffer");
	tcase_add_test(tc, test_evbuffer_split);
	tcase_add_test(tc, test_evbuffer_errors);
	tcase_add_test(tc, test_evbuffer_roundtrip);
	tcase_add_test(tc, test_evbuffer_encode_max);
	suite_add_tcase(s, tc);

	tc = tcase_create("fd");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_fd_roundtrip);
	tcase_add_test(tc, test_fd_read_timeout_half_frame);
	tcase_add_test(tc, test_fd_oversize_header);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(frame_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
