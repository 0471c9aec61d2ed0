/*
 * frame.h: the wire format. Only this module touches the bytes on a socket.
 *
 * A frame is a 4-byte big-endian length N followed by N bytes of one UTF-8
 * JSON object. N is bounded per socket. Anything else (oversized, empty,
 * truncated at EOF, invalid UTF-8, not RFC 8259 JSON, not an object, a
 * repeated key, trailing bytes) is an error
 * that closes that one connection.
 */
#ifndef GENSEE_FRAME_H
#define GENSEE_FRAME_H

#include <stddef.h>
#include <stdint.h>

struct json_object;
struct evbuffer;

#define FRAME_HEADER_LEN 4
#define FRAME_MAX_DEFAULT (1024u * 1024u)
#define FRAME_MAX_HOOK (2u * 1024u * 1024u)
#define FRAME_JSON_DEPTH 32

enum frame_status {
	FRAME_OK = 0,
	FRAME_NEED_MORE = 1,
	FRAME_ERR_OVERSIZE = -1,
	FRAME_ERR_EMPTY = -2,
	FRAME_ERR_UTF8 = -3,
	FRAME_ERR_JSON = -4,
	FRAME_ERR_NOT_OBJECT = -5,
	FRAME_ERR_TRAILING = -6,
	FRAME_ERR_NOMEM = -7,
	FRAME_ERR_DUPLICATE = -8,
};

/* Stable code for a frame_status ("frame_oversize", ...). */
const char *frame_status_code(int status);

/* 1 when buf is well-formed UTF-8 (no overlongs, surrogates or NUL). */
int frame_utf8_valid(const uint8_t *buf, size_t len);

/*
 * Decode one frame from the front of buf. On FRAME_OK, *out holds the object
 * (caller puts it) and *consumed the bytes used. FRAME_NEED_MORE means the
 * frame is incomplete; the header alone is enough to reject an oversized one.
 */
int frame_decode(const uint8_t *buf, size_t len, size_t max, struct json_object **out,
    size_t *consumed);

/* Parse a payload (no header) as one JSON object, with the same rules. */
int frame_parse_payload(const uint8_t *buf, size_t len, struct json_object **out);

/* Incremental decoding on a libevent input buffer; drains what it consumed. */
int frame_decode_evbuffer(struct evbuffer *in, size_t max, struct json_object **out);

/* Append the frame for obj to an evbuffer. Returns 0 or -1. */
int frame_encode_evbuffer(struct evbuffer *out, struct json_object *obj);
/* The same, but -1 without appending anything when the payload is over max bytes. */
int frame_encode_evbuffer_max(struct evbuffer *out, struct json_object *obj, size_t max);

/* Blocking helpers for clients. timeout_ms < 0 waits forever. */
int frame_write_fd(int fd, struct json_object *obj, char **cause);
int frame_read_fd(int fd, size_t max, int timeout_ms, struct json_object **out, char **cause);

#endif
