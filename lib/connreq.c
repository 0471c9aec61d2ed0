/*
 * connreq.c: the egress request head, read strictly.
 *
 * Threat: the agent writes these bytes, and for a forwarded request an
 * upstream reads what we pass on. Anything two readers could split
 * differently is refused: a NUL or bare CR/LF inside a line, obs-fold, a
 * header name that is not a token, two Content-Length headers,
 * Content-Length with Transfer-Encoding, Transfer-Encoding on GET or HEAD
 * or other than chunked, two Host headers, a target that is not NAME:PORT
 * or http://NAME[:PORT]/PATH, a port with a sign, a leading zero or over
 * 65535, userinfo in the URL, a Basic credential that is not strict
 * base64, more than one Proxy-Authorization header. An address literal in
 * any spelling is refused (403): egress is allowed by name, and an
 * address has none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>


#include "connreq.h"
#include "netpolicy.h"
#include "util.h"
static int
b64val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int
connreq_b64decode(const char *in, size_t n, unsigned char *out, size_t cap, size_t *outlen)
{
	size_t o = 0;

	if (n == 0 || n % 4 != 0)
		return -1;
	for (size_t i = 0; i < n; i += 4) {
		int v[4], pad = 0;
		for (int k = 0; k < 4; k++) {
			unsigned char c = (unsigned char)in[i + (size_t)k];
			if (c == '=' && i + 4 == n && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			if (pad > 0 || (v[k] = b64val(c)) < 0)
				return -1;
		}
		/* Canonical only: the bits the padding drops must be zero (one string, one value). */
		if ((pad == 1 && (v[2] & 0x3) != 0) || (pad == 2 && (v[1] & 0xf) != 0))
			return -1;
		uint32_t w = ((uint32_t)v[0] << 18) | ((uint32_t)v[1] << 12) | ((uint32_t)v[2] << 6) |
		    (uint32_t)v[3];
		unsigned char b[3] = { (unsigned char)(w >> 16), (unsigned char)(w >> 8),
			(unsigned char)w };
		for (int k = 0; k < 3 - pad; k++) {
			if (o == cap)
				return -1;
			out[o++] = b[k];
		}
	}
	*outlen = o;
	return 0;
}

/* Constant time in the length of expect. */
static int
connreq_cred_ok(const char *value, size_t vlen, const char *expect)
{
	unsigned char dec[192];
	size_t n = 0, want = strlen(expect);
	unsigned char diff;

	if (vlen < 6 || strncasecmp(value, "Basic ", 6) != 0)
		return 0;
	value += 6;
	vlen -= 6;
	while (vlen > 0 && *value == ' ') {
		value++;
		vlen--;
	}
	while (vlen > 0 && value[vlen - 1] == ' ')
		vlen--;
	if (connreq_b64decode(value, vlen, dec, sizeof(dec), &n) != 0 || n != want)
		return 0;
	diff = 0;
	for (size_t i = 0; i < want; i++)
		diff |= (unsigned char)(dec[i] ^ (unsigned char)expect[i]);
	memset(dec, 0, sizeof(dec));
	return diff == 0;
}

