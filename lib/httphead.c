/*
 * httphead.c: strict HTTP/1.1 request framing (httphead.h).
 *
 * The rule of docs/http.md, applied to framing: anything two HTTP parsers
 * could read as a different request boundary is refused. Each check names
 * the desynchronisation it prevents.
 */
#include <string.h>
#include <strings.h>

#include "httphead.h"

/* RFC 9110 tchar: the characters of a method and of a field name. */
static int
httphead_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A field value byte: VCHAR, SP, HT or obs-text; never NUL, CR, LF or another control. */
static int
httphead_vchar(unsigned char c)
{
	return c == ' ' || c == '\t' || (c >= 0x21 && c != 0x7f);
}

/* value without its optional whitespace on both sides */
static void
httphead_trim(const char **v, size_t *n)
{
	while (*n > 0 && (**v == ' ' || **v == '\t')) {
		(*v)++;
		(*n)--;
	}
	while (*n > 0 && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
		(*n)--;
}

/*
 * "METHOD SP target SP HTTP/1.x", exactly one space each: a parser that
 * splits on runs of whitespace and one that does not read different
 * targets or versions.
 */
static int
httphead_request_line(const char *l, size_t n, struct httphead *h)
{
	size_t i = 0, m, t;

	while (i < n && httphead_tchar((unsigned char)l[i]))
		i++;
	m = i;
	if (m == 0 || m >= sizeof(h->hh_method) || i >= n || l[i] != ' ')
		return -1;
	memcpy(h->hh_method, l, m);
	h->hh_method[m] = '\0';
	t = ++i;
	while (i < n && (unsigned char)l[i] > 0x20 && (unsigned char)l[i] < 0x7f)
		i++;
	if (i == t || i >= n || l[i] != ' ')
		return -1;
	i++;
	if (n - i != 8 || (memcmp(l + i, "HTTP/1.1", 8) != 0 && memcmp(l + i, "HTTP/1.0", 8) != 0))
		return -1;
	h->hh_http10 = l[i + 7] == '0';
	return 0;
}

/*
 * A field line: a token, ':' at once (no whitespace before it: "Transfer-
 * Encoding : chunked" is a header for one parser and garbage for another),
 * a value of field-value bytes. Sets *name / *namelen and *value / *vlen.
 */
static int
httphead_field(const char *l, size_t n, const char **value, size_t *vlen, size_t *namelen,
    const char **code)
{
	size_t i = 0;

	/* obs-fold: continuation lines are joined by some parsers, split by others */
	if (n > 0 && (l[0] == ' ' || l[0] == '\t')) {
		*code = HTTPHEAD_E_OBS_FOLD;
		return -1;
	}
	while (i < n && httphead_tchar((unsigned char)l[i]))
		i++;
	if (i == 0 || i >= n || l[i] != ':') {
		*code = HTTPHEAD_E_HEADER;
		return -1;
	}
	*namelen = i;
	*value = l + i + 1;
	*vlen = n - i - 1;
	for (size_t j = 0; j < *vlen; j++) {
		if (!httphead_vchar((unsigned char)(*value)[j])) {
			*code = HTTPHEAD_E_HEADER;
			return -1;
		}
	}
	httphead_trim(value, vlen);
	return 0;
}

int
httphead_trailer_line(const char *line, size_t len, const char **code)
{
	const char *v;
	size_t vlen, nlen;

	return httphead_field(line, len, &v, &vlen, &nlen, code);
}

/* The head's lines, once its end is known (end: the offset of CRLF CRLF). */
static int
httphead_lines(const char *buf, size_t end, struct httphead *h, const char **code)
{
	size_t pos = 0, ncl = 0, nte = 0;
	int first = 1;

	while (pos < end + 2) {
		const char *l = buf + pos, *nl = memchr(l, '\r', end + 2 - pos);
		size_t n = (size_t)(nl - l);
		const char *v;
		size_t vlen, nlen;

		pos += n + 2;
		if (first) {
			first = 0;
			if (httphead_request_line(l, n, h) != 0) {
				*code = HTTPHEAD_E_REQUEST_LINE;
				return -1;
			}
			continue;
		}
		if (httphead_field(l, n, &v, &vlen, &nlen, code) != 0)
			return -1;
		if (nlen == 14 && strncasecmp(l, "Content-Length", 14) == 0) {
			uint64_t cl = 0;
			/*
			 * Two Content-Lengths (equal or not, or one "5, 5"): one
			 * parser takes the first, another the last.
			 */
			if (++ncl > 1) {
				*code = HTTPHEAD_E_DUP_CL;
				return -1;
			}
			if (vlen == 0 || vlen > HTTPHEAD_CL_DIGITS_MAX) {
				*code = HTTPHEAD_E_BAD_CL;
				return -1;
			}
			for (size_t j = 0; j < vlen; j++) {
				if (v[j] < '0' || v[j] > '9') {
					*code = HTTPHEAD_E_BAD_CL;
					return -1;
				}
				cl = cl * 10 + (uint64_t)(v[j] - '0');
			}
			h->hh_content_length = cl;
		} else if (nlen == 17 && strncasecmp(l, "Transfer-Encoding", 17) == 0) {
			/*
			 * Only one "chunked": a list ("gzip, chunked"), a second
			 * header or an unknown coding is framed by each parser
			 * its own way.
			 */
			if (++nte > 1 || vlen != 7 || strncasecmp(v, "chunked", 7) != 0) {
				*code = HTTPHEAD_E_BAD_TE;
				return -1;
			}
			h->hh_chunked = 1;
		}
	}
	/* Both framings at once: which one wins is the classic CL.TE / TE.CL smuggle. */
	if (ncl > 0 && nte > 0) {
		*code = HTTPHEAD_E_CL_TE;
		return -1;
	}
	if (nte > 0) {
		/* A GET or HEAD body is read by some parsers and not by others. */
		if (strcmp(h->hh_method, "GET") == 0 || strcmp(h->hh_method, "HEAD") == 0) {
			*code = HTTPHEAD_E_TE_NO_BODY;
			return -1;
		}
		/* HTTP/1.0 has no chunked coding (RFC 9112 6.1: faulty framing). */
		if (h->hh_http10) {
			*code = HTTPHEAD_E_BAD_TE;
			return -1;
		}
	}
	return 0;
}

int
httphead_check(const char *buf, size_t len, size_t max, struct httphead *h, int *status,
    const char **code)
{
	return httphead_check_from(buf, len, 0, max, h, status, code);
}

int
httphead_check_from(const char *buf, size_t len, size_t from, size_t max,
    struct httphead *h, int *status, const char **code)
{
	size_t n = len < max ? len : max, i;

	memset(h, 0, sizeof(*h));
	*status = 400;
	*code = NULL;
	/* the last byte seen may be a CR whose LF had not come yet: look at it again */
	if (from > n)
		from = n;
	for (i = from > 0 ? from - 1 : 0; i < n; i++) {
		/* A line end every parser agrees on: CRLF, never LF or CR alone. */
		if (buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r')) {
			*code = HTTPHEAD_E_BARE_LF;
			return -1;
		}
		if (buf[i] == '\r' && i + 1 < n && buf[i + 1] != '\n') {
			*code = HTTPHEAD_E_BARE_CR;
			return -1;
		}
		if (buf[i] == '\n' && i >= 3 && buf[i - 2] == '\n')
			break;
	}
	if (i == n) {
		/* Reading on would hold unbounded memory for one request. */
		if (len >= max) {
			*status = 431;
			*code = HTTPHEAD_E_TOO_LARGE;
			return -1;
		}
		return 0;
	}
	/* buf[i - 3 .. i] is CRLF CRLF; an empty first line is no request line. */
	if (i == 3 && buf[0] == '\r') {
		*code = HTTPHEAD_E_REQUEST_LINE;
		return -1;
	}
	if (httphead_lines(buf, i - 3, h, code) != 0)
		return -1;
	h->hh_len = i + 1;
	return 1;
}

int
httphead_chunk_size(const char *line, size_t len, uint64_t *size, const char **code)
{
	size_t i;
	uint64_t v = 0;

	*code = HTTPHEAD_E_BAD_CHUNK;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)line[i];
		int d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			break;
		/* "0x10", "+5", 16 digits that wrap: read differently, or not at all */
		if (i >= HTTPHEAD_CHUNK_DIGITS_MAX)
			return -1;
		v = v * 16 + (uint64_t)d;
	}
	if (i == 0)
		return -1;
	if (i < len) {
		/* Only extensions after the size, never whitespace then more digits. */
		if (line[i] != ';')
			return -1;
		for (; i < len; i++) {
			if (line[i] == '\n') {
				*code = HTTPHEAD_E_BARE_LF;
				return -1;
			}
			if (line[i] == '\r') {
				*code = HTTPHEAD_E_BARE_CR;
				return -1;
			}
			if (!httphead_vchar((unsigned char)line[i]))
				return -1;
		}
	}
	*size = v;
	*code = NULL;
	return 0;
}
