/*
 * boundaryd.h: gensee-boundaryd, the root authority daemon.
 *
 * Trust model: boundaryd is the only component with authority. Every peer
 * (the CLI, later the mediator and sensors) is untrusted input: identities
 * come from SO_PEERCRED and /proc, never from what a request claims, and
 * every request is checked against the method table before it runs.
 */
#ifndef GENSEE_BOUNDARYD_H
#define GENSEE_BOUNDARYD_H

#include <limits.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "cgroup.h"
#include "ids.h"
#include "netpolicy.h"
#include "nft.h"
#include "oprecord.h"
#include "peer.h"
#include "proto.h"

struct event_base;
struct event;
struct json_object;
struct evconnlistener;

#define BOUNDARYD_NAME "gensee-boundaryd"
#define BOUNDARYD_LOCK "boundaryd.lock"	/* in the state root and the runtime dir */
#define BOUNDARYD_EXIT_LOCKED 3		/* another instance holds the lock */
/* The host's retention (--retain-days, --retain-count) runs at start and this often. */
#define RETAIN_INTERVAL_SEC 3600
/* Retry of what the state disk refused (records kept in memory, queued evidence). */
#define BOUNDARYD_DISK_RETRY_MS 1000
#define SENSOR_NFT_TRACE 0x01
#define SENSOR_PROC_CONNECTOR 0x02
#define SENSOR_FANOTIFY 0x04
#define SENSOR_LANDLOCK_AUDIT 0x08	/* Landlock's denials, from the kernel's audit */
#define SENSOR_ACK_MS 2000
/*
 * Connection budgets. client.sock: CONTROL_MAX_CLIENT in all, of which the
 * last CONTROL_ROOT_RESERVE only root may use, and at most
 * CONTROL_MAX_PER_UID for one non-root uid (above OP_MAX_PER_UID, so a user
 * starting that many runs at once is not refused). boundary.sock and the
 * supervisor sockets (root only) have a budget of their own.
 */
#define CONTROL_MAX_CLIENT 256
#define CONTROL_ROOT_RESERVE 32
#define CONTROL_MAX_PER_UID 96
#define CONTROL_MAX_BOUNDARY 64
/* mediator.sock: one mediator needs one channel; a few for its restarts. */
#define CONTROL_MAX_MEDIATOR 8
/*
 * The sensor channel has no idle timeout: both sides send a heartbeat
 * every interval (--sensor-heartbeat-ms) and give the channel up after
 * this many intervals without a frame from the other side.
 */
#define SENSOR_HEARTBEAT_MS 10000
#define SENSOR_HEARTBEAT_MISSES 3
/* An operation's fanotify section, serialized: it is relayed to sensord in one frame. */
#define SENSOR_FANOTIFY_MAX (64u * 1024u)
#define CONTROL_FRAME_DEADLINE_SEC 5
#define CONTROL_IDLE_SEC 60
/*
 * Queued bytes. A client that sends requests and never reads the replies
 * makes boundaryd buffer them: a connection with more than
 * CONTROL_OUTPUT_PAUSE of output queued is no longer read from (its
 * requests wait in its own socket) until the peer has taken its replies;
 * one reply can still exceed that, up to CONTROL_OUTPUT_MAX, over which the
 * connection is closed. A non-root uid's connections together may hold
 * CONTROL_UID_QUEUE_MAX (input and output): past it the uid's connections
 * with the most queued are closed until it fits, so one user's unread
 * replies never cost the other users (or root) their answers.
 */
#define CONTROL_OUTPUT_PAUSE (256u * 1024u)
#define CONTROL_OUTPUT_MAX (8u * 1024u * 1024u)
#define CONTROL_UID_QUEUE_MAX (16u * 1024u * 1024u)
/* Active operations one non-root uid may hold: bounds cgroups and records. */
#define OP_MAX_PER_UID 64
#define OP_POLL_MS 100
/*
 * The live record (counters, mediation boundaries, recovery health) is
 * rewritten at most this often while an operation runs, and only when
 * something changed: each write costs an fsync (~1 ms).
 */
