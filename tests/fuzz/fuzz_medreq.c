/*
 * fuzz_medreq.c: the mediator's request rules on arbitrary input: the
 * request target (as a client sends it), the header filters, and the
 * proxy.listen parser. What parses must hold the invariants the mediator
 * relies on: an http scheme, a host of [a-z0-9.-_] or an IPv6 literal, a
 * port of 1-65535 and a path starting with '/'.
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
	struct medreq_target t;
	const char *code = NULL;
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
	} else if (code == NULL) {
		abort(); /* every refusal has its stable code */
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
