/*
 * fanhold.c: boundaryd keeps gensee-sensord's fanotify group alive.
 *
 * Threat: the kernel removes a fanotify group's marks, and allows every
 * open waiting on it, when the group's last fd closes. With sensord the
 * only holder, a SIGKILLed sensord let its operations' protected opens
 * through in the milliseconds before boundaryd froze their trees. So
 * sensord hands boundaryd a duplicate of its permission group over
 * sensorfd.sock (root's alone, SOCK_SEQPACKET, SCM_RIGHTS); boundaryd hands
 * it to the next sensord, and in between the group keeps its marks and its
 * openers wait: nothing is allowed unseen.
 *
 * While no live sensord holds the group, a thread here answers it (the
 * stand-in): an opener inside one of this instance's running operations
 * is denied (its tree is being frozen, and nothing here has its rules);
 * everyone else is allowed, as sensord allows what is not ours, so a host
 * whose sensord stopped does not hang on its opens. The thread opens
 * nothing but /proc files and never waits for the main thread, whose own
 * opens may be the events it answers; the main thread never opens a file
 * while it holds fh_lock.
 *
 * Events a dead sensord had read but not answered stay in the group under
 * the fd numbers they had in its table, and the kernel matches an answer
 * by that number alone. Once the holder's pidfd says it exited, and before
 * anything reads the group again, each number below the dead sensord's
 * descriptor limit is answered with a deny (the sweep).
 *
 * One reader at a time, or one reader's answer could hit another's event
 * by its number: the group goes only to a sensord after the previous
 * holder exited; a live holder's successor is refused (conflict).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "boundaryd.h"
#include "cgroup.h"
#include "fdpass.h"
#include "log.h"
#include "peer.h"
#include "proc.h"
#include "sensorfd.h"
#include "util.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

#define FANHOLD_SOCK SENSORFD_SOCK
#define FANHOLD_RING 64

/* One open the stand-in refused, for the operation's files.jsonl. */
struct fh_denial {
	pid_t fd_pid;
	int fd_exec;
	char fd_op[OP_ID_MAX];
	char fd_path[512];
	char fd_time[40];
};

static struct {
	pthread_mutex_t fh_lock;
	pthread_t fh_thread;
	int fh_started;
	int fh_wake;		/* eventfd: the state below changed */
	int fh_notify;		/* eventfd: denials for the main thread */
	struct event *fh_notify_ev;
	int fh_listen;
	struct event *fh_listen_ev;
	struct boundaryd *fh_bd;
	/* Under fh_lock: */
	int fh_group;		/* the held permission group, -1 */
	int fh_holder;		/* the holding sensord's pidfd, -1 */
	pid_t fh_holder_pid;
	int fh_nofile;		/* its descriptor limit: the sweep's bound */
	int fh_standing;	/* the stand-in answers the group */
	int fh_quit;
	uint64_t fh_answered, fh_denied, fh_swept, fh_handoffs;
	struct fh_denial fh_ring[FANHOLD_RING];
	size_t fh_nring;
	uint64_t fh_ring_lost;
} fh = { .fh_lock = PTHREAD_MUTEX_INITIALIZER, .fh_wake = -1, .fh_notify = -1,
	.fh_listen = -1, .fh_group = -1, .fh_holder = -1 };

/*
 * Which operation of ours holds pid: the op_ID component below our cgroup
 * base, if STATE/operations/ID exists (fstatat: no open, so no event).
 * 1 ours (id filled), 0 not ours, -1 unknown (its cgroup is unreadable).
 */
