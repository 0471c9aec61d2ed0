/*
 * seccomp.c: the default hard-deny profile of `gensee run --sandbox linux`.
 *
 * The profile allows every syscall except the families that let an agent
 * escape or blind the rest of the supervision (seed 003, issue 9): reading
 * or steering other processes of the same user (ptrace, process_vm_*,
 * pidfd_getfd, kcmp, perf_event_open), loading code into the kernel (bpf,
 * modules), changing its view of the system (mount, the new mount API,
 * unshare, setns, namespace flags of clone), kernel interfaces that
 * container runtimes keep from untrusted code (io_uring, userfaultfd, the
 * keyrings, modify_ldt, file handles, unusual personalities), pushing input
 * into the user's terminal (TIOCSTI, TIOCLINUX), and socket families that
 * netfilter does not see (AF_VSOCK and everything else but UNIX, INET,
 * INET6 and NETLINK). Each is answered with EPERM, so tools fail with an
 * error instead of dying. Process creation stays allowed, since without it
 * no developer tool works. docs/threat-model.md says why each is there.
 *
 * Only the native syscall ABI is in the filter, and the bad-arch action
 * kills the process: a 64-bit process can still enter the kernel through
 * the i386 (int $0x80) or x32 (__X32_SYSCALL_BIT) tables, where syscall
 * numbers differ and no rule of ours would match. libseccomp routes x32
 * numbers on an x86_64 filter to the bad-arch action as well.
 *
 * Arguments the kernel reads as 32-bit ints (ioctl's request, socket's
 * family, personality) are compared on their low 32 bits, or refused
 * outright when the upper half is set: an exact 64-bit comparison would
 * let 0x100005412 through while the kernel runs TIOCSTI (bubblewrap's
 * CVE-2017-5226 follow-up).
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <json-c/json.h>

#include <seccomp.h> /* ours, which includes libseccomp's: see seccomp.h */

#include "schema.h"
#include "util.h"

/* Which argument of clone(2) holds the flags (s390 and CRIS swap the first two). */
#if defined(__s390__) || defined(__CRIS__)
#define SECCOMP_PROFILE_CLONE_FLAGS 1
#else
#define SECCOMP_PROFILE_CLONE_FLAGS 0
#endif

#define SECCOMP_ALWAYS(name, err, key) { name, err, SECCOMP_WHEN_ALWAYS, 0, NULL, NULL, 0, 0, key }
#define SECCOMP_PROFILE_CLONE_NS(flag) \
	{ "clone", EPERM, SECCOMP_WHEN_FLAG, flag, #flag, NULL, 0, SECCOMP_PROFILE_CLONE_FLAGS, \
	  SECCOMP_PROFILE_MOUNT_NS }
