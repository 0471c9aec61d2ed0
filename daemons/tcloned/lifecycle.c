/*
 * lifecycle.c: the methods of tclone.sock (start, fork, list, diff,
 * summary, compare, merge, switch, keep, discard, delete, choose, attach)
 * and recovery after a restart.
 *
 * The caller is not trusted: every request names runs by id or name, and
 * only the caller's own runs exist for it (root sees all); every path in a
 * request goes through snapshot_path_rel(); every tree is opened beneath
 * the authority root without symlinks.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "fanpolicy.h"
#include "ids.h"
#include "log.h"
#include "proto.h"
#include "safefs.h"
#include "schema.h"
#include "btrfs.h"
#include "snapshot.h"
#include "gitmerge.h"
#include "tcloned.h"
#include "util.h"

struct req {
	struct tcloned *rq_td;
	const struct peer *rq_peer;
	struct json_object *rq_params;
	const char **rq_code;
	char **rq_msg;
};

static struct json_object *
fail(struct req *q, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static struct json_object *
fail(struct req *q, const char *code, const char *fmt, ...)
{
	va_list ap;
	char *m = NULL;

	va_start(ap, fmt);
	if (vasprintf(&m, fmt, ap) < 0)
		m = NULL;
	va_end(ap);
	*q->rq_code = code;
	free(*q->rq_msg);
	*q->rq_msg = m;
	return NULL;
}

/* -- schemas -- */

static const struct schema_field no_params[] = {
	{ "", SCHEMA_BOOL, 0, 0, 0, 0 },
};
static const struct schema_field start_params[] = {
	{ "workspace", SCHEMA_STRING, SCHEMA_REQUIRED, 2, PATH_MAX - 1, 0 },
	{ "argv", SCHEMA_STRING_ARRAY, SCHEMA_REQUIRED, 1, TCLONED_ARGV_MAX, 4096 },
	{ "observe_only", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "allow_net", SCHEMA_STRING_ARRAY, 0, 0, 64, 128 },
	{ "landlock_rw", SCHEMA_STRING_ARRAY, 0, 0, 16, PATH_MAX - 1 },
	{ "protect_git", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "agent", SCHEMA_OBJECT, 0, 0, 0, 0 },
	{ "name", SCHEMA_STRING, 0, 1, TCLONED_NAME_MAX, 0 },
	{ "fanotify", SCHEMA_OBJECT, 0, 0, 0, 0 },
	{ "podman", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "podman_path", SCHEMA_STRING, 0, 1, PATH_MAX - 1, 0 },
	{ "image", SCHEMA_STRING, 0, 1, TCLONED_IMAGE_MAX, 0 },
};
static const struct schema_field run_params[] = {
	{ "run_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, TCLONED_NAME_MAX + 32, 0 },
};
static const struct schema_field fork_params[] = {
	{ "run_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, TCLONED_NAME_MAX + 32, 0 },
	{ "copies", SCHEMA_INT, 0, 1, TCLONED_COPIES_MAX, 0 },
	{ "name", SCHEMA_STRING, 0, 1, TCLONED_NAME_MAX, 0 },
	{ "approaches", SCHEMA_STRING_ARRAY, 0, 0, TCLONED_COPIES_MAX, TCLONED_APPROACH_MAX },
};
static const struct schema_field merge_params[] = {
	{ "fork", SCHEMA_STRING, SCHEMA_REQUIRED, 1, TCLONED_NAME_MAX + 32, 0 },
	{ "into", SCHEMA_STRING, SCHEMA_REQUIRED, 1, TCLONED_NAME_MAX + 32, 0 },
	{ "scope", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 16, 0 },
	{ "paths", SCHEMA_STRING_ARRAY, 0, 0, SNAPSHOT_PATHS_MAX, PATH_MAX - 1 },
	{ "dry_run", SCHEMA_BOOL, 0, 0, 0, 0 },
	{ "force", SCHEMA_BOOL, 0, 0, 0, 0 },
};
static const struct schema_field keep_params[] = {
	{ "run_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, TCLONED_NAME_MAX + 32, 0 },
	{ "to", SCHEMA_STRING, SCHEMA_REQUIRED, 2, PATH_MAX - 1, 0 },
};
static const struct schema_field delete_params[] = {
	{ "run_id", SCHEMA_STRING, 0, 1, TCLONED_NAME_MAX + 32, 0 },
	{ "all", SCHEMA_BOOL, 0, 0, 0, 0 },
};
static const struct schema_field choose_params[] = {
	{ "run_id", SCHEMA_STRING, SCHEMA_REQUIRED, 1, TCLONED_NAME_MAX + 32, 0 },
	{ "action", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 16, 0 },
};

/* -- helpers -- */

static struct trun *
visible(struct req *q, const char *id)
{
	struct tcloned *t = q->rq_td;

	if (id == NULL)
		return NULL;
	/* Another user's run does not exist for the caller, by id or by name. */
	for (int i = 0; i < t->td_nruns; i++) {
		struct trun *r = t->td_runs[i];
		if (q->rq_peer->pr_uid != 0 && r->tr_uid != q->rq_peer->pr_uid)
			continue;
		if (strcmp(r->tr_id, id) == 0 || strcmp(r->tr_name, id) == 0)
			return r;
	}
	return NULL;
}

/*
 * A promotion keeps the fork's authority only if boundaryd's record of its
 * operation agrees: no lease was ever granted to it and no violation was
 * recorded (the seed's switch checks that this version can make).
 */
static int
operation_clean(struct tcloned *t, const struct trun *r, char **cause)
{
	struct json_object *p, *res = NULL, *rec, *leases, *counts;
	char code[64];
	int ok;

	if (r->tr_op[0] == '\0') {
		util_cause(cause, "%s has no operation", r->tr_id);
		return -1;
	}
	p = json_object_new_object();
	json_object_object_add(p, "operation_id", json_object_new_string(r->tr_op));
	if (tcloned_bd_call(t, "operation.inspect", p, &res, code, sizeof(code), cause) != 0)
		return -1;
	rec = schema_child(res, "record");
	leases = schema_child(rec, "leases");
	counts = schema_child(rec, "counts");
	ok = leases != NULL && json_object_is_type(leases, json_type_array) &&
	    json_object_array_length(leases) == 0 && counts != NULL &&
	    schema_int(counts, "violations", -1) == 0;
	json_object_put(res);
	if (!ok)
		util_cause(cause, "operation %s holds leases or has violations", r->tr_op);
	return ok ? 0 : -1;
}

static int
has_snapshot(const struct trun *r)
{
	return strcmp(r->tr_state, "discarded") != 0;
}

static int
open_ws(struct tcloned *t, const struct trun *r)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "runs/%s/ws", r->tr_id);
	return safefs_opendir(t->td_tc_fd, rel);
}

static int
open_base(struct tcloned *t, struct trun *r, char **cause)
{
	char rel[128];

	if (launch_base_path(t, r, rel, sizeof(rel), cause) != 0)
		return -1;
	int fd = safefs_opendir(t->td_tc_fd, rel);
	if (fd < 0)
		util_cause(cause, "%s: %s", rel, strerror(errno));
	return fd;
}

static struct json_object *
run_json(struct tcloned *t, const struct trun *r)
{
	struct json_object *o = json_object_new_object();
	char sock[PATH_MAX];

	json_object_object_add(o, "run_id", json_object_new_string(r->tr_id));
	json_object_object_add(o, "role", json_object_new_string(r->tr_role));
	json_object_object_add(o, "state", json_object_new_string(r->tr_state));
	json_object_object_add(o, "name", json_object_new_string(r->tr_name));
	json_object_object_add(o, "source_run_id", r->tr_source[0] ?
	    json_object_new_string(r->tr_source) : NULL);
	json_object_object_add(o, "group_id", r->tr_group[0] ?
	    json_object_new_string(r->tr_group) : NULL);
	json_object_object_add(o, "approach", r->tr_approach[0] ?
	    json_object_new_string(r->tr_approach) : NULL);
	json_object_object_add(o, "operation_id", r->tr_op[0] ?
	    json_object_new_string(r->tr_op) : NULL);
	json_object_object_add(o, "workspace", json_object_new_string(r->tr_workspace));
	json_object_object_add(o, "backend", json_object_new_string(r->tr_backend));
	json_object_object_add(o, "runtime", json_object_new_string(r->tr_runtime[0] ?
	    r->tr_runtime : "ns"));
	if (strcmp(r->tr_runtime, "podman") == 0) {
		char cn[TCLONED_ID_MAX + 32];
		podman_name(r, cn, sizeof(cn));
		json_object_object_add(o, "image", json_object_new_string(r->tr_image));
		json_object_object_add(o, "container", json_object_new_string(cn));
		json_object_object_add(o, "tmux", json_object_new_boolean(r->tr_tmux));
	}
	json_object_object_add(o, "observe_only", json_object_new_boolean(r->tr_observe_only));
	json_object_object_add(o, "uid", json_object_new_int64(r->tr_uid));
	json_object_object_add(o, "pid", r->tr_pid ? json_object_new_int(r->tr_pid) : NULL);
	json_object_object_add(o, "created_ms", json_object_new_int64(r->tr_created_ms));
	json_object_object_add(o, "command", json_object_get(r->tr_argv));
	if ((size_t)snprintf(sock, sizeof(sock), "%s/tclone/%s/tmux.sock", t->td_runtime,
	    r->tr_id) < sizeof(sock))
		json_object_object_add(o, "tmux_socket", json_object_new_string(sock));
	json_object_object_add(o, "tmux_session", json_object_new_string(TCLONED_SESSION));
	struct json_object *auth = schema_child(r->tr_rec, "authority");
	if (auth != NULL)
		json_object_object_add(o, "authority", json_object_get(auth));
	struct json_object *lc = schema_child(r->tr_rec, "live_clone");
	if (lc != NULL)
		json_object_object_add(o, "live_clone", json_object_get(lc));
	struct json_object *cf = schema_child(r->tr_rec, "confinement");
	if (cf != NULL)
		json_object_object_add(o, "confinement", json_object_get(cf));
	if (strcmp(r->tr_backend, "btrfs") == 0 && has_snapshot(r)) {
		/* The kernel's subvolume ids (BTRFS_IOC_INO_LOOKUP): distinct per snapshot. */
		struct json_object *b = json_object_new_object();
		const char *leaves[] = { "ws", "base" };
		for (size_t i = 0; i < nitems(leaves); i++) {
			char rel[128], key[32];
			uint64_t id;
			int fd;
			snprintf(rel, sizeof(rel), "runs/%s/%s", r->tr_id, leaves[i]);
			snprintf(key, sizeof(key), "%s_subvolume_id", leaves[i]);
			fd = safefs_opendir(t->td_tc_fd, rel);
			if (fd >= 0 && gbtrfs_is_subvol(fd) && gbtrfs_subvol_id(fd, &id, NULL) == 0)
				json_object_object_add(b, key, json_object_new_int64((int64_t)id));
			else
				json_object_object_add(b, key, NULL);
			if (fd >= 0)
				close(fd);
		}
		json_object_object_add(o, "btrfs", b);
	}
	return o;
}

static struct trun *
run_new(struct req *q, const char *role)
{
	struct trun *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	if (ids_new("run_", r->tr_id, sizeof(r->tr_id)) != 0) {
		free(r);
		return NULL;
	}
	util_strlcpy(r->tr_role, role, sizeof(r->tr_role));
	util_strlcpy(r->tr_state, "starting", sizeof(r->tr_state));
	util_strlcpy(r->tr_runtime, "ns", sizeof(r->tr_runtime));
	util_strlcpy(r->tr_backend, q->rq_td->td_backend, sizeof(r->tr_backend));
	r->tr_uid = q->rq_peer->pr_uid;
	r->tr_gid = q->rq_peer->pr_gid;
	r->tr_created_ms = util_now_ms();
	r->tr_rec = json_object_new_object();
	return r;
}

/* Remove everything of a run's snapshot (mounts, trees), keeping record.json. */
static int
snapshot_drop(struct tcloned *t, struct trun *r, char **cause)
{
	char rel[128];
	int fd;
	const char *leaves[] = { "ws", "base", "upper", "work" };

	launch_unmount(t, r);
	snprintf(rel, sizeof(rel), "runs/%s", r->tr_id);
	fd = safefs_opendir(t->td_tc_fd, rel);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	for (size_t i = 0; i < nitems(leaves); i++)
		if (snapshot_remove(fd, leaves[i], cause) != 0) {
			close(fd);
			return -1;
		}
	close(fd);
	return 0;
}

/* Remove layers no run with a snapshot uses any more. */
static void
layers_gc(struct tcloned *t)
{
	int fd = safefs_opendir(t->td_tc_fd, "layers");
	DIR *d;
	struct dirent *de;

	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		int used = 0;
		char *cause = NULL;
		if (!ids_valid("lay_", de->d_name))
			continue;
		for (int i = 0; i < t->td_nruns && !used; i++) {
			struct trun *r = t->td_runs[i];
			if (!has_snapshot(r))
				continue;
			for (int k = 0; k < r->tr_nlayers && !used; k++)
				used = strcmp(r->tr_layers[k], de->d_name) == 0;
		}
		if (!used && snapshot_remove(dirfd(d), de->d_name, &cause) != 0) {
			log_warnx("layer %s: %s", de->d_name, cause);
			free(cause);
		}
	}
	closedir(d);
}

