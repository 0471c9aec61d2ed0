/*
 * httpmediatord.c: gensee-httpmediatord entry point and its boundaryd channel.
 *
 * Startup order matters: as root, read the only files it ever needs
 * (the hosts file and resolv.conf for its resolver, OpenSSL's config and
 * the CA bundle); then drop to the
 * mediator user with no capabilities and no_new_privs; connect to
 * mediator.sock as that user (boundaryd checks the uid with SO_PEERCRED);
 * confine itself (Landlock: read the CA bundle and the runtime dir only;
 * seccomp allowlist); then serve. No thread is ever started, so the
 * per-thread seccomp filter covers the whole process.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <json-c/json.h>
#include <openssl/ssl.h>

#include "frame.h"
#include "httpmediatord.h"
#include "log.h"
#include "proto.h"
#include "sandbox.h"
#include "schema.h"
#include "util.h"

static struct mediatord md;
static struct event *reconnect_ev;

/* Print the usage to stdout and exit 0 (--help), or to stderr and exit 2 (LSB: bad arguments). */
static void __attribute__((noreturn))
usage_to(int help)
{
	fprintf(help ? stdout : stderr, "usage: " MEDIATORD_NAME
	    " --runtime-dir DIR [--user NAME] [--ca-file FILE] [--hosts-file FILE]\n"
	    "       [--resolv-conf FILE] [--max-connections N] [--max-connections-per-client N]\n"
	    "       [--head-timeout SECONDS] [--debug] [--selftest-read PATH]...\n"
	    "       " MEDIATORD_NAME " --help | --version\n");
	exit(help ? 0 : 2);
}

static void __attribute__((noreturn))
usage(void)
{
	usage_to(0);
}

/* A decimal option value in [lo, hi], or the usage message. */
static long long
mediatord_number(const char *s, long long lo, long long hi)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno != 0 || v < lo || v > hi)
		usage();
	return v;
}

int
mediatord_send(struct mediatord *m, const char *method, struct json_object *params,
    int64_t *id)
{
	struct json_object *msg;
	int rv;

	if (m->md_chan == NULL) {
		json_object_put(params);
		return -1;
	}
	*id = ++m->md_next_id;
	msg = proto_request_new(*id, method, params);
	rv = frame_encode_evbuffer(bufferevent_get_output(m->md_chan), msg);
	json_object_put(msg);
	return rv;
}

static void
mediatord_refresh(void)
{
	int64_t id;

	if (md.md_chan == NULL)
		return;
	if (md.md_config_id != 0) {
		md.md_config_again = 1;	/* the answer in flight may predate the change */
		return;
	}
	md.md_config_again = 0;
	if (mediatord_send(&md, "mediator.config", NULL, &id) == 0)
		md.md_config_id = id;
}

static void
mediatord_refresh_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	mediatord_refresh();
}

static void mediatord_reconnect_cb(evutil_socket_t fd, short what, void *arg);

/*
 * The channel is gone (boundaryd stopped, or sent something we cannot
 * take): every waiting request is refused at once, and no new one can be
 * authorized until the channel is back.
 */
static void
mediatord_lost(const char *why)
{
	struct timeval tv = { MEDIATORD_RECONNECT_MS / 1000, (MEDIATORD_RECONNECT_MS % 1000) * 1000 };

	log_warnx("boundaryd channel lost: %s; refusing every request until it is back", why);
	if (md.md_chan != NULL) {
		bufferevent_free(md.md_chan);
		md.md_chan = NULL;
	}
	md.md_config_id = 0;
	proxy_channel_lost(&md);
	dns_channel_lost(&md);
	connect_channel_lost(&md);
	event_add(reconnect_ev, &tv);
}

/*
 * boundaryd is the trusted side, but a reply that does not parse is still
 * not acted on: the channel is dropped (refusing everything) rather than
 * guessed at.
 */
static void
mediatord_dispatch(struct json_object *msg)
{
	struct json_object *idj = schema_child(msg, "id"), *res = schema_child(msg, "result");
	struct json_object *err = schema_child(msg, "error");
	int64_t id;

	/* boundaryd's events: a transaction or a mediator lease closed, the config changed. */
	if (idj == NULL && schema_string(msg, "event") != NULL) {
		if (strcmp(schema_string(msg, "event"), "transaction.closed") == 0)
			proxy_transaction_closed(&md, schema_child(msg, "params"));
		/* A mediator lease was revoked or expired: the same, for its operation. */
		else if (strcmp(schema_string(msg, "event"), "mediator_lease.closed") == 0)
			proxy_lease_closed(&md, schema_child(msg, "params"));
		/*
		 * An operation that needs us was made: ask for the config now
		 * rather than at the next refresh (its launcher waits for our
		 * DNS proxy). Only a hint: the config comes from boundaryd's
		 * answer, as always.
		 */
		else if (strcmp(schema_string(msg, "event"), "config.changed") == 0)
			mediatord_refresh();
		return;
	}
	if (idj == NULL || !json_object_is_type(idj, json_type_int)) {
		log_warnx("boundaryd sent a message without an id");
		return;
	}
	id = json_object_get_int64(idj);
	if (id == md.md_config_id) {
		md.md_config_id = 0;
		if (res == NULL || !json_object_is_type(schema_child(res, "operations"),
		    json_type_array)) {
			log_warnx("mediator.config refused: %s", err ? json_object_to_json_string(err) :
			    "no operations");
			return;
		}
		proxy_apply_config(&md, schema_child(res, "operations"));
		dns_apply_config(&md, schema_child(res, "operations"));
		connect_apply_config(&md, schema_child(res, "operations"));
		if (md.md_config_again)
			mediatord_refresh();
		return;
	}
	if (dns_authorized(&md, id, res, err ? schema_string(err, "code") : NULL) ||
	    connect_authorized(&md, id, res, err ? schema_string(err, "code") : NULL))
		return;
	proxy_authorized(&md, id, res, err ? schema_string(err, "code") : NULL);
}

