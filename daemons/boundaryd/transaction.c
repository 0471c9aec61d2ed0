/*
 * transaction.c: HTTP mediator transactions, boundaryd's side.
 *
 * Trust model: root (boundary.sock, or the operation's supervisor.sock)
 * begins, activates, ends and revokes a transaction; the mediator (an
 * untrusted relay on mediator.sock) asks for each request and reports each
 * response. Scopes, effect, TTL ceiling and budgets come from the
 * root-owned operation config only (proxy.transaction). The state lives
 * in STATE/network-operations/ID/http-transactions.json and is written
 * before any reply that grants something: after a crash the restored state
 * is at least as strict as what was granted (a reservation in flight stays
 * reserved until the transaction ends or expires, so the budget cannot be
 * overrun by a request whose response was never accounted for). A state
 * that cannot be written or read back denies every request and begin.
 *
 * Every lifecycle step and decision is a line of http-transactions.jsonl.
 * A line that cannot be written after the state committed does not undo
 * the transition: the operation is marked as having incomplete boundary
 * evidence (a violation of kind http_transaction_evidence_incomplete).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "boundaryd.h"
#include "httptxn.h"
#include "ids.h"
#include "log.h"
#include "record.h"
#include "safefs.h"
#include "schema.h"
#include "util.h"

#define TXN_STATE "http-transactions.json"
#define TXN_EVIDENCE "http-transactions.jsonl"
#define TXN_E_STATE_DISK "transaction_state_unavailable"
#define TXN_E_NOT_CONFIGURED "transaction_not_configured"

struct txnctx {
	struct netop *tx_no;
	struct httptxn_config tx_cfg;
	struct httptxn_table tx_tab;
	int tx_broken;		/* config or state unusable: deny everything */
	int tx_evidence_incomplete;
	struct event *tx_timer;	/* the current transaction's deadline */
};

static int
txn_validate(struct json_object *rec, const char *expected_id, char **cause)
{
	const char *id = schema_string(rec, "operation_id");
	if (id == NULL || strcmp(id, expected_id) != 0) {
		util_cause(cause, "%s: operation_id is not %s", TXN_STATE, expected_id);
		return -1;
	}
	return 0;
}

static int
txn_mut_replace(struct json_object *rec, void *arg, char **cause)
{
	struct json_object *n = arg;
	(void)cause;
	/* Drop every key, then copy the new state in (revision is record.c's). */
	struct json_object *keys = json_object_new_array();
	json_object_object_foreach(rec, k, v) {
		(void)v;
		if (strcmp(k, "revision") != 0)
			json_object_array_add(keys, json_object_new_string(k));
	}
	for (size_t i = 0; i < json_object_array_length(keys); i++)
		json_object_object_del(rec, json_object_get_string(json_object_array_get_idx(keys, i)));
	json_object_put(keys);
	json_object_object_foreach(n, k2, v2)
		json_object_object_add(rec, k2, json_object_get(v2));
	return 0;
}

/*
 * Write the table. 0 only when the disk took it: a change kept in memory
 * (record.c's pending store) would be lost by a crash, so a grant must not
 * rely on it.
 */
static int
txn_persist(struct txnctx *tx)
{
	struct netop *no = tx->tx_no;
	struct json_object *o = httptxn_to_json(&tx->tx_tab);
	char *cause = NULL;
	int fd, rv;

	json_object_object_add(o, "operation_id", json_object_new_string(no->no_op->op_id));
	json_object_object_add(o, "evidence_incomplete",
	    json_object_new_boolean(tx->tx_evidence_incomplete));
	fd = safefs_openat(no->no_dirfd, TXN_STATE, O_RDONLY, 0);
	if (fd < 0) {
		rv = record_create(no->no_dirfd, TXN_STATE, o, &cause);
	} else {
		close(fd);
		rv = record_update(no->no_dirfd, TXN_STATE, no->no_op->op_id, txn_validate,
		    txn_mut_replace, o, NULL, &cause);
	}
	json_object_put(o);
	if (rv != 0) {
		log_warnx("%s: %s: %s", no->no_op->op_id, TXN_STATE, cause);
		free(cause);
		return -1;
	}
	if (record_is_pending(no->no_dirfd, TXN_STATE)) {
		log_warnx("%s: %s: kept in memory only (state disk)", no->no_op->op_id, TXN_STATE);
		return -1;
	}
	return 0;
}

