/*
 * snapshot.c: workspace snapshots, diffs and transactional merges (see
 * snapshot.h for the trust model).
 *
 * Root does the copying, but a workspace is read with the filesystem
 * identity of the user who named it (setfsuid/setfsgid, per thread), so
 * a user can never snapshot a tree they could not read themselves.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <json-c/json.h>

#include "safefs.h"
#include "btrfs.h"
#include "snapshot.h"
#include "util.h"

#define SNAP_BUF (64 * 1024)
#define SNAP_TMP_PREFIX ".gensee-merge-"
/*
 * What a merge keeps of a fork entry's mode. Threat: a fork planting a
 * set-user-ID (or set-group-ID) file that the user, or root, later runs
 * from the source: merged entries never carry those bits.
 */
#define SNAP_MERGE_MODES (07777 & ~(mode_t)(S_ISUID | S_ISGID))

/* -- filesystem identity -- */

static int
creds_enter(const struct snapshot_creds *c)
{
	if (c == NULL || !c->sc_set)
		return 0;
	setfsgid(c->sc_gid);
	setfsuid(c->sc_uid);
	/* setfsuid reports nothing: read the value back (-1 changes nothing). */
	if ((uid_t)setfsuid((uid_t)-1) != c->sc_uid || (gid_t)setfsgid((gid_t)-1) != c->sc_gid)
		return -1;
	return 0;
}

static void
creds_leave(const struct snapshot_creds *c)
{
	if (c == NULL || !c->sc_set)
		return;
	setfsuid(0);
	setfsgid(0);
}

static enum snapshot_entry_kind
kind_of(const struct stat *st)
{
	if (S_ISREG(st->st_mode))
		return SE_FILE;
	if (S_ISDIR(st->st_mode))
		return SE_DIR;
	if (S_ISLNK(st->st_mode))
		return SE_LINK;
	return SE_OTHER;
}

const char *
snapshot_entry_kind_name(enum snapshot_entry_kind k)
{
	switch (k) {
	case SE_ABSENT:
		return "absent";
	case SE_FILE:
		return "file";
	case SE_DIR:
		return "directory";
	case SE_LINK:
		return "symlink";
	case SE_OTHER:
		return "other";
	}
	return "other";
}

const char *
snapshot_change_kind_name(enum snapshot_change_kind k)
{
	switch (k) {
	case SC_ADDED:
		return "added";
	case SC_MODIFIED:
		return "modified";
	case SC_DELETED:
		return "deleted";
	}
	return "modified";
}

/*
 * Open name in dir for reading, only if it is (still) a regular file.
 * Threat: an agent swapping a file for a fifo between our lstat and our
 * open, so that the root daemon blocks in open(2) for good. O_NONBLOCK
 * keeps a fifo's open from waiting; it changes nothing for a file.
 */
