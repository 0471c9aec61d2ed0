/*
 * sandbox.c: one sandbox_<process>() per process (the gmid habit), so the
 * whole confinement of the system can be read in one file.
 */
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>

#include <cap-ng.h>

#include "sandbox.h"
#include "util.h"

/*
 * boundaryd capabilities:
 *   CAP_KILL            signal (pidfd) processes of other users it supervises
 *   CAP_SYS_PTRACE      read /proc/PID/exe of other users' processes for lineage
 *   CAP_DAC_READ_SEARCH read /proc entries of other users' processes
 *   CAP_NET_ADMIN       nftables generations (network boundary)
 * Everything else, including CAP_SYS_ADMIN, CAP_SETUID and CAP_DAC_OVERRIDE,
 * is dropped from the effective, permitted, inheritable and bounding sets,
 * and no_new_privs keeps an exec from regaining any of it. State and cgroup
 * files are root-owned, so the root uid alone can write them.
 */
/*
 * Keep only caps (a -1 terminated list) in the effective and permitted
 * sets, clear the inheritable and bounding sets, and set no_new_privs so
 * that no exec can ever regain the rest.
 */
static int
sandbox_keep_caps(const int *caps, char **cause)
{
	capng_clear(CAPNG_SELECT_BOTH);
	for (; *caps >= 0; caps++) {
		if (capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED,
		    (unsigned int)*caps) != 0) {
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
	return sandbox_keep_caps(caps, cause);
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
	return sandbox_keep_caps(caps, cause);
}
