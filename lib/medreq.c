/*
 * medreq.c: the HTTP mediator's request-target and header rules.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "medreq.h"
#include "util.h"

/* httpurl's parse into the mediator's target. */
static void
medreq_fill(const struct httpurl *u, struct medreq_target *t)
{
	uint16_t defport = strcmp(u->hu_scheme, "https") == 0 ? 443 : 80;

	memset(t, 0, sizeof(*t));
	util_strlcpy(t->mt_scheme, u->hu_scheme, sizeof(t->mt_scheme));
	t->mt_tls = strcmp(u->hu_scheme, "https") == 0;
	if (u->hu_kind == HTTPURL_HOST_IPV6) {
		/* "[...]" without the brackets: what inet_pton and evdns take */
		size_t n = strlen(u->hu_host);
		memcpy(t->mt_host, u->hu_host + 1, n - 2);
		t->mt_host[n - 2] = '\0';
		t->mt_host_is_v6 = 1;
	} else {
		util_strlcpy(t->mt_host, u->hu_host, sizeof(t->mt_host));
	}
	t->mt_port = u->hu_port;
	/* Host upstream: the canonical host, the port only when not the default. */
	if (u->hu_port == defport)
		util_strlcpy(t->mt_authority, u->hu_host, sizeof(t->mt_authority));
	else
		snprintf(t->mt_authority, sizeof(t->mt_authority), "%s:%u", u->hu_host,
		    (unsigned)u->hu_port);
	snprintf(t->mt_path, sizeof(t->mt_path), "%s%s%s", u->hu_path, u->hu_has_query ? "?" : "",
	    u->hu_query);
	util_strlcpy(t->mt_url, u->hu_url, sizeof(t->mt_url));
}

int
medreq_parse_target(const char *uri, struct medreq_target *t, const char **code)
{
	/* Large (about 17 KiB): off the stack of the event loop's callbacks. */
	struct httpurl *u;
	enum httpurl_err e;

	memset(t, 0, sizeof(*t));
	if (uri == NULL || uri[0] == '\0' || uri[0] == '/' || strcmp(uri, "*") == 0) {
		*code = MEDREQ_E_ORIGIN_FORM;
		return -1;
	}
	if ((u = malloc(sizeof(*u))) == NULL) {
		*code = "out_of_memory";
		return -1;
	}
	/*
	 * Threat: two parsers reading one target differently (userinfo,
	 * backslash, encoded delimiters, exotic IPv4 forms...). httpurl refuses
	 * every such form; what it accepts has exactly one canonical reading,
	 * and that reading is what boundaryd authorizes and what goes upstream.
	 */
	e = httpurl_parse(uri, strlen(uri), u);
	if (e != HTTPURL_OK) {
		free(u);
		*code = httpurl_strerror(e);
		return -1;
	}
	medreq_fill(u, t);
	free(u);
	*code = NULL;
	return 0;
}

int
medreq_host_check(const struct medreq_target *t, const char *host, const char **code)
{
	char canon[HTTPURL_AUTHORITY_BUF + 8], mine[HTTPURL_AUTHORITY_BUF + 8];

	if (host == NULL) {
		*code = MEDREQ_E_HOST_MISSING;
		return -1;
	}
	/*
	 * Threat: a target naming one authority and a Host header naming
	 * another; a server or cache behind the mediator might route by Host
	 * while boundaryd authorized the target. Both must be the same
	 * canonical host:port (the mediator also sends its own Host).
	 */
	snprintf(mine, sizeof(mine), "%s%s%s:%u", t->mt_host_is_v6 ? "[" : "", t->mt_host,
	    t->mt_host_is_v6 ? "]" : "", (unsigned)t->mt_port);
	if (httpurl_authority_canon(t->mt_scheme, host, canon, sizeof(canon)) != HTTPURL_OK ||
	    strcmp(canon, mine) != 0) {
		*code = MEDREQ_E_HOST_MISMATCH;
		return -1;
	}
	*code = NULL;
	return 0;
}