int
connreq_valid_method(const char *m)
{
	size_t n = strlen(m);

	if (n == 0 || n > CONNREQ_METHOD_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (m[i] < 'A' || m[i] > 'Z')
			return 0;
	return 1;
}

void
connreq_free(struct connreq *cr)
{
	if (cr->cr_upstream != NULL) {
		explicit_bzero(cr->cr_upstream, cr->cr_upstream_len);
		free(cr->cr_upstream);
	}
	cr->cr_upstream = NULL;
	cr->cr_upstream_len = 0;
}

/* One line of the head: [cl_p, cl_p + cl_len). */
struct cline {
	const char *cl_p;
	size_t cl_len;
};

/* What the header pass found. */
struct cheads {
	int ch_nauth, ch_authed;
	int ch_ncl, ch_nte, ch_nhost;
	const char *ch_cl, *ch_te;	/* values */
	size_t ch_cl_len, ch_te_len;
};

static int
crfail(int *status, const char **code, int st, const char *c)
{
	*status = st;
	*code = c;
	return -1;
}

/* RFC 9110 tchar. */
static int
tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Lines split on CRLF exactly; a bare CR or LF, an empty line or a trailing CRLF is refused. */
static int
split_lines(const char *head, size_t len, struct cline *v, size_t *n, int *status,
    const char **code)
{
	const char *p = head, *end = head + len;

	*n = 0;
	while (p < end) {
		const char *crlf = memmem(p, (size_t)(end - p), "\r\n", 2);
		size_t ll = crlf ? (size_t)(crlf - p) : (size_t)(end - p);
		const char *next = crlf ? crlf + 2 : end;
		if (ll == 0 || memchr(p, '\r', ll) != NULL || memchr(p, '\n', ll) != NULL ||
		    (crlf != NULL && next == end))
			return crfail(status, code, 400, "malformed_request");
		if (*n == CONNREQ_MAX_LINES)
			return crfail(status, code, 431, "head_too_large");
		v[*n].cl_p = p;
		v[(*n)++].cl_len = ll;
		p = next;
	}
	if (*n == 0)
		return crfail(status, code, 400, "malformed_request");
	return 0;
}

/* Does header line l have name (case-insensitive)? Then *value, *vlen (OWS trimmed). */
static int
header_is(const struct cline *l, const char *name, const char **value, size_t *vlen)
{
	size_t n = strlen(name);
	const char *v;
	size_t vl;

	if (l->cl_len <= n || strncasecmp(l->cl_p, name, n) != 0 || l->cl_p[n] != ':')
		return 0;
	v = l->cl_p + n + 1;
	vl = l->cl_len - n - 1;
	while (vl > 0 && (*v == ' ' || *v == '\t')) {
		v++;
		vl--;
	}
	while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
		vl--;
	*value = v;
	*vlen = vl;
	return 1;
}

/* Every header line: its form, and the headers the checks need. */
static int
scan_headers(const struct cline *v, size_t n, const char *expect, struct cheads *h,
    int *status, const char **code)
{
	memset(h, 0, sizeof(*h));
	for (size_t i = 1; i < n; i++) {
		const struct cline *l = &v[i];
		const char *val;
		size_t vl, k = 0;
		/* obs-fold: a continuation line two readers join differently. */
		if (l->cl_p[0] == ' ' || l->cl_p[0] == '\t')
			return crfail(status, code, 400, "obs_fold");
		while (k < l->cl_len && tchar((unsigned char)l->cl_p[k]))
			k++;
		if (k == 0 || k == l->cl_len || l->cl_p[k] != ':')
			return crfail(status, code, 400, "bad_header");
		for (size_t j = k + 1; j < l->cl_len; j++) {
			unsigned char c = (unsigned char)l->cl_p[j];
			if ((c < 0x20 && c != '\t') || c == 0x7f)
				return crfail(status, code, 400, "bad_header");
		}
		if (header_is(l, "Proxy-Authorization", &val, &vl)) {
			h->ch_nauth++;
			h->ch_authed = connreq_cred_ok(val, vl, expect);
		} else if (header_is(l, "Content-Length", &val, &vl)) {
			h->ch_ncl++;
			h->ch_cl = val;
			h->ch_cl_len = vl;
		} else if (header_is(l, "Transfer-Encoding", &val, &vl)) {
			h->ch_nte++;
			h->ch_te = val;
			h->ch_te_len = vl;
		} else if (header_is(l, "Host", &val, &vl)) {
			h->ch_nhost++;
		}
	}
	if (!h->ch_authed || h->ch_nauth != 1)
		return crfail(status, code, 407, "proxy_auth_required");
	return 0;
}

/* A forwarded request's body framing: one reading, or refused. */
static int
check_framing(const struct connreq *cr, const struct cheads *h, int *status, const char **code)
{
	if (h->ch_ncl > 1)
		return crfail(status, code, 400, "duplicate_content_length");
	if (h->ch_ncl == 1 && h->ch_nte > 0)
		return crfail(status, code, 400, "content_length_with_transfer_encoding");
	if (h->ch_nte > 0 && (strcmp(cr->cr_method, "GET") == 0 ||
	    strcmp(cr->cr_method, "HEAD") == 0))
		return crfail(status, code, 400, "transfer_encoding_not_allowed");
	if (h->ch_nte > 1 || (h->ch_nte == 1 && (h->ch_te_len != 7 ||
	    strncasecmp(h->ch_te, "chunked", 7) != 0)))
		return crfail(status, code, 400, "bad_transfer_encoding");
	if (h->ch_ncl == 1) {
		if (h->ch_cl_len == 0 || h->ch_cl_len > 18)
			return crfail(status, code, 400, "bad_content_length");
		for (size_t i = 0; i < h->ch_cl_len; i++)
			if (h->ch_cl[i] < '0' || h->ch_cl[i] > '9')
				return crfail(status, code, 400, "bad_content_length");
	}
	if (h->ch_nhost > 1)
		return crfail(status, code, 400, "duplicate_host");
	return 0;
}

/* "1".."65535", no sign and no leading zero; 0 otherwise. */
static unsigned long
parse_port(const char *p, size_t n)
{
	unsigned long port = 0;

	if (n == 0 || n > 5 || p[0] == '0')
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return 0;
		port = port * 10 + (unsigned long)(p[i] - '0');
	}
	return port <= 65535 ? port : 0;
}

