/*
 * fuzz_medreq.c: the mediator's request path on arbitrary input: the
 * request target (as a client sends it), the Host header check, a
 * redirect's Location against a parsed base, the header filters, and the
 * proxy.listen parser. What parses must hold the invariants the mediator
 * relies on: an http scheme, a host of [a-z0-9.-_] or an IPv6 literal, a
 * port of 1-65535, a path starting with '/', a canonical URL that parses
 * to itself (what boundaryd re-checks), and no query in a redacted URL.
 * The input is split at the first newline: target, then Host/Location.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "medreq.h"
#include "netpolicy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct medreq_target t, t2, base;
	const char *code = NULL;
	static int have_base;
	char *s = malloc(size + 1);
	int fam;
	uint8_t a[16];
	uint16_t port;

	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (medreq_parse_target(s, &t, &code) == 0) {
		if (code != NULL || (strcmp(t.mt_scheme, "http") != 0 &&
		    strcmp(t.mt_scheme, "https") != 0) || t.mt_tls != (t.mt_scheme[4] == 's') ||
		    t.mt_port == 0 ||
		    t.mt_path[0] != '/' || t.mt_host[0] == '\0')
			abort();
		if (!t.mt_host_is_v6 &&
		    strspn(t.mt_host, "abcdefghijklmnopqrstuvwxyz0123456789.-_") != strlen(t.mt_host))
			abort();
		if (strpbrk(t.mt_authority, "@/?# ") != NULL)
			abort();
		/* boundaryd re-parses mt_url: it must parse to itself. */
		if (medreq_parse_target(t.mt_url, &t2, &code) != 0 || strcmp(t2.mt_url, t.mt_url) != 0 ||
		    strcmp(t2.mt_path, t.mt_path) != 0)
			abort();
		/* The target's own authority always passes the Host check. */
		if (medreq_host_check(&t, t.mt_authority, &code) != 0)
			abort();
		char red[256];
		medreq_redacted_url(t.mt_url, red, sizeof(red));
		/* No query byte survives: after '?' only (a prefix of) the marker. */
		const char *q = strchr(red, '?');
		if (q != NULL && strncmp(q, "?[redacted]", strlen(q)) != 0)
			abort();
		memcpy(&base, &t, sizeof(base));
		have_base = 1;
	} else if (code == NULL) {
		abort(); /* every refusal has its stable code */
	}
	/* Host header and Location: whatever follows the first newline. */
	{
		char *nl = memchr(s, '\n', size);
		if (nl != NULL) {
			*nl = '\0';
			const char *other = nl + 1;
			if (medreq_parse_target(s, &t, &code) == 0) {
				if (medreq_host_check(&t, other, &code) == 0 && code != NULL)
					abort();
				if (medreq_redirect_target(&t, other, &t2, &code) == 0) {
					if (strcmp(t2.mt_scheme, "http") != 0 &&
					    strcmp(t2.mt_scheme, "https") != 0)
						abort();
					/* an absolute path never changes the authority */
					if (other[0] == '/' && other[1] != '/' &&
					    (strcmp(t2.mt_host, t.mt_host) != 0 ||
					    t2.mt_port != t.mt_port))
						abort();
				}
			}
			*nl = '\n';
		} else if (have_base) {
			(void)medreq_redirect_target(&base, s, &t2, &code);
		}
	}
	/* Credentials never pass, whatever the Connection header says. */
	if (medreq_request_header_forwarded("Authorization", s) ||
	    medreq_request_header_forwarded("Cookie", s))
		abort();
	(void)medreq_request_header_forwarded(s, s);
	if (medreq_response_header_allowed(s) && strncasecmp(s, "set-cookie", 10) == 0)
		abort();
	if (netpolicy_parse_listen(s, &fam, a, &port) == 0 && port == 0)
		abort();
	free(s);
	return 0;
}
