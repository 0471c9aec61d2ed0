/*
 * auditlog.c: Landlock denial groups from the kernel's audit records (see
 * auditlog.h for the records and why they split safely).
 *
 * The records are read field by field from the start, a quoted value as
 * one token, so a key inside another's value is never taken for a field.
 * Written here rather than with libaudit (auparse): the records we need are
 * four types of a documented kernel format, and auparse would bring the
 * whole audit userspace and its configuration into a root daemon.
 */
#include <sys/socket.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/netlink.h>

#include "auditlog.h"
#include "util.h"

#define AUDITLOG_SOCKBUF (4 * 1024 * 1024)
#define AUDITLOG_REPLY_MS 1000
/* The kernel's MAX_AUDIT_MESSAGE_LENGTH (not in the uapi headers). */
#define AUDITLOG_TEXT_MAX 8970

/* Keys whose values the task controls: the kernel hex-encodes what it cannot quote. */
static int
auditlog_untrusted_key(const char *k, size_t n)
{
	static const char *const keys[] = { "path", "exe", "comm", "ocomm", "name" };
	for (size_t i = 0; i < nitems(keys); i++)
		if (strlen(keys[i]) == n && memcmp(keys[i], k, n) == 0)
			return 1;
	return 0;
}

static int
auditlog_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Copy one value token into out, decoding hex for untrusted keys. */
static int
auditlog_value(const char *k, size_t kn, const char *v, size_t vn, int quoted, char *out,
    size_t outlen)
{
	size_t i;

	if (quoted || !auditlog_untrusted_key(k, kn) || (vn == 6 && memcmp(v, "(null)", 6) == 0)) {
		if (vn + 1 > outlen)
			return -1;
		memcpy(out, v, vn);
		out[vn] = '\0';
		return 1;
	}
	if (vn % 2 != 0 || vn / 2 + 1 > outlen)
		return -1;
	for (i = 0; i < vn / 2; i++) {
		int hi = auditlog_hexval(v[2 * i]), lo = auditlog_hexval(v[2 * i + 1]);
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
			return -1;	/* not hex, or a NUL no name holds */
		out[i] = (char)(hi << 4 | lo);
	}
	out[i] = '\0';
	return 1;
}

int
auditlog_field(const char *text, size_t len, const char *key, char *out, size_t outlen)
{
	size_t i = 0, keylen = strlen(key);

	if (outlen == 0)
		return -1;
	out[0] = '\0';
	/* The fields start after "audit(...): ". */
	const char *p = memchr(text, ')', len);
	if (p != NULL && (size_t)(p - text) + 2 <= len && p[1] == ':')
		i = (size_t)(p - text) + 2;
	while (i < len) {
		while (i < len && text[i] == ' ')
			i++;
		size_t ks = i;
		while (i < len && text[i] != '=' && text[i] != ' ')
			i++;
		size_t kn = i - ks;
		if (i >= len || text[i] == ' ')
			continue;	/* a word without a value */
		i++;			/* '=' */
		int quoted = i < len && text[i] == '"';
		size_t vs, vn;
		if (quoted) {
			const char *q = memchr(text + i + 1, '"', len - i - 1);
			if (q == NULL)
				return kn == keylen && memcmp(text + ks, key, kn) == 0 ? -1 : 0;
			vs = i + 1;
			vn = (size_t)(q - (text + vs));
			i = (size_t)(q - text) + 1;
		} else {
			vs = i;
			while (i < len && text[i] != ' ')
				i++;
			vn = i - vs;
		}
		if (kn == keylen && memcmp(text + ks, key, kn) == 0) {
			int r = auditlog_value(text + ks, kn, text + vs, vn, quoted, out, outlen);
			if (r < 0)
				out[0] = '\0';
			return r;
		}
	}
	return 0;
}

