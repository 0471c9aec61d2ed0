/*
 * hostcaps.c: host capability probes for `gensee status`.
 *
 * Each probe is one small function that asks the kernel directly (a
 * syscall, a netlink request, a file under /proc or /sys) rather than
 * guessing from the distribution, and says in "detail" how it knows. Where
 * the honest answer is "cannot tell without root", that is what it says.
 */
#include <sys/fanotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/landlock.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>

#include <json-c/json.h>
#include <zlib.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <seccomp.h>

#include "cgroup.h"
#include "hostcaps.h"
#include "log.h"
#include "util.h"

#define HOSTCAPS_MOUNTINFO_MAX (4 * 1024 * 1024)
#define HOSTCAPS_SMALL_MAX 65536
#define HOSTCAPS_NL_BUF 16384

/* The check-only nftables probe names its (never committed) objects so. */
#define HOSTCAPS_NFT_TABLE "gensee_hostcaps_probe"
#define HOSTCAPS_NFT_CHAIN "probe"

/* What every probe may look at; read once per hostcaps_probe(). */
struct hostcaps_ctx {
	char *hc_mountinfo;	/* /proc/self/mountinfo, NULL if unreadable */
	char *hc_filesystems;	/* /proc/filesystems, NULL if unreadable */
	struct utsname hc_uts;
	int hc_root;		/* euid 0 */
};

/* Add v under key; on failure (out of memory) the field is dropped. */
static void
hostcaps_add(struct json_object *o, const char *key, struct json_object *v)
{
	if (o == NULL || json_object_object_add(o, key, v) != 0)
		json_object_put(v);
}

/* Set "available" and a formatted "detail" on a probe's entry. */
static void __attribute__((format(printf, 3, 4)))
hostcaps_set(struct json_object *e, int available, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	hostcaps_add(e, "available", json_object_new_boolean(available));
	hostcaps_add(e, "detail", json_object_new_string(s != NULL ? s : "out of memory"));
	free(s);
}

/* A new entry, unavailable until its probe says otherwise. */
static struct json_object *
hostcaps_entry(void)
{
	struct json_object *e = json_object_new_object();

	hostcaps_set(e, 0, "not probed");
	return e;
}

/* Close an fd the probe opened; a failure is logged, there is nothing else to do. */
static void
hostcaps_close(int fd)
{
	if (close(fd) != 0 && errno != EINTR)
		log_warn("hostcaps: close");
}

/* Read a small file and strip trailing whitespace; NULL with errno on failure. */
static char *
hostcaps_read_trim(const char *path)
{
	char *s;
	size_t len;

	if (util_read_path(path, HOSTCAPS_SMALL_MAX, &s, &len) != 0)
		return NULL;
	while (len > 0 && isspace((unsigned char)s[len - 1]))
		s[--len] = '\0';
	return s;
}

/*
 * The kernel's build configuration for one option ("y", "m" or "n"), from
 * /proc/config.gz or /boot/config-RELEASE; NULL when neither is readable.
 */
static const char *
hostcaps_kconfig(struct hostcaps_ctx *hc, const char *option)
{
	char path[PATH_MAX], line[512];
	size_t olen = strlen(option);
	const char *val = NULL;
	gzFile gz = gzopen("/proc/config.gz", "rb");

	if (gz == NULL) {
		snprintf(path, sizeof(path), "/boot/config-%s", hc->hc_uts.release);
		gz = gzopen(path, "rb"); /* zlib reads plain files too */
	}
	if (gz == NULL)
		return NULL;
	val = "n";
	while (gzgets(gz, line, (int)sizeof(line)) != NULL) {
		if (strncmp(line, option, olen) == 0 && line[olen] == '=') {
			val = line[olen + 1] == 'y' ? "y" : line[olen + 1] == 'm' ? "m" : "n";
			break;
		}
	}
	gzclose(gz);
	return val;
}

/* 1 if path exists (without following a final symlink), else 0. */
static int
hostcaps_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

int
hostcaps_filesystems_has(const char *text, const char *fstype)
{
	const char *line = text, *nl, *name;
	size_t n, want = strlen(fstype);

	/* Each line is "[nodev]\tNAME". */
	while (line != NULL && *line != '\0') {
		nl = strchr(line, '\n');
		n = nl != NULL ? (size_t)(nl - line) : strlen(line);
		name = memchr(line, '\t', n);
		name = name != NULL ? name + 1 : line;
		while (name < line + n && isspace((unsigned char)*name))
			name++;
		if ((size_t)(line + n - name) == want && strncmp(name, fstype, want) == 0)
			return 1;
		line = nl != NULL ? nl + 1 : NULL;
	}
	return 0;
}

struct json_object *
hostcaps_words(const char *text)
{
	struct json_object *a = json_object_new_array();
	const char *p = text, *start;

	while (a != NULL && p != NULL && *p != '\0') {
		while (*p != '\0' && isspace((unsigned char)*p))
			p++;
		if (*p == '\0')
			break;
		start = p;
		while (*p != '\0' && !isspace((unsigned char)*p))
			p++;
		struct json_object *w = json_object_new_string_len(start, (int)(p - start));
		if (w == NULL || json_object_array_add(a, w) != 0) {
			json_object_put(w);
			json_object_put(a);
			return NULL;
		}
	}
	return a;
}

/* Decode mountinfo's \ooo escapes of n bytes of src into buf; -1 if too long. */
static int
hostcaps_unescape(const char *src, size_t n, char *buf, size_t len)
{
	size_t w = 0;

	for (size_t r = 0; r < n; r++) {
		char c = src[r];
		if (c == '\\' && r + 3 < n && src[r + 1] >= '0' && src[r + 1] <= '7' &&
		    src[r + 2] >= '0' && src[r + 2] <= '7' && src[r + 3] >= '0' &&
		    src[r + 3] <= '7') {
			c = (char)(((src[r + 1] - '0') << 6) | ((src[r + 2] - '0') << 3) |
			    (src[r + 3] - '0'));
			r += 3;
		}
		if (w + 1 >= len)
			return -1;
		buf[w++] = c;
	}
	if (len == 0)
		return -1;
	buf[w] = '\0';
	return 0;
}