/* One line of http-transactions.jsonl; its loss marks the evidence incomplete. */
static void
txn_audit(struct txnctx *tx, const char *type, const char *txid, const char *code,
    struct json_object *extra)
{
	struct netop *no = tx->tx_no;
	struct json_object *o = extra != NULL ? extra : json_object_new_object();
	char ts[40], *cause = NULL;

	util_now_rfc3339(ts, sizeof(ts));
	json_object_object_add(o, "time", json_object_new_string(ts));
	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "operation_id", json_object_new_string(no->no_op->op_id));
	json_object_object_add(o, "transaction_id", txid ? json_object_new_string(txid) : NULL);
	json_object_object_add(o, "result", json_object_new_string(code ? code : "ok"));
	json_object_object_add(o, "generation",
	    json_object_new_int64((int64_t)tx->tx_tab.tt_generation));
	if (tx->tx_tab.tt_cur.ht_state != HTXN_NONE && txid != NULL &&
	    strcmp(txid, tx->tx_tab.tt_cur.ht_id) == 0)
		json_object_object_add(o, "state", json_object_new_string(
		    httptxn_state_name(tx->tx_tab.tt_cur.ht_state)));
	if (record_append_jsonl(no->no_dirfd, TXN_EVIDENCE, o, &cause) != 0) {
		log_warnx("%s: %s: %s", no->no_op->op_id, TXN_EVIDENCE, cause);
		free(cause);
		if (!tx->tx_evidence_incomplete) {
			tx->tx_evidence_incomplete = 1;
			operation_violation(no->no_op, "http_transaction_evidence_incomplete");
			(void)txn_persist(tx);
		}
	}
	json_object_put(o);
}

static void txn_arm(struct txnctx *tx);

/* Tell the mediator the transaction closed: it drops that operation's connections. */
static void
txn_notify_closed(struct txnctx *tx)
{
	struct json_object *p = json_object_new_object();
	json_object_object_add(p, "operation_id", json_object_new_string(tx->tx_no->no_op->op_id));
	json_object_object_add(p, "transaction_id", json_object_new_string(tx->tx_tab.tt_cur.ht_id));
	json_object_object_add(p, "state", json_object_new_string(
	    httptxn_state_name(tx->tx_tab.tt_cur.ht_state)));
	control_mediator_notify(tx->tx_no->no_bd, "transaction.closed", p);
}

static void
txn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct txnctx *tx = arg;
	(void)fd;
	(void)what;
	if (httptxn_expire(&tx->tx_tab, util_now_ms())) {
		if (txn_persist(tx) != 0)
			tx->tx_broken = 1;
		txn_audit(tx, "http_transaction_expired", tx->tx_tab.tt_cur.ht_id, NULL, NULL);
		txn_notify_closed(tx);
	} else {
		txn_arm(tx);	/* woke early (clock steps): wait again */
	}
}

static void
txn_arm(struct txnctx *tx)
{
	int64_t left;
	struct timeval tv;

	if (tx->tx_timer == NULL)
		return;
	evtimer_del(tx->tx_timer);
	if (tx->tx_tab.tt_cur.ht_state != HTXN_PREPARED &&
	    tx->tx_tab.tt_cur.ht_state != HTXN_ACTIVE)
		return;
	left = tx->tx_tab.tt_cur.ht_deadline_ms - util_now_ms();
	if (left < 0)
		left = 0;
	tv.tv_sec = (time_t)(left / 1000);
	tv.tv_usec = (suseconds_t)((left % 1000) * 1000);
	evtimer_add(tx->tx_timer, &tv);
}

