/*
 * proc.h: reading process identity and lineage from /proc.
 *
 * A Linux process is identified by (pid, start time in clock ticks since
 * boot, /proc/PID/stat field 22). A pid alone can be reused after exit; the
 * pair cannot within one boot, so every check that names a process compares
 * both.
 */
#ifndef GENSEE_PROC_H
#define GENSEE_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROC_DIGEST_HEX 65 /* sha256 hex + NUL */

struct proc_stat {
	pid_t ps_pid;
	pid_t ps_ppid;
	char ps_state;
	uint64_t ps_start_ticks;
	char ps_comm[64];
};

/* Parse the text of /proc/PID/stat (the comm may hold spaces and ')'). */
int proc_parse_stat(const char *buf, struct proc_stat *out);
/* Returns 0, or -1 with errno (ESRCH when the process is gone). */
int proc_read_stat(pid_t pid, struct proc_stat *out);
/* Real, effective, saved and filesystem uids from /proc/PID/status. */
int proc_read_uids(pid_t pid, uid_t uids[4]);
/*
 * NoNewPrivs (0/1) and Seccomp (0 off, 1 strict, 2 filter) from
 * /proc/PID/status: what the kernel enforces, whatever anyone claims.
 */
int proc_read_confinement(pid_t pid, int *no_new_privs, int *seccomp);
/* 0 when pid exists and has exactly this start time. */
int proc_identity_matches(pid_t pid, uint64_t start_ticks);
/* readlink /proc/PID/exe; "" when it cannot be read (kernel thread, no access). */
int proc_read_exe(pid_t pid, char *buf, size_t len);
/*
 * sha256 of the raw NUL-separated argv bytes, in hex. The digest identifies
 * the command line without copying possibly secret arguments into evidence.
 */
int proc_argv_digest(pid_t pid, char hex[PROC_DIGEST_HEX]);
/* Every numeric entry of /proc. */
int proc_list_pids(pid_t **out, size_t *n);
/* Every live descendant of root, from one /proc snapshot (caller frees *out). */
int proc_descendants(pid_t root, pid_t **out, size_t *n);

int proc_pidfd_open(pid_t pid);
int proc_pidfd_signal(int pidfd, int sig);
/* Clock ticks per second, for turning start ticks into seconds. */
long proc_clock_ticks(void);

#endif
