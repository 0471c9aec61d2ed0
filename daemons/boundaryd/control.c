/*
 * control.c: boundaryd's sockets, connections and request dispatch.
 *
 * Trust model: anything that arrives on client.sock comes from an arbitrary
 * local user. The kernel tells us who connected (SO_PEERCRED at accept);
 * nothing in a request can change that. A connection that breaks the frame
 * rules is closed without affecting any other one, a half-sent frame is cut
 * off after CONTROL_FRAME_DEADLINE_SEC, and the connection count is capped
 * before anything is allocated, so no client can stall the event loop or
 * the requests of others. The caps are per socket and per uid: client.sock
 * keeps a reserve only root may use and one uid may hold only part of it,
 * and boundary.sock (sensord, administration) has a budget of its own, so
 * one user's idle connections lock out neither other users nor root.
 *
 * A peer inside a supervised operation's cgroup (its cgroup is read at
 * accept) is the supervised tree itself: the method table's in-operation
 * column limits it to reads and reports about its own operation.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <json-c/json.h>

#include "boundaryd.h"
#include "cgroup.h"
#include "frame.h"
#include "log.h"
#include "util.h"

struct conn {
	TAILQ_ENTRY(conn) c_entry;
	struct boundaryd *c_bd;
	struct bufferevent *c_bev;
	struct event *c_deadline;
	enum proto_socket c_kind;
	char c_scope[OP_ID_MAX]; /* supervisor.sock: its operation; "" elsewhere */
	struct peer c_peer;
	int c_deadline_armed;
	int c_paused;		/* not read from: its output is over CONTROL_OUTPUT_PAUSE */
};

static void control_conn_free(struct conn *c);
static void control_read_cb(struct bufferevent *bev, void *arg);

/* Bytes queued for one connection: replies not yet taken, requests not yet handled. */
static size_t
control_queued(struct conn *c)
{
	return evbuffer_get_length(bufferevent_get_output(c->c_bev)) +
	    evbuffer_get_length(bufferevent_get_input(c->c_bev));
}

void
control_queue_stats(struct boundaryd *bd, int *paused, uint64_t *queued)
{
	struct conn *c;

	*paused = 0;
	*queued = 0;
	TAILQ_FOREACH(c, &bd->bd_conns, c_entry) {
		*paused += c->c_paused;
		*queued += control_queued(c);
	}
}

/*
 * Keep a non-root uid within CONTROL_UID_QUEUE_MAX: close its connections
 * with the most queued until it fits. Threat: one user opening its whole
 * connection budget, pipelining requests and never reading, so boundaryd
 * grows by hundreds of MB and stops answering everyone. Root is exempt
 * (sensord and administration; they have budgets of their own). Returns 1
 * when self was among the connections closed.
 */
static int
control_uid_budget(struct boundaryd *bd, struct conn *self)
{
	uid_t uid = self->c_peer.pr_uid;
	int closed_self = 0;

	if (uid == 0)
		return 0;
	for (;;) {
		struct conn *c, *big = NULL;
		size_t total = 0, bigq = 0;

		TAILQ_FOREACH(c, &bd->bd_conns, c_entry) {
			if (c->c_peer.pr_uid != uid)
				continue;
			size_t q = control_queued(c);
			total += q;
			if (big == NULL || q > bigq) {
				big = c;
				bigq = q;
			}
		}
		if (total <= CONTROL_UID_QUEUE_MAX || big == NULL)
			return closed_self;
		log_info("closing connection of pid %d: uid %u has %zu bytes queued "
		    "(over %u), this one %zu", (int)big->c_peer.pr_pid, (unsigned)uid, total,
		    CONTROL_UID_QUEUE_MAX, bigq);
		closed_self |= big == self;
		bd->bd_conns_dropped++;
		control_conn_free(big);
	}
}

/*
 * Stop reading requests from c while the peer does not take its replies:
 * they wait in the peer's own socket buffer, not in our memory. The frame
 * deadline does not run meanwhile (the wait is ours, not the peer's); the
 * write timeout closes a peer that takes nothing for the idle timeout.
 */
static void
control_pause(struct conn *c)
{
	if (c->c_paused)
		return;
	c->c_paused = 1;
	bufferevent_disable(c->c_bev, EV_READ);
	if (c->c_deadline_armed) {
		event_del(c->c_deadline);
		c->c_deadline_armed = 0;
	}
}

