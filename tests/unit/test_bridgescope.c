/*
 * test_bridgescope.c: what a request through a tclone run's control bridge
 * may do (daemons/tcloned/bridgescope.c, compiled in): itself and its
 * direct children only, per method, and which approval it needs.
 *
 * The family: S (source of uid 1000) -> F (fork) -> G (F's fork), F2
 * (S's second fork), O (another source) -> OF; X: uid 2000's source,
 * named like F's id (another user's run does not exist for the caller).
 */
#include <string.h>

#include <json-c/json.h>

#include "daemons/tcloned/tcloned.h"
#include "frame.h"
#include "proto.h"
#include "unit.h"

static struct tcloned td;
static struct trun runs[7];
enum { S, F, G, F2, O, OF, X };

static void
mk(int i, const char *id, const char *role, const char *source, uid_t uid, const char *name)
{
	struct trun *r = &runs[i];

	memset(r, 0, sizeof(*r));
	snprintf(r->tr_id, sizeof(r->tr_id), "%s", id);
	snprintf(r->tr_role, sizeof(r->tr_role), "%s", role);
	snprintf(r->tr_state, sizeof(r->tr_state), "running");
	snprintf(r->tr_source, sizeof(r->tr_source), "%s", source);
	snprintf(r->tr_name, sizeof(r->tr_name), "%s", name);
	r->tr_uid = uid;
	r->tr_created_ms = 1000;
	r->tr_rec = json_object_new_object();
	td.td_runs[td.td_nruns++] = r;
}

static void
family(void)
{
	memset(&td, 0, sizeof(td));
	/* X first: a lookup that ignored the uid would find it before F. */
	mk(X, "run_x", "source", "", 2000, "run_f");
	mk(S, "run_s", "source", "", 1000, "src");
	mk(F, "run_f", "fork", "run_s", 1000, "try-0");
	mk(G, "run_g", "fork", "run_f", 1000, "deep");
	mk(F2, "run_f2", "fork", "run_s", 1000, "try-1");
	mk(O, "run_o", "source", "", 1000, "other");
	mk(OF, "run_of", "fork", "run_o", 1000, "ofork");
}

/* Ask as run self: returns the code ("" when allowed) and fills *bp. */
static const char *
ask(int self, const char *method, const char *params, struct bridge_plan *bp)
{
	struct json_object *p = NULL;
	const char *code = NULL;
	char *why = NULL;
	static char out[64];

	ck_assert_int_eq(frame_parse_payload((const uint8_t *)params, strlen(params), &p), FRAME_OK);
	int rv = bridge_scope(&td, &runs[self], runs[self].tr_uid, method, p, bp, &code, &why);
	snprintf(out, sizeof(out), "%s", rv == 0 ? "" : code);
	if (rv != 0)
		ck_assert_msg(why != NULL && code != NULL, "a refusal without its reason");
	free(why);
	json_object_put(p);
	return out;
}

