/*
 * sandbox.h: the confinement of every gensee process, in one place.
 */
#ifndef GENSEE_SANDBOX_H
#define GENSEE_SANDBOX_H

#include <sys/types.h>

/*
 * boundaryd keeps root's uid (it owns root-only state) but only the
 * capabilities it uses; see sandbox.c for the list and why.
 */
int sandbox_boundaryd(char **cause);
/* mkdirat with boundaryd's permitted-only CAP_DAC_OVERRIDE raised for the call. */
int sandbox_base_mkdir(int dirfd, const char *name, mode_t mode);

/*
 * sensord keeps root's uid (fanotify permission events and the trace group
 * need it) and only the capabilities its sensors use.
 */
int sandbox_sensord(int audit, char **cause);

/*
 * gensee-tcloned keeps root's uid and the capabilities its mounts, forks
 * and callers' fsuids need (podman_net: and CAP_NET_ADMIN, for its podman
 * runtime), no_new_privs, and a seccomp filter of what neither it nor
 * anything it starts may do; see sandbox.c.
 */
int sandbox_tcloned(int podman_net, char **cause);

/*
 * gensee-httpmediatord holds no authority: it becomes uid:gid with no
 * groups, no capabilities in any set and no_new_privs (step 1, before it
 * connects to mediator.sock), then confines itself to reading ca_file and
 * runtime_dir (Landlock) and to a syscall allowlist (seccomp, step 2).
 */
int sandbox_httpmediatord_drop(uid_t uid, gid_t gid, char **cause);
int sandbox_httpmediatord(const char *ca_file, const char *runtime_dir, char **cause);

#endif
