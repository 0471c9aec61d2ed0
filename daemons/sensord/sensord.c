/*
 * sensord.c: gensee-sensord, the kernel's own signals turned into evidence.
 *
 * Trust model: sensord is root with only the capabilities its sensors need
 * and no policy authority. It learns each operation's config from
 * boundaryd over boundary.sock (root, SO_PEERCRED-checked there), and
 * reports back: lineage from the proc connector, capability faults derived
 * from nftables traces of an operation's own table, and fanotify file
 * decisions. The only decisions it makes itself are the fanotify answers,
 * from the rules boundaryd gave it; whatever it cannot decide it denies.
 * Lost events are reported as lost, never papered over.
 *
 * sensord outlives its channel: when boundaryd goes away (restart, missed
 * heartbeats, a frame it cannot take) it keeps its marks and the rules it
 * has, reconnects with backoff and registers again; boundaryd freezes the
 * fanotify operations meanwhile. One operation's bad config is refused
 * (reported in its ack), never fatal, and a config is acknowledged only
 * once its marks are in place.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/netfilter.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <json-c/json.h>

#include "cgroup.h"
#include "fanotify.h"
#include "fanpolicy.h"
#include "frame.h"
#include "ids.h"
#include "log.h"
#include "nftrace.h"
#include "proc.h"
#include "proccn.h"
#include "proto.h"
#include "safefs.h"
#include "sandbox.h"
#include "sensord.h"
#include "util.h"

static struct sensord sd;

static void sensord_proccn_drain(void);
static void sensord_disconnect(const char *why);
static int sensord_connect(const char *runtime_dir, char **cause);

/* Print the usage to stdout and exit 0 (--help), or to stderr and exit 2 (LSB: bad arguments). */
static void __attribute__((noreturn))
usage_to(int help)
{
	fprintf(help ? stdout : stderr, "usage: " SENSORD_NAME
	    " --runtime-dir DIR [--enable-audit] [--foreground] [--debug]\n"
	    "       " SENSORD_NAME " --help | --version\n");
	exit(help ? 0 : 2);
}

static void __attribute__((noreturn))
usage(void)
{
	usage_to(0);
}

/*
 * The boundary channel
 */

/* Send a request; replies are only logged when they carry an error. */
static void
sensord_request(const char *method, struct json_object *params)
{
	struct json_object *msg = proto_request_new(sd.sd_next_id++, method, params);
	if (sd.sd_bev == NULL || frame_encode_evbuffer(bufferevent_get_output(sd.sd_bev), msg) != 0)
		log_warnx("cannot send %s to boundaryd", method);
	json_object_put(msg);
}

struct event_base *
sensord_base(void)
{
	return sd.sd_base;
}

size_t
sensord_nops(void)
{
	return sd.sd_nops;
}

struct sop *
sensord_op_at(size_t i)
{
	return &sd.sd_ops[i];
}

/* Coverage of a sensor was lost: every operation it covers is told. */
void
sensord_loss(const char *sensor, int64_t count, const char *why)
{
	struct json_object *p = json_object_new_object();
	json_object_object_add(p, "sensor", json_object_new_string(sensor));
	json_object_object_add(p, "count", json_object_new_int64(count));
	json_object_object_add(p, "detail", json_object_new_string(why));
	sensord_request("sensor.loss", p);
}

void
sensord_fan_loss(const char *why)
{
	sensord_loss("fanotify", 1, why);
}

struct sop *
sensord_op_find(const char *id)
{
	for (size_t i = 0; i < sd.sd_nops; i++)
		if (strcmp(sd.sd_ops[i].so_id, id) == 0)
			return &sd.sd_ops[i];
	return NULL;
}

/* The operation whose cgroup subtree holds pid, or NULL. */
struct sop *
sensord_op_of_pid(pid_t pid)
{
	char cg[256];

	if (cgroup_of_pid(pid, cg, sizeof(cg)) != 0)
		return NULL;
	for (size_t i = 0; i < sd.sd_nops; i++) {
		size_t n = strlen(sd.sd_ops[i].so_cgroup);
		if (n > 0 && strncmp(cg, sd.sd_ops[i].so_cgroup, n) == 0 &&
		    (cg[n] == '\0' || cg[n] == '/'))
			return &sd.sd_ops[i];
	}
	return NULL;
}

/* Is pid inside some gensee operation cgroup at all (known or not)? */
int
sensord_pid_in_gensee(pid_t pid)
{
	char cg[256];
	return cgroup_of_pid(pid, cg, sizeof(cg)) == 0 &&
	    strncmp(cg, CGROUP_BASE "/op_", strlen(CGROUP_BASE) + 4) == 0;
}