START_TEST(test_reads_self_and_children_only)
{
	struct bridge_plan bp;

	family();
	ck_assert_str_eq(ask(S, "tclone.list", "{}", &bp), "");
	ck_assert_str_eq(ask(S, "tclone.summary", "{\"run_id\":\"run_f\"}", &bp), "");
	ck_assert_ptr_eq(bp.bp_target, &runs[F]);
	ck_assert_str_eq(ask(S, "tclone.diff", "{\"run_id\":\"try-1\"}", &bp), "");
	ck_assert_ptr_eq(bp.bp_target, &runs[F2]);
	ck_assert_str_eq(ask(S, "tclone.diff", "{\"run_id\":\"run_s\"}", &bp), "");
	/* grandchild, another source, its fork, the parent (from F), a sibling (from F) */
	ck_assert_str_eq(ask(S, "tclone.summary", "{\"run_id\":\"run_g\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(S, "tclone.summary", "{\"run_id\":\"run_o\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(S, "tclone.diff", "{\"run_id\":\"run_of\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(F, "tclone.summary", "{\"run_id\":\"run_s\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(F, "tclone.summary", "{\"run_id\":\"run_f2\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(F, "tclone.summary", "{\"run_id\":\"run_g\"}", &bp), "");
	ck_assert_str_eq(ask(S, "tclone.summary", "{\"run_id\":\"nope\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(S, "tclone.compare", "{\"run_id\":\"run_f\"}", &bp), "");
	ck_assert_str_eq(ask(S, "tclone.compare", "{\"run_id\":\"run_s\"}", &bp), TE_BRIDGE_SCOPE);
}
END_TEST

START_TEST(test_other_users_run_by_name)
{
	struct bridge_plan bp;

	family();
	/* uid 2000's run is named "run_f": for uid 1000 that name is its own F. */
	ck_assert_str_eq(ask(S, "tclone.summary", "{\"run_id\":\"run_f\"}", &bp), "");
	ck_assert_ptr_eq(bp.bp_target, &runs[F]);
	ck_assert_str_eq(ask(S, "tclone.summary", "{\"run_id\":\"run_x\"}", &bp), TE_BRIDGE_SCOPE);
}
END_TEST

START_TEST(test_fork_exec_only_itself)
{
	struct bridge_plan bp;

	family();
	ck_assert_str_eq(ask(S, "tclone.fork", "{\"run_id\":\"run_s\",\"copies\":2}", &bp), "");
	ck_assert_str_eq(ask(F, "tclone.fork", "{\"run_id\":\"run_f\"}", &bp), "");
	ck_assert_str_eq(ask(S, "tclone.fork", "{\"run_id\":\"run_f\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(S, "tclone.fork", "{\"run_id\":\"run_o\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(S, "tclone.attach", "{\"run_id\":\"src\"}", &bp), "");
	ck_assert_str_eq(ask(S, "tclone.attach", "{\"run_id\":\"run_f\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(F, "tclone.attach", "{\"run_id\":\"run_s\"}", &bp), TE_BRIDGE_SCOPE);
}
END_TEST

START_TEST(test_resolutions_need_approval)
{
	struct bridge_plan bp;

	family();
	ck_assert_str_eq(ask(S, "tclone.merge", "{\"fork\":\"run_f\",\"into\":\"run_s\","
	    "\"scope\":\"filesystem\"}", &bp), "");
	ck_assert_str_eq(bp.bp_need, "merge");
	ck_assert_ptr_eq(bp.bp_target, &runs[F]);
	ck_assert_str_eq(ask(S, "tclone.merge", "{\"fork\":\"run_f\",\"into\":\"run_s\","
	    "\"scope\":\"git\",\"dry_run\":true}", &bp), "");
	ck_assert_ptr_null(bp.bp_need);
	ck_assert_str_eq(ask(S, "tclone.merge", "{\"fork\":\"run_f\",\"into\":\"run_s\","
	    "\"scope\":\"git\",\"dry_run\":\"yes\"}", &bp), "");
	ck_assert_str_eq(bp.bp_need, "merge");
	ck_assert_str_eq(ask(S, "tclone.merge", "{\"fork\":\"run_f\",\"into\":\"run_s\","
	    "\"scope\":\"git\",\"force\":true}", &bp), PE_NOT_AUTHORIZED);
	ck_assert_str_eq(ask(S, "tclone.merge", "{\"fork\":\"run_f\",\"into\":\"run_s\","
	    "\"scope\":\"git\",\"force\":0}", &bp), PE_NOT_AUTHORIZED);
	/* into another run, a grandchild, a child of another source, the parent */
	ck_assert_str_eq(ask(S, "tclone.merge", "{\"fork\":\"run_f\",\"into\":\"run_o\","
	    "\"scope\":\"git\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(S, "tclone.merge", "{\"fork\":\"run_g\",\"into\":\"run_s\","
	    "\"scope\":\"git\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(S, "tclone.merge", "{\"fork\":\"run_of\",\"into\":\"run_s\","
	    "\"scope\":\"git\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(F, "tclone.merge", "{\"fork\":\"run_f\",\"into\":\"run_s\","
	    "\"scope\":\"git\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(S, "tclone.switch", "{\"run_id\":\"run_f\"}", &bp), "");
	ck_assert_str_eq(bp.bp_need, "promote");
	ck_assert_str_eq(ask(S, "tclone.discard", "{\"run_id\":\"run_f2\"}", &bp), "");
	ck_assert_str_eq(bp.bp_need, "discard");
	ck_assert_str_eq(ask(S, "tclone.discard", "{\"run_id\":\"run_s\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(F, "tclone.discard", "{\"run_id\":\"run_s\"}", &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(S, "tclone.switch", "{\"run_id\":\"run_of\"}", &bp), TE_BRIDGE_SCOPE);
}
END_TEST

START_TEST(test_host_only_methods)
{
	struct bridge_plan bp;
	const char *m[] = { "tclone.delete", "tclone.keep", "tclone.choose", "tclone.start",
		"tclone.status", "operation.create", "" };

	family();
	for (size_t i = 0; i < nitems(m); i++)
		ck_assert_str_eq(ask(S, m[i], "{\"run_id\":\"run_f\"}", &bp), PE_NOT_AUTHORIZED);
	ck_assert_str_eq(ask(S, "tclone.delete", "{\"all\":true}", &bp), PE_NOT_AUTHORIZED);
}
END_TEST

START_TEST(test_approve_and_send)
{
	struct bridge_plan bp;

	family();
	ck_assert_str_eq(ask(S, "tclone.approve", "{\"run_id\":\"run_f\",\"action\":\"merge\"}",
	    &bp), "");
	ck_assert(bp.bp_local && bp.bp_target == &runs[F]);
	ck_assert_str_eq(ask(S, "tclone.approve", "{\"run_id\":\"run_f\",\"action\":\"delete\"}",
	    &bp), PE_INVALID_PARAMS);
	ck_assert_str_eq(ask(S, "tclone.approve", "{\"run_id\":\"run_g\",\"action\":\"merge\"}",
	    &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(F, "tclone.approve", "{\"run_id\":\"run_s\",\"action\":\"merge\"}",
	    &bp), TE_BRIDGE_SCOPE);
	ck_assert_str_eq(ask(S, "tclone.approve", "{\"run_id\":\"run_f\",\"action\":\"merge\","
	    "\"x\":1}", &bp), PE_INVALID_PARAMS);
	ck_assert_str_eq(ask(S, "tclone.send", "{\"run_id\":\"run_f\",\"text\":\"npm test\"}", &bp),
	    "");
	ck_assert_str_eq(ask(S, "tclone.send", "{\"run_id\":\"run_f\",\"text\":\"a\\u001bb\"}",
	    &bp), PE_INVALID_PARAMS);
	ck_assert_str_eq(ask(S, "tclone.send", "{\"run_id\":\"run_f\",\"text\":\"a\\nb\"}", &bp),
	    PE_INVALID_PARAMS);
	ck_assert_str_eq(ask(S, "tclone.send", "{\"run_id\":\"run_o\",\"text\":\"x\"}", &bp),
	    TE_BRIDGE_SCOPE);
}
END_TEST

START_TEST(test_approval_matching)
{
	struct json_object *a;

	family();
	ck_assert(!bridge_approval_matches(&runs[S], &runs[F], "merge"));
	a = json_object_new_object();
	json_object_object_add(a, "action", json_object_new_string("merge"));
	json_object_object_add(a, "by_run", json_object_new_string("run_s"));
	json_object_object_add(a, "recorded_ms", json_object_new_int64(2000));
	json_object_object_add(runs[F].tr_rec, "approval", a);
	ck_assert(bridge_approval_matches(&runs[S], &runs[F], "merge"));
	ck_assert(!bridge_approval_matches(&runs[S], &runs[F], "discard"));
	ck_assert(!bridge_approval_matches(&runs[O], &runs[F], "merge"));
	/* Recorded before the child existed: not a choice about it. */
	runs[F].tr_created_ms = 3000;
	ck_assert(!bridge_approval_matches(&runs[S], &runs[F], "merge"));
}
END_TEST

static Suite *
bridgescope_suite(void)
{
	Suite *s = suite_create("bridgescope");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_reads_self_and_children_only);
	tcase_add_test(tc, test_other_users_run_by_name);
	tcase_add_test(tc, test_fork_exec_only_itself);
	tcase_add_test(tc, test_resolutions_need_approval);
	tcase_add_test(tc, test_host_only_methods);
	tcase_add_test(tc, test_approve_and_send);
	tcase_add_test(tc, test_approval_matching);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(bridgescope_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
