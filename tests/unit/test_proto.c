/*
 * test_proto.c: request envelope, method table and typed params (proto/).
 */
#include <json-c/json.h>

#include "ids.h"
#include "proto.h"
#include "unit.h"

#define GOOD_ID "op_0123456789abcdef0123456789abcdef"

static struct json_object *
parse(const char *s)
{
	struct json_object *o = json_tokener_parse(s);
	ck_assert_msg(o != NULL, "test JSON does not parse: %s", s);
	return o;
}

/* Parse a request text; return its status and fill code/err/req. */
static int
request(const char *s, struct proto_request *req, const char **code, struct schema_error *err,
    struct json_object **keep)
{
	*keep = parse(s);
	*code = NULL;
	memset(err, 0, sizeof(*err));
	return proto_parse_request(*keep, req, code, err);
}

START_TEST(test_parse_success)
{
	struct proto_request req;
	struct schema_error err;
	struct json_object *msg;
	const char *code;

	ck_assert_int_eq(request("{\"proto\":1,\"id\":7,\"method\":\"operation.create\","
	    "\"params\":{\"pid\":123,\"start_time_ticks\":456,\"timeout_seconds\":60}}",
	    &req, &code, &err, &msg), 0);
	ck_assert_int_eq(req.pr_id, 7);
	ck_assert_ptr_nonnull(req.pr_info);
	ck_assert_int_eq(req.pr_info->pmi_method, PM_OPERATION_CREATE);
	ck_assert_ptr_nonnull(req.pr_params);

	struct proto_operation_create oc;
	ck_assert_int_eq(proto_parse_operation_create(req.pr_params, &oc, &err), 0);
	ck_assert_int_eq(oc.oc_pid, 123);
	ck_assert_uint_eq(oc.oc_start_ticks, 456);
	ck_assert_int_eq(oc.oc_timeout_seconds, 60);
	ck_assert_str_eq(oc.oc_action_class, "local_process");
	ck_assert_str_eq(oc.oc_source_run, "gensee run");
	json_object_put(msg);

	/* No params at all: an empty object stands in, never NULL. */
	ck_assert_int_eq(request("{\"proto\":1,\"id\":0,\"method\":\"system.status\"}",
	    &req, &code, &err, &msg), 0);
	ck_assert_int_eq(req.pr_id, 0);
	ck_assert_int_eq(req.pr_info->pmi_method, PM_SYSTEM_STATUS);
	ck_assert_ptr_nonnull(req.pr_params);
	ck_assert_int_eq(json_object_object_length(req.pr_params), 0);
	json_object_put(msg);

	/* The largest id a JSON double holds exactly. */
	ck_assert_int_eq(request("{\"proto\":1,\"id\":9007199254740992,\"method\":"
	    "\"operation.list\",\"params\":{\"limit\":10000}}", &req, &code, &err, &msg), 0);
	ck_assert_int_eq(req.pr_id, (int64_t)1 << 53);
	json_object_put(msg);
}
END_TEST

struct ecase {
	const char *json;
	const char *code;
	int64_t id;	   /* pr_id expected in the error reply */
	const char *field; /* err.se_field, NULL: not checked */
};

