/*
 * seccompbpf.c: the profile's filter as classic BPF, written directly.
 *
 * Why not libseccomp's compiler here: building its rule database and
 * exporting the program costs about 1.1 ms in a fresh process, and up to
 * 3 ms while a launch competes for the CPUs, on the path of every
 * sandboxed run. The profile has four rule shapes (seccomp.h) and no rule
 * of the user's, so its program is small and made here in one pass, in
 * microseconds. libseccomp still names the syscalls (the plan's numbers come
 * from seccomp_syscall_resolve_name) and the native architecture, and the unit
 * tests run this program and libseccomp's for the same profiles through a
 * BPF interpreter over every syscall number and edge argument, requiring
 * the same action for each. Other architectures (where one audit
 * architecture may carry several syscall ABIs, and where these tests have
 * not run) use libseccomp's program.
 *
 * The program: a wrong architecture kills the process (an i386 or x32
 * entry point would bypass every rule), then each denied syscall number
 * is compared in turn; a number with conditions jumps into its own block,
 * which decides alone and ends with "allow".
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <seccomp.h> /* ours: see seccomp.h */

#include "util.h"

#define OFF_NR offsetof(struct seccomp_data, nr)
#define OFF_ARCH offsetof(struct seccomp_data, arch)

/* The low and high 32-bit halves of argument i. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define OFF_ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))
#define OFF_ARG_HI(i) (offsetof(struct seccomp_data, args) + 8 * (i) + 4)
#else
#define OFF_ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i) + 4)
#define OFF_ARG_HI(i) (offsetof(struct seccomp_data, args) + 8 * (i))
#endif

/* x86-64's x32 ABI shares its audit architecture; its numbers have this bit. */
#define X32_SYSCALL_BIT 0x40000000U

struct bpfgen {
	struct sock_filter *bg_prog;
	size_t bg_n, bg_max;
	int bg_overflow;
};

static size_t
gen(struct bpfgen *g, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	if (g->bg_n == g->bg_max) {
		g->bg_overflow = 1;
		return g->bg_n;
	}
	g->bg_prog[g->bg_n] = (struct sock_filter)BPF_JUMP(code, k, jt, jf);
	return g->bg_n++;
}

static void
gen_ld(struct bpfgen *g, uint32_t off)
{
	gen(g, BPF_LD | BPF_W | BPF_ABS, 0, 0, off);
}

static void
gen_ret(struct bpfgen *g, uint32_t action)
{
	gen(g, BPF_RET | BPF_K, 0, 0, action);
}

/* What a rule answers, as seccomp.c's libseccomp rules do. */
static uint32_t
rule_action(const struct seccomp_profile *sp, const struct seccomp_profile_rule *r)
{
	if (sp->sp_notify && r->spr_errno != ENOSYS)
		return SECCOMP_RET_USER_NOTIF;
	return SECCOMP_RET_ERRNO | ((uint32_t)r->spr_errno & SECCOMP_RET_DATA);
}

/*
 * The conditions of one rule, falling through when it does not apply. Its
 * value is a 32-bit one (the table's flags, requests and families), so the
 * argument's high half only matters to NOT_IN, where anything there is
 * refused, as libseccomp's "above 0xffffffff" rule does.
 */
static int
gen_rule(struct bpfgen *g, const struct seccomp_profile *sp, const struct seccomp_profile_rule *r)
{
	uint32_t act = rule_action(sp, r);

	if (r->spr_arg > 5 || r->spr_value > 0xffffffffULL)
		return -1;
	switch (r->spr_when) {
	case SECCOMP_WHEN_ALWAYS:
		gen_ret(g, act);
		return 0;
	case SECCOMP_WHEN_FLAG:
		/* Every bit of the value set (a flag may be several bits). */
		gen_ld(g, OFF_ARG_LO(r->spr_arg));
		gen(g, BPF_ALU | BPF_AND | BPF_K, 0, 0, (uint32_t)r->spr_value);
		gen(g, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, (uint32_t)r->spr_value);
		gen_ret(g, act);
		return 0;
	case SECCOMP_WHEN_EQ32:
		gen_ld(g, OFF_ARG_LO(r->spr_arg));
		gen(g, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, (uint32_t)r->spr_value);
		gen_ret(g, act);
		return 0;
	case SECCOMP_WHEN_NOT_IN:
		if (r->spr_nallowed > 200)
			return -1;
		gen_ld(g, OFF_ARG_HI(r->spr_arg));
		gen(g, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 0);
		gen_ret(g, act);
		gen_ld(g, OFF_ARG_LO(r->spr_arg));
		/* An allowed value jumps over the refusal that ends the list. */
		for (size_t i = 0; i < r->spr_nallowed; i++)
			gen(g, BPF_JMP | BPF_JEQ | BPF_K, (uint8_t)(r->spr_nallowed - i), 0,
			    r->spr_allowed[i]);
		gen_ret(g, act);
		return 0;
	}
	return -1;
}