static void
save_or_log(struct tcloned *t, struct trun *r)
{
	char *cause = NULL;

	if (tcloned_save(t, r, &cause) != 0) {
		log_warnx("%s", cause);
		free(cause);
	}
}

/* A label from a request: bounded, printable, one line (never an instruction channel). */
static int
label_ok(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
		if (*p < 0x20 || *p == 0x7f)
			return 0;
	return 1;
}

static int
name_ok(const char *s)
{
	if (s[0] == '\0' || s[0] == '-' || s[0] == '.')
		return 0;
	for (const char *p = s; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
			return 0;
	return 1;
}

static struct json_object *
context_json(const struct trun *r, const char *live_reason)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "run_id", json_object_new_string(r->tr_id));
	json_object_object_add(o, "role", json_object_new_string(r->tr_role));
	json_object_object_add(o, "source_run_id", r->tr_source[0] ?
	    json_object_new_string(r->tr_source) : NULL);
	json_object_object_add(o, "group_id", r->tr_group[0] ?
	    json_object_new_string(r->tr_group) : NULL);
	json_object_object_add(o, "index", json_object_new_int(r->tr_index));
	/* A validated, bounded label: context for the agent, not a trusted instruction. */
	json_object_object_add(o, "approach", r->tr_approach[0] ?
	    json_object_new_string(r->tr_approach) : NULL);
	json_object_object_add(o, "workspace", json_object_new_string(r->tr_workspace));
	json_object_object_add(o, "observe_only", json_object_new_boolean(r->tr_observe_only));
	if (live_reason != NULL) {
		json_object_object_add(o, "live_clone", json_object_new_boolean(0));
		json_object_object_add(o, "started", json_object_new_string(
		    "fresh agent on a snapshot of the source's workspace"));
		json_object_object_add(o, "live_clone_unavailable", json_object_new_string(live_reason));
	}
	return o;
}

/* -- tclone.status -- */

static struct json_object *
m_status(struct req *q)
{
	struct tcloned *t = q->rq_td;
	struct json_object *o = json_object_new_object(), *b = json_object_new_array();
	char buf[64], *save = NULL;

	util_strlcpy(buf, t->td_backends, sizeof(buf));
	for (char *s = strtok_r(buf, ",", &save); s != NULL; s = strtok_r(NULL, ",", &save))
		json_object_array_add(b, json_object_new_string(s));
	json_object_object_add(o, "daemon", json_object_new_string(TCLONED_NAME));
	json_object_object_add(o, "version", json_object_new_string(GENSEE_VERSION));
	json_object_object_add(o, "authority_root", json_object_new_string(t->td_root));
	json_object_object_add(o, "backends", b);
	json_object_object_add(o, "backend", json_object_new_string(t->td_backend));
	json_object_object_add(o, "btrfs", json_object_new_string(!strstr(t->td_backends, "btrfs") ?
	    "absent: the authority root is not on btrfs" : strcmp(t->td_backend, "btrfs") == 0 ?
	    "in use (subvolume snapshots)" : "available (not selected)"));
	struct json_object *lc = json_object_new_object();
	json_object_object_add(lc, "available", json_object_new_boolean(0));
	json_object_object_add(lc, "reason", json_object_new_string(t->td_criu));
	json_object_object_add(o, "live_clone", lc);
	{
		/* The Podman runtime: what a --podman run would use, and whether it can. */
		struct json_object *pm = json_object_new_object();
		char pc[64], *pcause = NULL;
		int ok = podman_check(t, pc, sizeof(pc), &pcause) == 0;
		json_object_object_add(pm, "available", json_object_new_boolean(ok));
		json_object_object_add(pm, "podman", json_object_new_string(t->td_podman));
		json_object_object_add(pm, "oci_runtime", json_object_new_string("runc"));
		json_object_object_add(pm, "default_image", json_object_new_string(t->td_image));
		if (!ok)
			json_object_object_add(pm, "reason", json_object_new_string(pcause ? pcause : "?"));
		free(pcause);
		json_object_object_add(o, "podman", pm);
	}
	int n = 0;
	for (int i = 0; i < t->td_nruns; i++)
		n += q->rq_peer->pr_uid == 0 || t->td_runs[i]->tr_uid == q->rq_peer->pr_uid;
	json_object_object_add(o, "runs", json_object_new_int(n));
	return o;
}

/* -- tclone.start -- */

/*
 * Open the workspace as the caller would: with their filesystem identity,
 * so root never snapshots what the user could not read. It must be
 * canonical (no symlink in it) and hold neither the authority root nor
 * the runtime dir (a snapshot would copy itself).
 */
static int
open_workspace(struct req *q, const char *path, char **cause)
{
	char link[64], real[PATH_MAX];
	ssize_t n;
	int fd;

	if (path[0] != '/' || strcmp(path, "/") == 0) {
		util_cause(cause, "%s: the workspace must be an absolute directory other than /", path);
		return -1;
	}
	if (util_path_below(q->rq_td->td_root, path) || util_path_below(q->rq_td->td_runtime, path)) {
		util_cause(cause, "%s: the workspace holds gensee's own state", path);
		return -1;
	}
	setfsgid(q->rq_peer->pr_gid);
	setfsuid(q->rq_peer->pr_uid);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int e = errno;
	setfsuid(0);
	setfsgid(0);
	if (fd < 0) {
		util_cause(cause, "%s: %s", path, strerror(e));
		return -1;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, real, sizeof(real) - 1);
	if (n < 0 || (real[n] = '\0', strcmp(real, path) != 0)) {
		close(fd);
		util_cause(cause, "%s: not canonical (a symlink or '..' in it)", path);
		return -1;
	}
	return fd;
}

