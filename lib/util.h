/*
 * util.h: small helpers every module uses (time, bounded strings, files).
 */
#ifndef GENSEE_UTIL_H
#define GENSEE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define nitems(a) (sizeof(a) / sizeof((a)[0]))

/* Format the wall clock as 2026-12-02T14:50:00.123Z. */
void util_now_rfc3339(char *buf, size_t len);
int64_t util_now_ms(void);
/*
 * Parse what util_now_rfc3339 writes (YYYY-MM-DDTHH:MM:SS[.fff]Z, UTC only)
 * into milliseconds since the epoch. Returns 0, or -1 for anything else.
 */
int util_parse_rfc3339(const char *s, int64_t *ms);
int64_t util_monotonic_ms(void);

/* Copy with truncation; returns strlen(src) like strlcpy(3). */
size_t util_strlcpy(char *dst, const char *src, size_t size);

/* Set *cause to a formatted, heap-allocated message (never NULL on return). */
void util_cause(char **cause, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Read at most max bytes of an already open fd into a NUL-terminated heap
 * buffer. Returns 0, or -1 with errno (EFBIG when the file is larger).
 */
int util_read_fd(int fd, size_t max, char **out, size_t *outlen);
/* Same for a path (opened O_RDONLY|O_CLOEXEC|O_NOFOLLOW). */
int util_read_path(const char *path, size_t max, char **out, size_t *outlen);
/* Write a whole buffer, retrying on EINTR and short writes. */
int util_write_all(int fd, const void *buf, size_t len);
/*
 * Block until fd (a pipe) gives one line: its text, without the newline, in
 * buf (len > 1). 0, or -1 when it ended (or failed) before a whole line.
 * What follows the newline in the same read is dropped.
 */
int util_read_line(int fd, char *buf, size_t len);

/*
 * Receive one netlink datagram without blocking, and only from the kernel
 * (port 0): a datagram from any other socket is refused with EPERM rather
 * than believed, a truncated one with EBADMSG. Returns its length or -1.
 */
ssize_t util_netlink_recv_kernel(int fd, void *buf, size_t len);

/* Parse a base-10 integer filling the whole string, within [min, max]. */
/* Whether absolute path is dir or below it, component-wise ("/a/bc" is not below "/a/b"). */
int util_path_below(const char *path, const char *dir);
int util_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

#endif
