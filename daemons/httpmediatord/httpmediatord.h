/*
 * httpmediatord.h: gensee-httpmediatord, the confined HTTP mediator.
 *
 * Trust model: the mediator parses HTTP from untrusted clients and
 * untrusted servers, so it is built to be compromisable without harm: it
 * runs as its own unprivileged user with no capabilities, no_new_privs, a
 * seccomp allowlist and Landlock (read its CA bundle and runtime dir,
 * nothing else), and it holds no authority. Every request is authorized by
 * boundaryd over mediator.sock; no answer, a lost channel or any error
 * means the request is refused.
 */
#ifndef GENSEE_HTTPMEDIATORD_H
#define GENSEE_HTTPMEDIATORD_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "medreq.h"

struct event_base;
struct event;
struct evdns_base;
struct evhttp;
struct evhttp_bound_socket;
struct evhttp_request;
struct bufferevent;
struct evbuffer_cb_entry;
struct json_object;
struct ssl_ctx_st;

#define MEDIATORD_NAME "gensee-httpmediatord"
#define MEDIATORD_DEFAULT_USER "gensee-mediator"
#define MEDIATORD_DEFAULT_CA "/etc/ssl/certs/ca-certificates.crt"
/* boundaryd must answer an authorization within this; silence is a refusal. */
#define MEDIATORD_AUTH_TIMEOUT_SEC 5
/* How often the proxy list is asked for again (new operations, ended ones). */
#define MEDIATORD_REFRESH_MS 500
#define MEDIATORD_RECONNECT_MS 500
#define MEDIATORD_MAX_ADDRESSES 32
#define MEDIATORD_MAX_HEADERS_SIZE (64 * 1024)
/*
 * Client connection limits (--max-connections, --max-connections-per-client,
 * --head-timeout): open accepted proxy connections in total and per client
 * address, and the seconds a request head may take from its first byte to
 * its blank line. Threat: one client holding thousands of half-sent heads
 * (memory, descriptors) until nothing else is served.
 */
#define MEDIATORD_DEFAULT_MAX_CONNS 1024
/* Connections accepted in one go before the limits are applied to them. */
#define MEDIATORD_ACCEPT_BURST 8
#define MEDIATORD_DEFAULT_MAX_CONNS_CLIENT 64
#define MEDIATORD_DEFAULT_HEAD_TIMEOUT 10
#define MEDIATORD_MAX_OPS 256
/* proxy.* defaults when the config leaves them out (seed 001). */
#define MEDIATORD_DEFAULT_MAX_REQUEST (16LL * 1024 * 1024)
#define MEDIATORD_DEFAULT_MAX_RESPONSE (128LL * 1024 * 1024)
#define MEDIATORD_DEFAULT_CONNECT_TIMEOUT 10
#define MEDIATORD_DEFAULT_IO_TIMEOUT 30
#define MEDIATORD_DEFAULT_MAX_REDIRECTS 3
/* A config asking for more is not served (boundaryd bounds the hops too). */
#define MEDIATORD_MAX_REDIRECTS 20

/*
 * One accepted client connection of a proxy. evhttp owns the connection.
 * proxy_conn_new makes its bufferevent and holds a reference on it until
 * proxy_conns_attach (the next loop turn, or sooner) finds the
 * evhttp_connection behind it and sets its close callback; from then on
 * the close callback, which evhttp runs exactly once however the
 * connection ends, removes it here.
 */
