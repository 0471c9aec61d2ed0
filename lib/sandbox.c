/*
 * sandbox.c: one sandbox_<process>() per process (the gmid habit), so the
 * whole confinement of the system can be read in one file.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <unistd.h>

#include <cap-ng.h>
#include <seccomp.h>

#include "landlock.h"
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
 * sets, clear the inheritable set, and set no_new_privs so that no exec can
 * ever regain the rest. The bounding set is cleared too, or (bound) holds
 * just caps: what a root program this process execs may have.
 */
static int
sandbox_keep_caps(const int *caps, const int *permitted_only, int bound, char **cause)
{
	capng_type_t sets = CAPNG_EFFECTIVE | CAPNG_PERMITTED | (bound ? CAPNG_BOUNDING_SET : 0);

	capng_clear(CAPNG_SELECT_BOTH);
	for (; *caps >= 0; caps++) {
		if (capng_update(CAPNG_ADD, sets, (unsigned int)*caps) != 0) {
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
	return sandbox_keep_caps(caps, permitted, 0, cause);
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
 * and, only when the Landlock sensor opened (audit, in the host's namespaces):
 *   CAP_AUDIT_READ      the audit read-log group: Landlock's denials
 *   CAP_AUDIT_CONTROL   AUDIT_GET, to notice audit turned off (never AUDIT_SET
 *                       after start: --enable-audit acts before this drop)
 * Everything else is dropped from every set; no_new_privs on top.
 */
int
sandbox_sensord(int audit, char **cause)
{
	static const int caps[] = { CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_DAC_READ_SEARCH,
		CAP_SYS_PTRACE, -1 };
	static const int audit_caps[] = { CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_DAC_READ_SEARCH,
		CAP_SYS_PTRACE, CAP_AUDIT_READ, CAP_AUDIT_CONTROL, -1 };
	return sandbox_keep_caps(audit ? audit_caps : caps, NULL, 0, cause);
}

/*
 * A seccomp filter: default action dflt, action for each of names (a name
 * this architecture does not have, iopl or epoll_wait on arm64, is
 * skipped), and another architecture's calls killed, since their numbers
 * would slip past every rule. NULL with *cause.
 */
static scmp_filter_ctx
sandbox_filter(uint32_t dflt, const char *const *names, size_t n, uint32_t action, char **cause)
{
	scmp_filter_ctx ctx = seccomp_init(dflt);
	int rc;

	if (ctx == NULL) {
		util_cause(cause, "seccomp_init failed");
		return NULL;
	}
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) != 0) {
		seccomp_release(ctx);
		util_cause(cause, "seccomp: bad-arch action");
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);
		if (nr == __NR_SCMP_ERROR || nr < 0)
			continue;
		if ((rc = seccomp_rule_add(ctx, action, nr, 0)) != 0) {
			seccomp_release(ctx);
			util_cause(cause, "seccomp: %s: %s", names[i], strerror(-rc));
			return NULL;
		}
	}
	return ctx;
}

/*
 * gensee-tcloned capabilities (it serves every local user, and everything
 * it starts inherits what is left here: the agents' inits, tmux, podman):
 *   CAP_SYS_ADMIN       overlay and bind mounts, the agents' mount, pid,
 *                       uts and ipc namespaces, btrfs subvolume snapshots
 *   CAP_SETUID/SETGID   setfsuid/setfsgid to read workspaces as the caller,
 *                       and the agent's init becoming the caller
 *   CAP_CHOWN           layers and forks keep their files' owners
 *   CAP_FOWNER          modes, times and xattrs of files it does not own
 *   CAP_DAC_OVERRIDE    the authority root's 0700 layers and the caller's
 *   CAP_DAC_READ_SEARCH files, read with the caller's fsuid where it checks
 *   CAP_KILL            ending agent trees that run as their users
 * and only when its --podman runtime can run (podman_net):
 *   CAP_NET_ADMIN       runc sets up each container's network namespace
 * Dropped from every set, so no exec regains them: among them
 * CAP_SYS_PTRACE (it reads no other process's memory or /proc/PID/exe;
 * there is no live cloning), CAP_MKNOD (overlay whiteouts, char 0:0, need
 * none), CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SETPCAP,
 * CAP_SETFCAP, CAP_SYS_CHROOT, CAP_SYS_BOOT, CAP_AUDIT_*, CAP_BPF. And
 * no_new_privs: nothing it starts gains by exec.
 *
 * The seccomp filter denies (EPERM) what neither tcloned nor anything it
 * starts ever needs, and what would hand a compromised tcloned (or an
 * agent past its own profile) the kernel or other processes: kexec,
 * modules, reboot, swap, the clock, accounting, I/O ports, the kernel log;
 * bpf and perf_event_open; ptrace, process_vm_* and pidfd_getfd (other
 * processes' memory and descriptors); userfaultfd; fanotify_init (a group
 * that could hold every open on the host); open_by_handle_at (with
 * CAP_DAC_READ_SEARCH it opens any inode of a filesystem by number, past
 * every mount and path check: the classic container escape) and
 * name_to_handle_at; and a new user namespace (clone and unshare with
 * CLONE_NEWUSER; clone3, whose flags seccomp cannot read, returns ENOSYS
 * so libc falls back to clone). Kernel keys stay: container runtimes make
 * session keyrings. Each agent's own profile (lib/seccomp.c) narrows further.
 */
static const char *const sandbox_tcloned_denied[] = {
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"reboot", "swapon", "swapoff", "acct", "iopl", "ioperm", "settimeofday",
	"clock_settime", "clock_adjtime", "adjtimex", "syslog", "quotactl", "quotactl_fd",
	"lookup_dcookie", "vhangup", "bpf", "perf_event_open", "process_vm_readv",
	"process_vm_writev", "pidfd_getfd", "userfaultfd", "fanotify_init",
	"open_by_handle_at", "name_to_handle_at",
#if !defined(__SANITIZE_ADDRESS__)
	/* The sanitizer build only: LeakSanitizer stops the world with ptrace at exit. */
	"ptrace",
#endif
};

int
sandbox_tcloned(int podman_net, char **cause)
{
	static const int caps[] = { CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID, CAP_CHOWN, CAP_FOWNER,
		CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_KILL, -1 };
	static const int podman_caps[] = { CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID, CAP_CHOWN,
		CAP_FOWNER, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_KILL, CAP_NET_ADMIN, -1 };
	scmp_filter_ctx ctx;
	int rc;

	/*
	 * Bounded, not cleared: podman, run as root, gets what is left here
	 * (no_new_privs caps an exec at the permitted set, whatever the bound).
	 */
	if (sandbox_keep_caps(podman_net ? podman_caps : caps, NULL, 1, cause) != 0)
		return -1;
	if ((ctx = sandbox_filter(SCMP_ACT_ALLOW, sandbox_tcloned_denied,
	    nitems(sandbox_tcloned_denied), SCMP_ACT_ERRNO(EPERM), cause)) == NULL)
		return -1;
	if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))) != 0 ||
	    (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))) != 0 ||
	    (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) != 0) {
		seccomp_release(ctx);
		util_cause(cause, "seccomp: namespace rules: %s", strerror(-rc));
		return -1;
	}
	rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc != 0) {
		util_cause(cause, "seccomp_load: %s", strerror(-rc));
		return -1;
	}
	return 0;
}

