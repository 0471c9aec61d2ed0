/*
 * proctree.c: process-tree attribution by polling /proc.
 *
 * Every process is named by (pid, start ticks), never by pid alone: a pid
 * that a tree process used can be reused by an unrelated process between two
 * scans, and that process must neither inherit the old one's attribution nor
 * hide its exit. The same pair guards each link of a ppid chain (a parent
 * cannot have started after its child, so a ppid that now names a newer
 * process is a reused pid, not a parent) and each read of exe and cmdline
 * (the identity is checked again after them, so the details belong to the
 * process the snapshot saw).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"
#include "proctree.h"
#include "util.h"

/* sha256 of zero bytes: the argv digest of an empty cmdline. */
#define PROCTREE_EMPTY_DIGEST \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* Transient pn_depth values while proctree_attribute walks a chain. */
#define PROCTREE_UNRESOLVED (-2)
#define PROCTREE_ON_PATH (-3)

struct proctree_key {
	pid_t k_pid;
	size_t k_idx;
};

/* What one scan read about a tree process. */
struct proctree_seen {
	struct proctree_proc s_proc;
	int s_initial;		/* its exec event is an initial one */
};

/* Order keys by pid. */
static int
proctree_key_cmp(const void *a, const void *b)
{
	const struct proctree_key *ka = a, *kb = b;

	if (ka->k_pid != kb->k_pid)
		return ka->k_pid < kb->k_pid ? -1 : 1;
	return 0;
}

/* Find the node with this pid in keys sorted by pid. */
static const struct proctree_key *
proctree_key_find(const struct proctree_key *keys, size_t n, pid_t pid)
{
	struct proctree_key k = { .k_pid = pid };

	return bsearch(&k, keys, n, sizeof(*keys), proctree_key_cmp);
}

int
proctree_attribute(struct proctree_node *nodes, size_t n, pid_t root_pid,
    uint64_t root_start)
{
	struct proctree_key *keys;
	const struct proctree_key *pk;
	size_t *path, i;

	if (n == 0)
		return 0;
	keys = calloc(n, sizeof(*keys));
	path = calloc(n, sizeof(*path));
	if (keys == NULL || path == NULL) {
		free(keys);
		free(path);
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < n; i++) {
		keys[i].k_pid = nodes[i].pn_pid;
		keys[i].k_idx = i;
	}
	qsort(keys, n, sizeof(*keys), proctree_key_cmp);
	for (i = 1; i < n; i++) {
		if (keys[i].k_pid == keys[i - 1].k_pid) {
			free(keys);
			free(path);
			errno = EINVAL;
			return -1;
		}
	}

	/*
	 * The root and processes already attributed are resolved from the
	 * start: an attributed process keeps its depth after it is reparented
	 * to init or a subreaper outside the tree.
	 */
	for (i = 0; i < n; i++) {
		if (nodes[i].pn_pid == root_pid && nodes[i].pn_start_ticks == root_start)
			nodes[i].pn_depth = 0;
		else if (nodes[i].pn_known_depth >= 0)
			nodes[i].pn_depth = nodes[i].pn_known_depth;
		else
			nodes[i].pn_depth = PROCTREE_UNRESOLVED;
	}

	/*
	 * Walk each unresolved chain up to a resolved node, then assign the
	 * whole path on the way back, so each node is walked once. The
	 * snapshot is not atomic, so a chain may be inconsistent: a missing
	 * parent, a parent younger than its child (pid reuse) or a loop ends it
	 * outside the tree.
	 */
	for (i = 0; i < n; i++) {
		size_t len = 0, cur = i;
		int base;

		for (;;) {
			if (nodes[cur].pn_depth >= PROCTREE_OUTSIDE) {
				base = nodes[cur].pn_depth;
				break;
			}
			if (nodes[cur].pn_depth == PROCTREE_ON_PATH) {
				base = PROCTREE_OUTSIDE;
				break;
			}
			nodes[cur].pn_depth = PROCTREE_ON_PATH;
			path[len++] = cur;
			pk = proctree_key_find(keys, n, nodes[cur].pn_ppid);
			if (pk == NULL ||
			    nodes[pk->k_idx].pn_start_ticks > nodes[cur].pn_start_ticks) {
				base = PROCTREE_OUTSIDE;
				break;
			}
			cur = pk->k_idx;
		}
		/*
		 * base is now the depth of the parent of the last node pushed
		 * (PROCTREE_OUTSIDE for a broken chain); unwind towards i.
		 */
		while (len > 0) {
			base = base >= 0 ? base + 1 : PROCTREE_OUTSIDE;
			nodes[path[--len]].pn_depth = base;
		}
	}
	free(keys);
	free(path);
	return 0;
}

