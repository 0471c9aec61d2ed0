/*
 * live.c: the operation record kept current while the operation runs.
 *
 * Counters (network packets and bytes, the blocked destinations), the active
 * mediation boundaries and the informational recovery health used to reach
 * the record only at the end. From the operation's poll, at most every
 * OP_LIVE_MS and only when something changed, they are written in one
 * record update (one fsync): a dashboard reading record.json sees a running
 * operation as it is. Nothing here is on the create or end reply path.
 */
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "boundaryd.h"
#include "log.h"
#include "oprecord.h"
#include "schema.h"
#include "util.h"

static const char *
str_or_empty(const char *s)
{
	return s != NULL ? s : "";
}

static int
live_counts_zero(const struct oprecord_counts *c)
{
	return c->oc_allowed_packets == 0 && c->oc_allowed_bytes == 0 &&
	    c->oc_blocked_packets == 0 && c->oc_blocked_bytes == 0;
}

/* One mediation boundary, by kind: a later state replaces it, an ended one stays ended. */
static int
live_set_boundary(struct json_object *rec, struct json_object *b)
{
	struct json_object *arr = schema_child(rec, "mediation_boundaries");
	const char *kind = schema_string(b, "kind");

	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *cur = json_object_array_get_idx(arr, i);
		const char *k = schema_string(cur, "kind");
		if (k == NULL || kind == NULL || strcmp(k, kind) != 0)
			continue;
		if (json_object_equal(cur, b))
			return 1;
		/* Stale: an active view never reopens an ended boundary. */
		const char *st = schema_string(cur, "state");
		const char *nst = schema_string(b, "state");
		if (st != NULL && strcmp(st, "active") != 0 && nst != NULL &&
		    strcmp(nst, "active") == 0)
			return 1;
		if (schema_int(b, "generation", 0) < schema_int(cur, "generation", 0))
			return 1;
		json_object_array_put_idx(arr, i, json_object_get(b));
		return 0;
	}
	json_object_array_add(arr, json_object_get(b));
	return 0;
}

int
live_mut(struct json_object *rec, void *arg, char **cause)
{
	struct live_update *u = arg;
	int changed = 0;

	if (!live_counts_zero(&u->lu_counts)) {
		if (oprecord_mut_counts(rec, &u->lu_counts, cause) != 0)
			return -1;
		changed = 1;
	}
	if (u->lu_blocked != NULL) {
		struct json_object *net = schema_child(schema_child(rec, "counts"), "network");
		struct json_object *cur = schema_child(net, "blocked_destinations");
		/* The set of rejected destinations only grows: a smaller view is stale. */
		if (cur == NULL || (!json_object_equal(cur, u->lu_blocked) &&
		    schema_int(u->lu_blocked, "destinations", 0) >=
		    schema_int(cur, "destinations", 0))) {
			json_object_object_add(net, "blocked_destinations",
			    json_object_get(u->lu_blocked));
			changed = 1;
		}
	}
	for (size_t i = 0; i < u->lu_nb; i++)
		if (live_set_boundary(rec, u->lu_boundaries[i]) == 0)
			changed = 1;
	if (u->lu_recovery != NULL) {
		struct json_object *rh = schema_child(rec, "recovery_health");
		if (!json_object_equal(rh, u->lu_recovery)) {
			json_object_object_add(rec, "recovery_health", json_object_get(u->lu_recovery));
			changed = 1;
		}
	}
	return changed ? 0 : 1;
}

void
live_update_clear(struct live_update *u)
{
	json_object_put(u->lu_blocked);
	for (size_t i = 0; i < u->lu_nb; i++)
		json_object_put(u->lu_boundaries[i]);
	json_object_put(u->lu_recovery);
	memset(u, 0, sizeof(*u));
}

int
live_write(struct operation *op, struct live_update *u)
{
	char *cause = NULL;

	if (live_counts_zero(&u->lu_counts) && u->lu_blocked == NULL && u->lu_nb == 0 &&
	    u->lu_recovery == NULL)
		return 0;
	if (oprecord_update(op->op_dirfd, op->op_id, live_mut, u, NULL, &cause) != 0) {
		log_warnx("%s: live record: %s", op->op_id, cause);
		free(cause);
		return -1;
	}
	return 0;
}

/*
 * Informational recovery health: what startup recovery could not validate
 * (other operations' records and tables). Not a violation of this
 * operation; it is copied so its record tells the whole story.
 */
static struct json_object *
live_recovery(struct operation *op)
{
	struct json_object *entries = op->op_bd->bd_recovery;
	size_t n = json_object_array_length(entries);

	if (n == op->op_live_recovery_n)
		return NULL;
	struct json_object *rh = json_object_new_object();
	json_object_object_add(rh, "status", json_object_new_string(n ? "degraded" : "ok"));
	json_object_object_add(rh, "entries", json_object_get(entries));
	return rh;
}

/* The fanotify boundary, when the operation asked for one. */
static struct json_object *
live_fanotify_boundary(struct operation *op, int final)
{
	const char *state = final ? "ended" : op->op_cov_lost ? "lost" : "active";
	if (op->op_fanotify == NULL || strcmp(op->op_live_fan_state, state) == 0)
		return NULL;
	struct json_object *b = json_object_new_object();
	json_object_object_add(b, "kind", json_object_new_string("fanotify"));
	json_object_object_add(b, "mechanism", json_object_new_string("fanotify permission events"));
	json_object_object_add(b, "enforced_by", json_object_new_string("gensee-sensord"));
	json_object_object_add(b, "state", json_object_new_string(state));
	return b;
}

/*
 * A mutator for operation_finish's batch (no write of its own): the
 * fanotify boundary ends with the operation. The network boundary's end is
 * written by netop_end with the final counters.
 */
int
live_mut_fanotify_ended(struct json_object *rec, void *arg, char **cause)
{
	struct json_object *arr = schema_child(rec, "mediation_boundaries");
	int changed = 0;

	(void)arg;
	(void)cause;
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *b = json_object_array_get_idx(arr, i);
		const char *k = schema_string(b, "kind");
		if (k != NULL && strcmp(k, "fanotify") == 0 &&
		    strcmp(str_or_empty(schema_string(b, "state")), "ended") != 0) {
			json_object_object_add(b, "state", json_object_new_string("ended"));
			changed = 1;
		}
	}
	return changed ? 0 : 1;
}

/*
 * From the operation's poll (every OP_POLL_MS): at most every OP_LIVE_MS,
 * gather what changed and write it once. final: the operation is ending
 * (its boundaries are reported ended; no throttle).
 */
void
operation_live(struct operation *op, int final)
{
	struct live_update u;
	int64_t now = util_monotonic_ms();
	const char *fan_state = final ? "ended" : op->op_cov_lost ? "lost" : "active";

	if (!final && now - op->op_live_ms < OP_LIVE_MS)
		return;
	op->op_live_ms = now;
	memset(&u, 0, sizeof(u));
	if (op->op_net != NULL)
		netop_live(op->op_net, final, &u);
	struct json_object *fb = live_fanotify_boundary(op, final);
	if (fb != NULL)
		u.lu_boundaries[u.lu_nb++] = fb;
	u.lu_recovery = live_recovery(op);
	if (live_write(op, &u) == 0) {
		if (op->op_net != NULL)
			netop_live_written(op->op_net, &u);
		if (fb != NULL)
			util_strlcpy(op->op_live_fan_state, fan_state, sizeof(op->op_live_fan_state));
		if (u.lu_recovery != NULL)
			op->op_live_recovery_n = json_object_array_length(op->op_bd->bd_recovery);
	}
	live_update_clear(&u);
}