void
control_send(struct conn *c, struct json_object *msg)
{
	struct evbuffer *out = bufferevent_get_output(c->c_bev);

	if (frame_encode_evbuffer(out, msg) != 0)
		log_warnx("cannot encode reply for pid %d", (int)c->c_peer.pr_pid);
	json_object_put(msg);
}

/*
 * Put what c has queued on its socket now rather than when the loop next
 * runs: for a reply that should not wait for slower work later in the
 * same callback. What the socket does not take stays queued.
 */
void
control_flush(struct conn *c)
{
	struct evbuffer *out = bufferevent_get_output(c->c_bev);
	evutil_socket_t fd = bufferevent_getfd(c->c_bev);

	/* A paused peer takes nothing; its write callback resumes it later. */
	if (c->c_paused || fd < 0)
		return;
	/* A socket bufferevent freezes its output's front; its own writer thaws it so too. */
	evbuffer_unfreeze(out, 1);
	while (evbuffer_get_length(out) > 0)
		if (evbuffer_write(out, fd) <= 0)
			break;
	evbuffer_freeze(out, 1);
}

/* Send msg only if its payload is at most max bytes (the peer's frame limit); -1 if not. */
int
control_send_max(struct conn *c, struct json_object *msg, size_t max)
{
	int rv = frame_encode_evbuffer_max(bufferevent_get_output(c->c_bev), msg, max);
	json_object_put(msg);
	return rv;
}

void
control_mediator_notify(struct boundaryd *bd, const char *name, struct json_object *params)
{
	struct conn *c;

	TAILQ_FOREACH(c, &bd->bd_conns, c_entry) {
		if (c->c_kind != PS_MEDIATOR)
			continue;
		struct json_object *m = json_object_new_object();
		json_object_object_add(m, "proto", json_object_new_int(PROTO_VERSION));
		json_object_object_add(m, "event", json_object_new_string(name));
		json_object_object_add(m, "params", json_object_get(params));
		control_send(c, m);
	}
	json_object_put(params);
}