static void
mediatord_read_cb(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	(void)arg;

	for (;;) {
		struct json_object *msg = NULL;
		int st = frame_decode_evbuffer(in, FRAME_MAX_DEFAULT, &msg);
		if (st == FRAME_NEED_MORE)
			return;
		if (st != FRAME_OK) {
			mediatord_lost(frame_status_code(st));
			return;
		}
		mediatord_dispatch(msg);
		json_object_put(msg);
		if (md.md_chan == NULL)
			return;
	}
}

static void
mediatord_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)arg;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		mediatord_lost(what & BEV_EVENT_EOF ? "closed by boundaryd" : "error");
}

static int
mediatord_connect(char **cause)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if ((size_t)snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/mediator.sock",
	    md.md_runtime_dir) >= sizeof(sun.sun_path)) {
		util_cause(cause, "runtime dir path too long");
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		util_cause(cause, "socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		util_cause(cause, "%s: %s", sun.sun_path, strerror(errno));
		close(fd);
		return -1;
	}
	md.md_chan = bufferevent_socket_new(md.md_base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (md.md_chan == NULL) {
		close(fd);
		util_cause(cause, "bufferevent_socket_new failed");
		return -1;
	}
	bufferevent_setcb(md.md_chan, mediatord_read_cb, NULL, mediatord_event_cb, NULL);
	bufferevent_enable(md.md_chan, EV_READ | EV_WRITE);
	return 0;
}

static void
mediatord_reconnect_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { MEDIATORD_RECONNECT_MS / 1000, (MEDIATORD_RECONNECT_MS % 1000) * 1000 };
	char *cause = NULL;

	(void)fd;
	(void)what;
	(void)arg;
	if (mediatord_connect(&cause) != 0) {
		log_debug("cannot reach boundaryd: %s", cause);
		free(cause);
		event_add(reconnect_ev, &tv);
		return;
	}
	log_info("connected to boundaryd in %s", md.md_runtime_dir);
	mediatord_refresh();
}