static int
open_reg(int dir, const char *name)
{
	struct stat st;
	int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

/* -- copy -- */

struct copyctx {
	int cc_flags;
	const struct snapshot_creds *cc_src;
	const struct snapshot_creds *cc_dst;
	struct snapshot_stats *cc_st;
	char **cc_cause;
};

static int
copy_bytes(int in, int out, uint64_t *total, char **cause, const char *shown)
{
	char *buf = malloc(SNAP_BUF);

	if (buf == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	for (;;) {
		ssize_t n = read(in, buf, SNAP_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			util_cause(cause, "%s: read: %s", shown, strerror(errno));
			free(buf);
			return -1;
		}
		if (n == 0)
			break;
		if (util_write_all(out, buf, (size_t)n) != 0) {
			util_cause(cause, "%s: write: %s", shown, strerror(errno));
			free(buf);
			return -1;
		}
		if (total != NULL)
			*total += (uint64_t)n;
	}
	free(buf);
	return 0;
}

/* Copy the trusted.overlay.* attributes (opaque directories) of an upper. */
static int
copy_overlay_xattrs(int sfd, int dfd, char **cause, const char *shown)
{
	char names[4096], val[4096];
	ssize_t n = flistxattr(sfd, names, sizeof(names));

	if (n < 0) {
		if (errno == ENOTSUP)
			return 0;
		util_cause(cause, "%s: listxattr: %s", shown, strerror(errno));
		return -1;
	}
	for (ssize_t off = 0; off < n; off += (ssize_t)strlen(names + off) + 1) {
		const char *name = names + off;
		if (strncmp(name, "trusted.overlay.", 16) != 0)
			continue;
		ssize_t vl = fgetxattr(sfd, name, val, sizeof(val));
		if (vl < 0 || fsetxattr(dfd, name, val, (size_t)vl, 0) != 0) {
			util_cause(cause, "%s: %s: %s", shown, name, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Owner, mode, times of a copied entry: chown first (it clears set-id bits). */
static int
copy_meta(struct copyctx *c, int dfd, const struct stat *sst, const char *shown)
{
	struct timespec ts[2] = { sst->st_atim, sst->st_mtim };

	if ((c->cc_dst == NULL || !c->cc_dst->sc_set) &&
	    fchown(dfd, sst->st_uid, sst->st_gid) != 0) {
		util_cause(c->cc_cause, "%s: chown: %s", shown, strerror(errno));
		return -1;
	}
	if (fchmod(dfd, sst->st_mode & 07777) != 0 || futimens(dfd, ts) != 0) {
		util_cause(c->cc_cause, "%s: chmod/utimens: %s", shown, strerror(errno));
		return -1;
	}
	return 0;
}

static int copy_dir(struct copyctx *c, int sfd, int dparent, const char *name,
    const struct stat *sst, int depth);

static int
copy_entry(struct copyctx *c, int sfd, int dfd, const char *name, int depth)
{
	struct stat st;
	int rv = -1;

	if (creds_enter(c->cc_src) != 0) {
		util_cause(c->cc_cause, "cannot take the caller's filesystem identity");
		return -1;
	}
	if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		util_cause(c->cc_cause, "%s: %s", name, strerror(errno));
		creds_leave(c->cc_src);
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		int cfd = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		creds_leave(c->cc_src);
		if (cfd < 0) {
			util_cause(c->cc_cause, "%s: %s", name, strerror(errno));
			return -1;
		}
		rv = copy_dir(c, cfd, dfd, name, &st, depth + 1);
		close(cfd);
		return rv;
	}
	if (S_ISREG(st.st_mode)) {
		int in = open_reg(sfd, name);
		creds_leave(c->cc_src);
		if (in < 0) {
			util_cause(c->cc_cause, "%s: %s", name, strerror(errno));
			return -1;
		}
		if (creds_enter(c->cc_dst) != 0) {
			close(in);
			util_cause(c->cc_cause, "cannot take the caller's filesystem identity");
			return -1;
		}
		int out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    0600);
		if (out < 0) {
			util_cause(c->cc_cause, "%s: create: %s", name, strerror(errno));
		} else {
			rv = copy_bytes(in, out, &c->cc_st->ss_bytes, c->cc_cause, name);
			if (rv == 0 && (c->cc_flags & SNAPSHOT_F_OVERLAY))
				rv = copy_overlay_xattrs(in, out, c->cc_cause, name);
			if (rv == 0)
				rv = copy_meta(c, out, &st, name);
			close(out);
		}
		creds_leave(c->cc_dst);
		close(in);
		c->cc_st->ss_files++;
		return rv;
	}
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(sfd, name, target, sizeof(target) - 1);
		creds_leave(c->cc_src);
		if (n < 0) {
			util_cause(c->cc_cause, "%s: readlink: %s", name, strerror(errno));
			return -1;
		}
		target[n] = '\0';
		if (creds_enter(c->cc_dst) != 0) {
			util_cause(c->cc_cause, "cannot take the caller's filesystem identity");
			return -1;
		}
		struct timespec ts[2] = { st.st_atim, st.st_mtim };
		/* The link is copied as a link: its target is never opened here. */
		if (symlinkat(target, dfd, name) != 0 ||
		    ((c->cc_dst == NULL || !c->cc_dst->sc_set) &&
		    fchownat(dfd, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) != 0) ||
		    utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) != 0)
			util_cause(c->cc_cause, "%s: symlink: %s", name, strerror(errno));
		else
			rv = 0;
		creds_leave(c->cc_dst);
		c->cc_st->ss_links++;
		return rv;
	}
	creds_leave(c->cc_src);
	/* An overlay whiteout (0/0 character device) marks a deleted entry. */
	if ((c->cc_flags & SNAPSHOT_F_OVERLAY) && S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
		if (mknodat(dfd, name, S_IFCHR | 0, makedev(0, 0)) != 0) {
			util_cause(c->cc_cause, "%s: whiteout: %s", name, strerror(errno));
			return -1;
		}
		return 0;
	}
	/* Threat: a device node planted in a workspace; it is never copied. */
	c->cc_st->ss_skipped++;
	return 0;
}

static int
copy_dir(struct copyctx *c, int sfd, int dparent, const char *name, const struct stat *sst,
    int depth)
{
	DIR *d;
	struct dirent *de;
	int dfd, rv = 0, lfd;

	if (depth > SNAPSHOT_DEPTH_MAX) {
		util_cause(c->cc_cause, "%s: deeper than %d levels", name, SNAPSHOT_DEPTH_MAX);
		return -1;
	}
	if (creds_enter(c->cc_dst) != 0) {
		util_cause(c->cc_cause, "cannot take the caller's filesystem identity");
		return -1;
	}
	if (!(depth == 0 && (c->cc_flags & SNAPSHOT_F_INTO)) && mkdirat(dparent, name, 0700) != 0) {
		creds_leave(c->cc_dst);
		util_cause(c->cc_cause, "%s: mkdir: %s", name, strerror(errno));
		return -1;
	}
	dfd = openat(dparent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	creds_leave(c->cc_dst);
	if (dfd < 0) {
		util_cause(c->cc_cause, "%s: %s", name, strerror(errno));
		return -1;
	}
	c->cc_st->ss_dirs++;
	lfd = dup(sfd);
	if (lfd < 0 || (d = fdopendir(lfd)) == NULL) {
		util_cause(c->cc_cause, "%s: opendir: %s", name, strerror(errno));
		if (lfd >= 0)
			close(lfd);
		close(dfd);
		return -1;
	}
	rewinddir(d);
	errno = 0;
	while (rv == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		rv = copy_entry(c, sfd, dfd, de->d_name, depth);
		errno = 0;
	}
	if (rv == 0 && errno != 0) {
		util_cause(c->cc_cause, "%s: readdir: %s", name, strerror(errno));
		rv = -1;
	}
	closedir(d);
	if (rv == 0 && creds_enter(c->cc_dst) == 0) {
		if ((c->cc_flags & SNAPSHOT_F_OVERLAY) &&
		    copy_overlay_xattrs(sfd, dfd, c->cc_cause, name) != 0)
			rv = -1;
		if (rv == 0)
			rv = copy_meta(c, dfd, sst, name);
		creds_leave(c->cc_dst);
	}
	close(dfd);
	return rv;
}

int
snapshot_copy(int srcdir, int dstparent, const char *dstname, int flags,
    const struct snapshot_creds *src_as, const struct snapshot_creds *dst_as,
    struct snapshot_stats *st, char **cause)
{
	struct copyctx c = { flags, src_as, dst_as, st, cause };
	struct stat sst;

	memset(st, 0, sizeof(*st));
	if (fstat(srcdir, &sst) != 0 || !S_ISDIR(sst.st_mode)) {
		util_cause(cause, "source is not a directory");
		return -1;
	}
	return copy_dir(&c, srcdir, dstparent, dstname, &sst, 0);
}

/* -- remove -- */

static int
remove_at(int parent, const char *name, int depth, char **cause)
{
	struct stat st;

	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno == ENOENT)
			return 0;
		util_cause(cause, "%s: %s", name, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(parent, name, 0) != 0 && errno != ENOENT) {
			util_cause(cause, "%s: unlink: %s", name, strerror(errno));
			return -1;
		}
		return 0;
	}
	if (depth > SNAPSHOT_DEPTH_MAX) {
		util_cause(cause, "%s: too deep", name);
		return -1;
	}
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		util_cause(cause, "%s: %s", name, strerror(errno));
		return -1;
	}
	/*
	 * A btrfs subvolume (a tcloned snapshot, or one an agent made in its
	 * workspace): destroyed whole when the ioctl allows it; a writable one
	 * holding subvolumes of its own is emptied below instead (rmdir
	 * removes an empty subvolume).
	 */
	if (gbtrfs_is_subvol(fd) && gbtrfs_subvol_destroy(parent, name, NULL) == 0) {
		close(fd);
		return 0;
	}
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		util_cause(cause, "%s: opendir: %s", name, strerror(errno));
		return -1;
	}
	struct dirent *de;
	int rv = 0;
	while (rv == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		rv = remove_at(dirfd(d), de->d_name, depth + 1, cause);
	}
	closedir(d);
	if (rv == 0 && unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
		util_cause(cause, "%s: rmdir: %s", name, strerror(errno));
		rv = -1;
	}
	return rv;
}

int
snapshot_remove(int parent, const char *name, char **cause)
{
	if (strchr(name, '/') != NULL || strcmp(name, "..") == 0 || strcmp(name, ".") == 0) {
		util_cause(cause, "%s: not one path component", name);
		return -1;
	}
	return remove_at(parent, name, 0, cause);
}

/* -- path rules -- */

int
snapshot_path_rel(const char *workspace, const char *in, char *rel, size_t len, char **cause)
{
	const char *p = in;
	size_t wl, o = 0;

	if (in == NULL || in[0] == '\0') {
		util_cause(cause, "empty path");
		return -1;
	}
	if (in[0] == '/') {
		wl = workspace != NULL ? strlen(workspace) : 0;
		while (wl > 1 && workspace[wl - 1] == '/')
			wl--;
		if (wl > 1 && strncmp(in, workspace, wl) == 0 && (in[wl] == '/' || in[wl] == '\0'))
			p = in + wl;
		else if (strncmp(in, "/workspace", 10) == 0 && (in[10] == '/' || in[10] == '\0'))
			p = in + 10;
		else {
			/* Threat: a merge writing outside the workspace. */
			util_cause(cause, "%s: an absolute path outside the workspace", in);
			return -1;
		}
	}
	while (*p != '\0') {
		const char *e;
		size_t n;

		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		e = strchr(p, '/');
		n = e != NULL ? (size_t)(e - p) : strlen(p);
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
			/* Threat: ".." climbing out of the workspace; "." is refused with it. */
			util_cause(cause, "%s: '.' and '..' components are not allowed", in);
			return -1;
		}
		if (n > NAME_MAX || o + n + 2 > len) {
			util_cause(cause, "%s: path too long", in);
			return -1;
		}
		if (o > 0)
			rel[o++] = '/';
		memcpy(rel + o, p, n);
		o += n;
		p += n;
	}
	if (o == 0) {
		util_cause(cause, "%s: names the whole workspace (use --filesystem)", in);
		return -1;
	}
	rel[o] = '\0';
	return 0;
}

