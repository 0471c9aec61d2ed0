/*
 * audit.c: the Landlock sensor. The kernel reports each Landlock denial to
 * the audit subsystem (lib/auditlog.h); the ones of an operation's
 * processes become file decisions of that operation ("event": "landlock"),
 * so the agent's EACCES is in its timeline and in the run's summary with
 * what would allow it. It reports, it never decides: Landlock has refused
 * already.
 *
 * Audit must be enabled for the kernel to report. sensord turns it on only
 * when told (--enable-audit): it is the host's setting. When it is off the
 * sensor is not registered, so every operation's record says Landlock
 * denials are not covered instead of implying there were none. Audit turned
 * off later is noticed at the next heartbeat and reported as a loss.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "auditlog.h"
#include "log.h"
#include "sensord.h"
#include "util.h"

/* A group with no EOE (no audit context for the task) is complete after this. */
#define AUDIT_GROUP_AGE_MS 200
/* One datagram: a record is at most MAX_AUDIT_MESSAGE_LENGTH (8970) bytes. */
#define AUDIT_RECV_BUF 16384

static struct auditlog *aud;
static int aud_fd = -1;
static struct event *aud_ev;
static int aud_lost;

static void
audit_denial(const struct auditlog_denial *d, void *arg)
{
	struct sop *o = d->ad_pid > 0 ? sensord_op_of_recent_pid(d->ad_pid) : NULL;
	struct json_object *x;
	char ts[40];

	(void)arg;
	if (o == NULL)
		return;	/* another program's Landlock domain, or a task we cannot place */
	if (json_object_array_length(o->so_files) >= SENSORD_BACKLOG_MAX) {
		o->so_files_dropped++;
		return;
	}
	x = json_object_new_object();
	util_now_rfc3339(ts, sizeof(ts));
	json_object_object_add(x, "time", json_object_new_string(ts));
	json_object_object_add(x, "pid", json_object_new_int64(d->ad_pid));
	if (d->ad_exe[0] != '\0')
		json_object_object_add(x, "executable", json_object_new_string(d->ad_exe));
	json_object_object_add(x, "path", json_object_new_string(d->ad_object[0] != '\0' ?
	    d->ad_object : "(none)"));
	json_object_object_add(x, "event", json_object_new_string("landlock"));
	json_object_object_add(x, "rule", json_object_new_string(d->ad_blockers));
	json_object_object_add(x, "decision", json_object_new_string("deny"));
	json_object_object_add(x, "reason", json_object_new_string("landlock_denied"));
	json_object_array_add(o->so_files, x);
}

void
sensord_audit_drain(void)
{
	uint8_t buf[AUDIT_RECV_BUF];
	ssize_t n;

	if (aud_fd < 0)
		return;
	for (int i = 0; i < 4096; i++) {
		if ((n = recv(aud_fd, buf, sizeof(buf), MSG_DONTWAIT)) < 0) {
			if (errno == ENOBUFS) {
				/* Records were dropped: some denials go unreported. */
				aud_lost++;
				continue;
			}
			break;
		}
		if (auditlog_parse(aud, buf, (size_t)n, util_monotonic_ms(), audit_denial,
		    NULL) != 0)
			log_warnx("landlock: an audit datagram could not be read");
	}
	if (aud_lost > 0) {
		sensord_loss("landlock_audit", aud_lost, "audit receive queue overrun");
		aud_lost = 0;
	}
}

static void
audit_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	sensord_audit_drain();
}

/* Groups the kernel will not complete; every group when an operation goes. */
void
sensord_audit_expire(int all)
{
	if (aud_fd >= 0)
		auditlog_expire(aud, util_monotonic_ms(), all ? -1 : AUDIT_GROUP_AGE_MS,
		    audit_denial, NULL);
}

/* Audit switched off under us: Landlock denials go unreported from now on. */
void
sensord_audit_check(void)
{
	int enabled = 0;
	char *cause = NULL;

	if (aud_fd < 0)
		return;
	if (auditlog_status(&enabled, &cause) != 0) {
		log_warnx("landlock: audit status: %s", cause);
		free(cause);
		return;
	}
	if (!enabled) {
		log_warnx("landlock: kernel audit was turned off: denials are no longer reported");
		sensord_loss("landlock_audit", 1, "kernel audit was turned off");
		event_free(aud_ev);
		aud_ev = NULL;
		close(aud_fd);
		aud_fd = -1;
	}
}

int
sensord_audit_init(int enable, char **cause)
{
	int enabled = 0;

	if (auditlog_status(&enabled, cause) != 0)
		return -1;
	if (!enabled && enable) {
		if (auditlog_enable(cause) != 0 || auditlog_status(&enabled, cause) != 0)
			return -1;
		log_info("landlock: kernel audit turned on (--enable-audit)");
	}
	if (!enabled) {
		util_cause(cause, "kernel audit is off (auditctl -e 1, or " SENSORD_NAME
		    " --enable-audit)");
		return -1;
	}
	if ((aud = calloc(1, sizeof(*aud))) == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	auditlog_init(aud);
	if (auditlog_open(&aud_fd, cause) != 0) {
		free(aud);
		aud = NULL;
		return -1;
	}
	return 0;
}

int
sensord_audit_open(void)
{
	return aud_fd >= 0;
}

int
sensord_audit_watch(char **cause)
{
	if (aud_fd < 0)
		return 0;
	aud_ev = event_new(sensord_base(), aud_fd, EV_READ | EV_PERSIST, audit_cb, NULL);
	if (aud_ev == NULL || event_add(aud_ev, NULL) != 0) {
		util_cause(cause, "cannot watch the audit socket");
		return -1;
	}
	return 0;
}

void
sensord_audit_shutdown(void)
{
	if (aud_ev != NULL)
		event_free(aud_ev);
	if (aud_fd >= 0)
		close(aud_fd);
	free(aud);
	aud_ev = NULL;
	aud_fd = -1;
	aud = NULL;
}