/*
 * The operation's transaction context, made on first use: the config from
 * the operation's proxy.transaction, the state from disk if there is one.
 * NULL when the operation has no proxy.transaction.
 */
static struct txnctx *
txn_get(struct netop *no)
{
	struct json_object *txj = schema_child(no->no_spec.ns_proxy, "transaction");
	struct txnctx *tx;
	char *cause = NULL;

	if (no->no_txn != NULL)
		return no->no_txn;
	if (txj == NULL)
		return NULL;
	if ((tx = calloc(1, sizeof(*tx))) == NULL)
		return NULL;
	tx->tx_no = no;
	httptxn_table_init(&tx->tx_tab);
	tx->tx_timer = evtimer_new(no->no_bd->bd_base, txn_timer_cb, tx);
	if (httptxn_config_parse(txj, &tx->tx_cfg, &cause) != 0) {
		log_warnx("%s: %s", no->no_op->op_id, cause);
		free(cause);
		tx->tx_broken = 1;
	}
	int fd = safefs_openat(no->no_dirfd, TXN_STATE, O_RDONLY, 0);
	if (fd >= 0) {
		struct json_object *rec = NULL;
		close(fd);
		if (record_read(no->no_dirfd, TXN_STATE, no->no_op->op_id, txn_validate, &rec,
		    &cause) != 0) {
			log_warnx("%s: %s", no->no_op->op_id, cause);
			free(cause);
			tx->tx_broken = 1;
		} else {
			struct json_object *st = json_object_new_object();
			json_object_object_foreach(rec, k, v)
				if (strcmp(k, "operation_id") != 0 && strcmp(k, "revision") != 0 &&
				    strcmp(k, "evidence_incomplete") != 0)
					json_object_object_add(st, k, json_object_get(v));
			tx->tx_evidence_incomplete = schema_bool(rec, "evidence_incomplete", 0);
			/* A state that does not restore strictly is never guessed at. */
			if (httptxn_from_json(st, &tx->tx_tab, &cause) != 0) {
				log_warnx("%s: %s", no->no_op->op_id, cause);
				free(cause);
				tx->tx_broken = 1;
			}
			json_object_put(st);
			json_object_put(rec);
		}
	} else if (errno != ENOENT) {
		tx->tx_broken = 1;
	}
	no->no_txn = tx;
	txn_arm(tx);
	return tx;
}

void
txn_restore(struct netop *no)
{
	struct txnctx *tx = txn_get(no);
	if (tx == NULL)
		return;
	if (tx->tx_broken)
		recover_note(no->no_bd, no->no_op->op_id, "transaction_state_invalid",
		    TXN_STATE, "mediator_denied");
	/* Expired while no one watched: record it now. */
	if (httptxn_expire(&tx->tx_tab, util_now_ms())) {
		if (txn_persist(tx) != 0)
			tx->tx_broken = 1;
		txn_audit(tx, "http_transaction_expired", tx->tx_tab.tt_cur.ht_id, NULL, NULL);
	}
}

/* The operation ends: a live transaction is revoked with it. */
void
txn_operation_end(struct netop *no)
{
	struct txnctx *tx = no->no_txn;
	if (tx == NULL || tx->tx_broken || !httptxn_live(&tx->tx_tab, util_now_ms()))
		return;
	if (httptxn_revoke(&tx->tx_tab, tx->tx_tab.tt_cur.ht_id, util_now_ms()) == NULL) {
		util_strlcpy(tx->tx_tab.tt_cur.ht_reason, "operation_ended",
		    sizeof(tx->tx_tab.tt_cur.ht_reason));
		(void)txn_persist(tx);
		txn_audit(tx, "http_transaction_revoked", tx->tx_tab.tt_cur.ht_id, NULL, NULL);
		txn_notify_closed(tx);
	}
}

