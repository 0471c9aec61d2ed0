/*
 * fanpolicy.c: sensitive-path patterns, matching, the posture/action
 * decision table and the mark plan.
 *
 * Patterns in comments are spelled with a space next to the stars (see
 * fanpolicy.h): "~/.ssh/ **" is the prefix rule of ~/.ssh.
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <fts.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <json-c/json.h>

#include "fanpolicy.h"
#include "schema.h"
#include "util.h"

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif

/* Filesystem magics the plan warns about (not all in every libc's headers). */
#define FP_NFS_MAGIC 0x6969
#define FP_SMB_MAGIC 0x517b
#define FP_CIFS_MAGIC 0xff534d42u
#define FP_SMB2_MAGIC 0xfe534d42u
#define FP_FUSE_MAGIC 0x65735546
#define FP_9P_MAGIC 0x01021997
#define FP_CEPH_MAGIC 0x00c36400
#define FP_PROC_MAGIC 0x9fa0
#define FP_SYSFS_MAGIC 0x62656572

const char *const fanpolicy_builtin_patterns[] = {
	"~/.ssh/**",
	"~/.aws/**",
	"~/.config/gcloud/**",
	NULL,
};

/* The name of a posture ("unknown" outside the enum). */
const char *
fanpolicy_posture_name(enum fan_posture p)
{
	switch (p) {
	case FAN_POSTURE_MONITOR:
		return "monitor";
	case FAN_POSTURE_WARN:
		return "warn";
	case FAN_POSTURE_ENFORCE:
		return "enforce";
	case FAN_POSTURE_ISOLATE:
		return "isolate";
	}
	return "unknown";
}

/* Parse a posture name exactly. */
int
fanpolicy_posture_from_name(const char *s, enum fan_posture *out)
{
	static const enum fan_posture all[] = { FAN_POSTURE_MONITOR, FAN_POSTURE_WARN,
		FAN_POSTURE_ENFORCE, FAN_POSTURE_ISOLATE };

	for (size_t i = 0; s != NULL && i < nitems(all); i++) {
		if (strcmp(s, fanpolicy_posture_name(all[i])) == 0) {
			*out = all[i];
			return 0;
		}
	}
	return -1;
}

/* The name of an action ("unknown" outside the enum). */
const char *
fanpolicy_action_name(enum fan_action a)
{
	switch (a) {
	case FAN_ACTION_OBSERVE:
		return "observe";
	case FAN_ACTION_WARN:
		return "warn";
	case FAN_ACTION_ASK:
		return "ask";
	case FAN_ACTION_DENY:
		return "deny";
	case FAN_ACTION_SPECULATE:
		return "speculate";
	}
	return "unknown";
}

/* Parse an action name exactly. */
int
fanpolicy_action_from_name(const char *s, enum fan_action *out)
{
	static const enum fan_action all[] = { FAN_ACTION_OBSERVE, FAN_ACTION_WARN,
		FAN_ACTION_ASK, FAN_ACTION_DENY, FAN_ACTION_SPECULATE };

	for (size_t i = 0; s != NULL && i < nitems(all); i++) {
		if (strcmp(s, fanpolicy_action_name(all[i])) == 0) {
			*out = all[i];
			return 0;
		}
	}
	return -1;
}

/* The name of a rule kind. */
const char *
fanpolicy_kind_name(enum fan_rule_kind k)
{
	switch (k) {
	case FAN_RULE_EXACT:
		return "exact";
	case FAN_RULE_PREFIX:
		return "prefix";
	case FAN_RULE_SUFFIX:
		return "suffix";
	}
	return "unknown";
}

/* The name of a mark kind. */
const char *
fanpolicy_mark_kind_name(enum fan_mark_kind k)
{
	switch (k) {
	case FAN_PLAN_INODE:
		return "inode";
	case FAN_PLAN_CHILDREN:
		return "children";
	case FAN_PLAN_FILESYSTEM:
		return "filesystem";
	}
	return "unknown";
}

/* Append a formatted warning; beyond FANPOLICY_MAX_WARNINGS only count it. */
int
fanpolicy_vwarn(struct fan_warnings *w, const char *fmt, va_list ap)
{
	char *s = NULL, **v;

	if (w->w_n >= FANPOLICY_MAX_WARNINGS) {
		w->w_dropped++;
		return 0;
	}
	if (vasprintf(&s, fmt, ap) < 0)
		return -1;
	v = realloc(w->w_v, (w->w_n + 1) * sizeof(*v));
	if (v == NULL) {
		free(s);
		return -1;
	}
	w->w_v = v;
	w->w_v[w->w_n++] = s;
	return 0;
}

/* The same with arguments. */
int
fanpolicy_warn(struct fan_warnings *w, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = fanpolicy_vwarn(w, fmt, ap);
	va_end(ap);
	return r;
}

/* Free every warning. */
void
fanpolicy_warnings_free(struct fan_warnings *w)
{
	for (size_t i = 0; i < w->w_n; i++)
		free(w->w_v[i]);
	free(w->w_v);
	memset(w, 0, sizeof(*w));
}

/*
 * Copy at most 96 bytes of s (len bytes, possibly with NUL) into buf for a
 * message, escaping what is not printable ASCII.
 */
static void
fp_quote(const char *s, size_t len, char *buf, size_t size)
{
	size_t o = 0;

	for (size_t i = 0; i < len && i < 96 && o + 5 < size; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
			buf[o++] = (char)c;
		else
			o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
	}
	if (len > 96 && o + 4 < size) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
}

/* Is s (len bytes) absolute with no empty, "." or ".." component and shorter than PATH_MAX? */
static int
fp_canonical(const char *s, size_t len)
{
	const char *c, *end, *e;

	if (len == 0 || s[0] != '/' || len >= PATH_MAX)
		return 0;
	if (len == 1)
		return 1;
	end = s + len;
	for (c = s + 1; c <= end; c = e + 1) {
		size_t n;
		e = memchr(c, '/', (size_t)(end - c));
		if (e == NULL)
			e = end;
		n = (size_t)(e - c);
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
	}
	return 1;
}

/* Does the n-byte component c contain a glob character? */
static int
fp_has_glob(const char *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (c[i] == '*' || c[i] == '?' || c[i] == '[')
			return 1;
	return 0;
}

/* An empty policy. */
void
fanpolicy_init(struct fanpolicy *p)
{
	memset(p, 0, sizeof(*p));
}

/* Free the strings of one rule. */
static void
fp_rule_free(struct fan_rule *r)
{
	free(r->fr_pattern);
	free(r->fr_path);
	free(r->fr_glob);
	free(r->fr_real);
	memset(r, 0, sizeof(*r));
}

/* Free every rule and warning. */
void
fanpolicy_free(struct fanpolicy *p)
{
	for (size_t i = 0; i < p->fp_nrules; i++)
		fp_rule_free(&p->fp_rules[i]);
	free(p->fp_rules);
	for (size_t i = 0; i < p->fp_nworkspaces; i++)
		free(p->fp_workspaces[i]);
	free(p->fp_workspaces);
	fanpolicy_warnings_free(&p->fp_warn);
	memset(p, 0, sizeof(*p));
}