/* -- diff -- */

struct ent {
	char *e_name;
	struct stat e_st;
};

static int
ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ent *)a)->e_name, ((const struct ent *)b)->e_name);
}

static void
ents_free(struct ent *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].e_name);
	free(v);
}

/* The sorted entries of the directory fd (lstat of each). */
static int
list_dir(int fd, struct ent **out, size_t *n, char **cause)
{
	struct ent *v = NULL;
	size_t cap = 0, k = 0;
	int lfd = dup(fd);
	DIR *d;
	struct dirent *de;

	*out = NULL;
	*n = 0;
	if (lfd < 0 || (d = fdopendir(lfd)) == NULL) {
		if (lfd >= 0)
			close(lfd);
		util_cause(cause, "opendir: %s", strerror(errno));
		return -1;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (k == cap) {
			size_t nc = cap ? cap * 2 : 16;
			struct ent *nv = realloc(v, nc * sizeof(*v));
			if (nv == NULL)
				goto nomem;
			v = nv;
			cap = nc;
		}
		if ((v[k].e_name = strdup(de->d_name)) == NULL)
			goto nomem;
		if (fstatat(fd, de->d_name, &v[k].e_st, AT_SYMLINK_NOFOLLOW) != 0) {
			/* Removed since readdir (a running agent): it is not there. */
			if (errno == ENOENT) {
				free(v[k].e_name);
				continue;
			}
			util_cause(cause, "%s: %s", de->d_name, strerror(errno));
			free(v[k].e_name);
			ents_free(v, k);
			closedir(d);
			return -1;
		}
		k++;
	}
	closedir(d);
	if (k > 1)
		qsort(v, k, sizeof(*v), ent_cmp);
	*out = v;
	*n = k;
	return 0;
nomem:
	ents_free(v, k);
	closedir(d);
	util_cause(cause, "out of memory");
	return -1;
}

static int
changes_add(struct snapshot_changes *c, const char *prefix, const char *name,
    enum snapshot_change_kind kind, enum snapshot_entry_kind before,
    enum snapshot_entry_kind after, int64_t size, char **cause)
{
	char path[PATH_MAX];

	if (c->scs_n >= SNAPSHOT_CHANGES_MAX) {
		util_cause(cause, "more than %d changes", SNAPSHOT_CHANGES_MAX);
		return -1;
	}
	if ((size_t)snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "/" : "", name) >=
	    sizeof(path)) {
		util_cause(cause, "%s/%s: path too long", prefix, name);
		return -1;
	}
	if (c->scs_n == c->scs_cap) {
		size_t nc = c->scs_cap ? c->scs_cap * 2 : 64;
		struct snapshot_change *nv = realloc(c->scs_v, nc * sizeof(*nv));
		if (nv == NULL) {
			util_cause(cause, "out of memory");
			return -1;
		}
		c->scs_v = nv;
		c->scs_cap = nc;
	}
	struct snapshot_change *e = &c->scs_v[c->scs_n];
	if ((e->sc_path = strdup(path)) == NULL) {
		util_cause(cause, "out of memory");
		return -1;
	}
	e->sc_kind = kind;
	e->sc_before = before;
	e->sc_after = after;
	e->sc_size = size;
	c->scs_n++;
	return 0;
}

void
snapshot_changes_free(struct snapshot_changes *c)
{
	for (size_t i = 0; i < c->scs_n; i++)
		free(c->scs_v[i].sc_path);
	free(c->scs_v);
	memset(c, 0, sizeof(*c));
}

static int
join_path(char *out, size_t len, const char *prefix, const char *name)
{
	return (size_t)snprintf(out, len, "%s%s%s", prefix, prefix[0] ? "/" : "", name) < len ? 0 : -1;
}

static int64_t
file_size(const struct stat *st)
{
	return S_ISREG(st->st_mode) ? (int64_t)st->st_size : -1;
}

/* Every entry of the subtree parent/name, pre-order (added) or post-order (deleted). */
static int
subtree(struct snapshot_changes *out, int parent, const char *prefix, const struct ent *e,
    int added, int depth, char **cause)
{
	enum snapshot_entry_kind k = kind_of(&e->e_st);
	int rv = 0;

	if (depth > SNAPSHOT_DEPTH_MAX) {
		util_cause(cause, "%s: too deep", e->e_name);
		return -1;
	}
	if (added && changes_add(out, prefix, e->e_name, SC_ADDED, SE_ABSENT, k,
	    file_size(&e->e_st), cause) != 0)
		return -1;
	if (k == SE_DIR) {
		char sub[PATH_MAX];
		struct ent *v;
		size_t n;
		int fd = openat(parent, e->e_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || join_path(sub, sizeof(sub), prefix, e->e_name) != 0) {
			util_cause(cause, "%s: %s", e->e_name, fd < 0 ? strerror(errno) : "too long");
			if (fd >= 0)
				close(fd);
			return -1;
		}
		if (list_dir(fd, &v, &n, cause) != 0) {
			close(fd);
			return -1;
		}
		for (size_t i = 0; rv == 0 && i < n; i++)
			rv = subtree(out, fd, sub, &v[i], added, depth + 1, cause);
		ents_free(v, n);
		close(fd);
		if (rv != 0)
			return -1;
	}
	if (!added && changes_add(out, prefix, e->e_name, SC_DELETED, k, SE_ABSENT, -1, cause) != 0)
		return -1;
	return 0;
}

/* 1 when the regular files a and b (names in dirs) have the same bytes. */
static int
same_content(int ad, const char *an, int bd, const char *bn, char **cause)
{
	int a = open_reg(ad, an);
	int b = open_reg(bd, bn);
	char *ba = malloc(SNAP_BUF), *bb = malloc(SNAP_BUF);
	int rv = -1;

	if (a < 0 || b < 0 || ba == NULL || bb == NULL) {
		util_cause(cause, "%s: %s", an, strerror(errno ? errno : ENOMEM));
		goto out;
	}
	for (;;) {
		ssize_t na = read(a, ba, SNAP_BUF), nb;
		size_t got = 0;
		if (na < 0) {
			util_cause(cause, "%s: read: %s", an, strerror(errno));
			goto out;
		}
		while (got < (size_t)na) {
			nb = read(b, bb + got, (size_t)na - got);
			if (nb < 0) {
				util_cause(cause, "%s: read: %s", bn, strerror(errno));
				goto out;
			}
			if (nb == 0)
				break;
			got += (size_t)nb;
		}
		if (got != (size_t)na || memcmp(ba, bb, got) != 0) {
			rv = 0;
			goto out;
		}
		if (na == 0) {
			/* a is done: b must be done too. */
			rv = read(b, bb, 1) == 0;
			goto out;
		}
	}
out:
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	free(ba);
	free(bb);
	return rv;
}

/*
 * 1 when the entries (already lstat'ed) are the same: kind, permission
 * bits, and the bytes of a file or the target of a link. A directory is
 * compared by its mode only (its entries are compared one by one).
 * "Other" entries (devices, fifos) are never the same.
 */
