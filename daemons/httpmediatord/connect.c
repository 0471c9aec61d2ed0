/*
 * connect.c: the egress of a `gensee run` operation that names hosts: a
 * CONNECT tunnel, without TLS interception, and absolute-form http://
 * requests forwarded in origin form (one per connection, Connection:
 * close), for tools that honour HTTPS_PROXY and HTTP_PROXY.
 *
 * Trust model: the client is the agent (untrusted) and the tunnel's far
 * end an upstream it chose. Threats answered here:
 *  - use from outside the operation: the listener is the operation's
 *    (its table resets every other local socket's TCP to it, nft.c's
 *    connect guard) and it asks for the operation's token in
 *    Proxy-Authorization (407 otherwise), compared in constant time;
 *  - a tunnel to anything but an allowed name: the target must be a DNS
 *    name (an address literal is refused), and boundaryd decides
 *    (mediator.connect) twice: on the name, the port and the method before
 *    anything is resolved (a refused name never reaches the resolver:
 *    no lookup exfiltration), then on every resolved address (one
 *    restricted address refuses the whole answer; a name that resolves to
 *    nothing is a recorded decision too);
 *  - rebinding between check and use: the mediator connects to the one
 *    address boundaryd pinned, never resolves again;
 *  - slow or endless requests: the request head is bounded (8 KiB, 10 s),
 *    tunnels per operation are bounded, an idle tunnel is closed;
 *  - a forwarded head two readers split differently (request smuggling):
 *    connreq.c refuses every ambiguity and rebuilds the head we send.
 * No byte after the head is parsed or kept: what follows a forwarded
 * request goes to the same upstream, as it would through a tunnel to it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <json-c/json.h>
#include <openssl/crypto.h>

#include "connreq.h"
#include "dnsmsg.h"
#include "httpmediatord.h"
#include "log.h"
#include "netpolicy.h"
#include "schema.h"
#include "util.h"

#define CON_HEAD_MAX CONNREQ_HEAD_MAX
#define CON_HEAD_TIMEOUT_SEC 10
#define CON_IDLE_TIMEOUT_SEC 300
#define CON_MAX_TUNNELS 64
#define CON_RELAY_MAX (256 * 1024)

struct conop {
	TAILQ_ENTRY(conop) co_entry;
	struct mediatord *co_md;
	char co_id[80];
	char co_listen[72];
	char co_expect[80];	/* "gensee:" + token: what Basic must decode to */
	struct evconnlistener *co_l;
	int co_seen, co_gone, co_refs;
};

struct ctun {
	TAILQ_ENTRY(ctun) ct_entry;
	struct conop *ct_op;
	struct bufferevent *ct_cli;
	struct bufferevent *ct_up;
	char ct_host[DNSMSG_NAME_MAX + 1];
	uint16_t ct_port;
	struct connreq ct_req;	/* FORWARD: method, path and the upstream head */
	char ct_addrs[16][64];
	size_t ct_naddrs;
	int64_t ct_auth_id;
	int ct_name_stage;	/* ct_auth_id asks about the name alone (nothing resolved yet) */
	int ct_resolving;	/* evdns or the chain lookup holds t: free it from there */
	int ct_in_resolve;	/* inside evdns_getaddrinfo: an answer now is not from DNS */
	struct dnsmsg_chain *ct_chain;	/* the name's CNAME chain, when DNS answered */
	int ct_closing;		/* close once the client's output drained */
};

static TAILQ_HEAD(, conop) con_ops = TAILQ_HEAD_INITIALIZER(con_ops);
static TAILQ_HEAD(, ctun) con_waiting = TAILQ_HEAD_INITIALIZER(con_waiting);

static void
conop_unref(struct conop *op)
{
	if (--op->co_refs > 0 || !op->co_gone)
		return;
	OPENSSL_cleanse(op->co_expect, sizeof(op->co_expect));
	free(op);
}

