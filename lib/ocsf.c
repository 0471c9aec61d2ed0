/*
 * ocsf.c: evidence -> OCSF 1.1.0 events, and boundaryd's bounded OCSF sink.
 *
 * Class, activity and enum values are those of the OCSF schema 1.1.0
 * (github.com/ocsf/ocsf-schema, tag v1.1.0); tests/integration/ocsf_check.py
 * checks emitted records against the same subset.
 *
 * The evidence lines mapped here were written from what sensord and
 * supervised processes reported: every field is read defensively (missing,
 * wrong type, oversized) and only copied into typed OCSF attributes after a
 * check (an IP is parsed, a port range-checked), so a forged line can shape
 * "unmapped" but not make a record invalid for the SIEM.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "log.h"
#include "ocsf.h"
#include "safefs.h"
#include "schema.h"
#include "util.h"

/* OCSF 1.1.0 ids used below. */
enum {
	OCSF_FILE_ACTIVITY = 1001,
	OCSF_PROCESS_ACTIVITY = 1007,
	OCSF_DETECTION_FINDING = 2004,
	OCSF_NETWORK_ACTIVITY = 4001,
};
#define SEV_INFO 1
#define SEV_LOW 2
#define SEV_MEDIUM 3
#define SEV_HIGH 4
#define STATUS_SUCCESS 1
#define STATUS_FAILURE 2
#define FINDING_NEW 1
#define FINDING_RESOLVED 4
#define ACT_OTHER 99

int64_t
ocsf_time_ms(const char *s)
{
	struct tm tm;
	const char *p;
	int64_t frac = 0;

	if (s == NULL || strlen(s) > 40)
		return -1;
	memset(&tm, 0, sizeof(tm));
	p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (p == NULL)
		return -1;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 3)
				frac = frac * 10 + (*p - '0');
		if (digits == 0)
			return -1;
		for (; digits < 3; digits++)
			frac *= 10;
	}
	if (strcmp(p, "Z") != 0)
		return -1;
	time_t t = timegm(&tm);
	if (t == (time_t)-1 || t < 0)
		return -1;
	return (int64_t)t * 1000 + frac;
}

static const char *
ocsf_hostname(void)
{
	static char host[256];
	static int done;

	if (!done) {
		done = 1;
		if (gethostname(host, sizeof(host) - 1) != 0)
			host[0] = '\0';
		/* hostname_t: letters, digits, '-' and '.' only; else leave it out. */
		for (char *c = host; *c != '\0'; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			    (*c >= '0' && *c <= '9') || *c == '-' || *c == '.')) {
				host[0] = '\0';
				break;
			}
	}
	return host;
}

static void
add_str(struct json_object *o, const char *key, const char *v)
{
	if (v != NULL)
		json_object_object_add(o, key, json_object_new_string(v));
}

static const char *
str_or(struct json_object *e, const char *key, const char *dflt)
{
	const char *s = schema_string(e, key);
	return s != NULL ? s : dflt;
}

static int
is_int(struct json_object *e, const char *key)
{
	return json_object_is_type(schema_child(e, key), json_type_int);
}

static const char *
basename_of(const char *path)
{
	const char *b = strrchr(path, '/');
	return b != NULL && b[1] != '\0' ? b + 1 : path;
}

/* device (required by the system classes): this host. */
static struct json_object *
ocsf_device(void)
{
	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "type_id", json_object_new_int(0)); /* Unknown */
	if (ocsf_hostname()[0] != '\0')
		add_str(d, "hostname", ocsf_hostname());
	return d;
}

/* A process object from a pid (and what else the line says about it). */
static struct json_object *
ocsf_process(struct json_object *e, const char *pid_key, const char *exe_key)
{
	struct json_object *p = json_object_new_object();
	int64_t pid = schema_int(e, pid_key, -1);

	if (is_int(e, pid_key) && pid > 0 && pid <= INT32_MAX)
		json_object_object_add(p, "pid", json_object_new_int((int)pid));
	const char *exe = exe_key != NULL ? schema_string(e, exe_key) : NULL;
	if (exe != NULL && exe[0] != '\0') {
		struct json_object *f = json_object_new_object();
		add_str(p, "name", basename_of(exe));
		add_str(f, "name", basename_of(exe));
		add_str(f, "path", exe);
		json_object_object_add(f, "type_id", json_object_new_int(1)); /* Regular File */
		json_object_object_add(p, "file", f);
	}
	return p;
}

