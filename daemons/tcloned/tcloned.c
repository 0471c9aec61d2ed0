/*
 * tcloned.c: gensee-tcloned entry point, its socket, run records, the
 * transaction history and the boundaryd channel.
 *
 * Requests are served one at a time, each on its own connection with a
 * frame deadline (a stalled client is cut off after
 * TCLONED_FRAME_DEADLINE_MS). A long merge delays the next request; it
 * never lets one through unchecked.
 *
 * The trust model. tcloned is root and serves every local user on a 0666
 * socket, so everything a caller can name is checked against the caller,
 * whom SO_PEERCRED and its pidfd identify (lib/peer.c), never against what
 * the request says:
 *   - who asks: a peer inside any operation's cgroup (an agent, however it
 *     got the socket), or one whose cgroup is unreadable, is refused every
 *     method; an agent reaches tcloned only through its run's bridge,
 *     scoped to that run (bridge.c);
 *   - workspace, --to: opened with the caller's fsuid/fsgid and no
 *     supplementary groups (setgroups(0) at start), so root reads or
 *     creates nothing there the caller could not; re-read through
 *     /proc/self/fd to refuse symlinked or moved paths; never below the
 *     authority root or the runtime directory;
 *   - run ids, fork and merge targets: looked up among the caller's own
 *     runs only (root: all); another user's run does not exist by id or
 *     by name (lifecycle.c, visible());
 *   - merge --paths: names below the run's workspace (relative, or
 *     absolute inside it), no "." or ".." component, reached without
 *     following a symlink (lib/snapshot.c);
 *   - argv: run as the caller, in the run's own mount, pid, uts and ipc
 *     namespaces, under its operation (boundaryd) with the default seccomp
 *     and Landlock of --sandbox linux, after no_new_privs: an argument can
 *     make it run anything the caller could run, nothing more;
 *   - landlock_rw: only ever narrows (Landlock rulesets stack on what the
 *     caller's uid allows anyway);
 *   - allow_net and fanotify: relayed to boundaryd as the operation's
 *     request, where the caller's limits apply (network policy; fanotify
 *     rules only below the caller's home and workspace, fanpolicy_scope_section);
 *   - podman_path and image: only the operator's --podman is ever run, and
 *     an image is a plain name from the operator's store (podman_image_ok);
 *   - sizes and counts: every field is bounded by its schema; copies per
 *     fork, runs in all and connections per uid are capped.
 * What a compromised tcloned could still do is bounded by sandbox_tcloned()
 * (lib/sandbox.c) and its unit.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <dirent.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include <cap-ng.h>

#include "frame.h"
#include "gitmerge.h"
#include "ids.h"
#include "log.h"
#include "peer.h"
#include "proto.h"
#include "safefs.h"
#include "sandbox.h"
#include "schema.h"
#include "tcloned.h"
#include "util.h"

#ifndef BTRFS_SUPER_MAGIC
#define BTRFS_SUPER_MAGIC 0x9123683E
#endif

static struct tcloned td;
static volatile sig_atomic_t td_quit;

static void __attribute__((noreturn))
usage_to(int help)
{
	fprintf(help ? stdout : stderr, "usage: " TCLONED_NAME
	    " [--authority-root DIR] [--runtime-dir DIR] [--cgroup-base NAME]\n"
	    "       [--backend btrfs|overlay|copy] [--podman PATH] [--podman-image IMAGE]\n"
	    "       [--debug] [--foreground]\n"
	    "       " TCLONED_NAME " --help | --version\n");
	exit(help ? 0 : 2);
}

/* -- the boundaryd channel: one connection per call, as root on boundary.sock -- */

int
tcloned_bd_call(struct tcloned *t, const char *method, struct json_object *params,
    struct json_object **result, char *code, size_t codelen, char **cause)
{
	struct sockaddr_un sun;
	struct json_object *req, *reply = NULL, *err, *res;
	int fd, rv = -1;
	static int64_t next_id;

	*result = NULL;
	if (code != NULL && codelen > 0)
		code[0] = '\0';
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if ((size_t)snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/boundary.sock",
	    t->td_runtime) >= sizeof(sun.sun_path)) {
		json_object_put(params);
		util_cause(cause, "runtime dir path too long");
		return -1;
	}
	req = proto_request_new(++next_id, method, params);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		util_cause(cause, "boundaryd unavailable (%s): %s", sun.sun_path, strerror(errno));
		if (code != NULL)
			util_strlcpy(code, "boundaryd_unavailable", codelen);
		goto out;
	}
	if (frame_write_fd(fd, req, cause) != 0 ||
	    frame_read_fd(fd, FRAME_MAX_DEFAULT, TCLONED_BD_TIMEOUT_MS, &reply, cause) != 0) {
		if (code != NULL)
			util_strlcpy(code, "boundaryd_unavailable", codelen);
		goto out;
	}
	if ((err = schema_child(reply, "error")) != NULL) {
		const char *c = schema_string(err, "code"), *m = schema_string(err, "message");
		util_cause(cause, "%s: %s: %s", method, c ? c : "error", m ? m : "");
		if (code != NULL)
			util_strlcpy(code, c ? c : PE_INTERNAL, codelen);
		goto out;
	}
	res = schema_child(reply, "result");
	if (res == NULL || !json_object_is_type(res, json_type_object)) {
		util_cause(cause, "%s: no result from boundaryd", method);
		goto out;
	}
	*result = json_object_get(res);
	rv = 0;