/* Tell boundaryd whether an operation's config is in place (error NULL: it is). */
static void
sensord_ack(const char *id, const char *error)
{
	struct json_object *p = json_object_new_object();
	json_object_object_add(p, "operation_id", json_object_new_string(id));
	if (error != NULL) {
		char msg[512];
		util_strlcpy(msg, error, sizeof(msg));
		json_object_object_add(p, "error", json_object_new_string(msg));
	}
	sensord_request("sensor.ack", p);
}

static void
sensord_op_clear(struct sop *o)
{
	if (o->so_fan != NULL) {
		fanpolicy_free(o->so_fan);
		free(o->so_fan);
	}
	json_object_put(o->so_fan_json);
	json_object_put(o->so_lineage);
	json_object_put(o->so_files);
	memset(o, 0, sizeof(*o));
}

/* Forget one operation (its config was removed, or boundaryd no longer has it). */
static void
sensord_op_drop(struct sop *o)
{
	char *cause = NULL;

	sensord_op_clear(o);
	*o = sd.sd_ops[--sd.sd_nops];
	memset(&sd.sd_ops[sd.sd_nops], 0, sizeof(*o));
	if (sensord_fan_reconfigure(&cause) != 0) {
		log_warnx("fanotify: %s", cause);
		free(cause);
	}
}

/* Apply one operation config from boundaryd ("add" or "remove"). */
static void
sensord_apply_config(struct json_object *c, const char *action)
{
	const char *id = schema_string(c, "operation_id");
	struct json_object *kept_lineage = NULL, *kept_files = NULL;
	int64_t kept_dropped = 0;
	struct sop *o;

	if (id == NULL || !ids_valid_operation(id))
		return;
	o = sensord_op_find(id);
	if (strcmp(action, "remove") == 0) {
		if (o != NULL) {
			/* Take in what the kernel already sent about its last processes. */
			sensord_proccn_drain();
			sensord_audit_drain();
			sensord_audit_expire(1);
			sensord_flush_op(o);
			struct json_object *p = json_object_new_object();
			json_object_object_add(p, "operation_id", json_object_new_string(id));
			json_object_object_add(p, "action", json_object_new_string("remove"));
			sensord_request("sensor.ack", p);
			sensord_op_drop(o);
		}
		return;
	}
	if (o == NULL) {
		if (sd.sd_nops == SENSORD_MAX_OPS) {
			log_warnx("%s: too many operations; its coverage is lost", id);
			struct json_object *p = json_object_new_object();
			json_object_object_add(p, "sensor", json_object_new_string("all"));
			json_object_object_add(p, "count", json_object_new_int(1));
			json_object_object_add(p, "operation_id", json_object_new_string(id));
			json_object_object_add(p, "detail", json_object_new_string("sensor table full"));
			sensord_request("sensor.loss", p);
			return;
		}
		o = &sd.sd_ops[sd.sd_nops++];
		memset(o, 0, sizeof(*o));
	} else {
		/*
		 * A config again (a restarted boundaryd resends every running
		 * operation's): what was kept for it while boundaryd was away
		 * is still to be reported, not discarded with the old rules.
		 */
		kept_lineage = o->so_lineage;
		kept_files = o->so_files;
		kept_dropped = o->so_files_dropped;
		o->so_lineage = NULL;
		o->so_files = NULL;
		sensord_op_clear(o);
	}
	util_strlcpy(o->so_id, id, sizeof(o->so_id));
	util_strlcpy(o->so_cgroup, schema_string(c, "cgroup") ? schema_string(c, "cgroup") : "",
	    sizeof(o->so_cgroup));
	util_strlcpy(o->so_table, schema_string(c, "table") ? schema_string(c, "table") : "",
	    sizeof(o->so_table));
	o->so_lineage = kept_lineage != NULL ? kept_lineage : json_object_new_array();
	o->so_files = kept_files != NULL ? kept_files : json_object_new_array();
	o->so_files_dropped = kept_dropped;
	struct json_object *fan = schema_child(c, "fanotify");
	if (fan != NULL && schema_bool(fan, "enabled", 0)) {
		char *cause = NULL;
		o->so_fan = calloc(1, sizeof(*o->so_fan));
		if (!sensord_fan_available())
			cause = strdup("this sensord has no fanotify engine");
		if (o->so_fan == NULL || cause != NULL ||
		    sensord_fan_policy(fan, o->so_fan, &o->so_posture, &cause) != 0) {
			/*
			 * Rules we cannot parse must not turn into no rules: the
			 * ack says so, and boundaryd refuses to start the
			 * operation (or keeps it frozen). Only this operation is
			 * affected; its marked opens are denied meanwhile.
			 */
			char msg[512];
			snprintf(msg, sizeof(msg), "fanotify config refused: %s",
			    cause ? cause : "out of memory");
			log_warnx("%s: %s", id, msg);
			free(cause);
			if (o->so_fan != NULL) {
				fanpolicy_free(o->so_fan);
				free(o->so_fan);
				o->so_fan = NULL;
			}
			o->so_fan_broken = 1;
			sensord_ack(id, msg);
			return;
		}
		o->so_fan_json = json_object_get(fan);
	}
	/* Acknowledged only once the marks are in place. */
	char *cause = NULL;
	if (sensord_fan_reconfigure(&cause) != 0) {
		char msg[512];
		snprintf(msg, sizeof(msg), "fanotify marks not placed: %s",
		    cause ? cause : "unknown error");
		free(cause);
		if (o->so_fan != NULL) {
			sensord_ack(id, msg);
			return;
		}
		log_warnx("%s: %s", id, msg); /* not this operation's marks */
	}
	sensord_nft_replay();
	sensord_ack(id, NULL);
	log_info("%s: config applied (cgroup %s, table %s, fanotify %s)", id, o->so_cgroup,
	    o->so_table[0] ? o->so_table : "-", o->so_fan != NULL || o->so_fan_broken ? "on" : "off");
}