int
auditlog_serial(const char *text, size_t len, uint64_t *serial)
{
	size_t i;
	uint64_t s = 0;
	int digits = 0;

	if (len < 7 || memcmp(text, "audit(", 6) != 0)
		return -1;
	for (i = 6; i < len && text[i] != ':' && text[i] != ')'; i++)
		;
	if (i >= len || text[i] != ':')
		return -1;
	for (i++; i < len && text[i] >= '0' && text[i] <= '9'; i++) {
		if (s > (UINT64_MAX - 9) / 10)
			return -1;
		s = s * 10 + (uint64_t)(text[i] - '0');
		digits++;
	}
	if (i >= len || text[i] != ')' || digits == 0)
		return -1;
	*serial = s;
	return 0;
}

void
auditlog_init(struct auditlog *al)
{
	memset(al, 0, sizeof(*al));
}

/* The domain's creator, remembered from its allocation record. */
static pid_t
auditlog_domain_pid(const struct auditlog *al, const char *dom)
{
	for (size_t i = 0; i < AUDITLOG_DOMAINS; i++)
		if (al->al_dom[i].dd_pid > 0 && strcmp(al->al_dom[i].dd_domain, dom) == 0)
			return al->al_dom[i].dd_pid;
	return 0;
}

static void
auditlog_domain_set(struct auditlog *al, const char *dom, pid_t pid)
{
	for (size_t i = 0; i < AUDITLOG_DOMAINS; i++)
		if (strcmp(al->al_dom[i].dd_domain, dom) == 0) {
			al->al_dom[i].dd_pid = pid;
			return;
		}
	if (pid <= 0)
		return;
	struct auditlog_domain *d = &al->al_dom[al->al_domnext++ % AUDITLOG_DOMAINS];
	util_strlcpy(d->dd_domain, dom, sizeof(d->dd_domain));
	d->dd_pid = pid;
}

/* Hand group i to cb (when it holds a denial) and remove it. */
static void
auditlog_complete(struct auditlog *al, size_t i, auditlog_cb *cb, void *arg)
{
	struct auditlog_denial *d = &al->al_pend[i];

	if (d->ad_access) {
		if (d->ad_pid <= 0)
			d->ad_pid = auditlog_domain_pid(al, d->ad_domain);
		cb(d, arg);
	}
	if (i != al->al_npend - 1)
		memcpy(d, &al->al_pend[al->al_npend - 1], sizeof(*d));
	al->al_npend--;
}

static struct auditlog_denial *
auditlog_group(struct auditlog *al, uint64_t serial, int64_t now_ms, auditlog_cb *cb, void *arg)
{
	size_t oldest = 0;

	for (size_t i = 0; i < al->al_npend; i++) {
		if (al->al_pend[i].ad_serial == serial)
			return &al->al_pend[i];
		if (al->al_pend[i].ad_ms < al->al_pend[oldest].ad_ms)
			oldest = i;
	}
	if (al->al_npend == AUDITLOG_PENDING)
		auditlog_complete(al, oldest, cb, arg);
	struct auditlog_denial *d = &al->al_pend[al->al_npend++];
	memset(d, 0, sizeof(*d));
	d->ad_serial = serial;
	d->ad_ms = now_ms;
	return d;
}

static pid_t
auditlog_pid(const char *text, size_t len, const char *key)
{
	char v[16];
	char *end;
	long n;

	if (auditlog_field(text, len, key, v, sizeof(v)) != 1)
		return 0;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0' || n <= 0 || n > 4194304)
		return 0;
	return (pid_t)n;
}

static int
auditlog_bad(struct auditlog *al)
{
	al->al_malformed++;
	errno = EBADMSG;
	return -1;
}

