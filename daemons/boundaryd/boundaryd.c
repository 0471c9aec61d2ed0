/*
 * boundaryd.c: gensee-boundaryd entry point.
 *
 * Startup order matters: refuse to run unless root; check the state root
 * and runtime dir before touching anything in them; reconcile what a
 * previous instance left; open the sockets; drop capabilities; serve.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "boundaryd.h"
#include "log.h"
#include "ocsf.h"
#include "record.h"
#include "safefs.h"
#include "sandbox.h"
#include "syncq.h"
#include "util.h"

/* Print the usage to stdout and exit 0 (--help), or to stderr and exit 2 (LSB: bad arguments). */
static void __attribute__((noreturn))
usage_to(int help)
{
	fprintf(help ? stdout : stderr, "usage: " BOUNDARYD_NAME
	    " --state-root DIR --runtime-dir DIR [--cgroup-base NAME] [--foreground] [--debug]\n"
	    "       [--ocsf] [--idle-timeout-seconds N] [--sensor-heartbeat-ms N]\n"
	    "       [--retain-days N] [--retain-count N] [--mediator-user NAME]\n"
	    "       [--no-nft-anchor] [--no-prepared-cell]\n"
	    "       " BOUNDARYD_NAME " --help | --version\n");
	exit(help ? 0 : 2);
}

static void __attribute__((noreturn))
usage(void)
{
	usage_to(0);
}

/*
 * One instance per state root and per runtime dir: an exclusive flock on
 * BOUNDARYD_LOCK in each. Threat: a second instance (a mistaken start, a
 * test) would reconcile the first one's operations as its own and, binding
 * its sockets, unlink the first one's, leaving every running operation
 * without a reachable supervisor. The lock is taken before anything in the
 * directory is touched, and held (the fd stays open) until exit; the
 * kernel drops it when the process dies, so a crash never leaves it stale.
 */
static int
boundaryd_lock(int dirfd, const char *dirpath, const char *what)
{
	char buf[32];
	int fd;

	/*
	 * Created here, then held through a read-only fd: flock does not need
	 * write access, and a file held open for writing would keep the state
	 * file system from being remounted read-only (which boundaryd must
	 * survive, not prevent).
	 */
	fd = safefs_openat(dirfd, BOUNDARYD_LOCK, O_WRONLY | O_CREAT, 0600);
	if (fd < 0)
		fatal("open %s/%s", dirpath, BOUNDARYD_LOCK);
	close(fd);
	fd = safefs_openat(dirfd, BOUNDARYD_LOCK, O_RDONLY, 0);
	if (fd < 0)
		fatal("open %s/%s", dirpath, BOUNDARYD_LOCK);
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno != EWOULDBLOCK)
			fatal("flock %s/%s", dirpath, BOUNDARYD_LOCK);
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		log_warnx("another " BOUNDARYD_NAME " (pid %s) already serves %s %s; "
		    "refusing to start", buf[0] ? buf : "?", what, dirpath);
		exit(BOUNDARYD_EXIT_LOCKED);
	}
	return fd;
}

/* Write our pid into a lock we hold, for the next instance's message. */
static void
boundaryd_lock_owner(int dirfd)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	int fd = safefs_openat(dirfd, BOUNDARYD_LOCK, O_WRONLY, 0);

	if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n)
		log_warn("lock file");
	if (fd >= 0)
		close(fd);
}

/* A cgroup base name is one plain path component below the v2 root. */
static int
boundaryd_valid_base(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64 || s[0] == '.')
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