out:
	if (fd >= 0)
		close(fd);
	json_object_put(req);
	json_object_put(reply);
	return rv;
}

/* -- transaction history: tclone/history.jsonl, one record per write(2) -- */

void
tcloned_history(struct tcloned *t, const char *tx, const char *action, const char *outcome,
    const struct trun *r, const char *group, uid_t uid, struct json_object *detail)
{
	struct json_object *o = json_object_new_object();
	char now[40];
	int fd;

	util_now_rfc3339(now, sizeof(now));
	json_object_object_add(o, "time", json_object_new_string(now));
	json_object_object_add(o, "tx_id", json_object_new_string(tx));
	json_object_object_add(o, "action", json_object_new_string(action));
	json_object_object_add(o, "outcome", json_object_new_string(outcome));
	if (r != NULL) {
		json_object_object_add(o, "run_id", json_object_new_string(r->tr_id));
		json_object_object_add(o, "role", json_object_new_string(r->tr_role));
		if (r->tr_source[0] != '\0')
			json_object_object_add(o, "source_run_id",
			    json_object_new_string(r->tr_source));
		if (r->tr_op[0] != '\0')
			json_object_object_add(o, "operation_id", json_object_new_string(r->tr_op));
	}
	if (group != NULL && group[0] != '\0')
		json_object_object_add(o, "group_id", json_object_new_string(group));
	json_object_object_add(o, "uid", json_object_new_int64(uid));
	{
		/*
		 * Who asked: the host user (tclone.sock), an agent through its
		 * run's bridge, or tcloned itself (an agent's exit, recovery).
		 */
		struct json_object *org = json_object_new_object();
		json_object_object_add(org, "via", json_object_new_string(t->td_origin_run != NULL ?
		    "bridge" : t->td_serving_host ? "host" : "tcloned"));
		if (t->td_origin_run != NULL) {
			json_object_object_add(org, "run_id", json_object_new_string(t->td_origin_run));
			json_object_object_add(org, "pid", json_object_new_int(t->td_origin_pid));
		}
		json_object_object_add(o, "origin", org);
	}
	if (detail != NULL)
		json_object_object_add(o, "detail", detail);
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE);
	size_t len = strlen(s);
	char *line = malloc(len + 2);
	fd = safefs_openat(t->td_tc_fd, "history.jsonl", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
	    0600);
	if (line == NULL || fd < 0) {
		log_warn("history.jsonl: cannot record %s %s", action, outcome);
	} else {
		memcpy(line, s, len);
		line[len] = '\n';
		/* One write(2): a reader never sees half a record. */
		if (write(fd, line, len + 1) != (ssize_t)(len + 1))
			log_warn("history.jsonl: short write of %s %s", action, outcome);
	}
	if (fd >= 0)
		close(fd);
	free(line);
	json_object_put(o);
}

/* -- run records -- */

void
trun_free(struct trun *r)
{
	if (r == NULL)
		return;
	if (r->tr_bridge_open)
		close(r->tr_bridge_fd);
	json_object_put(r->tr_argv);
	json_object_put(r->tr_network);
	json_object_put(r->tr_landlock_rw);
	json_object_put(r->tr_rec);
	free(r);
}

struct trun *
tcloned_find(struct tcloned *t, const char *id)
{
	for (int i = 0; i < t->td_nruns; i++)
		if (strcmp(t->td_runs[i]->tr_id, id) == 0 || strcmp(t->td_runs[i]->tr_name, id) == 0)
			return t->td_runs[i];
	return NULL;
}

int
tcloned_add(struct tcloned *t, struct trun *r)
{
	if (t->td_nruns >= TCLONED_MAX_RUNS)
		return -1;
	t->td_runs[t->td_nruns++] = r;
	return 0;
}

void
tcloned_forget(struct tcloned *t, struct trun *r)
{
	for (int i = 0; i < t->td_nruns; i++)
		if (t->td_runs[i] == r) {
			memmove(&t->td_runs[i], &t->td_runs[i + 1],
			    (size_t)(t->td_nruns - i - 1) * sizeof(t->td_runs[0]));
			t->td_nruns--;
			break;
		}
	trun_free(r);
}

static void
rec_str(struct json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, v != NULL && v[0] != '\0' ? json_object_new_string(v) : NULL);
}

