/*
 * operation.c: `gensee operation inspect ID`, `list`, `end ID [--kill]` and
 * `prune` (root).
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"
#include "client.h"
#include "proto.h"
#include "schema.h"
#include "util.h"

static const char *
str_or(struct json_object *o, const char *key, const char *dflt)
{
	const char *s = schema_string(o, key);
	return s != NULL ? s : dflt;
}

static void
print_exit(struct json_object *ex)
{
	if (ex == NULL)
		printf("-");
	else if (schema_child(ex, "signal") != NULL)
		printf("signal %lld", (long long)schema_int(ex, "signal", 0));
	else
		printf("code %lld", (long long)schema_int(ex, "code", 0));
}

static void
print_record(struct json_object *rec)
{
	struct json_object *life = schema_child(rec, "lifecycle");
	struct json_object *root = schema_child(rec, "root_process");
	struct json_object *cg = schema_child(rec, "cgroup");
	struct json_object *lin = schema_child(rec, "lineage");
	struct json_object *rh = schema_child(rec, "recovery_health");

	printf("operation   %s\n", str_or(rec, "operation_id", "?"));
	printf("state       %s", str_or(life, "state", "?"));
	if (schema_string(life, "end_reason") != NULL)
		printf(" (%s)", schema_string(life, "end_reason"));
	printf("\nexit        ");
	print_exit(schema_child(life, "exit"));
	printf("\ncreated     %s\n", str_or(life, "created_at", "-"));
	printf("ended       %s\n", str_or(life, "ended_at", "-"));
	printf("root        pid %lld start %lld %s\n", (long long)schema_int(root, "pid", 0),
	    (long long)schema_int(root, "start_time_ticks", 0), str_or(root, "executable", "?"));
	if (schema_string(root, "command") != NULL)
		printf("command     %s\n", schema_string(root, "command"));
	printf("cgroup      %s (id %lld) %s, cleanup %s\n", str_or(cg, "path", "?"),
	    (long long)schema_int(cg, "id", 0), str_or(cg, "attachment", "?"),
	    str_or(schema_child(cg, "cleanup"), "state", "?"));
	printf("recovery    %s\n", str_or(rh, "status", "?"));
	struct json_object *sn = schema_child(rec, "sensors");
	if (sn != NULL)
		printf("sensors     fanotify %s, proc_connector %s, nft_trace %s\n",
		    str_or(sn, "fanotify", "-"), str_or(sn, "proc_connector", "-"),
		    str_or(sn, "nft_trace", "-"));
	/* A tree stopped or ended because its file rules were not enforced. */
	struct json_object *sc = schema_child(rec, "sensor_coverage");
	if (sc != NULL)
		printf("coverage    %s (%s), on sensor loss %s, %lld loss(es)\n",
		    str_or(sc, "state", "?"), str_or(sc, "reason", "?"),
		    str_or(sc, "on_sensor_loss", "?"), (long long)schema_int(sc, "losses", 0));
	printf("lineage     %zu process(es)\n", lin ? json_object_array_length(lin) : 0);
	for (size_t i = 0; lin != NULL && i < json_object_array_length(lin); i++) {
		struct json_object *e = json_object_array_get_idx(lin, i);
		printf("  pid %-7lld ppid %-7lld start %-10lld %s%s%s\n",
		    (long long)schema_int(e, "pid", 0), (long long)schema_int(e, "ppid", 0),
		    (long long)schema_int(e, "start_time_ticks", 0), str_or(e, "executable", "?"),
		    schema_child(e, "exited_at") ? " exited" : "",
		    schema_bool(e, "killed_by_supervisor", 0) ? " killed" : "");
	}
}

static int
parse_json_flag(int argc, char **argv, int *json)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (ch != 'j')
			return -1;
		*json = 1;
	}
	return 0;
}

static int
report_error(const char *what, struct client_error *err)
{
	fprintf(stderr, "gensee operation %s: %s: %s\n", what, err->ce_code, err->ce_message);
	client_error_clear(err);
	return 1;
}