int
proctree_init(struct proctree *pt, pid_t pid, char **cause)
{
	struct proc_stat ps;

	memset(pt, 0, sizeof(*pt));
	if (pid <= 0) {
		util_cause(cause, "invalid pid %d", (int)pid);
		errno = EINVAL;
		return -1;
	}
	if (proc_read_stat(pid, &ps) != 0) {
		if (errno == ESRCH)
			util_cause(cause, "pid %d: no such process", (int)pid);
		else
			util_cause(cause, "pid %d: %s", (int)pid, strerror(errno));
		return -1;
	}
	if (ps.ps_state == 'Z' || ps.ps_state == 'X') {
		util_cause(cause, "pid %d: has already exited", (int)pid);
		errno = ESRCH;
		return -1;
	}
	pt->pt_root_pid = pid;
	pt->pt_root_start = ps.ps_start_ticks;
	pt->pt_root_ppid = ps.ps_ppid;
	return 0;
}

void
proctree_free(struct proctree *pt)
{
	for (size_t i = 0; i < pt->pt_nprocs; i++)
		free(pt->pt_procs[i].pp_exe);
	free(pt->pt_procs);
	pt->pt_procs = NULL;
	pt->pt_nprocs = 0;
}

const char *
proctree_event_name(enum proctree_event_type type)
{
	switch (type) {
	case PROCTREE_EXEC:
		return "exec";
	case PROCTREE_EXIT:
		return "exit";
	}
	return "unknown";
}

/* Order tree processes by pid. */
static int
proctree_proc_cmp(const void *a, const void *b)
{
	const struct proctree_proc *pa = a, *pb = b;

	if (pa->pp_pid != pb->pp_pid)
		return pa->pp_pid < pb->pp_pid ? -1 : 1;
	return 0;
}

/* Order exec events parent first: by depth, then start time, then pid. */
static int
proctree_seen_cmp(const void *a, const void *b)
{
	const struct proctree_proc *pa = &(*(const struct proctree_seen *const *)a)->s_proc;
	const struct proctree_proc *pb = &(*(const struct proctree_seen *const *)b)->s_proc;

	if (pa->pp_depth != pb->pp_depth)
		return pa->pp_depth < pb->pp_depth ? -1 : 1;
	if (pa->pp_start_ticks != pb->pp_start_ticks)
		return pa->pp_start_ticks < pb->pp_start_ticks ? -1 : 1;
	if (pa->pp_pid != pb->pp_pid)
		return pa->pp_pid < pb->pp_pid ? -1 : 1;
	return 0;
}

/* Order exit events children first: by depth, then start time, descending. */
static int
proctree_gone_cmp(const void *a, const void *b)
{
	const struct proctree_proc *pa = *(const struct proctree_proc *const *)a;
	const struct proctree_proc *pb = *(const struct proctree_proc *const *)b;

	if (pa->pp_depth != pb->pp_depth)
		return pa->pp_depth > pb->pp_depth ? -1 : 1;
	if (pa->pp_start_ticks != pb->pp_start_ticks)
		return pa->pp_start_ticks > pb->pp_start_ticks ? -1 : 1;
	if (pa->pp_pid != pb->pp_pid)
		return pa->pp_pid > pb->pp_pid ? -1 : 1;
	return 0;
}

/* The known tree process with this pid, or NULL. */
static struct proctree_proc *
proctree_lookup(struct proctree *pt, pid_t pid)
{
	struct proctree_proc k = { .pp_pid = pid };

	if (pt->pt_nprocs == 0)
		return NULL;
	return bsearch(&k, pt->pt_procs, pt->pt_nprocs, sizeof(k), proctree_proc_cmp);
}

/*
 * The first NUL-separated word of /proc/PID/cmdline, at most 255 bytes;
 * *empty tells whether cmdline had no bytes at all.
 */