static void
sensord_handle_message(struct json_object *msg)
{
	const char *event = schema_string(msg, "event");
	struct json_object *err = schema_child(msg, "error");

	if (event != NULL) {
		struct json_object *p = schema_child(msg, "params");
		if (strcmp(event, "operation.sensor_config") == 0 && p != NULL)
			sensord_apply_config(p, schema_string(p, "action") ?
			    schema_string(p, "action") : "add");
		return;
	}
	if (err != NULL) {
		log_warnx("boundaryd refused request %lld: %s: %s",
		    (long long)schema_int(msg, "id", -1), schema_string(err, "code"),
		    schema_string(err, "message"));
		/* Another channel still holds the place (a hung sensord): try again later. */
		if (schema_int(msg, "id", -1) == sd.sd_register_id && !sd.sd_registered)
			sensord_disconnect("registration refused");
		return;
	}
	/*
	 * The reply to sensor.register names the running operations (their
	 * configs came just before it, each as an event): whatever we still
	 * hold of any other operation is gone.
	 */
	struct json_object *res = schema_child(msg, "result");
	if (schema_int(msg, "id", -1) == sd.sd_register_id && res != NULL) {
		struct json_object *ops = schema_child(res, "operations");
		for (size_t i = 0; i < sd.sd_nops;) {
			int keep = 0;
			for (size_t k = 0; ops != NULL && k < json_object_array_length(ops); k++) {
				const char *id = json_object_get_string(
				    json_object_array_get_idx(ops, k));
				keep |= id != NULL && strcmp(id, sd.sd_ops[i].so_id) == 0;
			}
			if (keep)
				i++;
			else
				sensord_op_drop(&sd.sd_ops[i]);
		}
		int64_t hb = schema_int(res, "heartbeat_ms", SENSORD_HEARTBEAT_MS);
		if (hb >= 50 && hb <= 600000 && hb != sd.sd_heartbeat_ms) {
			struct timeval tv = { hb / 1000, (hb % 1000) * 1000 };
			sd.sd_heartbeat_ms = (int)hb;
			event_add(sd.sd_heartbeat_ev, &tv);
		}
		sd.sd_registered = 1;
		sd.sd_reconnect_ms = SENSORD_RECONNECT_MIN_MS;
		sensord_fan_registered();
		log_info("registered with boundaryd %s (%zu running operation(s), heartbeat %d ms)",
		    schema_string(res, "instance") ? schema_string(res, "instance") : "?",
		    sd.sd_nops, sd.sd_heartbeat_ms);
	}
}

static void
sensord_read_cb(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	(void)arg;
	sd.sd_seen_ms = util_monotonic_ms();
	while (sd.sd_bev == bev) {
		struct json_object *msg = NULL;
		int st = frame_decode_evbuffer(in, FRAME_MAX_DEFAULT, &msg);
		if (st == FRAME_NEED_MORE)
			return;
		if (st != FRAME_OK) {
			/*
			 * The stream cannot be resynchronised, but one bad frame
			 * must not take every operation's coverage down with
			 * sensord: start the channel over.
			 */
			log_warnx("malformed frame from boundaryd: %s", frame_status_code(st));
			sensord_disconnect("malformed frame");
			return;
		}
		sensord_handle_message(msg);
		json_object_put(msg);
	}
}

/* Register the open sensors on the (new) channel to boundaryd. */
static void
sensord_register(void)
{
	struct json_object *p = json_object_new_object(), *arr = json_object_new_array();

	for (size_t i = 0; i < sd.sd_nnames; i++)
		json_object_array_add(arr, json_object_new_string(sd.sd_names[i]));
	json_object_object_add(p, "sensors", arr);
	sd.sd_register_id = sd.sd_next_id;
	sd.sd_seen_ms = util_monotonic_ms();
	sensord_request("sensor.register", p);
}

