/*
 * ocsf.h: evidence lines as OCSF 1.1.0 events, and the bounded OCSF sink.
 *
 * One mapping serves boundaryd (--ocsf, live) and `gensee timeline --ocsf`
 * (after the fact): an evidence line of a given kind ("file", "effect",
 * "fault", "lineage", "host", "sensor", "violation") becomes one event of
 * Network Activity (4001), Process Activity (1007), File System Activity
 * (1001) or Detection Finding (2004). The line itself is kept in
 * "unmapped", so nothing the evidence says is lost.
 *
 * The sink is boundaryd's: a queue of at most OCSF_QUEUE_LINES lines and
 * OCSF_QUEUE_BYTES bytes,
 * drained by one writer thread into STATE/ocsf.jsonl, which is rotated to
 * ocsf.jsonl.1 when it would exceed its size cap. A full queue, an
 * oversized record or a failed write drops the record and counts it: the
 * event loop never waits for the disk.
 */
#ifndef GENSEE_OCSF_H
#define GENSEE_OCSF_H

#include <stdint.h>

struct json_object;

#define OCSF_SCHEMA_VERSION "1.1.0"
#define OCSF_QUEUE_LINES 4096
#define OCSF_QUEUE_BYTES (8u * 1024u * 1024u)	/* and at most this much queued */
#define OCSF_LINE_MAX (64u * 1024u)
#define OCSF_FILE_MAX_DEFAULT (64ull << 20)
#define OCSF_FILE_MIN 4096	/* the smallest cap (tests use it to rotate) */
#define OCSF_FILE "ocsf.jsonl"

/*
 * One evidence line (kind as above) as an OCSF event, or NULL when the kind
 * has no OCSF counterpart (counter snapshots) or the line is not an object.
 * The line is not modified; the caller owns the result.
 */
struct json_object *ocsf_map(const char *kind, struct json_object *line);

/* "2026-01-02T03:04:05.678Z" (or without fraction) -> epoch ms; -1 if malformed. */
int64_t ocsf_time_ms(const char *rfc3339);

/* Start the sink on NAME beneath dirfd (appending); max_bytes caps the file. */
int ocsf_sink_open(int dirfd, const char *name, uint64_t max_bytes, char **cause);
/* Start its writer thread (after the daemon dropped its capabilities). */
int ocsf_sink_start(char **cause);
/* Map and queue one evidence line; no-op when no sink is open. Never blocks. */
void ocsf_emit(const char *kind, struct json_object *line);
/* Drain the queue and stop the writer. */
void ocsf_sink_close(void);
int ocsf_sink_active(void);
uint64_t ocsf_emitted(void);
uint64_t ocsf_dropped(void);

#endif
