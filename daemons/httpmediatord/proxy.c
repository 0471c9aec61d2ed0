/*
 * proxy.c: the mediator's HTTP side (libevent evhttp, server and client).
 *
 * Trust model: clients and upstream servers are both untrusted. A request
 * goes through, in order: the peer address must be the operation's
 * proxy.client_address (else 403 and the connection closed); CONNECT is
 * refused (405: there is no tunnel); the target must be absolute-form
 * http:// or https:// (origin-form 400; https is TLS from the mediator to
 * the upstream, hostname-verified against the CA bundle); the host is
 * resolved here and every address is sent to boundaryd, which answers
 * allow with one pinned address or deny. Only then is a socket opened,
 * to the pinned address and nowhere else (no second resolution: a DNS
 * answer that changes cannot move the connection). Client credentials and
 * hop-by-hop headers never go upstream; only allowlisted response headers
 * come back. The target is parsed by httpurl (canonical form, stable
 * refusal codes) and the Host header must name the same authority.
 * Redirects of GET and HEAD are followed here (redirect.c), up to
 * proxy.max_redirects, each hop parsed, resolved and authorized by
 * boundaryd like a new request before its socket opens; the 3xx itself
 * never reaches the client.
 *
 * With proxy.transaction, boundaryd's allow carries a reservation: the
 * response is held here (never relayed) until boundaryd, told its byte
 * count with mediator.complete, says it may be delivered; a response that
 * finishes after the transaction was revoked, ended or expired is refused.
 * A held GET/HEAD redirect is accounted the same way and, once boundaryd
 * agrees, followed instead of delivered: the next hop names the
 * transaction and its hop number, is scope-checked before its name is
 * resolved and consumes a request of its own (redirect.c).
 * boundaryd's transaction.closed and mediator_lease.closed events shut
 * down every accepted client connection of the operation at once: upstream
 * requests are cancelled (their sockets close), held requests are refused
 * with Connection: close, and every other connection (idle, or a request
 * still being read) is closed (proxy_close_operation).
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
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <json-c/json.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "committoken.h"
#include "httphead.h"
#include "httpmediatord.h"
#include "log.h"
#include "medreq.h"
#include "netpolicy.h"
#include "schema.h"
#include "util.h"

static void proxy_upstream(struct mreq *mr, const char *addr);
static void proxy_completed(struct mreq *mr, struct json_object *result);
static void proxy_resolve_checked(struct mreq *mr, struct json_object *result,
    const char *error_code);
static void proxy_txn_hold(struct mreq *mr, struct evhttp_request *resp, int code);
static struct medconn *proxy_conn_of(struct medop *mo, struct evhttp_connection *evcon);

static const char *
proxy_method_name(enum evhttp_cmd_type t)
{
	switch (t) {
	case EVHTTP_REQ_GET:
		return "GET";
	case EVHTTP_REQ_HEAD:
		return "HEAD";
	case EVHTTP_REQ_POST:
		return "POST";
	case EVHTTP_REQ_PUT:
		return "PUT";
	case EVHTTP_REQ_DELETE:
		return "DELETE";
	case EVHTTP_REQ_OPTIONS:
		return "OPTIONS";
	case EVHTTP_REQ_TRACE:
		return "TRACE";
	case EVHTTP_REQ_CONNECT:
		return "CONNECT";
	case EVHTTP_REQ_PATCH:
		return "PATCH";
	}
	return NULL;
}

static int
proxy_method_cmd(const char *m)
{
	static const struct { const char *n; enum evhttp_cmd_type t; } map[] = {
		{ "GET", EVHTTP_REQ_GET }, { "HEAD", EVHTTP_REQ_HEAD }, { "POST", EVHTTP_REQ_POST },
		{ "PUT", EVHTTP_REQ_PUT }, { "DELETE", EVHTTP_REQ_DELETE },
		{ "PATCH", EVHTTP_REQ_PATCH }, { "OPTIONS", EVHTTP_REQ_OPTIONS },
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(map[i].n, m) == 0)
			return (int)map[i].t;
	return -1;
}

/*
 * Hand a transaction's reservation back unused: mediator.complete with no
 * response (counted as an upstream error, nothing delivered). The answer is
 * not waited for: no request is left to deliver.
 */
static void
proxy_release_reservation(struct mediatord *md, const char *op, const char *txid,
    int64_t reservation, const char *decision_id)
{
	struct json_object *params = json_object_new_object();
	int64_t id;

	json_object_object_add(params, "operation_id", json_object_new_string(op));
	json_object_object_add(params, "transaction_id", json_object_new_string(txid));
	json_object_object_add(params, "reservation", json_object_new_int64(reservation));
	json_object_object_add(params, "response_bytes", json_object_new_int64(0));
	json_object_object_add(params, "upstream_error", json_object_new_boolean(1));
	json_object_object_add(params, "status", json_object_new_int(0));
	if (decision_id != NULL && decision_id[0] != '\0')
		json_object_object_add(params, "decision_id", json_object_new_string(decision_id));
	if (mediatord_send(md, "mediator.complete", params, &id) != 0)
		log_warnx("%s: reservation %lld of %s not handed back: no channel", op,
		    (long long)reservation, txid);
}

/* A refusal to the client: a stable code as the body, and the status. */
static void
proxy_refuse(struct evhttp_request *req, int status, const char *reason, const char *code,
    int close_conn)
{
	struct evbuffer *b = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "Content-Type", "text/plain");
	evhttp_add_header(h, "X-Gensee-Refusal", code);
	if (close_conn)
		evhttp_add_header(h, "Connection", "close");
	if (b != NULL)
		evbuffer_add_printf(b, "gensee-httpmediatord: %s\n", code);
	evhttp_send_reply(req, status, reason, b);
	if (b != NULL)
		evbuffer_free(b);
}

static void proxy_medop_free(struct medop *mo);

/*
 * The request is answered: forget the client side. (evhttp keeps a
 * request whose client went away until it is answered, so every request
 * is answered exactly once, and evhttp_send_reply frees it.)
 */
static void
proxy_detach_client(struct mreq *mr)
{
	mr->mr_client = NULL;
}

void
proxy_mreq_free(struct mreq *mr)
{
	struct medop *mo = mr->mr_mo;

	if (mr->mr_waiting)
		TAILQ_REMOVE(&mr->mr_md->md_pending, mr, mr_entry);
	TAILQ_REMOVE(&mr->mr_md->md_all, mr, mr_all);
	if (mr->mr_timer != NULL)
		event_free(mr->mr_timer);
	if (mr->mr_body != NULL)
		evbuffer_free(mr->mr_body);
	if (mr->mr_inject_value != NULL) {
		explicit_bzero(mr->mr_inject_value, strlen(mr->mr_inject_value));
		free(mr->mr_inject_value);
	}
	free(mr->mr_token);
	json_object_put(mr->mr_headers);
	free(mr);
	/* An ended operation's server goes once its last request is answered. */
	if (--mo->mo_inflight == 0 && mo->mo_gone)
		proxy_medop_free(mo);
}

/* Log one refusal: host, port and the path before any query (no query values, no headers). */
static void
proxy_log_refusal(const struct mreq *mr, const char *code)
{
	char url[1024];
	medreq_redacted_url(mr->mr_t.mt_url, url, sizeof(url));
	log_info("%s: %s %s refused: %s%s", mr->mr_op, mr->mr_method, url, code,
	    mr->mr_hop > 0 ? " (redirect hop)" : "");
}

/* Answer the client (if still there) with a refusal and end the request. */
void
proxy_fail(struct mreq *mr, int status, const char *reason, const char *code)
{
	proxy_log_refusal(mr, code);
	if (mr->mr_client != NULL) {
		struct evhttp_request *req = mr->mr_client;
		proxy_detach_client(mr);
		/* Transaction mode keeps no idle client connection (see proxy_completed). */
		proxy_refuse(req, status, reason, code, mr->mr_mo->mo_txn);
	}
	proxy_mreq_free(mr);
}

/*
 * boundaryd's answer to mr's authorize: 1 if there is one to act on; else
 * mr was dealt with (its client gone: freed; an error: refused, 503).
 */
static int
proxy_answer_usable(struct mreq *mr, struct json_object *result, const char *error_code)
{
	if (mr->mr_client == NULL) {
		/*
		 * The client was shut down (or left) while boundaryd decided: an
		 * allow's reservation is handed back at once, or the transaction
		 * would refuse every request (reservation_in_flight) until it ends.
		 */
		if (result != NULL && schema_int(result, "reservation", 0) > 0 &&
		    schema_string(result, "transaction_id") != NULL)
			proxy_release_reservation(mr->mr_md, mr->mr_op,
			    schema_string(result, "transaction_id"),
			    schema_int(result, "reservation", 0),
			    schema_string(result, "decision_id"));
		proxy_mreq_free(mr);
		return 0;
	}
	if (result == NULL) {
		log_warnx("%s: mediator.authorize error %s", mr->mr_op,
		    error_code ? error_code : "(none)");
		proxy_fail(mr, 503, "Service Unavailable", "authority_error");
		return 0;
	}
	return 1;
}

