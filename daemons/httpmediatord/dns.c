/*
 * dns.c: the confined DNS proxy of an operation (the "dns" config section).
 *
 * Trust model: queries come from the agent (untrusted), replies from an
 * upstream server the agent may control. The proxy decides nothing: every
 * query, allowed or not, is put to boundaryd (mediator.dns), which leases
 * the answered addresses and records the decision; the client gets an
 * answer only after boundaryd replied that the kernel holds the leases.
 * Threats answered here:
 *  - exfiltration through query names: a name outside dns.allow is never
 *    sent upstream (the section boundaryd gave us is checked first; it
 *    decides again on its own);
 *  - spoofed or off-path replies: a connected UDP socket per query, a
 *    random id, the question must match, TC is refused (SERVFAIL);
 *  - smuggled records: the reply is rebuilt from the checked chain
 *    (question, CNAMEs, A/AAAA of the last name), nothing else is copied;
 *  - another client using the operation's proxy: only dns.client_address
 *    is served (UDP and TCP);
 *  - a silent or lost boundaryd: SERVFAIL, never an unleased answer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <json-c/json.h>

#include "dnsmsg.h"
#include "dnspolicy.h"
#include "httpmediatord.h"
#include "log.h"
#include "netpolicy.h"
#include "schema.h"
#include "util.h"

#define DNS_UPSTREAM_TIMEOUT_SEC 3
#define DNS_MAX_PENDING 64		/* per operation */
#define DNS_TCP_IDLE_SEC 10
#define DNS_TCP_MAX 65535

struct dnsop {
	TAILQ_ENTRY(dnsop) do_entry;
	struct mediatord *do_md;
	char do_id[80];
	struct dnspolicy do_pol;
	char do_client_str[64];
	int do_udp;
	struct event *do_udp_ev;
	struct evconnlistener *do_tcp;
	int do_seen;
	int do_pending;
	int do_gone;
};

struct dnsq {
	TAILQ_ENTRY(dnsq) dq_entry;
	struct dnsop *dq_op;
	struct dnsmsg_query dq_q;
	struct sockaddr_storage dq_peer;	/* UDP client */
	socklen_t dq_peerlen;
	int dq_istcp;
	struct bufferevent *dq_tcp;		/* TCP client, NULL once it closed */
	int dq_up;				/* upstream socket */
	struct event *dq_up_ev;
	uint16_t dq_up_id;
	int64_t dq_auth_id;
	struct event *dq_timer;
};

static TAILQ_HEAD(, dnsop) dns_ops = TAILQ_HEAD_INITIALIZER(dns_ops);
static TAILQ_HEAD(, dnsq) dns_waiting = TAILQ_HEAD_INITIALIZER(dns_waiting);
static struct sockaddr_storage dns_upstream;
static socklen_t dns_upstreamlen;

static void dns_tcp_read_cb(struct bufferevent *bev, void *arg);
static void dns_tcp_event_cb(struct bufferevent *bev, short what, void *arg);

/* The first nameserver of resolv.conf, read before confinement. */
int
dns_init(const char *resolv_conf)
{
	FILE *f = fopen(resolv_conf, "re");
	char line[512];

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		char addr[128];
		uint8_t a[16];
		int fam;
		if (sscanf(line, "nameserver %127s", addr) != 1 ||
		    netpolicy_parse_addr(addr, &fam, a) != 0)
			continue;
		memset(&dns_upstream, 0, sizeof(dns_upstream));
		if (fam == AF_INET) {
			struct sockaddr_in *s = (struct sockaddr_in *)&dns_upstream;
			s->sin_family = AF_INET;
			s->sin_port = htons(53);
			memcpy(&s->sin_addr, a, 4);
			dns_upstreamlen = sizeof(*s);
		} else {
			struct sockaddr_in6 *s = (struct sockaddr_in6 *)&dns_upstream;
			s->sin6_family = AF_INET6;
			s->sin6_port = htons(53);
			memcpy(&s->sin6_addr, a, 16);
			dns_upstreamlen = sizeof(*s);
		}
		log_info("dns proxy: upstream resolver %s", addr);
		break;
	}
	fclose(f);
	return dns_upstreamlen ? 0 : -1;
}