int
hostcaps_mountinfo_find(const char *text, const char *fstype, char *buf, size_t len)
{
	const char *line = text, *nl;

	while (line != NULL && *line != '\0') {
		/* id parent maj:min root mountpoint opts [optional...] - fstype src sopts */
		const char *f[6] = { NULL }, *p, *end;
		size_t flen[6] = { 0 };
		int field = 0, after_sep = 0;

		nl = strchr(line, '\n');
		end = nl != NULL ? nl : line + strlen(line);
		for (p = line; p < end;) {
			const char *tok;
			size_t tlen;

			while (p < end && *p == ' ')
				p++;
			if (p == end)
				break;
			tok = p;
			while (p < end && *p != ' ')
				p++;
			tlen = (size_t)(p - tok);
			if (field < 6) {
				f[field] = tok;
				flen[field] = tlen;
			} else if (!after_sep) {
				if (tlen == 1 && *tok == '-')
					after_sep = 1;
			} else {
				if (f[4] != NULL && tlen == strlen(fstype) &&
				    strncmp(tok, fstype, tlen) == 0)
					return hostcaps_unescape(f[4], flen[4], buf, len);
				break;
			}
			field++;
		}
		line = nl != NULL ? nl + 1 : NULL;
	}
	return -1;
}

int
hostcaps_release_at_least(const char *release, int major, int minor)
{
	char *end;
	long ma, mi = 0;

	errno = 0;
	ma = strtol(release, &end, 10);
	if (errno != 0 || end == release)
		return 0;
	if (*end == '.') {
		const char *s = end + 1;
		mi = strtol(s, &end, 10);
		if (errno != 0 || end == s)
			mi = 0;
	}
	return ma > major || (ma == major && mi >= minor);
}

/*
 * fanotify permission events: the group needs CAP_SYS_ADMIN, the mark
 * needs a kernel built with CONFIG_FANOTIFY_ACCESS_PERMISSIONS.
 */
static struct json_object *
hostcaps_fanotify(struct hostcaps_ctx *hc)
{
	struct json_object *e = hostcaps_entry();
	int fd, rm_err;

	fd = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK, O_RDONLY);
	if (fd < 0) {
		int saved = errno;
		hostcaps_add(e, "fanotify_init", json_object_new_string(strerror(saved)));
		hostcaps_add(e, "fanotify_mark", json_object_new_string("not tried"));
		if (saved == EPERM && !hc->hc_root)
			hostcaps_set(e, 0, "requires root (CAP_SYS_ADMIN)");
		else if (saved == EPERM)
			hostcaps_set(e, 0, "fanotify_init refused as root: CAP_SYS_ADMIN is "
			    "missing (container or capability bounding set)");
		else if (saved == ENOSYS)
			hostcaps_set(e, 0, "kernel built without fanotify");
		else if (saved == EINVAL)
			hostcaps_set(e, 0, "kernel rejects FAN_CLASS_CONTENT: no permission events");
		else
			hostcaps_set(e, 0, "fanotify_init: %s", strerror(saved));
		return e;
	}
	hostcaps_add(e, "fanotify_init", json_object_new_string("ok"));

	/*
	 * An inode mark on "/" itself: only opens of the root directory raise
	 * events, the mark goes away at once, and closing the group answers
	 * any event that arrived in between with allow, so no process is held.
	 */
	if (fanotify_mark(fd, FAN_MARK_ADD, FAN_OPEN_PERM, AT_FDCWD, "/") != 0) {
		int saved = errno;
		hostcaps_add(e, "fanotify_mark", json_object_new_string(strerror(saved)));
		if (saved == EINVAL)
			hostcaps_set(e, 0, "kernel lacks fanotify permission events "
			    "(FAN_OPEN_PERM mark rejected: CONFIG_FANOTIFY_ACCESS_PERMISSIONS)");
		else
			hostcaps_set(e, 0, "fanotify_mark FAN_OPEN_PERM on /: %s", strerror(saved));
		hostcaps_close(fd);
		return e;
	}
	rm_err = fanotify_mark(fd, FAN_MARK_REMOVE, FAN_OPEN_PERM, AT_FDCWD, "/") == 0 ? 0 :
	    errno;
	hostcaps_add(e, "fanotify_mark", json_object_new_string("ok"));
	if (rm_err == 0)
		hostcaps_set(e, 1, "permission events supported (FAN_OPEN_PERM mark on / "
		    "added and removed)");
	else
		hostcaps_set(e, 1, "permission events supported (removing the test mark "
		    "failed: %s; closing the group dropped it)", strerror(rm_err));
	hostcaps_close(fd);
	return e;
}

/* seccomp: filter support, the actions the kernel offers and this process's mode. */
static struct json_object *
hostcaps_seccomp(struct hostcaps_ctx *hc)
{
	struct json_object *e = hostcaps_entry(), *actions = NULL;
	const struct scmp_version *v = seccomp_version();
	const char *mode_name;
	char *text;
	int mode, nnp;

	(void)hc;
	mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
	if (mode < 0) {
		hostcaps_set(e, 0, "prctl(PR_GET_SECCOMP): %s (kernel without seccomp?)",
		    strerror(errno));
		return e;
	}
	switch (mode) {
	case SECCOMP_MODE_DISABLED:
		mode_name = "disabled";
		break;
	case SECCOMP_MODE_STRICT:
		mode_name = "strict";
		break;
	case SECCOMP_MODE_FILTER:
		mode_name = "filter";
		break;
	default:
		mode_name = "unknown";
		break;
	}
	hostcaps_add(e, "current_mode", json_object_new_string(mode_name));
	nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	hostcaps_add(e, "no_new_privs", nnp < 0 ? NULL : json_object_new_boolean(nnp == 1));
	if (v != NULL) {
		char ver[32];
		snprintf(ver, sizeof(ver), "%u.%u.%u", v->major, v->minor, v->micro);
		hostcaps_add(e, "libseccomp_version", json_object_new_string(ver));
	}
	hostcaps_add(e, "libseccomp_api", json_object_new_int((int)seccomp_api_get()));

	text = hostcaps_read_trim("/proc/sys/kernel/seccomp/actions_avail");
	if (text == NULL) {
		int saved = errno;
		hostcaps_add(e, "actions", json_object_new_array());
		hostcaps_set(e, 0, "seccomp present (mode %s) but "
		    "/proc/sys/kernel/seccomp/actions_avail: %s (no filter mode?)", mode_name,
		    strerror(saved));
		return e;
	}
	actions = hostcaps_words(text);
	hostcaps_add(e, "actions", actions);
	hostcaps_set(e, 1, "filter mode with actions: %s (this process: %s)", text, mode_name);
	free(text);
	return e;
}

/*
 * Whether cgroup.kill (Linux 5.14) exists. The root cgroup never has the
 * file, so look in this process's cgroup or in a child of the root; with
 * no child to look at, fall back to the kernel release and say so.
 * Returns 1 when a cgroup was looked at, 0 when the answer is inferred.
 */
