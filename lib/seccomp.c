/*
 * seccomp.c: the default hard-deny profile of `gensee run --sandbox linux`.
 *
 * The profile allows every syscall except a few families that let an agent
 * escape or blind the rest of the supervision (seed 003): reading or
 * steering other processes of the same user (ptrace, process_vm_*), loading
 * code into the kernel (bpf, modules), and changing its view of the system
 * (mount, the new mount API, unshare, setns). Each is answered with EPERM,
 * so tools fail with an error instead of dying. Process creation stays
 * allowed, since without it no developer tool works; clone only loses the
 * flags that would create namespaces (see seccomp_profile_default).
 *
 * Only the native syscall ABI is in the filter, and the bad-arch action
 * kills the process: a 64-bit process can still enter the kernel through
 * the i386 (int $0x80) or x32 (__X32_SYSCALL_BIT) tables, where syscall
 * numbers differ and no rule of ours would match. libseccomp routes x32
 * numbers on an x86_64 filter to the bad-arch action as well.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

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

#define SECCOMP_PROFILE_CLONE_NS(flag) \
	{ "clone", EPERM, flag, #flag, SECCOMP_PROFILE_CLONE_FLAGS, SECCOMP_PROFILE_MOUNT_NS }

/*
 * The default profile, in the order it is printed.
 *
 * Namespaces: a new user namespace hands an unprivileged process a full set
 * of capabilities inside it, which is what makes mount, pivot_root and much
 * of the kernel's rarely audited code reachable; a new mount namespace
 * would let it build a private view of the filesystem. Refusing unshare and
 * setns is not enough, because clone takes the same CLONE_NEW* flags. clone
 * passes them in a register, so the filter can see them and refuses clone
 * only when one is set (CLONE_NEWTIME shares its bit with the exit signal
 * and is only accepted by clone3 and unshare). clone3 passes its flags in a
 * struct in user memory, which a seccomp filter cannot read (and the caller
 * could rewrite after the check), so clone3 is answered with ENOSYS: glibc
 * and the other runtimes then fall back to clone, where the flags are seen.
 */
static const struct seccomp_profile_rule seccomp_profile_default[] = {
	{ "ptrace", EPERM, 0, NULL, 0, SECCOMP_PROFILE_PTRACE },
	{ "process_vm_readv", EPERM, 0, NULL, 0, SECCOMP_PROFILE_PTRACE },
	{ "process_vm_writev", EPERM, 0, NULL, 0, SECCOMP_PROFILE_PTRACE },
	{ "bpf", EPERM, 0, NULL, 0, SECCOMP_PROFILE_BPF },
	{ "init_module", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MODULES },
	{ "finit_module", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MODULES },
	{ "delete_module", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MODULES },
	{ "mount", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MOUNT_NS },
	{ "umount2", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MOUNT_NS },
	{ "pivot_root", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MOUNT_NS },
	{ "fsopen", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MOUNT_NS },
	{ "fsconfig", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MOUNT_NS },
	{ "fsmount", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MOUNT_NS },
	{ "fspick", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MOUNT_NS },
	{ "move_mount", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MOUNT_NS },
	{ "open_tree", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MOUNT_NS },
	{ "mount_setattr", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MOUNT_NS },
	{ "unshare", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MOUNT_NS },
	{ "setns", EPERM, 0, NULL, 0, SECCOMP_PROFILE_MOUNT_NS },
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWNS),
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWCGROUP),
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWUTS),
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWIPC),
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWUSER),
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWPID),
	SECCOMP_PROFILE_CLONE_NS(CLONE_NEWNET),
	{ "clone3", ENOSYS, 0, NULL, 0, SECCOMP_PROFILE_MOUNT_NS },
};

/* The linux.seccomp keys, indexed by enum seccomp_profile_key. */
static const char *const seccomp_profile_keys[SECCOMP_PROFILE_NKEYS] = {
	"deny_ptrace",
	"deny_bpf",
	"deny_kernel_modules",
	"deny_mount_namespace_changes",
};

static const struct schema_field seccomp_profile_fields[] = {
	{ "enabled", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "deny_ptrace", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "deny_bpf", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "deny_kernel_modules", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "deny_mount_namespace_changes", SCHEMA_BOOL, 0, 0, 0, 0 },
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

/* Compile the selected rules into a libseccomp filter. */
static int
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
		int nr = seccomp_syscall_resolve_name(r->spr_syscall);

		/* An unknown name must not quietly drop a rule. */
		if (nr == __NR_SCMP_ERROR) {
			util_cause(cause, "seccomp: libseccomp does not know %s", r->spr_syscall);
			goto fail;
		}
		if (r->spr_mask == 0)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO((uint16_t)r->spr_errno), nr, 0);
		else
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO((uint16_t)r->spr_errno), nr, 1,
			    SCMP_CMP(r->spr_arg, SCMP_CMP_MASKED_EQ, r->spr_mask, r->spr_mask));
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

/* Parse the policy, apply the override, select the rules and compile them. */
int
seccomp_profile_build(struct json_object *policy, int force, struct seccomp_profile *sp,
    char **cause)
{
	memset(sp, 0, sizeof(*sp));
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
	if (!sp->sp_enabled)
		return 0;
	for (size_t i = 0; i < nitems(seccomp_profile_default); i++) {
		if (!sp->sp_keys[seccomp_profile_default[i].spr_key])
			continue;
		if (sp->sp_nrules == nitems(sp->sp_rules)) {
			util_cause(cause, "seccomp: too many rules");
			return -1;
		}
		sp->sp_rules[sp->sp_nrules++] = seccomp_profile_default[i];
	}
	return seccomp_profile_compile(sp, cause);
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
seccomp_profile_load(const struct seccomp_profile *sp, char **cause)
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
	return 0;
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
		json_object_object_add(jr, "number", json_object_new_int(
		    seccomp_syscall_resolve_name(r->spr_syscall)));
		snprintf(action, sizeof(action), "errno(%s)", r->spr_errno == EPERM ? "EPERM" :
		    r->spr_errno == ENOSYS ? "ENOSYS" : "?");
		json_object_object_add(jr, "action", json_object_new_string(action));
		if (r->spr_mask != 0) {
			struct json_object *c = json_object_new_object();
			json_object_object_add(c, "arg", json_object_new_int((int)r->spr_arg));
			json_object_object_add(c, "op", json_object_new_string("masked_eq"));
			json_object_object_add(c, "mask",
			    json_object_new_int64((int64_t)r->spr_mask));
			json_object_object_add(c, "flag", json_object_new_string(r->spr_mask_name));
			json_object_object_add(jr, "when", c);
		}
		json_object_object_add(jr, "key", json_object_new_string(
		    seccomp_profile_key_name(r->spr_key)));
		json_object_array_add(rules, jr);
	}
	json_object_object_add(o, "rules", rules);
	return o;
}