static int
dns_peer_is_client(const struct dnsop *op, const struct sockaddr *sa)
{
	/* A root_pid operation's loopback proxy: no address names its client (dnspolicy.h). */
	if (op->do_pol.dp_client_family == 0)
		return sa->sa_family == AF_INET || sa->sa_family == AF_INET6;
	if (sa->sa_family == AF_INET && op->do_pol.dp_client_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)sa)->sin_addr,
		    op->do_pol.dp_client_addr, 4) == 0;
	if (sa->sa_family == AF_INET6 && op->do_pol.dp_client_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr,
		    op->do_pol.dp_client_addr, 16) == 0;
	return 0;
}

static void
dnsop_maybe_free(struct dnsop *op)
{
	if (!op->do_gone || op->do_pending > 0)
		return;
	dnspolicy_free(&op->do_pol);
	free(op);
}

/* Every TCP connection holds a reference on its operation (do_pending). */
static void
dns_tcp_close(struct dnsop *op, struct bufferevent *bev)
{
	bufferevent_free(bev);
	op->do_pending--;
	dnsop_maybe_free(op);
}

static void
dnsq_free(struct dnsq *q)
{
	struct dnsop *op = q->dq_op;

	if (q->dq_auth_id != 0)
		TAILQ_REMOVE(&dns_waiting, q, dq_entry);
	if (q->dq_up_ev != NULL)
		event_free(q->dq_up_ev);
	if (q->dq_up >= 0)
		close(q->dq_up);
	if (q->dq_timer != NULL)
		event_free(q->dq_timer);
	if (q->dq_tcp != NULL && op->do_gone) {
		dns_tcp_close(op, q->dq_tcp);
	} else if (q->dq_tcp != NULL) {
		/* The connection takes the next query. */
		bufferevent_setcb(q->dq_tcp, dns_tcp_read_cb, NULL, dns_tcp_event_cb, op);
		bufferevent_enable(q->dq_tcp, EV_READ);
	}
	free(q);
	op->do_pending--;
	dnsop_maybe_free(op);
}

/* Send a reply built for q and free q. */
static void
dnsq_send(struct dnsq *q, const uint8_t *msg, int len)
{
	if (len < 0) {
		dnsq_free(q);
		return;
	}
	if (q->dq_istcp) {
		if (q->dq_tcp == NULL) {
			dnsq_free(q); /* the client left */
			return;
		}
		uint8_t hdr[2] = { (uint8_t)(len >> 8), (uint8_t)len };
		struct evbuffer *out = bufferevent_get_output(q->dq_tcp);
		if (evbuffer_add(out, hdr, 2) != 0 || evbuffer_add(out, msg, (size_t)len) != 0)
			log_warnx("%s: dns: cannot queue a TCP reply", q->dq_op->do_id);
	} else if (!q->dq_op->do_gone &&
	    sendto(q->dq_op->do_udp, msg, (size_t)len, 0, (struct sockaddr *)&q->dq_peer,
	    q->dq_peerlen) < 0) {
		log_warn("%s: dns: sendto", q->dq_op->do_id);
	}
	dnsq_free(q);
}

static void
dnsq_error(struct dnsq *q, int rcode)
{
	uint8_t out[DNSMSG_UDP_MAX];
	dnsq_send(q, out, dnsmsg_build_error(&q->dq_q, rcode, out, sizeof(out)));
}

static void
dnsq_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dnsq *q = arg;
	(void)fd;
	(void)what;
	log_warnx("%s: dns: %s timed out (%s)", q->dq_op->do_id, q->dq_q.dq_name,
	    q->dq_auth_id ? "boundaryd" : "upstream");
	dnsq_error(q, DNS_RCODE_SERVFAIL);
}