static const struct ecase ecases[] = {
	/* invalid_request: the envelope itself */
	{ "[1]", PE_INVALID_REQUEST, -1, NULL },
	{ "{\"id\":1,\"method\":\"system.status\"}", PE_INVALID_REQUEST, 1, "proto" },
	{ "{\"proto\":1,\"method\":\"system.status\"}", PE_INVALID_REQUEST, -1, "id" },
	{ "{\"proto\":1,\"id\":3}", PE_INVALID_REQUEST, 3, "method" },
	{ "{\"proto\":1,\"id\":-1,\"method\":\"system.status\"}", PE_INVALID_REQUEST, -1, "id" },
	{ "{\"proto\":1,\"id\":9007199254740993,\"method\":\"system.status\"}",
	    PE_INVALID_REQUEST, -1, "id" },
	{ "{\"proto\":1,\"id\":\"4\",\"method\":\"system.status\"}", PE_INVALID_REQUEST, -1, "id" },
	{ "{\"proto\":\"1\",\"id\":4,\"method\":\"system.status\"}", PE_INVALID_REQUEST, 4, "proto" },
	{ "{\"proto\":1,\"id\":4,\"method\":\"\"}", PE_INVALID_REQUEST, 4, "method" },
	{ "{\"proto\":1,\"id\":4,\"method\":\"system.status\",\"extra\":1}",
	    PE_INVALID_REQUEST, 4, "extra" },
	{ "{\"proto\":1,\"id\":4,\"method\":\"system.status\",\"params\":[]}",
	    PE_INVALID_REQUEST, 4, "params" },
	{ "{\"proto\":1,\"id\":4,\"method\":\"system.status\",\"params\":null}",
	    PE_INVALID_REQUEST, 4, "params" },
	{ "{\"proto\":1,\"id\":4,\"method\":\"system\\u0000status\"}", PE_INVALID_REQUEST, 4,
	    "method" },
	/* unsupported_proto */
	{ "{\"proto\":2,\"id\":5,\"method\":\"system.status\"}", PE_UNSUPPORTED_PROTO, 5, "proto" },
	{ "{\"proto\":0,\"id\":5,\"method\":\"system.status\"}", PE_UNSUPPORTED_PROTO, 5, "proto" },
	/* unknown_method */
	{ "{\"proto\":1,\"id\":9,\"method\":\"system.reboot\"}", PE_UNKNOWN_METHOD, 9, "method" },
	{ "{\"proto\":1,\"id\":9,\"method\":\"System.Status\"}", PE_UNKNOWN_METHOD, 9, "method" },
	{ "{\"proto\":1,\"id\":9,\"method\":\"system.status \"}", PE_UNKNOWN_METHOD, 9, "method" },
	/* invalid_params */
	{ "{\"proto\":1,\"id\":11,\"method\":\"operation.create\",\"params\":{}}",
	    PE_INVALID_PARAMS, 11, "pid" },
	{ "{\"proto\":1,\"id\":11,\"method\":\"operation.create\",\"params\":"
	  "{\"pid\":0,\"start_time_ticks\":1}}", PE_INVALID_PARAMS, 11, "pid" },
	{ "{\"proto\":1,\"id\":11,\"method\":\"operation.create\",\"params\":"
	  "{\"pid\":1,\"start_time_ticks\":1,\"timeout_seconds\":604801}}",
	    PE_INVALID_PARAMS, 11, "timeout_seconds" },
	{ "{\"proto\":1,\"id\":11,\"method\":\"operation.create\",\"params\":"
	  "{\"pid\":1,\"start_time_ticks\":1,\"uid\":0}}", PE_INVALID_PARAMS, 11, "uid" },
	{ "{\"proto\":1,\"id\":12,\"method\":\"system.status\",\"params\":{\"x\":1}}",
	    PE_INVALID_PARAMS, 12, "x" },
	{ "{\"proto\":1,\"id\":12,\"method\":\"system.shutdown\",\"params\":{\"\":true}}",
	    PE_INVALID_PARAMS, 12, "" },
	{ "{\"proto\":1,\"id\":13,\"method\":\"operation.end\",\"params\":"
	  "{\"operation_id\":\"" GOOD_ID "\",\"exit_code\":256}}", PE_INVALID_PARAMS, 13,
	    "exit_code" },
	{ "{\"proto\":1,\"id\":13,\"method\":\"operation.end\",\"params\":"
	  "{\"operation_id\":\"" GOOD_ID "\",\"exit_signal\":0}}", PE_INVALID_PARAMS, 13,
	    "exit_signal" },
	{ "{\"proto\":1,\"id\":14,\"method\":\"operation.inspect\",\"params\":"
	  "{\"operation_id\":\"op_0123456789abcdef0123456789abcdef0123456789abcdef"
	  "0123456789abcdef0123456\"}}", /* 73 characters: longer than any id */
	    PE_INVALID_PARAMS, 14, "operation_id" },
	{ "{\"proto\":1,\"id\":15,\"method\":\"operation.list\",\"params\":{\"limit\":0}}",
	    PE_INVALID_PARAMS, 15, "limit" },
};