#define SECCOMP_IOCTL(req) \
	{ "ioctl", EPERM, SECCOMP_WHEN_EQ32, req, #req, NULL, 0, 1, SECCOMP_PROFILE_TERMINAL }
#define SECCOMP_NOT_IN(name, arg, set, setname, key) \
	{ name, EPERM, SECCOMP_WHEN_NOT_IN, 0, setname, set, nitems(set), arg, key }

/*
 * personality(2) values a tool may set or ask for (Docker's list): Linux,
 * 32-bit Linux, the 2.6-style uname, both, and the query 0xffffffff. Any
 * other flag (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO ...)
 * weakens the memory protections of what the agent execs next.
 */
/* Sorted ascending, as seccomp_rule_not_in needs. */
static const uint32_t seccomp_personalities[] = {
	PER_LINUX, PER_LINUX32, UNAME26, UNAME26 | PER_LINUX32, 0xffffffffU,
};

/*
 * Socket families an agent keeps. Network enforcement is nftables, which
 * sees only IP: a family it does not see (AF_VSOCK to the hypervisor,
 * AF_TIPC, AF_RDS, AF_ALG's crypto code ...) would be a way out or a rarely
 * audited kernel surface. AF_NETLINK stays for interface and route queries
 * that resolvers and runtimes make.
 */
static const uint32_t seccomp_socket_families[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };

/*
 * The default profile, in the order it is printed.
 *
 * Namespaces: a new user namespace hands an unprivileged process a full set
 * of capabilities inside it, which is what makes mount, pivot_root and much
 * of the kernel's rarely audited code reachable; a new mount namespace
 * would let it build a private view of the filesystem (the launcher sets up
 * the agent's own view before this filter is loaded). Refusing unshare and
 * setns is not enough, because clone takes the same CLONE_NEW* flags. clone
 * passes them in a register, so the filter can see them and refuses clone
 * only when one is set (CLONE_NEWTIME shares its bit with the exit signal
 * and is only accepted by clone3 and unshare). clone3 passes its flags in a
 * struct in user memory, which a seccomp filter cannot read (and the caller
 * could rewrite after the check), so clone3 is answered with ENOSYS: glibc
 * and the other runtimes then fall back to clone, where the flags are seen.
 *
 * Other processes: pidfd_getfd copies a socket out of another process of
 * the user (sockets are matched by the cgroup they were created in, so a
 * stolen one is not filtered), kcmp and perf_event_open read them.
 *
 * io_uring runs socket, open and connect operations in kernel workers
 * where this filter never sees them; userfaultfd and the keyrings are
 * frequent kernel exploit primitives; modify_ldt and file handles
 * (name_to_handle_at, open_by_handle_at) are what Docker refuses too.
 */
static const struct seccomp_profile_rule seccomp_profile_default[] = {
	SECCOMP_ALWAYS("ptrace", EPERM, SECCOMP_PROFILE_PTRACE),
	SECCOMP_ALWAYS("process_vm_readv", EPERM, SECCOMP_PROFILE_PTRACE),
	SECCOMP_ALWAYS("process_vm_writev", EPERM, SECCOMP_PROFILE_PTRACE),
	SECCOMP_ALWAYS("pidfd_getfd", EPERM, SECCOMP_PROFILE_PTRACE),
	SECCOMP_ALWAYS("kcmp", EPERM, SECCOMP_PROFILE_PTRACE),
	SECCOMP_ALWAYS("perf_event_open", EPERM, SECCOMP_PROFILE_PTRACE),
	SECCOMP_ALWAYS("bpf", EPERM, SECCOMP_PROFILE_BPF),
	SECCOMP_ALWAYS("init_module", EPERM, SECCOMP_PROFILE_MODULES),
	SECCOMP_ALWAYS("finit_module", EPERM, SECCOMP_PROFILE_MODULES),
	SECCOMP_ALWAYS("delete_module", EPERM, SECCOMP_PROFILE_MODULES),
	SECCOMP_ALWAYS("mount", EPERM, SECCOMP_PROFILE_MOUNT_NS),
	SECCOMP_ALWAYS("umount2", EPERM, SECCOMP_PROFILE_MOUNT_NS),
	SECCOMP_ALWAYS("pivot_root", EPERM, SECCOMP_PROFILE_MOUNT_NS),
	SECCOMP_ALWAYS("fsopen", EPERM, SECCOMP_PROFILE_MOUNT_NS),
	SECCOMP_ALWAYS("fsconfig", EPERM, SECCOMP_PROFILE_MOUNT_NS),
	SECCOMP_ALWAYS("fsmount", EPERM, SECCOMP_PROFILE_MOUNT_NS),
	SECCOMP_ALWAYS("fspick", EPERM, SECCOMP_PROFILE_MOUNT_NS),
	SECCOMP_ALWAYS("move_mount", EPERM, SECCOMP_PROFILE_MOUNT_NS),
	SECCOMP_ALWAYS("open_tree", EPERM, SECCOMP_PROFILE_MOUNT_NS),
	SECCOMP_ALWAYS("mount_setattr", EPERM, SECCOMP_PROFILE_MOUNT_NS),
	SECCOMP_ALWAYS("unshare", EPERM, SECCOMP_PROFILE_MOUNT_NS),
	SECCOMP_ALWAYS("setns", EPERM, SECCOMP_PROFILE_MOUNT_NS),
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWNS),
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWCGROUP),
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWUTS),
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWIPC),
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWUSER),
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWPID),
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWNET),
	SECCOMP_ALWAYS("clone3", ENOSYS, SECCOMP_PROFILE_MOUNT_NS),
	SECCOMP_ALWAYS("io_uring_setup", EPERM, SECCOMP_PROFILE_KERNEL_SURFACE),
	SECCOMP_ALWAYS("io_uring_enter", EPERM, SECCOMP_PROFILE_KERNEL_SURFACE),
	SECCOMP_ALWAYS("io_uring_register", EPERM, SECCOMP_PROFILE_KERNEL_SURFACE),
	SECCOMP_ALWAYS("userfaultfd", EPERM, SECCOMP_PROFILE_KERNEL_SURFACE),
	SECCOMP_ALWAYS("keyctl", EPERM, SECCOMP_PROFILE_KERNEL_SURFACE),
	SECCOMP_ALWAYS("add_key", EPERM, SECCOMP_PROFILE_KERNEL_SURFACE),
	SECCOMP_ALWAYS("request_key", EPERM, SECCOMP_PROFILE_KERNEL_SURFACE),
	SECCOMP_ALWAYS("modify_ldt", EPERM, SECCOMP_PROFILE_KERNEL_SURFACE),
	SECCOMP_ALWAYS("name_to_handle_at", EPERM, SECCOMP_PROFILE_KERNEL_SURFACE),
	SECCOMP_ALWAYS("open_by_handle_at", EPERM, SECCOMP_PROFILE_KERNEL_SURFACE),
	SECCOMP_NOT_IN("personality", 0, seccomp_personalities,
	    "PER_LINUX, PER_LINUX32, UNAME26, UNAME26|PER_LINUX32, 0xffffffff",
	    SECCOMP_PROFILE_KERNEL_SURFACE),
	SECCOMP_IOCTL(TIOCSTI),
	SECCOMP_IOCTL(TIOCLINUX),
	SECCOMP_NOT_IN("socket", 0, seccomp_socket_families,
	    "AF_UNIX, AF_INET, AF_INET6, AF_NETLINK", SECCOMP_PROFILE_SOCKET_FAMILIES),
	SECCOMP_NOT_IN("socketpair", 0, seccomp_socket_families,
	    "AF_UNIX, AF_INET, AF_INET6, AF_NETLINK", SECCOMP_PROFILE_SOCKET_FAMILIES),
};

