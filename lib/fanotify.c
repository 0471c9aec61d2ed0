/*
 * fanotify.c: permission marks, events, answers and the ignore cache.
 *
 * Two groups: a FAN_CLASS_CONTENT group holds the permission marks and the
 * ignore marks; a FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME group watches
 * moves on the same filesystems, because a permission group cannot report
 * file handles (fanotify_init refuses FAN_REPORT_FID with a content class)
 * and the ignore cache has to learn about renames.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "fanotify.h"
#include "util.h"

#ifndef FAN_MARK_EVICTABLE
#define FAN_MARK_EVICTABLE 0x00000200
#endif
#ifndef FAN_MARK_IGNORE
#define FAN_MARK_IGNORE 0x00000400
#endif

#define FAN_INIT_FLAGS (FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK)
#define FAN_INIT_UNLIMITED (FAN_UNLIMITED_QUEUE | FAN_UNLIMITED_MARKS)
#define FAN_EVENT_FLAGS (O_RDONLY | O_LARGEFILE | O_CLOEXEC)
#define FAN_MOVE_MASK (FAN_MOVED_TO | FAN_ONDIR)
#define FAN_READ_ROUNDS 16

/* One mark of the current plan, as the engine placed it. */
struct fan_emark {
	enum fan_mark_kind em_kind;
	char *em_path;
	dev_t em_dev;		/* the plan's device */
	dev_t em_idev;		/* INODE: the inode marked */
	ino_t em_iino;
	size_t em_rule;
	int em_active;
};

/* One filesystem (st_dev) of the plan. */
struct fan_efs {
	dev_t fs_dev;
	uint64_t fs_mnt_id;	/* the mount the plan resolved its paths through */
	int fs_dirfd;		/* a directory on it: open_by_handle_at, mark removal */
	char fs_fsid[8];	/* statfs f_fsid, as move events carry it */
	unsigned int fs_perm;	/* FAN_MARK_FILESYSTEM or FAN_MARK_MOUNT when marked whole, else 0 */
	int fs_moves;		/* the move group watches it */
	int fs_cacheable;
};

struct fan_engine {
	int en_fd;		/* permission group */
	int en_mfd;		/* move group, or -1 */
	int en_epfd;
	const struct fanpolicy *en_policy;
	struct fan_emark *en_marks;
	size_t en_nmarks;
	struct fan_efs *en_fs;
	size_t en_nfs;
	struct fan_warnings en_warn;
	struct fan_warnings en_sticky;	/* found at open; kept across set_plan */
	unsigned int en_ignore;	/* flags of an ignore mark, downgraded as the kernel refuses */
	size_t en_cached;
	size_t en_cache_max;
	int64_t en_timeout_ms;
	struct fan_stats en_stats;
	int en_adopted;		/* the group came with marks this engine did not place */
};

/* Append an engine warning (a lost warning is counted, never fatal). */
static void fan_warn(struct fan_engine *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
fan_warn(struct fan_engine *e, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = fanpolicy_vwarn(&e->en_warn, fmt, ap);
	va_end(ap);
	if (r != 0)
		e->en_warn.w_dropped++;
}

/* Tell the callback (or, without one, the warnings) that coverage was lost. */
static void
fan_report(struct fan_engine *e, fan_decide_fn cb, void *arg, const char *why)
{
	struct fan_event ev;
	struct fan_verdict vd;

	if (cb == NULL) {
		fan_warn(e, "fanotify: coverage lost: %s", why);
		return;
	}
	memset(&ev, 0, sizeof(ev));
	memset(&vd, 0, sizeof(vd));
	ev.ev_phase = FAN_PHASE_LOST;
	ev.ev_fd = -1;
	ev.ev_lost = why;
	(void)cb(&ev, &vd, arg); /* the return value means nothing in this phase */
}

/*
 * openat2 a directory with no symlink and no magic link anywhere on the
 * way. Symlink swap: the plan resolved its paths earlier; if a component
 * became a symlink since, the open fails instead of marking where the
 * link points.
 */
static int
fan_open_dir(const char *path)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
	how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	for (int i = 0; i < 100; i++) {
		long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
		if (fd >= 0 || errno != EAGAIN)
			return (int)fd;
		/* EAGAIN: a concurrent rename raced the lookup. */
	}
	return -1;
}

/* Split a canonical file path into its directory and last component. */
static int
fan_split(const char *path, char *dir, size_t len, const char **base)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL || slash[1] == '\0' || (size_t)(slash - path) + 2 > len) {
		errno = EINVAL;
		return -1;
	}
	if (slash == path) {
		strcpy(dir, "/");
	} else {
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
	}
	*base = slash + 1;
	return 0;
}

/* The filesystem entry of dev, or NULL. */
static struct fan_efs *
fan_fs_find(const struct fan_efs *v, size_t n, dev_t dev)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].fs_dev == dev)
			return (struct fan_efs *)&v[i];
	return NULL;
}

/* Close and free a filesystem table. */
static void
fan_fs_free(struct fan_efs *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].fs_dirfd >= 0)
			close(v[i].fs_dirfd);
	free(v);
}

/* Free a mark table. */
static void
fan_marks_free(struct fan_emark *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].em_path);
	free(v);
}