static int
hostcaps_cgroup_kill(struct hostcaps_ctx *hc, struct json_object *e, const char *mnt,
    const char *own)
{
	char rel[PATH_MAX], basis[PATH_MAX + 64];
	struct dirent *de;
	struct stat st;
	int have = -1, seen = 0, failed = 0;
	DIR *d;

	if ((d = opendir(mnt)) == NULL) {
		snprintf(basis, sizeof(basis), "opening %s: %s", mnt, strerror(errno));
		goto out;
	}
	if (*own != '\0' && (size_t)snprintf(rel, sizeof(rel), "%s/cgroup.kill", own) <
	    sizeof(rel) && fstatat(dirfd(d), rel, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		have = seen = 1;
		snprintf(basis, sizeof(basis), "this process's cgroup has cgroup.kill");
	}
	while (!seen) {
		errno = 0;	/* readdir's only way to tell an error from the end */
		if ((de = readdir(d)) == NULL) {
			if (errno != 0) {
				failed = 1;
				snprintf(basis, sizeof(basis), "reading %s: %s", mnt,
				    strerror(errno));
			}
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISDIR(st.st_mode) ||
		    (size_t)snprintf(rel, sizeof(rel), "%s/cgroup.kill", de->d_name) >= sizeof(rel))
			continue;
		have = fstatat(dirfd(d), rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
		seen = 1;
		snprintf(basis, sizeof(basis), "child cgroup %s %s cgroup.kill", de->d_name,
		    have ? "has" : "has no");
	}
	if (!seen && !failed) {
		have = hostcaps_release_at_least(hc->hc_uts.release, 5, 14);
		snprintf(basis, sizeof(basis), "not seen (no child cgroup to look at); %s",
		    have ? "inferred from kernel >= 5.14" : "kernel is older than 5.14");
	}
	if (closedir(d) != 0)
		log_warn("hostcaps: closedir");
out:
	hostcaps_add(e, "cgroup_kill", have < 0 ? NULL : json_object_new_boolean(have));
	hostcaps_add(e, "cgroup_kill_basis", json_object_new_string(basis));
	return seen;
}

/* cgroup v2: the mount (found in mountinfo, never assumed), its controllers and cgroup.kill. */
static struct json_object *
hostcaps_cgroup(struct hostcaps_ctx *hc)
{
	struct json_object *e = hostcaps_entry(), *ctl;
	char mnt[PATH_MAX], own[PATH_MAX], path[PATH_MAX], v1[PATH_MAX], *cause = NULL, *text;
	int hybrid, seen;

	if (cgroup_find_mount(mnt, sizeof(mnt), &cause) != 0) {
		hostcaps_add(e, "mount", NULL);
		hostcaps_set(e, 0, "%s", cause);
		free(cause);
		return e;
	}
	hostcaps_add(e, "mount", json_object_new_string(mnt));
	hybrid = hc->hc_mountinfo != NULL &&
	    hostcaps_mountinfo_find(hc->hc_mountinfo, "cgroup", v1, sizeof(v1)) == 0;
	hostcaps_add(e, "hybrid", json_object_new_boolean(hybrid));
	if (cgroup_of_pid(getpid(), own, sizeof(own)) == 0) {
		snprintf(path, sizeof(path), "/%s", own);
		hostcaps_add(e, "own_cgroup", json_object_new_string(path));
	} else {
		own[0] = '\0';
		hostcaps_add(e, "own_cgroup", NULL);
	}

	ctl = NULL;
	if ((size_t)snprintf(path, sizeof(path), "%s/cgroup.controllers", mnt) < sizeof(path) &&
	    (text = hostcaps_read_trim(path)) != NULL) {
		ctl = hostcaps_words(text);
		free(text);
	}
	hostcaps_add(e, "controllers", ctl != NULL ? ctl : json_object_new_array());
	seen = hostcaps_cgroup_kill(hc, e, mnt, own);

	struct json_object *kill = json_object_object_get(e, "cgroup_kill");
	hostcaps_set(e, 1, "cgroup2 at %s%s, %zu controller(s), cgroup.kill %s%s", mnt,
	    hybrid ? " (hybrid: v1 hierarchies mounted too)" : "",
	    ctl != NULL ? json_object_array_length(ctl) : 0,
	    kill == NULL || json_object_get_type(kill) != json_type_boolean ? "unknown" :
	    json_object_get_boolean(kill) ? "yes" : "no",
	    seen ? "" : " (inferred from the kernel release)");
	return e;
}

/* Receive one datagram before the deadline; -1 with errno (ETIMEDOUT when nothing came). */
static ssize_t
hostcaps_nl_recv(int fd, int64_t deadline, void *buf, size_t len)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - util_monotonic_ms();
		ssize_t r;
		int n;

		if (left <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		n = poll(&pfd, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		r = recv(fd, buf, len, MSG_DONTWAIT);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		return r;
	}
}

/*
 * Wait for the acks of n requests (sequence numbers seqs[]), storing each
 * one's errno (0 for success) in errs[]. Other messages are passed to cb.
 * Returns 0 when all arrived, -1 with errno otherwise.
 */
static int
hostcaps_nl_acks(struct mnl_socket *nl, const uint32_t *seqs, int *errs, size_t n,
    void (*cb)(const struct nlmsghdr *, void *), void *arg)
{
	int64_t deadline = util_monotonic_ms() + HOSTCAPS_NL_TIMEOUT_MS;
	size_t left = n;
	char buf[HOSTCAPS_NL_BUF] __attribute__((aligned(8)));

	for (size_t i = 0; i < n; i++)
		errs[i] = -1;
	while (left > 0) {
		ssize_t r = hostcaps_nl_recv(mnl_socket_get_fd(nl), deadline, buf, sizeof(buf));
		if (r < 0)
			return -1;
		int len = (int)r;
		for (const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf;
		    mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len)) {
			size_t i;
			for (i = 0; i < n && seqs[i] != nlh->nlmsg_seq; i++)
				continue;
			if (i == n)
				continue;
			if (nlh->nlmsg_type != NLMSG_ERROR) {
				if (cb != NULL)
					cb(nlh, arg);
				continue;
			}
			if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(struct nlmsgerr))) {
				errno = EBADMSG;
				return -1;
			}
			const struct nlmsgerr *ne = mnl_nlmsg_get_payload(nlh);
			if (errs[i] == -1)
				left--;
			errs[i] = ne->error < 0 ? -ne->error : ne->error;
		}
	}
	return 0;
}