/* Try to reach boundaryd again; back off while it is not there. */
static void
sensord_reconnect_cb(evutil_socket_t fd, short what, void *arg)
{
	char *cause = NULL;

	(void)fd;
	(void)what;
	(void)arg;
	if (sensord_connect(sd.sd_runtime_dir, &cause) != 0) {
		struct timeval tv = { sd.sd_reconnect_ms / 1000, (sd.sd_reconnect_ms % 1000) * 1000 };
		log_debug("cannot reach boundaryd: %s; again in %d ms", cause, sd.sd_reconnect_ms);
		free(cause);
		event_add(sd.sd_reconnect_ev, &tv);
		sd.sd_reconnect_ms *= 2;
		if (sd.sd_reconnect_ms > SENSORD_RECONNECT_MAX_MS)
			sd.sd_reconnect_ms = SENSORD_RECONNECT_MAX_MS;
		return;
	}
	sensord_register();
	log_info("connected to boundaryd in %s, registering", sd.sd_runtime_dir);
}

/*
 * Drop the channel and reconnect. The marks and the rules stay as they
 * are: what was guarded stays guarded while there is no one to report to.
 */
static void
sensord_disconnect(const char *why)
{
	struct timeval tv = { sd.sd_reconnect_ms / 1000, (sd.sd_reconnect_ms % 1000) * 1000 };

	if (sd.sd_bev == NULL)
		return;
	log_warnx("boundaryd channel lost (%s); reconnecting", why);
	bufferevent_free(sd.sd_bev);
	sd.sd_bev = NULL;
	sd.sd_registered = 0;
	event_add(sd.sd_reconnect_ev, &tv);
}

/* Our heartbeat; a boundaryd silent for too long is given up and reconnected. */
static void
sensord_heartbeat_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	if (sd.sd_bev == NULL)
		return;
	if (util_monotonic_ms() - sd.sd_seen_ms >
	    (int64_t)SENSORD_HEARTBEAT_MISSES * sd.sd_heartbeat_ms) {
		sensord_disconnect("no heartbeat from boundaryd");
		return;
	}
	sensord_request("sensor.heartbeat", json_object_new_object());
	sensord_audit_check();
}

static void
sensord_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)arg;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		sensord_disconnect("boundaryd closed the connection");
}