START_TEST(test_parse_error)
{
	const struct ecase *c = &ecases[_i];
	struct proto_request req;
	struct schema_error err;
	struct json_object *msg;
	const char *code;

	ck_assert_msg(request(c->json, &req, &code, &err, &msg) == -1, "case %d accepted: %s", _i,
	    c->json);
	ck_assert_ptr_nonnull(code);
	ck_assert_msg(strcmp(code, c->code) == 0, "case %d %s: code %s, expected %s", _i, c->json,
	    code, c->code);
	ck_assert_msg(req.pr_id == c->id, "case %d: pr_id %lld, expected %lld", _i,
	    (long long)req.pr_id, (long long)c->id);
	if (c->field != NULL)
		ck_assert_str_eq(err.se_field, c->field);
	ck_assert_uint_gt(strlen(err.se_message), 0);
	json_object_put(msg);
}
END_TEST

START_TEST(test_access_table)
{
	const struct proto_method_info *shut = proto_method_lookup("system.shutdown");
	const struct proto_method_info *st = proto_method_lookup("system.status");

	ck_assert_ptr_nonnull(shut);
	ck_assert_ptr_nonnull(st);
	/* shutdown: never on client.sock, not even for root; root only on boundary.sock */
	ck_assert_int_eq(proto_authorized(shut, PS_CLIENT, 0), 0);
	ck_assert_int_eq(proto_authorized(shut, PS_CLIENT, 1000), 0);
	ck_assert_int_eq(proto_authorized(shut, PS_BOUNDARY, 1000), 0);
	ck_assert_int_eq(proto_authorized(shut, PS_BOUNDARY, 1), 0);
	ck_assert_int_eq(proto_authorized(shut, PS_BOUNDARY, 65534), 0);
	ck_assert_int_eq(proto_authorized(shut, PS_BOUNDARY, 0), 1);

	const char *any_user[] = { "system.status", "operation.create", "operation.inspect",
		"operation.list", "operation.end" };
	for (size_t i = 0; i < nitems(any_user); i++) {
		const struct proto_method_info *m = proto_method_lookup(any_user[i]);
		ck_assert_msg(m != NULL, "%s missing from the table", any_user[i]);
		ck_assert_int_eq(proto_authorized(m, PS_CLIENT, 1000), 1);
		ck_assert_int_eq(proto_authorized(m, PS_CLIENT, 0), 1);
		ck_assert_int_eq(proto_authorized(m, PS_BOUNDARY, 0), 1);
		/* mediator.sock serves the mediator's methods and nothing else. */
		ck_assert_int_eq(proto_authorized(m, PS_MEDIATOR, 999), 0);
	}
	/* The mediator's methods: mediator.sock only, not even root elsewhere. */
	const char *med[] = { "mediator.config", "mediator.authorize", "mediator.dns",
	    "mediator.connect", "mediator.refused" };
	for (size_t i = 0; i < nitems(med); i++) {
		const struct proto_method_info *m = proto_method_lookup(med[i]);
		ck_assert_ptr_nonnull(m);
		ck_assert_int_eq(proto_authorized(m, PS_BOUNDARY, 0), 0);
		ck_assert_int_eq(proto_authorized(m, PS_CLIENT, 0), 0);
		ck_assert_int_eq(proto_authorized(m, PS_CLIENT, 999), 0);
		ck_assert_int_eq(proto_authorized(m, PS_SUPERVISOR, 0), 0);
		ck_assert_int_eq(proto_authorized(m, PS_MEDIATOR, 999), 1);
	}
}
END_TEST