/* Make a run's overlay dirs; the upper root takes the workspace root's owner and mode. */
static int
overlay_dirs(struct tcloned *t, struct trun *r, const struct stat *rootst, char **cause)
{
	const char *leaves[] = { "upper", "work", "ws", "base" };
	char rel[128];

	for (size_t i = 0; i < nitems(leaves); i++) {
		if (strcmp(leaves[i], "base") == 0 && r->tr_nlayers < 2)
			continue;
		snprintf(rel, sizeof(rel), "runs/%s/%s", r->tr_id, leaves[i]);
		if (safefs_mkdirs(t->td_tc_fd, rel, 0700) != 0) {
			util_cause(cause, "%s: %s", rel, strerror(errno));
			return -1;
		}
	}
	snprintf(rel, sizeof(rel), "runs/%s/upper", r->tr_id);
	if (fchownat(t->td_tc_fd, rel, rootst->st_uid, rootst->st_gid, AT_SYMLINK_NOFOLLOW) != 0 ||
	    fchmodat(t->td_tc_fd, rel, rootst->st_mode & 07777, 0) != 0) {
		util_cause(cause, "%s: %s", rel, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * btrfs: a source's workspace is copied (as the user reads it) into a new
 * subvolume ws/, and base/ is a read-only snapshot of it: the merge base,
 * as the overlay's lower layer is. Read-only so that nothing, tcloned
 * included, changes the base a later diff or merge is judged against.
 */
static int
btrfs_source(int rfd, int wsfd, const struct snapshot_creds *user, struct snapshot_stats *ss,
    char **cause)
{
	int vfd, rv;

	if (gbtrfs_subvol_create(rfd, "ws", cause) != 0)
		return -1;
	if ((vfd = safefs_opendir(rfd, "ws")) < 0) {
		util_cause(cause, "ws: %s", strerror(errno));
		return -1;
	}
	rv = snapshot_copy(wsfd, rfd, "ws", SNAPSHOT_F_INTO, user, NULL, ss, cause);
	/* The snapshot ioctl writes the subvolume's dirty data out first. */
	if (rv == 0)
		rv = gbtrfs_snapshot(vfd, rfd, "base", 1, cause);
	close(vfd);
	return rv;
}

/*
 * btrfs: a fork's base/ is a read-only snapshot of the source's ws/ as it
 * is now, and its ws/ a writable snapshot of that base: both the same
 * instant, whatever the source's agent writes meanwhile.
 */
static int
btrfs_fork(int srcws, int rfd, char **cause)
{
	int bfd, rv;

	if (gbtrfs_snapshot(srcws, rfd, "base", 1, cause) != 0)
		return -1;
	if ((bfd = safefs_opendir(rfd, "base")) < 0) {
		util_cause(cause, "base: %s", strerror(errno));
		return -1;
	}
	rv = gbtrfs_snapshot(bfd, rfd, "ws", 0, cause);
	close(bfd);
	return rv;
}

/* Undo a run that never started: mounts, trees, record, runtime dir. */
static void
run_abandon(struct tcloned *t, struct trun *r)
{
	char *cause = NULL;

	snapshot_drop(t, r, &cause);
	free(cause);
	cause = NULL;
	int fd = safefs_opendir(t->td_tc_fd, "runs");
	if (fd >= 0) {
		if (snapshot_remove(fd, r->tr_id, &cause) != 0) {
			log_warnx("%s", cause);
			free(cause);
		}
		close(fd);
	}
	launch_runtime_remove(t, r);
}

static struct json_object *
m_start(struct req *q)
{
	struct tcloned *t = q->rq_td;
	struct json_object *p = q->rq_params, *res;
	const char *ws = schema_string(p, "workspace"), *name = schema_string(p, "name");
	struct json_object *allow = schema_child(p, "allow_net");
	char *cause = NULL, rel[128];
	struct snapshot_creds user = { 1, q->rq_peer->pr_uid, q->rq_peer->pr_gid };
	struct snapshot_stats ss;
	struct stat rootst;
	struct trun *r;
	int wsfd, rfd = -1;
	int64_t t0 = util_monotonic_ms();
	const char *errcode = NULL;	/* a launch failure's own code (podman's) */

	if (name != NULL && (!name_ok(name) || tcloned_find(t, name) != NULL))
		return fail(q, PE_INVALID_PARAMS, "name %s: not [A-Za-z0-9._-] or already used", name);
	int want_podman = schema_bool(p, "podman", 0);
	const char *ppath = schema_string(p, "podman_path"), *image = schema_string(p, "image");
	if (!want_podman && (ppath != NULL || image != NULL))
		return fail(q, PE_INVALID_PARAMS, "podman_path and image are for podman runs");
	if (want_podman) {
		char pc[64];
		/*
		 * Threat: root running a binary the caller named. Only the one
		 * tcloned was configured with (--podman) is ever run.
		 */
		if (ppath != NULL && strcmp(ppath, t->td_podman) != 0)
			return fail(q, TE_PODMAN_NOT_ALLOWED, "podman %s: tcloned runs only %s "
			    "(its --podman)", ppath, t->td_podman);
		if (image != NULL && !podman_image_ok(image))
			return fail(q, PE_INVALID_PARAMS, "image: [A-Za-z0-9._/:@-], not starting with -");
		if (podman_check(t, pc, sizeof(pc), &cause) != 0) {
			fail(q, pc, "%s", cause);
			free(cause);
			return NULL;
		}
	}
	if ((wsfd = open_workspace(q, ws, &cause)) < 0) {
		fail(q, TE_WORKSPACE, "%s", cause);
		free(cause);
		return NULL;
	}
	if (fstat(wsfd, &rootst) != 0 || (r = run_new(q, "source")) == NULL) {
		close(wsfd);
		return fail(q, PE_INTERNAL, "out of memory");
	}
	util_strlcpy(r->tr_workspace, ws, sizeof(r->tr_workspace));
	util_strlcpy(r->tr_name, name != NULL ? name : r->tr_id, sizeof(r->tr_name));
	util_strlcpy(r->tr_runtime, want_podman ? "podman" : "ns", sizeof(r->tr_runtime));
	if (want_podman)
		util_strlcpy(r->tr_image, image != NULL ? image : t->td_image, sizeof(r->tr_image));
	r->tr_observe_only = schema_bool(p, "observe_only", 0);
	r->tr_argv = json_object_get(schema_child(p, "argv"));
	/* Extra writable paths only narrow nothing: Landlock never grants beyond the user's DAC. */
	struct json_object *llrw = schema_child(p, "landlock_rw");
	for (size_t i = 0; llrw != NULL && i < json_object_array_length(llrw); i++)
		if (json_object_get_string(json_object_array_get_idx(llrw, i))[0] != '/') {
			trun_free(r);
			close(wsfd);
			return fail(q, PE_INVALID_PARAMS, "landlock_rw: absolute paths only");
		}
	r->tr_landlock_rw = json_object_get(llrw);
	/* The agent profile the caller's policy and environment choose (agentstate.c). */
	struct json_object *agent = schema_child(p, "agent");
	if (agent != NULL) {
		char *why = NULL;
		if (tagent_check(agent, &why) != 0) {
			trun_free(r);
			close(wsfd);
			fail(q, PE_INVALID_PARAMS, "agent: %s", why != NULL ? why : "invalid");
			free(why);
			return NULL;
		}
		json_object_object_add(r->tr_rec, "agent", json_object_get(agent));
	}
	/* linux.mount_view.protect_git: the user's choice, recorded; the default protects. */
	json_object_object_add(r->tr_rec, "protect_git",
	    json_object_new_boolean(schema_bool(p, "protect_git", 1)));
	/*
	 * The fanotify rules of --sandbox linux (the caller's policy), relayed
	 * to boundaryd with each of the run's operations. tcloned asks as
	 * root, so it scopes them as boundaryd scopes a user's own: threat: a
	 * user's rule rooted at "/" putting a host-wide permission mark in
	 * place. Observe-only runs get none (they add no confinement).
	 */
	struct json_object *fan = schema_child(p, "fanotify");
	if (fan != NULL && schema_bool(fan, "enabled", 0) && !r->tr_observe_only) {
		struct json_object *copy = json_tokener_parse(json_object_to_json_string_ext(fan,
		    JSON_C_TO_STRING_PLAIN));
		if (copy == NULL || fanpolicy_scope_section(q->rq_peer->pr_uid, copy,
		    TCLONED_FANOTIFY_MAX, &cause) != 0) {
			json_object_put(copy);
			trun_free(r);
			close(wsfd);
			fail(q, PE_INVALID_PARAMS, "%s", cause != NULL ? cause : "fanotify");
			free(cause);
			return NULL;
		}
		json_object_object_add(r->tr_rec, "fanotify", copy);
	}
	if (!r->tr_observe_only) {
		/* The source's network authority: an allowlist, empty unless asked for. */
		r->tr_network = json_object_new_object();
		json_object_object_add(r->tr_network, "mode", json_object_new_string("allowlist"));
		json_object_object_add(r->tr_network, "allow", allow != NULL ?
		    json_object_get(allow) : json_object_new_array());
	}
	snprintf(rel, sizeof(rel), "runs/%s", r->tr_id);
	if (safefs_mkdirs(t->td_tc_fd, rel, 0700) != 0 || (rfd = safefs_opendir(t->td_tc_fd, rel)) < 0) {
		util_cause(&cause, "%s: %s", rel, strerror(errno));
		goto fail;
	}
	if (strcmp(r->tr_backend, "overlay") == 0) {
		int lfd = safefs_opendir(t->td_tc_fd, "layers");
		if (lfd < 0 || ids_new("lay_", r->tr_layers[0], TCLONED_ID_MAX) != 0) {
			util_cause(&cause, "layers: %s", strerror(errno));
			if (lfd >= 0)
				close(lfd);
			goto fail;
		}
		r->tr_nlayers = 1;
		int rv = snapshot_copy(wsfd, lfd, r->tr_layers[0], 0, &user, NULL, &ss, &cause);
		close(lfd);
		if (rv != 0 || overlay_dirs(t, r, &rootst, &cause) != 0 || launch_mount(t, r, &cause) != 0)
			goto fail;
	} else if (strcmp(r->tr_backend, "btrfs") == 0) {
		if (btrfs_source(rfd, wsfd, &user, &ss, &cause) != 0)
			goto fail;
	} else {
		int bfd;
		if (snapshot_copy(wsfd, rfd, "base", 0, &user, NULL, &ss, &cause) != 0)
			goto fail;
		if ((bfd = safefs_opendir(rfd, "base")) < 0) {
			util_cause(&cause, "base: %s", strerror(errno));
			goto fail;
		}
		struct snapshot_stats ss2;
		int rv = snapshot_copy(bfd, rfd, "ws", 0, NULL, NULL, &ss2, &cause);
		close(bfd);
		if (rv != 0)
			goto fail;
	}
	close(wsfd);
	wsfd = -1;
	if (tcloned_add(t, r) != 0) {
		util_cause(&cause, "more than %d runs", TCLONED_MAX_RUNS);
		goto fail;
	}
	struct json_object *ctx = context_json(r, NULL);
	int lrv = launch_agent(t, r, json_object_to_json_string(ctx), &cause);
	json_object_put(ctx);
	if (lrv != 0) {
		errcode = r->tr_errcode;
		/* A source that never ran keeps nothing: its mounts and trees go too. */
		run_abandon(t, r);
		tcloned_forget(t, r);	/* frees r: keep nothing that points to it */
		r = NULL;
		goto fail;
	}
	save_or_log(t, r);
	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "files", json_object_new_int64((int64_t)ss.ss_files));
	json_object_object_add(d, "skipped", json_object_new_int64((int64_t)ss.ss_skipped));
	json_object_object_add(d, "elapsed_ms", json_object_new_int64(util_monotonic_ms() - t0));
	tcloned_history(t, r->tr_id, "start", "succeeded", r, NULL, r->tr_uid, d);
	close(rfd);
	res = run_json(t, r);
	json_object_object_add(res, "snapshot_files", json_object_new_int64((int64_t)ss.ss_files));
	json_object_object_add(res, "snapshot_skipped", json_object_new_int64((int64_t)ss.ss_skipped));
	return res;
fail:
	if (wsfd >= 0)
		close(wsfd);
	if (rfd >= 0)
		close(rfd);
	{
		struct json_object *fd = json_object_new_object();
		json_object_object_add(fd, "reason", json_object_new_string(cause ? cause : "?"));
		tcloned_history(t, r != NULL ? r->tr_id : "-", "start", "failed", r, NULL,
		    q->rq_peer->pr_uid, fd);
	}
	if (r != NULL) {
		run_abandon(t, r);
		trun_free(r);
	}
	layers_gc(t);
	fail(q, errcode != NULL ? errcode : TE_SNAPSHOT, "cannot start the source: %s",
	    cause ? cause : "?");
	free(cause);
	return NULL;
}

/* -- tclone.list -- */

static struct json_object *
m_list(struct req *q)
{
	struct tcloned *t = q->rq_td;
	struct json_object *a = json_object_new_array(), *o = json_object_new_object();

	for (int i = 0; i < t->td_nruns; i++) {
		struct trun *r = t->td_runs[i];
		if (q->rq_peer->pr_uid != 0 && r->tr_uid != q->rq_peer->pr_uid)
			continue;
		json_object_array_add(a, run_json(t, r));
	}
	json_object_object_add(o, "runs", a);
	return o;
}

/* -- tclone.fork -- */

static void
fork_name(struct tcloned *t, const char *prefix, int copies, int i, const char *stamp,
    char *out, size_t len)
{
	if (copies == 1)
		snprintf(out, len, "%s%s%s", prefix, stamp[0] ? "-" : "", stamp);
	else
		snprintf(out, len, "%s%s%s-%d", prefix, stamp[0] ? "-" : "", stamp, i);
	(void)t;
}

static struct json_object *
m_fork(struct req *q)
{
	struct tcloned *t = q->rq_td;
	struct json_object *p = q->rq_params, *approaches = schema_child(p, "approaches");
	const char *name = schema_string(p, "name");
	int copies = (int)schema_int(p, "copies", 1);
	struct trun *src = visible(q, schema_string(p, "run_id")), *made[TCLONED_COPIES_MAX];
	char group[TCLONED_ID_MAX], stamp[32] = "", *cause = NULL;
	int nmade = 0;
	struct stat rootst;
	const char *errcode = NULL;

	if (src == NULL)
		return fail(q, PE_NOT_FOUND, "no such run");
	if (src->tr_observe_only)
		return fail(q, TE_OBSERVE_ONLY, "observe-only runs cannot be forked");
	if (!has_snapshot(src))
		return fail(q, PE_STATE, "%s has no snapshot any more (%s)", src->tr_id, src->tr_state);
	if (approaches != NULL && (int)json_object_array_length(approaches) > copies)
		return fail(q, PE_INVALID_PARAMS, "more --approach values than --copies");
	for (size_t i = 0; approaches != NULL && i < json_object_array_length(approaches); i++)
		if (!label_ok(json_object_get_string(json_object_array_get_idx(approaches, i))))
			return fail(q, PE_INVALID_PARAMS, "approach %zu: control characters", i);
	if (name != NULL && !name_ok(name))
		return fail(q, PE_INVALID_PARAMS, "name: [A-Za-z0-9._-] only");
	if (strcmp(src->tr_backend, "overlay") == 0 && src->tr_nlayers + 1 > TCLONED_LAYERS_MAX)
		return fail(q, PE_LIMIT, "forks nested deeper than %d", TCLONED_LAYERS_MAX - 1);
	if (t->td_nruns + copies > TCLONED_MAX_RUNS)
		return fail(q, PE_LIMIT, "more than %d runs", TCLONED_MAX_RUNS);
	if (name != NULL) {
		/* Clean names when free; else the whole group gets a timestamped prefix. */
		for (int i = 0; i < copies && stamp[0] == '\0'; i++) {
			char n[TCLONED_NAME_MAX + 32];
			fork_name(t, name, copies, i, "", n, sizeof(n));
			if (tcloned_find(t, n) != NULL) {
				time_t now = time(NULL);
				struct tm tm;
				gmtime_r(&now, &tm);
				strftime(stamp, sizeof(stamp), "%Y%m%d%H%M%S", &tm);
			}
		}
	}
	if (ids_new("grp_", group, sizeof(group)) != 0)
		return fail(q, PE_INTERNAL, "ids");
	{
		int wfd = open_ws(t, src);
		if (wfd < 0 || fstat(wfd, &rootst) != 0) {
			if (wfd >= 0)
				close(wfd);
			return fail(q, PE_STATE, "%s: snapshot unavailable: %s", src->tr_id, strerror(errno));
		}
		close(wfd);
	}
	tcloned_history(t, group, "fork", "started", src, group, q->rq_peer->pr_uid, NULL);
	for (int i = 0; i < copies; i++) {
		struct trun *f = run_new(q, "fork");
		struct snapshot_stats ss;
		char rel[128];
		int64_t t0 = util_monotonic_ms();

		if (f == NULL) {
			util_cause(&cause, "out of memory");
			goto fail;
		}
		util_strlcpy(f->tr_source, src->tr_id, sizeof(f->tr_source));
		util_strlcpy(f->tr_group, group, sizeof(f->tr_group));
		util_strlcpy(f->tr_workspace, src->tr_workspace, sizeof(f->tr_workspace));
		util_strlcpy(f->tr_backend, src->tr_backend, sizeof(f->tr_backend));
		/* A podman source's forks are containers of the same image, in their own operations. */
		util_strlcpy(f->tr_runtime, src->tr_runtime, sizeof(f->tr_runtime));
		util_strlcpy(f->tr_image, src->tr_image, sizeof(f->tr_image));
		f->tr_uid = src->tr_uid;
		f->tr_gid = src->tr_gid;
		f->tr_index = i;
		if (name != NULL)
			fork_name(t, name, copies, i, stamp, f->tr_name, sizeof(f->tr_name));
		else
			util_strlcpy(f->tr_name, f->tr_id, sizeof(f->tr_name));
		if (approaches != NULL && (size_t)i < json_object_array_length(approaches))
			util_strlcpy(f->tr_approach, json_object_get_string(
			    json_object_array_get_idx(approaches, (size_t)i)), sizeof(f->tr_approach));
		f->tr_argv = json_object_get(src->tr_argv);
		/*
		 * The same authority as the parent and never more: the fork's
		 * operation gets an exact copy of the parent's recorded network
		 * spec, compared byte for byte, and nothing else.
		 */
		if (src->tr_network != NULL)
			f->tr_network = json_tokener_parse(json_object_to_json_string_ext(src->tr_network,
			    JSON_C_TO_STRING_PLAIN));
		f->tr_landlock_rw = json_object_get(src->tr_landlock_rw);
		json_object_object_add(f->tr_rec, "protect_git",
		    json_object_new_boolean(schema_bool(src->tr_rec, "protect_git", 1)));
		if (schema_child(src->tr_rec, "agent") != NULL)
			json_object_object_add(f->tr_rec, "agent",
			    json_object_get(schema_child(src->tr_rec, "agent")));
		/* The parent's file rules, the same ones (already scoped). */
		struct json_object *sfan = schema_child(src->tr_rec, "fanotify");
		if (sfan != NULL)
			json_object_object_add(f->tr_rec, "fanotify", json_tokener_parse(
			    json_object_to_json_string_ext(sfan, JSON_C_TO_STRING_PLAIN)));
		const char *a = src->tr_network ? json_object_to_json_string_ext(src->tr_network,
		    JSON_C_TO_STRING_PLAIN) : "null";
		const char *b = f->tr_network ? json_object_to_json_string_ext(f->tr_network,
		    JSON_C_TO_STRING_PLAIN) : "null";
		if (strcmp(a, b) != 0) {
			util_cause(&cause, "the fork's authority differs from its parent's");
			trun_free(f);
			goto fail;
		}
		struct json_object *auth = json_object_new_object();
		json_object_object_add(auth, "executor", json_object_new_string("live_fork"));
		json_object_object_add(auth, "inherited_from_run", json_object_new_string(src->tr_id));
		json_object_object_add(auth, "inherited_from_operation", src->tr_op[0] ?
		    json_object_new_string(src->tr_op) : NULL);
		json_object_object_add(auth, "network", f->tr_network ? json_object_get(f->tr_network) :
		    NULL);
		json_object_object_add(auth, "landlock_rw", f->tr_landlock_rw ?
		    json_object_get(f->tr_landlock_rw) : json_object_new_array());
		json_object_object_add(auth, "fanotify", json_object_get(schema_child(f->tr_rec,
		    "fanotify")));
		json_object_object_add(auth, "authority_delta", json_object_new_object());
		json_object_object_add(auth, "authority_expansion_allowed", json_object_new_boolean(0));
		json_object_object_add(auth, "new_leases", json_object_new_array());
		json_object_object_add(f->tr_rec, "authority", auth);
		struct json_object *lc = json_object_new_object();
		json_object_object_add(lc, "available", json_object_new_boolean(0));
		json_object_object_add(lc, "reason", json_object_new_string(t->td_criu));
		json_object_object_add(lc, "started", json_object_new_string("fresh_agent_on_snapshot"));
		json_object_object_add(f->tr_rec, "live_clone", lc);
		snprintf(rel, sizeof(rel), "runs/%s", f->tr_id);
		int rfd = -1;
		if (safefs_mkdirs(t->td_tc_fd, rel, 0700) != 0 ||
		    (rfd = safefs_opendir(t->td_tc_fd, rel)) < 0) {
			util_cause(&cause, "%s: %s", rel, strerror(errno));
			trun_free(f);
			goto fail;
		}
		int rv = 0;
		if (strcmp(f->tr_backend, "overlay") == 0) {
			/*
			 * The source's upper layer, copied as it is now (whiteouts and
			 * opaque markers kept), becomes the fork's top lower layer: the
			 * fork sees the source's workspace at this moment, and the
			 * copy costs what the source changed, not the workspace.
			 */
			char up[128];
			int lfd = safefs_opendir(t->td_tc_fd, "layers"), ufd;
			snprintf(up, sizeof(up), "runs/%s/upper", src->tr_id);
			ufd = safefs_opendir(t->td_tc_fd, up);
			if (lfd < 0 || ufd < 0 || ids_new("lay_", f->tr_layers[0], TCLONED_ID_MAX) != 0) {
				util_cause(&cause, "%s: %s", up, strerror(errno));
				rv = -1;
			} else {
				rv = snapshot_copy(ufd, lfd, f->tr_layers[0], SNAPSHOT_F_OVERLAY, NULL, NULL,
				    &ss, &cause);
				f->tr_nlayers = 1;
				for (int k = 0; k < src->tr_nlayers; k++)
					util_strlcpy(f->tr_layers[f->tr_nlayers++], src->tr_layers[k],
					    TCLONED_ID_MAX);
			}
			if (lfd >= 0)
				close(lfd);
			if (ufd >= 0)
				close(ufd);
			if (rv == 0)
				rv = overlay_dirs(t, f, &rootst, &cause);
			if (rv == 0)
				rv = launch_mount(t, f, &cause);
		} else if (strcmp(f->tr_backend, "btrfs") == 0) {
			int sw = open_ws(t, src);
			memset(&ss, 0, sizeof(ss));
			rv = sw < 0 ? -1 : btrfs_fork(sw, rfd, &cause);
			if (sw < 0)
				util_cause(&cause, "%s: %s", src->tr_id, strerror(errno));
			else
				close(sw);
		} else {
			int sw = open_ws(t, src), bfd;
			rv = sw < 0 ? -1 : snapshot_copy(sw, rfd, "base", 0, NULL, NULL, &ss, &cause);
			if (sw >= 0)
				close(sw);
			if (rv == 0 && (bfd = safefs_opendir(rfd, "base")) >= 0) {
				struct snapshot_stats ss2;
				rv = snapshot_copy(bfd, rfd, "ws", 0, NULL, NULL, &ss2, &cause);
				close(bfd);
			} else if (rv == 0) {
				rv = -1;
			}
		}
		close(rfd);
		if (rv != 0 || tcloned_add(t, f) != 0) {
			if (cause == NULL)
				util_cause(&cause, "snapshot failed");
			run_abandon(t, f);
			trun_free(f);
			goto fail;
		}
		made[nmade++] = f;
		struct json_object *ctx = context_json(f, t->td_criu);
		rv = launch_agent(t, f, json_object_to_json_string(ctx), &cause);
		json_object_put(ctx);
		if (rv != 0) {
			errcode = f->tr_errcode;
			goto fail;
		}
		save_or_log(t, f);
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "index", json_object_new_int(i));
		json_object_object_add(d, "elapsed_ms", json_object_new_int64(util_monotonic_ms() - t0));
		json_object_object_add(d, "copied_files", json_object_new_int64((int64_t)ss.ss_files));
		json_object_object_add(d, "authority_delta", json_object_new_object());
		tcloned_history(t, group, "fork", "succeeded", f, group, q->rq_peer->pr_uid, d);
	}
	struct json_object *o = json_object_new_object(), *forks = json_object_new_array();
	json_object_object_add(o, "source_run_id", json_object_new_string(src->tr_id));
	json_object_object_add(o, "group_id", json_object_new_string(group));
	for (int i = 0; i < nmade; i++) {
		struct json_object *fj = run_json(t, made[i]);
		json_object_object_add(fj, "index", json_object_new_int(made[i]->tr_index));
		json_object_array_add(forks, fj);
	}
	json_object_object_add(o, "forks", forks);
	json_object_object_add(o, "authority_delta", json_object_new_object());
	struct json_object *lc = json_object_new_object();
	json_object_object_add(lc, "available", json_object_new_boolean(0));
	json_object_object_add(lc, "reason", json_object_new_string(t->td_criu));
	json_object_object_add(lc, "started", json_object_new_string("fresh_agent_on_snapshot"));
	json_object_object_add(o, "live_clone", lc);
	return o;
fail:
	/* The group is all or nothing: forks already made are taken back. */
	for (int i = 0; i < nmade; i++) {
		launch_end(t, made[i], 1);
		made[i]->tr_pid = 0;
		run_abandon(t, made[i]);
		tcloned_forget(t, made[i]);
	}
	layers_gc(t);
	{
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "reason", json_object_new_string(cause ? cause : "?"));
		tcloned_history(t, group, "fork", "failed", src, group, q->rq_peer->pr_uid, d);
	}
	fail(q, errcode != NULL ? errcode : TE_SNAPSHOT, "fork of %s failed: %s", src->tr_id,
	    cause ? cause : "?");
	free(cause);
	return NULL;
}

