/*
 * safefs.h: filesystem access that cannot be redirected.
 *
 * Authority state lives under a root that only root controls. Everything
 * below it is opened relative to a directory fd with openat2(2)
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS, so a
 * symlink or ".." planted anywhere in a path fails the open instead of
 * steering a root write elsewhere.
 */
#ifndef GENSEE_SAFEFS_H
#define GENSEE_SAFEFS_H

#include <sys/types.h>

/*
 * Check that path is absolute, a directory, owned by root and not writable
 * by group or others, and that every ancestor is a root-owned directory that
 * only root can change (a world-writable ancestor must be sticky, like /tmp),
 * with no symlink anywhere. Returns an O_PATH|O_DIRECTORY fd of the root, or
 * -1 with *cause set.
 */
int safefs_open_root(const char *path, char **cause);

/* openat2 beneath dirfd with no symlinks; mode is used with O_CREAT. */
int safefs_openat(int dirfd, const char *rel, int flags, mode_t mode);
/* Make rel (one or more components) beneath dirfd, each with mode. */
int safefs_mkdirs(int dirfd, const char *rel, mode_t mode);
/* Open an existing directory beneath dirfd (O_DIRECTORY, no symlinks). */
int safefs_opendir(int dirfd, const char *rel);
/*
 * Ask the filesystem to spread the subdirectories of the directory fd
 * across its allocation groups (ext4's "top of hierarchy" flag, chattr +T),
 * best effort: 0 if set, -1 (errno) where the filesystem has no such flag.
 */
int safefs_spread_subdirs(int fd);
/*
 * Remove the directory name (one component) beneath dirfd and the files
 * and sockets directly in it, without following symlinks (a symlink is
 * removed, not its target). A subdirectory makes it fail (ENOTEMPTY):
 * it only removes what the daemon's own flat layout puts there.
 */
int safefs_remove_dir(int dirfd, const char *name);

#endif
