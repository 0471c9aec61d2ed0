/*
 * peer.h: who is on the other end of a Unix socket.
 */
#ifndef GENSEE_PEER_H
#define GENSEE_PEER_H

#include <stdint.h>
#include <sys/types.h>

#define PEER_CGROUP_MAX 256
#define PEER_OP_ID_MAX 80

struct peer {
	pid_t pr_pid;
	uid_t pr_uid;
	gid_t pr_gid;
	uint64_t pr_start_ticks; /* of pr_pid, read at accept time */
	char pr_cgroup[PEER_CGROUP_MAX]; /* its v2 cgroup at accept, below the root */
	int pr_cgroup_unknown;	/* ... could not be read (the daemon decides) */
	/* Filled in by the daemon that accepted the connection: */
	int pr_socket;		/* which socket (enum proto_socket) */
	int pr_in_op;		/* the peer runs inside a supervised operation ... */
	char pr_op_id[PEER_OP_ID_MAX]; /* ... this one ("" when not one of ours) */
};

/*
 * Read SO_PEERCRED (credentials the kernel recorded at connect time, which
 * the peer cannot forge), the peer process's start time and its cgroup.
 * Returns 0 or -1.
 */
int peer_identify(int fd, struct peer *out, char **cause);
/* 0 while the peer process recorded at accept still exists (pid reuse safe). */
int peer_alive(const struct peer *p);

#endif