static int
sensord_connect(const char *runtime_dir, char **cause)
{
	struct sockaddr_un sun;
	int fd, dfd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	/* The runtime dir is checked like boundaryd checks it: root's alone. */
	if ((dfd = safefs_open_root(runtime_dir, cause)) < 0)
		return -1;
	/* The group first: from the registration on, our death must not unmark it. */
	if (sensord_fan_exchange(dfd, cause) != 0) {
		close(dfd);
		return -1;
	}
	snprintf(sun.sun_path, sizeof(sun.sun_path), "/proc/self/fd/%d/boundary.sock", dfd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		util_cause(cause, "%s/boundary.sock: %s", runtime_dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		close(dfd);
		return -1;
	}
	close(dfd);
	if (evutil_make_socket_nonblocking(fd) != 0) {
		util_cause(cause, "nonblocking: %s", strerror(errno));
		close(fd);
		return -1;
	}
	sd.sd_bev = bufferevent_socket_new(sd.sd_base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (sd.sd_bev == NULL) {
		util_cause(cause, "bufferevent_socket_new failed");
		close(fd);
		return -1;
	}
	bufferevent_setcb(sd.sd_bev, sensord_read_cb, NULL, sensord_event_cb, NULL);
	bufferevent_enable(sd.sd_bev, EV_READ | EV_WRITE);
	return 0;
}

/*
 * Lineage from the proc connector
 */

/* Remember which operation a pid (with its start time) belongs to. */
static void
sensord_pid_remember(pid_t pid, uint64_t start, struct sop *o)
{
	struct spid *p = &sd.sd_pids[(unsigned)pid % SENSORD_PID_SLOTS];
	p->sp_pid = pid;
	p->sp_start = start;
	util_strlcpy(p->sp_op, o->so_id, sizeof(p->sp_op));
}

static struct sop *
sensord_pid_recall(pid_t pid, uint64_t *start)
{
	struct spid *p = &sd.sd_pids[(unsigned)pid % SENSORD_PID_SLOTS];
	if (p->sp_pid != pid || p->sp_op[0] == '\0')
		return NULL;
	*start = p->sp_start;
	return sensord_op_find(p->sp_op);
}

/* The operation of a process that may have exited since (its last exec or fork seen). */
struct sop *
sensord_op_of_recent_pid(pid_t pid)
{
	uint64_t start;
	struct sop *o = sensord_op_of_pid(pid);
	return o != NULL ? o : sensord_pid_recall(pid, &start);
}

static void
sensord_lineage_add(struct sop *o, const char *type, pid_t pid, pid_t ppid, uint64_t start,
    const struct proccn_event *e)
{
	struct json_object *x = json_object_new_object();
	char exe[256] = "", dig[PROC_DIGEST_HEX] = "", ts[40];

	util_now_rfc3339(ts, sizeof(ts));
	json_object_object_add(x, "type", json_object_new_string(type));
	json_object_object_add(x, "pid", json_object_new_int64(pid));
	json_object_object_add(x, "ppid", json_object_new_int64(ppid));
	json_object_object_add(x, "start_time_ticks", json_object_new_int64((int64_t)start));
	json_object_object_add(x, "time", json_object_new_string(ts));
	if (strcmp(type, "exit") != 0) {
		if (proc_read_exe(pid, exe, sizeof(exe)) == 0)
			json_object_object_add(x, "executable", json_object_new_string(exe));
		if (proc_argv_digest(pid, dig) == 0)
			json_object_object_add(x, "argv_digest", json_object_new_string(dig));
	} else if (e != NULL) {
		int st = (int)e->pe_exit_code;
		if (WIFEXITED(st))
			json_object_object_add(x, "exit_code", json_object_new_int(WEXITSTATUS(st)));
		else if (WIFSIGNALED(st))
			json_object_object_add(x, "exit_signal", json_object_new_int(WTERMSIG(st)));
	}
	if (json_object_array_length(o->so_lineage) >= SENSORD_BACKLOG_MAX) {
		json_object_put(x); /* no boundaryd for a long time: the entry is lost */
		return;
	}
	json_object_array_add(o->so_lineage, x);
}

static void
sensord_proccn_event(const struct proccn_event *e)
{
	struct proc_stat st;
	struct sop *o;
	uint64_t start = 0;

	switch (e->pe_type) {
	case PROCCN_LOST: {
		struct json_object *p = json_object_new_object();
		json_object_object_add(p, "sensor", json_object_new_string("proc_connector"));
		json_object_object_add(p, "count", json_object_new_int(1));
		json_object_object_add(p, "detail", json_object_new_string("receive queue overrun"));
		sensord_request("sensor.loss", p);
		return;
	}
	case PROCCN_FORK:
		if (e->pe_pid != e->pe_tgid)
			return; /* a new thread, not a new process */
		/* FALLTHROUGH */
	case PROCCN_EXEC:
		if (proc_read_stat(e->pe_tgid, &st) != 0)
			return; /* gone already: its exit event will say so if it was ours */
		if ((o = sensord_op_of_pid(e->pe_tgid)) == NULL)
			return;
		sensord_pid_remember(e->pe_tgid, st.ps_start_ticks, o);
		sensord_lineage_add(o, e->pe_type == PROCCN_FORK ? "fork" : "exec", e->pe_tgid,
		    st.ps_ppid, st.ps_start_ticks, e);
		return;
	case PROCCN_EXIT:
		if (e->pe_pid != e->pe_tgid)
			return;
		if ((o = sensord_pid_recall(e->pe_tgid, &start)) == NULL)
			return;
		sensord_lineage_add(o, "exit", e->pe_tgid, e->pe_parent_tgid, start, e);
		return;
	}
}

static void
sensord_proccn_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	sensord_proccn_drain();
}

/* Handle every proc connector event that is waiting. */
static void
sensord_proccn_drain(void)
{
	struct proccn_event v[64];
	size_t n;
	char *cause = NULL;

	if (sd.sd_proccn == NULL)
		return;
	do {
		n = 0;
		if (proccn_read(sd.sd_proccn, v, nitems(v), &n, &cause) != 0) {
			log_warnx("proc connector: %s", cause);
			free(cause);
			cause = NULL;
		}
		for (size_t i = 0; i < n; i++)
			sensord_proccn_event(&v[i]);
	} while (n == nitems(v));
}

/* Send what has accumulated: lineage and file decisions, per operation. */
void
sensord_flush_op(struct sop *o)
{
	if (!sd.sd_registered)
		return; /* kept for the next boundaryd (bounded by SENSORD_BACKLOG_MAX) */
	if (o->so_lineage != NULL && json_object_array_length(o->so_lineage) > 0) {
		struct json_object *p = json_object_new_object();
		json_object_object_add(p, "operation_id", json_object_new_string(o->so_id));
		json_object_object_add(p, "events", o->so_lineage);
		sensord_request("lineage.report", p);
		o->so_lineage = json_object_new_array();
	}
	/*
	 * File decisions go in frames of a bounded number: one frame of a full
	 * backlog would pass the frame limit and be lost whole. What cannot be
	 * sent is counted and the count rides on the next frame.
	 */
	size_t nf = o->so_files != NULL ? json_object_array_length(o->so_files) : 0;
	for (size_t i = 0; i < nf || o->so_files_dropped > 0;) {
		struct json_object *p = json_object_new_object(), *chunk = json_object_new_array();
		size_t k;
		for (k = 0; k < SENSORD_DECISIONS_PER_FRAME && i + k < nf; k++)
			json_object_array_add(chunk, json_object_get(
			    json_object_array_get_idx(o->so_files, i + k)));
		json_object_object_add(p, "operation_id", json_object_new_string(o->so_id));
		json_object_object_add(p, "decisions", chunk);
		if (o->so_files_dropped > 0)
			json_object_object_add(p, "dropped",
			    json_object_new_int64(o->so_files_dropped));
		struct json_object *msg = proto_request_new(sd.sd_next_id++, "file.decision", p);
		if (sd.sd_bev != NULL && frame_encode_evbuffer(bufferevent_get_output(sd.sd_bev),
		    msg) == 0) {
			o->so_files_dropped = 0;
		} else {
			log_warnx("%s: cannot send %zu file decision(s) to boundaryd", o->so_id, k);
			o->so_files_dropped += (int64_t)k;
			if (k == 0) {
				json_object_put(msg);
				break; /* only a count to send, and it cannot be: keep it */
			}
		}
		json_object_put(msg);
		i += k;
	}
	if (nf > 0) {
		json_object_put(o->so_files);
		o->so_files = json_object_new_array();
	}
}

static void
sensord_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	sensord_audit_expire(0);
	for (size_t i = 0; i < sd.sd_nops; i++)
		sensord_flush_op(&sd.sd_ops[i]);
	sensord_nft_expire();
}

