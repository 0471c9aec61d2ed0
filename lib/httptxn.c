/*
 * httptxn.c: HTTP mediator transactions, the state machine (httptxn.h).
 *
 * Threat model: the mediated client is untrusted and so is the mediator
 * process that relays for it; the lifecycle calls come from root. The
 * table can only be widened by root's begin/activate, and every check
 * fails closed: an unknown id, a wrong state, a deadline reached, a
 * budget spent or a reservation still in flight all deny.
 */
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "httptxn.h"
#include "schema.h"
#include "util.h"


/* Budgets proxy.transaction leaves out (docs/http.md): never unlimited. */
#define HTTPTXN_DEFAULT_MAX_REQUESTS 1000
#define HTTPTXN_DEFAULT_MAX_REQUEST_BYTES (16LL * 1024 * 1024)
#define HTTPTXN_DEFAULT_MAX_RESPONSE_BYTES (128LL * 1024 * 1024)

const char *
httptxn_state_name(enum httptxn_state s)
{
	switch (s) {
	case HTXN_NONE:
		return "none";
	case HTXN_PREPARED:
		return "prepared";
	case HTXN_ACTIVE:
		return "active";
	case HTXN_ENDED:
		return "ended";
	case HTXN_REVOKED:
		return "revoked";
	case HTXN_EXPIRED:
		return "expired";
	}
	return "none";
}

static int
httptxn_state_parse(const char *s, enum httptxn_state *out)
{
	for (int i = HTXN_NONE; i <= HTXN_EXPIRED; i++)
		if (strcmp(s, httptxn_state_name((enum httptxn_state)i)) == 0) {
			*out = (enum httptxn_state)i;
			return 0;
		}
	return -1;
}

int
httptxn_valid_id(const char *id)
{
	size_t n;

	if (id == NULL)
		return 0;
	n = strlen(id);
	if (n == 0 || n > HTTPTXN_ID_MAX)
		return 0;
	return strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-") == n;
}

int
httptxn_config_parse(struct json_object *tx, struct httptxn_config *c, char **cause)
{
	struct json_object *scopes = schema_child(tx, "scopes");
	const char *effect = schema_string(tx, "effect");

	memset(c, 0, sizeof(*c));
	if (effect == NULL || strlen(effect) > HTTPTXN_EFFECT_MAX || scopes == NULL ||
	    !json_object_is_type(scopes, json_type_array) ||
	    json_object_array_length(scopes) == 0 ||
	    json_object_array_length(scopes) > HTTPTXN_MAX_SCOPES) {
		util_cause(cause, "proxy.transaction: effect and 1-%d scopes required",
		    HTTPTXN_MAX_SCOPES);
		return -1;
	}
	util_strlcpy(c->hc_effect, effect, sizeof(c->hc_effect));
	c->hc_max_ttl_s = schema_int(tx, "max_ttl_seconds", 0);
	c->hc_max_requests = schema_int(tx, "max_requests", HTTPTXN_DEFAULT_MAX_REQUESTS);
	c->hc_max_request_bytes = schema_int(tx, "max_request_bytes",
	    HTTPTXN_DEFAULT_MAX_REQUEST_BYTES);
	c->hc_max_response_bytes = schema_int(tx, "max_response_bytes",
	    HTTPTXN_DEFAULT_MAX_RESPONSE_BYTES);
	if (c->hc_max_ttl_s <= 0 || c->hc_max_requests < 0 || c->hc_max_request_bytes < 0 ||
	    c->hc_max_response_bytes < 0) {
		util_cause(cause, "proxy.transaction: bad ttl ceiling or budget");
		return -1;
	}
	c->hc_nscopes = json_object_array_length(scopes);
	if ((c->hc_scopes = calloc(c->hc_nscopes, sizeof(*c->hc_scopes))) == NULL) {
		util_cause(cause, "proxy.transaction: out of memory");
		return -1;
	}
	for (size_t i = 0; i < c->hc_nscopes; i++) {
		struct json_object *s = json_object_array_get_idx(scopes, i);
		const char *sch = schema_string(s, "scheme"), *au = schema_string(s, "authority");
		const char *pp = schema_string(s, "path_prefix");
		enum httpurl_err e;
		/* A scope that is not canonical could match more than it says: refused. */
		if (sch == NULL || au == NULL || pp == NULL ||
		    (e = httpurl_scope_init(&c->hc_scopes[i], sch, au, pp)) != HTTPURL_OK) {
			util_cause(cause, "proxy.transaction.scopes[%zu]: %s", i,
			    sch && au && pp ? httpurl_strerror(e) : "incomplete");
			httptxn_config_free(c);
			return -1;
		}
	}
	return 0;
}

