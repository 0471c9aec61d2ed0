/*
 * proc.c: /proc readers.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sodium.h>

#include "proc.h"
#include "util.h"

int
proc_parse_stat(const char *buf, struct proc_stat *out)
{
	const char *lp = strchr(buf, '(');
	const char *rp = strrchr(buf, ')');
	unsigned long long v;
	int field;
	const char *p;
	char *end;

	memset(out, 0, sizeof(*out));
	if (lp == NULL || rp == NULL || rp < lp)
		return -1;
	long pid = strtol(buf, &end, 10);
	if (end == buf || pid <= 0)
		return -1;
	out->ps_pid = (pid_t)pid;
	size_t clen = (size_t)(rp - lp - 1);
	if (clen >= sizeof(out->ps_comm))
		clen = sizeof(out->ps_comm) - 1;
	memcpy(out->ps_comm, lp + 1, clen);
	out->ps_comm[clen] = '\0';

	/* Fields after the comm start at 3 (state). */
	p = rp + 1;
	for (field = 3; field <= 22; field++) {
		while (*p == ' ')
			p++;
		if (*p == '\0')
			return -1;
		if (field == 3) {
			out->ps_state = *p;
		} else if (field == 4 || field == 22) {
			errno = 0;
			v = strtoull(p, &end, 10);
			if (errno != 0 || end == p)
				return -1;
			if (field == 4)
				out->ps_ppid = (pid_t)v;
			else
				out->ps_start_ticks = v;
		}
		while (*p != ' ' && *p != '\0')
			p++;
	}
	return 0;
}

int
proc_read_stat(pid_t pid, struct proc_stat *out)
{
	char path[64], *buf;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (util_read_path(path, 4096, &buf, NULL) != 0) {
		if (errno == ENOENT)
			errno = ESRCH;
		return -1;
	}
	int r = proc_parse_stat(buf, out);
	free(buf);
	if (r != 0) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

int
proc_read_uids(pid_t pid, uid_t uids[4])
{
	char path[64], *buf, *line;
	int found = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (util_read_path(path, 16384, &buf, NULL) != 0)
		return -1;
	line = strstr(buf, "\nUid:");
	if (line != NULL) {
		unsigned a, b, c, d;
		if (sscanf(line + 5, "%u %u %u %u", &a, &b, &c, &d) == 4) {
			uids[0] = a;
			uids[1] = b;
			uids[2] = c;
			uids[3] = d;
			found = 0;
		}
	}
	free(buf);
	if (found != 0)
		errno = EINVAL;
	return found;
}

int
proc_read_confinement(pid_t pid, int *no_new_privs, int *seccomp)
{
	char path[64], *buf, *line;
	int found = 0;

	*no_new_privs = *seccomp = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (util_read_path(path, 16384, &buf, NULL) != 0)
		return -1;
	if ((line = strstr(buf, "\nNoNewPrivs:")) != NULL &&
	    sscanf(line + 12, "%d", no_new_privs) == 1)
		found++;
	if ((line = strstr(buf, "\nSeccomp:")) != NULL && sscanf(line + 9, "%d", seccomp) == 1)
		found++;
	free(buf);
	if (found != 2) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

int
proc_identity_matches(pid_t pid, uint64_t start_ticks)
{
	struct proc_stat st;
	if (proc_read_stat(pid, &st) != 0)
		return -1;
	if (st.ps_start_ticks != start_ticks) {
		errno = ESRCH;
		return -1;
	}
	return 0;
}

int
proc_read_exe(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, buf, len - 1);
	if (n < 0) {
		buf[0] = '\0';
		return -1;
	}
	buf[n] = '\0';
	return 0;
}

int
proc_argv_digest(pid_t pid, char hex[PROC_DIGEST_HEX])
{
	char path[64], *buf;
	size_t len;
	unsigned char d[crypto_hash_sha256_BYTES];

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if (util_read_path(path, 1 << 20, &buf, &len) != 0) {
		hex[0] = '\0';
		return -1;
	}
	crypto_hash_sha256(d, (unsigned char *)buf, len);
	free(buf);
	sodium_bin2hex(hex, PROC_DIGEST_HEX, d, sizeof(d));
	return 0;
}

int
proc_list_pids(pid_t **out, size_t *n)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	size_t cap = 256, cnt = 0;
	pid_t *v;

	if (d == NULL)
		return -1;
	v = malloc(cap * sizeof(*v));
	if (v == NULL) {
		closedir(d);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		if (cnt == cap) {
			pid_t *nv = realloc(v, 2 * cap * sizeof(*v));
			if (nv == NULL) {
				free(v);
				closedir(d);
				return -1;
			}
			v = nv;
			cap *= 2;
		}
		v[cnt++] = (pid_t)strtol(de->d_name, NULL, 10);
	}
	closedir(d);
	*out = v;
	*n = cnt;
	return 0;
}

int
proc_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

int
proc_pidfd_signal(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

long
proc_clock_ticks(void)
{
	long t = sysconf(_SC_CLK_TCK);
	return t > 0 ? t : 100;
}

/*
 * The descendants of root: one /proc snapshot, linked by ppid. A process
 * may fork between the snapshot and whatever the caller does with it, so
 * callers that must catch every member repeat until a round finds nothing
 * new.
 */
int
proc_descendants(pid_t root, pid_t **out, size_t *n)
{
	pid_t *all, *ppid, *res;
	size_t nall, k = 0;

	*out = NULL;
	*n = 0;
	if (proc_list_pids(&all, &nall) != 0)
		return -1;
	ppid = calloc(nall + 1, sizeof(*ppid));
	res = calloc(nall + 1, sizeof(*res));
	if (ppid == NULL || res == NULL) {
		free(all);
		free(ppid);
		free(res);
		return -1;
	}
	for (size_t i = 0; i < nall; i++) {
		struct proc_stat st;
		ppid[i] = proc_read_stat(all[i], &st) == 0 ? st.ps_ppid : 0;
	}
	/* One generation more per round, until a round adds nothing. */
	for (int grow = 1; grow;) {
		grow = 0;
		for (size_t i = 0; i < nall; i++) {
			int parent = ppid[i] == root, seen = all[i] == root;
			for (size_t j = 0; j < k && !seen; j++) {
				parent |= ppid[i] == res[j];
				seen = res[j] == all[i];
			}
			if (parent && !seen) {
				res[k++] = all[i];
				grow = 1;
			}
		}
	}
	free(all);
	free(ppid);
	*out = res;
	*n = k;
	return 0;
}