static struct json_object *
ocsf_base(int class_uid, int activity, int severity, int status, struct json_object *e,
    const char *kind, const char *message)
{
	struct json_object *o = log_ocsf_record(class_uid, activity, severity, message, e);
	int64_t t = ocsf_time_ms(schema_string(e, "time"));
	struct json_object *meta = schema_child(o, "metadata");

	/* The event's own time, not the time of mapping (when the line has one). */
	if (t >= 0)
		json_object_object_add(o, "time", json_object_new_int64(t));
	json_object_object_add(o, "status_id", json_object_new_int(status));
	json_object_object_add(meta, "version", json_object_new_string(OCSF_SCHEMA_VERSION));
	add_str(meta, "log_name", kind);
	/* Everything of one operation correlates by its id. */
	if (schema_string(e, "operation_id") != NULL)
		add_str(meta, "correlation_uid", schema_string(e, "operation_id"));
	return o;
}

/* Network Activity: connect decisions (effects) and refused packets (faults). */
static struct json_object *
ocsf_network(struct json_object *e, const char *kind, struct json_object *cap)
{
	const char *k = str_or(e, "kind", "");
	const char *disp = schema_string(e, "disposition");
	int activity, refused;

	if (strcmp(kind, "fault") == 0) {
		/* A fault is a refused connection; an event a request to connect. */
		refused = strcmp(k, "fault") == 0 || disp == NULL || strcmp(disp, "deny") == 0;
		activity = refused ? 5 : 1; /* Refuse : Open */
	} else if (strcmp(k, "allow") == 0 || strcmp(k, "lease") == 0 ||
	    strcmp(k, "broker") == 0) {
		refused = 0;
		activity = 1; /* Open: the connection is allowed */
	} else if (strcmp(k, "deny") == 0 || strcmp(k, "NetworkBlocked") == 0) {
		refused = 1;
		activity = 5; /* Refuse */
	} else if (strcmp(k, "NetworkWouldBlock") == 0) {
		refused = 0;
		activity = 6; /* Traffic: monitor mode let it through */
	} else if (strcmp(k, "lease_expired") == 0 || strcmp(k, "lease_revoked") == 0) {
		refused = 0;
		activity = 2; /* Close */
	} else {
		refused = 0;
		activity = ACT_OTHER; /* generation changes and the like */
	}
	struct json_object *o = ocsf_base(OCSF_NETWORK_ACTIVITY, activity,
	    refused ? SEV_MEDIUM : SEV_INFO, refused ? STATUS_FAILURE : STATUS_SUCCESS, e, kind,
	    k[0] != '\0' ? k : "network");
	struct json_object *src = json_object_new_object(), *dst = json_object_new_object();
	struct json_object *ci = json_object_new_object();
	const char *dest = schema_string(cap, "destination");
	const char *proto = schema_string(cap, "protocol");
	int64_t port = schema_int(cap, "port", -1);
	unsigned char buf[16];

	if (ocsf_hostname()[0] != '\0')
		add_str(src, "hostname", ocsf_hostname());
	/* ip_t only for a single address; ranges and "untracked" stay in unmapped. */
	if (dest != NULL && strlen(dest) < 64 && (inet_pton(AF_INET, dest, buf) == 1 ||
	    inet_pton(AF_INET6, dest, buf) == 1))
		add_str(dst, "ip", dest);
	else if (dest != NULL)
		add_str(dst, "name", dest);
	if (is_int(cap, "port") && port >= 0 && port <= 65535)
		json_object_object_add(dst, "port", json_object_new_int((int)port));
	json_object_object_add(ci, "direction_id", json_object_new_int(2)); /* Outbound */
	if (proto != NULL) {
		int num = strcmp(proto, "tcp") == 0 ? 6 : strcmp(proto, "udp") == 0 ? 17 :
		    strcmp(proto, "icmp") == 0 ? 1 : strcmp(proto, "icmpv6") == 0 ? 58 : -1;
		if (num >= 0) {
			json_object_object_add(ci, "protocol_num", json_object_new_int(num));
			add_str(ci, "protocol_name", proto);
		}
	}
	json_object_object_add(o, "src_endpoint", src);
	json_object_object_add(o, "dst_endpoint", dst);
	json_object_object_add(o, "connection_info", ci);
	if (is_int(e, "packets") && schema_int(e, "packets", 0) >= 0 &&
	    schema_int(e, "packets", 0) <= INT32_MAX)
		json_object_object_add(o, "count", json_object_new_int(
		    (int)schema_int(e, "packets", 0)));
	if (disp != NULL)
		add_str(o, "status_detail", disp);
	else if (schema_string(e, "reason") != NULL)
		add_str(o, "status_detail", schema_string(e, "reason"));
	return o;
}

