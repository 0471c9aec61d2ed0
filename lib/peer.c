/*
 * peer.c: SO_PEERCRED identity.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cgroup.h"
#include "peer.h"
#include "proc.h"
#include "util.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

int
peer_identify(int fd, struct peer *out, char **cause)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	struct proc_stat st;

	memset(out, 0, sizeof(*out));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0 || len != sizeof(uc)) {
		util_cause(cause, "SO_PEERCRED: %s", strerror(errno));
		return -1;
	}
	if (uc.pid <= 0) {
		util_cause(cause, "peer has no pid in this pid namespace");
		return -1;
	}
	/*
	 * The start time pins the peer process: if it exits and its pid is
	 * reused, a later check against (pid, start) fails instead of treating
	 * the new process as the caller.
	 */
	int pidfd = -1;
	socklen_t plen = sizeof(pidfd);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &plen) != 0)
		pidfd = -1; /* an older kernel: the start time alone pins the peer */
	if (proc_read_stat(uc.pid, &st) != 0) {
		util_cause(cause, "peer %d vanished at accept", (int)uc.pid);
		if (pidfd >= 0)
			close(pidfd);
		return -1;
	}
	/*
	 * The cgroup decides what the peer may ask for (a process inside a
	 * supervised operation gets less). Threat: the peer exits and its pid
	 * is reused by a process elsewhere between SO_PEERCRED and these
	 * reads. The peer's pidfd (SO_PEERPIDFD) still naming a live process
	 * after the reads proves the pid meant the peer throughout; without
	 * one, the start time is read again.
	 */
	if (cgroup_of_pid(uc.pid, out->pr_cgroup, sizeof(out->pr_cgroup)) != 0) {
		out->pr_cgroup[0] = '\0';
		out->pr_cgroup_unknown = 1; /* no v2 line (a v1-only host), or unreadable */
	}
	if ((pidfd >= 0 && proc_pidfd_signal(pidfd, 0) != 0) ||
	    proc_identity_matches(uc.pid, st.ps_start_ticks) != 0) {
		util_cause(cause, "peer %d vanished at accept", (int)uc.pid);
		if (pidfd >= 0)
			close(pidfd);
		return -1;
	}
	if (pidfd >= 0)
		close(pidfd);
	out->pr_pid = uc.pid;
	out->pr_uid = uc.uid;
	out->pr_gid = uc.gid;
	out->pr_start_ticks = st.ps_start_ticks;
	return 0;
}

int
peer_alive(const struct peer *p)
{
	return proc_identity_matches(p->pr_pid, p->pr_start_ticks);
}