/* Add one INODE or CHILDREN mark of the plan to the permission group. */
static int
fan_mark_inode(struct fan_engine *e, struct fan_emark *m)
{
	char dir[PATH_MAX];
	const char *base = NULL;
	struct stat st;
	int dfd, r, saved;

	m->em_active = 0;
	m->em_idev = 0;
	m->em_iino = 0;
	if (m->em_kind == FAN_PLAN_CHILDREN) {
		dfd = fan_open_dir(m->em_path);
		if (dfd < 0) {
			fan_warn(e, "fanotify: %s: %s; its entries are not marked", m->em_path,
			    strerror(errno));
			return -1;
		}
		r = fanotify_mark(e->en_fd, FAN_MARK_ADD | FAN_MARK_ONLYDIR,
		    FANOTIFY_MASK | FAN_EVENT_ON_CHILD, dfd, NULL);
		saved = errno;
		close(dfd);
		if (r != 0) {
			fan_warn(e, "fanotify: directory mark on %s refused: %s", m->em_path,
			    strerror(saved));
			return -1;
		}
		m->em_active = 1;
		return 0;
	}
	if (fan_split(m->em_path, dir, sizeof(dir), &base) != 0 || (dfd = fan_open_dir(dir)) < 0) {
		fan_warn(e, "fanotify: %s: %s; not marked", m->em_path, strerror(errno));
		return -1;
	}
	/*
	 * Symlink swap: the directory was opened with no symlink on the way
	 * and the last component is marked without following it, so a symlink
	 * planted since the plan gets the mark itself, never its target.
	 */
	r = fanotify_mark(e->en_fd, FAN_MARK_ADD | FAN_MARK_DONT_FOLLOW, FANOTIFY_MASK, dfd, base);
	saved = errno;
	if (r == 0 && fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		m->em_idev = st.st_dev;
		m->em_iino = st.st_ino;
		if (S_ISLNK(st.st_mode))
			fan_warn(e, "fanotify: %s became a symlink; only its directory is marked",
			    m->em_path);
	}
	close(dfd);
	if (r != 0) {
		fan_warn(e, "fanotify: inode mark on %s refused: %s", m->em_path, strerror(saved));
		return -1;
	}
	m->em_active = 1;
	return 0;
}

/* Mark a whole filesystem (or, failing that, its mount) in the permission group. */
static void
fan_mark_fs(struct fan_engine *e, struct fan_efs *fs, const char *path)
{
	int saved;

	if (fs->fs_dirfd < 0)
		return;
	if (fanotify_mark(e->en_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, FANOTIFY_MASK,
	    fs->fs_dirfd, NULL) == 0) {
		fs->fs_perm = FAN_MARK_FILESYSTEM;
		return;
	}
	saved = errno;
	if (fanotify_mark(e->en_fd, FAN_MARK_ADD | FAN_MARK_MOUNT, FANOTIFY_MASK, fs->fs_dirfd,
	    NULL) == 0) {
		fs->fs_perm = FAN_MARK_MOUNT;
		fan_warn(e, "fanotify: filesystem mark on %s refused (%s); only its mount is "
		    "marked, so opens through other mounts of it are not seen", path,
		    strerror(saved));
		return;
	}
	fan_warn(e, "fanotify: filesystem and mount marks on %s refused: %s, %s", path,
	    strerror(saved), strerror(errno));
}

/*
 * Build the filesystem table of a plan: one entry per st_dev, with a
 * directory fd on it (the filesystem mark's directory when there is one),
 * its fsid and whether the ignore cache may be used there.
 */
static int
fan_fs_build(struct fan_engine *e, const struct fan_plan *pl, struct fan_efs **out, size_t *nout)
{
	struct fan_efs *v = calloc(pl->pl_nmarks + 1, sizeof(*v));
	char (*paths)[PATH_MAX] = calloc(pl->pl_nmarks + 1, sizeof(*paths));
	int *prio = calloc(pl->pl_nmarks + 1, sizeof(*prio));
	size_t n = 0;

	if (v == NULL || paths == NULL || prio == NULL) {
		free(v);
		free(paths);
		free(prio);
		return -1;
	}
	for (size_t i = 0; i < pl->pl_nmarks; i++) {
		const struct fan_mark *m = &pl->pl_marks[i];
		struct fan_efs *fs = fan_fs_find(v, n, m->fm_dev);
		const char *base;
		int pr = m->fm_kind == FAN_PLAN_FILESYSTEM ? 3 : m->fm_kind == FAN_PLAN_CHILDREN ? 2 : 1;
		size_t k;

		if (fs == NULL) {
			fs = &v[n++];
			fs->fs_dev = m->fm_dev;
			fs->fs_mnt_id = m->fm_mnt_id;
			fs->fs_dirfd = -1;
			fs->fs_cacheable = m->fm_cacheable;
		}
		k = (size_t)(fs - v);
		if (!m->fm_cacheable)
			fs->fs_cacheable = 0;
		if (pr <= prio[k])
			continue;
		if (m->fm_kind == FAN_PLAN_INODE) {
			if (fan_split(m->fm_path, paths[k], PATH_MAX, &base) != 0)
				continue;
		} else {
			util_strlcpy(paths[k], m->fm_path, PATH_MAX);
		}
		prio[k] = pr;
	}
	for (size_t k = 0; k < n; k++) {
		struct fan_efs *fs = &v[k];
		struct statfs sfs;
		struct stat st;
		uint64_t mnt = 0;

		if (prio[k] == 0 || (fs->fs_dirfd = fan_open_dir(paths[k])) < 0) {
			fan_warn(e, "fanotify: %s: %s; no ignore cache there", paths[k],
			    strerror(errno));
			fs->fs_cacheable = 0;
			continue;
		}
		if (fstat(fs->fs_dirfd, &st) != 0 || st.st_dev != fs->fs_dev) {
			fan_warn(e, "fanotify: %s moved to another filesystem since the plan; no "
			    "ignore cache there", paths[k]);
			fs->fs_cacheable = 0;
		}
		if (fanpolicy_mnt_id(fs->fs_dirfd, "", AT_EMPTY_PATH, &mnt) != 0 ||
		    mnt != fs->fs_mnt_id)
			fs->fs_cacheable = 0;
		if (fstatfs(fs->fs_dirfd, &sfs) == 0)
			memcpy(fs->fs_fsid, &sfs.f_fsid, sizeof(fs->fs_fsid));
		else
			fs->fs_cacheable = 0;
	}
	/* A FILESYSTEM mark's directory is paths[k] of its device (priority 3). */
	for (size_t k = 0; k < n; k++) {
		if (prio[k] == 3)
			fan_mark_fs(e, &v[k], paths[k]);
		if (v[k].fs_dirfd < 0)
			continue;
		if (e->en_mfd < 0 || fanotify_mark(e->en_mfd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
		    FAN_MOVE_MASK, v[k].fs_dirfd, NULL) != 0) {
			if (e->en_mfd >= 0)
				fan_warn(e, "fanotify: no move watch on %s (%s); no ignore cache there",
				    paths[k], strerror(errno));
			v[k].fs_cacheable = 0;
			continue;
		}
		v[k].fs_moves = 1;
	}
	free(paths);
	free(prio);
	*out = v;
	*nout = n;
	return 0;
}

