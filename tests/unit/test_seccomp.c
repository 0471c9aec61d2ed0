/*
 * test_seccomp.c: the default seccomp profile (lib/seccomp.c).
 *
 * Profile building is checked from policy keys alone. The filter itself is
 * checked twice: by running the exported BPF in a small interpreter over
 * hand-made seccomp_data (so the verdict for ABIs this kernel cannot enter,
 * such as i386 here, is still proven), and by loading it in forked children
 * on the real kernel, which then try what it denies and what it must allow.
 * Loading is irreversible, so it only ever happens in a child.
 */
#include <linux/audit.h>
#include <linux/filter.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>

#include <json-c/json.h>

#include <seccomp.h> /* lib/seccomp.h, which includes libseccomp's */

#include "unit.h"

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif

#define RET_ALLOW SECCOMP_RET_ALLOW
#define RET_EPERM (SECCOMP_RET_ERRNO | EPERM)
#define RET_ENOSYS (SECCOMP_RET_ERRNO | ENOSYS)
#define RET_KILL SECCOMP_RET_KILL_PROCESS

/* The syscalls each policy key is responsible for. */
static const char *const key_ptrace[] = { "ptrace", "process_vm_readv", "process_vm_writev",
	"pidfd_getfd", "kcmp", "perf_event_open", NULL };
static const char *const key_bpf[] = { "bpf", NULL };
static const char *const key_modules[] = { "init_module", "finit_module", "delete_module", NULL };
static const char *const key_mount[] = { "mount", "umount2", "pivot_root", "fsopen", "fsconfig",
	"fsmount", "fspick", "move_mount", "open_tree", "mount_setattr", "unshare", "setns",
	"clone", "clone3", NULL };
static const char *const key_surface[] = { "io_uring_setup", "io_uring_enter",
	"io_uring_register", "userfaultfd", "keyctl", "add_key", "request_key", "modify_ldt",
	"name_to_handle_at", "open_by_handle_at", "personality", NULL };
static const char *const key_terminal[] = { "ioctl", NULL };
static const char *const key_families[] = { "socket", "socketpair", NULL };

static const struct {
	const char *key;
	const char *const *names;
} key_table[] = {
	{ "deny_ptrace", key_ptrace },
	{ "deny_bpf", key_bpf },
	{ "deny_kernel_modules", key_modules },
	{ "deny_mount_namespace_changes", key_mount },
	{ "deny_kernel_attack_surface", key_surface },
	{ "deny_terminal_injection", key_terminal },
	{ "deny_socket_families", key_families },
};

/* Parse a test policy. */
static struct json_object *
policy(const char *text)
{
	struct json_object *p = json_tokener_parse(text);
	ck_assert_msg(p != NULL, "bad test policy %s", text);
	return p;
}

/* Build from a policy text; the profile must build. */
static void
build(const char *text, int force, struct seccomp_profile *sp)
{
	struct json_object *p = text ? policy(text) : NULL;
	char *cause = NULL;

	ck_assert_msg(seccomp_profile_build(p, force, sp, &cause) == 0, "build %s: %s",
	    text ? text : "(none)", cause);
	json_object_put(p);
}

/* Building from this policy must fail with a cause containing want. */
static void
build_fails(const char *text, const char *want)
{
	struct json_object *p = policy(text);
	struct seccomp_profile sp;
	char *cause = NULL;

	ck_assert_msg(seccomp_profile_build(p, SECCOMP_PROFILE_FROM_POLICY, &sp, &cause) == -1,
	    "%s was accepted", text);
	ck_assert_msg(cause != NULL && strstr(cause, want) != NULL, "%s: cause %s, want %s", text,
	    cause, want);
	free(cause);
	json_object_put(p);
}

START_TEST(test_default_profile)
{
	struct seccomp_profile sp;

	build(NULL, SECCOMP_PROFILE_FROM_POLICY, &sp);
	ck_assert_int_eq(sp.sp_enabled, 1);
	ck_assert_ptr_nonnull(sp.sp_ctx);
	for (size_t k = 0; k < nitems(key_table); k++)
		for (const char *const *n = key_table[k].names; *n != NULL; n++)
			ck_assert_msg(seccomp_profile_denies(&sp, *n), "%s not denied", *n);
	ck_assert(!seccomp_profile_denies(&sp, "fork"));
	ck_assert(!seccomp_profile_denies(&sp, "execve"));

	/* The record: enabled, "default", every denied name once. */
	struct json_object *r = seccomp_profile_record(&sp), *v;
	ck_assert(json_object_object_get_ex(r, "enabled", &v) && json_object_get_boolean(v));
	ck_assert(json_object_object_get_ex(r, "profile", &v));
	ck_assert_str_eq(json_object_get_string(v), "default");
	ck_assert(json_object_object_get_ex(r, "denied", &v));
	ck_assert_int_eq(json_object_array_length(v), 38);
	ck_assert_int_eq(json_object_object_length(r), 3);
	json_object_put(r);

	/* The debug form names default and bad-arch actions and each key's source. */
	r = seccomp_profile_json(&sp);
	ck_assert(json_object_object_get_ex(r, "bad_arch_action", &v));
	ck_assert_str_eq(json_object_get_string(v), "kill_process");
	ck_assert(json_object_object_get_ex(r, "default_action", &v));
	ck_assert_str_eq(json_object_get_string(v), "allow");
	ck_assert(json_object_object_get_ex(r, "keys", &v));
	ck_assert_int_eq(json_object_object_length(v), 8);
	ck_assert(json_object_object_get_ex(r, "rules", &v));
	ck_assert_int_eq(json_object_array_length(v), (int)sp.sp_nrules);
	json_object_put(r);
	seccomp_profile_free(&sp);
}
END_TEST

