/*
 * medlease.c: mediator leases and credential injection.
 *
 * A mediator lease is a time-bounded grant, made by root for one
 * operation, under which the HTTP mediator may inject a host credential
 * into requests whose canonical URL starts with an exact configured
 * prefix (proxy.credentials). Threat model: the credential is broad (an
 * API token), the workload is not to hold it, and neither the config, the
 * evidence nor any log may carry it. So the config names only a handle id,
 * a header, the URL prefix and a host file; the value is read from that
 * file (root-owned, owner-only mode, not a symlink, one link) at the
 * moment of each allowed request, handed to the mediator in the reply,
 * and never written anywhere by boundaryd. Evidence names the handle id.
 *
 * Leases are kept in memory only: a boundaryd restart drops them (less
 * authority, never more); revoke-http ends one at once for new requests
 * and redirect hops (every authorization checks the lease).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "boundaryd.h"
#include "httpurl.h"
#include "ids.h"
#include "log.h"
#include "schema.h"
#include "util.h"

#define MEDLEASE_MAX 16		/* live leases per operation */
#define MEDLEASE_CRED_MAX 4096	/* a credential file's bytes */

struct medlease {
	TAILQ_ENTRY(medlease) ml_entry;
	struct netop *ml_no;
	char ml_id[ID_MAX_LEN];
	int64_t ml_expires_ms;	/* wall clock */
	struct event *ml_ev;
};
TAILQ_HEAD(medlease_list, medlease);

struct medleases {
	struct medlease_list mls_list;
	size_t mls_n;
};

static struct medleases *
medlease_set(struct netop *no, int create)
{
	if (no->no_medleases == NULL && create) {
		if ((no->no_medleases = calloc(1, sizeof(*no->no_medleases))) == NULL)
			return NULL;
		TAILQ_INIT(&no->no_medleases->mls_list);
	}
	return no->no_medleases;
}

static void
medlease_evidence(struct netop *no, const char *kind, const char *id, const char *reason,
    int64_t expires_ms)
{
	struct json_object *o = json_object_new_object();
	char eid[ID_MAX_LEN];

	ids_new("eff_", eid, sizeof(eid));
	json_object_object_add(o, "effect_id", json_object_new_string(eid));
	json_object_object_add(o, "kind", json_object_new_string(kind));
	json_object_object_add(o, "lease_id", json_object_new_string(id));
	json_object_object_add(o, "reason", reason ? json_object_new_string(reason) : NULL);
	if (expires_ms > 0)
		json_object_object_add(o, "expires_unix_ms", json_object_new_int64(expires_ms));
	json_object_object_add(o, "generation", json_object_new_int64((int64_t)no->no_generation));
	netop_append(no, "effects.jsonl", o);
}

/*
 * A lease ended (revoked or expired): tell every mediator channel, so the
 * mediator shuts down the operation's client connections and upstream
 * sockets at once (mediator_lease.closed, protocol.md). Only a signal to
 * narrow: every authorization checks the leases itself either way.
 */
static void
medlease_notify_closed(struct medlease *l, const char *state)
{
	struct json_object *p = json_object_new_object();

	json_object_object_add(p, "operation_id", json_object_new_string(l->ml_no->no_op->op_id));
	json_object_object_add(p, "lease_id", json_object_new_string(l->ml_id));
	json_object_object_add(p, "state", json_object_new_string(state));
	control_mediator_notify(l->ml_no->no_bd, "mediator_lease.closed", p);
}

static void
medlease_remove(struct medlease *l, const char *why)
{
	struct medleases *s = l->ml_no->no_medleases;

	TAILQ_REMOVE(&s->mls_list, l, ml_entry);
	s->mls_n--;
	medlease_evidence(l->ml_no, why, l->ml_id, why, 0);
	medlease_notify_closed(l, strcmp(why, "mediator_lease_expired") == 0 ? "expired" :
	    "revoked");
	if (l->ml_ev != NULL)
		event_free(l->ml_ev);
	free(l);
}

static void
medlease_expire_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	medlease_remove(arg, "mediator_lease_expired");
}