/* The access table row by row: a change here is a security change. */
START_TEST(test_access_rows)
{
	const struct {
		const char *name;
		int sockets;
		enum proto_access access;
	} rows[] = {
		{ "system.status", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER },
		{ "system.shutdown", PS_BOUNDARY, PA_ROOT },
		{ "operation.create", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER },
		{ "operation.inspect", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER },
		{ "operation.list", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER },
		{ "operation.end", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER },
		{ "operation.evidence", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER },
		{ "operation.observe", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER },
		{ "network.inspect", PS_BOUNDARY | PS_CLIENT | PS_SUPERVISOR, PA_ANY_USER },
		{ "network.event", PS_BOUNDARY | PS_CLIENT | PS_SUPERVISOR, PA_ANY_USER },
		{ "network.revoke", PS_BOUNDARY | PS_CLIENT | PS_SUPERVISOR, PA_ANY_USER },
		{ "network.start", PS_BOUNDARY, PA_ROOT },
		{ "network.reinstall", PS_BOUNDARY, PA_ROOT },
		{ "fault.submit", PS_BOUNDARY | PS_CLIENT | PS_SUPERVISOR, PA_ANY_USER },
		{ "sensor.register", PS_BOUNDARY, PA_ROOT },
		{ "sensor.ack", PS_BOUNDARY, PA_ROOT },
		{ "sensor.loss", PS_BOUNDARY, PA_ROOT },
		{ "lineage.report", PS_BOUNDARY, PA_ROOT },
		{ "file.decision", PS_BOUNDARY, PA_ROOT },
		{ "sensor.heartbeat", PS_BOUNDARY, PA_ROOT },
		{ "operation.prune", PS_BOUNDARY, PA_ROOT },
		{ "mediator.config", PS_MEDIATOR, PA_MEDIATOR },
		{ "mediator.authorize", PS_MEDIATOR, PA_MEDIATOR },
		{ "mediator.dns", PS_MEDIATOR, PA_MEDIATOR },
		{ "mediator.connect", PS_MEDIATOR, PA_MEDIATOR },
		{ "mediator.complete", PS_MEDIATOR, PA_MEDIATOR },
		{ "mediator.refused", PS_MEDIATOR, PA_MEDIATOR },
		{ "transaction.begin", PS_BOUNDARY | PS_SUPERVISOR, PA_ROOT_ANY },
		{ "transaction.activate", PS_BOUNDARY | PS_SUPERVISOR, PA_ROOT_ANY },
		{ "transaction.end", PS_BOUNDARY | PS_SUPERVISOR, PA_ROOT_ANY },
		{ "transaction.revoke", PS_BOUNDARY | PS_SUPERVISOR, PA_ROOT_ANY },
		{ "transaction.start", PS_BOUNDARY | PS_SUPERVISOR, PA_ROOT_ANY },
		{ "network.grant_http", PS_BOUNDARY | PS_SUPERVISOR, PA_ROOT_ANY },
		{ "network.revoke_http", PS_BOUNDARY | PS_CLIENT | PS_SUPERVISOR, PA_ANY_USER },
		{ "network.commit_token", PS_BOUNDARY | PS_SUPERVISOR, PA_ROOT_ANY },
	};

	ck_assert_int_eq(nitems(rows), PM__COUNT);
	for (size_t i = 0; i < nitems(rows); i++) {
		const struct proto_method_info *m = proto_method_lookup(rows[i].name);
		ck_assert_msg(m != NULL, "%s missing", rows[i].name);
		ck_assert_msg(m->pmi_sockets == rows[i].sockets, "%s sockets 0x%x", rows[i].name,
		    m->pmi_sockets);
		ck_assert_msg(m->pmi_access == rows[i].access, "%s access %d", rows[i].name,
		    (int)m->pmi_access);
		/* And the checker honours the socket mask on its own. */
		if (!(rows[i].sockets & PS_CLIENT))
			ck_assert_int_eq(proto_authorized(m, PS_CLIENT, 0), 0);
		/* Root on any socket of its mask, and no other uid anywhere. */
		if (rows[i].access == PA_ROOT_ANY) {
			ck_assert_int_eq(proto_authorized(m, PS_BOUNDARY, 0), 1);
			ck_assert_int_eq(proto_authorized(m, PS_SUPERVISOR, 0), 1);
			ck_assert_int_eq(proto_authorized(m, PS_BOUNDARY, 1000), 0);
			ck_assert_int_eq(proto_authorized(m, PS_MEDIATOR, 0), 0);
			ck_assert_int_eq(proto_authorized(m, PS_MEDIATOR, 999), 0);
		}
	}
}
END_TEST

