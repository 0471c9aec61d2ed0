/*
 * btrfs.h: the few btrfs subvolume ioctls gensee-tcloned uses, called
 * directly (linux/btrfs.h): no btrfs-progs at run time.
 *
 * Why our own wrapper: tcloned is root and works in agent-written trees;
 * running a tool by path would trust $PATH and that tool's parsing of
 * names, and would open paths again by name after we checked them. Here
 * every call takes directory fds that the caller opened safely (safefs,
 * O_NOFOLLOW) and one path component, so no symlink planted by an agent
 * can point a snapshot or a destroy somewhere else.
 */
#ifndef GENSEE_BTRFS_H
#define GENSEE_BTRFS_H

#include <stdint.h>

/* The inode number of every subvolume's root directory. */
#define GBTRFS_SUBVOL_INO 256

/* 1 when fd is on a btrfs filesystem, 0 when not, -1 on error. */
int gbtrfs_is_btrfs(int fd);

/* 1 when fd is the root directory of a btrfs subvolume, 0 when not. */
int gbtrfs_is_subvol(int fd);

/* Create an empty subvolume name beneath parent. Returns 0 or -1 with *cause. */
int gbtrfs_subvol_create(int parent, const char *name, char **cause);

/*
 * Snapshot the subvolume whose root is src as name beneath parent
 * (BTRFS_IOC_SNAP_CREATE_V2), read-only when readonly is set.
 * Returns 0 or -1 with *cause.
 */
int gbtrfs_snapshot(int src, int parent, const char *name, int readonly, char **cause);

/*
 * Destroy the subvolume name beneath parent (BTRFS_IOC_SNAP_DESTROY, which
 * needs CAP_SYS_ADMIN unless the filesystem is mounted with
 * user_subvol_rm_allowed). name must be a subvolume root; anything else is
 * refused with EINVAL. Returns 0 or -1 with errno and *cause.
 */
int gbtrfs_subvol_destroy(int parent, const char *name, char **cause);

/* The subvolume (tree) id of the subvolume fd is in (BTRFS_IOC_INO_LOOKUP). */
int gbtrfs_subvol_id(int fd, uint64_t *id, char **cause);

#endif