int
auditlog_feed(struct auditlog *al, unsigned type, const char *text, size_t len, int64_t now_ms,
    auditlog_cb *cb, void *arg)
{
	struct auditlog_denial *d;
	uint64_t serial;
	char dom[24], status[16];

	if (type != AUDITLOG_ACCESS && type != AUDITLOG_DOMAIN && type != AUDITLOG_SYSCALL &&
	    type != AUDITLOG_EOE)
		return 0;
	/* The kernel may count the terminating NUL in the message. */
	while (len > 0 && text[len - 1] == '\0')
		len--;
	if (auditlog_serial(text, len, &serial) != 0)
		return auditlog_bad(al);
	if (type == AUDITLOG_EOE || type == AUDITLOG_SYSCALL) {
		/* Only groups we are assembling: every syscall of an audited task has these. */
		size_t i;
		for (i = 0; i < al->al_npend && al->al_pend[i].ad_serial != serial; i++)
			;
		if (i == al->al_npend)
			return 0;
		d = &al->al_pend[i];
		if (type == AUDITLOG_EOE) {
			auditlog_complete(al, i, cb, arg);
			return 0;
		}
		pid_t pid = auditlog_pid(text, len, "pid");
		if (pid > 0) {
			d->ad_pid = pid;
			d->ad_task = 1;
		}
		if (auditlog_field(text, len, "exe", d->ad_exe, sizeof(d->ad_exe)) < 0)
			util_strlcpy(d->ad_exe, "(unreadable)", sizeof(d->ad_exe));
		return 0;
	}
	if (auditlog_field(text, len, "domain", dom, sizeof(dom)) != 1 || dom[0] == '\0')
		return auditlog_bad(al);
	if (type == AUDITLOG_DOMAIN) {
		if (auditlog_field(text, len, "status", status, sizeof(status)) != 1)
			return auditlog_bad(al);
		if (strcmp(status, "deallocated") == 0) {
			auditlog_domain_set(al, dom, 0);
			return 0;
		}
		pid_t pid = auditlog_pid(text, len, "pid");
		auditlog_domain_set(al, dom, pid);
		d = auditlog_group(al, serial, now_ms, cb, arg);
		if (!d->ad_task && pid > 0)
			d->ad_pid = pid;
		return 0;
	}
	d = auditlog_group(al, serial, now_ms, cb, arg);
	util_strlcpy(d->ad_domain, dom, sizeof(d->ad_domain));
	d->ad_access = 1;
	if (auditlog_field(text, len, "blockers", d->ad_blockers, sizeof(d->ad_blockers)) != 1 ||
	    d->ad_blockers[0] == '\0')
		util_strlcpy(d->ad_blockers, "unknown", sizeof(d->ad_blockers));
	int r = auditlog_field(text, len, "path", d->ad_object, sizeof(d->ad_object));
	if (r < 0) {
		util_strlcpy(d->ad_object, "(unreadable)", sizeof(d->ad_object));
	} else if (r == 0) {
		char comm[64];
		pid_t opid = auditlog_pid(text, len, "opid");
		if (opid > 0) {
			if (auditlog_field(text, len, "ocomm", comm, sizeof(comm)) != 1)
				comm[0] = '\0';
			snprintf(d->ad_object, sizeof(d->ad_object), "pid %d (%s)", (int)opid, comm);
		}
	}
	return 0;
}

void
auditlog_expire(struct auditlog *al, int64_t now_ms, int64_t age_ms, auditlog_cb *cb, void *arg)
{
	for (size_t i = 0; i < al->al_npend;) {
		if (age_ms < 0 || now_ms - al->al_pend[i].ad_ms > age_ms)
			auditlog_complete(al, i, cb, arg);	/* moves the last into i */
		else
			i++;
	}
}

int
auditlog_parse(struct auditlog *al, const void *buf, size_t len, int64_t now_ms,
    auditlog_cb *cb, void *arg)
{
	const uint8_t *b = buf;
	size_t off = 0;

	while (len - off >= NLMSG_HDRLEN) {
		struct nlmsghdr h;
		memcpy(&h, b + off, sizeof(h));
		if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > len - off) {
			errno = EBADMSG;
			return -1;
		}
		/* Each text is copied out: buf may be at any alignment and is not ours to end. */
		size_t n = h.nlmsg_len - NLMSG_HDRLEN;
		char text[AUDITLOG_TEXT_MAX];
		if (n > sizeof(text))
			n = sizeof(text);
		memcpy(text, b + off + NLMSG_HDRLEN, n);
		(void)auditlog_feed(al, h.nlmsg_type, text, n, now_ms, cb, arg);
		off += NLMSG_ALIGN(h.nlmsg_len) < len - off ? NLMSG_ALIGN(h.nlmsg_len) : len - off;
	}
	return 0;
}

