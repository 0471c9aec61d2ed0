/*
 * connreq.c: the CONNECT request head, read strictly.
 *
 * Threat: the agent writes these bytes. Anything two readers could split
 * differently is refused: a NUL or bare CR/LF inside a line, a target
 * that is not NAME:PORT, a port with a sign, a leading zero or over
 * 65535, a Basic credential that is not strict base64, more than one
 * Proxy-Authorization header. An address literal in any spelling is
 * refused (403): a tunnel is allowed by name, and an address has none.
 */
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "connreq.h"
#include "netpolicy.h"

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
connreq_parse(const char *head, size_t len, const char *expect, struct connreq *out,
    int *status, const char **code)
{
	const char *p = head, *end = head + len, *target = NULL;
	size_t tlen = 0;
	int authed = 0, nauth = 0, first = 1;

	memset(out, 0, sizeof(*out));
	if (len > CONNREQ_HEAD_MAX || memchr(head, '\0', len) != NULL) {
		*status = 400;
		*code = "malformed_request";
		return -1;
	}
	/* Lines split on CRLF exactly; a bare CR or LF anywhere is refused. */
	while (p < end) {
		const char *crlf = memmem(p, (size_t)(end - p), "\r\n", 2);
		size_t ll = crlf ? (size_t)(crlf - p) : (size_t)(end - p);
		const char *next = crlf ? crlf + 2 : end;
		if (ll == 0 || memchr(p, '\r', ll) != NULL || memchr(p, '\n', ll) != NULL ||
		    (crlf != NULL && next == end)) {
			*status = 400;
			*code = "malformed_request";
			return -1;
		}
		if (first) {
			if (ll < 8 || strncmp(p, "CONNECT ", 8) != 0) {
				*status = 405;
				*code = "connect_only";
				return -1;
			}
			const char *sp = memchr(p + 8, ' ', ll - 8);
			if (sp == NULL || sp == p + 8 || ((size_t)(p + ll - sp) != 9) ||
			    (strncmp(sp, " HTTP/1.1", 9) != 0 && strncmp(sp, " HTTP/1.0", 9) != 0)) {
				*status = 400;
				*code = "malformed_request";
				return -1;
			}
			target = p + 8;
			tlen = (size_t)(sp - target);
			first = 0;
		} else if (ll >= 20 && strncasecmp(p, "Proxy-Authorization:", 20) == 0) {
			const char *v = p + 20;
			size_t vl = ll - 20;
			while (vl > 0 && (*v == ' ' || *v == '\t')) {
				v++;
				vl--;
			}
			nauth++;
			authed = connreq_cred_ok(v, vl, expect);
		}
		p = next;
	}
	if (first) {
		*status = 405;
		*code = "connect_only";
		return -1;
	}
	if (!authed || nauth != 1) {
		*status = 407;
		*code = "proxy_auth_required";
		return -1;
	}
	/* NAME:PORT */
	const char *colon = NULL;
	for (size_t i = 0; i < tlen; i++)
		if (target[i] == ':')
			colon = target + i;
	size_t hl = colon ? (size_t)(colon - target) : 0, pl = colon ? tlen - hl - 1 : 0;
	if (colon == NULL || hl == 0 || hl > DNSMSG_NAME_MAX || pl == 0 || pl > 5 ||
	    colon[1] == '0') {
		*status = 400;
		*code = "bad_target";
		return -1;
	}
	unsigned long port = 0;
	for (size_t i = 0; i < pl; i++) {
		if (colon[1 + i] < '0' || colon[1 + i] > '9') {
			*status = 400;
			*code = "bad_target";
			return -1;
		}
		port = port * 10 + (unsigned long)(colon[1 + i] - '0');
	}
	if (port < 1 || port > 65535) {
		*status = 400;
		*code = "bad_target";
		return -1;
	}
	char host[DNSMSG_NAME_MAX + 1];
	for (size_t i = 0; i < hl; i++)
		host[i] = (target[i] >= 'A' && target[i] <= 'Z') ? (char)(target[i] + 32) : target[i];
	host[hl] = '\0';
	uint8_t a[16];
	int fam;
	/*
	 * An address in any spelling: inet_pton's, and a last label that
	 * starts with a digit (2130706433, 0x7f.1, 127.1: inet_aton and the
	 * WHATWG parser read those as IPv4; no top-level domain starts so).
	 */
	const char *last = strrchr(host, '.');
	last = last ? last + 1 : host;
	if (host[0] == '[' || netpolicy_parse_addr(host, &fam, a) == 0 ||
	    (*last >= '0' && *last <= '9')) {
		*status = 403;
		*code = "address_literal";
		return -1;
	}
	if (!dnsmsg_valid_name(host)) {
		*status = 400;
		*code = "bad_host";
		return -1;
	}
	memcpy(out->cr_host, host, hl + 1);
	out->cr_port = (uint16_t)port;
	return 0;
}