START_TEST(test_each_key)
{
	char text[256];

	for (size_t k = 0; k < nitems(key_table); k++) {
		struct seccomp_profile sp;

		snprintf(text, sizeof(text), "{\"linux\": {\"seccomp\": {\"%s\": false}}}",
		    key_table[k].key);
		build(text, SECCOMP_PROFILE_FROM_POLICY, &sp);
		ck_assert_int_eq(sp.sp_enabled, 1);
		for (size_t o = 0; o < nitems(key_table); o++)
			for (const char *const *n = key_table[o].names; *n != NULL; n++)
				ck_assert_msg(seccomp_profile_denies(&sp, *n) == (o != k),
				    "%s false: %s %s", key_table[k].key, *n,
				    o == k ? "still denied" : "no longer denied");
		ck_assert_int_eq(sp.sp_key_set[k], 1);
		seccomp_profile_free(&sp);
	}
	/* All off: enabled, but an empty profile. */
	struct seccomp_profile sp;
	build("{\"linux\": {\"seccomp\": {\"deny_ptrace\": false, \"deny_bpf\": false, "
	    "\"deny_kernel_modules\": false, \"deny_mount_namespace_changes\": false, "
	    "\"deny_kernel_attack_surface\": false, \"deny_terminal_injection\": false, "
	    "\"deny_socket_families\": false}}}",
	    SECCOMP_PROFILE_FROM_POLICY, &sp);
	ck_assert_int_eq(sp.sp_enabled, 1);
	ck_assert_int_eq(sp.sp_nrules, 0);
	seccomp_profile_free(&sp);
}
END_TEST

START_TEST(test_enabled_and_overrides)
{
	struct seccomp_profile sp;
	struct json_object *r, *v;

	build("{\"linux\": {\"seccomp\": {\"enabled\": false}}}", SECCOMP_PROFILE_FROM_POLICY, &sp);
	ck_assert_int_eq(sp.sp_enabled, 0);
	ck_assert_int_eq(sp.sp_nrules, 0);
	ck_assert_ptr_null(sp.sp_ctx);
	r = seccomp_profile_record(&sp);
	ck_assert(json_object_object_get_ex(r, "enabled", &v) && !json_object_get_boolean(v));
	ck_assert(json_object_object_get_ex(r, "denied", &v));
	ck_assert_int_eq(json_object_array_length(v), 0);
	json_object_put(r);
	seccomp_profile_free(&sp);

	/* --linux-seccomp wins over the policy, --no-linux-seccomp over the default. */
	build("{\"linux\": {\"seccomp\": {\"enabled\": false}}}", SECCOMP_PROFILE_FORCE_ON, &sp);
	ck_assert_int_eq(sp.sp_enabled, 1);
	ck_assert(seccomp_profile_denies(&sp, "ptrace"));
	ck_assert_str_eq(sp.sp_enabled_source, "--linux-seccomp");
	seccomp_profile_free(&sp);
	build(NULL, SECCOMP_PROFILE_FORCE_OFF, &sp);
	ck_assert_int_eq(sp.sp_enabled, 0);
	ck_assert_ptr_null(sp.sp_ctx);
	seccomp_profile_free(&sp);
	/* A policy without linux.seccomp, or without linux at all, is the default. */
	build("{\"linux\": {\"network\": {}}}", SECCOMP_PROFILE_FROM_POLICY, &sp);
	ck_assert_int_eq(sp.sp_enabled, 1);
	ck_assert_str_eq(sp.sp_enabled_source, "default");
	seccomp_profile_free(&sp);
}
END_TEST

START_TEST(test_bad_policy)
{
	build_fails("{\"linux\": {\"seccomp\": {\"enabled\": \"false\"}}}", "expected a boolean");
	build_fails("{\"linux\": {\"seccomp\": {\"deny_bpf\": 0}}}", "deny_bpf");
	build_fails("{\"linux\": {\"seccomp\": {\"deny_ptace\": false}}}", "unknown field");
	build_fails("{\"linux\": {\"seccomp\": []}}", "linux.seccomp");
	build_fails("{\"linux\": 3}", "linux must be an object");
}
END_TEST

/* A classic BPF interpreter for what libseccomp emits; the verdict for d. */
static uint32_t
bpf_run(const struct sock_filter *f, size_t n, const struct seccomp_data *d)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
	size_t pc = 0;

	while (pc < n) {
		const struct sock_filter *i = &f[pc++];
		uint32_t src = BPF_SRC(i->code) == BPF_X ? x : i->k;
		int cond;

		switch (BPF_CLASS(i->code)) {
		case BPF_LD:
			if (i->code == (BPF_LD | BPF_W | BPF_ABS)) {
				ck_assert(i->k % 4 == 0 && i->k + 4 <= sizeof(*d));
				memcpy(&a, (const char *)d + i->k, 4);
			} else if (i->code == (BPF_LD | BPF_IMM)) {
				a = i->k;
			} else if (i->code == (BPF_LD | BPF_MEM)) {
				ck_assert(i->k < BPF_MEMWORDS);
				a = mem[i->k];
			} else {
				ck_abort_msg("unknown BPF_LD 0x%x", i->code);
			}
			break;
		case BPF_LDX:
			if (i->code == (BPF_LDX | BPF_IMM)) {
				x = i->k;
			} else if (i->code == (BPF_LDX | BPF_MEM)) {
				ck_assert(i->k < BPF_MEMWORDS);
				x = mem[i->k];
			} else {
				ck_abort_msg("unknown BPF_LDX 0x%x", i->code);
			}
			break;
		case BPF_ST:
		case BPF_STX:
			ck_assert(i->k < BPF_MEMWORDS);
			mem[i->k] = BPF_CLASS(i->code) == BPF_ST ? a : x;
			break;
		case BPF_ALU:
			switch (BPF_OP(i->code)) {
			case BPF_ADD: a += src; break;
			case BPF_SUB: a -= src; break;
			case BPF_AND: a &= src; break;
			case BPF_OR: a |= src; break;
			case BPF_XOR: a ^= src; break;
			case BPF_LSH: a = src < 32 ? a << src : 0; break;
			case BPF_RSH: a = src < 32 ? a >> src : 0; break;
			case BPF_NEG: a = -a; break;
			default: ck_abort_msg("unknown BPF_ALU 0x%x", i->code);
			}
			break;
		case BPF_JMP:
			if (BPF_OP(i->code) == BPF_JA) {
				pc += i->k;
				break;
			}
			switch (BPF_OP(i->code)) {
			case BPF_JEQ: cond = a == src; break;
			case BPF_JGT: cond = a > src; break;
			case BPF_JGE: cond = a >= src; break;
			case BPF_JSET: cond = (a & src) != 0; break;
			default: ck_abort_msg("unknown BPF_JMP 0x%x", i->code); cond = 0;
			}
			pc += cond ? i->jt : i->jf;
			break;
		case BPF_RET:
			return BPF_RVAL(i->code) == BPF_K ? i->k : a;
		case BPF_MISC:
			if (BPF_MISCOP(i->code) == BPF_TAX)
				x = a;
			else
				a = x;
			break;
		default:
			ck_abort_msg("unknown BPF class 0x%x", i->code);
		}
	}
	ck_abort_msg("the filter fell off its end");
	return 0;
}

