/*
 * recover.c: startup reconciliation of operations a previous instance left.
 *
 * A previous boundaryd may have died (SIGKILL, crash, reboot of the daemon
 * only) with operations still running. Their cgroups kept containing the
 * trees, so nothing escaped; now each record is checked: a root whose
 * (pid, start time) still matches is adopted and supervised again (its
 * timeout keeps the original deadline); a root that is gone leaves a tree
 * that is killed and a cgroup that is released; an operation caught half
 * created is failed, and one caught before its first record was written
 * (a directory with only the record's lock or temporary file, and its
 * cgroup) is taken back. An adopted operation with fanotify rules stays
 * frozen until sensord confirms them to this instance. A record that cannot be read or validated is not
 * touched: it is reported in recovery health, never as a violation of a
 * live operation.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "boundaryd.h"
#include "log.h"
#include "oprecord.h"
#include "safefs.h"
#include "util.h"

/*
 * One recovery_health entry: what startup found for operation id, and
 * (enforcement, may be NULL) what it did about a network table.
 */
void
recover_note(struct boundaryd *bd, const char *id, const char *reason, const char *detail,
    const char *enforcement)
{
	struct json_object *e = json_object_new_object();
	char ts[40];

	util_now_rfc3339(ts, sizeof(ts));
	json_object_object_add(e, "time", json_object_new_string(ts));
	json_object_object_add(e, "operation_id", json_object_new_string(id));
	json_object_object_add(e, "reason", json_object_new_string(reason));
	json_object_object_add(e, "detail", detail ? json_object_new_string(detail) : NULL);
	if (enforcement != NULL)
		json_object_object_add(e, "enforcement", json_object_new_string(enforcement));
	json_object_array_add(bd->bd_recovery, e);
	log_warnx("recovery: %s: %s%s%s%s%s", id, reason, detail ? ": " : "", detail ? detail : "",
	    enforcement ? ": " : "", enforcement ? enforcement : "");
}

/*
 * One operation a previous instance left half made and this one took back:
 * kept in system.status (recovery_health.cleaned) and the log, not as
 * degraded health, since nothing is left for anyone to examine.
 */
static void
recover_cleaned(struct boundaryd *bd, const char *id, const char *reason, const char *detail)
{
	struct json_object *e = json_object_new_object();
	char ts[40];

	util_now_rfc3339(ts, sizeof(ts));
	json_object_object_add(e, "time", json_object_new_string(ts));
	json_object_object_add(e, "operation_id", json_object_new_string(id));
	json_object_object_add(e, "reason", json_object_new_string(reason));
	json_object_object_add(e, "detail", detail ? json_object_new_string(detail) : NULL);
	json_object_array_add(bd->bd_recovery_cleaned, e);
	log_info("recovery: %s: %s%s%s", id, reason, detail ? ": " : "", detail ? detail : "");
}

/*
 * Does dirfd hold only what operation.create makes before the first record
 * is in place (the record's lock file, a temporary first record, a
 * prepared cell's spare files)? Then the
 * previous instance died between making the directory and writing the
 * record: no operation ever ran from it. Anything else in it is left alone.
 */
static int
recover_half_created(int dirfd)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int only_debris = 1;

	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (strcmp(de->d_name, OPRECORD_FILE ".lock") != 0 &&
		    strcmp(de->d_name, OPRECORD_FILE ".tmp") != 0 &&
		    strncmp(de->d_name, OPRECORD_FILE ".spare", strlen(OPRECORD_FILE ".spare")) != 0)
			only_debris = 0;
	}
	closedir(d);
	return only_debris;
}

/*
 * No network directory for id, or an empty one (a prepared cell's, made
 * ahead): nothing of a network record was ever written.
 */
static int
recover_no_network_record(struct boundaryd *bd, const char *id)
{
	struct dirent *de;
	DIR *d;
	int fd, empty = 1;

	if (bd->bd_netops_fd < 0)
		return 1;
	if ((fd = safefs_opendir(bd->bd_netops_fd, id)) < 0)
		return errno == ENOENT;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return 0;
	}
	while (empty && (de = readdir(d)) != NULL)
		empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
	closedir(d);
	return empty;
}

/*
 * Take back a half-created operation: its cgroup (made right after the
 * directory) is removed, and anything in it killed first. Nothing can
 * legitimately run there: the held child is attached only after the first
 * record is written, so a member is either a tree that escaped its record
 * or someone else's process moved in; both are killed (fail closed) rather
 * than left without supervision. Then the directory goes. Only this state
 * root's own ids are considered: the cgroup base may be shared with other
 * instances, whose cgroups are not ours to judge. Returns 0 when nothing is
 * left.
 */