int
auditlog_open(int *fd, char **cause)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = 1u << (AUDIT_NLGRP_READLOG - 1) };
	int s, sz = AUDITLOG_SOCKBUF;

	*fd = -1;
	if ((s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_AUDIT)) < 0) {
		util_cause(cause, "audit socket: %s", strerror(errno));
		return -1;
	}
	/* Bursts of denials must not overrun it; FORCE needs CAP_NET_ADMIN, which we hold. */
	if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) != 0)
		(void)setsockopt(s, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		util_cause(cause, "audit read-log group: %s", strerror(errno));
		close(s);
		return -1;
	}
	*fd = s;
	return 0;
}

/* One request to the audit subsystem; its reply (of type want, or the ack) into out. */
static int
auditlog_request(uint16_t type, const void *body, size_t n, uint16_t want, void *out,
    size_t outlen, char **cause)
{
	struct {
		struct nlmsghdr h;
		uint8_t body[sizeof(struct audit_status)];
	} req;
	uint8_t buf[8192];
	int s, r = -1;

	if ((s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT)) < 0) {
		util_cause(cause, "audit socket: %s", strerror(errno));
		return -1;
	}
	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = (uint32_t)(NLMSG_HDRLEN + n);
	req.h.nlmsg_type = type;
	req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	req.h.nlmsg_seq = 1;
	if (n > 0)
		memcpy(req.body, body, n);
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };
	if (sendto(s, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
		util_cause(cause, "audit request: %s", strerror(errno));
		goto out;
	}
	int64_t deadline = util_monotonic_ms() + AUDITLOG_REPLY_MS;
	int acked = 0, got = want == 0;
	while (!(acked && got)) {
		struct pollfd pfd = { s, POLLIN, 0 };
		int64_t left = deadline - util_monotonic_ms();
		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0) {
			util_cause(cause, "audit: no reply");
			goto out;
		}
		ssize_t len = recv(s, buf, sizeof(buf), 0);
		if (len < 0) {
			util_cause(cause, "audit reply: %s", strerror(errno));
			goto out;
		}
		for (size_t off = 0; (size_t)len - off >= NLMSG_HDRLEN;) {
			struct nlmsghdr h;
			memcpy(&h, buf + off, sizeof(h));
			if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > (size_t)len - off)
				break;
			if (h.nlmsg_type == NLMSG_ERROR &&
			    h.nlmsg_len >= NLMSG_HDRLEN + sizeof(int)) {
				int e;
				memcpy(&e, buf + off + NLMSG_HDRLEN, sizeof(e));
				if (e != 0) {
					util_cause(cause, "audit: %s", strerror(-e));
					goto out;
				}
				acked = 1;
			} else if (h.nlmsg_type == want) {
				size_t m = h.nlmsg_len - NLMSG_HDRLEN;
				memset(out, 0, outlen);
				memcpy(out, buf + off + NLMSG_HDRLEN, m < outlen ? m : outlen);
				got = 1;
			}
			off += NLMSG_ALIGN(h.nlmsg_len);
		}
	}
	r = 0;
out:
	close(s);
	return r;
}

int
auditlog_status(int *enabled, char **cause)
{
	struct audit_status st;

	*enabled = 0;
	if (auditlog_request(AUDIT_GET, NULL, 0, AUDIT_GET, &st, sizeof(st), cause) != 0)
		return -1;
	*enabled = st.enabled != 0;
	return 0;
}

int
auditlog_enable(char **cause)
{
	struct audit_status st;

	memset(&st, 0, sizeof(st));
	st.mask = AUDIT_STATUS_ENABLED;
	st.enabled = 1;
	return auditlog_request(AUDIT_SET, &st, sizeof(st), 0, NULL, 0, cause);
}