/* Put the (possibly empty) answer to boundaryd: it decides and leases. */
static void
dnsq_authorize(struct dnsq *q, int rcode, const struct dnsmsg_chain *c)
{
	struct json_object *p = json_object_new_object(), *names = json_object_new_array();
	struct json_object *addrs = json_object_new_array();
	struct timeval tv = { MEDIATORD_AUTH_TIMEOUT_SEC, 0 };
	int64_t id;

	for (size_t i = 0; i < c->dc_nnames; i++)
		json_object_array_add(names, json_object_new_string(c->dc_names[i]));
	for (size_t i = 0; i < c->dc_naddrs; i++) {
		char a[INET6_ADDRSTRLEN];
		inet_ntop(c->dc_family, c->dc_addrs[i], a, sizeof(a));
		json_object_array_add(addrs, json_object_new_string(a));
	}
	json_object_object_add(p, "operation_id", json_object_new_string(q->dq_op->do_id));
	json_object_object_add(p, "client_address", json_object_new_string(q->dq_op->do_client_str));
	json_object_object_add(p, "qname", json_object_new_string(q->dq_q.dq_name));
	json_object_object_add(p, "qtype", json_object_new_string(dnsmsg_type_name(q->dq_q.dq_type)));
	json_object_object_add(p, "rcode", json_object_new_int(rcode));
	json_object_object_add(p, "names", names);
	json_object_object_add(p, "addresses", addrs);
	json_object_object_add(p, "ttl", json_object_new_int64(c->dc_ttl));
	if (mediatord_send(q->dq_op->do_md, "mediator.dns", p, &id) != 0) {
		dnsq_error(q, DNS_RCODE_SERVFAIL);
		return;
	}
	q->dq_auth_id = id;
	TAILQ_INSERT_TAIL(&dns_waiting, q, dq_entry);
	evtimer_del(q->dq_timer);
	evtimer_add(q->dq_timer, &tv);
}

/*
 * The chain is kept with the query while boundaryd decides; it is what
 * the client will get, so it is the exact chain boundaryd saw.
 */
struct dnsq_chain {
	struct dnsq q;
	struct dnsmsg_chain c;
	int rcode;
};

static void
dnsq_upstream_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dnsq_chain *qc = arg;
	struct dnsq *q = &qc->q;
	uint8_t buf[4096];
	struct dnsmsg_reply *r;
	const char *code = NULL;
	ssize_t n;

	(void)what;
	n = recv(fd, buf, sizeof(buf), 0);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		log_warn("%s: dns: upstream", q->dq_op->do_id);
		dnsq_error(q, DNS_RCODE_SERVFAIL);
		return;
	}
	if ((r = malloc(sizeof(*r))) == NULL) {
		dnsq_error(q, DNS_RCODE_SERVFAIL);
		return;
	}
	/* Not our id: an off-path guess or a stale reply; keep waiting. */
	if (n >= 2 && (((uint16_t)buf[0] << 8) | buf[1]) != q->dq_up_id) {
		free(r);
		return;
	}
	if (dnsmsg_parse_reply(buf, (size_t)n, r, &code) != 0 ||
	    strcmp(r->da_qname, q->dq_q.dq_name) != 0 || r->da_qtype != q->dq_q.dq_type ||
	    dnsmsg_chain(r, q->dq_q.dq_name, q->dq_q.dq_type, &qc->c, &code) != 0) {
		log_warnx("%s: dns: upstream reply for %s refused: %s", q->dq_op->do_id,
		    q->dq_q.dq_name, code ? code : DNSE_MISMATCH);
		free(r);
		dnsq_error(q, DNS_RCODE_SERVFAIL);
		return;
	}
	qc->rcode = r->da_rcode;
	free(r);
	event_free(q->dq_up_ev);
	q->dq_up_ev = NULL;
	close(q->dq_up);
	q->dq_up = -1;
	dnsq_authorize(q, qc->rcode, &qc->c);
}

static void
dnsq_resolve(struct dnsq_chain *qc)
{
	struct dnsq *q = &qc->q;
	uint8_t msg[DNSMSG_UDP_MAX];
	int len;

	evutil_secure_rng_get_bytes(&q->dq_up_id, sizeof(q->dq_up_id));
	len = dnsmsg_build_query(q->dq_up_id, q->dq_q.dq_name, q->dq_q.dq_type, msg, sizeof(msg));
	if (dns_upstreamlen == 0 || len < 0) {
		dnsq_error(q, DNS_RCODE_SERVFAIL);
		return;
	}
	/* A connected socket: the kernel drops datagrams from any other source. */
	q->dq_up = socket(dns_upstream.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (q->dq_up < 0 || connect(q->dq_up, (struct sockaddr *)&dns_upstream, dns_upstreamlen) != 0 ||
	    send(q->dq_up, msg, (size_t)len, 0) != len ||
	    (q->dq_up_ev = event_new(q->dq_op->do_md->md_base, q->dq_up, EV_READ | EV_PERSIST,
	    dnsq_upstream_cb, qc)) == NULL || event_add(q->dq_up_ev, NULL) != 0) {
		log_warn("%s: dns: upstream query", q->dq_op->do_id);
		dnsq_error(q, DNS_RCODE_SERVFAIL);
	}
}

/* The client closed while its query runs: the query finishes without it. */
static void
dnsq_tcp_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct dnsq *q = arg;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	q->dq_tcp = NULL;
	dns_tcp_close(q->dq_op, bev);
}

