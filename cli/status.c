/*
 * status.c: `gensee status [--json]`: host capabilities (lib/hostcaps.c)
 * and which daemons answer. The command is informational: a daemon that is
 * down is reported, not an error.
 */
#include <sys/stat.h>

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cli.h"
#include "client.h"
#include "hostcaps.h"
#include "schema.h"

/*
 * The daemons that answer on a socket of their own. gensee-sensord has
 * none: it is a client of boundaryd, whose system.status says whether it
 * is connected and with which sensors; gensee-tcloned (tclone.sock) with
 * its snapshot backends and why live cloning is unavailable.
 */
static const struct {
	const char *name;
	const char *socket;
} status_daemons[] = {
	{ "gensee-boundaryd", "client.sock" },
	{ "gensee-httpmediatord", "mediator.sock" },
};

static void status_down(struct json_object *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* sensord, as boundaryd sees it. */
static struct json_object *
status_sensord(struct json_object *boundaryd)
{
	struct json_object *e = json_object_new_object();
	struct json_object *sd = schema_child(schema_child(boundaryd, "status"), "sensord");

	if (sd == NULL) {
		status_down(e, "unknown (gensee-boundaryd does not answer)");
	} else if (!schema_bool(sd, "connected", 0)) {
		status_down(e, "not connected to gensee-boundaryd");
	} else {
		struct json_object *list = schema_child(sd, "sensors");
		char buf[256] = "connected to gensee-boundaryd:";
		for (size_t i = 0; list != NULL && i < json_object_array_length(list); i++) {
			strncat(buf, " ", sizeof(buf) - strlen(buf) - 1);
			strncat(buf, json_object_get_string(json_object_array_get_idx(list, i)),
			    sizeof(buf) - strlen(buf) - 1);
		}
		json_object_object_add(e, "answering", json_object_new_boolean(1));
		json_object_object_add(e, "detail", json_object_new_string(buf));
		json_object_object_add(e, "sensors", json_object_get(list));
		/* Its own pid, as boundaryd saw it connect (SO_PEERCRED). */
		struct json_object *st = json_object_new_object();
		json_object_object_add(st, "pid", json_object_get(schema_child(sd, "pid")));
		json_object_object_add(st, "sensors", json_object_get(list));
		json_object_object_add(e, "status", st);
	}
	return e;
}

/* Whether boundaryd's status lists sensor name among sensord's. */
static int
status_has_sensor(struct json_object *sd, const char *name)
{
	struct json_object *list = schema_child(sd, "sensors");
	for (size_t i = 0; list != NULL && i < json_object_array_length(list); i++)
		if (strcmp(json_object_get_string(json_object_array_get_idx(list, i)), name) == 0)
			return 1;
	return 0;
}

/*
 * What matters for enforcement is what the daemons can do, not the caller:
 * a normal user's own probe of fanotify, nftables or the proc connector
 * only says "requires root". When boundaryd answers, those rows show the
 * daemons' view (the caller's own probe stays under "caller").
 */
static void
status_daemon_view(struct json_object *host, struct json_object *daemons)
{
	struct json_object *bs = schema_child(schema_child(daemons, "gensee-boundaryd"), "status");
	struct json_object *sd = schema_child(bs, "sensord");
	static const struct {
		const char *key, *sensor;
	} rows[] = {
		{ "fanotify_permission_events", "fanotify" },
		{ "proc_connector", "proc_connector" },
		{ "nftables", NULL },
	};

	if (bs == NULL)
		return;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct json_object *old = schema_child(host, rows[i].key), *e;
		char buf[200];
		int avail;

		if (rows[i].sensor == NULL) {
			avail = schema_bool(schema_child(bs, "nftables"), "available", 0);
			snprintf(buf, sizeof(buf), "gensee-boundaryd %s nftables",
			    avail ? "manages" : "cannot manage");
		} else if (!schema_bool(sd, "connected", 0)) {
			avail = 0;
			snprintf(buf, sizeof(buf), "gensee-sensord is not connected");
		} else {
			avail = status_has_sensor(sd, rows[i].sensor);
			snprintf(buf, sizeof(buf), "gensee-sensord (pid %lld) %s", (long long)schema_int(
			    sd, "pid", 0), avail ? "has it" : "does not have it");
		}
		e = json_object_new_object();
		json_object_object_add(e, "available", json_object_new_boolean(avail));
		json_object_object_add(e, "detail", json_object_new_string(buf));
		json_object_object_add(e, "source", json_object_new_string("daemons"));
		json_object_object_add(e, "caller", json_object_get(old));
		json_object_object_add(host, rows[i].key, e);
	}
}

/* gensee status: boundaryd does not answer (the report is still printed). */
#define STATUS_EXIT_NO_SUPERVISOR 3

/* Print the usage line to f. */
static void
status_usage(FILE *f)
{
	fprintf(f, "usage: gensee status [--json]\n"
	    "Exit status 3 when gensee-boundaryd does not answer (the report is still printed).\n");
}

/* Fill a daemon entry that does not answer. */
static void
status_down(struct json_object *e, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	json_object_object_add(e, "answering", json_object_new_boolean(0));
	json_object_object_add(e, "detail", json_object_new_string(s != NULL ? s : "not running"));
	free(s);
}

/*
 * Ask the daemon on socket sock for system.status. A missing socket means
 * not running; a socket that refuses or a daemon that errors is reported
 * with the reason, since that is what an administrator has to fix.
 */
