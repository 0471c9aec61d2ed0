/*
 * medtoken.c: external-action commit tokens for the HTTP mediator's
 * non-GET/HEAD requests (lib/committoken.c, docs/http.md).
 *
 * Threat model: a method with an external effect (POST, PUT, ...) must not
 * be performed because an untrusted client asked. It needs, all at once:
 * the root-owned policy's opt-in for that method (policy.
 * http_gateway_methods), an active mediator lease, and a one-use token
 * that root had boundaryd sign for this operation's gateway, the exact
 * canonical URL, the method and the SHA-256 of the exact body. The token
 * travels with the request (X-Gensee-Commit-Token); the mediator computes
 * the body digest itself; boundaryd verifies and redeems it here, before
 * the allow that lets the mediator connect. Replay is refused by the
 * in-memory store; a token issued before this boundaryd started is refused
 * as stale (the store did not survive the restart: fail closed).
 *
 * The signing key is STATE/keys/commit-token.key (root, 0600, created at
 * first use); the token text is never written to evidence or logs (its id
 * is).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <sodium.h>

#include "boundaryd.h"
#include "committoken.h"
#include "httpurl.h"
#include "ids.h"
#include "log.h"
#include "safefs.h"
#include "schema.h"
#include "util.h"

#define MEDTOKEN_KEY "commit-token.key"
#define MEDTOKEN_DEFAULT_TTL 300

static uint8_t mt_sk[CT_SK_BYTES], mt_pk[CT_PK_BYTES];
static int mt_ready;
static struct ct_store mt_store;

static int
medtoken_init(struct boundaryd *bd, char **cause)
{
	int dfd;

	if (mt_ready)
		return 0;
	if (sodium_init() < 0) {
		util_cause(cause, "libsodium did not initialize");
		return -1;
	}
	if ((dfd = safefs_opendir(bd->bd_state_fd, "keys")) < 0) {
		util_cause(cause, "keys: %s", strerror(errno));
		return -1;
	}
	if (committoken_key_load(dfd, MEDTOKEN_KEY, mt_sk, mt_pk, cause) != 0) {
		free(*cause);
		*cause = NULL;
		if (committoken_key_create(dfd, MEDTOKEN_KEY, mt_pk, cause) != 0 ||
		    committoken_key_load(dfd, MEDTOKEN_KEY, mt_sk, mt_pk, cause) != 0) {
			close(dfd);
			return -1;
		}
	}
	close(dfd);
	if (ct_store_init(&mt_store, CT_STORE_MAX) != 0) {
		util_cause(cause, "commit-token store: out of memory");
		return -1;
	}
	mt_ready = 1;
	return 0;
}

/* Is method opted in by the root-owned policy? GET and HEAD need no token. */
static int
medtoken_method_allowed(struct netop *no, const char *method)
{
	struct json_object *m = schema_child(no->no_spec.ns_policy_json, "http_gateway_methods");

	for (size_t i = 0; m != NULL && i < json_object_array_length(m); i++)
		if (strcmp(json_object_get_string(json_object_array_get_idx(m, i)), method) == 0)
			return 1;
	return 0;
}

static int
medtoken_hex32(const char *hex, uint8_t out[CT_DIGEST_BYTES])
{
	size_t bin = 0;

	if (hex == NULL || strlen(hex) != 2 * CT_DIGEST_BYTES ||
	    strspn(hex, "0123456789abcdef") != 2 * CT_DIGEST_BYTES)
		return -1;
	return sodium_hex2bin(out, CT_DIGEST_BYTES, hex, strlen(hex), NULL, &bin, NULL) == 0 &&
	    bin == CT_DIGEST_BYTES ? 0 : -1;
}

