/*
 * debug.c: `gensee debug network-plan`, `gensee debug network-apply` and
 * `gensee debug seccomp-profile`.
 *
 * network-plan needs no privilege: it prints exactly the generation that
 * boundaryd would install for the options and policy given. network-apply
 * (root) puts an already running tree under a new operation with that
 * network policy. seccomp-profile prints the filter that `gensee run
 * --sandbox linux` would load with the user's policy.
 */
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <seccomp.h> /* lib/seccomp.h, which includes libseccomp's */

#include "cgroup.h"
#include "cli.h"
#include "client.h"
#include "netpolicy.h"
#include "netspec.h"
#include "nft.h"
#include "policy.h"
#include "proc.h"
#include "schema.h"
#include "util.h"

struct debug_args {
	const char *da_session;
	pid_t da_pid;
	int da_json;
	struct netspec_opts da_net;
};

static int
debug_parse(int argc, char **argv, struct debug_args *a)
{
	static const struct option longopts[] = {
		{ "session-id", required_argument, NULL, 'S' },
		{ "pid", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "allow", required_argument, NULL, 'n' },
		{ "deny", required_argument, NULL, 'n' },
		{ "deny-all", no_argument, NULL, 'n' },
		{ "monitor", no_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	int ch, idx;
	int64_t v;

	memset(a, 0, sizeof(*a));
	netspec_opts_init(&a->da_net);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
		switch (ch) {
		case 'S':
			a->da_session = optarg;
			break;
		case 'p':
			if (util_parse_i64(optarg, 1, 4194304, &v) != 0)
				return -1;
			a->da_pid = (pid_t)v;
			break;
		case 'j':
			a->da_json = 1;
			break;
		case 'n': {
			const char *name = longopts[idx].name;
			const char *opt = strcmp(name, "allow") == 0 ? "allow-net" :
			    strcmp(name, "deny") == 0 ? "deny-net" : name;
			if (netspec_option(&a->da_net, opt, optarg) != 1)
				return -1;
			break;
		}
		default:
			return -1;
		}
	}
	if (optind != argc || a->da_session == NULL || a->da_pid == 0)
		return -1;
	return 0;
}

/* Parse the spec's strings into grants, as boundaryd will. */
static int
debug_grants(struct json_object *arr, struct np_grants *g, char **cause)
{
	for (size_t i = 0; i < json_object_array_length(arr); i++)
		if (netpolicy_parse_grant_string(json_object_get_string(
		    json_object_array_get_idx(arr, i)), g, NULL, cause) != 0)
			return -1;
	return 0;
}

static struct json_object *
debug_spec(struct debug_args *a, struct json_object *warnings)
{
	char *cause = NULL;
	struct json_object *policy = policy_load(&cause), *spec = NULL, *host;
	if (policy != NULL)
		spec = netspec_build(&a->da_net, policy, warnings, &cause);
	json_object_put(policy);
	/* The options go through the host policy as in gensee run. */
	if (spec != NULL && (hostpolicy_get(&host, &cause) != 0 ||
	    hostpolicy_netspec(host, spec, &cause) != 0)) {
		json_object_put(spec);
		spec = NULL;
	}
	if (spec == NULL) {
		fprintf(stderr, "gensee debug: %s\n", cause);
		free(cause);
	}
	return spec;
}

static int
debug_network_plan(int argc, char **argv)
{
	struct debug_args a;
	struct json_object *warnings = json_object_new_array(), *spec, *out;
	struct np_grants allow = { 0 }, deny = { 0 };
	struct proc_stat st;
	char *cause = NULL, cg[256] = "", rel[PATH_MAX + 300];
	int rc = 1;

	if (debug_parse(argc, argv, &a) != 0) {
		fprintf(stderr, "usage: gensee debug network-plan --session-id ID --pid PID "
		    "[--allow CIDR]... [--deny CIDR]... [--deny-all] [--monitor] [--json]\n");
		json_object_put(warnings);
		return CLI_EXIT_USAGE;
	}
	if (proc_read_stat(a.da_pid, &st) != 0) {
		fprintf(stderr, "gensee debug network-plan: no process %d\n", (int)a.da_pid);
		json_object_put(warnings);
		return 1;
	}
	cgroup_of_pid(a.da_pid, cg, sizeof(cg));
	if ((spec = debug_spec(&a, warnings)) == NULL) {
		json_object_put(warnings);
		return 1;
	}
	if (debug_grants(schema_child(spec, "allow"), &allow, &cause) != 0 ||
	    debug_grants(schema_child(spec, "deny"), &deny, &cause) != 0) {
		fprintf(stderr, "gensee debug network-plan: %s\n", cause);
		free(cause);
		goto out;
	}
	struct nft_elem *ea = calloc(allow.g_n + 1, sizeof(*ea));
	struct nft_elem *ed = calloc(deny.g_n + 1, sizeof(*ed));
	if (ea == NULL || ed == NULL) {
		free(ea);
		free(ed);
		goto out;
	}
	for (size_t i = 0; i < allow.g_n; i++)
		netpolicy_grant_to_elem(&allow.g_v[i], &ea[i]);
	for (size_t i = 0; i < deny.g_n; i++)
		netpolicy_grant_to_elem(&deny.g_v[i], &ed[i]);
	/* nft(8) names cgroups by path below /sys/fs/cgroup ("unified/..." on hybrid hosts). */
	char mount[PATH_MAX] = "/sys/fs/cgroup", *mcause = NULL;
	if (cgroup_find_mount(mount, sizeof(mount), &mcause) != 0)
		free(mcause);
	const char *below = strncmp(mount, "/sys/fs/cgroup", 14) == 0 ? mount + 14 : "";
	while (*below == '/')
		below++;
	snprintf(rel, sizeof(rel), "%s%s%s/op_%s", below, *below ? "/" : "", CGROUP_BASE,
	    a.da_session);
	struct nft_policy p = {
		.np_table = NFT_TABLE_PREFIX "plan",
		.np_subject = NFT_SUBJECT_CGROUP,
		.np_cgroup_id = 1, /* the real id exists once boundaryd creates the cgroup */
		.np_cgroup_level = 2,
		.np_mode = strcmp(schema_string(spec, "mode"), "monitor") == 0 ? NFT_MODE_DENYLIST :
		    NFT_MODE_ALLOWLIST,
		.np_allow = ea,
		.np_nallow = allow.g_n,
		.np_deny = ed,
		.np_ndeny = deny.g_n,
		.np_generation = 1,
		.np_owner = a.da_session,
	};
	char *text = nft_policy_text(&p, rel);
	out = json_object_new_object();
	json_object_object_add(out, "session_id", json_object_new_string(a.da_session));
	json_object_object_add(out, "pid", json_object_new_int(a.da_pid));
	json_object_object_add(out, "start_time_ticks", json_object_new_int64((int64_t)st.ps_start_ticks));
	json_object_object_add(out, "current_cgroup", json_object_new_string(cg));
	json_object_object_add(out, "operation_cgroup", json_object_new_string(rel));
	json_object_object_add(out, "table", json_object_new_string(
	    "gensee_<keyed hash of the operation id, assigned by gensee-boundaryd>"));
	json_object_object_add(out, "mode", json_object_new_string(schema_string(spec, "mode")));
	json_object_object_add(out, "spec", json_object_get(spec));
	struct json_object *ga = json_object_new_array(), *gd = json_object_new_array();
	for (size_t i = 0; i < allow.g_n; i++)
		json_object_array_add(ga, netpolicy_grant_json(&allow.g_v[i]));
	for (size_t i = 0; i < deny.g_n; i++)
		json_object_array_add(gd, netpolicy_grant_json(&deny.g_v[i]));
	json_object_object_add(out, "allow_elements", ga);
	json_object_object_add(out, "deny_elements", gd);
	json_object_object_add(out, "warnings", json_object_get(warnings));
	json_object_object_add(out, "nft", text ? json_object_new_string(text) : NULL);
	if (a.da_json) {
		cli_print_json(out);
	} else {
		for (size_t i = 0; i < json_object_array_length(warnings); i++)
			fprintf(stderr, "warning: %s\n",
			    json_object_get_string(json_object_array_get_idx(warnings, i)));
		printf("# pid %d (cgroup %s) -> %s, %s mode\n%s", (int)a.da_pid, cg, rel,
		    schema_string(spec, "mode"), text ? text : "");
	}
	free(text);
	free(ea);
	free(ed);
	json_object_put(out);
	rc = 0;
out:
	np_grants_free(&allow);
	np_grants_free(&deny);
	json_object_put(spec);
	json_object_put(warnings);
	return rc;
}

static int
debug_network_apply(int argc, char **argv)
{
	struct debug_args a;
	struct json_object *warnings = json_object_new_array(), *spec, *p, *res;
	struct client_error err;
	struct proc_stat st;

	if (debug_parse(argc, argv, &a) != 0) {
		fprintf(stderr, "usage: gensee debug network-apply --session-id ID --pid PID "
		    "[--allow CIDR]... [--deny CIDR]... [--deny-all] [--monitor] [--json]\n");
		json_object_put(warnings);
		return CLI_EXIT_USAGE;
	}
	if (proc_read_stat(a.da_pid, &st) != 0) {
		fprintf(stderr, "gensee debug network-apply: no process %d\n", (int)a.da_pid);
		json_object_put(warnings);
		return 1;
	}
	spec = debug_spec(&a, warnings);
	for (size_t i = 0; i < json_object_array_length(warnings); i++)
		fprintf(stderr, "warning: %s\n",
		    json_object_get_string(json_object_array_get_idx(warnings, i)));
	json_object_put(warnings);
	if (spec == NULL)
		return 1;
	p = json_object_new_object();
	json_object_object_add(p, "pid", json_object_new_int(a.da_pid));
	json_object_object_add(p, "start_time_ticks", json_object_new_int64((int64_t)st.ps_start_ticks));
	json_object_object_add(p, "adopt_existing", json_object_new_boolean(1));
	json_object_object_add(p, "source_run", json_object_new_string("gensee debug network-apply"));
	json_object_object_add(p, "action_class", json_object_new_string(a.da_session));
	json_object_object_add(p, "network", spec);
	if (client_call("boundary.sock", "operation.create", p, &res, &err) != 0) {
		fprintf(stderr, "gensee debug network-apply: %s: %s\n", err.ce_code, err.ce_message);
		client_error_clear(&err);
		return 1;
	}
	if (a.da_json)
		cli_print_json(res);
	else
		printf("operation %s: pid %d now under table %s\n", schema_string(res, "operation_id"),
		    (int)a.da_pid, schema_string(res, "network_table"));
	json_object_put(res);
	return 0;
}

/* Print one seccomp rule as a line of the text form. */
static void
debug_seccomp_rule(struct json_object *r)
{
	struct json_object *when = schema_child(r, "when");
	int arg = (int)schema_int(when, "arg", 0);
	char cond[160] = "always";

	if (when != NULL && schema_string(when, "flag") != NULL)
		snprintf(cond, sizeof(cond), "if arg%d & %s", arg, schema_string(when, "flag"));
	else if (when != NULL && schema_string(when, "request") != NULL)
		snprintf(cond, sizeof(cond), "if (u32)arg%d == %s", arg,
		    schema_string(when, "request"));
	else if (when != NULL)
		snprintf(cond, sizeof(cond), "unless arg%d in {%s}", arg,
		    schema_string(when, "allowed_names"));
	printf("  %-18s %-14s %-26s %s\n", schema_string(r, "syscall"), schema_string(r, "action"),
	    cond, schema_string(r, "key"));
}

/* `gensee debug seccomp-profile [--json]`: the profile from the user's policy. */
static int
debug_seccomp_profile(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct seccomp_profile sp;
	struct json_object *policy, *out;
	char *cause = NULL;
	int ch, json = 0;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (ch != 'j') {
			fprintf(stderr, "usage: gensee debug seccomp-profile [--json]\n");
			return CLI_EXIT_USAGE;
		}
		json = 1;
	}
	if (optind != argc) {
		fprintf(stderr, "usage: gensee debug seccomp-profile [--json]\n");
		return CLI_EXIT_USAGE;
	}
	if ((policy = policy_load(&cause)) == NULL ||
	    seccomp_profile_build(policy, SECCOMP_PROFILE_FROM_POLICY, &sp, &cause) != 0) {
		fprintf(stderr, "gensee debug seccomp-profile: %s\n", cause);
		free(cause);
		json_object_put(policy);
		return 1;
	}
	json_object_put(policy);
	out = seccomp_profile_json(&sp);
	json_object_object_add(out, "policy", json_object_new_string(policy_path()));
	if (json) {
		cli_print_json(out);
	} else {
		struct json_object *rules = schema_child(out, "rules");
		struct json_object *keys = schema_child(out, "keys");

		printf("seccomp profile \"default\" of gensee run --sandbox linux: %s (%s)\n",
		    sp.sp_enabled ? "enabled" : "disabled", sp.sp_enabled_source);
		printf("policy: %s\n", policy_path());
		json_object_object_foreach(keys, name, k) {
			printf("  %-45s %-5s (%s)\n", name, schema_bool(k, "value", 0) ? "true" :
			    "false", schema_string(k, "source"));
		}
		if (sp.sp_enabled) {
			printf("default action: allow\n");
			printf("bad-arch action: kill the process (every syscall ABI but the "
			    "native %s one, e.g. i386 and x32)\n",
			    schema_string(out, "native_arch"));
			printf("rules:\n");
			for (size_t i = 0; i < json_object_array_length(rules); i++)
				debug_seccomp_rule(json_object_array_get_idx(rules, i));
		}
	}
	json_object_put(out);
	seccomp_profile_free(&sp);
	return 0;
}

static const char debug_usage_text[] =
    "usage: gensee debug plan [--json]\n"
    "       gensee debug fanotify-plan [--json]\n"
    "       gensee debug fanotify-once [--seconds N] [--events N] [--json]   (root)\n"
    "       gensee debug network-plan --session-id ID --pid PID [--allow X]... [--deny X]...\n"
    "                                 [--json]\n"
    "       gensee debug network-apply --session-id ID --pid PID ...          (root)\n"
    "       gensee debug seccomp-profile [--json]\n";

int
cmd_debug(int argc, char **argv)
{
	if (cli_help_asked(argc, argv))
		return cli_usage(1, debug_usage_text);
	if (argc >= 2 && strcmp(argv[1], "network-plan") == 0)
		return debug_network_plan(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "network-apply") == 0)
		return debug_network_apply(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "seccomp-profile") == 0)
		return debug_seccomp_profile(argc - 1, argv + 1);
	if (argc >= 2 && (strcmp(argv[1], "plan") == 0 || strcmp(argv[1], "fanotify-plan") == 0 ||
	    strcmp(argv[1], "fanotify-once") == 0))
		return cmd_debug_fanotify(argc - 1, argv + 1);
	return cli_usage(0, debug_usage_text);
}