/* Process Activity: launches and execs, exits, kills, host seccomp refusals. */
static struct json_object *
ocsf_process_activity(struct json_object *e, const char *kind)
{
	const char *k = str_or(e, "kind", "");
	int host = strcmp(kind, "host") == 0;
	int killed = strcmp(k, "killed") == 0;
	int exited = strcmp(k, "exit") == 0;
	int activity = host ? ACT_OTHER : killed || exited ? 2 : 1; /* Terminate : Launch */
	struct json_object *o = ocsf_base(OCSF_PROCESS_ACTIVITY, activity,
	    host ? SEV_MEDIUM : killed ? SEV_LOW : SEV_INFO,
	    host ? STATUS_FAILURE : STATUS_SUCCESS, e, kind, k[0] != '\0' ? k : "process");
	struct json_object *proc = ocsf_process(e, "pid", "executable");
	struct json_object *actor = json_object_new_object(), *aproc;

	if (is_int(e, "ppid") && schema_int(e, "ppid", 0) > 0 &&
	    schema_int(e, "ppid", 0) <= INT32_MAX) {
		struct json_object *pp = json_object_new_object();
		json_object_object_add(pp, "pid", json_object_new_int((int)schema_int(e, "ppid", 0)));
		json_object_object_add(proc, "parent_process", pp);
	}
	if (killed) {
		/* The supervisor ended it (cgroup.kill). */
		aproc = json_object_new_object();
		add_str(aproc, "name", "gensee-boundaryd");
	} else if (exited || host) {
		aproc = ocsf_process(e, "pid", "executable");
	} else {
		/* A launch is the parent's act. */
		aproc = ocsf_process(e, "ppid", NULL);
	}
	json_object_object_add(actor, "process", aproc);
	struct json_object *xs = schema_child(e, "exit_status");
	if (exited && is_int(xs, "code") && schema_int(xs, "code", 0) >= INT32_MIN &&
	    schema_int(xs, "code", 0) <= INT32_MAX)
		json_object_object_add(o, "exit_code", json_object_new_int(
		    (int)schema_int(xs, "code", 0)));
	if (host && schema_string(e, "syscall") != NULL)
		add_str(o, "status_detail", schema_string(e, "syscall"));
	json_object_object_add(o, "process", proc);
	json_object_object_add(o, "actor", actor);
	json_object_object_add(o, "device", ocsf_device());
	return o;
}

/* File System Activity: one fanotify decision. */
static struct json_object *
ocsf_file(struct json_object *e, const char *kind)
{
	const char *decision = str_or(e, "decision", "");
	const char *ev = str_or(e, "event", "");
	const char *path = schema_string(e, "path");
	int deny = strcmp(decision, "allow") != 0; /* anything but an allow is a refusal */
	int activity = strcmp(ev, "open") == 0 || strcmp(ev, "open_exec") == 0 ? 14 : ACT_OTHER;
	struct json_object *o = ocsf_base(OCSF_FILE_ACTIVITY, activity, deny ? SEV_MEDIUM : SEV_INFO,
	    deny ? STATUS_FAILURE : STATUS_SUCCESS, e, kind, deny ? "file access denied" :
	    "file access allowed");
	struct json_object *f = json_object_new_object(), *actor = json_object_new_object();

	add_str(f, "name", path != NULL ? basename_of(path) : "(unknown)");
	add_str(f, "path", path);
	json_object_object_add(f, "type_id", json_object_new_int(0)); /* Unknown */
	json_object_object_add(actor, "process", ocsf_process(e, "pid", "executable"));
	json_object_object_add(o, "file", f);
	json_object_object_add(o, "actor", actor);
	json_object_object_add(o, "device", ocsf_device());
	if (schema_string(e, "reason") != NULL)
		add_str(o, "status_detail", schema_string(e, "reason"));
	return o;
}

