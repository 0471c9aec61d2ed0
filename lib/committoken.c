/*
 * committoken.c: signed one-use external-action commit tokens and the
 * store that refuses their replay.
 *
 * Trust model: the token travels through the untrusted mediated client
 * (or at least through the unprivileged mediator), so its text is hostile
 * until its signature verifies. The parser is strict and bounded, the
 * signature covers the exact payload bytes, and every bound field is
 * compared with what is about to be sent, never with what the token says.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "committoken.h"
#include "safefs.h"
#include "util.h"

#define CT_PREFIX "gct1."
#define CT_VERSION 1
#define CT_FIXED (1 + CT_ID_BYTES + 8 + 8 + CT_DIGEST_BYTES)
#define CT_MAX_PAYLOAD \
	(CT_FIXED + 1 + CT_MAX_OPERATION + 1 + CT_MAX_GATEWAY + 1 + CT_MAX_METHOD + 2 + \
	    HTTPURL_MAX_TARGET)
#define CT_SIG_BYTES 64

const char *
committoken_strerror(enum ct_err e)
{
	switch (e) {
	case CT_OK:
		return "ok";
	case CT_BAD_FORMAT:
		return "bad_format";
	case CT_BAD_SIGNATURE:
		return "bad_signature";
	case CT_EXPIRED:
		return "expired";
	case CT_WRONG_OPERATION:
		return "wrong_operation";
	case CT_WRONG_GATEWAY:
		return "wrong_gateway";
	case CT_WRONG_URL:
		return "wrong_url";
	case CT_WRONG_METHOD:
		return "wrong_method";
	case CT_WRONG_BODY:
		return "wrong_body";
	case CT_REPLAYED:
		return "replayed";
	case CT_STORE_FULL:
		return "store_full";
	case CT_INTERNAL:
		return "internal";
	}
	return "internal";
}

int
committoken_body_digest(const void *body, size_t len, uint8_t out[CT_DIGEST_BYTES])
{
	if (sodium_init() < 0)
		return -1;
	return crypto_hash_sha256(out, body, len) == 0 ? 0 : -1;
}

/* ---- claims ---- */

static int
ct_valid_operation(const char *s, size_t n)
{
	if (n == 0 || n > CT_MAX_OPERATION)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '_' || c == '-' || c == '.' || c == ':'))
			return 0;
	}
	return 1;
}

static int
ct_valid_gateway(const char *s, size_t n)
{
	if (n == 0 || n > CT_MAX_GATEWAY)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return 0;
	return 1;
}

/* Methods are case-sensitive (RFC 9110 9.1): the token binds the uppercase form. */
static int
ct_valid_method(const char *s, size_t n)
{
	if (n == 0 || n > CT_MAX_METHOD)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || s[i] == '-' || s[i] == '_'))
			return 0;
	return 1;
}

/* Only a canonical URL can be bound: the mediator compares canonical forms. */
static int
ct_valid_url(const char *s, size_t n)
{
	struct httpurl *u;
	int ok;

	if (n == 0 || n > HTTPURL_MAX_TARGET)
		return 0;
	if ((u = malloc(sizeof(*u))) == NULL)
		return 0;
	ok = httpurl_parse(s, n, u) == HTTPURL_OK && strlen(u->hu_url) == n &&
	    memcmp(u->hu_url, s, n) == 0;
	free(u);
	return ok;
}

static int
ct_valid_claims(const struct ct_claims *c)
{
	return ct_valid_operation(c->cc_operation, strnlen(c->cc_operation,
		   sizeof(c->cc_operation))) &&
	    ct_valid_gateway(c->cc_gateway, strnlen(c->cc_gateway, sizeof(c->cc_gateway))) &&
	    ct_valid_method(c->cc_method, strnlen(c->cc_method, sizeof(c->cc_method))) &&
	    ct_valid_url(c->cc_url, strnlen(c->cc_url, sizeof(c->cc_url))) &&
	    c->cc_issued_at >= 0 && c->cc_expires_at > c->cc_issued_at &&
	    c->cc_expires_at - c->cc_issued_at <= CT_MAX_TTL;
}

/* ---- payload ---- */

static void
ct_put64(uint8_t *p, int64_t v)
{
	uint64_t u = (uint64_t)v;
	for (int i = 7; i >= 0; i--) {
		p[i] = (uint8_t)u;
		u >>= 8;
	}
}