/* The compiled filter of sp as BPF instructions (caller frees). */
static struct sock_filter *
export_bpf(const struct seccomp_profile *sp, size_t *n)
{
	char *cause = NULL, *buf;
	size_t len;
	int fd = memfd_create("gensee-test-bpf", MFD_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_msg(seccomp_profile_export_bpf(sp, fd, &cause) == 0, "%s", cause);
	ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
	ck_assert_int_eq(util_read_fd(fd, 1 << 20, &buf, &len), 0);
	close(fd);
	ck_assert(len > 0 && len % sizeof(struct sock_filter) == 0);
	*n = len / sizeof(struct sock_filter);
	return (struct sock_filter *)(void *)buf;
}

/* The program seccompbpf.c writes for sp (caller frees). */
static struct sock_filter *
own_program(struct seccomp_profile *sp, size_t *n)
{
	struct sock_filter *f = calloc(BPF_MAXINSNS, sizeof(*f));
	char *cause = NULL;

	ck_assert_ptr_nonnull(f);
	ck_assert_msg(seccomp_profile_program(sp, f, BPF_MAXINSNS, n, &cause) == 0, "%s", cause);
	return f;
}

/* The verdict for one syscall of one arch with argument i set to v. */
static uint32_t
verdict_arg(const struct sock_filter *f, size_t n, uint32_t arch, int nr, int i, uint64_t v)
{
	struct seccomp_data d;

	memset(&d, 0, sizeof(d));
	d.arch = arch;
	d.nr = nr;
	d.args[i] = v;
	return bpf_run(f, n, &d);
}

/* The verdict for one syscall of one arch with arg0. */
static uint32_t
verdict(const struct sock_filter *f, size_t n, uint32_t arch, int nr, uint64_t arg0)
{
	return verdict_arg(f, n, arch, nr, 0, arg0);
}

START_TEST(test_filter_verdicts)
{
#if defined(__x86_64__)
	struct seccomp_profile sp;
	struct sock_filter *f;
	size_t n;
	const uint32_t x64 = AUDIT_ARCH_X86_64;
	const uint64_t thread = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
	    CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;

	/* libseccomp's program, then the one the launcher loads (seccompbpf.c). */
	for (int own = 0; own < 2; own++) {
	build(NULL, SECCOMP_PROFILE_FROM_POLICY, &sp);
	f = own ? own_program(&sp, &n) : export_bpf(&sp, &n);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_getpid, 0), RET_ALLOW);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_execve, 0), RET_ALLOW);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_ptrace, 0), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_bpf, 0), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_mount, 0), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_open_tree, 0), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_setns, 0), RET_EPERM);
	/* clone: only namespace flags are refused, and only those bits are looked at. */
	ck_assert_uint_eq(verdict(f, n, x64, __NR_clone, SIGCHLD), RET_ALLOW);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_clone, thread), RET_ALLOW);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_clone, 0xffffffff00000000ull | SIGCHLD),
	    RET_ALLOW);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_clone, CLONE_NEWUSER | SIGCHLD), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_clone, CLONE_NEWNS), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_clone, CLONE_NEWNET | thread), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_clone, CLONE_NEWPID | CLONE_NEWUTS |
	    CLONE_NEWIPC | CLONE_NEWCGROUP), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_clone3, 0), RET_ENOSYS);
	/* Other ABIs are killed, whatever the number: i386, x32, any foreign arch. */
	ck_assert_uint_eq(verdict(f, n, AUDIT_ARCH_I386, 20 /* getpid */, 0), RET_KILL);
	ck_assert_uint_eq(verdict(f, n, AUDIT_ARCH_I386, 26 /* ptrace */, 0), RET_KILL);
	ck_assert_uint_eq(verdict(f, n, x64, __X32_SYSCALL_BIT | __NR_getpid, 0), RET_KILL);
	ck_assert_uint_eq(verdict(f, n, x64, __X32_SYSCALL_BIT | __NR_ptrace, 0), RET_KILL);
	ck_assert_uint_eq(verdict(f, n, AUDIT_ARCH_AARCH64, __NR_getpid, 0), RET_KILL);
	/* Other processes and kernel surfaces. */
	ck_assert_uint_eq(verdict(f, n, x64, __NR_pidfd_getfd, 0), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_perf_event_open, 0), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_io_uring_setup, 0), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_keyctl, 0), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_userfaultfd, 0), RET_EPERM);
	/* The terminal: TIOCSTI and TIOCLINUX on their low 32 bits, other ioctls allowed. */
	ck_assert_uint_eq(verdict_arg(f, n, x64, __NR_ioctl, 1, TIOCSTI), RET_EPERM);
	ck_assert_uint_eq(verdict_arg(f, n, x64, __NR_ioctl, 1, 0x100000000ull | TIOCSTI),
	    RET_EPERM);
	ck_assert_uint_eq(verdict_arg(f, n, x64, __NR_ioctl, 1, TIOCLINUX), RET_EPERM);
	ck_assert_uint_eq(verdict_arg(f, n, x64, __NR_ioctl, 1, TIOCGWINSZ), RET_ALLOW);
	ck_assert_uint_eq(verdict_arg(f, n, x64, __NR_ioctl, 1, FIONREAD), RET_ALLOW);
	/* Socket families: exactly UNIX, INET, INET6 and NETLINK, over the whole range. */
	for (uint64_t fam = 0; fam < 4096; fam++) {
		uint32_t want = fam == AF_UNIX || fam == AF_INET || fam == AF_INET6 ||
		    fam == AF_NETLINK ? RET_ALLOW : RET_EPERM;
		ck_assert_msg(verdict(f, n, x64, __NR_socket, fam) == want, "socket(%llu)",
		    (unsigned long long)fam);
		ck_assert_msg(verdict(f, n, x64, __NR_socketpair, fam) == want,
		    "socketpair(%llu)", (unsigned long long)fam);
	}
	for (int b = 12; b < 64; b++) {
		ck_assert_uint_eq(verdict(f, n, x64, __NR_socket, 1ull << b), RET_EPERM);
		ck_assert_uint_eq(verdict(f, n, x64, __NR_socket, (1ull << b) | AF_INET),
		    RET_EPERM);
	}
	ck_assert_uint_eq(verdict(f, n, x64, __NR_socket, AF_VSOCK), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_socket, 0x100000000ull | AF_VSOCK), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_socket, 0xffffffffull), RET_EPERM);
	/* personality: Docker's five values, nothing else. */
	const uint64_t safe[] = { 0, PER_LINUX32, UNAME26, UNAME26 | PER_LINUX32, 0xffffffffull };
	for (size_t i = 0; i < nitems(safe); i++)
		ck_assert_uint_eq(verdict(f, n, x64, __NR_personality, safe[i]), RET_ALLOW);
	const uint64_t bad[] = { 1, 7, 9, READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO,
		UNAME26 | 1, UNAME26 | ADDR_NO_RANDOMIZE, 0xfffffffeull, 0x1ffffffffull,
		0x100000000ull, 0x7fffffff };
	for (size_t i = 0; i < nitems(bad); i++)
		ck_assert_msg(verdict(f, n, x64, __NR_personality, bad[i]) == RET_EPERM,
		    "personality(0x%llx)", (unsigned long long)bad[i]);
	for (int b = 0; b < 64; b++) {
		uint64_t v = 1ull << b;
		uint32_t want = v == PER_LINUX32 || v == UNAME26 ? RET_ALLOW : RET_EPERM;
		ck_assert_msg(verdict(f, n, x64, __NR_personality, v) == want,
		    "personality(1 << %d)", b);
	}
	free(f);
	seccomp_profile_free(&sp);

	/* A key set false really leaves its syscalls out of the filter. */
	build("{\"linux\": {\"seccomp\": {\"deny_ptrace\": false}}}", SECCOMP_PROFILE_FROM_POLICY,
	    &sp);
	f = own ? own_program(&sp, &n) : export_bpf(&sp, &n);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_ptrace, 0), RET_ALLOW);
	ck_assert_uint_eq(verdict(f, n, x64, __NR_bpf, 0), RET_EPERM);
	ck_assert_uint_eq(verdict(f, n, AUDIT_ARCH_I386, 20, 0), RET_KILL);
	free(f);
	seccomp_profile_free(&sp);
	}