static int
fanhold_ours(pid_t pid, char *id, size_t len)
{
	const char *base = fh.fh_bd->bd_cgroup_base;
	size_t bl = strlen(base), n;
	char cg[256];
	struct stat st;
	const char *p;

	if (cgroup_of_pid(pid, cg, sizeof(cg)) != 0)
		return -1;
	if (strncmp(cg, base, bl) != 0 || strncmp(cg + bl, "/op_", 4) != 0)
		return 0;
	p = cg + bl + 1;
	n = strcspn(p, "/");
	if (n >= len)
		return 0;
	memcpy(id, p, n);
	id[n] = '\0';
	return fstatat(fh.fh_bd->bd_ops_fd, id, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISDIR(st.st_mode);
}

/* Answer every event number a dead holder may have left unanswered: deny. Under fh_lock. */
static void
fanhold_sweep(void)
{
	struct fanotify_response r = { .response = FAN_DENY };

	for (int i = 0; i < fh.fh_nofile; i++) {
		r.fd = i;
		if (write(fh.fh_group, &r, sizeof(r)) == (ssize_t)sizeof(r))
			fh.fh_swept++;
	}
}

/* The holder exited: sweep, then stand in. Under fh_lock. */
static void
fanhold_holder_gone(void)
{
	close(fh.fh_holder);
	fh.fh_holder = -1;
	fh.fh_holder_pid = 0;
	if (fh.fh_group < 0)
		return;
	fanhold_sweep();
	fh.fh_standing = 1;
}

/* Has the process behind pidfd exited? */
static int
fanhold_exited(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	return poll(&p, 1, 0) == 1;
}

/* Answer one permission event as the stand-in. Under fh_lock. */
static void
fanhold_answer(const struct fanotify_event_metadata *m)
{
	struct fanotify_response r = { .fd = m->fd, .response = FAN_ALLOW };
	char id[OP_ID_MAX];
	int ours = fanhold_ours(m->pid, id, sizeof(id));

	/* Ours, or not known not to be: nothing here has its rules. */
	if (ours != 0)
		r.response = FAN_DENY;
	if (write(fh.fh_group, &r, sizeof(r)) == (ssize_t)sizeof(r))
		fh.fh_answered++;
	if (r.response == FAN_DENY)
		fh.fh_denied++;
	if (ours == 1 && fh.fh_nring < FANHOLD_RING) {
		struct fh_denial *d = &fh.fh_ring[fh.fh_nring++];
		char link[64];
		ssize_t n;

		memset(d, 0, sizeof(*d));
		d->fd_pid = m->pid;
		d->fd_exec = (m->mask & FAN_OPEN_EXEC_PERM) != 0;
		util_strlcpy(d->fd_op, id, sizeof(d->fd_op));
		snprintf(link, sizeof(link), "/proc/self/fd/%d", m->fd);
		n = readlink(link, d->fd_path, sizeof(d->fd_path) - 1);
		if (n < 0)
			util_strlcpy(d->fd_path, "(unresolved)", sizeof(d->fd_path));
		util_now_rfc3339(d->fd_time, sizeof(d->fd_time));
	} else if (ours == 1) {
		fh.fh_ring_lost++;
	}
}

/* Read and answer what the group has queued. Under fh_lock, while standing in. */
static void
fanhold_drain(void)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
	size_t before = fh.fh_nring;

	for (int round = 0; round < 16; round++) {
		ssize_t n = read(fh.fh_group, buf, sizeof(buf));
		const struct fanotify_event_metadata *m = (const void *)buf;

		if (n <= 0)
			break;
		for (; FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
			if (m->vers != FANOTIFY_METADATA_VERSION)
				continue;
			if (m->fd >= 0 && (m->mask & (FAN_OPEN_PERM | FAN_OPEN_EXEC_PERM |
			    FAN_ACCESS_PERM)))
				fanhold_answer(m);
			if (m->fd >= 0)
				close(m->fd);
		}
	}
	if (fh.fh_nring != before) {
		uint64_t one = 1;
		if (write(fh.fh_notify, &one, sizeof(one)) != sizeof(one))
			log_debug("fanotify stand-in: notify: %s", strerror(errno));
	}
}