/*
 * Drop every ignore mark and put the plan's inode marks back.
 *
 * FAN_MARK_FLUSH removes all inode marks of the group: the ignore marks,
 * and with them the plan's INODE and CHILDREN marks. So that no open
 * slips through while those are gone, each filesystem that has them and
 * is not marked whole gets a temporary filesystem mark first: opens there
 * raise events (answered once this returns) and the path filter applies.
 */
static int
fan_inode_reset(struct fan_engine *e, struct fan_emark *marks, size_t n, struct fan_efs *fs,
    size_t nfs, fan_decide_fn cb, void *arg, char **cause)
{
	unsigned char *temp = calloc(nfs + 1, 1);
	int r = 0;

	if (temp == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	for (size_t k = 0; k < nfs; k++) {
		int need = 0;
		for (size_t i = 0; i < n && !need; i++)
			need = marks[i].em_kind != FAN_PLAN_FILESYSTEM &&
			    marks[i].em_dev == fs[k].fs_dev;
		if (!need || fs[k].fs_perm != 0)
			continue;
		if (fs[k].fs_dirfd >= 0 && fanotify_mark(e->en_fd, FAN_MARK_ADD |
		    FAN_MARK_FILESYSTEM, FANOTIFY_MASK, fs[k].fs_dirfd, NULL) == 0)
			temp[k] = 1;
		else
			fan_report(e, cb, arg, FAN_LOST_FLUSH_WINDOW);
	}
	if (fanotify_mark(e->en_fd, FAN_MARK_FLUSH, 0, AT_FDCWD, NULL) != 0) {
		util_cause(cause, "fanotify: flushing inode marks: %s", strerror(errno));
		r = -1;
	} else {
		e->en_cached = 0;
		e->en_stats.st_flushes++;
	}
	for (size_t i = 0; i < n; i++)
		if (marks[i].em_kind != FAN_PLAN_FILESYSTEM)
			(void)fan_mark_inode(e, &marks[i]); /* a refusal is a warning */
	for (size_t k = 0; k < nfs; k++)
		if (temp[k] && fanotify_mark(e->en_fd, FAN_MARK_REMOVE | FAN_MARK_FILESYSTEM,
		    FANOTIFY_MASK, fs[k].fs_dirfd, NULL) != 0)
			fan_warn(e, "fanotify: removing a temporary filesystem mark: %s",
			    strerror(errno));
	free(temp);
	return r;
}

/* Remove the whole-filesystem and move marks of an old table that the new one lacks. */
static void
fan_fs_retire(struct fan_engine *e, struct fan_efs *old, size_t nold, struct fan_efs *nw,
    size_t nnew)
{
	for (size_t k = 0; k < nold; k++) {
		struct fan_efs *fs = &old[k], *keep = fan_fs_find(nw, nnew, fs->fs_dev);
		if (fs->fs_dirfd < 0)
			continue;
		/* ENOENT: the mark went already (a temporary mark of the same filesystem). */
		if (fs->fs_perm != 0 && (keep == NULL || keep->fs_perm != fs->fs_perm) &&
		    fanotify_mark(e->en_fd, FAN_MARK_REMOVE | fs->fs_perm, FANOTIFY_MASK,
		    fs->fs_dirfd, NULL) != 0 && errno != ENOENT)
			fan_warn(e, "fanotify: removing an old filesystem mark: %s", strerror(errno));
		if (fs->fs_moves && (keep == NULL || !keep->fs_moves) &&
		    fanotify_mark(e->en_mfd, FAN_MARK_REMOVE | FAN_MARK_FILESYSTEM, FAN_MOVE_MASK,
		    fs->fs_dirfd, NULL) != 0 && errno != ENOENT)
			fan_warn(e, "fanotify: removing an old move mark: %s", strerror(errno));
	}
}

/* Add the new plan's marks, drop the cache, then retire the old marks. */
int
fanotify_engine_set_plan(struct fan_engine *e, const struct fan_plan *plan, char **cause)
{
	struct fan_emark *nm = calloc(plan->pl_nmarks + 1, sizeof(*nm));
	struct fan_efs *nfs = NULL;
	size_t nnfs = 0;
	int r;

	if (plan->pl_policy == NULL) {
		free(nm);
		util_cause(cause, "fanotify: a plan without a policy");
		return -1;
	}
	if (nm == NULL)
		goto oom;
	for (size_t i = 0; i < plan->pl_nmarks; i++) {
		const struct fan_mark *m = &plan->pl_marks[i];
		nm[i].em_kind = m->fm_kind;
		nm[i].em_dev = m->fm_dev;
		nm[i].em_rule = m->fm_rule;
		if (m->fm_rule >= plan->pl_policy->fp_nrules) {
			fan_marks_free(nm, i);
			util_cause(cause, "fanotify: plan mark %zu names no rule of its policy", i);
			return -1;
		}
		if ((nm[i].em_path = strdup(m->fm_path)) == NULL) {
			fan_marks_free(nm, i);
			goto oom;
		}
	}
	/* The plan's warnings, the engine's from open, then what the marks bring. */
	fanpolicy_warnings_free(&e->en_warn);
	for (size_t i = 0; i < plan->pl_warn.w_n; i++)
		if (fanpolicy_warn(&e->en_warn, "%s", plan->pl_warn.w_v[i]) != 0)
			e->en_warn.w_dropped++;
	e->en_warn.w_dropped += plan->pl_warn.w_dropped;
	for (size_t i = 0; i < e->en_sticky.w_n; i++)
		if (fanpolicy_warn(&e->en_warn, "%s", e->en_sticky.w_v[i]) != 0)
			e->en_warn.w_dropped++;

	/* Add before removing: the new whole-filesystem marks first, then inode marks. */
	if (fan_fs_build(e, plan, &nfs, &nnfs) != 0) {
		fan_marks_free(nm, plan->pl_nmarks);
		goto oom;
	}
	r = fan_inode_reset(e, nm, plan->pl_nmarks, nfs, nnfs, NULL, NULL, cause);
	fan_fs_retire(e, e->en_fs, e->en_nfs, nfs, nnfs);
	fan_marks_free(e->en_marks, e->en_nmarks);
	fan_fs_free(e->en_fs, e->en_nfs);
	e->en_marks = nm;
	e->en_nmarks = plan->pl_nmarks;
	e->en_fs = nfs;
	e->en_nfs = nnfs;
	e->en_policy = plan->pl_policy;
	return r;
oom:
	util_cause(cause, "out of memory");
	return -1;
}

/* Open both groups and place the marks of plan. */
int
fanotify_engine_open(struct fan_engine **out, const struct fan_plan *plan, char **cause)
{
	struct fan_engine *e = calloc(1, sizeof(*e));
	struct epoll_event ev;

	*out = NULL;
	if (e == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	e->en_fd = e->en_mfd = e->en_epfd = -1;
	e->en_timeout_ms = FANOTIFY_DECISION_MS;
	e->en_cache_max = FANOTIFY_CACHE_MAX;
	/* Not surviving modify: a write to a cached file drops its ignore mark. */
	e->en_ignore = FAN_MARK_IGNORE | FAN_MARK_EVICTABLE;
	e->en_policy = plan->pl_policy;

	/*
	 * An unlimited queue: a permission event that does not fit in a full
	 * queue is dropped and its open allowed (FAN_Q_OVERFLOW), which would
	 * fail open. Only permission events go to this group, and each one
	 * holds its opener, so the queue cannot outgrow the number of threads.
	 * Unlimited marks: the ignore cache has its own bound.
	 */
	e->en_fd = fanotify_init(FAN_INIT_FLAGS | FAN_INIT_UNLIMITED, FAN_EVENT_FLAGS);
	if (e->en_fd < 0 && (errno == EPERM || errno == EINVAL)) {
		e->en_fd = fanotify_init(FAN_INIT_FLAGS, FAN_EVENT_FLAGS);
		if (e->en_fd >= 0 && fanpolicy_warn(&e->en_sticky, "fanotify: no unlimited queue: "
		    "an overflow allows opens unseen") != 0)
			e->en_sticky.w_dropped++;
	}
	if (e->en_fd < 0) {
		int saved = errno;
		util_cause(cause, "fanotify_init: %s%s", strerror(saved),
		    saved == EPERM ? " (needs CAP_SYS_ADMIN)" : saved == EINVAL ?
		    " (no permission events in this kernel)" : "");
		fanotify_engine_close(e);
		return -1;
	}
	e->en_mfd = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | FAN_CLOEXEC |
	    FAN_NONBLOCK, O_RDONLY | O_CLOEXEC);
	if (e->en_mfd < 0 && fanpolicy_warn(&e->en_sticky, "fanotify: no move watch (%s): the "
	    "ignore cache is off", strerror(errno)) != 0)
		e->en_sticky.w_dropped++;
	/* Every event's path comes from /proc/self/fd: without it every event would be denied. */
	char link[64], target[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", e->en_fd);
	if (readlink(link, target, sizeof(target)) < 0) {
		util_cause(cause, "fanotify: %s: %s (is /proc mounted?)", link, strerror(errno));
		fanotify_engine_close(e);
		return -1;
	}
	e->en_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (e->en_epfd < 0)
		goto fail;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.fd = e->en_fd;
	if (epoll_ctl(e->en_epfd, EPOLL_CTL_ADD, e->en_fd, &ev) != 0)
		goto fail;
	ev.data.fd = e->en_mfd;
	if (e->en_mfd >= 0 && epoll_ctl(e->en_epfd, EPOLL_CTL_ADD, e->en_mfd, &ev) != 0)
		goto fail;
	if (fanotify_engine_set_plan(e, plan, cause) != 0) {
		fanotify_engine_close(e);
		return -1;
	}
	*out = e;
	return 0;
fail:
	util_cause(cause, "epoll: %s", strerror(errno));
	fanotify_engine_close(e);
	return -1;
}

/*
 * Take over a permission group that another engine marked: a sensord that
 * died, whose group boundaryd kept open (see fanotify.h). The group keeps
 * its marks and its waiting openers throughout, so nothing is allowed
 * unseen in between. This engine's own group (unmarked: adoption happens
 * before any plan but the empty one) is closed in its place.
 */
int
fanotify_engine_adopt(struct fan_engine *e, int fd, char **cause)
{
	char link[64], target[64];
	struct epoll_event ev;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0 || (target[n] = '\0', strcmp(target, "anon_inode:[fanotify]") != 0)) {
		util_cause(cause, "fanotify: the group handed over is not a fanotify group");
		return -1;
	}
	if (e->en_nmarks != 0 || e->en_nfs != 0) {
		util_cause(cause, "fanotify: adopting a group over marks of our own");
		return -1;
	}
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
		util_cause(cause, "fanotify: adopted group: %s", strerror(errno));
		return -1;
	}
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.fd = fd;
	if (epoll_ctl(e->en_epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
		util_cause(cause, "epoll: %s", strerror(errno));
		return -1;
	}
	(void)epoll_ctl(e->en_epfd, EPOLL_CTL_DEL, e->en_fd, NULL);
	close(e->en_fd);
	e->en_fd = fd;
	e->en_cached = 0;
	e->en_adopted = 1;
	return 0;
}

/* Remove one stale whole-filesystem (FAN_MARK_FILESYSTEM) or mount mark. */
static void
fan_retire_one(struct fan_engine *e, unsigned int kind, unsigned int mnt_id, dev_t dev)
{
	char point[PATH_MAX];
	struct stat st;
	uint64_t mnt = 0;
	int dfd;

	if (fanpolicy_mount_point(mnt_id, dev, point, sizeof(point)) != 0 ||
	    (dfd = fan_open_dir(point)) < 0) {
		fan_warn(e, "fanotify: a mark left by the previous sensord (%s %u:%u) has no mount "
		    "here to remove it by", kind == FAN_MARK_MOUNT ? "mount" : "filesystem",
		    major(dev), minor(dev));
		return;
	}
	for (size_t k = 0; k < e->en_nfs; k++) {
		const struct fan_efs *fs = &e->en_fs[k];
		if (fs->fs_perm != kind)
			continue;
		if (kind == FAN_MARK_FILESYSTEM && fstat(dfd, &st) == 0 && st.st_dev == fs->fs_dev)
			goto keep;
		if (kind == FAN_MARK_MOUNT && fanpolicy_mnt_id(dfd, "", AT_EMPTY_PATH, &mnt) == 0 &&
		    mnt == fs->fs_mnt_id)
			goto keep;
	}
	if (fanotify_mark(e->en_fd, FAN_MARK_REMOVE | kind, FANOTIFY_MASK, dfd, NULL) != 0 &&
	    errno != ENOENT)
		fan_warn(e, "fanotify: removing a mark left by the previous sensord on %s: %s",
		    point, strerror(errno));
keep:
	close(dfd);
}

/*
 * After the first set_plan since adopt: the inode marks (and the ignore
 * cache) the group came with went with that plan's inode flush; remove
 * the filesystem and mount marks it does not have. They are read from the
 * group's fdinfo, the only list the kernel gives. Extra marks are never a
 * hole, only host-wide events to answer, so this runs after the plan's
 * marks are in place and a failure is a warning.
 */
int
fanotify_engine_retire_stale(struct fan_engine *e, char **cause)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	FILE *f;

	if (!e->en_adopted)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", e->en_fd);
	if ((f = fopen(path, "re")) == NULL) {
		util_cause(cause, "fanotify: %s: %s", path, strerror(errno));
		return -1;
	}
	/*
	 * "fanotify sdev:%x ..." is a filesystem mark (sdev in the kernel's
	 * encoding, major << 20 | minor), "fanotify mnt_id:%x ..." a mount
	 * mark; inode marks start with "fanotify ino:".
	 */
	struct { unsigned int kind, id; dev_t dev; } stale[64];
	size_t n = 0;
	while (getline(&line, &cap, f) > 0 && n < nitems(stale)) {
		unsigned int v;
		if (sscanf(line, "fanotify sdev:%x ", &v) == 1) {
			stale[n].kind = FAN_MARK_FILESYSTEM;
			stale[n].id = 0;
			stale[n++].dev = makedev(v >> 20, v & 0xfffff);
		} else if (sscanf(line, "fanotify mnt_id:%x ", &v) == 1) {
			stale[n].kind = FAN_MARK_MOUNT;
			stale[n].id = v;
			stale[n++].dev = 0;
		}
	}
	free(line);
	fclose(f);
	/* Removing while reading fdinfo would change what it lists. */
	for (size_t i = 0; i < n; i++)
		fan_retire_one(e, stale[i].kind, stale[i].id, stale[i].dev);
	e->en_adopted = 0;
	return 0;
}

