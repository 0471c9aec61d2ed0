/*
 * watch.c: `gensee watch --pid PID [--duration-seconds N] [--json]`
 *
 * Attaches to an already running process tree by polling /proc (see
 * lib/proctree.h for what polling can miss) and prints one normalized event
 * per exec and exit of the root and its descendants. Nothing is privileged:
 * for other users' processes the executable is unreadable and printed as "".
 * Executables and argv0 come from the watched processes, so the readable
 * form escapes them before they reach a terminal.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"
#include "client.h"
#include "netspec.h"
#include "schema.h"
#include "proctree.h"
#include "util.h"

#define WATCH_POLL_MS 20
#define WATCH_DEFAULT_SECONDS 10
#define WATCH_MAX_SECONDS 86400

struct watch_state {
	int ws_json;
	pid_t ws_root;
	int ws_failed;		/* writing stdout failed */
	int ws_errno;
	unsigned long ws_exec;
	unsigned long ws_initial;
	unsigned long ws_exit;
};

static volatile sig_atomic_t watch_stop;

/* Ask the poll loop to finish and print its summary. */
static void
watch_on_signal(int sig)
{
	(void)sig;
	watch_stop = 1;
}

/* Print usage and exit CLI_EXIT_USAGE. */
static void __attribute__((noreturn))
watch_usage(void)
{
	fprintf(stderr, "usage: gensee watch --pid PID [--duration-seconds N] [--json] "
	    "[--linux-fanotify]\n");
	exit(CLI_EXIT_USAGE);
}

/* Copy s into buf with bytes outside printable ASCII as \xHH. */
static const char *
watch_vis(const char *s, char *buf, size_t len)
{
	size_t o = 0;

	for (; *s != '\0' && o + 5 < len; s++) {
		unsigned char c = (unsigned char)*s;

		if (isprint(c) && c != '\\' && c != '"')
			buf[o++] = (char)c;
		else
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
	}
	buf[o] = '\0';
	return buf;
}

