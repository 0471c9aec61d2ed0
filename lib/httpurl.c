/*
 * httpurl.c: absolute-form request targets, canonical URLs, IP-literal
 * classification and scope matching.
 *
 * Trust model: every byte of the target comes from the untrusted mediated
 * client. The canonical form is what the mediator sends upstream, what a
 * scope is matched against and what a commit token binds, so the three
 * can never disagree. Where HTTP stacks differ (WHATWG vs RFC 3986 vs
 * inet_aton vs Tomcat/IIS path handling) we refuse rather than pick one.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "httpurl.h"
#include "netpolicy.h"

const char *
httpurl_strerror(enum httpurl_err e)
{
	switch (e) {
	case HTTPURL_OK:
		return "ok";
	case HTTPURL_E_TOO_LONG:
		return "too_long";
	case HTTPURL_E_SCHEME:
		return "bad_scheme";
	case HTTPURL_E_USERINFO:
		return "userinfo";
	case HTTPURL_E_FRAGMENT:
		return "fragment";
	case HTTPURL_E_HOST:
		return "bad_host";
	case HTTPURL_E_NUMERIC_HOST:
		return "ambiguous_numeric_host";
	case HTTPURL_E_IDNA:
		return "idna_host";
	case HTTPURL_E_IPV6:
		return "bad_ipv6";
	case HTTPURL_E_PORT:
		return "bad_port";
	case HTTPURL_E_CHAR:
		return "bad_char";
	case HTTPURL_E_CONTROL:
		return "control_char";
	case HTTPURL_E_BACKSLASH:
		return "backslash";
	case HTTPURL_E_ESCAPE:
		return "bad_escape";
	case HTTPURL_E_ENCODED_DELIM:
		return "encoded_delimiter";
	case HTTPURL_E_DOUBLE_ENCODING:
		return "double_encoding";
	case HTTPURL_E_DOT_SEGMENT:
		return "dot_segment";
	case HTTPURL_E_EMPTY_SEGMENT:
		return "empty_segment";
	case HTTPURL_E_UTF8:
		return "bad_utf8";
	case HTTPURL_E_SCOPE:
		return "bad_scope";
	}
	return "unknown";
}

static int
hu_is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int
hu_is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static int
hu_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int
hu_lower(int c)
{
	return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

/* RFC 3986 unreserved minus ".", which is refused when encoded (dot-segments). */
static int
hu_unreserved_nodot(int c)
{
	return hu_is_alpha(c) || hu_is_digit(c) || c == '-' || c == '_' || c == '~';
}

/* pchar without pct-encoded: unreserved / sub-delims / ":" / "@" */
static int
hu_pchar(int c)
{
	return hu_unreserved_nodot(c) || c == '.' || strchr("!$&'()*+,;=:@", c) != NULL;
}

static int
hu_is_control(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

/* A bounded output buffer; overflow is sticky. */
struct hu_buf {
	char *b;
	size_t n, cap;
	int over;
};

static void
hu_put(struct hu_buf *o, char c)
{
	if (o->n + 1 >= o->cap) {
		o->over = 1;
		return;
	}
	o->b[o->n++] = c;
	o->b[o->n] = '\0';
}

/* ---- hosts ---- */

/* One inet_aton-style IPv4 part: decimal, 0-prefixed octal or 0x hex. */
static int
hu_v4_part(const char *s, size_t n, uint64_t *v, int *nonstd)
{
	size_t i = 0;
	int base = 10;

	if (n == 0)
		return -1;
	if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		i = 2;
		*nonstd = 1;
	} else if (n >= 2 && s[0] == '0') {
		base = 8;
		i = 1;
		*nonstd = 1;
	}
	*v = 0;
	for (; i < n; i++) {
		int d = hu_hexval((unsigned char)s[i]);
		if (d < 0 || d >= base)
			return -1;
		*v = *v * (uint64_t)base + (uint64_t)d;
		if (*v > 0xffffffffULL)
			return -1;
	}
	return 0;
}

