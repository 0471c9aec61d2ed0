/*
 * netcmd.c: `gensee run network inspect|event|revoke|grant-http|revoke-http` and
 * `gensee run fault` (commit-token: tokencmd.c; transaction-*: txncmd.c).
 *
 * Each takes either --socket PATH (an operation's supervisor.sock, root
 * only) or --operation ID (through client.sock, for the operation's owner).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"
#include "client.h"
#include "frame.h"
#include "schema.h"
#include "util.h"

struct netcmd_args {
	const char *na_socket;
	const char *na_operation;
	const char *na_file;
	const char *na_lease;
	int64_t na_ttl;
	int na_json;
};

static int
netcmd_parse(int argc, char **argv, const char *file_opt, struct netcmd_args *a)
{
	static struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "operation", required_argument, NULL, 'o' },
		{ "event", required_argument, NULL, 'f' },
		{ "lease", required_argument, NULL, 'l' },
		{ "ttl-seconds", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	memset(a, 0, sizeof(*a));
	longopts[2].name = file_opt != NULL ? file_opt : "event";
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			a->na_socket = optarg;
			break;
		case 'o':
			a->na_operation = optarg;
			break;
		case 'f':
			a->na_file = optarg;
			break;
		case 'l':
			a->na_lease = optarg;
			break;
		case 'T':
			if (util_parse_i64(optarg, 1, 86400, &a->na_ttl) != 0)
				return -1;
			break;
		case 'j':
			a->na_json = 1;
			break;
		default:
			return -1;
		}
	}
	if (optind != argc || (a->na_socket == NULL) == (a->na_operation == NULL))
		return -1;
	return 0;
}

/* Read a JSON object from a file (or "-" for stdin). */
static struct json_object *
netcmd_read_json(const char *path)
{
	char *buf;
	size_t len;
	struct json_object *o = NULL;
	int r = strcmp(path, "-") == 0 ? util_read_fd(0, 1 << 20, &buf, &len) :
	    util_read_path(path, 1 << 20, &buf, &len);

	if (r != 0) {
		fprintf(stderr, "gensee: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	int st = frame_parse_payload((const uint8_t *)buf, len, &o);
	free(buf);
	if (st != FRAME_OK) {
		fprintf(stderr, "gensee: %s: %s\n", path, frame_status_code(st));
		return NULL;
	}
	return o;
}

static int
netcmd_call(const struct netcmd_args *a, const char *method, struct json_object *params)
{
	struct client_error err;
	struct json_object *res;

	if (a->na_operation != NULL)
		json_object_object_add(params, "operation_id", json_object_new_string(a->na_operation));
	if (client_call(a->na_socket ? a->na_socket : "client.sock", method, params, &res, &err) != 0) {
		fprintf(stderr, "gensee: %s: %s: %s\n", method, err.ce_code, err.ce_message);
		client_error_clear(&err);
		return 1;
	}
	if (a->na_json || strcmp(method, "network.inspect") != 0) {
		cli_print_json(res);
	} else {
		struct json_object *env = schema_child(res, "envelope");
		struct json_object *leases = schema_child(res, "leases");
		printf("operation   %s\n", schema_string(res, "operation_id"));
		printf("table       %s (generation %lld, %s)\n", schema_string(res, "table"),
		    (long long)schema_int(res, "generation", 0), schema_string(env, "mode"));
		struct json_object *g = schema_child(env, "grants");
		for (size_t i = 0; g != NULL && i < json_object_array_length(g); i++)
			printf("grant       %s\n", json_object_to_json_string(json_object_array_get_idx(g, i)));
		for (size_t i = 0; leases != NULL && i < json_object_array_length(leases); i++)
			printf("lease       %s\n", json_object_to_json_string(json_object_array_get_idx(leases, i)));
		struct json_object *c = schema_child(res, "counters");
		if (c != NULL)
			printf("counters    allowed %lld pkts, blocked %lld pkts\n",
			    (long long)schema_int(c, "allowed_packets", 0),
			    (long long)schema_int(c, "blocked_packets", 0));
		struct json_object *top = schema_child(schema_child(c, "blocked_destinations"), "top");
		for (size_t i = 0; top != NULL && json_object_is_type(top, json_type_array) &&
		    i < json_object_array_length(top); i++) {
			struct json_object *d = json_object_array_get_idx(top, i);
			printf("blocked     %s %s/%lld: %lld pkts (%s)\n",
			    schema_string(d, "destination") ? schema_string(d, "destination") : "?",
			    schema_string(d, "protocol") ? schema_string(d, "protocol") : "?",
			    (long long)schema_int(d, "port", 0), (long long)schema_int(d, "packets", 0),
			    schema_string(d, "reason") ? schema_string(d, "reason") : "?");
		}
	}
	/* A denied fault is a successful answer; its exit status says denied. */
	const char *disp = schema_string(res, "disposition");
	int rc = disp != NULL && strcmp(disp, "deny") == 0 ? 3 : 0;
	json_object_put(res);
	return rc;
}

static const char netcmd_usage_text[] =
    "usage: gensee run network inspect (--socket PATH | --operation ID) [--json]\n"
    "       gensee run network event (--socket PATH | --operation ID) --event FILE\n"
    "       gensee run network revoke (--socket PATH | --operation ID) --lease ID\n"
    "       gensee run network grant-http (--socket PATH | --operation ID) [--ttl-seconds N]\n"
    "       gensee run network revoke-http (--socket PATH | --operation ID) --lease ID\n"
    "       gensee run network commit-token --socket PATH --operation OP --method METHOD\n"
    "           --url URL (--body-file FILE | --body-sha256 HEX) [--ttl-seconds N] [--json]\n"
    "       gensee run fault (--socket PATH | --operation ID) --fault FILE\n"
    "       gensee run network transaction-begin|transaction-activate|transaction-end|\n"
    "           transaction-revoke --socket PATH --transaction ID --operation OP\n"
    "           [--effect EFFECT --ttl-seconds N] (begin only)\n"
    "       gensee run network transaction-execute --config FILE --request FILE "
    "--transaction ID\n";

int
cmd_run_network(int argc, char **argv)
{
	struct netcmd_args a;
	const char *sub = argc >= 2 ? argv[1] : "";

	if (strcmp(sub, "transaction-execute") == 0)
		return cmd_run_transaction_execute(argc - 1, argv + 1);
	if (strncmp(sub, "transaction-", 12) == 0)
		return cmd_run_transaction(argc - 1, argv + 1);
	if (strcmp(sub, "commit-token") == 0)
		return cmd_run_commit_token(argc - 1, argv + 1);
	if (cli_help_asked(argc, argv))
		return cli_usage(1, netcmd_usage_text);
	if (strcmp(sub, "inspect") == 0) {
		if (netcmd_parse(argc - 1, argv + 1, NULL, &a) != 0 || a.na_file || a.na_lease)
			goto usage;
		return netcmd_call(&a, "network.inspect", json_object_new_object());
	}
	if (strcmp(sub, "event") == 0) {
		if (netcmd_parse(argc - 1, argv + 1, "event", &a) != 0 || a.na_file == NULL)
			goto usage;
		struct json_object *ev = netcmd_read_json(a.na_file), *p;
		if (ev == NULL)
			return 1;
		p = json_object_new_object();
		json_object_object_add(p, "event", ev);
		return netcmd_call(&a, "network.event", p);
	}
	if (strcmp(sub, "revoke-http") == 0) {
		if (netcmd_parse(argc - 1, argv + 1, NULL, &a) != 0 || a.na_lease == NULL ||
		    a.na_ttl != 0)
			goto usage;
		struct json_object *p = json_object_new_object();
		json_object_object_add(p, "lease_id", json_object_new_string(a.na_lease));
		return netcmd_call(&a, "network.revoke_http", p);
	}
	if (strcmp(sub, "grant-http") == 0) {
		if (netcmd_parse(argc - 1, argv + 1, NULL, &a) != 0 || a.na_lease != NULL ||
		    a.na_file != NULL)
			goto usage;
		struct json_object *p = json_object_new_object();
		if (a.na_ttl != 0)
			json_object_object_add(p, "ttl_seconds", json_object_new_int64(a.na_ttl));
		return netcmd_call(&a, "network.grant_http", p);
	}
	if (strcmp(sub, "revoke") == 0) {
		if (netcmd_parse(argc - 1, argv + 1, NULL, &a) != 0 || a.na_lease == NULL ||
		    a.na_ttl != 0)
			goto usage;
		struct json_object *p = json_object_new_object();
		json_object_object_add(p, "lease_id", json_object_new_string(a.na_lease));
		return netcmd_call(&a, "network.revoke", p);
	}
usage:
	return cli_usage(0, netcmd_usage_text);
}

int
cmd_run_fault(int argc, char **argv)
{
	struct netcmd_args a;

	if (cli_help_asked(argc, argv))
		return cli_usage(1, netcmd_usage_text);
	if (netcmd_parse(argc, argv, "fault", &a) != 0 || a.na_file == NULL)
		return cli_usage(0, netcmd_usage_text);
	struct json_object *f = netcmd_read_json(a.na_file), *p;
	if (f == NULL)
		return 1;
	p = json_object_new_object();
	json_object_object_add(p, "fault", f);
	return netcmd_call(&a, "fault.submit", p);
}
