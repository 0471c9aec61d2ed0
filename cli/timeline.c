/*
 * timeline.c: `gensee timeline [--operation ID [--follow]] [--json] [--ocsf]`.
 *
 * Exec events, network effects (allow, lease, deny, NetworkBlocked), faults,
 * leases and seccomp refusals of an operation in time order, read by boundaryd from the
 * evidence files (they are root's; the caller sees only their own).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cli.h"
#include "client.h"
#include "ocsf.h"
#include "schema.h"

static void
timeline_print(const char *id, struct json_object *e)
{
	const char *ev = schema_string(e, "evidence");
	const char *kind = schema_string(e, "kind");
	int counters = ev != NULL && strcmp(ev, "counters") == 0;

	/* Counter snapshots have no kind of their own. */
	if (kind == NULL && counters)
		kind = schema_bool(e, "final", 0) ? "final" : "snapshot";
	/* Every line names its operation: merged timelines stay attributable. */
	printf("%-24s %s %-8s %-16s", schema_string(e, "time") ? schema_string(e, "time") : "-",
	    id, ev ? ev : "?", kind ? kind : "?");
	if (schema_child(e, "pid") != NULL)
		printf(" pid %lld", (long long)schema_int(e, "pid", 0));
	if (schema_string(e, "executable") != NULL)
		printf(" %s", schema_string(e, "executable"));
	if (schema_string(e, "syscall") != NULL)
		printf(" %s refused %lld time(s)", schema_string(e, "syscall"),
		    (long long)schema_int(e, "count", 0));
	if (schema_string(e, "destination") != NULL && schema_string(e, "protocol") != NULL)
		printf(" %s %s/%lld", schema_string(e, "destination"), schema_string(e, "protocol"),
		    (long long)schema_int(e, "port", 0));
	else if (schema_string(e, "destination") != NULL)
		printf(" %s", schema_string(e, "destination"));
	struct json_object *cap = schema_child(e, "capability");
	if (cap != NULL)
		printf(" %s %s/%lld", schema_string(cap, "destination"), schema_string(cap, "protocol"),
		    (long long)schema_int(cap, "port", 0));
	/* A DNS proxy decision: the question, what it answered, the verdict. */
	if (schema_string(e, "qname") != NULL) {
		struct json_object *a = schema_child(e, "addresses");
		printf(" %s %s", schema_string(e, "qtype") ? schema_string(e, "qtype") : "?",
		    schema_string(e, "qname"));
		for (size_t i = 0; a != NULL && json_object_is_type(a, json_type_array) &&
		    i < json_object_array_length(a); i++)
			printf("%s%s", i == 0 ? " = " : ",",
			    json_object_get_string(json_object_array_get_idx(a, i)));
		if (schema_string(e, "decision") != NULL)
			printf(" -> %s", schema_string(e, "decision"));
	}
	/* An egress decision: a CONNECT tunnel, or a forwarded http:// request. */
	if (schema_string(e, "type") != NULL && strcmp(schema_string(e, "type"),
	    "connect_decision") == 0 && schema_string(e, "method") != NULL)
		printf(" HTTP %s %s -> %s", schema_string(e, "method"), schema_string(e, "url") ?
		    schema_string(e, "url") : "?", schema_string(e, "decision") ?
		    schema_string(e, "decision") : "?");
	else if (schema_string(e, "type") != NULL && strcmp(schema_string(e, "type"),
	    "connect_decision") == 0)
		printf(" CONNECT %s:%lld -> %s", schema_string(e, "host") ? schema_string(e, "host") :
		    "?", (long long)schema_int(e, "port", 0), schema_string(e, "decision") ?
		    schema_string(e, "decision") : "?");
	if (schema_string(e, "disposition") != NULL)
		printf(" -> %s", schema_string(e, "disposition"));
	if (schema_string(e, "reason") != NULL)
		printf(" (%s)", schema_string(e, "reason"));
	if (counters)
		printf(" allowed %lld packets, blocked %lld packets",
		    (long long)schema_int(e, "allowed_packets", 0),
		    (long long)schema_int(e, "blocked_packets", 0));
	if (schema_child(e, "packets") != NULL)
		printf(" %lld packets %lld bytes", (long long)schema_int(e, "packets", 0),
		    (long long)schema_int(e, "bytes", 0));
	if (schema_string(e, "lease_id") != NULL)
		printf(" lease %s", schema_string(e, "lease_id"));
	if (schema_string(e, "path") != NULL)
		printf(" %s %s -> %s (%s)", schema_string(e, "event") ? schema_string(e, "event") : "",
		    schema_string(e, "path"), schema_string(e, "decision") ?
		    schema_string(e, "decision") : "?", schema_string(e, "action") ?
		    schema_string(e, "action") : "");
	printf("\n");
}

/* Lines already printed by a --follow (their JSON text), to print only new ones. */
struct timeline_seen {
	char **ts_v;
	size_t ts_n, ts_cap;
};

