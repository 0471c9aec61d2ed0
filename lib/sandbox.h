/*
 * sandbox.h: the confinement of every gensee process, in one place.
 */
#ifndef GENSEE_SANDBOX_H
#define GENSEE_SANDBOX_H

/*
 * boundaryd keeps root's uid (it owns root-only state) but only the
 * capabilities it uses; see sandbox.c for the list and why.
 */
int sandbox_boundaryd(char **cause);

/*
 * sensord keeps root's uid (fanotify permission events and the trace group
 * need it) and only the capabilities its sensors use.
 */
int sandbox_sensord(char **cause);

#endif