void
httptxn_config_free(struct httptxn_config *c)
{
	free(c->hc_scopes);
	c->hc_scopes = NULL;
	c->hc_nscopes = 0;
}

void
httptxn_table_init(struct httptxn_table *t)
{
	memset(t, 0, sizeof(*t));
}

void
httptxn_table_free(struct httptxn_table *t)
{
	free(t->tt_used);
	memset(t, 0, sizeof(*t));
}

static int
httptxn_used(const struct httptxn_table *t, const char *id)
{
	for (size_t i = 0; i < t->tt_nused; i++)
		if (strcmp(t->tt_used[i], id) == 0)
			return 1;
	return 0;
}

int
httptxn_live(const struct httptxn_table *t, int64_t now_ms)
{
	return (t->tt_cur.ht_state == HTXN_PREPARED || t->tt_cur.ht_state == HTXN_ACTIVE) &&
	    now_ms < t->tt_cur.ht_deadline_ms;
}

static void
httptxn_terminate(struct httptxn_table *t, enum httptxn_state s, const char *reason)
{
	t->tt_cur.ht_state = s;
	util_strlcpy(t->tt_cur.ht_reason, reason, sizeof(t->tt_cur.ht_reason));
	t->tt_generation++;
}

int
httptxn_expire(struct httptxn_table *t, int64_t now_ms)
{
	if ((t->tt_cur.ht_state == HTXN_PREPARED || t->tt_cur.ht_state == HTXN_ACTIVE) &&
	    now_ms >= t->tt_cur.ht_deadline_ms) {
		httptxn_terminate(t, HTXN_EXPIRED, "ttl_expired");
		return 1;
	}
	return 0;
}

const char *
httptxn_begin(struct httptxn_table *t, const struct httptxn_config *c, const char *id,
    const char *effect, int64_t ttl_s, int64_t now_ms)
{
	if (!httptxn_valid_id(id))
		return HTXN_E_BAD_ID;
	httptxn_expire(t, now_ms);
	/* One-use ids: a replayed begin could otherwise re-open a closed window. */
	if (httptxn_used(t, id))
		return HTXN_E_REPLAYED;
	if (httptxn_live(t, now_ms))
		return HTXN_E_IN_PROGRESS;
	if (effect != NULL && strcmp(effect, c->hc_effect) != 0)
		return HTXN_E_WRONG_EFFECT;
	if (ttl_s < 0)
		return HTXN_E_BAD_TTL;
	if (ttl_s > c->hc_max_ttl_s)
		return HTXN_E_TTL_CEILING;
	if (ttl_s == 0)
		ttl_s = c->hc_max_ttl_s;
	/* Cannot remember another id: refuse rather than forget one (replay). */
	if (t->tt_nused >= HTTPTXN_MAX_IDS)
		return HTXN_E_LIMIT;
	if (t->tt_used == NULL &&
	    (t->tt_used = calloc(HTTPTXN_MAX_IDS, sizeof(*t->tt_used))) == NULL)
		return HTXN_E_LIMIT;
	util_strlcpy(t->tt_used[t->tt_nused++], id, sizeof(t->tt_used[0]));
	memset(&t->tt_cur, 0, sizeof(t->tt_cur));
	util_strlcpy(t->tt_cur.ht_id, id, sizeof(t->tt_cur.ht_id));
	util_strlcpy(t->tt_cur.ht_effect, c->hc_effect, sizeof(t->tt_cur.ht_effect));
	t->tt_cur.ht_state = HTXN_PREPARED;
	t->tt_cur.ht_ttl_s = ttl_s;
	t->tt_cur.ht_begun_ms = now_ms;
	/* The TTL starts at begin: prepared state has a root-owned deadline too. */
	t->tt_cur.ht_deadline_ms = now_ms + ttl_s * 1000;
	t->tt_generation++;
	return NULL;
}