/* Pick NFTA_GEN_ID out of an NFT_MSG_NEWGEN reply. */
static void
hostcaps_nft_gen_cb(const struct nlmsghdr *nlh, void *arg)
{
	const struct nlattr *attr;
	int64_t *gen = arg;

	if (nlh->nlmsg_type != ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWGEN) ||
	    nlh->nlmsg_len < mnl_nlmsg_size(sizeof(struct nfgenmsg)))
		return;
	mnl_attr_for_each(attr, nlh, sizeof(struct nfgenmsg)) {
		if (mnl_attr_get_type(attr) == NFTA_GEN_ID &&
		    mnl_attr_validate(attr, MNL_TYPE_U32) == 0)
			*gen = ntohl(mnl_attr_get_u32(attr));
	}
}

/* NFT_MSG_GETGEN: 0 with *gen (-1 when the reply carried none), or an errno. */
static int
hostcaps_nft_getgen(struct mnl_socket *nl, uint32_t seq, int64_t *gen)
{
	char buf[MNL_SOCKET_BUFFER_SIZE] __attribute__((aligned(8)));
	struct nlmsghdr *nlh;
	struct nfgenmsg *nfg;
	int err;

	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETGEN;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_UNSPEC;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(0);
	*gen = -1;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return errno;
	if (hostcaps_nl_acks(nl, &seq, &err, 1, hostcaps_nft_gen_cb, gen) != 0)
		return errno;
	return err;
}

/* Set a u32 expression attribute (nftnl_expr_set_u32 cannot report failure). */
static int
hostcaps_nft_u32(struct nftnl_expr *e, uint16_t type, uint32_t v)
{
	return nftnl_expr_set(e, type, &v, sizeof(v));
}

/* Build the probe rule: socket cgroupv2 level 1 -> reg 1, reg 1 == 1. */
static struct nftnl_rule *
hostcaps_nft_rule(void)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct nftnl_expr *sock = NULL, *cmp = NULL;
	uint64_t id = 1;

	if (r == NULL)
		return NULL;
	if (nftnl_rule_set_str(r, NFTNL_RULE_TABLE, HOSTCAPS_NFT_TABLE) != 0 ||
	    nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, HOSTCAPS_NFT_CHAIN) != 0 ||
	    (sock = nftnl_expr_alloc("socket")) == NULL ||
	    (cmp = nftnl_expr_alloc("cmp")) == NULL ||
	    hostcaps_nft_u32(sock, NFTNL_EXPR_SOCKET_KEY, NFT_SOCKET_CGROUPV2) != 0 ||
	    hostcaps_nft_u32(sock, NFTNL_EXPR_SOCKET_LEVEL, 1) != 0 ||
	    hostcaps_nft_u32(sock, NFTNL_EXPR_SOCKET_DREG, NFT_REG_1) != 0 ||
	    hostcaps_nft_u32(cmp, NFTNL_EXPR_CMP_SREG, NFT_REG_1) != 0 ||
	    hostcaps_nft_u32(cmp, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ) != 0 ||
	    nftnl_expr_set(cmp, NFTNL_EXPR_CMP_DATA, &id, sizeof(id)) != 0) {
		nftnl_expr_free(sock);
		nftnl_expr_free(cmp);
		nftnl_rule_free(r);
		return NULL;
	}
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	nftnl_rule_add_expr(r, sock);
	nftnl_rule_add_expr(r, cmp);
	return r;
}

/* Build table + output base chain + probe rule into batch b at seqs[0..2]. */
static int
hostcaps_nft_build(struct mnl_nlmsg_batch *b, const uint32_t *seqs)
{
	struct nftnl_table *t = nftnl_table_alloc();
	struct nftnl_chain *c = nftnl_chain_alloc();
	struct nftnl_rule *r = hostcaps_nft_rule();
	struct nlmsghdr *nlh;
	int rc = -1;

	if (t == NULL || c == NULL || r == NULL ||
	    nftnl_table_set_str(t, NFTNL_TABLE_NAME, HOSTCAPS_NFT_TABLE) != 0 ||
	    nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, HOSTCAPS_NFT_TABLE) != 0 ||
	    nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, HOSTCAPS_NFT_CHAIN) != 0 ||
	    nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, "filter") != 0)
		goto out;
	nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, NF_INET_LOCAL_OUT);
	nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, 0);

	nlh = nftnl_table_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), NFT_MSG_NEWTABLE,
	    NFPROTO_INET, NLM_F_CREATE | NLM_F_ACK, seqs[0]);
	nftnl_table_nlmsg_build_payload(nlh, t);
	if (!mnl_nlmsg_batch_next(b))
		goto out;
	nlh = nftnl_chain_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), NFT_MSG_NEWCHAIN,
	    NFPROTO_INET, NLM_F_CREATE | NLM_F_ACK, seqs[1]);
	nftnl_chain_nlmsg_build_payload(nlh, c);
	if (!mnl_nlmsg_batch_next(b))
		goto out;
	nlh = nftnl_rule_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), NFT_MSG_NEWRULE,
	    NFPROTO_INET, NLM_F_CREATE | NLM_F_APPEND | NLM_F_ACK, seqs[2]);
	nftnl_rule_nlmsg_build_payload(nlh, r);
	if (!mnl_nlmsg_batch_next(b))
		goto out;
	rc = 0;
out:
	if (t != NULL)
		nftnl_table_free(t);
	if (c != NULL)
		nftnl_chain_free(c);
	if (r != NULL)
		nftnl_rule_free(r);
	return rc;
}

/*
 * Ask the kernel to validate, without committing, an output chain with a
 * `socket cgroupv2 level 1` rule. The batch carries no NFNL_MSG_BATCH_END:
 * nfnetlink commits only when it sees one and otherwise aborts after
 * checking every message, so nothing is ever installed, even for a moment.
 * Returns the rule's errno (0 accepted), or -1 with *why when the probe
 * itself failed.
 */
static int
hostcaps_nft_socket_check(struct mnl_socket *nl, uint32_t seq, const char **why)
{
	char buf[HOSTCAPS_NL_BUF] __attribute__((aligned(8)));
	struct mnl_nlmsg_batch *b;
	uint32_t seqs[3] = { seq + 1, seq + 2, seq + 3 };
	int errs[3];

	b = mnl_nlmsg_batch_start(buf, sizeof(buf));
	if (b == NULL) {
		*why = "out of memory";
		return -1;
	}
	nftnl_batch_begin(mnl_nlmsg_batch_current(b), seq);
	if (!mnl_nlmsg_batch_next(b) || hostcaps_nft_build(b, seqs) != 0) {
		mnl_nlmsg_batch_stop(b);
		*why = "could not build the probe batch";
		return -1;
	}
	if (mnl_socket_sendto(nl, mnl_nlmsg_batch_head(b), mnl_nlmsg_batch_size(b)) < 0) {
		mnl_nlmsg_batch_stop(b);
		*why = "sending the probe batch failed";
		return -1;
	}
	mnl_nlmsg_batch_stop(b);
	if (hostcaps_nl_acks(nl, seqs, errs, nitems(seqs), NULL, NULL) != 0) {
		*why = errno == ETIMEDOUT ? "no answer to the probe batch within 1 s" :
		    "reading the probe batch answer failed";
		return -1;
	}
	if (errs[0] != 0 || errs[1] != 0) {
		*why = "the probe table or output chain was rejected";
		return -1;
	}
	return errs[2];
}

