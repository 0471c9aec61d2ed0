/*
 * proto.h: the wire protocol between gensee processes.
 *
 * Every message type is in the one enum below; every method has a schema
 * and one row in the access table. PROTO_VERSION goes in every message:
 * bump it on any incompatible change.
 */
#ifndef GENSEE_PROTO_H
#define GENSEE_PROTO_H

#include <stdint.h>
#include <sys/types.h>

#include "schema.h"

struct json_object;

#define PROTO_VERSION 1

/* Stable error codes in replies. */
#define PE_INVALID_REQUEST "invalid_request"
#define PE_UNSUPPORTED_PROTO "unsupported_proto"
#define PE_UNKNOWN_METHOD "unknown_method"
#define PE_INVALID_PARAMS "invalid_params"
#define PE_NOT_AUTHORIZED "not_authorized"
#define PE_NOT_FOUND "not_found"
#define PE_NOT_CHILD "not_caller_child"
#define PE_IDENTITY "identity_mismatch"
#define PE_CGROUP "cgroup_unavailable"
#define PE_STATE "state_error"
#define PE_CONFLICT "conflict"
#define PE_LIMIT "limit_exceeded"
#define PE_ENFORCEMENT "enforcement_failed"
#define PE_INVALID_CONFIG "invalid_config"
#define PE_SENSOR "sensor_unavailable"
#define PE_INTERNAL "internal_error"
#define PE_SHUTTING_DOWN "shutting_down"
#define PE_NOT_LAUNCHER "not_launcher"
#define PE_RATE_LIMITED "rate_limited"
/* The state disk is full, read-only or failing: nothing new is started. */
#define PE_STATE_DISK "state_disk_unavailable"

enum proto_method {
	PM_SYSTEM_STATUS,
	PM_SYSTEM_SHUTDOWN,
	PM_OPERATION_CREATE,
	PM_OPERATION_INSPECT,
	PM_OPERATION_LIST,
	PM_OPERATION_END,
	PM_OPERATION_EVIDENCE,
	PM_OPERATION_OBSERVE,
	PM_NETWORK_INSPECT,
	PM_NETWORK_EVENT,
	PM_NETWORK_REVOKE,
	PM_NETWORK_START,
	PM_NETWORK_REINSTALL,
	PM_FAULT_SUBMIT,
	PM_SENSOR_REGISTER,
	PM_SENSOR_ACK,
	PM_SENSOR_LOSS,
	PM_LINEAGE_REPORT,
	PM_FILE_DECISION,
	PM_SENSOR_HEARTBEAT,
	PM_OPERATION_PRUNE,
	PM_MEDIATOR_CONFIG,
	PM_MEDIATOR_AUTHORIZE,
	PM_MEDIATOR_DNS,
	PM_MEDIATOR_CONNECT,
	PM_MEDIATOR_COMPLETE,
	PM_MEDIATOR_REFUSED,
	PM_TRANSACTION_BEGIN,
	PM_TRANSACTION_ACTIVATE,
	PM_TRANSACTION_END,
	PM_TRANSACTION_REVOKE,
	PM_TRANSACTION_START,
	PM_NETWORK_GRANT_HTTP,
	PM_NETWORK_REVOKE_HTTP,
	PM_NETWORK_COMMIT_TOKEN,
	PM__COUNT
};

/* Which socket a request arrived on. */
enum proto_socket {
	PS_BOUNDARY = 0x01, /* boundary.sock: root only */
	PS_CLIENT = 0x02,   /* client.sock: any local user */
	PS_SUPERVISOR = 0x04, /* network-operations/ID/supervisor.sock: root, one operation */
	PS_MEDIATOR = 0x08, /* mediator.sock: the mediator's uid only (--mediator-user) */
};

/* Who may call: root only, or any user (the handler scopes to the caller). */
enum proto_access {
	PA_ROOT,
	PA_ANY_USER,
	PA_MEDIATOR,	/* the mediator's uid, on mediator.sock only (checked at accept) */
	PA_ROOT_ANY,	/* uid 0 on any socket of the method's mask */
};