/* Write the record: temp file, fsync, rename (the old or the new, never half). */
int
tcloned_save(struct tcloned *t, struct trun *r, char **cause)
{
	struct json_object *o = r->tr_rec, *layers = json_object_new_array();
	char path[128], tmp[160];
	int fd;

	rec_str(o, "run_id", r->tr_id);
	rec_str(o, "role", r->tr_role);
	rec_str(o, "state", r->tr_state);
	rec_str(o, "source_run_id", r->tr_source);
	rec_str(o, "group_id", r->tr_group);
	rec_str(o, "name", r->tr_name);
	rec_str(o, "approach", r->tr_approach);
	rec_str(o, "operation_id", r->tr_op);
	rec_str(o, "workspace", r->tr_workspace);
	rec_str(o, "backend", r->tr_backend);
	rec_str(o, "runtime", r->tr_runtime[0] ? r->tr_runtime : "ns");
	if (strcmp(r->tr_runtime, "podman") == 0) {
		rec_str(o, "image", r->tr_image);
		json_object_object_add(o, "tmux", json_object_new_boolean(r->tr_tmux));
	}
	for (int i = 0; i < r->tr_nlayers; i++)
		json_object_array_add(layers, json_object_new_string(r->tr_layers[i]));
	json_object_object_add(o, "layers", layers);
	json_object_object_add(o, "index", json_object_new_int(r->tr_index));
	json_object_object_add(o, "observe_only", json_object_new_boolean(r->tr_observe_only));
	json_object_object_add(o, "uid", json_object_new_int64(r->tr_uid));
	json_object_object_add(o, "gid", json_object_new_int64(r->tr_gid));
	json_object_object_add(o, "pid", json_object_new_int(r->tr_pid));
	json_object_object_add(o, "start_time_ticks", json_object_new_int64((int64_t)r->tr_start_ticks));
	json_object_object_add(o, "created_ms", json_object_new_int64(r->tr_created_ms));
	json_object_object_add(o, "argv", json_object_get(r->tr_argv));
	json_object_object_add(o, "network", json_object_get(r->tr_network));
	json_object_object_add(o, "landlock_rw", json_object_get(r->tr_landlock_rw));
	snprintf(path, sizeof(path), "runs/%s/record.json", r->tr_id);
	snprintf(tmp, sizeof(tmp), "runs/%s/record.json.tmp", r->tr_id);
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
	    JSON_C_TO_STRING_NOSLASHESCAPE);
	fd = safefs_openat(t->td_tc_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || util_write_all(fd, s, strlen(s)) != 0 || fsync(fd) != 0) {
		util_cause(cause, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	if (renameat(t->td_tc_fd, tmp, t->td_tc_fd, path) != 0) {
		util_cause(cause, "%s: rename: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static void
load_str(struct json_object *o, const char *k, char *dst, size_t len)
{
	const char *v = schema_string(o, k);
	util_strlcpy(dst, v != NULL ? v : "", len);
}

/* Read one run's record. Anything malformed is left alone (and logged), not guessed at. */
static struct trun *
load_run(struct tcloned *t, const char *id)
{
	char path[400], *buf = NULL;
	size_t len;
	struct json_object *o, *layers;
	struct trun *r;
	int fd;

	snprintf(path, sizeof(path), "runs/%s/record.json", id);
	fd = safefs_openat(t->td_tc_fd, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0 || util_read_fd(fd, 1024 * 1024, &buf, &len) != 0) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	close(fd);
	o = json_tokener_parse(buf);
	free(buf);
	if (o == NULL || !json_object_is_type(o, json_type_object))
		goto bad;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		goto bad;
	r->tr_rec = o;
	load_str(o, "run_id", r->tr_id, sizeof(r->tr_id));
	load_str(o, "role", r->tr_role, sizeof(r->tr_role));
	load_str(o, "state", r->tr_state, sizeof(r->tr_state));
	load_str(o, "source_run_id", r->tr_source, sizeof(r->tr_source));
	load_str(o, "group_id", r->tr_group, sizeof(r->tr_group));
	load_str(o, "name", r->tr_name, sizeof(r->tr_name));
	load_str(o, "approach", r->tr_approach, sizeof(r->tr_approach));
	load_str(o, "operation_id", r->tr_op, sizeof(r->tr_op));
	load_str(o, "workspace", r->tr_workspace, sizeof(r->tr_workspace));
	load_str(o, "backend", r->tr_backend, sizeof(r->tr_backend));
	load_str(o, "runtime", r->tr_runtime, sizeof(r->tr_runtime));
	if (r->tr_runtime[0] == '\0')
		util_strlcpy(r->tr_runtime, "ns", sizeof(r->tr_runtime));
	load_str(o, "image", r->tr_image, sizeof(r->tr_image));
	r->tr_tmux = schema_bool(o, "tmux", 0);
	layers = schema_child(o, "layers");
	for (size_t i = 0; layers != NULL && json_object_is_type(layers, json_type_array) &&
	    i < json_object_array_length(layers) && i < TCLONED_LAYERS_MAX; i++) {
		const char *l = json_object_get_string(json_object_array_get_idx(layers, i));
		if (!ids_valid("lay_", l)) {
			trun_free(r);
			log_warnx("run %s: invalid layer id in its record; left alone", id);
			return NULL;
		}
		util_strlcpy(r->tr_layers[r->tr_nlayers++], l, TCLONED_ID_MAX);
	}
	r->tr_index = (int)schema_int(o, "index", 0);
	r->tr_observe_only = schema_bool(o, "observe_only", 0);
	r->tr_uid = (uid_t)schema_int(o, "uid", -1);
	r->tr_gid = (gid_t)schema_int(o, "gid", -1);
	r->tr_pid = (pid_t)schema_int(o, "pid", 0);
	r->tr_start_ticks = (uint64_t)schema_int(o, "start_time_ticks", 0);
	r->tr_created_ms = schema_int(o, "created_ms", 0);
	r->tr_argv = json_object_get(schema_child(o, "argv"));
	r->tr_network = json_object_get(schema_child(o, "network"));
	r->tr_landlock_rw = json_object_get(schema_child(o, "landlock_rw"));
	if (r->tr_landlock_rw != NULL && !json_object_is_type(r->tr_landlock_rw, json_type_array)) {
		json_object_put(r->tr_landlock_rw);
		r->tr_landlock_rw = NULL;
	}
	if (strcmp(r->tr_id, id) != 0 || !ids_valid("run_", r->tr_id) ||
	    (strcmp(r->tr_role, "source") != 0 && strcmp(r->tr_role, "fork") != 0) ||
	    r->tr_argv == NULL || r->tr_workspace[0] != '/' ||
	    (strcmp(r->tr_backend, "overlay") != 0 && strcmp(r->tr_backend, "copy") != 0 &&
	    strcmp(r->tr_backend, "btrfs") != 0) ||
	    (strcmp(r->tr_runtime, "ns") != 0 && strcmp(r->tr_runtime, "podman") != 0) ||
	    (strcmp(r->tr_runtime, "podman") == 0 && !podman_image_ok(r->tr_image))) {
		log_warnx("run %s: invalid record; left alone", id);
		trun_free(r);
		return NULL;
	}
	return r;
bad:
	json_object_put(o);
	log_warnx("run %s: unreadable record; left alone", id);
	return NULL;
}

static void
load_runs(struct tcloned *t)
{
	int fd = safefs_opendir(t->td_tc_fd, "runs");
	struct dirent *de;
	DIR *d;

	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		fatal("open runs/");
	}
	while ((de = readdir(d)) != NULL) {
		struct trun *r;
		if (!ids_valid("run_", de->d_name))
			continue;
		if ((r = load_run(t, de->d_name)) == NULL)
			continue;
		if (tcloned_add(t, r) != 0) {
			log_warnx("more than %d runs: %s not loaded", TCLONED_MAX_RUNS, r->tr_id);
			trun_free(r);
		}
	}
	closedir(d);
}

/* -- host capabilities: snapshot backends, live cloning -- */

static int
have_fs(const char *name)
{
	char *buf = NULL, *p;
	size_t len;
	int found = 0;

	if (util_read_path("/proc/filesystems", 64 * 1024, &buf, &len) != 0)
		return 0;
	for (p = strtok(buf, "\n"); p != NULL && !found; p = strtok(NULL, "\n")) {
		char *tab = strrchr(p, '\t');
		found = strcmp(tab != NULL ? tab + 1 : p, name) == 0;
	}
	free(buf);
	return found;
}

static void
detect_backends(struct tcloned *t, const char *want)
{
	struct statfs sf;
	int btrfs = fstatfs(t->td_tc_fd, &sf) == 0 && sf.f_type == BTRFS_SUPER_MAGIC;
	int overlay = have_fs("overlay");

	snprintf(t->td_backends, sizeof(t->td_backends), "%s%scopy", btrfs ? "btrfs," : "",
	    overlay ? "overlay," : "");
	if (want != NULL) {
		if (strcmp(want, "copy") != 0 && (strcmp(want, "overlay") != 0 || !overlay) &&
		    (strcmp(want, "btrfs") != 0 || !btrfs))
			fatalx("--backend %s: not available here (have %s)", want, t->td_backends);
		util_strlcpy(t->td_backend, want, sizeof(t->td_backend));
	} else {
		/* Best first: subvolume snapshots cost nothing per file. */
		util_strlcpy(t->td_backend, btrfs ? "btrfs" : overlay ? "overlay" : "copy",
		    sizeof(t->td_backend));
	}
}

/*
 * Live cloning needs CRIU, and CRIU only where `criu check` passes on this
 * kernel. This version never clones a live process tree either way (a fork
 * starts the agent fresh on the snapshot and says so): the reason recorded
 * is the host's own when it has one. The check runs once at start, as
 * root, bounded by CRIU_CHECK_MS; its last stderr line is kept.
 */
#define CRIU_CHECK_MS 10000

static void
detect_criu(struct tcloned *t)
{
	const char *dirs[] = { "/usr/sbin", "/usr/bin", "/sbin", "/bin" };
	char path[64] = "", line[120] = "", buf[4096];
	int pfd[2], status = 0;
	size_t got = 0;
	pid_t pid;

	for (size_t i = 0; i < nitems(dirs) && path[0] == '\0'; i++) {
		char p[64];
		snprintf(p, sizeof(p), "%s/criu", dirs[i]);
		if (access(p, X_OK) == 0)
			util_strlcpy(path, p, sizeof(path));
	}
	if (path[0] == '\0') {
		snprintf(t->td_criu, sizeof(t->td_criu), "criu is not installed on this host");
		return;
	}
	if (pipe2(pfd, O_CLOEXEC) != 0 || (pid = fork()) < 0) {
		snprintf(t->td_criu, sizeof(t->td_criu), "criu check could not be run: %s",
		    strerror(errno));
		return;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(pfd[1], 2) < 0)
			_exit(127);
		char *const argv[] = { path, "check", NULL };
		char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
		execve(path, argv, envp);
		_exit(127);
	}
	close(pfd[1]);
	int64_t deadline = util_monotonic_ms() + CRIU_CHECK_MS;
	for (;;) {
		int64_t left = deadline - util_monotonic_ms();
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		ssize_t n = read(pfd[0], buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == sizeof(buf) - 1) {	/* keep the tail */
			memmove(buf, buf + got / 2, got - got / 2);
			got -= got / 2;
		}
	}
	close(pfd[0]);
	pid_t w;
	while ((w = waitpid(pid, &status, WNOHANG)) == 0 && util_monotonic_ms() < deadline)
		usleep(10000);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		snprintf(t->td_criu, sizeof(t->td_criu), "criu check (%s) did not finish in %d s",
		    path, CRIU_CHECK_MS / 1000);
		return;
	}
	if (w < 0) {
		snprintf(t->td_criu, sizeof(t->td_criu), "criu check: its result is unknown: %s",
		    strerror(errno));
		return;
	}
	buf[got] = '\0';
	while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r'))
		buf[--got] = '\0';
	const char *last = strrchr(buf, '\n');
	util_strlcpy(line, last != NULL ? last + 1 : buf, sizeof(line));
	for (char *c = line; *c != '\0'; c++)	/* a log line, not terminal control */
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		snprintf(t->td_criu, sizeof(t->td_criu), "criu check passes on this host, but this "
		    "version of gensee-tcloned does not clone live processes");
	else
		snprintf(t->td_criu, sizeof(t->td_criu), "criu check fails on this host: %s",
		    line[0] ? line : "no reason given");
}

/* -- the socket -- */

static int
open_socket(struct tcloned *t)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if ((size_t)snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/" TCLONED_SOCK,
	    t->td_runtime) >= sizeof(sun.sun_path))
		fatalx("runtime dir path too long");
	if (unlinkat(t->td_runtime_fd, TCLONED_SOCK, 0) != 0 && errno != ENOENT)
		fatal("unlink %s", sun.sun_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 || listen(fd, 64) != 0)
		fatal("%s", sun.sun_path);
	/* Any local user may ask; SO_PEERCRED decides what about. */
	if (fchmodat(t->td_runtime_fd, TCLONED_SOCK, 0666, 0) != 0)
		fatal("chmod %s", sun.sun_path);
	return fd;
}