/* The current transaction, named by id, after expiry is applied. */
static const char *
httptxn_named(struct httptxn_table *t, const char *id, int64_t now_ms)
{
	if (!httptxn_valid_id(id))
		return HTXN_E_BAD_ID;
	httptxn_expire(t, now_ms);
	if (t->tt_cur.ht_state == HTXN_NONE || strcmp(t->tt_cur.ht_id, id) != 0)
		return httptxn_used(t, id) ? HTXN_E_STATE : HTXN_E_UNKNOWN;
	if (t->tt_cur.ht_state == HTXN_EXPIRED)
		return HTXN_E_EXPIRED;
	return NULL;
}

const char *
httptxn_activate(struct httptxn_table *t, const char *id, int64_t now_ms)
{
	const char *e = httptxn_named(t, id, now_ms);
	if (e != NULL)
		return e;
	if (t->tt_cur.ht_state != HTXN_PREPARED)
		return HTXN_E_STATE;
	t->tt_cur.ht_state = HTXN_ACTIVE;
	t->tt_generation++;
	return NULL;
}

const char *
httptxn_end(struct httptxn_table *t, const char *id, int64_t now_ms)
{
	const char *e = httptxn_named(t, id, now_ms);
	if (e != NULL)
		return e;
	if (t->tt_cur.ht_state != HTXN_ACTIVE)
		return HTXN_E_STATE;
	httptxn_terminate(t, HTXN_ENDED, "ended");
	return NULL;
}

const char *
httptxn_revoke(struct httptxn_table *t, const char *id, int64_t now_ms)
{
	const char *e = httptxn_named(t, id, now_ms);
	if (e != NULL)
		return e;
	if (t->tt_cur.ht_state != HTXN_PREPARED && t->tt_cur.ht_state != HTXN_ACTIVE)
		return HTXN_E_STATE;
	httptxn_terminate(t, HTXN_REVOKED, "revoked");
	return NULL;
}

const char *
httptxn_authorize(struct httptxn_table *t, const struct httptxn_config *c,
    const struct httpurl *u, int64_t request_bytes, int hop, const char *prev_id,
    int64_t now_ms, uint64_t *reservation, int64_t *response_limit)
{
	struct httptxn *x = &t->tt_cur;
	size_t i;

	*reservation = 0;
	*response_limit = 0;
	if (httptxn_expire(t, now_ms) || x->ht_state == HTXN_EXPIRED)
		return HTXN_E_EXPIRED;
	if (x->ht_state != HTXN_ACTIVE)
		return HTXN_E_REQUIRED;
	/* A redirect hop stays in the transaction its first request was in. */
	if (hop > 0 && (prev_id == NULL || strcmp(prev_id, x->ht_id) != 0))
		return HTXN_E_CHANGED;
	for (i = 0; i < c->hc_nscopes; i++)
		if (httpurl_scope_match(&c->hc_scopes[i], u))
			break;
	if (i == c->hc_nscopes)
		return HTXN_E_SCOPE;
	/* One response-budget reservation at a time: budgets cannot be raced. */
	if (x->ht_reservation != 0)
		return HTXN_E_RESERVED;
	if (x->ht_requests >= c->hc_max_requests)
		return HTXN_E_REQUESTS;
	if (request_bytes < 0 || request_bytes > c->hc_max_request_bytes - x->ht_request_bytes)
		return HTXN_E_REQUEST_BYTES;
	if (x->ht_response_bytes >= c->hc_max_response_bytes)
		return HTXN_E_RESPONSE_BYTES;
	x->ht_requests++;
	x->ht_request_bytes += request_bytes;
	t->tt_generation++;
	x->ht_reservation = t->tt_generation;
	x->ht_reserved_bytes = c->hc_max_response_bytes - x->ht_response_bytes;
	*reservation = x->ht_reservation;
	*response_limit = x->ht_reserved_bytes;
	return NULL;
}