static void
control_dispatch(struct conn *c, struct json_object *msg)
{
	struct boundaryd *bd = c->c_bd;
	struct proto_request req;
	struct schema_error err;
	struct op_reply r;
	const char *code = NULL;
	const char *scope = c->c_scope[0] ? c->c_scope : NULL;

	memset(&err, 0, sizeof(err));
	memset(&r, 0, sizeof(r));
	if (proto_parse_request(msg, &req, &code, &err) != 0) {
		control_send(c, proto_error_new(req.pr_id, code, err.se_message));
		return;
	}
	/* The method table decides who may call; handlers scope to the caller. */
	if (!proto_authorized(req.pr_info, c->c_kind, c->c_peer.pr_uid)) {
		log_info("refused %s from uid %u on %s", req.pr_info->pmi_name,
		    (unsigned)c->c_peer.pr_uid,
		    c->c_kind == PS_BOUNDARY ? "boundary.sock" : c->c_kind == PS_MEDIATOR ?
		    "mediator.sock" : "client.sock");
		control_send(c, proto_error_new(req.pr_id, PE_NOT_AUTHORIZED,
		    "this method is not available to the caller"));
		return;
	}
	/* The supervised tree may not loosen or end its own supervision. */
	if (c->c_peer.pr_in_op && proto_in_op_allowed(req.pr_info, &code) != 0) {
		log_info("refused %s from pid %d inside operation %s", req.pr_info->pmi_name,
		    (int)c->c_peer.pr_pid, c->c_peer.pr_op_id[0] ? c->c_peer.pr_op_id : "(foreign)");
		control_send(c, proto_error_new(req.pr_id, code, strcmp(code, PE_CONFLICT) == 0 ?
		    "the caller is already inside a supervised operation" :
		    "this method is not available inside a supervised operation"));
		return;
	}
	if (bd->bd_shutdown && req.pr_info->pmi_method != PM_SYSTEM_STATUS) {
		control_send(c, proto_error_new(req.pr_id, PE_SHUTTING_DOWN, "shutting down"));
		return;
	}
	/*
	 * Inside an operation, the network methods serve that operation only
	 * (inside a foreign one, none: operation_visible() refuses every id).
	 */
	if (c->c_peer.pr_in_op && scope == NULL && c->c_peer.pr_op_id[0] != '\0')
		scope = c->c_peer.pr_op_id;
	switch (req.pr_info->pmi_method) {
	case PM_SYSTEM_STATUS:
		boundaryd_status(bd, &r);
		break;
	case PM_SYSTEM_SHUTDOWN:
		r.or_result = json_object_new_object();
		json_object_object_add(r.or_result, "shutting_down", json_object_new_boolean(1));
		boundaryd_shutdown(bd);
		break;
	case PM_OPERATION_CREATE:
		operation_create(bd, c, &c->c_peer, req.pr_id, req.pr_params, &r);
		break;
	case PM_OPERATION_INSPECT:
		operation_inspect(bd, &c->c_peer, req.pr_params, &r);
		break;
	case PM_OPERATION_LIST:
		operation_list(bd, &c->c_peer, req.pr_params, &r);
		break;
	case PM_OPERATION_PRUNE:
		operation_prune(bd, &c->c_peer, req.pr_params, &r);
		break;
	case PM_OPERATION_END:
		operation_end(bd, c, &c->c_peer, req.pr_id, req.pr_params, &r);
		break;
	case PM_OPERATION_EVIDENCE:
		operation_evidence(bd, &c->c_peer, req.pr_params, &r);
		break;
	case PM_OPERATION_OBSERVE:
		operation_observe(bd, &c->c_peer, req.pr_params, &r);
		break;
	case PM_NETWORK_INSPECT:
		network_inspect(bd, &c->c_peer, scope, req.pr_params, &r);
		break;
	case PM_NETWORK_EVENT:
		network_event(bd, &c->c_peer, scope, req.pr_params, &r);
		break;
	case PM_NETWORK_REVOKE:
		network_revoke(bd, &c->c_peer, scope, req.pr_params, &r);
		break;
	case PM_NETWORK_START:
		network_start(bd, &c->c_peer, req.pr_params, &r);
		break;
	case PM_NETWORK_REINSTALL:
		network_reinstall(bd, &c->c_peer, req.pr_params, &r);
		break;
	case PM_FAULT_SUBMIT:
		fault_submit(bd, &c->c_peer, scope, req.pr_params, &r);
		break;
	case PM_SENSOR_REGISTER:
		sensor_register(bd, c, &c->c_peer, req.pr_params, &r);
		break;
	case PM_SENSOR_ACK:
		sensor_ack(bd, &c->c_peer, req.pr_params, &r);
		break;
	case PM_SENSOR_LOSS:
		sensor_loss(bd, &c->c_peer, req.pr_params, &r);
		break;
	case PM_LINEAGE_REPORT:
		lineage_report(bd, &c->c_peer, req.pr_params, &r);
		break;
	case PM_FILE_DECISION:
		file_decision(bd, &c->c_peer, req.pr_params, &r);
		break;
	case PM_SENSOR_HEARTBEAT:
		sensor_heartbeat(bd, c, &r);
		break;
	case PM_MEDIATOR_CONFIG:
		mediator_config(bd, &r);
		break;
	case PM_MEDIATOR_AUTHORIZE:
		mediator_authorize(bd, &c->c_peer, req.pr_params, &r);
		break;
	case PM_MEDIATOR_DNS:
		dnslease_answer(bd, req.pr_params, &r);
		break;
	case PM_MEDIATOR_CONNECT:
		dnslease_connect(bd, req.pr_params, &r);
		break;
	case PM_MEDIATOR_COMPLETE:
		mediator_complete(bd, &c->c_peer, req.pr_params, &r);
		break;
	case PM_MEDIATOR_REFUSED:
		mediator_refused(bd, req.pr_params, &r);
		break;
	case PM_TRANSACTION_BEGIN:
		transaction_begin(bd, &c->c_peer, scope, req.pr_params, &r);
		break;
	case PM_TRANSACTION_ACTIVATE:
		transaction_activate(bd, &c->c_peer, scope, req.pr_params, &r);
		break;
	case PM_TRANSACTION_END:
		transaction_end(bd, &c->c_peer, scope, req.pr_params, &r);
		break;
	case PM_TRANSACTION_REVOKE:
		transaction_revoke(bd, &c->c_peer, scope, req.pr_params, &r);
		break;
	case PM_TRANSACTION_START:
		transaction_start(bd, &c->c_peer, scope, req.pr_params, &r);
		break;
	case PM_NETWORK_GRANT_HTTP:
		network_grant_http(bd, &c->c_peer, scope, req.pr_params, &r);
		break;
	case PM_NETWORK_REVOKE_HTTP:
		network_revoke_http(bd, &c->c_peer, scope, req.pr_params, &r);
		break;
	case PM_NETWORK_COMMIT_TOKEN:
		network_commit_token(bd, &c->c_peer, scope, req.pr_params, &r);
		break;
	case PM__COUNT:
		r.or_code = PE_INTERNAL;
		break;
	}
	if (r.or_deferred)
		return;
	if (r.or_code != NULL)
		control_send(c, proto_error_new(req.pr_id, r.or_code,
		    r.or_msg != NULL ? r.or_msg : r.or_code));
	else
		control_send(c, proto_result_new(req.pr_id, r.or_result));
	free(r.or_msg);
}