/* host (hl bytes, not terminated): a lower-case DNS name that is no address. */
static int
check_host(const char *host, size_t hl, struct connreq *out, int *status, const char **code)
{
	char h[DNSMSG_NAME_MAX + 1];
	uint8_t a[16];
	int fam;

	if (hl == 0 || hl > DNSMSG_NAME_MAX)
		return crfail(status, code, 400, "bad_target");
	for (size_t i = 0; i < hl; i++)
		h[i] = (host[i] >= 'A' && host[i] <= 'Z') ? (char)(host[i] + 32) : host[i];
	h[hl] = '\0';
	/*
	 * An address in any spelling: inet_pton's, and a last label that
	 * starts with a digit (2130706433, 0x7f.1, 127.1: inet_aton and the
	 * WHATWG parser read those as IPv4; no top-level domain starts so).
	 */
	const char *last = strrchr(h, '.');
	last = last ? last + 1 : h;
	if (h[0] == '[' || netpolicy_parse_addr(h, &fam, a) == 0 || (*last >= '0' && *last <= '9'))
		return crfail(status, code, 403, "address_literal");
	if (!dnsmsg_valid_name(h))
		return crfail(status, code, 400, "bad_host");
	memcpy(out->cr_host, h, hl + 1);
	return 0;
}

/* CONNECT's target: NAME:PORT. */
static int
parse_tunnel_target(const char *t, size_t tl, struct connreq *out, int *status,
    const char **code)
{
	const char *colon = NULL;
	unsigned long port;

	for (size_t i = 0; i < tl; i++)
		if (t[i] == ':')
			colon = t + i;
	if (colon == NULL || colon == t)
		return crfail(status, code, 400, "bad_target");
	if ((port = parse_port(colon + 1, tl - (size_t)(colon - t) - 1)) == 0)
		return crfail(status, code, 400, "bad_target");
	out->cr_port = (uint16_t)port;
	return check_host(t, (size_t)(colon - t), out, status, code);
}

/*
 * An absolute-form target: http://NAME[:PORT] then PATH[?QUERY] (or
 * nothing: "/"). *rest is where the origin-form target starts in t.
 */
