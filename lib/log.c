/*
 * log.c: bounded, nonblocking, line-atomic logging.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "log.h"
#include "util.h"

static const char *log_progname = "gensee";
static int log_flags;
static int log_fd = 2;

/* The queue: a ring of heap lines guarded by one mutex. */
static char *log_ring[LOG_QUEUE_LINES];
static size_t log_ring_len[LOG_QUEUE_LINES];
static size_t log_head, log_count;
static uint64_t log_drops;
static int log_stop;
static int log_thread_running;
static pthread_t log_thread;
static pthread_mutex_t log_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t log_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t log_idle_cv = PTHREAD_COND_INITIALIZER;
static int log_writing;

static void
log_write_all(int fd, const char *buf, size_t len)
{
	/*
	 * One write(2) per line. A short write on a pipe of at most
	 * LOG_LINE_MAX bytes does not happen for blocking pipes (PIPE_BUF
	 * rules aside, the kernel writes the whole buffer or blocks); if it
	 * does, finishing the line is still better than losing its tail.
	 */
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		buf += n;
		len -= (size_t)n;
	}
}

static void *
log_writer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&log_mtx);
	for (;;) {
		while (log_count == 0 && !log_stop)
			pthread_cond_wait(&log_cv, &log_mtx);
		if (log_count == 0 && log_stop)
			break;
		char *line = log_ring[log_head];
		size_t len = log_ring_len[log_head];
		log_ring[log_head] = NULL;
		log_head = (log_head + 1) % LOG_QUEUE_LINES;
		log_count--;
		log_writing = 1;
		int fd = log_fd;
		pthread_mutex_unlock(&log_mtx);
		log_write_all(fd, line, len);
		free(line);
		pthread_mutex_lock(&log_mtx);
		log_writing = 0;
		if (log_count == 0)
			pthread_cond_broadcast(&log_idle_cv);
	}
	pthread_mutex_unlock(&log_mtx);
	return NULL;
}

/* Queue one complete line; drop it (and count) when the queue is full. */
static void
log_submit(const char *line, size_t len)
{
	if (!(log_flags & LOG_F_ASYNC) || !log_thread_running) {
		log_write_all(log_fd, line, len);
		return;
	}
	char *copy = malloc(len);
	pthread_mutex_lock(&log_mtx);
	if (copy == NULL || log_count == LOG_QUEUE_LINES) {
		log_drops++;
		pthread_mutex_unlock(&log_mtx);
		free(copy);
		return;
	}
	memcpy(copy, line, len);
	size_t slot = (log_head + log_count) % LOG_QUEUE_LINES;
	log_ring[slot] = copy;
	log_ring_len[slot] = len;
	log_count++;
	pthread_cond_signal(&log_cv);
	pthread_mutex_unlock(&log_mtx);
}

void
log_init(const char *progname, int flags)
{
	log_progname = progname;
	log_flags = flags;
	if ((flags & LOG_F_ASYNC) && !log_thread_running) {
		log_stop = 0;
		if (pthread_create(&log_thread, NULL, log_writer_main, NULL) == 0)
			log_thread_running = 1;
	}
}

void
log_set_fd(int fd)
{
	pthread_mutex_lock(&log_mtx);
	log_fd = fd;
	pthread_mutex_unlock(&log_mtx);
}

/* Drain the queue and stop the writer thread. */
void
log_shutdown(void)
{
	if (!log_thread_running)
		return;
	pthread_mutex_lock(&log_mtx);
	log_stop = 1;
	pthread_cond_signal(&log_cv);
	pthread_mutex_unlock(&log_mtx);
	pthread_join(log_thread, NULL);
	log_thread_running = 0;
}

uint64_t
log_dropped(void)
{
	pthread_mutex_lock(&log_mtx);
	uint64_t d = log_drops;
	pthread_mutex_unlock(&log_mtx);
	return d;
}