static struct json_object *
status_daemon(const char *sock, const char *method)
{
	struct json_object *e = json_object_new_object(), *res;
	struct client_error err;
	struct stat st;
	char path[4096], *cause = NULL;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", client_runtime_dir(), sock);
	json_object_object_add(e, "socket", json_object_new_string(path));
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			status_down(e, "not running");
		else
			status_down(e, "not running (%s: %s)", path, strerror(errno));
		return e;
	}
	fd = client_connect(sock, &cause);
	if (fd < 0) {
		status_down(e, "not running (%s)", cause != NULL ? cause : "connect failed");
		free(cause);
		return e;
	}
	if (close(fd) != 0 && errno != EINTR) {
		status_down(e, "close: %s", strerror(errno));
		return e;
	}
	if (client_call(sock, method, json_object_new_object(), &res, &err) != 0) {
		status_down(e, "socket connects but %s failed: %s: %s", method, err.ce_code,
		    err.ce_message);
		client_error_clear(&err);
		return e;
	}
	json_object_object_add(e, "answering", json_object_new_boolean(1));
	json_object_object_add(e, "status", res);
	return e;
}

/* One line summarising a daemon's system.status result. */
static void
status_print_summary(struct json_object *st)
{
	const char *instance = schema_string(st, "instance");
	const char *rh = schema_string(schema_child(st, "recovery_health"), "status");

	printf("pid %lld", (long long)schema_int(st, "pid", 0));
	if (schema_string(st, "version") != NULL)
		printf(", version %s", schema_string(st, "version"));
	if (instance != NULL)
		printf(", instance %s", instance);
	if (schema_child(st, "uptime_ms") != NULL)
		printf(", up %llds", (long long)(schema_int(st, "uptime_ms", 0) / 1000));
	if (schema_child(st, "operations") != NULL)
		printf(", %lld active operation(s)",
		    (long long)schema_int(schema_child(st, "operations"), "active", 0));
	if (rh != NULL)
		printf(", recovery %s", rh);
	if (schema_string(st, "backend") != NULL) {
		struct json_object *b = schema_child(st, "backends");
		printf(", snapshot backends");
		for (size_t i = 0; b != NULL && i < json_object_array_length(b); i++)
			printf("%s%s", i ? "," : " ", json_object_get_string(json_object_array_get_idx(b, i)));
		printf(" (using %s), btrfs %s, live cloning unavailable: %s", schema_string(st, "backend"),
		    schema_string(st, "btrfs"), schema_string(schema_child(st, "live_clone"), "reason"));
	}
	printf("\n");
}

/* The readable form: an aligned capability table, then the daemons. */
static void
status_print_text(struct json_object *host, struct json_object *daemons)
{
	int w = (int)strlen("CAPABILITY");

	json_object_object_foreach(host, k0, v0) {
		(void)v0;
		if ((int)strlen(k0) > w)
			w = (int)strlen(k0);
	}
	printf("%-*s  %-9s  %s\n", w, "CAPABILITY", "AVAILABLE", "DETAIL");
	json_object_object_foreach(host, k1, v1) {
		printf("%-*s  %-9s  %s\n", w, k1, schema_bool(v1, "available", 0) ? "yes" : "no",
		    schema_string(v1, "detail") != NULL ? schema_string(v1, "detail") : "");
	}

	printf("\n%-*s  %-9s  %s\n", w, "DAEMON", "ANSWERING", "DETAIL");
	json_object_object_foreach(daemons, k2, v2) {
		int up = schema_bool(v2, "answering", 0);
		printf("%-*s  %-9s  ", w, k2, up ? "yes" : "no");
		if (up)
			status_print_summary(schema_child(v2, "status"));
		else
			printf("%s\n", schema_string(v2, "detail") != NULL ?
			    schema_string(v2, "detail") : "not running");
	}
}

int
cmd_status(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct json_object *out, *host, *daemons;
	int ch, json = 0;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j':
			json = 1;
			break;
		case 'h':
			status_usage(stdout);
			return 0;
		default:
			status_usage(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		status_usage(stderr);
		return CLI_EXIT_USAGE;
	}

	host = hostcaps_probe();
	if (host == NULL) {
		fprintf(stderr, "gensee status: out of memory\n");
		return 1;
	}
	daemons = json_object_new_object();
	for (size_t i = 0; i < sizeof(status_daemons) / sizeof(status_daemons[0]); i++)
		json_object_object_add(daemons, status_daemons[i].name,
		    status_daemon(status_daemons[i].socket, "system.status"));
	json_object_object_add(daemons, "gensee-sensord",
	    status_sensord(schema_child(daemons, "gensee-boundaryd")));
	status_daemon_view(host, daemons);
	json_object_object_add(daemons, "gensee-tcloned", status_daemon("tclone.sock",
	    "tclone.status"));
	out = json_object_new_object();
	json_object_object_add(out, "host", host);
	json_object_object_add(out, "daemons", daemons);

	if (json)
		cli_print_json(out);
	else
		status_print_text(host, daemons);
	/* A script can tell a host whose supervisor does not answer: nothing can run there. */
	int answering = schema_bool(schema_child(daemons, "gensee-boundaryd"), "answering", 0);
	json_object_put(out);
	return answering ? 0 : STATUS_EXIT_NO_SUPERVISOR;
}