static int
parse_forward_target(const char *t, size_t tl, struct connreq *out, const char **rest,
    int *status, const char **code)
{
	const char *auth, *aend, *colon, *end = t + tl;
	unsigned long port = 80;

	if (tl >= 8 && strncasecmp(t, "https://", 8) == 0)
		return crfail(status, code, 400, "https_needs_connect");
	if (tl > 0 && t[0] == '/')
		return crfail(status, code, 400, "absolute_form_required");
	if (tl < 7 || strncasecmp(t, "http://", 7) != 0)
		return crfail(status, code, 400, "bad_target");
	for (size_t i = 7; i < tl; i++) {
		unsigned char c = (unsigned char)t[i];
		if (c <= 0x20 || c >= 0x7f || c == '#')
			return crfail(status, code, 400, "bad_target");
	}
	auth = t + 7;
	aend = auth;
	while (aend < end && *aend != '/' && *aend != '?')
		aend++;
	/* Userinfo is refused: it is a credential, and a second reading of the authority. */
	if (memchr(auth, '@', (size_t)(aend - auth)) != NULL || aend == auth)
		return crfail(status, code, 400, "bad_target");
	if (*auth == '[')
		return crfail(status, code, 403, "address_literal");
	colon = memchr(auth, ':', (size_t)(aend - auth));
	if (colon != NULL && (port = parse_port(colon + 1, (size_t)(aend - colon - 1))) == 0)
		return crfail(status, code, 400, "bad_target");
	out->cr_port = (uint16_t)port;
	if (check_host(auth, (size_t)((colon ? colon : aend) - auth), out, status, code) != 0)
		return -1;
	const char *q = memchr(aend, '?', (size_t)(end - aend));
	size_t pl = (size_t)((q ? q : end) - aend);
	if (pl > CONNREQ_PATH_MAX)
		return crfail(status, code, 414, "uri_too_long");
	if (pl == 0) {
		out->cr_path[0] = '/';
		out->cr_path[1] = '\0';
	} else {
		memcpy(out->cr_path, aend, pl);
		out->cr_path[pl] = '\0';
	}
	*rest = aend;
	return 0;
}

/* Does the Connection value c (cl bytes) list the token name (nl bytes)? */
static int
conn_lists(const char *c, size_t cl, const char *name, size_t nl)
{
	for (size_t i = 0; i <= cl;) {
		size_t j = i;
		while (j < cl && c[j] != ',')
			j++;
		size_t a = i, b = j;
		while (a < b && (c[a] == ' ' || c[a] == '\t'))
			a++;
		while (b > a && (c[b - 1] == ' ' || c[b - 1] == '\t'))
			b--;
		if (b - a == nl && strncasecmp(c + a, name, nl) == 0)
			return 1;
		i = j + 1;
	}
	return 0;
}

/* Whether the header of line l is one a proxy must not pass on. */
static int
hop_by_hop(const struct cline *v, size_t n, const struct cline *l)
{
	static const char *const drop[] = { "Host", "Proxy-Authorization", "Proxy-Connection",
		"Connection", "Keep-Alive", "TE", "Trailer", "Upgrade" };
	const char *val;
	size_t vl, nl = (size_t)((const char *)memchr(l->cl_p, ':', l->cl_len) - l->cl_p);

	for (size_t i = 0; i < nitems(drop); i++)
		if (header_is(l, drop[i], &val, &vl))
			return 1;
	/* And those every Connection header of the client names. */
	for (size_t i = 1; i < n; i++)
		if (header_is(&v[i], "Connection", &val, &vl) && conn_lists(val, vl, l->cl_p, nl))
			return 1;
	return 0;
}