static int
same_entry(int ad, const char *an, const struct stat *as, int bd, const char *bn,
    const struct stat *bs, char **cause)
{
	enum snapshot_entry_kind ka = kind_of(as), kb = kind_of(bs);

	if (ka != kb || (as->st_mode & 07777) != (bs->st_mode & 07777))
		return 0;
	switch (ka) {
	case SE_DIR:
		return 1;
	case SE_FILE:
		if (as->st_size != bs->st_size)
			return 0;
		return same_content(ad, an, bd, bn, cause);
	case SE_LINK: {
		char ta[PATH_MAX], tb[PATH_MAX];
		ssize_t na = readlinkat(ad, an, ta, sizeof(ta)), nb = readlinkat(bd, bn, tb, sizeof(tb));
		if (na < 0 || nb < 0) {
			util_cause(cause, "%s: readlink: %s", an, strerror(errno));
			return -1;
		}
		return na == nb && memcmp(ta, tb, (size_t)na) == 0;
	}
	case SE_ABSENT:
	case SE_OTHER:
		return 0;
	}
	return 0;
}

static int
diff_dir(int bfd, int vfd, const char *prefix, struct snapshot_changes *out, int depth,
    char **cause)
{
	struct ent *bv = NULL, *vv = NULL;
	size_t bn = 0, vn = 0, i = 0, j = 0;
	int rv = 0;

	if (depth > SNAPSHOT_DEPTH_MAX) {
		util_cause(cause, "%s: too deep", prefix);
		return -1;
	}
	if (list_dir(bfd, &bv, &bn, cause) != 0)
		return -1;
	if (list_dir(vfd, &vv, &vn, cause) != 0) {
		ents_free(bv, bn);
		return -1;
	}
	while (rv == 0 && (i < bn || j < vn)) {
		int c = i == bn ? 1 : j == vn ? -1 : strcmp(bv[i].e_name, vv[j].e_name);
		if (c < 0) {
			rv = subtree(out, bfd, prefix, &bv[i++], 0, depth, cause);
			continue;
		}
		if (c > 0) {
			rv = subtree(out, vfd, prefix, &vv[j++], 1, depth, cause);
			continue;
		}
		struct ent *b = &bv[i++], *v = &vv[j++];
		enum snapshot_entry_kind kb = kind_of(&b->e_st), kv = kind_of(&v->e_st);
		if (kb == SE_DIR && kv == SE_DIR) {
			char sub[PATH_MAX];
			int cb, cv;
			if ((b->e_st.st_mode & 07777) != (v->e_st.st_mode & 07777) &&
			    changes_add(out, prefix, v->e_name, SC_MODIFIED, SE_DIR, SE_DIR, -1,
			    cause) != 0) {
				rv = -1;
				break;
			}
			if (join_path(sub, sizeof(sub), prefix, v->e_name) != 0) {
				util_cause(cause, "%s: path too long", v->e_name);
				rv = -1;
				break;
			}
			cb = openat(bfd, b->e_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			cv = openat(vfd, v->e_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cb < 0 || cv < 0) {
				util_cause(cause, "%s: %s", sub, strerror(errno));
				rv = -1;
			} else {
				rv = diff_dir(cb, cv, sub, out, depth + 1, cause);
			}
			if (cb >= 0)
				close(cb);
			if (cv >= 0)
				close(cv);
			continue;
		}
		int same = same_entry(bfd, b->e_name, &b->e_st, vfd, v->e_name, &v->e_st, cause);
		if (same < 0) {
			rv = -1;
			break;
		}
		if (same)
			continue;
		if (kb == SE_DIR) {
			/* A directory became something else: its entries go first. */
			char sub[PATH_MAX];
			struct ent *cv;
			size_t cn;
			int cb = openat(bfd, b->e_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cb < 0 || join_path(sub, sizeof(sub), prefix, b->e_name) != 0 ||
			    list_dir(cb, &cv, &cn, cause) != 0) {
				util_cause(cause, "%s: cannot list", b->e_name);
				if (cb >= 0)
					close(cb);
				rv = -1;
				break;
			}
			for (size_t k = 0; rv == 0 && k < cn; k++)
				rv = subtree(out, cb, sub, &cv[k], 0, depth + 1, cause);
			ents_free(cv, cn);
			close(cb);
		}
		if (rv == 0)
			rv = changes_add(out, prefix, v->e_name, SC_MODIFIED, kb, kv,
			    file_size(&v->e_st), cause);
		if (rv == 0 && kv == SE_DIR) {
			char sub[PATH_MAX];
			struct ent *cv;
			size_t cn;
			int cd = openat(vfd, v->e_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cd < 0 || join_path(sub, sizeof(sub), prefix, v->e_name) != 0 ||
			    list_dir(cd, &cv, &cn, cause) != 0) {
				util_cause(cause, "%s: cannot list", v->e_name);
				if (cd >= 0)
					close(cd);
				rv = -1;
				break;
			}
			for (size_t k = 0; rv == 0 && k < cn; k++)
				rv = subtree(out, cd, sub, &cv[k], 1, depth + 1, cause);
			ents_free(cv, cn);
			close(cd);
		}
	}
	ents_free(bv, bn);
	ents_free(vv, vn);
	return rv;
}

int
snapshot_diff(int basefd, int viewfd, struct snapshot_changes *out, char **cause)
{
	memset(out, 0, sizeof(*out));
	if (diff_dir(basefd, viewfd, "", out, 0, cause) != 0) {
		snapshot_changes_free(out);
		return -1;
	}
	return 0;
}

struct json_object *
snapshot_changes_json(const struct snapshot_changes *c)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; i < c->scs_n; i++) {
		const struct snapshot_change *e = &c->scs_v[i];
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "path", json_object_new_string(e->sc_path));
		json_object_object_add(o, "change",
		    json_object_new_string(snapshot_change_kind_name(e->sc_kind)));
		json_object_object_add(o, "before",
		    json_object_new_string(snapshot_entry_kind_name(e->sc_before)));
		json_object_object_add(o, "after",
		    json_object_new_string(snapshot_entry_kind_name(e->sc_after)));
		if (e->sc_size >= 0)
			json_object_object_add(o, "size", json_object_new_int64(e->sc_size));
		json_object_array_add(a, o);
	}
	return a;
}

/* -- merge planning -- */

/*
 * The directory that holds rel beneath root, opened without symlinks and
 * without leaving root, and the last component in *name. Returns the fd
 * (a dup of root for a top-level name) or -1.
 */
static int
open_parent(int root, const char *rel, const char **name)
{
	const char *slash = strrchr(rel, '/');
	char parent[PATH_MAX];

	if (slash == NULL) {
		*name = rel;
		return fcntl(root, F_DUPFD_CLOEXEC, 0);
	}
	if ((size_t)(slash - rel) >= sizeof(parent)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(parent, rel, (size_t)(slash - rel));
	parent[slash - rel] = '\0';
	*name = slash + 1;
	return safefs_opendir(root, parent);
}

/* 1 when some ancestor of rel beneath root is a symlink (or cannot be looked at). */
static int
symlink_on_the_way(int root, const char *rel)
{
	char pre[PATH_MAX];
	const char *p = rel;

	while ((p = strchr(p, '/')) != NULL) {
		const char *name;
		struct stat st;
		int fd;

		if ((size_t)(p - rel) >= sizeof(pre))
			return 1;
		memcpy(pre, rel, (size_t)(p - rel));
		pre[p - rel] = '\0';
		fd = open_parent(root, pre, &name);
		if (fd < 0)
			return errno == ENOENT || errno == ENOTDIR ? 0 : 1;
		int r = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW);
		close(fd);
		if (r != 0)
			return errno == ENOENT ? 0 : 1;
		if (S_ISLNK(st.st_mode))
			return 1;
		if (!S_ISDIR(st.st_mode))
			return 0;
		p++;
	}
	return 0;
}

