/*
 * util.c: small helpers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netlink.h>

#include "util.h"

void
util_now_rfc3339(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
	    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	    ts.tv_nsec / 1000000);
}

int64_t
util_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
util_monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

size_t
util_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);
	if (size > 0) {
		size_t c = n < size - 1 ? n : size - 1;
		memcpy(dst, src, c);
		dst[c] = '\0';
	}
	return n;
}

void
util_cause(char **cause, const char *fmt, ...)
{
	va_list ap;
	if (cause == NULL)
		return;
	free(*cause);
	*cause = NULL;
	va_start(ap, fmt);
	if (vasprintf(cause, fmt, ap) < 0)
		*cause = NULL;
	va_end(ap);
	if (*cause == NULL)
		*cause = strdup("out of memory");
}

int
util_read_fd(int fd, size_t max, char **out, size_t *outlen)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap + 1);

	if (buf == NULL)
		return -1;
	for (;;) {
		if (len == cap) {
			if (cap >= max + 1) {
				free(buf);
				errno = EFBIG;
				return -1;
			}
			cap *= 2;
			if (cap > max + 1)
				cap = max + 1;
			char *nb = realloc(buf, cap + 1);
			if (nb == NULL) {
				free(buf);
				return -1;
			}
			buf = nb;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			free(buf);
			errno = e;
			return -1;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > max) {
		free(buf);
		errno = EFBIG;
		return -1;
	}
	buf[len] = '\0';
	*out = buf;
	if (outlen != NULL)
		*outlen = len;
	return 0;
}

int
util_read_path(const char *path, size_t max, char **out, size_t *outlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	int r = util_read_fd(fd, max, out, outlen);
	int e = errno;
	close(fd);
	errno = e;
	return r;
}

int
util_read_line(int fd, char *buf, size_t len)
{
	size_t got = 0;
	char *nl;

	while (got < len - 1) {
		ssize_t n = read(fd, buf + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (memchr(buf, '\n', got) != NULL)
			break;
	}
	buf[got] = '\0';
	if ((nl = strchr(buf, '\n')) == NULL)
		return -1;
	*nl = '\0';
	return 0;
}

int
util_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
util_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	if (s == NULL || *s == '\0')
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

ssize_t
util_netlink_recv_kernel(int fd, void *buf, size_t len)
{
	struct sockaddr_nl sa;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg;
	ssize_t r;

	memset(&msg, 0, sizeof(msg));
	memset(&sa, 0, sizeof(sa));
	msg.msg_name = &sa;
	msg.msg_namelen = sizeof(sa);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	do
		r = recvmsg(fd, &msg, MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -1;
	if (msg.msg_flags & MSG_TRUNC) {
		errno = EBADMSG;
		return -1;
	}
	if (msg.msg_namelen < sizeof(sa) || sa.nl_family != AF_NETLINK || sa.nl_pid != 0) {
		errno = EPERM;
		return -1;
	}
	return r;
}

/* Whether path is dir or below it; a trailing slash of dir is ignored. */
int
util_path_below(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 1 && dir[0] == '/')
		return path[0] == '/';
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int
util_parse_rfc3339(const char *s, int64_t *ms)
{
	struct tm tm;
	const char *end;
	int64_t frac = 0;

	if (s == NULL)
		return -1;
	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (end == NULL || strlen(s) != 19 + strlen(end))
		return -1;
	if (*end == '.') {
		int digits = 0;
		for (end++; *end >= '0' && *end <= '9'; end++, digits++)
			if (digits < 3)
				frac = frac * 10 + (*end - '0');
		if (digits == 0)
			return -1;
		for (; digits < 3; digits++)
			frac *= 10;
	}
	if (strcmp(end, "Z") != 0)
		return -1;
	time_t t = timegm(&tm);
	if (t == (time_t)-1)
		return -1;
	*ms = (int64_t)t * 1000 + frac;
	return 0;
}
