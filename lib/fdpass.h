/*
 * fdpass.h: one message with at most one file descriptor over a Unix
 * socket (SCM_RIGHTS).
 */
#ifndef GENSEE_FDPASS_H
#define GENSEE_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/* Send len bytes of buf with fd attached (fd -1: none). 0, or -1 with errno. */
int fdpass_send(int sock, const void *buf, size_t len, int fd);
/*
 * Receive one message into buf (at most cap bytes) and the descriptor
 * attached to it into *fd (-1 when none; close-on-exec). Returns the
 * length, 0 at EOF or -1 with errno. A message with more than one
 * descriptor, or cut short, has every descriptor closed and is EBADMSG.
 */
ssize_t fdpass_recv(int sock, void *buf, size_t cap, int *fd);

#endif