int
fanotify_engine_group_fd(const struct fan_engine *e)
{
	return e->en_fd;
}

/* What the plan and the engine could not cover. */
const struct fan_warnings *
fanotify_engine_warnings(const struct fan_engine *e)
{
	return &e->en_warn;
}

/* The epoll fd the caller polls. */
int
fanotify_engine_fd(const struct fan_engine *e)
{
	return e->en_epfd;
}

/* The decision budget per event (<= 0: the default). */
void
fanotify_engine_set_timeout(struct fan_engine *e, int64_t ms)
{
	e->en_timeout_ms = ms > 0 ? ms : FANOTIFY_DECISION_MS;
}

/* The ignore-mark bound (0: no cache). */
void
fanotify_engine_set_cache_max(struct fan_engine *e, size_t n)
{
	e->en_cache_max = n;
}

/* Copy the counters. */
void
fanotify_engine_stats(const struct fan_engine *e, struct fan_stats *st)
{
	*st = e->en_stats;
	st->st_marks_planned = e->en_nmarks;
	st->st_marks_active = 0;
	for (size_t i = 0; i < e->en_nmarks; i++) {
		const struct fan_emark *m = &e->en_marks[i];
		const struct fan_efs *fs = fan_fs_find(e->en_fs, e->en_nfs, m->em_dev);
		if (m->em_kind == FAN_PLAN_FILESYSTEM ? fs != NULL && fs->fs_perm != 0 :
		    m->em_active)
			st->st_marks_active++;
	}
}

