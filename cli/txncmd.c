/*
 * txncmd.c: `gensee run network transaction-begin|transaction-activate|
 * transaction-end|transaction-revoke --socket PATH --transaction ID
 * --operation OP [--effect E] [--ttl-seconds N]`.
 *
 * --socket is a boundaryd socket root may call these methods on: the
 * operation's supervisor.sock (STATE/network-operations/OP/supervisor.sock)
 * or boundaryd's boundary.sock. --operation is always required and is
 * checked by boundaryd against the socket's operation, so a script
 * pointed at the wrong supervisor socket fails closed (not_authorized)
 * instead of acting on another operation.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"
#include "client.h"
#include "schema.h"
#include "util.h"

static const char txncmd_usage_text[] =
    "usage: gensee run network transaction-begin --socket PATH --transaction ID --operation OP\n"
    "                                            [--effect EFFECT] [--ttl-seconds N] [--json]\n"
    "       gensee run network transaction-activate --socket PATH --transaction ID --operation OP\n"
    "       gensee run network transaction-end --socket PATH --transaction ID --operation OP\n"
    "       gensee run network transaction-revoke --socket PATH --transaction ID --operation OP\n";

int
cmd_run_transaction(int argc, char **argv)
{
	static struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "transaction", required_argument, NULL, 't' },
		{ "operation", required_argument, NULL, 'o' },
		{ "effect", required_argument, NULL, 'e' },
		{ "ttl-seconds", required_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sub = argv[0], *sock = NULL, *txid = NULL, *op = NULL, *effect = NULL;
	const char *method;
	int64_t ttl = 0;
	int have_ttl = 0, json = 0, ch;
	struct json_object *params, *res;
	struct client_error err;

	if (cli_help_asked(argc, argv))
		return cli_usage(1, txncmd_usage_text);
	if (strcmp(sub, "transaction-begin") == 0)
		method = "transaction.begin";
	else if (strcmp(sub, "transaction-activate") == 0)
		method = "transaction.activate";
	else if (strcmp(sub, "transaction-end") == 0)
		method = "transaction.end";
	else if (strcmp(sub, "transaction-revoke") == 0)
		method = "transaction.revoke";
	else
		return cli_usage(0, txncmd_usage_text);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			sock = optarg;
			break;
		case 't':
			txid = optarg;
			break;
		case 'o':
			op = optarg;
			break;
		case 'e':
			effect = optarg;
			break;
		case 'l':
			if (util_parse_i64(optarg, 1, 86400, &ttl) != 0)
				return cli_usage(0, txncmd_usage_text);
			have_ttl = 1;
			break;
		case 'j':
			json = 1;
			break;
		default:
			return cli_usage(0, txncmd_usage_text);
		}
	}
	/* --effect and --ttl-seconds only narrow a begin; elsewhere they are a mistake. */
	if (optind != argc || sock == NULL || txid == NULL || op == NULL ||
	    ((effect != NULL || have_ttl) && strcmp(method, "transaction.begin") != 0))
		return cli_usage(0, txncmd_usage_text);
	params = json_object_new_object();
	json_object_object_add(params, "operation_id", json_object_new_string(op));
	json_object_object_add(params, "transaction_id", json_object_new_string(txid));
	if (effect != NULL)
		json_object_object_add(params, "effect", json_object_new_string(effect));
	if (have_ttl)
		json_object_object_add(params, "ttl_seconds", json_object_new_int64(ttl));
	if (client_call(sock, method, params, &res, &err) != 0) {
		fprintf(stderr, "gensee: %s: %s: %s\n", method, err.ce_code, err.ce_message);
		client_error_clear(&err);
		return 1;
	}
	if (json)
		cli_print_json(res);
	else
		printf("%s %s %s\n", schema_string(res, "transaction_id") ?
		    schema_string(res, "transaction_id") : txid,
		    schema_string(res, "state") ? schema_string(res, "state") : "?", op);
	json_object_put(res);
	return 0;
}