/*
 * nftables traces -> capability faults
 */

static struct sop *
sensord_op_of_table(const char *table)
{
	for (size_t i = 0; i < sd.sd_nops; i++)
		if (sd.sd_ops[i].so_table[0] && strcmp(table, sd.sd_ops[i].so_table) == 0)
			return &sd.sd_ops[i];
	return NULL;
}

/* Turn one rejected packet of an operation's table into a capability fault. */
static void
sensord_trace_fault(struct sop *o, const struct nftrace_event *e)
{
	char dst[INET6_ADDRSTRLEN];
	int64_t now = util_monotonic_ms();

	inet_ntop(e->te_family, e->te_daddr, dst, sizeof(dst));
	/* One fault per tuple and second: a retrying client is one event, not a flood. */
	for (size_t i = 0; i < nitems(sd.sd_recent); i++) {
		struct srecent *r = &sd.sd_recent[i];
		if (now - r->sr_ms < 1000 && strcmp(r->sr_op, o->so_id) == 0 &&
		    r->sr_proto == e->te_proto && r->sr_port == e->te_dport &&
		    strcmp(r->sr_dst, dst) == 0)
			return;
	}
	struct srecent *slot = &sd.sd_recent[sd.sd_recent_next++ % nitems(sd.sd_recent)];
	slot->sr_ms = now;
	util_strlcpy(slot->sr_op, o->so_id, sizeof(slot->sr_op));
	util_strlcpy(slot->sr_dst, dst, sizeof(slot->sr_dst));
	slot->sr_proto = e->te_proto;
	slot->sr_port = e->te_dport;

	struct json_object *f = json_object_new_object(), *subj = json_object_new_object();
	struct json_object *cap = json_object_new_object(), *p = json_object_new_object();
	json_object_object_add(subj, "nft_table", json_object_new_string(o->so_table));
	json_object_object_add(cap, "kind", json_object_new_string("network.connect"));
	json_object_object_add(cap, "destination", json_object_new_string(dst));
	json_object_object_add(cap, "protocol", json_object_new_string(
	    e->te_proto == IPPROTO_TCP ? "tcp" : "udp"));
	json_object_object_add(cap, "port", json_object_new_int(e->te_dport));
	json_object_object_add(f, "schema_version", json_object_new_int(1));
	json_object_object_add(f, "subject", subj);
	json_object_object_add(f, "capability", cap);
	json_object_object_add(f, "source", json_object_new_string("nft_trace"));
	json_object_object_add(p, "operation_id", json_object_new_string(o->so_id));
	json_object_object_add(p, "fault", f);
	sensord_request("fault.submit", p);
	log_debug("%s: trace fault %s %s/%u", o->so_id, dst,
	    e->te_proto == IPPROTO_TCP ? "tcp" : "udp", e->te_dport);
}