/*
 * One query from the client: parsed, then asked upstream or refused via
 * boundaryd. -1 when it was dropped (a TCP caller then closes).
 */
static int
dns_query(struct dnsop *op, const uint8_t *buf, size_t n, const struct sockaddr *peer,
    socklen_t peerlen, struct bufferevent *tcp)
{
	struct dnsq_chain *qc;
	struct dnsq *q;
	const char *code = NULL;
	struct timeval tv = { DNS_UPSTREAM_TIMEOUT_SEC, 0 };

	if (op->do_pending >= DNS_MAX_PENDING) {
		log_warnx("%s: dns: too many queries in flight; dropped", op->do_id);
		return -1;
	}
	if ((qc = calloc(1, sizeof(*qc))) == NULL)
		return -1;
	q = &qc->q;
	q->dq_op = op;
	q->dq_up = -1;
	if (dnsmsg_parse_query(buf, n, &q->dq_q, &code) != 0) {
		/* Not a query we can answer to: dropped, and said so. */
		log_warnx("%s: dns: query from %s refused: %s", op->do_id, op->do_client_str, code);
		free(qc);
		return -1;
	}
	op->do_pending++;
	if (peer != NULL) {
		memcpy(&q->dq_peer, peer, peerlen);
		q->dq_peerlen = peerlen;
	}
	q->dq_tcp = tcp;
	q->dq_istcp = tcp != NULL;
	if (tcp != NULL) {
		/* One query at a time per connection; a close while it runs is noted. */
		bufferevent_disable(tcp, EV_READ);
		bufferevent_setcb(tcp, NULL, NULL, dnsq_tcp_event_cb, q);
	}
	if ((q->dq_timer = evtimer_new(op->do_md->md_base, dnsq_timeout_cb, q)) == NULL ||
	    evtimer_add(q->dq_timer, &tv) != 0) {
		dnsq_error(q, DNS_RCODE_SERVFAIL);
		return 0;
	}
	qc->c.dc_nnames = 1;
	memcpy(qc->c.dc_names[0], q->dq_q.dq_name, sizeof(q->dq_q.dq_name));
	qc->c.dc_family = q->dq_q.dq_type == DNS_TYPE_AAAA ? AF_INET6 : AF_INET;
	/*
	 * Only A and AAAA of allowed names go upstream. Anything else goes
	 * to boundaryd without an answer, for its decision and its evidence.
	 */
	if (q->dq_q.dq_class != DNS_CLASS_IN ||
	    (q->dq_q.dq_type != DNS_TYPE_A && q->dq_q.dq_type != DNS_TYPE_AAAA) ||
	    dnspolicy_match(&op->do_pol, q->dq_q.dq_name, 0) < 0) {
		dnsq_authorize(q, DNS_RCODE_NOERROR, &qc->c);
		return 0;
	}
	dnsq_resolve(qc);
	return 0;
}

static void
dns_udp_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dnsop *op = arg;
	uint8_t buf[DNSMSG_UDP_MAX * 8];
	struct sockaddr_storage ss;

	(void)what;
	/* Bounded: at most 32 datagrams per wakeup, the rest on the next one. */
	for (int i = 0; i < 32; i++) {
		socklen_t sl = sizeof(ss);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&ss, &sl);
		if (n < 0)
			return;
		if (!dns_peer_is_client(op, (struct sockaddr *)&ss)) {
			log_warnx("%s: dns: datagram from a non-client address dropped", op->do_id);
			continue;
		}
		(void)dns_query(op, buf, (size_t)n, (struct sockaddr *)&ss, sl, NULL);
	}
}