/* mediator.authorize's parameters for mr, with no address yet. */
static struct json_object *
proxy_authorize_params(const struct mreq *mr)
{
	struct json_object *params = json_object_new_object();

	json_object_object_add(params, "operation_id", json_object_new_string(mr->mr_op));
	json_object_object_add(params, "client_address", json_object_new_string(mr->mr_client_str));
	json_object_object_add(params, "method", json_object_new_string(mr->mr_method));
	json_object_object_add(params, "scheme", json_object_new_string(mr->mr_t.mt_scheme));
	json_object_object_add(params, "host", json_object_new_string(mr->mr_t.mt_host));
	json_object_object_add(params, "port", json_object_new_int(mr->mr_t.mt_port));
	json_object_object_add(params, "path", json_object_new_string(mr->mr_t.mt_path));
	/* boundaryd parses this itself: it does not trust the fields above. */
	json_object_object_add(params, "url", json_object_new_string(mr->mr_t.mt_url));
	json_object_object_add(params, "redirect_hop", json_object_new_int(mr->mr_hop));
	/* A hop belongs to the transaction its first request was in, and says which. */
	if (mr->mr_hop > 0 && mr->mr_txid[0] != '\0')
		json_object_object_add(params, "transaction_id", json_object_new_string(mr->mr_txid));
	json_object_object_add(params, "addresses", json_object_new_array());
	if (mr->mr_token != NULL) {
		if (mr->mr_token[0] != '\0')
			json_object_object_add(params, "commit_token",
			    json_object_new_string(mr->mr_token));
		json_object_object_add(params, "body_sha256",
		    json_object_new_string(mr->mr_body_sha256));
		json_object_object_add(params, "request_bytes", json_object_new_int64(mr->mr_req_bytes));
	}
	return params;
}

static void
proxy_auth_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mreq *mr = arg;
	(void)fd;
	(void)what;
	/* boundaryd did not answer: no answer is a refusal. */
	proxy_fail(mr, 503, "Service Unavailable", "authority_timeout");
}

static void
proxy_dns_cb(int result, struct evutil_addrinfo *res, void *arg)
{
	struct mreq *mr = arg;
	struct mediatord *md = mr->mr_md;
	struct json_object *params, *addrs;
	struct timeval tv = { MEDIATORD_AUTH_TIMEOUT_SEC, 0 };

	if (result != 0 || res == NULL) {
		if (res != NULL)
			evutil_freeaddrinfo(res);
		proxy_fail(mr, 502, "Bad Gateway", "resolve_failed");
		return;
	}
	for (struct evutil_addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
		char a[64];
		const void *src;
		if (ai->ai_family == AF_INET)
			src = &((struct sockaddr_in *)(void *)ai->ai_addr)->sin_addr;
		else if (ai->ai_family == AF_INET6)
			src = &((struct sockaddr_in6 *)(void *)ai->ai_addr)->sin6_addr;
		else
			continue;
		if (inet_ntop(ai->ai_family, src, a, sizeof(a)) == NULL)
			continue;
		size_t i;
		for (i = 0; i < mr->mr_naddrs; i++)
			if (strcmp(mr->mr_addrs[i], a) == 0)
				break;
		if (i < mr->mr_naddrs)
			continue;
		/* Every address is authorized, or none: too many is a refusal. */
		if (mr->mr_naddrs == MEDIATORD_MAX_ADDRESSES) {
			evutil_freeaddrinfo(res);
			proxy_fail(mr, 502, "Bad Gateway", "too_many_addresses");
			return;
		}
		util_strlcpy(mr->mr_addrs[mr->mr_naddrs++], a, sizeof(mr->mr_addrs[0]));
	}
	evutil_freeaddrinfo(res);
	if (mr->mr_client == NULL) {
		proxy_mreq_free(mr);
		return;
	}
	if (mr->mr_naddrs == 0) {
		proxy_fail(mr, 502, "Bad Gateway", "resolve_failed");
		return;
	}
	params = proxy_authorize_params(mr);
	addrs = schema_child(params, "addresses");
	for (size_t i = 0; i < mr->mr_naddrs; i++)
		json_object_array_add(addrs, json_object_new_string(mr->mr_addrs[i]));
	if (mediatord_send(md, "mediator.authorize", params, &mr->mr_auth_id) != 0) {
		proxy_fail(mr, 503, "Service Unavailable", "authority_unavailable");
		return;
	}
	mr->mr_timer = evtimer_new(md->md_base, proxy_auth_timeout_cb, mr);
	if (mr->mr_timer == NULL || evtimer_add(mr->mr_timer, &tv) != 0) {
		proxy_fail(mr, 503, "Service Unavailable", "authority_unavailable");
		return;
	}
	TAILQ_INSERT_TAIL(&md->md_pending, mr, mr_entry);
	mr->mr_waiting = 1;
}

void
proxy_authorized(struct mediatord *md, int64_t id, struct json_object *result,
    const char *error_code)
{
	struct mreq *mr;
	const char *decision, *addr, *reason;

	TAILQ_FOREACH(mr, &md->md_pending, mr_entry)
		if (mr->mr_auth_id == id)
			break;
	if (mr == NULL)
		return;	/* timed out already: it was refused */
	TAILQ_REMOVE(&md->md_pending, mr, mr_entry);
	mr->mr_waiting = 0;
	evtimer_del(mr->mr_timer);
	if (mr->mr_completing) {
		proxy_completed(mr, result);
		return;
	}
	if (mr->mr_resolving) {
		proxy_resolve_checked(mr, result, error_code);
		return;
	}
	if (!proxy_answer_usable(mr, result, error_code))
		return;
	decision = schema_string(result, "decision");
	addr = schema_string(result, "address");
	reason = schema_string(result, "reason");
	if (decision == NULL || strcmp(decision, "allow") != 0 || addr == NULL) {
		const char *code = reason != NULL && strlen(reason) < 64 ? reason : "denied";
		proxy_fail(mr, 403, "Forbidden", code);
		return;
	}
	/* A transaction's reservation: the response is held until boundaryd accounts it. */
	if (schema_child(result, "reservation") != NULL) {
		int64_t lim = schema_int(result, "response_limit", 0);
		const char *txid = schema_string(result, "transaction_id");
		mr->mr_reservation = schema_int(result, "reservation", 0);
		if (mr->mr_reservation <= 0 || txid == NULL || strlen(txid) >= sizeof(mr->mr_txid) ||
		    lim < 0) {
			proxy_fail(mr, 503, "Service Unavailable", "authority_error");
			return;
		}
		util_strlcpy(mr->mr_txid, txid, sizeof(mr->mr_txid));
		if (schema_string(result, "decision_id") != NULL)
			util_strlcpy(mr->mr_decision, schema_string(result, "decision_id"),
			    sizeof(mr->mr_decision));
		if (lim < mr->mr_max_response)
			mr->mr_max_response = lim;
	}
	/* A credential to inject: a header name and a one-line value, or the request is refused. */
	if (schema_string(result, "inject_header") != NULL) {
		const char *h = schema_string(result, "inject_header");
		const char *v = schema_string(result, "inject_value");
		if (v == NULL || strlen(h) >= sizeof(mr->mr_inject_header) ||
		    strpbrk(v, "\r\n") != NULL || (mr->mr_inject_value = strdup(v)) == NULL) {
			proxy_fail(mr, 503, "Service Unavailable", "authority_error");
			return;
		}
		util_strlcpy(mr->mr_inject_header, h, sizeof(mr->mr_inject_header));
	}
	/* The pinned address must be one we asked about; anything else is not acted on. */
	for (size_t i = 0; i < mr->mr_naddrs; i++) {
		if (strcmp(mr->mr_addrs[i], addr) == 0) {
			proxy_upstream(mr, mr->mr_addrs[i]);
			return;
		}
	}
	proxy_fail(mr, 503, "Service Unavailable", "authority_error");
}

static void proxy_close_operation(struct mediatord *, const char *, const char *, int);

void
proxy_channel_lost(struct mediatord *md)
{
	struct mreq *mr;
	struct medop *mo;

	while ((mr = TAILQ_FIRST(&md->md_pending)) != NULL)
		proxy_fail(mr, 503, "Service Unavailable", "authority_unavailable");
	/*
	 * Nothing can be authorized now: the accepted connections are closed
	 * too, rather than kept for a request no one may allow. Threat: a
	 * client parks connections while boundaryd is down or restarting and
	 * finds them open under whatever comes next.
	 */
	TAILQ_FOREACH(mo, &md->md_ops, mo_entry)
		proxy_close_operation(md, mo->mo_id, "authority_unavailable", 0);
}

static void
proxy_upstream_error_cb(enum evhttp_request_error err, void *arg)
{
	struct mreq *mr = arg;
	mr->mr_up_error = (int)err + 1;
}