static int
timeline_seen_add(struct timeline_seen *sn, const char *line)
{
	for (size_t i = 0; i < sn->ts_n; i++)
		if (strcmp(sn->ts_v[i], line) == 0)
			return 0;
	if (sn->ts_n == sn->ts_cap) {
		size_t cap = sn->ts_cap ? 2 * sn->ts_cap : 256;
		char **v = realloc(sn->ts_v, cap * sizeof(*v));
		if (v == NULL)
			return 1; /* print it again rather than lose it */
		sn->ts_v = v;
		sn->ts_cap = cap;
	}
	if ((sn->ts_v[sn->ts_n] = strdup(line)) != NULL)
		sn->ts_n++;
	return 1;
}

static void
timeline_seen_free(struct timeline_seen *sn)
{
	for (size_t i = 0; i < sn->ts_n; i++)
		free(sn->ts_v[i]);
	free(sn->ts_v);
}

/* Print the events of one operation (those not in seen, when following). */
static int
timeline_fetch(const char *id, int json, int ocsf, struct timeline_seen *seen)
{
	struct client_error err;
	struct json_object *p = json_object_new_object(), *res, *events;

	json_object_object_add(p, "operation_id", json_object_new_string(id));
	if (client_call("client.sock", "operation.evidence", p, &res, &err) != 0) {
		fprintf(stderr, "gensee timeline: %s: %s: %s\n", id, err.ce_code, err.ce_message);
		client_error_clear(&err);
		return 1;
	}
	events = schema_child(res, "events");
	for (size_t i = 0; i < json_object_array_length(events); i++) {
		struct json_object *e = json_object_array_get_idx(events, i);
		if (seen != NULL && !timeline_seen_add(seen, json_object_to_json_string_ext(e,
		    JSON_C_TO_STRING_PLAIN)))
			continue;
		if (ocsf) {
			/* The mapping boundaryd --ocsf uses (lib/ocsf.c); counters have none. */
			struct json_object *o = ocsf_map(schema_string(e, "evidence"), e);
			if (o == NULL)
				continue;
			printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
			    JSON_C_TO_STRING_NOSLASHESCAPE));
			json_object_put(o);
		} else if (json) {
			if (schema_child(e, "operation_id") == NULL)
				json_object_object_add(e, "operation_id", json_object_new_string(id));
			printf("%s\n", json_object_to_json_string_ext(e, JSON_C_TO_STRING_PLAIN |
			    JSON_C_TO_STRING_NOSLASHESCAPE));
		} else {
			timeline_print(id, e);
		}
	}
	fflush(stdout);
	json_object_put(res);
	return 0;
}

/* Whether the operation is still running (an error counts as not: stop following). */
static int
timeline_running(const char *id)
{
	struct client_error err;
	struct json_object *p = json_object_new_object(), *res;
	int running;

	json_object_object_add(p, "operation_id", json_object_new_string(id));
	if (client_call("client.sock", "operation.inspect", p, &res, &err) != 0) {
		client_error_clear(&err);
		return 0;
	}
	const char *st = schema_string(schema_child(schema_child(res, "record"), "lifecycle"),
	    "state");
	running = st != NULL && (strcmp(st, "running") == 0 || strcmp(st, "starting") == 0);
	json_object_put(res);
	return running;
}

#define TIMELINE_FOLLOW_MS 500

static int
timeline_one(const char *id, int json, int ocsf, int follow)
{
	struct timeline_seen seen = { 0 };
	int rc;

	if (!follow)
		return timeline_fetch(id, json, ocsf, NULL);
	/* Until the operation ends, then once more for what its end wrote. */
	for (;;) {
		int running = timeline_running(id);
		if ((rc = timeline_fetch(id, json, ocsf, &seen)) != 0 || !running)
			break;
		usleep(TIMELINE_FOLLOW_MS * 1000);
	}
	timeline_seen_free(&seen);
	return rc;
}

int
cmd_timeline(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "operation", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "ocsf", no_argument, NULL, 'O' },
		{ "follow", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	static const char usage[] =
	    "usage: gensee timeline [--operation ID [--follow]] [--json] [--ocsf]\n"
	    "  --follow prints new events as they are recorded, until the operation ends.\n";
	const char *id = NULL;
	int json = 0, ocsf = 0, follow = 0, ch, rc = 0;
	struct client_error err;
	struct json_object *res;

	if (cli_help_asked(argc, argv))
		return cli_usage(1, usage);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'o':
			id = optarg;
			break;
		case 'j':
			json = 1;
			break;
		case 'O':
			ocsf = 1;
			break;
		case 'f':
			follow = 1;
			break;
		default:
			return cli_usage(0, usage);
		}
	}
	if (optind != argc || (follow && id == NULL))
		return cli_usage(0, usage);
	if (id != NULL)
		return timeline_one(id, json, ocsf, follow);
	/* Every operation of the caller, oldest first. */
	if (client_call("client.sock", "operation.list", json_object_new_object(), &res, &err) != 0) {
		fprintf(stderr, "gensee timeline: %s: %s\n", err.ce_code, err.ce_message);
		client_error_clear(&err);
		return 1;
	}
	struct json_object *ops = schema_child(res, "operations");
	for (size_t i = 0; i < json_object_array_length(ops); i++)
		rc |= timeline_one(schema_string(json_object_array_get_idx(ops, i), "operation_id"),
		    json, ocsf, 0);
	json_object_put(res);
	return rc;
}