struct medconn {
	TAILQ_ENTRY(medconn) mc_entry;
	struct medop *mc_mo;
	struct bufferevent *mc_bev;		/* until attached (our reference) */
	struct evhttp_connection *mc_evcon;	/* once attached */
	/*
	 * Strict framing (proxy.c, lib/httphead.c): what the client sent is
	 * taken out of the bufferevent's input as it arrives (mc_hold) and
	 * put back for evhttp only once checked. mc_cbev is that bufferevent
	 * (not a reference: it lives as long as the connection, as mc does).
	 */
	struct bufferevent *mc_cbev;
	struct evbuffer *mc_hold;		/* read, not yet checked */
	struct evbuffer *mc_tmp;
	struct evbuffer_cb_entry *mc_incb;	/* proxy_input_cb on its input */
	int mc_busy;				/* our own change of the input */
	int mc_state;				/* enum medconn_state (proxy.c) */
	uint64_t mc_left;			/* body or chunk bytes still to pass */
	uint64_t mc_chunked;			/* chunk data of this request so far */
	size_t mc_scanned;			/* head bytes checked so far (MC_HEAD) */
	struct event *mc_head_timer;		/* --head-timeout, from a head's first byte */
	const char *mc_refused;			/* the framing refusal evhttp answers */
	uint64_t mc_heads;			/* heads passed to evhttp (the stand-in too) */
	uint64_t mc_seen;			/* requests evhttp handed to proxy_request_cb */
	uint64_t mc_standin;			/* which head is the stand-in, 0: none */
	int mc_refused_status;
	int mc_answer_here;			/* refused in a body: the close writes the answer */
	char mc_method[16];
	char mc_peer[64];			/* the client address, once attached */
};
TAILQ_HEAD(medconn_list, medconn);

/* One operation's proxy, as boundaryd configured it. */
struct medop {
	TAILQ_ENTRY(medop) mo_entry;
	struct mediatord *mo_md;
	char mo_id[80];
	char mo_listen[72];
	int mo_client_family;
	uint8_t mo_client_addr[16];
	char mo_client_str[64];
	int64_t mo_max_request;
	int64_t mo_max_response;
	int mo_connect_timeout;
	int mo_io_timeout;
	int64_t mo_max_redirects;
	struct evhttp *mo_http;
	struct evhttp_bound_socket *mo_bound;
	int mo_seen;		/* in the last mediator.config answer */
	int mo_gone;		/* no longer configured: freed with its last request */
	int mo_inflight;	/* requests not yet answered */
	int mo_txn;		/* proxy.transaction: a name is resolved only once it is in scope */
	struct medconn_list mo_conns;	/* every accepted client connection still open */
	size_t mo_nconns;
	struct event *mo_attach;	/* proxy_conns_attach, made active at each accept */
	size_t mo_unattached;	/* accepted since the last proxy_conns_attach */
	int mo_accept_paused;	/* the listener is off until proxy_conns_attach runs */
};
TAILQ_HEAD(medop_list, medop);

/* One client request in flight. */
struct mreq {
	TAILQ_ENTRY(mreq) mr_entry;	/* waiting for boundaryd */
	struct mediatord *mr_md;
	struct medop *mr_mo;
	struct evhttp_request *mr_client;	/* NULL once answered */
	char mr_op[80];
	char mr_client_str[64];
	char mr_method[16];
	struct medreq_target mr_t;
	char mr_addrs[MEDIATORD_MAX_ADDRESSES][64];
	size_t mr_naddrs;
	int64_t mr_auth_id;
	int mr_waiting;		/* in md_pending */
	struct event *mr_timer;	/* authorization timeout, then the upstream deadline */
	struct evhttp_request *mr_up;	/* the upstream request, while it runs */
	int mr_up_error;	/* enum evhttp_request_error + 1, 0 when none */
	int64_t mr_max_response;
	int mr_connect_timeout;
	int mr_io_timeout;
	int64_t mr_max_redirects;
	int mr_hop;		/* 0: the client's target; n: the nth redirect */
	/* proxy.transaction (txnhook.c): the reservation this request holds */
	TAILQ_ENTRY(mreq) mr_all;	/* md_all: every request, for transaction.closed */
	char mr_txid[72];
	int64_t mr_reservation;		/* 0: not transactional */
	char mr_decision[80];
	int mr_completing;		/* waiting for mediator.complete's answer */
	int mr_resolving;		/* waiting for the pre-resolution scope check */
	/* A host credential boundaryd injects (mediator lease): never logged, zeroed on free. */
	char mr_inject_header[72];
	char *mr_inject_value;
	/* Methods other than GET/HEAD: the client's commit token and the body's digest. */
	char *mr_token;
	char mr_body_sha256[65];
	int64_t mr_req_bytes;
	int mr_code;			/* the held response */
	char mr_code_line[64];
	struct evbuffer *mr_body;
	struct json_object *mr_headers;	/* allowlisted response headers, [[k, v], ...] */
};
TAILQ_HEAD(mreq_list, mreq);