/*
 * Is the peer inside a supervised operation (any "BASE/op_*" or
 * "gensee/op_*" pair in its cgroup path, as boundaryd decides it)? An
 * unreadable cgroup counts as inside: fail closed.
 */
static const char *
in_operation(const struct tcloned *t, const struct peer *p)
{
	char buf[PEER_CGROUP_MAX], *save = NULL, *prev = NULL, *comp;

	if (p->pr_cgroup_unknown)
		return "its cgroup cannot be read";
	util_strlcpy(buf, p->pr_cgroup, sizeof(buf));
	for (comp = strtok_r(buf, "/", &save); comp != NULL;
	    prev = comp, comp = strtok_r(NULL, "/", &save))
		if (prev != NULL && strncmp(comp, "op_", 3) == 0 &&
		    (strcmp(prev, t->td_cgroup_base) == 0 || strcmp(prev, "gensee") == 0))
			return "it runs inside a supervised operation";
	return NULL;
}

/* Answer one complete request on fd (blocking write, bounded by SO_SNDTIMEO). */
struct tconn;
static void serve_msg(struct tcloned *t, int fd, const struct tconn *c, struct json_object *msg);

/*
 * Connections waiting for their request. Reading is concurrent (poll), so
 * a client that connects and stalls delays nobody; it is closed at its
 * deadline. Caps: TCLONED_CONN_MAX in all, TCLONED_CONN_PER_UID per
 * non-root uid, refused before anything is allocated for them. A run's
 * bridge connections have their own caps (TCLONED_BRIDGE_CONN_MAX, per run
 * TCLONED_BRIDGE_CONN_PER_RUN): an agent cannot crowd out its host user.
 */
