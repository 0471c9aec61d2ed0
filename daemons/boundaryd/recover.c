/*
 * recover.c: startup reconciliation of operations a previous instance left.
 *
 * A previous boundaryd may have died (SIGKILL, crash, reboot of the daemon
 * only) with operations still running. Their cgroups kept containing the
 * trees, so nothing escaped; now each record is checked: a root whose
 * (pid, start time) still matches is adopted and supervised again (its
 * timeout keeps the original deadline); a root that is gone leaves a tree
 * that is killed and a cgroup that is released; an operation caught half
 * created is failed. An adopted operation with fanotify rules stays
 * frozen until sensord confirms them to this instance. A record that cannot be read or validated is not
 * touched: it is reported in recovery health, never as a violation of a
 * live operation.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
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
