/*
 * retain.c: the operations index, operation.list on top of it, and
 * retention (operation.prune, --retain-days, --retain-count).
 *
 * operation.list used to read and validate every record ever written on
 * every call, so its cost grew with the host's history. Now boundaryd
 * keeps a summary of each operation that is not running in memory and in
 * STATE/operations.index.jsonl (one summary per line, a later line for
 * the same id replaces an earlier one, {"operation_id", "pruned": true}
 * removes it). Only the operations this instance supervises right now are
 * read from their records. The file is a cache, never authority: a missing
 * or corrupt one is rebuilt from the records at start, and at start every
 * directory the index does not know (a crash between a record's last write
 * and its index line) is read and added, every entry whose directory is
 * gone dropped.
 *
 * Pruning removes evidence, so only root decides it (operation.prune on
 * boundary.sock, or the host's --retain-* options), and it is checked
 * against the record itself, not the index: an operation that runs, that
 * this instance still supervises, whose newest record is only in memory,
 * or whose record cannot be read or validated (kept for examination) is
 * never pruned.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "boundaryd.h"
#include "frame.h"
#include "log.h"
#include "oprecord.h"
#include "record.h"
#include "safefs.h"
#include "util.h"

#define INDEX_FILE "operations.index.jsonl"
#define INDEX_TMP "operations.index.jsonl.tmp"
#define INDEX_MAX_BYTES (256u * 1024u * 1024u)

static int
index_entry_valid(struct json_object *e)
{
	const char *id = schema_string(e, "operation_id");
	struct json_object *v;

	if (!json_object_is_type(e, json_type_object) || id == NULL || !ids_valid_operation(id))
		return 0;
	if (json_object_object_get_ex(e, "pruned", &v))
		return json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
	return schema_string(e, "state") != NULL && schema_string(e, "created_at") != NULL &&
	    json_object_is_type(schema_child(e, "uid"), json_type_int);
}

/* Load the file into bd_index: 0, or -1 with *why (missing, unreadable, corrupt). */
static int
index_read(struct boundaryd *bd, const char **why)
{
	char *buf, *line, *save = NULL;
	size_t len, n = 0;
	int fd = safefs_openat(bd->bd_index_dirfd, INDEX_FILE, O_RDONLY, 0);

	if (fd < 0) {
		*why = errno == ENOENT ? "missing" : "unreadable";
		return -1;
	}
	if (util_read_fd(fd, INDEX_MAX_BYTES, &buf, &len) != 0) {
		close(fd);
		*why = "unreadable";
		return -1;
	}
	close(fd);
	if (len > 0 && buf[len - 1] != '\n') {
		free(buf);
		*why = "corrupt (torn last line)";
		return -1;
	}
	for (line = strtok_r(buf, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		struct json_object *e = NULL;
		if (frame_parse_payload((const uint8_t *)line, strlen(line), &e) != FRAME_OK ||
		    !index_entry_valid(e)) {
			json_object_put(e);
			free(buf);
			json_object_put(bd->bd_index);
			bd->bd_index = json_object_new_object();
			*why = "corrupt";
			return -1;
		}
		const char *id = schema_string(e, "operation_id");
		if (schema_child(e, "pruned") != NULL)
			json_object_object_del(bd->bd_index, id);
		else
			json_object_object_add(bd->bd_index, id, json_object_get(e));
		json_object_put(e);
		n++;
	}
	free(buf);
	bd->bd_index_lines = n;
	return 0;
}

/* Write the whole index anew (tmp, fsync, rename, fsync the directory). */
static int
index_rewrite(struct boundaryd *bd)
{
	int fd = safefs_openat(bd->bd_index_dirfd, INDEX_TMP, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	size_t n = 0;
	int e = 0;

	if (fd < 0) {
		e = errno;
		goto fail;
	}
	json_object_object_foreach(bd->bd_index, id, s) {
		size_t len;
		const char *t = json_object_to_json_string_length(s,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
		(void)id;
		if (t == NULL || util_write_all(fd, t, len) != 0 || util_write_all(fd, "\n", 1) != 0) {
			e = t == NULL ? ENOMEM : errno;
			break;
		}
		n++;
	}
	if (e == 0 && fsync(fd) != 0)
		e = errno;
	close(fd);
	if (e == 0 && renameat(bd->bd_index_dirfd, INDEX_TMP, bd->bd_index_dirfd, INDEX_FILE) != 0)
		e = errno;
	if (e == 0 && fsync(bd->bd_index_dirfd) != 0)
		e = errno;
	if (e != 0)
		goto fail;
	bd->bd_index_lines = n;
	return 0;
fail:
	unlinkat(bd->bd_index_dirfd, INDEX_TMP, 0);
	record_disk_failed(e);
	log_warnx("cannot rewrite %s: %s (the index in memory stays right)", INDEX_FILE,
	    strerror(e));
	return -1;
}

/* One line: what the index now says about an operation (queued if the disk refuses). */
static void
index_append(struct boundaryd *bd, struct json_object *line)
{
	char *cause = NULL;

	if (record_append_jsonl(bd->bd_index_dirfd, INDEX_FILE, line, &cause) != 0) {
		log_warnx("%s: %s", INDEX_FILE, cause);
		free(cause);
		return;
	}
	bd->bd_index_lines++;
	/* Superseded lines pile up: compact once they outnumber the live ones. */
	if (bd->bd_index_lines > 2 * (size_t)json_object_object_length(bd->bd_index) + 1024)
		index_rewrite(bd);
}

/* Read id's record and index its summary; -1 if it cannot be read or validated. */
static int
index_put_read(struct boundaryd *bd, int dirfd, const char *id, int append)
{
	struct json_object *rec, *s;
	char *cause = NULL;

	if (oprecord_read(dirfd, id, &rec, &cause) != 0) {
		log_debug("index: %s: %s", id, cause);
		free(cause);
		return -1;
	}
	s = operation_summary(rec);
	json_object_put(rec);
	json_object_object_add(bd->bd_index, id, json_object_get(s));
	if (append)
		index_append(bd, s);
	json_object_put(s);
	return 0;
}

void
index_put(struct boundaryd *bd, int dirfd, const char *id)
{
	if (bd->bd_index != NULL)
		index_put_read(bd, dirfd, id, 1);
}

/* Every operation directory: (re)index what the index lacks, drop what is gone. */
static void
index_reconcile(struct boundaryd *bd, int rebuild)
{
	int fd = dup(bd->bd_ops_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	struct json_object *seen = json_object_new_object();
	size_t added = 0, dropped = 0;

	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		json_object_put(seen);
		log_warn("index: cannot read operations");
		return;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		if (!ids_valid_operation(de->d_name))
			continue;
		json_object_object_add(seen, de->d_name, NULL);
		struct json_object *e = schema_child(bd->bd_index, de->d_name);
		/*
		 * Known and ended: nothing to read. Unknown, or known as not yet
		 * ended and not supervised here: the record says what it is now.
		 */
		if (!rebuild && e != NULL && (oprecord_state_terminal(schema_string(e, "state")) ||
		    operation_find(bd, de->d_name) != NULL))
			continue;
		int dirfd = safefs_opendir(bd->bd_ops_fd, de->d_name);
		if (dirfd < 0)
			continue;
		if (index_put_read(bd, dirfd, de->d_name, !rebuild) == 0)
			added++;
		close(dirfd);
	}
	closedir(d);
	/* Entries whose directory is gone (removed by hand, or a prune the file missed). */
	struct json_object *gone = json_object_new_array();
	json_object_object_foreach(bd->bd_index, id, v) {
		(void)v;
		if (!json_object_object_get_ex(seen, id, NULL))
			json_object_array_add(gone, json_object_new_string(id));
	}
	for (size_t i = 0; i < json_object_array_length(gone); i++) {
		json_object_object_del(bd->bd_index,
		    json_object_get_string(json_object_array_get_idx(gone, i)));
		dropped++;
	}
	json_object_put(gone);
	json_object_put(seen);
	if (rebuild || dropped > 0)
		index_rewrite(bd);
	if (added || dropped)
		log_info("index: %zu operation(s) read from their records, %zu dropped", added,
		    dropped);
}

void
index_init(struct boundaryd *bd)
{
	const char *why = NULL;

	bd->bd_index = json_object_new_object();
	bd->bd_index_dirfd = safefs_openat(bd->bd_state_fd, ".", O_RDONLY | O_DIRECTORY, 0);
	if (bd->bd_index_dirfd < 0)
		fatal("open %s", bd->bd_state_root);
	if (index_read(bd, &why) != 0) {
		log_info("index %s is %s: rebuilding it from the records", INDEX_FILE, why);
		bd->bd_index_rebuilt++;
		index_reconcile(bd, 1);
	} else {
		index_reconcile(bd, 0);
	}
}

void
index_free(struct boundaryd *bd)
{
	json_object_put(bd->bd_index);
	bd->bd_index = NULL;
	if (bd->bd_index_dirfd >= 0)
		close(bd->bd_index_dirfd);
	bd->bd_index_dirfd = -1;
}

static int
list_cmp(const void *a, const void *b)
{
	struct json_object *const *x = a, *const *y = b;
	const char *sx = schema_string(*x, "created_at"), *sy = schema_string(*y, "created_at");
	return strcmp(sx ? sx : "", sy ? sy : "");
}

/*
 * operation.list: ended operations from the index, the ones supervised
 * here from their records (they change while they run). The caller sees
 * its own uid's (root: all); from inside an operation, only that one.
 */
void
operation_list(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	const char *state = schema_string(params, "state");
	int64_t limit = schema_int(params, "limit", 1000);
	struct json_object *arr = json_object_new_array();
	struct operation *op;

	json_object_object_foreach(bd->bd_index, id, s) {
		if (p->pr_in_op && strcmp(id, p->pr_op_id) != 0)
			continue;
		if (p->pr_uid != 0 && schema_int(s, "uid", -1) != (int64_t)p->pr_uid)
			continue;
		if (operation_find(bd, id) != NULL)
			continue; /* below, from its record */
		if (state == NULL || strcmp(schema_string(s, "state"), state) == 0)
			json_object_array_add(arr, json_object_get(s));
	}
	TAILQ_FOREACH(op, &bd->bd_ops, op_entry) {
		struct json_object *rec, *sum;
		char *cause = NULL;

		if (!operation_visible(op, p))
			continue;
		if (oprecord_read(op->op_dirfd, op->op_id, &rec, &cause) != 0) {
			free(cause);
			continue;
		}
		sum = operation_summary(rec);
		json_object_put(rec);
		if (state == NULL || strcmp(schema_string(sum, "state"), state) == 0)
			json_object_array_add(arr, sum);
		else
			json_object_put(sum);
	}
	json_object_array_sort(arr, list_cmp);
	while ((int64_t)json_object_array_length(arr) > limit)
		json_object_array_del_idx(arr, 0, 1); /* keep the newest */
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "operations", arr);
}

struct retain_opts {
	int ro_older_set;
	int64_t ro_older_ms;
	int ro_keep_set;
	int64_t ro_keep;
	int ro_either;	/* prune when either limit is broken (the host's options) */
	int ro_dry_run;
};

static int
candidate_cmp(const void *a, const void *b)
{
	/* Newest first. */
	return -list_cmp(a, b);
}

static void
skipped(struct json_object *arr, const char *id, const char *reason)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "operation_id", json_object_new_string(id));
	json_object_object_add(o, "reason", json_object_new_string(reason));
	json_object_array_add(arr, o);
}