void
txn_free(struct netop *no)
{
	struct txnctx *tx = no->no_txn;
	if (tx == NULL)
		return;
	if (tx->tx_timer != NULL)
		event_free(tx->tx_timer);
	httptxn_config_free(&tx->tx_cfg);
	httptxn_table_free(&tx->tx_tab);
	free(tx);
	no->no_txn = NULL;
}

struct json_object *
txn_summary(struct netop *no)
{
	struct txnctx *tx = txn_get(no);
	struct json_object *o;

	if (tx == NULL)
		return NULL;
	httptxn_expire(&tx->tx_tab, util_now_ms());
	o = json_object_new_object();
	json_object_object_add(o, "usable", json_object_new_boolean(!tx->tx_broken));
	json_object_object_add(o, "evidence_incomplete",
	    json_object_new_boolean(tx->tx_evidence_incomplete));
	json_object_object_add(o, "generation",
	    json_object_new_int64((int64_t)tx->tx_tab.tt_generation));
	json_object_object_add(o, "current", httptxn_cur_json(&tx->tx_tab));
	return o;
}

enum txn_step { TXN_BEGIN, TXN_ACTIVATE, TXN_END, TXN_REVOKE, TXN_START };

static const char *const txn_step_event[] = {
	"http_transaction_begun", "http_transaction_activated", "http_transaction_ended",
	"http_transaction_revoked", "http_transaction_started",
};

static void
txn_lifecycle(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r, enum txn_step step)
{
	const char *id = schema_string(params, "transaction_id");
	struct netop *no = netop_lookup(bd, p, scope, params, r);
	struct txnctx *tx;
	const char *code = NULL;
	int64_t now = util_now_ms();
	enum httptxn_state before;

	if (no == NULL)
		return;
	if ((tx = txn_get(no)) == NULL) {
		reply_error(r, TXN_E_NOT_CONFIGURED, "operation %s has no proxy.transaction",
		    no->no_op->op_id);
		return;
	}
	/*
	 * An unusable state grants nothing (every request is denied); there is
	 * nothing to end or revoke either, and the reply says so.
	 */
	if (tx->tx_broken) {
		reply_error(r, TXN_E_STATE_DISK, "the transaction state is unusable: every request "
		    "of this operation is denied");
		return;
	}
	before = tx->tx_tab.tt_cur.ht_state;
	switch (step) {
	case TXN_BEGIN:
		code = httptxn_begin(&tx->tx_tab, &tx->tx_cfg, id, schema_string(params, "effect"),
		    schema_int(params, "ttl_seconds", 0), now);
		break;
	case TXN_ACTIVATE:
		code = httptxn_activate(&tx->tx_tab, id, now);
		break;
	case TXN_END:
		code = httptxn_end(&tx->tx_tab, id, now);
		break;
	case TXN_REVOKE:
		code = httptxn_revoke(&tx->tx_tab, id, now);
		break;
	case TXN_START:
		/* begin and activate as one durable transition (the coordinator's). */
		code = httptxn_begin(&tx->tx_tab, &tx->tx_cfg, id, schema_string(params, "effect"),
		    schema_int(params, "ttl_seconds", 0), now);
		if (code == NULL)
			code = httptxn_activate(&tx->tx_tab, id, now);
		break;
	}
	if (code != NULL) {
		/* An expiry noticed here is still a transition to keep. */
		if (before != tx->tx_tab.tt_cur.ht_state &&
		    tx->tx_tab.tt_cur.ht_state == HTXN_EXPIRED) {
			(void)txn_persist(tx);
			txn_audit(tx, "http_transaction_expired", tx->tx_tab.tt_cur.ht_id, NULL,
			    NULL);
			txn_notify_closed(tx);
		}
		txn_audit(tx, "http_transaction_refused", id, code, NULL);
		reply_error(r, code, "%s %s: %s", txn_step_event[step], id ? id : "", code);
		return;
	}
	if (txn_persist(tx) != 0) {
		if (step == TXN_BEGIN || step == TXN_ACTIVATE || step == TXN_START) {
			/*
			 * A grant the disk did not take is withdrawn: a restart
			 * would not know of it, and its id must not be reusable
			 * either (so the id stays used, the transaction revoked).
			 */
			httptxn_revoke(&tx->tx_tab, id, now);
			tx->tx_broken = 1;
			txn_audit(tx, "http_transaction_refused", id, TXN_E_STATE_DISK, NULL);
			txn_notify_closed(tx);
			reply_error(r, TXN_E_STATE_DISK, "the transaction state could not be written");
			return;
		}
		/* Less authority in memory than on disk; the TTL bounds the disk's copy. */
		tx->tx_broken = 1;
	}
	txn_arm(tx);
	struct json_object *ev = json_object_new_object();
	if (step == TXN_BEGIN || step == TXN_START) {
		json_object_object_add(ev, "effect", json_object_new_string(tx->tx_cfg.hc_effect));
		json_object_object_add(ev, "ttl_seconds",
		    json_object_new_int64(tx->tx_tab.tt_cur.ht_ttl_s));
		json_object_object_add(ev, "deadline_ms",
		    json_object_new_int64(tx->tx_tab.tt_cur.ht_deadline_ms));
	}
	json_object_object_add(ev, "caller_uid", json_object_new_int64((int64_t)p->pr_uid));
	json_object_object_add(ev, "caller_pid", json_object_new_int64((int64_t)p->pr_pid));
	txn_audit(tx, txn_step_event[step], id, NULL, ev);
	if (step == TXN_END || step == TXN_REVOKE)
		txn_notify_closed(tx);
	r->or_result = httptxn_cur_json(&tx->tx_tab);
	json_object_object_add(r->or_result, "operation_id",
	    json_object_new_string(no->no_op->op_id));
}

