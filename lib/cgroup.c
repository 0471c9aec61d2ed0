/*
 * cgroup.c: cgroup v2 operations.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "safefs.h"
#include "util.h"

/* Decode the \ooo escapes mountinfo uses for spaces and such. */
static void
cgroup_unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r != '\0'; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)(((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

int
cgroup_parse_mountinfo(FILE *f, char *buf, size_t len)
{
	return cgroup_parse_mountinfo_opts(f, buf, len, NULL, 0);
}

int
cgroup_parse_mountinfo_opts(FILE *f, char *buf, size_t len, char *sopts, size_t slen)
{
	char *line = NULL;
	size_t cap = 0;
	int found = -1;

	while (getline(&line, &cap, f) > 0) {
		/* id parent maj:min root mountpoint opts [optional...] - fstype src sopts */
		char *save = NULL, *tok, *mnt = NULL;
		int field = 0, after_sep = 0;
		for (tok = strtok_r(line, " \n", &save); tok != NULL;
		    tok = strtok_r(NULL, " \n", &save), field++) {
			if (field == 4)
				mnt = tok;
			if (field >= 6 && !after_sep) {
				if (strcmp(tok, "-") == 0)
					after_sep = 1;
				continue;
			}
			if (after_sep) {
				if (strcmp(tok, "cgroup2") == 0 && mnt != NULL) {
					cgroup_unescape(mnt);
					if (util_strlcpy(buf, mnt, len) < len)
						found = 0;
					/* the source, then the superblock's options */
					char *src = strtok_r(NULL, " \n", &save);
					char *so = src != NULL ? strtok_r(NULL, " \n", &save) : NULL;
					if (sopts != NULL && slen > 0 &&
					    util_strlcpy(sopts, so != NULL ? so : "", slen) >= slen)
						found = -1;
				}
				break;
			}
		}
		if (found == 0)
			break;
	}
	free(line);
	return found;
}

/*
 * Whether the cgroup2 mount has favordynmods: cgroup migrations (the
 * launch's attach) then skip an RCU grace period, forks and exits pay a
 * little more. An operator's choice (mount -o remount,favordynmods), which
 * boundaryd reports and never makes. 1, 0, or -1 if unknown.
 */
int
cgroup_favordynmods(void)
{
	char mnt[PATH_MAX], so[512];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int r;

	if (f == NULL)
		return -1;
	r = cgroup_parse_mountinfo_opts(f, mnt, sizeof(mnt), so, sizeof(so));
	fclose(f);
	if (r != 0)
		return -1;
	for (char *save = NULL, *o = strtok_r(so, ",", &save); o != NULL;
	    o = strtok_r(NULL, ",", &save))
		if (strcmp(o, "favordynmods") == 0)
			return 1;
	return 0;
}

int
cgroup_find_mount(char *buf, size_t len, char **cause)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL) {
		util_cause(cause, "mountinfo: %s", strerror(errno));
		return -1;
	}
	int r = cgroup_parse_mountinfo(f, buf, len);
	fclose(f);
	if (r != 0)
		util_cause(cause, "no cgroup2 mount in /proc/self/mountinfo");
	return r;
}

static int
cgroup_fill(const char *mount, const char *rel, struct cgroup *cg, char **cause)
{
	int mfd;
	struct stat st;

	memset(cg, 0, sizeof(*cg));
	cg->cg_dirfd = -1;
	if (util_strlcpy(cg->cg_rel, rel, sizeof(cg->cg_rel)) >= sizeof(cg->cg_rel) ||
	    (size_t)snprintf(cg->cg_path, sizeof(cg->cg_path), "%s/%s", mount, rel) >=
		sizeof(cg->cg_path)) {
		util_cause(cause, "cgroup path too long");
		return -1;
	}
	mfd = open(mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0) {
		util_cause(cause, "%s: %s", mount, strerror(errno));
		return -1;
	}
	cg->cg_dirfd = safefs_opendir(mfd, rel);
	close(mfd);
	if (cg->cg_dirfd < 0) {
		util_cause(cause, "%s: %s", cg->cg_path, strerror(errno));
		return -1;
	}
	if (fstat(cg->cg_dirfd, &st) != 0) {
		util_cause(cause, "%s: %s", cg->cg_path, strerror(errno));
		close(cg->cg_dirfd);
		cg->cg_dirfd = -1;
		return -1;
	}
	/* The kernfs inode number is the cgroup id nftables matches on. */
	cg->cg_id = (uint64_t)st.st_ino;
	return 0;
}

int
cgroup_ensure_base(const char *mount, const char *base, char **cause)
{
	int mfd = open(mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;

	if (mfd < 0) {
		util_cause(cause, "%s: %s", mount, strerror(errno));
		return -1;
	}
	if (mkdirat(mfd, base, 0755) == 0) {
		/* 0755 whatever the umask: the path stays resolvable for everyone. */
		if (fchmodat(mfd, base, 0755, 0) != 0) {
			util_cause(cause, "chmod %s/%s: %s", mount, base, strerror(errno));
			close(mfd);
			return -1;
		}
	} else if (errno != EEXIST) {
		util_cause(cause, "mkdir %s/%s: %s", mount, base, strerror(errno));
		close(mfd);
		return -1;
	}
	if (fstatat(mfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		util_cause(cause, "%s/%s is not a root-owned cgroup directory", mount, base);
		close(mfd);
		return -1;
	}
	close(mfd);
	return 0;
}

int
cgroup_create(const char *mount, const char *rel, struct cgroup *cg, char **cause)
{
	int mfd = open(mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char parent[256];
	char *slash;

	if (mfd < 0) {
		util_cause(cause, "%s: %s", mount, strerror(errno));
		return -1;
	}
	util_strlcpy(parent, rel, sizeof(parent));
	slash = strrchr(parent, '/');
	if (slash != NULL) {
		*slash = '\0';
		if (safefs_mkdirs(mfd, parent, 0755) != 0) {
			util_cause(cause, "mkdir %s/%s: %s", mount, parent, strerror(errno));
			close(mfd);
			return -1;
		}
	}
	int pfd = slash ? safefs_opendir(mfd, parent) : dup(mfd);
	close(mfd);
	if (pfd < 0) {
		util_cause(cause, "open %s/%s: %s", mount, parent, strerror(errno));
		return -1;
	}
	if (mkdirat(pfd, slash ? slash + 1 : rel, 0755) != 0) {
		util_cause(cause, "mkdir %s/%s: %s", mount, rel, strerror(errno));
		close(pfd);
		return -1;
	}
	close(pfd);
	return cgroup_fill(mount, rel, cg, cause);
}

int
cgroup_open(const char *mount, const char *rel, struct cgroup *cg, char **cause)
{
	return cgroup_fill(mount, rel, cg, cause);
}

void
cgroup_close(struct cgroup *cg)
{
	if (cg->cg_dirfd >= 0)
		close(cg->cg_dirfd);
	cg->cg_dirfd = -1;
}

static int
cgroup_write(struct cgroup *cg, const char *file, const char *val, char **cause)
{
	int fd = safefs_openat(cg->cg_dirfd, file, O_WRONLY, 0);
	if (fd < 0) {
		util_cause(cause, "%s/%s: %s", cg->cg_path, file, strerror(errno));
		return -1;
	}
	ssize_t n = write(fd, val, strlen(val));
	int e = errno;
	close(fd);
	if (n != (ssize_t)strlen(val)) {
		util_cause(cause, "write %s/%s: %s", cg->cg_path, file,
		    n < 0 ? strerror(e) : "short write");
		errno = n < 0 ? e : EIO;
		return -1;
	}
	return 0;
}

int
cgroup_attach(struct cgroup *cg, pid_t pid, char **cause)
{
	char val[32];
	snprintf(val, sizeof(val), "%d\n", (int)pid);
	return cgroup_write(cg, "cgroup.procs", val, cause);
}

int
cgroup_members(struct cgroup *cg, pid_t **pids, size_t *n, char **cause)
{
	int fd = safefs_openat(cg->cg_dirfd, "cgroup.procs", O_RDONLY, 0);
	char *buf, *p, *end;
	size_t cnt = 0, cap = 16;
	pid_t *v;

	*pids = NULL;
	*n = 0;
	if (fd < 0) {
		util_cause(cause, "%s/cgroup.procs: %s", cg->cg_path, strerror(errno));
		return -1;
	}
	if (util_read_fd(fd, 4u << 20, &buf, NULL) != 0) {
		util_cause(cause, "read %s/cgroup.procs: %s", cg->cg_path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	v = malloc(cap * sizeof(*v));
	if (v == NULL) {
		free(buf);
		util_cause(cause, "out of memory");
		return -1;
	}
	for (p = buf; *p != '\0'; p = end) {
		long pid = strtol(p, &end, 10);
		if (end == p)
			break;
		if (cnt == cap) {
			pid_t *nv = realloc(v, 2 * cap * sizeof(*v));
			if (nv == NULL) {
				free(v);
				free(buf);
				util_cause(cause, "out of memory");
				return -1;
			}
			v = nv;
			cap *= 2;
		}
		if (pid > 0)
			v[cnt++] = (pid_t)pid;
	}
	free(buf);
	*pids = v;
	*n = cnt;
	return 0;
}

/* A "key 0|1" line of cgroup.events: 1, 0, or -1 when unreadable or absent. */
static int
cgroup_event_flag(struct cgroup *cg, const char *key)
{
	int fd = safefs_openat(cg->cg_dirfd, "cgroup.events", O_RDONLY, 0);
	size_t n = strlen(key);
	char *buf, *save = NULL;
	int r = -1;

	if (fd < 0)
		return -1;
	if (util_read_fd(fd, 4096, &buf, NULL) == 0) {
		for (char *l = strtok_r(buf, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save))
			if (strncmp(l, key, n) == 0 && l[n] == ' ') {
				r = l[n + 1] == '1' ? 1 : 0;
				break;
			}
		free(buf);
	}
	close(fd);
	return r;
}

int
cgroup_populated(struct cgroup *cg)
{
	return cgroup_event_flag(cg, "populated");
}

int
cgroup_kill(struct cgroup *cg, char **cause)
{
	return cgroup_write(cg, "cgroup.kill", "1", cause);
}

int
cgroup_freeze(struct cgroup *cg, int frozen, char **cause)
{
	return cgroup_write(cg, "cgroup.freeze", frozen ? "1" : "0", cause);
}

/* 1 when every process of the cgroup has stopped, 0 not (yet), -1 error. */
int
cgroup_frozen(struct cgroup *cg)
{
	return cgroup_event_flag(cg, "frozen");
}

/*
 * Remove the empty cgroups below dirfd, deepest first (bounded in depth
 * and count). A process of the operation may have made them (podman's
 * runc makes the container's cgroup below the operation's); rmdir never
 * removes a cgroup that still has members, so nothing escapes this way.
 */
static void
remove_descendants(int dirfd, int depth, int *budget)
{
	DIR *d;
	struct dirent *de;
	int fd;

	if (depth > 16 || *budget <= 0 || (fd = dup(dirfd)) < 0)
		return;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL && --(*budget) > 0) {
		if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		int cfd = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd >= 0) {
			remove_descendants(cfd, depth + 1, budget);
			close(cfd);
		}
		unlinkat(dirfd, de->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

static int
remove_cg(struct cgroup *cg, int tree, char **cause)
{
	char mount[PATH_MAX];
	size_t plen = strlen(cg->cg_path), rlen = strlen(cg->cg_rel);
	int mfd;

	if (rlen + 1 > plen) {
		util_cause(cause, "bad cgroup path");
		return -1;
	}
	memcpy(mount, cg->cg_path, plen - rlen - 1);
	mount[plen - rlen - 1] = '\0';
	mfd = open(mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0) {
		util_cause(cause, "%s: %s", mount, strerror(errno));
		return -1;
	}
	char parent[256];
	util_strlcpy(parent, cg->cg_rel, sizeof(parent));
	char *slash = strrchr(parent, '/');
	int pfd = mfd;
	const char *name = cg->cg_rel;
	if (slash != NULL) {
		*slash = '\0';
		pfd = safefs_opendir(mfd, parent);
		name = slash + 1;
		if (pfd < 0) {
			util_cause(cause, "%s/%s: %s", mount, parent, strerror(errno));
			close(mfd);
			return -1;
		}
	}
	int r = unlinkat(pfd, name, AT_REMOVEDIR);
	int e = errno;
	if (r != 0 && tree && (e == EBUSY || e == ENOTEMPTY)) {
		int cfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int budget = 4096;
		if (cfd >= 0) {
			remove_descendants(cfd, 0, &budget);
			close(cfd);
		}
		r = unlinkat(pfd, name, AT_REMOVEDIR);
		e = errno;
	}
	if (pfd != mfd)
		close(pfd);
	close(mfd);
	if (r != 0) {
		util_cause(cause, "rmdir %s: %s", cg->cg_path, strerror(e));
		errno = e;
		return -1;
	}
	cgroup_close(cg);
	return 0;
}

/* Remove the cgroup; one with child cgroups is refused (removal is per level). */
int
cgroup_remove(struct cgroup *cg, char **cause)
{
	return remove_cg(cg, 0, cause);
}

/*
 * Remove the cgroup and the empty cgroups below it: an operation's own
 * processes may have made them (podman's runc makes the container's cgroup
 * below the operation's). Members are never lost: a populated one stays.
 */
int
cgroup_remove_tree(struct cgroup *cg, char **cause)
{
	return remove_cg(cg, 1, cause);
}

int
cgroup_of_pid(pid_t pid, char *buf, size_t len)
{
	char path[64], *data, *line, *save = NULL;
	int r = -1;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (util_read_path(path, 65536, &data, NULL) != 0)
		return -1;
	for (line = strtok_r(data, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "0::", 3) == 0) {
			const char *p = line + 3;
			if (*p == '/')
				p++;
			if (util_strlcpy(buf, p, len) < len)
				r = 0;
			break;
		}
	}
	free(data);
	return r;
}