/*
 * Decide and (unless a dry run) remove. Candidates are the ended
 * operations of the index, newest first; each one chosen is checked
 * against its own record before anything is removed.
 */
static struct json_object *
retain_prune(struct boundaryd *bd, const struct retain_opts *o)
{
	struct json_object *cands = json_object_new_array();
	struct json_object *pruned = json_object_new_array();
	struct json_object *skip = json_object_new_array();
	struct json_object *res = json_object_new_object();
	int64_t now = util_now_ms();
	size_t kept = 0;

	json_object_object_foreach(bd->bd_index, id, s) {
		if (!oprecord_state_terminal(schema_string(s, "state")) ||
		    operation_find(bd, id) != NULL)
			continue; /* running, or still being cleaned up here: never */
		json_object_array_add(cands, json_object_get(s));
	}
	json_object_array_sort(cands, candidate_cmp);
	for (size_t i = 0; i < json_object_array_length(cands); i++) {
		struct json_object *c = json_object_array_get_idx(cands, i);
		char oid[OP_ID_MAX];
		int64_t ref;
		util_strlcpy(oid, schema_string(c, "operation_id"), sizeof(oid));
		const char *when = schema_string(c, "ended_at");
		if (when == NULL)
			when = schema_string(c, "created_at");
		int by_count = o->ro_keep_set && (int64_t)i >= o->ro_keep;
		int by_age = o->ro_older_set && util_parse_rfc3339(when, &ref) == 0 &&
		    now - ref >= o->ro_older_ms;
		int go = o->ro_either ? (by_count || by_age) :
		    ((!o->ro_keep_set || by_count) && (!o->ro_older_set || by_age));
		if (!go) {
			kept++;
			continue;
		}
		/* The record decides, not the index. */
		int dirfd = safefs_opendir(bd->bd_ops_fd, oid);
		struct json_object *rec = NULL;
		char *cause = NULL;
		if (dirfd < 0) {
			json_object_object_del(bd->bd_index, oid);
			continue;
		}
		if (record_is_pending(dirfd, OPRECORD_FILE)) {
			skipped(skip, oid, "writes_pending");
			close(dirfd);
			continue;
		}
		if (oprecord_read(dirfd, oid, &rec, &cause) != 0) {
			skipped(skip, oid, "invalid_record");
			free(cause);
			close(dirfd);
			continue;
		}
		const char *st = schema_string(schema_child(rec, "lifecycle"), "state");
		int ended = oprecord_state_terminal(st);
		json_object_put(rec);
		if (!ended) {
			skipped(skip, oid, "not_ended");
			index_put_read(bd, dirfd, oid, 1);
			close(dirfd);
			continue;
		}
		if (o->ro_dry_run) {
			close(dirfd);
			json_object_array_add(pruned, json_object_new_string(oid));
			continue;
		}
		record_forget(dirfd, NULL);
		close(dirfd);
		/* The network directory first: a record never outlives less than its evidence. */
		if (bd->bd_netops_fd >= 0) {
			int nd = safefs_opendir(bd->bd_netops_fd, oid);
			if (nd >= 0) {
				record_forget(nd, NULL);
				close(nd);
				if (safefs_remove_dir(bd->bd_netops_fd, oid) != 0) {
					log_warn("prune %s: network-operations/%s", oid, oid);
					skipped(skip, oid, "remove_failed");
					continue;
				}
			}
		}
		if (safefs_remove_dir(bd->bd_ops_fd, oid) != 0) {
			log_warn("prune %s: operations/%s", oid, oid);
			skipped(skip, oid, "remove_failed");
			continue;
		}
		json_object_object_del(bd->bd_index, oid);
		struct json_object *line = json_object_new_object();
		json_object_object_add(line, "operation_id", json_object_new_string(oid));
		json_object_object_add(line, "pruned", json_object_new_boolean(1));
		index_append(bd, line);
		json_object_put(line);
		json_object_array_add(pruned, json_object_new_string(oid));
	}
	json_object_put(cands);
	if (!o->ro_dry_run && json_object_array_length(pruned) > 0) {
		index_rewrite(bd);
		log_info("pruned %zu ended operation(s), kept %zu", json_object_array_length(pruned),
		    kept);
	}
	json_object_object_add(res, "dry_run", json_object_new_boolean(o->ro_dry_run));
	json_object_object_add(res, "pruned", pruned);
	json_object_object_add(res, "kept", json_object_new_int64((int64_t)kept));
	json_object_object_add(res, "skipped", skip);
	return res;
}

