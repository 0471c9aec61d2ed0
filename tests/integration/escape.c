/*
 * escape.c: the attacks of issue 9, for test_escape.py. Each argument is
 * one attempt, "name[:arg[:arg]]", run in order; the result is printed as
 * one JSON object of attempt -> "ok" or the errno name. "parent" stands for
 * getppid() (the launcher, for an agent).
 *
 *   procmem:PID       open /proc/PID/mem for writing (code injection)
 *   getfd:PID:FD      pidfd_getfd: take a descriptor of another process
 *   perf:PID          perf_event_open on another process
 *   kcmp:PID          kcmp against another process
 *   kill:PID          kill(PID, 0): may it be signalled
 *   tiocsti:FD        push "#" into the terminal on FD
 *   tiocsti64:FD      the same with bits above 32 set in the request
 *   vsock             socket(AF_VSOCK)
 *   vsock64           socket() with AF_VSOCK and bits above 32 set
 *   iouring           io_uring_setup
 *   userfaultfd       userfaultfd(0)
 *   keyctl            keyctl(KEYCTL_GET_KEYRING_ID, session keyring)
 *   personality       personality(READ_IMPLIES_EXEC)
 *   handle:PATH       name_to_handle_at
 *   unix:PATH         connect to a pathname Unix socket
 *   abstract:NAME     connect to an abstract Unix socket
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

/* A pid argument: a number or "parent". */
static pid_t
escape_pid(const char *s)
{
	return strcmp(s, "parent") == 0 ? getppid() : (pid_t)atoi(s);
}

/* Close fd if the attempt made one; 0 for success, else errno. */
static int
escape_fd(long fd)
{
	if (fd < 0)
		return errno;
	close((int)fd);
	return 0;
}

/* Connect to a Unix socket address; 0 or errno. */
static int
escape_connect(const struct sockaddr_un *sun, socklen_t len)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), e = 0;

	if (fd < 0)
		return errno;
	if (connect(fd, (const struct sockaddr *)sun, len) != 0)
		e = errno;
	close(fd);
	return e;
}

/* One attempt: 0 when it worked, else errno (EINVAL for an unknown name). */
static int
escape_try(char *spec)
{
	char *name = strtok(spec, ":"), *a1 = strtok(NULL, ":"), *a2 = strtok(NULL, ":");
	char path[64];
	long r;

	errno = 0;
	if (strcmp(name, "procmem") == 0 && a1 != NULL) {
		snprintf(path, sizeof(path), "/proc/%d/mem", (int)escape_pid(a1));
		return escape_fd(open(path, O_RDWR | O_CLOEXEC));
	}
	if (strcmp(name, "getfd") == 0 && a1 != NULL && a2 != NULL) {
		long pfd = syscall(SYS_pidfd_open, escape_pid(a1), 0);
		if (pfd < 0)
			return errno;
		r = syscall(SYS_pidfd_getfd, (int)pfd, atoi(a2), 0);
		int e = r < 0 ? errno : 0;
		if (r >= 0)
			close((int)r);
		close((int)pfd);
		return e;
	}
	if (strcmp(name, "perf") == 0 && a1 != NULL) {
		struct perf_event_attr attr;
		memset(&attr, 0, sizeof(attr));
		attr.size = sizeof(attr);
		attr.type = PERF_TYPE_SOFTWARE;
		attr.config = PERF_COUNT_SW_TASK_CLOCK;
		attr.exclude_kernel = 1;
		attr.exclude_hv = 1;
		return escape_fd(syscall(SYS_perf_event_open, &attr, escape_pid(a1), -1, -1, 0UL));
	}
	if (strcmp(name, "kcmp") == 0 && a1 != NULL)
		return syscall(SYS_kcmp, getpid(), escape_pid(a1), 0 /* KCMP_FILE */, 0UL, 0UL) < 0 ?
		    errno : 0;
	if (strcmp(name, "kill") == 0 && a1 != NULL)
		return kill(escape_pid(a1), 0) != 0 ? errno : 0;
	if (strcmp(name, "tiocsti") == 0 && a1 != NULL)
		return ioctl(atoi(a1), TIOCSTI, "#") != 0 ? errno : 0;
	if (strcmp(name, "tiocsti64") == 0 && a1 != NULL)
		return syscall(SYS_ioctl, atoi(a1), 0x100000000UL | TIOCSTI, "#") != 0 ? errno : 0;
	if (strcmp(name, "vsock") == 0)
		return escape_fd(socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0));
	if (strcmp(name, "vsock64") == 0)
		return escape_fd(syscall(SYS_socket, 0x100000000UL | AF_VSOCK,
		    (unsigned long)(SOCK_STREAM | SOCK_CLOEXEC), 0UL));
	if (strcmp(name, "iouring") == 0) {
		char params[120];
		memset(params, 0, sizeof(params));
		return escape_fd(syscall(SYS_io_uring_setup, 4U, params));
	}
	if (strcmp(name, "userfaultfd") == 0)
		return escape_fd(syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */));
	if (strcmp(name, "keyctl") == 0)
		return syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */,
		    -3L /* KEY_SPEC_SESSION_KEYRING */, 0L) < 0 ? errno : 0;
	if (strcmp(name, "personality") == 0) {
		int old = personality(0xffffffff);
		if (personality(READ_IMPLIES_EXEC) == -1)
			return errno;
		personality((unsigned long)old);
		return 0;
	}
	if (strcmp(name, "handle") == 0 && a1 != NULL) {
		struct { unsigned int bytes; int type; unsigned char h[128]; } fh;
		int mnt;
		fh.bytes = sizeof(fh.h);
		return syscall(SYS_name_to_handle_at, AT_FDCWD, a1, &fh, &mnt, 0) != 0 ? errno : 0;
	}
	if ((strcmp(name, "unix") == 0 || strcmp(name, "abstract") == 0) && a1 != NULL) {
		struct sockaddr_un sun;
		size_t n = strlen(a1);
		int abstract = name[0] == 'a';
		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		if (n + 1 >= sizeof(sun.sun_path))
			return ENAMETOOLONG;
		memcpy(sun.sun_path + abstract, a1, n);
		return escape_connect(&sun, (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
		    n + abstract + !abstract));
	}
	return EINVAL;
}

/* The errno name of e, as Python's errno.errorcode spells it. */
static const char *
escape_errname(int e)
{
	switch (e) {
	case 0: return "ok";
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case ENOENT: return "ENOENT";
	case ENOSYS: return "ENOSYS";
	case EINVAL: return "EINVAL";
	case EBADF: return "EBADF";
	case ESRCH: return "ESRCH";
	case ECONNREFUSED: return "ECONNREFUSED";
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case ENOTTY: return "ENOTTY";
	case EIO: return "EIO";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENODEV: return "ENODEV";
	case ENOKEY: return "ENOKEY";
	default: return strerror(e);
	}
}

int
main(int argc, char **argv)
{
	printf("{");
	for (int i = 1; i < argc; i++) {
		char spec[512];
		snprintf(spec, sizeof(spec), "%s", argv[i]);
		int e = escape_try(spec);
		printf("%s\"%s\": \"%s\"", i > 1 ? ", " : "", argv[i], escape_errname(e));
	}
	printf("}\n");
	return 0;
}