struct tconn {
	int tc_fd;
	struct peer tc_peer;
	uint8_t *tc_buf;
	size_t tc_len;
	int64_t tc_deadline;
	int tc_bridge;			/* came in on a run's bridge socket ... */
	char tc_run[TCLONED_ID_MAX];	/* ... this run's */
	char tc_op[PEER_OP_ID_MAX];	/* its operation when admitted */
	const char *tc_refused;		/* why the peer is not the run's (static), or NULL */
};

static void
serve_msg(struct tcloned *t, int fd, const struct tconn *c, struct json_object *msg)
{
	struct peer p = c->tc_peer;
	struct json_object *reply, *res = NULL;
	char *cause = NULL, *message = NULL;
	const char *code = NULL, *why;
	int64_t id = 0;

	struct json_object *idj = schema_child(msg, "id"), *pv = schema_child(msg, "proto");
	const char *method = schema_string(msg, "method");
	struct json_object *params = schema_child(msg, "params");
	if (idj != NULL && json_object_is_type(idj, json_type_int))
		id = json_object_get_int64(idj);
	if (pv == NULL || !json_object_is_type(pv, json_type_int) ||
	    json_object_get_int64(pv) != PROTO_VERSION) {
		reply = proto_error_new(id, PE_UNSUPPORTED_PROTO, "proto must be 1");
	} else if (method == NULL || (params != NULL &&
	    !json_object_is_type(params, json_type_object))) {
		reply = proto_error_new(id, PE_INVALID_REQUEST, "method and params required");
	} else if (c->tc_bridge) {
		/* An agent, through its run's socket: bridge.c decides, scoped to that run. */
		struct json_object *empty = NULL;
		if (params == NULL)
			params = empty = json_object_new_object();
		res = bridge_serve(t, &p, c->tc_run, c->tc_op, c->tc_refused, method, params, &code,
		    &message);
		json_object_put(empty);
		if (res != NULL)
			reply = proto_result_new(id, res);
		else
			reply = proto_error_new(id, code != NULL ? code : PE_INTERNAL,
			    message != NULL ? message : "failed");
	} else if ((why = in_operation(t, &p)) != NULL) {
		/* Threat: the agent forking, merging or discarding on its own. */
		log_info("refused %s from pid %d: %s", method, (int)p.pr_pid, why);
		reply = proto_error_new(id, PE_NOT_AUTHORIZED, "not available to a process inside "
		    "a supervised operation");
	} else {
		struct json_object *empty = NULL;
		if (params == NULL)
			params = empty = json_object_new_object();
		t->td_serving_host = 1;
		res = lifecycle_dispatch(t, &p, method, params, &code, &message);
		t->td_serving_host = 0;
		json_object_put(empty);
		if (res != NULL)
			reply = proto_result_new(id, res);
		else
			reply = proto_error_new(id, code != NULL ? code : PE_INTERNAL,
			    message != NULL ? message : "failed");
	}
	if (frame_write_fd(fd, reply, &cause) != 0) {
		log_info("pid %d: reply: %s", (int)p.pr_pid, cause);
		free(cause);
	}
	free(message);
	json_object_put(reply);
}

