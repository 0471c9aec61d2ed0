/*
 * proctree.h: /proc process-tree attribution for an already running tree.
 *
 * A tracker is given a root process and polls /proc. A process belongs to the
 * tree when its ppid chain, through live parents, reaches the root's (pid,
 * start time); once attributed it stays attributed for as long as that (pid,
 * start) lives, even after it is reparented to init or a subreaper. Each scan
 * reports normalized events: "exec" when a tree process is seen for the first
 * time or its executable or argv digest changed in place (an execve), and
 * "exit" when a known process is gone.
 *
 * Polling has a window: a process that forks, execs and exits between two
 * scans is never seen, and so is a grandchild whose parent exited before the
 * scan that would have attributed it (it is reparented out of the tree with
 * nothing left to link it to the root). Exact attribution needs a kernel
 * event source (fanotify, BPF); this is the unprivileged best effort.
 */
#ifndef GENSEE_PROCTREE_H
#define GENSEE_PROCTREE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc.h"

#define PROCTREE_ARGV0_LEN 256	/* 255 bytes + NUL */
#define PROCTREE_TIME_LEN 32
/* Bound on tracked processes so a fork bomb in the tree cannot exhaust memory. */
#define PROCTREE_MAX_PROCS 65536
/* Scans a process may look half way through an execve before it is reported anyway. */
#define PROCTREE_SETTLE_SCANS 5

/* Depths used by proctree_attribute; real depths are >= 0. */
#define PROCTREE_OUTSIDE (-1)

/* One process of a /proc snapshot, as proctree_attribute sees it. */
struct proctree_node {
	pid_t pn_pid;
	pid_t pn_ppid;
	uint64_t pn_start_ticks;
	int pn_known_depth;	/* in: depth when (pid, start) is already attributed, else -1 */
	int pn_depth;		/* out: depth from the root, or PROCTREE_OUTSIDE */
};

enum proctree_event_type {
	PROCTREE_EXEC,
	PROCTREE_EXIT,
};

struct proctree_event {
	enum proctree_event_type pe_type;
	int pe_initial;		/* exec seen by the first scan: already running */
	pid_t pe_pid;
	pid_t pe_ppid;
	uint64_t pe_start_ticks;
	int pe_depth;
	char pe_executable[PATH_MAX];	/* "" when unreadable */
	char pe_argv_digest[PROC_DIGEST_HEX];	/* "" when unreadable */
	char pe_argv0[PROCTREE_ARGV0_LEN];	/* first argv word only, never the rest */
	char pe_time[PROCTREE_TIME_LEN];
};

typedef void (*proctree_event_fn)(const struct proctree_event *, void *);

/* A process known to be in the tree, with what the last scan saw of it. */
struct proctree_proc {
	pid_t pp_pid;
	pid_t pp_ppid;
	uint64_t pp_start_ticks;
	int pp_depth;
	int pp_exited;		/* gone in this scan; dropped once reported */
	int pp_reported;	/* an exec event carried the current state */
	int pp_initial;		/* first seen by the first scan */
	int pp_unsettled;	/* consecutive scans that saw it half way through an execve */
	char *pp_exe;
	char pp_argv_digest[PROC_DIGEST_HEX];
	char pp_argv0[PROCTREE_ARGV0_LEN];
};

struct proctree {
	pid_t pt_root_pid;
	uint64_t pt_root_start;
	pid_t pt_root_ppid;	/* at proctree_init */
	int pt_root_exited;
	unsigned pt_scans;	/* completed scans */
	struct proctree_proc *pt_procs;	/* live tree processes, sorted by pid */
	size_t pt_nprocs;
};

/*
 * Decide which nodes of one snapshot descend from (root_pid, root_start).
 * Fills pn_depth of every node; nodes may come in any order. Returns 0, or -1
 * with errno (EINVAL for a repeated pid, ENOMEM).
 */
int proctree_attribute(struct proctree_node *nodes, size_t n, pid_t root_pid,
    uint64_t root_start);

/* Start tracking the tree rooted at pid; fails when pid is not running. */
int proctree_init(struct proctree *pt, pid_t pid, char **cause);
void proctree_free(struct proctree *pt);
/*
 * Scan /proc once and call cb for each event: exits first (children before
 * parents), then execs (parents before children).
 */
int proctree_scan(struct proctree *pt, proctree_event_fn cb, void *arg, char **cause);
/* Name of an event type: "exec" or "exit". */
const char *proctree_event_name(enum proctree_event_type type);

#endif
