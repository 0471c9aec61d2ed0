/*
 * httpurl.h: strict parsing and canonicalization of absolute-form HTTP
 * request targets, IP-literal host classification for SSRF checks, and
 * segment-aware URL scope matching (pure logic, no I/O).
 *
 * The request target comes from an untrusted client of the HTTP mediator.
 * Anything two parsers could read differently (userinfo, fragments,
 * backslashes, encoded delimiters, dot-segments, double encoding, numeric
 * hosts in exotic forms, IDNA) is refused with a stable error instead of
 * being "fixed": a refusal can only deny, a repair can widen a scope.
 * docs/http.md has the rules.
 */
#ifndef GENSEE_HTTPURL_H
#define GENSEE_HTTPURL_H

#include <stddef.h>
#include <stdint.h>

struct netpolicy;

#define HTTPURL_MAX_TARGET 8192	/* a whole request target, raw and canonical */
#define HTTPURL_MAX_HOST 253	/* a DNS name (RFC 1035) */
#define HTTPURL_MAX_PATH 4096
#define HTTPURL_MAX_QUERY 4096
/* "[" + longest inet_ntop IPv6 form + "]" + ":65535" fits in 64 */
#define HTTPURL_HOST_BUF (HTTPURL_MAX_HOST + 1)
#define HTTPURL_AUTHORITY_BUF (HTTPURL_MAX_HOST + 8)

/* Stable error codes; httpurl_strerror names them. */
enum httpurl_err {
	HTTPURL_OK = 0,
	HTTPURL_E_TOO_LONG,		/* "too_long" */
	HTTPURL_E_SCHEME,		/* "bad_scheme": not http:// or https:// */
	HTTPURL_E_USERINFO,		/* "userinfo" */
	HTTPURL_E_FRAGMENT,		/* "fragment" */
	HTTPURL_E_HOST,			/* "bad_host": empty, bad characters or labels */
	HTTPURL_E_NUMERIC_HOST,		/* "ambiguous_numeric_host": looks numeric, is no IPv4 */
	HTTPURL_E_IDNA,			/* "idna_host": non-ASCII or xn-- labels */
	HTTPURL_E_IPV6,			/* "bad_ipv6": malformed literal, zone id, IPvFuture */
	HTTPURL_E_PORT,			/* "bad_port" */
	HTTPURL_E_CHAR,			/* "bad_char": not allowed in a request target */
	HTTPURL_E_CONTROL,		/* "control_char": NUL, C0, DEL, raw or encoded */
	HTTPURL_E_BACKSLASH,		/* "backslash" */
	HTTPURL_E_ESCAPE,		/* "bad_escape": % not followed by two hex digits */
	HTTPURL_E_ENCODED_DELIM,	/* "encoded_delimiter": %2F %5C %2E %3B %3F %23 */
	HTTPURL_E_DOUBLE_ENCODING,	/* "double_encoding": %25 in the path */
	HTTPURL_E_DOT_SEGMENT,		/* "dot_segment": "." or ".." (also "..;x") */
	HTTPURL_E_EMPTY_SEGMENT,	/* "empty_segment": "//" inside the path */
	HTTPURL_E_UTF8,			/* "bad_utf8": encoded bytes not strict UTF-8, or a
					 * code point normalizers turn into / \ or . */
	HTTPURL_E_SCOPE,		/* "bad_scope": a scope that cannot be canonical */
};

enum httpurl_hostkind {
	HTTPURL_HOST_NAME,
	HTTPURL_HOST_IPV4,
	HTTPURL_HOST_IPV6,
};

/* One address an IP-literal host stands for or embeds. */
struct httpurl_addr {
	int ha_family;		/* AF_INET or AF_INET6 */
	uint8_t ha_addr[16];	/* IPv4 in the first 4 bytes */
	const char *ha_form;	/* "literal", "ipv4_mapped", "ipv4_compatible",
				 * "siit", "nat64", "6to4", "teredo_server",
				 * "teredo_client" */
};

#define HTTPURL_MAX_ADDRS 4

struct httpurl {
	char hu_scheme[6];			/* "http" or "https" */
	char hu_host[HTTPURL_HOST_BUF];		/* lowercase name, dotted-decimal
						 * IPv4 or "[inet_ntop IPv6]" */
	uint16_t hu_port;			/* explicit or the scheme's default */
	char hu_authority[HTTPURL_AUTHORITY_BUF]; /* host ":" port, port always shown */
	char hu_path[HTTPURL_MAX_PATH + 1];	/* canonical, starts with "/" */
	int hu_has_query;
	char hu_query[HTTPURL_MAX_QUERY + 1];	/* without "?" */
	char hu_url[HTTPURL_MAX_TARGET + 1];	/* the whole canonical URL */
	enum httpurl_hostkind hu_kind;
	int hu_ip_nonstandard;	/* IPv4 written as anything but a.b.c.d decimal */
	struct httpurl_addr hu_addrs[HTTPURL_MAX_ADDRS]; /* literal first, then embedded */
	size_t hu_naddrs;
};

/* A transaction scope of the root-owned config, canonicalized. */
struct httpurl_scope {
	char hs_scheme[6];
	char hs_authority[HTTPURL_AUTHORITY_BUF];
	char hs_prefix[HTTPURL_MAX_PATH + 1];
};

const char *httpurl_strerror(enum httpurl_err e);

/*
 * Parse an absolute-form request target of len bytes (it may hold a NUL,
 * which is refused) into *u, canonicalized. Returns HTTPURL_OK or the
 * reason. Canonicalizing u->hu_url again yields u->hu_url.
 */
enum httpurl_err httpurl_parse(const char *target, size_t len, struct httpurl *u);

/*
 * Canonicalize one path (starting with "/", no query) into out (outsz
 * bytes). The same rules httpurl_parse applies to the path.
 */
enum httpurl_err httpurl_path_canon(const char *in, size_t len, char *out, size_t outsz);

/*
 * Canonicalize an authority ("host[:port]") for scheme into "host:port";
 * the port defaults to the scheme's.
 */
enum httpurl_err httpurl_authority_canon(const char *scheme, const char *authority,
    char *out, size_t outsz);

/* Build a scope from the config's scheme, authority and path_prefix. */
enum httpurl_err httpurl_scope_init(struct httpurl_scope *s, const char *scheme,
    const char *authority, const char *path_prefix);

/*
 * Is u inside s? Same scheme, same canonical authority, and the path is
 * the prefix or below it segment-wise: "/v1/data" holds "/v1/data" and
 * "/v1/data/x", never "/v1/database". A prefix ending in "/" holds only
 * what is below it.
 */
int httpurl_scope_match(const struct httpurl_scope *s, const struct httpurl *u);

/* Segment-aware prefix test on canonical paths. */
int httpurl_path_has_prefix(const char *path, const char *prefix);

/*
 * For an IP-literal host: is any address it stands for or embeds
 * restricted by p (netpolicy_restricted: built-in ranges plus the
 * policy's)? *why names the first one. A DNS name returns 0: its
 * resolved addresses must be checked by the caller after resolution.
 */
int httpurl_restricted(const struct httpurl *u, const struct netpolicy *p, const char **why);

#endif