/* The upstream answered (or failed): relay what may be relayed, then end. */
static void
proxy_upstream_done(struct evhttp_request *resp, void *arg)
{
	struct mreq *mr = arg;
	struct evhttp_request *req = mr->mr_client;
	struct evkeyvalq *in, *out;
	struct evkeyval *kv;
	int code;

	mr->mr_up = NULL;
	if (req == NULL) {
		proxy_mreq_free(mr);
		return;
	}
	code = resp != NULL ? evhttp_request_get_response_code(resp) : 0;
	if (mr->mr_reservation != 0) {
		proxy_txn_hold(mr, resp, code);
		return;
	}
	if (resp == NULL || code < 100 || code > 599) {
		const char *why = "upstream_failed";
		if (mr->mr_up_error == EVREQ_HTTP_TIMEOUT + 1)
			why = "upstream_timeout";
		else if (mr->mr_up_error == EVREQ_HTTP_DATA_TOO_LONG + 1)
			why = "response_too_large";
		proxy_fail(mr, strcmp(why, "upstream_timeout") == 0 ? 504 : 502,
		    strcmp(why, "upstream_timeout") == 0 ? "Gateway Timeout" : "Bad Gateway", why);
		return;
	}
	in = evhttp_request_get_input_headers(resp);
	/* A GET/HEAD redirect: the next hop, authorized from scratch (redirect.c). */
	if (medreq_is_redirect(code) && redirect_wanted(mr)) {
		redirect_follow(mr, evhttp_find_header(in, "Location"));
		return;
	}
	out = evhttp_request_get_output_headers(req);
	/* Allowlisted headers only: never Set-Cookie, WWW-Authenticate or the like. */
	TAILQ_FOREACH(kv, in, next)
		if (medreq_response_header_allowed(kv->key))
			evhttp_add_header(out, kv->key, kv->value);
	proxy_detach_client(mr);
	evhttp_send_reply(req, code, evhttp_request_get_response_code_line(resp),
	    evhttp_request_get_input_buffer(resp));
	proxy_mreq_free(mr);
}

/*
 * An https upstream: TLS over the pinned address, with SNI and hostname
 * verification on the original name (or the address literal the client
 * named), against the CA bundle only. Threat: a pinned address proves
 * where the socket goes, not who answers; without verification anyone on
 * the path could answer for the name.
 */
static struct evhttp_connection *
proxy_tls_connection(struct mreq *mr, const char *addr)
{
	struct mediatord *md = mr->mr_md;
	struct bufferevent *bev;
	struct evhttp_connection *evcon;
	struct in6_addr lit;
	int literal = inet_pton(AF_INET, mr->mr_t.mt_host, &lit) == 1 ||
	    inet_pton(AF_INET6, mr->mr_t.mt_host, &lit) == 1;
	SSL *ssl = SSL_new(md->md_tls);

	if (ssl == NULL)
		return NULL;
	SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
	if (literal ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), mr->mr_t.mt_host) != 1 :
	    (SSL_set_tlsext_host_name(ssl, mr->mr_t.mt_host) != 1 ||
	    SSL_set1_host(ssl, mr->mr_t.mt_host) != 1)) {
		SSL_free(ssl);
		return NULL;
	}
	/* The bufferevent owns ssl from here (BEV_OPT_CLOSE_ON_FREE frees it). */
	bev = bufferevent_openssl_socket_new(md->md_base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
	    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (bev == NULL) {
		SSL_free(ssl);
		return NULL;
	}
	/* A close without close_notify still ends the body (Content-Length bounds it). */
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	evcon = evhttp_connection_base_bufferevent_new(md->md_base, md->md_dns, bev, addr,
	    mr->mr_t.mt_port);
	if (evcon == NULL)
		bufferevent_free(bev);
	return evcon;
}

/*
 * The exchange ran past connect_timeout + io_timeout: the client gets 504
 * now; the upstream request ends by itself within io_timeout and frees mr.
 */
static void
proxy_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mreq *mr = arg;
	(void)fd;
	(void)what;
	if (mr->mr_client != NULL) {
		struct evhttp_request *req = mr->mr_client;
		proxy_log_refusal(mr, "upstream_timeout");
		proxy_detach_client(mr);
		proxy_refuse(req, 504, "Gateway Timeout", "upstream_timeout", 0);
	}
}

/* Connect to the pinned address (no name, no second resolution) and send the request. */
static void
proxy_upstream(struct mreq *mr, const char *addr)
{
	struct mediatord *md = mr->mr_md;
	struct evhttp_connection *evcon;
	struct evhttp_request *up;
	struct evkeyvalq *in, *out;
	struct evkeyval *kv;
	const char *connection;
	int cmd = proxy_method_cmd(mr->mr_method);

	if (cmd < 0) {
		proxy_fail(mr, 405, "Method Not Allowed", "method_not_supported");
		return;
	}
	if (mr->mr_t.mt_tls)
		evcon = proxy_tls_connection(mr, addr);
	else
		evcon = evhttp_connection_base_new(md->md_base, md->md_dns, addr,
		    mr->mr_t.mt_port);
	if (evcon == NULL) {
		proxy_fail(mr, 502, "Bad Gateway", "upstream_failed");
		return;
	}
	/*
	 * Bounds: each read and write (and the connect) within io_timeout
	 * (libevent 2.1 has one timeout for both), the whole exchange within
	 * connect_timeout + io_timeout (proxy_deadline_cb), the body within
	 * max_response_bytes, and no retries (a retry is a new effect).
	 */
	evhttp_connection_set_timeout(evcon, mr->mr_io_timeout);
	evhttp_connection_set_retries(evcon, 0);
	evhttp_connection_set_max_headers_size(evcon, MEDIATORD_MAX_HEADERS_SIZE);
	evhttp_connection_set_max_body_size(evcon, mr->mr_max_response);
	up = evhttp_request_new(proxy_upstream_done, mr);
	if (up == NULL) {
		evhttp_connection_free(evcon);
		proxy_fail(mr, 502, "Bad Gateway", "upstream_failed");
		return;
	}
	evhttp_request_set_error_cb(up, proxy_upstream_error_cb);
	in = evhttp_request_get_input_headers(mr->mr_client);
	out = evhttp_request_get_output_headers(up);
	connection = evhttp_find_header(in, "Connection");
	TAILQ_FOREACH(kv, in, next)
		if (medreq_request_header_forwarded(kv->key, connection))
			evhttp_add_header(out, kv->key, kv->value);
	/* Host is the original authority, whatever the client sent. */
	evhttp_add_header(out, "Host", mr->mr_t.mt_authority);
	/* The commit token was for boundaryd; the body is the one it was bound to. */
	while (evhttp_remove_header(out, "X-Gensee-Commit-Token") == 0)
		;
	if (mr->mr_token != NULL)
		evbuffer_add_buffer(evhttp_request_get_output_buffer(up),
		    evhttp_request_get_input_buffer(mr->mr_client));
	/* boundaryd's credential replaces whatever the client sent under that name. */
	if (mr->mr_inject_value != NULL) {
		while (evhttp_remove_header(out, mr->mr_inject_header) == 0)
			;
		evhttp_add_header(out, mr->mr_inject_header, mr->mr_inject_value);
	}
	evhttp_add_header(out, "Connection", "close");
	mr->mr_up = up;
	if (evhttp_make_request(evcon, up, (enum evhttp_cmd_type)cmd, mr->mr_t.mt_path) != 0) {
		/* make_request frees up on failure */
		mr->mr_up = NULL;
		evhttp_connection_free(evcon);
		proxy_fail(mr, 502, "Bad Gateway", "upstream_failed");
		return;
	}
	/* The connection goes with its (only) request. */
	evhttp_connection_free_on_completion(evcon);
	struct timeval dl = { (time_t)mr->mr_connect_timeout + mr->mr_io_timeout, 0 };
	event_free(mr->mr_timer);
	mr->mr_timer = evtimer_new(md->md_base, proxy_deadline_cb, mr);
	if (mr->mr_timer != NULL)
		evtimer_add(mr->mr_timer, &dl);
}

/*
 * Is the connection's peer exactly the operation's proxy.client_address?
 * The peer's address (as the kernel gave it at accept) goes to peer: it is
 * what boundaryd checks again, not the configured string.
 */
static int
proxy_peer_ok(struct medop *mo, struct evhttp_connection *evcon, char *peer, size_t len)
{
	const struct sockaddr *sa = evhttp_connection_get_addr(evcon);

	peer[0] = '\0';
	if (sa == NULL)
		return 0;
	if (sa->sa_family == AF_INET && mo->mo_client_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)sa;
		return inet_ntop(AF_INET, &s4->sin_addr, peer, (socklen_t)len) != NULL &&
		    memcmp(&s4->sin_addr, mo->mo_client_addr, 4) == 0;
	}
	if (sa->sa_family == AF_INET6 && mo->mo_client_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)sa;
		return inet_ntop(AF_INET6, &s6->sin6_addr, peer, (socklen_t)len) != NULL &&
		    memcmp(&s6->sin6_addr, mo->mo_client_addr, 16) == 0;
	}
	return 0;
}

/*
 * Resolve mr's target and ask boundaryd (proxy_dns_cb): the start of every
 * hop, the client's request and each redirect. Nothing of a previous hop
 * carries over: no address, no decision, no timer.
 */
void
proxy_resolve(struct mreq *mr)
{
	struct evutil_addrinfo hints;

	if (mr->mr_timer != NULL) {
		event_free(mr->mr_timer);
		mr->mr_timer = NULL;
	}
	mr->mr_naddrs = 0;
	mr->mr_up_error = 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	/* The callback may run before this returns (literals, hosts file); mr is its own then. */
	evdns_getaddrinfo(mr->mr_md->md_dns, mr->mr_t.mt_host, NULL, &hints, proxy_dns_cb, mr);
}

