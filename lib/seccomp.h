/*
 * seccomp.h: the hard-deny syscall profile of a sandboxed run (libseccomp).
 *
 * libseccomp's own header is also called seccomp.h and lib/ is on the
 * include path, so <seccomp.h> finds this file first: it pulls in the real
 * one with #include_next, and every name here is seccomp_profile_* to stay
 * out of libseccomp's seccomp_* namespace. Files in lib/ must include it as
 * <seccomp.h>: "seccomp.h" finds it next to them, outside the search path,
 * and #include_next would then find this file again instead of libseccomp's.
 */
#ifndef GENSEE_SECCOMP_H
#define GENSEE_SECCOMP_H

#include_next <seccomp.h>

#include <stddef.h>
#include <stdint.h>
#include <linux/filter.h>

struct json_object;

/* The policy keys of linux.seccomp that select rule families. */
enum seccomp_profile_key {
	SECCOMP_PROFILE_PTRACE,
	SECCOMP_PROFILE_BPF,
	SECCOMP_PROFILE_MODULES,
	SECCOMP_PROFILE_MOUNT_NS,
	SECCOMP_PROFILE_KERNEL_SURFACE,
	SECCOMP_PROFILE_TERMINAL,
	SECCOMP_PROFILE_SOCKET_FAMILIES,
};
#define SECCOMP_PROFILE_NKEYS 7

/* How the command line overrides linux.seccomp.enabled. */
#define SECCOMP_PROFILE_FROM_POLICY 0
#define SECCOMP_PROFILE_FORCE_ON 1
#define SECCOMP_PROFILE_FORCE_OFF -1

#define SECCOMP_PROFILE_MAX_RULES 64

/* When a rule applies, by its argument spr_arg. */
enum seccomp_profile_when {
	SECCOMP_WHEN_ALWAYS,
	SECCOMP_WHEN_FLAG,	/* (arg & spr_value) == spr_value: a flag is set */
	SECCOMP_WHEN_EQ32,	/* (arg & 0xffffffff) == spr_value: the kernel reads an int */
	SECCOMP_WHEN_NOT_IN,	/* arg is none of spr_allowed (an unsigned 32-bit value) */
};

struct seccomp_profile_rule {
	const char *spr_syscall;
	int spr_errno;		/* answered with this errno (EPERM or ENOSYS) */
	enum seccomp_profile_when spr_when;
	uint64_t spr_value;
	const char *spr_value_name;	/* the flag or value, as printed */
	const uint32_t *spr_allowed;	/* SECCOMP_WHEN_NOT_IN */
	size_t spr_nallowed;
	unsigned int spr_arg;	/* which argument the condition reads */
	enum seccomp_profile_key spr_key;
	int spr_nr;		/* its number here, resolved once by the plan (< 0: none here) */
};

struct seccomp_profile {
	int sp_enabled;
	const char *sp_enabled_source;	/* "default", "policy" or the option */
	int sp_keys[SECCOMP_PROFILE_NKEYS];
	int sp_key_set[SECCOMP_PROFILE_NKEYS];	/* given in the policy, not defaulted */
	struct seccomp_profile_rule sp_rules[SECCOMP_PROFILE_MAX_RULES];
	size_t sp_nrules;
	scmp_filter_ctx sp_ctx;	/* the compiled filter; NULL when disabled */
	int sp_notify;		/* refusals go to a listener (seccomp_profile_notify) */
	int sp_notify_fd;	/* after load: the listener fd, for the launcher */
};

/* The policy key name of a rule family ("linux.seccomp.deny_ptrace"). */
const char *seccomp_profile_key_name(enum seccomp_profile_key k);

/*
 * Build the default profile from linux.seccomp of policy (which may be NULL
 * or have no linux.seccomp: every key then takes its default, true) and the
 * command line override, and compile it into a libseccomp filter. Unknown
 * keys and non-boolean values are errors: a typo in a security policy must
 * not silently mean the default.
 */
int seccomp_profile_build(struct json_object *policy, int force, struct seccomp_profile *sp,
    char **cause);
/*
 * The same, compiled once with refusals sent to a listener when notify is
 * set (check seccomp_profile_notify_available first): the launcher's path.
 */
int seccomp_profile_build_notify(struct json_object *policy, int force, int notify,
    struct seccomp_profile *sp, char **cause);
/*
 * The same without compiling (sp_ctx stays NULL): the rules are chosen and
 * their names checked. run.c then writes the program itself
 * (seccomp_profile_program); seccomp_profile_compile makes libseccomp's.
 */
int seccomp_profile_plan_notify(struct json_object *policy, int force, int notify,
    struct seccomp_profile *sp, char **cause);
int seccomp_profile_compile(struct seccomp_profile *sp, char **cause);
/*
 * The profile's filter as a classic BPF program in prog (at most max
 * instructions; *n set), written directly (seccompbpf.c says why), or
 * libseccomp's on an architecture that code does not cover. The profile
 * must be enabled.
 */
int seccomp_profile_program(struct seccomp_profile *sp, struct sock_filter *prog, size_t max,
    size_t *n, char **cause);
/*
 * Install prog on the calling thread, with a listener when the profile
 * notifies (its fd in sp_notify_fd). no_new_privs must be set; irreversible.
 */
int seccomp_profile_load_program(struct seccomp_profile *sp, const struct sock_filter *prog,
    size_t n, char **cause);
/* Whether this kernel and libseccomp have user notification. */
int seccomp_profile_notify_available(void);
void seccomp_profile_free(struct seccomp_profile *sp);

/* Whether the profile refuses syscall name (in any form). */
int seccomp_profile_denies(const struct seccomp_profile *sp, const char *name);

/*
 * Install the filter on the calling thread. no_new_privs must already be
 * set (see run.c); irreversible.
 */
int seccomp_profile_load(struct seccomp_profile *sp, char **cause);

/*
 * Recompile so that every refusal but clone3's (ENOSYS, which glibc asks
 * at every thread start) goes to a user-notification listener instead of
 * answering in the kernel: the launcher answers with the same errno and so
 * learns what the agent was refused. 0, or -1 when the kernel or
 * libseccomp cannot (the profile is left as it was).
 */
int seccomp_profile_notify(struct seccomp_profile *sp, char **cause);
/*
 * Receive one notification on listener fd (readable) and answer it with
 * its rule's errno, never "continue"; count(nr, arg) is called for it (may
 * be NULL). 0, or -1 when the fd has no filter user left or failed.
 */
int seccomp_profile_answer(const struct seccomp_profile *sp, int fd,
    void (*count)(int nr, void *arg), void *arg);
/*
 * Answer every notification on listener fd with its rule's errno until the
 * fd has no more users; count(nr, arg) is called for each (may be NULL).
 * Runs in the launcher, outside the filter.
 */
void seccomp_profile_serve(const struct seccomp_profile *sp, int fd,
    void (*count)(int nr, void *arg), void *arg);

/*
 * Write libseccomp's compiled filter as raw BPF to fd: for tests (the
 * program seccompbpf.c writes is checked against it) and for architectures
 * seccompbpf.c does not cover.
 */
int seccomp_profile_export_bpf(const struct seccomp_profile *sp, int fd, char **cause);

/* The whole profile for `gensee debug seccomp-profile --json`. */
struct json_object *seccomp_profile_json(const struct seccomp_profile *sp);
/* The operation record's host_controls.seccomp: enabled, profile, denied. */
struct json_object *seccomp_profile_record(const struct seccomp_profile *sp);

#endif