static int
recover_take_back(struct boundaryd *bd, const char *id, char **cause)
{
	struct cgroup cg;
	char rel[256];
	int killed = 0;

	snprintf(rel, sizeof(rel), "%s/%s", bd->bd_cgroup_base, id);
	if (bd->bd_have_cgroup && cgroup_open(bd->bd_cgroup_mount, rel, &cg, NULL) == 0) {
		if (cgroup_populated(&cg) > 0) {
			killed = 1;
			cgroup_kill(&cg, NULL);
			for (int i = 0; i < 2500 && cgroup_populated(&cg) > 0; i++)
				usleep(2000);
		}
		if (cgroup_remove_tree(&cg, cause) != 0) {
			cgroup_close(&cg);
			return -1;
		}
		cgroup_close(&cg);
	}
	/*
	 * A prepared cell's table comes with its cgroup (spare.c): it guarded
	 * only that cgroup, which is gone now. Usually there is none.
	 */
	if (bd->bd_nft != NULL) {
		char table[NFT_TABLE_NAME_MAX], *why = NULL;
		netop_table_name(bd, id, table);
		if (nft_table_delete(bd->bd_nft, table, &why) == 0)
			log_info("recovery: %s: deleted its table %s", id, table);
		free(why);
	}
	if (bd->bd_netops_fd >= 0)
		unlinkat(bd->bd_netops_fd, id, AT_REMOVEDIR);	/* a cell's, empty */
	if (safefs_remove_dir(bd->bd_ops_fd, id) != 0) {
		util_cause(cause, "remove operations/%s: %s", id, strerror(errno));
		return -1;
	}
	recover_cleaned(bd, id, "half_created", killed ?
	    "directory without a first record; its cgroup held processes, killed" :
	    "directory without a first record");
	return 0;
}

void
recover_operations(struct boundaryd *bd)
{
	int fd = dup(bd->bd_ops_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int adopted = 0, cleaned = 0;

	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		recover_note(bd, "*", "cannot_read_operations", strerror(errno), NULL);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		struct json_object *rec;
		char *cause = NULL;

		if (de->d_name[0] == '.')
			continue;
		if (!ids_valid_operation(de->d_name)) {
			recover_note(bd, de->d_name, "unexpected_entry", NULL, NULL);
			continue;
		}
		int dirfd = safefs_opendir(bd->bd_ops_fd, de->d_name);
		if (dirfd < 0) {
			recover_note(bd, de->d_name, "cannot_open", strerror(errno), NULL);
			continue;
		}
		if (oprecord_read(dirfd, de->d_name, &rec, &cause) != 0) {
			struct stat st;
			/*
			 * A network directory is made only after the first record:
			 * with one, the record was lost, not never written.
			 */
			if (fstatat(dirfd, OPRECORD_FILE, &st, AT_SYMLINK_NOFOLLOW) != 0 &&
			    errno == ENOENT && recover_half_created(dirfd) &&
			    recover_no_network_record(bd, de->d_name)) {
				close(dirfd);
				free(cause);
				cause = NULL;
				if (recover_take_back(bd, de->d_name, &cause) != 0) {
					recover_note(bd, de->d_name, "half_created_cleanup_failed",
					    cause, NULL);
					free(cause);
				}
				cleaned++;
				continue;
			}
			recover_note(bd, de->d_name, "invalid_record", cause, NULL);
			free(cause);
			close(dirfd);
			continue;
		}
		const char *state = schema_string(schema_child(rec, "lifecycle"), "state");
		if (oprecord_state_terminal(state)) {
			json_object_put(rec);
			close(dirfd);
			continue;
		}
		struct operation *op = operation_adopt(bd, de->d_name, dirfd, rec, &cause);
		if (op == NULL) {
			recover_note(bd, de->d_name, "cannot_adopt", cause, NULL);
			free(cause);
			close(dirfd);
		} else if (strcmp(state, OPSTATE_STARTING) == 0) {
			/* Half created: the launcher saw an error or no reply. */
			operation_finish(op, OPSTATE_FAILED, "supervisor_restarted_during_create");
			cleaned++;
		} else if (op->op_phase == OP_FINISHING) {
			cleaned++;
		} else {
			/*
			 * No sensord has confirmed this operation's rules to this
			 * instance yet: until one does, its tree is frozen (or
			 * ended), never recorded as covered on the old word.
			 */
			sensor_coverage_lost(op, "supervisor_restarted");
			adopted++;
		}
		json_object_put(rec);
	}
	closedir(d);
	if (adopted || cleaned)
		log_info("recovery: adopted %d running operation(s), cleaned up %d", adopted,
		    cleaned);
}