/*
 * The Host header against the target. Several Host headers are a
 * mismatch: never a choice between them (an upstream or cache might take
 * the other one).
 */
static int
proxy_host_ok(struct evhttp_request *req, const struct medreq_target *t, const char **code)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	struct evkeyval *kv;
	const char *host = NULL;
	int n = 0;

	TAILQ_FOREACH(kv, in, next)
		if (strcasecmp(kv->key, "Host") == 0 && n++ == 0)
			host = kv->value;
	if (n > 1) {
		*code = MEDREQ_E_HOST_MISMATCH;
		return 0;
	}
	return medreq_host_check(t, host, code) == 0;
}

/* The reason phrase of a status the framing check or the head deadline answers. */
static const char *
proxy_status_text(int status)
{
	switch (status) {
	case 408:
		return "Request Timeout";
	case 413:
		return "Payload Too Large";
	case 431:
		return "Request Header Fields Too Large";
	default:
		return "Bad Request";
	}
}

static void
proxy_request_cb(struct evhttp_request *req, void *arg)
{
	struct medop *mo = arg;
	struct mediatord *md = mo->mo_md;
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct mreq *mr;
	const char *method = proxy_method_name(evhttp_request_get_command(req)), *code;
	char peer[64];
	struct medconn *mc = proxy_conn_of(mo, evcon);

	/*
	 * The framing check refused this connection's request: this is its
	 * stand-in, answered with the refusal, and the connection closes.
	 * (The requests passed before it, pipelined, are served as usual.)
	 */
	if (mc != NULL)
		mc->mc_seen++;
	if (mc == NULL || (mc->mc_standin != 0 && mc->mc_seen >= mc->mc_standin)) {
		int st = mc != NULL ? mc->mc_refused_status : 400;
		proxy_refuse(req, st, proxy_status_text(st), mc != NULL && mc->mc_refused != NULL ?
		    mc->mc_refused : "untracked_connection", 1);
		return;
	}
	/* Another peer: refused before anything of its request is acted on. */
	if (evcon == NULL || !proxy_peer_ok(mo, evcon, peer, sizeof(peer))) {
		log_info("%s: refused a peer that is not %s", mo->mo_id, mo->mo_client_str);
		proxy_refuse(req, 403, "Forbidden", "client_not_allowed", 1);
		return;
	}
	/* No tunnel exists: CONNECT is refused, whatever the target. */
	if (method == NULL || strcmp(method, "CONNECT") == 0) {
		proxy_refuse(req, 405, "Method Not Allowed", "connect_refused", 1);
		return;
	}
	if ((mr = calloc(1, sizeof(*mr))) == NULL) {
		proxy_refuse(req, 503, "Service Unavailable", "out_of_memory", 1);
		return;
	}
	if (medreq_parse_target(evhttp_request_get_uri(req), &mr->mr_t, &code) != 0) {
		free(mr);
		log_info("%s: %s refused: %s", mo->mo_id, method, code);
		proxy_refuse(req, 400, "Bad Request", code, 0);
		return;
	}
	if (!proxy_host_ok(req, &mr->mr_t, &code)) {
		free(mr);
		log_info("%s: %s refused: %s", mo->mo_id, method, code);
		proxy_refuse(req, 400, "Bad Request", code, 0);
		return;
	}
	/* Only GET and HEAD go upstream, and they carry no body here. */
	if (evbuffer_get_length(evhttp_request_get_input_buffer(req)) > 0 &&
	    (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)) {
		free(mr);
		proxy_refuse(req, 400, "Bad Request", "request_body_refused", 0);
		return;
	}
	/*
	 * Any other method needs boundaryd's commit token for this exact body:
	 * the token (X-Gensee-Commit-Token, never forwarded) and the body's
	 * SHA-256, computed here, go to boundaryd with the request.
	 */
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		const char *tok = evhttp_find_header(evhttp_request_get_input_headers(req),
		    "X-Gensee-Commit-Token");
		uint8_t dg[32];
		size_t blen = evbuffer_get_length(in);
		const unsigned char *body = evbuffer_pullup(in, -1);
		if (tok != NULL && (strlen(tok) > 11800 || (mr->mr_token = strdup(tok)) == NULL)) {
			free(mr);
			proxy_refuse(req, 400, "Bad Request", "bad_commit_token", 0);
			return;
		}
		if (committoken_body_digest(blen ? body : (const unsigned char *)"", blen, dg) != 0) {
			free(mr->mr_token);
			free(mr);
			proxy_refuse(req, 503, "Service Unavailable", "out_of_memory", 0);
			return;
		}
		for (size_t i = 0; i < sizeof(dg); i++)
			snprintf(mr->mr_body_sha256 + 2 * i, 3, "%02x", dg[i]);
		mr->mr_req_bytes = (int64_t)blen;
		if (mr->mr_token == NULL)
			mr->mr_token = strdup("");
	}
	mr->mr_md = md;
	mr->mr_mo = mo;
	TAILQ_INSERT_TAIL(&md->md_all, mr, mr_all);
	mo->mo_inflight++;
	mr->mr_client = req;
	util_strlcpy(mr->mr_op, mo->mo_id, sizeof(mr->mr_op));
	util_strlcpy(mr->mr_client_str, peer, sizeof(mr->mr_client_str));
	util_strlcpy(mr->mr_method, method, sizeof(mr->mr_method));
	mr->mr_max_response = mo->mo_max_response;
	mr->mr_connect_timeout = mo->mo_connect_timeout;
	mr->mr_io_timeout = mo->mo_io_timeout;
	mr->mr_max_redirects = mo->mo_max_redirects;
	proxy_start(mr);
}

/*
 * The start of every hop (the client's request and each redirect). A
 * transaction's scope is checked before the name is resolved: a DNS query
 * for an out-of-scope name would itself carry data out.
 */
void
proxy_start(struct mreq *mr)
{
	struct mediatord *md = mr->mr_md;

	if (!mr->mr_mo->mo_txn) {
		proxy_resolve(mr);
		return;
	}
	struct json_object *params = proxy_authorize_params(mr);
	struct timeval tv = { MEDIATORD_AUTH_TIMEOUT_SEC, 0 };
	if (mr->mr_timer != NULL) {
		event_free(mr->mr_timer);
		mr->mr_timer = NULL;
	}
	json_object_object_add(params, "stage", json_object_new_string("resolve"));
	mr->mr_resolving = 1;
	if (mediatord_send(md, "mediator.authorize", params, &mr->mr_auth_id) != 0) {
		proxy_fail(mr, 503, "Service Unavailable", "authority_unavailable");
		return;
	}
	mr->mr_timer = evtimer_new(md->md_base, proxy_auth_timeout_cb, mr);
	if (mr->mr_timer == NULL || evtimer_add(mr->mr_timer, &tv) != 0) {
		proxy_fail(mr, 503, "Service Unavailable", "authority_unavailable");
		return;
	}
	TAILQ_INSERT_TAIL(&md->md_pending, mr, mr_entry);
	mr->mr_waiting = 1;
}

/*
 * Strict framing (lib/httphead.c) of every accepted connection, before
 * evhttp reads anything. Threat: request smuggling. evhttp is lenient
 * (two Content-Lengths, bare LF, Transfer-Encoding on a GET), so the
 * bytes it would read as a second request, or as no request, are not the
 * ones another parser would; and the leftover bytes of a request it
 * refuses are read as the next one. An input-buffer callback runs on each
 * read before evhttp's read callback: it takes the new bytes out (into
 * mc_hold) and puts back only checked ones: a request head once all of it
 * passed httphead_check as raw bytes, then its body as its framing says
 * (Content-Length bytes, or the chunked body to its last chunk and
 * trailer, each line checked), and only then is the next head looked for.
 * A refused head is never put back: evhttp gets a fixed stand-in request
 * instead (PROXY_STANDIN), which proxy_request_cb answers with the
 * refusal and Connection: close, and nothing the client sent after it is
 * ever read. Malformed chunked framing comes after evhttp has the head:
 * that connection is closed. (A bufferevent filter would do the same for
 * input, but evhttp then frees the connection while the response is still
 * in the filter's underlying buffer, and the client never gets it.)
 */
enum medconn_state {
	MC_HEAD,		/* a request head, up to its blank line */
	MC_BODY,		/* mc_left Content-Length bytes */
	MC_CHUNK_SIZE,		/* a chunk-size line */
	MC_CHUNK_DATA,		/* mc_left bytes of chunk data */
	MC_CHUNK_END,		/* the CRLF after chunk data */
	MC_TRAILER,		/* trailer lines, up to the empty one */
	MC_REFUSED,		/* refused: nothing more is passed, ever */
};

#define PROXY_STANDIN "GET / HTTP/1.1\r\nHost: gensee.invalid\r\n\r\n"

static void proxy_conn_refused(struct medconn *mc, int status, const char *code);

/* Tell boundaryd about a refusal the mediator made itself, for the evidence. */
static void
proxy_report_refusal(struct medop *mo, const struct medconn *mc, int status, const char *code)
{
	struct json_object *params = json_object_new_object();
	int64_t id;

	json_object_object_add(params, "operation_id", json_object_new_string(mo->mo_id));
	json_object_object_add(params, "client_address", json_object_new_string(
	    mc->mc_peer[0] != '\0' ? mc->mc_peer : "0.0.0.0"));
	json_object_object_add(params, "reason", json_object_new_string(code));
	json_object_object_add(params, "status", json_object_new_int(status));
	if (mc->mc_method[0] != '\0')
		json_object_object_add(params, "method", json_object_new_string(mc->mc_method));
	if (mediatord_send(mo->mo_md, "mediator.refused", params, &id) != 0)
		log_warnx("%s: refusal %s not recorded: no channel", mo->mo_id, code);
}