/* -- diff, summary, compare -- */

static int
run_diff(struct tcloned *t, struct trun *r, struct snapshot_changes *c, char **cause)
{
	int b = open_base(t, r, cause), w = b < 0 ? -1 : open_ws(t, r), rv;

	if (b < 0 || w < 0) {
		if (b >= 0)
			close(b);
		if (cause != NULL && *cause == NULL)
			util_cause(cause, "snapshot unavailable");
		return -1;
	}
	rv = snapshot_diff(b, w, c, cause);
	close(b);
	close(w);
	return rv;
}

static struct json_object *
counts_json(const struct snapshot_changes *c)
{
	struct json_object *o = json_object_new_object();
	int64_t n[3] = { 0, 0, 0 };

	for (size_t i = 0; i < c->scs_n; i++)
		n[c->scs_v[i].sc_kind]++;
	json_object_object_add(o, "added", json_object_new_int64(n[SC_ADDED]));
	json_object_object_add(o, "modified", json_object_new_int64(n[SC_MODIFIED]));
	json_object_object_add(o, "deleted", json_object_new_int64(n[SC_DELETED]));
	json_object_object_add(o, "total", json_object_new_int64((int64_t)c->scs_n));
	return o;
}

static struct json_object *
m_diff(struct req *q)
{
	struct trun *r = visible(q, schema_string(q->rq_params, "run_id"));
	struct snapshot_changes c;
	char *cause = NULL;

	if (r == NULL)
		return fail(q, PE_NOT_FOUND, "no such run");
	if (!has_snapshot(r))
		return fail(q, PE_STATE, "%s has no snapshot (%s)", r->tr_id, r->tr_state);
	if (run_diff(q->rq_td, r, &c, &cause) != 0) {
		fail(q, TE_SNAPSHOT, "%s", cause);
		free(cause);
		return NULL;
	}
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "run_id", json_object_new_string(r->tr_id));
	json_object_object_add(o, "role", json_object_new_string(r->tr_role));
	json_object_object_add(o, "against", json_object_new_string(strcmp(r->tr_role, "fork") == 0 ?
	    "the source's workspace when the fork was made" : "the workspace when the run started"));
	json_object_object_add(o, "counts", counts_json(&c));
	json_object_object_add(o, "changes", snapshot_changes_json(&c));
	snapshot_changes_free(&c);
	return o;
}