/* Drop every ignore mark, keeping the plan's marks in force. */
int
fanotify_engine_flush_cache(struct fan_engine *e, char **cause)
{
	return fan_inode_reset(e, e->en_marks, e->en_nmarks, e->en_fs, e->en_nfs, NULL, NULL,
	    cause);
}

/*
 * The path of an event's file: readlink of /proc/self/fd/N, which is the
 * kernel's own name for the open file (d_path in this mount namespace).
 * No path from the opener is involved, so there is nothing to swap a
 * symlink into between the open and the check. An unlinked file's name
 * gets " (deleted)" appended by the kernel; it is stripped (st_nlink is
 * 0, so it is not a real name) and flagged, so that reopening a deleted
 * ".env" through /proc/PID/fd is still matched as ".env".
 */
static int
fan_event_path(int fd, char *buf, size_t len, struct stat *st, int *unlinked)
{
	static const char deleted[] = " (deleted)";
	const size_t dlen = sizeof(deleted) - 1;
	char link[64];
	ssize_t n;

	*unlinked = 0;
	if (fstat(fd, st) != 0)
		return -1;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, buf, len);
	if (n < 0)
		return -1;
	if ((size_t)n >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	buf[n] = '\0';
	if (st->st_nlink == 0) {
		*unlinked = 1;
		if ((size_t)n > dlen && strcmp(buf + n - (ssize_t)dlen, deleted) == 0)
			buf[n - (ssize_t)dlen] = '\0';
	}
	return 0;
}