/* Detection Finding: violations, and fanotify coverage lost / restored. */
static struct json_object *
ocsf_finding(struct json_object *e, const char *kind)
{
	const char *k = str_or(e, "kind", "violation");
	const char *op = str_or(e, "operation_id", "");
	int restored = strcmp(kind, "sensor") == 0 && strcmp(k, "coverage_restored") == 0;
	char uid[160], title[160];

	if (strcmp(kind, "sensor") == 0) {
		/* Loss and restore of one operation's coverage share one finding. */
		snprintf(uid, sizeof(uid), "%s:coverage:%s", op, str_or(e, "sensor", "sensor"));
		snprintf(title, sizeof(title), "%s sensor %s", str_or(e, "sensor", "sensor"), k);
	} else {
		snprintf(uid, sizeof(uid), "%s", str_or(e, "violation_id", op));
		snprintf(title, sizeof(title), "violation: %s", k);
	}
	struct json_object *o = ocsf_base(OCSF_DETECTION_FINDING, restored ? 3 : 1, /* Close : Create */
	    restored ? SEV_INFO : SEV_HIGH, restored ? FINDING_RESOLVED : FINDING_NEW, e, kind,
	    title);
	struct json_object *fi = json_object_new_object(), *types = json_object_new_array();

	add_str(fi, "uid", uid);
	add_str(fi, "title", title);
	json_object_array_add(types, json_object_new_string(strcmp(kind, "sensor") == 0 ?
	    "sensor_coverage" : "violation"));
	json_object_object_add(fi, "types", types);
	json_object_object_add(o, "finding_info", fi);
	json_object_object_add(o, "device", ocsf_device());
	if (schema_string(e, "disposition") != NULL)
		add_str(o, "status_detail", schema_string(e, "disposition"));
	return o;
}

struct json_object *
ocsf_map(const char *kind, struct json_object *e)
{
	if (kind == NULL || !json_object_is_type(e, json_type_object))
		return NULL;
	if (strcmp(kind, "effect") == 0)
		return ocsf_network(e, kind, e);
	if (strcmp(kind, "fault") == 0)
		return ocsf_network(e, kind, schema_child(e, "capability"));
	if (strcmp(kind, "lineage") == 0 || strcmp(kind, "host") == 0)
		return ocsf_process_activity(e, kind);
	if (strcmp(kind, "file") == 0)
		return ocsf_file(e, kind);
	if (strcmp(kind, "violation") == 0 || strcmp(kind, "sensor") == 0)
		return ocsf_finding(e, kind);
	return NULL; /* counter snapshots: no event of their own */
}

/*
 * The sink. Producers (the event loop) only serialize and queue; the one
 * writer thread does the write(2)s and the rotation, so a slow or full
 * disk costs dropped OCSF lines, counted, and never a stalled supervisor.
 */
static pthread_mutex_t sink_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sink_cv = PTHREAD_COND_INITIALIZER;
static pthread_t sink_thread;
static int sink_open, sink_running, sink_stop;
static int sink_dirfd = -1, sink_fd = -1;
static char sink_name[64], sink_old[72];
static uint64_t sink_max, sink_size, sink_emitted, sink_drops;
static char *sink_ring[OCSF_QUEUE_LINES];
static size_t sink_len[OCSF_QUEUE_LINES];
static size_t sink_head, sink_count, sink_bytes;

static int
sink_reopen(void)
{
	struct stat st;
	int fd = safefs_openat(sink_dirfd, sink_name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
	    0600);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -1;
	}
	if (sink_fd >= 0)
		close(sink_fd);
	sink_fd = fd;
	sink_size = (uint64_t)st.st_size;
	return 0;
}

