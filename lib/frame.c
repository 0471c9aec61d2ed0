/*
 * frame.c: length-prefixed JSON frames.
 *
 * The peer on the other side of a socket is not trusted: every length is
 * checked against the per-socket maximum before anything is buffered for it,
 * and the payload must be strict JSON, valid UTF-8, exactly one object.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <json-c/json.h>

#include "frame.h"
#include "jsonstrict.h"
#include "util.h"

const char *
frame_status_code(int status)
{
	switch (status) {
	case FRAME_OK:
		return "ok";
	case FRAME_NEED_MORE:
		return "frame_incomplete";
	case FRAME_ERR_OVERSIZE:
		return "frame_oversize";
	case FRAME_ERR_EMPTY:
		return "frame_empty";
	case FRAME_ERR_UTF8:
		return "frame_invalid_utf8";
	case FRAME_ERR_JSON:
		return "frame_invalid_json";
	case FRAME_ERR_NOT_OBJECT:
		return "frame_not_object";
	case FRAME_ERR_TRAILING:
		return "frame_trailing_data";
	case FRAME_ERR_NOMEM:
		return "frame_no_memory";
	case FRAME_ERR_DUPLICATE:
		return "frame_duplicate_key";
	default:
		return "frame_error";
	}
}

int
frame_utf8_valid(const uint8_t *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t c = s[i];
		uint32_t cp;
		size_t n;

		if (c == 0)
			return 0;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			n = 1;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3;
			cp = c & 0x07;
		} else {
			return 0;
		}
		if (len - i <= n)
			return 0;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		/* Overlong forms, surrogates and values past U+10FFFF. */
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) ||
		    (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += n + 1;
	}
	return 1;
}