static struct json_object *
summary_of(struct tcloned *t, struct trun *r, int64_t *total, char **cause)
{
	struct snapshot_changes c;
	struct json_object *o = json_object_new_object(), *files = json_object_new_array();

	json_object_object_add(o, "run_id", json_object_new_string(r->tr_id));
	json_object_object_add(o, "name", json_object_new_string(r->tr_name));
	json_object_object_add(o, "role", json_object_new_string(r->tr_role));
	json_object_object_add(o, "state", json_object_new_string(r->tr_state));
	json_object_object_add(o, "source_run_id", r->tr_source[0] ?
	    json_object_new_string(r->tr_source) : NULL);
	json_object_object_add(o, "group_id", r->tr_group[0] ?
	    json_object_new_string(r->tr_group) : NULL);
	json_object_object_add(o, "approach", r->tr_approach[0] ?
	    json_object_new_string(r->tr_approach) : NULL);
	json_object_object_add(o, "operation_id", r->tr_op[0] ?
	    json_object_new_string(r->tr_op) : NULL);
	*total = -1;
	if (has_snapshot(r)) {
		if (run_diff(t, r, &c, cause) != 0) {
			json_object_put(o);
			json_object_put(files);
			return NULL;
		}
		for (size_t i = 0; i < c.scs_n; i++)
			if (c.scs_v[i].sc_after != SE_DIR && c.scs_v[i].sc_before != SE_DIR)
				json_object_array_add(files, json_object_new_string(c.scs_v[i].sc_path));
		json_object_object_add(o, "counts", counts_json(&c));
		*total = (int64_t)c.scs_n;
		snapshot_changes_free(&c);
	}
	json_object_object_add(o, "changed_files", files);
	/* No test runner is attached to runs in this version: said, not invented. */
	struct json_object *tests = json_object_new_object();
	json_object_object_add(tests, "recorded", json_object_new_boolean(0));
	json_object_object_add(o, "tests", tests);
	json_object_object_add(o, "ready", json_object_new_boolean(has_snapshot(r) &&
	    strcmp(r->tr_state, "running") != 0));
	return o;
}

static struct json_object *
m_summary(struct req *q)
{
	struct trun *r = visible(q, schema_string(q->rq_params, "run_id"));
	char *cause = NULL;
	int64_t total;

	if (r == NULL)
		return fail(q, PE_NOT_FOUND, "no such run");
	struct json_object *o = summary_of(q->rq_td, r, &total, &cause);
	if (o == NULL) {
		fail(q, TE_SNAPSHOT, "%s", cause);
		free(cause);
	}
	return o;
}

static struct json_object *
m_compare(struct req *q)
{
	struct tcloned *t = q->rq_td;
	struct trun *r = visible(q, schema_string(q->rq_params, "run_id")), *best = NULL;
	struct json_object *o, *members;
	int64_t best_total = -1;
	char *cause = NULL;

	if (r == NULL)
		return fail(q, PE_NOT_FOUND, "no such run");
	if (r->tr_group[0] == '\0')
		return fail(q, PE_INVALID_PARAMS, "%s is not a fork of a group", r->tr_id);
	o = json_object_new_object();
	members = json_object_new_array();
	json_object_object_add(o, "group_id", json_object_new_string(r->tr_group));
	json_object_object_add(o, "source_run_id", json_object_new_string(r->tr_source));
	for (int i = 0; i < t->td_nruns; i++) {
		struct trun *m = t->td_runs[i];
		int64_t total;
		if (strcmp(m->tr_group, r->tr_group) != 0)
			continue;
		struct json_object *s = summary_of(t, m, &total, &cause);
		if (s == NULL) {
			json_object_put(o);
			json_object_put(members);
			fail(q, TE_SNAPSHOT, "%s", cause);
			free(cause);
			return NULL;
		}
		json_object_array_add(members, s);
		if (total > 0 && (best == NULL || total < best_total)) {
			best = m;
			best_total = total;
		}
	}
	json_object_object_add(o, "forks", members);
	struct json_object *rec = json_object_new_object();
	json_object_object_add(rec, "run_id", best ? json_object_new_string(best->tr_id) : NULL);
	json_object_object_add(rec, "basis", json_object_new_string("smallest non-empty diff; no "
	    "test results are recorded: a size heuristic, not a correctness judgment"));
	json_object_object_add(o, "recommendation", rec);
	return o;
}

/* -- merge -- */

struct pausectx {
	int ms;
};

static void
apply_pause(size_t i, void *arg)
{
	struct pausectx *p = arg;

	(void)i;
	if (p->ms > 0)
		usleep((useconds_t)p->ms * 1000);
}