/* A line of a chunked body in src (LF-terminated, at most max): its length with the LF, or 0. */
static size_t
proxy_filter_line(struct evbuffer *src, size_t max, int *toolong)
{
	struct evbuffer_ptr p = evbuffer_search(src, "\n", 1, NULL);

	*toolong = 0;
	if (p.pos < 0) {
		*toolong = evbuffer_get_length(src) > max;
		return 0;
	}
	if ((size_t)p.pos + 1 > max) {
		*toolong = 1;
		return 0;
	}
	return (size_t)p.pos + 1;
}

/* Pass n bytes of src on to evhttp. */
static void
proxy_filter_pass(struct evbuffer *src, struct evbuffer *dst, size_t n)
{
	if (evbuffer_remove_buffer(src, dst, n) != (int)n)
		fatalx("client connection buffer: cannot move %zu bytes", n);
}

/*
 * The chunked body's framing, one step. 1: progress, 0: more bytes
 * needed, -1: refused (*status and *code set): malformed, or more chunk
 * data than max_request_bytes.
 */
static int
proxy_filter_chunked(struct medconn *mc, struct evbuffer *src, struct evbuffer *dst,
    int *status, const char **code)
{
	size_t len = evbuffer_get_length(src), n;
	uint64_t size;
	const char *line;
	int toolong;

	switch (mc->mc_state) {
	case MC_CHUNK_DATA:
		if (len == 0)
			return 0;
		n = len < mc->mc_left ? len : (size_t)mc->mc_left;
		proxy_filter_pass(src, dst, n);
		if ((mc->mc_left -= n) == 0)
			mc->mc_state = MC_CHUNK_END;
		return 1;
	case MC_CHUNK_END:
		if (len < 2)
			return 0;
		line = (const char *)evbuffer_pullup(src, 2);
		if (line[0] != '\r' || line[1] != '\n') {
			*status = 400;
			*code = HTTPHEAD_E_BAD_CHUNK;
			return -1;
		}
		proxy_filter_pass(src, dst, 2);
		mc->mc_state = MC_CHUNK_SIZE;
		return 1;
	default:
		break;
	}
	n = proxy_filter_line(src, mc->mc_state == MC_TRAILER ? MEDIATORD_MAX_HEADERS_SIZE :
	    HTTPHEAD_CHUNK_LINE_MAX, &toolong);
	*status = 400;
	if (n == 0) {
		if (toolong)
			*code = HTTPHEAD_E_BAD_CHUNK;
		return toolong ? -1 : 0;
	}
	line = (const char *)evbuffer_pullup(src, (ev_ssize_t)n);
	/* CRLF only: a bare LF ends the line for one parser and not another. */
	if (n < 2 || line[n - 2] != '\r') {
		*code = HTTPHEAD_E_BARE_LF;
		return -1;
	}
	if (mc->mc_state == MC_CHUNK_SIZE) {
		if (httphead_chunk_size(line, n - 2, &size, code) != 0)
			return -1;
		/*
		 * evhttp would refuse this chunk with its own 413 and no
		 * evidence: refused here, before it is passed on.
		 */
		if (size > (uint64_t)mc->mc_mo->mo_max_request - mc->mc_chunked) {
			*status = 413;
			*code = "request_too_large";
			return -1;
		}
		mc->mc_chunked += size;
		mc->mc_left = size;
		mc->mc_state = size == 0 ? MC_TRAILER : MC_CHUNK_DATA;
	} else if (n == 2) {
		mc->mc_state = MC_HEAD;	/* the empty line: the request is complete */
	} else if (httphead_trailer_line(line, n - 2, code) != 0) {
		return -1;
	}
	proxy_filter_pass(src, dst, n);
	return 1;
}

/* Check what src holds and pass on to dst (evhttp's input) what may go. */
static void
proxy_frame(struct medconn *mc, struct evbuffer *src, struct evbuffer *dst)
{
	struct mediatord *md = mc->mc_mo->mo_md;

	for (;;) {
		size_t len = evbuffer_get_length(src), n;
		struct httphead h;
		const char *code;
		int status, rc;

		switch (mc->mc_state) {
		case MC_REFUSED:
			/* Threat: the bytes after a refused head read as a request. */
			evbuffer_drain(src, len);
			return;
		case MC_HEAD:
			if (len == 0)
				return;
			if (!evtimer_pending(mc->mc_head_timer, NULL)) {
				struct timeval tv = { md->md_head_timeout, 0 };
				evtimer_add(mc->mc_head_timer, &tv);
			}
			n = len < MEDIATORD_MAX_HEADERS_SIZE ? len : MEDIATORD_MAX_HEADERS_SIZE;
			rc = httphead_check_from((const char *)evbuffer_pullup(src, (ev_ssize_t)n), n,
			    mc->mc_scanned, MEDIATORD_MAX_HEADERS_SIZE, &h, &status, &code);
			if (rc == 0) {
				mc->mc_scanned = n;
				return;
			}
			mc->mc_scanned = 0;
			util_strlcpy(mc->mc_method, h.hh_method, sizeof(mc->mc_method));
			/* A body evhttp would refuse (413) is refused here, with evidence. */
			if (rc == 1 && h.hh_content_length > (uint64_t)mc->mc_mo->mo_max_request) {
				rc = -1;
				status = 413;
				code = "request_too_large";
			}
			if (rc < 0) {
				evbuffer_drain(src, len);
				proxy_conn_refused(mc, status, code);
				mc->mc_standin = ++mc->mc_heads;
				evbuffer_add(dst, PROXY_STANDIN, strlen(PROXY_STANDIN));
				return;
			}
			evtimer_del(mc->mc_head_timer);
			mc->mc_heads++;
			proxy_filter_pass(src, dst, h.hh_len);
			mc->mc_left = h.hh_content_length;
			mc->mc_chunked = 0;
			mc->mc_state = h.hh_chunked ? MC_CHUNK_SIZE : mc->mc_left > 0 ? MC_BODY :
			    MC_HEAD;
			break;
		case MC_BODY:
			if (len == 0)
				return;
			n = len < mc->mc_left ? len : (size_t)mc->mc_left;
			proxy_filter_pass(src, dst, n);
			if ((mc->mc_left -= n) == 0)
				mc->mc_state = MC_HEAD;
			break;
		default:
			rc = proxy_filter_chunked(mc, src, dst, &status, &code);
			if (rc == 0)
				return;
			if (rc < 0) {
				/*
				 * evhttp holds the head, so no stand-in can follow
				 * it: the close (proxy_head_timeout_cb) answers.
				 */
				evbuffer_drain(src, len);
				proxy_conn_refused(mc, status, code);
				mc->mc_answer_here = 1;
				event_active(mc->mc_head_timer, EV_TIMEOUT, 0);
				return;
			}
			break;
		}
	}
}

/*
 * The client's bufferevent read: the new bytes are the last n_added of
 * its input (what is before them was checked already and waits for
 * evhttp). They are taken out and only what passes goes back, before
 * evhttp's read callback runs.
 */
static void
proxy_input_cb(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
	struct medconn *mc = arg;
	size_t len = evbuffer_get_length(in), n;

	if (info->n_added == 0 || mc->mc_busy || len == 0)
		return;
	mc->mc_busy = 1;
	n = info->n_added < len ? info->n_added : len;
	if (evbuffer_remove_buffer(in, mc->mc_tmp, len - n) != (int)(len - n) ||
	    evbuffer_add_buffer(mc->mc_hold, in) != 0 || evbuffer_add_buffer(in, mc->mc_tmp) != 0)
		fatalx("%s: client input buffer: out of memory", mc->mc_mo->mo_id);
	proxy_frame(mc, mc->mc_hold, in);
	mc->mc_busy = 0;
}

/* The connection's request is refused: nothing it sends is read any more. */
static void
proxy_conn_refused(struct medconn *mc, int status, const char *code)
{
	mc->mc_state = MC_REFUSED;
	mc->mc_refused = code;
	mc->mc_refused_status = status;
	evtimer_del(mc->mc_head_timer);
	log_info("%s: request from %s refused before evhttp: %s", mc->mc_mo->mo_id,
	    mc->mc_peer[0] ? mc->mc_peer : "?", code);
	proxy_report_refusal(mc->mc_mo, mc, status, code);
}

/*
 * The head deadline ran out, or a chunked body was refused (malformed, or
 * over max_request_bytes): the answer goes straight to the socket and the
 * connection is closed. Threat: slowloris, a client holding heads open a
 * byte at a time: 408 and the connection closed.
 */