/* Append a rule, taking ownership of its strings (freed on failure). */
static int
fp_push(struct fanpolicy *p, struct fan_rule *r, char **cause)
{
	struct fan_rule *v;

	if (p->fp_nrules >= FANPOLICY_MAX_RULES) {
		util_cause(cause, "fanotify: more than %d rules", FANPOLICY_MAX_RULES);
		fp_rule_free(r);
		return -1;
	}
	v = realloc(p->fp_rules, (p->fp_nrules + 1) * sizeof(*v));
	if (v == NULL) {
		util_cause(cause, "out of memory");
		fp_rule_free(r);
		return -1;
	}
	p->fp_rules = v;
	r->fr_index = p->fp_nrules;
	p->fp_rules[p->fp_nrules++] = *r;
	return 0;
}

/* The pattern parser behind fanpolicy_add and fanpolicy_add_builtins. */
static int
fp_add(struct fanpolicy *p, const char *pattern, size_t len, const char *home, enum fan_action a,
    int builtin, char **cause)
{
	char q[512], s[PATH_MAX + 2], full[PATH_MAX];
	const char *rest, *comp[PATH_MAX / 2], *end;
	size_t ncomp = 0, clen[PATH_MAX / 2], rootlen, globat = 0;
	enum fan_rule_kind kind;
	struct fan_rule r;
	int tilde = 0;

	if (pattern == NULL || len == 0) {
		util_cause(cause, "fanotify pattern \"\": empty");
		return -1;
	}
	fp_quote(pattern, len, q, sizeof(q));
	if (memchr(pattern, '\0', len) != NULL) {
		util_cause(cause, "fanotify pattern \"%s\": contains a NUL byte", q);
		return -1;
	}
	if (len >= PATH_MAX) {
		util_cause(cause, "fanotify pattern \"%s\": longer than PATH_MAX", q);
		return -1;
	}
	if (a > FAN_ACTION_SPECULATE) {
		util_cause(cause, "fanotify pattern \"%s\": bad action", q);
		return -1;
	}
	/* "** /NAME" is "/ ** /NAME": s gets the leading slash. */
	if (len >= 3 && memcmp(pattern, "**/", 3) == 0) {
		s[0] = '/';
		memcpy(s + 1, pattern, len);
		s[len + 1] = '\0';
		rest = s;
	} else {
		memcpy(s, pattern, len);
		s[len] = '\0';
		if (s[0] == '~') {
			if (s[1] != '/') {
				util_cause(cause, "fanotify pattern \"%s\": only \"~/\" is expanded "
				    "(no \"~\" alone, no \"~user\")", q);
				return -1;
			}
			tilde = 1;
			rest = s + 1;
		} else if (s[0] == '/') {
			rest = s;
		} else {
			util_cause(cause, "fanotify pattern \"%s\": not absolute (start with /, ~/ "
			    "or **/)", q);
			return -1;
		}
	}

	/* Split into components; none may be empty, "." or "..". */
	end = rest + strlen(rest);
	for (const char *c = rest + 1, *e; rest[1] != '\0' && c <= end; c = e + 1) {
		e = strchr(c, '/');
		if (e == NULL)
			e = end;
		if (e == c) {
			util_cause(cause, "fanotify pattern \"%s\": empty path component", q);
			return -1;
		}
		if ((e - c == 1 && c[0] == '.') || (e - c == 2 && c[0] == '.' && c[1] == '.')) {
			util_cause(cause, "fanotify pattern \"%s\": \".\" or \"..\" component", q);
			return -1;
		}
		comp[ncomp] = c;
		clen[ncomp++] = (size_t)(e - c);
	}
	if (ncomp == 0) {
		util_cause(cause, "fanotify pattern \"%s\": \"/\" is a directory, not a file "
		    "(\"/**\" covers everything)", q);
		return -1;
	}

	/* Which shape: ROOT/ **, ROOT/ ** /GLOB or a plain path. */
#define FP_IS_STARS(i) (clen[(i)] == 2 && comp[(i)][0] == '*' && comp[(i)][1] == '*')
	if (FP_IS_STARS(ncomp - 1)) {
		kind = FAN_RULE_PREFIX;
		rootlen = (size_t)(comp[ncomp - 1] - 1 - rest);
		globat = ncomp - 1;
	} else if (ncomp >= 2 && FP_IS_STARS(ncomp - 2)) {
		kind = FAN_RULE_SUFFIX;
		rootlen = (size_t)(comp[ncomp - 2] - 1 - rest);
		globat = ncomp - 2;
	} else {
		kind = FAN_RULE_EXACT;
		rootlen = strlen(rest);
		globat = ncomp;
	}
#undef FP_IS_STARS
	for (size_t i = 0; i < globat; i++) {
		if (fp_has_glob(comp[i], clen[i])) {
			util_cause(cause, "fanotify pattern \"%s\": glob characters are only "
			    "allowed as ROOT/** or in NAME of ROOT/**/NAME", q);
			return -1;
		}
	}

	/* Expand: the root is rest[0, rootlen), "" meaning "/", below home for "~/". */
	if (tilde) {
		if (home == NULL || !fp_canonical(home, strlen(home))) {
			char hq[128];
			fp_quote(home == NULL ? "" : home, home == NULL ? 0 : strlen(home), hq,
			    sizeof(hq));
			if (fanpolicy_warn(&p->fp_warn, "fanotify pattern \"%s\" skipped: %s%s%s", q,
			    home == NULL ? "no home directory (HOME unset)" :
			    "home directory \"", home == NULL ? "" : hq,
			    home == NULL ? "" : "\" is not an absolute canonical path") != 0) {
				util_cause(cause, "out of memory");
				return -1;
			}
			return 0;
		}
		if ((size_t)snprintf(full, sizeof(full), "%s%.*s",
		    strcmp(home, "/") == 0 && rootlen > 0 ? "" : home, (int)rootlen, rest) >=
		    sizeof(full)) {
			util_cause(cause, "fanotify pattern \"%s\": longer than PATH_MAX once ~ is "
			    "expanded", q);
			return -1;
		}
	} else if (rootlen == 0) {
		strcpy(full, "/");
	} else {
		memcpy(full, rest, rootlen);
		full[rootlen] = '\0';
	}

	memset(&r, 0, sizeof(r));
	r.fr_kind = kind;
	r.fr_action = a;
	r.fr_builtin = builtin;
	r.fr_pattern = strndup(pattern, len);
	r.fr_path = strdup(full);
	r.fr_pathlen = strlen(full);
	if (kind == FAN_RULE_SUFFIX)
		r.fr_glob = strndup(comp[ncomp - 1], clen[ncomp - 1]);
	if (r.fr_pattern == NULL || r.fr_path == NULL ||
	    (kind == FAN_RULE_SUFFIX && r.fr_glob == NULL)) {
		fp_rule_free(&r);
		util_cause(cause, "out of memory");
		return -1;
	}
	return fp_push(p, &r, cause);
}

/* Parse one configured pattern (see fanpolicy.h). */
int
fanpolicy_add(struct fanpolicy *p, const char *pattern, size_t len, const char *home,
    enum fan_action a, char **cause)
{
	return fp_add(p, pattern, len, home, a, 0, cause);
}