void
transaction_begin(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r)
{
	txn_lifecycle(bd, p, scope, params, r, TXN_BEGIN);
}

void
transaction_start(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r)
{
	txn_lifecycle(bd, p, scope, params, r, TXN_START);
}

void
transaction_activate(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r)
{
	txn_lifecycle(bd, p, scope, params, r, TXN_ACTIVATE);
}

void
transaction_end(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r)
{
	txn_lifecycle(bd, p, scope, params, r, TXN_END);
}

void
transaction_revoke(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r)
{
	txn_lifecycle(bd, p, scope, params, r, TXN_REVOKE);
}

/* The target the mediator is about to fetch, as httpurl reads it. */
static enum httpurl_err
txn_target(struct json_object *params, struct httpurl *u)
{
	const char *host = schema_string(params, "host");
	char *t = NULL;
	int n;
	enum httpurl_err e;

	/* An IPv6 literal travels without brackets. */
	n = asprintf(&t, strchr(host, ':') ? "%s://[%s]:%lld%s" : "%s://%s:%lld%s",
	    schema_string(params, "scheme"), host, (long long)schema_int(params, "port", 0),
	    schema_string(params, "path"));
	if (n < 0)
		return HTTPURL_E_TOO_LONG;
	e = httpurl_parse(t, (size_t)n, u);
	free(t);
	return e;
}

/*
 * mediator.authorize for an operation with proxy.transaction, after every
 * other check passed. NULL (allowed, *reservation and *limit set and
 * persisted) or the reason. With stage "resolve" only the transaction and
 * the scope are checked (the mediator asks before it resolves a name);
 * nothing is reserved.
 */