static void *
fanhold_thread(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p[2] = { { .fd = fh.fh_wake, .events = POLLIN }, { .fd = -1 } };

		pthread_mutex_lock(&fh.fh_lock);
		if (fh.fh_quit) {
			pthread_mutex_unlock(&fh.fh_lock);
			return NULL;
		}
		if (fh.fh_standing)
			p[1].fd = fh.fh_group;
		else if (fh.fh_holder >= 0)
			p[1].fd = fh.fh_holder;
		p[1].events = POLLIN;
		pthread_mutex_unlock(&fh.fh_lock);

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return NULL;
		if (p[0].revents & POLLIN) {
			uint64_t v;
			if (read(fh.fh_wake, &v, sizeof(v)) < 0)
				(void)0; /* a spurious wake changes nothing */
		}
		if (p[1].fd < 0 || !(p[1].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		pthread_mutex_lock(&fh.fh_lock);
		/* The state may have changed since the poll: act on what holds now. */
		if (fh.fh_standing && p[1].fd == fh.fh_group)
			fanhold_drain();
		else if (!fh.fh_standing && p[1].fd == fh.fh_holder && fanhold_exited(fh.fh_holder))
			fanhold_holder_gone();
		pthread_mutex_unlock(&fh.fh_lock);
	}
}

static void
fanhold_wake(void)
{
	uint64_t one = 1;
	if (write(fh.fh_wake, &one, sizeof(one)) != sizeof(one))
		log_warnx("fanotify stand-in: wake: %s", strerror(errno));
}

/* Denials of the stand-in: one files.jsonl line each. */
static void
fanhold_notify_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fh_denial ring[FANHOLD_RING];
	size_t n;
	uint64_t v, lost;

	(void)what;
	(void)arg;
	if (read(fd, &v, sizeof(v)) < 0)
		return;
	pthread_mutex_lock(&fh.fh_lock);
	n = fh.fh_nring;
	memcpy(ring, fh.fh_ring, n * sizeof(ring[0]));
	fh.fh_nring = 0;
	lost = fh.fh_ring_lost;
	fh.fh_ring_lost = 0;
	pthread_mutex_unlock(&fh.fh_lock);
	for (size_t i = 0; i < n; i++) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "time", json_object_new_string(ring[i].fd_time));
		json_object_object_add(d, "pid", json_object_new_int64(ring[i].fd_pid));
		json_object_object_add(d, "path", json_object_new_string(ring[i].fd_path));
		json_object_object_add(d, "event", json_object_new_string(
		    ring[i].fd_exec ? "open_exec" : "open"));
		json_object_object_add(d, "decision", json_object_new_string("deny"));
		json_object_object_add(d, "reason", json_object_new_string("sensor_absent"));
		sensor_file_record(fh.fh_bd, ring[i].fd_op, d);
		json_object_put(d);
	}
	if (lost > 0)
		log_warnx("fanotify stand-in: %llu denial(s) not recorded (more than %d at once)",
		    (unsigned long long)lost, FANHOLD_RING);
}

/* The cgroups of our running operations, for a sensord that adopts the group. */
static struct json_object *
fanhold_cgroups(void)
{
	struct json_object *a = json_object_new_array();
	struct operation *op;

	TAILQ_FOREACH(op, &fh.fh_bd->bd_ops, op_entry)
		if (op->op_phase == OP_RUNNING && op->op_cg_valid)
			json_object_array_add(a, json_object_new_string(op->op_cg.cg_rel));
	return a;
}

static void
fanhold_reply(int sock, struct json_object *msg, int fd)
{
	const char *s = json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN);
	if (fdpass_send(sock, s, strlen(s), fd) != 0)
		log_warn("%s: reply", FANHOLD_SOCK);
	json_object_put(msg);
}

static struct json_object *
fanhold_error(const char *code, const char *message)
{
	struct json_object *m = json_object_new_object(), *e = json_object_new_object();
	json_object_object_add(e, "code", json_object_new_string(code));
	json_object_object_add(e, "message", json_object_new_string(message));
	json_object_object_add(m, "error", e);
	return m;
}

/* Is fd a fanotify group? */
static int
fanhold_is_group(int fd)
{
	char link[64], target[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = '\0';
	return strcmp(target, "anon_inode:[fanotify]") == 0;
}

/* The peer's pidfd: SO_PEERPIDFD, or pidfd_open checked against the start time. */
static int
fanhold_peer_pidfd(int sock, const struct peer *p)
{
	int pidfd = -1;
	socklen_t len = sizeof(pidfd);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0)
		return pidfd;
	pidfd = proc_pidfd_open(p->pr_pid);
	if (pidfd >= 0 && peer_alive(p) != 0) {
		close(pidfd);
		return -1;
	}
	return pidfd;
}