/* Add the built-in credential rules, all deny. */
int
fanpolicy_add_builtins(struct fanpolicy *p, const char *home, char **cause)
{
	for (size_t i = 0; fanpolicy_builtin_patterns[i] != NULL; i++) {
		const char *s = fanpolicy_builtin_patterns[i];
		if (fp_add(p, s, strlen(s), home, FAN_ACTION_DENY, 1, cause) != 0)
			return -1;
	}
	return 0;
}

/* Name a workspace (see fanpolicy.h). */
int
fanpolicy_add_workspace(struct fanpolicy *p, const char *dir, char **cause)
{
	char **v;

	if (!fp_canonical(dir, strlen(dir))) {
		util_cause(cause, "fanotify workspace must be an absolute canonical path");
		return -1;
	}
	for (size_t i = 0; i < p->fp_nworkspaces; i++)
		if (strcmp(p->fp_workspaces[i], dir) == 0)
			return 0;
	if (p->fp_nworkspaces >= FANPOLICY_MAX_WORKSPACES) {
		util_cause(cause, "fanotify: more than %d workspaces", FANPOLICY_MAX_WORKSPACES);
		return -1;
	}
	v = realloc(p->fp_workspaces, (p->fp_nworkspaces + 1) * sizeof(*v));
	if (v == NULL || (v[p->fp_nworkspaces] = strdup(dir)) == NULL) {
		if (v != NULL)
			p->fp_workspaces = v;
		util_cause(cause, "out of memory");
		return -1;
	}
	p->fp_workspaces = v;
	p->fp_nworkspaces++;
	return 0;
}

/*
 * Resolve the symlinks of the existing part of path into out (PATH_MAX):
 * realpath(3) of the deepest existing ancestor, then the missing rest.
 */