static int
txn_target(struct tcloned *t, const char *tx, const struct trun *fork, const struct trun *into,
    int *txfd, char **cause)
{
	char rel[128];
	struct json_object *o = json_object_new_object();
	int fd;

	snprintf(rel, sizeof(rel), "txn/%s", tx);
	if (safefs_mkdirs(t->td_tc_fd, rel, 0700) != 0 || (*txfd = safefs_opendir(t->td_tc_fd, rel)) < 0) {
		util_cause(cause, "%s: %s", rel, strerror(errno));
		json_object_put(o);
		return -1;
	}
	json_object_object_add(o, "fork", json_object_new_string(fork->tr_id));
	json_object_object_add(o, "into", json_object_new_string(into->tr_id));
	const char *s = json_object_to_json_string(o);
	fd = openat(*txfd, "target.json", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || util_write_all(fd, s, strlen(s)) != 0 || fsync(fd) != 0) {
		util_cause(cause, "target.json: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		json_object_put(o);
		return -1;
	}
	close(fd);
	json_object_put(o);
	return 0;
}

static void
txn_remove(struct tcloned *t, const char *tx)
{
	int fd = safefs_opendir(t->td_tc_fd, "txn");
	char *cause = NULL;

	if (fd >= 0) {
		if (snapshot_remove(fd, tx, &cause) != 0) {
			log_warnx("txn %s: %s", tx, cause);
			free(cause);
		}
		close(fd);
	}
}

/*
 * Apply plan's SP_APPLY entries from tree from into the source sfd as
 * transaction tx (journal under tclone/txn/TX/). On failure the source is
 * rolled back, the history says so (*d goes into it), and the request
 * fails: -1. A failed rollback keeps its journal for the next start.
 */
static int
merge_commit(struct req *q, const char *tx, struct trun *f, struct trun *s, int from, int sfd,
    const struct snapshot_plan *plan, struct json_object **d, int *txfd)
{
	struct tcloned *t = q->rq_td;
	struct pausectx pc = { t->td_apply_pause_ms };
	char *cause = NULL;
	int rbf = 0;

	if (plan->sp_apply == 0)
		return 0;
	if (txn_target(t, tx, f, s, txfd, &cause) != 0 ||
	    snapshot_apply(from, sfd, *txfd, plan, apply_pause, &pc, &rbf, &cause) != 0) {
		json_object_object_add(*d, "reason", json_object_new_string(cause ? cause : "?"));
		json_object_object_add(*d, "rolled_back", json_object_new_boolean(!rbf));
		tcloned_history(t, tx, "merge", "failed", f, f->tr_group, q->rq_peer->pr_uid, *d);
		*d = NULL;
		if (!rbf)
			txn_remove(t, tx);
		fail(q, PE_STATE, "merge failed%s: %s", rbf ? " and its rollback failed" :
		    " (the source was rolled back)", cause ? cause : "?");
		free(cause);
		return -1;
	}
	txn_remove(t, tx);
	return 0;
}

/* -- git merges: git sees no run's repository (gitmerge.c) -- */

/*
 * --git: the fork's tracked changes since the fork (the snapshot's own
 * delta, base -> fork), made into a patch and applied to copies of the
 * source's files by git in a private work directory (gitmerge.c); then
 * those copies go into the source as one transaction, like any merge.
 * Untracked changes are left out and listed (left_out); a conflict shows
 * the hunks that do not apply.
 */
static struct json_object *
do_git_merge(struct req *q, struct trun *f, struct trun *s, int dry, int forced)
{
	struct tcloned *t = q->rq_td;
	struct snapshot_creds user = { 1, s->tr_uid, s->tr_gid };
	struct snapshot_plan plan;
	struct gitmerge gm;
	char tx[TCLONED_ID_MAX], *cause = NULL;
	const char *code = TE_SNAPSHOT;
	int bfd = -1, ffd = -1, sfd = -1, txfd = -1, prepared = 0;
	struct json_object *o = NULL, *d = NULL, *files;

	memset(&plan, 0, sizeof(plan));
	memset(&gm, 0, sizeof(gm));
	gm.gm_work = gm.gm_s0 = gm.gm_s = -1;
	if (!has_snapshot(f) || !has_snapshot(s))
		return fail(q, PE_STATE, "both runs need their snapshots");
	if (ids_new("txn_", tx, sizeof(tx)) != 0)
		return fail(q, PE_INTERNAL, "ids");
	if ((bfd = open_base(t, f, &cause)) < 0 || (ffd = open_ws(t, f)) < 0 ||
	    (sfd = open_ws(t, s)) < 0) {
		if (cause == NULL)
			util_cause(&cause, "snapshot unavailable: %s", strerror(errno));
		goto err;
	}
	tcloned_history(t, tx, "merge", "started", f, f->tr_group, q->rq_peer->pr_uid, NULL);
	if (gitmerge_prepare(t->td_tc_fd, tx, bfd, ffd, sfd, &user, dry, &gm, &code, &cause) != 0)
		goto err;
	prepared = 1;
	files = json_object_new_array();
	for (size_t i = 0; i < gm.gm_npaths; i++)
		json_object_array_add(files, json_object_new_string(gm.gm_paths[i]));
	o = json_object_new_object();
	json_object_object_add(o, "tx_id", json_object_new_string(tx));
	json_object_object_add(o, "fork", json_object_new_string(f->tr_id));
	json_object_object_add(o, "into", json_object_new_string(s->tr_id));
	json_object_object_add(o, "scope", json_object_new_string("git"));
	json_object_object_add(o, "forced", json_object_new_boolean(forced));
	json_object_object_add(o, "dry_run", json_object_new_boolean(dry));
	json_object_object_add(o, "patch_bytes", json_object_new_int64((int64_t)gm.gm_patch_bytes));
	json_object_object_add(o, "files", files);
	json_object_object_add(o, "left_out", json_object_get(gm.gm_left_out));
	json_object_object_add(o, "left_out_total", json_object_new_int64(gm.gm_left_out_total));
	d = json_object_new_object();
	json_object_object_add(d, "into", json_object_new_string(s->tr_id));
	json_object_object_add(d, "scope", json_object_new_string("git"));
	json_object_object_add(d, "files", json_object_new_int64((int64_t)gm.gm_npaths));
	json_object_object_add(d, "left_out", json_object_new_int64(gm.gm_left_out_total));
	if (gm.gm_npaths == 0) {
		json_object_object_add(o, "merged", json_object_new_boolean(1));
		json_object_object_add(o, "status", json_object_new_string("nothing_to_merge"));
		json_object_object_add(o, "conflicts", json_object_new_array());
		tcloned_history(t, tx, "merge", dry ? "dry-run" : "succeeded", f, f->tr_group,
		    q->rq_peer->pr_uid, d);
		d = NULL;
		goto out;
	}
	if (gm.gm_conflicts != NULL) {
		/* Nothing is applied when any hunk does not: the source is left as it was. */
		json_object_object_add(o, "merged", json_object_new_boolean(0));
		json_object_object_add(o, "status", json_object_new_string("conflict"));
		json_object_object_add(o, "conflicts", json_object_get(gm.gm_conflicts));
		json_object_object_add(d, "reason", json_object_new_string("conflict"));
		tcloned_history(t, tx, "merge", dry ? "dry-run" : "failed", f, f->tr_group,
		    q->rq_peer->pr_uid, d);
		d = NULL;
		goto out;
	}
	json_object_object_add(o, "conflicts", json_object_new_array());
	if (dry) {
		json_object_object_add(o, "merged", json_object_new_boolean(0));
		json_object_object_add(o, "status", json_object_new_string("clean"));
		tcloned_history(t, tx, "merge", "dry-run", f, f->tr_group, q->rq_peer->pr_uid, d);
		d = NULL;
		goto out;
	}
	/*
	 * The patched copies (s) against the copies they were made from (s0):
	 * the changes to take into the source, which must still have what s0
	 * has (else it changed meanwhile: a conflict, nothing applied). The
	 * files are named, so a tracked .gitattributes is merged as itself.
	 */
	if (snapshot_merge_plan(gm.gm_s0, gm.gm_s, sfd, (const char *const *)gm.gm_paths,
	    gm.gm_npaths, &plan, &cause) != 0)
		goto err;
	if (plan.sp_conflicts > 0 || plan.sp_skipped > 0) {
		util_cause(&cause, "the source changed while merging (%zu entr%s)",
		    plan.sp_conflicts + plan.sp_skipped,
		    plan.sp_conflicts + plan.sp_skipped == 1 ? "y" : "ies");
		code = PE_STATE;
		goto err;
	}
	if (merge_commit(q, tx, f, s, gm.gm_s, sfd, &plan, &d, &txfd) != 0) {
		json_object_put(o);
		o = NULL;
		goto out;
	}
	json_object_object_add(o, "merged", json_object_new_boolean(1));
	json_object_object_add(o, "status", json_object_new_string("merged"));
	json_object_object_add(o, "apply", json_object_new_int64((int64_t)plan.sp_apply));
	tcloned_history(t, tx, "merge", forced ? "forced" : "succeeded", f, f->tr_group,
	    q->rq_peer->pr_uid, d);
	d = NULL;
	goto out;
err:
	{
		struct json_object *dd = json_object_new_object();
		json_object_object_add(dd, "scope", json_object_new_string("git"));
		json_object_object_add(dd, "reason", json_object_new_string(cause ? cause : "?"));
		json_object_object_add(dd, "code", json_object_new_string(code));
		tcloned_history(t, tx, "merge", "failed", f, f->tr_group, q->rq_peer->pr_uid, dd);
	}
	fail(q, code, "git merge: %s", cause ? cause : "failed");
	json_object_put(o);
	o = NULL;
out:
	json_object_put(d);
	snapshot_plan_free(&plan);
	if (prepared || gm.gm_name[0] != '\0')
		gitmerge_free(t->td_tc_fd, &gm);
	if (bfd >= 0)
		close(bfd);
	if (ffd >= 0)
		close(ffd);
	if (sfd >= 0)
		close(sfd);
	if (txfd >= 0)
		close(txfd);
	free(cause);
	return o;
}

static struct json_object *
do_merge(struct req *q, struct trun *f, struct trun *s, const char *scope,
    struct json_object *paths, int dry, int force)
{
	struct tcloned *t = q->rq_td;
	char *sel[SNAPSHOT_PATHS_MAX], tx[TCLONED_ID_MAX], *cause = NULL;
	size_t nsel = 0;
	struct snapshot_plan plan;
	int bfd = -1, ffd = -1, sfd = -1, txfd = -1;
	struct json_object *o = NULL, *d = NULL;
	int forced = 0;

	memset(&plan, 0, sizeof(plan));
	if (strcmp(f->tr_role, "fork") != 0)
		return fail(q, PE_INVALID_PARAMS, "%s is not a fork", f->tr_id);
	if (f == s)
		return fail(q, PE_INVALID_PARAMS, "a fork cannot merge into itself");
	if (strcmp(f->tr_source, s->tr_id) != 0) {
		if (!force)
			return fail(q, TE_NOT_DIRECT_CHILD, "%s is not a direct fork of %s (--force "
			    "merges anyway)", f->tr_id, s->tr_id);
		forced = 1;
	}
	if (strcmp(scope, "git") == 0) {
		if (strcmp(f->tr_workspace, s->tr_workspace) != 0 && !force)
			return fail(q, TE_NOT_DIRECT_CHILD, "different workspaces");
		return do_git_merge(q, f, s, dry, forced);
	}
	if (strcmp(scope, "filesystem") != 0 && strcmp(scope, "paths") != 0)
		return fail(q, PE_INVALID_PARAMS, "scope: git, filesystem or paths");
	if (strcmp(scope, "paths") == 0 && (paths == NULL || json_object_array_length(paths) == 0))
		return fail(q, PE_INVALID_PARAMS, "--paths needs at least one path");
	if (!has_snapshot(f) || !has_snapshot(s))
		return fail(q, PE_STATE, "both runs need their snapshots");
	if (strcmp(f->tr_workspace, s->tr_workspace) != 0 && !force)
		return fail(q, TE_NOT_DIRECT_CHILD, "different workspaces");
	if (ids_new("txn_", tx, sizeof(tx)) != 0)
		return fail(q, PE_INTERNAL, "ids");
	for (size_t i = 0; strcmp(scope, "paths") == 0 && i < json_object_array_length(paths); i++) {
		char rel[PATH_MAX];
		const char *in = json_object_get_string(json_object_array_get_idx(paths, i));
		if (snapshot_path_rel(s->tr_workspace, in, rel, sizeof(rel), &cause) != 0 ||
		    (sel[nsel] = strdup(rel)) == NULL) {
			for (size_t k = 0; k < nsel; k++)
				free(sel[k]);
			fail(q, TE_PATH, "%s", cause ? cause : "out of memory");
			free(cause);
			return NULL;
		}
		nsel++;
	}
	if ((bfd = open_base(t, f, &cause)) < 0 || (ffd = open_ws(t, f)) < 0 ||
	    (sfd = open_ws(t, s)) < 0) {
		if (cause == NULL)
			util_cause(&cause, "snapshot unavailable: %s", strerror(errno));
		goto err;
	}
	tcloned_history(t, tx, "merge", "started", f, f->tr_group, q->rq_peer->pr_uid, NULL);
	if (snapshot_merge_plan(bfd, ffd, sfd, (const char *const *)sel, nsel, &plan, &cause) != 0)
		goto err;
	o = json_object_new_object();
	json_object_object_add(o, "tx_id", json_object_new_string(tx));
	json_object_object_add(o, "fork", json_object_new_string(f->tr_id));
	json_object_object_add(o, "into", json_object_new_string(s->tr_id));
	json_object_object_add(o, "scope", json_object_new_string(scope));
	json_object_object_add(o, "forced", json_object_new_boolean(forced));
	json_object_object_add(o, "dry_run", json_object_new_boolean(dry));
	json_object_object_add(o, "apply", json_object_new_int64((int64_t)plan.sp_apply));
	json_object_object_add(o, "already_same", json_object_new_int64((int64_t)plan.sp_same));
	json_object_object_add(o, "conflicts", snapshot_conflicts_json(&plan));
	/* What --filesystem and --paths never take unless named: said, not silent. */
	json_object_object_add(o, "skipped", snapshot_skipped_json(&plan));
	d = json_object_new_object();
	json_object_object_add(d, "into", json_object_new_string(s->tr_id));
	json_object_object_add(d, "apply", json_object_new_int64((int64_t)plan.sp_apply));
	json_object_object_add(d, "conflicts", json_object_new_int64((int64_t)plan.sp_conflicts));
	json_object_object_add(d, "skipped", json_object_new_int64((int64_t)plan.sp_skipped));
	if (plan.sp_conflicts > 0) {
		/* Nothing is applied when anything conflicts: the source is left as it was. */
		json_object_object_add(o, "merged", json_object_new_boolean(0));
		json_object_object_add(o, "status", json_object_new_string("conflict"));
		json_object_object_add(d, "reason", json_object_new_string("conflict"));
		tcloned_history(t, tx, "merge", dry ? "dry-run" : "failed", f, f->tr_group,
		    q->rq_peer->pr_uid, d);
		d = NULL;	/* the history took it */
		goto out;
	}
	if (dry) {
		json_object_object_add(o, "merged", json_object_new_boolean(0));
		json_object_object_add(o, "status", json_object_new_string("clean"));
		tcloned_history(t, tx, "merge", "dry-run", f, f->tr_group, q->rq_peer->pr_uid, d);
		d = NULL;
		goto out;
	}
	if (merge_commit(q, tx, f, s, ffd, sfd, &plan, &d, &txfd) != 0) {
		json_object_put(o);
		o = NULL;
		goto out;
	}
	json_object_object_add(o, "merged", json_object_new_boolean(1));
	json_object_object_add(o, "status", json_object_new_string(plan.sp_apply > 0 ? "merged" :
	    "nothing_to_merge"));
	tcloned_history(t, tx, "merge", forced ? "forced" : "succeeded", f, f->tr_group,
	    q->rq_peer->pr_uid, d);
	d = NULL;
	goto out;
err:
	fail(q, TE_SNAPSHOT, "%s", cause ? cause : "merge failed");
	json_object_put(o);
	o = NULL;
out:
	json_object_put(d);
	for (size_t k = 0; k < nsel; k++)
		free(sel[k]);
	snapshot_plan_free(&plan);
	if (bfd >= 0)
		close(bfd);
	if (ffd >= 0)
		close(ffd);
	if (sfd >= 0)
		close(sfd);
	if (txfd >= 0)
		close(txfd);
	free(cause);
	return o;
}

static struct json_object *
m_merge(struct req *q)
{
	struct json_object *p = q->rq_params;
	struct trun *f = visible(q, schema_string(p, "fork")), *s = visible(q, schema_string(p, "into"));

	if (f == NULL || s == NULL)
		return fail(q, PE_NOT_FOUND, "no such run");
	return do_merge(q, f, s, schema_string(p, "scope"), schema_child(p, "paths"),
	    schema_bool(p, "dry_run", 0), schema_bool(p, "force", 0));
}

/* -- discard, delete, switch, keep, choose, attach -- */

static int
do_discard(struct req *q, struct trun *r, const char *action, char **cause)
{
	struct tcloned *t = q->rq_td;

	launch_end(t, r, 1);
	if (snapshot_drop(t, r, cause) != 0) {
		tcloned_history(t, r->tr_id, action, "failed", r, r->tr_group, q->rq_peer->pr_uid, NULL);
		return -1;
	}
	util_strlcpy(r->tr_state, "discarded", sizeof(r->tr_state));
	save_or_log(t, r);
	launch_runtime_remove(t, r);
	layers_gc(t);
	tcloned_history(t, r->tr_id, action, "succeeded", r, r->tr_group, q->rq_peer->pr_uid, NULL);
	return 0;
}

static struct json_object *
m_discard(struct req *q)
{
	struct trun *r = visible(q, schema_string(q->rq_params, "run_id"));
	char *cause = NULL;

	if (r == NULL)
		return fail(q, PE_NOT_FOUND, "no such run");
	if (do_discard(q, r, "discard", &cause) != 0) {
		fail(q, PE_STATE, "%s", cause ? cause : "discard failed");
		free(cause);
		return NULL;
	}
	return run_json(q->rq_td, r);
}

static int
do_delete(struct req *q, struct trun *r, char **cause)
{
	struct tcloned *t = q->rq_td;
	int fd;

	launch_end(t, r, 1);
	if (snapshot_drop(t, r, cause) != 0)
		return -1;
	fd = safefs_opendir(t->td_tc_fd, "runs");
	if (fd < 0 || snapshot_remove(fd, r->tr_id, cause) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	launch_runtime_remove(t, r);
	/* Resource cleanup only: the history keeps every earlier event. */
	tcloned_history(t, r->tr_id, "delete", "succeeded", r, r->tr_group, q->rq_peer->pr_uid, NULL);
	tcloned_forget(t, r);
	layers_gc(t);
	return 0;
}

static struct json_object *
m_delete(struct req *q)
{
	struct tcloned *t = q->rq_td;
	const char *id = schema_string(q->rq_params, "run_id");
	int all = schema_bool(q->rq_params, "all", 0);
	struct json_object *o = json_object_new_object(), *gone = json_object_new_array();
	char *cause = NULL;

	if ((id == NULL) == !all) {
		json_object_put(o);
		json_object_put(gone);
		return fail(q, PE_INVALID_PARAMS, "give a run id or all, not both");
	}
	/* Forks first: a source outlives its forks' snapshots that lie on its layers. */
	for (int pass = 0; pass < 2; pass++) {
		for (int i = t->td_nruns - 1; i >= 0; i--) {
			struct trun *r = t->td_runs[i];
			char rid[TCLONED_ID_MAX];
			if (q->rq_peer->pr_uid != 0 && r->tr_uid != q->rq_peer->pr_uid)
				continue;
			if (!all && strcmp(r->tr_id, id) != 0 && strcmp(r->tr_name, id) != 0)
				continue;
			if (all && (pass == 0) != (strcmp(r->tr_role, "fork") == 0))
				continue;
			util_strlcpy(rid, r->tr_id, sizeof(rid));
			if (do_delete(q, r, &cause) != 0) {
				json_object_put(o);
				json_object_put(gone);
				fail(q, PE_STATE, "delete %s: %s", rid, cause ? cause : "?");
				free(cause);
				return NULL;
			}
			json_object_array_add(gone, json_object_new_string(rid));
			if (!all)
				break;
		}
		if (!all && json_object_array_length(gone) > 0)
			break;
	}
	if (!all && json_object_array_length(gone) == 0) {
		json_object_put(o);
		json_object_put(gone);
		return fail(q, PE_NOT_FOUND, "no such run");
	}
	json_object_object_add(o, "deleted", gone);
	if (all) {
		/* The seed's `delete --all` also cleans gensee-tclone-* orphan containers. */
		struct json_object *orph = json_object_new_array();
		podman_reap_orphans(t, q->rq_peer->pr_uid, orph);
		json_object_object_add(o, "orphan_containers", orph);
	}
	return o;
}

static struct json_object *
do_switch(struct req *q, struct trun *f)
{
	struct tcloned *t = q->rq_td;
	struct trun *s;

	if (strcmp(f->tr_role, "fork") != 0)
		return fail(q, PE_INVALID_PARAMS, "%s is not a fork", f->tr_id);
	if (!has_snapshot(f))
		return fail(q, PE_STATE, "%s has no snapshot", f->tr_id);
	s = visible(q, f->tr_source);
	if (s == NULL)
		return fail(q, PE_NOT_FOUND, "the fork's source is gone");
	/* The promoted fork keeps exactly the authority it had: its parent's. */
	const char *a = s->tr_network ? json_object_to_json_string_ext(s->tr_network,
	    JSON_C_TO_STRING_PLAIN) : "null";
	const char *b = f->tr_network ? json_object_to_json_string_ext(f->tr_network,
	    JSON_C_TO_STRING_PLAIN) : "null";
	if (strcmp(a, b) != 0)
		return fail(q, PE_STATE, "authority of %s differs from its source's: not promoted",
		    f->tr_id);
	char *cause = NULL;
	if (operation_clean(t, f, &cause) != 0) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "reason", json_object_new_string(cause));
		tcloned_history(t, f->tr_id, "switch", "failed", f, f->tr_group, q->rq_peer->pr_uid, d);
		fail(q, PE_STATE, "not promoted: %s", cause);
		free(cause);
		return NULL;
	}
	launch_end(t, s, 1);
	util_strlcpy(s->tr_state, "switched", sizeof(s->tr_state));
	json_object_object_add(s->tr_rec, "switched_to", json_object_new_string(f->tr_id));
	save_or_log(t, s);
	util_strlcpy(f->tr_role, "source", sizeof(f->tr_role));
	json_object_object_add(f->tr_rec, "promoted_from", json_object_new_string(s->tr_id));
	save_or_log(t, f);
	tcloned_history(t, f->tr_id, "switch", "succeeded", f, f->tr_group, q->rq_peer->pr_uid, NULL);
	return run_json(t, f);
}