/*
 * The in-operation column row by row: what the supervised tree may ask
 * for. Only reads and reports about its own operation; every root-only
 * method and everything that ends, observes or revokes is refused.
 */
START_TEST(test_in_op_rows)
{
	const struct {
		const char *name;
		enum proto_in_op in_op;
		const char *code;
	} rows[] = {
		{ "system.status", PIO_ANY, NULL },
		{ "system.shutdown", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "operation.create", PIO_DENY, PE_CONFLICT },
		{ "operation.inspect", PIO_OWN, NULL },
		{ "operation.list", PIO_OWN, NULL },
		{ "operation.end", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "operation.evidence", PIO_OWN, NULL },
		{ "operation.observe", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "network.inspect", PIO_OWN, NULL },
		{ "network.event", PIO_OWN, NULL },
		{ "network.revoke", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "network.start", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "network.reinstall", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "fault.submit", PIO_OWN, NULL },
		{ "sensor.register", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "sensor.ack", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "sensor.loss", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "lineage.report", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "file.decision", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "sensor.heartbeat", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "operation.prune", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "mediator.config", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "mediator.authorize", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "mediator.dns", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "mediator.connect", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "mediator.complete", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "mediator.refused", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "transaction.begin", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "transaction.activate", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "transaction.end", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "transaction.revoke", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "transaction.start", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "network.grant_http", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "network.revoke_http", PIO_DENY, PE_NOT_AUTHORIZED },
		{ "network.commit_token", PIO_DENY, PE_NOT_AUTHORIZED },
	};

	ck_assert_int_eq(nitems(rows), PM__COUNT);
	for (size_t i = 0; i < nitems(rows); i++) {
		const struct proto_method_info *m = proto_method_lookup(rows[i].name);
		const char *code = NULL;
		ck_assert_msg(m != NULL, "%s missing", rows[i].name);
		ck_assert_msg(m->pmi_in_op == rows[i].in_op, "%s in_op %d", rows[i].name,
		    (int)m->pmi_in_op);
		if (rows[i].code == NULL) {
			ck_assert_int_eq(proto_in_op_allowed(m, &code), 0);
		} else {
			ck_assert_int_eq(proto_in_op_allowed(m, &code), -1);
			ck_assert_str_eq(code, rows[i].code);
		}
		/* A root-only method is never open inside an operation. */
		if (m->pmi_access == PA_ROOT)
			ck_assert_int_eq(m->pmi_in_op, PIO_DENY);
	}
}
END_TEST