void
boundaryd_status(struct boundaryd *bd, struct op_reply *r)
{
	struct json_object *o = json_object_new_object();
	struct json_object *cg = json_object_new_object();
	struct json_object *rh = json_object_new_object();
	struct json_object *ops = json_object_new_object();

	json_object_object_add(o, "daemon", json_object_new_string(BOUNDARYD_NAME));
	json_object_object_add(o, "version", json_object_new_string(GENSEE_VERSION));
	json_object_object_add(o, "proto", json_object_new_int(PROTO_VERSION));
	json_object_object_add(o, "pid", json_object_new_int((int)getpid()));
	json_object_object_add(o, "instance", json_object_new_string(bd->bd_instance));
	json_object_object_add(o, "started_at", json_object_new_string(bd->bd_started_at));
	json_object_object_add(o, "uptime_ms",
	    json_object_new_int64(util_monotonic_ms() - bd->bd_started_ms));
	json_object_object_add(ops, "active", json_object_new_int(operation_count(bd)));
	json_object_object_add(o, "operations", ops);
	json_object_object_add(cg, "available", json_object_new_boolean(bd->bd_have_cgroup));
	json_object_object_add(cg, "mount",
	    bd->bd_have_cgroup ? json_object_new_string(bd->bd_cgroup_mount) : NULL);
	json_object_object_add(cg, "base", json_object_new_string(bd->bd_cgroup_base));
	if (bd->bd_have_cgroup) {
		char bp[PATH_MAX + 80];
		struct stat st;
		snprintf(bp, sizeof(bp), "%s/%s", bd->bd_cgroup_mount, bd->bd_cgroup_base);
		json_object_object_add(cg, "base_present",
		    json_object_new_boolean(lstat(bp, &st) == 0 && S_ISDIR(st.st_mode)));
	}
	json_object_object_add(cg, "base_recreated",
	    json_object_new_int64((int64_t)bd->bd_cgroup_base_recreated));
	/* Migrations (the launch's attach) skip an RCU grace period with it: an operator's choice. */
	int fdm = bd->bd_have_cgroup ? cgroup_favordynmods() : -1;
	json_object_object_add(cg, "favordynmods", fdm < 0 ? NULL : json_object_new_boolean(fdm));
	json_object_object_add(o, "cgroup", cg);
	json_object_object_add(o, "prepared_cell", spare_status());
	/* Record durability (syncq.c): fsyncs after the reply, and any that failed. */
	struct syncq_stats ss;
	struct json_object *recs = json_object_new_object();
	syncq_get_stats(&ss);
	json_object_object_add(recs, "sync", json_object_new_string(syncq_active() ?
	    "after_reply" : "before_reply"));
	json_object_object_add(recs, "syncs_pending", json_object_new_int64((int64_t)ss.ss_pending));
	json_object_object_add(recs, "syncs_inline", json_object_new_int64((int64_t)ss.ss_inline));
	json_object_object_add(recs, "sync_errors", json_object_new_int64((int64_t)ss.ss_errors));
	json_object_object_add(recs, "last_sync_error", ss.ss_errors == 0 ? NULL :
	    json_object_new_string(strerror(ss.ss_last_errno)));
	json_object_object_add(o, "records", recs);
	struct json_object *sen = json_object_new_object(), *list = json_object_new_array();
	if (bd->bd_sensor_caps & SENSOR_NFT_TRACE)
		json_object_array_add(list, json_object_new_string("nft_trace"));
	if (bd->bd_sensor_caps & SENSOR_PROC_CONNECTOR)
		json_object_array_add(list, json_object_new_string("proc_connector"));
	if (bd->bd_sensor_caps & SENSOR_FANOTIFY)
		json_object_array_add(list, json_object_new_string("fanotify"));
	if (bd->bd_sensor_caps & SENSOR_LANDLOCK_AUDIT)
		json_object_array_add(list, json_object_new_string("landlock_audit"));
	json_object_object_add(sen, "connected", json_object_new_boolean(bd->bd_sensor != NULL));
	json_object_object_add(sen, "pid", bd->bd_sensor == NULL ? NULL :
	    json_object_new_int((int)control_peer_pid(bd->bd_sensor)));
	json_object_object_add(sen, "sensors", list);
	json_object_object_add(sen, "fanotify_group", fanhold_status());
	json_object_object_add(o, "sensord", sen);
	struct json_object *nft = json_object_new_object();
	json_object_object_add(nft, "available", json_object_new_boolean(bd->bd_nft != NULL));
	json_object_object_add(nft, "hook_anchor", bd->bd_anchor[0] != '\0' ?
	    json_object_new_string(bd->bd_anchor) : NULL);
	json_object_object_add(o, "nftables", nft);
	json_object_object_add(rh, "status", json_object_new_string(
	    json_object_array_length(bd->bd_recovery) ? "degraded" : "ok"));
	json_object_object_add(rh, "entries", json_object_get(bd->bd_recovery));
	json_object_object_add(rh, "cleaned", json_object_get(bd->bd_recovery_cleaned));
	json_object_object_add(o, "recovery_health", rh);
	json_object_object_add(o, "connections", json_object_new_int(bd->bd_nconns));
	struct json_object *cl = json_object_new_object();
	json_object_object_add(cl, "client", json_object_new_int(bd->bd_nclient));
	json_object_object_add(cl, "client_max", json_object_new_int(CONTROL_MAX_CLIENT));
	json_object_object_add(cl, "client_root_reserve", json_object_new_int(CONTROL_ROOT_RESERVE));
	json_object_object_add(cl, "client_max_per_uid", json_object_new_int(CONTROL_MAX_PER_UID));
	json_object_object_add(cl, "boundary", json_object_new_int(bd->bd_nboundary));
	json_object_object_add(cl, "boundary_max", json_object_new_int(CONTROL_MAX_BOUNDARY));
	json_object_object_add(cl, "refused", json_object_new_int64((int64_t)bd->bd_conns_refused));
	int paused;
	uint64_t queued;
	control_queue_stats(bd, &paused, &queued);
	json_object_object_add(cl, "paused", json_object_new_int(paused));
	json_object_object_add(cl, "dropped", json_object_new_int64((int64_t)bd->bd_conns_dropped));
	json_object_object_add(cl, "queued_bytes", json_object_new_int64((int64_t)queued));
	json_object_object_add(cl, "queue_max_per_uid", json_object_new_int64(CONTROL_UID_QUEUE_MAX));
	json_object_object_add(o, "connection_budget", cl);
	json_object_object_add(o, "log_dropped", json_object_new_int64((int64_t)log_dropped()));
	/* Evidence that could not be kept is counted, never silently missing. */
	struct json_object *evd = json_object_new_object();
	json_object_object_add(evd, "files_recorded", json_object_new_int64(
	    (int64_t)bd->bd_files_recorded));
	json_object_object_add(evd, "files_dropped", json_object_new_int64(
	    (int64_t)bd->bd_files_dropped));
	json_object_object_add(evd, "ocsf", json_object_new_boolean(ocsf_sink_active()));
	json_object_object_add(evd, "ocsf_emitted", json_object_new_int64((int64_t)ocsf_emitted()));
	json_object_object_add(evd, "ocsf_dropped", json_object_new_int64((int64_t)ocsf_dropped()));
	json_object_object_add(o, "evidence", evd);
	struct record_disk rd;
	struct json_object *dk = json_object_new_object();
	record_disk_status(&rd);
	json_object_object_add(dk, "status",
	    json_object_new_string(record_disk_state_name(rd.rd_state)));
	json_object_object_add(dk, "detail",
	    rd.rd_errno ? json_object_new_string(strerror(rd.rd_errno)) : NULL);
	json_object_object_add(dk, "since", rd.rd_since[0] ? json_object_new_string(rd.rd_since) :
	    NULL);
	json_object_object_add(dk, "pending_records",
	    json_object_new_int64((int64_t)rd.rd_pending_records));
	json_object_object_add(dk, "pending_lines",
	    json_object_new_int64((int64_t)rd.rd_pending_lines));
	json_object_object_add(dk, "pending_bytes",
	    json_object_new_int64((int64_t)rd.rd_pending_bytes));
	json_object_object_add(dk, "dropped_lines",
	    json_object_new_int64((int64_t)rd.rd_dropped_lines));
	json_object_object_add(dk, "failures", json_object_new_int64((int64_t)rd.rd_failures));
	json_object_object_add(o, "state_disk", dk);
	struct json_object *ix = json_object_new_object();
	json_object_object_add(ix, "operations",
	    json_object_new_int64((int64_t)json_object_object_length(bd->bd_index)));
	json_object_object_add(ix, "lines", json_object_new_int64((int64_t)bd->bd_index_lines));
	json_object_object_add(ix, "rebuilt", json_object_new_int64((int64_t)bd->bd_index_rebuilt));
	json_object_object_add(o, "index", ix);
	struct json_object *rt = json_object_new_object();
	json_object_object_add(rt, "days", bd->bd_retain_days > 0 ?
	    json_object_new_int64(bd->bd_retain_days) : NULL);
	json_object_object_add(rt, "count", bd->bd_retain_count > 0 ?
	    json_object_new_int64(bd->bd_retain_count) : NULL);
	json_object_object_add(o, "retention", rt);
	r->or_result = o;
}

