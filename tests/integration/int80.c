/*
 * int80.c: getpid through a syscall ABI other than the native one, for
 * test_hostctl.py. "i386" enters through int $0x80, "x32" sets
 * __X32_SYSCALL_BIT on the native entry. Exits 0 when the call returned
 * this process's pid, 3 when it failed (errno on stdout); under gensee's
 * filter it should not return at all (SIGSYS).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* getpid through the ABI named by abi; -1 with errno when it fails. */
static long
int80_getpid(const char *abi)
{
#if defined(__x86_64__)
	if (strcmp(abi, "i386") == 0) {
		long r;
		__asm__ volatile ("int $0x80" : "=a"(r) : "a"(20L) : "memory", "cc");
		if (r < 0 && r > -4096) {
			errno = (int)-r;
			return -1;
		}
		return r;
	}
	if (strcmp(abi, "x32") == 0)
		return syscall(0x40000000 | SYS_getpid);
#endif
	errno = ENOTSUP;
	return -1;
}

/* Run the getpid named by argv[1] and report how it went. */
int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: int80 i386|x32\n");
		return 2;
	}
	/* Die of a fault as without sanitizers, whose runtimes catch SIGSEGV. */
	if (signal(SIGSEGV, SIG_DFL) == SIG_ERR)
		_exit(4);
	long r = int80_getpid(argv[1]);
	if (r == (long)getpid()) {
		printf("ok\n");
		fflush(stdout);
		_exit(0);
	}
	printf("%s\n", r < 0 ? strerror(errno) : "wrong pid");
	fflush(stdout);
	_exit(3);
}