/*
 * gensee-httpmediatord, step 1: become the mediator user with nothing.
 * It parses HTTP from untrusted clients and servers, so it is assumed
 * compromisable and must hold no authority: no root uid or gid, no
 * supplementary groups, no capability in any set (effective, permitted,
 * inheritable, bounding, ambient), and no_new_privs so that no exec can
 * gain any. Checked afterwards: a partial drop is fatal, never ignored.
 */
int
sandbox_httpmediatord_drop(uid_t uid, gid_t gid, char **cause)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (uid == 0 || gid == 0) {
		util_cause(cause, "the mediator user must not be root (uid or gid 0)");
		return -1;
	}
	capng_clear(CAPNG_SELECT_BOTH);
	if (capng_change_id((int)uid, (int)gid, CAPNG_DROP_SUPP_GRP | CAPNG_CLEAR_BOUNDING) != 0) {
		util_cause(cause, "capng_change_id to %u:%u failed", (unsigned)uid, (unsigned)gid);
		return -1;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
		util_cause(cause, "PR_CAP_AMBIENT_CLEAR_ALL: %s", strerror(errno));
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		util_cause(cause, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return -1;
	}
	if (getresuid(&ru, &eu, &su) != 0 || getresgid(&rg, &eg, &sg) != 0 ||
	    ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid ||
	    getgroups(0, NULL) != 0) {
		util_cause(cause, "uid/gid drop incomplete");
		return -1;
	}
	/* Back to root must be impossible now. */
	if (setuid(0) == 0 || setgid(0) == 0) {
		util_cause(cause, "could regain root after the drop");
		return -1;
	}
	capng_clear(CAPNG_SELECT_ALL);
	if (capng_get_caps_process() != 0 || capng_have_capabilities(CAPNG_SELECT_BOTH) != CAPNG_NONE) {
		util_cause(cause, "capabilities left after the drop");
		return -1;
	}
	return 0;
}

