/*
 * fuzz_httpurl.c: request-target parsing, canonicalization and scope
 * matching on arbitrary input. Input: TARGET [ "\n" AUTHORITY "\n" PREFIX ].
 * Never crashes, and canonical forms are fixed points: parsing hu_url
 * again gives hu_url, canonicalizing a canonical path gives itself, and a
 * URL built from a scope lies inside that scope.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpurl.h"
#include "netpolicy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct httpurl u, again;

static void
check_url(const char *t, size_t n)
{
	const char *why = NULL;

	if (httpurl_parse(t, n, &u) != HTTPURL_OK)
		return;
	if (u.hu_path[0] != '/' || (u.hu_port == 0) || u.hu_naddrs > HTTPURL_MAX_ADDRS ||
	    strlen(u.hu_url) > HTTPURL_MAX_TARGET)
		abort();
	if ((u.hu_kind == HTTPURL_HOST_NAME) != (u.hu_naddrs == 0))
		abort();
	/* idempotence */
	if (httpurl_parse(u.hu_url, strlen(u.hu_url), &again) != HTTPURL_OK ||
	    strcmp(again.hu_url, u.hu_url) != 0 || strcmp(again.hu_authority, u.hu_authority) != 0 ||
	    again.hu_naddrs != u.hu_naddrs)
		abort();
	(void)httpurl_restricted(&u, NULL, &why);
	/* a scope made of the URL's own parts holds it */
	struct httpurl_scope s;
	if (httpurl_scope_init(&s, u.hu_scheme, u.hu_authority, u.hu_path) != HTTPURL_OK ||
	    !httpurl_scope_match(&s, &u))
		abort();
}

static void
check_path(const char *p, size_t n)
{
	static char out[HTTPURL_MAX_PATH + 1], out2[HTTPURL_MAX_PATH + 1];

	if (httpurl_path_canon(p, n, out, sizeof(out)) != HTTPURL_OK)
		return;
	if (httpurl_path_canon(out, strlen(out), out2, sizeof(out2)) != HTTPURL_OK ||
	    strcmp(out, out2) != 0 || !httpurl_path_has_prefix(out, out))
		abort();
}

static void
check_scope(const char *scheme, const char *auth, const char *prefix)
{
	static char url[HTTPURL_MAX_TARGET + 64];
	struct httpurl_scope s;

	if (httpurl_scope_init(&s, scheme, auth, prefix) != HTTPURL_OK)
		return;
	int n = snprintf(url, sizeof(url), "%s://%s%s", s.hs_scheme, s.hs_authority, s.hs_prefix);
	if (n < 0 || (size_t)n > HTTPURL_MAX_TARGET)
		return;
	if (httpurl_parse(url, (size_t)n, &u) != HTTPURL_OK || !httpurl_scope_match(&s, &u))
		abort();
	/* one segment more is inside as well, unless it made the target too long */
	strcat(url, s.hs_prefix[strlen(s.hs_prefix) - 1] == '/' ? "x" : "/x");
	if (httpurl_parse(url, strlen(url), &u) == HTTPURL_OK && !httpurl_scope_match(&s, &u))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *d = (const char *)data;
	const char *nl1 = memchr(d, '\n', size);

	if (size > 3 * HTTPURL_MAX_TARGET)
		return 0;
	check_url(d, size);
	check_path(d, size);
	if (nl1 == NULL)
		return 0;
	check_url(d, (size_t)(nl1 - d));
	const char *nl2 = memchr(nl1 + 1, '\n', size - (size_t)(nl1 + 1 - d));
	if (nl2 == NULL)
		return 0;
	char *auth = strndup(nl1 + 1, (size_t)(nl2 - nl1 - 1));
	char *prefix = strndup(nl2 + 1, size - (size_t)(nl2 + 1 - d));
	if (auth != NULL && prefix != NULL) {
		check_path(prefix, strlen(prefix));
		check_scope((data[0] & 1) ? "https" : "http", auth, prefix);
	}
	free(auth);
	free(prefix);
	return 0;
}