/* Does the last label look like a number (digits, or 0x and hex digits)? */
static int
hu_last_label_numeric(const char *h, size_t n)
{
	size_t start = n;
	while (start > 0 && h[start - 1] != '.')
		start--;
	const char *l = h + start;
	size_t ln = n - start;
	if (ln == 0)
		return 0;
	size_t i = 0;
	if (ln >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X')) {
		for (i = 2; i < ln; i++)
			if (hu_hexval((unsigned char)l[i]) < 0)
				return 0;
		return 1;
	}
	for (i = 0; i < ln; i++)
		if (!hu_is_digit((unsigned char)l[i]))
			return 0;
	return 1;
}

/*
 * The IPv4 forms resolvers and browsers accept (inet_aton, WHATWG): one to
 * four parts, the last filling the remaining bytes: 2130706433, 127.1,
 * 0177.0.0.1, 0x7f.1. Anything whose last label looks numeric but is not
 * one of them is refused: a different parser could still read it as an
 * address.
 */
static enum httpurl_err
hu_parse_v4(const char *h, size_t n, uint8_t out[4], int *nonstd)
{
	uint64_t parts[4] = { 0 };
	size_t np = 0, start = 0;

	*nonstd = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i == n || h[i] == '.') {
			if (np == 4)
				return HTTPURL_E_NUMERIC_HOST;
			if (hu_v4_part(h + start, i - start, &parts[np], nonstd) != 0)
				return HTTPURL_E_NUMERIC_HOST;
			np++;
			start = i + 1;
		}
	}
	if (np != 4)
		*nonstd = 1;
	for (size_t i = 0; i + 1 < np; i++)
		if (parts[i] > 255)
			return HTTPURL_E_NUMERIC_HOST;
	uint64_t lastmax = np == 1 ? 0xffffffffULL : ((uint64_t)1 << (8 * (5 - np))) - 1;
	if (parts[np - 1] > lastmax)
		return HTTPURL_E_NUMERIC_HOST;
	uint32_t a = (uint32_t)parts[np - 1];
	for (size_t i = 0; i + 1 < np; i++)
		a |= (uint32_t)parts[i] << (8 * (3 - i));
	out[0] = (uint8_t)(a >> 24);
	out[1] = (uint8_t)(a >> 16);
	out[2] = (uint8_t)(a >> 8);
	out[3] = (uint8_t)a;
	return HTTPURL_OK;
}

/* A DNS name: LDH (and "_") labels of 1..63, at most 253, no IDNA. */
static enum httpurl_err
hu_check_name(const char *h, size_t n, char *out)
{
	size_t label = 0;

	if (n == 0)
		return HTTPURL_E_HOST;
	if (n > HTTPURL_MAX_HOST)
		return HTTPURL_E_TOO_LONG;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)h[i];
		if (c >= 0x80)
			return HTTPURL_E_IDNA; /* no Unicode hosts: IDNA mappings differ */
		out[i] = (char)hu_lower(c);
	}
	out[n] = '\0';
	for (size_t i = 0; i <= n; i++) {
		if (i == n || out[i] == '.') {
			/* Empty labels, a trailing dot included: "a..b", "a.b." */
			if (label == 0 || label > 63)
				return HTTPURL_E_HOST;
			const char *l = out + i - label;
			if (l[0] == '-' || l[label - 1] == '-')
				return HTTPURL_E_HOST;
			/* Punycode: it names a Unicode host we refuse. */
			if (label >= 4 && strncmp(l, "xn--", 4) == 0)
				return HTTPURL_E_IDNA;
			label = 0;
			continue;
		}
		char c = out[i];
		if (!(hu_is_alpha(c) || hu_is_digit(c) || c == '-' || c == '_'))
			return HTTPURL_E_HOST;
		label++;
	}
	return HTTPURL_OK;
}

/*
 * Canonical host of h[0..n): lowercase name, dotted-decimal IPv4 or
 * bracketed inet_ntop IPv6, into out (HTTPURL_HOST_BUF bytes).
 */