/*
 * One request: {"method": "sensor.fanotify_group", "params": {"nofile": N}}
 * with sensord's own group attached. The reply says whether sensord keeps
 * its group ({"adopt": false}: boundaryd now holds a duplicate of it) or
 * takes the held one instead ({"adopt": true, "cgroups": [...]}, the group
 * attached): the cgroups of our running operations, whose opens it must
 * deny until it has their rules again.
 */
static void
fanhold_request(int sock)
{
	char buf[SENSORFD_MSG_MAX + 1], *cause = NULL;
	struct json_object *res;
	struct peer p;
	int fd = -1, pidfd = -1, give = -1;
	int64_t nofile;
	ssize_t n;

	if (peer_identify(sock, &p, &cause) != 0) {
		log_warnx("%s: %s", FANHOLD_SOCK, cause);
		free(cause);
		return;
	}
	/* The mode is not the only check: the group is root's to hold. */
	if (p.pr_uid != 0) {
		log_warnx("%s: uid %u refused", FANHOLD_SOCK, (unsigned)p.pr_uid);
		return;
	}
	n = fdpass_recv(sock, buf, sizeof(buf), &fd);
	if (n <= 0) {
		log_warnx("%s: no request (%s)", FANHOLD_SOCK, n < 0 ? strerror(errno) : "EOF");
		return;
	}
	if (sensorfd_parse_request(buf, (size_t)n, &nofile, &cause) != 0) {
		fanhold_reply(sock, fanhold_error("invalid_params", cause), -1);
		free(cause);
		goto out;
	}
	if (fd < 0 || !fanhold_is_group(fd)) {
		fanhold_reply(sock, fanhold_error("invalid_params",
		    "no fanotify group attached"), -1);
		goto out;
	}
	if ((pidfd = fanhold_peer_pidfd(sock, &p)) < 0) {
		fanhold_reply(sock, fanhold_error("internal", "no pidfd for the caller"), -1);
		goto out;
	}

	pthread_mutex_lock(&fh.fh_lock);
	if (fh.fh_holder >= 0 && fanhold_exited(fh.fh_holder))
		fanhold_holder_gone();
	if (fh.fh_holder >= 0 && fh.fh_holder_pid != p.pr_pid) {
		pthread_mutex_unlock(&fh.fh_lock);
		fanhold_reply(sock, fanhold_error("conflict",
		    "a live sensord holds the fanotify group"), -1);
		goto out;
	}
	if (fh.fh_group >= 0 && fh.fh_holder < 0) {
		/* The held group goes on; sensord's own, unmarked, is dropped. */
		fh.fh_standing = 0;
		give = fh.fh_group;
		fh.fh_handoffs++;
	} else {
		/* A first sensord, or the holder again (after our restart): hold its group. */
		if (fh.fh_group >= 0)
			close(fh.fh_group);
		fh.fh_group = fd;
		fd = -1;
	}
	if (fh.fh_holder >= 0)
		close(fh.fh_holder);
	fh.fh_holder = pidfd;
	fh.fh_holder_pid = p.pr_pid;
	fh.fh_nofile = (int)nofile;
	pidfd = -1;
	pthread_mutex_unlock(&fh.fh_lock);
	fanhold_wake();

	res = json_object_new_object();
	json_object_object_add(res, "adopt", json_object_new_boolean(give >= 0));
	if (give >= 0)
		json_object_object_add(res, "cgroups", fanhold_cgroups());
	struct json_object *m = json_object_new_object();
	json_object_object_add(m, "result", res);
	fanhold_reply(sock, m, give);
	log_info("fanotify group: %s sensord %d", give >= 0 ? "handed to" : "held for",
	    (int)p.pr_pid);
out:
	if (fd >= 0)
		close(fd);
	if (pidfd >= 0)
		close(pidfd);
}

/* The request follows the connect at once; a root peer that sends nothing is dropped. */
static void
fanhold_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct timeval tv = { 2, 0 };
	int sock;

	(void)what;
	(void)arg;
	sock = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (sock < 0)
		return;
	if (setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
		log_warn("%s: timeouts", FANHOLD_SOCK);
	else
		fanhold_request(sock);
	close(sock);
}

