/*
 * hostcaps.h: probes of what the host kernel offers Gensee.
 *
 * Every probe is read-only towards the host: it opens what it needs, asks
 * the kernel one question and closes everything again. No fd, fanotify
 * mark, proc connector subscription or nftables object outlives a probe,
 * no netlink wait lasts longer than HOSTCAPS_NL_TIMEOUT_MS, and everything
 * works unprivileged (reporting "requires root" where that is the answer).
 */
#ifndef GENSEE_HOSTCAPS_H
#define GENSEE_HOSTCAPS_H

#include <stddef.h>

struct json_object;

#define HOSTCAPS_NL_TIMEOUT_MS 1000

/*
 * Probe the host. Returns an object keyed by capability name
 * ("fanotify_permission_events", "seccomp", "cgroup_v2", "nftables",
 * "landlock", "bpf_mount", "apparmor", "selinux", "proc_connector",
 * "speculation_backends", "kernel", "running_as_root"); each value is an
 * object with at least "available" (bool) and "detail" (string). The
 * caller puts the result. NULL only when out of memory.
 */
struct json_object *hostcaps_probe(void);

/* The names hostcaps_probe() reports, in order, NULL-terminated. */
extern const char *const hostcaps_names[];

/*
 * Pure parsers, exposed so they can be tested on fixed text.
 */

/* 1 if /proc/filesystems text lists fstype (with or without "nodev"), else 0. */
int hostcaps_filesystems_has(const char *text, const char *fstype);
/* Split whitespace-separated words (actions_avail, cgroup.controllers) into a string array. */
struct json_object *hostcaps_words(const char *text);
/*
 * Copy the mount point of the first mount of fstype in mountinfo text into
 * buf (\ooo escapes decoded). 0 when found, -1 when absent or too long.
 */
int hostcaps_mountinfo_find(const char *text, const char *fstype, char *buf, size_t len);
/* 1 if a uname release such as "6.1.0-13-amd64" is at least major.minor, else 0. */
int hostcaps_release_at_least(const char *release, int major, int minor);

#endif
