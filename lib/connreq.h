/*
 * connreq.h: the request head of the mediator's CONNECT egress
 * (daemons/httpmediatord/connect.c), parsed without I/O so that it can be
 * unit-tested and fuzzed (fuzz_connreq).
 */
#ifndef GENSEE_CONNREQ_H
#define GENSEE_CONNREQ_H

#include <stddef.h>
#include <stdint.h>

#include "dnsmsg.h"

#define CONNREQ_HEAD_MAX 8192

struct connreq {
	char cr_host[DNSMSG_NAME_MAX + 1];	/* a lower-case DNS name */
	uint16_t cr_port;
};

/*
 * head: the bytes before the empty line (no "\r\n\r\n"), len of them.
 * expect: what Proxy-Authorization's Basic credential must decode to
 * ("gensee:TOKEN"), compared in constant time. 0 with *out filled, or -1
 * with *status (HTTP) and *code (stable): 405 connect_only, 400
 * malformed_request / bad_target / bad_host, 407 proxy_auth_required,
 * 403 address_literal. Authentication is checked before the target.
 */
int connreq_parse(const char *head, size_t len, const char *expect, struct connreq *out,
    int *status, const char **code);

/* Strict base64 (RFC 4648, padded): -1 on anything else. */
int connreq_b64decode(const char *in, size_t n, unsigned char *out, size_t cap, size_t *outlen);

#endif