/*
 * Every BOUNDARYD_DISK_RETRY_MS while the state disk is not ok: write what
 * it refused (records kept in memory, queued evidence) and probe it, so
 * the truth reaches the disk as soon as it takes writes again.
 */
static void
boundaryd_disk_cb(evutil_socket_t fd, short what, void *arg)
{
	struct boundaryd *bd = arg;
	struct record_disk rd;

	(void)fd;
	(void)what;
	/*
	 * An fsync the sync thread could not do (a disk that reports ENOSPC
	 * or EIO only at writeback) is a disk that does not keep what it was
	 * given: the state disk is not ok, so nothing new starts, until a
	 * probe write is synced again.
	 */
	struct syncq_stats ss;
	syncq_get_stats(&ss);
	if (ss.ss_errors != bd->bd_sync_errors_seen) {
		bd->bd_sync_errors_seen = ss.ss_errors;
		log_warnx("a record sync failed (%s): the state disk is not ok",
		    strerror(ss.ss_last_errno));
		record_disk_failed(record_disk_errno(ss.ss_last_errno) ? ss.ss_last_errno : EIO);
	}
	record_disk_status(&rd);
	if (rd.rd_state == RECORD_DISK_OK && rd.rd_pending_records == 0 &&
	    rd.rd_pending_lines == 0)
		return;
	if (record_flush(bd->bd_state_fd) == 0)
		log_info("state disk takes writes again: %zu record(s) and %zu evidence line(s) "
		    "written", rd.rd_pending_records, rd.rd_pending_lines);
}