/* Without the kernel's answer, look for nft_socket in sysfs and the module tree. */
static const char *
hostcaps_nft_socket_files(struct hostcaps_ctx *hc)
{
	static const char *const exts[] = { "", ".xz", ".zst", ".gz" };
	char path[PATH_MAX], *builtin;

	if (hostcaps_exists("/sys/module/nft_socket"))
		return "nft_socket module is loaded (/sys/module/nft_socket)";
	snprintf(path, sizeof(path), "/lib/modules/%s/modules.builtin", hc->hc_uts.release);
	if (util_read_path(path, HOSTCAPS_MOUNTINFO_MAX, &builtin, NULL) == 0) {
		int found = strstr(builtin, "/nft_socket.ko\n") != NULL;
		free(builtin);
		if (found)
			return "nft_socket is built in (modules.builtin)";
	}
	for (size_t i = 0; i < nitems(exts); i++) {
		snprintf(path, sizeof(path), "/lib/modules/%s/kernel/net/netfilter/nft_socket.ko%s",
		    hc->hc_uts.release, exts[i]);
		if (hostcaps_exists(path))
			return "nft_socket module is installed and loads on demand";
	}
	return NULL;
}

/* Record what is known about `socket cgroupv2` matching and how it is known. */
static void
hostcaps_nft_socket(struct hostcaps_ctx *hc, struct json_object *e, struct mnl_socket *nl,
    uint32_t seq, int gen_err)
{
	const char *why = NULL, *files;
	char msg[256];
	int err;

	if (gen_err == 0) {
		err = hostcaps_nft_socket_check(nl, seq, &why);
		if (err == 0) {
			hostcaps_add(e, "socket_cgroupv2", json_object_new_boolean(1));
			hostcaps_add(e, "socket_cgroupv2_basis", json_object_new_string(
			    "kernel accepted a `socket cgroupv2 level 1` rule in a check-only "
			    "batch (aborted, nothing installed)"));
			return;
		}
		if (err > 0) {
			snprintf(msg, sizeof(msg), "kernel rejected a `socket cgroupv2` rule: %s%s",
			    strerror(err), err == ENOENT ? " (no nft_socket expression)" :
			    err == EOPNOTSUPP ? " (no cgroupv2 key: kernel without "
			    "CONFIG_SOCK_CGROUP_DATA?)" : "");
			hostcaps_add(e, "socket_cgroupv2", json_object_new_boolean(0));
			hostcaps_add(e, "socket_cgroupv2_basis", json_object_new_string(msg));
			return;
		}
	}
	files = hostcaps_nft_socket_files(hc);
	snprintf(msg, sizeof(msg), "not exercised (%s); %s", why != NULL ? why :
	    gen_err == EPERM ? "asking the kernel requires root (CAP_NET_ADMIN)" :
	    "nf_tables did not answer", files != NULL ? files :
	    "no nft_socket module found in /sys/module or /lib/modules");
	hostcaps_add(e, "socket_cgroupv2", files != NULL ? json_object_new_boolean(1) : NULL);
	hostcaps_add(e, "socket_cgroupv2_basis", json_object_new_string(msg));
}

/* nftables: a GETGEN round trip over NETLINK_NETFILTER, then `socket cgroupv2`. */
static struct json_object *
hostcaps_nftables(struct hostcaps_ctx *hc)
{
	struct json_object *e = hostcaps_entry();
	struct mnl_socket *nl;
	uint32_t seq = (uint32_t)util_now_ms();
	int64_t gen;
	int err;

	nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (nl == NULL) {
		hostcaps_set(e, 0, "NETLINK_NETFILTER socket: %s (no nfnetlink?)", strerror(errno));
		return e;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) != 0) {
		hostcaps_set(e, 0, "NETLINK_NETFILTER bind: %s", strerror(errno));
		if (mnl_socket_close(nl) != 0)
			log_warn("hostcaps: close");
		return e;
	}
	err = hostcaps_nft_getgen(nl, seq, &gen);
	if (err == 0 && gen >= 0)
		hostcaps_add(e, "generation", json_object_new_int64(gen));
	else
		hostcaps_add(e, "generation", NULL);
	hostcaps_nft_socket(hc, e, nl, seq + 1, err);
	if (mnl_socket_close(nl) != 0)
		log_warn("hostcaps: close");

	if (err == 0)
		hostcaps_set(e, 1, "nf_tables answered NFT_MSG_GETGEN (generation %lld)",
		    (long long)gen);
	else if (err == EPERM && !hc->hc_root)
		hostcaps_set(e, 0, "requires root (CAP_NET_ADMIN)");
	else if (err == ETIMEDOUT)
		hostcaps_set(e, 0, "no answer to NFT_MSG_GETGEN within 1 s");
	else
		hostcaps_set(e, 0, "NFT_MSG_GETGEN: %s%s", strerror(err),
		    err == EPERM ? " (root without CAP_NET_ADMIN?)" : "");
	return e;
}

/* Landlock: the ABI version the kernel reports. */
static struct json_object *
hostcaps_landlock(struct hostcaps_ctx *hc)
{
	struct json_object *e = hostcaps_entry();
	long abi;

	(void)hc;
#ifdef SYS_landlock_create_ruleset
	abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
#else
	abi = -1;
	errno = ENOSYS;
#endif
	if (abi < 0) {
		int saved = errno;
		hostcaps_add(e, "abi", NULL);
		if (saved == ENOSYS)
			hostcaps_set(e, 0, "kernel built without Landlock");
		else if (saved == EOPNOTSUPP)
			hostcaps_set(e, 0, "Landlock built in but disabled at boot (not in lsm=)");
		else
			hostcaps_set(e, 0, "landlock_create_ruleset: %s", strerror(saved));
		return e;
	}
	hostcaps_add(e, "abi", json_object_new_int((int)abi));
	hostcaps_set(e, 1, "Landlock ABI %ld", abi);
	return e;
}