static int
proctree_read_argv0(pid_t pid, char argv0[PROCTREE_ARGV0_LEN], int *empty)
{
	char path[64];
	size_t got = 0;
	int fd, e;

	argv0[0] = '\0';
	*empty = 0;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -1;
	while (got < PROCTREE_ARGV0_LEN - 1) {
		ssize_t r = read(fd, argv0 + got, PROCTREE_ARGV0_LEN - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			e = errno;
			(void)close(fd);
			argv0[0] = '\0';
			errno = e;
			return -1;
		}
		if (r == 0)
			break;
		got += (size_t)r;
		if (memchr(argv0 + got - (size_t)r, '\0', (size_t)r) != NULL)
			break;
	}
	argv0[got] = '\0';
	*empty = got == 0;
	if (close(fd) != 0)
		return -1;
	return 0;
}

/*
 * Read exe, argv digest and argv0 of a process the snapshot saw as (pid,
 * start). Returns 0; 1 when it looks half way through an execve; or -1 when
 * it is gone or exiting (no mm left to read). Fields unreadable for other
 * reasons (another user's exe) are "".
 */
static int
proctree_read_details(pid_t pid, uint64_t start, char *exe, size_t exelen,
    char digest[PROC_DIGEST_HEX], char argv0[PROCTREE_ARGV0_LEN])
{
	char again[PATH_MAX];
	int empty = 0, moving = 0;

	/* ENOENT on exe of a live pid means the mm is gone: it is exiting. */
	if (proc_read_exe(pid, exe, exelen) != 0) {
		if (errno == ENOENT || errno == ESRCH)
			return -1;
		exe[0] = '\0';
	}
	if (proctree_read_argv0(pid, argv0, &empty) != 0) {
		if (errno == ENOENT || errno == ESRCH)
			return -1;
		argv0[0] = '\0';
	}
	if (proc_argv_digest(pid, digest) != 0) {
		if (errno == ENOENT || errno == ESRCH)
			return -1;
		digest[0] = '\0';
	}
	if (proc_read_exe(pid, again, sizeof(again)) != 0) {
		if (errno == ENOENT || errno == ESRCH)
			return -1;
		again[0] = '\0';
	}
	/*
	 * PID reuse: the process may have exited and its pid been reused
	 * while we read. (pid, start) is unique within a boot, so if it is
	 * unchanged now, what we read belongs to the process the snapshot saw.
	 */
	if (proc_identity_matches(pid, start) != 0)
		return -1;
	/*
	 * An execve installs the new exe before it lays out the new argv, so
	 * for a moment cmdline is empty; and the exe may change between our
	 * reads. Reporting that state would give a bogus exec event followed
	 * by the real one.
	 */
	if (empty || strcmp(digest, PROCTREE_EMPTY_DIGEST) == 0)
		moving = 1;
	if (strcmp(exe, again) != 0)
		moving = 1;
	return moving;
}

/* Fill an event from a tree process and hand it to cb. */
static void
proctree_emit(enum proctree_event_type type, int initial, const struct proctree_proc *pp,
    proctree_event_fn cb, void *arg)
{
	struct proctree_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.pe_type = type;
	ev.pe_initial = initial;
	ev.pe_pid = pp->pp_pid;
	ev.pe_ppid = pp->pp_ppid;
	ev.pe_start_ticks = pp->pp_start_ticks;
	ev.pe_depth = pp->pp_depth;
	util_strlcpy(ev.pe_executable, pp->pp_exe != NULL ? pp->pp_exe : "",
	    sizeof(ev.pe_executable));
	util_strlcpy(ev.pe_argv_digest, pp->pp_argv_digest, sizeof(ev.pe_argv_digest));
	util_strlcpy(ev.pe_argv0, pp->pp_argv0, sizeof(ev.pe_argv0));
	util_now_rfc3339(ev.pe_time, sizeof(ev.pe_time));
	cb(&ev, arg);
}

/*
 * Take a /proc snapshot: every process's (pid, ppid, start), with the known
 * depth of those already attributed. zombie[i] marks exited, unreaped ones:
 * they still link their chain but have nothing left to read.
 */
