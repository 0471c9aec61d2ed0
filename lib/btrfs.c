/*
 * btrfs.c: btrfs subvolume create, snapshot, destroy and lookup through
 * the kernel's ioctls (btrfs.h says why not btrfs-progs).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/magic.h>

#include "btrfs.h"
#include "util.h"

int
gbtrfs_is_btrfs(int fd)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) != 0)
		return -1;
	return sf.f_type == BTRFS_SUPER_MAGIC;
}

int
gbtrfs_is_subvol(int fd)
{
	struct stat st;

	if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_ino != GBTRFS_SUBVOL_INO)
		return 0;
	return gbtrfs_is_btrfs(fd) == 1;
}

/* One path component that fits the ioctl's name field. */
static int
name_ok(const char *name, size_t max, char **cause)
{
	size_t n = strlen(name);

	if (n == 0 || n >= max || strchr(name, '/') != NULL || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0) {
		util_cause(cause, "btrfs: %s: not one path component", name);
		errno = EINVAL;
		return 0;
	}
	return 1;
}

int
gbtrfs_subvol_create(int parent, const char *name, char **cause)
{
	struct btrfs_ioctl_vol_args a;

	if (!name_ok(name, sizeof(a.name), cause))
		return -1;
	memset(&a, 0, sizeof(a));
	memcpy(a.name, name, strlen(name));
	if (ioctl(parent, BTRFS_IOC_SUBVOL_CREATE, &a) != 0) {
		int e = errno;
		util_cause(cause, "btrfs: create subvolume %s: %s", name, strerror(e));
		errno = e;
		return -1;
	}
	return 0;
}

int
gbtrfs_snapshot(int src, int parent, const char *name, int readonly, char **cause)
{
	struct btrfs_ioctl_vol_args_v2 a;

	if (!name_ok(name, sizeof(a.name), cause))
		return -1;
	/*
	 * Only a subvolume root can be snapshotted; a plain directory would
	 * make the ioctl snapshot the subvolume it lies in, i.e. more than
	 * the caller named.
	 */
	if (!gbtrfs_is_subvol(src)) {
		util_cause(cause, "btrfs: snapshot %s: the source is not a btrfs subvolume", name);
		errno = EINVAL;
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.fd = src;
	a.flags = readonly ? BTRFS_SUBVOL_RDONLY : 0;
	memcpy(a.name, name, strlen(name));
	if (ioctl(parent, BTRFS_IOC_SNAP_CREATE_V2, &a) != 0) {
		int e = errno;
		util_cause(cause, "btrfs: snapshot %s: %s", name, strerror(e));
		errno = e;
		return -1;
	}
	return 0;
}

int
gbtrfs_subvol_destroy(int parent, const char *name, char **cause)
{
	struct btrfs_ioctl_vol_args a;
	int fd, sub;

	if (!name_ok(name, sizeof(a.name), cause))
		return -1;
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	sub = fd >= 0 && gbtrfs_is_subvol(fd);
	if (fd >= 0)
		close(fd);
	if (!sub) {
		util_cause(cause, "btrfs: destroy %s: not a btrfs subvolume", name);
		errno = EINVAL;
		return -1;
	}
	memset(&a, 0, sizeof(a));
	memcpy(a.name, name, strlen(name));
	if (ioctl(parent, BTRFS_IOC_SNAP_DESTROY, &a) != 0) {
		int e = errno;
		util_cause(cause, "btrfs: destroy subvolume %s: %s", name, strerror(e));
		errno = e;
		return -1;
	}
	return 0;
}

int
gbtrfs_subvol_id(int fd, uint64_t *id, char **cause)
{
	struct btrfs_ioctl_ino_lookup_args a;

	memset(&a, 0, sizeof(a));
	a.treeid = 0;
	a.objectid = BTRFS_FIRST_FREE_OBJECTID;
	if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &a) != 0) {
		int e = errno;
		util_cause(cause, "btrfs: subvolume id: %s", strerror(e));
		errno = e;
		return -1;
	}
	*id = a.treeid;
	return 0;
}
