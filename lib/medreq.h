/*
 * medreq.h: what the HTTP mediator accepts from a client (pure logic).
 *
 * The request target and the header names come from an untrusted client
 * (request side) or an untrusted server (response side). Parsing is
 * libevent's evhttp_uri_parse (strict mode); this module adds the rules
 * of the mediator: absolute-form http:// or https:// only, no userinfo, no fragment,
 * one unambiguous host, and which headers cross in each direction.
 */
#ifndef GENSEE_MEDREQ_H
#define GENSEE_MEDREQ_H

#include <stddef.h>
#include <stdint.h>

#define MEDREQ_HOST_MAX 253
#define MEDREQ_PATH_MAX 2048

/* Stable refusal codes (the mediator's 4xx bodies and docs/protocol.md). */
#define MEDREQ_E_ORIGIN_FORM "origin_form_refused"
#define MEDREQ_E_MALFORMED "malformed_target"
#define MEDREQ_E_SCHEME "scheme_not_supported"
#define MEDREQ_E_USERINFO "userinfo_refused"
#define MEDREQ_E_FRAGMENT "fragment_refused"
#define MEDREQ_E_HOST "bad_host"
#define MEDREQ_E_AMBIGUOUS "ambiguous_address"
#define MEDREQ_E_PORT "bad_port"
#define MEDREQ_E_TOO_LONG "target_too_long"

struct medreq_target {
	char mt_scheme[8];		/* "http" or "https" */
	int mt_tls;			/* https: TLS upstream, hostname verified */
	char mt_host[MEDREQ_HOST_MAX + 1];	/* lower case; an IPv6 literal without brackets */
	int mt_host_is_v6;
	uint16_t mt_port;
	char mt_authority[MEDREQ_HOST_MAX + 16];	/* the Host header upstream */
	char mt_path[MEDREQ_PATH_MAX + 1];	/* path and ?query, as sent upstream */
};

/*
 * Parse an absolute-form request target. 0, or -1 with *code one of the
 * MEDREQ_E_* codes (an origin-form target is MEDREQ_E_ORIGIN_FORM).
 */
int medreq_parse_target(const char *uri, struct medreq_target *t, const char **code);

/*
 * May a client's request header go upstream? Never credentials
 * (Authorization, Proxy-Authorization, Cookie), Host (the mediator sets
 * it), hop-by-hop headers, any Proxy-* header, or a header the client's
 * Connection header names (connection may be NULL).
 */
int medreq_request_header_forwarded(const char *name, const char *connection);

/* May an upstream response header reach the client? An allowlist: never Set-Cookie or auth. */
int medreq_response_header_allowed(const char *name);

#endif
