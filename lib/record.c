/*
 * record.c: locked, validated, atomic record updates.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "frame.h"
#include "record.h"
#include "safefs.h"
#include "syncq.h"
#include "util.h"

/*
 * What the disk has not taken yet (see record.h). A record is named by its
 * directory's (st_dev, st_ino) and its name, so every fd of the directory
 * finds it; each entry holds a dup of a directory fd to write through
 * later, even after its owner closed its own.
 */
struct pending_rec {
	TAILQ_ENTRY(pending_rec) pr_entry;
	int pr_dirfd;
	dev_t pr_dev;
	ino_t pr_ino;
	char pr_name[128];
	struct json_object *pr_rec;
};
TAILQ_HEAD(pending_rec_list, pending_rec);

struct pending_line {
	TAILQ_ENTRY(pending_line) pl_entry;
	int pl_dirfd;
	dev_t pl_dev;
	ino_t pl_ino;
	char pl_name[128];
	char *pl_line;
	size_t pl_len;
};
TAILQ_HEAD(pending_line_list, pending_line);

static struct pending_rec_list pending_recs = TAILQ_HEAD_INITIALIZER(pending_recs);
static struct pending_line_list pending_lines = TAILQ_HEAD_INITIALIZER(pending_lines);
static struct record_disk disk;
static int fault_errno;

int
record_disk_errno(int err)
{
	return err == ENOSPC || err == EDQUOT || err == EROFS || err == EIO;
}

const char *
record_disk_state_name(enum record_disk_state s)
{
	switch (s) {
	case RECORD_DISK_OK:
		return "ok";
	case RECORD_DISK_FULL:
		return "full";
	case RECORD_DISK_READ_ONLY:
		return "read_only";
	case RECORD_DISK_ERROR:
		return "error";
	}
	return "error";
}

static void
disk_failed(int err)
{
	disk.rd_failures++;
	disk.rd_errno = err;
	if (disk.rd_state == RECORD_DISK_OK)
		util_now_rfc3339(disk.rd_since, sizeof(disk.rd_since));
	disk.rd_state = err == ENOSPC || err == EDQUOT ? RECORD_DISK_FULL :
	    err == EROFS ? RECORD_DISK_READ_ONLY : RECORD_DISK_ERROR;
}

void
record_disk_failed(int err)
{
	if (record_disk_errno(err))
		disk_failed(err);
}

void
record_disk_status(struct record_disk *out)
{
	struct pending_rec *pr;

	disk.rd_pending_records = 0;
	TAILQ_FOREACH(pr, &pending_recs, pr_entry)
		disk.rd_pending_records++;
	*out = disk;
}

uint64_t
record_disk_failures(void)
{
	return disk.rd_failures;
}

void
record_fault_inject(int err)
{
	fault_errno = err;
}

static struct pending_rec *
pending_find(int dirfd, const char *name)
{
	struct pending_rec *pr;
	struct stat st;

	if (TAILQ_EMPTY(&pending_recs) || fstat(dirfd, &st) != 0)
		return NULL;
	TAILQ_FOREACH(pr, &pending_recs, pr_entry)
		if (pr->pr_dev == st.st_dev && pr->pr_ino == st.st_ino &&
		    strcmp(pr->pr_name, name) == 0)
			return pr;
	return NULL;
}

static void
pending_rec_free(struct pending_rec *pr)
{
	TAILQ_REMOVE(&pending_recs, pr, pr_entry);
	json_object_put(pr->pr_rec);
	close(pr->pr_dirfd);
	free(pr);
}

/* Keep rec (a reference is taken) as the newest version of dirfd/name. */
static int
pending_store(int dirfd, const char *name, struct pending_rec *pr, struct json_object *rec)
{
	struct stat st;

	if (pr == NULL) {
		if (strlen(name) >= sizeof(pr->pr_name) || fstat(dirfd, &st) != 0 ||
		    (pr = calloc(1, sizeof(*pr))) == NULL)
			return -1;
		if ((pr->pr_dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0)) < 0) {
			free(pr);
			return -1;
		}
		pr->pr_dev = st.st_dev;
		pr->pr_ino = st.st_ino;
		util_strlcpy(pr->pr_name, name, sizeof(pr->pr_name));
		TAILQ_INSERT_TAIL(&pending_recs, pr, pr_entry);
	}
	json_object_put(pr->pr_rec);
	pr->pr_rec = json_object_get(rec);
	return 0;
}

static void
cause_clear(char **cause)
{
	if (cause != NULL) {
		free(*cause);
		*cause = NULL;
	}
}