static int
fp_resolve_path(const char *path, char *out)
{
	char buf[PATH_MAX];
	size_t n = strlen(path); /* path + n is the unresolved rest: "" or "/..." */

	if (util_strlcpy(buf, path, sizeof(buf)) >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (;;) {
		char *r = realpath(buf, NULL), *slash;
		if (r != NULL) {
			int w = snprintf(out, PATH_MAX, "%s%s",
			    strcmp(r, "/") == 0 && path[n] != '\0' ? "" : r, path + n);
			free(r);
			if (w < 0 || w >= PATH_MAX) {
				errno = ENAMETOOLONG;
				return -1;
			}
			return 0;
		}
		if (errno != ENOENT && errno != ENOTDIR)
			return -1;
		slash = strrchr(buf, '/');
		if (slash == NULL || (slash == buf && buf[1] == '\0'))
			return -1;
		if (slash == buf) {
			buf[1] = '\0';
			n = 0;
		} else {
			*slash = '\0';
			n = (size_t)(slash - buf);
		}
	}
}

/* Is path dir itself or below it (both canonical)? */
int
fanpolicy_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (strcmp(dir, "/") == 0)
		return path[0] == '/';
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Check that every rule's path stays inside one of scopes (see fanpolicy.h). */
int
fanpolicy_check_scope(const struct fanpolicy *p, char *const *scopes, size_t nscopes,
    char **cause)
{
	for (size_t i = 0; i < p->fp_nrules; i++) {
		const struct fan_rule *r = &p->fp_rules[i];
		int in = 0, real_in = r->fr_real == NULL;

		if (strcmp(r->fr_path, "/") == 0 ||
		    (r->fr_real != NULL && strcmp(r->fr_real, "/") == 0)) {
			util_cause(cause, "fanotify rule \"%s\" covers the whole filesystem; a "
			    "non-root user's rules must stay under their home or workspace",
			    r->fr_pattern);
			return -1;
		}
		for (size_t k = 0; k < nscopes; k++) {
			in |= fanpolicy_within(r->fr_path, scopes[k]);
			if (r->fr_real != NULL)
				real_in |= fanpolicy_within(r->fr_real, scopes[k]);
		}
		if (!in || !real_in) {
			char list[1024] = "";
			for (size_t k = 0; k < nscopes; k++) {
				size_t l = strlen(list);
				snprintf(list + l, sizeof(list) - l, "%s%s", k ? ", " : "", scopes[k]);
			}
			util_cause(cause, "fanotify rule \"%s\" names %s, outside the caller's home "
			    "and workspace (%s)", r->fr_pattern, !in || r->fr_real == NULL ?
			    r->fr_path : r->fr_real, nscopes ? list : "neither is a directory of the "
			    "caller");
			return -1;
		}
	}
	return 0;
}

/* Record the symlink-free form of every rule path. */
int
fanpolicy_resolve(struct fanpolicy *p, char **cause)
{
	char real[PATH_MAX];

	for (size_t i = 0; i < p->fp_nrules; i++) {
		struct fan_rule *r = &p->fp_rules[i];
		free(r->fr_real);
		r->fr_real = NULL;
		r->fr_reallen = 0;
		if (fp_resolve_path(r->fr_path, real) != 0) {
			if (fanpolicy_warn(&p->fp_warn, "fanotify rule \"%s\": cannot resolve %s: %s",
			    r->fr_pattern, r->fr_path, strerror(errno)) != 0)
				goto oom;
			continue;
		}
		if (strcmp(real, r->fr_path) == 0)
			continue;
		if (!fp_canonical(real, strlen(real)))
			continue;
		r->fr_real = strdup(real);
		if (r->fr_real == NULL)
			goto oom;
		r->fr_reallen = strlen(real);
		if (fanpolicy_warn(&p->fp_warn, "fanotify rule \"%s\": %s resolves to %s through a "
		    "symlink; both are matched", r->fr_pattern, r->fr_path, real) != 0)
			goto oom;
	}
	return 0;
oom:
	util_cause(cause, "out of memory");
	return -1;
}

/* Where path lies relative to root: 2 equal, 1 strictly below, 0 elsewhere. */
static int
fp_under(const char *path, size_t plen, const char *root, size_t rlen)
{
	if (rlen == 1)
		return plen == 1 ? 2 : 1;
	if (plen < rlen || memcmp(path, root, rlen) != 0)
		return 0;
	if (plen == rlen)
		return 2;
	return path[rlen] == '/' ? 1 : 0;
}

/* Does one form (configured or resolved) of rule r match path? */
static int
fp_form_matches(const struct fan_rule *r, const char *form, size_t flen, const char *path,
    size_t plen, const char *base)
{
	switch (r->fr_kind) {
	case FAN_RULE_EXACT:
		return plen == flen && memcmp(path, form, flen) == 0;
	case FAN_RULE_PREFIX:
		return fp_under(path, plen, form, flen) != 0;
	case FAN_RULE_SUFFIX:
		return fp_under(path, plen, form, flen) == 1 && fnmatch(r->fr_glob, base, 0) == 0;
	}
	return 0;
}

/* The best rule for a canonical path, in the order fanpolicy.h documents. */
int
fanpolicy_match(const struct fanpolicy *p, const char *abs_path, const struct fan_rule **hit)
{
	const struct fan_rule *best = NULL;
	size_t plen, bestlen = 0;
	const char *base;

	*hit = NULL;
	if (abs_path == NULL)
		return -1;
	plen = strnlen(abs_path, PATH_MAX);
	if (!fp_canonical(abs_path, plen))
		return -1;
	base = strrchr(abs_path, '/') + 1;
	for (size_t i = 0; i < p->fp_nrules; i++) {
		const struct fan_rule *r = &p->fp_rules[i];
		size_t len = 0;
		if (fp_form_matches(r, r->fr_path, r->fr_pathlen, abs_path, plen, base))
			len = r->fr_pathlen;
		if (r->fr_real != NULL && r->fr_reallen > len &&
		    fp_form_matches(r, r->fr_real, r->fr_reallen, abs_path, plen, base))
			len = r->fr_reallen;
		if (len == 0)
			continue;
		/* Lower kind first, then the longer root; the earlier rule keeps a tie. */
		if (best == NULL || r->fr_kind < best->fr_kind ||
		    (r->fr_kind == best->fr_kind && len > bestlen)) {
			best = r;
			bestlen = len;
		}
	}
	*hit = best;
	return best != NULL;
}

/* Could a move to abs_path have put a cached inode under a rule? */
int
fanpolicy_affects(const struct fanpolicy *p, const char *abs_path, int is_dir)
{
	const struct fan_rule *hit;
	size_t plen;

	if (fanpolicy_match(p, abs_path, &hit) != 0)
		return 1; /* a match, or a path we cannot judge */
	if (!is_dir)
		return 0;
	plen = strlen(abs_path);
	for (size_t i = 0; i < p->fp_nrules; i++) {
		const struct fan_rule *r = &p->fp_rules[i];
		if (fp_under(abs_path, plen, r->fr_path, r->fr_pathlen) != 0 ||
		    fp_under(r->fr_path, r->fr_pathlen, abs_path, plen) != 0)
			return 1;
		if (r->fr_real != NULL &&
		    (fp_under(abs_path, plen, r->fr_real, r->fr_reallen) != 0 ||
		    fp_under(r->fr_real, r->fr_reallen, abs_path, plen) != 0))
			return 1;
	}
	return 0;
}

/* One cell of the posture/action table in fanpolicy.h. */
void
fanpolicy_decide(enum fan_posture posture, enum fan_action action, int in_operation,
    struct fan_decision *out)
{
	out->dc_response = FAN_ALLOW;
	out->dc_record = 0;
	out->dc_warning = 0;
	out->dc_reason = FANR_OUTSIDE_OPERATION;
	if (!in_operation)
		return;
	out->dc_record = 1;
	switch (posture) {
	case FAN_POSTURE_MONITOR:
		if (action > FAN_ACTION_SPECULATE)
			break;
		out->dc_reason = FANR_MONITOR_POSTURE;
		return;
	case FAN_POSTURE_WARN:
		switch (action) {
		case FAN_ACTION_OBSERVE:
			out->dc_reason = FANR_OBSERVE_ACTION;
			return;
		case FAN_ACTION_WARN:
			out->dc_warning = 1;
			out->dc_reason = FANR_WARN_ACTION;
			return;
		case FAN_ACTION_ASK:
		case FAN_ACTION_DENY:
		case FAN_ACTION_SPECULATE:
			out->dc_warning = 1;
			out->dc_reason = FANR_WARN_POSTURE;
			return;
		}
		break;
	case FAN_POSTURE_ENFORCE:
	case FAN_POSTURE_ISOLATE:
		switch (action) {
		case FAN_ACTION_OBSERVE:
			out->dc_reason = FANR_OBSERVE_ACTION;
			return;
		case FAN_ACTION_WARN:
			out->dc_warning = 1;
			out->dc_reason = FANR_WARN_ACTION;
			return;
		case FAN_ACTION_DENY:
			out->dc_response = FAN_DENY;
			out->dc_reason = FANR_DENY_ACTION;
			return;
		case FAN_ACTION_ASK:
			/* No prompt broker yet: blocking to wait for one would hang the opener. */
			out->dc_response = FAN_DENY;
			out->dc_reason = FANR_ASK_UNAVAILABLE;
			return;
		case FAN_ACTION_SPECULATE:
			/* No transactional backend yet to let the open into a rollback-capable cell. */
			out->dc_response = FAN_DENY;
			out->dc_reason = FANR_SPECULATION_UNAVAILABLE;
			return;
		}
		break;
	}
	/* A posture or action outside the enums: fail closed. */
	out->dc_response = FAN_DENY;
	out->dc_reason = FANR_DECISION_ERROR;
}

/* The mount id of dirfd/path, unique where the kernel offers it. */
int
fanpolicy_mnt_id(int dirfd, const char *path, int flags, uint64_t *id)
{
	struct statx stx;

	if (statx(dirfd, path, flags | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
	    STATX_MNT_ID | STATX_MNT_ID_UNIQUE, &stx) != 0)
		return -1;
	if (!(stx.stx_mask & (STATX_MNT_ID | STATX_MNT_ID_UNIQUE))) {
		errno = ENOTSUP;
		return -1;
	}
	*id = stx.stx_mnt_id;
	return 0;
}

/* One line of /proc/self/mountinfo, as far as the plan needs it. */
struct fp_mount {
	dev_t pm_dev;
	char *pm_point;
	size_t pm_len;
};

struct fp_mounts {
	struct fp_mount *m_v;
	size_t m_n;
};

/* Decode the \ooo escapes mountinfo uses for spaces and such, in place. */
static void
fp_unescape(char *s)
{
	char *w = s;

	for (char *r = s; *r != '\0'; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)(((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* Free a mount table. */
static void
fp_mounts_free(struct fp_mounts *m)
{
	for (size_t i = 0; i < m->m_n; i++)
		free(m->m_v[i].pm_point);
	free(m->m_v);
	memset(m, 0, sizeof(*m));
}

/* Read this process's mount table (device and mount point of each mount). */
static int
fp_mounts_load(struct fp_mounts *m)
{
	char *line = NULL;
	size_t cap = 0;
	FILE *f;

	memset(m, 0, sizeof(*m));
	f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL)
		return -1;
	while (getline(&line, &cap, f) > 0) {
		/* id parent maj:min root mountpoint ... */
		char *save = NULL, *tok, *point = NULL;
		unsigned int ma = 0, mi = 0;
		int field = 0, haveid = 0;
		struct fp_mount *v;

		for (tok = strtok_r(line, " \n", &save); tok != NULL && field <= 4;
		    tok = strtok_r(NULL, " \n", &save), field++) {
			if (field == 2 && sscanf(tok, "%u:%u", &ma, &mi) == 2)
				haveid = 1;
			if (field == 4)
				point = tok;
		}
		if (!haveid || point == NULL)
			continue;
		fp_unescape(point);
		v = realloc(m->m_v, (m->m_n + 1) * sizeof(*v));
		if (v == NULL)
			goto fail;
		m->m_v = v;
		v[m->m_n].pm_dev = makedev(ma, mi);
		v[m->m_n].pm_point = strdup(point);
		if (v[m->m_n].pm_point == NULL)
			goto fail;
		v[m->m_n].pm_len = strlen(point);
		m->m_n++;
	}
	free(line);
	fclose(f);
	return 0;
fail:
	free(line);
	fclose(f);
	fp_mounts_free(m);
	errno = ENOMEM;
	return -1;
}

/*
 * The mount point of the mount whose mountinfo id is mnt_id, or (mnt_id 0)
 * of the first mount of device dev, into out. 0, or -1 (ENOENT: none).
 */
int
fanpolicy_mount_point(unsigned int mnt_id, dev_t dev, char *out, size_t len)
{
	char *line = NULL;
	size_t cap = 0;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int found = -1;

	if (f == NULL)
		return -1;
	while (found != 0 && getline(&line, &cap, f) > 0) {
		/* id parent maj:min root mountpoint ... */
		char *save = NULL, *tok, *point = NULL;
		unsigned int id = 0, ma = 0, mi = 0;
		int field = 0, ok = 0;

		for (tok = strtok_r(line, " \n", &save); tok != NULL && field <= 4;
		    tok = strtok_r(NULL, " \n", &save), field++) {
			if (field == 0)
				ok = sscanf(tok, "%u", &id) == 1;
			if (field == 2)
				ok = ok && sscanf(tok, "%u:%u", &ma, &mi) == 2;
			if (field == 4)
				point = tok;
		}
		if (!ok || point == NULL || (mnt_id != 0 ? id != mnt_id : makedev(ma, mi) != dev))
			continue;
		fp_unescape(point);
		if (util_strlcpy(out, point, len) < len)
			found = 0;
	}
	free(line);
	fclose(f);
	if (found != 0)
		errno = ENOENT;
	return found;
}

/* statx path without following a final symlink: type, inode, device, mount. */
static int
fp_statx(const char *path, struct statx *stx, uint64_t *mnt)
{
	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
	    STATX_TYPE | STATX_INO | STATX_NLINK | STATX_MNT_ID | STATX_MNT_ID_UNIQUE, stx) != 0)
		return -1;
	*mnt = (stx->stx_mask & (STATX_MNT_ID | STATX_MNT_ID_UNIQUE)) ? stx->stx_mnt_id : 0;
	return 0;
}

/* The deepest existing directory at or above path, into out (PATH_MAX). */
static int
fp_existing_dir(const char *path, char *out, struct statx *stx, uint64_t *mnt)
{
	if (util_strlcpy(out, path, PATH_MAX) >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (;;) {
		char *slash;
		if (fp_statx(out, stx, mnt) == 0) {
			if (S_ISDIR(stx->stx_mode))
				return 0;
		} else if (errno != ENOENT && errno != ENOTDIR) {
			return -1;
		}
		slash = strrchr(out, '/');
		if (slash == NULL || (slash == out && out[1] == '\0')) {
			errno = ENOENT;
			return -1;
		}
		if (slash == out)
			out[1] = '\0';
		else
			*slash = '\0';
	}
}

/* Add a mark to the plan unless an equivalent one is there (per st_dev or per inode). */
static int
fp_plan_add(struct fan_plan *pl, enum fan_mark_kind k, const char *path, const struct statx *stx,
    uint64_t mnt, size_t rule)
{
	dev_t dev = makedev(stx->stx_dev_major, stx->stx_dev_minor);
	struct fan_mark *v;

	for (size_t i = 0; i < pl->pl_nmarks; i++) {
		const struct fan_mark *m = &pl->pl_marks[i];
		if (m->fm_kind != k || m->fm_dev != dev)
			continue;
		if (k == FAN_PLAN_FILESYSTEM || m->fm_ino == (ino_t)stx->stx_ino)
			return 0;
	}
	v = realloc(pl->pl_marks, (pl->pl_nmarks + 1) * sizeof(*v));
	if (v == NULL)
		return -1;
	pl->pl_marks = v;
	v += pl->pl_nmarks;
	memset(v, 0, sizeof(*v));
	v->fm_kind = k;
	v->fm_path = strdup(path);
	if (v->fm_path == NULL)
		return -1;
	v->fm_dev = dev;
	v->fm_ino = (ino_t)stx->stx_ino;
	v->fm_mnt_id = mnt;
	v->fm_rule = rule;
	pl->pl_nmarks++;
	return 0;
}

/*
 * Warn about filesystems whose opens fanotify only partly sees; *plain
 * (when not NULL) says whether dir is on an ordinary local filesystem.
 */
static int
fp_plan_fstype(struct fan_plan *pl, const char *pattern, const char *dir, int *plain)
{
	struct statfs sfs;
	const char *what = NULL;

	if (plain != NULL)
		*plain = 0;
	if (statfs(dir, &sfs) != 0)
		return 0;
	if (plain != NULL)
		*plain = 1;
	switch ((unsigned long)sfs.f_type) {
	case FP_NFS_MAGIC:
	case FP_SMB_MAGIC:
	case FP_CIFS_MAGIC:
	case FP_SMB2_MAGIC:
	case FP_9P_MAGIC:
	case FP_CEPH_MAGIC:
		what = "a network filesystem: opens made by other hosts are not seen";
		break;
	case FP_FUSE_MAGIC:
		what = "a FUSE filesystem: its server reads the backing files unseen";
		break;
	case FP_PROC_MAGIC:
	case FP_SYSFS_MAGIC:
		what = "a pseudo filesystem";
		break;
	default:
		return 0;
	}
	if (plain != NULL)
		*plain = 0;
	return fanpolicy_warn(&pl->pl_warn, "fanotify rule \"%s\": %s is on %s", pattern, dir, what);
}

/* Warn about the filesystems mounted strictly below root, which its mark does not cover. */
static int
fp_plan_submounts(struct fan_plan *pl, const struct fp_mounts *mt, const char *pattern,
    const char *root, dev_t dev)
{
	char names[512] = "";
	size_t n = 0, rlen = strlen(root);

	for (size_t i = 0; i < mt->m_n; i++) {
		const struct fp_mount *m = &mt->m_v[i];
		if (m->pm_dev == dev || fp_under(m->pm_point, m->pm_len, root, rlen) != 1)
			continue;
		if (n < 4 && strlen(names) + m->pm_len + 3 < sizeof(names)) {
			if (n > 0)
				strcat(names, ", ");
			strcat(names, m->pm_point);
		}
		n++;
	}
	if (n == 0)
		return 0;
	return fanpolicy_warn(&pl->pl_warn, "fanotify rule \"%s\": %zu other filesystem%s mounted below "
	    "%s %s not covered unless listed (%s%s)", pattern, n, n == 1 ? "" : "s", root,
	    n == 1 ? "is" : "are", names, n > 4 ? ", ..." : "");
}

/* How many INODE marks the plan holds. */
static size_t
fp_plan_inodes(const struct fan_plan *pl)
{
	size_t n = 0;

	for (size_t i = 0; i < pl->pl_nmarks; i++)
		n += pl->pl_marks[i].fm_kind == FAN_PLAN_INODE;
	return n;
}

/* fts order: a directory's files before its subdirectories, so a bounded walk sees shallow files. */
static int
fp_walk_order(const FTSENT **a, const FTSENT **b)
{
	int da = (*a)->fts_info == FTS_D, db = (*b)->fts_info == FTS_D;

	return da - db;
}

/*
 * Existing files as INODE marks. The threat: a hard link or a rename of
 * ~/.ssh/id_ed25519 (or of a workspace's .env) to a name no rule matches
 * would leave the secret readable there by path. An inode mark is matched
 * by inode (fan_inode_rule), whatever name the open came through.
 * With every set (a PREFIX rule), every regular file below root is marked
 * for it; otherwise (SUFFIX rules) only the files some rule of the policy
 * matches, and .git directories (object stores, no secrets by name) are
 * skipped. The walk stays on root's filesystem (a link cannot cross one),
 * does not follow symlinks, and is bounded: past the bound, and for files
 * created later, the path filter alone holds (plan warning).
 */
static int
fp_plan_walk(struct fan_plan *pl, const char *pattern, const char *root, dev_t dev,
    const struct fan_rule *every)
{
	char top[PATH_MAX];
	char *argv[] = { top, NULL };
	size_t have = fp_plan_inodes(pl), visited = 0;
	const char *stop = NULL;
	FTSENT *ent;
	FTS *fts;

	util_strlcpy(top, root, sizeof(top));
	/* FTS_NOSTAT: only directories are stat'ed; a file costs a statx once it is a candidate. */
	fts = fts_open(argv, FTS_PHYSICAL | FTS_XDEV | FTS_NOCHDIR | FTS_NOSTAT, fp_walk_order);
	if (fts == NULL)
		return fanpolicy_warn(&pl->pl_warn, "fanotify rule \"%s\": cannot list %s (%s); "
		    "its files are matched by path only", pattern, root, strerror(errno));
	while ((ent = fts_read(fts)) != NULL) {
		const struct fan_rule *hit = every;
		struct statx stx;
		uint64_t mnt;

		if (++visited > FANPOLICY_WALK_MAX) {
			stop = "entries";
			break;
		}
		if (++pl->pl_walked > FANPOLICY_WALK_TOTAL_MAX) {
			stop = "budget";
			break;
		}
		if (every == NULL && ent->fts_info == FTS_D && ent->fts_level > 0 &&
		    strcmp(ent->fts_name, ".git") == 0) {
			fts_set(fts, ent, FTS_SKIP);
			continue;
		}
		if (ent->fts_info != FTS_F && ent->fts_info != FTS_NSOK)
			continue;
		if (every == NULL && fanpolicy_match(pl->pl_policy, ent->fts_path, &hit) != 1)
			continue;
		/* The path as the engine will mark it: no symlink in it now either. */
		if (fp_statx(ent->fts_path, &stx, &mnt) != 0 || !S_ISREG(stx.stx_mode) ||
		    stx.stx_nlink == 0 || makedev(stx.stx_dev_major, stx.stx_dev_minor) != dev)
			continue;
		if (have >= FANPOLICY_PREFIX_INODES_MAX) {
			stop = "files";
			break;
		}
		size_t before = pl->pl_nmarks;
		if (fp_plan_add(pl, FAN_PLAN_INODE, ent->fts_path, &stx, mnt, hit->fr_index) != 0) {
			fts_close(fts);
			return -1;
		}
		have += pl->pl_nmarks > before;
	}
	fts_close(fts);
	if (stop != NULL && stop[0] == 'b')
		return fanpolicy_warn(&pl->pl_warn, "fanotify rule \"%s\": the plan visited %u "
		    "entries in all before %s was done; its other files are matched by path only "
		    "(a hard link or rename of them is not seen)", pattern, FANPOLICY_WALK_TOTAL_MAX,
		    root);
	if (stop != NULL)
		return fanpolicy_warn(&pl->pl_warn, "fanotify rule \"%s\": more than %u %s below %s; "
		    "the rest are matched by path only (a hard link or rename of them out of %s "
		    "is not seen)", pattern, stop[0] == 'f' ? FANPOLICY_PREFIX_INODES_MAX :
		    FANPOLICY_WALK_MAX, stop, root, root);
	return 0;
}

/* The directory a PREFIX or SUFFIX rule's marks are resolved at. */
static const char *
fp_rule_root(const struct fan_rule *r)
{
	return r->fr_real != NULL ? r->fr_real : r->fr_path;
}

/* Walk one existing directory for the files SUFFIX rules match, if it is on a local filesystem. */
static int
fp_plan_suffix_walk(struct fan_plan *pl, const struct fan_rule *r, const char *dir)
{
	struct statx stx;
	uint64_t mnt;
	int plain;

	if (fp_statx(dir, &stx, &mnt) != 0 || !S_ISDIR(stx.stx_mode))
		return 0;
	if (fp_plan_fstype(pl, r->fr_pattern, dir, &plain) != 0)
		return -1;
	if (!plain)
		return 0;
	return fp_plan_walk(pl, r->fr_pattern, dir, makedev(stx.stx_dev_major, stx.stx_dev_minor),
	    NULL);
}

/*
 * SUFFIX rules after every rule's own marks: the existing files they match
 * below their roots (a root of "/" is too big to walk) and below each
 * workspace inside a root. A workspace on another filesystem than its
 * rule's root gets that filesystem marked too, or **\/.env would not see
 * it at all.
 */
static int
fp_plan_suffixes(struct fan_plan *pl)
{
	const struct fanpolicy *p = pl->pl_policy;

	for (size_t i = 0; i < p->fp_nrules; i++) {
		const struct fan_rule *r = &p->fp_rules[i];
		const char *root = fp_rule_root(r);
		int seen = 0;

		if (r->fr_kind != FAN_RULE_SUFFIX || strcmp(root, "/") == 0)
			continue;
		for (size_t j = 0; j < i && !seen; j++)
			seen = p->fp_rules[j].fr_kind == FAN_RULE_SUFFIX &&
			    strcmp(fp_rule_root(&p->fp_rules[j]), root) == 0;
		if (!seen && fp_plan_suffix_walk(pl, r, root) != 0)
			return -1;
	}
	for (size_t w = 0; w < p->fp_nworkspaces; w++) {
		const char *ws = p->fp_workspaces[w];
		const struct fan_rule *r = NULL;
		struct statx stx;
		uint64_t mnt;
		int inside = 0;

		for (size_t i = 0; i < p->fp_nrules && r == NULL; i++) {
			const char *root = fp_rule_root(&p->fp_rules[i]);
			if (p->fp_rules[i].fr_kind != FAN_RULE_SUFFIX)
				continue;
			inside = fp_under(ws, strlen(ws), root, strlen(root));
			if (inside != 0)
				r = &p->fp_rules[i];
		}
		if (r == NULL || fp_statx(ws, &stx, &mnt) != 0 || !S_ISDIR(stx.stx_mode))
			continue;
		if (fp_plan_add(pl, FAN_PLAN_FILESYSTEM, ws, &stx, mnt, r->fr_index) != 0)
			return -1;
		/* Below a walked root already (or the root itself): its files are marked. */
		if (inside == 2 || strcmp(fp_rule_root(r), "/") != 0)
			continue;
		if (fp_plan_suffix_walk(pl, r, ws) != 0)
			return -1;
	}
	return 0;
}

/* Plan the marks of one rule. */
static int
fp_plan_rule(struct fan_plan *pl, const struct fp_mounts *mt, const struct fan_rule *r)
{
	const char *path = r->fr_real != NULL ? r->fr_real : r->fr_path;
	char dir[PATH_MAX], anc[PATH_MAX];
	struct statx stx;
	uint64_t mnt;
	int plain;

	if (r->fr_kind == FAN_RULE_EXACT) {
		char *slash;
		if (fp_statx(path, &stx, &mnt) == 0) {
			if (S_ISDIR(stx.stx_mode))
				return fanpolicy_warn(&pl->pl_warn, "fanotify rule \"%s\": %s is a "
				    "directory, and opens of directories are not checked (use "
				    "%s/** for what is in it)", r->fr_pattern, path, r->fr_pattern);
			if (S_ISLNK(stx.stx_mode))
				return fanpolicy_warn(&pl->pl_warn, "fanotify rule \"%s\": %s is a "
				    "dangling symlink; opens of its target are reported under the "
				    "target's path", r->fr_pattern, path);
			if (fp_plan_add(pl, FAN_PLAN_INODE, path, &stx, mnt, r->fr_index) != 0)
				return -1;
		} else if (errno != ENOENT) {
			return fanpolicy_warn(&pl->pl_warn, "fanotify rule \"%s\": %s: %s", r->fr_pattern,
			    path, strerror(errno));
		}
		/* The directory too: a replacement by rename is a new, unmarked inode. */
		util_strlcpy(dir, path, sizeof(dir));
		slash = strrchr(dir, '/');
		if (slash == dir)
			dir[1] = '\0';
		else
			*slash = '\0';
		if (fp_statx(dir, &stx, &mnt) == 0 && S_ISDIR(stx.stx_mode))
			return fp_plan_add(pl, FAN_PLAN_CHILDREN, dir, &stx, mnt, r->fr_index);
		if (fp_existing_dir(dir, anc, &stx, &mnt) != 0)
			return fanpolicy_warn(&pl->pl_warn, "fanotify rule \"%s\": no existing directory "
			    "above %s: %s", r->fr_pattern, path, strerror(errno));
		if (fanpolicy_warn(&pl->pl_warn, "fanotify rule \"%s\": directory %s does not exist; "
		    "covering the filesystem of %s", r->fr_pattern, dir, anc) != 0)
			return -1;
		if (fp_plan_fstype(pl, r->fr_pattern, anc, NULL) != 0)
			return -1;
		return fp_plan_add(pl, FAN_PLAN_FILESYSTEM, anc, &stx, mnt, r->fr_index);
	}

	if (fp_existing_dir(path, anc, &stx, &mnt) != 0)
		return fanpolicy_warn(&pl->pl_warn, "fanotify rule \"%s\": no existing directory above "
		    "%s: %s", r->fr_pattern, path, strerror(errno));
	if (strcmp(anc, path) != 0 && fanpolicy_warn(&pl->pl_warn, "fanotify rule \"%s\": root %s is "
	    "missing or not a directory; covering the filesystem of %s (a filesystem mounted "
	    "there later is not covered)", r->fr_pattern, path, anc) != 0)
		return -1;
	if (fp_plan_fstype(pl, r->fr_pattern, anc, &plain) != 0)
		return -1;
	if (mt != NULL && fp_plan_submounts(pl, mt, r->fr_pattern, path,
	    makedev(stx.stx_dev_major, stx.stx_dev_minor)) != 0)
		return -1;
	if (fp_plan_add(pl, FAN_PLAN_FILESYSTEM, anc, &stx, mnt, r->fr_index) != 0)
		return -1;
	if (r->fr_kind == FAN_RULE_PREFIX && plain && strcmp(anc, path) == 0)
		return fp_plan_walk(pl, r->fr_pattern, path, makedev(stx.stx_dev_major,
		    stx.stx_dev_minor), r);
	return 0;
}

/*
 * Per device: cacheable when every mark went through one mount, and a
 * warning for the other mount points of the filesystem, whose paths the
 * rules do not name.
 */
static int
fp_plan_devices(struct fan_plan *pl, const struct fp_mounts *mt)
{
	for (size_t i = 0; i < pl->pl_nmarks; i++) {
		struct fan_mark *m = &pl->pl_marks[i];
		int first = 1, same = 1;
		for (size_t j = 0; j < pl->pl_nmarks; j++) {
			const struct fan_mark *o = &pl->pl_marks[j];
			if (o->fm_dev != m->fm_dev)
				continue;
			if (j < i)
				first = 0;
			if (o->fm_mnt_id != m->fm_mnt_id || o->fm_mnt_id == 0)
				same = 0;
		}
		m->fm_cacheable = same;
		if (!first)
			continue;
		if (!same && fanpolicy_warn(&pl->pl_warn, "fanotify: the marks on device %u:%u go "
		    "through different mounts; no ignore cache there", major(m->fm_dev),
		    minor(m->fm_dev)) != 0)
			return -1;
		if (mt == NULL)
			continue;
		/* Its own mount point: the longest one of that device above fm_path. */
		const struct fp_mount *own = NULL;
		char others[512] = "";
		size_t n = 0;
		for (size_t k = 0; k < mt->m_n; k++) {
			const struct fp_mount *x = &mt->m_v[k];
			if (x->pm_dev == m->fm_dev && fp_under(m->fm_path, strlen(m->fm_path),
			    x->pm_point, x->pm_len) != 0 && (own == NULL || x->pm_len > own->pm_len))
				own = x;
		}
		for (size_t k = 0; k < mt->m_n; k++) {
			const struct fp_mount *x = &mt->m_v[k];
			if (x->pm_dev != m->fm_dev || (own != NULL && strcmp(x->pm_point,
			    own->pm_point) == 0))
				continue;
			if (n < 4 && strlen(others) + x->pm_len + 3 < sizeof(others)) {
				if (n > 0)
					strcat(others, ", ");
				strcat(others, x->pm_point);
			}
			n++;
		}
		if (n > 0 && fanpolicy_warn(&pl->pl_warn, "fanotify: the filesystem of %s is also "
		    "mounted at %s%s; opens through %s are matched by their path there",
		    m->fm_path, others, n > 4 ? ", ..." : "", n == 1 ? "it" : "those") != 0)
			return -1;
	}
	return 0;
}

/* Plan the marks of a policy (see fanpolicy.h). */
int
fanpolicy_plan(const struct fanpolicy *p, struct fan_plan *plan, char **cause)
{
	struct fp_mounts mt;
	int havemt;

	memset(plan, 0, sizeof(*plan));
	plan->pl_policy = p;
	for (size_t i = 0; i < p->fp_warn.w_n; i++)
		if (fanpolicy_warn(&plan->pl_warn, "%s", p->fp_warn.w_v[i]) != 0)
			goto oom;
	plan->pl_warn.w_dropped += p->fp_warn.w_dropped;
	havemt = fp_mounts_load(&mt) == 0;
	if (!havemt && fanpolicy_warn(&plan->pl_warn, "fanotify: /proc/self/mountinfo unreadable (%s); "
	    "mounts below roots are not reported", strerror(errno)) != 0)
		goto oom;
	for (size_t i = 0; i < p->fp_nrules; i++)
		if (fp_plan_rule(plan, havemt ? &mt : NULL, &p->fp_rules[i]) != 0)
			goto oom_mt;
	if (fp_plan_suffixes(plan) != 0)
		goto oom_mt;
	if (fp_plan_devices(plan, havemt ? &mt : NULL) != 0)
		goto oom_mt;
	if (havemt)
		fp_mounts_free(&mt);
	return 0;
oom_mt:
	if (havemt)
		fp_mounts_free(&mt);
oom:
	fanpolicy_plan_free(plan);
	util_cause(cause, "out of memory");
	return -1;
}

/* Free a plan (not its policy). */
void
fanpolicy_plan_free(struct fan_plan *plan)
{
	for (size_t i = 0; i < plan->pl_nmarks; i++)
		free(plan->pl_marks[i].fm_path);
	free(plan->pl_marks);
	fanpolicy_warnings_free(&plan->pl_warn);
	memset(plan, 0, sizeof(*plan));
}

int
fanpolicy_add_spec(struct fanpolicy *p, struct json_object *spec, char **cause)
{
	struct json_object *home_v = NULL, *ws_v = NULL, *rules = NULL;
	const char *home = NULL;

	if (json_object_object_get_ex(spec, "home", &home_v) &&
	    json_object_is_type(home_v, json_type_string))
		home = json_object_get_string(home_v);
	if (fanpolicy_add_builtins(p, home, cause) != 0)
		return -1;
	if (json_object_object_get_ex(spec, "workspace", &ws_v)) {
		if (!json_object_is_type(ws_v, json_type_string)) {
			util_cause(cause, "fanotify workspace must be a string");
			return -1;
		}
		if (fanpolicy_add_workspace(p, json_object_get_string(ws_v), cause) != 0)
			return -1;
	}
	if (!json_object_object_get_ex(spec, "rules", &rules) || rules == NULL)
		return 0;
	if (!json_object_is_type(rules, json_type_array)) {
		util_cause(cause, "fanotify rules must be a list");
		return -1;
	}
	for (size_t i = 0; i < json_object_array_length(rules); i++) {
		struct json_object *r = json_object_array_get_idx(rules, i), *pv, *av;
		enum fan_action a;
		if (!json_object_object_get_ex(r, "path", &pv) ||
		    !json_object_is_type(pv, json_type_string) ||
		    !json_object_object_get_ex(r, "action", &av) ||
		    !json_object_is_type(av, json_type_string) ||
		    fanpolicy_action_from_name(json_object_get_string(av), &a) != 0) {
			util_cause(cause, "fanotify rule %zu: a path and a known action are required", i);
			return -1;
		}
		if (fanpolicy_add(p, json_object_get_string(pv),
		    (size_t)json_object_get_string_len(pv), home, a, cause) != 0)
			return -1;
	}
	return 0;
}

int
fanpolicy_from_spec(struct fanpolicy *p, struct json_object *spec, enum fan_posture *posture,
    char **cause)
{
	struct json_object *pv = NULL;

	fanpolicy_init(p);
	if (!json_object_object_get_ex(spec, "posture", &pv) ||
	    !json_object_is_type(pv, json_type_string) ||
	    fanpolicy_posture_from_name(json_object_get_string(pv), posture) != 0) {
		util_cause(cause, "fanotify posture must be monitor, warn, enforce or isolate");
		return -1;
	}
	if (fanpolicy_add_spec(p, spec, cause) != 0 || fanpolicy_resolve(p, cause) != 0)
		return -1;
	return 0;
}

/*
 * Trust model: the section comes from any local user and is relayed to
 * sensord, whose marks act on the whole host. It is bounded in size (it
 * must fit one of sensord's frames), and a non-root user's rules may only
 * name what lies under their own home and workspace: a rule rooted at "/"
 * would put a filesystem-wide permission mark in place for every user's
 * opens, making the whole host wait on sensord. "**" + "/GLOB" without a
 * root is read as that glob under the user's home and workspace. home and
 * workspace are believed only when they are directories the caller owns.
 */
int
fanpolicy_scope_section(uid_t uid, struct json_object *fan, size_t max_bytes, char **cause)
{
	const char *names[2] = { "home", "workspace" };
	char real[2][PATH_MAX], *scopes[2];
	struct json_object *rules, *out;
	struct fanpolicy fp;
	size_t len, nscopes = 0;
	int rv = -1;

	len = strlen(json_object_to_json_string_ext(fan, JSON_C_TO_STRING_PLAIN));
	if (len > max_bytes) {
		util_cause(cause, "fanotify: the section is %zu bytes, at most %zu", len,
		    max_bytes);
		return -1;
	}
	if (schema_child(fan, "on_sensor_loss") != NULL &&
	    strcmp(schema_string(fan, "on_sensor_loss"), "freeze") != 0 &&
	    strcmp(schema_string(fan, "on_sensor_loss"), "end") != 0) {
		util_cause(cause, "fanotify.on_sensor_loss: expected freeze or end");
		return -1;
	}
	/* A disabled section is neither relayed nor recorded: nothing to scope. */
	if (uid == 0 || !schema_bool(fan, "enabled", 0))
		return 0;
	for (size_t i = 0; i < nitems(names); i++) {
		const char *v = schema_string(fan, names[i]);
		struct stat st;
		char *r;

		if (v == NULL)
			continue;
		r = realpath(v, NULL);
		if (r == NULL && (errno == ENOENT || errno == ENOTDIR) && i == 0) {
			json_object_object_del(fan, names[i]); /* no home: nothing of it to guard */
			continue;
		}
		if (r == NULL || stat(r, &st) != 0 || !S_ISDIR(st.st_mode) ||
		    st.st_uid != uid || strcmp(r, "/") == 0) {
			free(r);
			if (i == 0) {
				util_cause(cause, "fanotify.home %s is not a directory owned by uid %u",
				    v, (unsigned)uid);
				return -1;
			}
			/* A workspace that is not the caller's is not searched for its files. */
			json_object_object_del(fan, names[i]);
			continue;
		}
		util_strlcpy(real[nscopes], r, sizeof(real[nscopes]));
		json_object_object_add(fan, names[i], json_object_new_string(r));
		free(r);
		/* The workspace below the home adds nothing to the scopes. */
		if (nscopes == 1 && fanpolicy_within(real[1], real[0]))
			continue;
		scopes[nscopes] = real[nscopes];
		nscopes++;
	}
	/* Rootless suffix rules become one rule per scope. */
	rules = schema_child(fan, "rules");
	out = json_object_new_array();
	for (size_t i = 0; rules != NULL && i < json_object_array_length(rules); i++) {
		struct json_object *r = json_object_array_get_idx(rules, i);
		const char *path = schema_string(r, "path");
		if (strncmp(path, "**/", 3) != 0) {
			json_object_array_add(out, json_object_get(r));
			continue;
		}
		for (size_t k = 0; k < nscopes; k++) {
			char buf[PATH_MAX + 8];
			struct json_object *n = json_object_new_object();
			snprintf(buf, sizeof(buf), "%s/%s", scopes[k], path);
			json_object_object_add(n, "path", json_object_new_string(buf));
			json_object_object_add(n, "action",
			    json_object_get(schema_child(r, "action")));
			json_object_array_add(out, n);
		}
	}
	json_object_object_add(fan, "rules", out);
	/* Parse them as sensord will, then check where they lead. */
	fanpolicy_init(&fp);
	for (size_t i = 0; i < json_object_array_length(out); i++) {
		struct json_object *r = json_object_array_get_idx(out, i);
		enum fan_action a;
		const char *path = schema_string(r, "path");
		if (fanpolicy_action_from_name(schema_string(r, "action"), &a) != 0) {
			util_cause(cause, "fanotify rule \"%s\": unknown action", path);
			goto out;
		}
		if (fanpolicy_add(&fp, path, strlen(path), schema_string(fan, "home"), a,
		    cause) != 0)
			goto out;
	}
	if (fanpolicy_resolve(&fp, cause) != 0 ||
	    fanpolicy_check_scope(&fp, scopes, nscopes, cause) != 0)
		goto out;
	rv = 0;
out:
	fanpolicy_free(&fp);
	return rv;
}