static int64_t
ct_get64(const uint8_t *p)
{
	uint64_t u = 0;
	for (int i = 0; i < 8; i++)
		u = (u << 8) | p[i];
	return (int64_t)u;
}

/* version | id | issued_at | expires_at | sha256 | len8 op | len8 gw | len8 method | len16 url */
static size_t
ct_payload_encode(const struct ct_claims *c, uint8_t *p)
{
	size_t n = 0, l;

	p[n++] = CT_VERSION;
	memcpy(p + n, c->cc_id, CT_ID_BYTES);
	n += CT_ID_BYTES;
	ct_put64(p + n, c->cc_issued_at);
	n += 8;
	ct_put64(p + n, c->cc_expires_at);
	n += 8;
	memcpy(p + n, c->cc_body_sha256, CT_DIGEST_BYTES);
	n += CT_DIGEST_BYTES;
	l = strlen(c->cc_operation);
	p[n++] = (uint8_t)l;
	memcpy(p + n, c->cc_operation, l);
	n += l;
	l = strlen(c->cc_gateway);
	p[n++] = (uint8_t)l;
	memcpy(p + n, c->cc_gateway, l);
	n += l;
	l = strlen(c->cc_method);
	p[n++] = (uint8_t)l;
	memcpy(p + n, c->cc_method, l);
	n += l;
	l = strlen(c->cc_url);
	p[n++] = (uint8_t)(l >> 8);
	p[n++] = (uint8_t)l;
	memcpy(p + n, c->cc_url, l);
	n += l;
	return n;
}

/* One length-prefixed string; no NUL can hide inside (validators refuse it). */
static int
ct_get_str(const uint8_t *p, size_t n, size_t *off, size_t lenbytes, char *out, size_t outsz)
{
	size_t l;

	if (*off + lenbytes > n)
		return -1;
	l = p[*off];
	if (lenbytes == 2)
		l = (l << 8) | p[*off + 1];
	*off += lenbytes;
	if (l >= outsz || *off + l > n)
		return -1;
	memcpy(out, p + *off, l);
	out[l] = '\0';
	if (memchr(out, '\0', l) != NULL)
		return -1;
	*off += l;
	return 0;
}

static enum ct_err
ct_payload_decode(const uint8_t *p, size_t n, struct ct_claims *c)
{
	size_t off = 0;

	memset(c, 0, sizeof(*c));
	if (n < CT_FIXED || n > CT_MAX_PAYLOAD || p[0] != CT_VERSION)
		return CT_BAD_FORMAT;
	off = 1;
	memcpy(c->cc_id, p + off, CT_ID_BYTES);
	off += CT_ID_BYTES;
	c->cc_issued_at = ct_get64(p + off);
	off += 8;
	c->cc_expires_at = ct_get64(p + off);
	off += 8;
	memcpy(c->cc_body_sha256, p + off, CT_DIGEST_BYTES);
	off += CT_DIGEST_BYTES;
	if (ct_get_str(p, n, &off, 1, c->cc_operation, sizeof(c->cc_operation)) != 0 ||
	    ct_get_str(p, n, &off, 1, c->cc_gateway, sizeof(c->cc_gateway)) != 0 ||
	    ct_get_str(p, n, &off, 1, c->cc_method, sizeof(c->cc_method)) != 0 ||
	    ct_get_str(p, n, &off, 2, c->cc_url, sizeof(c->cc_url)) != 0)
		return CT_BAD_FORMAT;
	/* Nothing may follow: one payload has exactly one encoding. */
	if (off != n || !ct_valid_claims(c))
		return CT_BAD_FORMAT;
	return CT_OK;
}

/* ---- tokens ---- */