/*
 * lstat of rel beneath root. 1 present, 0 absent, -1 for a path that
 * cannot be looked at safely (a symlink or a non-directory on the way):
 * never the same as anything, so it plans as a conflict.
 */
static int
stat_rel(int root, const char *rel, int *pfd, const char **name, struct stat *st)
{
	int fd = open_parent(root, rel, name);

	*pfd = -1;
	/*
	 * A parent that is missing or not a directory: the path does not
	 * exist. A symlink on the way is never "absent" (threat: a planted
	 * link made to look like a path the merge may create).
	 */
	if (fd < 0) {
		if (errno != ENOENT && errno != ENOTDIR)
			return -1;
		return symlink_on_the_way(root, rel) ? -1 : 0;
	}
	if (fstatat(fd, *name, st, AT_SYMLINK_NOFOLLOW) != 0) {
		int e = errno;
		close(fd);
		return e == ENOENT || e == ENOTDIR ? 0 : -1;
	}
	*pfd = fd;
	return 1;
}

/* 1 same, 0 different, -1 error: rel in tree a and in tree b. */
static int
same_rel(int a, int b, const char *rel, char **cause)
{
	struct stat sa, sb;
	const char *na, *nb;
	int pa, pb, ha = stat_rel(a, rel, &pa, &na, &sa), hb = stat_rel(b, rel, &pb, &nb, &sb);
	int rv;

	if (ha < 0 || hb < 0)
		rv = 0;
	else if (ha == 0 || hb == 0)
		rv = ha == hb;
	else
		rv = same_entry(pa, na, &sa, pb, nb, &sb, cause);
	if (pa >= 0)
		close(pa);
	if (pb >= 0)
		close(pb);
	return rv;
}

/* 1 when every entry of directory rel in src is also in base (nothing new in it). */
static int
no_new_entries(int base, int src, const char *rel, char **cause)
{
	int bfd = safefs_opendir(base, rel), sfd = safefs_opendir(src, rel);
	struct ent *bv = NULL, *sv = NULL;
	size_t bn = 0, sn = 0;
	int rv = 0;

	if (sfd < 0) {
		rv = errno == ENOENT;
		goto out;
	}
	if (bfd < 0 || list_dir(bfd, &bv, &bn, cause) != 0 || list_dir(sfd, &sv, &sn, cause) != 0)
		goto out;
	rv = 1;
	for (size_t i = 0; rv && i < sn; i++) {
		struct ent key = { .e_name = sv[i].e_name };
		rv = bsearch(&key, bv, bn, sizeof(*bv), ent_cmp) != NULL;
	}
out:
	ents_free(bv, bn);
	ents_free(sv, sn);
	if (bfd >= 0)
		close(bfd);
	if (sfd >= 0)
		close(sfd);
	return rv;
}

static int
selected(const struct snapshot_change *c, const char *const *paths, size_t npaths)
{
	if (npaths == 0)
		return 1;
	for (size_t i = 0; i < npaths; i++) {
		size_t pl = strlen(paths[i]), cl = strlen(c->sc_path);
		/* At or below the selector. */
		if (strncmp(c->sc_path, paths[i], pl) == 0 &&
		    (c->sc_path[pl] == '\0' || c->sc_path[pl] == '/'))
			return 1;
		/* A directory the fork added on the way to it. */
		if (c->sc_kind == SC_ADDED && c->sc_after == SE_DIR && cl < pl &&
		    strncmp(paths[i], c->sc_path, cl) == 0 && paths[i][cl] == '/')
			return 1;
	}
	return 0;
}

/* The first ".git" or ".gitattributes" component of rel: its end offset, or 0 for none. */
static size_t
metadata_end(const char *rel)
{
	const char *p = rel;

	while (*p != '\0') {
		size_t n = strcspn(p, "/");
		if ((n == 4 && memcmp(p, ".git", 4) == 0) ||
		    (n == 14 && memcmp(p, ".gitattributes", 14) == 0))
			return (size_t)(p - rel) + n;
		p += n;
		if (*p == '/')
			p++;
	}
	return 0;
}

int
snapshot_git_metadata(const char *rel)
{
	return metadata_end(rel) != 0;
}

/*
 * 1 when path has repository metadata (a ".git" component, which also
 * catches a ".git" file redirecting to another repository, or a
 * ".gitattributes") below the selector it was selected by: --filesystem
 * (no selectors) never merges it, --paths .git/hooks does.
 */
static int
metadata_unnamed(const char *path, const char *const *paths, size_t npaths)
{
	size_t best = 0;
	int named = 0;

	for (size_t i = 0; i < npaths; i++) {
		size_t pl = strlen(paths[i]);
		if (strncmp(path, paths[i], pl) == 0 && (path[pl] == '\0' || path[pl] == '/')) {
			if (!named || pl > best)
				best = pl;
			named = 1;
		} else if (strncmp(paths[i], path, strlen(path)) == 0 &&
		    paths[i][strlen(path)] == '/') {
			/* A directory on the way to what a selector names. */
			return 0;
		}
	}
	if (named && path[best] == '/')
		best++;
	return metadata_end(path + (named ? best : 0)) != 0;
}

int
snapshot_merge_plan(int basefd, int forkfd, int srcfd, const char *const *paths, size_t npaths,
    struct snapshot_plan *out, char **cause)
{
	struct snapshot_changes all;

	memset(out, 0, sizeof(*out));
	if (snapshot_diff(basefd, forkfd, &all, cause) != 0)
		return -1;
	for (size_t i = 0; i < all.scs_n; i++) {
		struct snapshot_change *c = &all.scs_v[i];
		if (!selected(c, paths, npaths)) {
			free(c->sc_path);
			continue;
		}
		if (out->sp_changes.scs_n == out->sp_changes.scs_cap) {
			size_t nc = out->sp_changes.scs_cap ? out->sp_changes.scs_cap * 2 : 64;
			struct snapshot_change *nv = realloc(out->sp_changes.scs_v, nc * sizeof(*nv));
			enum snapshot_plan_action *na = realloc(out->sp_action, nc * sizeof(*na));
			if (nv != NULL)
				out->sp_changes.scs_v = nv;
			if (na != NULL)
				out->sp_action = na;
			if (nv == NULL || na == NULL) {
				for (size_t k = i; k < all.scs_n; k++)
					free(all.scs_v[k].sc_path);
				free(all.scs_v);
				snapshot_plan_free(out);
				util_cause(cause, "out of memory");
				return -1;
			}
			out->sp_changes.scs_cap = nc;
		}
		out->sp_changes.scs_v[out->sp_changes.scs_n++] = *c;
	}
	free(all.scs_v);
	for (size_t i = 0; i < out->sp_changes.scs_n; i++) {
		struct snapshot_change *c = &out->sp_changes.scs_v[i];
		/*
		 * Fifos, sockets and devices are never merged (a fifo would
		 * block whoever opens it; a device is a way into the kernel),
		 * nor repository metadata nobody named.
		 */
		if (c->sc_before == SE_OTHER || c->sc_after == SE_OTHER ||
		    metadata_unnamed(c->sc_path, paths, npaths)) {
			out->sp_action[i] = SP_SKIP;
			out->sp_skipped++;
			continue;
		}
		int s = same_rel(srcfd, basefd, c->sc_path, cause);
		enum snapshot_plan_action a;
		if (s < 0) {
			snapshot_plan_free(out);
			return -1;
		}
		if (s) {
			a = SP_APPLY;
			/* Threat to the source's own work: removing a directory it added files in. */
			if (c->sc_before == SE_DIR && c->sc_after != SE_DIR) {
				int n = no_new_entries(basefd, srcfd, c->sc_path, cause);
				if (n < 0) {
					snapshot_plan_free(out);
					return -1;
				}
				if (!n)
					a = SP_CONFLICT;
			}
		} else {
			s = same_rel(srcfd, forkfd, c->sc_path, cause);
			if (s < 0) {
				snapshot_plan_free(out);
				return -1;
			}
			a = s ? SP_SAME : SP_CONFLICT;
		}
		out->sp_action[i] = a;
		if (a == SP_APPLY)
			out->sp_apply++;
		else if (a == SP_SAME)
			out->sp_same++;
		else
			out->sp_conflicts++;
	}
	return 0;
}