static void
sensord_trace_event(const struct nftrace_event *e)
{
	struct sop *o;

	if (e->te_lost) {
		struct json_object *p = json_object_new_object();
		json_object_object_add(p, "sensor", json_object_new_string("nft_trace"));
		json_object_object_add(p, "count", json_object_new_int(1));
		json_object_object_add(p, "detail", json_object_new_string("trace queue overrun"));
		sensord_request("sensor.loss", p);
		return;
	}
	/*
	 * The kernel puts the packet headers only in the first trace message
	 * of a packet in a base chain; later ones (same te_id) carry only the
	 * verdict. Remember headers by id, complete verdict events from them.
	 */
	struct nftrace_event full = *e;
	if (e->te_family != 0) {
		struct stuple *t = &sd.sd_tuples[sd.sd_tuples_next++ % nitems(sd.sd_tuples)];
		t->st_id = e->te_id;
		t->st_ev = *e;
	} else {
		size_t i;
		for (i = 0; i < nitems(sd.sd_tuples); i++)
			if (sd.sd_tuples[i].st_id == e->te_id && sd.sd_tuples[i].st_ev.te_family != 0)
				break;
		if (i == nitems(sd.sd_tuples))
			return;
		full.te_family = sd.sd_tuples[i].st_ev.te_family;
		memcpy(full.te_daddr, sd.sd_tuples[i].st_ev.te_daddr, 16);
		full.te_proto = sd.sd_tuples[i].st_ev.te_proto;
		full.te_dport = sd.sd_tuples[i].st_ev.te_dport;
	}
	/* Only the reject verdicts of our own tables, TCP and UDP with a port. */
	if (strncmp(full.te_table, "gensee_", 7) != 0 || strcmp(full.te_chain, "blocked") != 0 ||
	    !full.te_has_verdict || full.te_verdict != NF_DROP ||
	    (full.te_proto != IPPROTO_TCP && full.te_proto != IPPROTO_UDP))
		return;
	e = &full;
	if ((o = sensord_op_of_table(e->te_table)) != NULL) {
		sensord_trace_fault(o, e);
		return;
	}
	/* A table we have no config for yet: keep it briefly, the config may be on its way. */
	if (sd.sd_npending < nitems(sd.sd_pending)) {
		sd.sd_pending[sd.sd_npending].sn_ev = *e;
		sd.sd_pending[sd.sd_npending].sn_ms = util_monotonic_ms();
		sd.sd_npending++;
	}
}

/* Replay held traces once a config arrived. */
void
sensord_nft_replay(void)
{
	size_t k = 0;
	for (size_t i = 0; i < sd.sd_npending; i++) {
		struct sop *o = sensord_op_of_table(sd.sd_pending[i].sn_ev.te_table);
		if (o != NULL)
			sensord_trace_fault(o, &sd.sd_pending[i].sn_ev);
		else
			sd.sd_pending[k++] = sd.sd_pending[i];
	}
	sd.sd_npending = k;
}

/* Drop held traces of tables no operation claimed within 2 s. */
void
sensord_nft_expire(void)
{
	size_t k = 0;
	int64_t now = util_monotonic_ms();
	for (size_t i = 0; i < sd.sd_npending; i++)
		if (now - sd.sd_pending[i].sn_ms < 2000)
			sd.sd_pending[k++] = sd.sd_pending[i];
	sd.sd_npending = k;
}

static void
sensord_nftrace_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nftrace_event v[32];
	size_t n;
	char *cause = NULL;

	(void)fd;
	(void)what;
	(void)arg;
	do {
		n = 0;
		if (nftrace_read(sd.sd_nftrace, v, nitems(v), &n, &cause) != 0) {
			log_warnx("nft trace: %s", cause);
			free(cause);
			cause = NULL;
		}
		for (size_t i = 0; i < n; i++)
			sensord_trace_event(&v[i]);
	} while (n == nitems(v));
}