static void
dns_tcp_event_cb(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		dns_tcp_close(arg, bev);
}

static void
dns_tcp_read_cb(struct bufferevent *bev, void *arg)
{
	struct dnsop *op = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[2], *msg;
	size_t len;

	if (evbuffer_get_length(in) < 2 || evbuffer_copyout(in, hdr, 2) != 2)
		return;
	len = ((size_t)hdr[0] << 8) | hdr[1];
	if (len < 12) {
		dns_tcp_close(op, bev);
		return;
	}
	if (evbuffer_get_length(in) < 2 + len)
		return;
	if ((msg = malloc(len)) == NULL || evbuffer_drain(in, 2) != 0 ||
	    evbuffer_remove(in, msg, len) != (int)len) {
		free(msg);
		dns_tcp_close(op, bev);
		return;
	}
	if (dns_query(op, msg, len, NULL, 0, bev) != 0)
		dns_tcp_close(op, bev);
	free(msg);
}

static void
dns_tcp_accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
    void *arg)
{
	struct dnsop *op = arg;
	struct bufferevent *bev;
	struct timeval tv = { DNS_TCP_IDLE_SEC, 0 };

	(void)l;
	(void)salen;
	if (!dns_peer_is_client(op, sa)) {
		log_warnx("%s: dns: TCP connection from a non-client address refused", op->do_id);
		close(fd);
		return;
	}
	if ((bev = bufferevent_socket_new(op->do_md->md_base, fd, BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		close(fd);
		return;
	}
	op->do_pending++; /* the connection's reference */
	bufferevent_setcb(bev, dns_tcp_read_cb, NULL, dns_tcp_event_cb, op);
	bufferevent_set_timeouts(bev, &tv, &tv);
	bufferevent_setwatermark(bev, EV_READ, 0, 2 + DNS_TCP_MAX);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}


static int
dnsop_listen(struct mediatord *md, struct dnsop *op)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1;

	if (netpolicy_listen_sockaddr(op->do_pol.dp_listen, &ss, &sl) != 0)
		return -1;
	op->do_udp = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (op->do_udp < 0)
		return -1;
	if (setsockopt(op->do_udp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(op->do_udp, (struct sockaddr *)&ss, sl) != 0 ||
	    (op->do_udp_ev = event_new(md->md_base, op->do_udp, EV_READ | EV_PERSIST, dns_udp_cb,
	    op)) == NULL || event_add(op->do_udp_ev, NULL) != 0)
		goto fail;
	op->do_tcp = evconnlistener_new_bind(md->md_base, dns_tcp_accept_cb, op,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 16,
	    (struct sockaddr *)&ss, (int)sl);
	if (op->do_tcp == NULL)
		goto fail;
	return 0;
fail:
	if (op->do_udp_ev != NULL)
		event_free(op->do_udp_ev);
	op->do_udp_ev = NULL;
	close(op->do_udp);
	op->do_udp = -1;
	return -1;
}

static void
dnsop_retire(struct dnsop *op)
{
	TAILQ_REMOVE(&dns_ops, op, do_entry);
	if (op->do_udp_ev != NULL)
		event_free(op->do_udp_ev);
	if (op->do_udp >= 0)
		close(op->do_udp);
	if (op->do_tcp != NULL)
		evconnlistener_free(op->do_tcp);
	op->do_udp_ev = NULL;
	op->do_udp = -1;
	op->do_tcp = NULL;
	op->do_gone = 1;
	dnsop_maybe_free(op);
}

void
dns_apply_config(struct mediatord *md, struct json_object *ops)
{
	struct dnsop *op, *next;

	TAILQ_FOREACH(op, &dns_ops, do_entry)
		op->do_seen = 0;
	for (size_t i = 0; i < json_object_array_length(ops); i++) {
		struct json_object *o = json_object_array_get_idx(ops, i);
		const char *id = schema_string(o, "operation_id");
		struct json_object *dns = schema_child(o, "dns");
		char *cause = NULL;
		if (id == NULL || dns == NULL || strlen(id) >= sizeof(op->do_id))
			continue;
		TAILQ_FOREACH(op, &dns_ops, do_entry)
			if (strcmp(op->do_id, id) == 0)
				break;
		if (op != NULL) {
			op->do_seen = 1;
			continue;
		}
		if ((op = calloc(1, sizeof(*op))) == NULL)
			continue;
		op->do_md = md;
		op->do_udp = -1;
		util_strlcpy(op->do_id, id, sizeof(op->do_id));
		if (dnspolicy_parse(dns, &op->do_pol, &cause) != 0) {
			log_warnx("%s: dns section not usable: %s", id, cause);
			free(cause);
			free(op);
			continue;
		}
		if (op->do_pol.dp_client_family == 0)
			util_strlcpy(op->do_client_str, "any", sizeof(op->do_client_str));
		else
			inet_ntop(op->do_pol.dp_client_family, op->do_pol.dp_client_addr,
			    op->do_client_str, sizeof(op->do_client_str));
		if (dnsop_listen(md, op) != 0) {
			log_warn("%s: dns: cannot listen on %s", id, op->do_pol.dp_listen);
			dnspolicy_free(&op->do_pol);
			free(op);
			continue;
		}
		op->do_seen = 1;
		TAILQ_INSERT_TAIL(&dns_ops, op, do_entry);
		log_info("%s: dns proxy on %s for client %s", id, op->do_pol.dp_listen,
		    op->do_client_str);
	}
	for (op = TAILQ_FIRST(&dns_ops); op != NULL; op = next) {
		next = TAILQ_NEXT(op, do_entry);
		if (op->do_seen)
			continue;
		log_info("%s: dns proxy on %s closed", op->do_id, op->do_pol.dp_listen);
		dnsop_retire(op);
	}
}

/* boundaryd's reply to a mediator.dns; 0 when id is not one of ours. */
int
dns_authorized(struct mediatord *md, int64_t id, struct json_object *result,
    const char *error_code)
{
	struct dnsq *q;
	uint8_t out[DNS_TCP_MAX];
	const char *decision, *reason;

	(void)md;
	TAILQ_FOREACH(q, &dns_waiting, dq_entry)
		if (q->dq_auth_id == id)
			break;
	if (q == NULL)
		return 0;
	struct dnsq_chain *qc = (struct dnsq_chain *)q;
	decision = result ? schema_string(result, "decision") : NULL;
	reason = result ? schema_string(result, "reason") : NULL;
	if (decision == NULL || reason == NULL || strcmp(decision, "allow") != 0) {
		log_info("%s: dns: %s %s refused: %s", q->dq_op->do_id, dnsmsg_type_name(q->dq_q.dq_type),
		    q->dq_q.dq_name, reason ? reason : error_code ? error_code : "no decision");
		dnsq_error(q, reason != NULL && strcmp(reason, "lease_failed") != 0 ?
		    DNS_RCODE_REFUSED : DNS_RCODE_SERVFAIL);
		return 1;
	}
	if (qc->rcode != DNS_RCODE_NOERROR || qc->c.dc_naddrs == 0) {
		/* An allowed name without addresses: its rcode, no records. */
		dnsq_error(q, qc->rcode);
		return 1;
	}
	int64_t ttl = schema_int(result, "ttl", 0);
	if (ttl < 1)
		ttl = 1;
	dnsq_send(q, out, dnsmsg_build_answer(&q->dq_q, &qc->c, (uint32_t)ttl, out,
	    q->dq_tcp != NULL ? sizeof(out) : DNSMSG_UDP_MAX));
	return 1;
}

void
dns_channel_lost(struct mediatord *md)
{
	struct dnsq *q;
	(void)md;
	while ((q = TAILQ_FIRST(&dns_waiting)) != NULL)
		dnsq_error(q, DNS_RCODE_SERVFAIL);
}

/*
 * The egress's view of a name's CNAME chain (connect.c): evdns answers
 * with addresses only, so a CONNECT to an allowed name aliased to one that
 * is not would pass unseen. One query of the egress's family, on the same
 * upstream as the proxy and with the same checks (connected socket, random
 * id, the question must match), gives every name of the chain.
 */
struct dnschain {
	struct mediatord *dc_md;
	char dc_name[DNSMSG_NAME_MAX + 1];
	uint16_t dc_qtype;
	uint16_t dc_id;
	int dc_fd;
	struct event *dc_ev;
	struct event *dc_timer;
	dnschain_cb *dc_cb;
	void *dc_arg;
	struct dnsmsg_chain dc_chain;
};

void
dns_chain_cancel(struct dnschain *q)
{
	if (q == NULL)
		return;
	if (q->dc_ev != NULL)
		event_free(q->dc_ev);
	if (q->dc_timer != NULL)
		event_free(q->dc_timer);
	if (q->dc_fd >= 0)
		close(q->dc_fd);
	free(q);
}

static void
dns_chain_done(struct dnschain *q, int ok)
{
	dnschain_cb *cb = q->dc_cb;
	void *arg = q->dc_arg;
	struct dnsmsg_chain *c = malloc(sizeof(*c));

	if (c != NULL)
		memcpy(c, &q->dc_chain, sizeof(*c));
	dns_chain_cancel(q);
	cb(arg, ok && c != NULL, c);
	free(c);
}

static void
dns_chain_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	dns_chain_done(arg, 0);
}

static void
dns_chain_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dnschain *q = arg;
	uint8_t buf[4096];
	struct dnsmsg_reply *r;
	const char *code = NULL;
	ssize_t n;

	(void)what;
	if ((n = recv(fd, buf, sizeof(buf), 0)) < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		dns_chain_done(q, 0);
		return;
	}
	/* Not our id: an off-path guess or a stale reply; keep waiting. */
	if (n < 2 || (((uint16_t)buf[0] << 8) | buf[1]) != q->dc_id)
		return;
	if ((r = malloc(sizeof(*r))) == NULL) {
		dns_chain_done(q, 0);
		return;
	}
	int ok = dnsmsg_parse_reply(buf, (size_t)n, r, &code) == 0 &&
	    strcmp(r->da_qname, q->dc_name) == 0 && r->da_qtype == q->dc_qtype &&
	    dnsmsg_chain(r, q->dc_name, q->dc_qtype, &q->dc_chain, &code) == 0;
	free(r);
	dns_chain_done(q, ok);
}