static void
control_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	(void)fd;
	(void)what;
	log_info("closing connection of pid %d: frame not completed within %ds",
	    (int)c->c_peer.pr_pid, CONTROL_FRAME_DEADLINE_SEC);
	control_conn_free(c);
}

static void
control_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	for (;;) {
		struct json_object *msg = NULL;
		/*
		 * Only client.sock peers are paused: root's channels (sensord
		 * above all, which may write while boundaryd's pushes wait for
		 * it) keep being read, bounded by CONTROL_OUTPUT_MAX alone.
		 */
		if (c->c_kind == PS_CLIENT &&
		    evbuffer_get_length(bufferevent_get_output(bev)) > CONTROL_OUTPUT_PAUSE) {
			control_pause(c);
			return;
		}
		int st = frame_decode_evbuffer(in, FRAME_MAX_DEFAULT, &msg);
		if (st == FRAME_NEED_MORE)
			break;
		if (st != FRAME_OK) {
			log_info("closing connection of pid %d: %s", (int)c->c_peer.pr_pid,
			    frame_status_code(st));
			control_conn_free(c);
			return;
		}
		if (c->c_deadline_armed) {
			event_del(c->c_deadline);
			c->c_deadline_armed = 0;
		}
		control_dispatch(c, msg);
		json_object_put(msg);
		if (evbuffer_get_length(bufferevent_get_output(bev)) > CONTROL_OUTPUT_MAX) {
			log_info("closing connection of pid %d: not reading replies",
			    (int)c->c_peer.pr_pid);
			c->c_bd->bd_conns_dropped++;
			control_conn_free(c);
			return;
		}
		if (control_uid_budget(c->c_bd, c))
			return;
	}
	if (control_uid_budget(c->c_bd, c))
		return;
	/* A started frame must complete within the deadline. */
	if (evbuffer_get_length(in) > 0 && !c->c_deadline_armed) {
		struct timeval tv = { CONTROL_FRAME_DEADLINE_SEC, 0 };
		event_add(c->c_deadline, &tv);
		c->c_deadline_armed = 1;
	}
}

static void
control_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	(void)bev;
	if (what & BEV_EVENT_TIMEOUT)
		log_info("closing connection of pid %d: idle for %ds", (int)c->c_peer.pr_pid,
		    c->c_bd->bd_idle_sec);
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		control_conn_free(c);
}

/* The output has drained (the write low watermark is 0): read the requests that waited. */
static void
control_write_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (!c->c_paused)
		return;
	c->c_paused = 0;
	bufferevent_enable(bev, EV_READ);
	/* Frames already buffered raise no read event of their own. */
	control_read_cb(bev, c);
}

static void
control_conn_free(struct conn *c)
{
	operation_forget_conn(c->c_bd, c);
	sensor_conn_closed(c->c_bd, c);
	if (c->c_deadline != NULL)
		event_free(c->c_deadline);
	bufferevent_free(c->c_bev);
	TAILQ_REMOVE(&c->c_bd->bd_conns, c, c_entry);
	c->c_bd->bd_nconns--;
	if (c->c_kind == PS_CLIENT)
		c->c_bd->bd_nclient--;
	else if (c->c_kind == PS_MEDIATOR)
		c->c_bd->bd_nmediator--;
	else
		c->c_bd->bd_nboundary--;
	free(c);
}

