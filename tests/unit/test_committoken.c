/*
 * test_committoken.c: signed one-use commit tokens, the replay store and
 * key files (lib/committoken.c).
 */
#include <sys/stat.h>

#include <sodium.h>

#include "committoken.h"
#include "unit.h"

#define NOW 1800000000LL

static uint8_t pk[CT_PK_BYTES], sk[CT_SK_BYTES];
static uint8_t body_digest[CT_DIGEST_BYTES];

static void
keys(void)
{
	ck_assert_int_ge(sodium_init(), 0);
	ck_assert_int_eq(crypto_sign_keypair(pk, sk), 0);
	ck_assert_int_eq(committoken_body_digest("{\"x\":1}", 7, body_digest), 0);
}

static void
claims(struct ct_claims *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->cc_operation, "op_agent_fetch");
	strcpy(c->cc_gateway, "10.88.0.1:3128");
	strcpy(c->cc_method, "POST");
	strcpy(c->cc_url, "https://api.example.test:8443/v1/data/items?x=1");
	memcpy(c->cc_body_sha256, body_digest, CT_DIGEST_BYTES);
	c->cc_issued_at = NOW;
	c->cc_expires_at = NOW + 60;
}

static struct ct_expect
expect(void)
{
	struct ct_expect e = {
		.ce_operation = "op_agent_fetch",
		.ce_gateway = "10.88.0.1:3128",
		.ce_url = "https://api.example.test:8443/v1/data/items?x=1",
		.ce_method = "POST",
		.ce_body_sha256 = body_digest,
	};
	return e;
}

static char tok[CT_MAX_TOKEN + 1];

static void
issue(void)
{
	struct ct_claims c;
	claims(&c);
	ck_assert_int_eq(committoken_issue(sk, &c, tok, sizeof(tok)), CT_OK);
}

static enum ct_err
verify(const char *t, int64_t now)
{
	struct ct_expect e = expect();
	return committoken_verify(t, strlen(t), pk, &e, now, NULL);
}

START_TEST(test_roundtrip)
{
	struct ct_claims c, out, dec;
	struct ct_expect e;

	keys();
	claims(&c);
	ck_assert_int_eq(committoken_issue(sk, &c, tok, sizeof(tok)), CT_OK);
	ck_assert(strncmp(tok, "gct1.", 5) == 0);
	ck_assert_uint_le(strlen(tok), CT_MAX_TOKEN);
	e = expect();
	ck_assert_int_eq(committoken_verify(tok, strlen(tok), pk, &e, NOW, &out), CT_OK);
	ck_assert_mem_eq(out.cc_id, c.cc_id, CT_ID_BYTES);
	ck_assert_str_eq(out.cc_url, c.cc_url);
	ck_assert_int_eq(out.cc_expires_at, NOW + 60);
	ck_assert_int_eq(committoken_decode(tok, strlen(tok), &dec), CT_OK);
	ck_assert_str_eq(dec.cc_gateway, "10.88.0.1:3128");
	/* every issue draws a fresh id */
	struct ct_claims c2;
	char tok2[CT_MAX_TOKEN + 1];
	claims(&c2);
	ck_assert_int_eq(committoken_issue(sk, &c2, tok2, sizeof(tok2)), CT_OK);
	ck_assert(memcmp(c.cc_id, c2.cc_id, CT_ID_BYTES) != 0);
	ck_assert_str_ne(tok, tok2);
	/* another key does not verify */
	uint8_t pk2[CT_PK_BYTES], sk2[CT_SK_BYTES];
	crypto_sign_keypair(pk2, sk2);
	ck_assert_int_eq(committoken_verify(tok, strlen(tok), pk2, &e, NOW, NULL),
	    CT_BAD_SIGNATURE);
	/* a body digest over the empty body */
	uint8_t d[CT_DIGEST_BYTES];
	ck_assert_int_eq(committoken_body_digest("", 0, d), 0);
	static const uint8_t empty[CT_DIGEST_BYTES] = { 0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c,
		0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24, 0x27, 0xae, 0x41, 0xe4, 0x64,
		0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55 };
	ck_assert_mem_eq(d, empty, CT_DIGEST_BYTES);
}
END_TEST

