/*
 * debugfan.c: `gensee debug plan`, `gensee debug fanotify-plan` and
 * `gensee debug fanotify-once`.
 *
 * plan and fanotify-plan need no privilege and change nothing: they print
 * what a `gensee run --sandbox linux` would apply with the current policy.
 * fanotify-once (root) runs the fanotify engine in the foreground, without
 * boundaryd, as a debug enforcer: every process is judged by the policy
 * (as if it were supervised) for a bounded time or a number of events.
 */
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "agent.h"
#include "cli.h"
#include "fanotify.h"
#include "fanpolicy.h"
#include "hostcaps.h"
#include "landlock.h"
#include "mountview.h"
#include "netspec.h"
#include "schema.h"
#include "seccomp.h"
#include "util.h"

static struct json_object *
debugfan_plan_json(const struct fanpolicy *p, const struct fan_plan *plan)
{
	struct json_object *o = json_object_new_object();
	struct json_object *rules = json_object_new_array(), *marks = json_object_new_array();
	struct json_object *warn = json_object_new_array();

	for (size_t i = 0; i < p->fp_nrules; i++) {
		const struct fan_rule *r = &p->fp_rules[i];
		struct json_object *x = json_object_new_object();
		json_object_object_add(x, "pattern", json_object_new_string(r->fr_pattern));
		json_object_object_add(x, "kind", json_object_new_string(fanpolicy_kind_name(r->fr_kind)));
		json_object_object_add(x, "action", json_object_new_string(fanpolicy_action_name(r->fr_action)));
		json_object_object_add(x, "builtin", json_object_new_boolean(r->fr_builtin));
		json_object_object_add(x, "path", json_object_new_string(r->fr_path));
		if (r->fr_glob != NULL)
			json_object_object_add(x, "glob", json_object_new_string(r->fr_glob));
		json_object_array_add(rules, x);
	}
	for (size_t i = 0; i < plan->pl_nmarks; i++) {
		const struct fan_mark *m = &plan->pl_marks[i];
		struct json_object *x = json_object_new_object();
		json_object_object_add(x, "kind", json_object_new_string(fanpolicy_mark_kind_name(m->fm_kind)));
		json_object_object_add(x, "path", json_object_new_string(m->fm_path));
		json_object_object_add(x, "rule", json_object_new_string(p->fp_rules[m->fm_rule].fr_pattern));
		json_object_array_add(marks, x);
	}
	for (size_t i = 0; i < plan->pl_warn.w_n; i++)
		json_object_array_add(warn, json_object_new_string(plan->pl_warn.w_v[i]));
	json_object_object_add(o, "rules", rules);
	json_object_object_add(o, "marks", marks);
	json_object_object_add(o, "warnings", warn);
	return o;
}

static int
debugfan_parse_json(int argc, char **argv, int *json, int64_t *seconds, int64_t *events)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "seconds", required_argument, NULL, 's' },
		{ "events", required_argument, NULL, 'e' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j':
			*json = 1;
			break;
		case 's':
			if (seconds == NULL || util_parse_i64(optarg, 1, 3600, seconds) != 0)
				return -1;
			break;
		case 'e':
			if (events == NULL || util_parse_i64(optarg, 1, 1000000, events) != 0)
				return -1;
			break;
		default:
			return -1;
		}
	}
	return optind == argc ? 0 : -1;
}

/* Load the policy and build the fanotify policy and its plan. */
static int
debugfan_load(struct fanpolicy *fp, struct fan_plan *plan, enum fan_posture *posture,
    struct json_object **policy_out)
{
	char *cause = NULL;
	struct json_object *policy = policy_load(&cause), *spec = NULL;

	if (policy != NULL)
		spec = fanspec_build(policy, 1, &cause);
	if (spec == NULL || fanpolicy_from_spec(fp, spec, posture, &cause) != 0 ||
	    fanpolicy_plan(fp, plan, &cause) != 0) {
		fprintf(stderr, "gensee debug: %s\n", cause ? cause : "cannot build the plan");
		free(cause);
		json_object_put(spec);
		json_object_put(policy);
		return -1;
	}
	json_object_put(spec);
	if (policy_out != NULL)
		*policy_out = policy;
	else
		json_object_put(policy);
	return 0;
}