/* Is a lease live now? The clock is checked too: a late timer never extends one. */
int
medlease_active(struct netop *no)
{
	struct medleases *s = medlease_set(no, 0);
	struct medlease *l;
	int64_t now = util_now_ms();

	if (s == NULL)
		return 0;
	TAILQ_FOREACH(l, &s->mls_list, ml_entry)
		if (now < l->ml_expires_ms)
			return 1;
	return 0;
}

void
network_grant_http(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r)
{
	struct netop *no = netop_lookup(bd, p, scope, params, r);
	int64_t ttl = schema_int(params, "ttl_seconds", 0);
	struct medleases *s;
	struct medlease *l;
	struct timeval tv;

	if (no == NULL)
		return;
	/* The trusted opt-in is the root-owned policy's, never the request's. */
	if (!no->no_spec.ns_policy.np_http_gateway_available || no->no_spec.ns_proxy == NULL) {
		reply_error(r, "http_gateway_unavailable", "the operation's policy has no "
		    "http_gateway_available (or no proxy section)");
		return;
	}
	if (no->no_spec.ns_policy.np_max_lease_ttl <= 0 ||
	    ttl > no->no_spec.ns_policy.np_max_lease_ttl) {
		reply_error(r, "ttl_exceeds_ceiling", "ttl_seconds over "
		    "max_in_place_lease_ttl_seconds (%lld)",
		    (long long)no->no_spec.ns_policy.np_max_lease_ttl);
		return;
	}
	if (ttl == 0)
		ttl = no->no_spec.ns_policy.np_max_lease_ttl;
	if ((s = medlease_set(no, 1)) == NULL || s->mls_n >= MEDLEASE_MAX) {
		reply_error(r, PE_LIMIT, "at most %d mediator leases per operation", MEDLEASE_MAX);
		return;
	}
	if ((l = calloc(1, sizeof(*l))) == NULL) {
		reply_error(r, PE_INTERNAL, "out of memory");
		return;
	}
	l->ml_no = no;
	ids_new("lease_http_", l->ml_id, sizeof(l->ml_id));
	l->ml_expires_ms = util_now_ms() + ttl * 1000;
	tv.tv_sec = (time_t)ttl;
	tv.tv_usec = 0;
	if ((l->ml_ev = evtimer_new(bd->bd_base, medlease_expire_cb, l)) == NULL ||
	    evtimer_add(l->ml_ev, &tv) != 0) {
		if (l->ml_ev != NULL)
			event_free(l->ml_ev);
		free(l);
		reply_error(r, PE_INTERNAL, "cannot arm the lease timer");
		return;
	}
	TAILQ_INSERT_TAIL(&s->mls_list, l, ml_entry);
	s->mls_n++;
	medlease_evidence(no, "mediator_lease", l->ml_id, "granted", l->ml_expires_ms);
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "operation_id", json_object_new_string(no->no_op->op_id));
	json_object_object_add(r->or_result, "lease_id", json_object_new_string(l->ml_id));
	json_object_object_add(r->or_result, "expires_unix_ms", json_object_new_int64(l->ml_expires_ms));
}

void
network_revoke_http(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r)
{
	struct netop *no = netop_lookup(bd, p, scope, params, r);
	const char *lid = schema_string(params, "lease_id");
	struct medleases *s;
	struct medlease *l = NULL;

	if (no == NULL)
		return;
	if ((s = medlease_set(no, 0)) != NULL)
		TAILQ_FOREACH(l, &s->mls_list, ml_entry)
			if (strcmp(l->ml_id, lid) == 0)
				break;
	if (l == NULL) {
		reply_error(r, PE_NOT_FOUND, "no active mediator lease %s", lid);
		return;
	}
	medlease_remove(l, "mediator_lease_revoked");
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "lease_id", json_object_new_string(lid));
	json_object_object_add(r->or_result, "revoked", json_object_new_boolean(1));
}

void
medlease_free_all(struct netop *no)
{
	struct medleases *s = no->no_medleases;
	struct medlease *l;

	if (s == NULL)
		return;
	while ((l = TAILQ_FIRST(&s->mls_list)) != NULL) {
		TAILQ_REMOVE(&s->mls_list, l, ml_entry);
		if (l->ml_ev != NULL)
			event_free(l->ml_ev);
		free(l);
	}
	free(s);
	no->no_medleases = NULL;
}