struct dnschain *
dns_chain_lookup(struct mediatord *md, const char *name, uint16_t qtype, dnschain_cb *cb,
    void *arg)
{
	struct dnschain *q = calloc(1, sizeof(*q));
	struct timeval tv = { DNS_UPSTREAM_TIMEOUT_SEC, 0 };
	uint8_t msg[DNSMSG_UDP_MAX];
	int len;

	if (q == NULL)
		return NULL;
	q->dc_md = md;
	q->dc_fd = -1;
	q->dc_qtype = qtype;
	q->dc_cb = cb;
	q->dc_arg = arg;
	if (strlen(name) >= sizeof(q->dc_name) || dns_upstreamlen == 0) {
		free(q);
		return NULL;
	}
	util_strlcpy(q->dc_name, name, sizeof(q->dc_name));
	evutil_secure_rng_get_bytes(&q->dc_id, sizeof(q->dc_id));
	len = dnsmsg_build_query(q->dc_id, q->dc_name, qtype, msg, sizeof(msg));
	q->dc_fd = socket(dns_upstream.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (len < 0 || q->dc_fd < 0 ||
	    connect(q->dc_fd, (struct sockaddr *)&dns_upstream, dns_upstreamlen) != 0 ||
	    send(q->dc_fd, msg, (size_t)len, 0) != len ||
	    (q->dc_ev = event_new(md->md_base, q->dc_fd, EV_READ | EV_PERSIST, dns_chain_read_cb,
	    q)) == NULL || event_add(q->dc_ev, NULL) != 0 ||
	    (q->dc_timer = evtimer_new(md->md_base, dns_chain_timeout_cb, q)) == NULL ||
	    evtimer_add(q->dc_timer, &tv) != 0) {
		dns_chain_cancel(q);
		return NULL;
	}
	return q;
}

void
dns_free_all(struct mediatord *md)
{
	struct dnsop *op;
	dns_channel_lost(md);
	while ((op = TAILQ_FIRST(&dns_ops)) != NULL)
		dnsop_retire(op);
}