static struct json_object *
m_switch(struct req *q)
{
	struct trun *f = visible(q, schema_string(q->rq_params, "run_id"));

	if (f == NULL)
		return fail(q, PE_NOT_FOUND, "no such run");
	return do_switch(q, f);
}

static struct json_object *
m_keep(struct req *q)
{
	struct tcloned *t = q->rq_td;
	struct trun *r = visible(q, schema_string(q->rq_params, "run_id"));
	const char *to = schema_string(q->rq_params, "to");
	char parent[PATH_MAX], *slash, *cause = NULL;
	const char *leaf;
	struct snapshot_creds user = { 1, q->rq_peer->pr_uid, q->rq_peer->pr_gid };
	struct snapshot_stats ss;
	int pfd, wfd;

	if (r == NULL)
		return fail(q, PE_NOT_FOUND, "no such run");
	if (!has_snapshot(r))
		return fail(q, PE_STATE, "%s has no snapshot", r->tr_id);
	if (to[0] != '/' || strstr(to, "/../") != NULL || strstr(to, "/./") != NULL ||
	    util_strlcpy(parent, to, sizeof(parent)) >= sizeof(parent))
		return fail(q, TE_PATH, "--to: an absolute path without '.' or '..'");
	slash = strrchr(parent, '/');
	leaf = to + (slash - parent) + 1;
	if (leaf[0] == '\0' || strcmp(leaf, "..") == 0 || strcmp(leaf, ".") == 0)
		return fail(q, TE_PATH, "--to: names no new directory");
	if (slash == parent)
		parent[1] = '\0';
	else
		*slash = '\0';
	if (util_path_below(t->td_root, to) || util_path_below(to, t->td_root))
		return fail(q, TE_PATH, "--to: inside gensee's state");
	/* Written as the caller: root never creates a file where the user may not. */
	setfsgid(q->rq_peer->pr_gid);
	setfsuid(q->rq_peer->pr_uid);
	pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int e = errno;
	setfsuid(0);
	setfsgid(0);
	if (pfd < 0)
		return fail(q, TE_PATH, "%s: %s", parent, strerror(e));
	if ((wfd = open_ws(t, r)) < 0) {
		close(pfd);
		return fail(q, PE_STATE, "snapshot unavailable");
	}
	int rv = snapshot_copy(wfd, pfd, leaf, 0, NULL, &user, &ss, &cause);
	close(wfd);
	close(pfd);
	if (rv != 0) {
		tcloned_history(t, r->tr_id, "keep", "failed", r, r->tr_group, q->rq_peer->pr_uid, NULL);
		fail(q, TE_SNAPSHOT, "keep: %s", cause);
		free(cause);
		return NULL;
	}
	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "to", json_object_new_string(to));
	tcloned_history(t, r->tr_id, "keep", "succeeded", r, r->tr_group, q->rq_peer->pr_uid, d);
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "run_id", json_object_new_string(r->tr_id));
	json_object_object_add(o, "to", json_object_new_string(to));
	json_object_object_add(o, "files", json_object_new_int64((int64_t)ss.ss_files));
	json_object_object_add(o, "skipped", json_object_new_int64((int64_t)ss.ss_skipped));
	return o;
}