/*
 * operation.prune (root, boundary.sock): older_than_seconds and/or keep.
 * With both, an operation goes when it is older than that and not among
 * the keep newest ended ones.
 */
void
operation_prune(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	struct retain_opts o = { 0 };

	(void)p;
	o.ro_older_set = schema_child(params, "older_than_seconds") != NULL;
	o.ro_older_ms = schema_int(params, "older_than_seconds", 0) * 1000;
	o.ro_keep_set = schema_child(params, "keep") != NULL;
	o.ro_keep = schema_int(params, "keep", 0);
	o.ro_dry_run = schema_bool(params, "dry_run", 0);
	if (!o.ro_older_set && !o.ro_keep_set) {
		reply_error(r, PE_INVALID_PARAMS, "older_than_seconds or keep is required");
		return;
	}
	r->or_result = retain_prune(bd, &o);
}

/* The host's retention (--retain-days, --retain-count): either limit prunes. */
void
retain_apply(struct boundaryd *bd)
{
	struct retain_opts o = { 0 };

	if (bd->bd_retain_days <= 0 && bd->bd_retain_count <= 0)
		return;
	o.ro_either = 1;
	o.ro_older_set = bd->bd_retain_days > 0;
	o.ro_older_ms = bd->bd_retain_days * 24 * 3600 * 1000;
	o.ro_keep_set = bd->bd_retain_count > 0;
	o.ro_keep = bd->bd_retain_count;
	json_object_put(retain_prune(bd, &o));
}

static void
retain_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	retain_apply(arg);
}

int
retain_arm(struct boundaryd *bd)
{
	struct timeval tv = { RETAIN_INTERVAL_SEC, 0 };

	if (bd->bd_retain_days <= 0 && bd->bd_retain_count <= 0)
		return 0;
	bd->bd_retain_ev = event_new(bd->bd_base, -1, EV_PERSIST, retain_cb, bd);
	if (bd->bd_retain_ev == NULL || event_add(bd->bd_retain_ev, &tv) != 0)
		return -1;
	return 0;
}