/* Write one event as a JSON line. */
static int
watch_print_json(const struct proctree_event *ev, pid_t root)
{
	struct json_object *o = json_object_new_object();
	int r;

	if (o == NULL)
		return -1;
	if (json_object_object_add(o, "type",
	    json_object_new_string(proctree_event_name(ev->pe_type))) != 0 ||
	    json_object_object_add(o, "time", json_object_new_string(ev->pe_time)) != 0 ||
	    json_object_object_add(o, "root_pid", json_object_new_int(root)) != 0 ||
	    json_object_object_add(o, "pid", json_object_new_int(ev->pe_pid)) != 0 ||
	    json_object_object_add(o, "ppid", json_object_new_int(ev->pe_ppid)) != 0 ||
	    json_object_object_add(o, "start_time_ticks",
	    json_object_new_int64((int64_t)ev->pe_start_ticks)) != 0 ||
	    json_object_object_add(o, "depth", json_object_new_int(ev->pe_depth)) != 0 ||
	    json_object_object_add(o, "executable",
	    json_object_new_string(ev->pe_executable)) != 0 ||
	    json_object_object_add(o, "argv0", json_object_new_string(ev->pe_argv0)) != 0 ||
	    json_object_object_add(o, "argv_digest",
	    json_object_new_string(ev->pe_argv_digest)) != 0) {
		json_object_put(o);
		return -1;
	}
	if (ev->pe_type == PROCTREE_EXEC &&
	    json_object_object_add(o, "initial", json_object_new_boolean(ev->pe_initial)) != 0) {
		json_object_put(o);
		return -1;
	}
	r = printf("%s\n", json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return r < 0 ? -1 : 0;
}

/* Write one event as a readable line. */
static int
watch_print_text(const struct proctree_event *ev)
{
	char exe[4 * PATH_MAX + 1], argv0[4 * PROCTREE_ARGV0_LEN + 1];

	if (printf("%s %-4s pid %d ppid %d depth %d %s argv0 \"%s\"%s\n", ev->pe_time,
	    proctree_event_name(ev->pe_type), (int)ev->pe_pid, (int)ev->pe_ppid,
	    ev->pe_depth,
	    ev->pe_executable[0] != '\0' ?
	    watch_vis(ev->pe_executable, exe, sizeof(exe)) : "(executable unreadable)",
	    watch_vis(ev->pe_argv0, argv0, sizeof(argv0)),
	    ev->pe_initial ? " (already running)" : "") < 0)
		return -1;
	return 0;
}

/* proctree_scan callback: count and print one event, flushed. */
static void
watch_event(const struct proctree_event *ev, void *arg)
{
	struct watch_state *ws = arg;
	int r;

	switch (ev->pe_type) {
	case PROCTREE_EXEC:
		ws->ws_exec++;
		if (ev->pe_initial)
			ws->ws_initial++;
		break;
	case PROCTREE_EXIT:
		ws->ws_exit++;
		break;
	}
	if (ws->ws_failed)
		return;
	r = ws->ws_json ? watch_print_json(ev, ws->ws_root) : watch_print_text(ev);
	if (r != 0 || fflush(stdout) != 0) {
		ws->ws_failed = 1;
		ws->ws_errno = errno;
	}
}

/*
 * --linux-fanotify (root): put the running tree under an operation whose
 * sensitive-path rules gensee-sensord applies, the same listener a
 * sandboxed run gets. The tree keeps running; when the watch ends it is
 * detached again (moved back to the cgroup it came from), not killed.
 */
static int
watch_attach_fanotify(pid_t pid, char *opid, size_t len)
{
	struct json_object *policy, *fan, *p, *res;
	struct client_error err;
	struct proc_stat st;
	char *cause = NULL;

	if (geteuid() != 0) {
		fprintf(stderr, "gensee watch: --linux-fanotify needs root\n");
		return -1;
	}
	if (proc_read_stat(pid, &st) != 0) {
		fprintf(stderr, "gensee watch: no process %d\n", (int)pid);
		return -1;
	}
	if ((policy = policy_load(&cause)) == NULL ||
	    (fan = fanspec_build(policy, 1, &cause)) == NULL) {
		fprintf(stderr, "gensee watch: %s\n", cause);
		free(cause);
		json_object_put(policy);
		return -1;
	}
	json_object_put(policy);
	p = json_object_new_object();
	json_object_object_add(p, "pid", json_object_new_int(pid));
	json_object_object_add(p, "start_time_ticks", json_object_new_int64((int64_t)st.ps_start_ticks));
	json_object_object_add(p, "adopt_existing", json_object_new_boolean(1));
	json_object_object_add(p, "source_run", json_object_new_string("gensee watch"));
	json_object_object_add(p, "action_class", json_object_new_string("watch"));
	json_object_object_add(p, "fanotify", fan);
	if (client_call("boundary.sock", "operation.create", p, &res, &err) != 0) {
		fprintf(stderr, "gensee watch: cannot attach the fanotify listener: %s: %s\n",
		    err.ce_code, err.ce_message);
		client_error_clear(&err);
		return -1;
	}
	util_strlcpy(opid, schema_string(res, "operation_id"), len);
	fprintf(stderr, "gensee watch: sensitive paths of pid %d guarded by operation %s "
	    "(decisions: gensee timeline --operation %s)\n", (int)pid, opid, opid);
	json_object_put(res);
	return 0;
}

/* End the watch's operation: detach a tree that still runs. */
static void
watch_detach(const char *opid, int root_exited)
{
	struct json_object *p = json_object_new_object(), *res;
	struct client_error err;

	json_object_object_add(p, "operation_id", json_object_new_string(opid));
	/* Once the root exited the operation has ended by itself (and let go of the rest). */
	if (root_exited) {
		json_object_put(p);
		return;
	}
	json_object_object_add(p, "detach", json_object_new_boolean(1));
	if (client_call("boundary.sock", "operation.end", p, &res, &err) != 0) {
		fprintf(stderr, "gensee watch: ending %s: %s: %s\n", opid, err.ce_code,
		    err.ce_message);
		client_error_clear(&err);
		return;
	}
	json_object_put(res);
}

int
cmd_watch(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "duration-seconds", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "linux-fanotify", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct watch_state ws;
	struct proctree pt;
	struct sigaction sa;
	int64_t pid = 0, duration = WATCH_DEFAULT_SECONDS, deadline;
	int ch, fanotify = 0, rv = 0;
	char *cause = NULL;

	memset(&ws, 0, sizeof(ws));
	optind = 1;
	while ((ch = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			if (util_parse_i64(optarg, 1, INT32_MAX, &pid) != 0) {
				fprintf(stderr, "gensee watch: --pid: expected a process id\n");
				return CLI_EXIT_USAGE;
			}
			break;
		case 'd':
			if (util_parse_i64(optarg, 1, WATCH_MAX_SECONDS, &duration) != 0) {
				fprintf(stderr, "gensee watch: --duration-seconds: expected "
				    "1..%d seconds\n", WATCH_MAX_SECONDS);
				return CLI_EXIT_USAGE;
			}
			break;
		case 'j':
			ws.ws_json = 1;
			break;
		case 'f':
			fanotify = 1;
			break;
		case 'h':
			printf("usage: gensee watch --pid PID [--duration-seconds N] [--json]\n");
			return 0;
		default:
			watch_usage();
		}
	}
	if (optind != argc)
		watch_usage();
	if (pid == 0) {
		fprintf(stderr, "gensee watch: --pid is required\n");
		watch_usage();
	}
	char opid[128] = "";
	if (fanotify && watch_attach_fanotify((pid_t)pid, opid, sizeof(opid)) != 0)
		return 1;

	if (proctree_init(&pt, (pid_t)pid, &cause) != 0) {
		fprintf(stderr, "gensee watch: %s\n", cause);
		free(cause);
		return 1;
	}
	ws.ws_root = pt.pt_root_pid;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = watch_on_signal;
	if (sigemptyset(&sa.sa_mask) != 0 || sigaction(SIGINT, &sa, NULL) != 0 ||
	    sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGHUP, &sa, NULL) != 0) {
		perror("gensee watch: sigaction");
		proctree_free(&pt);
		return 1;
	}
	if (!ws.ws_json)
		fprintf(stderr, "gensee watch: pid %d for up to %jd s (polling /proc every %d ms)\n",
		    (int)pt.pt_root_pid, (intmax_t)duration, WATCH_POLL_MS);

	deadline = util_monotonic_ms() + duration * 1000;
	for (;;) {
		int64_t left;
		int wait;

		if (proctree_scan(&pt, watch_event, &ws, &cause) != 0) {
			fprintf(stderr, "gensee watch: %s\n", cause);
			free(cause);
			rv = 1;
			break;
		}
		if (ws.ws_failed) {
			fprintf(stderr, "gensee watch: writing events: %s\n",
			    strerror(ws.ws_errno));
			rv = 1;
			break;
		}
		if (pt.pt_root_exited || watch_stop)
			break;
		if ((left = deadline - util_monotonic_ms()) <= 0)
			break;
		wait = left < WATCH_POLL_MS ? (int)left : WATCH_POLL_MS;
		if (poll(NULL, 0, wait) == -1 && errno != EINTR) {
			perror("gensee watch: poll");
			rv = 1;
			break;
		}
	}

	if (rv == 0 && !ws.ws_json) {
		if (printf("gensee watch: pid %d: %lu exec (%lu already running), %lu exit, "
		    "%zu in tree; %s\n", (int)pt.pt_root_pid, ws.ws_exec, ws.ws_initial,
		    ws.ws_exit, pt.pt_nprocs,
		    pt.pt_root_exited ? "root exited" :
		    watch_stop ? "interrupted" : "duration elapsed") < 0 ||
		    fflush(stdout) != 0) {
			perror("gensee watch: stdout");
			rv = 1;
		}
	}
	proctree_free(&pt);
	if (opid[0] != '\0')
		watch_detach(opid, pt.pt_root_exited);
	return rv;
}