#else
	ck_abort_msg("the verdict table is written for x86_64");
#endif
}
END_TEST

/*
 * The program seccompbpf.c writes decides exactly as libseccomp's for the
 * same profile: every key alone, all but one, all and none, notified or
 * not; every syscall number of both ABIs and the edges; the arguments the
 * rules read at their boundaries and at random.
 */
START_TEST(test_program_matches_libseccomp)
{
	static const uint64_t edges[] = {
		0, 1, 2, 3, 4, 7, 8, 9, 10, 11, 15, 16, 17, 0x7f, 0x80, 0xff, 0x100,
		0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff, 0x100000000ull, 0x100000001ull,
		0x100000002ull, 0x10000000aull, 0xffffffff00000001ull, 0xffffffffffffffffull,
		0x8000000000000000ull, PER_LINUX32, UNAME26, UNAME26 | PER_LINUX32,
		UNAME26 | 1, TIOCSTI, TIOCLINUX, 0x100000000ull | TIOCSTI, TIOCGWINSZ,
		CLONE_NEWNS, CLONE_NEWUSER | SIGCHLD, CLONE_NEWCGROUP | CLONE_VM,
		CLONE_NEWUTS | CLONE_NEWIPC, CLONE_NEWPID | 0x100000000ull, CLONE_NEWNET,
		CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD, SIGCHLD,
	};
	const uint32_t arches[] = { seccomp_arch_native(), AUDIT_ARCH_I386, AUDIT_ARCH_AARCH64,
		AUDIT_ARCH_X86_64, 0 };
	uint64_t rnd = 0x9e3779b97f4a7c15ull;

	for (int variant = 0; variant < 2 * (2 * SECCOMP_PROFILE_NKEYS + 2); variant++) {
		int notify = variant & 1, v = variant / 2;
		struct json_object *pol = json_object_new_object(), *lx = json_object_new_object(),
		    *sc = json_object_new_object();
		for (int k = 0; k < SECCOMP_PROFILE_NKEYS; k++) {
			/* v < NKEYS: only key v; < 2 NKEYS: all but one; then all, then none. */
			int on = v < SECCOMP_PROFILE_NKEYS ? k == v :
			    v < 2 * SECCOMP_PROFILE_NKEYS ? k != v - SECCOMP_PROFILE_NKEYS :
			    v == 2 * SECCOMP_PROFILE_NKEYS;
			const char *name = seccomp_profile_key_name((enum seccomp_profile_key)k);
			json_object_object_add(sc, strrchr(name, '.') + 1,
			    json_object_new_boolean(on));
		}
		json_object_object_add(lx, "seccomp", sc);
		json_object_object_add(pol, "linux", lx);
		struct seccomp_profile sp;
		char *cause = NULL;
		size_t nl, no;
		ck_assert_msg(seccomp_profile_build_notify(pol, SECCOMP_PROFILE_FORCE_ON, notify, &sp,
		    &cause) == 0, "%s", cause);
		json_object_put(pol);
		struct sock_filter *lib = export_bpf(&sp, &nl), *own = own_program(&sp, &no);

		for (size_t a = 0; a < nitems(arches); a++) {
			/* A foreign architecture is killed whatever the number: 0..499 tell. */
			for (uint32_t nr = 0; nr < (a == 0 ? 1100U : 500U); nr++) {
				/* The numbers, then the same with x32's bit, then the top. */
				uint32_t num = nr < 500 ? nr : nr < 1000 ?
				    (nr - 500) | __X32_SYSCALL_BIT : 0xffffffffU - (nr - 1000);
				struct seccomp_data d;
				memset(&d, 0, sizeof(d));
				d.arch = arches[a];
				d.nr = (int)num;
				ck_assert_msg(bpf_run(lib, nl, &d) == bpf_run(own, no, &d),
				    "variant %d arch 0x%x nr 0x%x", variant, arches[a], num);
				/* Arguments matter only to the native numbers with conditions. */
				int ruled = 0;
				for (size_t r = 0; r < sp.sp_nrules && !ruled; r++)
					ruled = sp.sp_rules[r].spr_when != SECCOMP_WHEN_ALWAYS &&
					    seccomp_syscall_resolve_name(
					    sp.sp_rules[r].spr_syscall) == (int)num;
				if (a != 0 || num >= 500 || (!ruled && num > 3))
					continue;
				for (int i = 0; i < 3; i++) {
					for (size_t e = 0; e < nitems(edges) + 24; e++) {
						if (e < nitems(edges)) {
							d.args[i] = edges[e];
						} else {
							rnd ^= rnd << 13;
							rnd ^= rnd >> 7;
							rnd ^= rnd << 17;
							d.args[i] = e & 1 ? rnd : rnd & 0xffffffffull;
						}
						ck_assert_msg(bpf_run(lib, nl, &d) == bpf_run(own, no, &d),
						    "variant %d nr %u arg%d 0x%llx", variant, num, i,
						    (unsigned long long)d.args[i]);
					}
					d.args[i] = 0;
				}
			}
		}
		free(lib);
		free(own);
		seccomp_profile_free(&sp);
	}
}
END_TEST