/*
 * Unprivileged user and mount namespaces, which the sandbox's mount view
 * needs (lib/mountview.c): tried for real in a child, as the caller, since
 * it is the launcher (the calling user) that creates them.
 */
static struct json_object *
hostcaps_userns(struct hostcaps_ctx *hc)
{
	struct json_object *e = hostcaps_entry();
	char *max = hostcaps_read_trim("/proc/sys/user/max_user_namespaces");
	int status, err = 0;
	pid_t pid;

	(void)hc;
	hostcaps_add(e, "max_user_namespaces", max != NULL ? json_object_new_int64(atoll(max)) :
	    NULL);
	free(max);
	if ((pid = fork()) < 0) {
		hostcaps_set(e, 0, "fork: %s", strerror(errno));
		return e;
	}
	if (pid == 0)
		_exit(unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : (errno & 0x7f) + 1);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			hostcaps_set(e, 0, "waitpid: %s", strerror(errno));
			return e;
		}
	if (WIFEXITED(status) && WEXITSTATUS(status) > 0)
		err = WEXITSTATUS(status) - 1;
	if (!WIFEXITED(status))
		hostcaps_set(e, 0, "the probe child died (status 0x%x)", status);
	else if (err != 0)
		hostcaps_set(e, 0, "unshare(CLONE_NEWUSER|CLONE_NEWNS): %s: the default mount view "
		    "of --sandbox linux refuses to run (linux.mount_view.mode best_effort runs "
		    "without it)", strerror(err));
	else
		hostcaps_set(e, 1, "unprivileged user and mount namespaces: the mount view works");
	return e;
}

/* A mounted bpf filesystem (for pinned BPF objects). */
static struct json_object *
hostcaps_bpf(struct hostcaps_ctx *hc)
{
	struct json_object *e = hostcaps_entry();
	char mnt[PATH_MAX];
	int fs = hc->hc_filesystems != NULL &&
	    hostcaps_filesystems_has(hc->hc_filesystems, "bpf");

	hostcaps_add(e, "filesystem", json_object_new_boolean(fs));
	if (hc->hc_mountinfo == NULL) {
		hostcaps_add(e, "mount", NULL);
		hostcaps_set(e, 0, "/proc/self/mountinfo unreadable");
		return e;
	}
	if (hostcaps_mountinfo_find(hc->hc_mountinfo, "bpf", mnt, sizeof(mnt)) == 0) {
		hostcaps_add(e, "mount", json_object_new_string(mnt));
		hostcaps_set(e, 1, "bpf filesystem mounted at %s", mnt);
		return e;
	}
	hostcaps_add(e, "mount", NULL);
	if (fs)
		hostcaps_set(e, 0, "kernel supports the bpf filesystem but none is mounted");
	else
		hostcaps_set(e, 0, "kernel has no bpf filesystem");
	return e;
}

/* AppArmor: compiled in, enabled, and reachable through securityfs. */
static struct json_object *
hostcaps_apparmor(struct hostcaps_ctx *hc)
{
	struct json_object *e = hostcaps_entry();
	char mnt[PATH_MAX], *flag;
	int on, fs;

	flag = hostcaps_read_trim("/sys/module/apparmor/parameters/enabled");
	if (flag == NULL) {
		int saved = errno;
		const char *k = hostcaps_kconfig(hc, "CONFIG_SECURITY_APPARMOR");
		hostcaps_add(e, "enabled", json_object_new_boolean(0));
		hostcaps_add(e, "kconfig", k != NULL ? json_object_new_string(k) : NULL);
		if (saved == ENOENT && k != NULL && strcmp(k, "y") == 0)
			hostcaps_set(e, 0, "compiled in (CONFIG_SECURITY_APPARMOR=y) but not active");
		else if (saved == ENOENT)
			hostcaps_set(e, 0, "not built into this kernel%s",
			    k != NULL ? " (CONFIG_SECURITY_APPARMOR is not set)" : "");
		else
			hostcaps_set(e, 0, "/sys/module/apparmor/parameters/enabled: %s",
			    strerror(saved));
		return e;
	}
	on = strcmp(flag, "Y") == 0;
	free(flag);
	fs = hostcaps_exists("/sys/kernel/security/apparmor");
	hostcaps_add(e, "enabled", json_object_new_boolean(on && fs));
	if (on && fs)
		hostcaps_set(e, 1, "enabled (/sys/kernel/security/apparmor present)");
	else if (!on)
		hostcaps_set(e, 0, "built in but inactive (not in lsm= or apparmor=0)");
	else if (hc->hc_mountinfo != NULL &&
	    hostcaps_mountinfo_find(hc->hc_mountinfo, "securityfs", mnt, sizeof(mnt)) != 0)
		hostcaps_set(e, 0, "enabled in the kernel but securityfs is not mounted, so "
		    "profiles cannot be loaded or inspected");
	else
		hostcaps_set(e, 0, "enabled flag is Y but /sys/kernel/security/apparmor is "
		    "missing (not an active LSM here)");
	return e;
}

/* SELinux: selinuxfs and its enforce flag. */
static struct json_object *
hostcaps_selinux(struct hostcaps_ctx *hc)
{
	struct json_object *e = hostcaps_entry();
	char *flag;

	flag = hostcaps_read_trim("/sys/fs/selinux/enforce");
	if (flag != NULL) {
		int enforcing = strcmp(flag, "1") == 0;
		free(flag);
		hostcaps_add(e, "enforcing", json_object_new_boolean(enforcing));
		hostcaps_set(e, 1, "enabled, %s", enforcing ? "enforcing" : "permissive");
		return e;
	}
	int saved = errno;
	if (saved != ENOENT && hostcaps_exists("/sys/fs/selinux/enforce")) {
		hostcaps_add(e, "enforcing", NULL);
		hostcaps_set(e, 1, "enabled; /sys/fs/selinux/enforce: %s", strerror(saved));
		return e;
	}
	const char *k = hostcaps_kconfig(hc, "CONFIG_SECURITY_SELINUX");
	hostcaps_add(e, "enforcing", json_object_new_boolean(0));
	hostcaps_add(e, "kconfig", k != NULL ? json_object_new_string(k) : NULL);
	if (hc->hc_filesystems != NULL && hostcaps_filesystems_has(hc->hc_filesystems,
	    "selinuxfs"))
		hostcaps_set(e, 0, "built in but disabled or selinuxfs not mounted");
	else if (k != NULL && strcmp(k, "y") == 0)
		hostcaps_set(e, 0, "compiled in (CONFIG_SECURITY_SELINUX=y) but not active "
		    "(not in the active LSM list)");
	else
		hostcaps_set(e, 0, "not built into this kernel");
	return e;
}