static int
op_inspect(int argc, char **argv)
{
	struct client_error err;
	struct json_object *p, *res;
	int json = 0;

	if (cli_help_asked(argc, argv))
		return cli_usage(1, "usage: gensee operation inspect ID [--json]\n");
	if (parse_json_flag(argc, argv, &json) != 0 || optind != argc - 1)
		return cli_usage(0, "usage: gensee operation inspect ID [--json]\n");
	p = json_object_new_object();
	json_object_object_add(p, "operation_id", json_object_new_string(argv[optind]));
	if (client_call("client.sock", "operation.inspect", p, &res, &err) != 0)
		return report_error("inspect", &err);
	if (json)
		cli_print_json(schema_child(res, "record"));
	else
		print_record(schema_child(res, "record"));
	json_object_put(res);
	return 0;
}

static int
op_list(int argc, char **argv)
{
	struct client_error err;
	struct json_object *res, *ops;
	int json = 0;

	if (cli_help_asked(argc, argv))
		return cli_usage(1, "usage: gensee operation list [--json]\n");
	if (parse_json_flag(argc, argv, &json) != 0 || optind != argc)
		return cli_usage(0, "usage: gensee operation list [--json]\n");
	if (client_call("client.sock", "operation.list", json_object_new_object(), &res, &err) != 0)
		return report_error("list", &err);
	ops = schema_child(res, "operations");
	if (json) {
		cli_print_json(ops);
	} else {
		printf("%-35s %-10s %-24s %-12s %s\n", "OPERATION", "STATE", "CREATED", "EXIT",
		    "COMMAND");
		for (size_t i = 0; i < json_object_array_length(ops); i++) {
			struct json_object *o = json_object_array_get_idx(ops, i);
			printf("%-35s %-10s %-24s ", str_or(o, "operation_id", "?"),
			    str_or(o, "state", "?"), str_or(o, "created_at", "-"));
			print_exit(schema_child(o, "exit"));
			/* The command line as launched, else what the root executes. */
			printf("  %s\n", str_or(o, "command", str_or(o, "executable", "?")));
		}
	}
	json_object_put(res);
	return 0;
}

static const char op_end_usage[] =
    "usage: gensee operation end ID [--kill | --grace SECONDS] [--json]\n"
    "  Ends a running operation: SIGTERM to every process of its tree, then\n"
    "  SIGKILL to what is left after the grace (default 3 s, at most 30);\n"
    "  --kill kills at once. Waits until the tree is gone and prints its state.\n";

static int
op_end(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "kill", no_argument, NULL, 'k' },
		{ "grace", required_argument, NULL, 'g' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct client_error err;
	struct json_object *p, *res;
	int json = 0, kill = 0, ch;
	long long grace = -1;
	char *end;

	if (cli_help_asked(argc, argv))
		return cli_usage(1, op_end_usage);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'k':
			kill = 1;
			break;
		case 'g':
			errno = 0;
			grace = strtoll(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || grace < 0 || grace > 30)
				return cli_usage(0, op_end_usage);
			break;
		case 'j':
			json = 1;
			break;
		default:
			return cli_usage(0, op_end_usage);
		}
	}
	if (optind != argc - 1 || (kill && grace >= 0))
		return cli_usage(0, op_end_usage);
	p = json_object_new_object();
	json_object_object_add(p, "operation_id", json_object_new_string(argv[optind]));
	if (kill)
		json_object_object_add(p, "kill", json_object_new_boolean(1));
	if (grace >= 0)
		json_object_object_add(p, "grace_seconds", json_object_new_int64(grace));
	/* The reply waits for the grace and then the cleanup (at most about 5 s). */
	client_set_timeout_ms((int)((grace >= 0 ? grace : 30) * 1000 + 15000));
	if (client_call("client.sock", "operation.end", p, &res, &err) != 0)
		return report_error("end", &err);
	if (json) {
		cli_print_json(res);
	} else {
		struct json_object *t = schema_child(schema_child(res, "record"), "termination");
		printf("%s: %s", argv[optind], str_or(res, "state", "?"));
		if (schema_string(res, "end_reason") != NULL)
			printf(" (%s)", schema_string(res, "end_reason"));
		if (t != NULL)
			printf(", %s to %lld process(es)%s", str_or(t, "signal", "?"),
			    (long long)schema_int(t, "processes_signaled", 0),
			    schema_bool(t, "killed_after_grace", 0) ? ", killed after the grace" : "");
		printf("\n");
	}
	json_object_put(res);
	return 0;
}