/* The linux.seccomp keys, indexed by enum seccomp_profile_key. */
static const char *const seccomp_profile_keys[SECCOMP_PROFILE_NKEYS] = {
	"deny_ptrace",
	"deny_bpf",
	"deny_kernel_modules",
	"deny_mount_namespace_changes",
	"deny_kernel_attack_surface",
	"deny_terminal_injection",
	"deny_socket_families",
};

static const struct schema_field seccomp_profile_fields[] = {
	{ "enabled", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "deny_ptrace", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "deny_bpf", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "deny_kernel_modules", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "deny_mount_namespace_changes", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "deny_kernel_attack_surface", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "deny_terminal_injection", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "deny_socket_families", SCHEMA_BOOL, 0, 0, 0, 0 },
};

/* The full policy key of a rule family. */
const char *
seccomp_profile_key_name(enum seccomp_profile_key k)
{
	switch (k) {
	case SECCOMP_PROFILE_PTRACE:
		return "linux.seccomp.deny_ptrace";
	case SECCOMP_PROFILE_BPF:
		return "linux.seccomp.deny_bpf";
	case SECCOMP_PROFILE_MODULES:
		return "linux.seccomp.deny_kernel_modules";
	case SECCOMP_PROFILE_MOUNT_NS:
		return "linux.seccomp.deny_mount_namespace_changes";
	case SECCOMP_PROFILE_KERNEL_SURFACE:
		return "linux.seccomp.deny_kernel_attack_surface";
	case SECCOMP_PROFILE_TERMINAL:
		return "linux.seccomp.deny_terminal_injection";
	case SECCOMP_PROFILE_SOCKET_FAMILIES:
		return "linux.seccomp.deny_socket_families";
	}
	return "?";
}

