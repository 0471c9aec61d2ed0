/*
 * httptxn.h: HTTP mediator transactions, the state machine (pure logic).
 *
 * A transaction is a root-granted window in which the mediated client may
 * use the HTTP mediator, inside URL scopes, an effect class, a TTL ceiling
 * and cumulative request/response budgets that all come from the
 * root-owned operation config (proxy.transaction). Nothing a request
 * carries can widen them. boundaryd owns one table per operation,
 * persists it (httptxn_to_json) before every reply that grants anything,
 * and restores it strictly after a restart.
 *
 * Every refusal is a stable code (HTXN_E_*); a NULL return is success.
 */
#ifndef GENSEE_HTTPTXN_H
#define GENSEE_HTTPTXN_H

#include <stddef.h>
#include <stdint.h>

#include "httpurl.h"

struct json_object;

#define HTTPTXN_ID_MAX 64	/* a transaction id: 1-64 of [A-Za-z0-9_.:-] */
#define HTTPTXN_EFFECT_MAX 64
#define HTTPTXN_MAX_SCOPES 64
/* One-use ids remembered per operation: begin refuses past it (fail closed). */
#define HTTPTXN_MAX_IDS 1024

/* Stable codes (docs/protocol.md). */
#define HTXN_E_BAD_ID "invalid_transaction_id"
#define HTXN_E_REPLAYED "transaction_replayed"
#define HTXN_E_IN_PROGRESS "transaction_in_progress"
#define HTXN_E_WRONG_EFFECT "wrong_effect"
#define HTXN_E_BAD_TTL "invalid_ttl"
#define HTXN_E_TTL_CEILING "ttl_exceeds_ceiling"
#define HTXN_E_LIMIT "transaction_limit"
#define HTXN_E_UNKNOWN "unknown_transaction"
#define HTXN_E_STATE "wrong_state"
#define HTXN_E_EXPIRED "transaction_expired"
#define HTXN_E_REQUIRED "transaction_required"
#define HTXN_E_CHANGED "transaction_changed"
#define HTXN_E_SCOPE "out_of_scope"
#define HTXN_E_REQUESTS "request_budget_exhausted"
#define HTXN_E_REQUEST_BYTES "request_bytes_exhausted"
#define HTXN_E_RESPONSE_BYTES "response_budget_exhausted"
#define HTXN_E_RESERVED "reservation_in_flight"
#define HTXN_E_RESERVATION "unknown_reservation"
/* mediator.complete outcomes */
#define HTXN_DELIVER "delivered"
#define HTXN_LATE "http_transaction_late_response_denied"
#define HTXN_OVER "response_budget_exceeded"

enum httptxn_state {
	HTXN_NONE,	/* no transaction was ever begun */
	HTXN_PREPARED,	/* begun: the TTL runs, nothing is allowed yet */
	HTXN_ACTIVE,	/* the mediator serves the client inside the scopes */
	HTXN_ENDED,	/* terminal: ended after success */
	HTXN_REVOKED,	/* terminal: revoked */
	HTXN_EXPIRED,	/* terminal: the TTL ran out */
};

/* proxy.transaction, parsed and canonicalized. */
struct httptxn_config {
	char hc_effect[HTTPTXN_EFFECT_MAX + 1];
	struct httpurl_scope *hc_scopes;
	size_t hc_nscopes;
	int64_t hc_max_ttl_s;
	int64_t hc_max_requests;	/* 0: none at all */
	int64_t hc_max_request_bytes;
	int64_t hc_max_response_bytes;
};

struct httptxn {
	char ht_id[HTTPTXN_ID_MAX + 1];
	enum httptxn_state ht_state;
	char ht_effect[HTTPTXN_EFFECT_MAX + 1];
	int64_t ht_ttl_s;
	int64_t ht_begun_ms;		/* wall clock */
	int64_t ht_deadline_ms;		/* begun + ttl: the TTL starts at begin */
	int64_t ht_requests;
	int64_t ht_request_bytes;
	int64_t ht_response_bytes;
	/* The one response-budget reservation in flight (0: none). */
	uint64_t ht_reservation;	/* the generation it was made at */
	int64_t ht_reserved_bytes;	/* the response bytes it may use */
	char ht_reason[40];		/* why it became terminal */
};

struct httptxn_table {
	struct httptxn tt_cur;		/* the current (or last) transaction */
	uint64_t tt_generation;		/* every change increments it */
	char (*tt_used)[HTTPTXN_ID_MAX + 1];	/* one-use ids, begin order */
	size_t tt_nused;
};

const char *httptxn_state_name(enum httptxn_state s);
int httptxn_valid_id(const char *id);

/* Parse proxy.transaction (netpolicy already checked its shape). -1 and *cause on error. */
int httptxn_config_parse(struct json_object *tx, struct httptxn_config *c, char **cause);
void httptxn_config_free(struct httptxn_config *c);

void httptxn_table_init(struct httptxn_table *t);
void httptxn_table_free(struct httptxn_table *t);

/*
 * Lifecycle. effect NULL means the config's; ttl_s 0 means the ceiling.
 * now_ms is the wall clock. Each returns NULL or a HTXN_E_* code.
 */
const char *httptxn_begin(struct httptxn_table *t, const struct httptxn_config *c,
    const char *id, const char *effect, int64_t ttl_s, int64_t now_ms);
const char *httptxn_activate(struct httptxn_table *t, const char *id, int64_t now_ms);
const char *httptxn_end(struct httptxn_table *t, const char *id, int64_t now_ms);
const char *httptxn_revoke(struct httptxn_table *t, const char *id, int64_t now_ms);
/* The TTL ran out: PREPARED or ACTIVE becomes EXPIRED. 1 if it changed. */
int httptxn_expire(struct httptxn_table *t, int64_t now_ms);
/* Is the current transaction live (prepared or active, before its deadline)? */
int httptxn_live(const struct httptxn_table *t, int64_t now_ms);

/*
 * One request (or redirect hop) of the mediated client. u is the canonical
 * target; request_bytes the body it sends; hop 0 for the client's request,
 * n for the n-th redirect, which must be in the same transaction
 * (prev_id). On success one reservation is taken: *reservation and
 * *response_limit (the response bytes the mediator may accept) are set and
 * the request and its bytes are counted. The caller persists the table
 * before replying.
 */
const char *httptxn_authorize(struct httptxn_table *t, const struct httptxn_config *c,
    const struct httpurl *u, int64_t request_bytes, int hop, const char *prev_id,
    int64_t now_ms, uint64_t *reservation, int64_t *response_limit);

/*
 * The response of a reservation has finished (response_bytes from the
 * upstream, upstream_error when it failed). Returns HTXN_DELIVER when it
 * may reach the client, HTXN_LATE when the transaction is no longer
 * active (revoked, ended, expired, or another one), HTXN_OVER past the
 * reservation, HTXN_E_RESERVATION for a reservation that is not the one in
 * flight (it is not delivered either).
 */
const char *httptxn_complete(struct httptxn_table *t, const char *id, uint64_t reservation,
    int64_t response_bytes, int upstream_error, int64_t now_ms);

/* Persistence: the whole table, and its strict inverse. */
struct json_object *httptxn_to_json(const struct httptxn_table *t);
int httptxn_from_json(struct json_object *o, struct httptxn_table *t, char **cause);
/* The current transaction as evidence and inspect output. */
struct json_object *httptxn_cur_json(const struct httptxn_table *t);

#endif