START_TEST(test_method_table)
{
	/* Every enum value has exactly its own row, and names round-trip. */
	for (int m = 0; m < PM__COUNT; m++) {
		const struct proto_method_info *i = proto_method_info((enum proto_method)m);
		ck_assert_ptr_nonnull(i);
		ck_assert_int_eq(i->pmi_method, m);
		ck_assert_ptr_eq(proto_method_lookup(i->pmi_name), i);
		ck_assert_int_ne(i->pmi_sockets, 0);
		ck_assert_int_eq(i->pmi_sockets & ~(PS_BOUNDARY | PS_CLIENT | PS_SUPERVISOR | PS_MEDIATOR), 0);
		/* supervisor.sock is root's: no method is open to others there. */
		ck_assert_int_eq(proto_authorized(i, PS_SUPERVISOR, 1000), 0);
		if (i->pmi_nparams > 0)
			ck_assert_ptr_nonnull(i->pmi_params);
	}
	ck_assert_ptr_null(proto_method_info(PM__COUNT));
	ck_assert_ptr_null(proto_method_lookup("nope"));
	ck_assert_ptr_null(proto_method_lookup(""));
	ck_assert_ptr_null(proto_method_lookup("system.status."));
}
END_TEST

/*
 * Validate params through the envelope, then the typed parser. out borrows
 * strings from the message, which stays alive until the next call.
 */
static struct json_object *end_msg;

static int
end_params(const char *params, struct proto_operation_end *out, struct schema_error *err)
{
	char buf[512];
	struct proto_request req;
	const char *code;

	json_object_put(end_msg);
	snprintf(buf, sizeof(buf), "{\"proto\":1,\"id\":1,\"method\":\"operation.end\","
	    "\"params\":%s}", params);
	ck_assert_msg(request(buf, &req, &code, err, &end_msg) == 0, "envelope refused: %s",
	    err->se_message);
	return proto_parse_operation_end(req.pr_params, out, err);
}

START_TEST(test_operation_end)
{
	struct proto_operation_end e;
	struct schema_error err;

	ck_assert_int_eq(end_params("{\"operation_id\":\"" GOOD_ID "\"}", &e, &err), 0);
	ck_assert_str_eq(e.oe_id, GOOD_ID);
	ck_assert_int_eq(e.oe_has_exit, 0);
	ck_assert_int_eq(e.oe_kill, 0);

	ck_assert_int_eq(end_params("{\"operation_id\":\"" GOOD_ID "\",\"exit_code\":3,"
	    "\"kill\":true}", &e, &err), 0);
	ck_assert_int_eq(e.oe_has_exit, 1);
	ck_assert_int_eq(e.oe_exit_code, 3);
	ck_assert_int_eq(e.oe_exit_signal, 0);
	ck_assert_int_eq(e.oe_kill, 1);

	ck_assert_int_eq(end_params("{\"operation_id\":\"" GOOD_ID "\",\"exit_code\":0}", &e,
	    &err), 0);
	ck_assert_int_eq(e.oe_has_exit, 1);
	ck_assert_int_eq(e.oe_exit_code, 0);

	ck_assert_int_eq(end_params("{\"operation_id\":\"" GOOD_ID "\",\"exit_signal\":9}", &e,
	    &err), 0);
	ck_assert_int_eq(e.oe_has_exit, 1);
	ck_assert_int_eq(e.oe_exit_code, -1);
	ck_assert_int_eq(e.oe_exit_signal, 9);

	/* exit_code and exit_signal are exclusive */
	ck_assert_int_eq(end_params("{\"operation_id\":\"" GOOD_ID "\",\"exit_code\":1,"
	    "\"exit_signal\":9}", &e, &err), -1);
	ck_assert_str_eq(err.se_field, "exit_signal");
	ck_assert_str_eq(err.se_code, SCHEMA_E_RANGE);
	json_object_put(end_msg);
	end_msg = NULL;
}
END_TEST