static int
debug_fanotify_plan(int argc, char **argv)
{
	struct fanpolicy fp;
	struct fan_plan plan;
	enum fan_posture posture;
	int json = 0;

	if (debugfan_parse_json(argc, argv, &json, NULL, NULL) != 0) {
		fprintf(stderr, "usage: gensee debug fanotify-plan [--json]\n");
		return CLI_EXIT_USAGE;
	}
	if (debugfan_load(&fp, &plan, &posture, NULL) != 0)
		return 1;
	struct json_object *o = debugfan_plan_json(&fp, &plan);
	json_object_object_add(o, "posture", json_object_new_string(fanpolicy_posture_name(posture)));
	if (json) {
		cli_print_json(o);
	} else {
		struct json_object *r = schema_child(o, "rules"), *m = schema_child(o, "marks");
		struct json_object *w = schema_child(o, "warnings");
		printf("posture %s\n", fanpolicy_posture_name(posture));
		for (size_t i = 0; i < json_object_array_length(r); i++) {
			struct json_object *x = json_object_array_get_idx(r, i);
			printf("rule  %-8s %-7s %s%s\n", schema_string(x, "action"),
			    schema_string(x, "kind"), schema_string(x, "pattern"),
			    schema_bool(x, "builtin", 0) ? " (built in)" : "");
		}
		for (size_t i = 0; i < json_object_array_length(m); i++) {
			struct json_object *x = json_object_array_get_idx(m, i);
			printf("mark  %-10s %s\n", schema_string(x, "kind"), schema_string(x, "path"));
		}
		for (size_t i = 0; i < json_object_array_length(w); i++)
			printf("warning: %s\n", json_object_get_string(json_object_array_get_idx(w, i)));
	}
	json_object_put(o);
	fanpolicy_plan_free(&plan);
	fanpolicy_free(&fp);
	return 0;
}

struct once_ctx {
	const struct fanpolicy *oc_policy;
	enum fan_posture oc_posture;
	int oc_json;
	int64_t oc_seen;
};

/* The debug enforcer judges every process as if it were supervised. */
static int
debugfan_decide(const struct fan_event *ev, struct fan_verdict *vd, void *arg)
{
	struct once_ctx *c = arg;
	const struct fan_rule *hit = NULL;
	struct fan_decision d;

	if (ev->ev_phase == FAN_PHASE_LOST) {
		fprintf(stderr, "gensee debug fanotify-once: coverage lost: %s\n", ev->ev_lost);
		return 0;
	}
	if (ev->ev_phase == FAN_PHASE_ANSWERED) {
		if (ev->ev_final == NULL || !ev->ev_final->vd_record)
			return 0;
		c->oc_seen++;
		if (c->oc_json) {
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "pid", json_object_new_int(ev->ev_pid));
			json_object_object_add(o, "path", json_object_new_string(ev->ev_path ?
			    ev->ev_path : ""));
			json_object_object_add(o, "decision", json_object_new_string(
			    ev->ev_final->vd_response == FAN_ALLOW ? "allow" : "deny"));
			json_object_object_add(o, "reason", json_object_new_string(
			    ev->ev_final->vd_reason));
			printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
			    JSON_C_TO_STRING_NOSLASHESCAPE));
			json_object_put(o);
		} else {
			printf("pid %-7d %-5s %s (%s)\n", (int)ev->ev_pid,
			    ev->ev_final->vd_response == FAN_ALLOW ? "allow" : "deny",
			    ev->ev_path ? ev->ev_path : "?", ev->ev_final->vd_reason);
		}
		fflush(stdout);
		return 0;
	}
	if (ev->ev_path == NULL || fanpolicy_match(c->oc_policy, ev->ev_path, &hit) < 0) {
		vd->vd_response = FAN_DENY;
		vd->vd_reason = FANR_PATH_UNRESOLVED;
		vd->vd_record = 1;
		vd->vd_nocache = 1;
		return 0;
	}
	if (hit == NULL && ev->ev_by_inode)
		hit = ev->ev_rule;
	if (hit == NULL) {
		vd->vd_response = FAN_ALLOW;
		vd->vd_reason = FANR_NO_RULE;
		vd->vd_record = 0;
		return 0;
	}
	fanpolicy_decide(c->oc_posture, hit->fr_action, 1, &d);
	vd->vd_response = d.dc_response;
	vd->vd_reason = d.dc_reason;
	vd->vd_record = 1;
	vd->vd_warning = d.dc_warning;
	vd->vd_nocache = 1;
	return 0;
}