/* Read linux.seccomp of the policy into sp (keys and enabled). */
static int
seccomp_profile_parse(struct json_object *policy, struct seccomp_profile *sp, char **cause)
{
	struct json_object *linux_, *sc, *v;
	struct schema_error err;

	if (policy == NULL || (linux_ = schema_child(policy, "linux")) == NULL)
		return 0;
	if (!json_object_is_type(linux_, json_type_object)) {
		util_cause(cause, "policy: linux must be an object");
		return -1;
	}
	if ((sc = schema_child(linux_, "seccomp")) == NULL)
		return 0;
	if (schema_validate(sc, seccomp_profile_fields, nitems(seccomp_profile_fields),
	    &err) != 0) {
		util_cause(cause, "policy: linux.seccomp: %s", err.se_message);
		return -1;
	}
	if (json_object_object_get_ex(sc, "enabled", &v)) {
		sp->sp_enabled = json_object_get_boolean(v);
		sp->sp_enabled_source = "policy";
	}
	for (size_t k = 0; k < SECCOMP_PROFILE_NKEYS; k++) {
		if (!json_object_object_get_ex(sc, seccomp_profile_keys[k], &v))
			continue;
		sp->sp_keys[k] = json_object_get_boolean(v);
		sp->sp_key_set[k] = 1;
	}
	return 0;
}

/* Add one refusal rule, with at most one argument comparison. */
static int
seccomp_rule(scmp_filter_ctx ctx, const struct seccomp_profile_rule *r, int nr,
    enum scmp_compare op, uint64_t a, uint64_t b, int notify)
{
	uint32_t act = notify && r->spr_errno != ENOSYS ? SCMP_ACT_NOTIFY :
	    SCMP_ACT_ERRNO((uint16_t)r->spr_errno);

	if (r->spr_when == SECCOMP_WHEN_ALWAYS)
		return seccomp_rule_add(ctx, act, nr, 0);
	return seccomp_rule_add(ctx, act, nr, 1, SCMP_CMP(r->spr_arg, op, a, b));
}

/*
 * Refuse every value of an argument but the allowed ones. libseccomp takes
 * one comparison per argument in a rule, so "none of" is written as the
 * complement: values above 32 bits, then every gap between allowed values
 * as aligned power-of-two blocks (as a CIDR list covers an address range),
 * each one masked comparison. Five allowed values cost some sixty rules,
 * all behind the syscall number, so no other syscall pays for them.
 */
static int
seccomp_rule_not_in(scmp_filter_ctx ctx, const struct seccomp_profile_rule *r, int nr,
    int notify)
{
	uint64_t lo = 0;
	int rc;

	if ((rc = seccomp_rule(ctx, r, nr, SCMP_CMP_GT, 0xffffffffULL, 0, notify)) != 0)
		return rc;
	for (size_t i = 0; i <= r->spr_nallowed; i++) {
		/* The gap before allowed value i (or, at the end, up to 2^32). */
		uint64_t end = i < r->spr_nallowed ? r->spr_allowed[i] : 0x100000000ULL;

		while (lo < end) {
			uint64_t size = lo == 0 ? 0x100000000ULL : lo & -lo;

			while (lo + size > end)
				size >>= 1;
			rc = seccomp_rule(ctx, r, nr, SCMP_CMP_MASKED_EQ, ~(size - 1), lo, notify);
			if (rc != 0)
				return rc;
			lo += size;
		}
		lo = end + 1;
	}
	return 0;
}

/* Compile the selected rules into a libseccomp filter. */
int
seccomp_profile_compile(struct seccomp_profile *sp, char **cause)
{
	scmp_filter_ctx ctx;
	int rc;

	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL) {
		util_cause(cause, "seccomp_init failed");
		return -1;
	}
	/* i386 and x32 entry points would bypass every rule: kill the process. */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) != 0) {
		util_cause(cause, "seccomp bad-arch action: %s", strerror(-rc));
		goto fail;
	}
	for (size_t i = 0; i < sp->sp_nrules; i++) {
		const struct seccomp_profile_rule *r = &sp->sp_rules[i];
		int nr = r->spr_nr;

		/* An unknown name must not quietly drop a rule. */
		if (nr == __NR_SCMP_ERROR) {
			util_cause(cause, "seccomp: libseccomp does not know %s", r->spr_syscall);
			goto fail;
		}
		switch (r->spr_when) {
		case SECCOMP_WHEN_ALWAYS:
			rc = seccomp_rule(ctx, r, nr, SCMP_CMP_EQ, 0, 0, sp->sp_notify);
			break;
		case SECCOMP_WHEN_FLAG:
			rc = seccomp_rule(ctx, r, nr, SCMP_CMP_MASKED_EQ, r->spr_value,
			    r->spr_value, sp->sp_notify);
			break;
		case SECCOMP_WHEN_EQ32:
			rc = seccomp_rule(ctx, r, nr, SCMP_CMP_MASKED_EQ, 0xffffffffULL,
			    r->spr_value, sp->sp_notify);
			break;
		case SECCOMP_WHEN_NOT_IN:
			rc = seccomp_rule_not_in(ctx, r, nr, sp->sp_notify);
			break;
		default:
			rc = -EINVAL;
		}
		if (rc != 0) {
			util_cause(cause, "seccomp rule for %s: %s", r->spr_syscall, strerror(-rc));
			goto fail;
		}
	}
	sp->sp_ctx = ctx;
	return 0;
