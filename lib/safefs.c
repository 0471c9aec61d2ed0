/*
 * safefs.c: symlink-free, beneath-root file access.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "safefs.h"
#include "util.h"

int
safefs_openat(int dirfd, const char *rel, int flags, mode_t mode)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW);
	/*
	 * O_TMPFILE includes the O_DIRECTORY bit, so "flags & O_TMPFILE" is
	 * also true for a plain O_DIRECTORY open, and openat2 refuses a mode
	 * without O_CREAT or O_TMPFILE (EINVAL).
	 */
	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
		how.mode = mode;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	for (;;) {
		long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
		if (fd >= 0 || errno != EAGAIN)
			return (int)fd;
		/* EAGAIN: a concurrent rename raced the lookup; try again. */
	}
}

int
safefs_opendir(int dirfd, const char *rel)
{
	return safefs_openat(dirfd, rel, O_RDONLY | O_DIRECTORY, 0);
}

/*
 * Each operation is a directory of small files that are made and replaced
 * at every launch. ext4 puts a new subdirectory near its parent, so every
 * operation's files would share one block group with every recently
 * deleted file there, and on ext4 without a journal the inode allocator
 * steps over each inode freed in the last minutes: hundreds of
 * microseconds per new file under churn. Spread, each operation starts in
 * a group of its own. Other filesystems ignore or refuse the flag.
 */
int
safefs_spread_subdirs(int fd)
{
	int flags;

	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0)
		return -1;
	if (flags & FS_TOPDIR_FL)
		return 0;
	flags |= FS_TOPDIR_FL;
	return ioctl(fd, FS_IOC_SETFLAGS, &flags);
}

int
safefs_mkdirs(int dirfd, const char *rel, mode_t mode)
{
	char buf[PATH_MAX];
	char *p;

	if (util_strlcpy(buf, rel, sizeof(buf)) >= sizeof(buf) || buf[0] == '/') {
		errno = EINVAL;
		return -1;
	}
	for (p = buf;; p++) {
		if (*p == '/' || *p == '\0') {
			char saved = *p;
			*p = '\0';
			int fd = safefs_opendir(dirfd, buf);
			if (fd >= 0) {
				close(fd);
			} else if (errno == ENOENT) {
				/*
				 * mkdirat does not follow a final symlink; the parent
				 * was just opened beneath dirfd without symlinks.
				 */
				char *slash = strrchr(buf, '/');
				int pfd = dirfd;
				const char *name = buf;
				if (slash != NULL) {
					*slash = '\0';
					pfd = safefs_opendir(dirfd, buf);
					*slash = '/';
					if (pfd < 0)
						return -1;
					name = slash + 1;
				}
				int r = mkdirat(pfd, name, mode);
				int e = errno;
				if (pfd != dirfd)
					close(pfd);
				if (r != 0 && e != EEXIST) {
					errno = e;
					return -1;
				}
			} else {
				return -1;
			}
			*p = saved;
			if (saved == '\0')
				break;
		}
	}
	return 0;
}

/* One directory of the chain: root-owned and changeable only by root. */
static int
safefs_check_dir(int fd, const char *shown, int is_root, char **cause)
{
	struct stat st;

	if (fstat(fd, &st) != 0) {
		util_cause(cause, "%s: %s", shown, strerror(errno));
		return -1;
	}
	if (S_ISLNK(st.st_mode)) {
		util_cause(cause, "%s is a symlink", shown);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		util_cause(cause, "%s is not a directory", shown);
		return -1;
	}
	if (st.st_uid != 0) {
		util_cause(cause, "%s is not owned by root (uid %u)", shown, (unsigned)st.st_uid);
		return -1;
	}
	if (is_root) {
		if (st.st_mode & (S_IWGRP | S_IWOTH)) {
			util_cause(cause, "%s is group- or other-writable (mode %04o)", shown,
			    (unsigned)(st.st_mode & 07777));
			return -1;
		}
	} else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		/*
		 * A writable ancestor lets another user rename our root away and
		 * put their own in its place; a sticky one (like /tmp) does not,
		 * because only the owner of an entry may rename it.
		 */
		util_cause(cause, "ancestor %s is writable by others and not sticky", shown);
		return -1;
	}
	return 0;
}

int
safefs_open_root(const char *path, char **cause)
{
	char buf[PATH_MAX], shown[PATH_MAX];
	char *save = NULL, *comp;
	int fd, nfd;
	size_t shown_len = 0;

	if (path == NULL || path[0] != '/') {
		util_cause(cause, "%s: not an absolute path", path ? path : "(null)");
		return -1;
	}
	if (util_strlcpy(buf, path, sizeof(buf)) >= sizeof(buf)) {
		util_cause(cause, "path too long");
		return -1;
	}
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		util_cause(cause, "open /: %s", strerror(errno));
		return -1;
	}
	shown[0] = '/';
	shown[1] = '\0';
	shown_len = 1;
	comp = strtok_r(buf, "/", &save);
	if (comp == NULL) {
		util_cause(cause, "/ cannot be a state root");
		close(fd);
		return -1;
	}
	while (comp != NULL) {
		char *next = strtok_r(NULL, "/", &save);
		if (safefs_check_dir(fd, shown, 0, cause) != 0) {
			close(fd);
			return -1;
		}
		if (strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0) {
			util_cause(cause, "%s: '.' and '..' are not allowed", path);
			close(fd);
			return -1;
		}
		/* O_NOFOLLOW on O_PATH opens a symlink itself: the check sees it. */
		nfd = openat(fd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (shown_len > 1)
			shown[shown_len++] = '/';
		shown_len += util_strlcpy(shown + shown_len, comp, sizeof(shown) - shown_len);
		if (shown_len >= sizeof(shown))
			shown_len = sizeof(shown) - 1;
		if (nfd < 0) {
			util_cause(cause, "%s: %s", shown, strerror(errno));
			return -1;
		}
		fd = nfd;
		if (next == NULL && safefs_check_dir(fd, shown, 1, cause) != 0) {
			close(fd);
			return -1;
		}
		comp = next;
	}
	/* Reopen as a real directory fd for openat2. */
	nfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(fd);
	if (nfd < 0)
		util_cause(cause, "%s: %s", path, strerror(errno));
	return nfd;
}

int
safefs_remove_dir(int parent, const char *name)
{
	int fd, e = 0;
	DIR *d;
	struct dirent *de;

	if (strchr(name, '/') != NULL || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		errno = EINVAL;
		return -1;
	}
	if ((fd = safefs_opendir(parent, name)) < 0)
		return -1;
	if ((d = fdopendir(fd)) == NULL) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		/* unlinkat without AT_REMOVEDIR never follows or removes a directory. */
		if (unlinkat(dirfd(d), de->d_name, 0) != 0 && e == 0)
			e = errno;
	}
	closedir(d);
	if (unlinkat(parent, name, AT_REMOVEDIR) != 0)
		return -1;
	if (e != 0) {
		errno = e;
		return -1;
	}
	return 0;
}