static struct json_object *
m_choose(struct req *q)
{
	struct tcloned *t = q->rq_td;
	struct trun *r = visible(q, schema_string(q->rq_params, "run_id"));
	const char *action = schema_string(q->rq_params, "action");
	struct json_object *o, *res = NULL, *gone;
	char group[TCLONED_ID_MAX], keep_id[TCLONED_ID_MAX], *cause = NULL;

	if (r == NULL)
		return fail(q, PE_NOT_FOUND, "no such run");
	if (r->tr_group[0] == '\0' || strcmp(r->tr_role, "fork") != 0)
		return fail(q, PE_INVALID_PARAMS, "%s is not a fork of a group", r->tr_id);
	util_strlcpy(group, r->tr_group, sizeof(group));
	util_strlcpy(keep_id, r->tr_id, sizeof(keep_id));
	if (strcmp(action, "merge") == 0) {
		struct trun *s = visible(q, r->tr_source);
		if (s == NULL)
			return fail(q, PE_NOT_FOUND, "the fork's source is gone");
		res = do_merge(q, r, s, "filesystem", NULL, 0, 0);
		if (res == NULL)
			return NULL;
		if (!schema_bool(res, "merged", 0)) {
			/* A conflict: nothing merged, nothing discarded. */
			return res;
		}
	} else if (strcmp(action, "promote") == 0) {
		if ((res = do_switch(q, r)) == NULL)
			return NULL;
	} else if (strcmp(action, "discard_all") != 0) {
		return fail(q, PE_INVALID_PARAMS, "action: merge, promote or discard_all");
	}
	gone = json_object_new_array();
	for (int i = 0; i < t->td_nruns; i++) {
		struct trun *m = t->td_runs[i];
		if (strcmp(m->tr_group, group) != 0 || !has_snapshot(m) ||
		    strcmp(m->tr_role, "fork") != 0)
			continue;
		if (strcmp(action, "discard_all") != 0 && strcmp(m->tr_id, keep_id) == 0)
			continue;
		if (do_discard(q, m, "discard", &cause) != 0) {
			log_warnx("choose: discard %s: %s", m->tr_id, cause);
			free(cause);
			cause = NULL;
			continue;
		}
		json_object_array_add(gone, json_object_new_string(m->tr_id));
	}
	o = json_object_new_object();
	json_object_object_add(o, "run_id", json_object_new_string(keep_id));
	json_object_object_add(o, "action", json_object_new_string(action));
	json_object_object_add(o, "result", res);
	json_object_object_add(o, "discarded", gone);
	tcloned_history(t, group, "choose", "succeeded", NULL, group, q->rq_peer->pr_uid, NULL);
	return o;
}

static struct json_object *
m_attach(struct req *q)
{
	struct trun *r = visible(q, schema_string(q->rq_params, "run_id"));

	if (r == NULL)
		return fail(q, PE_NOT_FOUND, "no such run");
	if (strcmp(r->tr_state, "running") != 0)
		return fail(q, PE_STATE, "%s is not running (%s)", r->tr_id, r->tr_state);
	return run_json(q->rq_td, r);
}

/* -- dispatch -- */

struct method {
	const char *m_name;
	const struct schema_field *m_fields;
	size_t m_nfields;
	struct json_object *(*m_fn)(struct req *);
};

static const struct method methods[] = {
	{ "tclone.status", no_params, 0, m_status },
	{ "tclone.start", start_params, nitems(start_params), m_start },
	{ "tclone.list", no_params, 0, m_list },
	{ "tclone.fork", fork_params, nitems(fork_params), m_fork },
	{ "tclone.diff", run_params, nitems(run_params), m_diff },
	{ "tclone.summary", run_params, nitems(run_params), m_summary },
	{ "tclone.compare", run_params, nitems(run_params), m_compare },
	{ "tclone.merge", merge_params, nitems(merge_params), m_merge },
	{ "tclone.switch", run_params, nitems(run_params), m_switch },
	{ "tclone.keep", keep_params, nitems(keep_params), m_keep },
	{ "tclone.discard", run_params, nitems(run_params), m_discard },
	{ "tclone.delete", delete_params, nitems(delete_params), m_delete },
	{ "tclone.choose", choose_params, nitems(choose_params), m_choose },
	{ "tclone.attach", run_params, nitems(run_params), m_attach },
};

struct json_object *
lifecycle_dispatch(struct tcloned *t, const struct peer *p, const char *method,
    struct json_object *params, const char **code, char **message)
{
	struct req q = { t, p, params, code, message };
	struct schema_error err;

	for (size_t i = 0; i < nitems(methods); i++) {
		if (strcmp(methods[i].m_name, method) != 0)
			continue;
		memset(&err, 0, sizeof(err));
		if (schema_validate(params, methods[i].m_fields, methods[i].m_nfields, &err) != 0)
			return fail(&q, PE_INVALID_PARAMS, "%s", err.se_message);
		return methods[i].m_fn(&q);
	}
	return fail(&q, PE_UNKNOWN_METHOD, "no such method");
}

/* -- recovery after a restart -- */

static void
recover_txns(struct tcloned *t)
{
	int fd = safefs_opendir(t->td_tc_fd, "txn");
	DIR *d;
	struct dirent *de;

	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		char state[32] = "", *cause = NULL, *buf = NULL, tx[TCLONED_ID_MAX];
		size_t len;
		struct trun *s = NULL, *f = NULL;
		int txfd, tfd;

		if (!ids_valid("txn_", de->d_name))
			continue;
		util_strlcpy(tx, de->d_name, sizeof(tx));
		txfd = safefs_opendir(dirfd(d), de->d_name);
		if (txfd < 0)
			continue;
		tfd = openat(txfd, "target.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (tfd >= 0 && util_read_fd(tfd, 4096, &buf, &len) == 0) {
			struct json_object *o = json_tokener_parse(buf);
			if (o != NULL) {
				const char *into = schema_string(o, "into"), *fk = schema_string(o, "fork");
				s = into ? tcloned_find(t, into) : NULL;
				f = fk ? tcloned_find(t, fk) : NULL;
			}
			json_object_put(o);
		}
		free(buf);
		if (tfd >= 0)
			close(tfd);
		int have = snapshot_txn_state(txfd, state, sizeof(state)) == 0;
		if (have && strcmp(state, "applying") == 0) {
			/* Crashed mid-merge: put the source back as it was. */
			int sfd = s != NULL ? open_ws(t, s) : -1;
			struct json_object *dd = json_object_new_object();
			json_object_object_add(dd, "reason", json_object_new_string(
			    "gensee-tcloned stopped during the merge"));
			if (sfd < 0 || snapshot_rollback(sfd, txfd, &cause) != 0) {
				log_warnx("txn %s: rollback failed: %s; journal kept", tx,
				    cause ? cause : "source snapshot unavailable");
				json_object_object_add(dd, "rolled_back", json_object_new_boolean(0));
				tcloned_history(t, tx, "merge", "failed", f, f ? f->tr_group : NULL, 0, dd);
				free(cause);
				if (sfd >= 0)
					close(sfd);
				close(txfd);
				continue;
			}
			close(sfd);
			log_info("txn %s: rolled back after a restart", tx);
			json_object_object_add(dd, "rolled_back", json_object_new_boolean(1));
			tcloned_history(t, tx, "merge", "failed", f, f ? f->tr_group : NULL, 0, dd);
		} else if (have && strcmp(state, "committed") == 0) {
			struct json_object *dd = json_object_new_object();
			json_object_object_add(dd, "recovered", json_object_new_boolean(1));
			tcloned_history(t, tx, "merge", "succeeded", f, f ? f->tr_group : NULL, 0, dd);
		}
		/* Staging only (the source untouched), rolled back or committed: gone. */
		close(txfd);
		if (snapshot_remove(dirfd(d), tx, &cause) != 0) {
			log_warnx("txn %s: %s", tx, cause);
			free(cause);
		}
	}
	closedir(d);
}

void
lifecycle_recover(struct tcloned *t)
{
	for (int i = 0; i < t->td_nruns; i++) {
		struct trun *r = t->td_runs[i];
		char *cause = NULL;

		if (has_snapshot(r) && launch_mount(t, r, &cause) != 0) {
			log_warnx("run %s: %s", r->tr_id, cause);
			free(cause);
			cause = NULL;
		}
		if (strcmp(r->tr_state, "running") == 0 || strcmp(r->tr_state, "starting") == 0) {
			/*
			 * Its init was our child: boundaryd ends the tree when its
			 * launcher is gone. Make sure, and say so.
			 */
			r->tr_pid = r->tr_pid ? r->tr_pid : 1;
			launch_end(t, r, 1);
			r->tr_pid = 0;
			util_strlcpy(r->tr_state, "lost", sizeof(r->tr_state));
			struct json_object *d = json_object_new_object();
			json_object_object_add(d, "reason", json_object_new_string(
			    "gensee-tcloned restarted; the agent ended with its launcher"));
			tcloned_history(t, r->tr_op, "end", "failed", r, r->tr_group, r->tr_uid, d);
			save_or_log(t, r);
		}
	}
	recover_txns(t);
	layers_gc(t);
}
