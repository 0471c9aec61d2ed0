/*
 * syncq.c: record durability off the reply path.
 *
 * A record replaced by rename is whole and current for every reader the
 * moment rename returns; fsync only adds survival of a power loss or kernel
 * crash. Such a crash also takes every cgroup, nftables table and process
 * with it, so no enforcement depends on the fsync: only the evidence of the
 * last few milliseconds does, and recovery marks a record it finds cut short
 * (docs/state.md). So boundaryd answers first and one thread here syncs the
 * file and its directory after, in order. The queue is bounded: when it is
 * full the writer syncs inline (slower, never less durable).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "syncq.h"

struct syncq_item {
	int si_fd;
	int si_dirfd;
	int si_release;		/* closed after the syncs, or -1 */
};

static struct syncq_item syncq_ring[SYNCQ_CAPACITY];
static size_t syncq_head, syncq_count;
static int syncq_running, syncq_stopping, syncq_busy;
static struct syncq_stats syncq_st;
static pthread_t syncq_thread;
static pthread_mutex_t syncq_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t syncq_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t syncq_idle_cv = PTHREAD_COND_INITIALIZER;

/* fsync the file, then its directory (the rename); close both. */
static int
syncq_sync(int fd, int dirfd)
{
	int err = 0;

	if (fsync(fd) != 0)
		err = errno;
	if (dirfd >= 0 && fsync(dirfd) != 0 && err == 0)
		err = errno;
	close(fd);
	if (dirfd >= 0)
		close(dirfd);
	return err;
}

static void
syncq_account(int err)
{
	syncq_st.ss_synced++;
	if (err != 0) {
		syncq_st.ss_errors++;
		syncq_st.ss_last_errno = err;
	}
}

static void *
syncq_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&syncq_mtx);
	for (;;) {
		while (syncq_count == 0 && !syncq_stopping)
			pthread_cond_wait(&syncq_cv, &syncq_mtx);
		if (syncq_count == 0)
			break;
		struct syncq_item it = syncq_ring[syncq_head];
		syncq_head = (syncq_head + 1) % SYNCQ_CAPACITY;
		syncq_count--;
		syncq_busy = 1;
		pthread_mutex_unlock(&syncq_mtx);
		int err = syncq_sync(it.si_fd, it.si_dirfd);
		if (it.si_release >= 0)
			close(it.si_release);	/* the replaced inode is freed here */
		pthread_mutex_lock(&syncq_mtx);
		syncq_busy = 0;
		syncq_account(err);
		if (syncq_count == 0)
			pthread_cond_broadcast(&syncq_idle_cv);
	}
	pthread_mutex_unlock(&syncq_mtx);
	return NULL;
}

int
syncq_start(void)
{
	pthread_mutex_lock(&syncq_mtx);
	if (!syncq_running) {
		syncq_stopping = 0;
		if (pthread_create(&syncq_thread, NULL, syncq_main, NULL) != 0) {
			pthread_mutex_unlock(&syncq_mtx);
			return -1;
		}
		syncq_running = 1;
	}
	pthread_mutex_unlock(&syncq_mtx);
	return 0;
}

int
syncq_active(void)
{
	pthread_mutex_lock(&syncq_mtx);
	int r = syncq_running && !syncq_stopping;
	pthread_mutex_unlock(&syncq_mtx);
	return r;
}

int
syncq_push(int fd, int dirfd)
{
	return syncq_push_release(fd, dirfd, -1);
}

int
syncq_push_release(int fd, int dirfd, int release)
{
	pthread_mutex_lock(&syncq_mtx);
	if (syncq_running && !syncq_stopping && syncq_count < SYNCQ_CAPACITY) {
		size_t slot = (syncq_head + syncq_count) % SYNCQ_CAPACITY;
		syncq_ring[slot].si_fd = fd;
		syncq_ring[slot].si_dirfd = dirfd;
		syncq_ring[slot].si_release = release;
		syncq_count++;
		syncq_st.ss_deferred++;
		pthread_cond_signal(&syncq_cv);
		pthread_mutex_unlock(&syncq_mtx);
		return 0;
	}
	syncq_st.ss_inline++;
	pthread_mutex_unlock(&syncq_mtx);
	/* No thread or a full queue: back-pressure, synced before returning. */
	int err = syncq_sync(fd, dirfd);
	if (release >= 0)
		close(release);
	pthread_mutex_lock(&syncq_mtx);
	syncq_account(err);
	pthread_mutex_unlock(&syncq_mtx);
	errno = err;
	return err == 0 ? 0 : -1;
}

void
syncq_drain(void)
{
	pthread_mutex_lock(&syncq_mtx);
	while (syncq_running && (syncq_count > 0 || syncq_busy))
		pthread_cond_wait(&syncq_idle_cv, &syncq_mtx);
	pthread_mutex_unlock(&syncq_mtx);
}

void
syncq_stop(void)
{
	pthread_mutex_lock(&syncq_mtx);
	if (!syncq_running) {
		pthread_mutex_unlock(&syncq_mtx);
		return;
	}
	syncq_stopping = 1;
	pthread_cond_signal(&syncq_cv);
	pthread_mutex_unlock(&syncq_mtx);
	pthread_join(syncq_thread, NULL);
	pthread_mutex_lock(&syncq_mtx);
	syncq_running = 0;
	pthread_mutex_unlock(&syncq_mtx);
}

void
syncq_get_stats(struct syncq_stats *out)
{
	pthread_mutex_lock(&syncq_mtx);
	*out = syncq_st;
	out->ss_pending = syncq_count + (size_t)syncq_busy;
	pthread_mutex_unlock(&syncq_mtx);
}