/* Split tok into its decoded payload and signature (test side, with libsodium). */
static void
split(const char *t, uint8_t *payload, size_t *plen, uint8_t sig[64])
{
	const char *dot = strchr(t + 5, '.');
	size_t slen;
	ck_assert_ptr_nonnull(dot);
	ck_assert_int_eq(sodium_base642bin(payload, 16384, t + 5, (size_t)(dot - t - 5), NULL, plen,
	    NULL, sodium_base64_VARIANT_URLSAFE_NO_PADDING), 0);
	ck_assert_int_eq(sodium_base642bin(sig, 64, dot + 1, strlen(dot + 1), NULL, &slen, NULL,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING), 0);
	ck_assert_uint_eq(slen, 64);
}

static void
join(char *out, size_t outsz, const uint8_t *payload, size_t plen, const uint8_t sig[64])
{
	strcpy(out, "gct1.");
	sodium_bin2base64(out + 5, outsz - 5, payload, plen,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	strcat(out, ".");
	sodium_bin2base64(out + strlen(out), outsz - strlen(out), sig, 64,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

START_TEST(test_tamper_every_byte)
{
	static uint8_t payload[16384];
	static char t2[CT_MAX_TOKEN + 64];
	uint8_t sig[64];
	size_t plen;

	keys();
	issue();
	split(tok, payload, &plen, sig);
	/*
	 * Every byte of the payload (version, id, times, digest, operation,
	 * gateway, method, URL and their lengths) and of the signature.
	 */
	for (size_t i = 0; i < plen; i++) {
		payload[i] ^= 0x01;
		join(t2, sizeof(t2), payload, plen, sig);
		ck_assert_msg(verify(t2, NOW) == CT_BAD_SIGNATURE, "payload byte %zu", i);
		payload[i] ^= 0x01;
	}
	for (size_t i = 0; i < 64; i++) {
		sig[i] ^= 0x80;
		join(t2, sizeof(t2), payload, plen, sig);
		ck_assert_msg(verify(t2, NOW) == CT_BAD_SIGNATURE, "signature byte %zu", i);
		sig[i] ^= 0x80;
	}
	/* truncated or extended payload, with the old signature */
	join(t2, sizeof(t2), payload, plen - 1, sig);
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_SIGNATURE);
	payload[plen] = 'x';
	join(t2, sizeof(t2), payload, plen + 1, sig);
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_SIGNATURE);
	/* untouched, it still verifies */
	join(t2, sizeof(t2), payload, plen, sig);
	ck_assert_str_eq(t2, tok);
	ck_assert_int_eq(verify(t2, NOW), CT_OK);
}
END_TEST

/* A validly signed payload that is structurally wrong is still refused. */
START_TEST(test_signed_garbage)
{
	static uint8_t payload[16384], p2[16384];
	static char t2[CT_MAX_TOKEN + 64];
	uint8_t sig[64];
	size_t plen;

	keys();
	issue();
	split(tok, payload, &plen, sig);
	/* trailing byte */
	memcpy(p2, payload, plen);
	p2[plen] = 0;
	crypto_sign_detached(sig, NULL, p2, plen + 1, sk);
	join(t2, sizeof(t2), p2, plen + 1, sig);
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
	/* wrong version */
	memcpy(p2, payload, plen);
	p2[0] = 2;
	crypto_sign_detached(sig, NULL, p2, plen, sk);
	join(t2, sizeof(t2), p2, plen, sig);
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
	/* a non-canonical URL (uppercase scheme) under a good signature */
	memcpy(p2, payload, plen);
	void *h = memmem(p2, plen, "https://", 8);
	ck_assert_ptr_nonnull(h);
	memcpy(h, "HTTPS", 5);
	crypto_sign_detached(sig, NULL, p2, plen, sk);
	join(t2, sizeof(t2), p2, plen, sig);
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
	/* a lowercase method */
	memcpy(p2, payload, plen);
	h = memmem(p2, plen, "POST", 4);
	ck_assert_ptr_nonnull(h);
	memcpy(h, "post", 4);
	crypto_sign_detached(sig, NULL, p2, plen, sk);
	join(t2, sizeof(t2), p2, plen, sig);
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
	/* a NUL inside the operation id */
	memcpy(p2, payload, plen);
	h = memmem(p2, plen, "op_agent", 8);
	ck_assert_ptr_nonnull(h);
	((char *)h)[2] = '\0';
	crypto_sign_detached(sig, NULL, p2, plen, sk);
	join(t2, sizeof(t2), p2, plen, sig);
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
	/* a length running past the end */
	memcpy(p2, payload, plen);
	p2[1 + 16 + 8 + 8 + 32] = 200;
	crypto_sign_detached(sig, NULL, p2, plen, sk);
	join(t2, sizeof(t2), p2, plen, sig);
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
	/* a TTL longer than the maximum (expires_at is bytes 25..32) */
	memcpy(p2, payload, plen);
	p2[1 + 16 + 8 + 5] = 0x10;
	crypto_sign_detached(sig, NULL, p2, plen, sk);
	join(t2, sizeof(t2), p2, plen, sig);
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
}
END_TEST

START_TEST(test_wrong_fields)
{
	struct ct_expect e;
	uint8_t other[CT_DIGEST_BYTES];

	keys();
	issue();
#define TRY(field, value, want)                                                    \
	do {                                                                       \
		e = expect();                                                      \
		e.field = value;                                                   \
		ck_assert_int_eq(committoken_verify(tok, strlen(tok), pk, &e, NOW, NULL), want); \
	} while (0)
	TRY(ce_operation, "op_other", CT_WRONG_OPERATION);
	TRY(ce_operation, "op_agent_fetch ", CT_WRONG_OPERATION);
	TRY(ce_operation, "", CT_WRONG_OPERATION);
	TRY(ce_gateway, "10.88.0.1:3129", CT_WRONG_GATEWAY);
	TRY(ce_gateway, "10.88.0.2:3128", CT_WRONG_GATEWAY);
	TRY(ce_url, "https://api.example.test:8443/v1/data/items?x=2", CT_WRONG_URL);
	TRY(ce_url, "https://api.example.test:8443/v1/data/items", CT_WRONG_URL);
	TRY(ce_url, "https://api.example.test:8443/v1/data/items?x=1&y", CT_WRONG_URL);
	TRY(ce_url, "http://api.example.test:8443/v1/data/items?x=1", CT_WRONG_URL);
	TRY(ce_url, "https://API.example.test:8443/v1/data/items?x=1", CT_WRONG_URL);
	TRY(ce_method, "PUT", CT_WRONG_METHOD);
	TRY(ce_method, "post", CT_WRONG_METHOD);
	TRY(ce_method, "GET", CT_WRONG_METHOD);
	ck_assert_int_eq(committoken_body_digest("{\"x\":2}", 7, other), 0);
	TRY(ce_body_sha256, other, CT_WRONG_BODY);
	memcpy(other, body_digest, CT_DIGEST_BYTES);
	other[31] ^= 1;
	TRY(ce_body_sha256, other, CT_WRONG_BODY);
	/* the first mismatch in a fixed order: operation, gateway, url, method, body */
	e = expect();
	e.ce_method = "PUT";
	e.ce_gateway = "x";
	ck_assert_int_eq(committoken_verify(tok, strlen(tok), pk, &e, NOW, NULL), CT_WRONG_GATEWAY);
	/* missing expectations fail closed */
	TRY(ce_url, NULL, CT_INTERNAL);
	TRY(ce_body_sha256, NULL, CT_INTERNAL);
#undef TRY
}
END_TEST

START_TEST(test_expiry)
{
	struct ct_claims c;

	keys();
	issue();
	ck_assert_int_eq(verify(tok, NOW), CT_OK);
	ck_assert_int_eq(verify(tok, NOW + 59), CT_OK);
	ck_assert_int_eq(verify(tok, NOW + 60), CT_EXPIRED);
	ck_assert_int_eq(verify(tok, NOW + 100000), CT_EXPIRED);
	ck_assert_int_eq(verify(tok, INT64_MAX), CT_EXPIRED);
	ck_assert_int_eq(verify(tok, INT64_MIN), CT_EXPIRED);
	/* a verifier clock a little behind the issuer's is tolerated, far behind is not */
	ck_assert_int_eq(verify(tok, NOW - CT_CLOCK_SKEW), CT_OK);
	ck_assert_int_eq(verify(tok, NOW - CT_CLOCK_SKEW - 1), CT_EXPIRED);
	/* expiry is checked before the fields: an expired token says expired */
	struct ct_expect e = expect();
	e.ce_method = "PUT";
	ck_assert_int_eq(committoken_verify(tok, strlen(tok), pk, &e, NOW + 60, NULL), CT_EXPIRED);
	/* the longest allowed lifetime, and one second more */
	claims(&c);
	c.cc_expires_at = c.cc_issued_at + CT_MAX_TTL;
	ck_assert_int_eq(committoken_issue(sk, &c, tok, sizeof(tok)), CT_OK);
	claims(&c);
	c.cc_expires_at = c.cc_issued_at + CT_MAX_TTL + 1;
	ck_assert_int_eq(committoken_issue(sk, &c, tok, sizeof(tok)), CT_BAD_FORMAT);
	claims(&c);
	c.cc_expires_at = c.cc_issued_at;
	ck_assert_int_eq(committoken_issue(sk, &c, tok, sizeof(tok)), CT_BAD_FORMAT);
	claims(&c);
	c.cc_issued_at = -5;
	c.cc_expires_at = 5;
	ck_assert_int_eq(committoken_issue(sk, &c, tok, sizeof(tok)), CT_BAD_FORMAT);
}
END_TEST

START_TEST(test_issue_validates)
{
	struct ct_claims c;
	char small[64];

	keys();
#define BAD(stmt)                                                                      \
	do {                                                                           \
		claims(&c);                                                            \
		stmt;                                                                  \
		ck_assert_int_eq(committoken_issue(sk, &c, tok, sizeof(tok)), CT_BAD_FORMAT); \
	} while (0)
	BAD(strcpy(c.cc_url, "HTTPS://api.example.test/"));
	BAD(strcpy(c.cc_url, "https://api.example.test:443/"));
	BAD(strcpy(c.cc_url, "https://api.example.test/a/../b"));
	BAD(strcpy(c.cc_url, "https://api.example.test/a#x"));
	BAD(strcpy(c.cc_url, ""));
	BAD(strcpy(c.cc_method, "post"));
	BAD(strcpy(c.cc_method, ""));
	BAD(strcpy(c.cc_method, "POST "));
	BAD(memset(c.cc_method, 'A', sizeof(c.cc_method)));
	BAD(strcpy(c.cc_operation, ""));
	BAD(strcpy(c.cc_operation, "op x"));
	BAD(strcpy(c.cc_operation, "op/../x"));
	BAD(memset(c.cc_operation, 'a', sizeof(c.cc_operation)));
	BAD(strcpy(c.cc_gateway, ""));
	BAD(strcpy(c.cc_gateway, "10.0.0.1 3128"));
	BAD(strcpy(c.cc_gateway, "gw\n"));
	BAD(memset(c.cc_gateway, 'g', sizeof(c.cc_gateway)));
#undef BAD
	claims(&c);
	ck_assert_int_eq(committoken_issue(sk, &c, small, sizeof(small)), CT_INTERNAL);
	ck_assert_str_eq(small, "");
	/* the longest canonical URL fits in CT_MAX_TOKEN */
	claims(&c);
	strcpy(c.cc_url, "https://h/");
	memset(c.cc_url + 10, 'p', HTTPURL_MAX_PATH - 2);
	c.cc_url[10 + HTTPURL_MAX_PATH - 2] = '?';
	size_t n = strlen("https://h/") + HTTPURL_MAX_PATH - 1;
	memset(c.cc_url + n, 'q', HTTPURL_MAX_TARGET - n);
	c.cc_url[HTTPURL_MAX_TARGET] = '\0';
	memset(c.cc_operation, 'o', CT_MAX_OPERATION);
	c.cc_operation[CT_MAX_OPERATION] = '\0';
	memset(c.cc_gateway, 'g', CT_MAX_GATEWAY);
	c.cc_gateway[CT_MAX_GATEWAY] = '\0';
	memset(c.cc_method, 'M', CT_MAX_METHOD);
	c.cc_method[CT_MAX_METHOD] = '\0';
	ck_assert_int_eq(committoken_issue(sk, &c, tok, sizeof(tok)), CT_OK);
	ck_assert_uint_le(strlen(tok), CT_MAX_TOKEN);
	struct ct_claims d;
	ck_assert_int_eq(committoken_decode(tok, strlen(tok), &d), CT_OK);
	ck_assert_str_eq(d.cc_url, c.cc_url);
}
END_TEST

START_TEST(test_bad_format)
{
	static char t2[CT_MAX_TOKEN + 64];
	char *dot;

	keys();
	issue();
	static const char *const bad[] = { "", "gct1", "gct1.", "gct1..", "gct2.AAAA.AAAA",
		"GCT1.AAAA.AAAA", "gct1.AAAA", "gct1.!!!!.AAAA", "gct1.AAAA.AAAA" };
	for (size_t i = 0; i < nitems(bad); i++)
		ck_assert_msg(verify(bad[i], NOW) == CT_BAD_FORMAT, "%s", bad[i]);
	/* padding, a third part, whitespace, standard base64 characters */
	snprintf(t2, sizeof(t2), "%s=", tok);
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
	snprintf(t2, sizeof(t2), "%s.AAAA", tok);
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
	snprintf(t2, sizeof(t2), " %s", tok);
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
	snprintf(t2, sizeof(t2), "%s\n", tok);
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
	strcpy(t2, tok);
	for (char *p = t2; *p != '\0'; p++)
		if (*p == '-' || *p == '_') {
			*p = *p == '-' ? '+' : '/';
			ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
			break;
		}
	/* signature of the wrong length */
	strcpy(t2, tok);
	t2[strlen(t2) - 4] = '\0';
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
	/*
	 * Non-canonical base64: 64 bytes encode to 86 characters whose last
	 * one carries 2 unused bits; setting them is refused, so a token has
	 * one spelling.
	 */
	strcpy(t2, tok);
	size_t n = strlen(t2);
	const char *alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	int v = (int)(strchr(alpha, t2[n - 1]) - alpha);
	t2[n - 1] = alpha[v | 1];
	if (t2[n - 1] == tok[n - 1])
		t2[n - 1] = alpha[v | 2];
	ck_assert_int_eq(verify(t2, NOW), CT_BAD_FORMAT);
	/* a NUL inside, with the length covering it */
	strcpy(t2, tok);
	dot = strrchr(t2, '.');
	dot[3] = '\0';
	struct ct_expect e = expect();
	ck_assert_int_eq(committoken_verify(t2, strlen(tok), pk, &e, NOW, NULL), CT_BAD_FORMAT);
	/* too long */
	memset(t2, 'A', sizeof(t2));
	memcpy(t2, "gct1.", 5);
	ck_assert_int_eq(committoken_verify(t2, CT_MAX_TOKEN + 1, pk, &e, NOW, NULL),
	    CT_BAD_FORMAT);
	ck_assert_int_eq(committoken_verify(NULL, 0, pk, &e, NOW, NULL), CT_BAD_FORMAT);
	struct ct_claims d;
	ck_assert_int_eq(committoken_decode("gct1.AAAA.AAAA", 14, &d), CT_BAD_FORMAT);
}
END_TEST

START_TEST(test_store_replay)
{
	struct ct_store s;
	struct ct_expect e;
	struct ct_claims c;

	keys();
	issue();
	e = expect();
	ck_assert_int_eq(ct_store_init(&s, 4), 0);
	ck_assert_int_eq(ct_store_redeem(&s, tok, strlen(tok), pk, &e, NOW, &c), CT_OK);
	ck_assert(ct_store_contains(&s, c.cc_id));
	ck_assert_int_eq(ct_store_redeem(&s, tok, strlen(tok), pk, &e, NOW, NULL), CT_REPLAYED);
	ck_assert_int_eq(ct_store_redeem(&s, tok, strlen(tok), pk, &e, NOW + 30, NULL),
	    CT_REPLAYED);
	/* a failed verification records nothing */
	char t2[CT_MAX_TOKEN + 1];
	struct ct_claims c2;
	claims(&c2);
	ck_assert_int_eq(committoken_issue(sk, &c2, t2, sizeof(t2)), CT_OK);
	e.ce_method = "PUT";
	ck_assert_int_eq(ct_store_redeem(&s, t2, strlen(t2), pk, &e, NOW, NULL), CT_WRONG_METHOD);
	ck_assert(!ct_store_contains(&s, c2.cc_id));
	e = expect();
	ck_assert_int_eq(ct_store_redeem(&s, t2, strlen(t2), pk, &e, NOW, NULL), CT_OK);
	ck_assert_uint_eq(s.cs_n, 2);
	/* after expiry it is refused as expired, and its id is forgotten */
	ck_assert_int_eq(ct_store_redeem(&s, tok, strlen(tok), pk, &e, NOW + 60, NULL),
	    CT_EXPIRED);
	ck_assert_uint_eq(s.cs_n, 0);
	/* the clock stepping back cannot revive it: the store keeps the latest time */
	ck_assert_int_eq(ct_store_redeem(&s, tok, strlen(tok), pk, &e, NOW, NULL), CT_EXPIRED);
	ck_assert_int_eq(s.cs_high_now, NOW + 60);
	ct_store_free(&s);
	ck_assert_int_eq(ct_store_init(&s, 0), -1);
	ck_assert_int_eq(ct_store_init(&s, CT_STORE_MAX + 1), -1);
}
END_TEST

START_TEST(test_store_full)
{
	struct ct_store s;
	struct ct_expect e = { 0 };
	char t[4][CT_MAX_TOKEN + 1];
	struct ct_claims c;

	keys();
	e = expect();
	ck_assert_int_eq(ct_store_init(&s, 3), 0);
	for (int i = 0; i < 4; i++) {
		claims(&c);
		c.cc_expires_at = NOW + 10 * (i + 1);
		ck_assert_int_eq(committoken_issue(sk, &c, t[i], sizeof(t[i])), CT_OK);
	}
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(ct_store_redeem(&s, t[i], strlen(t[i]), pk, &e, NOW, NULL), CT_OK);
	/* full of live ids: refused, since its replay could not be refused later */
	ck_assert_int_eq(ct_store_redeem(&s, t[3], strlen(t[3]), pk, &e, NOW, NULL), CT_STORE_FULL);
	/* once the first expires there is room */
	ck_assert_int_eq(ct_store_redeem(&s, t[3], strlen(t[3]), pk, &e, NOW + 10, NULL), CT_OK);
	ck_assert_int_eq(ct_store_redeem(&s, t[3], strlen(t[3]), pk, &e, NOW + 10, NULL),
	    CT_REPLAYED);
	ck_assert_int_eq(ct_store_redeem(&s, t[1], strlen(t[1]), pk, &e, NOW + 10, NULL),
	    CT_REPLAYED);
	ct_store_free(&s);
}
END_TEST

START_TEST(test_store_persist)
{
	struct ct_store s, r;
	struct ct_expect e;
	char *buf = NULL, *cause = NULL;
	size_t len;
	char t[3][CT_MAX_TOKEN + 1];
	struct ct_claims c;

	keys();
	e = expect();
	ck_assert_int_eq(ct_store_init(&s, 8), 0);
	for (int i = 0; i < 3; i++) {
		claims(&c);
		c.cc_expires_at = NOW + 10 * (i + 1);
		ck_assert_int_eq(committoken_issue(sk, &c, t[i], sizeof(t[i])), CT_OK);
		ck_assert_int_eq(ct_store_redeem(&s, t[i], strlen(t[i]), pk, &e, NOW, NULL), CT_OK);
	}
	ck_assert_int_eq(ct_store_serialize(&s, &buf, &len), 0);
	ck_assert_uint_eq(len, strlen(buf));
	ck_assert(strncmp(buf, "gensee-ct-store 1 1800000000 3\n", 31) == 0);
	ck_assert_int_eq(ct_store_init(&r, 8), 0);
	ck_assert_int_eq(ct_store_restore(&r, buf, len, &cause), 0);
	ck_assert_uint_eq(r.cs_n, 3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(ct_store_redeem(&r, t[i], strlen(t[i]), pk, &e, NOW, NULL),
		    CT_REPLAYED);
	/* a round trip is exact */
	char *buf2 = NULL;
	size_t len2;
	ck_assert_int_eq(ct_store_serialize(&r, &buf2, &len2), 0);
	ck_assert_str_eq(buf, buf2);
	free(buf2);
	ct_store_free(&r);

	/* restored later: what expired meanwhile is dropped, the time is kept */
	ct_store_evict(&s, NOW + 15);
	free(buf);
	ck_assert_int_eq(ct_store_serialize(&s, &buf, &len), 0);
	ck_assert_int_eq(ct_store_init(&r, 8), 0);
	ck_assert_int_eq(ct_store_restore(&r, buf, len, &cause), 0);
	ck_assert_uint_eq(r.cs_n, 2);
	ck_assert_int_eq(r.cs_high_now, NOW + 15);
	ck_assert_int_eq(ct_store_redeem(&r, t[0], strlen(t[0]), pk, &e, NOW, NULL), CT_EXPIRED);
	/* restoring into a non-empty store is refused */
	ck_assert_int_eq(ct_store_restore(&r, buf, len, &cause), -1);
	free(cause);
	cause = NULL;
	ct_store_free(&r);
	/* a store too small for what was saved */
	ck_assert_int_eq(ct_store_init(&r, 1), 0);
	ck_assert_int_eq(ct_store_restore(&r, buf, len, &cause), -1);
	ck_assert_uint_eq(r.cs_n, 0);
	free(cause);
	cause = NULL;
	ct_store_free(&r);
	free(buf);
	ct_store_free(&s);
}
END_TEST

static const char dup_ids[] = "gensee-ct-store 1 5 2\n00112233445566778899aabbccddeeff 10\n"
			      "00112233445566778899aabbccddeeff 11\n";

START_TEST(test_store_restore_strict)
{
	static const char *const bad[] = {
		"",
		"gensee-ct-store 1 5 0",
		"gensee-ct-store 2 5 0\n",
		"gensee-ct-store 1 5 1\n",
		"gensee-ct-store 1 -5 0\n",
		"gensee-ct-store 1 05 0\n",
		"gensee-ct-store 1 5 00\n",
		"gensee-ct-store 1 5 0\nextra",
		"gensee-ct-store 1 5 0 \n",
		"gensee-ct-store  1 5 0\n",
		"gensee-ct-store 1 5 1\n00112233445566778899aabbccddeeff 10",
		"gensee-ct-store 1 5 1\n00112233445566778899AABBCCDDEEFF 10\n",
		"gensee-ct-store 1 5 1\n00112233445566778899aabbccddee 10\n",
		"gensee-ct-store 1 5 1\n00112233445566778899aabbccddeeff0 10\n",
		"gensee-ct-store 1 5 1\n00112233445566778899aabbccddeeff  10\n",
		"gensee-ct-store 1 5 1\n00112233445566778899aabbccddeeff 010\n",
		"gensee-ct-store 1 5 1\n00112233445566778899aabbccddeeff +10\n",
		"gensee-ct-store 1 5 1\n00112233445566778899aabbccddeefg 10\n",
		"gensee-ct-store 1 5 1\n00112233445566778899aabbccddeeff 99999999999999999999\n",
		dup_ids,
		"gensee-ct-store 1 5 5\n",
	};
	struct ct_store s;
	char *cause = NULL;

	ck_assert_int_eq(ct_store_init(&s, 4), 0);
	for (size_t i = 0; i < nitems(bad); i++) {
		ck_assert_msg(ct_store_restore(&s, bad[i], strlen(bad[i]), &cause) == -1, "%s",
		    bad[i]);
		ck_assert_ptr_nonnull(cause);
		free(cause);
		cause = NULL;
		ck_assert_uint_eq(s.cs_n, 0);
	}
	static const char good[] = "gensee-ct-store 1 5 2\n00112233445566778899aabbccddeeff 10\n"
				   "ffeeddccbbaa99887766554433221100 4\n";
	ck_assert_int_eq(ct_store_restore(&s, good, strlen(good), &cause), 0);
	ck_assert_uint_eq(s.cs_n, 1); /* the second had expired at 5 */
	ct_store_free(&s);
}
END_TEST

static int
dirfd_of(const char *dir)
{
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return fd;
}

START_TEST(test_key_files)
{
	const char *dir = unit_tmpdir(unit_fast_base());
	int dfd = dirfd_of(dir);
	uint8_t kpk[CT_PK_BYTES], lpk[CT_PK_BYTES], lsk[CT_SK_BYTES];
	char *cause = NULL;
	struct stat st;

	/* created 0600 whatever the umask, 64 bytes */
	mode_t old = umask(0);
	ck_assert_msg(committoken_key_create(dfd, "commit.key", kpk, &cause) == 0, "%s", cause);
	umask(old);
	ck_assert_int_eq(fstatat(dfd, "commit.key", &st, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(st.st_size, CT_SK_BYTES);
	ck_assert_int_eq(committoken_key_load(dfd, "commit.key", lsk, lpk, &cause), 0);
	ck_assert_mem_eq(kpk, lpk, CT_PK_BYTES);
	/* it signs what its public key verifies */
	memcpy(sk, lsk, sizeof(sk));
	memcpy(pk, kpk, sizeof(pk));
	ck_assert_int_eq(committoken_body_digest("{\"x\":1}", 7, body_digest), 0);
	issue();
	ck_assert_int_eq(verify(tok, NOW), CT_OK);

	/* never over an existing file */
	ck_assert_int_eq(committoken_key_create(dfd, "commit.key", kpk, &cause), -1);
	free(cause);
	cause = NULL;

	/* a subdirectory works; a symlinked parent does not */
	ck_assert_int_eq(mkdirat(dfd, "keys", 0700), 0);
	ck_assert_int_eq(committoken_key_create(dfd, "keys/a.key", kpk, &cause), 0);
	ck_assert_int_eq(committoken_key_load(dfd, "keys/a.key", lsk, lpk, &cause), 0);
	ck_assert_int_eq(symlinkat("keys", dfd, "keylink"), 0);
	ck_assert_int_eq(committoken_key_create(dfd, "keylink/b.key", kpk, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(faccessat(dfd, "keys/b.key", F_OK, AT_SYMLINK_NOFOLLOW), -1);
	ck_assert_int_eq(committoken_key_load(dfd, "keylink/a.key", lsk, lpk, &cause), -1);
	free(cause);
	cause = NULL;
	/* ".." out of the directory */
	ck_assert_int_eq(committoken_key_create(dfd, "../escape.key", kpk, &cause), -1);
	free(cause);
	cause = NULL;

	/* a symlink in the key's place: refused for create (target untouched) and load */
	ck_assert_int_eq(symlinkat("target.key", dfd, "sym.key"), 0);
	ck_assert_int_eq(committoken_key_create(dfd, "sym.key", kpk, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(faccessat(dfd, "target.key", F_OK, AT_SYMLINK_NOFOLLOW), -1);
	ck_assert_int_eq(symlinkat("commit.key", dfd, "sym2.key"), 0);
	ck_assert_int_eq(committoken_key_load(dfd, "sym2.key", lsk, lpk, &cause), -1);
	free(cause);
	cause = NULL;

	/* readable by group or others: refused */
	ck_assert_int_eq(fchmodat(dfd, "commit.key", 0640, 0), 0);
	ck_assert_int_eq(committoken_key_load(dfd, "commit.key", lsk, lpk, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(fchmodat(dfd, "commit.key", 0604, 0), 0);
	ck_assert_int_eq(committoken_key_load(dfd, "commit.key", lsk, lpk, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(fchmodat(dfd, "commit.key", 0400, 0), 0);
	ck_assert_int_eq(committoken_key_load(dfd, "commit.key", lsk, lpk, &cause), 0);

	/* a second link: refused */
	ck_assert_int_eq(linkat(dfd, "commit.key", dfd, "hard.key", 0), 0);
	ck_assert_int_eq(committoken_key_load(dfd, "commit.key", lsk, lpk, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(unlinkat(dfd, "hard.key", 0), 0);

	/* wrong size, corrupt public half, a FIFO, a directory */
	unit_write_file(dfd, "short.key", lsk, 63);
	ck_assert_int_eq(committoken_key_load(dfd, "short.key", lsk, lpk, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(committoken_key_load(dfd, "commit.key", lsk, lpk, &cause), 0);
	lsk[40] ^= 1;
	unit_write_file(dfd, "corrupt.key", lsk, 64);
	ck_assert_int_eq(committoken_key_load(dfd, "corrupt.key", lsk, lpk, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "not a valid"));
	free(cause);
	cause = NULL;
	ck_assert_int_eq(mkfifoat(dfd, "fifo.key", 0600), 0);
	ck_assert_int_eq(committoken_key_load(dfd, "fifo.key", lsk, lpk, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(committoken_key_load(dfd, "keys", lsk, lpk, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(committoken_key_load(dfd, "missing.key", lsk, lpk, &cause), -1);
	free(cause);
	close(dfd);
}
END_TEST

/* A key owned by someone else is refused (chown needs root; CI is root). */
START_TEST(test_key_owner)
{
	unit_require_root();
	const char *dir = unit_tmpdir(unit_fast_base());
	int dfd = dirfd_of(dir);
	uint8_t kpk[CT_PK_BYTES], lpk[CT_PK_BYTES], lsk[CT_SK_BYTES];
	char *cause = NULL;

	ck_assert_int_eq(committoken_key_create(dfd, "k", kpk, &cause), 0);
	ck_assert_int_eq(fchownat(dfd, "k", 65534, 65534, 0), 0);
	ck_assert_int_eq(committoken_key_load(dfd, "k", lsk, lpk, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "owned by"));
	free(cause);
	close(dfd);
}
END_TEST

START_TEST(test_strerror)
{
	static const char *const names[] = { "ok", "bad_format", "bad_signature", "expired",
		"wrong_operation", "wrong_gateway", "wrong_url", "wrong_method", "wrong_body",
		"replayed", "store_full", "internal" };

	for (size_t i = 0; i < nitems(names); i++)
		ck_assert_str_eq(committoken_strerror((enum ct_err)i), names[i]);
	ck_assert_int_eq(CT_INTERNAL + 1, (int)nitems(names));
}
END_TEST

static Suite *
committoken_suite(void)
{
	Suite *s = suite_create("committoken");
	TCase *tc = tcase_create("committoken");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_tamper_every_byte);
	tcase_add_test(tc, test_signed_garbage);
	tcase_add_test(tc, test_wrong_fields);
	tcase_add_test(tc, test_expiry);
	tcase_add_test(tc, test_issue_validates);
	tcase_add_test(tc, test_bad_format);
	tcase_add_test(tc, test_store_replay);
	tcase_add_test(tc, test_store_full);
	tcase_add_test(tc, test_store_persist);
	tcase_add_test(tc, test_store_restore_strict);
	tcase_add_test(tc, test_key_files);
	tcase_add_test(tc, test_key_owner);
	tcase_add_test(tc, test_strerror);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(committoken_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
