/*
 * coordinator.c: `gensee run network transaction-execute --config F
 * --request R --transaction ID`, the effect coordinator (seed 001).
 *
 * Trust model: the coordinator runs as root for the trusted host
 * integration; the request file's contents are the untrusted part (an
 * agent asked for them). Everything that carries authority comes from the
 * root-owned config: the supervisor socket, the operation, the effect, the
 * TTL, the executable and the whole argv template. The config and the
 * executable must be root-owned regular files (not symlinks) writable by
 * root alone, under directories root controls all the way up, so nobody
 * else can swap them between the check and the use. The request is a
 * bounded strict-JSON object whose text replaces exactly one whole argv
 * element: it cannot add a flag or choose another program. No shell runs;
 * the child starts with an empty environment plus the config's.
 *
 * Lifecycle: transaction.start (begin + activate, one durable transition)
 * -> spawn -> transaction.end after exit status 0, transaction.revoke after
 * a non-zero status, a signal, a spawn error, SIGINT or SIGTERM. A start
 * whose reply is lost (transport error) may have committed, so a
 * best-effort revoke follows at once. A SIGKILL of the coordinator cannot
 * clean up: the root-owned TTL bounds the transaction then.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/close_range.h>

#include <json-c/json.h>

#include "cli.h"
#include "client.h"
#include "frame.h"
#include "httptxn.h"
#include "schema.h"
#include "util.h"

#define COORD_MAX_CONFIG (64 * 1024)
#define COORD_MAX_REQUEST (64 * 1024)
#define COORD_MAX_ARGS 64
#define COORD_MAX_ENV 64
#define COORD_PLACEHOLDER "{effect_request_json}"
/* After revoking, the child gets SIGTERM and this long before SIGKILL. */
#define COORD_KILL_GRACE_MS 5000

static const char coord_usage_text[] =
    "usage: gensee run network transaction-execute --config FILE --request FILE "
    "--transaction ID\n";