void
snapshot_plan_free(struct snapshot_plan *p)
{
	snapshot_changes_free(&p->sp_changes);
	free(p->sp_action);
	memset(p, 0, sizeof(*p));
}

struct json_object *
snapshot_conflicts_json(const struct snapshot_plan *p)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; i < p->sp_changes.scs_n; i++) {
		const struct snapshot_change *c = &p->sp_changes.scs_v[i];
		if (p->sp_action[i] != SP_CONFLICT)
			continue;
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "path", json_object_new_string(c->sc_path));
		json_object_object_add(o, "fork_change",
		    json_object_new_string(snapshot_change_kind_name(c->sc_kind)));
		json_object_object_add(o, "reason", json_object_new_string(c->sc_after == SE_OTHER ?
		    "not a regular file, directory or symlink" :
		    "the source changed it too, differently"));
		json_object_array_add(a, o);
	}
	return a;
}

struct json_object *
snapshot_skipped_json(const struct snapshot_plan *p)
{
	struct json_object *a = json_object_new_array(), *last = NULL;
	char key[PATH_MAX] = "";

	for (size_t i = 0; i < p->sp_changes.scs_n; i++) {
		const struct snapshot_change *c = &p->sp_changes.scs_v[i];
		size_t kl = strlen(key);
		if (p->sp_action[i] != SP_SKIP)
			continue;
		/* A skipped .git/ is one line, however many entries changed in it. */
		if (last != NULL && strncmp(c->sc_path, key, kl) == 0 &&
		    (c->sc_path[kl] == '\0' || c->sc_path[kl] == '/')) {
			struct json_object *n;
			json_object_object_get_ex(last, "entries", &n);
			json_object_set_int64(n, json_object_get_int64(n) + 1);
			continue;
		}
		size_t me = metadata_end(c->sc_path);
		int meta = me != 0 && c->sc_before != SE_OTHER && c->sc_after != SE_OTHER;
		util_strlcpy(key, c->sc_path, sizeof(key));
		if (meta && me < sizeof(key))
			key[me] = '\0';
		last = json_object_new_object();
		json_object_object_add(last, "path", json_object_new_string(key));
		json_object_object_add(last, "change",
		    json_object_new_string(snapshot_change_kind_name(c->sc_kind)));
		json_object_object_add(last, "entries", json_object_new_int64(1));
		json_object_object_add(last, "reason", json_object_new_string(meta ?
		    "repository metadata (.git, .gitattributes): merged only when a path names it" :
		    "a fifo, socket or device node: never merged"));
		json_object_array_add(a, last);
	}
	return a;
}

/* -- single paths, for git merges -- */

int
snapshot_parents(int root, const char *rel, const struct snapshot_creds *as, char **cause)
{
	char pre[PATH_MAX];
	const char *p = rel;

	while ((p = strchr(p, '/')) != NULL) {
		const char *name;
		int fd, rv;

		if ((size_t)(p - rel) >= sizeof(pre)) {
			util_cause(cause, "%s: path too long", rel);
			return -1;
		}
		memcpy(pre, rel, (size_t)(p - rel));
		pre[p - rel] = '\0';
		if ((fd = open_parent(root, pre, &name)) < 0) {
			util_cause(cause, "%s: %s", pre, strerror(errno));
			return -1;
		}
		if (creds_enter(as) != 0) {
			close(fd);
			util_cause(cause, "cannot take the caller's filesystem identity");
			return -1;
		}
		rv = mkdirat(fd, name, 0755);
		int e = errno;
		creds_leave(as);
		close(fd);
		if (rv != 0 && e != EEXIST) {
			util_cause(cause, "%s: mkdir: %s", pre, strerror(e));
			return -1;
		}
		p++;
	}
	return 0;
}

int
snapshot_copy_path(int src, const char *rel, int dst, const struct snapshot_creds *dst_as,
    char **cause)
{
	struct snapshot_stats ss;
	struct copyctx c = { 0, NULL, dst_as, &ss, cause };
	const char *name, *dname;
	struct stat st;
	int pfd, dfd, h, rv;

	memset(&ss, 0, sizeof(ss));
	h = stat_rel(src, rel, &pfd, &name, &st);
	if (h < 0) {
		util_cause(cause, "%s: reached through a symlink or a non-directory", rel);
		return -1;
	}
	if (h == 0)
		return 0;
	if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
		close(pfd);
		util_cause(cause, "%s: not a file or a symlink", rel);
		return -1;
	}
	if (snapshot_parents(dst, rel, dst_as, cause) != 0 ||
	    (dfd = open_parent(dst, rel, &dname)) < 0) {
		if (cause != NULL && *cause == NULL)
			util_cause(cause, "%s: %s", rel, strerror(errno));
		close(pfd);
		return -1;
	}
	rv = copy_entry(&c, pfd, dfd, name, 0);
	close(pfd);
	close(dfd);
	return rv == 0 ? 1 : -1;
}

int
snapshot_change_git_visible(int basefd, int viewfd, const struct snapshot_change *c,
    char **cause)
{
	struct stat sa, sb;
	const char *na, *nb;
	int pa, pb, rv;

	if (c->sc_before != c->sc_after || c->sc_before != SE_FILE)
		return 1;
	if (stat_rel(basefd, c->sc_path, &pa, &na, &sa) != 1) {
		util_cause(cause, "%s: gone from the base", c->sc_path);
		return -1;
	}
	if (stat_rel(viewfd, c->sc_path, &pb, &nb, &sb) != 1) {
		close(pa);
		util_cause(cause, "%s: changed while merging", c->sc_path);
		return -1;
	}
	/* git records a file's bytes and whether it is executable, nothing else of its mode. */
	if ((sa.st_mode & 0100) != (sb.st_mode & 0100) || sa.st_size != sb.st_size)
		rv = 1;
	else if ((rv = same_content(pa, na, pb, nb, cause)) >= 0)
		rv = !rv;
	close(pa);
	close(pb);
	return rv;
}

/* -- transactional apply -- */

