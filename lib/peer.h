/*
 * peer.h: who is on the other end of a Unix socket.
 */
#ifndef GENSEE_PEER_H
#define GENSEE_PEER_H

#include <stdint.h>
#include <sys/types.h>

struct peer {
	pid_t pr_pid;
	uid_t pr_uid;
	gid_t pr_gid;
	uint64_t pr_start_ticks; /* of pr_pid, read at accept time */
};

/*
 * Read SO_PEERCRED (credentials the kernel recorded at connect time, which
 * the peer cannot forge) and the peer process's start time. Returns 0 or -1.
 */
int peer_identify(int fd, struct peer *out, char **cause);
/* 0 while the peer process recorded at accept still exists (pid reuse safe). */
int peer_alive(const struct peer *p);

#endif