#define OP_LIVE_MS 1000
/* Rounds of moving an adopted tree's processes before giving up on a forking tree. */
#define OP_ADOPT_ROUNDS 32
#define OP_REAP_POLL_MS 20
#define OP_REAP_MAX_MS 5000
#define OP_SENSOR_FLUSH_MS 1000
/* How long the reap waits for the launcher's exit report, to write it with the cleanup. */
#define OP_EXIT_REPORT_MS 200
/*
 * A launcher that dies without reporting the end (the agent can kill -9
 * its parent) ends its operation after this grace: long enough for a
 * launcher's own last report to land, short enough that the agent does
 * not run on unattended.
 */
#define OP_LAUNCHER_GRACE_MS 2000
/*
 * A timeout or a plain operation.end asks the tree to stop (SIGTERM to
 * every member), then kills what is left after this grace (cgroup.kill).
 */
#define OP_KILL_GRACE_DEFAULT_S PROTO_KILL_GRACE_DEFAULT
/*
 * The held child confines itself (seccomp, Landlock) just before exec, and
 * it is released right after operation.create's reply (held at most
 * SENSOR_ACK_MS for sensord): after this long without a visible exec the
 * claimed host controls are checked anyway.
 */
#define OP_HOSTCTL_VERIFY_MS (SENSOR_ACK_MS + 3000)
/* Lineage entries kept in memory per operation (exited ones are dropped first). */
#define OP_LINEAGE_MAX 4096
/*
 * network.event and fault.submit from client.sock and supervisor sockets:
 * a token bucket per operation (each one costs a decision, evidence lines
 * and a record update). sensord on boundary.sock is not limited.
 */
#define OP_EVENT_RATE 32	/* tokens per second */
#define OP_EVENT_BURST 64
/* Active leases per operation: each one is a kernel set element and a timer. */
#define NETOP_MAX_LEASES 128

/* A request whose reply waits for an operation's cleanup. */
struct op_waiter {
	TAILQ_ENTRY(op_waiter) ow_entry;
	struct conn *ow_conn;
	int64_t ow_id;
	uid_t ow_uid;
};
TAILQ_HEAD(op_waiter_list, op_waiter);

struct lineage_entry {
	pid_t le_pid;
	pid_t le_ppid;
	uint64_t le_start;
	int le_gone;
	char le_exe[256];
};

enum op_kind {
	OP_KIND_PROCESS,	/* a held child and its tree, in a cgroup */
	OP_KIND_ADDRESS,	/* one isolated source address (network.start) */
};

enum op_phase {
	OP_RUNNING,	/* supervised */
	OP_FINISHING,	/* terminal state decided; waiting for the cgroup to drain */
};

struct netop;

struct lineage_batch;