/* Root: sign a token for one request of this operation's gateway. */
void
network_commit_token(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r)
{
	struct netop *no = netop_lookup(bd, p, scope, params, r);
	const char *method = schema_string(params, "method");
	const char *url = schema_string(params, "url");
	int64_t ttl = schema_int(params, "ttl_seconds", MEDTOKEN_DEFAULT_TTL);
	struct ct_claims c;
	struct httpurl *u = NULL;
	char *cause = NULL, tok[CT_MAX_TOKEN + 1], idhex[2 * CT_ID_BYTES + 1];

	if (no == NULL)
		return;
	if (no->no_spec.ns_proxy == NULL || !no->no_spec.ns_policy.np_http_gateway_available) {
		reply_error(r, "http_gateway_unavailable", "no proxy section or no "
		    "http_gateway_available");
		return;
	}
	if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
	    !medtoken_method_allowed(no, method)) {
		reply_error(r, "method_not_allowed", "%s is not in the policy's "
		    "http_gateway_methods (GET and HEAD need no token)", method);
		return;
	}
	memset(&c, 0, sizeof(c));
	if (medtoken_hex32(schema_string(params, "body_sha256"), c.cc_body_sha256) != 0) {
		reply_error(r, PE_INVALID_PARAMS, "body_sha256: 64 lowercase hex digits");
		return;
	}
	if ((u = malloc(sizeof(*u))) == NULL || httpurl_parse(url, strlen(url), u) != HTTPURL_OK) {
		free(u);
		reply_error(r, PE_INVALID_PARAMS, "url: not an unambiguous http(s) URL");
		return;
	}
	if (medtoken_init(bd, &cause) != 0) {
		free(u);
		reply_error(r, PE_INTERNAL, "commit-token key: %s", cause);
		free(cause);
		return;
	}
	util_strlcpy(c.cc_operation, no->no_op->op_id, sizeof(c.cc_operation));
	util_strlcpy(c.cc_gateway, schema_string(no->no_spec.ns_proxy, "listen"),
	    sizeof(c.cc_gateway));
	util_strlcpy(c.cc_method, method, sizeof(c.cc_method));
	util_strlcpy(c.cc_url, u->hu_url, sizeof(c.cc_url));
	c.cc_issued_at = util_now_ms() / 1000;
	c.cc_expires_at = c.cc_issued_at + ttl;
	enum ct_err e = committoken_issue(mt_sk, &c, tok, sizeof(tok));
	if (e != CT_OK) {
		free(u);
		reply_error(r, PE_INVALID_PARAMS, "commit token: %s", committoken_strerror(e));
		return;
	}
	sodium_bin2hex(idhex, sizeof(idhex), c.cc_id, CT_ID_BYTES);
	/* Evidence: the id and what it binds, never the token (it is a bearer credential). */
	struct json_object *o = json_object_new_object();
	char eid[ID_MAX_LEN];
	ids_new("eff_", eid, sizeof(eid));
	json_object_object_add(o, "effect_id", json_object_new_string(eid));
	json_object_object_add(o, "kind", json_object_new_string("commit_token_issued"));
	json_object_object_add(o, "token_id", json_object_new_string(idhex));
	json_object_object_add(o, "method", json_object_new_string(method));
	json_object_object_add(o, "scheme", json_object_new_string(u->hu_scheme));
	json_object_object_add(o, "authority", json_object_new_string(u->hu_authority));
	json_object_object_add(o, "path", json_object_new_string(u->hu_path));
	json_object_object_add(o, "expires_at", json_object_new_int64(c.cc_expires_at));
	netop_append(no, "effects.jsonl", o);
	free(u);
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "token", json_object_new_string(tok));
	json_object_object_add(r->or_result, "token_id", json_object_new_string(idhex));
	json_object_object_add(r->or_result, "expires_at", json_object_new_int64(c.cc_expires_at));
	sodium_memzero(tok, sizeof(tok));
}

/*
 * mediator.authorize for a method other than GET/HEAD: NULL to go on, or
 * the reason. Redeems the token (one use) only when everything else in
 * it matches.
 */
const char *
medtoken_check(struct boundaryd *bd, struct netop *no, struct json_object *params, int redeem,
    char *token_id, size_t idlen)
{
	const char *method = schema_string(params, "method");
	const char *tok = schema_string(params, "commit_token");
	const char *host = schema_string(params, "host");
	uint8_t digest[CT_DIGEST_BYTES];
	struct ct_claims c;
	struct httpurl *u;
	char *t = NULL, *cause = NULL;
	int n;

	token_id[0] = '\0';
	if (!no->no_spec.ns_policy.np_http_gateway_available || !medtoken_method_allowed(no, method))
		return "method_not_allowed";
	if (!medlease_active(no))
		return "mediator_lease_required";
	if (tok == NULL || medtoken_hex32(schema_string(params, "body_sha256"), digest) != 0)
		return "commit_token_required";
	if (!redeem)
		return NULL;
	if (medtoken_init(bd, &cause) != 0) {
		log_warnx("commit-token key: %s", cause);
		free(cause);
		return "commit_token_unavailable";
	}
	n = asprintf(&t, strchr(host, ':') ? "%s://[%s]:%lld%s" : "%s://%s:%lld%s",
	    schema_string(params, "scheme"), host, (long long)schema_int(params, "port", 0),
	    schema_string(params, "path"));
	if (n < 0 || (u = malloc(sizeof(*u))) == NULL) {
		free(t);
		return "commit_token_unavailable";
	}
	if (httpurl_parse(t, (size_t)n, u) != HTTPURL_OK) {
		free(t);
		free(u);
		return "commit_token_wrong_url";
	}
	free(t);
	struct ct_expect x = { no->no_op->op_id, schema_string(no->no_spec.ns_proxy, "listen"),
		u->hu_url, method, digest };
	int64_t now = util_now_ms() / 1000;
	/* A token from before this boundaryd started: its use may be forgotten. */
	int64_t started_s = (util_now_ms() - (util_monotonic_ms() - bd->bd_started_ms)) / 1000;
	if (committoken_decode(tok, strlen(tok), &c) == CT_OK && c.cc_issued_at <= started_s) {
		free(u);
		return "commit_token_stale";
	}
	enum ct_err e = ct_store_redeem(&mt_store, tok, strlen(tok), mt_pk, &x, now, &c);
	free(u);
	if (e != CT_OK) {
		static char code[48];
		snprintf(code, sizeof(code), "commit_token_%s", committoken_strerror(e));
		return code;
	}
	sodium_bin2hex(token_id, idlen, c.cc_id, CT_ID_BYTES);
	return NULL;
}

void
medtoken_free(void)
{
	if (mt_ready) {
		ct_store_free(&mt_store);
		sodium_memzero(mt_sk, sizeof(mt_sk));
		mt_ready = 0;
	}
}
