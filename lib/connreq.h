/*
 * connreq.h: the request head of the mediator's per-operation egress
 * (daemons/httpmediatord/connect.c), parsed without I/O so that it can be
 * unit-tested and fuzzed (fuzz_connreq).
 *
 * Two forms are served: `CONNECT NAME:PORT` (a tunnel) and an
 * absolute-form `METHOD http://NAME[:PORT]/PATH` request (forwarded in
 * origin form, with Connection: close), which is what HTTP_PROXY means to
 * curl, pip, git, npm and the agents.
 */
#ifndef GENSEE_CONNREQ_H
#define GENSEE_CONNREQ_H

#include <stddef.h>
#include <stdint.h>

#include "dnsmsg.h"

#define CONNREQ_HEAD_MAX 8192
#define CONNREQ_METHOD_MAX 16
#define CONNREQ_PATH_MAX 2048	/* the path (without its query), kept as evidence */
#define CONNREQ_MAX_LINES 128

enum connreq_kind {
	CONNREQ_TUNNEL,		/* CONNECT NAME:PORT */
	CONNREQ_FORWARD,	/* METHOD http://NAME[:PORT]/PATH */
};

struct connreq {
	enum connreq_kind cr_kind;
	char cr_method[CONNREQ_METHOD_MAX + 1];	/* "CONNECT" for a tunnel */
	char cr_host[DNSMSG_NAME_MAX + 1];	/* a lower-case DNS name */
	uint16_t cr_port;
	char cr_path[CONNREQ_PATH_MAX + 1];	/* FORWARD: the path, no query */
	/*
	 * FORWARD: the head to send upstream (malloc'd, ends in CRLF CRLF, then a NUL not counted):
	 * the request line in origin form, Host from the URL, the client's
	 * end-to-end headers, Connection: close. connreq_free() wipes it.
	 */
	char *cr_upstream;
	size_t cr_upstream_len;
};

/*
 * head: the bytes before the empty line (no "\r\n\r\n"), len of them.
 * expect: what Proxy-Authorization's Basic credential must decode to
 * ("gensee:TOKEN"), compared in constant time. 0 with *out filled, or -1
 * with *status (HTTP) and *code (stable, docs/network.md): 400
 * malformed_request / bad_header / obs_fold / bad_target / bad_host /
 * absolute_form_required / https_needs_connect / duplicate_content_length
 * / bad_content_length / content_length_with_transfer_encoding /
 * transfer_encoding_not_allowed / bad_transfer_encoding /
 * duplicate_host, 407 proxy_auth_required, 403 address_literal, 414
 * uri_too_long, 431 head_too_large. Authentication is checked before the
 * target. The caller frees *out with connreq_free() either way.
 */
int connreq_parse(const char *head, size_t len, const char *expect, struct connreq *out,
    int *status, const char **code);
void connreq_free(struct connreq *cr);

/* Strict base64 (RFC 4648, padded): -1 on anything else. */
int connreq_b64decode(const char *in, size_t n, unsigned char *out, size_t cap, size_t *outlen);

/* Is m a method token we accept (1-16 of A-Z)? */
int connreq_valid_method(const char *m);

#endif