fail:
	seccomp_release(ctx);
	return -1;
}

/* API level 5: SCMP_ACT_NOTIFY and the notify calls (kernel 5.0). */
int
seccomp_profile_notify_available(void)
{
	return seccomp_api_get() >= 5;
}

/* Parse the policy, apply the override, select the rules and compile them. */
int
seccomp_profile_build(struct json_object *policy, int force, struct seccomp_profile *sp,
    char **cause)
{
	return seccomp_profile_build_notify(policy, force, 0, sp, cause);
}

int
seccomp_profile_build_notify(struct json_object *policy, int force, int notify,
    struct seccomp_profile *sp, char **cause)
{
	if (seccomp_profile_plan_notify(policy, force, notify, sp, cause) != 0)
		return -1;
	return sp->sp_enabled ? seccomp_profile_compile(sp, cause) : 0;
}

int
seccomp_profile_plan_notify(struct json_object *policy, int force, int notify,
    struct seccomp_profile *sp, char **cause)
{
	memset(sp, 0, sizeof(*sp));
	sp->sp_notify = notify;
	sp->sp_notify_fd = -1;
	sp->sp_enabled = 1;
	sp->sp_enabled_source = "default";
	for (size_t k = 0; k < SECCOMP_PROFILE_NKEYS; k++)
		sp->sp_keys[k] = 1;
	if (seccomp_profile_parse(policy, sp, cause) != 0)
		return -1;
	if (force == SECCOMP_PROFILE_FORCE_ON) {
		sp->sp_enabled = 1;
		sp->sp_enabled_source = "--linux-seccomp";
	} else if (force == SECCOMP_PROFILE_FORCE_OFF) {
		sp->sp_enabled = 0;
		sp->sp_enabled_source = "--no-linux-seccomp";
	}
	if (!sp->sp_enabled) {
		sp->sp_notify = 0;
		return 0;
	}
	for (size_t i = 0; i < nitems(seccomp_profile_default); i++) {
		if (!sp->sp_keys[seccomp_profile_default[i].spr_key])
			continue;
		if (sp->sp_nrules == nitems(sp->sp_rules)) {
			util_cause(cause, "seccomp: too many rules");
			return -1;
		}
		/* An unknown name must not quietly drop a rule: refused before anything starts. */
		int nr = seccomp_syscall_resolve_name(seccomp_profile_default[i].spr_syscall);
		if (nr == __NR_SCMP_ERROR) {
			util_cause(cause, "seccomp: libseccomp does not know %s",
			    seccomp_profile_default[i].spr_syscall);
			return -1;
		}
		sp->sp_rules[sp->sp_nrules] = seccomp_profile_default[i];
		sp->sp_rules[sp->sp_nrules++].spr_nr = nr;
	}
	return 0;
}

/* Release the compiled filter. */
void
seccomp_profile_free(struct seccomp_profile *sp)
{
	if (sp->sp_ctx != NULL)
		seccomp_release(sp->sp_ctx);
	sp->sp_ctx = NULL;
}

/* Whether any rule names this syscall. */
int
seccomp_profile_denies(const struct seccomp_profile *sp, const char *name)
{
	for (size_t i = 0; i < sp->sp_nrules; i++)
		if (strcmp(sp->sp_rules[i].spr_syscall, name) == 0)
			return 1;
	return 0;
}