int
fanhold_listen(struct boundaryd *bd)
{
	struct sockaddr_un sun;
	int fd;

	fh.fh_bd = bd;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "/proc/self/fd/%d/" FANHOLD_SOCK,
	    bd->bd_runtime_fd);
	if (unlinkat(bd->bd_runtime_fd, FANHOLD_SOCK, 0) != 0 && errno != ENOENT)
		return -1;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	mode_t old = umask(0177);
	int r = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	if (r != 0 || fchmodat(bd->bd_runtime_fd, FANHOLD_SOCK, 0600, 0) != 0 ||
	    listen(fd, 8) != 0) {
		close(fd);
		return -1;
	}
	fh.fh_listen = fd;
	fh.fh_listen_ev = event_new(bd->bd_base, fd, EV_READ | EV_PERSIST, fanhold_accept_cb, NULL);
	if (fh.fh_listen_ev == NULL || event_add(fh.fh_listen_ev, NULL) != 0)
		return -1;
	return 0;
}

/* After the sandbox: a thread started earlier would keep what it dropped. */
int
fanhold_start(struct boundaryd *bd)
{
	fh.fh_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	fh.fh_notify = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fh.fh_wake < 0 || fh.fh_notify < 0)
		return -1;
	fh.fh_notify_ev = event_new(bd->bd_base, fh.fh_notify, EV_READ | EV_PERSIST,
	    fanhold_notify_cb, NULL);
	if (fh.fh_notify_ev == NULL || event_add(fh.fh_notify_ev, NULL) != 0)
		return -1;
	if (pthread_create(&fh.fh_thread, NULL, fanhold_thread, NULL) != 0)
		return -1;
	fh.fh_started = 1;
	return 0;
}

/* For system.status: who answers the group. */
struct json_object *
fanhold_status(void)
{
	struct json_object *o = json_object_new_object();

	pthread_mutex_lock(&fh.fh_lock);
	json_object_object_add(o, "state", json_object_new_string(fh.fh_group < 0 ? "none" :
	    fh.fh_standing ? "standing_in" : fh.fh_holder >= 0 ? "held" : "holder_exited"));
	json_object_object_add(o, "holder_pid", fh.fh_holder >= 0 ?
	    json_object_new_int64(fh.fh_holder_pid) : NULL);
	json_object_object_add(o, "handoffs", json_object_new_int64((int64_t)fh.fh_handoffs));
	json_object_object_add(o, "standin_answered",
	    json_object_new_int64((int64_t)fh.fh_answered));
	json_object_object_add(o, "standin_denied", json_object_new_int64((int64_t)fh.fh_denied));
	json_object_object_add(o, "swept", json_object_new_int64((int64_t)fh.fh_swept));
	pthread_mutex_unlock(&fh.fh_lock);
	return o;
}

/*
 * At our stop the group is closed: with sensord alive it keeps its own fd;
 * with sensord gone too the kernel removes the marks (what the next
 * instance freezes at adoption covers that).
 */
void
fanhold_stop(struct boundaryd *bd)
{
	if (fh.fh_started) {
		pthread_mutex_lock(&fh.fh_lock);
		fh.fh_quit = 1;
		pthread_mutex_unlock(&fh.fh_lock);
		fanhold_wake();
		pthread_join(fh.fh_thread, NULL);
		fh.fh_started = 0;
	}
	if (fh.fh_listen_ev != NULL)
		event_free(fh.fh_listen_ev);
	if (fh.fh_listen >= 0) {
		close(fh.fh_listen);
		unlinkat(bd->bd_runtime_fd, FANHOLD_SOCK, 0);
	}
	if (fh.fh_notify_ev != NULL)
		event_free(fh.fh_notify_ev);
	if (fh.fh_group >= 0)
		close(fh.fh_group);
	if (fh.fh_holder >= 0)
		close(fh.fh_holder);
	if (fh.fh_wake >= 0)
		close(fh.fh_wake);
	if (fh.fh_notify >= 0)
		close(fh.fh_notify);
	fh.fh_listen_ev = fh.fh_notify_ev = NULL;
	fh.fh_listen = fh.fh_group = fh.fh_holder = fh.fh_wake = fh.fh_notify = -1;
}