static void
ctun_free(struct ctun *t)
{
	if (t->ct_auth_id != 0)
		TAILQ_REMOVE(&con_waiting, t, ct_entry);
	if (t->ct_cli != NULL)
		bufferevent_free(t->ct_cli);
	if (t->ct_up != NULL)
		bufferevent_free(t->ct_up);
	connreq_free(&t->ct_req);
	conop_unref(t->ct_op);
	free(t->ct_chain);
	free(t);
}

/* The client is gone: free now unless a resolution will call back. */
static void
ctun_drop(struct ctun *t)
{
	if (t->ct_cli != NULL) {
		bufferevent_free(t->ct_cli);
		t->ct_cli = NULL;
	}
	if (!t->ct_resolving)
		ctun_free(t);
}

static void
con_closing_write_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	ctun_drop(arg);
}

static void
con_closing_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	ctun_drop(arg);
}

/*
 * What would allow a refused request, for the agent and the person reading
 * its output: a flag or policy key, or nothing when no policy can (a
 * restricted address is never reached by name).
 */
static void
con_refusal_hint(const struct ctun *t, const char *code, char *buf, size_t n,
    const char **key)
{
	*key = NULL;
	buf[0] = '\0';
	if (strcmp(code, "name_not_allowed") == 0 && t->ct_host[0] != '\0') {
		*key = "linux.network.allow";
		snprintf(buf, n, "--allow-net %s,tcp,%u", t->ct_host, t->ct_port);
	} else if (strcmp(code, "method_not_allowed") == 0) {
		*key = "linux.network.http_methods";
		snprintf(buf, n, "gensee policy set linux.network.http_methods '[\"%s\"]' "
		    "(with the others it needs)", t->ct_req.cr_method);
	} else if (strcmp(code, "deny_list") == 0) {
		*key = "linux.network.deny";
	} else if (strcmp(code, "address_literal") == 0) {
		*key = "linux.network.allow";
		snprintf(buf, n, "ask for a name, allowed with --allow-net NAME,tcp,PORT");
	} else if (strcmp(code, "https_needs_connect") == 0) {
		snprintf(buf, n, "send https:// through CONNECT (HTTPS_PROXY)");
	}
}

/* An HTTP refusal with a JSON body naming the rule, then close once it is written. */
static void
ctun_refuse(struct ctun *t, const char *status, const char *code)
{
	struct json_object *b;
	const char *key, *text;
	char hint[320];

	if (t->ct_cli == NULL) {
		ctun_drop(t);
		return;
	}
	log_info("%s: %s %s:%u refused: %s", t->ct_op->co_id, t->ct_req.cr_method[0] ?
	    t->ct_req.cr_method : "request", t->ct_host[0] ? t->ct_host : "?", t->ct_port, code);
	con_refusal_hint(t, code, hint, sizeof(hint), &key);
	b = json_object_new_object();
	json_object_object_add(b, "error", json_object_new_string(code));
	json_object_object_add(b, "status", json_object_new_int(atoi(status)));
	json_object_object_add(b, "method", t->ct_req.cr_method[0] ?
	    json_object_new_string(t->ct_req.cr_method) : NULL);
	json_object_object_add(b, "host", t->ct_host[0] ? json_object_new_string(t->ct_host) :
	    NULL);
	json_object_object_add(b, "port", t->ct_port ? json_object_new_int(t->ct_port) : NULL);
	json_object_object_add(b, "policy_key", key ? json_object_new_string(key) : NULL);
	json_object_object_add(b, "allow_with", hint[0] ? json_object_new_string(hint) : NULL);
	json_object_object_add(b, "by", json_object_new_string("gensee egress"));
	text = json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN);
	evbuffer_add_printf(bufferevent_get_output(t->ct_cli), "HTTP/1.1 %s\r\n"
	    "X-Gensee-Refusal: %s\r\n%sContent-Type: application/json\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n%s\n", status, code, strncmp(status, "407", 3) == 0 ?
	    "Proxy-Authenticate: Basic realm=\"gensee\"\r\n" : "", strlen(text) + 1, text);
	json_object_put(b);
	bufferevent_disable(t->ct_cli, EV_READ);
	bufferevent_setcb(t->ct_cli, NULL, con_closing_write_cb, con_closing_event_cb, t);
	bufferevent_enable(t->ct_cli, EV_WRITE);
}