int
medreq_is_redirect(int status)
{
	return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

int
medreq_redirect_target(const struct medreq_target *base, const char *location,
    struct medreq_target *next, const char **detail)
{
	char *abs;
	size_t n;
	int r;

	*detail = NULL;
	memset(next, 0, sizeof(*next));
	if (location == NULL || (n = strlen(location)) == 0 || n > HTTPURL_MAX_TARGET)
		return -1;
	if ((abs = malloc(HTTPURL_MAX_TARGET + 64)) == NULL)
		return -1;
	/*
	 * Only forms with one reading: absolute, scheme-relative (the base's
	 * scheme) and absolute-path (the base's authority). A relative path
	 * ("x", "../x") would need RFC 3986 merging with dot-segment removal,
	 * exactly what the canonical parser refuses to do; it is refused too.
	 */
	if (location[0] == '/' && location[1] == '/')
		r = snprintf(abs, HTTPURL_MAX_TARGET + 64, "%s:%s", base->mt_scheme, location);
	else if (location[0] == '/')
		r = snprintf(abs, HTTPURL_MAX_TARGET + 64, "%s://%s%s%s:%u%s", base->mt_scheme,
		    base->mt_host_is_v6 ? "[" : "", base->mt_host, base->mt_host_is_v6 ? "]" : "",
		    (unsigned)base->mt_port, location);
	else if (strncasecmp(location, "http://", 7) == 0 ||
	    strncasecmp(location, "https://", 8) == 0)
		r = snprintf(abs, HTTPURL_MAX_TARGET + 64, "%s", location);
	else
		r = -1;
	if (r < 0 || (size_t)r >= HTTPURL_MAX_TARGET + 64) {
		free(abs);
		return -1;
	}
	r = medreq_parse_target(abs, next, detail);
	free(abs);
	return r;
}

void
medreq_redacted_url(const char *url, char *out, size_t outsz)
{
	size_t n = strcspn(url, "?#");

	if (outsz == 0)
		return;
	snprintf(out, outsz, "%.*s%s", (int)n, url, url[n] != '\0' ? "?[redacted]" : "");
}

/* Is name one of the comma-separated tokens of list (case-insensitive)? */
static int
medreq_in_token_list(const char *name, const char *list)
{
	size_t nl = strlen(name);

	while (list != NULL && *list != '\0') {
		while (*list == ' ' || *list == '\t' || *list == ',')
			list++;
		size_t tl = strcspn(list, ", \t");
		if (tl == nl && tl > 0 && strncasecmp(list, name, nl) == 0)
			return 1;
		list += tl;
	}
	return 0;
}

int
medreq_request_header_forwarded(const char *name, const char *connection)
{
	static const char *const dropped[] = {
		/* client credentials: the mediator never forwards them */
		"authorization", "proxy-authorization", "cookie",
		/* set by the mediator */
		"host", "content-length",
		/* hop-by-hop (RFC 9110 7.6.1) */
		"connection", "keep-alive", "proxy-connection", "te", "trailer",
		"transfer-encoding", "upgrade",
	};

	if (name == NULL || name[0] == '\0')
		return 0;
	for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++)
		if (strcasecmp(name, dropped[i]) == 0)
			return 0;
	if (strncasecmp(name, "proxy-", 6) == 0)
		return 0;
	/* A header the client declared hop-by-hop stays on this hop. */
	if (medreq_in_token_list(name, connection))
		return 0;
	return 1;
}

int
medreq_response_header_allowed(const char *name)
{
	static const char *const allowed[] = {
		"content-type", "content-language", "content-encoding", "content-disposition",
		"cache-control", "etag", "last-modified", "expires", "date", "vary", "age",
		"location", "retry-after",
	};

	if (name == NULL)
		return 0;
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		if (strcasecmp(name, allowed[i]) == 0)
			return 1;
	return 0;
}
