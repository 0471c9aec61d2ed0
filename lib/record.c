/*
 * record.c: locked, validated, atomic record updates.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "frame.h"
#include "record.h"
#include "safefs.h"
#include "syncq.h"
#include "util.h"

static int
record_lock(int dirfd, const char *name, char **cause)
{
	char lname[256];
	int fd;

	snprintf(lname, sizeof(lname), "%s.lock", name);
	fd = safefs_openat(dirfd, lname, O_RDWR | O_CREAT, 0600);
	if (fd < 0) {
		util_cause(cause, "open %s: %s", lname, strerror(errno));
		return -1;
	}
	while (flock(fd, LOCK_EX) != 0) {
		if (errno == EINTR)
			continue;
		util_cause(cause, "lock %s: %s", lname, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int
record_load(int dirfd, const char *name, struct json_object **out, char **cause)
{
	char *buf;
	size_t len;
	int fd = safefs_openat(dirfd, name, O_RDONLY, 0);

	*out = NULL;
	if (fd < 0) {
		util_cause(cause, "open %s: %s", name, strerror(errno));
		return -1;
	}
	if (util_read_fd(fd, RECORD_MAX_BYTES, &buf, &len) != 0) {
		util_cause(cause, "read %s: %s", name, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	int r = frame_parse_payload((const uint8_t *)buf, len, out);
	free(buf);
	if (r != FRAME_OK) {
		util_cause(cause, "%s: %s", name, frame_status_code(r));
		return -1;
	}
	return 0;
}

/*
 * Write tmp, fsync, rename over name, fsync the directory. With the sync
 * thread running (syncq.c) the two fsyncs happen after the rename, off the
 * caller's path: readers see the new record as soon as rename returns.
 */
static int
record_replace(int dirfd, const char *name, struct json_object *rec, char **cause)
{
	char tname[256];
	size_t len;
	const char *s = json_object_to_json_string_length(rec,
	    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE,
	    &len);
	int fd, deferred = syncq_active();

	if (s == NULL || len > RECORD_MAX_BYTES) {
		util_cause(cause, "%s: record too large to write", name);
		return -1;
	}
	snprintf(tname, sizeof(tname), "%s.tmp", name);
	fd = safefs_openat(dirfd, tname, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		util_cause(cause, "open %s: %s", tname, strerror(errno));
		return -1;
	}
	if (util_write_all(fd, s, len) != 0 || util_write_all(fd, "\n", 1) != 0 ||
	    (!deferred && fsync(fd) != 0)) {
		util_cause(cause, "write %s: %s", tname, strerror(errno));
		close(fd);
		unlinkat(dirfd, tname, 0);
		return -1;
	}
	/* renameat does not follow symlinks in either name. */
	if (renameat(dirfd, tname, dirfd, name) != 0) {
		util_cause(cause, "rename %s: %s", tname, strerror(errno));
		close(fd);
		unlinkat(dirfd, tname, 0);
		return -1;
	}
	if (deferred) {
		int dfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
		if (dfd < 0 && fsync(dirfd) != 0) {
			util_cause(cause, "fsync dir: %s", strerror(errno));
			close(fd);
			return -1;
		}
		/* Failures after this point are counted in syncq's stats. */
		syncq_push(fd, dfd);
		return 0;
	}
	close(fd);
	if (fsync(dirfd) != 0) {
		util_cause(cause, "fsync dir: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int
record_create(int dirfd, const char *name, struct json_object *rec, char **cause)
{
	int lfd = record_lock(dirfd, name, cause);
	int r;

	if (lfd < 0)
		return -1;
	/* Any entry under the name, a symlink included, means "exists": never replace it. */
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) {
		close(lfd);
		util_cause(cause, "%s already exists", name);
		errno = EEXIST;
		return -1;
	}
	if (!json_object_object_get_ex(rec, "revision", NULL))
		json_object_object_add(rec, "revision", json_object_new_int64(1));
	r = record_replace(dirfd, name, rec, cause);
	close(lfd);
	return r;
}

int
record_update(int dirfd, const char *name, const char *expected_id,
    record_validate_fn validate, record_mutate_fn mutate, void *arg,
    struct json_object **result, char **cause)
{
	struct json_object *rec = NULL, *rev;
	int lfd, r;

	if (result != NULL)
		*result = NULL;
	lfd = record_lock(dirfd, name, cause);
	if (lfd < 0)
		return -1;
	if (record_load(dirfd, name, &rec, cause) != 0)
		goto fail;
	/* An invalid record is evidence of tampering or a bug: never overwrite it. */
	if (validate != NULL && validate(rec, expected_id, cause) != 0)
		goto fail;
	r = mutate(rec, arg, cause);
	if (r < 0)
		goto fail;
	if (r == 0) {
		int64_t n = 0;
		if (json_object_object_get_ex(rec, "revision", &rev))
			n = json_object_get_int64(rev);
		json_object_object_add(rec, "revision", json_object_new_int64(n + 1));
		if (record_replace(dirfd, name, rec, cause) != 0)
			goto fail;
	}
	close(lfd);
	if (result != NULL)
		*result = rec;
	else
		json_object_put(rec);
	return 0;
fail:
	close(lfd);
	json_object_put(rec);
	return -1;
}

int
record_read(int dirfd, const char *name, const char *expected_id,
    record_validate_fn validate, struct json_object **out, char **cause)
{
	struct json_object *rec;

	*out = NULL;
	if (record_load(dirfd, name, &rec, cause) != 0)
		return -1;
	if (validate != NULL && validate(rec, expected_id, cause) != 0) {
		json_object_put(rec);
		return -1;
	}
	*out = rec;
	return 0;
}

int
record_append_jsonl(int dirfd, const char *name, struct json_object *obj, char **cause)
{
	size_t len;
	const char *s = json_object_to_json_string_length(obj,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	char *line;
	int fd, r;

	if (s == NULL) {
		util_cause(cause, "cannot serialize evidence");
		return -1;
	}
	line = malloc(len + 1);
	if (line == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	memcpy(line, s, len);
	line[len] = '\n';
	fd = safefs_openat(dirfd, name, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (fd < 0) {
		util_cause(cause, "open %s: %s", name, strerror(errno));
		free(line);
		return -1;
	}
	/* One write(2) with O_APPEND: concurrent appenders never interleave a line. */
	ssize_t n = write(fd, line, len + 1);
	r = (n == (ssize_t)(len + 1)) ? 0 : -1;
	if (r != 0)
		util_cause(cause, "append %s: %s", name, n < 0 ? strerror(errno) : "short write");
	free(line);
	close(fd);
	return r;
}