/*
 * What a caller inside a supervised operation's cgroup may do, whatever
 * its uid and socket: the supervised tree is hostile, so it may read and
 * report about its own operation only, never end, observe, revoke or
 * report exits, and never touch another operation of the same user.
 */
enum proto_in_op {
	PIO_DENY,	/* refused from inside an operation */
	PIO_OWN,	/* only about the caller's own operation */
	PIO_ANY,	/* names no operation (system.status) */
};

struct proto_method_info {
	enum proto_method pmi_method;
	const char *pmi_name;
	int pmi_sockets;		/* mask of enum proto_socket */
	enum proto_access pmi_access;
	const struct schema_field *pmi_params;
	size_t pmi_nparams;
	enum proto_in_op pmi_in_op;
};

const struct proto_method_info *proto_method_lookup(const char *name);
const struct proto_method_info *proto_method_info(enum proto_method m);

struct proto_request {
	int64_t pr_id;
	const struct proto_method_info *pr_info;
	struct json_object *pr_params; /* borrowed from the request; never NULL */
};

/*
 * Validate the envelope and the method's params. On failure fills *code
 * and err and returns -1; pr_id is set whenever the id was readable so the
 * error reply can carry it.
 */
int proto_parse_request(struct json_object *msg, struct proto_request *req,
    const char **code, struct schema_error *err);

/* Is this caller (uid, socket) allowed to call this method at all? */
int proto_authorized(const struct proto_method_info *info, enum proto_socket sock, uid_t uid);
/*
 * May a caller inside an operation call it? 0, or -1 with *code: the
 * stable error (conflict for operation.create, as for a nested run;
 * not_authorized otherwise).
 */
int proto_in_op_allowed(const struct proto_method_info *info, const char **code);

/* Message builders. */
struct json_object *proto_request_new(int64_t id, const char *method, struct json_object *params);
struct json_object *proto_result_new(int64_t id, struct json_object *result);
struct json_object *proto_error_new(int64_t id, const char *code, const char *message);
struct json_object *proto_event_new(const char *event, struct json_object *params);

/* Typed params. */
#define PROTO_ARGV_MAX 256
#define PROTO_ARG_LEN_MAX 4096
#define PROTO_TIMEOUT_MAX (7 * 24 * 3600)
#define PROTO_PRUNE_AGE_MAX ((int64_t)100 * 365 * 24 * 3600)	/* seconds */
#define PROTO_PRUNE_KEEP_MAX 1000000
#define PROTO_KILL_GRACE_DEFAULT 3	/* seconds: a timeout or an end asks first */
#define PROTO_KILL_GRACE_MAX 30

struct proto_operation_create {
	pid_t oc_pid;
	uint64_t oc_start_ticks;	/* read by boundaryd when not given */
	int oc_start_given;
	int64_t oc_timeout_seconds;
	int64_t oc_kill_grace_seconds;	/* SIGTERM, then SIGKILL after this, at the timeout */
	const char *oc_action_class;
	const char *oc_source_run;
	struct json_object *oc_network;		/* network spec, or NULL */
	struct json_object *oc_fanotify;	/* sensitive-path rules for sensord, or NULL */
	struct json_object *oc_host_controls;	/* what the launcher applied (seccomp, Landlock) */
	const char *oc_command;	/* the launcher's command line, for display (a claim) */
	const char *oc_network_config;		/* root only: a schema-3 config file */
	int oc_adopt_existing;			/* root only: supervise a running tree */
};
int proto_parse_operation_create(struct json_object *params, struct proto_operation_create *out,
    struct schema_error *err);

struct proto_operation_end {
	const char *oe_id;
	int oe_has_exit;
	int oe_exit_code;
	int oe_exit_signal;
	int oe_kill;		/* at once: grace 0 */
	int64_t oe_grace_seconds;	/* SIGTERM, then SIGKILL after this */
	int oe_detach;	/* root: leave an adopted tree running, unsupervised */
	struct json_object *oe_denials;	/* borrowed: {"syscall": count}, checked */
};
int proto_parse_operation_end(struct json_object *params, struct proto_operation_end *out,
    struct schema_error *err);

#endif