const char *
txn_authorize(struct netop *no, struct json_object *params, const char **txid,
    uint64_t *reservation, int64_t *limit, const char **url_error)
{
	struct txnctx *tx = txn_get(no);
	struct httpurl *u;
	const char *code;
	const char *stage = schema_string(params, "stage");
	int64_t now = util_now_ms();
	enum httptxn_state before;

	*txid = NULL;
	*reservation = 0;
	*limit = 0;
	*url_error = NULL;
	if (tx == NULL || tx->tx_broken)
		return TXN_E_STATE_DISK;
	if ((u = malloc(sizeof(*u))) == NULL)
		return TXN_E_STATE_DISK;
	before = tx->tx_tab.tt_cur.ht_state;
	if (tx->tx_tab.tt_cur.ht_state != HTXN_NONE)
		*txid = tx->tx_tab.tt_cur.ht_id;
	enum httpurl_err ue = txn_target(params, u);
	if (ue != HTTPURL_OK) {
		/* Ambiguous targets (encoded delimiters, dot-segments, %25) are outside. */
		*url_error = httpurl_strerror(ue);
		free(u);
		httptxn_expire(&tx->tx_tab, now);
		code = tx->tx_tab.tt_cur.ht_state == HTXN_ACTIVE ? HTXN_E_SCOPE :
		    tx->tx_tab.tt_cur.ht_state == HTXN_EXPIRED ? HTXN_E_EXPIRED : HTXN_E_REQUIRED;
		goto out;
	}
	if (stage != NULL && strcmp(stage, "resolve") == 0) {
		size_t i;
		httptxn_expire(&tx->tx_tab, now);
		code = NULL;
		if (tx->tx_tab.tt_cur.ht_state == HTXN_EXPIRED)
			code = HTXN_E_EXPIRED;
		else if (tx->tx_tab.tt_cur.ht_state != HTXN_ACTIVE)
			code = HTXN_E_REQUIRED;
		else {
			for (i = 0; i < tx->tx_cfg.hc_nscopes; i++)
				if (httpurl_scope_match(&tx->tx_cfg.hc_scopes[i], u))
					break;
			if (i == tx->tx_cfg.hc_nscopes)
				code = HTXN_E_SCOPE;
		}
		free(u);
		goto out;
	}
	code = httptxn_authorize(&tx->tx_tab, &tx->tx_cfg, u,
	    schema_int(params, "request_bytes", 0), (int)schema_int(params, "redirect_hop", 0),
	    schema_string(params, "transaction_id"), now, reservation, limit);
	free(u);
	if (code == NULL && txn_persist(tx) != 0) {
		/*
		 * The reservation must be on disk before the upstream effect:
		 * otherwise a crash forgets an effect the budget never saw.
		 */
		tx->tx_broken = 1;
		*reservation = 0;
		*limit = 0;
		code = TXN_E_STATE_DISK;
	}
out:
	if (before != tx->tx_tab.tt_cur.ht_state && tx->tx_tab.tt_cur.ht_state == HTXN_EXPIRED) {
		(void)txn_persist(tx);
		txn_audit(tx, "http_transaction_expired", tx->tx_tab.tt_cur.ht_id, NULL, NULL);
		txn_notify_closed(tx);
	}
	return code;
}

/*
 * A reservation authorize took for a request it then denied for another
 * reason (mediator.c): released without a response, the request counted.
 */
void
txn_release_unused(struct netop *no, uint64_t reservation)
{
	struct txnctx *tx = txn_get(no);
	if (tx == NULL)
		return;
	(void)httptxn_complete(&tx->tx_tab, tx->tx_tab.tt_cur.ht_id, reservation, 0, 1,
	    util_now_ms());
	if (txn_persist(tx) != 0)
		tx->tx_broken = 1;
}