static int
proctree_snapshot(struct proctree *pt, struct proctree_node **nodesp, char **zombiep,
    size_t *np, char **cause)
{
	struct proctree_node *nodes;
	struct proctree_proc *known;
	struct proc_stat ps;
	pid_t *pids;
	size_t npids, n = 0;
	char *zombie;

	if (proc_list_pids(&pids, &npids) != 0) {
		util_cause(cause, "/proc: %s", strerror(errno));
		return -1;
	}
	nodes = calloc(npids + 1, sizeof(*nodes));
	zombie = calloc(npids + 1, 1);
	if (nodes == NULL || zombie == NULL) {
		util_cause(cause, "out of memory");
		free(pids);
		free(nodes);
		free(zombie);
		return -1;
	}
	for (size_t i = 0; i < npids; i++) {
		/* Gone since the listing (or hidden from us): not in this snapshot. */
		if (proc_read_stat(pids[i], &ps) != 0)
			continue;
		nodes[n].pn_pid = ps.ps_pid;
		nodes[n].pn_ppid = ps.ps_ppid;
		nodes[n].pn_start_ticks = ps.ps_start_ticks;
		nodes[n].pn_known_depth = PROCTREE_OUTSIDE;
		known = proctree_lookup(pt, ps.ps_pid);
		if (known != NULL && known->pp_start_ticks == ps.ps_start_ticks)
			nodes[n].pn_known_depth = known->pp_depth;
		zombie[n] = ps.ps_state == 'Z' || ps.ps_state == 'X';
		n++;
	}
	free(pids);
	*nodesp = nodes;
	*zombiep = zombie;
	*np = n;
	return 0;
}

