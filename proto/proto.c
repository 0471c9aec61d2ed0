/*
 * proto.c: method table, schemas and request parsing.
 */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "ids.h"
#include "proto.h"
#include "util.h"

static const struct schema_field envelope_fields[] = {
	{ "proto", SCHEMA_INT, SCHEMA_REQUIRED, 0, 1000, 0 },
	{ "id", SCHEMA_INT, SCHEMA_REQUIRED, 0, (int64_t)1 << 53, 0 },
	{ "method", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
	{ "params", SCHEMA_OBJECT, 0, 0, 0, 0 },
};

static const struct schema_field no_params[] = {
	{ "", SCHEMA_BOOL, 0, 0, 0, 0 }, /* never read: nparams is 0 (C has no empty arrays) */
};

static const struct schema_field operation_create_params[] = {
	{ "pid", SCHEMA_INT, SCHEMA_REQUIRED, 1, 4194304, 0 },
	{ "start_time_ticks", SCHEMA_INT, 0, 0, INT64_MAX, 0 },
	{ "timeout_seconds", SCHEMA_INT, 0, 0, PROTO_TIMEOUT_MAX, 0 },
	{ "kill_grace_seconds", SCHEMA_INT, 0, 0, PROTO_KILL_GRACE_MAX, 0 },
	{ "action_class", SCHEMA_STRING, 0, 1, 64, 0 },
	{ "source_run", SCHEMA_STRING, 0, 1, 64, 0 },
	{ "network", SCHEMA_OBJECT, 0, 0, 0, 0 },
	{ "network_config", SCHEMA_STRING, 0, 2, 1024, 0 },
	{ "adopt_existing", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "fanotify", SCHEMA_OBJECT, 0, 0, 0, 0 },
	{ "host_controls", SCHEMA_OBJECT, 0, 0, 0, 0 },
	{ "command", SCHEMA_STRING, 0, 1, 4096, 0 },
};

static const struct schema_field sensor_register_params[] = {
	{ "sensors", SCHEMA_STRING_ARRAY, SCHEMA_REQUIRED, 1, 8, 32 },
};

static const struct schema_field sensor_ack_params[] = {
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
	{ "action", SCHEMA_STRING, 0, 1, 16, 0 },
	/* The config was refused (rules it cannot parse, marks it cannot place). */
	{ "error", SCHEMA_STRING, 0, 1, 512, 0 },
};

static const struct schema_field sensor_loss_params[] = {
	{ "sensor", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 32, 0 },
	{ "count", SCHEMA_INT, SCHEMA_REQUIRED, 1, INT64_MAX, 0 },
	{ "detail", SCHEMA_STRING, 0, 0, 256, 0 },
	{ "operation_id", SCHEMA_STRING, 0, 1, 72, 0 },
};

static const struct schema_field lineage_report_params[] = {
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
	{ "events", SCHEMA_ARRAY, SCHEMA_REQUIRED, 1, 4096, 0 },
};

static const struct schema_field file_decision_params[] = {
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
	{ "decisions", SCHEMA_ARRAY, SCHEMA_REQUIRED, 0, 4096, 0 },
	/* decisions sensord answered but could not keep (its backlog was full) */
	{ "dropped", SCHEMA_INT, 0, 0, INT32_MAX, 0 },
};

static const struct schema_field operation_evidence_params[] = {
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
	{ "limit", SCHEMA_INT, 0, 1, 100000, 0 },
};

/* operation_id is optional on supervisor.sock, where the socket names it. */
static const struct schema_field network_inspect_params[] = {
	{ "operation_id", SCHEMA_STRING, 0, 1, 72, 0 },
};

static const struct schema_field network_event_params[] = {
	{ "operation_id", SCHEMA_STRING, 0, 1, 72, 0 },
	{ "event", SCHEMA_OBJECT, SCHEMA_REQUIRED, 0, 0, 0 },
};

static const struct schema_field fault_submit_params[] = {
	{ "operation_id", SCHEMA_STRING, 0, 1, 72, 0 },
	{ "fault", SCHEMA_OBJECT, SCHEMA_REQUIRED, 0, 0, 0 },
};

static const struct schema_field network_revoke_params[] = {
	{ "operation_id", SCHEMA_STRING, 0, 1, 72, 0 },
	{ "lease_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
};

static const struct schema_field network_start_params[] = {
	{ "config_path", SCHEMA_STRING, SCHEMA_REQUIRED, 2, 1024, 0 },
};

static const struct schema_field operation_id_params[] = {
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
};

static const struct schema_field operation_list_params[] = {
	{ "state", SCHEMA_STRING, 0, 1, 32, 0 },
	{ "limit", SCHEMA_INT, 0, 1, 10000, 0 },
};

/* At least one of older_than_seconds and keep (checked by the handler). */
static const struct schema_field operation_prune_params[] = {
	{ "older_than_seconds", SCHEMA_INT, 0, 0, PROTO_PRUNE_AGE_MAX, 0 },
	{ "keep", SCHEMA_INT, 0, 0, PROTO_PRUNE_KEEP_MAX, 0 },
	{ "dry_run", SCHEMA_BOOL, 0, 0, 0, 0 },
};

static const struct schema_field operation_end_params[] = {
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
	{ "exit_code", SCHEMA_INT, 0, 0, 255, 0 },
	{ "exit_signal", SCHEMA_INT, 0, 1, 64, 0 },
	{ "kill", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "grace_seconds", SCHEMA_INT, 0, 0, PROTO_KILL_GRACE_MAX, 0 },
	{ "detach", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "seccomp_denials", SCHEMA_OBJECT, 0, 0, 0, 0 },
};

#define PROTO_MAX_DENIALS 32	/* OPRECORD_MAX_DENIALS */

/* seccomp_denials: at most 32 syscall names (a-z, 0-9, _) with counts of at least 1. */
static int
proto_check_denials(struct json_object *d, struct schema_error *err)
{
	if (json_object_object_length(d) > PROTO_MAX_DENIALS)
		goto bad;
	json_object_object_foreach(d, name, v) {
		size_t n = strlen(name);
		if (n == 0 || n >= 40 || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != n ||
		    !json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1 ||
		    json_object_get_int64(v) > INT32_MAX)
			goto bad;
	}
	return 0;
bad:
	err->se_code = SCHEMA_E_RANGE;
	util_strlcpy(err->se_field, "seccomp_denials", sizeof(err->se_field));
	snprintf(err->se_message, sizeof(err->se_message), "seccomp_denials: at most %d "
	    "syscall names with counts from 1", PROTO_MAX_DENIALS);
	return -1;
}

static const struct schema_field mediator_authorize_params[] = {
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
	{ "client_address", SCHEMA_STRING, SCHEMA_REQUIRED, 2, 64, 0 },
	{ "method", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 16, 0 },
	{ "scheme", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 8, 0 },
	{ "host", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 255, 0 },
	{ "port", SCHEMA_INT, SCHEMA_REQUIRED, 1, 65535, 0 },
	{ "path", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 8194, 0 },
	{ "addresses", SCHEMA_STRING_ARRAY, SCHEMA_REQUIRED, 0, 32, 64 },
	/* the canonical URL boundaryd parses itself (lib/httpurl.c, HTTPURL_MAX_TARGET) */
	{ "url", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 8192, 0 },
	/* a redirect hop (1..; 0 or absent: the client's own target) */
	{ "redirect_hop", SCHEMA_INT, 0, 0, 20, 0 },
	/* proxy.transaction: "resolve" (before DNS: scope only) or "connect" (reserves) */
	{ "stage", SCHEMA_STRING, 0, 6, 7, 0 },
	/* on a redirect hop: the transaction the client's first request was in */
	{ "transaction_id", SCHEMA_STRING, 0, 1, 64, 0 },
	{ "request_bytes", SCHEMA_INT, 0, 0, (int64_t)1 << 40, 0 },
	/* methods other than GET/HEAD: the client's token and the body's SHA-256 (hex) */
	{ "commit_token", SCHEMA_STRING, 0, 1, 11800, 0 },
	{ "body_sha256", SCHEMA_STRING, 0, 64, 64, 0 },
};

/* A DNS answer the mediator's proxy resolved, to be leased (dnslease.c). */
static const struct schema_field mediator_dns_params[] = {
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
	{ "client_address", SCHEMA_STRING, SCHEMA_REQUIRED, 2, 64, 0 },
	{ "qname", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 253, 0 },
	{ "qtype", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 8, 0 },
	{ "rcode", SCHEMA_INT, SCHEMA_REQUIRED, 0, 15, 0 },
	{ "names", SCHEMA_STRING_ARRAY, SCHEMA_REQUIRED, 1, 8, 253 },
	{ "addresses", SCHEMA_STRING_ARRAY, SCHEMA_REQUIRED, 0, 16, 64 },
	{ "ttl", SCHEMA_INT, SCHEMA_REQUIRED, 0, 2147483647, 0 },
};

/* A CONNECT tunnel the mediator would open (dnslease.c). */
static const struct schema_field mediator_connect_params[] = {
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
	{ "host", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 253, 0 },
	{ "port", SCHEMA_INT, SCHEMA_REQUIRED, 1, 65535, 0 },
	{ "addresses", SCHEMA_STRING_ARRAY, SCHEMA_REQUIRED, 0, 16, 64 },
	/* an absolute-form request the egress would forward: its method and URL (no query) */
	{ "method", SCHEMA_STRING, 0, 1, 16, 0 },
	{ "url", SCHEMA_STRING, 0, 8, 2400, 0 },
	/* "name": asked before anything is resolved (addresses empty) */
	{ "stage", SCHEMA_STRING, 0, 4, 4, 0 },
	/* the CNAME chain of a DNS answer: names[0] is host; every later one must be allowed */
	{ "names", SCHEMA_STRING_ARRAY, 0, 1, 16, 253 },
};

static const struct schema_field network_commit_token_params[] = {
	{ "operation_id", SCHEMA_STRING, 0, 1, 72, 0 },
	{ "method", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 16, 0 },
	{ "url", SCHEMA_STRING, SCHEMA_REQUIRED, 8, 8192, 0 },
	{ "body_sha256", SCHEMA_STRING, SCHEMA_REQUIRED, 64, 64, 0 },
	{ "ttl_seconds", SCHEMA_INT, 0, 1, 3600, 0 },
};

static const struct schema_field mediator_complete_params[] = {
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
	{ "transaction_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
	{ "reservation", SCHEMA_INT, SCHEMA_REQUIRED, 1, INT64_MAX, 0 },
	{ "response_bytes", SCHEMA_INT, SCHEMA_REQUIRED, 0, INT64_MAX, 0 },
	{ "upstream_error", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "status", SCHEMA_INT, 0, 0, 599, 0 },
	{ "decision_id", SCHEMA_STRING, 0, 1, 72, 0 },
};

/* A request the mediator refused itself, before anything went upstream: evidence only. */
static const struct schema_field mediator_refused_params[] = {
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
	{ "client_address", SCHEMA_STRING, SCHEMA_REQUIRED, 2, 64, 0 },
	{ "reason", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
	{ "status", SCHEMA_INT, SCHEMA_REQUIRED, 400, 499, 0 },
	{ "method", SCHEMA_STRING, 0, 1, 15, 0 },
};

static const struct schema_field network_grant_http_params[] = {
	{ "operation_id", SCHEMA_STRING, 0, 1, 72, 0 },
	{ "ttl_seconds", SCHEMA_INT, 0, 1, 86400, 0 },
};

/* operation_id is required even on supervisor.sock: naming another one fails closed. */
static const struct schema_field transaction_params[] = {
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
	{ "transaction_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
	{ "effect", SCHEMA_STRING, 0, 1, 64, 0 },
	{ "ttl_seconds", SCHEMA_INT, 0, 1, 86400, 0 },
};

/*
 * The access table. A method absent from a socket's mask is refused there;
 * PA_ANY_USER methods scope what they touch to the caller's uid. The last
 * column is what a caller inside a supervised operation may do (see enum
 * proto_in_op): reads and reports about its own operation, nothing else.
 */
static const struct proto_method_info proto_methods[PM__COUNT] = {
	{ PM_SYSTEM_STATUS, "system.status", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER, no_params, 0,
	    PIO_ANY },
	{ PM_SYSTEM_SHUTDOWN, "system.shutdown", PS_BOUNDARY, PA_ROOT, no_params, 0, PIO_DENY },
	{ PM_OPERATION_CREATE, "operation.create", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER,
	    operation_create_params, nitems(operation_create_params), PIO_DENY },
	{ PM_OPERATION_INSPECT, "operation.inspect", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER,
	    operation_id_params, nitems(operation_id_params), PIO_OWN },
	{ PM_OPERATION_LIST, "operation.list", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER,
	    operation_list_params, nitems(operation_list_params), PIO_OWN },
	{ PM_OPERATION_END, "operation.end", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER,
	    operation_end_params, nitems(operation_end_params), PIO_DENY },
	{ PM_OPERATION_EVIDENCE, "operation.evidence", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER,
	    operation_evidence_params, nitems(operation_evidence_params), PIO_OWN },
	{ PM_OPERATION_OBSERVE, "operation.observe", PS_BOUNDARY | PS_CLIENT, PA_ANY_USER,
	    operation_id_params, nitems(operation_id_params), PIO_DENY },
	{ PM_NETWORK_INSPECT, "network.inspect", PS_BOUNDARY | PS_CLIENT | PS_SUPERVISOR,
	    PA_ANY_USER, network_inspect_params, nitems(network_inspect_params), PIO_OWN },
	{ PM_NETWORK_EVENT, "network.event", PS_BOUNDARY | PS_CLIENT | PS_SUPERVISOR,
	    PA_ANY_USER, network_event_params, nitems(network_event_params), PIO_OWN },
	{ PM_NETWORK_REVOKE, "network.revoke", PS_BOUNDARY | PS_CLIENT | PS_SUPERVISOR,
	    PA_ANY_USER, network_revoke_params, nitems(network_revoke_params), PIO_DENY },
	{ PM_NETWORK_START, "network.start", PS_BOUNDARY, PA_ROOT, network_start_params,
	    nitems(network_start_params), PIO_DENY },
	{ PM_NETWORK_REINSTALL, "network.reinstall", PS_BOUNDARY, PA_ROOT, network_inspect_params,
	    nitems(network_inspect_params), PIO_DENY },
	{ PM_FAULT_SUBMIT, "fault.submit", PS_BOUNDARY | PS_CLIENT | PS_SUPERVISOR,
	    PA_ANY_USER, fault_submit_params, nitems(fault_submit_params), PIO_OWN },
	/* The sensor channel: gensee-sensord, root, on boundary.sock only. */
	{ PM_SENSOR_REGISTER, "sensor.register", PS_BOUNDARY, PA_ROOT, sensor_register_params,
	    nitems(sensor_register_params), PIO_DENY },
	{ PM_SENSOR_ACK, "sensor.ack", PS_BOUNDARY, PA_ROOT, sensor_ack_params,
	    nitems(sensor_ack_params), PIO_DENY },
	{ PM_SENSOR_LOSS, "sensor.loss", PS_BOUNDARY, PA_ROOT, sensor_loss_params,
	    nitems(sensor_loss_params), PIO_DENY },
	{ PM_LINEAGE_REPORT, "lineage.report", PS_BOUNDARY, PA_ROOT, lineage_report_params,
	    nitems(lineage_report_params), PIO_DENY },
	{ PM_FILE_DECISION, "file.decision", PS_BOUNDARY, PA_ROOT, file_decision_params,
	    nitems(file_decision_params), PIO_DENY },
	{ PM_SENSOR_HEARTBEAT, "sensor.heartbeat", PS_BOUNDARY, PA_ROOT, no_params, 0, PIO_DENY },
	/* Removing evidence is the host's decision alone. */
	{ PM_OPERATION_PRUNE, "operation.prune", PS_BOUNDARY, PA_ROOT, operation_prune_params,
	    nitems(operation_prune_params), PIO_DENY },
	/* The mediator channel: gensee-httpmediatord's uid, on mediator.sock only. */
	{ PM_MEDIATOR_CONFIG, "mediator.config", PS_MEDIATOR, PA_MEDIATOR, no_params, 0,
	    PIO_DENY },
	{ PM_MEDIATOR_AUTHORIZE, "mediator.authorize", PS_MEDIATOR, PA_MEDIATOR,
	    mediator_authorize_params, nitems(mediator_authorize_params), PIO_DENY },
	{ PM_MEDIATOR_DNS, "mediator.dns", PS_MEDIATOR, PA_MEDIATOR,
	    mediator_dns_params, nitems(mediator_dns_params), PIO_DENY },
	{ PM_MEDIATOR_CONNECT, "mediator.connect", PS_MEDIATOR, PA_MEDIATOR,
	    mediator_connect_params, nitems(mediator_connect_params), PIO_DENY },
	{ PM_MEDIATOR_COMPLETE, "mediator.complete", PS_MEDIATOR, PA_MEDIATOR,
	    mediator_complete_params, nitems(mediator_complete_params), PIO_DENY },
	{ PM_MEDIATOR_REFUSED, "mediator.refused", PS_MEDIATOR, PA_MEDIATOR,
	    mediator_refused_params, nitems(mediator_refused_params), PIO_DENY },
	/*
	 * HTTP transactions: root's control plane only (boundary.sock, or the
	 * operation's supervisor.sock), never client.sock: the operation's
	 * owner may be the very workload the transaction constrains.
	 */
	{ PM_TRANSACTION_BEGIN, "transaction.begin", PS_BOUNDARY | PS_SUPERVISOR, PA_ROOT_ANY,
	    transaction_params, nitems(transaction_params), PIO_DENY },
	{ PM_TRANSACTION_ACTIVATE, "transaction.activate", PS_BOUNDARY | PS_SUPERVISOR,
	    PA_ROOT_ANY, transaction_params, nitems(transaction_params), PIO_DENY },
	{ PM_TRANSACTION_END, "transaction.end", PS_BOUNDARY | PS_SUPERVISOR, PA_ROOT_ANY,
	    transaction_params, nitems(transaction_params), PIO_DENY },
	{ PM_TRANSACTION_REVOKE, "transaction.revoke", PS_BOUNDARY | PS_SUPERVISOR, PA_ROOT_ANY,
	    transaction_params, nitems(transaction_params), PIO_DENY },
	{ PM_TRANSACTION_START, "transaction.start", PS_BOUNDARY | PS_SUPERVISOR, PA_ROOT_ANY,
	    transaction_params, nitems(transaction_params), PIO_DENY },
	/* Mediator leases: granted by root only; revoked like network leases. */
	{ PM_NETWORK_GRANT_HTTP, "network.grant_http", PS_BOUNDARY | PS_SUPERVISOR, PA_ROOT_ANY,
	    network_grant_http_params, nitems(network_grant_http_params), PIO_DENY },
	{ PM_NETWORK_REVOKE_HTTP, "network.revoke_http", PS_BOUNDARY | PS_CLIENT | PS_SUPERVISOR,
	    PA_ANY_USER, network_revoke_params, nitems(network_revoke_params), PIO_DENY },
	{ PM_NETWORK_COMMIT_TOKEN, "network.commit_token", PS_BOUNDARY | PS_SUPERVISOR,
	    PA_ROOT_ANY, network_commit_token_params, nitems(network_commit_token_params),
	    PIO_DENY },
};

const struct proto_method_info *
proto_method_lookup(const char *name)
{
	for (size_t i = 0; i < PM__COUNT; i++)
		if (strcmp(proto_methods[i].pmi_name, name) == 0)
			return &proto_methods[i];
	return NULL;
}

const struct proto_method_info *
proto_method_info(enum proto_method m)
{
	return (size_t)m < PM__COUNT ? &proto_methods[m] : NULL;
}

int
proto_authorized(const struct proto_method_info *info, enum proto_socket sock, uid_t uid)
{
	if (!(info->pmi_sockets & (int)sock))
		return 0;
	/* supervisor.sock is root's alone, like boundary.sock. */
	if (sock == PS_SUPERVISOR && uid != 0)
		return 0;
	switch (info->pmi_access) {
	case PA_ROOT:
		return uid == 0 && sock == PS_BOUNDARY;
	case PA_ANY_USER:
		return 1;
	case PA_MEDIATOR:
		/* boundaryd accepts on mediator.sock only the --mediator-user uid. */
		return sock == PS_MEDIATOR;
	case PA_ROOT_ANY:
		return uid == 0;
	}
	return 0;
}

int
proto_in_op_allowed(const struct proto_method_info *info, const char **code)
{
	if (info->pmi_in_op != PIO_DENY)
		return 0;
	/* A nested `gensee run` has always been answered conflict: keep that code. */
	*code = info->pmi_method == PM_OPERATION_CREATE ? PE_CONFLICT : PE_NOT_AUTHORIZED;
	return -1;
}

int
proto_parse_request(struct json_object *msg, struct proto_request *req, const char **code,
    struct schema_error *err)
{
	static struct json_object *empty;
	struct json_object *params;
	const char *name;

	memset(req, 0, sizeof(*req));
	req->pr_id = -1;
	if (json_object_is_type(msg, json_type_object)) {
		struct json_object *id = schema_child(msg, "id");
		if (id != NULL && json_object_is_type(id, json_type_int) &&
		    json_object_get_int64(id) >= 0 && json_object_get_int64(id) <= ((int64_t)1 << 53))
			req->pr_id = json_object_get_int64(id);
	}
	if (schema_validate(msg, envelope_fields, nitems(envelope_fields), err) != 0) {
		*code = PE_INVALID_REQUEST;
		return -1;
	}
	if (schema_int(msg, "proto", 0) != PROTO_VERSION) {
		*code = PE_UNSUPPORTED_PROTO;
		err->se_code = PE_UNSUPPORTED_PROTO;
		util_strlcpy(err->se_field, "proto", sizeof(err->se_field));
		snprintf(err->se_message, sizeof(err->se_message), "protocol version %d expected",
		    PROTO_VERSION);
		return -1;
	}
	name = schema_string(msg, "method");
	req->pr_info = proto_method_lookup(name);
	if (req->pr_info == NULL) {
		*code = PE_UNKNOWN_METHOD;
		err->se_code = PE_UNKNOWN_METHOD;
		util_strlcpy(err->se_field, "method", sizeof(err->se_field));
		snprintf(err->se_message, sizeof(err->se_message), "unknown method");
		return -1;
	}
	params = schema_child(msg, "params");
	if (params == NULL) {
		if (empty == NULL)
			empty = json_object_new_object();
		params = empty;
	}
	if (schema_validate(params, req->pr_info->pmi_params, req->pr_info->pmi_nparams, err) != 0) {
		*code = PE_INVALID_PARAMS;
		return -1;
	}
	req->pr_params = params;
	return 0;
}

int
proto_parse_operation_create(struct json_object *params, struct proto_operation_create *out,
    struct schema_error *err)
{
	memset(out, 0, sizeof(*out));
	out->oc_pid = (pid_t)schema_int(params, "pid", 0);
	out->oc_start_ticks = (uint64_t)schema_int(params, "start_time_ticks", 0);
	out->oc_start_given = json_object_object_get_ex(params, "start_time_ticks", NULL);
	out->oc_timeout_seconds = schema_int(params, "timeout_seconds", 0);
	out->oc_kill_grace_seconds = schema_int(params, "kill_grace_seconds",
	    PROTO_KILL_GRACE_DEFAULT);
	out->oc_action_class = schema_string(params, "action_class");
	if (out->oc_action_class == NULL)
		out->oc_action_class = "local_process";
	out->oc_source_run = schema_string(params, "source_run");
	if (out->oc_source_run == NULL)
		out->oc_source_run = "gensee run";
	out->oc_network = schema_child(params, "network");
	out->oc_fanotify = schema_child(params, "fanotify");
	out->oc_host_controls = schema_child(params, "host_controls");
	out->oc_command = schema_string(params, "command");
	out->oc_network_config = schema_string(params, "network_config");
	out->oc_adopt_existing = schema_bool(params, "adopt_existing", 0);
	if (out->oc_network != NULL && out->oc_network_config != NULL) {
		err->se_code = SCHEMA_E_RANGE;
		util_strlcpy(err->se_field, "network_config", sizeof(err->se_field));
		snprintf(err->se_message, sizeof(err->se_message),
		    "network and network_config are exclusive");
		return -1;
	}
	return 0;
}

int
proto_parse_operation_end(struct json_object *params, struct proto_operation_end *out,
    struct schema_error *err)
{
	memset(out, 0, sizeof(*out));
	out->oe_id = schema_string(params, "operation_id");
	if (!ids_valid_operation(out->oe_id)) {
		err->se_code = SCHEMA_E_STRING;
		util_strlcpy(err->se_field, "operation_id", sizeof(err->se_field));
		snprintf(err->se_message, sizeof(err->se_message), "operation_id: malformed id");
		return -1;
	}
	if (schema_child(params, "exit_code") != NULL && schema_child(params, "exit_signal") != NULL) {
		err->se_code = SCHEMA_E_RANGE;
		util_strlcpy(err->se_field, "exit_signal", sizeof(err->se_field));
		snprintf(err->se_message, sizeof(err->se_message),
		    "exit_code and exit_signal are exclusive");
		return -1;
	}
	if (schema_child(params, "exit_code") != NULL) {
		out->oe_has_exit = 1;
		out->oe_exit_code = (int)schema_int(params, "exit_code", 0);
	} else if (schema_child(params, "exit_signal") != NULL) {
		out->oe_has_exit = 1;
		out->oe_exit_code = -1;
		out->oe_exit_signal = (int)schema_int(params, "exit_signal", 0);
	}
	out->oe_kill = schema_bool(params, "kill", 0);
	out->oe_grace_seconds = out->oe_kill ? 0 :
	    schema_int(params, "grace_seconds", PROTO_KILL_GRACE_DEFAULT);
	out->oe_detach = schema_bool(params, "detach", 0);
	out->oe_denials = schema_child(params, "seccomp_denials");
	if (out->oe_denials != NULL && proto_check_denials(out->oe_denials, err) != 0)
		return -1;
	if (out->oe_detach && (out->oe_kill || out->oe_has_exit)) {
		err->se_code = SCHEMA_E_RANGE;
		util_strlcpy(err->se_field, "detach", sizeof(err->se_field));
		snprintf(err->se_message, sizeof(err->se_message),
		    "detach excludes kill and an exit report");
		return -1;
	}
	return 0;
}

struct json_object *
proto_request_new(int64_t id, const char *method, struct json_object *params)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "proto", json_object_new_int(PROTO_VERSION));
	json_object_object_add(o, "id", json_object_new_int64(id));
	json_object_object_add(o, "method", json_object_new_string(method));
	json_object_object_add(o, "params", params != NULL ? params : json_object_new_object());
	return o;
}

struct json_object *
proto_result_new(int64_t id, struct json_object *result)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "proto", json_object_new_int(PROTO_VERSION));
	json_object_object_add(o, "id", id >= 0 ? json_object_new_int64(id) : NULL);
	json_object_object_add(o, "result", result != NULL ? result : json_object_new_object());
	return o;
}

struct json_object *
proto_error_new(int64_t id, const char *code, const char *message)
{
	struct json_object *o = json_object_new_object();
	struct json_object *e = json_object_new_object();
	json_object_object_add(o, "proto", json_object_new_int(PROTO_VERSION));
	json_object_object_add(o, "id", id >= 0 ? json_object_new_int64(id) : NULL);
	json_object_object_add(e, "code", json_object_new_string(code));
	json_object_object_add(e, "message", json_object_new_string(message ? message : code));
	json_object_object_add(o, "error", e);
	return o;
}

struct json_object *
proto_event_new(const char *event, struct json_object *params)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "proto", json_object_new_int(PROTO_VERSION));
	json_object_object_add(o, "event", json_object_new_string(event));
	json_object_object_add(o, "params", params != NULL ? params : json_object_new_object());
	return o;
}
