/*
 * log.h: the one logging module.
 *
 * Diagnostics (and, when enabled, OCSF-JSON records) go through a bounded,
 * nonblocking writer: a 1,024-line queue drained by one writer thread. A full
 * queue drops the new line and counts it instead of stalling the event loop
 * on a slow stderr. Every line reaches the fd in one write(2), so concurrent
 * producers never interleave inside a line.
 */
#ifndef GENSEE_LOG_H
#define GENSEE_LOG_H

#include <stdint.h>
#include <stdarg.h>

struct json_object;

#define LOG_QUEUE_LINES 1024
#define LOG_LINE_MAX 4096

#define LOG_F_ASYNC 0x01 /* queue + writer thread (daemons) */
#define LOG_F_DEBUG 0x02 /* emit log_debug lines */
#define LOG_F_OCSF 0x04  /* also emit OCSF-JSON records */

void log_init(const char *progname, int flags);
void log_set_fd(int fd);
void log_shutdown(void);
uint64_t log_dropped(void);

void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/*
 * An OCSF-shaped event (class and activity ids from the OCSF schema) with
 * free-form detail in "unmapped". Emitted only when LOG_F_OCSF is set.
 */
void log_ocsf(int class_uid, int activity_id, int severity_id, const char *message,
    struct json_object *unmapped);

/* Build the OCSF record without emitting it (used by evidence writers). */
struct json_object *log_ocsf_record(int class_uid, int activity_id, int severity_id,
    const char *message, struct json_object *unmapped);

#endif
