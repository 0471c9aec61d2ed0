/*
 * medreq.h: what the HTTP mediator accepts from a client (pure logic).
 *
 * The request target and the header names come from an untrusted client
 * (request side) or an untrusted server (response side, Location). Targets
 * are parsed by lib/httpurl.c (httpurl_parse: strict, canonical, stable
 * refusal codes, docs/http.md); this module adds the rules of the
 * mediator: absolute-form only, the Host header must name the target's
 * authority, how a redirect's Location becomes the next target, and which
 * headers cross in each direction.
 */
#ifndef GENSEE_MEDREQ_H
#define GENSEE_MEDREQ_H

#include <stddef.h>
#include <stdint.h>

#include "httpurl.h"

/* Stable refusal codes of the mediator's own (httpurl_strerror names the others). */
#define MEDREQ_E_ORIGIN_FORM "origin_form_refused"
#define MEDREQ_E_HOST_MISSING "host_missing"
#define MEDREQ_E_HOST_MISMATCH "host_mismatch"
#define MEDREQ_E_BAD_REDIRECT "bad_redirect"

struct medreq_target {
	char mt_scheme[8];		/* "http" or "https" */
	int mt_tls;			/* https: TLS upstream, hostname verified */
	char mt_host[HTTPURL_HOST_BUF];	/* canonical; an IPv6 literal without brackets */
	int mt_host_is_v6;
	uint16_t mt_port;
	char mt_authority[HTTPURL_AUTHORITY_BUF];	/* the Host header upstream */
	char mt_path[HTTPURL_MAX_PATH + HTTPURL_MAX_QUERY + 2];	/* canonical path ?query, as sent */
	char mt_url[HTTPURL_MAX_TARGET + 1];	/* the canonical URL (hu_url) */
};

/*
 * Parse an absolute-form request target with httpurl_parse. 0, or -1 with
 * *code a stable code: MEDREQ_E_ORIGIN_FORM for origin-form ("/x") and
 * asterisk-form ("*"), else httpurl_strerror's.
 */
int medreq_parse_target(const char *uri, struct medreq_target *t, const char **code);

/*
 * Does the client's Host header (NULL when absent) name the target's
 * authority? Compared canonically (case, default port, IPv4 forms), so
 * "UP.test" matches http://up.test:80/ but "other.test" never does.
 * 0 when it matches, else -1 with *code MEDREQ_E_HOST_MISSING or
 * MEDREQ_E_HOST_MISMATCH.
 */
int medreq_host_check(const struct medreq_target *t, const char *host, const char **code);

/*
 * The next target of a redirect from base: Location (untrusted, from the
 * upstream) as an absolute http(s) URL, a scheme-relative "//authority/..."
 * or an absolute path "/..."; relative-path references and everything
 * httpurl_parse refuses are refused (MEDREQ_E_BAD_REDIRECT, the httpurl
 * code in *detail when there is one).
 */
int medreq_redirect_target(const struct medreq_target *base, const char *location,
    struct medreq_target *next, const char **detail);

/* Is this response status a redirect the mediator follows (301 302 303 307 308)? */
int medreq_is_redirect(int status);

/*
 * The canonical URL for evidence and logs: the query value, if any, is
 * replaced by "?[redacted]" (never a query value in evidence). out gets at
 * most outsz bytes, truncated.
 */
void medreq_redacted_url(const char *url, char *out, size_t outsz);

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