const char *
httptxn_complete(struct httptxn_table *t, const char *id, uint64_t reservation,
    int64_t response_bytes, int upstream_error, int64_t now_ms)
{
	struct httptxn *x = &t->tt_cur;
	int64_t reserved;

	httptxn_expire(t, now_ms);
	/* Another (or no) transaction now: whatever finished is late. */
	if (id == NULL || x->ht_state == HTXN_NONE || strcmp(x->ht_id, id) != 0)
		return HTXN_LATE;
	if (reservation == 0 || x->ht_reservation != reservation)
		return x->ht_state == HTXN_ACTIVE ? HTXN_E_RESERVATION : HTXN_LATE;
	reserved = x->ht_reserved_bytes;
	x->ht_reservation = 0;
	x->ht_reserved_bytes = 0;
	if (response_bytes < 0)
		response_bytes = 0;
	/* What the upstream sent counts, delivered or not: it was an effect. */
	if (response_bytes > INT64_MAX - x->ht_response_bytes)
		x->ht_response_bytes = INT64_MAX;
	else
		x->ht_response_bytes += response_bytes;
	t->tt_generation++;
	if (x->ht_state != HTXN_ACTIVE)
		return HTXN_LATE;
	if (!upstream_error && response_bytes > reserved)
		return HTXN_OVER;
	return HTXN_DELIVER;
}

struct json_object *
httptxn_cur_json(const struct httptxn_table *t)
{
	const struct httptxn *x = &t->tt_cur;
	struct json_object *o;

	if (x->ht_state == HTXN_NONE)
		return NULL;
	o = json_object_new_object();
	json_object_object_add(o, "transaction_id", json_object_new_string(x->ht_id));
	json_object_object_add(o, "state", json_object_new_string(httptxn_state_name(x->ht_state)));
	json_object_object_add(o, "effect", json_object_new_string(x->ht_effect));
	json_object_object_add(o, "ttl_seconds", json_object_new_int64(x->ht_ttl_s));
	json_object_object_add(o, "begun_ms", json_object_new_int64(x->ht_begun_ms));
	json_object_object_add(o, "deadline_ms", json_object_new_int64(x->ht_deadline_ms));
	json_object_object_add(o, "requests", json_object_new_int64(x->ht_requests));
	json_object_object_add(o, "request_bytes", json_object_new_int64(x->ht_request_bytes));
	json_object_object_add(o, "response_bytes", json_object_new_int64(x->ht_response_bytes));
	json_object_object_add(o, "reservation", json_object_new_int64((int64_t)x->ht_reservation));
	json_object_object_add(o, "reserved_bytes", json_object_new_int64(x->ht_reserved_bytes));
	json_object_object_add(o, "reason", x->ht_reason[0] ? json_object_new_string(x->ht_reason) :
	    NULL);
	return o;
}

struct json_object *
httptxn_to_json(const struct httptxn_table *t)
{
	struct json_object *o = json_object_new_object(), *ids = json_object_new_array();

	json_object_object_add(o, "schema_version", json_object_new_int(1));
	json_object_object_add(o, "generation", json_object_new_int64((int64_t)t->tt_generation));
	for (size_t i = 0; i < t->tt_nused; i++)
		json_object_array_add(ids, json_object_new_string(t->tt_used[i]));
	json_object_object_add(o, "used_ids", ids);
	json_object_object_add(o, "current", httptxn_cur_json(t));
	return o;
}

static const struct schema_field table_fields[] = {
	{ "schema_version", SCHEMA_INT, SCHEMA_REQUIRED, 1, 1, 0 },
	{ "generation", SCHEMA_INT, SCHEMA_REQUIRED, 0, INT64_MAX, 0 },
	{ "used_ids", SCHEMA_STRING_ARRAY, SCHEMA_REQUIRED, 0, HTTPTXN_MAX_IDS, HTTPTXN_ID_MAX },
	{ "current", SCHEMA_OBJECT, SCHEMA_NULLABLE, 0, 0, 0 },
	/* record.c's own fields */
	{ "revision", SCHEMA_INT, 0, 0, INT64_MAX, 0 },
	{ "operation_id", SCHEMA_STRING, 0, 1, 72, 0 },
};