static const struct schema_field coord_fields[] = {
	{ "schema_version", SCHEMA_INT, SCHEMA_REQUIRED, 1, 1, 0 },
	{ "executor_label", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
	{ "supervisor_socket", SCHEMA_STRING, SCHEMA_REQUIRED, 2, PATH_MAX - 1, 0 },
	{ "operation_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 72, 0 },
	{ "operation_class", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
	{ "effect", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
	{ "ttl_seconds", SCHEMA_INT, SCHEMA_REQUIRED, 1, 86400, 0 },
	{ "command", SCHEMA_OBJECT, SCHEMA_REQUIRED, 0, 0, 0 },
};

static const struct schema_field coord_cmd_fields[] = {
	{ "executable", SCHEMA_STRING, SCHEMA_REQUIRED, 2, PATH_MAX - 1, 0 },
	{ "args", SCHEMA_STRING_ARRAY, SCHEMA_REQUIRED, 1, COORD_MAX_ARGS, 4096 },
	{ "environment", SCHEMA_OBJECT, SCHEMA_REQUIRED, 0, 0, 0 },
	{ "working_directory", SCHEMA_STRING, SCHEMA_REQUIRED, 1, PATH_MAX - 1, 0 },
};

static const struct schema_field coord_req_fields[] = {
	{ "schema_version", SCHEMA_INT, SCHEMA_REQUIRED, 1, 1, 0 },
	{ "request_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
	{ "operation_class", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 64, 0 },
	{ "parameters", SCHEMA_OBJECT, SCHEMA_REQUIRED, 0, 0, 0 },
};

/*
 * Is every directory above path (an absolute, already lstat-walked path)
 * root-controlled, and the last component a root-owned regular file only
 * root may write? Each component is checked with lstat, so a symlink
 * anywhere is refused. A world-writable directory is accepted only with
 * the sticky bit (/tmp): others may add names there but not replace ours.
 */
static int
coord_root_controlled(const char *path, int want_exec, struct stat *out, const char *what)
{
	char buf[PATH_MAX], *p;
	struct stat st;

	if (path[0] != '/' || strlen(path) >= sizeof(buf) || strstr(path, "/../") != NULL ||
	    strstr(path, "/./") != NULL || strstr(path, "//") != NULL) {
		fprintf(stderr, "gensee: %s %s: must be a plain absolute path\n", what, path);
		return -1;
	}
	util_strlcpy(buf, path, sizeof(buf));
	if (lstat("/", &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & (S_IWGRP | S_IWOTH))) {
		fprintf(stderr, "gensee: %s %s: / is not root-controlled\n", what, path);
		return -1;
	}
	for (p = buf;;) {
		char *slash = strchr(p + 1, '/');
		char save = 0;
		if (slash != NULL) {
			save = *slash;
			*slash = '\0';
		}
		const char *comp = buf;
		if (lstat(comp, &st) != 0) {
			fprintf(stderr, "gensee: %s %s: %s: %s\n", what, path, comp, strerror(errno));
			return -1;
		}
		if (slash != NULL) {
			if (!S_ISDIR(st.st_mode) || st.st_uid != 0 ||
			    ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))) {
				fprintf(stderr, "gensee: %s %s: %s is not a root-controlled directory\n",
				    what, path, comp);
				return -1;
			}
			*slash = save;
			p = slash;
			continue;
		}
		break;
	}
	/* The file itself: root's, not a symlink, written by root alone. */
	if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) ||
	    (want_exec && !(st.st_mode & S_IXUSR))) {
		fprintf(stderr, "gensee: %s %s: must be a root-owned regular file (not a symlink) "
		    "that only root may write%s\n", what, path, want_exec ? ", executable" : "");
		return -1;
	}
	*out = st;
	return 0;
}

/* Read a bounded file without following a symlink; the same inode that was checked. */
static struct json_object *
coord_read_json(const char *path, size_t max, const struct stat *checked, const char *what)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	struct json_object *o = NULL;

	if (fd < 0) {
		fprintf(stderr, "gensee: %s %s: %s\n", what, path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (checked != NULL && (st.st_dev != checked->st_dev || st.st_ino != checked->st_ino))) {
		fprintf(stderr, "gensee: %s %s: not the file that was checked\n", what, path);
		close(fd);
		return NULL;
	}
	if ((size_t)st.st_size > max) {
		fprintf(stderr, "gensee: %s %s: over %zu bytes\n", what, path, max);
		close(fd);
		return NULL;
	}
	if (util_read_fd(fd, max, &buf, &len) != 0) {
		fprintf(stderr, "gensee: %s %s: %s\n", what, path, strerror(errno));
		close(fd);
		return NULL;
	}
	close(fd);
	/* Strict JSON only: what is checked is what the executor receives. */
	int fst = frame_parse_payload((const uint8_t *)buf, len, &o);
	free(buf);
	if (fst != FRAME_OK || !json_object_is_type(o, json_type_object)) {
		fprintf(stderr, "gensee: %s %s: %s\n", what, path,
		    fst != FRAME_OK ? frame_status_code(fst) : "not a JSON object");
		json_object_put(o);
		return NULL;
	}
	return o;
}

struct coord {
	const char *co_sock;
	const char *co_op;
	const char *co_txid;
};

static int
coord_call(const struct coord *co, const char *method, struct json_object *extra,
    struct client_error *err)
{
	struct json_object *params = extra != NULL ? extra : json_object_new_object(), *res;

	json_object_object_add(params, "operation_id", json_object_new_string(co->co_op));
	json_object_object_add(params, "transaction_id", json_object_new_string(co->co_txid));
	if (client_call(co->co_sock, method, params, &res, err) != 0)
		return -1;
	json_object_put(res);
	return 0;
}

/* Revoke; a failure is reported, and the TTL remains the bound. */
static void
coord_revoke(const struct coord *co, const char *why)
{
	struct client_error err;

	if (coord_call(co, "transaction.revoke", NULL, &err) != 0) {
		fprintf(stderr, "gensee: transaction-execute: revoke after %s: %s: %s "
		    "(the transaction TTL still bounds it)\n", why, err.ce_code, err.ce_message);
		client_error_clear(&err);
		return;
	}
	fprintf(stderr, "gensee: transaction-execute: %s: transaction %s revoked\n", why,
	    co->co_txid);
}

/* A transport failure (no daemon answer): the request may have been committed. */
static int
coord_transport_error(const struct client_error *err)
{
	return strcmp(err->ce_code, "unavailable") == 0 || strcmp(err->ce_code, "protocol") == 0;
}

int
cmd_run_transaction_execute(int argc, char **argv)
{
	static struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "request", required_argument, NULL, 'r' },
		{ "transaction", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cfgpath = NULL, *reqpath = NULL, *txid = NULL;
	struct json_object *cfg = NULL, *req = NULL, *cmd, *args, *envo, *startp;
	struct schema_error serr;
	struct stat cst, est, rst;
	struct client_error err;
	struct coord co;
	char *argvv[COORD_MAX_ARGS + 2], *envv[COORD_MAX_ENV + 1];
	size_t nenv = 0, nplace = 0;
	const char *reqtext;
	int ch, rc = 1, pipefd[2] = { -1, -1 }, sfd = -1;
	sigset_t mask, old;
	pid_t pid;

	if (cli_help_asked(argc, argv))
		return cli_usage(1, coord_usage_text);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			cfgpath = optarg;
			break;
		case 'r':
			reqpath = optarg;
			break;
		case 't':
			txid = optarg;
			break;
		default:
			return cli_usage(0, coord_usage_text);
		}
	}
	if (optind != argc || cfgpath == NULL || reqpath == NULL || txid == NULL)
		return cli_usage(0, coord_usage_text);
	if (geteuid() != 0) {
		fprintf(stderr, "gensee: transaction-execute: must run as root\n");
		return 1;
	}
	if (!httptxn_valid_id(txid)) {
		fprintf(stderr, "gensee: transaction-execute: --transaction: invalid id\n");
		return CLI_EXIT_USAGE;
	}
	/* Everything with authority: from the root-controlled config. */
	if (coord_root_controlled(cfgpath, 0, &cst, "config") != 0 ||
	    (cfg = coord_read_json(cfgpath, COORD_MAX_CONFIG, &cst, "config")) == NULL)
		goto out;
	cmd = schema_child(cfg, "command");
	if (schema_validate(cfg, coord_fields, nitems(coord_fields), &serr) != 0 ||
	    schema_validate(cmd, coord_cmd_fields, nitems(coord_cmd_fields), &serr) != 0) {
		fprintf(stderr, "gensee: config %s: %s (%s)\n", cfgpath, serr.se_message,
		    serr.se_code);
		goto out;
	}
	args = schema_child(cmd, "args");
	envo = schema_child(cmd, "environment");
	if (coord_root_controlled(schema_string(cmd, "executable"), 1, &est, "executable") != 0)
		goto out;
	/* The placeholder is exactly one whole element, never part of one. */
	for (size_t i = 0; i < json_object_array_length(args); i++) {
		const char *a = json_object_get_string(json_object_array_get_idx(args, i));
		if (strcmp(a, COORD_PLACEHOLDER) == 0)
			nplace++;
		else if (strstr(a, "{effect_request_json") != NULL) {
			fprintf(stderr, "gensee: config %s: the placeholder must be a whole argument\n",
			    cfgpath);
			goto out;
		}
	}
	if (nplace != 1) {
		fprintf(stderr, "gensee: config %s: args must hold %s exactly once\n", cfgpath,
		    COORD_PLACEHOLDER);
		goto out;
	}
	if (json_object_object_length(envo) > COORD_MAX_ENV) {
		fprintf(stderr, "gensee: config %s: at most %d environment variables\n", cfgpath,
		    COORD_MAX_ENV);
		goto out;
	}
	json_object_object_foreach(envo, ek, ev) {
		char *kv = NULL;
		if (!json_object_is_type(ev, json_type_string) || ek[0] == '\0' ||
		    strchr(ek, '=') != NULL || asprintf(&kv, "%s=%s", ek, json_object_get_string(ev)) < 0) {
			fprintf(stderr, "gensee: config %s: environment: string values and names "
			    "without '='\n", cfgpath);
			goto out;
		}
		envv[nenv++] = kv;
	}
	envv[nenv] = NULL;
	/* The request: bounded, strict, and only data. */
	if (lstat(reqpath, &rst) != 0) {
		fprintf(stderr, "gensee: request %s: %s\n", reqpath, strerror(errno));
		goto out;
	}
	if ((req = coord_read_json(reqpath, COORD_MAX_REQUEST, &rst, "request")) == NULL)
		goto out;
	if (schema_validate(req, coord_req_fields, nitems(coord_req_fields), &serr) != 0) {
		fprintf(stderr, "gensee: request %s: %s (%s)\n", reqpath, serr.se_message,
		    serr.se_code);
		goto out;
	}
	if (strcmp(schema_string(req, "operation_class"),
	    schema_string(cfg, "operation_class")) != 0) {
		fprintf(stderr, "gensee: request %s: operation_class is not %s\n", reqpath,
		    schema_string(cfg, "operation_class"));
		goto out;
	}
	reqtext = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	argvv[0] = (char *)(uintptr_t)schema_string(cmd, "executable");
	for (size_t i = 0; i < json_object_array_length(args); i++) {
		const char *a = json_object_get_string(json_object_array_get_idx(args, i));
		argvv[i + 1] = (char *)(uintptr_t)(strcmp(a, COORD_PLACEHOLDER) == 0 ? reqtext : a);
	}
	argvv[json_object_array_length(args) + 1] = NULL;

	/* SIGINT and SIGTERM are read from a signalfd from here on: they mean revoke. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, &old) != 0 ||
	    (sfd = signalfd(-1, &mask, SFD_CLOEXEC)) < 0) {
		fprintf(stderr, "gensee: transaction-execute: signalfd: %s\n", strerror(errno));
		goto out;
	}
	co.co_sock = schema_string(cfg, "supervisor_socket");
	co.co_op = schema_string(cfg, "operation_id");
	co.co_txid = txid;
	startp = json_object_new_object();
	json_object_object_add(startp, "effect", json_object_new_string(schema_string(cfg, "effect")));
	json_object_object_add(startp, "ttl_seconds",
	    json_object_new_int64(schema_int(cfg, "ttl_seconds", 0)));
	if (coord_call(&co, "transaction.start", startp, &err) != 0) {
		fprintf(stderr, "gensee: transaction.start: %s: %s\n", err.ce_code, err.ce_message);
		/* The start may have committed before the reply was lost: take it back. */
		if (coord_transport_error(&err))
			coord_revoke(&co, "a lost start reply");
		client_error_clear(&err);
		goto out;
	}
	/* A SIGINT or SIGTERM that came while the start was in flight: revoke, spawn nothing. */
	{
		sigset_t pend;
		if (sigpending(&pend) == 0 &&
		    (sigismember(&pend, SIGINT) == 1 || sigismember(&pend, SIGTERM) == 1)) {
			int sig = sigismember(&pend, SIGINT) == 1 ? SIGINT : SIGTERM;
			coord_revoke(&co, sig == SIGINT ? "SIGINT" : "SIGTERM");
			rc = 128 + sig;
			goto out;
		}
	}
	if (pipe2(pipefd, O_CLOEXEC) != 0 || (pid = fork()) < 0) {
		fprintf(stderr, "gensee: transaction-execute: spawn: %s\n", strerror(errno));
		coord_revoke(&co, "a spawn error");
		goto out;
	}
	if (pid == 0) {
		int e;
		close(pipefd[0]);
		/* A clean start: default signals, nothing inherited but stdio. */
		signal(SIGPIPE, SIG_DFL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0 ||
		    chdir(schema_string(cmd, "working_directory")) != 0)
			e = errno;
		else {
			execve(argvv[0], argvv, envv);
			e = errno;
		}
		/* The parent learns why through the pipe (it closes on exec otherwise). */
		(void)!write(pipefd[1], &e, sizeof(e));
		_exit(127);
	}
	close(pipefd[1]);
	pipefd[1] = -1;
	{
		int e = 0;
		ssize_t n;
		do
			n = read(pipefd[0], &e, sizeof(e));
		while (n < 0 && errno == EINTR);
		if (n == (ssize_t)sizeof(e)) {
			int st;
			waitpid(pid, &st, 0);
			fprintf(stderr, "gensee: transaction-execute: spawn %s: %s\n", argvv[0],
			    strerror(e));
			coord_revoke(&co, "a spawn error");
			goto out;
		}
	}
	for (;;) {
		struct signalfd_siginfo si;
		int st;
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid) {
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
				if (coord_call(&co, "transaction.end", NULL, &err) != 0) {
					fprintf(stderr, "gensee: transaction.end: %s: %s\n", err.ce_code,
					    err.ce_message);
					client_error_clear(&err);
					coord_revoke(&co, "a failed end");
					rc = 1;
				} else {
					rc = 0;
				}
			} else if (WIFEXITED(st)) {
				coord_revoke(&co, "a non-zero exit");
				rc = WEXITSTATUS(st);
			} else {
				coord_revoke(&co, "a child signal");
				rc = 128 + WTERMSIG(st);
			}
			break;
		}
		if (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
			continue;
		if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM) {
			/* Authority first, then the child. */
			coord_revoke(&co, si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
			kill(pid, SIGTERM);
			for (int i = 0; i < COORD_KILL_GRACE_MS / 50; i++) {
				if (waitpid(pid, &st, WNOHANG) == pid)
					break;
				usleep(50 * 1000);
				if (i == COORD_KILL_GRACE_MS / 50 - 1) {
					kill(pid, SIGKILL);
					waitpid(pid, &st, 0);
				}
			}
			rc = 128 + (int)si.ssi_signo;
			break;
		}
	}
out:
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (sfd >= 0)
		close(sfd);
	for (size_t i = 0; i < nenv; i++)
		free(envv[i]);
	json_object_put(req);
	json_object_put(cfg);
	return rc;
}