static enum httpurl_err
hu_host(const char *h, size_t n, char *out, enum httpurl_hostkind *kind, int *nonstd,
    uint8_t addr[16])
{
	memset(addr, 0, 16);
	*nonstd = 0;
	if (n == 0)
		return HTTPURL_E_HOST;
	if (h[0] == '[') {
		char tmp[64], txt[INET6_ADDRSTRLEN];
		if (n < 4 || h[n - 1] != ']')
			return HTTPURL_E_IPV6;
		size_t in = n - 2;
		if (in >= sizeof(tmp) || in > 45)
			return HTTPURL_E_IPV6;
		for (size_t i = 1; i < n - 1; i++) {
			char c = h[i];
			/* No zone id ("%25eth0") and no IPvFuture ("v1.x"). */
			if (!(hu_hexval((unsigned char)c) >= 0 || c == ':' || c == '.'))
				return HTTPURL_E_IPV6;
		}
		memcpy(tmp, h + 1, in);
		tmp[in] = '\0';
		if (inet_pton(AF_INET6, tmp, addr) != 1)
			return HTTPURL_E_IPV6;
		if (inet_ntop(AF_INET6, addr, txt, sizeof(txt)) == NULL)
			return HTTPURL_E_IPV6;
		snprintf(out, HTTPURL_HOST_BUF, "[%s]", txt);
		*kind = HTTPURL_HOST_IPV6;
		return HTTPURL_OK;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)h[i];
		if (c >= 0x80)
			return HTTPURL_E_IDNA;
		/* "%31%32%37.0.0.1" is 127.0.0.1 to a WHATWG parser. */
		if (c == '%' || c == '[' || c == ']')
			return HTTPURL_E_HOST;
	}
	if (n <= HTTPURL_MAX_HOST && hu_last_label_numeric(h, n)) {
		enum httpurl_err e = hu_parse_v4(h, n, addr, nonstd);
		if (e != HTTPURL_OK)
			return e;
		snprintf(out, HTTPURL_HOST_BUF, "%u.%u.%u.%u", addr[0], addr[1], addr[2], addr[3]);
		*kind = HTTPURL_HOST_IPV4;
		return HTTPURL_OK;
	}
	*kind = HTTPURL_HOST_NAME;
	return hu_check_name(h, n, out);
}

/* "host[:port]" into its parts; the port defaults to defport. */
static enum httpurl_err
hu_authority(const char *a, size_t n, uint16_t defport, char *host, enum httpurl_hostkind *kind,
    int *nonstd, uint8_t addr[16], uint16_t *port)
{
	size_t hn = n;
	const char *p = NULL;

	for (size_t i = 0; i < n; i++) {
		if (a[i] == '@')
			return HTTPURL_E_USERINFO;
		if (a[i] == '\\')
			return HTTPURL_E_BACKSLASH;
		if (hu_is_control((unsigned char)a[i]))
			return HTTPURL_E_CONTROL;
		if (a[i] == '/' || a[i] == '?' || a[i] == '#')
			return HTTPURL_E_HOST;
	}
	if (n > 0 && a[0] == '[') {
		const char *rb = memchr(a, ']', n);
		if (rb == NULL)
			return HTTPURL_E_IPV6;
		hn = (size_t)(rb - a) + 1;
		if (hn < n) {
			if (a[hn] != ':')
				return HTTPURL_E_IPV6;
			p = a + hn + 1;
		}
	} else {
		const char *c = memchr(a, ':', n);
		if (c != NULL) {
			hn = (size_t)(c - a);
			p = c + 1;
		}
	}
	*port = defport;
	if (p != NULL) {
		size_t pn = (size_t)(a + n - p);
		uint32_t v = 0;
		/* 1..65535, digits only, no empty port and no leading zero. */
		if (pn == 0 || pn > 5 || p[0] == '0')
			return HTTPURL_E_PORT;
		for (size_t i = 0; i < pn; i++) {
			if (!hu_is_digit((unsigned char)p[i]))
				return HTTPURL_E_PORT;
			v = v * 10 + (uint32_t)(p[i] - '0');
		}
		if (v == 0 || v > 65535)
			return HTTPURL_E_PORT;
		*port = (uint16_t)v;
	}
	return hu_host(a, hn, host, kind, nonstd, addr);
}