/* Install the compiled filter on the calling thread. */
int
seccomp_profile_load(struct seccomp_profile *sp, char **cause)
{
	int rc;

	if (sp->sp_ctx == NULL) {
		util_cause(cause, "seccomp: no compiled filter");
		return -1;
	}
	if ((rc = seccomp_load(sp->sp_ctx)) != 0) {
		util_cause(cause, "seccomp: loading the filter: %s", strerror(-rc));
		return -1;
	}
	if (sp->sp_notify && (sp->sp_notify_fd = seccomp_notify_fd(sp->sp_ctx)) < 0) {
		util_cause(cause, "seccomp: no listener after loading the filter");
		return -1;
	}
	return 0;
}

/* Recompile with refusals sent to a listener. */
int
seccomp_profile_notify(struct seccomp_profile *sp, char **cause)
{
	scmp_filter_ctx old = sp->sp_ctx;

	if (!sp->sp_enabled || old == NULL)
		return 0;
	if (!seccomp_profile_notify_available()) {
		util_cause(cause, "seccomp: this kernel or libseccomp has no user notification");
		return -1;
	}
	sp->sp_notify = 1;
	sp->sp_ctx = NULL;
	if (seccomp_profile_compile(sp, cause) != 0) {
		sp->sp_notify = 0;
		sp->sp_ctx = old;
		return -1;
	}
	seccomp_release(old);
	return 0;
}

/* The errno the profile answers nr with (its first rule naming it). */
static int
seccomp_profile_errno(const struct seccomp_profile *sp, int nr)
{
	for (size_t i = 0; i < sp->sp_nrules; i++)
		if (sp->sp_rules[i].spr_nr == nr)
			return sp->sp_rules[i].spr_errno;
	return EPERM;
}

/*
 * Answer every notification with its rule's errno. A notification is
 * never answered with CONTINUE: the listener only reports, the filter
 * decided. When the launcher is gone the kernel answers ENOSYS for it, a
 * refusal all the same.
 */
int
seccomp_profile_answer(const struct seccomp_profile *sp, int fd,
    void (*count)(int nr, void *arg), void *arg)
{
	struct seccomp_notif *req = NULL;
	struct seccomp_notif_resp *resp = NULL;
	int rc = 0;

	if (seccomp_notify_alloc(&req, &resp) != 0)
		return -1;
	/* The kernel refuses a receive into a struct that is not zeroed. */
	memset(req, 0, sizeof(*req));
	if (seccomp_notify_receive(fd, req) != 0) {
		/* Interrupted, or the caller died meanwhile; else no filter user is left. */
		rc = errno == EINTR || errno == ENOENT ? 0 : -1;
		goto out;
	}
	memset(resp, 0, sizeof(*resp));
	resp->id = req->id;
	resp->error = -seccomp_profile_errno(sp, req->data.nr);
	if (count != NULL)
		count(req->data.nr, arg);
	if (seccomp_notify_respond(fd, resp) != 0 && errno != ENOENT)
		rc = -1;
out:
	seccomp_notify_free(req, resp);
	return rc;
}

void
seccomp_profile_serve(const struct seccomp_profile *sp, int fd,
    void (*count)(int nr, void *arg), void *arg)
{
	for (;;) {
		/*
		 * Wait for a notification or for the last user of the filter to
		 * go (POLLHUP). Once it has gone a receive fails at once with
		 * ENOENT, so looping on the receive alone would spin a core
		 * until the launcher exits.
		 */
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (!(pfd.revents & POLLIN) || seccomp_profile_answer(sp, fd, count, arg) != 0)
			break;			/* POLLHUP: no filter user left */
	}
	/* Without a listener the kernel answers ENOSYS: refused, never left waiting. */
	close(fd);
}

/* Write the compiled filter's BPF program to fd. */
int
seccomp_profile_export_bpf(const struct seccomp_profile *sp, int fd, char **cause)
{
	int rc;

	if (sp->sp_ctx == NULL) {
		util_cause(cause, "seccomp: no compiled filter");
		return -1;
	}
	if ((rc = seccomp_export_bpf(sp->sp_ctx, fd)) != 0) {
		util_cause(cause, "seccomp_export_bpf: %s", strerror(-rc));
		return -1;
	}
	return 0;
}

/* The names of the denied syscalls, each once, in profile order. */
static struct json_object *
seccomp_profile_denied(const struct seccomp_profile *sp)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; i < sp->sp_nrules; i++) {
		const char *name = sp->sp_rules[i].spr_syscall;
		size_t j;
		for (j = 0; j < i; j++)
			if (strcmp(sp->sp_rules[j].spr_syscall, name) == 0)
				break;
		if (j == i)
			json_object_array_add(a, json_object_new_string(name));
	}
	return a;
}