/* The head the upstream gets: origin form, our Host, end-to-end headers, Connection: close. */
static int
build_upstream(const struct cline *v, size_t n, const char *rest,
    size_t restlen, const char *version, struct connreq *cr, int *status, const char **code)
{
	size_t cap = CONNREQ_HEAD_MAX + 512, o = 0;
	char *b = malloc(cap);
	int w;

	if (b == NULL)
		return crfail(status, code, 431, "head_too_large");
	/* version: "HTTP/1.x", not terminated; an empty path or a bare query gets "/". */
	w = snprintf(b, cap, "%s %s%.*s %.8s\r\nHost: %s", cr->cr_method, restlen == 0 ||
	    rest[0] == '?' ? "/" : "", (int)restlen, rest, version, cr->cr_host);
	if (w < 0 || (size_t)w >= cap)
		goto big;
	o = (size_t)w;
	if (cr->cr_port != 80) {
		w = snprintf(b + o, cap - o, ":%u", cr->cr_port);
		if (w < 0 || (size_t)w >= cap - o)
			goto big;
		o += (size_t)w;
	}
	memcpy(b + o, "\r\n", 2);
	o += 2;
	for (size_t i = 1; i < n; i++) {
		if (hop_by_hop(v, n, &v[i]))
			continue;
		if (o + v[i].cl_len + 2 > cap)
			goto big;
		memcpy(b + o, v[i].cl_p, v[i].cl_len);
		o += v[i].cl_len;
		memcpy(b + o, "\r\n", 2);
		o += 2;
	}
	static const char tail[] = "Connection: close\r\n\r\n";
	if (o + sizeof(tail) > cap)
		goto big;
	memcpy(b + o, tail, sizeof(tail));	/* and a NUL, not counted */
	cr->cr_upstream = b;
	cr->cr_upstream_len = o + sizeof(tail) - 1;
	return 0;
big:
	explicit_bzero(b, cap);
	free(b);
	return crfail(status, code, 431, "head_too_large");
}

int
connreq_parse(const char *head, size_t len, const char *expect, struct connreq *out,
    int *status, const char **code)
{
	struct cline v[CONNREQ_MAX_LINES];
	struct cheads h;
	const char *sp, *target, *rest = NULL;
	size_t n, tlen, ml;

	memset(out, 0, sizeof(*out));
	if (len > CONNREQ_HEAD_MAX)
		return crfail(status, code, 431, "head_too_large");
	if (memchr(head, '\0', len) != NULL)
		return crfail(status, code, 400, "malformed_request");
	if (split_lines(head, len, v, &n, status, code) != 0)
		return -1;
	/* METHOD SP TARGET SP HTTP/1.x, single spaces. */
	sp = memchr(v[0].cl_p, ' ', v[0].cl_len);
	ml = sp ? (size_t)(sp - v[0].cl_p) : 0;
	if (sp == NULL || ml == 0 || ml > CONNREQ_METHOD_MAX)
		return crfail(status, code, 400, "malformed_request");
	memcpy(out->cr_method, v[0].cl_p, ml);
	out->cr_method[ml] = '\0';
	target = sp + 1;
	sp = memchr(target, ' ', v[0].cl_len - ml - 1);
	if (!connreq_valid_method(out->cr_method) || sp == NULL || sp == target ||
	    (size_t)(v[0].cl_p + v[0].cl_len - sp) != 9 || (strncmp(sp, " HTTP/1.1", 9) != 0 &&
	    strncmp(sp, " HTTP/1.0", 9) != 0))
		return crfail(status, code, 400, "malformed_request");
	tlen = (size_t)(sp - target);
	if (scan_headers(v, n, expect, &h, status, code) != 0)
		return -1;
	if (strcmp(out->cr_method, "CONNECT") == 0) {
		out->cr_kind = CONNREQ_TUNNEL;
		return parse_tunnel_target(target, tlen, out, status, code);
	}
	out->cr_kind = CONNREQ_FORWARD;
	if (parse_forward_target(target, tlen, out, &rest, status, code) != 0 ||
	    check_framing(out, &h, status, code) != 0)
		return -1;
	return build_upstream(v, n, rest, (size_t)(target + tlen - rest), sp + 1, out,
	    status, code);
}