static struct tconn conns[TCLONED_CONN_MAX + TCLONED_BRIDGE_CONN_MAX +
    TCLONED_BRIDGE_REFUSED_MAX];
static int nconns;

static void
conn_close(int i)
{
	close(conns[i].tc_fd);
	free(conns[i].tc_buf);
	conns[i] = conns[--nconns];
}

/* Accept on tclone.sock (run NULL) or on run's bridge socket lfd. */
static void
conn_accept(struct tcloned *t, int lfd, const char *run)
{
	struct peer p;
	char *cause = NULL, op[PEER_OP_ID_MAX] = "";
	const char *refused = NULL;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), same = 0, kind = 0;

	if (fd < 0)
		return;
	if (peer_identify(fd, &p, &cause) != 0) {
		log_warnx("peer: %s", cause);
		free(cause);
		close(fd);
		return;
	}
	/*
	 * A bridge peer is decided now, from what the kernel recorded at
	 * connect; a refused one still gets its answer (not_in_run) to its
	 * request. Threat: processes outside a run holding its bridge's
	 * connections to lock the agent out: they are counted apart, in a
	 * small pool of their own.
	 */
	if (run != NULL)
		refused = bridge_admit(t, run, &p, op, sizeof(op));
	for (int i = 0; i < nconns; i++) {
		if (conns[i].tc_bridge != (run != NULL) ||
		    (run != NULL && (conns[i].tc_refused != NULL) != (refused != NULL)))
			continue;
		kind++;
		same += run != NULL ? strcmp(conns[i].tc_run, run) == 0 :
		    conns[i].tc_peer.pr_uid == p.pr_uid;
	}
	if (run == NULL ? (kind >= TCLONED_CONN_MAX ||
	    (p.pr_uid != 0 && same >= TCLONED_CONN_PER_UID)) : refused != NULL ?
	    kind >= TCLONED_BRIDGE_REFUSED_MAX :
	    (kind >= TCLONED_BRIDGE_CONN_MAX || same >= TCLONED_BRIDGE_CONN_PER_RUN)) {
		log_info("refusing a connection of uid %u pid %d%s%s%s%s: %d open", (unsigned)p.pr_uid,
		    (int)p.pr_pid, run != NULL ? " on the bridge of " : "", run != NULL ? run : "",
		    refused != NULL ? ", not the run's: " : "", refused != NULL ? refused : "", same);
		close(fd);
		return;
	}
	memset(&conns[nconns], 0, sizeof(conns[nconns]));
	conns[nconns].tc_fd = fd;
	conns[nconns].tc_peer = p;
	conns[nconns].tc_deadline = util_monotonic_ms() + TCLONED_FRAME_DEADLINE_MS;
	if (run != NULL) {
		conns[nconns].tc_bridge = 1;
		util_strlcpy(conns[nconns].tc_run, run, sizeof(conns[nconns].tc_run));
		util_strlcpy(conns[nconns].tc_op, op, sizeof(conns[nconns].tc_op));
		conns[nconns].tc_refused = refused;
	}
	nconns++;
}