static int
hu_scheme_port(const char *scheme, uint16_t *port)
{
	if (strcmp(scheme, "http") == 0) {
		*port = 80;
		return 0;
	}
	if (strcmp(scheme, "https") == 0) {
		*port = 443;
		return 0;
	}
	return -1;
}

/* ---- paths ---- */

/*
 * Strict UTF-8 (no overlong forms, surrogates or values past U+10FFFF), so
 * %C0%AE is never a "." to some decoder, and no C1 controls or code points
 * that NFKC or best-fit mappings turn into "/", "\" or ".".
 */
static enum httpurl_err
hu_check_utf8(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint32_t cp;
		size_t len;
		uint8_t c = s[i];
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			len = 2;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4;
			cp = c & 0x07;
		} else {
			return HTTPURL_E_UTF8;
		}
		if (i + len > n)
			return HTTPURL_E_UTF8;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return HTTPURL_E_UTF8;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return HTTPURL_E_UTF8;
		if (cp >= 0x80 && cp <= 0x9f)
			return HTTPURL_E_CONTROL;
		switch (cp) {
		case 0x2024: /* one dot leader */
		case 0x2044: /* fraction slash */
		case 0x2215: /* division slash */
		case 0xfe52: /* small full stop */
		case 0xfe68: /* small reverse solidus */
		case 0xff0e: /* fullwidth full stop */
		case 0xff0f: /* fullwidth solidus */
		case 0xff3c: /* fullwidth reverse solidus */
			return HTTPURL_E_UTF8;
		default:
			break;
		}
		i += len;
	}
	return HTTPURL_OK;
}

/*
 * A path segment that is "." or "..", also with path parameters: Tomcat
 * and Spring read "..;x" as "..", so "/v1/data/..;/admin" leaves the scope.
 */
static int
hu_dot_segment(const char *seg, size_t n)
{
	const char *semi = memchr(seg, ';', n);
	if (semi != NULL)
		n = (size_t)(semi - seg);
	return (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.');
}

enum httpurl_err
httpurl_path_canon(const char *in, size_t len, char *out, size_t outsz)
{
	struct hu_buf o = { out, 0, outsz, 0 };
	uint8_t dec[HTTPURL_MAX_PATH];
	size_t nd = 0;

	if (outsz == 0)
		return HTTPURL_E_TOO_LONG;
	out[0] = '\0';
	if (len > HTTPURL_MAX_PATH)
		return HTTPURL_E_TOO_LONG;
	if (in == NULL || len == 0 || in[0] != '/')
		return HTTPURL_E_CHAR;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		if (hu_is_control(c))
			return HTTPURL_E_CONTROL;
		if (c == '\\')
			return HTTPURL_E_BACKSLASH;
		if (c == '%') {
			if (i + 2 >= len || hu_hexval((unsigned char)in[i + 1]) < 0 ||
			    hu_hexval((unsigned char)in[i + 2]) < 0)
				return HTTPURL_E_ESCAPE;
			int v = hu_hexval((unsigned char)in[i + 1]) * 16 +
			    hu_hexval((unsigned char)in[i + 2]);
			i += 2;
			/*
			 * Encoded delimiters mean one thing to us and another to a
			 * server or proxy that decodes before routing: refuse them.
			 */
			if (v == '%')
				return HTTPURL_E_DOUBLE_ENCODING;
			if (v == '/' || v == '\\' || v == '.' || v == ';' || v == '?' || v == '#')
				return HTTPURL_E_ENCODED_DELIM;
			if (hu_is_control((unsigned char)v))
				return HTTPURL_E_CONTROL;
			dec[nd++] = (uint8_t)v;
			if (hu_unreserved_nodot(v)) {
				/* RFC 3986 6.2.2.2: %41 and A are the same resource. */
				hu_put(&o, (char)v);
			} else {
				static const char hex[] = "0123456789ABCDEF";
				hu_put(&o, '%');
				hu_put(&o, hex[v >> 4]);
				hu_put(&o, hex[v & 15]);
			}
			continue;
		}
		if (c >= 0x80)
			return HTTPURL_E_CHAR;
		if (c != '/' && !hu_pchar(c))
			return HTTPURL_E_CHAR;
		dec[nd++] = c;
		hu_put(&o, (char)c);
	}
	if (o.over)
		return HTTPURL_E_TOO_LONG;
	/* Segments: no "." or "..", no empty segment but a final one ("/a/"). */
	for (size_t i = 1, start = 1; i <= o.n; i++) {
		if (i == o.n || out[i] == '/') {
			size_t sn = i - start;
			if (sn == 0 && i != o.n)
				return HTTPURL_E_EMPTY_SEGMENT;
			if (hu_dot_segment(out + start, sn))
				return HTTPURL_E_DOT_SEGMENT;
			start = i + 1;
		}
	}
	return hu_check_utf8(dec, nd);
}