struct operation {
	TAILQ_ENTRY(operation) op_entry;
	struct boundaryd *op_bd;
	enum op_kind op_kind;
	struct netop *op_net;	/* network boundary, or NULL */
	char op_id[OP_ID_MAX];
	uid_t op_uid;
	int op_dirfd;
	pid_t op_root_pid;
	uint64_t op_root_start;
	int op_pidfd;
	int op_root_gone;
	struct cgroup op_cg;
	int op_cg_valid;
	/* The prepared cell's table, until the operation's network state owns it. */
	char op_spare_table[NFT_TABLE_NAME_MAX];
	int op_cg_missing; /* adopted with no cgroup left to clean up */
	enum op_phase op_phase;
	int64_t op_deadline_ms; /* wall clock; 0: no timeout */
	int64_t op_reap_started;
	int op_reap_delay_ms;
	struct event *op_pidfd_ev;
	struct event *op_poll_ev;
	struct event *op_timeout_ev;
	struct event *op_reap_ev;
	struct lineage_entry *op_lin;
	size_t op_nlin, op_caplin;
	struct op_waiter_list op_waiters;
	struct json_object *op_fanotify;	/* sensitive-path config for sensord */
	/* operation.create's reply, held until sensord has the config (or gives up). */
	struct conn *op_create_conn;
	int64_t op_create_id;
	struct json_object *op_create_result;
	struct event *op_create_timer;
	int op_sensor_pushed;	/* sensord was told about it */
	int op_sensor_flushed;	/* sensord sent everything it had and let go */
	int op_detach;		/* finish by moving the tree back, not by killing it */
	/* The launcher's exit report while the tree is reaped: written with the cleanup. */
	struct oprecord_lifecycle op_exit_report;
	int op_has_exit_report;
	/*
	 * A root that exited on its own with its cgroup empty: the finish's
	 * update waits for the launcher's report and goes with the cleanup's
	 * (operation.c, op_finish_defer).
	 */
	int op_fin_may_defer, op_fin_deferred;
	const char *op_fin_state, *op_fin_reason;	/* string literals */
	struct lineage_batch *op_fin_lb;
	int op_launcher;	/* created with a held child: its parent will report the exit */
	pid_t op_launcher_pid;	/* ... that parent (operation.create's peer) */
	uint64_t op_launcher_start;
	int op_launcher_pidfd;
	struct event *op_launcher_ev;	/* the launcher exited */
	struct event *op_launcher_grace_ev;
	/* host_controls the launcher claimed, checked against /proc/ROOT/status */
	int op_hc_nnp;		/* NoNewPrivs must be 1 */
	int op_landlock;	/* the launcher applied Landlock (its denials are reportable) */
	int op_hc_seccomp;	/* Seccomp must be 2 (filter) */
	int op_hc_pending;
	int64_t op_hc_deadline_ms;	/* monotonic */
	char op_root_digest[72];	/* argv digest of the held child: a change is its exec */
	double op_tokens;		/* network.event/fault.submit bucket */
	int64_t op_tokens_ms;
	uint64_t op_lin_dropped;	/* processes not tracked: OP_LINEAGE_MAX reached */
	int op_adopted;		/* adopt_existing: a tree it did not start */
	char op_origin_cg[256];	/* ... and where that tree was before ("" = the root) */
	/* fanotify coverage: lost until a sensord acknowledges the config again */
	int op_cov_lost;
	int op_frozen;		/* cgroup.freeze written for the loss */
	/* what the live record last showed (live.c) */
	int64_t op_live_ms;		/* monotonic */
	size_t op_live_recovery_n;
	char op_live_fan_state[16];
	/* Graceful end: SIGTERM sent, the kill follows at op_term_ev. */
	int64_t op_kill_grace_s;	/* for the timeout (operation.create) */
	int op_terminating;
	int op_term_escalated;	/* the grace ran out: killed */
	const char *op_term_state, *op_term_reason;
	struct event *op_term_ev;
	int64_t op_term_grace_s;
	int op_term_signaled;	/* members sent SIGTERM */
	char op_term_at[40];
};
TAILQ_HEAD(operation_list, operation);
struct conn;
TAILQ_HEAD(conn_list, conn);

struct listener {
	struct boundaryd *l_bd;
	struct evconnlistener *l_ev;
	enum proto_socket l_kind;
	char l_path[PATH_MAX + 160];
	char l_scope[OP_ID_MAX]; /* supervisor.sock: the one operation it serves */
};

/* A network spec, before it is installed (from request params or a config file). */
struct netop_spec {
	enum nft_subject ns_subject;
	enum nft_mode ns_mode;
	int ns_src_family;
	uint8_t ns_src_addr[16];
	struct np_grants ns_allow;
	struct np_grants ns_deny;
	struct netpolicy ns_policy;
	struct json_object *ns_policy_json;	/* as given, kept in the record */
	struct json_object *ns_proxy;		/* stored for the mediator */
	struct json_object *ns_dns;		/* the dns section, for the mediator's DNS proxy */
	struct json_object *ns_warnings;	/* array of strings */
	char ns_config_path[PATH_MAX];
};

struct netop_lease {
	TAILQ_ENTRY(netop_lease) nl_entry;
	struct netop *nl_no;
	char nl_id[ID_MAX_LEN];
	struct np_grant nl_grant;
	int64_t nl_expires_ms;	/* wall clock */
	char nl_issued_at[40];
	struct event *nl_ev;
};
TAILQ_HEAD(netop_lease_list, netop_lease);