static struct json_object *
record_copy(struct json_object *rec)
{
	struct json_object *dst = NULL;
	if (json_object_deep_copy(rec, &dst, NULL) != 0)
		return NULL;
	return dst;
}

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
 * caller's path: readers see the new record as soon as rename returns, and
 * a reader that opened the previous version keeps reading that whole
 * version (every version is its own inode, never rewritten).
 *
 * Two costs are kept off the path where the disk makes them large (ext4
 * without a journal, mounted `discard`, as on this project's test VMs):
 * - a new inode: the allocator skips every recently freed inode, hundreds
 *   of microseconds while files are being deleted. A writer that makes
 *   records ahead (boundaryd's prepared cells) leaves NAME.tmp and
 *   NAME.spare0.. empty; one of them is used before a new one is made.
 * - freeing the replaced inode, which trims its block at once: the
 *   writer keeps it open across the rename and the sync thread closes it,
 *   so it is freed there.
 */
#define RECORD_SPARES 3

static int
record_open_tmp(int dirfd, const char *name, const char *tname)
{
	struct stat st;
	char sname[256];
	int fd = safefs_openat(dirfd, tname, O_WRONLY, 0);

	/*
	 * Only our own single-link regular file is emptied and written; a
	 * hard link planted as NAME.tmp is unlinked, its target untouched.
	 */
	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    (st.st_size > 0 && ftruncate(fd, 0) != 0))) {
		close(fd);
		unlinkat(dirfd, tname, 0);
		fd = -1;
		errno = ENOENT;
	}
	for (int i = 0; fd < 0 && errno == ENOENT && i < RECORD_SPARES; i++) {
		snprintf(sname, sizeof(sname), "%s.spare%d", name, i);
		if (renameat2(dirfd, sname, dirfd, tname, RENAME_NOREPLACE) == 0)
			return record_open_tmp(dirfd, name, tname);
		errno = ENOENT;
	}
	if (fd < 0 && errno == ENOENT)
		fd = safefs_openat(dirfd, tname, O_WRONLY | O_CREAT | O_EXCL, 0600);
	return fd;
}