static int
gen_program(const struct seccomp_profile *sp, uint32_t arch, struct bpfgen *g)
{
	int nrs[SECCOMP_PROFILE_MAX_RULES];

	/* The plan's numbers; -1 where this architecture has none (libseccomp's pseudo numbers). */
	for (size_t i = 0; i < sp->sp_nrules; i++)
		nrs[i] = sp->sp_rules[i].spr_nr < 0 ? -1 : sp->sp_rules[i].spr_nr;
	gen_ld(g, OFF_ARCH);
	gen(g, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, arch);
	gen_ret(g, SECCOMP_RET_KILL_PROCESS);
	gen_ld(g, OFF_NR);
	if (arch == AUDIT_ARCH_X86_64) {
		/* x32 numbers are refused like a wrong architecture; -1 (a skipped call) is not. */
		gen(g, BPF_JMP | BPF_JGE | BPF_K, 0, 2, X32_SYSCALL_BIT);
		gen(g, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 0xffffffffU);
		gen_ret(g, SECCOMP_RET_KILL_PROCESS);
	}
	for (size_t i = 0; i < sp->sp_nrules; i++) {
		int nr = nrs[i], seen = 0;

		for (size_t j = 0; j < i && !seen; j++)
			seen = nrs[j] == nr;
		if (nr < 0 || seen)
			continue;	/* absent here, or already in its number's block */
		if (sp->sp_rules[i].spr_when == SECCOMP_WHEN_ALWAYS) {
			gen(g, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, (uint32_t)nr);
			gen_ret(g, rule_action(sp, &sp->sp_rules[i]));
			continue;
		}
		/* A block may be longer than a conditional jump reaches: jump over it with ja. */
		gen(g, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, (uint32_t)nr);
		size_t skip = gen(g, BPF_JMP | BPF_JA, 0, 0, 0);
		for (size_t j = i; j < sp->sp_nrules; j++) {
			if (nrs[j] != nr)
				continue;
			if (gen_rule(g, sp, &sp->sp_rules[j]) != 0)
				return -1;
			if (sp->sp_rules[j].spr_when == SECCOMP_WHEN_ALWAYS)
				break;	/* what follows could never be reached */
		}
		gen_ret(g, SECCOMP_RET_ALLOW);
		if (!g->bg_overflow)
			g->bg_prog[skip].k = (uint32_t)(g->bg_n - skip - 1);
	}
	gen_ret(g, SECCOMP_RET_ALLOW);
	return g->bg_overflow ? -1 : 0;
}

/* Elsewhere: libseccomp's own program, exported through a pipe and read back. */
static int
libseccomp_program(struct seccomp_profile *sp, struct sock_filter *prog, size_t max,
    size_t *n, char **cause)
{
	int p[2], rc = -1;
	char *buf = NULL;
	size_t got = 0;

	if (sp->sp_ctx == NULL && seccomp_profile_compile(sp, cause) != 0)
		return -1;
	if (pipe2(p, O_CLOEXEC) != 0) {
		util_cause(cause, "seccomp: pipe: %s", strerror(errno));
		return -1;
	}
	/* At most 32 KiB (BPF_MAXINSNS): a pipe takes it without a reader. */
	int exported = seccomp_profile_export_bpf(sp, p[1], cause);
	close(p[1]);
	if (exported == 0) {
		if (util_read_fd(p[0], max * sizeof(*prog), &buf, &got) != 0 || got == 0 ||
		    got % sizeof(*prog) != 0) {
			util_cause(cause, "seccomp: libseccomp's program does not fit (%zu bytes)",
			    got);
		} else {
			memcpy(prog, buf, got);
			*n = got / sizeof(*prog);
			rc = 0;
		}
	}
	free(buf);
	close(p[0]);
	return rc;
}

int
seccomp_profile_program(struct seccomp_profile *sp, struct sock_filter *prog, size_t max,
    size_t *n, char **cause)
{
	uint32_t arch = seccomp_arch_native();
	struct bpfgen g = { .bg_prog = prog, .bg_max = max };

	*n = 0;
	if (!sp->sp_enabled) {
		util_cause(cause, "seccomp: the profile is disabled");
		return -1;
	}
	if (arch != AUDIT_ARCH_X86_64)
		return libseccomp_program(sp, prog, max, n, cause);
	if (gen_program(sp, arch, &g) != 0) {
		util_cause(cause, "seccomp: the profile's program does not fit in %zu "
		    "instructions", max);
		return -1;
	}
	*n = g.bg_n;
	return 0;
}

int
seccomp_profile_load_program(struct seccomp_profile *sp, const struct sock_filter *prog,
    size_t n, char **cause)
{
	struct sock_fprog fp = {
		.len = (unsigned short)n,
		.filter = (struct sock_filter *)prog,
	};

	if (n == 0 || n > BPF_MAXINSNS) {
		util_cause(cause, "seccomp: no program to load");
		return -1;
	}
	long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
	    sp->sp_notify ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &fp);
	if (rc < 0) {
		util_cause(cause, "seccomp: loading the filter: %s", strerror(errno));
		return -1;
	}
	if (sp->sp_notify)
		sp->sp_notify_fd = (int)rc;
	return 0;
}