/* The query is opaque application data: well-formed, hex uppercased, never decoded. */
static enum httpurl_err
hu_query_canon(const char *in, size_t len, char *out, size_t outsz)
{
	struct hu_buf o = { out, 0, outsz, 0 };
	static const char hex[] = "0123456789ABCDEF";

	out[0] = '\0';
	if (len > HTTPURL_MAX_QUERY)
		return HTTPURL_E_TOO_LONG;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		if (hu_is_control(c))
			return HTTPURL_E_CONTROL;
		if (c == '\\')
			return HTTPURL_E_BACKSLASH;
		if (c == '%') {
			if (i + 2 >= len || hu_hexval((unsigned char)in[i + 1]) < 0 ||
			    hu_hexval((unsigned char)in[i + 2]) < 0)
				return HTTPURL_E_ESCAPE;
			int v = hu_hexval((unsigned char)in[i + 1]) * 16 +
			    hu_hexval((unsigned char)in[i + 2]);
			i += 2;
			hu_put(&o, '%');
			hu_put(&o, hex[v >> 4]);
			hu_put(&o, hex[v & 15]);
			continue;
		}
		if (c >= 0x80 || !(hu_pchar(c) || c == '/' || c == '?'))
			return HTTPURL_E_CHAR;
		hu_put(&o, (char)c);
	}
	return o.over ? HTTPURL_E_TOO_LONG : HTTPURL_OK;
}

/* ---- addresses ---- */

static void
hu_add_addr(struct httpurl *u, int family, const uint8_t *a, const char *form)
{
	if (u->hu_naddrs >= HTTPURL_MAX_ADDRS)
		return;
	struct httpurl_addr *x = &u->hu_addrs[u->hu_naddrs++];
	memset(x, 0, sizeof(*x));
	x->ha_family = family;
	memcpy(x->ha_addr, a, family == AF_INET ? 4 : 16);
	x->ha_form = form;
}

/*
 * The IPv4 addresses an IPv6 literal reaches through a translator or a
 * tunnel: ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible), ::ffff:0:a.b.c.d
 * (SIIT), 64:ff9b::/96 and 64:ff9b:1::/48 (NAT64), 2002::/16 (6to4) and
 * 2001::/32 (Teredo server, and the client XORed with ones).
 */