static void con_relay_read_cb(struct bufferevent *bev, void *arg);
static void con_ask(struct ctun *t, struct json_object *p, int name_stage);
static void con_resolve(struct ctun *t);
static void con_chain_cb(void *arg, int ok, const struct dnsmsg_chain *c);
static void con_ask_addresses(struct ctun *t);

static void con_relay_event_cb(struct bufferevent *bev, short what, void *arg);

static void
con_relay_drained_cb(struct bufferevent *bev, void *arg)
{
	struct ctun *t = arg;
	struct bufferevent *other = bev == t->ct_cli ? t->ct_up : t->ct_cli;

	/* The slow side caught up: read from the other again. */
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	bufferevent_setcb(bev, con_relay_read_cb, NULL, con_relay_event_cb, t);
	bufferevent_enable(other, EV_READ);
}

static void
con_relay_read_cb(struct bufferevent *bev, void *arg)
{
	struct ctun *t = arg;
	struct bufferevent *other = bev == t->ct_cli ? t->ct_up : t->ct_cli;
	struct evbuffer *out = bufferevent_get_output(other);

	evbuffer_add_buffer(out, bufferevent_get_input(bev));
	if (evbuffer_get_length(out) >= CON_RELAY_MAX) {
		/* Bounded memory: stop reading until the other side drains. */
		bufferevent_disable(bev, EV_READ);
		bufferevent_setwatermark(other, EV_WRITE, CON_RELAY_MAX / 2, CON_RELAY_MAX);
		/*
		 * Keep the event callback: without it an EOF, error or idle
		 * timeout of this side after a stall was never handled and the
		 * tunnel (one of the operation's 64) stayed forever.
		 */
		bufferevent_setcb(other, con_relay_read_cb, con_relay_drained_cb, con_relay_event_cb,
		    t);
	}
}

static void
con_flushed_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	ctun_free(arg);
}

static void
con_flush_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	ctun_free(arg);
}

/*
 * Either side closing ends the tunnel; what the closing side sent last is
 * still written to the other before it closes too.
 */
static void
con_relay_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct ctun *t = arg;
	struct bufferevent **self = bev == t->ct_cli ? &t->ct_cli : &t->ct_up;
	struct bufferevent *other = bev == t->ct_cli ? t->ct_up : t->ct_cli;

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	if (!(what & BEV_EVENT_TIMEOUT) && other != NULL &&
	    evbuffer_get_length(bufferevent_get_output(other)) > 0) {
		bufferevent_free(bev);
		*self = NULL;
		bufferevent_disable(other, EV_READ);
		bufferevent_setwatermark(other, EV_WRITE, 0, 0);
		bufferevent_setcb(other, NULL, con_flushed_cb, con_flush_event_cb, t);
		return;
	}
	ctun_free(t);
}

