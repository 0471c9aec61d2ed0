/*
 * fuzz_committoken.c: the commit-token parser and verifier, and the replay
 * store's restore parser, on arbitrary input. The verifier key is derived
 * from a fixed seed (32 bytes of 0x42) so that the seed corpus can hold
 * validly signed tokens and mutations reach the checks after the signature.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "committoken.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t pk[CT_PK_BYTES], sk[CT_SK_BYTES];
static int ready;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ct_claims c, v;
	const char *d = (const char *)data;

	if (!ready) {
		uint8_t seed[32];
		memset(seed, 0x42, sizeof(seed));
		if (sodium_init() < 0 || crypto_sign_seed_keypair(pk, sk, seed) != 0)
			abort();
		ready = 1;
	}
	enum ct_err e = committoken_decode(d, size, &c);
	if (e == CT_OK) {
		/* decoded claims are always valid claims */
		if (c.cc_expires_at <= c.cc_issued_at ||
		    c.cc_expires_at - c.cc_issued_at > CT_MAX_TTL || c.cc_url[0] == '\0')
			abort();
		struct ct_expect x = { c.cc_operation, c.cc_gateway, c.cc_url, c.cc_method,
			c.cc_body_sha256 };
		e = committoken_verify(d, size, pk, &x, c.cc_issued_at, &v);
		if (e != CT_OK && e != CT_BAD_SIGNATURE)
			abort();
		if (e == CT_OK && memcmp(v.cc_id, c.cc_id, CT_ID_BYTES) != 0)
			abort();
		if (e == CT_OK) {
			/* one use: the second redemption is a replay */
			struct ct_store s;
			if (ct_store_init(&s, 2) != 0)
				abort();
			if (ct_store_redeem(&s, d, size, pk, &x, c.cc_issued_at, NULL) != CT_OK ||
			    ct_store_redeem(&s, d, size, pk, &x, c.cc_issued_at, NULL) !=
			    CT_REPLAYED)
				abort();
			ct_store_free(&s);
		}
	} else if (e != CT_BAD_FORMAT && e != CT_INTERNAL) {
		abort();
	}

	/* the same bytes as a persisted store */
	struct ct_store s, r;
	char *cause = NULL, *out = NULL, *out2 = NULL;
	size_t n, n2;
	if (ct_store_init(&s, 64) != 0)
		abort();
	if (ct_store_restore(&s, d, size, &cause) == 0) {
		if (ct_store_serialize(&s, &out, &n) != 0 || ct_store_init(&r, 64) != 0)
			abort();
		if (ct_store_restore(&r, out, n, &cause) != 0 ||
		    ct_store_serialize(&r, &out2, &n2) != 0 || n != n2 || memcmp(out, out2, n) != 0)
			abort();
		ct_store_free(&r);
		free(out);
		free(out2);
	} else if (cause == NULL || s.cs_n != 0) {
		abort();
	}
	free(cause);
	ct_store_free(&s);
	return 0;
}