/* Load the program seccompbpf.c writes, as run.c's held child does. */
static int load_from_bpf;

/* In a child: build and load the default profile as run.c does. */
static void
child_load(int rep)
{
	struct seccomp_profile sp;
	char *cause = NULL;

	CHILD_CHECK(seccomp_profile_build(NULL, SECCOMP_PROFILE_FROM_POLICY, &sp, &cause) == 0,
	    "build: %s", cause);
	CHILD_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no_new_privs: %m");
	if (!load_from_bpf) {
		CHILD_CHECK(seccomp_profile_load(&sp, &cause) == 0, "load: %s", cause);
		return;
	}
	static struct sock_filter prog[BPF_MAXINSNS];
	size_t n;
	CHILD_CHECK(seccomp_profile_program(&sp, prog, nitems(prog), &n, &cause) == 0,
	    "program: %s", cause);
	CHILD_CHECK(seccomp_profile_load_program(&sp, prog, n, &cause) == 0, "load_program: %s",
	    cause);
}

/* A thread that only returns its argument. */
static void *
thread_fn(void *arg)
{
	return arg;
}

/* In a child: the denied calls fail as profiled and ordinary process creation works. */
static void
child_denies(int rep)
{
	int status;
	uint64_t clone3_args[11] = { CLONE_NEWUSER, 0, 0, 0, SIGCHLD };
	union { uint32_t map_type; char pad[128]; } attr;

	child_load(rep);
	errno = 0;
	CHILD_CHECK(ptrace(PTRACE_TRACEME, 0, NULL, NULL) == -1 && errno == EPERM,
	    "ptrace(PTRACE_TRACEME): %m");
	memset(&attr, 0, sizeof(attr));
	attr.map_type = 2; /* BPF_MAP_TYPE_ARRAY */
	CHILD_CHECK(syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, &attr, sizeof(attr)) == -1 &&
	    errno == EPERM, "bpf: %m");
	CHILD_CHECK(mount("none", "/tmp", "tmpfs", 0, NULL) == -1 && errno == EPERM, "mount: %m");
	CHILD_CHECK(unshare(CLONE_NEWNS) == -1 && errno == EPERM, "unshare(CLONE_NEWNS): %m");
	CHILD_CHECK(unshare(CLONE_NEWUSER) == -1 && errno == EPERM, "unshare(CLONE_NEWUSER): %m");
	CHILD_CHECK(setns(-1, CLONE_NEWNS) == -1 && errno == EPERM, "setns: %m");
	long r = syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), NULL, NULL, NULL, 0UL);
	if (r == 0)
		_exit(99);
	CHILD_CHECK(r == -1 && errno == EPERM, "clone(CLONE_NEWUSER): %ld %m", r);
	r = syscall(SYS_clone3, clone3_args, sizeof(clone3_args));
	if (r == 0)
		_exit(99);
	CHILD_CHECK(r == -1 && errno == ENOSYS, "clone3: %ld %m", r);

	/* What must keep working: fork, exec, threads (clone3 falls back to clone). */
	pid_t pid = fork();
	CHILD_CHECK(pid >= 0, "fork: %m");
	if (pid == 0)
		_exit(7);
	CHILD_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 7, "forked child: 0x%x", status);
	pid = fork();
	CHILD_CHECK(pid >= 0, "fork: %m");
	if (pid == 0) {
		char *argv[] = { "true", NULL };
		execve("/bin/true", argv, environ);
		_exit(98);
	}
	CHILD_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0, "execve /bin/true: 0x%x", status);
	pthread_t t;
	void *ret = NULL;
	CHILD_CHECK((errno = pthread_create(&t, NULL, thread_fn, &status)) == 0,
	    "pthread_create: %m");
	CHILD_CHECK(pthread_join(t, &ret) == 0 && ret == &status, "pthread_join");
	CHILD_CHECK(getpid() > 0, "getpid");
}