enum ct_err
committoken_issue(const uint8_t sk[CT_SK_BYTES], struct ct_claims *c, char *out, size_t outsz)
{
	uint8_t payload[CT_MAX_PAYLOAD], sig[CT_SIG_BYTES];
	size_t n, b64a, b64b;

	if (out == NULL || outsz == 0)
		return CT_INTERNAL;
	out[0] = '\0';
	if (sodium_init() < 0)
		return CT_INTERNAL;
	randombytes_buf(c->cc_id, sizeof(c->cc_id));
	if (!ct_valid_claims(c))
		return CT_BAD_FORMAT;
	n = ct_payload_encode(c, payload);
	if (crypto_sign_detached(sig, NULL, payload, n, sk) != 0)
		return CT_INTERNAL;
	b64a = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	b64b = sodium_base64_ENCODED_LEN(sizeof(sig), sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	/* the two encoded lengths count their NULs: one is the ".", one the end */
	if (strlen(CT_PREFIX) + b64a + b64b > outsz)
		return CT_INTERNAL;
	memcpy(out, CT_PREFIX, strlen(CT_PREFIX));
	sodium_bin2base64(out + strlen(CT_PREFIX), b64a, payload, n,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	size_t at = strlen(out);
	out[at++] = '.';
	sodium_bin2base64(out + at, b64b, sig, sizeof(sig), sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	return strlen(out) <= CT_MAX_TOKEN ? CT_OK : CT_INTERNAL;
}

/* base64url without padding, exactly: every character consumed, no ignored bytes. */
static int
ct_b64(const char *s, size_t n, uint8_t *out, size_t max, size_t *outlen)
{
	const char *end = NULL;

	if (n == 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_'))
			return -1;
	}
	/*
	 * libsodium refuses non-zero leftover bits, so each byte string has one
	 * encoding and a token cannot be re-spelled.
	 */
	if (sodium_base642bin(out, max, s, n, NULL, outlen, &end,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 || end != s + n)
		return -1;
	return 0;
}

/* Split and decode; the payload stays raw bytes for the signature check. */
static enum ct_err
ct_split(const char *tok, size_t len, uint8_t *payload, size_t *plen, uint8_t sig[CT_SIG_BYTES])
{
	size_t pl = strlen(CT_PREFIX), slen;
	const char *dot;

	if (tok == NULL || len <= pl || len > CT_MAX_TOKEN || memcmp(tok, CT_PREFIX, pl) != 0)
		return CT_BAD_FORMAT;
	dot = memchr(tok + pl, '.', len - pl);
	if (dot == NULL)
		return CT_BAD_FORMAT;
	if (ct_b64(tok + pl, (size_t)(dot - tok) - pl, payload, CT_MAX_PAYLOAD, plen) != 0)
		return CT_BAD_FORMAT;
	if (ct_b64(dot + 1, (size_t)(tok + len - dot - 1), sig, CT_SIG_BYTES, &slen) != 0 ||
	    slen != CT_SIG_BYTES)
		return CT_BAD_FORMAT;
	return CT_OK;
}

enum ct_err
committoken_decode(const char *tok, size_t len, struct ct_claims *c)
{
	uint8_t *payload, sig[CT_SIG_BYTES];
	size_t plen = 0;
	enum ct_err e;

	if ((payload = malloc(CT_MAX_PAYLOAD)) == NULL)
		return CT_INTERNAL;
	e = ct_split(tok, len, payload, &plen, sig);
	if (e == CT_OK)
		e = ct_payload_decode(payload, plen, c);
	free(payload);
	return e;
}

enum ct_err
committoken_verify(const char *tok, size_t len, const uint8_t pk[CT_PK_BYTES],
    const struct ct_expect *e, int64_t now, struct ct_claims *out)
{
	uint8_t *payload, sig[CT_SIG_BYTES];
	size_t plen = 0;
	struct ct_claims *c;
	enum ct_err r;

	if (e == NULL || e->ce_operation == NULL || e->ce_gateway == NULL || e->ce_url == NULL ||
	    e->ce_method == NULL || e->ce_body_sha256 == NULL || pk == NULL)
		return CT_INTERNAL;
	if (sodium_init() < 0)
		return CT_INTERNAL;
	payload = malloc(CT_MAX_PAYLOAD);
	c = malloc(sizeof(*c));
	if (payload == NULL || c == NULL) {
		free(payload);
		free(c);
		return CT_INTERNAL;
	}
	if ((r = ct_split(tok, len, payload, &plen, sig)) != CT_OK)
		goto out;
	/* The signature first: nothing of an unsigned payload is believed. */
	if (crypto_sign_verify_detached(sig, payload, plen, pk) != 0) {
		r = CT_BAD_SIGNATURE;
		goto out;
	}
	if ((r = ct_payload_decode(payload, plen, c)) != CT_OK)
		goto out;
	/* issued_at >= 0 (decoded claims are valid), so this cannot overflow for any now */
	if (now >= c->cc_expires_at || c->cc_issued_at - CT_CLOCK_SKEW > now)
		r = CT_EXPIRED;
	else if (strcmp(c->cc_operation, e->ce_operation) != 0)
		r = CT_WRONG_OPERATION;
	else if (strcmp(c->cc_gateway, e->ce_gateway) != 0)
		r = CT_WRONG_GATEWAY;
	else if (strcmp(c->cc_url, e->ce_url) != 0)
		r = CT_WRONG_URL;
	else if (strcmp(c->cc_method, e->ce_method) != 0)
		r = CT_WRONG_METHOD;
	else if (sodium_memcmp(c->cc_body_sha256, e->ce_body_sha256, CT_DIGEST_BYTES) != 0)
		r = CT_WRONG_BODY;
	else if (out != NULL)
		*out = *c;
out:
	free(payload);
	free(c);
	return r;
}

/* ---- the one-use store ---- */

int
ct_store_init(struct ct_store *s, size_t cap)
{
	memset(s, 0, sizeof(*s));
	if (cap == 0 || cap > CT_STORE_MAX) {
		errno = EINVAL;
		return -1;
	}
	if ((s->cs_v = calloc(cap, sizeof(*s->cs_v))) == NULL)
		return -1;
	s->cs_cap = cap;
	return 0;
}

void
ct_store_free(struct ct_store *s)
{
	free(s->cs_v);
	memset(s, 0, sizeof(*s));
}

void
ct_store_evict(struct ct_store *s, int64_t now)
{
	size_t k = 0;

	if (now > s->cs_high_now)
		s->cs_high_now = now;
	now = s->cs_high_now;
	/*
	 * An id may be forgotten once its token is expired at the latest time
	 * seen: verification refuses that token from then on, whatever the
	 * clock says later.
	 */
	for (size_t i = 0; i < s->cs_n; i++)
		if (s->cs_v[i].cu_expires_at > now)
			s->cs_v[k++] = s->cs_v[i];
	s->cs_n = k;
}

int
ct_store_contains(const struct ct_store *s, const uint8_t id[CT_ID_BYTES])
{
	for (size_t i = 0; i < s->cs_n; i++)
		if (memcmp(s->cs_v[i].cu_id, id, CT_ID_BYTES) == 0)
			return 1;
	return 0;
}

enum ct_err
ct_store_redeem(struct ct_store *s, const char *tok, size_t len, const uint8_t pk[CT_PK_BYTES],
    const struct ct_expect *e, int64_t now, struct ct_claims *out)
{
	struct ct_claims *c;
	enum ct_err r;

	if (s->cs_v == NULL)
		return CT_INTERNAL;
	ct_store_evict(s, now);
	if ((c = malloc(sizeof(*c))) == NULL)
		return CT_INTERNAL;
	r = committoken_verify(tok, len, pk, e, s->cs_high_now, c);
	if (r == CT_OK) {
		if (ct_store_contains(s, c->cc_id)) {
			r = CT_REPLAYED;
		} else if (s->cs_n == s->cs_cap) {
			/* Cannot remember it, so cannot refuse its replay: refuse now. */
			r = CT_STORE_FULL;
		} else {
			memcpy(s->cs_v[s->cs_n].cu_id, c->cc_id, CT_ID_BYTES);
			s->cs_v[s->cs_n].cu_expires_at = c->cc_expires_at;
			s->cs_n++;
			if (out != NULL)
				*out = *c;
		}
	}
	free(c);
	return r;
}

#define CT_STORE_MAGIC "gensee-ct-store 1"

int
ct_store_serialize(const struct ct_store *s, char **out, size_t *outlen)
{
	size_t cap = 64 + s->cs_n * (2 * CT_ID_BYTES + 24), n = 0;
	char *b = malloc(cap);

	if (b == NULL)
		return -1;
	n = (size_t)snprintf(b, cap, CT_STORE_MAGIC " %" PRId64 " %zu\n", s->cs_high_now, s->cs_n);
	for (size_t i = 0; i < s->cs_n; i++) {
		char hex[2 * CT_ID_BYTES + 1];
		sodium_bin2hex(hex, sizeof(hex), s->cs_v[i].cu_id, CT_ID_BYTES);
		n += (size_t)snprintf(b + n, cap - n, "%s %" PRId64 "\n", hex,
		    s->cs_v[i].cu_expires_at);
	}
	*out = b;
	*outlen = n;
	return 0;
}

static int
ct_cmp_used(const void *a, const void *b)
{
	return memcmp(((const struct ct_used *)a)->cu_id, ((const struct ct_used *)b)->cu_id,
	    CT_ID_BYTES);
}

/* A non-negative decimal without sign or leading zeros, filling [s, s+n). */
static int
ct_parse_num(const char *s, size_t n, int64_t max, int64_t *out)
{
	char buf[24];

	if (n == 0 || n >= sizeof(buf) || (n > 1 && s[0] == '0'))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return util_parse_i64(buf, 0, max, out);
}

int
ct_store_restore(struct ct_store *s, const char *buf, size_t len, char **cause)
{
	const char *p = buf, *end = buf + len, *nl, *sp, *sp2;
	int64_t high, count, exp;
	struct ct_used *sorted = NULL;
	size_t m = strlen(CT_STORE_MAGIC);

	if (s->cs_v == NULL || s->cs_n != 0) {
		util_cause(cause, "store not empty");
		return -1;
	}
	if (buf == NULL || len == 0) {
		util_cause(cause, "bad store header");
		return -1;
	}
	/* header: magic SP high_now SP count LF */
	nl = memchr(p, '\n', len);
	if (nl == NULL || (size_t)(nl - p) <= m + 1 || memcmp(p, CT_STORE_MAGIC " ", m + 1) != 0) {
		util_cause(cause, "bad store header");
		return -1;
	}
	p += m + 1;
	sp = memchr(p, ' ', (size_t)(nl - p));
	if (sp == NULL || ct_parse_num(p, (size_t)(sp - p), INT64_MAX, &high) != 0 ||
	    ct_parse_num(sp + 1, (size_t)(nl - sp - 1), (int64_t)s->cs_cap, &count) != 0) {
		util_cause(cause, "bad store header");
		return -1;
	}
	p = nl + 1;
	for (int64_t i = 0; i < count; i++) {
		uint8_t id[CT_ID_BYTES];
		size_t idlen = 0;
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			goto bad;
		sp = memchr(p, ' ', (size_t)(nl - p));
		if (sp == NULL || sp - p != 2 * CT_ID_BYTES)
			goto bad;
		for (sp2 = p; sp2 < sp; sp2++)
			if (!((*sp2 >= '0' && *sp2 <= '9') || (*sp2 >= 'a' && *sp2 <= 'f')))
				goto bad;
		if (sodium_hex2bin(id, sizeof(id), p, 2 * CT_ID_BYTES, NULL, &idlen, NULL) != 0 ||
		    idlen != CT_ID_BYTES ||
		    ct_parse_num(sp + 1, (size_t)(nl - sp - 1), INT64_MAX, &exp) != 0)
			goto bad;
		/* Expired at the saved time: verification refuses that token anyway. */
		if (exp > high) {
			memcpy(s->cs_v[s->cs_n].cu_id, id, CT_ID_BYTES);
			s->cs_v[s->cs_n].cu_expires_at = exp;
			s->cs_n++;
		}
		p = nl + 1;
	}
	if (p != end)
		goto bad;
	if (s->cs_n > 1) {
		if ((sorted = malloc(s->cs_n * sizeof(*sorted))) == NULL) {
			util_cause(cause, "out of memory");
			goto fail;
		}
		memcpy(sorted, s->cs_v, s->cs_n * sizeof(*sorted));
		qsort(sorted, s->cs_n, sizeof(*sorted), ct_cmp_used);
		for (size_t i = 1; i < s->cs_n; i++)
			if (memcmp(sorted[i - 1].cu_id, sorted[i].cu_id, CT_ID_BYTES) == 0) {
				free(sorted);
				util_cause(cause, "duplicate id in store");
				goto fail;
			}
		free(sorted);
	}
	s->cs_high_now = high;
	return 0;
bad:
	util_cause(cause, "bad store entry");
fail:
	s->cs_n = 0;
	return -1;
}

/* ---- key files ---- */

/* The directory holding rel beneath dirfd (opened without symlinks) and rel's last component. */
static int
ct_parent(int dirfd, const char *rel, const char **base)
{
	char buf[4096];
	const char *slash = strrchr(rel, '/');

	if (slash == NULL) {
		*base = rel;
		return safefs_opendir(dirfd, ".");
	}
	if ((size_t)(slash - rel) >= sizeof(buf) || slash == rel) {
		errno = EINVAL;
		return -1;
	}
	memcpy(buf, rel, (size_t)(slash - rel));
	buf[slash - rel] = '\0';
	*base = slash + 1;
	return safefs_opendir(dirfd, buf);
}

int
committoken_key_create(int dirfd, const char *name, uint8_t pk[CT_PK_BYTES], char **cause)
{
	uint8_t sk[CT_SK_BYTES];
	const char *base;
	int pfd, fd, r = -1;

	if (sodium_init() < 0) {
		util_cause(cause, "libsodium init failed");
		return -1;
	}
	if ((pfd = ct_parent(dirfd, name, &base)) < 0) {
		util_cause(cause, "open parent of %s: %s", name, strerror(errno));
		return -1;
	}
	/*
	 * O_EXCL and no symlinks: an existing file or a planted symlink makes
	 * this fail instead of writing the key through it. 0600 from the
	 * start, so the key is never readable by others, whatever the umask.
	 */
	fd = safefs_openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		util_cause(cause, "create %s: %s", name, strerror(errno));
		close(pfd);
		return -1;
	}
	if (crypto_sign_keypair(pk, sk) != 0) {
		util_cause(cause, "crypto_sign_keypair failed");
		goto out;
	}
	if (fchmod(fd, 0600) != 0 || util_write_all(fd, sk, sizeof(sk)) != 0 || fsync(fd) != 0) {
		util_cause(cause, "write %s: %s", name, strerror(errno));
		goto out;
	}
	if (fsync(pfd) != 0) {
		util_cause(cause, "fsync directory of %s: %s", name, strerror(errno));
		goto out;
	}
	r = 0;
out:
	sodium_memzero(sk, sizeof(sk));
	if (close(fd) != 0 && r == 0) {
		util_cause(cause, "close %s: %s", name, strerror(errno));
		r = -1;
	}
	/* A half-written key must not be loaded later: it is ours (O_EXCL), remove it. */
	if (r != 0)
		(void)unlinkat(pfd, base, 0);
	close(pfd);
	return r;
}

int
committoken_key_load(int dirfd, const char *name, uint8_t sk[CT_SK_BYTES],
    uint8_t pk[CT_PK_BYTES], char **cause)
{
	uint8_t check_sk[CT_SK_BYTES], extra;
	struct stat st;
	size_t got = 0;
	int fd, r = -1;

	if (sodium_init() < 0) {
		util_cause(cause, "libsodium init failed");
		return -1;
	}
	/* O_NONBLOCK: a FIFO in its place must not hang the daemon. */
	fd = safefs_openat(dirfd, name, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0) {
		util_cause(cause, "open %s: %s", name, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		util_cause(cause, "stat %s: %s", name, strerror(errno));
		goto out;
	}
	/*
	 * Only our own private regular file: a key others can read is
	 * disclosed, one others can write is theirs, and a second link is a
	 * name we do not control.
	 */
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0 ||
	    st.st_nlink != 1) {
		util_cause(cause, "%s must be a regular file owned by uid %u, mode 0600 or "
		    "stricter, with one link", name, (unsigned)geteuid());
		goto out;
	}
	if (st.st_size != CT_SK_BYTES) {
		util_cause(cause, "%s: %lld bytes, expected %d", name, (long long)st.st_size,
		    CT_SK_BYTES);
		goto out;
	}
	while (got < CT_SK_BYTES) {
		ssize_t n = read(fd, sk + got, CT_SK_BYTES - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			util_cause(cause, "read %s: %s", name, n == 0 ? "short file" :
			    strerror(errno));
			goto out;
		}
		got += (size_t)n;
	}
	if (read(fd, &extra, 1) != 0) {
		util_cause(cause, "%s grew while being read", name);
		goto out;
	}
	/* The public half must be the one its seed gives: a corrupt key never signs. */
	if (crypto_sign_seed_keypair(pk, check_sk, sk) != 0 ||
	    sodium_memcmp(check_sk, sk, CT_SK_BYTES) != 0) {
		util_cause(cause, "%s is not a valid Ed25519 secret key", name);
		goto out;
	}
	r = 0;
out:
	sodium_memzero(check_sk, sizeof(check_sk));
	if (r != 0)
		sodium_memzero(sk, CT_SK_BYTES);
	close(fd);
	return r;
}