/* Evidence of one transactional decision (called by mediator.c). */
void
txn_decision_evidence(struct netop *no, struct json_object *params, const char *decision_id,
    const char *txid, const char *reason, uint64_t reservation, const char *url_error)
{
	struct txnctx *tx = txn_get(no);
	struct json_object *o;
	const char *path;

	if (tx == NULL)
		return;
	o = json_object_new_object();
	path = schema_string(params, "path");
	json_object_object_add(o, "decision_id", json_object_new_string(decision_id));
	json_object_object_add(o, "method", json_object_new_string(schema_string(params, "method")));
	json_object_object_add(o, "scheme", json_object_new_string(schema_string(params, "scheme")));
	json_object_object_add(o, "host", json_object_new_string(schema_string(params, "host")));
	json_object_object_add(o, "port", json_object_new_int((int)schema_int(params, "port", 0)));
	json_object_object_add(o, "path", json_object_new_string_len(path,
	    (int)strcspn(path, "?#")));
	json_object_object_add(o, "hop", json_object_new_int((int)schema_int(params, "redirect_hop", 0)));
	json_object_object_add(o, "stage", json_object_new_string(
	    schema_string(params, "stage") ? schema_string(params, "stage") : "connect"));
	json_object_object_add(o, "reservation", reservation ?
	    json_object_new_int64((int64_t)reservation) : NULL);
	json_object_object_add(o, "url_error", url_error ? json_object_new_string(url_error) :
	    NULL);
	txn_audit(tx, "http_transaction_request", txid, reason, o);
}

void
mediator_complete(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	const char *opid = schema_string(params, "operation_id");
	const char *id = schema_string(params, "transaction_id");
	struct operation *op = operation_find(bd, opid);
	struct txnctx *tx = NULL;
	const char *outcome;
	int64_t bytes = schema_int(params, "response_bytes", 0);
	int upstream_error = schema_bool(params, "upstream_error", 0);

	(void)p;
	if (op != NULL && op->op_net != NULL && !op->op_net->no_table_gone)
		tx = txn_get(op->op_net);
	if (tx == NULL) {
		/* No transaction state to account with: never delivered. */
		outcome = HTXN_LATE;
	} else {
		outcome = httptxn_complete(&tx->tx_tab, id,
		    (uint64_t)schema_int(params, "reservation", 0), bytes, upstream_error,
		    util_now_ms());
		if (txn_persist(tx) != 0)
			tx->tx_broken = 1;
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "response_bytes", json_object_new_int64(bytes));
		json_object_object_add(o, "upstream_error", json_object_new_boolean(upstream_error));
		json_object_object_add(o, "status", json_object_new_int(
		    (int)schema_int(params, "status", 0)));
		json_object_object_add(o, "reservation", json_object_new_int64(
		    schema_int(params, "reservation", 0)));
		txn_audit(tx, strcmp(outcome, HTXN_LATE) == 0 ? HTXN_LATE :
		    "http_transaction_response", id, outcome, o);
		/* The effect happened upstream whether or not it is delivered. */
		struct json_object *e = json_object_new_object();
		char eid[ID_MAX_LEN];
		ids_new("eff_", eid, sizeof(eid));
		json_object_object_add(e, "effect_id", json_object_new_string(eid));
		json_object_object_add(e, "kind", json_object_new_string("http_transaction_effect"));
		json_object_object_add(e, "transaction_id", json_object_new_string(id));
		json_object_object_add(e, "decision_id", schema_string(params, "decision_id") ?
		    json_object_new_string(schema_string(params, "decision_id")) : NULL);
		json_object_object_add(e, "status", json_object_new_int(
		    (int)schema_int(params, "status", 0)));
		json_object_object_add(e, "response_bytes", json_object_new_int64(bytes));
		json_object_object_add(e, "delivered",
		    json_object_new_boolean(strcmp(outcome, HTXN_DELIVER) == 0));
		json_object_object_add(e, "reason", json_object_new_string(outcome));
		netop_append(op->op_net, "effects.jsonl", e);
	}
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "deliver",
	    json_object_new_boolean(strcmp(outcome, HTXN_DELIVER) == 0));
	json_object_object_add(r->or_result, "reason", json_object_new_string(outcome));
}
