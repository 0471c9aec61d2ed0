/*
 * cgroup.h: cgroup v2 membership, kill and cleanup.
 *
 * The v2 mount is found in /proc/self/mountinfo (it may be /sys/fs/cgroup or
 * /sys/fs/cgroup/unified on hybrid hosts). Operations live in
 * MOUNT/gensee/op_<id>. Only membership, cgroup.kill and the cgroup id are
 * used, and cgroup.freeze when a sensor is lost; no controller is needed.
 */
#ifndef GENSEE_CGROUP_H
#define GENSEE_CGROUP_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define CGROUP_BASE "gensee"

struct cgroup {
	char cg_path[PATH_MAX];	/* absolute path */
	char cg_rel[256];	/* below the mount, e.g. gensee/op_... */
	int cg_dirfd;		/* O_DIRECTORY fd of the cgroup */
	uint64_t cg_id;		/* directory inode = kernel cgroup id */
};

/* Parse mountinfo text for the first cgroup2 mount point. */
int cgroup_parse_mountinfo(FILE *f, char *buf, size_t len);
/* The same, and the first cgroup2 mount's superblock options into sopts. */
int cgroup_parse_mountinfo_opts(FILE *f, char *buf, size_t len, char *sopts, size_t slen);
/* 1 if the cgroup2 mount has favordynmods, 0 if not, -1 if unknown. */
int cgroup_favordynmods(void);
/* Find the cgroup2 mount of this process. */
int cgroup_find_mount(char *buf, size_t len, char **cause);

/* Make MOUNT/base (root-owned, 0755; CGROUP_BASE by default) if it is missing. */
int cgroup_ensure_base(const char *mount, const char *base, char **cause);
/* mkdir MOUNT/rel (parents as needed) and open it. EEXIST is an error. */
int cgroup_create(const char *mount, const char *rel, struct cgroup *cg, char **cause);
/* Open an existing cgroup. */
int cgroup_open(const char *mount, const char *rel, struct cgroup *cg, char **cause);
void cgroup_close(struct cgroup *cg);

int cgroup_attach(struct cgroup *cg, pid_t pid, char **cause);
/* The pids in cgroup.procs (caller frees *pids). */
int cgroup_members(struct cgroup *cg, pid_t **pids, size_t *n, char **cause);
/* 1 populated, 0 empty, -1 error (from cgroup.events). */
int cgroup_populated(struct cgroup *cg);
/* SIGKILL every process in the cgroup and its descendants (cgroup.kill). */
int cgroup_kill(struct cgroup *cg, char **cause);
/*
 * Stop (frozen 1) or resume (0) every process of the cgroup and its
 * descendants (cgroup.freeze). A frozen process can still be killed.
 */
int cgroup_freeze(struct cgroup *cg, int frozen, char **cause);
/* 1 when the freeze has taken effect (cgroup.events "frozen 1"), 0 not, -1 error. */
int cgroup_frozen(struct cgroup *cg);
/* rmdir the cgroup (must be empty) and close it. */
int cgroup_remove(struct cgroup *cg, char **cause);
int cgroup_remove_tree(struct cgroup *cg, char **cause);
/* The cgroup (relative to the v2 root) that pid is in, from /proc/PID/cgroup. */
int cgroup_of_pid(pid_t pid, char *buf, size_t len);

#endif