struct netop {
	struct operation *no_op;
	struct boundaryd *no_bd;
	char no_table[NFT_TABLE_NAME_MAX];
	struct netop_spec no_spec;
	struct netop_lease_list no_leases;
	uint64_t no_generation;
	int no_dirfd;		/* STATE/network-operations/ID */
	struct listener no_sup;	/* supervisor.sock */
	int no_table_installed;	/* the kernel holds our table: refill in place */
	int no_table_gone;
	/*
	 * Kernel counters -> record counts (allowed/blocked packets/bytes).
	 * The record holds base + kernel; a kernel reset (a table made anew)
	 * moves what was counted into base, so the record's counts only grow.
	 */
	uint64_t no_cnt_last[4], no_cnt_base[4], no_cnt_rec[4];
	int no_cnt_restored;	/* adopted: the first reading may be a new epoch */
	uint64_t no_live_blocked_pk;	/* blocked packets when the top list was last written */
	uint64_t no_live_generation;	/* generation the boundary entry last showed */
	struct nft_counters no_end_cnt;	/* the final reading (netop_end_counts) */
	int no_end_read, no_end_have;
	struct txnctx *no_txn;	/* proxy.transaction state (transaction.c), made on first use */
	struct medleases *no_medleases;	/* mediator leases (medlease.c), in memory only */
};

/* One live record update (live.c): each part is optional. */
struct live_update {
	struct oprecord_counts lu_counts;	/* deltas */
	uint64_t lu_cnt_target[4];		/* the counts after it (netop) */
	struct json_object *lu_blocked;		/* counts.network.blocked_destinations */
	struct json_object *lu_boundaries[2];	/* mediation_boundaries entries */
	size_t lu_nb;
	struct json_object *lu_recovery;	/* recovery_health */
};

struct boundaryd {
	struct event_base *bd_base;
	uint64_t bd_files_recorded;	/* fanotify decisions written to files.jsonl */
	uint64_t bd_files_dropped;	/* ... and lost (sensord backlog, refused, unwritable) */
	int bd_state_fd;
	int bd_ops_fd;
	int bd_runtime_fd;
	char bd_state_root[PATH_MAX];
	char bd_runtime_dir[PATH_MAX];
	char bd_cgroup_mount[PATH_MAX];
	char bd_cgroup_base[72];	/* operations live in MOUNT/BASE/op_<id> */
	int bd_have_cgroup;
	char bd_instance[ID_MAX_LEN];
	int64_t bd_started_ms;
	char bd_started_at[40];
	struct listener bd_boundary;
	struct listener bd_client;
	struct listener bd_mediator;	/* mediator.sock, with --mediator-user only */
	int bd_have_mediator;
	uid_t bd_mediator_uid;
	int bd_nconns;
	int bd_nclient;		/* ... on client.sock */
	int bd_nboundary;	/* ... on boundary.sock and supervisor sockets */
	int bd_nmediator;	/* ... on mediator.sock */
	uint64_t bd_conns_refused; /* over a budget */
	uint64_t bd_conns_dropped; /* closed: replies not read (queue bounds) */
	struct conn_list bd_conns;
	struct operation_list bd_ops;
	struct json_object *bd_recovery; /* array: what startup could not validate */
	struct json_object *bd_recovery_cleaned; /* array: half-created operations taken back */
	struct nft_ctx *bd_nft;		/* NULL: no nftables, network operations refused */
	unsigned char bd_table_key[32];	/* keys table names: not guessable from outside */
	char bd_anchor[NFT_TABLE_NAME_MAX];	/* the hook anchor table, "" if none (nft.h) */
	int bd_no_anchor;		/* --no-nft-anchor */
	int bd_netops_fd;		/* STATE/network-operations */
	struct conn *bd_sensor;		/* gensee-sensord's connection, or NULL */
	int bd_sensor_caps;		/* SENSOR_* it offers */
	int bd_sensor_hb_ms;		/* heartbeat interval of the sensor channel */
	int64_t bd_sensor_seen_ms;	/* monotonic: the sensor's last frame */
	struct event *bd_sensor_hb_ev;
	int bd_idle_sec;		/* idle timeout of other connections */
	int bd_shutdown;
	uint64_t bd_cgroup_base_recreated; /* times the base was found missing and made again */
	struct json_object *bd_index;	/* operation id -> summary (retain.c) */
	int bd_index_dirfd;		/* the state root, opened for reading (fsync) */
	size_t bd_index_lines;		/* lines in operations.index.jsonl */
	uint64_t bd_index_rebuilt;	/* times it was rebuilt from the records */
	int64_t bd_retain_days;		/* 0: keep ended operations whatever their age */
	int64_t bd_retain_count;	/* 0: keep any number */
	struct event *bd_retain_ev;
	uint64_t bd_sync_errors_seen;	/* syncq errors already turned into disk state */
};

