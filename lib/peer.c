/*
 * peer.c: SO_PEERCRED identity.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "peer.h"
#include "proc.h"
#include "util.h"

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
	if (proc_read_stat(uc.pid, &st) != 0) {
		util_cause(cause, "peer %d vanished at accept", (int)uc.pid);
		return -1;
	}
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