int
frame_parse_payload(const uint8_t *buf, size_t len, struct json_object **out)
{
	struct json_tokener *tok;
	struct json_object *obj;
	struct jsonstrict js;
	int r;

	*out = NULL;
	if (len == 0)
		return FRAME_ERR_EMPTY;
	if (!frame_utf8_valid(buf, len))
		return FRAME_ERR_UTF8;
	/* Exact grammar first, so json-c's leniencies never decide what we accept. */
	switch (jsonstrict_scan(buf, len, FRAME_JSON_DEPTH, &js)) {
	case JSONSTRICT_OK:
		break;
	case JSONSTRICT_TRAILING:
		jsonstrict_free(&js);
		return FRAME_ERR_TRAILING;
	case JSONSTRICT_NOMEM:
		jsonstrict_free(&js);
		return FRAME_ERR_NOMEM;
	default:
		jsonstrict_free(&js);
		return FRAME_ERR_JSON;
	}
	if (js.js_top != '{') {
		jsonstrict_free(&js);
		return FRAME_ERR_NOT_OBJECT;
	}
	tok = json_tokener_new_ex(FRAME_JSON_DEPTH + 1);
	if (tok == NULL) {
		jsonstrict_free(&js);
		return FRAME_ERR_NOMEM;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	obj = json_tokener_parse_ex(tok, (const char *)buf, (int)len);
	json_tokener_free(tok);
	if (obj == NULL || !json_object_is_type(obj, json_type_object)) {
		json_object_put(obj);
		jsonstrict_free(&js);
		return FRAME_ERR_JSON;
	}
	r = jsonstrict_same_keys(&js, obj);
	jsonstrict_free(&js);
	if (r != JSONSTRICT_OK) {
		json_object_put(obj);
		return FRAME_ERR_DUPLICATE;
	}
	*out = obj;
	return FRAME_OK;
}

static uint32_t
frame_get_len(const uint8_t *b)
{
	return ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
}

int
frame_decode(const uint8_t *buf, size_t len, size_t max, struct json_object **out,
    size_t *consumed)
{
	uint32_t n;
	int r;

	*out = NULL;
	*consumed = 0;
	if (len < FRAME_HEADER_LEN)
		return FRAME_NEED_MORE;
	n = frame_get_len(buf);
	if (n > max)
		return FRAME_ERR_OVERSIZE;
	if (n == 0)
		return FRAME_ERR_EMPTY;
	if (len - FRAME_HEADER_LEN < n)
		return FRAME_NEED_MORE;
	r = frame_parse_payload(buf + FRAME_HEADER_LEN, n, out);
	if (r == FRAME_OK)
		*consumed = FRAME_HEADER_LEN + (size_t)n;
	return r;
}

int
frame_decode_evbuffer(struct evbuffer *in, size_t max, struct json_object **out)
{
	uint8_t hdr[FRAME_HEADER_LEN];
	uint32_t n;
	size_t avail = evbuffer_get_length(in);
	int r;

	*out = NULL;
	if (avail < FRAME_HEADER_LEN)
		return FRAME_NEED_MORE;
	if (evbuffer_copyout(in, hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr))
		return FRAME_ERR_NOMEM;
	n = frame_get_len(hdr);
	if (n > max)
		return FRAME_ERR_OVERSIZE;
	if (n == 0)
		return FRAME_ERR_EMPTY;
	if (avail - FRAME_HEADER_LEN < n)
		return FRAME_NEED_MORE;
	const uint8_t *p = evbuffer_pullup(in, (ssize_t)(FRAME_HEADER_LEN + n));
	if (p == NULL)
		return FRAME_ERR_NOMEM;
	r = frame_parse_payload(p + FRAME_HEADER_LEN, n, out);
	if (r == FRAME_OK)
		evbuffer_drain(in, FRAME_HEADER_LEN + (size_t)n);
	return r;
}

static const char *
frame_serialize(struct json_object *obj, size_t *len)
{
	return json_object_to_json_string_length(obj,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, len);
}

int
frame_encode_evbuffer(struct evbuffer *out, struct json_object *obj)
{
	return frame_encode_evbuffer_max(out, obj, UINT32_MAX);
}

/*
 * A peer refuses a frame over its limit and may treat it as fatal, so a
 * sender that relays what others gave it checks the limit before sending.
 */
int
frame_encode_evbuffer_max(struct evbuffer *out, struct json_object *obj, size_t max)
{
	size_t len;
	const char *s = frame_serialize(obj, &len);
	uint8_t hdr[FRAME_HEADER_LEN];

	if (s == NULL || len > UINT32_MAX || len > max)
		return -1;
	hdr[0] = (uint8_t)(len >> 24);
	hdr[1] = (uint8_t)(len >> 16);
	hdr[2] = (uint8_t)(len >> 8);
	hdr[3] = (uint8_t)len;
	if (evbuffer_add(out, hdr, sizeof(hdr)) != 0 || evbuffer_add(out, s, len) != 0)
		return -1;
	return 0;
}

int
frame_write_fd(int fd, struct json_object *obj, char **cause)
{
	size_t len;
	const char *s = frame_serialize(obj, &len);
	uint8_t *buf;

	if (s == NULL || len > UINT32_MAX) {
		util_cause(cause, "cannot serialize request");
		return -1;
	}
	buf = malloc(len + FRAME_HEADER_LEN);
	if (buf == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	buf[0] = (uint8_t)(len >> 24);
	buf[1] = (uint8_t)(len >> 16);
	buf[2] = (uint8_t)(len >> 8);
	buf[3] = (uint8_t)len;
	memcpy(buf + FRAME_HEADER_LEN, s, len);
	int r = util_write_all(fd, buf, len + FRAME_HEADER_LEN);
	free(buf);
	if (r != 0) {
		util_cause(cause, "write: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Read exactly len bytes before the deadline (monotonic ms, < 0: none). */
static int
frame_read_exact(int fd, uint8_t *buf, size_t len, int64_t deadline, char **cause)
{
	size_t got = 0;

	while (got < len) {
		if (deadline >= 0) {
			int64_t left = deadline - util_monotonic_ms();
			struct pollfd pfd = { .fd = fd, .events = POLLIN };
			if (left <= 0) {
				util_cause(cause, "timed out waiting for a reply");
				return -1;
			}
			int pr = poll(&pfd, 1, (int)left);
			if (pr < 0) {
				if (errno == EINTR)
					continue;
				util_cause(cause, "poll: %s", strerror(errno));
				return -1;
			}
			if (pr == 0)
				continue;
		}
		ssize_t n = read(fd, buf + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			util_cause(cause, "read: %s", strerror(errno));
			return -1;
		}
		if (n == 0) {
			util_cause(cause, "connection closed by peer");
			return -1;
		}
		got += (size_t)n;
	}
	return 0;
}

int
frame_read_fd(int fd, size_t max, int timeout_ms, struct json_object **out, char **cause)
{
	uint8_t hdr[FRAME_HEADER_LEN];
	int64_t deadline = timeout_ms < 0 ? -1 : util_monotonic_ms() + timeout_ms;
	uint8_t *buf;
	uint32_t n;
	int r;

	*out = NULL;
	if (frame_read_exact(fd, hdr, sizeof(hdr), deadline, cause) != 0)
		return -1;
	n = frame_get_len(hdr);
	if (n > max || n == 0) {
		util_cause(cause, "%s", frame_status_code(n ? FRAME_ERR_OVERSIZE : FRAME_ERR_EMPTY));
		return -1;
	}
	buf = malloc(n);
	if (buf == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	if (frame_read_exact(fd, buf, n, deadline, cause) != 0) {
		free(buf);
		return -1;
	}
	r = frame_parse_payload(buf, n, out);
	free(buf);
	if (r != FRAME_OK) {
		util_cause(cause, "%s", frame_status_code(r));
		return -1;
	}
	return 0;
}