/* fanhold.c: the fanotify group held across sensord restarts */
int fanhold_listen(struct boundaryd *bd);
int fanhold_start(struct boundaryd *bd);
struct json_object *fanhold_status(void);
void fanhold_stop(struct boundaryd *bd);

/* control.c */
int control_listen(struct boundaryd *bd, struct listener *l, int dirfd, const char *dirpath,
    const char *name, enum proto_socket kind, mode_t mode);
void control_close(struct listener *l);
void control_close_all(struct boundaryd *bd);
void control_flush(struct conn *c);
void control_send(struct conn *c, struct json_object *msg);
int control_cgroup_op(struct boundaryd *bd, const char *cg, char *id, size_t len);
int control_send_max(struct conn *c, struct json_object *msg, size_t max);
pid_t control_peer_pid(struct conn *c);
/* The connection is a long-lived channel: no idle timeout (sensord). */
void control_keepalive(struct conn *c);
/* Send an event frame ({"event": name, "params": ...}) to every mediator channel. */
void control_mediator_notify(struct boundaryd *bd, const char *name, struct json_object *params);
/* Close one connection now (its owners are told as on EOF). */
void control_drop(struct conn *c);
/* Connections not read from now (output over CONTROL_OUTPUT_PAUSE), bytes queued in all. */
void control_queue_stats(struct boundaryd *bd, int *paused, uint64_t *queued);