static int
txn_write_journal(int txnfd, struct json_object *j, char **cause)
{
	const char *s = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
	int fd = openat(txnfd, "journal.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	    0600);

	if (fd < 0 || util_write_all(fd, s, strlen(s)) != 0 || fsync(fd) != 0) {
		util_cause(cause, "journal: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	if (renameat(txnfd, "journal.tmp", txnfd, "journal.json") != 0 || fsync(txnfd) != 0) {
		util_cause(cause, "journal: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static struct json_object *
txn_read_journal(int txnfd)
{
	int fd = openat(txnfd, "journal.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	char *buf = NULL;
	size_t len;
	struct json_object *j = NULL;

	if (fd < 0)
		return NULL;
	if (util_read_fd(fd, 64u * 1024 * 1024, &buf, &len) == 0)
		j = json_tokener_parse(buf);
	free(buf);
	close(fd);
	if (j != NULL && !json_object_is_type(j, json_type_object)) {
		json_object_put(j);
		j = NULL;
	}
	return j;
}

int
snapshot_txn_state(int txnfd, char *state, size_t len)
{
	struct json_object *j = txn_read_journal(txnfd), *s;

	if (j == NULL)
		return -1;
	if (!json_object_object_get_ex(j, "state", &s) || !json_object_is_type(s, json_type_string)) {
		json_object_put(j);
		return -1;
	}
	util_strlcpy(state, json_object_get_string(s), len);
	json_object_put(j);
	return 0;
}

/* Copy entry name of dir sd (file or symlink) to dname in dd, owner and mode & keep kept. */
static int
copy_one(int sd, const char *sname, int dd, const char *dname, mode_t keep, char **cause)
{
	struct stat st;

	if (fstatat(sd, sname, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		util_cause(cause, "%s: %s", sname, strerror(errno));
		return -1;
	}
	if (S_ISLNK(st.st_mode)) {
		char t[PATH_MAX];
		ssize_t n = readlinkat(sd, sname, t, sizeof(t) - 1);
		if (n < 0) {
			util_cause(cause, "%s: readlink: %s", sname, strerror(errno));
			return -1;
		}
		t[n] = '\0';
		if (symlinkat(t, dd, dname) != 0 ||
		    fchownat(dd, dname, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) != 0) {
			util_cause(cause, "%s: symlink: %s", dname, strerror(errno));
			return -1;
		}
		return 0;
	}
	if (!S_ISREG(st.st_mode)) {
		util_cause(cause, "%s: not a file or symlink", sname);
		return -1;
	}
	int in = open_reg(sd, sname), out, rv;
	if (in < 0) {
		util_cause(cause, "%s: %s", sname, strerror(errno));
		return -1;
	}
	out = openat(dd, dname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		util_cause(cause, "%s: create: %s", dname, strerror(errno));
		close(in);
		return -1;
	}
	struct timespec ts[2] = { st.st_atim, st.st_mtim };
	rv = copy_bytes(in, out, NULL, cause, sname);
	if (rv == 0 && (fchown(out, st.st_uid, st.st_gid) != 0 ||
	    fchmod(out, st.st_mode & keep) != 0 || futimens(out, ts) != 0)) {
		util_cause(cause, "%s: %s", dname, strerror(errno));
		rv = -1;
	}
	close(in);
	close(out);
	return rv;
}

/* Remove whatever is at name in pfd (an empty directory, a file, a link). */
static int
clear_at(int pfd, const char *name, char **cause)
{
	struct stat st;

	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 : (util_cause(cause, "%s: %s", name, strerror(errno)), -1);
	if (unlinkat(pfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0) {
		util_cause(cause, "%s: remove: %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Put the staged entry stagedir/idx at name in pfd: written under a
 * temporary name first, then renamed over, so the path always holds
 * either the old or the new entry.
 */
static int
place(int stagedir, const char *idx, int pfd, const char *name, size_t i, char **cause)
{
	char tmp[64];
	struct stat st;

	snprintf(tmp, sizeof(tmp), SNAP_TMP_PREFIX "%zu", i);
	if (unlinkat(pfd, tmp, 0) != 0 && errno != ENOENT) {
		util_cause(cause, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	if (copy_one(stagedir, idx, pfd, tmp, 07777, cause) != 0)
		return -1;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
	    unlinkat(pfd, name, AT_REMOVEDIR) != 0) {
		util_cause(cause, "%s: rmdir: %s", name, strerror(errno));
		unlinkat(pfd, tmp, 0);
		return -1;
	}
	if (renameat(pfd, tmp, pfd, name) != 0) {
		util_cause(cause, "%s: rename: %s", name, strerror(errno));
		unlinkat(pfd, tmp, 0);
		return -1;
	}
	return 0;
}

/* Make name in pfd a directory with mode/owner (replacing a non-directory). */
static int
place_dir(int pfd, const char *name, mode_t mode, uid_t uid, gid_t gid, char **cause)
{
	struct stat st;

	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
	    unlinkat(pfd, name, 0) != 0) {
		util_cause(cause, "%s: unlink: %s", name, strerror(errno));
		return -1;
	}
	if (mkdirat(pfd, name, 0700) != 0 && errno != EEXIST) {
		util_cause(cause, "%s: mkdir: %s", name, strerror(errno));
		return -1;
	}
	if (fchownat(pfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0 ||
	    fchmodat(pfd, name, mode & 07777, 0) != 0) {
		util_cause(cause, "%s: chown/chmod: %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

static int
progress_set(int txnfd, int64_t v)
{
	int fd = openat(txnfd, "progress", O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	int rv;

	if (fd < 0)
		return -1;
	rv = pwrite(fd, &v, sizeof(v), 0) == (ssize_t)sizeof(v) ? 0 : -1;
	close(fd);
	return rv;
}

static int64_t
progress_get(int txnfd)
{
	int fd = openat(txnfd, "progress", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int64_t v = -1;

	if (fd < 0)
		return -1;
	if (pread(fd, &v, sizeof(v), 0) != (ssize_t)sizeof(v))
		v = -1;
	close(fd);
	return v;
}

int
snapshot_apply(int forkfd, int srcfd, int txnfd, const struct snapshot_plan *plan,
    void (*between)(size_t i, void *arg), void *arg, int *rollback_failed, char **cause)
{
	struct json_object *j = json_object_new_object(), *entries = json_object_new_array();
	int stage = -1, backup = -1, rv = -1;
	size_t k = 0;

	*rollback_failed = 0;
	json_object_object_add(j, "state", json_object_new_string("staging"));
	json_object_object_add(j, "entries", entries);
	if (mkdirat(txnfd, "stage", 0700) != 0 || mkdirat(txnfd, "backup", 0700) != 0 ||
	    (stage = openat(txnfd, "stage", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    (backup = openat(txnfd, "backup", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		util_cause(cause, "transaction directory: %s", strerror(errno));
		goto out;
	}
	/* Stage every fork entry and back up every source entry before any change. */
	for (size_t i = 0; i < plan->sp_changes.scs_n; i++) {
		const struct snapshot_change *c = &plan->sp_changes.scs_v[i];
		struct json_object *e;
		struct stat st;
		const char *name;
		char idx[32];
		int pfd, h;

		if (plan->sp_action[i] != SP_APPLY)
			continue;
		snprintf(idx, sizeof(idx), "%zu", k);
		e = json_object_new_object();
		json_object_array_add(entries, e);
		json_object_object_add(e, "path", json_object_new_string(c->sc_path));
		/* The fork's side. */
		h = stat_rel(forkfd, c->sc_path, &pfd, &name, &st);
		if (h < 0 || (h == 0) != (c->sc_after == SE_ABSENT) ||
		    (h == 1 && kind_of(&st) != c->sc_after)) {
			util_cause(cause, "%s: the fork changed it while merging", c->sc_path);
			if (pfd >= 0)
				close(pfd);
			goto out;
		}
		json_object_object_add(e, "new", json_object_new_string(
		    snapshot_entry_kind_name(c->sc_after)));
		if (h == 1) {
			/* The fork's set-id bits are dropped here, in the staged copy. */
			json_object_object_add(e, "new_mode", json_object_new_int(st.st_mode &
			    SNAP_MERGE_MODES));
			json_object_object_add(e, "new_uid", json_object_new_int64(st.st_uid));
			json_object_object_add(e, "new_gid", json_object_new_int64(st.st_gid));
			if (c->sc_after != SE_DIR && copy_one(pfd, name, stage, idx, SNAP_MERGE_MODES,
			    cause) != 0) {
				close(pfd);
				goto out;
			}
			close(pfd);
		}
		/* The source's side. */
		h = stat_rel(srcfd, c->sc_path, &pfd, &name, &st);
		if (h < 0) {
			util_cause(cause, "%s: not reachable in the source without a symlink",
			    c->sc_path);
			goto out;
		}
		json_object_object_add(e, "orig", json_object_new_string(h == 0 ? "absent" :
		    snapshot_entry_kind_name(kind_of(&st))));
		if (h == 1) {
			json_object_object_add(e, "orig_mode", json_object_new_int(st.st_mode & 07777));
			json_object_object_add(e, "orig_uid", json_object_new_int64(st.st_uid));
			json_object_object_add(e, "orig_gid", json_object_new_int64(st.st_gid));
			if (!S_ISDIR(st.st_mode) && copy_one(pfd, name, backup, idx, 07777, cause) != 0) {
				close(pfd);
				goto out;
			}
			close(pfd);
		}
		k++;
	}
	json_object_object_add(j, "state", json_object_new_string("applying"));
	if (progress_set(txnfd, -1) != 0 || txn_write_journal(txnfd, j, cause) != 0)
		goto out;
	/* Apply, in plan order. */
	k = 0;
	for (size_t i = 0; i < plan->sp_changes.scs_n; i++) {
		const struct snapshot_change *c = &plan->sp_changes.scs_v[i];
		struct json_object *e;
		const char *name;
		char idx[32];
		int pfd;

		if (plan->sp_action[i] != SP_APPLY)
			continue;
		if (between != NULL)
			between(k, arg);
		e = json_object_array_get_idx(entries, k);
		snprintf(idx, sizeof(idx), "%zu", k);
		if (progress_set(txnfd, (int64_t)k) != 0) {
			util_cause(cause, "progress: %s", strerror(errno));
			goto fail;
		}
		pfd = open_parent(srcfd, c->sc_path, &name);
		if (pfd < 0) {
			util_cause(cause, "%s: parent: %s", c->sc_path, strerror(errno));
			goto fail;
		}
		int r;
		if (c->sc_after == SE_ABSENT) {
			r = clear_at(pfd, name, cause);
		} else if (c->sc_after == SE_DIR) {
			struct json_object *m, *u, *g;
			json_object_object_get_ex(e, "new_mode", &m);
			json_object_object_get_ex(e, "new_uid", &u);
			json_object_object_get_ex(e, "new_gid", &g);
			r = place_dir(pfd, name, (mode_t)json_object_get_int(m),
			    (uid_t)json_object_get_int64(u), (gid_t)json_object_get_int64(g), cause);
		} else {
			r = place(stage, idx, pfd, name, k, cause);
		}
		close(pfd);
		if (r != 0)
			goto fail;
		k++;
	}
	json_object_object_add(j, "state", json_object_new_string("committed"));
	if (txn_write_journal(txnfd, j, cause) != 0)
		goto fail;
	rv = 0;
	goto out;
fail:
	{
		char *rcause = NULL;
		if (snapshot_rollback(srcfd, txnfd, &rcause) != 0) {
			*rollback_failed = 1;
			char *both = NULL;
			util_cause(&both, "%s; rollback failed: %s", *cause, rcause);
			free(*cause);
			*cause = both;
		}
		free(rcause);
	}
out:
	if (stage >= 0)
		close(stage);
	if (backup >= 0)
		close(backup);
	json_object_put(j);
	return rv;
}

int
snapshot_rollback(int srcfd, int txnfd, char **cause)
{
	struct json_object *j = txn_read_journal(txnfd), *entries, *st;
	int64_t done = progress_get(txnfd);
	int backup = -1, rv = 0;

	if (j == NULL || !json_object_object_get_ex(j, "entries", &entries) ||
	    !json_object_is_type(entries, json_type_array) ||
	    !json_object_object_get_ex(j, "state", &st)) {
		json_object_put(j);
		util_cause(cause, "no readable journal");
		return -1;
	}
	if (strcmp(json_object_get_string(st), "committed") == 0) {
		json_object_put(j);
		util_cause(cause, "the transaction committed; nothing to roll back");
		return -1;
	}
	backup = openat(txnfd, "backup", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (backup < 0) {
		json_object_put(j);
		util_cause(cause, "backup: %s", strerror(errno));
		return -1;
	}
	/* Newest first: what an entry put into a directory is gone before the directory. */
	for (int64_t k = done; k >= 0 && rv == 0; k--) {
		struct json_object *e = json_object_array_get_idx(entries, (size_t)k), *p, *o;
		const char *name, *orig;
		char idx[32], tmp[64];
		int pfd;

		if (e == NULL || !json_object_object_get_ex(e, "path", &p) ||
		    !json_object_object_get_ex(e, "orig", &o)) {
			util_cause(cause, "journal entry %lld unreadable", (long long)k);
			rv = -1;
			break;
		}
		pfd = open_parent(srcfd, json_object_get_string(p), &name);
		if (pfd < 0) {
			/* Its parent is gone, so was it: a later entry removed it first. */
			if (errno == ENOENT)
				continue;
			util_cause(cause, "%s: %s", json_object_get_string(p), strerror(errno));
			rv = -1;
			break;
		}
		snprintf(idx, sizeof(idx), "%lld", (long long)k);
		snprintf(tmp, sizeof(tmp), SNAP_TMP_PREFIX "%lld", (long long)k);
		unlinkat(pfd, tmp, 0);
		orig = json_object_get_string(o);
		if (strcmp(orig, "absent") == 0) {
			rv = clear_at(pfd, name, cause);
		} else if (strcmp(orig, "directory") == 0) {
			struct json_object *m, *u, *g;
			json_object_object_get_ex(e, "orig_mode", &m);
			json_object_object_get_ex(e, "orig_uid", &u);
			json_object_object_get_ex(e, "orig_gid", &g);
			rv = place_dir(pfd, name, (mode_t)json_object_get_int(m),
			    (uid_t)json_object_get_int64(u), (gid_t)json_object_get_int64(g), cause);
		} else {
			rv = place(backup, idx, pfd, name, (size_t)k, cause);
		}
		close(pfd);
	}
	close(backup);
	if (rv == 0) {
		json_object_object_add(j, "state", json_object_new_string("rolled_back"));
		rv = txn_write_journal(txnfd, j, cause);
	}
	json_object_put(j);
	return rv;
}