/*
 * The rule of a file marked by inode (an exact path, or a file below a
 * prefix root), for an open through a hard link or after a rename.
 */
static const struct fan_rule *
fan_inode_rule(const struct fan_engine *e, dev_t dev, ino_t ino, const char **marked)
{
	for (size_t i = 0; i < e->en_nmarks; i++) {
		const struct fan_emark *m = &e->en_marks[i];
		if (m->em_kind == FAN_PLAN_INODE && m->em_active && m->em_iino == ino &&
		    m->em_idev == dev) {
			*marked = m->em_path;
			return &e->en_policy->fp_rules[m->em_rule];
		}
	}
	return NULL;
}

/*
 * The ignore cache: after an allow, an ignore mark on the file's inode
 * makes later opens of it raise no event. A mark is per inode, not per
 * path, so it is only safe for an inode that no rule can reach by any
 * name:
 *   - hard links: another name may be sensitive, so only files with
 *     st_nlink == 1 (and regular ones) are cached, never a deleted file;
 *   - a matching path or an exact-path inode is never cached;
 *   - bind mounts and mount namespaces: the same inode can show up under
 *     another path (a container's bind mount of ~/.ssh at /root/.ssh);
 *     caching it there would blind ~/.ssh for everyone. So the open must
 *     have come through the very mount the plan resolved the rules of that
 *     filesystem through; then the path it has is the one the rules see;
 *   - writes: the marks do not survive modification, so a file that gets
 *     new content is checked again on its next open;
 *   - renames: a cached file moved into a sensitive directory would keep
 *     its mark. The move group sees FAN_MOVED_TO on every cached
 *     filesystem and the cache is dropped when a move lands under a rule
 *     (fanpolicy_affects). What remains is the window between the rename
 *     and the handling of its notification: an open of the moved file in
 *     that window is not seen. Its content, though, is what was readable
 *     at the old, non-sensitive name since its last write, so the window
 *     discloses nothing that was not already disclosed; filesystems
 *     without the move watch get no cache at all.
 * The count is bounded; at the bound the cache is dropped and refilled.
 * Evictable marks do not pin inodes, so the kernel may forget some early.
 */
static void
fan_cache_maybe(struct fan_engine *e, const struct fan_event *ev, const struct fan_verdict *vd,
    const struct stat *st, fan_decide_fn cb, void *arg)
{
	struct fan_efs *fs;
	uint64_t mnt;
	char *cause = NULL;

	if (e->en_cache_max == 0 || vd->vd_nocache || vd->vd_response != FAN_ALLOW ||
	    ev->ev_rule != NULL || ev->ev_unlinked || !S_ISREG(st->st_mode) ||
	    st->st_nlink != 1)
		return;
	fs = fan_fs_find(e->en_fs, e->en_nfs, st->st_dev);
	if (fs == NULL || !fs->fs_cacheable)
		return;
	if (fanpolicy_mnt_id(ev->ev_fd, "", AT_EMPTY_PATH, &mnt) != 0 || mnt != fs->fs_mnt_id)
		return;
	if (e->en_cached >= e->en_cache_max) {
		if (fan_inode_reset(e, e->en_marks, e->en_nmarks, e->en_fs, e->en_nfs, cb, arg,
		    &cause) != 0) {
			fan_warn(e, "%s", cause);
			free(cause);
			return;
		}
	}
	for (;;) {
		if (fanotify_mark(e->en_fd, FAN_MARK_ADD | e->en_ignore, FANOTIFY_MASK, ev->ev_fd,
		    NULL) == 0) {
			e->en_cached++;
			e->en_stats.st_cached++;
			return;
		}
		if (errno != EINVAL)
			return; /* EEXIST: the inode has a mark of ours already; leave it */
		/* An older kernel: evictable marks (5.19), FAN_MARK_IGNORE (6.0). */
		if (e->en_ignore & FAN_MARK_EVICTABLE) {
			e->en_ignore &= ~(unsigned int)FAN_MARK_EVICTABLE;
		} else if (e->en_ignore & FAN_MARK_IGNORE) {
			e->en_ignore = FAN_MARK_IGNORED_MASK;
		} else {
			fan_warn(e, "fanotify: ignore marks refused (%s); the ignore cache is off",
			    strerror(errno));
			e->en_cache_max = 0;
			return;
		}
	}
}

/* Write one answer; a failed allow is retried as a deny. 0, 1 (denied instead) or -1. */
static int
fan_respond(struct fan_engine *e, int fd, uint32_t response)
{
	struct fanotify_response r;
	int saved;

	memset(&r, 0, sizeof(r));
	r.fd = fd;
	r.response = response;
	if (write(e->en_fd, &r, sizeof(r)) == (ssize_t)sizeof(r))
		return 0;
	saved = errno;
	/* ENOENT: no such event (the opener is gone); nothing left to answer. */
	if (response == FAN_ALLOW && saved != ENOENT) {
		r.response = FAN_DENY;
		if (write(e->en_fd, &r, sizeof(r)) == (ssize_t)sizeof(r))
			return 1;
	}
	errno = saved;
	return -1;
}