/*
 * May one more client.sock connection of this (non-root) uid be accepted?
 * Threat: one user's idle connections exhausting the cap for everyone.
 * All non-root uids together stop CONTROL_ROOT_RESERVE short of the cap,
 * and one uid stops at CONTROL_MAX_PER_UID.
 */
static int
control_uid_admit(struct boundaryd *bd, uid_t uid)
{
	struct conn *c;
	int nonroot = 0, mine = 0;

	TAILQ_FOREACH(c, &bd->bd_conns, c_entry) {
		if (c->c_kind != PS_CLIENT || c->c_peer.pr_uid == 0)
			continue;
		nonroot++;
		mine += c->c_peer.pr_uid == uid;
	}
	return nonroot < CONTROL_MAX_CLIENT - CONTROL_ROOT_RESERVE && mine < CONTROL_MAX_PER_UID;
}

/*
 * Is a cgroup (relative to the v2 root, from /proc/PID/cgroup) inside a
 * supervised operation? Returns 1 and the operation's id when it is
 * BASE/op_<id>[/...] of this instance; 1 and "" when it looks like an
 * operation of another base or instance (still the supervised side: it
 * gets the reduced method set and no operation); 0 otherwise.
 */
int
control_cgroup_op(struct boundaryd *bd, const char *cg, char *id, size_t len)
{
	char buf[PEER_CGROUP_MAX], *save = NULL, *prev = NULL, *comp;

	id[0] = '\0';
	util_strlcpy(buf, cg, sizeof(buf));
	for (comp = strtok_r(buf, "/", &save); comp != NULL;
	    prev = comp, comp = strtok_r(NULL, "/", &save)) {
		if (prev == NULL || strncmp(comp, "op_", 3) != 0)
			continue;
		if (strcmp(prev, bd->bd_cgroup_base) != 0 && strcmp(prev, CGROUP_BASE) != 0)
			continue;
		/* Ours only directly below our own base, with a well-formed id. */
		if (prev == buf && strcmp(prev, bd->bd_cgroup_base) == 0 &&
		    ids_valid_operation(comp))
			util_strlcpy(id, comp, len);
		return 1;
	}
	return 0;
}