START_TEST(test_operation_end_malformed_id)
{
	/*
	 * Random ids are op_ + 32 hex; administrators may name operations
	 * op_ + [a-z0-9_-] in root-owned configs. Nothing else is an id.
	 */
	const char *bad[] = {
		"op_",						 /* empty name */
		"op_0123456789ABCDEF0123456789abcdef",	 /* uppercase */
		"xp_0123456789abcdef0123456789abcdef",	 /* prefix */
		"0123456789abcdef0123456789abcdef",	 /* no prefix */
		"op_../0123456789abcdef0123456789abc",	 /* traversal */
		"op_0123456789abcdef/123456789abcdef",	 /* slash */
		"op_0123456789abcdef 123456789abcdef",	 /* space */
		"op_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abc", /* 61 */
		"../../etc/passwd",
	};
	struct proto_operation_end e;
	struct schema_error err;

	for (size_t i = 0; i < nitems(bad); i++) {
		char params[128];
		snprintf(params, sizeof(params), "{\"operation_id\":\"%s\"}", bad[i]);
		memset(&err, 0, sizeof(err));
		ck_assert_msg(end_params(params, &e, &err) == -1, "%s accepted", bad[i]);
		ck_assert_str_eq(err.se_field, "operation_id");
		ck_assert_str_eq(err.se_code, SCHEMA_E_STRING);
	}
	json_object_put(end_msg);
	end_msg = NULL;
}
END_TEST

START_TEST(test_builders)
{
	struct json_object *p = json_object_new_object(), *m, *v, *e;
	struct proto_request req;
	struct schema_error err;
	const char *code;

	json_object_object_add(p, "operation_id", json_object_new_string(GOOD_ID));
	m = proto_request_new(77, "operation.inspect", p);
	ck_assert_int_eq(proto_parse_request(m, &req, &code, &err), 0);
	ck_assert_int_eq(req.pr_id, 77);
	ck_assert_int_eq(req.pr_info->pmi_method, PM_OPERATION_INSPECT);
	json_object_put(m);

	m = proto_result_new(5, NULL);
	ck_assert(json_object_object_get_ex(m, "proto", &v));
	ck_assert_int_eq(json_object_get_int(v), PROTO_VERSION);
	ck_assert(json_object_object_get_ex(m, "id", &v));
	ck_assert_int_eq(json_object_get_int64(v), 5);
	ck_assert(json_object_object_get_ex(m, "result", &v));
	ck_assert(json_object_is_type(v, json_type_object));
	json_object_put(m);

	/* An error to an unreadable request carries "id": null. */
	m = proto_error_new(-1, PE_INVALID_REQUEST, NULL);
	ck_assert(json_object_object_get_ex(m, "id", &v));
	ck_assert_ptr_null(v);
	ck_assert(json_object_object_get_ex(m, "error", &e));
	ck_assert(json_object_object_get_ex(e, "code", &v));
	ck_assert_str_eq(json_object_get_string(v), PE_INVALID_REQUEST);
	ck_assert(json_object_object_get_ex(e, "message", &v));
	ck_assert_str_eq(json_object_get_string(v), PE_INVALID_REQUEST);
	json_object_put(m);

	m = proto_event_new("operation.ended", NULL);
	ck_assert(json_object_object_get_ex(m, "event", &v));
	ck_assert_str_eq(json_object_get_string(v), "operation.ended");
	ck_assert(json_object_object_get_ex(m, "params", &v));
	ck_assert(json_object_is_type(v, json_type_object));
	json_object_put(m);
}
END_TEST

static Suite *
proto_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("request");

	tcase_add_test(tc, test_parse_success);
	tcase_add_loop_test(tc, test_parse_error, 0, (int)nitems(ecases));
	tcase_add_test(tc, test_builders);
	suite_add_tcase(s, tc);

	tc = tcase_create("access");
	tcase_add_test(tc, test_access_table);
	tcase_add_test(tc, test_access_rows);
	tcase_add_test(tc, test_in_op_rows);
	tcase_add_test(tc, test_method_table);
	suite_add_tcase(s, tc);

	tc = tcase_create("operation_end");
	tcase_add_test(tc, test_operation_end);
	tcase_add_test(tc, test_operation_end_malformed_id);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(proto_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