/* DURATION: N[s|m|h|d|w] (seconds without a unit). Returns seconds, or -1. */
static int64_t
parse_duration(const char *s)
{
	static const struct {
		char unit;
		int64_t secs;
	} units[] = { { 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 }, { 'w', 604800 } };
	char num[32];
	size_t n = strlen(s);
	int64_t mult = 1, v;

	if (n == 0 || n >= sizeof(num))
		return -1;
	util_strlcpy(num, s, sizeof(num));
	for (size_t i = 0; i < nitems(units); i++) {
		if (num[n - 1] == units[i].unit) {
			mult = units[i].secs;
			num[n - 1] = '\0';
			break;
		}
	}
	if (util_parse_i64(num, 0, PROTO_PRUNE_AGE_MAX / mult, &v) != 0)
		return -1;
	return v * mult;
}

#define PRUNE_USAGE "usage: gensee operation prune [--older-than DURATION] [--keep N] " \
	"[--dry-run] [--json]\n" \
	"  DURATION is N[s|m|h|d|w]; with both, an ended operation is pruned when it is\n" \
	"  older than DURATION and not among the N newest. Running operations never are.\n"

static int
op_prune(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "older-than", required_argument, NULL, 'o' },
		{ "keep", required_argument, NULL, 'k' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct client_error err;
	struct json_object *p, *res;
	int json = 0, dry = 0, ch;
	int64_t older = -1, keep = -1;

	if (cli_help_asked(argc, argv))
		return cli_usage(1, PRUNE_USAGE);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'o':
			if ((older = parse_duration(optarg)) < 0)
				return cli_usage(0, PRUNE_USAGE);
			break;
		case 'k':
			if (util_parse_i64(optarg, 0, PROTO_PRUNE_KEEP_MAX, &keep) != 0)
				return cli_usage(0, PRUNE_USAGE);
			break;
		case 'n':
			dry = 1;
			break;
		case 'j':
			json = 1;
			break;
		default:
			return cli_usage(0, PRUNE_USAGE);
		}
	}
	if (optind != argc || (older < 0 && keep < 0))
		return cli_usage(0, PRUNE_USAGE);
	p = json_object_new_object();
	if (older >= 0)
		json_object_object_add(p, "older_than_seconds", json_object_new_int64(older));
	if (keep >= 0)
		json_object_object_add(p, "keep", json_object_new_int64(keep));
	json_object_object_add(p, "dry_run", json_object_new_boolean(dry));
	/* Root's decision alone: the method exists only on boundary.sock. */
	if (client_call("boundary.sock", "operation.prune", p, &res, &err) != 0)
		return report_error("prune", &err);
	if (json) {
		cli_print_json(res);
	} else {
		struct json_object *pr = schema_child(res, "pruned"), *sk = schema_child(res, "skipped");
		for (size_t i = 0; i < json_object_array_length(pr); i++)
			printf("%s %s\n", dry ? "would prune" : "pruned",
			    json_object_get_string(json_object_array_get_idx(pr, i)));
		for (size_t i = 0; i < json_object_array_length(sk); i++) {
			struct json_object *o = json_object_array_get_idx(sk, i);
			printf("skipped %s (%s)\n", str_or(o, "operation_id", "?"),
			    str_or(o, "reason", "?"));
		}
		printf("%zu %s, %lld ended operation(s) kept\n", json_object_array_length(pr),
		    dry ? "would be pruned" : "pruned", (long long)schema_int(res, "kept", 0));
	}
	json_object_put(res);
	return 0;
}

int
cmd_operation(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "end") == 0)
		return op_end(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "inspect") == 0)
		return op_inspect(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "list") == 0)
		return op_list(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "prune") == 0)
		return op_prune(argc - 1, argv + 1);
	return cli_usage(cli_help_asked(argc, argv),
	    "usage: gensee operation inspect ID [--json] | list [--json] |\n"
	    "       end ID [--kill | --grace SECONDS] [--json] |\n"
	    "       prune [--older-than DURATION] [--keep N] [--dry-run] [--json]\n");
}