static void
con_upstream_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct ctun *t = arg;
	struct timeval idle = { CON_IDLE_TIMEOUT_SEC, 0 };

	(void)bev;
	if (!(what & BEV_EVENT_CONNECTED)) {
		bufferevent_free(t->ct_up);
		t->ct_up = NULL;
		ctun_refuse(t, "502 Bad Gateway", "upstream_failed");
		return;
	}
	if (t->ct_cli == NULL) {
		ctun_free(t);
		return;
	}
	if (t->ct_req.cr_kind == CONNREQ_FORWARD) {
		/* Our rebuilt head, never the client's; the answer is relayed as it comes. */
		evbuffer_add(bufferevent_get_output(t->ct_up), t->ct_req.cr_upstream,
		    t->ct_req.cr_upstream_len);
		connreq_free(&t->ct_req);
	} else {
		evbuffer_add_printf(bufferevent_get_output(t->ct_cli),
		    "HTTP/1.1 200 Connection established\r\n\r\n");
	}
	/* Bytes the client sent after its head go through too (a body, or the tunnel's). */
	evbuffer_add_buffer(bufferevent_get_output(t->ct_up), bufferevent_get_input(t->ct_cli));
	bufferevent_setcb(t->ct_cli, con_relay_read_cb, NULL, con_relay_event_cb, t);
	bufferevent_setcb(t->ct_up, con_relay_read_cb, NULL, con_relay_event_cb, t);
	bufferevent_set_timeouts(t->ct_cli, &idle, NULL);
	bufferevent_set_timeouts(t->ct_up, &idle, NULL);
	bufferevent_setwatermark(t->ct_cli, EV_READ, 0, 0);
	bufferevent_enable(t->ct_cli, EV_READ | EV_WRITE);
	bufferevent_enable(t->ct_up, EV_READ | EV_WRITE);
	log_info("%s: %s %s:%u %s", t->ct_op->co_id, t->ct_req.cr_method, t->ct_host, t->ct_port,
	    t->ct_req.cr_kind == CONNREQ_FORWARD ? "forwarded" : "tunnelled");
}