static int
record_replace(int dirfd, const char *name, struct json_object *rec, char **cause)
{
	char tname[256];
	size_t len;
	const char *s = json_object_to_json_string_length(rec,
	    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE,
	    &len);
	int fd, e, deferred = syncq_active();

	if (s == NULL || len > RECORD_MAX_BYTES) {
		util_cause(cause, "%s: record too large to write", name);
		errno = EFBIG;
		return -1;
	}
	if (fault_errno != 0) {
		util_cause(cause, "write %s: %s (injected)", name, strerror(fault_errno));
		errno = fault_errno;
		return -1;
	}
	snprintf(tname, sizeof(tname), "%s.tmp", name);
	if ((fd = record_open_tmp(dirfd, name, tname)) < 0) {
		e = errno;
		util_cause(cause, "open %s: %s", tname, strerror(e));
		errno = e;
		return -1;
	}
	if (util_write_all(fd, s, len) != 0 || util_write_all(fd, "\n", 1) != 0 ||
	    (!deferred && fsync(fd) != 0)) {
		e = errno;
		util_cause(cause, "write %s: %s", tname, strerror(e));
		close(fd);
		unlinkat(dirfd, tname, 0);
		errno = e;
		return -1;
	}
	/* The version being replaced, held so that its inode is freed later. */
	int old = deferred ? safefs_openat(dirfd, name, O_RDONLY, 0) : -1;
	/* renameat does not follow symlinks in either name. */
	if (renameat(dirfd, tname, dirfd, name) != 0) {
		e = errno;
		util_cause(cause, "rename %s: %s", tname, strerror(e));
		close(fd);
		if (old >= 0)
			close(old);
		unlinkat(dirfd, tname, 0);
		errno = e;
		return -1;
	}
	if (deferred) {
		int dfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
		if (dfd < 0 && fsync(dirfd) != 0) {
			e = errno;
			util_cause(cause, "fsync dir: %s", strerror(e));
			close(fd);
			if (old >= 0)
				close(old);
			errno = e;
			return -1;
		}
		/* Failures after this point are counted in syncq's stats. */
		syncq_push_release(fd, dfd, old);
		return 0;
	}
	close(fd);
	if (fsync(dirfd) != 0) {
		e = errno;
		util_cause(cause, "fsync dir: %s", strerror(e));
		errno = e;
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
	if (r != 0) {
		int e = errno;
		/* A record that was never written is not kept: its creator refuses instead. */
		if (record_disk_errno(e))
			disk_failed(e);
		errno = e;
	}
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

	struct pending_rec *pr;
	int lock_err = 0;

	if (result != NULL)
		*result = NULL;
	lfd = record_lock(dirfd, name, cause);
	if (lfd < 0) {
		/*
		 * A read-only disk refuses even the lock file's open. boundaryd
		 * is the records' only writer (one instance per state root), so
		 * the change is made in memory and written once the disk is back.
		 */
		if (!record_disk_errno(errno))
			return -1;
		lock_err = errno;
		cause_clear(cause);
	}
	/* A version the disk has not taken yet is newer than the disk's. */
	pr = pending_find(dirfd, name);
	if (pr != NULL) {
		if ((rec = record_copy(pr->pr_rec)) == NULL) {
			util_cause(cause, "%s: out of memory", name);
			goto fail;
		}
	} else if (record_load(dirfd, name, &rec, cause) != 0) {
		goto fail;
	}
	/* An invalid record is evidence of tampering or a bug: never overwrite it. */
	if (validate != NULL && validate(rec, expected_id, cause) != 0)
		goto fail;
	r = mutate(rec, arg, cause);
	if (r < 0)
		goto fail;
	if (r == 0) {
		int64_t n = 0;
		int e = lock_err;
		if (json_object_object_get_ex(rec, "revision", &rev))
			n = json_object_get_int64(rev);
		json_object_object_add(rec, "revision", json_object_new_int64(n + 1));
		if (e == 0 && record_replace(dirfd, name, rec, cause) != 0)
			e = errno;
		if (e != 0) {
			/* Only the disk's refusal is survivable; anything else fails the update. */
			if (!record_disk_errno(e))
				goto fail;
			disk_failed(e);
			if (pending_store(dirfd, name, pr, rec) != 0) {
				util_cause(cause, "%s: %s, and cannot be kept in memory", name,
				    strerror(e));
				goto fail;
			}
			cause_clear(cause);
		} else if (pr != NULL) {
			pending_rec_free(pr);
		}
	}
	if (lfd >= 0)
		close(lfd);
	if (result != NULL)
		*result = rec;
	else
		json_object_put(rec);
	return 0;
fail:
	if (lfd >= 0)
		close(lfd);
	json_object_put(rec);
	return -1;
}

int
record_read(int dirfd, const char *name, const char *expected_id,
    record_validate_fn validate, struct json_object **out, char **cause)
{
	struct json_object *rec;

	struct pending_rec *pr = pending_find(dirfd, name);

	*out = NULL;
	if (pr != NULL) {
		if ((rec = record_copy(pr->pr_rec)) == NULL) {
			util_cause(cause, "%s: out of memory", name);
			return -1;
		}
	} else if (record_load(dirfd, name, &rec, cause) != 0) {
		return -1;
	}
	if (validate != NULL && validate(rec, expected_id, cause) != 0) {
		json_object_put(rec);
		return -1;
	}
	*out = rec;
	return 0;
}

/* Append one whole line; on a short write take it back, so no torn line stays. */
static int
append_line(int dirfd, const char *name, const char *line, size_t len)
{
	struct stat st;
	int fd, e;

	if (fault_errno != 0) {
		errno = fault_errno;
		return -1;
	}
	fd = safefs_openat(dirfd, name, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	/* One write(2) with O_APPEND: concurrent appenders never interleave a line. */
	ssize_t n = write(fd, line, len);
	if (n == (ssize_t)len) {
		close(fd);
		return 0;
	}
	e = n < 0 ? errno : ENOSPC;
	if (n > 0 && ftruncate(fd, st.st_size) != 0)
		e = EIO;
	close(fd);
	errno = e;
	return -1;
}

static int
pending_line_add(int dirfd, const char *name, char *line, size_t len)
{
	struct pending_line *pl;
	struct stat st;

	if (disk.rd_pending_bytes + len > RECORD_PENDING_LINES_MAX ||
	    strlen(name) >= sizeof(pl->pl_name) || fstat(dirfd, &st) != 0 ||
	    (pl = calloc(1, sizeof(*pl))) == NULL) {
		disk.rd_dropped_lines++;
		return -1;
	}
	if ((pl->pl_dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0)) < 0) {
		free(pl);
		disk.rd_dropped_lines++;
		return -1;
	}
	pl->pl_dev = st.st_dev;
	pl->pl_ino = st.st_ino;
	util_strlcpy(pl->pl_name, name, sizeof(pl->pl_name));
	pl->pl_line = line;
	pl->pl_len = len;
	TAILQ_INSERT_TAIL(&pending_lines, pl, pl_entry);
	disk.rd_pending_lines++;
	disk.rd_pending_bytes += len;
	return 0;
}

static void
pending_line_free(struct pending_line *pl)
{
	TAILQ_REMOVE(&pending_lines, pl, pl_entry);
	disk.rd_pending_lines--;
	disk.rd_pending_bytes -= pl->pl_len;
	close(pl->pl_dirfd);
	free(pl->pl_line);
	free(pl);
}

int
record_append_jsonl(int dirfd, const char *name, struct json_object *obj, char **cause)
{
	size_t len;
	const char *s = json_object_to_json_string_length(obj,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	char *line;
	int e;

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
	/* While lines wait, new ones queue behind them: evidence keeps its order. */
	if (TAILQ_EMPTY(&pending_lines)) {
		if (append_line(dirfd, name, line, len + 1) == 0) {
			free(line);
			return 0;
		}
		e = errno;
		if (!record_disk_errno(e)) {
			util_cause(cause, "append %s: %s", name, strerror(e));
			free(line);
			return -1;
		}
		disk_failed(e);
	}
	if (pending_line_add(dirfd, name, line, len + 1) != 0) {
		util_cause(cause, "append %s: the disk does not take it and the queue is full",
		    name);
		free(line);
		return -1;
	}
	return 0;
}

/* Write (dirfd's) probe file: 0 when the disk takes a small fsync'd write. */
static int
record_probe(int dirfd)
{
	static const char probe[] = ".disk-probe";
	int fd, r = 0;

	if (fault_errno != 0) {
		errno = fault_errno;
		return -1;
	}
	fd = safefs_openat(dirfd, probe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	if (util_write_all(fd, "probe\n", 6) != 0 || fsync(fd) != 0)
		r = -1;
	int e = errno;
	close(fd);
	if (unlinkat(dirfd, probe, 0) != 0 && r == 0)
		r = -1, e = errno;
	errno = e;
	return r;
}

int
record_flush(int probe_dirfd)
{
	struct pending_rec *pr, *prn;
	struct pending_line *pl;
	char *cause = NULL;
	int ok = 1;

	for (pr = TAILQ_FIRST(&pending_recs); pr != NULL; pr = prn) {
		prn = TAILQ_NEXT(pr, pr_entry);
		int lfd = record_lock(pr->pr_dirfd, pr->pr_name, &cause);
		int e = lfd < 0 ? errno : 0;
		if (lfd >= 0 && record_replace(pr->pr_dirfd, pr->pr_name, pr->pr_rec, &cause) != 0)
			e = errno;
		if (lfd >= 0)
			close(lfd);
		free(cause);
		cause = NULL;
		if (e == 0) {
			pending_rec_free(pr);
		} else {
			ok = 0;
			if (record_disk_errno(e))
				disk_failed(e);
		}
	}
	while ((pl = TAILQ_FIRST(&pending_lines)) != NULL) {
		if (append_line(pl->pl_dirfd, pl->pl_name, pl->pl_line, pl->pl_len) != 0) {
			ok = 0;
			if (record_disk_errno(errno))
				disk_failed(errno);
			break;
		}
		pending_line_free(pl);
	}
	if (ok && disk.rd_state != RECORD_DISK_OK && probe_dirfd >= 0 &&
	    record_probe(probe_dirfd) != 0) {
		ok = 0;
		if (record_disk_errno(errno))
			disk_failed(errno);
		else
			disk_failed(EIO);
	}
	if (!ok)
		return -1;
	disk.rd_state = RECORD_DISK_OK;
	disk.rd_errno = 0;
	disk.rd_since[0] = '\0';
	return 0;
}

void
record_forget(int dirfd, const char *name)
{
	struct pending_rec *pr, *prn;
	struct pending_line *pl, *pln;
	struct stat st;

	if (fstat(dirfd, &st) != 0)
		return;
	for (pr = TAILQ_FIRST(&pending_recs); pr != NULL; pr = prn) {
		prn = TAILQ_NEXT(pr, pr_entry);
		if (pr->pr_dev == st.st_dev && pr->pr_ino == st.st_ino &&
		    (name == NULL || strcmp(pr->pr_name, name) == 0))
			pending_rec_free(pr);
	}
	for (pl = TAILQ_FIRST(&pending_lines); pl != NULL; pl = pln) {
		pln = TAILQ_NEXT(pl, pl_entry);
		if (pl->pl_dev == st.st_dev && pl->pl_ino == st.st_ino &&
		    (name == NULL || strcmp(pl->pl_name, name) == 0))
			pending_line_free(pl);
	}
}

int
record_is_pending(int dirfd, const char *name)
{
	return pending_find(dirfd, name) != NULL;
}