/* Send one PROC_CN_MCAST_* operation on a bound connector socket. */
static int
hostcaps_cn_send(int fd, uint32_t seq, enum proc_cn_mcast_op op)
{
	char buf[NLMSG_SPACE(sizeof(struct cn_msg) + sizeof(op))] __attribute__((aligned(8)));
	struct nlmsghdr *nlh = (struct nlmsghdr *)buf;
	struct cn_msg *cn;

	memset(buf, 0, sizeof(buf));
	nlh->nlmsg_len = NLMSG_LENGTH(sizeof(struct cn_msg) + sizeof(op));
	nlh->nlmsg_type = NLMSG_DONE;
	nlh->nlmsg_seq = seq;
	cn = NLMSG_DATA(nlh);
	cn->id.idx = CN_IDX_PROC;
	cn->id.val = CN_VAL_PROC;
	cn->seq = seq;
	cn->ack = seq;
	cn->len = sizeof(op);
	memcpy(cn->data, &op, sizeof(op));
	for (;;) {
		ssize_t n = send(fd, buf, nlh->nlmsg_len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		return 0;
	}
}

/*
 * Wait for the connector's ack of the request sent with seq: its error (0
 * success), or -1 with errno. Process events arriving meanwhile are skipped.
 */
static int
hostcaps_cn_ack(int fd, uint32_t seq)
{
	int64_t deadline = util_monotonic_ms() + HOSTCAPS_NL_TIMEOUT_MS;
	char buf[HOSTCAPS_NL_BUF] __attribute__((aligned(8)));

	for (;;) {
		ssize_t r = hostcaps_nl_recv(fd, deadline, buf, sizeof(buf));
		if (r < 0 && errno == ENOBUFS)
			continue;
		if (r < 0)
			return -1;
		unsigned int len = (unsigned int)r;
		for (struct nlmsghdr *nlh = (struct nlmsghdr *)buf; NLMSG_OK(nlh, len);
		    nlh = NLMSG_NEXT(nlh, len)) {
			struct cn_msg *cn = NLMSG_DATA(nlh);
			struct proc_event ev;

			/*
			 * The ack is multicast to every listener and not every
			 * kernel echoes the sequence number, but all answer with
			 * our ack field plus one.
			 */
			if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof(*cn) + sizeof(ev)) ||
			    cn->id.idx != CN_IDX_PROC || cn->id.val != CN_VAL_PROC ||
			    cn->ack != seq + 1 || cn->len < sizeof(ev))
				continue;
			/* cn->data is only 4-byte aligned; proc_event wants 8. */
			memcpy(&ev, cn->data, sizeof(ev));
			if (ev.what != PROC_EVENT_NONE)
				continue;
			/* The kernel stores a positive errno here (older ones a negative one). */
			int ack = (int)ev.event_data.ack.err;
			return ack < 0 ? -ack : ack;
		}
	}
}

/* Proc connector: bind to the CN_IDX_PROC group, then try to subscribe and unsubscribe. */
static struct json_object *
hostcaps_proc_connector(struct hostcaps_ctx *hc)
{
	struct json_object *e = hostcaps_entry();
	struct sockaddr_nl sa;
	uint32_t seq = (uint32_t)util_now_ms();
	int fd, err;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_CONNECTOR);
	if (fd < 0) {
		hostcaps_add(e, "bind", json_object_new_string("not tried"));
		hostcaps_add(e, "listen", json_object_new_string("not tried"));
		hostcaps_set(e, 0, "NETLINK_CONNECTOR socket: %s (kernel without the connector?)",
		    strerror(errno));
		return e;
	}
	memset(&sa, 0, sizeof(sa));
	sa.nl_family = AF_NETLINK;
	sa.nl_groups = CN_IDX_PROC;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int saved = errno;
		hostcaps_add(e, "bind", json_object_new_string(strerror(saved)));
		hostcaps_add(e, "listen", json_object_new_string("not tried"));
		if (saved == EPERM && !hc->hc_root)
			hostcaps_set(e, 0, "requires root (joining the CN_IDX_PROC group: "
			    "CAP_NET_ADMIN)");
		else
			hostcaps_set(e, 0, "bind to CN_IDX_PROC: %s", strerror(saved));
		hostcaps_close(fd);
		return e;
	}
	hostcaps_add(e, "bind", json_object_new_string("ok"));
	if (hostcaps_cn_send(fd, seq, PROC_CN_MCAST_LISTEN) != 0) {
		int saved = errno;
		hostcaps_add(e, "listen", json_object_new_string(strerror(saved)));
		hostcaps_set(e, 0, "sending PROC_CN_MCAST_LISTEN: %s", strerror(saved));
		hostcaps_close(fd);
		return e;
	}
	err = hostcaps_cn_ack(fd, seq);
	if (err < 0)
		err = errno == ETIMEDOUT ? -1 : errno;
	if (err != 0) {
		/*
		 * The kernel only acks while someone listens, so a refused
		 * subscription (EPERM) on a host with no other listener shows
		 * up as silence rather than as an error.
		 */
		int timed_out = err < 0;
		hostcaps_add(e, "listen", json_object_new_string(timed_out ?
		    "no acknowledgement" : strerror(err)));
		if (err == EPERM && !hc->hc_root)
			hostcaps_set(e, 0, "group bind works; subscribing (PROC_CN_MCAST_LISTEN) "
			    "requires root (CAP_NET_ADMIN)");
		else if (timed_out && !hc->hc_root)
			hostcaps_set(e, 0, "group bind works; PROC_CN_MCAST_LISTEN not "
			    "acknowledged within 1 s, most likely because it requires root "
			    "(CAP_NET_ADMIN) on this kernel");
		else if (timed_out)
			hostcaps_set(e, 0, "PROC_CN_MCAST_LISTEN not acknowledged within 1 s "
			    "(the kernel ignores requests from outside the initial user and pid "
			    "namespaces)");
		else
			hostcaps_set(e, 0, "PROC_CN_MCAST_LISTEN: %s", strerror(err));
		hostcaps_close(fd);
		return e;
	}
	hostcaps_add(e, "listen", json_object_new_string("ok"));
	/* Undo the subscription: older kernels count listeners until told to stop. */
	if (hostcaps_cn_send(fd, seq + 1, PROC_CN_MCAST_IGNORE) != 0)
		hostcaps_set(e, 1, "fork/exec/exit events available (PROC_CN_MCAST_IGNORE "
		    "failed: %s; closing the socket ends the subscription on current kernels)",
		    strerror(errno));
	else
		hostcaps_set(e, 1, "fork/exec/exit events available (subscribed and "
		    "unsubscribed%s)", hc->hc_root ? "" : "; works without root on this kernel");
	hostcaps_close(fd);
	return e;
}

