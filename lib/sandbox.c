/*
 * sandbox.c: one sandbox_<process>() per process (the gmid habit), so the
 * whole confinement of the system can be read in one file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <cap-ng.h>

#include "sandbox.h"
#include "util.h"

/*
 * boundaryd capabilities:
 *   CAP_KILL            signal (pidfd) processes of other users it supervises
 *   CAP_SYS_PTRACE      read /proc/PID/exe of other users' processes for lineage
 *   CAP_DAC_READ_SEARCH read /proc entries of other users' processes
 *   CAP_NET_ADMIN       nftables generations (network boundary)
 *   CAP_DAC_OVERRIDE    permitted only, never effective except around the one
 *                       mkdir of the cgroup base (MOUNT/gensee) when something
 *                       removed it: the v2 root is mode 0555 (sandbox_base_mkdir)
 * Everything else, including CAP_SYS_ADMIN and CAP_SETUID, is dropped from
 * the effective, permitted, inheritable and bounding sets, and no_new_privs
 * keeps an exec from regaining any of it. State and cgroup files are
 * root-owned, so the root uid alone can write them.
 */
/*
 * Keep only caps (a -1 terminated list) in the effective and permitted
 * sets, clear the inheritable and bounding sets, and set no_new_privs so
 * that no exec can ever regain the rest.
 */
static int
sandbox_keep_caps(const int *caps, const int *permitted_only, char **cause)
{
	capng_clear(CAPNG_SELECT_BOTH);
	for (; *caps >= 0; caps++) {
		if (capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED,
		    (unsigned int)*caps) != 0) {
			util_cause(cause, "capng_update failed");
			return -1;
		}
	}
	for (; permitted_only != NULL && *permitted_only >= 0; permitted_only++) {
		if (capng_update(CAPNG_ADD, CAPNG_PERMITTED, (unsigned int)*permitted_only) != 0) {
			util_cause(cause, "capng_update failed");
			return -1;
		}
	}
	if (capng_apply(CAPNG_SELECT_BOTH) != 0) {
		util_cause(cause, "capng_apply failed");
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		util_cause(cause, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int
sandbox_boundaryd(char **cause)
{
	static const int caps[] = { CAP_KILL, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH, CAP_NET_ADMIN,
		-1 };
	static const int permitted[] = { CAP_DAC_OVERRIDE, -1 };
	return sandbox_keep_caps(caps, permitted, cause);
}

/*
 * mkdirat(dirfd, name) with CAP_DAC_OVERRIDE effective for that one call
 * only (boundaryd: the cgroup base below the 0555 v2 root). Before the
 * sandbox is applied the capability is effective anyway.
 */
int
sandbox_base_mkdir(int dirfd, const char *name, mode_t mode)
{
	int raised = 0, r, e;

	if (capng_get_caps_process() == 0 &&
	    capng_have_capability(CAPNG_PERMITTED, CAP_DAC_OVERRIDE) &&
	    !capng_have_capability(CAPNG_EFFECTIVE, CAP_DAC_OVERRIDE)) {
		if (capng_update(CAPNG_ADD, CAPNG_EFFECTIVE, CAP_DAC_OVERRIDE) != 0 ||
		    capng_apply(CAPNG_SELECT_CAPS) != 0)
			return -1;
		raised = 1;
	}
	r = mkdirat(dirfd, name, mode);
	e = errno;
	if (raised && (capng_update(CAPNG_DROP, CAPNG_EFFECTIVE, CAP_DAC_OVERRIDE) != 0 ||
	    capng_apply(CAPNG_SELECT_CAPS) != 0))
		abort(); /* never run on with the override effective */
	errno = e;
	return r;
}

/*
 * sensord capabilities:
 *   CAP_SYS_ADMIN       fanotify_init(FAN_CLASS_CONTENT) and its marks
 *   CAP_NET_ADMIN       the proc connector and the nftables trace group
 *   CAP_DAC_READ_SEARCH the fds fanotify opens on files of other users
 *   CAP_SYS_PTRACE      /proc/PID/exe of other users' processes for lineage
 * Everything else is dropped from every set; no_new_privs on top.
 */
int
sandbox_sensord(char **cause)
{
	static const int caps[] = { CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_DAC_READ_SEARCH,
		CAP_SYS_PTRACE, -1 };
	return sandbox_keep_caps(caps, NULL, cause);
}