static const struct schema_field cur_fields[] = {
	{ "transaction_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, HTTPTXN_ID_MAX, 0 },
	{ "state", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 16, 0 },
	{ "effect", SCHEMA_STRING, SCHEMA_REQUIRED, 1, HTTPTXN_EFFECT_MAX, 0 },
	{ "ttl_seconds", SCHEMA_INT, SCHEMA_REQUIRED, 1, 86400, 0 },
	{ "begun_ms", SCHEMA_INT, SCHEMA_REQUIRED, 0, INT64_MAX / 2, 0 },
	{ "deadline_ms", SCHEMA_INT, SCHEMA_REQUIRED, 0, INT64_MAX / 2, 0 },
	{ "requests", SCHEMA_INT, SCHEMA_REQUIRED, 0, INT64_MAX, 0 },
	{ "request_bytes", SCHEMA_INT, SCHEMA_REQUIRED, 0, INT64_MAX, 0 },
	{ "response_bytes", SCHEMA_INT, SCHEMA_REQUIRED, 0, INT64_MAX, 0 },
	{ "reservation", SCHEMA_INT, SCHEMA_REQUIRED, 0, INT64_MAX, 0 },
	{ "reserved_bytes", SCHEMA_INT, SCHEMA_REQUIRED, 0, INT64_MAX, 0 },
	{ "reason", SCHEMA_STRING, SCHEMA_NULLABLE, 1, 39, 0 },
};

int
httptxn_from_json(struct json_object *o, struct httptxn_table *t, char **cause)
{
	struct schema_error err;
	struct json_object *ids, *cur;
	struct httptxn *x;

	httptxn_table_init(t);
	if (schema_validate(o, table_fields, nitems(table_fields), &err) != 0) {
		util_cause(cause, "transaction state: %s (%s)", err.se_message, err.se_code);
		return -1;
	}
	t->tt_generation = (uint64_t)schema_int(o, "generation", 0);
	ids = schema_child(o, "used_ids");
	if ((t->tt_used = calloc(HTTPTXN_MAX_IDS, sizeof(*t->tt_used))) == NULL) {
		util_cause(cause, "transaction state: out of memory");
		return -1;
	}
	for (size_t i = 0; i < json_object_array_length(ids); i++) {
		const char *id = json_object_get_string(json_object_array_get_idx(ids, i));
		if (!httptxn_valid_id(id) || httptxn_used(t, id)) {
			util_cause(cause, "transaction state: bad or duplicate used id");
			goto fail;
		}
		util_strlcpy(t->tt_used[t->tt_nused++], id, sizeof(t->tt_used[0]));
	}
	cur = schema_child(o, "current");
	if (cur == NULL)
		return 0;
	if (schema_validate(cur, cur_fields, nitems(cur_fields), &err) != 0) {
		util_cause(cause, "transaction state: current: %s (%s)", err.se_message,
		    err.se_code);
		goto fail;
	}
	x = &t->tt_cur;
	util_strlcpy(x->ht_id, schema_string(cur, "transaction_id"), sizeof(x->ht_id));
	util_strlcpy(x->ht_effect, schema_string(cur, "effect"), sizeof(x->ht_effect));
	if (!httptxn_valid_id(x->ht_id) || !httptxn_used(t, x->ht_id) ||
	    httptxn_state_parse(schema_string(cur, "state"), &x->ht_state) != 0 ||
	    x->ht_state == HTXN_NONE) {
		util_cause(cause, "transaction state: current: bad id or state");
		goto fail;
	}
	x->ht_ttl_s = schema_int(cur, "ttl_seconds", 0);
	x->ht_begun_ms = schema_int(cur, "begun_ms", 0);
	x->ht_deadline_ms = schema_int(cur, "deadline_ms", 0);
	x->ht_requests = schema_int(cur, "requests", 0);
	x->ht_request_bytes = schema_int(cur, "request_bytes", 0);
	x->ht_response_bytes = schema_int(cur, "response_bytes", 0);
	x->ht_reservation = (uint64_t)schema_int(cur, "reservation", 0);
	x->ht_reserved_bytes = schema_int(cur, "reserved_bytes", 0);
	if (schema_string(cur, "reason") != NULL)
		util_strlcpy(x->ht_reason, schema_string(cur, "reason"), sizeof(x->ht_reason));
	/* A deadline past begin + ttl would extend the window: tampering or a bug. */
	if (x->ht_deadline_ms != x->ht_begun_ms + x->ht_ttl_s * 1000 ||
	    x->ht_reservation > t->tt_generation) {
		util_cause(cause, "transaction state: current: inconsistent deadline or reservation");
		goto fail;
	}
	return 0;
fail:
	httptxn_table_free(t);
	return -1;
}