static void
control_accept_cb(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct listener *l = arg;
	struct boundaryd *bd = l->l_bd;
	struct conn *c;
	struct peer p;
	char *cause = NULL;

	(void)lev;
	(void)sa;
	(void)salen;
	/* Refuse before allocating anything for the connection. */
	if (l->l_kind == PS_CLIENT ? bd->bd_nclient >= CONTROL_MAX_CLIENT :
	    l->l_kind == PS_MEDIATOR ? bd->bd_nmediator >= CONTROL_MAX_MEDIATOR :
	    bd->bd_nboundary >= CONTROL_MAX_BOUNDARY) {
		bd->bd_conns_refused++;
		close(fd);
		return;
	}
	if (peer_identify(fd, &p, &cause) != 0) {
		log_info("refused connection: %s", cause);
		free(cause);
		close(fd);
		return;
	}
	/* The socket mode is not the only check: boundary.sock is root's alone. */
	if ((l->l_kind == PS_BOUNDARY || l->l_kind == PS_SUPERVISOR) && p.pr_uid != 0) {
		log_info("refused %s connection from uid %u", l->l_path, (unsigned)p.pr_uid);
		close(fd);
		return;
	}
	/*
	 * mediator.sock is the mediator's uid alone, root included: root has
	 * boundary.sock, and a second root path into the mediator methods
	 * would let any root process speak as the mediator in evidence.
	 */
	if (l->l_kind == PS_MEDIATOR && (!bd->bd_have_mediator || p.pr_uid != bd->bd_mediator_uid)) {
		log_info("refused %s connection from uid %u", l->l_path, (unsigned)p.pr_uid);
		close(fd);
		return;
	}
	if (l->l_kind == PS_CLIENT && p.pr_uid != 0 && !control_uid_admit(bd, p.pr_uid)) {
		bd->bd_conns_refused++;
		close(fd);
		return;
	}
	/*
	 * Where operations exist, a peer whose cgroup cannot be read might be
	 * inside one: refuse it rather than give it the whole method set.
	 */
	if (p.pr_cgroup_unknown && bd->bd_have_cgroup) {
		log_info("refused connection of pid %d: its cgroup cannot be read", (int)p.pr_pid);
		close(fd);
		return;
	}
	p.pr_socket = l->l_kind;
	p.pr_in_op = control_cgroup_op(bd, p.pr_cgroup, p.pr_op_id, sizeof(p.pr_op_id));
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		return;
	}
	c->c_peer = p;
	c->c_bd = bd;
	c->c_kind = l->l_kind;
	util_strlcpy(c->c_scope, l->l_scope, sizeof(c->c_scope));
	c->c_bev = bufferevent_socket_new(bd->bd_base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->c_bev == NULL) {
		free(c);
		close(fd);
		return;
	}
	c->c_deadline = evtimer_new(bd->bd_base, control_deadline_cb, c);
	if (c->c_deadline == NULL) {
		bufferevent_free(c->c_bev);
		free(c);
		return;
	}
	bd->bd_nconns++;
	if (c->c_kind == PS_CLIENT)
		bd->bd_nclient++;
	else if (c->c_kind == PS_MEDIATOR)
		bd->bd_nmediator++;
	else
		bd->bd_nboundary++;
	TAILQ_INSERT_TAIL(&bd->bd_conns, c, c_entry);
	struct timeval idle = { bd->bd_idle_sec, 0 };
	/*
	 * The write timeout only runs while replies wait: a peer that takes
	 * none is closed. The mediator's channel is long-lived (no read
	 * timeout); its connections have a small budget of their own.
	 */
	bufferevent_set_timeouts(c->c_bev, c->c_kind == PS_MEDIATOR ? NULL : &idle, &idle);
	bufferevent_setcb(c->c_bev, control_read_cb, control_write_cb, control_event_cb, c);
	bufferevent_setwatermark(c->c_bev, EV_READ, 0, FRAME_MAX_DEFAULT + FRAME_HEADER_LEN);
	bufferevent_enable(c->c_bev, EV_READ | EV_WRITE);
}

int
control_listen(struct boundaryd *bd, struct listener *l, int dirfd, const char *dirpath,
    const char *name, enum proto_socket kind, mode_t mode)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(l->l_path, sizeof(l->l_path), "%s/%s", dirpath, name);
	/*
	 * Bind through the directory fd we already checked, so the name cannot
	 * be redirected and a long state root does not overflow sun_path.
	 */
	if ((size_t)snprintf(sun.sun_path, sizeof(sun.sun_path), "/proc/self/fd/%d/%s", dirfd,
		name) >= sizeof(sun.sun_path)) {
		log_warnx("socket name %s too long", name);
		return -1;
	}
	l->l_kind = kind;
	l->l_bd = bd;
	if (unlinkat(dirfd, name, 0) != 0 && errno != ENOENT) {
		log_warn("unlink %s", l->l_path);
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_warn("socket");
		return -1;
	}
	mode_t old = umask(0177);
	int r = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	if (r != 0 || fchmodat(dirfd, name, mode, 0) != 0 || listen(fd, 128) != 0) {
		log_warn("bind %s", l->l_path);
		close(fd);
		return -1;
	}
	l->l_ev = evconnlistener_new(bd->bd_base, control_accept_cb, l,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (l->l_ev == NULL) {
		log_warnx("evconnlistener_new failed for %s", l->l_path);
		close(fd);
		return -1;
	}
	return 0;
}

void
control_close(struct listener *l)
{
	if (l->l_ev != NULL) {
		evconnlistener_free(l->l_ev);
		l->l_ev = NULL;
	}
}

void
control_keepalive(struct conn *c)
{
	bufferevent_set_timeouts(c->c_bev, NULL, NULL);
}

void
control_drop(struct conn *c)
{
	control_conn_free(c);
}

pid_t
control_peer_pid(struct conn *c)
{
	return c->c_peer.pr_pid;
}

void
control_close_all(struct boundaryd *bd)
{
	struct conn *c;
	while ((c = TAILQ_FIRST(&bd->bd_conns)) != NULL)
		control_conn_free(c);
}