/*
 * gensee-httpmediatord, step 2: the seccomp allowlist. The default action
 * kills the process (not EPERM): the mediator's own syscalls are a small
 * known set, so anything else is exploit code or a bug, and letting it see
 * EPERM and try the next thing helps only the attacker. A dead mediator
 * fails closed (boundaryd sees the channel close, clients their
 * connection reset) and systemd restarts it. Other ABIs (x32, i386) are
 * killed too (libseccomp's bad-arch action), so the list cannot be
 * bypassed through int 0x80.
 */
static const char *const sandbox_mediator_syscalls[] = {
	/* event loop and sockets (clients, upstreams, mediator.sock, DNS) */
	"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
	"poll", "ppoll", "eventfd2", "pipe2",
	"connect", "accept", "accept4", "bind", "listen", "shutdown",
	"getsockname", "getpeername", "setsockopt", "getsockopt",
	"sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
	"read", "write", "readv", "writev", "close", "fcntl",
	/* the CA bundle (Landlock limits what can be opened) */
	"openat", "newfstatat", "fstat", "lseek",
	/* time, memory, threads' basics, signals, exit */
	"clock_gettime", "gettimeofday", "nanosleep", "clock_nanosleep",
	"brk", "mmap", "munmap", "mremap", "madvise", "mprotect",
	"futex", "getrandom", "getpid", "gettid", "sched_yield",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "restart_syscall",
	"tgkill", "exit", "exit_group", "prlimit64", "getrlimit",
#if defined(__SANITIZE_ADDRESS__)
	/* ASan/UBSan reports in the sanitizer build only */
	"readlink", "readlinkat", "prctl", "sched_getaffinity", "uname", "getppid",
#endif
};

int
sandbox_httpmediatord(const char *ca_file, const char *runtime_dir, char **cause)
{
	const char *paths[2] = { ca_file, runtime_dir };
	scmp_filter_ctx ctx;
	int rc;

	/* no_new_privs is already set (sandbox_httpmediatord_drop). */
	if (landlock_restrict_read_only(paths, 2, cause) != 0)
		return -1;
	if ((ctx = sandbox_filter(SCMP_ACT_KILL_PROCESS, sandbox_mediator_syscalls,
	    nitems(sandbox_mediator_syscalls), SCMP_ACT_ALLOW, cause)) == NULL)
		return -1;
	/*
	 * socket(2) for IPv4, IPv6 and Unix only (no netlink, packet or
	 * crypto sockets); ioctl(2) for FIONREAD only (libevent sizes its
	 * reads with it). The kernel reads both as 32-bit ints: only the low
	 * half of the register is compared (the upper half is not defined).
	 */
	if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffff, AF_INET))) != 0 ||
	    (rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffff, AF_INET6))) != 0 ||
	    (rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffff, AF_UNIX))) != 0 ||
	    (rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffff, FIONREAD))) != 0) {
		seccomp_release(ctx);
		util_cause(cause, "seccomp: socket/ioctl rules: %s", strerror(-rc));
		return -1;
	}
	rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc != 0) {
		util_cause(cause, "seccomp_load: %s", strerror(-rc));
		return -1;
	}
	return 0;
}
