/*
 * syncq.h: a bounded queue of fsyncs done by one thread after the reply
 * (see syncq.c for why that is safe for records).
 */
#ifndef GENSEE_SYNCQ_H
#define GENSEE_SYNCQ_H

#include <stddef.h>
#include <stdint.h>

#define SYNCQ_CAPACITY 1024

struct syncq_stats {
	uint64_t ss_deferred;	/* syncs handed to the thread */
	uint64_t ss_inline;	/* syncs done by the writer (no thread, queue full) */
	uint64_t ss_synced;	/* syncs finished, either way */
	uint64_t ss_errors;	/* fsyncs that failed (EIO, ENOSPC ...) */
	int ss_last_errno;
	size_t ss_pending;	/* queued or in progress now */
};

/* Start the syncing thread; without it every push syncs inline. */
int syncq_start(void);

/* Whether the thread runs (pushes are deferred, not inline). */
int syncq_active(void);

/*
 * Sync fd and then dirfd (may be -1) and close both; takes ownership of
 * both. Returns 0 once queued, or the inline result (-1 with errno).
 */
int syncq_push(int fd, int dirfd);
/* The same, and close release (may be -1) after the syncs: a replaced file's last fd. */
int syncq_push_release(int fd, int dirfd, int release);

/* Wait until everything queued so far is synced. */
void syncq_drain(void);

/* Drain, then end the thread. */
void syncq_stop(void);

void syncq_get_stats(struct syncq_stats *out);

#endif