static void
proxy_head_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct medconn *mc = arg;
	struct medop *mo = mc->mc_mo;

	(void)fd;
	(void)what;
	if (mc->mc_evcon == NULL)
		return;	/* not attached yet: evhttp's own timeout closes it */
	/*
	 * evhttp is answering an earlier request of this connection (it
	 * reads only between requests): freeing the connection now would free
	 * that request under us. The deadline is looked at again shortly.
	 */
	if (!(bufferevent_get_enabled(mc->mc_cbev) & EV_READ)) {
		struct timeval tv = { 1, 0 };
		evtimer_add(mc->mc_head_timer, &tv);
		return;
	}
	if (mc->mc_state != MC_REFUSED || mc->mc_answer_here) {
		char resp[256];
		int n;

		if (mc->mc_state != MC_REFUSED)
			proxy_conn_refused(mc, 408, "http_head_timeout");
		/*
		 * Straight to the socket, which has nothing else queued (no
		 * request of this connection is being answered): evhttp frees
		 * the connection below and would drop a buffered answer.
		 * Best effort: the close is the answer that counts.
		 */
		n = snprintf(resp, sizeof(resp), "HTTP/1.1 %d %s\r\n"
		    "X-Gensee-Refusal: %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
		    "Connection: close\r\n\r\ngensee-httpmediatord: %s\n", mc->mc_refused_status,
		    proxy_status_text(mc->mc_refused_status), mc->mc_refused,
		    strlen("gensee-httpmediatord: \n") + strlen(mc->mc_refused), mc->mc_refused);
		if (n > 0 && (size_t)n < sizeof(resp) && bufferevent_getfd(mc->mc_cbev) >= 0 &&
		    write(bufferevent_getfd(mc->mc_cbev), resp, (size_t)n) != n)
			log_debug("%s: 408 to %s not written whole", mo->mo_id, mc->mc_peer);
	}
	log_info("%s: connection from %s closed: %s", mo->mo_id, mc->mc_peer, mc->mc_refused);
	evhttp_connection_free(mc->mc_evcon);	/* its close callback frees mc */
}

/* The connection a request came on, or NULL. */
static struct medconn *
proxy_conn_of(struct medop *mo, struct evhttp_connection *evcon)
{
	struct bufferevent *bev = evcon != NULL ? evhttp_connection_get_bufferevent(evcon) : NULL;
	struct medconn *mc;

	TAILQ_FOREACH(mc, &mo->mo_conns, mc_entry)
		if (mc->mc_cbev == bev)
			return mc;
	return NULL;
}

/*
 * May one more connection stay open? Threat: one client (or a few)
 * opening connections until the mediator runs out of memory or
 * descriptors, and nobody else is served. --max-connections bounds all of
 * them, --max-connections-per-client those of one address, so one address
 * can never take the whole budget. Excess connections are closed at once
 * (logged, counted); each was accepted, so the listen queue keeps moving
 * and other clients are accepted behind them.
 */
static int
proxy_conn_within_limits(struct mediatord *md, struct medconn *mc)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	evutil_socket_t fd = bufferevent_getfd(mc->mc_cbev);
	struct medop *mo;
	struct medconn *o;
	size_t same = 0;
	const char *why = NULL;

	if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) ||
	    inet_ntop(ss.ss_family, ss.ss_family == AF_INET ?
	    (void *)&((struct sockaddr_in *)&ss)->sin_addr :
	    (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr, mc->mc_peer,
	    sizeof(mc->mc_peer)) == NULL) {
		util_strlcpy(mc->mc_peer, "?", sizeof(mc->mc_peer));
		why = "no peer address";
	} else if (md->md_nconns > md->md_max_conns) {
		why = "max-connections";
	} else {
		TAILQ_FOREACH(mo, &md->md_ops, mo_entry)
			TAILQ_FOREACH(o, &mo->mo_conns, mc_entry)
				if (o->mc_evcon != NULL && strcmp(o->mc_peer, mc->mc_peer) == 0)
					same++;
		if (same > md->md_max_conns_client)
			why = "max-connections-per-client";
	}
	if (why == NULL)
		return 1;
	/* One line for the first and then every 1000th: a flood must not flood the log. */
	if (md->md_conns_refused++ % 1000 == 0)
		log_warnx("%s: connection from %s closed: %s (%zu open; %llu closed so far)",
		    mc->mc_mo->mo_id, mc->mc_peer, why, md->md_nconns,
		    (unsigned long long)md->md_conns_refused);
	return 0;
}

/* boundaryd's answer before resolution: resolve only on allow. */
static void
proxy_resolve_checked(struct mreq *mr, struct json_object *result, const char *error_code)
{
	const char *decision, *reason;

	mr->mr_resolving = 0;
	if (!proxy_answer_usable(mr, result, error_code))
		return;
	decision = schema_string(result, "decision");
	reason = schema_string(result, "reason");
	if (decision == NULL || strcmp(decision, "allow") != 0) {
		proxy_fail(mr, 403, "Forbidden", reason != NULL && strlen(reason) < 64 ? reason :
		    "denied");
		return;
	}
	event_free(mr->mr_timer);
	mr->mr_timer = NULL;
	proxy_resolve(mr);
}

static void
proxy_conn_drop(struct medop *mo, struct medconn *mc)
{
	TAILQ_REMOVE(&mo->mo_conns, mc, mc_entry);
	mo->mo_nconns--;
	if (mc->mc_evcon != NULL)
		mo->mo_md->md_nconns--;
	/*
	 * evhttp may still drain the input after the close callback
	 * (evhttp_connection_reset_): the callback must not outlive mc.
	 */
	if (mc->mc_incb != NULL)
		evbuffer_remove_cb_entry(bufferevent_get_input(mc->mc_cbev), mc->mc_incb);
	if (mc->mc_head_timer != NULL)
		event_free(mc->mc_head_timer);
	if (mc->mc_hold != NULL)
		evbuffer_free(mc->mc_hold);
	if (mc->mc_tmp != NULL)
		evbuffer_free(mc->mc_tmp);
	if (mc->mc_bev != NULL)
		bufferevent_decref(mc->mc_bev);
	free(mc);
}

/* evhttp is closing the connection (any path, exactly once): forget it. */
static void
proxy_conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct medconn *mc = arg;
	(void)evcon;
	proxy_conn_drop(mc->mc_mo, mc);
}

/*
 * Find the evhttp_connection of each new connection and set its close
 * callback. evhttp sets the bufferevent's callbacks, with the connection
 * as their argument, right after proxy_conn_new returns; bufferevent_free
 * clears them (our reference keeps the memory readable), so cleared
 * callbacks mean evhttp already let the connection go.
 */
static void
proxy_conns_attach(struct medop *mo)
{
	struct medconn *mc, *next;

	for (mc = TAILQ_FIRST(&mo->mo_conns); mc != NULL; mc = next) {
		bufferevent_data_cb rcb, wcb;
		bufferevent_event_cb ecb;
		void *evcon;

		next = TAILQ_NEXT(mc, mc_entry);
		if (mc->mc_evcon != NULL)
			continue;
		bufferevent_getcb(mc->mc_bev, &rcb, &wcb, &ecb, &evcon);
		if (ecb == NULL || evcon == NULL) {
			proxy_conn_drop(mo, mc);
			continue;
		}
		mc->mc_evcon = evcon;
		mo->mo_md->md_nconns++;
		evhttp_connection_set_closecb(mc->mc_evcon, proxy_conn_closed, mc);
		bufferevent_decref(mc->mc_bev);
		mc->mc_bev = NULL;
		if (!proxy_conn_within_limits(mo->mo_md, mc))
			evhttp_connection_free(mc->mc_evcon);	/* its close callback drops mc */
	}
	mo->mo_unattached = 0;
	if (mo->mo_accept_paused && mo->mo_bound != NULL)
		evconnlistener_enable(evhttp_bound_socket_get_listener(mo->mo_bound));
	mo->mo_accept_paused = 0;
}

static void
proxy_conns_attach_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	proxy_conns_attach(arg);
}

/*
 * evhttp's bufferevent callback: every connection the proxy accepts is
 * made here (as evhttp would make it), so every one is known and can be
 * shut down when authority ends (proxy_close_operation). Threat: an
 * accepted connection that outlives a revocation is a channel nobody
 * tracks; if one cannot be tracked the mediator exits (every connection
 * closes with it) rather than serve it untracked.
 */
static struct bufferevent *
proxy_conn_new(struct event_base *base, void *arg)
{
	struct medop *mo = arg;
	struct bufferevent *bev;
	struct medconn *mc;

	if ((mc = calloc(1, sizeof(*mc))) == NULL ||
	    (bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE)) == NULL ||
	    (mc->mc_hold = evbuffer_new()) == NULL || (mc->mc_tmp = evbuffer_new()) == NULL ||
	    (mc->mc_incb = evbuffer_add_cb(bufferevent_get_input(bev), proxy_input_cb, mc)) ==
	    NULL ||
	    (mc->mc_head_timer = evtimer_new(base, proxy_head_timeout_cb, mc)) == NULL)
		fatalx("%s: out of memory for a client connection: exiting rather than serving "
		    "it untracked", mo->mo_id);
	bufferevent_incref(bev);
	mc->mc_mo = mo;
	mc->mc_bev = bev;
	mc->mc_cbev = bev;
	mc->mc_state = MC_HEAD;
	TAILQ_INSERT_TAIL(&mo->mo_conns, mc, mc_entry);
	mo->mo_nconns++;
	event_active(mo->mo_attach, EV_TIMEOUT, 0);
	/*
	 * libevent's listener accepts until the queue is empty before any
	 * other callback runs, and a flooding client refills the queue as
	 * fast as it is drained: thousands of descriptors could be taken
	 * before proxy_conns_attach sees one and applies the limits. Pause
	 * accepting after a burst; proxy_conns_attach turns it back on.
	 */
	if (++mo->mo_unattached >= MEDIATORD_ACCEPT_BURST && !mo->mo_accept_paused &&
	    mo->mo_bound != NULL) {
		evconnlistener_disable(evhttp_bound_socket_get_listener(mo->mo_bound));
		mo->mo_accept_paused = 1;
	}
	return bev;
}

