/*
 * medreq.c: the HTTP mediator's request-target and header rules.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <event2/http.h>

#include "medreq.h"
#include "util.h"

/*
 * A DNS name: labels of [a-z0-9-] (underscore tolerated, some services use
 * it) separated by single dots, no leading or trailing dot. Lower-cases in
 * place.
 */
static int
medreq_valid_name(char *h)
{
	size_t label = 0;

	if (h[0] == '\0' || h[0] == '.')
		return 0;
	for (char *p = h; *p != '\0'; p++) {
		*p = (char)tolower((unsigned char)*p);
		if (*p == '.') {
			if (label == 0)
				return 0;
			label = 0;
			continue;
		}
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
			return 0;
		if (++label > 63)
			return 0;
	}
	return label != 0;
}

/*
 * Threat: "http://2130706433/", "http://0x7f.1/", "http://0177.0.0.1/"
 * name 127.0.0.1 to some resolvers and are not names at all. A host whose
 * last label starts with a digit must be a canonical dotted quad
 * (inet_pton refuses short, octal, hex and decimal forms); anything else
 * that looks numeric is refused, never resolved.
 */
static int
medreq_numeric_ok(const char *h)
{
	const char *last = strrchr(h, '.');
	struct in_addr a;

	last = last ? last + 1 : h;
	if (!isdigit((unsigned char)last[0]))
		return 1;
	return inet_pton(AF_INET, h, &a) == 1;
}

int
medreq_parse_target(const char *uri, struct medreq_target *t, const char **code)
{
	struct evhttp_uri *u = NULL;
	const char *scheme, *host, *path, *query;
	int port, defport, n;

	memset(t, 0, sizeof(*t));
	*code = MEDREQ_E_MALFORMED;
	if (uri == NULL || uri[0] == '\0')
		return -1;
	if (uri[0] == '/') {
		*code = MEDREQ_E_ORIGIN_FORM;
		return -1;
	}
	if (strlen(uri) > MEDREQ_PATH_MAX + MEDREQ_HOST_MAX + 32) {
		*code = MEDREQ_E_TOO_LONG;
		return -1;
	}
	/* Strict (flags 0): characters outside RFC 3986 are refused, not repaired. */
	if ((u = evhttp_uri_parse_with_flags(uri, 0)) == NULL)
		return -1;
	scheme = evhttp_uri_get_scheme(u);
	host = evhttp_uri_get_host(u);
	if (scheme == NULL || host == NULL) {
		*code = scheme == NULL ? MEDREQ_E_ORIGIN_FORM : MEDREQ_E_MALFORMED;
		goto fail;
	}
	if (strcasecmp(scheme, "http") == 0) {
		util_strlcpy(t->mt_scheme, "http", sizeof(t->mt_scheme));
	} else if (strcasecmp(scheme, "https") == 0) {
		util_strlcpy(t->mt_scheme, "https", sizeof(t->mt_scheme));
		t->mt_tls = 1;
	} else {
		*code = MEDREQ_E_SCHEME;
		goto fail;
	}
	/* Credentials in the URL are the client's to keep, never forwarded. */
	if (evhttp_uri_get_userinfo(u) != NULL) {
		*code = MEDREQ_E_USERINFO;
		goto fail;
	}
	if (evhttp_uri_get_fragment(u) != NULL) {
		*code = MEDREQ_E_FRAGMENT;
		goto fail;
	}
	*code = MEDREQ_E_HOST;
	if (host[0] == '[') {
		size_t hl = strlen(host);
		struct in6_addr a6;
		if (hl < 3 || host[hl - 1] != ']' || hl - 2 > MEDREQ_HOST_MAX)
			goto fail;
		memcpy(t->mt_host, host + 1, hl - 2);
		t->mt_host[hl - 2] = '\0';
		/* No zone ids, no IPvFuture: one literal inet_pton takes. */
		if (inet_pton(AF_INET6, t->mt_host, &a6) != 1)
			goto fail;
		for (char *p = t->mt_host; *p != '\0'; p++)
			*p = (char)tolower((unsigned char)*p);
		t->mt_host_is_v6 = 1;
	} else {
		if (util_strlcpy(t->mt_host, host, sizeof(t->mt_host)) >= sizeof(t->mt_host) ||
		    !medreq_valid_name(t->mt_host))
			goto fail;
		if (!medreq_numeric_ok(t->mt_host)) {
			*code = MEDREQ_E_AMBIGUOUS;
			goto fail;
		}
	}
	port = evhttp_uri_get_port(u);
	defport = t->mt_tls ? 443 : 80;
	if (port == -1)
		port = defport;
	if (port < 1 || port > 65535) {
		*code = MEDREQ_E_PORT;
		goto fail;
	}
	t->mt_port = (uint16_t)port;
	if (t->mt_host_is_v6)
		n = port == defport ? snprintf(t->mt_authority, sizeof(t->mt_authority), "[%s]",
		    t->mt_host) : snprintf(t->mt_authority, sizeof(t->mt_authority), "[%s]:%d",
		    t->mt_host, port);
	else
		n = port == defport ? snprintf(t->mt_authority, sizeof(t->mt_authority), "%s",
		    t->mt_host) : snprintf(t->mt_authority, sizeof(t->mt_authority), "%s:%d",
		    t->mt_host, port);
	if (n < 0 || (size_t)n >= sizeof(t->mt_authority))
		goto fail;
	path = evhttp_uri_get_path(u);
	query = evhttp_uri_get_query(u);
	if (path == NULL || path[0] == '\0')
		path = "/";
	if (path[0] != '/') {
		*code = MEDREQ_E_MALFORMED;
		goto fail;
	}
	n = query != NULL ? snprintf(t->mt_path, sizeof(t->mt_path), "%s?%s", path, query) :
	    snprintf(t->mt_path, sizeof(t->mt_path), "%s", path);
	if (n < 0 || (size_t)n >= sizeof(t->mt_path)) {
		*code = MEDREQ_E_TOO_LONG;
		goto fail;
	}
	evhttp_uri_free(u);
	*code = NULL;
	return 0;
fail:
	evhttp_uri_free(u);
	memset(t, 0, sizeof(*t));
	return -1;
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