/* Decide, answer, cache, report and close one permission event. */
static void
fan_perm(struct fan_engine *e, const struct fanotify_event_metadata *m, fan_decide_fn cb,
    void *arg)
{
	struct fan_event ev;
	struct fan_verdict vd, final;
	char path[PATH_MAX];
	struct stat st;
	int rc, failed = 1;

	memset(&ev, 0, sizeof(ev));
	memset(&final, 0, sizeof(final));
	final.vd_response = FAN_DENY;
	final.vd_reason = FANR_DECISION_ERROR;
	final.vd_record = 1;
	ev.ev_phase = FAN_PHASE_DECIDE;
	ev.ev_pid = m->pid;
	ev.ev_mask = m->mask & (FAN_OPEN_PERM | FAN_OPEN_EXEC_PERM | FAN_ACCESS_PERM);
	ev.ev_fd = m->fd;
	ev.ev_deadline_ms = util_monotonic_ms() + e->en_timeout_ms;
	e->en_stats.st_events++;

	if (fan_event_path(m->fd, path, sizeof(path), &st, &ev.ev_unlinked) != 0 ||
	    fanpolicy_match(e->en_policy, path, &ev.ev_rule) < 0) {
		final.vd_reason = FANR_PATH_UNRESOLVED;
		goto answer;
	}
	ev.ev_path = path;
	ev.ev_dev = st.st_dev;
	ev.ev_ino = st.st_ino;
	ev.ev_nlink = st.st_nlink;
	if (ev.ev_rule == NULL &&
	    (ev.ev_rule = fan_inode_rule(e, st.st_dev, st.st_ino, &ev.ev_inode_path)) != NULL)
		ev.ev_by_inode = 1;
	if (cb == NULL)
		goto answer;
	vd = final;
	rc = cb(&ev, &vd, arg);
	if (rc == FAN_DECIDE_TIMEOUT || util_monotonic_ms() > ev.ev_deadline_ms) {
		/* Bounded decision time: late or undecided is a deny, whatever vd says. */
		final.vd_reason = FANR_DECISION_TIMEOUT;
		e->en_stats.st_timeouts++;
	} else if (rc == 0 && (vd.vd_response == FAN_ALLOW || vd.vd_response == FAN_DENY) &&
	    vd.vd_reason != NULL) {
		final = vd;
		failed = 0;
	}
answer:
	/*
	 * The ignore mark goes on before the answer, so that a write the
	 * opener makes right after it is allowed in already clears it.
	 */
	if (ev.ev_path != NULL && !failed)
		fan_cache_maybe(e, &ev, &final, &st, cb, arg);
	switch (fan_respond(e, m->fd, final.vd_response)) {
	case 0:
		break;
	case 1:
		final.vd_response = FAN_DENY;
		final.vd_reason = FANR_DECISION_ERROR;
		final.vd_record = 1;
		failed = 1;
		break;
	default:
		e->en_stats.st_unanswered++;
		break;
	}
	if (failed)
		e->en_stats.st_failed++;
	if (final.vd_response == FAN_ALLOW)
		e->en_stats.st_allowed++;
	else
		e->en_stats.st_denied++;
	if (cb != NULL) {
		ev.ev_phase = FAN_PHASE_ANSWERED;
		ev.ev_final = &final;
		vd = final;
		(void)cb(&ev, &vd, arg); /* the return value means nothing in this phase */
	}
	close(m->fd);
}

/* Handle one record of the permission group. */
static void
fan_record(struct fan_engine *e, const struct fanotify_event_metadata *m, fan_decide_fn cb,
    void *arg)
{
	if (m->mask & FAN_Q_OVERFLOW) {
		e->en_stats.st_overflows++;
		fan_report(e, cb, arg, FAN_LOST_QUEUE_OVERFLOW);
		if (m->fd >= 0)
			close(m->fd);
		return;
	}
	if (!(m->mask & (FAN_OPEN_PERM | FAN_OPEN_EXEC_PERM | FAN_ACCESS_PERM))) {
		if (m->fd >= 0)
			close(m->fd);
		return;
	}
	if (m->fd < 0) {
		fan_report(e, cb, arg, FAN_LOST_NO_FD);
		return;
	}
	fan_perm(e, m, cb, arg);
}

/* Handle a buffer of permission-group records. */
int
fanotify_engine_dispatch(struct fan_engine *e, const void *buf, size_t len, fan_decide_fn cb,
    void *arg, char **cause)
{
	const char *p = buf;
	size_t left = len;
	int n = 0;

	while (left > 0) {
		struct fanotify_event_metadata m;
		if (left < sizeof(m)) {
			util_cause(cause, "fanotify: truncated record (%zu bytes)", left);
			return -1;
		}
		memcpy(&m, p, sizeof(m));
		if (m.vers != FANOTIFY_METADATA_VERSION) {
			util_cause(cause, "fanotify: metadata version %u, expected %u",
			    (unsigned int)m.vers, (unsigned int)FANOTIFY_METADATA_VERSION);
			return -1;
		}
		if (m.event_len < sizeof(m) || m.event_len > left || m.metadata_len < sizeof(m) ||
		    m.metadata_len > m.event_len) {
			util_cause(cause, "fanotify: malformed record (event_len %u, metadata_len "
			    "%u, %zu bytes left)", m.event_len, (unsigned int)m.metadata_len, left);
			return -1;
		}
		fan_record(e, &m, cb, arg);
		n++;
		p += m.event_len;
		left -= m.event_len;
	}
	return n;
}

/*
 * Could one move (a FAN_MOVED_TO record with a DFID_NAME info) have put a
 * cached inode under a rule? Anything that cannot be read counts as yes.
 */
