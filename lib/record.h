/*
 * record.h: the shared-update protocol for JSON records.
 *
 * Several components (boundaryd's supervisor, the network supervisor, the
 * launcher's end report) update the same record. Each update:
 *   1. takes an owner-only advisory lock (NAME.lock, flock LOCK_EX);
 *   2. reloads the newest NAME from disk;
 *   3. validates its schema and identity (the caller's validate function);
 *   4. lets the caller change one portion (the mutate function, which may
 *      refuse a stale change such as a lifecycle regression);
 *   5. writes NAME.tmp, fsyncs it, renames it over NAME and fsyncs the dir.
 * Every file is opened beneath the record's directory fd without following
 * symlinks. A writer working from an old copy therefore cannot overwrite a
 * newer state: it only ever changes the freshly loaded one.
 */
#ifndef GENSEE_RECORD_H
#define GENSEE_RECORD_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

#define RECORD_MAX_BYTES (8u * 1024u * 1024u)

typedef int (*record_validate_fn)(struct json_object *rec, const char *expected_id,
    char **cause);
/* Return 0 to write the changed record, 1 to leave it unchanged, -1 to refuse. */
typedef int (*record_mutate_fn)(struct json_object *rec, void *arg, char **cause);

/* Create NAME beneath dirfd; fails with EEXIST if it is already there. */
int record_create(int dirfd, const char *name, struct json_object *rec, char **cause);

/*
 * The locked update described above. The record's integer "revision" is
 * incremented on every write. On success *result (if not NULL) receives the
 * record as written.
 */
int record_update(int dirfd, const char *name, const char *expected_id,
    record_validate_fn validate, record_mutate_fn mutate, void *arg,
    struct json_object **result, char **cause);

/* Read and validate without locking (rename makes every read whole). */
int record_read(int dirfd, const char *name, const char *expected_id,
    record_validate_fn validate, struct json_object **out, char **cause);

/* Append one line (obj + '\n') to a JSONL file beneath dirfd in one write. */
int record_append_jsonl(int dirfd, const char *name, struct json_object *obj, char **cause);

/*
 * When the disk fails. A write that fails because the file system is full
 * (ENOSPC, EDQUOT), read-only (EROFS) or broken (EIO) does not lose the
 * truth: record_update() keeps the changed record in memory as the
 * record's pending version (later updates and record_read() use it, so
 * replies stay true) and record_append_jsonl() queues the line (in order,
 * at most RECORD_PENDING_LINES_MAX bytes in all; beyond that lines are
 * counted as dropped). Both then return success. record_flush() writes
 * what is pending, oldest first, once the disk takes writes again. The
 * store is process-wide and not thread-safe (boundaryd's loop owns it);
 * what is pending when the process dies is lost, which is why callers that
 * must not proceed on unwritten evidence check record_disk_failures().
 */
#define RECORD_PENDING_LINES_MAX (8u * 1024u * 1024u)

enum record_disk_state {
	RECORD_DISK_OK,
	RECORD_DISK_FULL,	/* ENOSPC, EDQUOT */
	RECORD_DISK_READ_ONLY,	/* EROFS */
	RECORD_DISK_ERROR,	/* EIO and other write errors */
};

struct record_disk {
	enum record_disk_state rd_state;
	int rd_errno;			/* of the last failed write, 0 if none */
	char rd_since[40];		/* RFC 3339: when it stopped being ok ("" if ok) */
	size_t rd_pending_records;	/* records whose newest version is only in memory */
	size_t rd_pending_lines;	/* evidence lines queued */
	size_t rd_pending_bytes;	/* ... and their size */
	uint64_t rd_dropped_lines;	/* evidence lines lost: the queue was full */
	uint64_t rd_failures;		/* writes that failed for disk reasons, ever */
};

/* Is err a disk condition (full, read-only, I/O error) rather than a refusal? */
int record_disk_errno(int err);
void record_disk_status(struct record_disk *out);
const char *record_disk_state_name(enum record_disk_state s);
/* A write outside this module failed with err (a disk errno): note it in the state. */
void record_disk_failed(int err);
/* Writes that failed for disk reasons since start (monotonic). */
uint64_t record_disk_failures(void);
/* Is a newer version of dirfd/name than the disk's held in memory? */
int record_is_pending(int dirfd, const char *name);
/*
 * Write everything pending. probe_dirfd (or -1): also write, fsync and
 * remove a small probe file there, so a disk that came back is seen even
 * with nothing pending. Returns 0 when nothing is pending any more and the
 * disk state is ok again.
 */
int record_flush(int probe_dirfd);
/* Forget what is pending for dirfd/name (its directory is being removed). */
void record_forget(int dirfd, const char *name);
/*
 * Tests only: make every later write fail with err (0: stop). Nothing in a
 * daemon calls it, so it is inert outside the unit tests.
 */
void record_fault_inject(int err);

#endif