struct json_object *
medlease_summary(struct netop *no)
{
	struct medleases *s = medlease_set(no, 0);
	struct json_object *a = json_object_new_array();
	struct medlease *l;

	if (s != NULL)
		TAILQ_FOREACH(l, &s->mls_list, ml_entry) {
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "lease_id", json_object_new_string(l->ml_id));
			json_object_object_add(o, "expires_unix_ms",
			    json_object_new_int64(l->ml_expires_ms));
			json_object_array_add(a, o);
		}
	return a;
}

/*
 * Read a credential: a root-owned regular file with no group or other
 * permission, one link, opened without following a symlink (and no
 * symlink above it: realpath must be the path itself), at most
 * MEDLEASE_CRED_MAX bytes, one line of printable ASCII (a CR or LF inside
 * would let the value inject headers). 0 and the value in out, or -1.
 */
static int
medlease_read_cred(const char *path, char *out, size_t outsz)
{
	char real[PATH_MAX];
	struct stat st;
	ssize_t n;
	int fd;

	if (realpath(path, real) == NULL || strcmp(real, path) != 0)
		return -1;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || st.st_nlink != 1 ||
	    (st.st_mode & (S_IRWXG | S_IRWXO)) || st.st_size <= 0 ||
	    (size_t)st.st_size >= outsz) {
		close(fd);
		return -1;
	}
	n = read(fd, out, outsz - 1);
	close(fd);
	if (n <= 0)
		return -1;
	out[n] = '\0';
	if (n > 0 && out[n - 1] == '\n')
		out[--n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] > 0x7e)
			return -1;
	return n > 0 ? 0 : -1;
}

/*
 * After an allow: the credential for this request, if a lease is active
 * and the canonical URL starts with a configured prefix. Returns NULL (no
 * credential, or one in handle, header and value) or a deny reason
 * ("credential_unavailable": configured and leased, but the file failed
 * its checks: refused rather than sent without what it needs).
 */
const char *
medlease_credential(struct netop *no, struct json_object *params, const char **handle,
    const char **header, char *value, size_t valuesz)
{
	struct json_object *creds = schema_child(no->no_spec.ns_proxy, "credentials");
	const char *host = schema_string(params, "host");
	struct httpurl *u;
	char *t = NULL;
	int n;

	*handle = NULL;
	*header = NULL;
	value[0] = '\0';
	if (creds == NULL || json_object_array_length(creds) == 0 || !medlease_active(no))
		return NULL;
	n = asprintf(&t, strchr(host, ':') ? "%s://[%s]:%lld%s" : "%s://%s:%lld%s",
	    schema_string(params, "scheme"), host, (long long)schema_int(params, "port", 0),
	    schema_string(params, "path"));
	if (n < 0 || (u = malloc(sizeof(*u))) == NULL) {
		free(t);
		return "credential_unavailable";
	}
	/* Only an unambiguous canonical URL may match a prefix (httpurl refuses the rest). */
	if (httpurl_parse(t, (size_t)n, u) != HTTPURL_OK) {
		free(t);
		free(u);
		return NULL;
	}
	free(t);
	for (size_t i = 0; i < json_object_array_length(creds); i++) {
		struct json_object *c = json_object_array_get_idx(creds, i);
		const char *prefix = schema_string(c, "url_prefix");
		if (strncmp(u->hu_url, prefix, strlen(prefix)) != 0)
			continue;
		free(u);
		*handle = schema_string(c, "handle_id");
		if (medlease_read_cred(schema_string(c, "file"), value, valuesz) != 0) {
			explicit_bzero(value, valuesz);
			log_warnx("%s: credential %s: the file is not a root-owned owner-only "
			    "regular file of one printable line", no->no_op->op_id, *handle);
			return "credential_unavailable";
		}
		*header = schema_string(c, "header");
		return NULL;
	}
	free(u);
	return NULL;
}
