/*
 * fdpass.c: one message with at most one file descriptor (SCM_RIGHTS).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdpass.h"

int
fdpass_send(int sock, const void *buf, size_t len, int fd)
{
	char ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *c;
		memset(ctl, 0, sizeof(ctl));
		m.msg_control = ctl;
		m.msg_controllen = sizeof(ctl);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	while ((n = sendmsg(sock, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return -1;
	if ((size_t)n != len) {
		errno = EMSGSIZE;
		return -1;
	}
	return 0;
}

ssize_t
fdpass_recv(int sock, void *buf, size_t cap, int *fd)
{
	/* Room for a few: whatever a hostile sender attaches is closed, not leaked. */
	char ctl[CMSG_SPACE(4 * sizeof(int))];
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
		.msg_controllen = sizeof(ctl) };
	int got[4], ngot = 0;
	ssize_t n;

	*fd = -1;
	while ((n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k && ngot < 4; i++)
			memcpy(&got[ngot++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	if (ngot > 1 || (m.msg_flags & (MSG_CTRUNC | MSG_TRUNC))) {
		for (int i = 0; i < ngot; i++)
			close(got[i]);
		errno = EBADMSG;
		return -1;
	}
	if (ngot == 1)
		*fd = got[0];
	return n;
}