static void
hu_embedded(struct httpurl *u, const uint8_t a[16])
{
	static const uint8_t zero10[10] = { 0 };
	static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };
	static const uint8_t nat64l[6] = { 0, 0x64, 0xff, 0x9b, 0, 1 };
	uint8_t v4[4];

	if (memcmp(a, zero10, 10) == 0 && a[10] == 0xff && a[11] == 0xff) {
		hu_add_addr(u, AF_INET, a + 12, "ipv4_mapped");
	} else if (memcmp(a, zero10, 10) == 0 && a[10] == 0 && a[11] == 0 &&
	    !(a[12] == 0 && a[13] == 0 && a[14] == 0 && a[15] <= 1)) {
		/* ::/96 but not :: and ::1, which embed nothing (RFC 4291 2.5.5.1) */
		hu_add_addr(u, AF_INET, a + 12, "ipv4_compatible");
	} else if (memcmp(a, zero10, 8) == 0 && a[8] == 0xff && a[9] == 0xff && a[10] == 0 &&
	    a[11] == 0) {
		hu_add_addr(u, AF_INET, a + 12, "siit");
	} else if (memcmp(a, nat64, 12) == 0 || memcmp(a, nat64l, 6) == 0) {
		hu_add_addr(u, AF_INET, a + 12, "nat64");
	} else if (a[0] == 0x20 && a[1] == 0x02) {
		hu_add_addr(u, AF_INET, a + 2, "6to4");
	} else if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) {
		hu_add_addr(u, AF_INET, a + 4, "teredo_server");
		for (int i = 0; i < 4; i++)
			v4[i] = (uint8_t)~a[12 + i];
		hu_add_addr(u, AF_INET, v4, "teredo_client");
	}
}

/* ---- whole targets ---- */

enum httpurl_err
httpurl_parse(const char *t, size_t len, struct httpurl *u)
{
	const char *p, *end = t + len, *auth, *aend, *path, *q;
	uint8_t addr[16];
	enum httpurl_err e;
	uint16_t defport;

	memset(u, 0, sizeof(*u));
	if (t == NULL || len == 0)
		return HTTPURL_E_SCHEME;
	if (len > HTTPURL_MAX_TARGET)
		return HTTPURL_E_TOO_LONG;
	for (size_t i = 0; i < len; i++) {
		/* A NUL would end the string for every C consumer after us. */
		if (hu_is_control((unsigned char)t[i]))
			return HTTPURL_E_CONTROL;
		if (t[i] == '#')
			return HTTPURL_E_FRAGMENT;
	}
	/* scheme "://" exactly; "http:/x", "http:\\x" and relative forms are refused */
	p = memchr(t, ':', len);
	if (p == NULL || p - t > 5 || end - p < 3 || p[1] != '/' || p[2] != '/')
		return HTTPURL_E_SCHEME;
	for (const char *s = t; s < p; s++)
		u->hu_scheme[s - t] = (char)hu_lower((unsigned char)*s);
	if (hu_scheme_port(u->hu_scheme, &defport) != 0)
		return HTTPURL_E_SCHEME;
	auth = p + 3;
	for (aend = auth; aend < end && *aend != '/' && *aend != '?'; aend++)
		;
	/* "http://evil\@good/": WHATWG reads "\" as "/", so the host would differ. */
	e = hu_authority(auth, (size_t)(aend - auth), defport, u->hu_host, &u->hu_kind,
	    &u->hu_ip_nonstandard, addr, &u->hu_port);
	if (e != HTTPURL_OK)
		return e;
	snprintf(u->hu_authority, sizeof(u->hu_authority), "%s:%u", u->hu_host, u->hu_port);
	path = aend;
	q = memchr(path, '?', (size_t)(end - path));
	if (q == NULL)
		q = end;
	if (q == path) {
		strcpy(u->hu_path, "/");
	} else {
		e = httpurl_path_canon(path, (size_t)(q - path), u->hu_path, sizeof(u->hu_path));
		if (e != HTTPURL_OK)
			return e;
	}
	if (q < end) {
		u->hu_has_query = 1;
		e = hu_query_canon(q + 1, (size_t)(end - q - 1), u->hu_query, sizeof(u->hu_query));
		if (e != HTTPURL_OK)
			return e;
	}
	int n;
	if (u->hu_port == defport)
		n = snprintf(u->hu_url, sizeof(u->hu_url), "%s://%s%s%s%s", u->hu_scheme,
		    u->hu_host, u->hu_path, u->hu_has_query ? "?" : "", u->hu_query);
	else
		n = snprintf(u->hu_url, sizeof(u->hu_url), "%s://%s:%u%s%s%s", u->hu_scheme,
		    u->hu_host, u->hu_port, u->hu_path, u->hu_has_query ? "?" : "", u->hu_query);
	/* The canonical form must itself parse: no longer than a target may be. */
	if (n < 0 || (size_t)n > HTTPURL_MAX_TARGET)
		return HTTPURL_E_TOO_LONG;
	if (u->hu_kind == HTTPURL_HOST_IPV4) {
		hu_add_addr(u, AF_INET, addr, "literal");
	} else if (u->hu_kind == HTTPURL_HOST_IPV6) {
		hu_add_addr(u, AF_INET6, addr, "literal");
		hu_embedded(u, addr);
	}
	return HTTPURL_OK;
}