static int
debug_fanotify_once(int argc, char **argv)
{
	struct fanpolicy fp;
	struct fan_plan plan;
	struct fan_engine *e = NULL;
	struct once_ctx c;
	int64_t seconds = 10, events = 1;
	char *cause = NULL;
	int json = 0;

	if (debugfan_parse_json(argc, argv, &json, &seconds, &events) != 0) {
		fprintf(stderr, "usage: gensee debug fanotify-once [--seconds N] [--events N] [--json]\n");
		return CLI_EXIT_USAGE;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "gensee debug fanotify-once: fanotify permission events need root\n");
		return 1;
	}
	memset(&c, 0, sizeof(c));
	if (debugfan_load(&fp, &plan, &c.oc_posture, NULL) != 0)
		return 1;
	c.oc_policy = &fp;
	c.oc_json = json;
	if (fanotify_engine_open(&e, &plan, &cause) != 0) {
		fprintf(stderr, "gensee debug fanotify-once: %s\n", cause);
		free(cause);
		fanpolicy_plan_free(&plan);
		fanpolicy_free(&fp);
		return 1;
	}
	fanpolicy_plan_free(&plan);
	const struct fan_warnings *w = fanotify_engine_warnings(e);
	for (size_t i = 0; w != NULL && i < w->w_n; i++)
		fprintf(stderr, "warning: %s\n", w->w_v[i]);
	fprintf(stderr, "gensee debug fanotify-once: judging every open of a sensitive path for "
	    "%llds or %lld decision(s)\n", (long long)seconds, (long long)events);
	int64_t end = util_monotonic_ms() + seconds * 1000;
	while (c.oc_seen < events && util_monotonic_ms() < end) {
		struct pollfd pfd = { .fd = fanotify_engine_fd(e), .events = POLLIN };
		int left = (int)(end - util_monotonic_ms());
		if (poll(&pfd, 1, left > 0 ? left : 0) > 0 &&
		    fanotify_engine_handle(e, debugfan_decide, &c, &cause) < 0) {
			fprintf(stderr, "gensee debug fanotify-once: %s\n", cause);
			free(cause);
			break;
		}
	}
	fanotify_engine_close(e);
	fanpolicy_free(&fp);
	return 0;
}