static void
mediatord_signal_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	event_base_loopbreak(md.md_base);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "user", required_argument, NULL, 'u' },
		{ "ca-file", required_argument, NULL, 'c' },
		{ "hosts-file", required_argument, NULL, 'H' },
		{ "resolv-conf", required_argument, NULL, 'R' },
		{ "max-connections", required_argument, NULL, 'm' },
		{ "max-connections-per-client", required_argument, NULL, 'M' },
		{ "head-timeout", required_argument, NULL, 't' },
		{ "debug", no_argument, NULL, 'd' },
		/* Diagnostics: try to read PATH once confined and log the outcome. */
		{ "selftest-read", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *runtime_dir = NULL, *user = MEDIATORD_DEFAULT_USER, *ca = MEDIATORD_DEFAULT_CA;
	const char *hosts = "/etc/hosts", *resolv = "/etc/resolv.conf";
	const char *selftest[8];
	size_t nselftest = 0;
	int ch, logflags = 0;
	char *cause = NULL;
	struct passwd *pw;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'r':
			runtime_dir = optarg;
			break;
		case 'u':
			user = optarg;
			break;
		case 'c':
			ca = optarg;
			break;
		case 'H':
			hosts = optarg;
			break;
		case 'R':
			resolv = optarg;
			break;
		case 'm':
			md.md_max_conns = (size_t)mediatord_number(optarg, 1, 65536);
			break;
		case 'M':
			md.md_max_conns_client = (size_t)mediatord_number(optarg, 1, 65536);
			break;
		case 't':
			md.md_head_timeout = (int)mediatord_number(optarg, 1, 3600);
			break;
		case 'd':
			logflags |= LOG_F_DEBUG;
			break;
		case 'T':
			if (nselftest == nitems(selftest))
				usage();
			selftest[nselftest++] = optarg;
			break;
		case 'h':
			usage_to(1);
		case 'V':
			printf(MEDIATORD_NAME " %s\n", GENSEE_VERSION);
			exit(0);
		default:
			usage();
		}
	}
	if (optind != argc || runtime_dir == NULL || runtime_dir[0] != '/' || ca[0] != '/')
		usage();
	if (md.md_max_conns == 0)
		md.md_max_conns = MEDIATORD_DEFAULT_MAX_CONNS;
	if (md.md_max_conns_client == 0)
		md.md_max_conns_client = MEDIATORD_DEFAULT_MAX_CONNS_CLIENT;
	if (md.md_head_timeout == 0)
		md.md_head_timeout = MEDIATORD_DEFAULT_HEAD_TIMEOUT;
	/*
	 * Synchronous logging: the asynchronous writer is a thread, and a
	 * thread started before the seccomp filter would run unfiltered.
	 */
	log_init(MEDIATORD_NAME, logflags);
	if (getuid() != 0 || geteuid() != 0)
		fatalx("must be started as root (it drops to --user at once)");
	if (util_strlcpy(md.md_runtime_dir, runtime_dir, sizeof(md.md_runtime_dir)) >=
	    sizeof(md.md_runtime_dir))
		fatalx("--runtime-dir too long");
	if ((pw = getpwnam(user)) == NULL)
		fatalx("--user %s: no such user", user);
	if (access(ca, R_OK) != 0)
		fatal("--ca-file %s", ca);
	signal(SIGPIPE, SIG_IGN);
	TAILQ_INIT(&md.md_ops);
	TAILQ_INIT(&md.md_pending);
	TAILQ_INIT(&md.md_all);
	if ((md.md_base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	/*
	 * The resolver reads its files now: after Landlock there are none.
	 * Names come from the hosts file first, then the nameservers of
	 * resolv.conf (a missing resolv.conf leaves hosts-file names only).
	 */
	if ((md.md_dns = evdns_base_new(md.md_base, 0)) == NULL)
		fatalx("evdns_base_new failed");
	if (evdns_base_resolv_conf_parse(md.md_dns, DNS_OPTIONS_ALL, resolv) != 0)
		log_warnx("%s: not usable; names resolve from %s only", resolv, hosts);
	if (evdns_base_load_hosts(md.md_dns, hosts) != 0)
		log_warnx("%s: not loaded", hosts);
	/* The DNS proxy's upstream: the first nameserver of the same file. */
	if (dns_init(resolv) != 0)
		log_warnx("%s: no nameserver; the DNS proxy answers SERVFAIL", resolv);
	/*
	 * TLS: OpenSSL reads its config and the CA bundle now. Peers are
	 * verified against --ca-file alone (no default paths), TLS 1.2 and up.
	 */
	if ((md.md_tls = SSL_CTX_new(TLS_client_method())) == NULL ||
	    SSL_CTX_set_min_proto_version(md.md_tls, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_load_verify_locations(md.md_tls, ca, NULL) != 1)
		fatalx("--ca-file %s: not a usable CA bundle", ca);
	SSL_CTX_set_verify(md.md_tls, SSL_VERIFY_PEER, NULL);

	if (sandbox_httpmediatord_drop(pw->pw_uid, pw->pw_gid, &cause) != 0)
		fatalx("sandbox: %s", cause);
	if (mediatord_connect(&cause) != 0)
		fatalx("cannot reach boundaryd: %s", cause);
	if (sandbox_httpmediatord(ca, runtime_dir, &cause) != 0)
		fatalx("sandbox: %s", cause);
	log_info("confined as %s (uid %u): no capabilities, no_new_privs, Landlock, seccomp",
	    user, (unsigned)pw->pw_uid);
	for (size_t i = 0; i < nselftest; i++) {
		int fd = open(selftest[i], O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			log_info("selftest-read %s: allowed", selftest[i]);
			close(fd);
		} else {
			log_info("selftest-read %s: denied (%s)", selftest[i], strerror(errno));
		}
	}

	reconnect_ev = evtimer_new(md.md_base, mediatord_reconnect_cb, NULL);
	md.md_refresh = event_new(md.md_base, -1, EV_PERSIST, mediatord_refresh_cb, NULL);
	struct event *sigterm = evsignal_new(md.md_base, SIGTERM, mediatord_signal_cb, NULL);
	struct event *sigint = evsignal_new(md.md_base, SIGINT, mediatord_signal_cb, NULL);
	struct timeval rtv = { MEDIATORD_REFRESH_MS / 1000, (MEDIATORD_REFRESH_MS % 1000) * 1000 };
	if (reconnect_ev == NULL || md.md_refresh == NULL || sigterm == NULL || sigint == NULL ||
	    event_add(md.md_refresh, &rtv) != 0 || event_add(sigterm, NULL) != 0 ||
	    event_add(sigint, NULL) != 0)
		fatalx("cannot arm events");
	mediatord_refresh();
	event_base_dispatch(md.md_base);

	proxy_free_all(&md);
	dns_free_all(&md);
	connect_free_all(&md);
	if (md.md_chan != NULL)
		bufferevent_free(md.md_chan);
	event_free(reconnect_ev);
	event_free(md.md_refresh);
	event_free(sigterm);
	event_free(sigint);
	evdns_base_free(md.md_dns, 1);
	SSL_CTX_free(md.md_tls);
	event_base_free(md.md_base);
	log_info("stopped");
	log_shutdown();
	return 0;
}