/* Writer thread: one line per write(2); rotate before the cap is passed. */
static void *
sink_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&sink_mtx);
	for (;;) {
		while (sink_count == 0 && !sink_stop)
			pthread_cond_wait(&sink_cv, &sink_mtx);
		if (sink_count == 0)
			break;
		char *line = sink_ring[sink_head];
		size_t len = sink_len[sink_head];
		sink_ring[sink_head] = NULL;
		sink_head = (sink_head + 1) % OCSF_QUEUE_LINES;
		sink_count--;
		sink_bytes -= len;
		pthread_mutex_unlock(&sink_mtx);

		int ok = 1;
		if (sink_size + len > sink_max) {
			/* Keep one previous file: the disk use stays bounded by 2 * max. */
			if (renameat(sink_dirfd, sink_name, sink_dirfd, sink_old) != 0 ||
			    sink_reopen() != 0)
				ok = 0;
		}
		if (ok && sink_fd >= 0) {
			ssize_t n;
			do
				n = write(sink_fd, line, len);
			while (n < 0 && errno == EINTR);
			/* A short write leaves a cut line: count it as dropped. */
			ok = n == (ssize_t)len;
			if (n > 0)
				sink_size += (uint64_t)n;
		} else {
			ok = 0;
		}
		free(line);
		pthread_mutex_lock(&sink_mtx);
		if (ok)
			sink_emitted++;
		else
			sink_drops++;
	}
	pthread_mutex_unlock(&sink_mtx);
	return NULL;
}

int
ocsf_sink_open(int dirfd, const char *name, uint64_t max_bytes, char **cause)
{
	if (sink_open || strlen(name) >= sizeof(sink_name) - 1) {
		*cause = strdup("ocsf sink: already open or bad name");
		return -1;
	}
	snprintf(sink_name, sizeof(sink_name), "%s", name);
	snprintf(sink_old, sizeof(sink_old), "%s.1", name);
	sink_dirfd = dirfd;
	sink_max = max_bytes < OCSF_FILE_MIN ? OCSF_FILE_MIN : max_bytes;
	if (sink_reopen() != 0) {
		if (asprintf(cause, "%s: %s", name, strerror(errno)) < 0)
			*cause = NULL;
		return -1;
	}
	sink_stop = 0;
	sink_open = 1;
	return 0;
}

/*
 * Started separately, after the daemon confined itself: a thread created
 * earlier would keep the capabilities the main thread drops.
 */
int
ocsf_sink_start(char **cause)
{
	if (!sink_open || sink_running)
		return 0;
	if (pthread_create(&sink_thread, NULL, sink_main, NULL) != 0) {
		*cause = strdup("ocsf sink: cannot start the writer thread");
		return -1;
	}
	sink_running = 1;
	return 0;
}

int
ocsf_sink_active(void)
{
	return sink_open;
}

void
ocsf_emit(const char *kind, struct json_object *line)
{
	if (!sink_open)
		return;
	struct json_object *o = ocsf_map(kind, line);
	if (o == NULL)
		return;
	size_t len;
	const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	char *copy = s != NULL && len < OCSF_LINE_MAX ? malloc(len + 1) : NULL;

	pthread_mutex_lock(&sink_mtx);
	if (copy == NULL || sink_count == OCSF_QUEUE_LINES ||
	    sink_bytes + len + 1 > OCSF_QUEUE_BYTES) {
		/* Full queue, oversized record or no memory: drop it, counted. */
		sink_drops++;
		pthread_mutex_unlock(&sink_mtx);
		free(copy);
		json_object_put(o);
		return;
	}
	memcpy(copy, s, len);
	copy[len] = '\n';
	size_t slot = (sink_head + sink_count) % OCSF_QUEUE_LINES;
	sink_ring[slot] = copy;
	sink_len[slot] = len + 1;
	sink_count++;
	sink_bytes += len + 1;
	pthread_cond_signal(&sink_cv);
	pthread_mutex_unlock(&sink_mtx);
	json_object_put(o);
}

void
ocsf_sink_close(void)
{
	if (!sink_open)
		return;
	char *cause = NULL;
	if (!sink_running && ocsf_sink_start(&cause) != 0) {
		free(cause);
		return;
	}
	pthread_mutex_lock(&sink_mtx);
	sink_stop = 1;
	pthread_cond_signal(&sink_cv);
	pthread_mutex_unlock(&sink_mtx);
	pthread_join(sink_thread, NULL);
	sink_running = 0;
	sink_open = 0;
	if (sink_fd >= 0)
		close(sink_fd);
	sink_fd = -1;
}

uint64_t
ocsf_emitted(void)
{
	pthread_mutex_lock(&sink_mtx);
	uint64_t n = sink_emitted;
	pthread_mutex_unlock(&sink_mtx);
	return n;
}

uint64_t
ocsf_dropped(void)
{
	pthread_mutex_lock(&sink_mtx);
	uint64_t n = sink_drops;
	pthread_mutex_unlock(&sink_mtx);
	return n;
}
