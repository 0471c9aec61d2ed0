/*
 * auditlog.h: Landlock's denials, read from the kernel's audit.
 *
 * Landlock (ABI 7, Linux 6.15) reports a denial to the audit subsystem when
 * audit is enabled and the domain asks for it: the launcher restricts itself
 * with LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, because by default a domain
 * logs nothing after the exec that starts the agent. No auditd is needed:
 * every record also goes to the sockets bound to the AUDIT_NLGRP_READLOG
 * multicast group (CAP_AUDIT_READ). One denial is a group of records that
 * share a serial, each "audit(SEC.MS:SERIAL): key=value ...":
 *
 *   1423 LANDLOCK_ACCESS domain=HEX blockers=fs.write_file path="/x" dev=.. ino=..
 *        (fs.make_* and fs.remove_* name the directory; scope.signal has
 *        opid=N ocomm=".." instead of a path)
 *   1424 LANDLOCK_DOMAIN domain=HEX status=allocated mode=enforcing pid=N uid=N
 *        exe=".." comm=".." (with a domain's first denial: pid made the domain),
 *        or status=deallocated denials=N (alone, when the domain ends)
 *   1300 SYSCALL         arch=.. syscall=N ... pid=N ... comm=".." exe=".."
 *        (the denied task, when it has an audit context)
 *   1320 EOE             the group is complete
 *
 * The ACCESS record is sent at the denial and the SYSCALL one at the
 * syscall's exit, so the records of two groups may interleave: groups are
 * assembled by serial, and one that never sees its EOE is completed when it
 * is older than an age limit. Values that a task controls (path, exe, comm,
 * ocomm, name) are either quoted, when they hold no quote, space or control
 * byte, or hex-encoded; so the records split at spaces safely, whatever a
 * file is called.
 */
#ifndef GENSEE_AUDITLOG_H
#define GENSEE_AUDITLOG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AUDITLOG_ACCESS 1423	/* AUDIT_LANDLOCK_ACCESS */
#define AUDITLOG_DOMAIN 1424	/* AUDIT_LANDLOCK_DOMAIN */
#define AUDITLOG_SYSCALL 1300	/* AUDIT_SYSCALL */
#define AUDITLOG_EOE 1320	/* AUDIT_EOE */

#define AUDITLOG_PENDING 32	/* groups being assembled */
#define AUDITLOG_DOMAINS 64	/* domain -> creator, for groups with no SYSCALL record */

struct auditlog_denial {
	uint64_t ad_serial;
	int64_t ad_ms;			/* the caller's clock when its first record came */
	char ad_domain[24];		/* the Landlock domain, hex */
	char ad_blockers[128];		/* what was denied: "fs.write_file", "scope.signal" */
	char ad_object[PATH_MAX];	/* the path, "pid N (comm)" for a signal, or "" */
	pid_t ad_pid;			/* the denied task, else the domain's creator; 0 */
	char ad_exe[PATH_MAX];		/* the denied task's executable, or "" */
	int ad_access;			/* a LANDLOCK_ACCESS record is in the group */
	int ad_task;			/* ad_pid is the denied task (from SYSCALL) */
};

struct auditlog_domain {
	char dd_domain[24];
	pid_t dd_pid;
};

struct auditlog {
	struct auditlog_denial al_pend[AUDITLOG_PENDING];
	size_t al_npend;
	struct auditlog_domain al_dom[AUDITLOG_DOMAINS];
	size_t al_domnext;
	uint64_t al_malformed;		/* records that could not be read */
};

/* Called once per completed group that holds a denial. */
typedef void auditlog_cb(const struct auditlog_denial *d, void *arg);

void auditlog_init(struct auditlog *al);

/*
 * Take one record (its type and text, not NUL-terminated). Records of other
 * types are ignored. A group is passed to cb when its EOE comes, or when
 * the table is full (the oldest first). Returns 0, or -1 with errno EBADMSG
 * for a record of ours that cannot be read (counted in al_malformed).
 */
int auditlog_feed(struct auditlog *al, unsigned type, const char *text, size_t len,
    int64_t now_ms, auditlog_cb *cb, void *arg);

/* Complete the groups older than age_ms (every group when age_ms < 0). */
void auditlog_expire(struct auditlog *al, int64_t now_ms, int64_t age_ms, auditlog_cb *cb,
    void *arg);

/*
 * One netlink datagram (one or more audit messages, any alignment) into
 * auditlog_feed. Returns 0, or -1 with errno EBADMSG at the first message
 * whose length does not fit (what came before it was fed).
 */
int auditlog_parse(struct auditlog *al, const void *buf, size_t len, int64_t now_ms,
    auditlog_cb *cb, void *arg);

/*
 * The value of key in a record's text, unquoted or hex-decoded, into out.
 * Returns 1, 0 when the key is absent, -1 when the value is malformed or
 * does not fit (out is then "").
 */
int auditlog_field(const char *text, size_t len, const char *key, char *out, size_t outlen);

/* The serial of "audit(SEC.MS:SERIAL): ..."; 0, or -1 when there is none. */
int auditlog_serial(const char *text, size_t len, uint64_t *serial);

/*
 * The kernel side. auditlog_open: a nonblocking socket of the read-log
 * group (CAP_AUDIT_READ). auditlog_status: whether audit is enabled
 * (AUDIT_GET; CAP_AUDIT_CONTROL, initial pid namespace). auditlog_enable:
 * turn it on (AUDIT_SET), as `auditctl -e 1` does.
 */
int auditlog_open(int *fd, char **cause);
int auditlog_status(int *enabled, char **cause);
int auditlog_enable(char **cause);

#endif
