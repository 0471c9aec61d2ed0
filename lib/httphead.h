/*
 * httphead.h: strict HTTP/1.1 request framing (pure logic).
 *
 * The mediator's client is untrusted, and evhttp, which parses the
 * requests after this check, is lenient: it takes the last of two
 * Content-Length headers, reads bare LF as a line end and accepts
 * Transfer-Encoding on a GET. Where two parsers can disagree about where a
 * request ends, the bytes after it become a second request one of them
 * never saw (request smuggling). So every request head is read here first,
 * as raw bytes up to its blank line, and anything that could be framed two
 * ways is refused with a stable code, never repaired (docs/http.md).
 */
#ifndef GENSEE_HTTPHEAD_H
#define GENSEE_HTTPHEAD_H

#include <stddef.h>
#include <stdint.h>

/* Stable refusal codes (evidence reason, X-Gensee-Refusal). */
#define HTTPHEAD_E_BARE_LF "http_bare_lf"
#define HTTPHEAD_E_BARE_CR "http_bare_cr"
#define HTTPHEAD_E_OBS_FOLD "http_obs_fold"
#define HTTPHEAD_E_REQUEST_LINE "http_bad_request_line"
#define HTTPHEAD_E_HEADER "http_bad_header"
#define HTTPHEAD_E_DUP_CL "http_duplicate_content_length"
#define HTTPHEAD_E_BAD_CL "http_bad_content_length"
#define HTTPHEAD_E_CL_TE "http_content_length_with_transfer_encoding"
#define HTTPHEAD_E_TE_NO_BODY "http_transfer_encoding_on_get_head"
#define HTTPHEAD_E_BAD_TE "http_bad_transfer_encoding"
#define HTTPHEAD_E_TOO_LARGE "http_head_too_large"
#define HTTPHEAD_E_BAD_CHUNK "http_bad_chunk"

/* The longest chunk-size line read (hex digits, extensions, CRLF). */
#define HTTPHEAD_CHUNK_LINE_MAX 1024
/* At most 15 hex digits of chunk size (no overflow of uint64_t). */
#define HTTPHEAD_CHUNK_DIGITS_MAX 15
/* At most 18 digits of Content-Length (no overflow of uint64_t). */
#define HTTPHEAD_CL_DIGITS_MAX 18

struct httphead {
	size_t hh_len;			/* the head, through CRLF CRLF */
	char hh_method[16];
	int hh_http10;			/* HTTP/1.0, else HTTP/1.1 */
	int hh_chunked;			/* Transfer-Encoding: chunked */
	uint64_t hh_content_length;	/* 0 without the header */
};

/*
 * Look at the first len bytes of a connection's unread input, which must
 * start with a request head. 1: the head is complete (h->hh_len bytes)
 * and accepted; 0: not complete yet, nothing refused so far (read more);
 * -1: refused, *status 400 (431 for a head of max bytes or more without
 * its end) and *code one of HTTPHEAD_E_*. Only the first max bytes are
 * read.
 */
int httphead_check(const char *buf, size_t len, size_t max, struct httphead *h, int *status,
    const char **code);

/*
 * httphead_check when the first from bytes were seen by a call that
 * returned 0 (a head arriving a few bytes at a time): only the bytes after
 * them are scanned for line ends, so a head read byte by byte costs its
 * length once, not its length squared (threat: a client spending the
 * mediator's CPU). The same result as httphead_check for every from.
 */
int httphead_check_from(const char *buf, size_t len, size_t from, size_t max,
    struct httphead *h, int *status, const char **code);

/*
 * One chunk-size line of a chunked body, without its CRLF: 1-15 hex
 * digits, optionally followed by ";" extensions of visible characters, SP
 * and HT. 0 and *size, or -1 (HTTPHEAD_E_BAD_CHUNK, or HTTPHEAD_E_BARE_LF
 * / HTTPHEAD_E_BARE_CR for a stray line-end byte).
 */
int httphead_chunk_size(const char *line, size_t len, uint64_t *size, const char **code);

/*
 * One trailer line of a chunked body, without its CRLF (len > 0): a
 * header field as httphead_check reads one. 0 or -1 with *code.
 */
int httphead_trailer_line(const char *line, size_t len, const char **code);

#endif
