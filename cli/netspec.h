/*
 * netspec.h: the network spec of a run, from the user's policy and the
 * command line (`--allow-net`, `--deny-net`, `--deny-all`, `--monitor`, ...).
 */
#ifndef GENSEE_NETSPEC_H
#define GENSEE_NETSPEC_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

struct netspec_opts {
	const char *no_allow[256];
	size_t no_nallow;
	const char *no_deny[256];
	size_t no_ndeny;
	const char *no_scopes[256];
	size_t no_nscopes;
	int no_deny_all;
	int no_monitor;
	int64_t no_max_ttl; /* -1: from policy */
};

void netspec_opts_init(struct netspec_opts *o);
/* Handle one of the network options; 1 if opt was one of them, -1 on error. */
int netspec_option(struct netspec_opts *o, const char *opt, const char *arg);

/*
 * $GENSEE_HOME/policy.json ($HOME/.gensee), an empty object when absent,
 * narrowed by the host policy (hostpolicy.c).
 */
struct json_object *policy_load(char **cause);
const char *policy_path(void);

/*
 * The "network" params of operation.create. Hostnames are appended to
 * warnings and skipped; anything else malformed is an error.
 */
struct json_object *netspec_build(const struct netspec_opts *o, struct json_object *policy,
    struct json_object *warnings, char **cause);

/*
 * The "fanotify" params of operation.create: enabled by linux.fanotify.enabled
 * or force; rules from linux.fanotify.paths (with linux.fanotify.action) and
 * linux.fanotify.rules; posture from linux.posture; home from $HOME (the
 * built-in ~/.ssh, ~/.aws and ~/.config/gcloud rules are sensord's).
 * Returns NULL with *cause on a malformed policy, or a new object (with
 * "enabled": false when off).
 */
struct json_object *fanspec_build(struct json_object *policy, int force, char **cause);

#endif