static int
debug_plan(int argc, char **argv)
{
	struct fanpolicy fp;
	struct fan_plan plan;
	struct seccomp_profile sp;
	struct landlock_plan lp;
	struct landlock_opts lo;
	struct mountview_opts mvo;
	struct mountview_plan mv;
	struct netspec_opts no;
	enum fan_posture posture;
	struct json_object *policy = NULL, *out = json_object_new_object(), *warnings;
	const char *why = NULL;
	char *cause = NULL;
	int json = 0, rc = 1;

	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "agent", required_argument, NULL, 'a' },
		{ NULL, 0, NULL, 0 },
	};
	static struct agent_run ar;	/* large; the mount view plan borrows from it */
	const char *forced = NULL;
	char **cmd = NULL;
	int ch;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		if (ch == 'j') {
			json = 1;
		} else if (ch == 'a') {
			forced = optarg;
		} else {
			optind = -1;
			break;
		}
	}
	if (optind > 0 && optind < argc)
		cmd = argv + optind;	/* after "--": the command whose profile to show */
	if (optind < 0) {
		fprintf(stderr, "usage: gensee debug plan [--json] [--agent NAME] [-- CMD...]\n");
		json_object_put(out);
		return CLI_EXIT_USAGE;
	}
	if (debugfan_load(&fp, &plan, &posture, &policy) != 0) {
		json_object_put(out);
		return 1;
	}
	memset(&lo, 0, sizeof(lo));
	memset(&mvo, 0, sizeof(mvo));
	memset(&sp, 0, sizeof(sp));
	memset(&lp, 0, sizeof(lp));
	memset(&mv, 0, sizeof(mv));
	int abi = landlock_abi(&why);
	/* As gensee run plans it (run_plan), without making the agent's store. */
	if (run_host_opts(&lo, &mvo, 0, &cause) != 0 ||
	    agent_plan(&ar, cmd, forced, policy, &cause) < 0 ||
	    agent_apply(&ar, &mvo, 0, &cause) != 0 ||
	    seccomp_profile_build(policy, SECCOMP_PROFILE_FROM_POLICY, &sp, &cause) != 0 ||
	    mountview_plan_build(policy, &mvo, &mv, &cause) != 0 ||
	    agent_landlock(&ar, &lo, mv.mv_noverlay > 0, 0, &cause) != 0 ||
	    landlock_plan_build(policy, &lo, abi, why, &lp, &cause) != 0) {
		fprintf(stderr, "gensee debug plan: %s\n", cause);
		free(cause);
		goto out;
	}
	netspec_opts_init(&no);
	warnings = json_object_new_array();
	struct json_object *net = netspec_build(&no, policy, warnings, &cause);
	agent_netspec(&ar, net);
	if (net == NULL) {
		fprintf(stderr, "gensee debug plan: %s\n", cause);
		free(cause);
		json_object_put(warnings);
		goto out;
	}
	struct json_object *fan = debugfan_plan_json(&fp, &plan);
	struct json_object *fanspec = fanspec_build(policy, 0, &cause);
	json_object_object_add(fan, "enabled", json_object_new_boolean(
	    schema_bool(fanspec, "enabled", 0)));
	json_object_put(fanspec);
	int speculate = 0;
	for (size_t i = 0; i < fp.fp_nrules; i++)
		speculate |= fp.fp_rules[i].fr_action == FAN_ACTION_SPECULATE;
	struct json_object *caps = hostcaps_probe();
	struct json_object *spec = json_object_new_object();
	struct json_object *backends = json_object_get(schema_child(caps, "speculation_backends"));
	json_object_object_add(spec, "requested", json_object_new_boolean(speculate));
	json_object_object_add(spec, "backends", backends);
	json_object_object_add(spec, "available", json_object_new_boolean(0));
	json_object_object_add(spec, "detail", json_object_new_string(speculate ?
	    "speculate rules fail closed (FAN_DENY): no transactional backend is wired yet" :
	    "no rule asks for speculation"));
	json_object_put(caps);
	json_object_object_add(out, "posture", json_object_new_string(fanpolicy_posture_name(posture)));
	json_object_object_add(out, "seccomp", seccomp_profile_json(&sp));
	json_object_object_add(out, "landlock", landlock_plan_record(&lp));
	json_object_object_add(out, "mount_view", mountview_plan_record(&mv));
	json_object_object_add(out, "agent", agent_json(&ar));
	/* A plan that cannot work as meant says so before a run finds out. */
	struct json_object *hw = json_object_new_array();
	landlock_plan_warnings(&lp, lo.lo_workspace, hw);
	if (!sp.sp_enabled)
		json_object_array_add(hw, json_object_new_string("seccomp: off: nothing keeps the "
		    "agent from ptrace, new namespaces, io_uring or TIOCSTI"));

	if (mv.mv_mode == MOUNTVIEW_OFF)
		json_object_array_add(hw, json_object_new_string("mount view: off: the user's "
		    "runtime sockets (tmux, D-Bus, ssh), credentials, /tmp and ~/.gensee are "
		    "reachable"));
	for (size_t i = 0; i < json_object_array_length(lp.lp_skipped); i++) {
		char w[PATH_MAX + 64];
		snprintf(w, sizeof(w), "landlock: not applied: %s", json_object_get_string(
		    json_object_array_get_idx(lp.lp_skipped, i)));
		json_object_array_add(hw, json_object_new_string(w));
	}
	json_object_object_add(out, "host_control_warnings", hw);
	/* Said, not hidden: what a refusal of the plan leaves no trace of (docs/agents.md). */
	struct json_object *unrep = json_object_new_array();
	if (lp.lp_apply)
		json_object_array_add(unrep, json_object_new_string("landlock: its denials are "
		    "listed only while gensee-sensord reads the kernel's audit (landlock_audit in "
		    "`gensee status`); otherwise an EACCES on a path the plan does not grant is "
		    "Landlock's"));
	json_object_object_add(out, "not_reported", unrep);
	json_object_object_add(out, "fanotify", fan);
	json_object_object_add(out, "network", net);
	json_object_object_add(out, "network_warnings", warnings);
	json_object_object_add(out, "speculation", spec);
	if (json) {
		cli_print_json(out);
	} else {
		printf("posture      %s\n", fanpolicy_posture_name(posture));
		printf("seccomp      %s\n", sp.sp_ctx != NULL ? "default deny profile" : "off");
		printf("landlock     %s%s\n", landlock_mode_name(lp.lp_mode),
		    lp.lp_default_paths && lp.lp_apply ? ", default lists" : "");
		printf("mount view   %s, %zu hidden, %zu read-only, %zu socket(s) let through\n",
		    mountview_mode_name(mv.mv_mode), mv.mv_nhide, mv.mv_nreadonly, mv.mv_nsockets);
		if (ar.ar_active)
			printf("agent        %s (%s): state %s in %s, %zu configuration path(s) "
			    "read-only, %zu host(s) allowed\n", ar.ar_prof.ap_name, ar.ar_prof.ap_how,
			    ar.ar_prof.ap_nstate ? ar.ar_prof.ap_state[0].as_path : "none",
			    ar.ar_prof.ap_nstate ? ar.ar_prof.ap_state[0].as_store : "-",
			    ar.ar_prof.ap_nconfig, ar.ar_prof.ap_nhosts);
		else
			printf("agent        none (--agent NAME or -- CMD shows a profile)\n");
		printf("fanotify     %s, %zu rule(s), %zu mark(s)\n",
		    schema_bool(fan, "enabled", 0) ? "on" : "off (use --linux-fanotify or "
		    "linux.fanotify.enabled)", fp.fp_nrules, plan.pl_nmarks);
		printf("network      %s, %zu allow, %zu deny\n", schema_string(net, "mode"),
		    json_object_array_length(schema_child(net, "allow")),
		    json_object_array_length(schema_child(net, "deny")));
		printf("speculation  %s\n", schema_string(spec, "detail"));
		for (size_t i = 0; i < json_object_array_length(hw); i++)
			printf("warning: %s\n", json_object_get_string(
			    json_object_array_get_idx(hw, i)));
		for (size_t i = 0; i < plan.pl_warn.w_n; i++)
			printf("warning: %s\n", plan.pl_warn.w_v[i]);
		for (size_t i = 0; i < json_object_array_length(unrep); i++)
			printf("note: %s\n", json_object_get_string(json_object_array_get_idx(unrep,
			    i)));
	}
	rc = 0;
out:
	seccomp_profile_free(&sp);
	landlock_plan_free(&lp);
	mountview_plan_free(&mv);
	agent_run_free(&ar);
	fanpolicy_plan_free(&plan);
	fanpolicy_free(&fp);
	json_object_put(policy);
	json_object_put(out);
	return rc;
}

int
cmd_debug_fanotify(int argc, char **argv)
{
	if (strcmp(argv[0], "plan") == 0)
		return debug_plan(argc, argv);
	if (strcmp(argv[0], "fanotify-plan") == 0)
		return debug_fanotify_plan(argc, argv);
	return debug_fanotify_once(argc, argv);
}