START_TEST(test_loaded_filter)
{
	char msg[512];
	int status = unit_in_child(child_denies, msg, sizeof(msg));

	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "filtered child: %s (0x%x)",
	    msg, status);
}
END_TEST

START_TEST(test_loaded_from_bpf)
{
	char msg[512];
	int status;

	load_from_bpf = 1;
	status = unit_in_child(child_denies, msg, sizeof(msg));
	load_from_bpf = 0;
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "filtered child: %s (0x%x)",
	    msg, status);
}
END_TEST

/* In a child: no program, or one the kernel refuses: never a filter, and a cause. */
static void
child_bad_bpf(int rep)
{
	struct seccomp_profile sp;
	char *cause = NULL;
	/* Falls off its end without a return: the kernel's checker refuses it. */
	static const struct sock_filter no_ret[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
	};
	static const struct sock_filter bad_jump[] = {
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 5, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};

	(void)rep;
	memset(&sp, 0, sizeof(sp));
	CHILD_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no_new_privs: %m");
	CHILD_CHECK(seccomp_profile_load_program(&sp, no_ret, 0, &cause) == -1 && cause != NULL,
	    "an empty program loaded");
	free(cause);
	cause = NULL;
	CHILD_CHECK(seccomp_profile_load_program(&sp, no_ret, nitems(no_ret), &cause) == -1 &&
	    cause != NULL, "a program without a return loaded");
	free(cause);
	cause = NULL;
	CHILD_CHECK(seccomp_profile_load_program(&sp, bad_jump, nitems(bad_jump), &cause) == -1 &&
	    cause != NULL, "a jump past the end loaded");
	free(cause);
	/* Nothing was installed: a syscall the profile denies still works. */
	CHILD_CHECK(unshare(0) == 0, "unshare(0): %m");
	int mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
	CHILD_CHECK(mode == 0, "seccomp mode %d after refused loads", mode);
}

START_TEST(test_bad_bpf_refused)
{
	char msg[512];
	int status = unit_in_child(child_bad_bpf, msg, sizeof(msg));

	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %s (0x%x)", msg,
	    status);
}
END_TEST

static void
child_x32(int rep)
{
	child_load(rep);
	syscall(__X32_SYSCALL_BIT | __NR_getpid);
	dprintf(rep, "x32 getpid returned");
	_exit(1);
}

START_TEST(test_x32_killed)
{
	char msg[512];
	int status = unit_in_child(child_x32, msg, sizeof(msg));

	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS,
	    "x32 syscall not killed with SIGSYS: %s (0x%x)", msg, status);
}
END_TEST

#if defined(__x86_64__)
/* getpid through the i386 entry point (int $0x80, eax 20); exits 0 if it worked. */
static void
child_int80_plain(int rep)
{
	long r;

	(void)rep;
	/* Die of the fault as without sanitizers, whose runtimes catch SIGSEGV. */
	if (signal(SIGSEGV, SIG_DFL) == SIG_ERR)
		_exit(4);
	__asm__ volatile ("int $0x80" : "=a"(r) : "a"(20L) : "memory", "cc");
	_exit(r == (long)getpid() ? 0 : 3);
}

static void
child_int80_filtered(int rep)
{
	child_load(rep);
	child_int80_plain(rep);
}
#endif

START_TEST(test_int80_killed)
{
#if defined(__x86_64__)
	char msg[512];
	int plain = unit_in_child(child_int80_plain, msg, sizeof(msg));
	int status = unit_in_child(child_int80_filtered, msg, sizeof(msg));

	if (WIFEXITED(plain) && WEXITSTATUS(plain) == 0) {
		ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS,
		    "i386 getpid not killed with SIGSYS: %s (0x%x)", msg, status);
	} else {
		/*
		 * This kernel has no usable i386 entry (int $0x80 faults even
		 * unfiltered, e.g. ia32_emulation=0 or a hypervisor without
		 * it): nothing to sidestep with. The filter's i386 verdict is
		 * still proven by test_filter_verdicts.
		 */
		ck_assert_msg(WIFSIGNALED(plain), "int $0x80 unfiltered: 0x%x", plain);
		fprintf(stderr, "note: int $0x80 is unavailable on this kernel (signal %d "
		    "unfiltered); the i386 kill is checked on the BPF only\n", WTERMSIG(plain));
		ck_assert_msg(WIFSIGNALED(status), "int $0x80 returned under the filter: 0x%x",
		    status);
	}
#else
	ck_abort_msg("int $0x80 is x86 only");
#endif
}
END_TEST

/*
 * Every denied syscall, called so that without the filter it fails with
 * something other than EPERM (or succeeds) when run as root: then EPERM
 * under the filter is the filter's doing. Each call runs in its own child.
 * syscall(2) is variadic: long and size_t arguments are passed as such.
 */