/* Read what is there; serve and close once a whole frame is in. */
static void
conn_read(struct tcloned *t, int i)
{
	struct tconn *c = &conns[i];
	struct json_object *msg = NULL;
	size_t want = c->tc_len < FRAME_HEADER_LEN ? FRAME_HEADER_LEN :
	    FRAME_HEADER_LEN + ((size_t)c->tc_buf[0] << 24 | (size_t)c->tc_buf[1] << 16 |
	    (size_t)c->tc_buf[2] << 8 | c->tc_buf[3]);
	size_t consumed;

	if (want > FRAME_HEADER_LEN + FRAME_MAX_DEFAULT) {
		log_info("pid %d: frame over the limit", (int)c->tc_peer.pr_pid);
		conn_close(i);
		return;
	}
	if (c->tc_buf == NULL && (c->tc_buf = malloc(FRAME_HEADER_LEN + FRAME_MAX_DEFAULT)) == NULL) {
		conn_close(i);
		return;
	}
	ssize_t n = read(c->tc_fd, c->tc_buf + c->tc_len, want - c->tc_len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(i);
		return;
	}
	c->tc_len += (size_t)n;
	int st = frame_decode(c->tc_buf, c->tc_len, FRAME_MAX_DEFAULT, &msg, &consumed);
	if (st == FRAME_NEED_MORE)
		return;
	if (st != FRAME_OK) {
		log_info("pid %d: %s", (int)c->tc_peer.pr_pid, frame_status_code(st));
		conn_close(i);
		return;
	}
	/* Replies are written blocking, but never for longer than the send timeout. */
	struct timeval tv = { TCLONED_FRAME_DEADLINE_MS / 1000, 0 };
	int fl = fcntl(c->tc_fd, F_GETFL);
	if (fl >= 0 && fcntl(c->tc_fd, F_SETFL, fl & ~O_NONBLOCK) == 0 &&
	    setsockopt(c->tc_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0)
		serve_msg(t, c->tc_fd, c, msg);
	json_object_put(msg);
	conn_close(i);
}

static void
reap(struct tcloned *t)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid <= 0)
			return;
		launch_reaped(t, pid, status);
	}
}