/* operation.c: method handlers fill *result or (*code, *msg). */
struct op_reply {
	struct json_object *or_result;
	const char *or_code;
	char *or_msg;
	int or_deferred; /* the handler replies later through control_send() */
};
/* Fill r with an error: a stable code and a formatted message. */
void reply_error(struct op_reply *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void operation_create(struct boundaryd *bd, struct conn *c, const struct peer *p,
    int64_t reqid, struct json_object *params, struct op_reply *r);
void operation_observe(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r);
void operation_inspect(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r);
int operation_visible(const struct operation *op, const struct peer *p);
void operation_end(struct boundaryd *bd, struct conn *c, const struct peer *p,
    int64_t reqid, struct json_object *params, struct op_reply *r);
void operation_forget_conn(struct boundaryd *bd, struct conn *c);
struct operation *operation_adopt(struct boundaryd *bd, const char *id, int dirfd,
    struct json_object *rec, char **cause);
void operation_finish(struct operation *op, const char *state, const char *reason);
/*
 * End a running operation gracefully: SIGTERM to every member, then
 * operation_finish (the kill) when the root exits or after grace_s; at once
 * with grace_s 0.
 */
void operation_terminate(struct operation *op, const char *state, const char *reason,
    int64_t grace_s);
int operation_count(struct boundaryd *bd);
/* Make MOUNT/BASE again if someone removed it (root-owned 0755). */
int op_ensure_base(struct boundaryd *bd, char **cause);

/* spare.c: prepared cells (id, directory, empty cgroup, deny-all table) for the next creates */
#define SPARE_NET 0		/* with network-operations/ID and a deny-all table */
#define SPARE_PLAIN 1		/* for an operation without network policy */
#define SPARE_KINDS 2
void spare_recover(struct boundaryd *bd);
void spare_start(struct boundaryd *bd);
int spare_kind_for(const struct netop_spec *s);
void spare_take(int kind, char *id, size_t idlen, struct cgroup *cg, int *dirfd);
void spare_idle(void);
struct json_object *spare_status(void);
void spare_shutdown(struct boundaryd *bd);
void operation_free_all(struct boundaryd *bd);

/* netop.c: the network boundary of an operation */
/* An operation's cgroup depth below the v2 root (BASE/op_<id>), which its table matches. */
#define NETOP_CGROUP_LEVEL 2
int netop_init(struct boundaryd *bd, char **cause);
/* The table of operation id: a keyed hash, not guessable from outside. */
void netop_table_name(struct boundaryd *bd, const char *id, char out[NFT_TABLE_NAME_MAX]);
void netop_shutdown(struct boundaryd *bd);
int netop_spec_from_params(struct json_object *net, struct netop_spec *s, char **cause);
int netop_spec_from_file(const char *path, struct netop_spec *s, char **cause,
    struct np_config *cfg_out);
void netop_spec_free(struct netop_spec *s);
/*
 * Install the operation's table. With defer_envelope the caller writes the
 * envelope copy into the operation record itself (netop_mut_envelope_of in
 * its own update) and calls netop_publish_installed for the network record
 * and its effect.
 */
struct netop *netop_attach(struct operation *op, struct netop_spec *s, int defer_envelope,
    char **cause);
void netop_publish_installed(struct netop *no);
int netop_mut_envelope_of(struct json_object *rec, void *arg, char **cause);
struct netop *netop_restore(struct operation *op, char **cause);
void netop_end(struct netop *no);
/* netop_end, leaving the final live record update to the caller (*out, cleared by it). */
void netop_end_into(struct netop *no, struct live_update *out);
void netop_end_counts(struct netop *no, struct live_update *out);
int netop_end_release(struct netop *no);
struct json_object *netop_table_left_json(struct netop *no);
void netop_live(struct netop *no, int final, struct live_update *u);
void netop_live_written(struct netop *no, const struct live_update *u);
void netop_free(struct netop *no);
struct json_object *netop_summary(struct netop *no);
void netop_recover_tables(struct boundaryd *bd);
void network_inspect(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r);
void network_event(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r);
void fault_submit(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r);
void network_revoke(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r);
void network_start(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r);
void network_reinstall(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r);
void operation_evidence(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r);
/* Append one evidence line (time and operation_id added) to STATE/network-operations/ID/file. */
void netop_append(struct netop *no, const char *file, struct json_object *o);
/* The caller-visible network operation named by params or the socket (else r is an error). */
struct netop *netop_lookup(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r);
/*
 * Is (family, addr, proto, port) allowed now by the operation's envelope,
 * deny list and active leases (netpolicy_decide's NP_ALLOW)? *reason is
 * its stable reason either way.
 */
int netop_tuple_allowed(struct netop *no, int family, const uint8_t addr[16], uint8_t proto,
    uint16_t port, const char **reason);

/* mediator.c: the mediator channel (mediator.sock, the --mediator-user uid only) */
void mediator_config_changed(struct boundaryd *bd, const struct netop *no);
void mediator_config(struct boundaryd *bd, struct op_reply *r);
void mediator_authorize(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r);
void mediator_complete(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r);
void mediator_refused(struct boundaryd *bd, struct json_object *params, struct op_reply *r);

/* medlease.c: mediator leases and credential injection (proxy.credentials) */
struct medleases;
void network_grant_http(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r);
void network_revoke_http(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r);
const char *medlease_credential(struct netop *no, struct json_object *params,
    const char **handle, const char **header, char *value, size_t valuesz);
struct json_object *medlease_summary(struct netop *no);
int medlease_active(struct netop *no);
/* medtoken.c: commit tokens for non-GET/HEAD mediator requests */
void network_commit_token(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r);
const char *medtoken_check(struct boundaryd *bd, struct netop *no, struct json_object *params,
    int redeem, char *token_id, size_t idlen);
void medtoken_free(void);
void medlease_free_all(struct netop *no);

/* transaction.c: HTTP mediator transactions (proxy.transaction) */
struct txnctx;
void transaction_begin(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r);
void transaction_start(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r);
void transaction_activate(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r);
void transaction_end(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r);
void transaction_revoke(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r);
const char *txn_authorize(struct netop *no, struct json_object *params, const char **txid,
    uint64_t *reservation, int64_t *limit, const char **url_error);
void txn_decision_evidence(struct netop *no, struct json_object *params,
    const char *decision_id, const char *txid, const char *reason, uint64_t reservation,
    const char *url_error);
struct json_object *txn_summary(struct netop *no);
void txn_release_unused(struct netop *no, uint64_t reservation);
void txn_restore(struct netop *no);
void txn_operation_end(struct netop *no);
void txn_free(struct netop *no);

/*
 * Lease the exact tuple of ev for ttl seconds, or extend the lease that
 * already holds it to whichever expiry is later (never shortened: another
 * name may hold it). *lease_id names it. 0 once the kernel acknowledged.
 */
int netop_lease_tuple(struct netop *no, const struct np_event *ev, int64_t ttl, char *lease_id,
    size_t lease_id_len, int *extended, char **cause);

void netop_connect_token(struct boundaryd *bd, const char *opid, char out[65]);

/* dnslease.c: DNS answers from the mediator's proxy become leases; CONNECT tunnels */
void dnslease_answer(struct boundaryd *bd, struct json_object *params, struct op_reply *r);
void dnslease_connect(struct boundaryd *bd, struct json_object *params, struct op_reply *r);

/* operation.c helpers shared with netop.c */
struct operation *operation_find(struct boundaryd *bd, const char *id);
int operation_take_token(struct operation *op);
struct operation *operation_new_address(struct boundaryd *bd, const char *id, char **cause);
void operation_violation(struct operation *op, const char *what);
/* live.c */
void operation_live(struct operation *op, int final);
int live_write(struct operation *op, struct live_update *u);
/* The mutator live_write applies (arg: struct live_update), for a caller's batch. */
int live_mut(struct json_object *rec, void *arg, char **cause);
void live_update_clear(struct live_update *u);
int live_mut_fanotify_ended(struct json_object *rec, void *arg, char **cause);
void operation_count_effect(struct operation *op);

/* sensors.c */
struct json_object *sensor_op_config(struct operation *op);
int sensor_push(struct boundaryd *bd, struct operation *op, const char *action);
void sensor_register(struct boundaryd *bd, struct conn *c, const struct peer *p,
    struct json_object *params, struct op_reply *r);
void sensor_conn_closed(struct boundaryd *bd, struct conn *c);
void sensor_ack(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r);
void sensor_loss(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r);
void lineage_report(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r);
void sensor_file_record(struct boundaryd *bd, const char *op_id, struct json_object *d);
void file_decision(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r);
void sensor_heartbeat(struct boundaryd *bd, struct conn *c, struct op_reply *r);
void sensor_coverage_lost(struct operation *op, const char *reason);
void sensor_coverage_restored(struct operation *op);
int sensor_fanotify_scope(struct boundaryd *bd, const struct peer *p,
    struct json_object *fan, char **cause);
void operation_create_resolve(struct operation *op, int acked);
void operation_sensor_state(struct operation *op, const char *sensor, const char *state);
struct oprecord_proc;
void operation_merge_lineage(struct operation *op, const struct oprecord_proc *v, size_t n,
    const char *source);

/* The summary of a record that operation.list returns (and the index keeps). */
struct json_object *operation_summary(struct json_object *rec);

/* retain.c: the operations index, operation.list, retention */
void index_init(struct boundaryd *bd);
void index_free(struct boundaryd *bd);
/* (Re)index id from its record (after it ended, or failed to start). */
void index_put(struct boundaryd *bd, int dirfd, const char *id);
void operation_list(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r);
void operation_prune(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r);
void retain_apply(struct boundaryd *bd);
int retain_arm(struct boundaryd *bd);

/* recover.c */
void recover_operations(struct boundaryd *bd);
void recover_note(struct boundaryd *bd, const char *id, const char *reason, const char *detail,
    const char *enforcement);

/* boundaryd.c */
void boundaryd_status(struct boundaryd *bd, struct op_reply *r);
void boundaryd_shutdown(struct boundaryd *bd);

#endif
