/*
 * fuzz_bridgescope.c: gensee-tcloned's bridge scope rules
 * (daemons/tcloned/bridgescope.c) on arbitrary requests. Input: one byte
 * choosing the caller among a fixed family of runs, then a frame payload
 * {"method": M, "params": {...}} parsed as the daemon parses frames. Never
 * crashes, and whatever it allows stays inside the rules: the target is
 * the caller or a direct child as the method needs, a merge goes into the
 * caller without --force, and a resolution names the approval it needs.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "daemons/tcloned/tcloned.h"
#include "frame.h"
#include "schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct tcloned td;
static struct trun runs[7];
static int ready;

static void
mk(int i, const char *id, const char *role, const char *source, uid_t uid, const char *name)
{
	struct trun *r = &runs[i];

	snprintf(r->tr_id, sizeof(r->tr_id), "%s", id);
	snprintf(r->tr_role, sizeof(r->tr_role), "%s", role);
	snprintf(r->tr_state, sizeof(r->tr_state), "running");
	snprintf(r->tr_source, sizeof(r->tr_source), "%s", source);
	snprintf(r->tr_name, sizeof(r->tr_name), "%s", name);
	r->tr_uid = uid;
	r->tr_rec = json_object_new_object();
	td.td_runs[td.td_nruns++] = r;
}

static void
die(const char *what)
{
	fprintf(stderr, "bridge scope violated: %s\n", what);
	abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_object *msg = NULL, *params;
	struct bridge_plan bp;
	const char *method, *code = NULL;
	char *why = NULL;

	if (!ready) {
		mk(0, "run_x", "source", "", 2000, "run_f");
		mk(1, "run_s", "source", "", 1000, "src");
		mk(2, "run_f", "fork", "run_s", 1000, "try-0");
		mk(3, "run_g", "fork", "run_f", 1000, "deep");
		mk(4, "run_f2", "fork", "run_s", 1000, "try-1");
		mk(5, "run_o", "source", "", 1000, "other");
		mk(6, "run_of", "fork", "run_o", 1000, "ofork");
		ready = 1;
	}
	if (size < 1 || size > 65536)
		return 0;
	struct trun *self = &runs[data[0] % 7];
	if (frame_parse_payload(data + 1, size - 1, &msg) != FRAME_OK)
		return 0;
	method = schema_string(msg, "method");
	params = schema_child(msg, "params");
	if (method == NULL) {
		json_object_put(msg);
		return 0;
	}
	int rv = bridge_scope(&td, self, self->tr_uid, method, params, &bp, &code, &why);
	if (rv != 0) {
		if (code == NULL || why == NULL)
			die("a refusal without code and reason");
	} else if (strcmp(method, "tclone.list") == 0) {
		if (bp.bp_target != NULL)
			die("list with a target");
	} else {
		const struct trun *t = bp.bp_target;
		int child = bridge_is_child(self, t);
		if (t == NULL || t->tr_uid != self->tr_uid)
			die("no target, or another user's");
		if (strcmp(method, "tclone.diff") == 0 || strcmp(method, "tclone.summary") == 0) {
			if (t != self && !child)
				die("read beyond self and children");
		} else if (strcmp(method, "tclone.fork") == 0 || strcmp(method, "tclone.attach") == 0) {
			if (t != self)
				die("fork/attach of another run");
		} else if (strcmp(method, "tclone.merge") == 0) {
			struct json_object *f = schema_child(params, "force");
			if (!child || bp.bp_into != self || (f != NULL && (!json_object_is_type(f,
			    json_type_boolean) || json_object_get_boolean(f))))
				die("merge outside the rules");
			struct json_object *d = schema_child(params, "dry_run");
			int dry = d != NULL && json_object_is_type(d, json_type_boolean) &&
			    json_object_get_boolean(d);
			if (!dry && (bp.bp_need == NULL || strcmp(bp.bp_need, "merge") != 0))
				die("merge without an approval");
		} else if (strcmp(method, "tclone.switch") == 0 ||
		    strcmp(method, "tclone.discard") == 0) {
			if (!child || bp.bp_need == NULL)
				die("switch/discard outside the rules");
		} else if (strcmp(method, "tclone.compare") == 0 ||
		    strcmp(method, "tclone.approve") == 0 || strcmp(method, "tclone.send") == 0) {
			if (!child)
				die("compare/approve/send beyond the children");
		} else {
			die("a method the bridge does not allow");
		}
	}
	free(why);
	json_object_put(msg);
	return 0;
}