static int
valid_base(const char *s)
{
	if (s[0] == '\0' || s[0] == '.' || strlen(s) >= 64)
		return 0;
	for (const char *p = s; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
			return 0;
	return 1;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "authority-root", required_argument, NULL, 'a' },
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "cgroup-base", required_argument, NULL, 'c' },
		{ "backend", required_argument, NULL, 'b' },
		{ "podman", required_argument, NULL, 'p' },
		{ "podman-image", required_argument, NULL, 'i' },
		{ "debug-apply-pause-ms", required_argument, NULL, 'P' },
		{ "debug", no_argument, NULL, 'd' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *root = getenv("GENSEE_TCLONE_AUTHORITY_ROOT"), *runtime = TCLONED_DEFAULT_RUNTIME;
	const char *base = "gensee", *backend = NULL;
	/* The operator's podman and default image (the seed's variables), never a caller's. */
	const char *podman = getenv("GENSEE_TCLONE_PODMAN"), *image = getenv("GENSEE_TCLONE_IMAGE");
	char *cause = NULL;
	int ch, logflags = 0;
	int64_t pause_ms = 0;
	struct stat st;

	if (root == NULL || root[0] == '\0')
		root = TCLONED_DEFAULT_ROOT;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'a':
			root = optarg;
			break;
		case 'r':
			runtime = optarg;
			break;
		case 'c':
			base = optarg;
			break;
		case 'b':
			backend = optarg;
			break;
		case 'p':
			podman = optarg;
			break;
		case 'i':
			image = optarg;
			break;
		case 'P':
			if (util_parse_i64(optarg, 0, 60000, &pause_ms) != 0)
				usage_to(0);
			break;
		case 'd':
			logflags |= LOG_F_DEBUG;
			break;
		case 'f':
			break;
		case 'h':
			usage_to(1);
		case 'V':
			printf(TCLONED_NAME " %s\n", GENSEE_VERSION);
			exit(0);
		default:
			usage_to(0);
		}
	}
	if (optind != argc || !valid_base(base))
		usage_to(0);
	log_init(TCLONED_NAME, logflags);
	if (geteuid() != 0 || getuid() != 0)
		fatalx("must run as root");
	umask(077);
	/*
	 * Threat: a workspace is read with the user's fsuid/fsgid, but the
	 * supplementary groups stay the process's: root's group 0 would let
	 * a user snapshot group-0-readable files. None are kept.
	 */
	if (setgroups(0, NULL) != 0)
		fatal("setgroups");
	if (ids_init() != 0)
		fatalx("libsodium initialisation failed");
	memset(&td, 0, sizeof(td));
	td.td_apply_pause_ms = (int)pause_ms;
	util_strlcpy(td.td_root, root, sizeof(td.td_root));
	util_strlcpy(td.td_runtime, runtime, sizeof(td.td_runtime));
	util_strlcpy(td.td_cgroup_base, base, sizeof(td.td_cgroup_base));
	util_strlcpy(td.td_podman, podman != NULL && podman[0] ? podman : TCLONED_DEFAULT_PODMAN,
	    sizeof(td.td_podman));
	util_strlcpy(td.td_image, image != NULL && image[0] ? image : TCLONED_DEFAULT_IMAGE,
	    sizeof(td.td_image));
	if (td.td_podman[0] != '/' || !podman_image_ok(td.td_image))
		fatalx("--podman must be absolute and --podman-image a plain image name");
	/*
	 * The authority root: absolute, root-owned, exactly 0700, no symlink
	 * anywhere, only root-controlled ancestors (the seed's rule).
	 */
	/* Overlay mount options name these paths: no separators in them. */
	if (strpbrk(root, ",:\\") != NULL)
		fatalx("refusing authority root %s: ',', ':' and '\\' are not allowed", root);
	if ((td.td_root_fd = safefs_open_root(root, &cause)) < 0)
		fatalx("refusing authority root: %s", cause);
	if (fstat(td.td_root_fd, &st) != 0 || (st.st_mode & 07777) != 0700)
		fatalx("refusing authority root %s: mode %o, must be 0700", root,
		    (unsigned)(st.st_mode & 07777));
	if ((td.td_runtime_fd = safefs_open_root(runtime, &cause)) < 0)
		fatalx("refusing runtime dir: %s", cause);
	if (safefs_mkdirs(td.td_root_fd, "tclone/runs", 0700) != 0 ||
	    safefs_mkdirs(td.td_root_fd, "tclone/layers", 0700) != 0 ||
	    safefs_mkdirs(td.td_root_fd, "tclone/txn", 0700) != 0)
		fatal("%s/tclone", root);
	if ((td.td_tc_fd = safefs_opendir(td.td_root_fd, "tclone")) < 0)
		fatal("%s/tclone", root);
	/* Searchable by all (umask 077 made it 0700): each run's directory is its user's alone. */
	if (safefs_mkdirs(td.td_runtime_fd, "tclone", 0755) != 0 ||
	    fchmodat(td.td_runtime_fd, "tclone", 0755, 0) != 0)
		fatal("%s/tclone", runtime);
	/* A git merge's work directory a crash left behind. */
	gitmerge_gc(td.td_tc_fd);
	bridge_init(&td);
	detect_backends(&td, backend);
	detect_criu(&td);
	load_runs(&td);

	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	signal(SIGPIPE, SIG_IGN);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0)
		fatal("sigprocmask");
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		fatal("signalfd");
	lifecycle_recover(&td);
	td.td_listen_fd = open_socket(&td);
	/*
	 * Before the first caller: what a request can reach is only what is
	 * left here. CAP_NET_ADMIN stays only if podman runs can happen at all
	 * (and it was given: a unit without it gets podman_unavailable).
	 */
	char pcode[64];
	int podman_net = podman_check(&td, pcode, sizeof(pcode), &cause) == 0 &&
	    capng_get_caps_process() == 0 &&
	    capng_have_capability(CAPNG_EFFECTIVE, CAP_NET_ADMIN);
	free(cause);
	cause = NULL;
	if (sandbox_tcloned(podman_net, &cause) != 0)
		fatalx("sandbox: %s", cause);
	log_info("serving on %s/" TCLONED_SOCK ", authority root %s, backends %s (using %s); "
	    "live cloning: %s", runtime, root, td.td_backends, td.td_backend, td.td_criu);

	while (!td_quit) {
		struct pollfd pf[2 + nitems(conns) + TCLONED_MAX_RUNS];
		char bids[TCLONED_MAX_RUNS][TCLONED_ID_MAX];
		int64_t now = util_monotonic_ms(), wait = -1;
		int n = nconns, nb = 0;

		pf[0] = (struct pollfd){ td.td_listen_fd, POLLIN, 0 };
		pf[1] = (struct pollfd){ sfd, POLLIN, 0 };
		for (int i = 0; i < n; i++) {
			pf[2 + i] = (struct pollfd){ conns[i].tc_fd, POLLIN, 0 };
			int64_t left = conns[i].tc_deadline - now;
			if (wait < 0 || left < wait)
				wait = left < 0 ? 0 : left;
		}
		/* Every run's bridge socket, by run id (a run may go while we serve). */
		for (int i = 0; i < td.td_nruns; i++) {
			if (!td.td_runs[i]->tr_bridge_open)
				continue;
			pf[2 + n + nb] = (struct pollfd){ td.td_runs[i]->tr_bridge_fd, POLLIN, 0 };
			util_strlcpy(bids[nb], td.td_runs[i]->tr_id, sizeof(bids[nb]));
			nb++;
		}
		if (poll(pf, (nfds_t)(2 + n + nb), (int)wait) < 0) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		if (pf[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (si.ssi_signo == SIGCHLD)
					reap(&td);
				else
					td_quit = 1;
			}
		}
		/* Newest first: conn_close moves the last one into the freed slot. */
		now = util_monotonic_ms();
		for (int i = n - 1; i >= 0; i--) {
			if (pf[2 + i].revents & (POLLIN | POLLHUP | POLLERR))
				conn_read(&td, i);
			else if (conns[i].tc_deadline <= now) {
				log_info("pid %d: no request within %d ms", (int)conns[i].tc_peer.pr_pid,
				    TCLONED_FRAME_DEADLINE_MS);
				conn_close(i);
			}
		}
		if (pf[0].revents & POLLIN)
			conn_accept(&td, td.td_listen_fd, NULL);
		for (int i = 0; i < nb; i++) {
			if (!(pf[2 + n + i].revents & POLLIN))
				continue;
			for (int j = 0; j < td.td_nruns; j++) {
				struct trun *r = td.td_runs[j];
				if (strcmp(r->tr_id, bids[i]) == 0 && r->tr_bridge_open &&
				    r->tr_bridge_fd == pf[2 + n + i].fd)
					conn_accept(&td, r->tr_bridge_fd, r->tr_id);
			}
		}
		reap(&td);
	}
	while (nconns > 0)
		conn_close(nconns - 1);
	log_info("stopping; snapshots stay, running agents end with their launcher");
	unlinkat(td.td_runtime_fd, TCLONED_SOCK, 0);
	for (int i = 0; i < td.td_nruns; i++)
		trun_free(td.td_runs[i]);
	log_shutdown();
	return 0;
}