/* Workspace snapshot backends the kernel could serve. */
static struct json_object *
hostcaps_speculation(struct hostcaps_ctx *hc)
{
	struct json_object *e = hostcaps_entry();
	int btrfs = 0, ovl = 0;

	if (hc->hc_filesystems != NULL) {
		btrfs = hostcaps_filesystems_has(hc->hc_filesystems, "btrfs");
		ovl = hostcaps_filesystems_has(hc->hc_filesystems, "overlay");
	}
	hostcaps_add(e, "btrfs", json_object_new_boolean(btrfs));
	hostcaps_add(e, "overlayfs", json_object_new_boolean(ovl));
	hostcaps_add(e, "copy", json_object_new_boolean(1));
	hostcaps_set(e, 1, "%s%scopy (kernel support from /proc/filesystems%s; btrfs "
	    "snapshots also need gensee-tcloned's authority root on btrfs)", btrfs ? "btrfs, " : "",
	    ovl ? "overlayfs, " : "", hc->hc_filesystems == NULL ? ", which is unreadable" :
	    ", which omits modules not loaded yet");
	return e;
}

/* The running kernel and its active LSMs. */
static struct json_object *
hostcaps_kernel(struct hostcaps_ctx *hc)
{
	struct json_object *e = hostcaps_entry();
	char *lsm;

	hostcaps_add(e, "release", json_object_new_string(hc->hc_uts.release));
	hostcaps_add(e, "version", json_object_new_string(hc->hc_uts.version));
	hostcaps_add(e, "machine", json_object_new_string(hc->hc_uts.machine));
	lsm = hostcaps_read_trim("/sys/kernel/security/lsm");
	if (lsm != NULL) {
		for (char *p = lsm; *p != '\0'; p++)
			if (*p == ',')
				*p = ' ';
		hostcaps_add(e, "lsm", hostcaps_words(lsm));
		free(lsm);
	} else {
		hostcaps_add(e, "lsm", NULL);
	}
	hostcaps_set(e, 1, "%s %s %s", hc->hc_uts.sysname, hc->hc_uts.release,
	    hc->hc_uts.machine);
	return e;
}

/* The effective capability set of this process, from /proc/self/status. */
static int
hostcaps_capeff(uint64_t *caps)
{
	char *status, *p;
	int r = -1;

	if (util_read_path("/proc/self/status", HOSTCAPS_SMALL_MAX, &status, NULL) != 0)
		return -1;
	p = strstr(status, "\nCapEff:");
	if (p != NULL) {
		unsigned long long v;
		if (sscanf(p + 8, " %llx", &v) == 1) {
			*caps = v;
			r = 0;
		}
	}
	free(status);
	return r;
}

/* Whether this process is root, and with which of the capabilities probes need. */
static struct json_object *
hostcaps_root(struct hostcaps_ctx *hc)
{
	static const struct {
		const char *name;
		int bit;
	} wanted[] = {
		{ "CAP_SYS_ADMIN", 21 },
		{ "CAP_NET_ADMIN", 12 },
	};
	struct json_object *e = hostcaps_entry(), *have;
	uint64_t caps;
	char list[128] = "";

	hostcaps_add(e, "euid", json_object_new_int((int)geteuid()));
	if (hostcaps_capeff(&caps) != 0) {
		hostcaps_add(e, "capabilities", NULL);
		hostcaps_set(e, hc->hc_root, "euid %u (capabilities unknown)",
		    (unsigned)geteuid());
		return e;
	}
	have = json_object_new_array();
	for (size_t i = 0; i < nitems(wanted); i++) {
		if ((caps & (1ULL << wanted[i].bit)) == 0)
			continue;
		struct json_object *s = json_object_new_string(wanted[i].name);
		if (have == NULL || json_object_array_add(have, s) != 0)
			json_object_put(s);
		if (list[0] != '\0')
			strncat(list, ", ", sizeof(list) - strlen(list) - 1);
		strncat(list, wanted[i].name, sizeof(list) - strlen(list) - 1);
	}
	hostcaps_add(e, "capabilities", have);
	if (hc->hc_root && list[0] != '\0')
		hostcaps_set(e, 1, "euid 0 with %s", list);
	else if (hc->hc_root)
		hostcaps_set(e, 1, "euid 0 without CAP_SYS_ADMIN or CAP_NET_ADMIN");
	else
		hostcaps_set(e, 0, "euid %u: root-only probes report what they can",
		    (unsigned)geteuid());
	return e;
}

struct json_object *
hostcaps_probe(void)
{
	static const struct {
		const char *name;
		struct json_object *(*fn)(struct hostcaps_ctx *);
	} probes[] = {
		{ "fanotify_permission_events", hostcaps_fanotify },
		{ "seccomp", hostcaps_seccomp },
		{ "cgroup_v2", hostcaps_cgroup },
		{ "nftables", hostcaps_nftables },
		{ "landlock", hostcaps_landlock },
		{ "user_namespaces", hostcaps_userns },
		{ "bpf_mount", hostcaps_bpf },
		{ "apparmor", hostcaps_apparmor },
		{ "selinux", hostcaps_selinux },
		{ "proc_connector", hostcaps_proc_connector },
		{ "speculation_backends", hostcaps_speculation },
		{ "kernel", hostcaps_kernel },
		{ "running_as_root", hostcaps_root },
	};
	struct hostcaps_ctx hc;
	struct json_object *o, *e;

	memset(&hc, 0, sizeof(hc));
	if (uname(&hc.hc_uts) != 0)
		snprintf(hc.hc_uts.release, sizeof(hc.hc_uts.release), "unknown");
	hc.hc_root = geteuid() == 0;
	if (util_read_path("/proc/self/mountinfo", HOSTCAPS_MOUNTINFO_MAX, &hc.hc_mountinfo,
	    NULL) != 0)
		hc.hc_mountinfo = NULL;
	if (util_read_path("/proc/filesystems", HOSTCAPS_SMALL_MAX, &hc.hc_filesystems,
	    NULL) != 0)
		hc.hc_filesystems = NULL;

	o = json_object_new_object();
	for (size_t i = 0; o != NULL && i < nitems(probes); i++) {
		e = probes[i].fn(&hc);
		if (e == NULL || json_object_object_add(o, probes[i].name, e) != 0) {
			json_object_put(e);
			json_object_put(o);
			o = NULL;
		}
	}
	free(hc.hc_mountinfo);
	free(hc.hc_filesystems);
	return o;
}
