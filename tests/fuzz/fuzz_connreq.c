/*
 * fuzz_connreq.c: the egress's request head on arbitrary bytes. What
 * parses holds what the mediator relies on: a valid lower-case DNS name
 * that is not an address literal, a port of 1-65535, exactly one
 * Proxy-Authorization header decoding to the expected credential, and for
 * a forwarded request an upstream head that one reader splits one way:
 * CRLF lines only, one empty line at its end, origin form, our Host, no
 * Proxy-Authorization.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strings.h>

#include "connreq.h"
#include "netpolicy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct connreq cr;
	const char *code = NULL;
	int status = 0, fam;
	uint8_t a[16];
	unsigned char out[64];
	size_t n;

	(void)connreq_b64decode((const char *)data, size, out, sizeof(out), &n);
	if (connreq_parse((const char *)data, size, "gensee:x", &cr, &status, &code) != 0) {
		if (code == NULL || cr.cr_upstream != NULL || (status != 400 && status != 403 &&
		    status != 407 && status != 414 && status != 431))
			abort();
		connreq_free(&cr);
		return 0;
	}
	if (cr.cr_kind == CONNREQ_FORWARD) {
		const char *u = cr.cr_upstream, *end = memmem(u, cr.cr_upstream_len, "\r\n\r\n", 4);
		char host[300];
		size_t ml = strlen(cr.cr_method);
		if (end == NULL || (size_t)(end - u) + 4 != cr.cr_upstream_len ||
		    strncmp(u, cr.cr_method, ml) != 0 || u[ml] != ' ' || u[ml + 1] != '/' ||
		    memchr(u, '\0', cr.cr_upstream_len) != NULL)
			abort();
		for (size_t i = 0; i < cr.cr_upstream_len; i++)
			if ((u[i] == '\n' && (i == 0 || u[i - 1] != '\r')) ||
			    (u[i] == '\r' && (i + 1 == cr.cr_upstream_len || u[i + 1] != '\n')))
				abort();
		for (const char *l = u; l < end; l = strstr(l, "\r\n") + 2)
			if (strncasecmp(l, "Proxy-Authorization:", 20) == 0)
				abort();
		snprintf(host, sizeof(host), "\r\nHost: %s", cr.cr_host);
		if (memmem(u, cr.cr_upstream_len, host, strlen(host)) == NULL)
			abort();
	} else if (cr.cr_upstream != NULL) {
		abort();
	}
	if (!dnsmsg_valid_name(cr.cr_host) || cr.cr_port == 0 ||
	    netpolicy_parse_addr(cr.cr_host, &fam, a) == 0 ||
	    ((strrchr(cr.cr_host, '.') ? strrchr(cr.cr_host, '.')[1] : cr.cr_host[0]) >= '0' &&
	    (strrchr(cr.cr_host, '.') ? strrchr(cr.cr_host, '.')[1] : cr.cr_host[0]) <= '9') ||
	    memmem(data, size, "Z2Vuc2VlOng=", 12) == NULL)	/* base64("gensee:x") */
		abort();
	connreq_free(&cr);
	return 0;
}