/* boundaryd's answer to mediator.connect; 0 when id is not one of ours. */
int
connect_authorized(struct mediatord *md, int64_t id, struct json_object *result,
    const char *error_code)
{
	struct ctun *t;
	const char *decision, *reason, *addr;
	uint8_t a[16];
	int fam;

	TAILQ_FOREACH(t, &con_waiting, ct_entry)
		if (t->ct_auth_id == id)
			break;
	if (t == NULL)
		return 0;
	TAILQ_REMOVE(&con_waiting, t, ct_entry);
	t->ct_auth_id = 0;
	decision = result ? schema_string(result, "decision") : NULL;
	reason = result ? schema_string(result, "reason") : NULL;
	addr = result ? schema_string(result, "address") : NULL;
	if (t->ct_name_stage) {
		t->ct_name_stage = 0;
		if (decision == NULL || strcmp(decision, "allow") != 0)
			ctun_refuse(t, "403 Forbidden", reason ? reason : error_code ? error_code :
			    "authority_error");
		else
			con_resolve(t);
		return 1;
	}
	if (reason != NULL && strcmp(reason, "no_addresses") == 0) {
		ctun_refuse(t, "502 Bad Gateway", "resolve_failed");
		return 1;
	}
	if (decision == NULL || strcmp(decision, "allow") != 0 || addr == NULL) {
		ctun_refuse(t, "403 Forbidden", reason ? reason : error_code ? error_code :
		    "authority_error");
		return 1;
	}
	/* Pinned: boundaryd's address must be one we resolved. */
	int ours = 0;
	for (size_t i = 0; i < t->ct_naddrs; i++)
		ours |= strcmp(t->ct_addrs[i], addr) == 0;
	if (!ours || netpolicy_parse_addr(addr, &fam, a) != 0 || t->ct_cli == NULL) {
		ctun_refuse(t, "403 Forbidden", "authority_error");
		return 1;
	}
	struct sockaddr_storage ss;
	socklen_t sl;
	memset(&ss, 0, sizeof(ss));
	if (fam == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(t->ct_port);
		memcpy(&s4->sin_addr, a, 4);
		sl = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(t->ct_port);
		memcpy(&s6->sin6_addr, a, 16);
		sl = sizeof(*s6);
	}
	struct timeval tv = { CON_HEAD_TIMEOUT_SEC, 0 };
	t->ct_up = bufferevent_socket_new(md->md_base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (t->ct_up == NULL) {
		ctun_refuse(t, "502 Bad Gateway", "upstream_failed");
		return 1;
	}
	bufferevent_setcb(t->ct_up, NULL, NULL, con_upstream_event_cb, t);
	bufferevent_set_timeouts(t->ct_up, &tv, &tv);
	if (bufferevent_socket_connect(t->ct_up, (struct sockaddr *)&ss, (int)sl) != 0) {
		bufferevent_free(t->ct_up);
		t->ct_up = NULL;
		ctun_refuse(t, "502 Bad Gateway", "upstream_failed");
	}
	return 1;
}

static void
con_resolved_cb(int err, struct evutil_addrinfo *res, void *arg)
{
	struct ctun *t = arg;

	t->ct_resolving = 0;
	if (t->ct_cli == NULL) {
		if (res != NULL)
			evutil_freeaddrinfo(res);
		ctun_free(t);
		return;
	}
	for (struct evutil_addrinfo *ai = res; err == 0 && ai != NULL; ai = ai->ai_next) {
		if (t->ct_naddrs == nitems(t->ct_addrs))
			break;
		const void *src = ai->ai_family == AF_INET ?
		    (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr :
		    (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
		if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
		    inet_ntop(ai->ai_family, src, t->ct_addrs[t->ct_naddrs], 64) != NULL)
			t->ct_naddrs++;
	}
	if (res != NULL)
		evutil_freeaddrinfo(res);
	/*
	 * An answer from DNS (not the hosts file, not a literal: those come
	 * while evdns_getaddrinfo runs) may be an alias: every name of its
	 * chain goes to boundaryd, which refuses one that is not allowed
	 * (cname_not_allowed), as for the DNS proxy. Without the chain there
	 * is no answer to use: the addresses are dropped (no_addresses).
	 */
	if (!t->ct_in_resolve && t->ct_naddrs > 0) {
		uint16_t qtype = strchr(t->ct_addrs[0], ':') != NULL ? DNS_TYPE_AAAA : DNS_TYPE_A;
		t->ct_resolving = 1;
		if (dns_chain_lookup(t->ct_op->co_md, t->ct_host, qtype, con_chain_cb, t) != NULL)
			return;
		t->ct_resolving = 0;
		t->ct_naddrs = 0;
	}
	con_ask_addresses(t);
}

/* The chain of an answer from DNS; the addresses are evdns's. */
static void
con_chain_cb(void *arg, int ok, const struct dnsmsg_chain *c)
{
	struct ctun *t = arg;

	t->ct_resolving = 0;
	if (t->ct_cli == NULL) {
		ctun_free(t);
		return;
	}
	if (!ok || c->dc_nnames == 0 || (t->ct_chain = malloc(sizeof(*c))) == NULL) {
		t->ct_naddrs = 0;	/* fail closed: boundaryd records no_addresses */
	} else {
		memcpy(t->ct_chain, c, sizeof(*c));
	}
	con_ask_addresses(t);
}

/*
 * Every address goes to boundaryd: one restricted refuses them all. None
 * (the name does not resolve) too: a decision, and evidence.
 */
static void
con_ask_addresses(struct ctun *t)
{
	struct json_object *p = json_object_new_object(), *addrs = json_object_new_array();

	for (size_t i = 0; i < t->ct_naddrs; i++)
		json_object_array_add(addrs, json_object_new_string(t->ct_addrs[i]));
	json_object_object_add(p, "addresses", addrs);
	if (t->ct_chain != NULL && t->ct_naddrs > 0) {
		struct json_object *names = json_object_new_array();
		for (size_t i = 0; i < t->ct_chain->dc_nnames; i++)
			json_object_array_add(names, json_object_new_string(
			    t->ct_chain->dc_names[i]));
		json_object_object_add(p, "names", names);
	}
	con_ask(t, p, 0);
}

/*
 * Ask boundaryd (mediator.connect) about t, with p holding the addresses
 * (or, name_stage, nothing resolved yet: stage "name").
 */
static void
con_ask(struct ctun *t, struct json_object *p, int name_stage)
{
	int64_t id;

	json_object_object_add(p, "operation_id", json_object_new_string(t->ct_op->co_id));
	json_object_object_add(p, "host", json_object_new_string(t->ct_host));
	json_object_object_add(p, "port", json_object_new_int(t->ct_port));
	if (name_stage) {
		json_object_object_add(p, "stage", json_object_new_string("name"));
		json_object_object_add(p, "addresses", json_object_new_array());
	}
	if (t->ct_req.cr_kind == CONNREQ_FORWARD) {
		char url[DNSMSG_NAME_MAX + CONNREQ_PATH_MAX + 32];
		/* The query stays out of the evidence: it often carries tokens. */
		if (t->ct_port == 80)
			snprintf(url, sizeof(url), "http://%s%s", t->ct_host, t->ct_req.cr_path);
		else
			snprintf(url, sizeof(url), "http://%s:%u%s", t->ct_host, t->ct_port,
			    t->ct_req.cr_path);
		json_object_object_add(p, "method", json_object_new_string(t->ct_req.cr_method));
		json_object_object_add(p, "url", json_object_new_string(url));
	}
	if (mediatord_send(t->ct_op->co_md, "mediator.connect", p, &id) != 0) {
		ctun_refuse(t, "503 Service Unavailable", "authority_unavailable");
		return;
	}
	t->ct_auth_id = id;
	t->ct_name_stage = name_stage;
	TAILQ_INSERT_TAIL(&con_waiting, t, ct_entry);
}

/* The name was allowed: resolve it (hosts file, then DNS), then ask again. */
static void
con_resolve(struct ctun *t)
{
	struct evutil_addrinfo hints;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	t->ct_resolving = 1;
	t->ct_in_resolve = 1;
	/* NULL: answered at once (the callback has run, or failed): nothing more here. */
	(void)evdns_getaddrinfo(t->ct_op->co_md->md_dns, t->ct_host, NULL, &hints, con_resolved_cb,
	    t);
	t->ct_in_resolve = 0;
}

/* The request head, then resolution and boundaryd's decision (connreq.c parses it). */
static void
con_head_cb(struct bufferevent *bev, void *arg)
{
	struct ctun *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	const char *code = NULL;
	char *head;
	int status = 0, rc;

	if (end.pos < 0) {
		if (evbuffer_get_length(in) > CON_HEAD_MAX)
			ctun_refuse(t, "431 Request Header Fields Too Large", "head_too_large");
		return;
	}
	if ((size_t)end.pos + 4 > CON_HEAD_MAX || (head = malloc((size_t)end.pos + 1)) == NULL) {
		ctun_refuse(t, "431 Request Header Fields Too Large", "head_too_large");
		return;
	}
	evbuffer_remove(in, head, (size_t)end.pos);
	head[end.pos] = '\0';
	evbuffer_drain(in, 4);
	/*
	 * Reading stays on (into the buffer, bounded by the watermark) so the
	 * head's timeout still runs while the name resolves and boundaryd
	 * decides: a silent boundaryd closes the request at 10 s.
	 */
	bufferevent_setcb(bev, NULL, NULL, con_closing_event_cb, t);
	rc = connreq_parse(head, (size_t)end.pos, t->ct_op->co_expect, &t->ct_req, &status, &code);
	OPENSSL_cleanse(head, (size_t)end.pos);
	free(head);
	/* What was parsed before a refusal still names it (host, port, method). */
	util_strlcpy(t->ct_host, t->ct_req.cr_host, sizeof(t->ct_host));
	t->ct_port = t->ct_req.cr_port;
	if (rc != 0) {
		ctun_refuse(t, status == 407 ? "407 Proxy Authentication Required" : status == 403 ?
		    "403 Forbidden" : status == 414 ? "414 URI Too Long" : status == 431 ?
		    "431 Request Header Fields Too Large" : "400 Bad Request", code);
		return;
	}
	/* The name first: a name boundaryd refuses is never resolved. */
	con_ask(t, json_object_new_object(), 1);
}

static void
con_accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
    void *arg)
{
	struct conop *op = arg;
	struct ctun *t;
	struct timeval tv = { CON_HEAD_TIMEOUT_SEC, 0 };

	(void)l;
	(void)sa;
	(void)salen;
	if (op->co_refs >= CON_MAX_TUNNELS || (t = calloc(1, sizeof(*t))) == NULL) {
		log_warnx("%s: CONNECT: too many tunnels; refused", op->co_id);
		close(fd);
		return;
	}
	t->ct_op = op;
	op->co_refs++;
	if ((t->ct_cli = bufferevent_socket_new(op->co_md->md_base, fd,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		close(fd);
		ctun_free(t);
		return;
	}
	bufferevent_setcb(t->ct_cli, con_head_cb, NULL, con_closing_event_cb, t);
	bufferevent_set_timeouts(t->ct_cli, &tv, &tv);
	bufferevent_setwatermark(t->ct_cli, EV_READ, 0, CON_HEAD_MAX + 1);
	bufferevent_enable(t->ct_cli, EV_READ | EV_WRITE);
}

static void
conop_retire(struct conop *op)
{
	TAILQ_REMOVE(&con_ops, op, co_entry);
	if (op->co_l != NULL)
		evconnlistener_free(op->co_l);
	op->co_l = NULL;
	op->co_gone = 1;
	op->co_refs++;
	conop_unref(op);
}

void
connect_apply_config(struct mediatord *md, struct json_object *ops)
{
	struct conop *op, *next;

	TAILQ_FOREACH(op, &con_ops, co_entry)
		op->co_seen = 0;
	for (size_t i = 0; i < json_object_array_length(ops); i++) {
		struct json_object *o = json_object_array_get_idx(ops, i);
		const char *id = schema_string(o, "operation_id");
		struct json_object *c = schema_child(o, "connect");
		const char *listen = c ? schema_string(c, "listen") : NULL;
		const char *token = c ? schema_string(c, "token") : NULL;
		struct sockaddr_storage ss;
		socklen_t sl;
		if (id == NULL || listen == NULL || token == NULL || strlen(id) >= sizeof(op->co_id) ||
		    strlen(token) != 64 || netpolicy_listen_sockaddr(listen, &ss, &sl) != 0)
			continue;
		TAILQ_FOREACH(op, &con_ops, co_entry)
			if (strcmp(op->co_id, id) == 0)
				break;
		if (op != NULL) {
			op->co_seen = 1;
			continue;
		}
		if ((op = calloc(1, sizeof(*op))) == NULL)
			continue;
		op->co_md = md;
		util_strlcpy(op->co_id, id, sizeof(op->co_id));
		util_strlcpy(op->co_listen, listen, sizeof(op->co_listen));
		snprintf(op->co_expect, sizeof(op->co_expect), "gensee:%s", token);
		op->co_l = evconnlistener_new_bind(md->md_base, con_accept_cb, op,
		    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 16,
		    (struct sockaddr *)&ss, (int)sl);
		if (op->co_l == NULL) {
			log_warn("%s: CONNECT: cannot listen on %s", id, listen);
			OPENSSL_cleanse(op->co_expect, sizeof(op->co_expect));
			free(op);
			continue;
		}
		op->co_seen = 1;
		TAILQ_INSERT_TAIL(&con_ops, op, co_entry);
		log_info("%s: CONNECT egress on %s", id, listen);
	}
	for (op = TAILQ_FIRST(&con_ops); op != NULL; op = next) {
		next = TAILQ_NEXT(op, co_entry);
		if (!op->co_seen) {
			log_info("%s: CONNECT egress on %s closed", op->co_id, op->co_listen);
			conop_retire(op);
		}
	}
}

void
connect_channel_lost(struct mediatord *md)
{
	struct ctun *t;
	(void)md;
	while ((t = TAILQ_FIRST(&con_waiting)) != NULL) {
		TAILQ_REMOVE(&con_waiting, t, ct_entry);
		t->ct_auth_id = 0;
		ctun_refuse(t, "503 Service Unavailable", "authority_unavailable");
	}
}

void
connect_free_all(struct mediatord *md)
{
	struct conop *op;
	connect_channel_lost(md);
	while ((op = TAILQ_FIRST(&con_ops)) != NULL)
		conop_retire(op);
}