struct mediatord {
	struct event_base *md_base;
	struct evdns_base *md_dns;
	struct ssl_ctx_st *md_tls;	/* https upstreams: the CA bundle, TLS 1.2 at least */
	char md_runtime_dir[4096];
	struct bufferevent *md_chan;	/* mediator.sock, NULL while down */
	int64_t md_next_id;
	int64_t md_config_id;		/* the mediator.config in flight, 0 when none */
	int md_config_again;		/* boundaryd said config.changed meanwhile */
	struct event *md_refresh;
	struct medop_list md_ops;
	struct mreq_list md_pending;
	struct mreq_list md_all;
	int md_nops;
	size_t md_max_conns;		/* accepted proxy connections, all operations */
	size_t md_max_conns_client;	/* the same, per client address */
	int md_head_timeout;		/* seconds */
	size_t md_nconns;		/* open (attached) ones now */
	uint64_t md_conns_refused;	/* closed at once for a limit, since start */
};

/* httpmediatord.c: the boundaryd channel */
int mediatord_send(struct mediatord *md, const char *method, struct json_object *params,
    int64_t *id);

/* proxy.c */
void proxy_apply_config(struct mediatord *md, struct json_object *ops);
void proxy_authorized(struct mediatord *md, int64_t id, struct json_object *result,
    const char *error_code);
void proxy_channel_lost(struct mediatord *md);
void proxy_free_all(struct mediatord *md);
void proxy_start(struct mreq *mr);
void proxy_resolve(struct mreq *mr);
void proxy_fail(struct mreq *mr, int status, const char *reason, const char *code);
void proxy_mreq_free(struct mreq *mr);

/* redirect.c */
int redirect_wanted(const struct mreq *mr);
void redirect_follow(struct mreq *mr, const char *location);

/* dns.c: the per-operation DNS proxy (the config's dns section) */
int dns_init(const char *resolv_conf);
/*
 * The CNAME chain of name (qtype DNS_TYPE_A or DNS_TYPE_AAAA) from the
 * proxy's upstream: cb gets ok and the chain (names[0] is name), or !ok and
 * NULL for no usable reply. NULL when no query could be sent (cb is not
 * called). dns_chain_cancel() drops one whose cb has not run.
 */
struct dnschain;
struct dnsmsg_chain;
typedef void dnschain_cb(void *arg, int ok, const struct dnsmsg_chain *c);
struct dnschain *dns_chain_lookup(struct mediatord *md, const char *name, uint16_t qtype,
    dnschain_cb *cb, void *arg);
void dns_chain_cancel(struct dnschain *q);
void dns_apply_config(struct mediatord *md, struct json_object *ops);
int dns_authorized(struct mediatord *md, int64_t id, struct json_object *result,
    const char *error_code);
void dns_channel_lost(struct mediatord *md);
void dns_free_all(struct mediatord *md);

/* connect.c: the CONNECT egress of a gensee run operation that names hosts */
void connect_apply_config(struct mediatord *md, struct json_object *ops);
int connect_authorized(struct mediatord *md, int64_t id, struct json_object *result,
    const char *error_code);
void connect_channel_lost(struct mediatord *md);
void connect_free_all(struct mediatord *md);
/* boundaryd's event: the operation's transaction closed (revoked, ended, expired). */
void proxy_transaction_closed(struct mediatord *md, struct json_object *params);
/* boundaryd's event: one of the operation's mediator leases was revoked or expired. */
void proxy_lease_closed(struct mediatord *md, struct json_object *params);

#endif