static void
sensord_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	(void)arg;
	log_info("signal %d: stopping", (int)sig);
	event_base_loopexit(sd.sd_base, NULL);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "debug", no_argument, NULL, 'd' },
		{ "enable-audit", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *runtime_dir = NULL;
	int ch, logflags = LOG_F_ASYNC, enable_audit = 0;
	char *cause = NULL;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'r':
			runtime_dir = optarg;
			break;
		case 'f':
			break; /* always in the foreground: the service manager supervises us */
		case 'd':
			logflags |= LOG_F_DEBUG;
			break;
		case 'a':
			enable_audit = 1;
			break;
		case 'h':
			usage_to(1);
		case 'V':
			printf(SENSORD_NAME " %s\n", GENSEE_VERSION);
			exit(0);
		default:
			usage();
		}
	}
	if (optind != argc || runtime_dir == NULL)
		usage();
	log_init(SENSORD_NAME, 0);
	if (geteuid() != 0)
		fatalx("must run as root");
	if (ids_init() != 0)
		fatalx("libsodium initialisation failed");
	signal(SIGPIPE, SIG_IGN);
	log_init(SENSORD_NAME, logflags);
	memset(&sd, 0, sizeof(sd));
	sd.sd_next_id = 1;
	sd.sd_base = event_base_new();
	if (sd.sd_base == NULL)
		fatalx("event_base_new failed");

	/*
	 * The sensors open before we register, so that from the moment
	 * boundaryd hands us an operation nothing of it goes unseen.
	 */
	if (proccn_open(&sd.sd_proccn, &cause) == 0) {
		sd.sd_names[sd.sd_nnames++] = "proc_connector";
	} else {
		log_warnx("proc connector unavailable: %s", cause);
		free(cause);
		cause = NULL;
	}
	if (nftrace_open(&sd.sd_nftrace, &cause) == 0) {
		sd.sd_names[sd.sd_nnames++] = "nft_trace";
	} else {
		log_warnx("nft trace unavailable: %s", cause);
		free(cause);
		cause = NULL;
	}
	if (sensord_fan_init(&cause) == 0) {
		sd.sd_names[sd.sd_nnames++] = "fanotify";
	} else {
		log_warnx("fanotify unavailable: %s", cause);
		free(cause);
		cause = NULL;
	}
	if (sensord_audit_init(enable_audit, &cause) == 0) {
		sd.sd_names[sd.sd_nnames++] = "landlock_audit";
	} else {
		log_warnx("Landlock denials will not be reported: %s", cause);
		free(cause);
		cause = NULL;
	}
	if (sd.sd_nnames == 0)
		fatalx("no sensor could be opened");
	sd.sd_runtime_dir = runtime_dir;
	sd.sd_reconnect_ms = SENSORD_RECONNECT_MIN_MS;
	sd.sd_heartbeat_ms = SENSORD_HEARTBEAT_MS;
	if (sensord_connect(runtime_dir, &cause) != 0)
		fatalx("cannot reach boundaryd: %s", cause);
	if (sandbox_sensord(sensord_audit_open(), &cause) != 0)
		fatalx("sandbox: %s", cause);

	struct event *ev_proc = NULL, *ev_trace = NULL;
	if (sd.sd_proccn != NULL) {
		ev_proc = event_new(sd.sd_base, proccn_fd(sd.sd_proccn), EV_READ | EV_PERSIST,
		    sensord_proccn_cb, NULL);
		if (ev_proc == NULL || event_add(ev_proc, NULL) != 0)
			fatalx("cannot watch the proc connector");
	}
	if (sd.sd_nftrace != NULL) {
		ev_trace = event_new(sd.sd_base, nftrace_fd(sd.sd_nftrace), EV_READ | EV_PERSIST,
		    sensord_nftrace_cb, NULL);
		if (ev_trace == NULL || event_add(ev_trace, NULL) != 0)
			fatalx("cannot watch nft traces");
	}
	if (sensord_audit_watch(&cause) != 0)
		fatalx("%s", cause);
	struct timeval hb_tv = { SENSORD_HEARTBEAT_MS / 1000, 0 };
	sd.sd_reconnect_ev = evtimer_new(sd.sd_base, sensord_reconnect_cb, NULL);
	sd.sd_heartbeat_ev = event_new(sd.sd_base, -1, EV_PERSIST, sensord_heartbeat_cb, NULL);
	if (sd.sd_reconnect_ev == NULL || sd.sd_heartbeat_ev == NULL ||
	    event_add(sd.sd_heartbeat_ev, &hb_tv) != 0)
		fatalx("cannot install the channel timers");
	struct event *ev_flush = event_new(sd.sd_base, -1, EV_PERSIST, sensord_flush_cb, NULL);
	struct timeval flush_tv = { 0, SENSORD_FLUSH_MS * 1000 };
	struct event *ev_term = evsignal_new(sd.sd_base, SIGTERM, sensord_signal_cb, NULL);
	struct event *ev_int = evsignal_new(sd.sd_base, SIGINT, sensord_signal_cb, NULL);
	if (ev_flush == NULL || event_add(ev_flush, &flush_tv) != 0 || ev_term == NULL ||
	    ev_int == NULL || event_add(ev_term, NULL) != 0 || event_add(ev_int, NULL) != 0)
		fatalx("cannot install events");

	sensord_register();
	log_info("sensors open, registering with boundaryd in %s", runtime_dir);

	event_base_dispatch(sd.sd_base);

	for (size_t i = 0; i < sd.sd_nops; i++)
		sensord_op_clear(&sd.sd_ops[i]);
	sensord_fan_shutdown();
	sensord_audit_shutdown();
	if (ev_proc != NULL)
		event_free(ev_proc);
	if (ev_trace != NULL)
		event_free(ev_trace);
	event_free(ev_flush);
	event_free(sd.sd_reconnect_ev);
	event_free(sd.sd_heartbeat_ev);
	event_free(ev_term);
	event_free(ev_int);
	if (sd.sd_bev != NULL)
		bufferevent_free(sd.sd_bev);
	proccn_close(sd.sd_proccn);
	nftrace_close(sd.sd_nftrace);
	event_base_free(sd.sd_base);
	log_info("stopped");
	log_shutdown();
	return 0;
}
