/*
 * bridgescope.c: what a request through a run's control bridge may do.
 *
 * The caller is not trusted, so verify that every request only affects
 * the run whose socket it came through (self) or self's direct children,
 * as the method allows: this function names the runs a request acts on and
 * the approval it needs, or refuses it with a stable code. It reads the
 * in-memory runs only (no I/O), so the unit tests and the fuzz target run
 * it as it is.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "proto.h"
#include "schema.h"
#include "tcloned.h"
#include "util.h"

static const struct schema_field approve_params[] = {
	{ "run_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, TCLONED_NAME_MAX + 32, 0 },
	{ "action", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 16, 0 },
};
static const struct schema_field send_params[] = {
	{ "run_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, TCLONED_NAME_MAX + 32, 0 },
	{ "text", SCHEMA_STRING, SCHEMA_REQUIRED, 1, BRIDGE_TEXT_MAX, 0 },
};

/* The run an id or name means to this user: exactly lifecycle.c's visible(). */
struct trun *
bridge_resolve(struct tcloned *t, uid_t uid, const char *id)
{
	if (id == NULL)
		return NULL;
	for (int i = 0; i < t->td_nruns; i++) {
		struct trun *r = t->td_runs[i];
		if (uid != 0 && r->tr_uid != uid)
			continue;
		if (strcmp(r->tr_id, id) == 0 || strcmp(r->tr_name, id) == 0)
			return r;
	}
	return NULL;
}

int
bridge_is_child(const struct trun *self, const struct trun *r)
{
	return r != NULL && self != NULL && r != self && strcmp(r->tr_role, "fork") == 0 &&
	    strcmp(r->tr_source, self->tr_id) == 0 && r->tr_uid == self->tr_uid;
}

static int
refuse(const char **code, char **why, const char *c, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
refuse(const char **code, char **why, const char *c, const char *fmt, ...)
{
	va_list ap;

	*code = c;
	free(*why);
	va_start(ap, fmt);
	if (vasprintf(why, fmt, ap) < 0)
		*why = NULL;
	va_end(ap);
	return -1;
}

int
bridge_scope(struct tcloned *t, struct trun *self, uid_t uid, const char *method,
    struct json_object *params, struct bridge_plan *bp, const char **code, char **why)
{
	struct schema_error err;
	struct json_object *v;
	struct trun *a;

	memset(bp, 0, sizeof(*bp));
	if (self == NULL)
		return refuse(code, why, TE_NOT_IN_RUN, "%s", "the run is not running");
	if (params == NULL || !json_object_is_type(params, json_type_object))
		return refuse(code, why, PE_INVALID_PARAMS, "%s", "params: an object");
	if (strcmp(method, "tclone.list") == 0)
		return 0;	/* answered with self and its direct children only */
	if (strcmp(method, "tclone.approve") == 0 || strcmp(method, "tclone.send") == 0) {
		int approve = method[7] == 'a';
		memset(&err, 0, sizeof(err));
		if (schema_validate(params, approve ? approve_params : send_params,
		    approve ? nitems(approve_params) : nitems(send_params), &err) != 0)
			return refuse(code, why, PE_INVALID_PARAMS, "%s", err.se_message);
		a = bridge_resolve(t, uid, schema_string(params, "run_id"));
		if (!bridge_is_child(self, a))
			return refuse(code, why, TE_BRIDGE_SCOPE, "%s: the caller's direct children "
			    "only", method);
		if (approve) {
			const char *act = schema_string(params, "action");
			if (strcmp(act, "merge") != 0 && strcmp(act, "promote") != 0 &&
			    strcmp(act, "discard") != 0)
				return refuse(code, why, PE_INVALID_PARAMS, "%s",
				    "action: merge, promote or discard");
		} else {
			/* A line of text, not key names or a second command. */
			for (const unsigned char *c = (const unsigned char *)schema_string(params,
			    "text"); *c != '\0'; c++)
				if (*c < 0x20 || *c == 0x7f)
					return refuse(code, why, PE_INVALID_PARAMS, "%s",
					    "text: control characters");
		}
		bp->bp_target = a;
		bp->bp_local = 1;
		return 0;
	}
	if (strcmp(method, "tclone.diff") == 0 || strcmp(method, "tclone.summary") == 0) {
		a = bridge_resolve(t, uid, schema_string(params, "run_id"));
		if (a == NULL || (a != self && !bridge_is_child(self, a)))
			return refuse(code, why, TE_BRIDGE_SCOPE, "%s: the caller and its direct "
			    "children only", method);
	} else if (strcmp(method, "tclone.compare") == 0) {
		a = bridge_resolve(t, uid, schema_string(params, "run_id"));
		if (!bridge_is_child(self, a))
			return refuse(code, why, TE_BRIDGE_SCOPE, "%s",
			    "compare: a group of the caller's direct children");
	} else if (strcmp(method, "tclone.fork") == 0 || strcmp(method, "tclone.attach") == 0) {
		/* fork of itself; attach of itself is how the CLI execs in itself. */
		a = bridge_resolve(t, uid, schema_string(params, "run_id"));
		if (a != self)
			return refuse(code, why, TE_BRIDGE_SCOPE, "%s: the caller itself only", method);
	} else if (strcmp(method, "tclone.merge") == 0) {
		a = bridge_resolve(t, uid, schema_string(params, "fork"));
		if (bridge_resolve(t, uid, schema_string(params, "into")) != self ||
		    !bridge_is_child(self, a))
			return refuse(code, why, TE_BRIDGE_SCOPE, "%s",
			    "merge: a direct child into the caller only");
		/* A non-boolean force or dry_run is left to the method's schema (refused). */
		if ((v = schema_child(params, "force")) != NULL &&
		    (!json_object_is_type(v, json_type_boolean) || json_object_get_boolean(v)))
			return refuse(code, why, PE_NOT_AUTHORIZED, "%s",
			    "merge --force is the host user's");
		v = schema_child(params, "dry_run");
		/* A dry run changes nothing: it needs no approval and consumes none. */
		if (v == NULL || !json_object_is_type(v, json_type_boolean) ||
		    !json_object_get_boolean(v))
			bp->bp_need = "merge";
		bp->bp_into = self;
	} else if (strcmp(method, "tclone.switch") == 0 || strcmp(method, "tclone.discard") == 0) {
		a = bridge_resolve(t, uid, schema_string(params, "run_id"));
		if (!bridge_is_child(self, a))
			return refuse(code, why, TE_BRIDGE_SCOPE, "%s: a direct child of the caller "
			    "only", method);
		bp->bp_need = strcmp(method, "tclone.switch") == 0 ? "promote" : "discard";
	} else {
		/* delete, keep, choose, start, status: the host user's alone. */
		return refuse(code, why, PE_NOT_AUTHORIZED, "%s is not available through the "
		    "control bridge", method);
	}
	bp->bp_target = a;
	return 0;
}

/* Only a choice recorded after the child existed, by its source, for this action. */
int
bridge_approval_matches(const struct trun *self, const struct trun *child, const char *action)
{
	struct json_object *a = schema_child(child->tr_rec, "approval");
	const char *act = schema_string(a, "action"), *by = schema_string(a, "by_run");

	return a != NULL && act != NULL && by != NULL && strcmp(act, action) == 0 &&
	    strcmp(by, self->tr_id) == 0 &&
	    schema_int(a, "recorded_ms", 0) >= child->tr_created_ms;
}