static void
proxy_medop_free(struct medop *mo)
{
	struct medconn *mc;

	/* evhttp_free closes every connection (each close callback forgets one). */
	proxy_conns_attach(mo);
	if (mo->mo_http != NULL)
		evhttp_free(mo->mo_http);
	while ((mc = TAILQ_FIRST(&mo->mo_conns)) != NULL)
		proxy_conn_drop(mo, mc);
	if (mo->mo_attach != NULL)
		event_free(mo->mo_attach);
	free(mo);
}

/*
 * The operation ended: stop accepting at once; the server itself is freed
 * when its last request in flight is answered (boundaryd refuses those).
 */
static void
proxy_medop_retire(struct medop *mo)
{
	if (mo->mo_bound != NULL) {
		evhttp_del_accept_socket(mo->mo_http, mo->mo_bound);
		mo->mo_bound = NULL;
	}
	mo->mo_gone = 1;
	if (mo->mo_inflight == 0)
		proxy_medop_free(mo);
}

/* A proxy section from boundaryd, into mo; -1 when it is not usable (not served). */
static int
proxy_medop_parse(struct json_object *proxy, struct medop *mo)
{
	const char *listen = schema_string(proxy, "listen");
	const char *client = schema_string(proxy, "client_address");

	if (listen == NULL || client == NULL ||
	    netpolicy_parse_addr(client, &mo->mo_client_family, mo->mo_client_addr) != 0)
		return -1;
	util_strlcpy(mo->mo_listen, listen, sizeof(mo->mo_listen));
	util_strlcpy(mo->mo_client_str, client, sizeof(mo->mo_client_str));
	mo->mo_max_request = schema_int(proxy, "max_request_bytes", MEDIATORD_DEFAULT_MAX_REQUEST);
	mo->mo_max_response = schema_int(proxy, "max_response_bytes",
	    MEDIATORD_DEFAULT_MAX_RESPONSE);
	mo->mo_connect_timeout = (int)schema_int(proxy, "connect_timeout_seconds",
	    MEDIATORD_DEFAULT_CONNECT_TIMEOUT);
	mo->mo_io_timeout = (int)schema_int(proxy, "io_timeout_seconds",
	    MEDIATORD_DEFAULT_IO_TIMEOUT);
	mo->mo_max_redirects = schema_int(proxy, "max_redirects", MEDIATORD_DEFAULT_MAX_REDIRECTS);
	mo->mo_txn = schema_child(proxy, "transaction") != NULL;
	if (mo->mo_connect_timeout < 1 || mo->mo_io_timeout < 1 || mo->mo_max_request < 0 ||
	    mo->mo_max_response < 0 || mo->mo_max_redirects < 0 ||
	    mo->mo_max_redirects > MEDIATORD_MAX_REDIRECTS)
		return -1;
	return 0;
}

/*
 * The listening socket, made here from the parsed address: evhttp's own
 * bind would go through getaddrinfo (AI_ADDRCONFIG opens a netlink
 * socket, which the seccomp filter does not allow).
 */
static int
proxy_listen_socket(const char *spec)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, one = 1;

	if (netpolicy_listen_sockaddr(spec, &ss, &sl) != 0)
		return -1;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 128) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int