void
boundaryd_shutdown(struct boundaryd *bd)
{
	struct timeval tv = { 0, 50000 };
	bd->bd_shutdown = 1;
	/* Leave the loop shortly, so the reply to system.shutdown is written. */
	event_base_loopexit(bd->bd_base, &tv);
}

static void
boundaryd_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	log_info("signal %d: shutting down (running operations stay contained)", (int)sig);
	boundaryd_shutdown(arg);
}

/*
 * Without --foreground, fork and return in the parent only once the child
 * is serving, so "gensee-boundaryd ...; gensee status" works in scripts.
 */
static int
boundaryd_background(int *ready_fd)
{
	int p[2];
	pid_t pid;
	char c;

	if (pipe2(p, O_CLOEXEC) != 0)
		fatal("pipe");
	pid = fork();
	if (pid < 0)
		fatal("fork");
	if (pid > 0) {
		close(p[1]);
		ssize_t n = read(p[0], &c, 1);
		_exit(n == 1 ? 0 : 1);
	}
	close(p[0]);
	if (setsid() < 0)
		fatal("setsid");
	*ready_fd = p[1];
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "state-root", required_argument, NULL, 's' },
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "debug", no_argument, NULL, 'd' },
		{ "ocsf", no_argument, NULL, 'o' },
		{ "cgroup-base", required_argument, NULL, 'b' },
		/* Shorter intervals let tests cover several of them. */
		{ "idle-timeout-seconds", required_argument, NULL, 'i' },
		{ "sensor-heartbeat-ms", required_argument, NULL, 'H' },
		{ "retain-days", required_argument, NULL, 'D' },
		{ "retain-count", required_argument, NULL, 'C' },
		{ "mediator-user", required_argument, NULL, 'M' },
		{ "no-nft-anchor", no_argument, NULL, 'A' },
		{ "no-prepared-cell", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct boundaryd bd;
	const char *state_root = NULL, *runtime_dir = NULL, *cgroup_base = CGROUP_BASE;
	const char *mediator_user = NULL;
	int no_anchor = 0, no_spare = 0;
	int lock_state, lock_runtime;
	int foreground = 0, logflags = LOG_F_ASYNC, ch, ready_fd = -1, ocsf = 0;
	int idle_sec = CONTROL_IDLE_SEC, hb_ms = SENSOR_HEARTBEAT_MS;
	int64_t v, retain_days = 0, retain_count = 0;
	char *cause = NULL;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			state_root = optarg;
			break;
		case 'r':
			runtime_dir = optarg;
			break;
		case 'f':
			foreground = 1;
			break;
		case 'd':
			logflags |= LOG_F_DEBUG;
			break;
		case 'o':
			ocsf = 1;
			break;
		case 'A':
			no_anchor = 1;
			break;
		case 'P':
			no_spare = 1;
			break;
		case 'b':
			cgroup_base = optarg;
			break;
		case 'i':
			if (util_parse_i64(optarg, 1, 3600, &v) != 0)
				usage();
			idle_sec = (int)v;
			break;
		case 'H':
			if (util_parse_i64(optarg, 50, 600000, &v) != 0)
				usage();
			hb_ms = (int)v;
			break;
		case 'D':
			if (util_parse_i64(optarg, 1, 36500, &v) != 0)
				usage();
			retain_days = v;
			break;
		case 'C':
			if (util_parse_i64(optarg, 1, 1000000, &v) != 0)
				usage();
			retain_count = v;
			break;
		case 'M':
			mediator_user = optarg;
			break;
		case 'h':
			usage_to(1);
		case 'V':
			printf(BOUNDARYD_NAME " %s\n", GENSEE_VERSION);
			exit(0);
		default:
			usage();
		}
	}
	if (optind != argc || state_root == NULL || runtime_dir == NULL)
		usage();
	if (!boundaryd_valid_base(cgroup_base)) {
		fprintf(stderr, BOUNDARYD_NAME ": --cgroup-base: one name of [A-Za-z0-9._-], "
		    "not starting with a dot\n");
		exit(2);
	}
	/* Ambient configuration is the caller's, not ours: never read it. */
	unsetenv("GENSEE_HOME");
	log_init(BOUNDARYD_NAME, 0);
	if (geteuid() != 0 || getuid() != 0)
		fatalx("must run as root");
	umask(077);

	memset(&bd, 0, sizeof(bd));
	if (mediator_user != NULL) {
		/*
		 * The mediator's uid, resolved once: mediator.sock accepts it
		 * and nothing else. Root is refused: the mediator must hold no
		 * authority, and root's channel is boundary.sock.
		 */
		struct passwd *pw = getpwnam(mediator_user);
		if (pw == NULL || pw->pw_uid == 0)
			fatalx("--mediator-user %s: no such unprivileged user", mediator_user);
		bd.bd_have_mediator = 1;
		bd.bd_mediator_uid = pw->pw_uid;
	}
	TAILQ_INIT(&bd.bd_ops);
	TAILQ_INIT(&bd.bd_conns);
	bd.bd_idle_sec = idle_sec;
	bd.bd_sensor_hb_ms = hb_ms;
	bd.bd_retain_days = retain_days;
	bd.bd_retain_count = retain_count;
	bd.bd_index_dirfd = -1;
	if (ids_init() != 0)
		fatalx("libsodium initialisation failed");
	/* Paths are checked as given: a symlink anywhere in them is refused. */
	if ((bd.bd_state_fd = safefs_open_root(state_root, &cause)) < 0)
		fatalx("refusing state root: %s", cause);
	if ((bd.bd_runtime_fd = safefs_open_root(runtime_dir, &cause)) < 0)
		fatalx("refusing runtime dir: %s", cause);
	lock_state = boundaryd_lock(bd.bd_state_fd, state_root, "state root");
	lock_runtime = boundaryd_lock(bd.bd_runtime_fd, runtime_dir, "runtime dir");
	util_strlcpy(bd.bd_state_root, state_root, sizeof(bd.bd_state_root));
	bd.bd_no_anchor = no_anchor;
	util_strlcpy(bd.bd_cgroup_base, cgroup_base, sizeof(bd.bd_cgroup_base));
	util_strlcpy(bd.bd_runtime_dir, runtime_dir, sizeof(bd.bd_runtime_dir));
	if (mkdirat(bd.bd_state_fd, "operations", 0700) != 0 && errno != EEXIST)
		fatal("mkdir %s/operations", state_root);
	if ((bd.bd_ops_fd = safefs_opendir(bd.bd_state_fd, "operations")) < 0)
		fatal("open %s/operations", state_root);
	(void)safefs_spread_subdirs(bd.bd_ops_fd);	/* best effort: a speed hint */
	/*
	 * The v2 root directory is mode 0555: creating gensee/ needs
	 * CAP_DAC_OVERRIDE, which is dropped below, so it is made now. Its
	 * children are created in this root-owned 0755 directory later.
	 */
	if (cgroup_find_mount(bd.bd_cgroup_mount, sizeof(bd.bd_cgroup_mount), &cause) == 0 &&
	    cgroup_ensure_base(bd.bd_cgroup_mount, bd.bd_cgroup_base, &cause) == 0) {
		bd.bd_have_cgroup = 1;
	} else {
		log_warnx("%s: operations will be refused (cgroup_unavailable)", cause);
		free(cause);
		cause = NULL;
	}
	if (netop_init(&bd, &cause) != 0) {
		log_warnx("network boundary unavailable (network operations refused): %s", cause);
		free(cause);
		cause = NULL;
	}
	ids_new("bd_", bd.bd_instance, sizeof(bd.bd_instance));
	bd.bd_started_ms = util_monotonic_ms();
	util_now_rfc3339(bd.bd_started_at, sizeof(bd.bd_started_at));
	bd.bd_recovery = json_object_new_array();
	bd.bd_recovery_cleaned = json_object_new_array();

	if (!foreground)
		boundaryd_background(&ready_fd);
	boundaryd_lock_owner(bd.bd_state_fd);
	boundaryd_lock_owner(bd.bd_runtime_fd);
	signal(SIGPIPE, SIG_IGN);
	bd.bd_base = event_base_new();
	if (bd.bd_base == NULL)
		fatalx("event_base_new failed");
	/*
	 * OCSF events go to STATE/ocsf.jsonl (root's, like every evidence
	 * file), opened before recovery so what recovery decides is in it.
	 */
	if (ocsf && ocsf_sink_open(bd.bd_state_fd, OCSF_FILE, OCSF_FILE_MAX_DEFAULT, &cause) != 0)
		fatalx("--ocsf: %s", cause);

	spare_recover(&bd);	/* first: its tables are not unknown ones */
	recover_operations(&bd);
	netop_recover_tables(&bd);
	index_init(&bd);
	retain_apply(&bd);
	if (retain_arm(&bd) != 0)
		fatalx("cannot arm the retention timer");
	if (control_listen(&bd, &bd.bd_boundary, bd.bd_runtime_fd, runtime_dir, "boundary.sock",
		PS_BOUNDARY, 0600) != 0 ||
	    control_listen(&bd, &bd.bd_client, bd.bd_runtime_fd, runtime_dir, "client.sock",
		PS_CLIENT, 0666) != 0)
		fatalx("cannot open sockets in %s", runtime_dir);
	/*
	 * mediator.sock: owned by the mediator's uid, mode 0600, made while
	 * CAP_CHOWN is still held. The mode is defence in depth; the check
	 * is SO_PEERCRED at accept (control.c).
	 */
	if (bd.bd_have_mediator &&
	    (control_listen(&bd, &bd.bd_mediator, bd.bd_runtime_fd, runtime_dir, "mediator.sock",
		PS_MEDIATOR, 0600) != 0 ||
	    fchownat(bd.bd_runtime_fd, "mediator.sock", bd.bd_mediator_uid, 0,
		AT_SYMLINK_NOFOLLOW) != 0))
		fatalx("cannot open mediator.sock in %s", runtime_dir);
	if (fanhold_listen(&bd) != 0)
		fatalx("cannot open sensorfd.sock in %s: %s", runtime_dir, strerror(errno));
	if (sandbox_boundaryd(&cause) != 0)
		fatalx("sandbox: %s", cause);
	/*
	 * Threads start only now: capabilities and the seccomp filter are
	 * per thread, and one started earlier would keep what was dropped.
	 */
	log_init(BOUNDARYD_NAME, logflags);
	if (syncq_start() != 0)
		log_warnx("no sync thread: records are synced before each reply (slower)");
	if (ocsf_sink_start(&cause) != 0)
		fatalx("--ocsf: %s", cause);
	if (fanhold_start(&bd) != 0)
		fatalx("cannot start the fanotify stand-in: %s", strerror(errno));

	struct event *diskev = event_new(bd.bd_base, -1, EV_PERSIST, boundaryd_disk_cb, &bd);
	struct timeval disktv = { BOUNDARYD_DISK_RETRY_MS / 1000,
	    (BOUNDARYD_DISK_RETRY_MS % 1000) * 1000 };
	if (diskev == NULL || event_add(diskev, &disktv) != 0)
		fatalx("cannot arm the state disk retry");
	struct event *sigterm = evsignal_new(bd.bd_base, SIGTERM, boundaryd_signal_cb, &bd);
	struct event *sigint = evsignal_new(bd.bd_base, SIGINT, boundaryd_signal_cb, &bd);
	if (sigterm == NULL || sigint == NULL || event_add(sigterm, NULL) != 0 ||
	    event_add(sigint, NULL) != 0)
		fatalx("cannot install signal handlers");

	if (!no_spare)
		spare_start(&bd);
	log_info("serving on %s/{boundary,client}.sock, state %s, cgroup %s, instance %s",
	    runtime_dir, state_root, bd.bd_have_cgroup ? bd.bd_cgroup_mount : "(none)",
	    bd.bd_instance);
	if (ready_fd >= 0) {
		if (write(ready_fd, "1", 1) != 1)
			log_warn("readiness pipe");
		close(ready_fd);
	}
	event_base_dispatch(bd.bd_base);

	control_close(&bd.bd_boundary);
	control_close(&bd.bd_client);
	unlinkat(bd.bd_runtime_fd, "boundary.sock", 0);
	unlinkat(bd.bd_runtime_fd, "client.sock", 0);
	if (bd.bd_have_mediator) {
		control_close(&bd.bd_mediator);
		unlinkat(bd.bd_runtime_fd, "mediator.sock", 0);
	}
	control_close_all(&bd);
	fanhold_stop(&bd);
	operation_free_all(&bd);
	spare_shutdown(&bd);
	netop_shutdown(&bd);
	medtoken_free();
	/* A last try: what the disk still refuses now is lost with this process. */
	if (record_flush(bd.bd_state_fd) != 0) {
		struct record_disk rd;
		record_disk_status(&rd);
		log_warnx("stopping with %zu record(s) and %zu evidence line(s) the state disk "
		    "did not take (%s)", rd.rd_pending_records, rd.rd_pending_lines,
		    record_disk_state_name(rd.rd_state));
	}
	event_free(diskev);
	if (bd.bd_retain_ev != NULL)
		event_free(bd.bd_retain_ev);
	index_free(&bd);
	syncq_stop();
	event_free(sigterm);
	event_free(sigint);
	event_base_free(bd.bd_base);
	json_object_put(bd.bd_recovery);
	json_object_put(bd.bd_recovery_cleaned);
	close(bd.bd_ops_fd);
	close(bd.bd_state_fd);
	close(bd.bd_runtime_fd);
	close(lock_state);	/* the locks go last: the sockets are already unlinked */
	close(lock_runtime);
	ocsf_sink_close();
	log_info("stopped");
	log_shutdown();
	return 0;
}