enum httpurl_err
httpurl_authority_canon(const char *scheme, const char *authority, char *out, size_t outsz)
{
	char host[HTTPURL_HOST_BUF];
	enum httpurl_hostkind kind;
	int nonstd;
	uint8_t addr[16];
	uint16_t defport, port;
	enum httpurl_err e;
	size_t n = strlen(authority);

	if (hu_scheme_port(scheme, &defport) != 0)
		return HTTPURL_E_SCHEME;
	if (n >= HTTPURL_AUTHORITY_BUF)
		return HTTPURL_E_TOO_LONG;
	e = hu_authority(authority, n, defport, host, &kind, &nonstd, addr, &port);
	if (e != HTTPURL_OK)
		return e;
	int r = snprintf(out, outsz, "%s:%u", host, port);
	return r < 0 || (size_t)r >= outsz ? HTTPURL_E_TOO_LONG : HTTPURL_OK;
}

enum httpurl_err
httpurl_scope_init(struct httpurl_scope *s, const char *scheme, const char *authority,
    const char *path_prefix)
{
	enum httpurl_err e;
	size_t n = strlen(scheme);

	memset(s, 0, sizeof(*s));
	if (n == 0 || n >= sizeof(s->hs_scheme))
		return HTTPURL_E_SCOPE;
	for (size_t i = 0; i < n; i++)
		s->hs_scheme[i] = (char)hu_lower((unsigned char)scheme[i]);
	e = httpurl_authority_canon(s->hs_scheme, authority, s->hs_authority,
	    sizeof(s->hs_authority));
	if (e == HTTPURL_E_SCHEME)
		return HTTPURL_E_SCOPE;
	if (e != HTTPURL_OK)
		return e;
	return httpurl_path_canon(path_prefix, strlen(path_prefix), s->hs_prefix,
	    sizeof(s->hs_prefix));
}

int
httpurl_path_has_prefix(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	if (n == 0 || strncmp(path, prefix, n) != 0)
		return 0;
	if (prefix[n - 1] == '/')
		return 1;
	/* "/v1/data" holds "/v1/data" and "/v1/data/..." but not "/v1/database". */
	return path[n] == '\0' || path[n] == '/';
}

int
httpurl_scope_match(const struct httpurl_scope *s, const struct httpurl *u)
{
	return strcmp(s->hs_scheme, u->hu_scheme) == 0 &&
	    strcmp(s->hs_authority, u->hu_authority) == 0 &&
	    httpurl_path_has_prefix(u->hu_path, s->hs_prefix);
}

int
httpurl_restricted(const struct httpurl *u, const struct netpolicy *p, const char **why)
{
	for (size_t i = 0; i < u->hu_naddrs; i++) {
		const struct httpurl_addr *a = &u->hu_addrs[i];
		uint8_t full[16] = { 0 };
		memcpy(full, a->ha_addr, a->ha_family == AF_INET ? 4 : 16);
		if (netpolicy_restricted(p, a->ha_family, full, why))
			return 1;
	}
	return 0;
}
