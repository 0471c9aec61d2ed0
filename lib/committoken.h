/*
 * committoken.h: one-use signed external-action commit tokens.
 *
 * boundaryd signs (Ed25519, libsodium) a token that authorizes exactly one
 * non-GET/HEAD request: this operation, through this gateway, to this
 * canonical URL, with this method and this request-body SHA-256, before
 * expires_at. The verifier checks the signature, the time, every bound
 * field against what is about to be sent, and a one-use store of token ids
 * refuses replay. docs/http.md describes the format.
 */
#ifndef GENSEE_COMMITTOKEN_H
#define GENSEE_COMMITTOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "httpurl.h"

#define CT_ID_BYTES 16
#define CT_DIGEST_BYTES 32	/* crypto_hash_sha256_BYTES */
#define CT_PK_BYTES 32		/* crypto_sign_PUBLICKEYBYTES */
#define CT_SK_BYTES 64		/* crypto_sign_SECRETKEYBYTES */
#define CT_MAX_OPERATION 64
#define CT_MAX_GATEWAY 128
#define CT_MAX_METHOD 16
#define CT_MAX_TTL 3600		/* seconds a token may live */
#define CT_CLOCK_SKEW 60	/* seconds issued_at may lie ahead of the verifier */
/* "gct1." + base64url(payload) + "." + base64url(signature) */
#define CT_MAX_TOKEN 11800
#define CT_STORE_MAX 65536

/* Stable error codes; committoken_strerror names them. */
enum ct_err {
	CT_OK = 0,
	CT_BAD_FORMAT,		/* "bad_format" */
	CT_BAD_SIGNATURE,	/* "bad_signature" */
	CT_EXPIRED,		/* "expired" (also: issued in the future beyond the skew) */
	CT_WRONG_OPERATION,	/* "wrong_operation" */
	CT_WRONG_GATEWAY,	/* "wrong_gateway" */
	CT_WRONG_URL,		/* "wrong_url" */
	CT_WRONG_METHOD,	/* "wrong_method" */
	CT_WRONG_BODY,		/* "wrong_body" */
	CT_REPLAYED,		/* "replayed" */
	CT_STORE_FULL,		/* "store_full": no room to remember it, so refused */
	CT_INTERNAL,		/* "internal": libsodium or a caller error */
};

/* What a token binds. */
struct ct_claims {
	uint8_t cc_id[CT_ID_BYTES];		/* random, set by committoken_issue */
	char cc_operation[CT_MAX_OPERATION + 1];
	char cc_gateway[CT_MAX_GATEWAY + 1];	/* mediator identity / listen address */
	char cc_method[CT_MAX_METHOD + 1];	/* uppercase token, e.g. "POST" */
	char cc_url[HTTPURL_MAX_TARGET + 1];	/* canonical (httpurl hu_url) */
	uint8_t cc_body_sha256[CT_DIGEST_BYTES];
	int64_t cc_issued_at;			/* unix seconds */
	int64_t cc_expires_at;
};

/* What the mediator is about to send; every field must match exactly. */
struct ct_expect {
	const char *ce_operation;
	const char *ce_gateway;
	const char *ce_url;		/* canonical */
	const char *ce_method;
	const uint8_t *ce_body_sha256;	/* CT_DIGEST_BYTES */
};

const char *committoken_strerror(enum ct_err e);

/* SHA-256 of a request body (crypto_hash_sha256). */
int committoken_body_digest(const void *body, size_t len, uint8_t out[CT_DIGEST_BYTES]);

/*
 * Sign c (operation, gateway, method, url, digest, issued_at, expires_at
 * set by the caller; cc_id is filled with a fresh random id) into out, a
 * NUL-terminated token of at most CT_MAX_TOKEN characters. The claims are
 * validated like a parsed token's (the URL must be canonical). Returns
 * CT_OK, CT_BAD_FORMAT for invalid claims, CT_INTERNAL otherwise.
 */
enum ct_err committoken_issue(const uint8_t sk[CT_SK_BYTES], struct ct_claims *c, char *out,
    size_t outsz);

/*
 * Decode a token's structure and claims without checking the signature
 * (for inspection and the fuzz target; never authorize on it).
 */
enum ct_err committoken_decode(const char *tok, size_t len, struct ct_claims *c);

/*
 * Verify tok (len bytes) with pk at time now (unix seconds): format,
 * signature, expiry, then every field of e, in that order. Fills *c (when
 * not NULL) on CT_OK. Does not consume the token: see ct_store_redeem.
 */
enum ct_err committoken_verify(const char *tok, size_t len, const uint8_t pk[CT_PK_BYTES],
    const struct ct_expect *e, int64_t now, struct ct_claims *c);

/*
 * The one-use store: the ids of redeemed tokens, each kept until its
 * token's expiry (after which the token is refused as expired anyway).
 * Bounded: when full of unexpired ids, redemption fails closed.
 */
struct ct_used {
	uint8_t cu_id[CT_ID_BYTES];
	int64_t cu_expires_at;
};

struct ct_store {
	struct ct_used *cs_v;
	size_t cs_n, cs_cap;
	int64_t cs_high_now;	/* the latest time seen: the clock never goes back */
};

int ct_store_init(struct ct_store *s, size_t cap);
void ct_store_free(struct ct_store *s);
/* Forget ids whose tokens have expired at now. */
void ct_store_evict(struct ct_store *s, int64_t now);
/* Has this id been redeemed? */
int ct_store_contains(const struct ct_store *s, const uint8_t id[CT_ID_BYTES]);

/*
 * Verify tok as committoken_verify does and, only if it passes, record its
 * id: CT_REPLAYED when it was already redeemed. Time is max(now, the
 * latest time the store has seen), so stepping the clock back cannot
 * revive a token whose id was evicted.
 */
enum ct_err ct_store_redeem(struct ct_store *s, const char *tok, size_t len,
    const uint8_t pk[CT_PK_BYTES], const struct ct_expect *e, int64_t now,
    struct ct_claims *c);

/*
 * Serialize for persistence: "gensee-ct-store 1 HIGH_NOW COUNT\n" then one
 * "HEX32 EXPIRES_AT\n" per id. Caller frees *out.
 */
int ct_store_serialize(const struct ct_store *s, char **out, size_t *outlen);
/*
 * Restore what ct_store_serialize wrote into an empty store of enough
 * capacity, strictly (exact format, no duplicates, bounded). -1 on error
 * with *cause set; the store is then left empty.
 */
int ct_store_restore(struct ct_store *s, const char *buf, size_t len, char **cause);

/*
 * Key files. The secret key (64 bytes, libsodium layout) is created at
 * dirfd/name with O_CREAT|O_EXCL, mode 0600, no symlink anywhere
 * (safefs_openat), fsynced with its directory. Loading refuses anything
 * but a regular file owned by the caller's euid, not readable or writable
 * by group or others, with one link and exactly 64 bytes whose public half
 * matches its seed. Both return 0 or -1 with *cause set.
 */
int committoken_key_create(int dirfd, const char *name, uint8_t pk[CT_PK_BYTES], char **cause);
int committoken_key_load(int dirfd, const char *name, uint8_t sk[CT_SK_BYTES],
    uint8_t pk[CT_PK_BYTES], char **cause);

#endif