static const char *probe_name;
static long
probe(const char *name)
{
	if (strcmp(name, "ptrace") == 0)
		return ptrace(PTRACE_TRACEME, 0, NULL, NULL);
	if (strcmp(name, "process_vm_readv") == 0)
		return syscall(SYS_process_vm_readv, getpid(), NULL, 0UL, NULL, 0UL, 0UL);
	if (strcmp(name, "process_vm_writev") == 0)
		return syscall(SYS_process_vm_writev, getpid(), NULL, 0UL, NULL, 0UL, 0UL);
	if (strcmp(name, "bpf") == 0)
		return syscall(SYS_bpf, 0xffff, NULL, 0);
	if (strcmp(name, "init_module") == 0)
		return syscall(SYS_init_module, NULL, 0UL, "");
	if (strcmp(name, "finit_module") == 0)
		return syscall(SYS_finit_module, -1, "", 0);
	if (strcmp(name, "delete_module") == 0)
		return syscall(SYS_delete_module, "gensee_none", 0);
	if (strcmp(name, "mount") == 0)
		return mount(NULL, "/nonexistent-gensee", NULL, MS_REMOUNT, NULL);
	if (strcmp(name, "umount2") == 0)
		return umount2("/nonexistent-gensee", 0);
	if (strcmp(name, "pivot_root") == 0)
		return syscall(SYS_pivot_root, "/nonexistent-gensee", "/nonexistent-gensee");
	if (strcmp(name, "fsopen") == 0)
		return syscall(SYS_fsopen, "gensee-nofs", 0);
	if (strcmp(name, "fsconfig") == 0)
		return syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0);
	if (strcmp(name, "fsmount") == 0)
		return syscall(SYS_fsmount, -1, 0, 0);
	if (strcmp(name, "fspick") == 0)
		return syscall(SYS_fspick, AT_FDCWD, "/nonexistent-gensee", 0);
	if (strcmp(name, "move_mount") == 0)
		return syscall(SYS_move_mount, AT_FDCWD, "/nonexistent-gensee", AT_FDCWD,
		    "/nonexistent-gensee", 0);
	if (strcmp(name, "open_tree") == 0)
		return syscall(SYS_open_tree, AT_FDCWD, "/nonexistent-gensee", 0);
	if (strcmp(name, "mount_setattr") == 0)
		return syscall(SYS_mount_setattr, AT_FDCWD, "/nonexistent-gensee", 0, NULL, (size_t)0);
	if (strcmp(name, "unshare") == 0)
		return unshare(CLONE_NEWNS);
	if (strcmp(name, "setns") == 0)
		return setns(-1, 0);
	if (strcmp(name, "clone") == 0) {
		long r = syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), NULL, NULL, NULL, 0UL);
		if (r == 0)
			_exit(0);
		return r < 0 ? -1 : 0;
	}
	if (strcmp(name, "clone3") == 0) {
		uint64_t args[11] = { CLONE_NEWUSER, 0, 0, 0, SIGCHLD };
		long r = syscall(SYS_clone3, args, sizeof(args));
		if (r == 0)
			_exit(0);
		return r < 0 ? -1 : 0;
	}
	if (strcmp(name, "pidfd_getfd") == 0)
		return syscall(SYS_pidfd_getfd, -1, 0, 0);
	if (strcmp(name, "kcmp") == 0)
		return syscall(SYS_kcmp, getpid(), getpid(), 0 /* KCMP_FILE */, 0UL, 0UL);
	if (strcmp(name, "perf_event_open") == 0)
		return syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0UL);
	if (strcmp(name, "io_uring_setup") == 0)
		return syscall(SYS_io_uring_setup, 0, NULL);
	if (strcmp(name, "io_uring_enter") == 0)
		return syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, (size_t)0);
	if (strcmp(name, "io_uring_register") == 0)
		return syscall(SYS_io_uring_register, -1, 0, NULL, 0);
	if (strcmp(name, "userfaultfd") == 0)
		return syscall(SYS_userfaultfd, ~0);
	if (strcmp(name, "keyctl") == 0)
		return syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -9999L, 0L);
	if (strcmp(name, "add_key") == 0)
		return syscall(SYS_add_key, NULL, NULL, NULL, (size_t)0, 0);
	if (strcmp(name, "request_key") == 0)
		return syscall(SYS_request_key, NULL, NULL, NULL, 0);
	if (strcmp(name, "modify_ldt") == 0)
		return syscall(SYS_modify_ldt, 0, NULL, 0UL);
	if (strcmp(name, "name_to_handle_at") == 0)
		return syscall(SYS_name_to_handle_at, AT_FDCWD, "/nonexistent-gensee", NULL, NULL, 0);
	if (strcmp(name, "open_by_handle_at") == 0)
		return syscall(SYS_open_by_handle_at, -1, NULL, 0);
	if (strcmp(name, "personality") == 0)
		return personality(READ_IMPLIES_EXEC) == -1 ? -1 : 0;
	if (strcmp(name, "ioctl") == 0)
		return ioctl(-1, TIOCSTI, "x");
	if (strcmp(name, "socket") == 0)
		return socket(AF_VSOCK, SOCK_STREAM, 0);
	if (strcmp(name, "socketpair") == 0) {
		int sv[2];
		return socketpair(63, SOCK_STREAM, 0, sv);
	}
	errno = ENOTSUP;
	return -1;
}

/* Exit with the probe's errno (0 on success). */
static void
child_probe_plain(int rep)
{
	(void)rep;
	errno = 0;
	_exit(probe(probe_name) < 0 ? errno : 0);
}

/* The same probe under the filter. */
static void
child_probe_filtered(int rep)
{
	child_load(rep);
	child_probe_plain(rep);
}

START_TEST(test_every_denied_syscall)
{
	char msg[512];
	int status;

	unit_require_root();
	for (size_t k = 0; k < nitems(key_table); k++) {
		for (const char *const *n = key_table[k].names; *n != NULL; n++) {
			int want = strcmp(*n, "clone3") == 0 ? ENOSYS : EPERM;

			probe_name = *n;
			status = unit_in_child(child_probe_plain, msg, sizeof(msg));
			ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != ENOTSUP &&
			    WEXITSTATUS(status) != want, "%s without the filter: %s (0x%x): "
			    "the probe proves nothing", *n, strerror(WEXITSTATUS(status)), status);
			status = unit_in_child(child_probe_filtered, msg, sizeof(msg));
			ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == want,
			    "%s under the filter: %s %s (0x%x)", *n, msg,
			    strerror(WEXITSTATUS(status)), status);
		}
	}
}
END_TEST