static int
fan_move_affects(struct fan_engine *e, const char *rec, size_t len, int is_dir)
{
	union {
		struct file_handle fh;
		char space[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} h;
	const size_t hoff = sizeof(struct fanotify_event_info_fid);
	char link[64], dir[PATH_MAX], path[PATH_MAX];
	struct fan_efs *fs = NULL;
	struct file_handle fh;
	const char *name;
	size_t nameoff, namelen;
	ssize_t n;
	int dfd;

	if (len < hoff + sizeof(fh))
		return 1;
	memcpy(&fh, rec + hoff, sizeof(fh));
	if (fh.handle_bytes > MAX_HANDLE_SZ || len < hoff + sizeof(fh) + fh.handle_bytes + 1)
		return 1;
	memcpy(&h, rec + hoff, sizeof(fh) + fh.handle_bytes);
	nameoff = hoff + sizeof(fh) + fh.handle_bytes;
	name = rec + nameoff;
	namelen = strnlen(name, len - nameoff);
	if (namelen == 0 || namelen == len - nameoff)
		return 1;
	for (size_t k = 0; k < e->en_nfs; k++) {
		/* fsid follows the 4-byte header of the info record */
		if (e->en_fs[k].fs_moves && memcmp(rec + 4, e->en_fs[k].fs_fsid, 8) == 0) {
			fs = &e->en_fs[k];
			break;
		}
	}
	if (fs == NULL)
		return 1;
	/* O_PATH: a handle open that raises no permission event of our own. */
	dfd = open_by_handle_at(fs->fs_dirfd, &h.fh, O_PATH | O_CLOEXEC);
	if (dfd < 0)
		return 1;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", dfd);
	n = readlink(link, dir, sizeof(dir));
	close(dfd);
	if (n < 0 || (size_t)n >= sizeof(dir))
		return 1;
	dir[n] = '\0';
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", strcmp(dir, "/") == 0 ? "" : dir,
	    name) >= sizeof(path))
		return 1;
	return fanpolicy_affects(e->en_policy, path, is_dir);
}

/* Read the move group; drop the ignore cache if a move may matter. */
static void
fan_moves(struct fan_engine *e, fan_decide_fn cb, void *arg)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
	char *cause = NULL;
	int flush = 0;

	if (e->en_mfd < 0)
		return;
	for (int round = 0; round < FAN_READ_ROUNDS; round++) {
		ssize_t n = read(e->en_mfd, buf, sizeof(buf));
		size_t left;
		const char *p = buf;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			flush = 1; /* cannot tell what moved */
			break;
		}
		for (left = (size_t)n; left >= sizeof(struct fanotify_event_metadata);) {
			struct fanotify_event_metadata m;
			memcpy(&m, p, sizeof(m));
			if (m.vers != FANOTIFY_METADATA_VERSION || m.event_len < sizeof(m) ||
			    m.event_len > left || m.metadata_len < sizeof(m) ||
			    m.metadata_len > m.event_len) {
				flush = 1;
				break;
			}
			if (m.fd >= 0)
				close(m.fd);
			if (m.mask & FAN_Q_OVERFLOW) {
				e->en_stats.st_rename_overflows++;
				flush = 1;
			} else if (m.mask & FAN_MOVED_TO) {
				const char *rec = p + m.metadata_len;
				size_t rlen = m.event_len - m.metadata_len;
				e->en_stats.st_renames++;
				while (!flush && rlen >= sizeof(struct fanotify_event_info_header)) {
					struct fanotify_event_info_header hdr;
					memcpy(&hdr, rec, sizeof(hdr));
					if (hdr.len < sizeof(hdr) || hdr.len > rlen) {
						flush = 1;
						break;
					}
					if (hdr.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME) {
						flush = fan_move_affects(e, rec, hdr.len,
						    (m.mask & FAN_ONDIR) != 0);
						break;
					}
					rec += hdr.len;
					rlen -= hdr.len;
				}
			}
			p += m.event_len;
			left -= m.event_len;
		}
	}
	if (flush && fan_inode_reset(e, e->en_marks, e->en_nmarks, e->en_fs, e->en_nfs, cb, arg,
	    &cause) != 0) {
		fan_warn(e, "%s", cause);
		free(cause);
	}
}

/* Handle whatever both groups have queued, without blocking. */
int
fanotify_engine_handle(struct fan_engine *e, fan_decide_fn cb, void *arg, char **cause)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
	int total = 0;

	/* Moves first, so that a rename into a rule root is seen before later opens. */
	fan_moves(e, cb, arg);
	for (int round = 0; round < FAN_READ_ROUNDS; round++) {
		ssize_t n = read(e->en_fd, buf, sizeof(buf));
		int k;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			/* The kernel denies an event it could not hand over (EMFILE, ENFILE...). */
			int saved = errno;
			fan_report(e, cb, arg, FAN_LOST_READ);
			util_cause(cause, "fanotify: read: %s", strerror(saved));
			return -1;
		}
		if (n == 0)
			break;
		if ((k = fanotify_engine_dispatch(e, buf, (size_t)n, cb, arg, cause)) < 0)
			return -1;
		total += k;
	}
	return total;
}

/* Remove the marks and close the groups. */
void
fanotify_engine_close(struct fan_engine *e)
{
	if (e == NULL)
		return;
	/*
	 * The marks are not flushed: closing the last fd of the group removes
	 * them, and while another process holds the group (boundaryd, across a
	 * sensord restart) they must stay.
	 */
	if (e->en_fd >= 0)
		close(e->en_fd);
	if (e->en_mfd >= 0)
		close(e->en_mfd);
	if (e->en_epfd >= 0)
		close(e->en_epfd);
	fan_marks_free(e->en_marks, e->en_nmarks);
	fan_fs_free(e->en_fs, e->en_nfs);
	fanpolicy_warnings_free(&e->en_warn);
	fanpolicy_warnings_free(&e->en_sticky);
	free(e);
}