static void __attribute__((format(printf, 4, 0)))
log_vformat(const char *level, int with_errno, int saved_errno, const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];
	char ts[40];
	size_t off;

	util_now_rfc3339(ts, sizeof(ts));
	int n = snprintf(line, sizeof(line), "%s %s[%d]: %s: ", ts, log_progname,
	    (int)getpid(), level);
	off = n < 0 ? 0 : (size_t)n;
	if (off < sizeof(line)) {
		n = vsnprintf(line + off, sizeof(line) - off, fmt, ap);
		if (n > 0)
			off += (size_t)n;
	}
	if (with_errno && off < sizeof(line)) {
		n = snprintf(line + off, sizeof(line) - off, ": %s", strerror(saved_errno));
		if (n > 0)
			off += (size_t)n;
	}
	/* Truncate to one line that always ends in '\n'. */
	if (off > sizeof(line) - 2)
		off = sizeof(line) - 2;
	for (size_t i = 0; i < off; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[off++] = '\n';
	log_submit(line, off);
}

#define LOG_BODY(level, with_errno)                                   \
	do {                                                          \
		int saved_errno_ = errno;                             \
		va_list ap_;                                          \
		va_start(ap_, fmt);                                   \
		log_vformat(level, with_errno, saved_errno_, fmt, ap_); \
		va_end(ap_);                                          \
		errno = saved_errno_;                                 \
	} while (0)

void
log_warn(const char *fmt, ...)
{
	LOG_BODY("warn", 1);
}

void
log_warnx(const char *fmt, ...)
{
	LOG_BODY("warn", 0);
}

void
log_info(const char *fmt, ...)
{
	LOG_BODY("info", 0);
}

void
log_debug(const char *fmt, ...)
{
	if (!(log_flags & LOG_F_DEBUG))
		return;
	LOG_BODY("debug", 0);
}

void
fatal(const char *fmt, ...)
{
	LOG_BODY("fatal", 1);
	log_shutdown();
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	LOG_BODY("fatal", 0);
	log_shutdown();
	exit(1);
}

struct json_object *
log_ocsf_record(int class_uid, int activity_id, int severity_id, const char *message,
    struct json_object *unmapped)
{
	struct json_object *o = json_object_new_object();
	struct json_object *meta = json_object_new_object();
	struct json_object *product = json_object_new_object();

	json_object_object_add(o, "time", json_object_new_int64(util_now_ms()));
	json_object_object_add(o, "class_uid", json_object_new_int(class_uid));
	json_object_object_add(o, "category_uid", json_object_new_int(class_uid / 1000));
	json_object_object_add(o, "activity_id", json_object_new_int(activity_id));
	json_object_object_add(o, "type_uid",
	    json_object_new_int64((int64_t)class_uid * 100 + activity_id));
	json_object_object_add(o, "severity_id", json_object_new_int(severity_id));
	json_object_object_add(o, "message", json_object_new_string(message));
	json_object_object_add(product, "name", json_object_new_string("gensee"));
	json_object_object_add(product, "vendor_name", json_object_new_string("gensee"));
	json_object_object_add(meta, "product", product);
	json_object_object_add(meta, "version", json_object_new_string("1.1.0"));
	json_object_object_add(o, "metadata", meta);
	if (unmapped != NULL)
		json_object_object_add(o, "unmapped", json_object_get(unmapped));
	return o;
}

void
log_ocsf(int class_uid, int activity_id, int severity_id, const char *message,
    struct json_object *unmapped)
{
	if (!(log_flags & LOG_F_OCSF))
		return;
	struct json_object *o = log_ocsf_record(class_uid, activity_id, severity_id, message,
	    unmapped);
	size_t len;
	const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
	char line[LOG_LINE_MAX];
	if (len > sizeof(line) - 1) {
		/* A cut record would be invalid JSON for the SIEM: drop and count it. */
		pthread_mutex_lock(&log_mtx);
		log_drops++;
		pthread_mutex_unlock(&log_mtx);
		json_object_put(o);
		return;
	}
	memcpy(line, s, len);
	line[len++] = '\n';
	log_submit(line, len);
	json_object_put(o);
}
