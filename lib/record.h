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

#endif