static int notify_sock[2];
static unsigned int notify_seen[512];

static void
notify_count(int nr, void *arg)
{
	(void)arg;
	if (nr >= 0 && nr < 512)
		__atomic_fetch_add(&notify_seen[nr], 1, __ATOMIC_RELAXED);
}

/* In a child: the profile with refusals sent to a listener in the parent. */
static void
child_notified(int rep)
{
	struct seccomp_profile sp;
	char *cause = NULL, byte = 'L', cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
		.msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;

	CHILD_CHECK(seccomp_profile_build(NULL, SECCOMP_PROFILE_FROM_POLICY, &sp, &cause) == 0,
	    "build: %s", cause);
	CHILD_CHECK(seccomp_profile_notify(&sp, &cause) == 0, "notify: %s", cause);
	CHILD_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no_new_privs: %m");
	CHILD_CHECK(seccomp_profile_load(&sp, &cause) == 0, "load: %s", cause);
	CHILD_CHECK(sp.sp_notify_fd >= 0, "no listener");
	memset(cbuf, 0, sizeof(cbuf));
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &sp.sp_notify_fd, sizeof(int));
	CHILD_CHECK(sendmsg(notify_sock[1], &m, 0) == 1, "sendmsg: %m");
	close(sp.sp_notify_fd);
	/* Answered by the parent with the rule's errno, twice; clone3 still in the kernel. */
	errno = 0;
	CHILD_CHECK(ptrace(PTRACE_TRACEME, 0, NULL, NULL) == -1 && errno == EPERM, "ptrace: %m");
	errno = 0;
	CHILD_CHECK(ptrace(PTRACE_TRACEME, 0, NULL, NULL) == -1 && errno == EPERM, "ptrace: %m");
	CHILD_CHECK(syscall(SYS_io_uring_setup, 0, NULL) == -1 && errno == EPERM, "io_uring: %m");
	uint64_t args[11] = { 0, 0, 0, 0, SIGCHLD };
	CHILD_CHECK(syscall(SYS_clone3, args, sizeof(args)) == -1 && errno == ENOSYS, "clone3: %m");
	/* Ordinary calls are not notified at all. */
	CHILD_CHECK(getpid() > 0, "getpid");
}

/* The parent's listener: take the fd and serve it (until the process exits). */
static void *
notify_serve(void *arg)
{
	char byte, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
		.msg_controllen = sizeof(cbuf) };
	struct seccomp_profile *sp = arg;
	int fd = -1;

	if (recvmsg(notify_sock[0], &m, 0) == 1 && CMSG_FIRSTHDR(&m) != NULL)
		memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
	if (fd >= 0)
		seccomp_profile_serve(sp, fd, notify_count, NULL);
	return NULL;
}

START_TEST(test_notified_refusals)
{
	static struct seccomp_profile sp;
	char msg[512] = "", *cause = NULL;
	int rep[2], status;
	pthread_t t;
	pid_t pid;
	ssize_t n;

	/* The same profile as the child's, for the errno of each rule. */
	ck_assert_msg(seccomp_profile_build(NULL, SECCOMP_PROFILE_FROM_POLICY, &sp, &cause) == 0,
	    "%s", cause);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, notify_sock), 0);
	ck_assert_int_eq(pipe2(rep, O_CLOEXEC), 0);
	/* Fork before the listener thread exists: a fork of a threaded process is fragile. */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(rep[0]);
		alarm(20);
		child_notified(rep[1]);
		_exit(0);
	}
	close(rep[1]);
	close(notify_sock[1]);
	ck_assert_int_eq(pthread_create(&t, NULL, notify_serve, &sp), 0);
	ck_assert_int_eq(pthread_detach(t), 0);
	ck_assert_int_eq(unit_wait_pid(pid, 30000, &status), 0);
	if ((n = read(rep[0], msg, sizeof(msg) - 1)) > 0)
		msg[n] = '\0';
	close(rep[0]);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "notified child: %s (0x%x)",
	    msg, status);
	ck_assert_uint_eq(__atomic_load_n(&notify_seen[__NR_ptrace], __ATOMIC_RELAXED), 2);
	ck_assert_uint_eq(__atomic_load_n(&notify_seen[__NR_io_uring_setup], __ATOMIC_RELAXED), 1);
	ck_assert_uint_eq(__atomic_load_n(&notify_seen[__NR_clone3], __ATOMIC_RELAXED), 0);
	ck_assert_uint_eq(__atomic_load_n(&notify_seen[__NR_getpid], __ATOMIC_RELAXED), 0);
}
END_TEST

static Suite *
seccomp_suite(void)
{
	Suite *s = suite_create("seccomp");
	TCase *tc = tcase_create("profile");

	tcase_add_test(tc, test_default_profile);
	tcase_add_test(tc, test_each_key);
	tcase_add_test(tc, test_enabled_and_overrides);
	tcase_add_test(tc, test_bad_policy);
	tcase_add_test(tc, test_filter_verdicts);
	tcase_add_test(tc, test_program_matches_libseccomp);
	/* The differential check runs two interpreters a million times: slow under ASan. */
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("kernel");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_loaded_filter);
	tcase_add_test(tc, test_loaded_from_bpf);
	tcase_add_test(tc, test_bad_bpf_refused);
	tcase_add_test(tc, test_x32_killed);
	tcase_add_test(tc, test_int80_killed);
	tcase_add_test(tc, test_every_denied_syscall);
	tcase_add_test(tc, test_notified_refusals);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(seccomp_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