proxy_medop_listen(struct mediatord *md, struct medop *mo)
{
	int fd;

	if (mo->mo_attach == NULL &&
	    (mo->mo_attach = event_new(md->md_base, -1, 0, proxy_conns_attach_cb, mo)) == NULL)
		return -1;
	if ((fd = proxy_listen_socket(mo->mo_listen)) < 0)
		return -1;
	if ((mo->mo_http = evhttp_new(md->md_base)) == NULL) {
		close(fd);
		return -1;
	}
	evhttp_set_allowed_methods(mo->mo_http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
	    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
	    EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	/* Larger bodies are answered 413 by evhttp before the callback. */
	evhttp_set_max_body_size(mo->mo_http, mo->mo_max_request);
	evhttp_set_max_headers_size(mo->mo_http, MEDIATORD_MAX_HEADERS_SIZE);
	evhttp_set_timeout(mo->mo_http, mo->mo_io_timeout);
	evhttp_set_gencb(mo->mo_http, proxy_request_cb, mo);
	evhttp_set_bevcb(mo->mo_http, proxy_conn_new, mo);
	if ((mo->mo_bound = evhttp_accept_socket_with_handle(mo->mo_http, fd)) == NULL) {
		close(fd);
		evhttp_free(mo->mo_http);
		mo->mo_http = NULL;
		return -1;
	}
	return 0;
}

/*
 * boundaryd's list of operations with a proxy: listen for new ones, stop
 * listening for those no longer there (ended). A listener that cannot be
 * bound yet is tried again at the next refresh.
 */
void
proxy_apply_config(struct mediatord *md, struct json_object *ops)
{
	struct medop *mo, *next;

	TAILQ_FOREACH(mo, &md->md_ops, mo_entry)
		mo->mo_seen = 0;
	for (size_t i = 0; i < json_object_array_length(ops); i++) {
		struct json_object *o = json_object_array_get_idx(ops, i);
		const char *id = schema_string(o, "operation_id");
		struct json_object *proxy = schema_child(o, "proxy");
		if (id == NULL || proxy == NULL || strlen(id) >= sizeof(mo->mo_id))
			continue;
		TAILQ_FOREACH(mo, &md->md_ops, mo_entry)
			if (strcmp(mo->mo_id, id) == 0)
				break;
		if (mo != NULL) {
			mo->mo_seen = 1;
			continue;
		}
		if (md->md_nops >= MEDIATORD_MAX_OPS || (mo = calloc(1, sizeof(*mo))) == NULL)
			continue;
		mo->mo_md = md;
		TAILQ_INIT(&mo->mo_conns);
		util_strlcpy(mo->mo_id, id, sizeof(mo->mo_id));
		if (proxy_medop_parse(proxy, mo) != 0) {
			log_warnx("%s: proxy section not usable", id);
			free(mo);
			continue;
		}
		if (proxy_medop_listen(md, mo) != 0) {
			log_warnx("%s: cannot listen on %s: %s", id, mo->mo_listen, strerror(errno));
			if (mo->mo_attach != NULL)
				event_free(mo->mo_attach);
			free(mo);
			continue;
		}
		mo->mo_seen = 1;
		TAILQ_INSERT_TAIL(&md->md_ops, mo, mo_entry);
		md->md_nops++;
		log_info("%s: listening on %s for client %s", id, mo->mo_listen, mo->mo_client_str);
	}
	for (mo = TAILQ_FIRST(&md->md_ops); mo != NULL; mo = next) {
		next = TAILQ_NEXT(mo, mo_entry);
		if (mo->mo_seen)
			continue;
		log_info("%s: no longer configured; listener on %s closed", mo->mo_id, mo->mo_listen);
		/* The operation ended: its accepted connections end with it. */
		proxy_close_operation(md, mo->mo_id, "operation_ended", 0);
		TAILQ_REMOVE(&md->md_ops, mo, mo_entry);
		md->md_nops--;
		proxy_medop_retire(mo);
	}
}

void
proxy_free_all(struct mediatord *md)
{
	struct medop *mo;

	proxy_channel_lost(md);
	while ((mo = TAILQ_FIRST(&md->md_ops)) != NULL) {
		TAILQ_REMOVE(&md->md_ops, mo, mo_entry);
		proxy_medop_free(mo);
	}
}

/*
 * A transactional response: tell boundaryd its size (it counts against the
 * budget whether or not it is delivered) and hold it until the answer. An
 * upstream failure releases the reservation and is refused as before.
 */
static void
proxy_txn_hold(struct mreq *mr, struct evhttp_request *resp, int code)
{
	struct mediatord *md = mr->mr_md;
	struct json_object *params = json_object_new_object();
	struct timeval tv = { MEDIATORD_AUTH_TIMEOUT_SEC, 0 };
	int failed = resp == NULL || code < 100 || code > 599;
	int64_t n = 0;

	if (!failed) {
		struct evkeyval *kv;
		mr->mr_headers = json_object_new_array();
		TAILQ_FOREACH(kv, evhttp_request_get_input_headers(resp), next) {
			if (!medreq_response_header_allowed(kv->key))
				continue;
			struct json_object *pair = json_object_new_array();
			json_object_array_add(pair, json_object_new_string(kv->key));
			json_object_array_add(pair, json_object_new_string(kv->value));
			json_object_array_add(mr->mr_headers, pair);
		}
		mr->mr_body = evbuffer_new();
		if (mr->mr_body == NULL ||
		    evbuffer_add_buffer(mr->mr_body, evhttp_request_get_input_buffer(resp)) != 0) {
			failed = 1;
		} else {
			n = (int64_t)evbuffer_get_length(mr->mr_body);
			mr->mr_code = code;
			util_strlcpy(mr->mr_code_line, evhttp_request_get_response_code_line(resp) ?
			    evhttp_request_get_response_code_line(resp) : "", sizeof(mr->mr_code_line));
		}
	}
	json_object_object_add(params, "operation_id", json_object_new_string(mr->mr_op));
	json_object_object_add(params, "transaction_id", json_object_new_string(mr->mr_txid));
	json_object_object_add(params, "reservation", json_object_new_int64(mr->mr_reservation));
	json_object_object_add(params, "response_bytes", json_object_new_int64(n));
	json_object_object_add(params, "upstream_error", json_object_new_boolean(failed));
	json_object_object_add(params, "status", json_object_new_int(failed ? 0 : code));
	if (mr->mr_decision[0] != '\0')
		json_object_object_add(params, "decision_id", json_object_new_string(mr->mr_decision));
	mr->mr_completing = 1;
	if (mediatord_send(md, "mediator.complete", params, &mr->mr_auth_id) != 0) {
		proxy_fail(mr, 503, "Service Unavailable", "authority_unavailable");
		return;
	}
	if (failed) {
		/* Nothing to deliver: the answer does not matter, the refusal goes now. */
		proxy_fail(mr, 502, "Bad Gateway", mr->mr_up_error == EVREQ_HTTP_DATA_TOO_LONG + 1 ?
		    "response_too_large" : "upstream_failed");
		return;
	}
	evtimer_del(mr->mr_timer);
	event_free(mr->mr_timer);
	mr->mr_timer = evtimer_new(md->md_base, proxy_auth_timeout_cb, mr);
	if (mr->mr_timer == NULL || evtimer_add(mr->mr_timer, &tv) != 0) {
		proxy_fail(mr, 503, "Service Unavailable", "authority_unavailable");
		return;
	}
	TAILQ_INSERT_TAIL(&md->md_pending, mr, mr_entry);
	mr->mr_waiting = 1;
}

/* boundaryd's answer to mediator.complete: deliver the held response, or refuse it. */
static void
proxy_completed(struct mreq *mr, struct json_object *result)
{
	struct evhttp_request *req = mr->mr_client;
	const char *reason = result != NULL ? schema_string(result, "reason") : NULL;

	if (req == NULL) {
		proxy_mreq_free(mr);
		return;
	}
	if (result == NULL || !schema_bool(result, "deliver", 0)) {
		const char *code = reason != NULL && strlen(reason) < 64 ? reason : "authority_error";
		struct evhttp_request *r2 = mr->mr_client;
		/* Not returned: the client learns only that it was refused, and the connection closes. */
		proxy_log_refusal(mr, code);
		proxy_detach_client(mr);
		proxy_refuse(r2, 403, "Forbidden", code, 1);
		proxy_mreq_free(mr);
		return;
	}
	mr->mr_completing = 0;
	/*
	 * A GET/HEAD redirect boundaryd accounted: followed, not delivered
	 * (its Location is an allowlisted header, kept with the held response).
	 */
	if (medreq_is_redirect(mr->mr_code) && redirect_wanted(mr)) {
		const char *loc = NULL;
		for (size_t i = 0; i < json_object_array_length(mr->mr_headers); i++) {
			struct json_object *pair = json_object_array_get_idx(mr->mr_headers, i);
			const char *k = json_object_get_string(json_object_array_get_idx(pair, 0));
			if (k != NULL && strcasecmp(k, "Location") == 0) {
				/* two Locations are no one unambiguous URL */
				loc = loc == NULL ? json_object_get_string(
				    json_object_array_get_idx(pair, 1)) : "";
			}
		}
		redirect_follow(mr, loc);
		return;
	}
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	/*
	 * One request per client connection in transaction mode: no idle
	 * keep-alive connection outlives a transaction (closing the ones with
	 * a request in flight is proxy_transaction_closed's).
	 */
	evhttp_add_header(out, "Connection", "close");
	for (size_t i = 0; i < json_object_array_length(mr->mr_headers); i++) {
		struct json_object *pair = json_object_array_get_idx(mr->mr_headers, i);
		evhttp_add_header(out, json_object_get_string(json_object_array_get_idx(pair, 0)),
		    json_object_get_string(json_object_array_get_idx(pair, 1)));
	}
	proxy_detach_client(mr);
	evhttp_send_reply(req, mr->mr_code, mr->mr_code_line, mr->mr_body);
	proxy_mreq_free(mr);
}

/*
 * The operation's authority narrowed (its transaction closed, a mediator
 * lease was revoked or expired): every client connection of its proxy is
 * shut down at once, idle or busy. Threat: a connection accepted while
 * the authority held (idle, between requests, or mid-request) and used
 * after it ended; boundaryd would refuse its request, but the channel
 * itself is closed here too, and the pinned upstream sockets with it.
 *   - an upstream request is cancelled (libevent resets its connection:
 *     the pinned socket closes at once, no callback runs); with release,
 *     its reservation is handed back (the transaction is still active);
 *   - a request the mediator holds (waiting for boundaryd, DNS or the
 *     upstream) is answered 403 code with Connection: close, so evhttp
 *     closes that connection after the refusal; the rest of its work ends
 *     on its own callback, which finds the client gone;
 *   - every other accepted connection (no request yet, between requests,
 *     a request still being read, a response still being written) is
 *     freed: its socket is closed now.
 */
static void
proxy_close_operation(struct mediatord *md, const char *op, const char *code, int release)
{
	struct evhttp_connection **busy = NULL;
	size_t nbusy = 0, nreq = 0, nconn = 0;
	struct medconn *mc, *mcnext;
	struct medop *mo;
	struct mreq *mr, *next;

	TAILQ_FOREACH(mo, &md->md_ops, mo_entry)
		if (strcmp(mo->mo_id, op) == 0)
			break;
	if (mo != NULL)
		proxy_conns_attach(mo);	/* one accepted this loop turn is closed too */
	/* The connections a refusal goes out on are closed by evhttp after it. */
	TAILQ_FOREACH(mr, &md->md_all, mr_all)
		if (strcmp(mr->mr_op, op) == 0 && mr->mr_client != NULL)
			nbusy++;
	if (nbusy > 0 && (busy = calloc(nbusy, sizeof(*busy))) == NULL)
		fatalx("%s: out of memory closing connections: exiting (every connection closes)",
		    op);
	nbusy = 0;
	TAILQ_FOREACH(mr, &md->md_all, mr_all)
		if (strcmp(mr->mr_op, op) == 0 && mr->mr_client != NULL)
			busy[nbusy++] = evhttp_request_get_connection(mr->mr_client);
	for (mc = mo != NULL ? TAILQ_FIRST(&mo->mo_conns) : NULL; mc != NULL; mc = mcnext) {
		size_t i;

		mcnext = TAILQ_NEXT(mc, mc_entry);
		for (i = 0; i < nbusy; i++)
			if (busy[i] == mc->mc_evcon)
				break;
		if (i < nbusy)
			continue;
		/* Its close callback (proxy_conn_closed) frees mc, and only mc. */
		evhttp_connection_free(mc->mc_evcon);
		nconn++;
	}
	free(busy);
	for (mr = TAILQ_FIRST(&md->md_all); mr != NULL; mr = next) {
		next = TAILQ_NEXT(mr, mr_all);
		if (strcmp(mr->mr_op, op) != 0)
			continue;
		if (mr->mr_client != NULL) {
			struct evhttp_request *req = mr->mr_client;
			proxy_log_refusal(mr, code);
			proxy_detach_client(mr);
			proxy_refuse(req, 403, "Forbidden", code, 1);
			nreq++;
		}
		if (mr->mr_up != NULL) {
			struct evhttp_request *up = mr->mr_up;
			mr->mr_up = NULL;
			evhttp_cancel_request(up);
			if (release && mr->mr_reservation > 0)
				proxy_release_reservation(md, mr->mr_op, mr->mr_txid,
				    mr->mr_reservation, mr->mr_decision);
			proxy_mreq_free(mr);
		}
	}
	log_info("%s: %s: %zu requests refused, %zu other client connections closed", op, code,
	    nreq, nconn);
}

void
proxy_transaction_closed(struct mediatord *md, struct json_object *params)
{
	const char *op = schema_string(params, "operation_id");

	if (op == NULL)
		return;
	log_info("%s: transaction %s %s: closing its requests", op,
	    schema_string(params, "transaction_id") ? schema_string(params, "transaction_id") : "?",
	    schema_string(params, "state") ? schema_string(params, "state") : "closed");
	/* The transaction is over: boundaryd refuses its responses, nothing to hand back. */
	proxy_close_operation(md, op, "transaction_closed", 0);
}

void
proxy_lease_closed(struct mediatord *md, struct json_object *params)
{
	const char *op = schema_string(params, "operation_id");

	if (op == NULL)
		return;
	log_info("%s: mediator lease %s %s: closing its connections", op,
	    schema_string(params, "lease_id") ? schema_string(params, "lease_id") : "?",
	    schema_string(params, "state") ? schema_string(params, "state") : "closed");
	proxy_close_operation(md, op, "mediator_lease_closed", 1);
}