int
proctree_scan(struct proctree *pt, proctree_event_fn cb, void *arg, char **cause)
{
	struct proctree_node *nodes = NULL;
	struct proctree_seen *seen = NULL, **order = NULL;
	struct proctree_proc *old, *pp, *next = NULL, **gone = NULL;
	char *zombie = NULL, exe[PATH_MAX];
	size_t n, i, ntree = 0, nseen = 0, norder = 0, ngone = 0;
	int root_live = 0, rv = -1, r, changed;

	if (proctree_snapshot(pt, &nodes, &zombie, &n, cause) != 0)
		return -1;
	if (proctree_attribute(nodes, n, pt->pt_root_pid, pt->pt_root_start) != 0) {
		util_cause(cause, "attributing the process tree: %s", strerror(errno));
		goto out;
	}
	for (i = 0; i < n; i++)
		if (nodes[i].pn_depth >= 0 && !zombie[i])
			ntree++;
	if (ntree > PROCTREE_MAX_PROCS) {
		util_cause(cause, "process tree of pid %d has %zu processes (limit %d)",
		    (int)pt->pt_root_pid, ntree, PROCTREE_MAX_PROCS);
		goto out;
	}
	seen = calloc(ntree + 1, sizeof(*seen));
	order = calloc(ntree + 1, sizeof(*order));
	next = calloc(ntree + 1, sizeof(*next));
	gone = calloc(pt->pt_nprocs + 1, sizeof(*gone));
	if (seen == NULL || order == NULL || next == NULL || gone == NULL) {
		util_cause(cause, "out of memory");
		goto out;
	}

	for (i = 0; i < pt->pt_nprocs; i++)
		pt->pt_procs[i].pp_exited = 1;
	for (i = 0; i < n; i++) {
		struct proctree_seen *s = &seen[nseen];

		if (nodes[i].pn_depth < 0 || zombie[i])
			continue;
		memset(s, 0, sizeof(*s));
		pp = &s->s_proc;
		pp->pp_pid = nodes[i].pn_pid;
		pp->pp_ppid = nodes[i].pn_ppid;
		pp->pp_start_ticks = nodes[i].pn_start_ticks;
		pp->pp_depth = nodes[i].pn_depth;
		r = proctree_read_details(pp->pp_pid, pp->pp_start_ticks, exe, sizeof(exe),
		    pp->pp_argv_digest, pp->pp_argv0);
		if (r < 0)
			continue;	/* exited since the snapshot */
		old = proctree_lookup(pt, pp->pp_pid);
		if (old != NULL && old->pp_start_ticks != pp->pp_start_ticks)
			old = NULL;	/* pid reused: the old one is reported as exited */
		if (old != NULL)
			old->pp_exited = 0;
		if (r == 1 && (old != NULL ? old->pp_unsettled : 0) + 1 < PROCTREE_SETTLE_SCANS) {
			/*
			 * Half way through an execve: keep what the last scan
			 * saw and look again. Only for a few scans, so that a
			 * process cannot stay unreported by looking unsettled
			 * (an execve with an empty argv does, for good).
			 */
			if (old != NULL) {
				util_strlcpy(exe, old->pp_exe, sizeof(exe));
				memcpy(pp->pp_argv_digest, old->pp_argv_digest,
				    sizeof(pp->pp_argv_digest));
				memcpy(pp->pp_argv0, old->pp_argv0, sizeof(pp->pp_argv0));
				pp->pp_reported = old->pp_reported;
				pp->pp_initial = old->pp_initial;
				pp->pp_unsettled = old->pp_unsettled + 1;
			} else {
				pp->pp_initial = pt->pt_scans == 0;
				pp->pp_unsettled = 1;
			}
			changed = 0;
		} else if (old != NULL) {
			/*
			 * Same (pid, start), new executable or command line: an
			 * execve in place. (A process rewriting its own argv,
			 * setproctitle-style, looks the same from /proc.)
			 */
			pp->pp_initial = old->pp_initial;
			changed = !old->pp_reported || strcmp(old->pp_exe, exe) != 0 ||
			    strcmp(old->pp_argv_digest, pp->pp_argv_digest) != 0;
			s->s_initial = !old->pp_reported && old->pp_initial;
			pp->pp_reported = 1;
		} else {
			pp->pp_initial = pt->pt_scans == 0;
			changed = 1;
			s->s_initial = pp->pp_initial;
			pp->pp_reported = 1;
		}
		if ((pp->pp_exe = strdup(exe)) == NULL) {
			util_cause(cause, "out of memory");
			goto out;
		}
		if (pp->pp_pid == pt->pt_root_pid && pp->pp_start_ticks == pt->pt_root_start)
			root_live = 1;
		if (changed)
			order[norder++] = s;
		nseen++;
	}

	/* Nothing can fail from here on: report, then replace the table. */
	for (i = 0; i < pt->pt_nprocs; i++)
		if (pt->pt_procs[i].pp_exited)
			gone[ngone++] = &pt->pt_procs[i];
	qsort(gone, ngone, sizeof(*gone), proctree_gone_cmp);
	for (i = 0; i < ngone; i++) {
		/* Seen only half way through an execve: still report that it ran. */
		if (!gone[i]->pp_reported)
			proctree_emit(PROCTREE_EXEC, gone[i]->pp_initial, gone[i], cb, arg);
		proctree_emit(PROCTREE_EXIT, 0, gone[i], cb, arg);
		if (gone[i]->pp_pid == pt->pt_root_pid &&
		    gone[i]->pp_start_ticks == pt->pt_root_start)
			pt->pt_root_exited = 1;
	}
	if (!root_live && !pt->pt_root_exited) {
		/* The root exited before any scan saw it alive. */
		struct proctree_proc root = {
			.pp_pid = pt->pt_root_pid,
			.pp_ppid = pt->pt_root_ppid,
			.pp_start_ticks = pt->pt_root_start,
		};

		proctree_emit(PROCTREE_EXIT, 0, &root, cb, arg);
		pt->pt_root_exited = 1;
	}
	qsort(order, norder, sizeof(*order), proctree_seen_cmp);
	for (i = 0; i < norder; i++)
		proctree_emit(PROCTREE_EXEC, order[i]->s_initial, &order[i]->s_proc, cb, arg);

	for (i = 0; i < nseen; i++) {
		next[i] = seen[i].s_proc;
		next[i].pp_exited = 0;
		seen[i].s_proc.pp_exe = NULL;	/* now owned by next */
	}
	qsort(next, nseen, sizeof(*next), proctree_proc_cmp);
	proctree_free(pt);
	pt->pt_procs = next;
	pt->pt_nprocs = nseen;
	next = NULL;
	pt->pt_scans++;
	rv = 0;

out:
	if (seen != NULL) {
		for (i = 0; i < nseen; i++)
			free(seen[i].s_proc.pp_exe);
	}
	free(seen);
	free(order);
	free(gone);
	free(next);
	free(nodes);
	free(zombie);
	return rv;
}
