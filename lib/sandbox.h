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
int sandbox_sensord(char **cause);

#endif