/* The short form kept in the operation record. */
struct json_object *
seccomp_profile_record(const struct seccomp_profile *sp)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "enabled", json_object_new_boolean(sp->sp_enabled));
	json_object_object_add(o, "profile", json_object_new_string("default"));
	json_object_object_add(o, "denied", seccomp_profile_denied(sp));
	return o;
}

/* The long form: keys and their sources, actions and every rule. */
struct json_object *
seccomp_profile_json(const struct seccomp_profile *sp)
{
	struct json_object *o = seccomp_profile_record(sp), *keys, *rules, *k;
	struct utsname u;
	char action[32];

	json_object_object_add(o, "enabled_by", json_object_new_string(sp->sp_enabled_source));
	json_object_object_add(o, "native_arch", json_object_new_string(uname(&u) == 0 ?
	    u.machine : "unknown"));
	json_object_object_add(o, "default_action", json_object_new_string("allow"));
	json_object_object_add(o, "bad_arch_action", json_object_new_string(
	    sp->sp_enabled ? "kill_process" : "none"));
	keys = json_object_new_object();
	k = json_object_new_object();
	json_object_object_add(k, "value", json_object_new_boolean(sp->sp_enabled));
	json_object_object_add(k, "source", json_object_new_string(sp->sp_enabled_source));
	json_object_object_add(keys, "linux.seccomp.enabled", k);
	for (size_t i = 0; i < SECCOMP_PROFILE_NKEYS; i++) {
		enum seccomp_profile_key key = (enum seccomp_profile_key)i;
		k = json_object_new_object();
		json_object_object_add(k, "value", json_object_new_boolean(sp->sp_keys[i]));
		json_object_object_add(k, "source", json_object_new_string(
		    sp->sp_key_set[i] ? "policy" : "default"));
		json_object_object_add(keys, seccomp_profile_key_name(key), k);
	}
	json_object_object_add(o, "keys", keys);
	rules = json_object_new_array();
	for (size_t i = 0; i < sp->sp_nrules; i++) {
		const struct seccomp_profile_rule *r = &sp->sp_rules[i];
		struct json_object *jr = json_object_new_object();

		json_object_object_add(jr, "syscall", json_object_new_string(r->spr_syscall));
		json_object_object_add(jr, "number", json_object_new_int(r->spr_nr));
		snprintf(action, sizeof(action), "errno(%s)", r->spr_errno == EPERM ? "EPERM" :
		    r->spr_errno == ENOSYS ? "ENOSYS" : "?");
		json_object_object_add(jr, "action", json_object_new_string(action));
		if (r->spr_when != SECCOMP_WHEN_ALWAYS) {
			struct json_object *c = json_object_new_object();
			json_object_object_add(c, "arg", json_object_new_int((int)r->spr_arg));
			if (r->spr_when == SECCOMP_WHEN_NOT_IN) {
				struct json_object *vals = json_object_new_array();
				for (size_t v = 0; v < r->spr_nallowed; v++)
					json_object_array_add(vals,
					    json_object_new_int64(r->spr_allowed[v]));
				json_object_object_add(c, "op", json_object_new_string("not_in"));
				json_object_object_add(c, "allowed", vals);
				json_object_object_add(c, "allowed_names",
				    json_object_new_string(r->spr_value_name));
			} else {
				int flag = r->spr_when == SECCOMP_WHEN_FLAG;
				json_object_object_add(c, "op", json_object_new_string("masked_eq"));
				json_object_object_add(c, "mask", json_object_new_int64(
				    flag ? (int64_t)r->spr_value : 0xffffffffLL));
				json_object_object_add(c, "value",
				    json_object_new_int64((int64_t)r->spr_value));
				json_object_object_add(c, flag ? "flag" : "request",
				    json_object_new_string(r->spr_value_name));
			}
			json_object_object_add(jr, "when", c);
		}
		json_object_object_add(jr, "key", json_object_new_string(
		    seccomp_profile_key_name(r->spr_key)));
		json_object_array_add(rules, jr);
	}
	json_object_object_add(o, "rules", rules);
	return o;
}
