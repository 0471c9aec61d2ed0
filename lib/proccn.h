/*
 * proccn.h: fork/exec/exit events from the proc connector.
 *
 * The proc connector (NETLINK_CONNECTOR, CN_IDX_PROC / CN_VAL_PROC)
 * multicasts one datagram per process event to every subscribed socket:
 *
 *   struct nlmsghdr   16 bytes, nlmsg_type NLMSG_DONE, nlmsg_len covers all
 *   struct cn_msg     20 bytes: id {idx, val}, seq, ack, len (of data), flags
 *   struct proc_event cn_msg.len bytes: what, cpu, timestamp_ns (u64, at
 *                     offset 8), then the event_data union at offset 16
 *
 * cn_msg is 20 bytes, so the proc_event starts 4-byte aligned while its
 * timestamp wants 8: the parser copies every struct out with memcpy.
 *
 * Events are per thread: a fork whose pe_tgid equals pe_parent_tgid is a
 * new thread, and every thread reports its own exit (pe_pid names the
 * thread, pe_tgid its process; a leader that ends with pthread_exit
 * reports before the threads that outlive it).
 *
 * Pids are those of the initial pid namespace, and the kernel only accepts
 * subscriptions from its initial user and pid namespaces (CAP_NET_ADMIN).
 * A pid alone names a process only until it is reused: consumers pair it
 * with the start time (proc.h) before acting on it. A receive queue overrun
 * loses events; the reader reports it as PROCCN_LOST, which means the
 * lineage it has is incomplete from then on.
 */
#ifndef GENSEE_PROCCN_H
#define GENSEE_PROCCN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proccn_event {
	enum {
		PROCCN_FORK,	/* pe_pid/pe_tgid: the child; pe_parent_*: its parent */
		PROCCN_EXEC,	/* pe_pid/pe_tgid: the process; pe_parent_* are 0 */
		PROCCN_EXIT,	/* pe_parent_*: the real parent (0 when the kernel
				   does not say) */
		PROCCN_LOST,	/* events were lost (receive queue overrun or an
				   unreadable datagram): coverage is incomplete */
	} pe_type;
	pid_t pe_pid, pe_tgid;		/* thread id and process id */
	pid_t pe_parent_pid, pe_parent_tgid;
	uint32_t pe_exit_code;		/* PROCCN_EXIT: a wait(2) status (WEXITSTATUS...) */
	uint32_t pe_exit_signal;	/* PROCCN_EXIT: signal sent to the parent (SIGCHLD) */
	uint64_t pe_timestamp_ns;	/* CLOCK_MONOTONIC ns (ktime_get_ns); 0 for LOST */
};

struct proccn;

/*
 * Open a connector socket (nonblocking, close-on-exec), join the CN_IDX_PROC
 * group and subscribe, waiting at most 1 s for the kernel's acknowledgement.
 */
int proccn_open(struct proccn **out, char **cause);
/* The socket, for poll(2) or an event loop (readable: call proccn_read). */
int proccn_fd(struct proccn *p);
/* Unsubscribe (PROC_CN_MCAST_IGNORE), close and free; NULL is ignored. */
void proccn_close(struct proccn *p);

/*
 * Drain what the socket holds without blocking: up to max events into v,
 * their number in *n (0 when nothing is waiting). An overrun (ENOBUFS)
 * becomes one PROCCN_LOST and reading goes on. Events other than fork,
 * exec and exit are skipped. Events that did not fit are kept for the next
 * call, which returns them first. Returns 0, or -1 with *cause on a socket
 * error (the events in v up to *n are still valid).
 */
int proccn_read(struct proccn *p, struct proccn_event *v, size_t max, size_t *n,
    char **cause);

/*
 * Parse one datagram (one or more netlink messages) into at most max
 * events; nothing is assumed about the alignment of buf. Messages that are
 * not proc connector fork/exec/exit events are skipped. Returns 0, or -1
 * with errno EBADMSG at the first malformed message (a length that does not
 * fit, a truncated struct) or ENOSPC when more than max events were found;
 * either way the first *n events in v are valid.
 */
int proccn_parse(const void *buf, size_t len, struct proccn_event *v, size_t max, size_t *n);

#endif
