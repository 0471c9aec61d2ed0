/*
 * netop.c: the network boundary of an operation.
 *
 * Trust model: the supervised tree is hostile. Its only network authority
 * is what the nftables table of its operation allows: the baseline envelope
 * plus active leases, as exact destination/protocol/port tuples. Faults and
 * events come from kernel adapters (root) or from the operation's owner;
 * either way they only ever lead to one of four dispositions, and a lease is
 * granted only inside the policy's lease scopes, never to a restricted
 * address, for at most max_in_place_lease_ttl_seconds. Every change is one
 * netlink batch the kernel applies atomically, and every failure to remove
 * authority ends the operation rather than leave the authority in place.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>
#include <sodium.h>

#include "boundaryd.h"
#include "connreq.h"
#include "dnspolicy.h"
#include "frame.h"
#include "log.h"
#include "ocsf.h"
#include "oprecord.h"
#include "proc.h"
#include "record.h"
#include "safefs.h"
#include "util.h"

#define NETOP_RECORD "record.json"
#define NETOP_KEY_DIR "keys"
#define NETOP_KEY_FILE "keys/nft-table.key"
#define NETOP_CONFIG_MAX (1024 * 1024)
/*
 * Lease elements carry a kernel timeout this much past their TTL: the
 * daemon's timer removes them first, and if the daemon is dead the kernel
 * still takes the authority back.
 */
#define NETOP_LEASE_GRACE_MS 2000
#define NETOP_CONNECT_PORT 3128
#define NETOP_BLOCKED_IN_RECORD 16	/* top destinations copied into the operation record */

static void netop_lease_expire_cb(evutil_socket_t, short, void *);

/* Load the table-name key, creating it (0600, root) on first start. */
static int
netop_load_key(struct boundaryd *bd, char **cause)
{
	int fd;

	if (mkdirat(bd->bd_state_fd, NETOP_KEY_DIR, 0700) != 0 && errno != EEXIST) {
		util_cause(cause, "mkdir keys: %s", strerror(errno));
		return -1;
	}
	fd = safefs_openat(bd->bd_state_fd, NETOP_KEY_FILE, O_RDONLY, 0);
	if (fd < 0 && errno == ENOENT) {
		unsigned char k[sizeof(bd->bd_table_key)];
		randombytes_buf(k, sizeof(k));
		fd = safefs_openat(bd->bd_state_fd, NETOP_KEY_FILE, O_WRONLY | O_CREAT | O_EXCL, 0600);
		if (fd < 0 || util_write_all(fd, k, sizeof(k)) != 0 || fsync(fd) != 0) {
			util_cause(cause, "create %s: %s", NETOP_KEY_FILE, strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		close(fd);
		sodium_memzero(k, sizeof(k));
		fd = safefs_openat(bd->bd_state_fd, NETOP_KEY_FILE, O_RDONLY, 0);
	}
	if (fd < 0) {
		util_cause(cause, "open %s: %s", NETOP_KEY_FILE, strerror(errno));
		return -1;
	}
	ssize_t n = read(fd, bd->bd_table_key, sizeof(bd->bd_table_key));
	close(fd);
	if (n != (ssize_t)sizeof(bd->bd_table_key)) {
		util_cause(cause, "%s: short key", NETOP_KEY_FILE);
		return -1;
	}
	return 0;
}

/* Install the hook anchor (nft.h) for this state root, unless turned off. */
static void
netop_anchor(struct boundaryd *bd)
{
	unsigned char h[8];
	char hex[2 * sizeof(h) + 1], *cause = NULL;

	bd->bd_anchor[0] = '\0';
	if (bd->bd_no_anchor)
		return;
	/* One name per state root: a restarted instance reuses its own anchor. */
	crypto_generichash(h, sizeof(h), (const unsigned char *)bd->bd_state_root,
	    strlen(bd->bd_state_root), NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	snprintf(bd->bd_anchor, sizeof(bd->bd_anchor), "%s%s", NFT_ANCHOR_PREFIX, hex);
	if (nft_anchor_install(bd->bd_nft, bd->bd_anchor, &cause) != 0) {
		/* Slower launches, same enforcement. */
		log_warnx("hook anchor %s: %s (every table's commit flips the hooks' static keys)",
		    bd->bd_anchor, cause);
		free(cause);
		bd->bd_anchor[0] = '\0';
	}
}

int
netop_init(struct boundaryd *bd, char **cause)
{
	bd->bd_netops_fd = -1;
	if (mkdirat(bd->bd_state_fd, "network-operations", 0700) != 0 && errno != EEXIST) {
		util_cause(cause, "mkdir network-operations: %s", strerror(errno));
		return -1;
	}
	bd->bd_netops_fd = safefs_opendir(bd->bd_state_fd, "network-operations");
	if (bd->bd_netops_fd < 0) {
		util_cause(cause, "open network-operations: %s", strerror(errno));
		return -1;
	}
	(void)safefs_spread_subdirs(bd->bd_netops_fd);	/* best effort (safefs.c) */
	if (netop_load_key(bd, cause) != 0)
		return -1;
	if (nft_open(&bd->bd_nft, cause) != 0) {
		bd->bd_nft = NULL;
		return -1;
	}
	netop_anchor(bd);
	return 0;
}

void
netop_shutdown(struct boundaryd *bd)
{
	char *cause = NULL;

	if (bd->bd_nft != NULL && bd->bd_anchor[0] != '\0' &&
	    nft_anchor_remove(bd->bd_nft, bd->bd_anchor, &cause) != 0) {
		log_warnx("hook anchor %s: %s", bd->bd_anchor, cause);
		free(cause);
	}
	if (bd->bd_nft != NULL)
		nft_close(bd->bd_nft);
	bd->bd_nft = NULL;
	if (bd->bd_netops_fd >= 0)
		close(bd->bd_netops_fd);
	sodium_memzero(bd->bd_table_key, sizeof(bd->bd_table_key));
}

/*
 * The table name is a keyed hash of the operation id: collision resistant,
 * and not predictable from outside, so no one can pre-create or squat on
 * the table of an operation that is about to start.
 */
/* The table a deny-all allowlist operation gets at create: empty sets, no DNS proxy. */
static int
netop_spec_denies_all(const struct netop_spec *s)
{
	return s->ns_subject == NFT_SUBJECT_CGROUP && s->ns_mode == NFT_MODE_ALLOWLIST &&
	    s->ns_allow.g_n == 0 && s->ns_deny.g_n == 0 && s->ns_dns == NULL;
}

void
netop_table_name(struct boundaryd *bd, const char *id, char out[NFT_TABLE_NAME_MAX])
{
	unsigned char h[12];
	char hex[2 * sizeof(h) + 1];

	crypto_generichash(h, sizeof(h), (const unsigned char *)id, strlen(id), bd->bd_table_key,
	    sizeof(bd->bd_table_key));
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	snprintf(out, NFT_TABLE_NAME_MAX, "%s%s", NFT_TABLE_PREFIX, hex);
}

void
netop_spec_free(struct netop_spec *s)
{
	np_grants_free(&s->ns_allow);
	np_grants_free(&s->ns_deny);
	netpolicy_free(&s->ns_policy);
	json_object_put(s->ns_policy_json);
	json_object_put(s->ns_proxy);
	json_object_put(s->ns_dns);
	json_object_put(s->ns_warnings);
	memset(s, 0, sizeof(*s));
}

static void
netop_spec_init(struct netop_spec *s)
{
	memset(s, 0, sizeof(*s));
	netpolicy_init(&s->ns_policy);
	s->ns_warnings = json_object_new_array();
}

static const struct schema_field network_fields[] = {
	{ "mode", SCHEMA_STRING, 0, 1, 16, 0 },
	{ "allow", SCHEMA_STRING_ARRAY, 0, 0, 10000, 160 },
	{ "deny", SCHEMA_STRING_ARRAY, 0, 0, 10000, 160 },
	{ "lease_scopes", SCHEMA_STRING_ARRAY, 0, 0, 4096, 160 },
	{ "max_lease_ttl_seconds", SCHEMA_INT, 0, 0, NETPOLICY_MAX_LEASE_TTL, 0 },
	{ "restricted_destinations", SCHEMA_STRING_ARRAY, 0, 0, NETPOLICY_MAX_RESTRICTED, 64 },
	/* methods the egress forwards besides GET and HEAD; checked in dnspolicy_parse */
	{ "http_methods", SCHEMA_STRING_ARRAY, 0, 0, DNSPOLICY_MAX_METHODS, 16 },
};

/*
 * Parse a list of grant strings. With dns_allow (the allow list), hostname
 * entries NAME,PROTO,PORT become dns.allow entries for the operation's DNS
 * proxy; a bare hostname, or one elsewhere, is a warning and skipped.
 */
static int
netop_parse_list(struct json_object *arr, struct np_grants *g, struct json_object *warnings,
    const char *what, struct json_object *dns_allow, char **cause)
{
	for (size_t i = 0; arr != NULL && i < json_object_array_length(arr); i++) {
		const char *s = json_object_get_string(json_object_array_get_idx(arr, i));
		int hostname = 0;
		char *why = NULL;
		if (dns_allow != NULL && dnspolicy_is_hostname_entry(s) && strchr(s, ',') != NULL) {
			struct json_object *e = dnspolicy_entry_from_string(s, &why);
			if (e == NULL) {
				util_cause(cause, "%s: %s", what, why);
				free(why);
				return -1;
			}
			json_object_array_add(dns_allow, e);
			continue;
		}
		if (netpolicy_parse_grant_string(s, g, &hostname, &why) == 0)
			continue;
		if (hostname) {
			char w[256];
			snprintf(w, sizeof(w), "%s: hostname %s skipped (an allowed hostname is "
			    "NAME,PROTO,PORT; deny lists take addresses)", what, s);
			json_object_array_add(warnings, json_object_new_string(w));
			free(why);
			continue;
		}
		util_cause(cause, "%s: %s", what, why);
		free(why);
		return -1;
	}
	return 0;
}

int
netop_spec_from_params(struct json_object *net, struct netop_spec *s, char **cause)
{
	struct schema_error err;
	const char *mode;
	struct json_object *pol, *scopes;

	netop_spec_init(s);
	if (schema_validate(net, network_fields, nitems(network_fields), &err) != 0) {
		util_cause(cause, "network: %s (%s)", err.se_message, err.se_code);
		return -1;
	}
	mode = schema_string(net, "mode");
	if (mode == NULL || strcmp(mode, "allowlist") == 0)
		s->ns_mode = NFT_MODE_ALLOWLIST;
	else if (strcmp(mode, "monitor") == 0)
		s->ns_mode = NFT_MODE_DENYLIST;
	else {
		util_cause(cause, "network.mode: expected allowlist or monitor");
		return -1;
	}
	s->ns_subject = NFT_SUBJECT_CGROUP;
	struct json_object *dns_allow = json_object_new_array();
	if (netop_parse_list(schema_child(net, "allow"), &s->ns_allow, s->ns_warnings,
		"network.allow", dns_allow, cause) != 0 ||
	    netop_parse_list(schema_child(net, "deny"), &s->ns_deny, s->ns_warnings,
		"network.deny", NULL, cause) != 0 ||
	    netop_parse_list(schema_child(net, "lease_scopes"), &s->ns_policy.np_lease_scopes,
		s->ns_warnings, "network.lease_scopes", NULL, cause) != 0) {
		json_object_put(dns_allow);
		return -1;
	}
	struct json_object *hm = schema_child(net, "http_methods");
	for (size_t i = 0; hm != NULL && i < json_object_array_length(hm); i++) {
		const char *m = json_object_get_string(json_object_array_get_idx(hm, i));
		if (!connreq_valid_method(m) || strcmp(m, "CONNECT") == 0) {
			json_object_put(dns_allow);
			util_cause(cause, "network.http_methods[%zu]: not a method (A-Z, not CONNECT)",
			    i);
			return -1;
		}
	}
	if (json_object_array_length(dns_allow) > DNSPOLICY_MAX_ENTRIES) {
		json_object_put(dns_allow);
		util_cause(cause, "network.allow: more than %d hostname entries", DNSPOLICY_MAX_ENTRIES);
		return -1;
	}
	if (json_object_array_length(dns_allow) > 0) {
		/* The listen address is chosen at attach (netop_dns_listen). */
		s->ns_dns = json_object_new_object();
		json_object_object_add(s->ns_dns, "allow", dns_allow);
		if (schema_child(net, "http_methods") != NULL)
			json_object_object_add(s->ns_dns, "http_methods",
			    json_object_get(schema_child(net, "http_methods")));
	} else {
		json_object_put(dns_allow);
	}
	/* Keep the policy in the seed's shape, so the record reads like a config. */
	pol = json_object_new_object();
	scopes = json_object_new_array();
	for (size_t i = 0; i < s->ns_policy.np_lease_scopes.g_n; i++)
		json_object_array_add(scopes,
		    netpolicy_grant_json(&s->ns_policy.np_lease_scopes.g_v[i]));
	json_object_object_add(pol, "schema_version", json_object_new_int(1));
	struct json_object *rd = schema_child(net, "restricted_destinations");
	json_object_object_add(pol, "restricted_destinations",
	    rd != NULL ? json_object_get(rd) : json_object_new_array());
	json_object_object_add(pol, "in_place_lease_scopes", scopes);
	json_object_object_add(pol, "max_in_place_lease_ttl_seconds",
	    json_object_new_int64(schema_int(net, "max_lease_ttl_seconds", 0)));
	/* Parse it back: one code path decides what a policy means. */
	struct netpolicy check;
	netpolicy_init(&check);
	if (netpolicy_parse_policy(pol, &check, cause) != 0) {
		netpolicy_free(&check);
		json_object_put(pol);
		return -1;
	}
	netpolicy_free(&s->ns_policy);
	s->ns_policy = check;
	s->ns_policy_json = pol;
	return 0;
}

/*
 * Read an operation network config: a root-owned regular file, mode 0600
 * or stricter, in a directory chain only root controls, never through a
 * symlink. Another principal able to write it could grant itself network
 * authority.
 */
int
netop_spec_from_file(const char *path, struct netop_spec *s, char **cause,
    struct np_config *cfg_out)
{
	char dir[PATH_MAX], base[PATH_MAX], *buf;
	struct json_object *obj = NULL;
	struct np_config cfg;
	struct stat st;
	size_t len;
	int dfd, fd;

	netop_spec_init(s);
	if (util_strlcpy(dir, path, sizeof(dir)) >= sizeof(dir) ||
	    util_strlcpy(base, path, sizeof(base)) >= sizeof(base)) {
		util_cause(cause, "config path too long");
		return -1;
	}
	if ((dfd = safefs_open_root(dirname(dir), cause)) < 0)
		return -1;
	fd = safefs_openat(dfd, basename(base), O_RDONLY, 0);
	close(dfd);
	if (fd < 0) {
		util_cause(cause, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 077) != 0) {
		util_cause(cause, "%s: must be a root-owned regular file with mode 0600", path);
		close(fd);
		return -1;
	}
	int rr = util_read_fd(fd, NETOP_CONFIG_MAX, &buf, &len);
	close(fd);
	if (rr != 0) {
		util_cause(cause, "%s: %s", path, strerror(errno));
		return -1;
	}
	int st2 = frame_parse_payload((const uint8_t *)buf, len, &obj);
	free(buf);
	if (st2 != FRAME_OK) {
		util_cause(cause, "%s: %s", path, frame_status_code(st2));
		return -1;
	}
	if (netpolicy_parse_config(obj, &cfg, cause) != 0) {
		json_object_put(obj);
		netpolicy_config_free(&cfg);
		return -1;
	}
	s->ns_mode = NFT_MODE_ALLOWLIST;
	s->ns_subject = cfg.nc_has_source_address ? NFT_SUBJECT_SOURCE_ADDRESS : NFT_SUBJECT_CGROUP;
	s->ns_src_family = cfg.nc_src_family;
	memcpy(s->ns_src_addr, cfg.nc_src_addr, 16);
	s->ns_allow = cfg.nc_envelope;
	memset(&cfg.nc_envelope, 0, sizeof(cfg.nc_envelope));
	netpolicy_free(&s->ns_policy);
	s->ns_policy = cfg.nc_policy;
	memset(&cfg.nc_policy, 0, sizeof(cfg.nc_policy));
	s->ns_policy_json = json_object_get(schema_child(obj, "policy"));
	s->ns_proxy = cfg.nc_proxy ? json_object_get(cfg.nc_proxy) : NULL;
	s->ns_dns = cfg.nc_dns ? json_object_get(cfg.nc_dns) : NULL;
	util_strlcpy(s->ns_config_path, path, sizeof(s->ns_config_path));
	if (cfg_out != NULL) {
		memset(cfg_out, 0, sizeof(*cfg_out));
		util_strlcpy(cfg_out->nc_operation_id, cfg.nc_operation_id,
		    sizeof(cfg_out->nc_operation_id));
		util_strlcpy(cfg_out->nc_source_run_id, cfg.nc_source_run_id,
		    sizeof(cfg_out->nc_source_run_id));
	}
	netpolicy_config_free(&cfg);
	json_object_put(obj);
	return 0;
}

/* The allow elements of the current generation: baseline plus leases. */
static struct nft_elem *
netop_allow_elems(struct netop *no, size_t *n)
{
	struct netop_lease *l;
	struct np_grants eff = { 0 };
	size_t cnt, i = 0;
	struct nft_elem *v;

	/* A grant wider than one address never opens a restricted range. */
	if (netpolicy_grants_effective(&no->no_spec.ns_policy, &no->no_spec.ns_allow, &eff) != 0) {
		np_grants_free(&eff);
		return NULL;
	}
	cnt = eff.g_n;
	TAILQ_FOREACH(l, &no->no_leases, nl_entry)
		cnt++;
	v = calloc(cnt + 1, sizeof(*v));
	if (v == NULL) {
		np_grants_free(&eff);
		return NULL;
	}
	for (size_t k = 0; k < eff.g_n; k++)
		netpolicy_grant_to_elem(&eff.g_v[k], &v[i++]);
	np_grants_free(&eff);
	int64_t now = util_now_ms();
	TAILQ_FOREACH(l, &no->no_leases, nl_entry) {
		int64_t left = l->nl_expires_ms - now;
		netpolicy_grant_to_elem(&l->nl_grant, &v[i]);
		v[i++].ne_timeout_ms = (uint32_t)((left > 0 ? left : 0) + NETOP_LEASE_GRACE_MS);
	}
	*n = i;
	return v;
}

static void
netop_fill_policy(struct netop *no, struct nft_policy *p, struct nft_elem *allow, size_t nallow,
    struct nft_elem *deny, size_t ndeny, uint64_t generation)
{
	struct operation *op = no->no_op;

	memset(p, 0, sizeof(*p));
	p->np_table = no->no_table;
	p->np_subject = no->no_spec.ns_subject;
	if (p->np_subject == NFT_SUBJECT_CGROUP) {
		p->np_cgroup_id = op->op_cg.cg_id;
		p->np_cgroup_level = NETOP_CGROUP_LEVEL;
	} else {
		p->np_src_family = no->no_spec.ns_src_family;
		memcpy(p->np_src_addr, no->no_spec.ns_src_addr, 16);
	}
	/* The dns section was validated with the config; listen is an address and a port. */
	if (no->no_spec.ns_dns != NULL &&
	    netpolicy_parse_listen(schema_string(no->no_spec.ns_dns, "listen"), &p->np_dns_family,
	    p->np_dns_addr, &p->np_dns_port) != 0)
		p->np_dns_family = 0;
	if (no->no_spec.ns_dns != NULL && p->np_subject == NFT_SUBJECT_CGROUP &&
	    schema_string(no->no_spec.ns_dns, "connect_listen") != NULL &&
	    netpolicy_parse_listen(schema_string(no->no_spec.ns_dns, "connect_listen"),
	    &p->np_connect_family, p->np_connect_addr, &p->np_connect_port) != 0)
		p->np_connect_family = 0;
	p->np_mode = no->no_spec.ns_mode;
	p->np_allow = allow;
	p->np_nallow = nallow;
	p->np_deny = deny;
	p->np_ndeny = ndeny;
	p->np_generation = generation;
	p->np_owner = op->op_id;
}

/* Install the whole current state as the next generation, in one batch. */
static int
netop_commit(struct netop *no, char **cause)
{
	struct nft_policy p;
	size_t nallow = 0, ndeny = no->no_spec.ns_deny.g_n;
	struct nft_elem *allow = netop_allow_elems(no, &nallow);
	struct nft_elem *deny = calloc(ndeny + 1, sizeof(*deny));
	int r = -1;

	if (allow == NULL || deny == NULL) {
		util_cause(cause, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < ndeny; i++)
		netpolicy_grant_to_elem(&no->no_spec.ns_deny.g_v[i], &deny[i]);
	netop_fill_policy(no, &p, allow, nallow, deny, ndeny, no->no_generation + 1);
	if (no->no_bd->bd_nft == NULL) {
		util_cause(cause, "nftables is not available");
		goto out;
	}
	/*
	 * Once the table is ours, refill it in place: elements present before
	 * and after stay visible throughout. Recreating the table would leave
	 * an instant in which the new, still empty sets reject everything.
	 */
	if (no->no_table_installed &&
	    nft_generation_refill(no->no_bd->bd_nft, &p, cause) == 0) {
		no->no_generation++;
		r = 0;
		goto out;
	}
	if (no->no_table_installed) {
		log_warnx("%s: refill failed (%s); installing a full generation", no->no_op->op_id,
		    *cause);
		free(*cause);
		*cause = NULL;
	}
	if (nft_generation_commit(no->no_bd->bd_nft, &p, cause) != 0)
		goto out;
	no->no_table_installed = 1;
	no->no_generation++;
	r = 0;
out:
	free(allow);
	free(deny);
	return r;
}

static struct json_object *
netop_lease_json(const struct netop_lease *l)
{
	struct json_object *o = netpolicy_grant_json(&l->nl_grant);
	char ts[40];
	time_t secs = (time_t)(l->nl_expires_ms / 1000);
	struct tm tm;

	gmtime_r(&secs, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_object_object_add(o, "lease_id", json_object_new_string(l->nl_id));
	json_object_object_add(o, "issued_at", json_object_new_string(l->nl_issued_at));
	json_object_object_add(o, "expires_at", json_object_new_string(ts));
	json_object_object_add(o, "expires_unix_ms", json_object_new_int64(l->nl_expires_ms));
	return o;
}

static struct json_object *
netop_grants_json(const struct np_grants *g)
{
	struct json_object *a = json_object_new_array();
	for (size_t i = 0; i < g->g_n; i++)
		json_object_array_add(a, netpolicy_grant_json(&g->g_v[i]));
	return a;
}

static struct json_object *
netop_leases_json(struct netop *no)
{
	struct json_object *a = json_object_new_array();
	struct netop_lease *l;
	TAILQ_FOREACH(l, &no->no_leases, nl_entry)
		json_object_array_add(a, netop_lease_json(l));
	return a;
}

static const char *
netop_mode_name(enum nft_mode m)
{
	return m == NFT_MODE_ALLOWLIST ? "allowlist" : "monitor";
}

/* The envelope as the generic operation record holds it. */
static struct json_object *
netop_envelope_json(struct netop *no)
{
	struct json_object *e = json_object_new_object();
	json_object_object_add(e, "generation", json_object_new_int64((int64_t)no->no_generation));
	json_object_object_add(e, "mode", json_object_new_string(netop_mode_name(no->no_spec.ns_mode)));
	json_object_object_add(e, "grants", netop_grants_json(&no->no_spec.ns_allow));
	json_object_object_add(e, "deny", netop_grants_json(&no->no_spec.ns_deny));
	json_object_object_add(e, "table", json_object_new_string(no->no_table));
	return e;
}

/* The whole network record, built from memory. */
static struct json_object *
netop_record_json(struct netop *no, const char *state)
{
	struct json_object *r = json_object_new_object();
	struct json_object *subj = json_object_new_object();
	struct operation *op = no->no_op;
	char ts[40];

	util_now_rfc3339(ts, sizeof(ts));
	json_object_object_add(r, "schema_version", json_object_new_int(1));
	json_object_object_add(r, "operation_id", json_object_new_string(op->op_id));
	json_object_object_add(r, "state", json_object_new_string(state));
	json_object_object_add(r, "updated_at", json_object_new_string(ts));
	if (no->no_spec.ns_subject == NFT_SUBJECT_CGROUP) {
		json_object_object_add(subj, "kind", json_object_new_string("root_pid"));
		json_object_object_add(subj, "root_pid", json_object_new_int64(op->op_root_pid));
		json_object_object_add(subj, "cgroup_path", json_object_new_string(op->op_cg.cg_path));
		json_object_object_add(subj, "cgroup_id", json_object_new_int64((int64_t)op->op_cg.cg_id));
		json_object_object_add(subj, "cgroup_level", json_object_new_int(2));
	} else {
		struct np_range rg = { .nr_family = no->no_spec.ns_src_family };
		char a[128];
		memcpy(rg.nr_lo, no->no_spec.ns_src_addr, 16);
		memcpy(rg.nr_hi, no->no_spec.ns_src_addr, 16);
		netpolicy_range_format(&rg, a, sizeof(a));
		json_object_object_add(subj, "kind", json_object_new_string("source_address"));
		json_object_object_add(subj, "address", json_object_new_string(a));
	}
	json_object_object_add(r, "subject", subj);
	json_object_object_add(r, "table", json_object_new_string(no->no_table));
	json_object_object_add(r, "generation", json_object_new_int64((int64_t)no->no_generation));
	json_object_object_add(r, "envelope", netop_envelope_json(no));
	json_object_object_add(r, "policy", json_object_get(no->no_spec.ns_policy_json));
	json_object_object_add(r, "proxy", json_object_get(no->no_spec.ns_proxy));
	json_object_object_add(r, "dns", json_object_get(no->no_spec.ns_dns));
	json_object_object_add(r, "leases", netop_leases_json(no));
	json_object_object_add(r, "warnings", json_object_get(no->no_spec.ns_warnings));
	json_object_object_add(r, "config_path", no->no_spec.ns_config_path[0] ?
	    json_object_new_string(no->no_spec.ns_config_path) : NULL);
	return r;
}

static int
netop_record_validate(struct json_object *rec, const char *id, char **cause)
{
	if (schema_int(rec, "schema_version", 0) != 1 || schema_string(rec, "operation_id") == NULL ||
	    strcmp(schema_string(rec, "operation_id"), id) != 0 ||
	    schema_child(rec, "generation") == NULL || schema_string(rec, "table") == NULL) {
		util_cause(cause, "network record invalid or of another operation");
		return -1;
	}
	return 0;
}

/* Replace the record with a newer one; an older generation never wins. */
static int
netop_record_mut_replace(struct json_object *rec, void *arg, char **cause)
{
	struct json_object *next = arg;
	if (schema_int(next, "generation", 0) < schema_int(rec, "generation", 0)) {
		util_cause(cause, "stale network record generation");
		return -1;
	}
	json_object_object_foreach(next, k, v) {
		json_object_object_add(rec, k, json_object_get(v));
	}
	return 0;
}

static void
netop_write_record(struct netop *no, const char *state)
{
	struct json_object *r = netop_record_json(no, state);
	char *cause = NULL;
	int fd = safefs_openat(no->no_dirfd, NETOP_RECORD, O_RDONLY, 0);

	if (fd < 0) {
		if (record_create(no->no_dirfd, NETOP_RECORD, r, &cause) != 0) {
			log_warnx("%s: network record: %s", no->no_op->op_id, cause);
			free(cause);
		}
	} else {
		close(fd);
		if (record_update(no->no_dirfd, NETOP_RECORD, no->no_op->op_id, netop_record_validate,
			netop_record_mut_replace, r, NULL, &cause) != 0) {
			log_warnx("%s: network record: %s", no->no_op->op_id, cause);
			free(cause);
		}
	}
	json_object_put(r);
}

struct netop_envelope_arg {
	struct json_object *ea_envelope;
	struct json_object *ea_leases;
};

static int
netop_mut_envelope(struct json_object *rec, void *arg, char **cause)
{
	struct netop_envelope_arg *a = arg;
	if (oprecord_mut_envelope(rec, a->ea_envelope, cause) != 0)
		return -1;
	json_object_object_add(rec, "leases", json_object_get(a->ea_leases));
	return 0;
}

/* The network record alone (the envelope copy is the caller's). */
static void
netop_publish_record_only(struct netop *no)
{
	netop_write_record(no, "active");
}

/*
 * The envelope copy as a mutator of the operation record, for a caller
 * that writes it in its own update (operation.create: one write fewer on
 * the launch path). arg is the struct netop.
 */
int
netop_mut_envelope_of(struct json_object *rec, void *arg, char **cause)
{
	struct netop *no = arg;
	struct netop_envelope_arg a = { netop_envelope_json(no), netop_leases_json(no) };
	int r = netop_mut_envelope(rec, &a, cause);

	json_object_put(a.ea_envelope);
	json_object_put(a.ea_leases);
	return r;
}

/*
 * After each generation: the network record, and the exact envelope and
 * leases copied into the generic operation record.
 */
static void
netop_publish(struct netop *no)
{
	char *cause = NULL;

	netop_publish_record_only(no);
	if (oprecord_update(no->no_op->op_dirfd, no->no_op->op_id, netop_mut_envelope_of, no,
	    NULL, &cause) != 0) {
		log_warnx("%s: envelope copy: %s", no->no_op->op_id, cause);
		free(cause);
	}
}

void
netop_append(struct netop *no, const char *file, struct json_object *o)
{
	char *cause = NULL;
	char ts[40];

	util_now_rfc3339(ts, sizeof(ts));
	json_object_object_add(o, "time", json_object_new_string(ts));
	json_object_object_add(o, "operation_id", json_object_new_string(no->no_op->op_id));
	if (record_append_jsonl(no->no_dirfd, file, o, &cause) != 0) {
		/* Evidence that cannot be written is itself a violation to report. */
		log_warnx("%s: %s: %s", no->no_op->op_id, file, cause);
		free(cause);
		operation_violation(no->no_op, "evidence_append_failed");
	}
	/*
	 * The decision was made either way: the SIEM hears of it. Mediator
	 * decisions have no OCSF mapping yet (http-mediator.jsonl only).
	 */
	if (strcmp(file, "http-mediator.jsonl") != 0)
		ocsf_emit(strcmp(file, "effects.jsonl") == 0 ? "effect" :
	    strcmp(file, "faults.jsonl") == 0 ? "fault" : "counters", o);
	json_object_put(o);
}

/* One boundary effect: allow, lease, broker or deny (counted in the record). */
static void
netop_effect(struct netop *no, const char *kind, const struct np_event *ev, const char *reason,
    const char *lease_id, const char *fault_id)
{
	struct json_object *o = json_object_new_object();
	char id[ID_MAX_LEN];

	ids_new("eff_", id, sizeof(id));
	json_object_object_add(o, "effect_id", json_object_new_string(id));
	json_object_object_add(o, "kind", json_object_new_string(kind));
	if (ev != NULL) {
		struct np_range rg = { .nr_family = ev->ne_family };
		char a[128];
		memcpy(rg.nr_lo, ev->ne_addr, 16);
		memcpy(rg.nr_hi, ev->ne_addr, 16);
		netpolicy_range_format(&rg, a, sizeof(a));
		json_object_object_add(o, "destination", json_object_new_string(a));
		json_object_object_add(o, "protocol", json_object_new_string(netpolicy_proto_name(ev->ne_proto)));
		json_object_object_add(o, "port", json_object_new_int(ev->ne_port));
	}
	json_object_object_add(o, "reason", reason ? json_object_new_string(reason) : NULL);
	json_object_object_add(o, "lease_id", lease_id ? json_object_new_string(lease_id) : NULL);
	json_object_object_add(o, "fault_id", fault_id ? json_object_new_string(fault_id) : NULL);
	json_object_object_add(o, "generation", json_object_new_int64((int64_t)no->no_generation));
	netop_append(no, "effects.jsonl", o);
	if (strcmp(kind, "allow") == 0 || strcmp(kind, "lease") == 0 ||
	    strcmp(kind, "broker") == 0 || strcmp(kind, "deny") == 0)
		operation_count_effect(no->no_op);
}

static int
netop_open_dir(struct netop *no, char **cause)
{
	struct boundaryd *bd = no->no_bd;
	const char *id = no->no_op->op_id;

	if (mkdirat(bd->bd_netops_fd, id, 0700) != 0 && errno != EEXIST) {
		util_cause(cause, "mkdir network-operations/%s: %s", id, strerror(errno));
		return -1;
	}
	no->no_dirfd = safefs_opendir(bd->bd_netops_fd, id);
	if (no->no_dirfd < 0) {
		util_cause(cause, "open network-operations/%s: %s", id, strerror(errno));
		return -1;
	}
	return 0;
}

/* Serve the seed's `--socket` forms for this one operation (root only). */
static void
netop_listen(struct netop *no)
{
	char dir[PATH_MAX + 128];

	snprintf(dir, sizeof(dir), "%s/network-operations/%s", no->no_bd->bd_state_root,
	    no->no_op->op_id);
	util_strlcpy(no->no_sup.l_scope, no->no_op->op_id, sizeof(no->no_sup.l_scope));
	if (control_listen(no->no_bd, &no->no_sup, no->no_dirfd, dir, "supervisor.sock",
		PS_SUPERVISOR, 0600) != 0)
		log_warnx("%s: supervisor.sock unavailable", no->no_op->op_id);
}

static struct netop *
netop_alloc(struct operation *op)
{
	struct netop *no = calloc(1, sizeof(*no));
	if (no == NULL)
		return NULL;
	no->no_op = op;
	no->no_bd = op->op_bd;
	no->no_dirfd = -1;
	TAILQ_INIT(&no->no_leases);
	netop_table_name(op->op_bd, op->op_id, no->no_table);
	return no;
}

/*
 * A root_pid operation with hostname entries: its DNS proxy listens on
 * 127.78.X.Y:5353 (X.Y from the operation id, the next free one among the
 * running operations), the table DNATs the cgroup's port-53 traffic there,
 * and an exact grant lets the redirected packets through the envelope (a
 * loopback address is restricted, and only an exact grant reaches one).
 */
static int
netop_dns_listen(struct operation *op, struct netop_spec *s, char **cause)
{
	uint32_t h = 2166136261u;
	char listen[32];
	uint8_t a[16];
	int fam;
	uint16_t port;

	if (s->ns_dns == NULL || schema_string(s->ns_dns, "listen") != NULL)
		return 0;
	for (const char *p = op->op_id; *p != '\0'; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	for (int tries = 0; tries < 256; tries++, h++) {
		struct operation *o;
		int used = 0;
		snprintf(listen, sizeof(listen), "127.78.%u.%u:5353", (h >> 8) & 0xff,
		    (h & 0xff) == 0 ? 1 : h & 0xff);
		TAILQ_FOREACH(o, &op->op_bd->bd_ops, op_entry)
			if (o != op && o->op_net != NULL && o->op_net->no_spec.ns_dns != NULL &&
			    schema_string(o->op_net->no_spec.ns_dns, "listen") != NULL &&
			    strcmp(schema_string(o->op_net->no_spec.ns_dns, "listen"), listen) == 0)
				used = 1;
		if (!used)
			break;
	}
	json_object_object_add(s->ns_dns, "listen", json_object_new_string(listen));
	if (netpolicy_parse_listen(listen, &fam, a, &port) != 0) {
		util_cause(cause, "dns: no listen address");
		return -1;
	}
	/* The CONNECT listener: the same address, port 3128, the operation's alone. */
	char cl[32];
	snprintf(cl, sizeof(cl), "%.*s:%d", (int)(strrchr(listen, ':') - listen), listen,
	    NETOP_CONNECT_PORT);
	json_object_object_add(s->ns_dns, "connect_listen", json_object_new_string(cl));
	for (int i = 0; i < 3; i++) {
		struct np_grant g = { .ng_dst = { .nr_family = fam }, .ng_proto = i == 0 ?
			IPPROTO_UDP : IPPROTO_TCP, .ng_port_lo = i == 2 ? NETOP_CONNECT_PORT : port,
			.ng_port_hi = i == 2 ? NETOP_CONNECT_PORT : port };
		memcpy(g.ng_dst.nr_lo, a, 16);
		memcpy(g.ng_dst.nr_hi, a, 16);
		if (np_grants_add(&s->ns_allow, &g) != 0) {
			util_cause(cause, "out of memory");
			return -1;
		}
	}
	return 0;
}

/*
 * The credential of an operation's CONNECT listener: a keyed BLAKE2b of
 * its id under the state's table key, so it survives a restart without
 * being stored, and no one without the key can compute another
 * operation's. The kernel guard is what binds the listener to the
 * operation; the token is the second lock (and never evidence).
 */
void
netop_connect_token(struct boundaryd *bd, const char *opid, char out[65])
{
	unsigned char h[32];
	char msg[128];
	int n = snprintf(msg, sizeof(msg), "gensee-connect:%s", opid);

	crypto_generichash(h, sizeof(h), (const unsigned char *)msg, (size_t)n, bd->bd_table_key,
	    sizeof(bd->bd_table_key));
	sodium_bin2hex(out, 65, h, sizeof(h));
}

/*
 * What netop_attach left to a deferring caller: the network record, the
 * "installed" effect and supervisor.sock (operation.create does them once
 * the launcher has its answer; the envelope copy went into its own update).
 */
void
netop_publish_installed(struct netop *no)
{
	netop_publish_record_only(no);
	netop_effect(no, "generation", NULL, "installed", NULL, NULL);
	netop_listen(no);	/* root's --socket forms: not on the launch path */
}

struct netop *
netop_attach(struct operation *op, struct netop_spec *s, int defer_envelope, char **cause)
{
	struct netop *no;

	if (op->op_bd->bd_nft == NULL) {
		util_cause(cause, "nftables is not available on this host");
		return NULL;
	}
	if (s->ns_subject == NFT_SUBJECT_CGROUP && !op->op_cg_valid) {
		util_cause(cause, "a root_pid subject needs the operation's cgroup");
		return NULL;
	}
	if (netop_dns_listen(op, s, cause) != 0)
		return NULL;
	if ((no = netop_alloc(op)) == NULL) {
		util_cause(cause, "out of memory");
		return NULL;
	}
	no->no_spec = *s;
	memset(s, 0, sizeof(*s));
	if (netop_open_dir(no, cause) != 0) {
		netop_free(no);
		return NULL;
	}
	/*
	 * A prepared cell's table is installed: generation 1, deny-all. An
	 * operation that allows nothing has exactly that; any other gets its
	 * sets and rules refilled in one batch.
	 */
	int spare = op->op_spare_table[0] != '\0' && strcmp(op->op_spare_table, no->no_table) == 0;
	if (spare)
		no->no_table_installed = 1;
	if (spare && netop_spec_denies_all(&no->no_spec)) {
		no->no_generation = 1;
	} else if (netop_commit(no, cause) != 0) {
		netop_free(no);
		return NULL;
	}
	op->op_spare_table[0] = '\0';	/* the table is this netop's now */
	op->op_net = no;
	if (!defer_envelope) {
		netop_publish(no);
		netop_effect(no, "generation", NULL, "installed", NULL, NULL);
		netop_listen(no);
	}
	log_info("%s: network %s installed, table %s, %zu grant(s), %zu deny", op->op_id,
	    netop_mode_name(no->no_spec.ns_mode), no->no_table, no->no_spec.ns_allow.g_n,
	    no->no_spec.ns_deny.g_n);
	return no;
}

static void
netop_lease_free(struct netop_lease *l)
{
	if (l->nl_ev != NULL)
		event_free(l->nl_ev);
	free(l);
}

/*
 * Remove authority: a delta batch, else a whole generation without it. If
 * neither can be installed the kernel may still hold the authority, so the
 * operation is ended: fail closed.
 */
static void
netop_remove_lease(struct netop *no, struct netop_lease *l, const char *why)
{
	struct nft_elem e;
	char *cause = NULL;
	char id[ID_MAX_LEN];
	struct np_event ev = { .ne_family = l->nl_grant.ng_dst.nr_family,
		.ne_proto = l->nl_grant.ng_proto, .ne_port = l->nl_grant.ng_port_lo };

	memcpy(ev.ne_addr, l->nl_grant.ng_dst.nr_lo, 16);
	util_strlcpy(id, l->nl_id, sizeof(id));
	netpolicy_grant_to_elem(&l->nl_grant, &e);
	TAILQ_REMOVE(&no->no_leases, l, nl_entry);
	netop_lease_free(l);
	if (no->no_bd->bd_nft != NULL &&
	    nft_elements_update(no->no_bd->bd_nft, no->no_table, no->no_generation + 1, NULL, 0, &e,
		1, &cause) == 0) {
		no->no_generation++;
	} else {
		log_warnx("%s: lease %s removal delta failed: %s", no->no_op->op_id, id,
		    cause ? cause : "no nftables");
		free(cause);
		cause = NULL;
		if (netop_commit(no, &cause) != 0) {
			log_warnx("%s: cannot revoke lease %s: %s", no->no_op->op_id, id, cause);
			free(cause);
			operation_violation(no->no_op, "lease_revocation_failed");
			operation_finish(no->no_op, OPSTATE_ENDED, "enforcement_failed");
			return;
		}
	}
	netop_publish(no);
	netop_effect(no, why, &ev, why, id, NULL);
}

static void
netop_lease_expire_cb(evutil_socket_t fd, short what, void *arg)
{
	struct netop_lease *l = arg;
	(void)fd;
	(void)what;
	netop_remove_lease(l->nl_no, l, "lease_expired");
}

static int
netop_arm_lease(struct netop *no, struct netop_lease *l)
{
	int64_t left = l->nl_expires_ms - util_now_ms();
	if (left < 0)
		left = 0;
	struct timeval tv = { left / 1000, (left % 1000) * 1000 };
	l->nl_ev = evtimer_new(no->no_bd->bd_base, netop_lease_expire_cb, l);
	if (l->nl_ev == NULL || evtimer_add(l->nl_ev, &tv) != 0)
		return -1;
	return 0;
}

/* Grant the exact tuple of ev for ttl seconds; it is active once acked. */
static struct netop_lease *
netop_grant_lease(struct netop *no, const struct np_event *ev, int64_t ttl, char **cause)
{
	struct netop_lease *l = calloc(1, sizeof(*l));
	struct nft_elem e;

	if (l == NULL) {
		util_cause(cause, "out of memory");
		return NULL;
	}
	l->nl_no = no;
	ids_new("lease_", l->nl_id, sizeof(l->nl_id));
	l->nl_grant.ng_dst.nr_family = ev->ne_family;
	memcpy(l->nl_grant.ng_dst.nr_lo, ev->ne_addr, 16);
	memcpy(l->nl_grant.ng_dst.nr_hi, ev->ne_addr, 16);
	l->nl_grant.ng_proto = ev->ne_proto;
	l->nl_grant.ng_port_lo = l->nl_grant.ng_port_hi = ev->ne_port;
	l->nl_expires_ms = util_now_ms() + ttl * 1000;
	util_now_rfc3339(l->nl_issued_at, sizeof(l->nl_issued_at));
	netpolicy_grant_to_elem(&l->nl_grant, &e);
	e.ne_timeout_ms = (uint32_t)(ttl * 1000 + NETOP_LEASE_GRACE_MS);
	if (no->no_bd->bd_nft == NULL ||
	    nft_elements_update(no->no_bd->bd_nft, no->no_table, no->no_generation + 1, &e, 1, NULL,
		0, cause) != 0) {
		free(l);
		return NULL;
	}
	no->no_generation++;
	TAILQ_INSERT_TAIL(&no->no_leases, l, nl_entry);
	if (netop_arm_lease(no, l) != 0) {
		/* Without a timer the lease could outlive its TTL: take it back now. */
		netop_remove_lease(no, l, "lease_revoked");
		util_cause(cause, "cannot arm the lease timer");
		return NULL;
	}
	netop_publish(no);
	return l;
}

int
netop_lease_tuple(struct netop *no, const struct np_event *ev, int64_t ttl, char *lease_id,
    size_t lease_id_len, int *extended, char **cause)
{
	struct netop_lease *l;
	int64_t expires = util_now_ms() + ttl * 1000;

	*extended = 0;
	TAILQ_FOREACH(l, &no->no_leases, nl_entry) {
		const struct np_grant *g = &l->nl_grant;
		if (g->ng_dst.nr_family == ev->ne_family && memcmp(g->ng_dst.nr_lo, ev->ne_addr, 16) == 0 &&
		    memcmp(g->ng_dst.nr_hi, ev->ne_addr, 16) == 0 && g->ng_proto == ev->ne_proto &&
		    g->ng_port_lo == ev->ne_port && g->ng_port_hi == ev->ne_port)
			break;
	}
	if (l == NULL) {
		if ((l = netop_grant_lease(no, ev, ttl, cause)) == NULL)
			return -1;
		util_strlcpy(lease_id, l->nl_id, lease_id_len);
		return 0;
	}
	util_strlcpy(lease_id, l->nl_id, lease_id_len);
	*extended = 1;
	/*
	 * Shared by two names: the later expiry wins, so one name's short TTL
	 * never cuts the other's flows. The element is replaced (delete, then
	 * add with the new kernel timeout) in one batch, so it never leaves.
	 */
	if (expires <= l->nl_expires_ms)
		return 0;
	struct nft_elem e;
	netpolicy_grant_to_elem(&l->nl_grant, &e);
	e.ne_timeout_ms = (uint32_t)(ttl * 1000 + NETOP_LEASE_GRACE_MS);
	if (no->no_bd->bd_nft == NULL ||
	    nft_elements_update(no->no_bd->bd_nft, no->no_table, no->no_generation + 1, &e, 1, &e, 1,
		cause) != 0)
		return -1; /* the old lease stays as it was: nothing widened */
	no->no_generation++;
	l->nl_expires_ms = expires;
	struct timeval tv = { ttl, 0 };
	if (evtimer_add(l->nl_ev, &tv) != 0) {
		netop_remove_lease(no, l, "lease_revoked");
		util_cause(cause, "cannot re-arm the lease timer");
		return -1;
	}
	netop_publish(no);
	return 0;
}

static void
netop_leases_grants(struct netop *no, struct np_grants *g)
{
	struct netop_lease *l;
	memset(g, 0, sizeof(*g));
	TAILQ_FOREACH(l, &no->no_leases, nl_entry)
		np_grants_add(g, &l->nl_grant);
}

/* Most packets first; ties in a stable order (family, address, proto, port). */
static int
netop_blocked_cmp(const void *a, const void *b)
{
	const struct nft_blocked *x = a, *y = b;

	if (x->nb_packets != y->nb_packets)
		return x->nb_packets > y->nb_packets ? -1 : 1;
	if (x->nb_family != y->nb_family)
		return x->nb_family < y->nb_family ? -1 : 1;
	int c = memcmp(x->nb_addr, y->nb_addr, 16);
	if (c != 0)
		return c;
	if (x->nb_proto != y->nb_proto)
		return x->nb_proto < y->nb_proto ? -1 : 1;
	return x->nb_port < y->nb_port ? -1 : x->nb_port > y->nb_port;
}

/* {destination, protocol, port, packets, bytes, reason} of one rejected tuple. */
static const char *
netop_blocked_reason(const struct netop *no, const struct nft_blocked *d)
{
	if (np_grants_find(&no->no_spec.ns_deny, d->nb_family, d->nb_addr, d->nb_proto,
	    d->nb_port) >= 0)
		return "deny_list";
	if (no->no_spec.ns_mode == NFT_MODE_DENYLIST)
		return "monitor_would_block";
	return np_grants_find(&no->no_spec.ns_allow, d->nb_family, d->nb_addr, d->nb_proto,
	    d->nb_port) >= 0 ? "restricted_destination" : "outside_envelope";
}

static struct json_object *
netop_blocked_json(const struct netop *no, const struct nft_blocked *d)
{
	struct json_object *o = json_object_new_object();
	struct np_range rg = { .nr_family = d->nb_family };
	char a[128];

	memcpy(rg.nr_lo, d->nb_addr, 16);
	memcpy(rg.nr_hi, d->nb_addr, 16);
	netpolicy_range_format(&rg, a, sizeof(a));
	json_object_object_add(o, "destination", json_object_new_string(a));
	json_object_object_add(o, "protocol", json_object_new_string(netpolicy_proto_name(d->nb_proto)));
	json_object_object_add(o, "port", json_object_new_int(d->nb_port));
	json_object_object_add(o, "packets", json_object_new_int64((int64_t)d->nb_packets));
	json_object_object_add(o, "bytes", json_object_new_int64((int64_t)d->nb_bytes));
	/*
	 * The deny list is checked first in the kernel too. In monitor mode
	 * the sets also count what was let through but lies outside the
	 * grants: what an allowlist would have blocked.
	 */
	json_object_object_add(o, "reason", json_object_new_string(netop_blocked_reason(no, d)));
	return o;
}

/* The blocked sets' elements, most packets first (none if unreadable). */
static void
netop_blocked_sorted(struct netop *no, struct nft_blocked **v, size_t *n)
{
	char *cause = NULL;

	if (nft_blocked_read(no->no_bd->bd_nft, no->no_table, v, n, &cause) != 0) {
		log_warnx("%s: blocked destinations: %s", no->no_op->op_id, cause);
		free(cause);
		*v = NULL;
		*n = 0;
		return;
	}
	if (*n > 1)	/* qsort(NULL, 0, ...) is undefined */
		qsort(*v, *n, sizeof(**v), netop_blocked_cmp);
}

/* {"destinations": N, "top": [the first NETOP_BLOCKED_IN_RECORD]} */
static struct json_object *
netop_blocked_top(struct netop *no, const struct nft_blocked *v, size_t n)
{
	struct json_object *top = json_object_new_object();
	struct json_object *list = json_object_new_array();

	for (size_t i = 0; i < n && i < NETOP_BLOCKED_IN_RECORD; i++)
		json_object_array_add(list, netop_blocked_json(no, &v[i]));
	json_object_object_add(top, "destinations", json_object_new_int64((int64_t)n));
	json_object_object_add(top, "top", list);
	return top;
}

/*
 * NetworkBlocked events for c: one per rejected TCP/UDP destination (from
 * the blocked sets, most packets first), and one for what no element holds
 * (other protocols, or destinations past a full set). The top ones go into
 * the operation record with the final counts (netop_end), so `gensee run`
 * can name them at its end.
 */
static void
netop_record_blocked(struct netop *no, const struct nft_counters *c)
{
	struct nft_blocked *v = NULL;
	size_t n = 0;
	uint64_t pk = 0, by = 0;
	/* On failure the totals below still say how much was rejected. */
	netop_blocked_sorted(no, &v, &n);
	for (size_t i = 0; i < n; i++) {
		struct json_object *b = netop_blocked_json(no, &v[i]);
		/* Monitor mode let these through: evidence of a policy, not of a block. */
		int would = strcmp(netop_blocked_reason(no, &v[i]), "monitor_would_block") == 0;
		if (!would) {
			pk += v[i].nb_packets;
			by += v[i].nb_bytes;
		}
		json_object_object_add(b, "kind", json_object_new_string(would ?
		    "NetworkWouldBlock" : "NetworkBlocked"));
		json_object_object_add(b, "generation", json_object_new_int64((int64_t)no->no_generation));
		netop_append(no, "effects.jsonl", b);
	}
	/* Counters read one after the other may disagree by a packet or two. */
	if (c->nc_blocked_packets > pk) {
		struct json_object *b = json_object_new_object();
		json_object_object_add(b, "kind", json_object_new_string("NetworkBlocked"));
		json_object_object_add(b, "destination", json_object_new_string("untracked"));
		json_object_object_add(b, "packets", json_object_new_int64((int64_t)(c->nc_blocked_packets - pk)));
		json_object_object_add(b, "bytes", json_object_new_int64(
		    c->nc_blocked_bytes > by ? (int64_t)(c->nc_blocked_bytes - by) : 0));
		json_object_object_add(b, "reason", json_object_new_string(n >= NFT_BLOCKED_MAX ?
		    "not_tcp_udp_or_past_full_set" : "not_tcp_udp"));
		json_object_object_add(b, "generation", json_object_new_int64((int64_t)no->no_generation));
		netop_append(no, "effects.jsonl", b);
	}
	free(v);
}

struct json_object *
netop_summary(struct netop *no)
{
	struct json_object *o = json_object_new_object();
	struct nft_counters c;
	char *cause = NULL;

	json_object_object_add(o, "operation_id", json_object_new_string(no->no_op->op_id));
	json_object_object_add(o, "table", json_object_new_string(no->no_table));
	json_object_object_add(o, "generation", json_object_new_int64((int64_t)no->no_generation));
	json_object_object_add(o, "envelope", netop_envelope_json(no));
	json_object_object_add(o, "leases", netop_leases_json(no));
	json_object_object_add(o, "policy", json_object_get(no->no_spec.ns_policy_json));
	json_object_object_add(o, "warnings", json_object_get(no->no_spec.ns_warnings));
	if (no->no_spec.ns_proxy != NULL)
		json_object_object_add(o, "mediator_leases", medlease_summary(no));
	struct json_object *txs = txn_summary(no);
	if (txs != NULL)
		json_object_object_add(o, "http_transaction", txs);
	if (!no->no_table_gone && no->no_bd->bd_nft != NULL &&
	    nft_counters_read(no->no_bd->bd_nft, no->no_table, &c, &cause) == 0) {
		struct json_object *k = json_object_new_object();
		json_object_object_add(k, "allowed_packets", json_object_new_int64((int64_t)c.nc_allowed_packets));
		json_object_object_add(k, "allowed_bytes", json_object_new_int64((int64_t)c.nc_allowed_bytes));
		json_object_object_add(k, "blocked_packets", json_object_new_int64((int64_t)c.nc_blocked_packets));
		json_object_object_add(k, "blocked_bytes", json_object_new_int64((int64_t)c.nc_blocked_bytes));
		struct nft_blocked *v = NULL;
		size_t n = 0;
		netop_blocked_sorted(no, &v, &n);
		json_object_object_add(k, "blocked_destinations", netop_blocked_top(no, v, n));
		free(v);
		json_object_object_add(o, "counters", k);
	} else {
		json_object_object_add(o, "counters", NULL);
		free(cause);
	}
	struct json_object *rh = json_object_new_object();
	json_object_object_add(rh, "network_entries_skipped",
	    json_object_new_int((int)json_object_array_length(no->no_bd->bd_recovery)));
	json_object_object_add(rh, "entries", json_object_get(no->no_bd->bd_recovery));
	json_object_object_add(o, "operation_recovery_health", rh);
	return o;
}

/* The network boundary as the record's mediation_boundaries lists it. */
static struct json_object *
netop_boundary_json(struct netop *no, const char *state)
{
	struct json_object *b = json_object_new_object();
	json_object_object_add(b, "kind", json_object_new_string("network"));
	json_object_object_add(b, "mechanism", json_object_new_string("nftables"));
	json_object_object_add(b, "table", json_object_new_string(no->no_table));
	json_object_object_add(b, "mode", json_object_new_string(
	    netop_mode_name(no->no_spec.ns_mode)));
	json_object_object_add(b, "generation", json_object_new_int64((int64_t)no->no_generation));
	json_object_object_add(b, "state", json_object_new_string(state));
	return b;
}

/*
 * What the record should show of the network boundary now: count deltas
 * since the last write, the blocked destinations when more were rejected,
 * the boundary entry when its generation or state changed. With c NULL the
 * counters are read here.
 */
static void
netop_live_from(struct netop *no, const struct nft_counters *c, const char *state, int want_top,
    struct live_update *u)
{
	struct nft_counters rd;
	char *cause = NULL;

	if (c == NULL && !no->no_table_gone && no->no_bd->bd_nft != NULL) {
		if (nft_counters_read(no->no_bd->bd_nft, no->no_table, &rd, &cause) == 0) {
			c = &rd;
		} else {
			log_debug("%s: counters: %s", no->no_op->op_id, cause);
			free(cause);
		}
	}
	if (c != NULL) {
		uint64_t k[4] = { c->nc_allowed_packets, c->nc_allowed_bytes,
			c->nc_blocked_packets, c->nc_blocked_bytes };
		int64_t d[4];
		for (int i = 0; i < 4; i++) {
			if (no->no_cnt_restored && k[i] < no->no_cnt_rec[i])
				no->no_cnt_base[i] = no->no_cnt_rec[i]; /* a new table after a restart */
			else if (k[i] < no->no_cnt_last[i])
				no->no_cnt_base[i] += no->no_cnt_last[i]; /* counters reset under us */
			no->no_cnt_last[i] = k[i];
			u->lu_cnt_target[i] = no->no_cnt_base[i] + k[i];
			d[i] = u->lu_cnt_target[i] > no->no_cnt_rec[i] ?
			    (int64_t)(u->lu_cnt_target[i] - no->no_cnt_rec[i]) : 0;
			if (u->lu_cnt_target[i] < no->no_cnt_rec[i])
				u->lu_cnt_target[i] = no->no_cnt_rec[i];
		}
		no->no_cnt_restored = 0;
		u->lu_counts.oc_allowed_packets = d[0];
		u->lu_counts.oc_allowed_bytes = d[1];
		u->lu_counts.oc_blocked_packets = d[2];
		u->lu_counts.oc_blocked_bytes = d[3];
		/* Listing the rejected destinations dumps the sets: only when there are more. */
		if (want_top || (c->nc_blocked_packets > 0 &&
		    c->nc_blocked_packets != no->no_live_blocked_pk)) {
			struct nft_blocked *v = NULL;
			size_t n = 0;
			netop_blocked_sorted(no, &v, &n);
			u->lu_blocked = netop_blocked_top(no, v, n);
			free(v);
		}
	}
	if (strcmp(state, "active") != 0 || no->no_live_generation != no->no_generation + 1)
		u->lu_boundaries[u->lu_nb++] = netop_boundary_json(no, state);
}

void
netop_live(struct netop *no, int final, struct live_update *u)
{
	netop_live_from(no, NULL, final ? "ended" : "active", 0, u);
}

void
netop_live_written(struct netop *no, const struct live_update *u)
{
	for (int i = 0; i < 4; i++)
		no->no_cnt_rec[i] = u->lu_cnt_target[i] > no->no_cnt_rec[i] ?
		    u->lu_cnt_target[i] : no->no_cnt_rec[i];
	if (u->lu_blocked != NULL)
		no->no_live_blocked_pk = no->no_cnt_last[2];
	/* +1: zero means "not written yet" */
	no->no_live_generation = no->no_generation + 1;
}

/*
 * At the end of the operation (its tree is gone): read the counters, record
 * nonzero rejects as NetworkBlocked events, delete the table, and write the
 * final counts and the boundary's end to the record in one update.
 */
void
netop_end(struct netop *no)
{
	struct live_update u;

	memset(&u, 0, sizeof(u));
	netop_end_into(no, &u);
	if (live_write(no->no_op, &u) == 0)
		netop_live_written(no, &u);
	live_update_clear(&u);
}

/*
 * The end in two steps, so that operation.end can be answered between
 * them: netop_end_counts reads what the reply reports (the final counts,
 * the blocked list) while the table exists; netop_end_release writes the
 * evidence that needs no answer and deletes the table. The tree is gone
 * before either runs, so nothing can use the table in between: deleting
 * it is housekeeping, not enforcement.
 */
void
netop_end_counts(struct netop *no, struct live_update *out)
{
	struct netop_lease *l;
	char *cause = NULL;
	int want_top = 0;

	memset(out, 0, sizeof(*out));
	if (no->no_table_gone || no->no_end_read)
		return;
	no->no_end_read = 1;
	txn_operation_end(no);
	medlease_free_all(no);
	while ((l = TAILQ_FIRST(&no->no_leases)) != NULL) {
		TAILQ_REMOVE(&no->no_leases, l, nl_entry);
		netop_lease_free(l);
	}
	if (no->no_bd->bd_nft != NULL &&
	    nft_counters_read(no->no_bd->bd_nft, no->no_table, &no->no_end_cnt, &cause) == 0) {
		no->no_end_have = 1;
		want_top = no->no_end_cnt.nc_blocked_packets > 0 ||
		    no->no_spec.ns_mode == NFT_MODE_DENYLIST;
	} else {
		log_warnx("%s: counters: %s", no->no_op->op_id, cause ? cause : "no nftables");
		free(cause);
	}
	/*
	 * The final counts and blocked list (whatever the live one showed),
	 * gathered while the table and its sets still exist.
	 */
	netop_live_from(no, no->no_end_have ? &no->no_end_cnt : NULL, "ended", want_top, out);
}

/*
 * Returns 0 once the table is gone; -1 if it was left (the record should
 * then say so: netop_end_into does, and operation.c's two-step end).
 */
int
netop_end_release(struct netop *no)
{
	const struct nft_counters *c = &no->no_end_cnt;
	char *cause = NULL;

	if (no->no_table_gone)
		return 0;
	if (no->no_end_have) {
		struct json_object *k = json_object_new_object();
		json_object_object_add(k, "generation", json_object_new_int64((int64_t)no->no_generation));
		json_object_object_add(k, "allowed_packets", json_object_new_int64((int64_t)c->nc_allowed_packets));
		json_object_object_add(k, "allowed_bytes", json_object_new_int64((int64_t)c->nc_allowed_bytes));
		json_object_object_add(k, "blocked_packets", json_object_new_int64((int64_t)c->nc_blocked_packets));
		json_object_object_add(k, "blocked_bytes", json_object_new_int64((int64_t)c->nc_blocked_bytes));
		json_object_object_add(k, "final", json_object_new_boolean(1));
		netop_append(no, "counters.jsonl", k);
		if (c->nc_blocked_packets > 0 || no->no_spec.ns_mode == NFT_MODE_DENYLIST)
			netop_record_blocked(no, c);
	}
	if (no->no_bd->bd_nft != NULL &&
	    nft_table_delete(no->no_bd->bd_nft, no->no_table, &cause) != 0) {
		log_warnx("%s: delete table %s: %s", no->no_op->op_id, no->no_table, cause);
		free(cause);
	} else {
		no->no_table_gone = 1;
	}
	control_close(&no->no_sup);
	if (no->no_dirfd >= 0)
		unlinkat(no->no_dirfd, "supervisor.sock", 0);
	netop_write_record(no, no->no_table_gone ? "ended" : "ended_table_left");
	return no->no_table_gone ? 0 : -1;
}

/* The boundary entry that says the table outlived the operation. */
struct json_object *
netop_table_left_json(struct netop *no)
{
	return netop_boundary_json(no, "ended_table_left");
}

void
netop_end_into(struct netop *no, struct live_update *out)
{
	netop_end_counts(no, out);
	if (netop_end_release(no) != 0 && out->lu_nb > 0)
		json_object_object_add(out->lu_boundaries[out->lu_nb - 1], "state",
		    json_object_new_string("ended_table_left"));
}

void
netop_free(struct netop *no)
{
	struct netop_lease *l;
	if (no == NULL)
		return;
	while ((l = TAILQ_FIRST(&no->no_leases)) != NULL) {
		TAILQ_REMOVE(&no->no_leases, l, nl_entry);
		netop_lease_free(l);
	}
	control_close(&no->no_sup);
	txn_free(no);
	medlease_free_all(no);
	if (no->no_dirfd >= 0)
		close(no->no_dirfd);
	netop_spec_free(&no->no_spec);
	free(no);
}

/*
 * After a restart: rebuild the network state of an adopted operation from
 * its record, drop the leases that expired while no one watched, and
 * install the result as a new generation.
 */
struct netop *
netop_restore(struct operation *op, char **cause)
{
	struct boundaryd *bd = op->op_bd;
	struct json_object *rec = NULL, *env, *leases;
	struct netop *no;
	int64_t now = util_now_ms();

	int dfd = safefs_opendir(bd->bd_netops_fd, op->op_id);
	if (dfd < 0) {
		if (errno == ENOENT)
			return NULL; /* no network boundary for this operation */
		util_cause(cause, "network-operations/%s: %s", op->op_id, strerror(errno));
		return NULL;
	}
	if (record_read(dfd, NETOP_RECORD, op->op_id, netop_record_validate, &rec, cause) != 0) {
		close(dfd);
		return NULL;
	}
	if ((no = netop_alloc(op)) == NULL) {
		close(dfd);
		json_object_put(rec);
		util_cause(cause, "out of memory");
		return NULL;
	}
	no->no_dirfd = dfd;
	netop_spec_init(&no->no_spec);
	no->no_generation = (uint64_t)schema_int(rec, "generation", 0);
	/* What the record counted before the restart: the live counts continue from it. */
	struct json_object *orec = NULL;
	char *ocause = NULL;
	if (oprecord_read(op->op_dirfd, op->op_id, &orec, &ocause) == 0) {
		struct json_object *net = schema_child(schema_child(orec, "counts"), "network");
		static const char *keys[4] = { "allowed_packets", "allowed_bytes", "blocked_packets",
			"blocked_bytes" };
		for (int i = 0; i < 4; i++) {
			int64_t v = schema_int(net, keys[i], 0);
			no->no_cnt_rec[i] = v > 0 ? (uint64_t)v : 0;
		}
		no->no_cnt_restored = 1;
		json_object_put(orec);
	} else {
		free(ocause);
	}
	no->no_table_installed = 1; /* try a refill first; a full generation if it is gone */
	env = schema_child(rec, "envelope");
	struct json_object *subj = schema_child(rec, "subject");
	const char *mode = schema_string(env, "mode");
	no->no_spec.ns_mode = mode && strcmp(mode, "monitor") == 0 ? NFT_MODE_DENYLIST :
	    NFT_MODE_ALLOWLIST;
	if (subj != NULL && schema_string(subj, "kind") != NULL &&
	    strcmp(schema_string(subj, "kind"), "source_address") == 0) {
		no->no_spec.ns_subject = NFT_SUBJECT_SOURCE_ADDRESS;
		if (netpolicy_parse_addr(schema_string(subj, "address") ?
			schema_string(subj, "address") : "", &no->no_spec.ns_src_family,
			no->no_spec.ns_src_addr) != 0) {
			util_cause(cause, "network record: bad source address");
			goto fail;
		}
	} else {
		no->no_spec.ns_subject = NFT_SUBJECT_CGROUP;
	}
	if (netpolicy_parse_grant_array(schema_child(env, "grants"), &no->no_spec.ns_allow, cause) != 0 ||
	    netpolicy_parse_grant_array(schema_child(env, "deny"), &no->no_spec.ns_deny, cause) != 0)
		goto fail;
	if (schema_child(rec, "policy") != NULL) {
		no->no_spec.ns_policy_json = json_object_get(schema_child(rec, "policy"));
		if (netpolicy_parse_policy(no->no_spec.ns_policy_json, &no->no_spec.ns_policy, cause) != 0)
			goto fail;
	}
	no->no_spec.ns_proxy = json_object_get(schema_child(rec, "proxy"));
	no->no_spec.ns_dns = json_object_get(schema_child(rec, "dns"));
	if (schema_child(rec, "warnings") != NULL) {
		json_object_put(no->no_spec.ns_warnings);
		no->no_spec.ns_warnings = json_object_get(schema_child(rec, "warnings"));
	}
	if (schema_string(rec, "config_path") != NULL)
		util_strlcpy(no->no_spec.ns_config_path, schema_string(rec, "config_path"),
		    sizeof(no->no_spec.ns_config_path));
	leases = schema_child(rec, "leases");
	int expired = 0;
	for (size_t i = 0; leases != NULL && i < json_object_array_length(leases); i++) {
		struct json_object *lj = json_object_array_get_idx(leases, i);
		struct np_grants one = { 0 };
		struct json_object *wrap = json_object_new_array();
		int64_t exp = schema_int(lj, "expires_unix_ms", 0);
		if (exp <= now) {
			expired++;
			json_object_put(wrap);
			continue;
		}
		/* The lease is a grant object with extra keys; reparse its tuple. */
		struct json_object *g = json_object_new_object();
		json_object_object_add(g, "destination", json_object_get(schema_child(lj, "destination")));
		json_object_object_add(g, "protocol", json_object_get(schema_child(lj, "protocol")));
		json_object_object_add(g, "ports", json_object_get(schema_child(lj, "ports")));
		json_object_array_add(wrap, g);
		if (netpolicy_parse_grant_array(wrap, &one, cause) != 0 || one.g_n != 1) {
			np_grants_free(&one);
			json_object_put(wrap);
			goto fail;
		}
		struct netop_lease *l = calloc(1, sizeof(*l));
		if (l == NULL) {
			np_grants_free(&one);
			json_object_put(wrap);
			goto fail;
		}
		l->nl_no = no;
		l->nl_grant = one.g_v[0];
		l->nl_expires_ms = exp;
		util_strlcpy(l->nl_id, schema_string(lj, "lease_id") ? schema_string(lj, "lease_id") :
		    "lease_unknown", sizeof(l->nl_id));
		util_strlcpy(l->nl_issued_at, schema_string(lj, "issued_at") ?
		    schema_string(lj, "issued_at") : "", sizeof(l->nl_issued_at));
		TAILQ_INSERT_TAIL(&no->no_leases, l, nl_entry);
		np_grants_free(&one);
		json_object_put(wrap);
	}
	json_object_put(rec);
	rec = NULL;
	/* One new generation from the record: expired leases are gone in it. */
	if (netop_commit(no, cause) != 0)
		goto fail;
	struct netop_lease *l;
	TAILQ_FOREACH(l, &no->no_leases, nl_entry)
		if (netop_arm_lease(no, l) != 0)
			l->nl_expires_ms = 0;
	op->op_net = no;
	netop_publish(no);
	if (expired > 0) {
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "kind", json_object_new_string("lease_expired"));
		json_object_object_add(o, "reason", json_object_new_string("expired_while_supervisor_down"));
		json_object_object_add(o, "count", json_object_new_int(expired));
		json_object_object_add(o, "generation", json_object_new_int64((int64_t)no->no_generation));
		netop_append(no, "effects.jsonl", o);
	}
	netop_listen(no);
	txn_restore(no);
	log_info("%s: network boundary restored at generation %llu (%d expired lease(s) removed)",
	    op->op_id, (unsigned long long)no->no_generation, expired);
	return no;
fail:
	json_object_put(rec);
	netop_free(no);
	return NULL;
}

/*
 * Reconcile kernel tables with records: tables of ended or unknown-but-ours
 * operations are deleted; a table this instance cannot tie to a record is
 * left in place (it only denies) and reported in recovery health.
 */
/*
 * The tree left in an operation's cgroup when no live operation holds its
 * table: killed (waiting briefly for it to drain). Returns 1 when the
 * cgroup is empty or gone afterwards, 0 when something still runs.
 */
static int
netop_recover_drain(struct boundaryd *bd, const char *id, int *killed)
{
	struct cgroup cg;
	char rel[256];
	int populated;

	*killed = 0;
	snprintf(rel, sizeof(rel), "%s/%s", CGROUP_BASE, id);
	if (!bd->bd_have_cgroup || cgroup_open(bd->bd_cgroup_mount, rel, &cg, NULL) != 0)
		return errno == ENOENT; /* no cgroup, no tree */
	populated = cgroup_populated(&cg);
	if (populated != 0) {
		*killed = 1;
		cgroup_kill(&cg, NULL);
		for (int i = 0; i < 200 && (populated = cgroup_populated(&cg)) != 0; i++)
			usleep(10000);
	}
	cgroup_close(&cg);
	return populated == 0;
}

/*
 * Tables no live operation holds. Record loss never removes enforcement:
 * a table goes only when its record is valid and terminal AND its cgroup
 * is empty. A tree still running under a terminal record is killed first;
 * under a record that cannot be read or validated (corruption, a future
 * schema) the tree is killed and the table kept, since nothing can
 * supervise it. recovery_health says which ("enforcement").
 */
void
netop_recover_tables(struct boundaryd *bd)
{
	struct nft_table_info *t = NULL;
	size_t n = 0;
	char *cause = NULL;

	if (bd->bd_nft == NULL)
		return;
	if (nft_tables_list(bd->bd_nft, &t, &n, &cause) != 0) {
		log_warnx("recovery: cannot list nftables tables: %s", cause);
		free(cause);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct operation *op = ids_valid_operation(t[i].nti_owner) ?
		    operation_find(bd, t[i].nti_owner) : NULL;
		char expect[NFT_TABLE_NAME_MAX];

		if (op != NULL && op->op_net != NULL && strcmp(op->op_net->no_table, t[i].nti_name) == 0)
			continue; /* live and restored */
		if (ids_valid_operation(t[i].nti_owner)) {
			netop_table_name(bd, t[i].nti_owner, expect);
			/*
			 * Named with another key: another instance's (its own
			 * state root, e.g. its prepared cell), not ours to judge.
			 */
			if (strcmp(expect, t[i].nti_name) != 0) {
				log_debug("recovery: table %s belongs to another instance",
				    t[i].nti_name);
				continue;
			}
			int dfd = safefs_opendir(bd->bd_ops_fd, t[i].nti_owner);
			if (dfd >= 0 && op == NULL) {
				struct json_object *rec = NULL;
				int valid = oprecord_read(dfd, t[i].nti_owner, &rec, NULL) == 0;
				int terminal = valid && oprecord_state_terminal(schema_string(
				    schema_child(rec, "lifecycle"), "state"));
				int killed, empty;
				json_object_put(rec);
				close(dfd);
				empty = netop_recover_drain(bd, t[i].nti_owner, &killed);
				if (!terminal || !empty) {
					recover_note(bd, t[i].nti_owner, valid ?
					    "unsupervised_operation" : "invalid_record", t[i].nti_name,
					    killed && empty ? "tree_killed_table_kept" : killed ?
					    "tree_kill_failed_table_kept" : "table_kept");
					continue;
				}
				if (nft_table_delete(bd->bd_nft, t[i].nti_name, &cause) != 0) {
					log_warnx("recovery: delete %s: %s", t[i].nti_name, cause);
					free(cause);
					cause = NULL;
				} else if (killed) {
					recover_note(bd, t[i].nti_owner, "leftover_tree",
					    t[i].nti_name, "tree_killed_table_deleted");
				} else {
					log_info("recovery: deleted table %s of ended operation %s",
					    t[i].nti_name, t[i].nti_owner);
				}
				continue;
			}
			if (dfd >= 0)
				close(dfd);
		}
		struct json_object *e = json_object_new_object();
		char ts[40];
		util_now_rfc3339(ts, sizeof(ts));
		json_object_object_add(e, "time", json_object_new_string(ts));
		json_object_object_add(e, "operation_id", json_object_new_string(t[i].nti_owner));
		json_object_object_add(e, "reason", json_object_new_string("unvalidated_nft_table"));
		json_object_object_add(e, "detail", json_object_new_string(t[i].nti_name));
		json_object_array_add(bd->bd_recovery, e);
	}
	free(t);
}

/* Find the caller-visible network operation named by params or the socket. */
struct netop *
netop_lookup(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r)
{
	const char *id = schema_string(params, "operation_id");
	struct operation *op;

	if (scope != NULL) {
		if (id != NULL && strcmp(id, scope) != 0) {
			reply_error(r, PE_NOT_AUTHORIZED, "this caller may only name operation %s",
			    scope);
			return NULL;
		}
		id = scope;
	}
	if (id == NULL) {
		reply_error(r, PE_INVALID_PARAMS, "operation_id: required field missing");
		return NULL;
	}
	if (!ids_valid_operation(id)) {
		reply_error(r, PE_INVALID_PARAMS, "operation_id: malformed id");
		return NULL;
	}
	op = operation_find(bd, id);
	if (op == NULL || !operation_visible(op, p) || op->op_net == NULL ||
	    op->op_net->no_table_gone) {
		reply_error(r, PE_NOT_FOUND, "no active network operation %s", id);
		return NULL;
	}
	return op->op_net;
}

void
network_inspect(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r)
{
	struct netop *no = netop_lookup(bd, p, scope, params, r);
	if (no != NULL)
		r->or_result = netop_summary(no);
}

static const struct schema_field event_fields[] = {
	{ "schema_version", SCHEMA_INT, 0, 1, 1, 0 },
	{ "pid", SCHEMA_INT, 0, 1, 4194304, 0 },
	{ "start_time_ticks", SCHEMA_INT, 0, 0, INT64_MAX, 0 },
	{ "peer_address", SCHEMA_STRING, 0, 2, 64, 0 },
	{ "destination", SCHEMA_STRING, SCHEMA_REQUIRED, 2, 64, 0 },
	{ "protocol", SCHEMA_STRING, SCHEMA_REQUIRED, 3, 3, 0 },
	{ "port", SCHEMA_INT, SCHEMA_REQUIRED, 0, 65535, 0 },
	{ "direction", SCHEMA_STRING, 0, 1, 16, 0 },
	{ "http", SCHEMA_OBJECT, 0, 0, 0, 0 },
	{ "requested_ttl_seconds", SCHEMA_INT, 0, 1, NETPOLICY_MAX_LEASE_TTL, 0 },
	{ "source", SCHEMA_STRING, 0, 1, 32, 0 },
};

static const struct schema_field fault_fields[] = {
	{ "schema_version", SCHEMA_INT, 0, 1, 1, 0 },
	{ "operation_id", SCHEMA_STRING, 0, 1, 72, 0 },
	{ "subject", SCHEMA_OBJECT, SCHEMA_REQUIRED, 0, 0, 0 },
	{ "capability", SCHEMA_OBJECT, SCHEMA_REQUIRED, 0, 0, 0 },
	{ "requested_ttl_seconds", SCHEMA_INT, 0, 1, NETPOLICY_MAX_LEASE_TTL, 0 },
	{ "source", SCHEMA_STRING, 0, 1, 32, 0 },
};

static const struct schema_field subject_fields[] = {
	{ "nft_table", SCHEMA_STRING, 0, 1, 64, 0 },
	{ "pid", SCHEMA_INT, 0, 1, 4194304, 0 },
	{ "start_time_ticks", SCHEMA_INT, 0, 0, INT64_MAX, 0 },
	{ "peer_address", SCHEMA_STRING, 0, 2, 64, 0 },
};

static const struct schema_field capability_fields[] = {
	{ "kind", SCHEMA_STRING, SCHEMA_REQUIRED, 1, 32, 0 },
	{ "destination", SCHEMA_STRING, SCHEMA_REQUIRED, 2, 64, 0 },
	{ "protocol", SCHEMA_STRING, SCHEMA_REQUIRED, 3, 3, 0 },
	{ "port", SCHEMA_INT, SCHEMA_REQUIRED, 0, 65535, 0 },
	{ "http", SCHEMA_OBJECT, 0, 0, 0, 0 },
};

/*
 * Is the subject (a pid + start time, or a peer address) part of this
 * operation? A pid must be alive with that start time and inside the
 * operation's cgroup subtree; an address must be the operation's own.
 */
static const char *
netop_bind_subject(struct netop *no, struct json_object *subj, int trusted)
{
	struct operation *op = no->no_op;

	/*
	 * A trace of a packet this operation's own table rejected proves the
	 * packet was the operation's: the table name is a keyed hash nobody
	 * else can produce. Only a root peer (gensee-sensord) may claim it.
	 */
	if (schema_string(subj, "nft_table") != NULL)
		return trusted && strcmp(schema_string(subj, "nft_table"), no->no_table) == 0 ?
		    NULL : "unknown_peer";
	if (schema_child(subj, "pid") != NULL) {
		char cg[256];
		size_t rl = strlen(op->op_cg.cg_rel);
		pid_t pid = (pid_t)schema_int(subj, "pid", 0);
		if (schema_child(subj, "start_time_ticks") == NULL)
			return "unknown_peer";
		if (no->no_spec.ns_subject != NFT_SUBJECT_CGROUP || !op->op_cg_valid)
			return "unknown_peer";
		if (proc_identity_matches(pid, (uint64_t)schema_int(subj, "start_time_ticks", -1)) != 0)
			return "unknown_peer";
		if (cgroup_of_pid(pid, cg, sizeof(cg)) != 0 || strncmp(cg, op->op_cg.cg_rel, rl) != 0 ||
		    (cg[rl] != '\0' && cg[rl] != '/'))
			return "wrong_operation";
		return NULL;
	}
	if (schema_string(subj, "peer_address") != NULL) {
		int fam;
		uint8_t a[16];
		if (no->no_spec.ns_subject != NFT_SUBJECT_SOURCE_ADDRESS ||
		    netpolicy_parse_addr(schema_string(subj, "peer_address"), &fam, a) != 0 ||
		    fam != no->no_spec.ns_src_family ||
		    memcmp(a, no->no_spec.ns_src_addr, fam == AF_INET ? 4 : 16) != 0)
			return "unknown_peer";
		return NULL;
	}
	return "unknown_peer";
}

/*
 * Is the caller gensee-sensord's side: root, on boundary.sock, outside
 * every operation? Only it may present kernel evidence (an nft_table
 * subject, the nft_trace source) and it is not rate limited. Root on
 * client.sock or inside an operation is not trusted with either.
 */
static int
netop_sensor_peer(const struct peer *p)
{
	return p->pr_uid == 0 && p->pr_socket == PS_BOUNDARY && !p->pr_in_op;
}

/*
 * Checks common to network.event and fault.submit once the operation is
 * known. Threats: a caller labelling its own report as kernel evidence
 * (source nft_trace), and a flood of reports (rate_limited).
 */
static int
netop_admit_report(struct netop *no, const struct peer *p, const char *source,
    struct op_reply *r)
{
	if (netop_sensor_peer(p))
		return 0;
	if (source != NULL && strcmp(source, "nft_trace") == 0) {
		reply_error(r, PE_NOT_AUTHORIZED, "source nft_trace is reserved for gensee-sensord");
		return -1;
	}
	if (operation_take_token(no->no_op) != 0) {
		reply_error(r, PE_RATE_LIMITED, "more than %d reports per second for operation %s",
		    OP_EVENT_RATE, no->no_op->op_id);
		return -1;
	}
	return 0;
}

/*
 * The core: one boundary event, exactly one disposition, recorded.
 * Returns the reply object.
 */
static struct json_object *
netop_decide(struct netop *no, struct json_object *subj, struct json_object *cap,
    int64_t requested_ttl, const char *source, const char *kind, int trusted)
{
	struct np_event ev = { 0 };
	struct np_decision d;
	struct np_grants leases;
	struct json_object *res = json_object_new_object();
	struct netop_lease *lease = NULL;
	const char *bind_err, *dst = schema_string(cap, "destination");
	char fault_id[ID_MAX_LEN], *cause = NULL;
	int proto = netpolicy_parse_proto(schema_string(cap, "protocol"));

	ids_new(strcmp(kind, "fault") == 0 ? "fault_" : "event_", fault_id, sizeof(fault_id));
	memset(&d, 0, sizeof(d));
	d.nd_disposition = NP_DENY;
	bind_err = netop_bind_subject(no, subj, trusted);
	if (netpolicy_parse_addr(dst, &ev.ne_family, ev.ne_addr) != 0) {
		d.nd_reason = "unbounded_destination"; /* not one exact address */
	} else if (proto < 0) {
		d.nd_reason = "unsupported_protocol";
	} else if (bind_err != NULL) {
		d.nd_reason = bind_err;
	}
	if (d.nd_reason == NULL) {
		ev.ne_proto = (uint8_t)proto;
		ev.ne_port = (uint16_t)schema_int(cap, "port", 0);
		ev.ne_http = schema_child(cap, "http") != NULL;
		netop_leases_grants(no, &leases);
		struct np_boundary b = {
			.nb_monitor = no->no_spec.ns_mode == NFT_MODE_DENYLIST,
			.nb_allow = &no->no_spec.ns_allow,
			.nb_deny = &no->no_spec.ns_deny,
			.nb_leases = &leases,
		};
		netpolicy_decide(&no->no_spec.ns_policy, &b, &ev, requested_ttl, &d);
		np_grants_free(&leases);
	}
	if (d.nd_disposition == NP_LEASE) {
		struct netop_lease *l;
		size_t nleases = 0;
		TAILQ_FOREACH(l, &no->no_leases, nl_entry)
			nleases++;
		/* Threat: kernel set elements and timers without bound. */
		if (nleases >= NETOP_MAX_LEASES) {
			d.nd_disposition = NP_DENY;
			d.nd_reason = "lease_limit";
		}
	}
	if (d.nd_disposition == NP_LEASE) {
		lease = netop_grant_lease(no, &ev, d.nd_ttl, &cause);
		if (lease == NULL) {
			log_warnx("%s: lease install failed: %s", no->no_op->op_id, cause);
			free(cause);
			d.nd_disposition = NP_DENY;
			d.nd_reason = PE_ENFORCEMENT;
		}
	}
	const char *effect = d.nd_disposition == NP_ALLOW ? "allow" :
	    d.nd_disposition == NP_LEASE ? "lease" : d.nd_disposition == NP_MEDIATOR ? "broker" :
	    "deny";
	netop_effect(no, effect, ev.ne_family ? &ev : NULL, d.nd_reason, lease ? lease->nl_id : NULL,
	    fault_id);

	json_object_object_add(res, strcmp(kind, "fault") == 0 ? "fault_id" : "event_id",
	    json_object_new_string(fault_id));
	json_object_object_add(res, "operation_id", json_object_new_string(no->no_op->op_id));
	json_object_object_add(res, "disposition",
	    json_object_new_string(netpolicy_disposition_name(d.nd_disposition)));
	json_object_object_add(res, "reason", json_object_new_string(d.nd_reason));
	json_object_object_add(res, "lease", lease ? netop_lease_json(lease) : NULL);
	/* Retry permission: only when the exact tuple is enforceably allowed now. */
	json_object_object_add(res, "retry", json_object_new_boolean(
	    d.nd_disposition == NP_ALLOW || lease != NULL));
	json_object_object_add(res, "generation", json_object_new_int64((int64_t)no->no_generation));

	struct json_object *f = json_object_new_object();
	json_object_object_add(f, "kind", json_object_new_string(kind));
	json_object_object_add(f, "fault_id", json_object_new_string(fault_id));
	json_object_object_add(f, "source", json_object_new_string(source ? source : "explicit"));
	json_object_object_add(f, "subject", json_object_get(subj));
	json_object_object_add(f, "capability", json_object_get(cap));
	json_object_object_add(f, "disposition", json_object_get(schema_child(res, "disposition")));
	json_object_object_add(f, "reason", json_object_get(schema_child(res, "reason")));
	json_object_object_add(f, "lease_id", lease ? json_object_new_string(lease->nl_id) : NULL);
	json_object_object_add(f, "retry", json_object_get(schema_child(res, "retry")));
	netop_append(no, "faults.jsonl", f);
	return res;
}

int
netop_tuple_allowed(struct netop *no, int family, const uint8_t addr[16], uint8_t proto,
    uint16_t port, const char **reason)
{
	struct np_event ev = { 0 };
	struct np_decision d;
	struct np_grants leases;

	memset(&d, 0, sizeof(d));
	ev.ne_family = family;
	memcpy(ev.ne_addr, addr, 16);
	ev.ne_proto = proto;
	ev.ne_port = port;
	netop_leases_grants(no, &leases);
	struct np_boundary b = {
		/* Monitor mode lets everything pass in the kernel; the mediator never does. */
		.nb_monitor = 0,
		.nb_allow = &no->no_spec.ns_allow,
		.nb_deny = &no->no_spec.ns_deny,
		.nb_leases = &leases,
	};
	/* A requested TTL of 1 s: a lease disposition is not an allow here (no lease is made). */
	netpolicy_decide(&no->no_spec.ns_policy, &b, &ev, 1, &d);
	np_grants_free(&leases);
	*reason = d.nd_reason;
	return d.nd_disposition == NP_ALLOW;
}

static int
netop_validate(struct json_object *o, const struct schema_field *f, size_t n, const char *what,
    struct op_reply *r)
{
	struct schema_error err;
	if (schema_validate(o, f, n, &err) != 0) {
		reply_error(r, PE_INVALID_PARAMS, "%s.%s (%s)", what, err.se_message, err.se_code);
		return -1;
	}
	return 0;
}

void
network_event(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r)
{
	struct json_object *ev = schema_child(params, "event");
	if (netop_validate(ev, event_fields, nitems(event_fields), "event", r) != 0)
		return;
	struct netop *no = netop_lookup(bd, p, scope, params, r);
	if (no == NULL || netop_admit_report(no, p, schema_string(ev, "source"), r) != 0)
		return;
	struct json_object *subj = json_object_new_object(), *cap = json_object_new_object();
	static const char *const sk[] = { "pid", "start_time_ticks", "peer_address" };
	static const char *const ck[] = { "destination", "protocol", "port", "http" };
	for (size_t i = 0; i < nitems(sk); i++)
		if (schema_child(ev, sk[i]) != NULL)
			json_object_object_add(subj, sk[i], json_object_get(schema_child(ev, sk[i])));
	json_object_object_add(cap, "kind", json_object_new_string("network.connect"));
	for (size_t i = 0; i < nitems(ck); i++)
		if (schema_child(ev, ck[i]) != NULL)
			json_object_object_add(cap, ck[i], json_object_get(schema_child(ev, ck[i])));
	r->or_result = netop_decide(no, subj, cap, schema_int(ev, "requested_ttl_seconds", 0),
	    schema_string(ev, "source"), "event", netop_sensor_peer(p));
	json_object_put(subj);
	json_object_put(cap);
}

void
fault_submit(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r)
{
	struct json_object *f = schema_child(params, "fault");
	if (netop_validate(f, fault_fields, nitems(fault_fields), "fault", r) != 0 ||
	    netop_validate(schema_child(f, "subject"), subject_fields, nitems(subject_fields),
		"fault.subject", r) != 0 ||
	    netop_validate(schema_child(f, "capability"), capability_fields,
		nitems(capability_fields), "fault.capability", r) != 0)
		return;
	const char *kind = schema_string(schema_child(f, "capability"), "kind");
	if (strcmp(kind, "network.connect") != 0 && strcmp(kind, "network.send") != 0) {
		reply_error(r, PE_INVALID_PARAMS, "fault.capability.kind: unsupported capability %s",
		    kind);
		return;
	}
	/* The fault may name its operation too; it must agree with the request. */
	const char *fid = schema_string(f, "operation_id");
	const char *pid = schema_string(params, "operation_id");
	if (fid != NULL && ((pid != NULL && strcmp(fid, pid) != 0) ||
	    (scope != NULL && strcmp(fid, scope) != 0))) {
		r->or_result = json_object_new_object();
		json_object_object_add(r->or_result, "disposition", json_object_new_string("deny"));
		json_object_object_add(r->or_result, "reason", json_object_new_string("wrong_operation"));
		json_object_object_add(r->or_result, "retry", json_object_new_boolean(0));
		return;
	}
	struct json_object *lp = json_object_new_object();
	const char *use = pid ? pid : fid;
	if (use != NULL)
		json_object_object_add(lp, "operation_id", json_object_new_string(use));
	struct netop *no = netop_lookup(bd, p, scope, lp, r);
	json_object_put(lp);
	if (no == NULL) {
		if (r->or_code != NULL && strcmp(r->or_code, PE_NOT_FOUND) == 0) {
			/* A fault for an operation that is not (or no longer) ours: denied. */
			free(r->or_msg);
			r->or_msg = NULL;
			r->or_code = NULL;
			r->or_result = json_object_new_object();
			json_object_object_add(r->or_result, "disposition", json_object_new_string("deny"));
			json_object_object_add(r->or_result, "reason", json_object_new_string("wrong_operation"));
			json_object_object_add(r->or_result, "retry", json_object_new_boolean(0));
		}
		return;
	}
	if (netop_admit_report(no, p, schema_string(f, "source"), r) != 0)
		return;
	r->or_result = netop_decide(no, schema_child(f, "subject"), schema_child(f, "capability"),
	    schema_int(f, "requested_ttl_seconds", 0), schema_string(f, "source"), "fault",
	    netop_sensor_peer(p));
}

void
network_revoke(struct boundaryd *bd, const struct peer *p, const char *scope,
    struct json_object *params, struct op_reply *r)
{
	struct netop *no = netop_lookup(bd, p, scope, params, r);
	struct netop_lease *l;
	const char *lid = schema_string(params, "lease_id");

	if (no == NULL)
		return;
	TAILQ_FOREACH(l, &no->no_leases, nl_entry)
		if (strcmp(l->nl_id, lid) == 0)
			break;
	if (l == NULL) {
		reply_error(r, PE_NOT_FOUND, "no active lease %s", lid);
		return;
	}
	netop_remove_lease(no, l, "lease_revoked");
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "lease_id", json_object_new_string(lid));
	json_object_object_add(r->or_result, "revoked", json_object_new_boolean(1));
	json_object_object_add(r->or_result, "generation", json_object_new_int64((int64_t)no->no_generation));
}

/*
 * Re-assert the kernel state: install the current envelope and leases as a
 * new generation (after someone tampered with the table, say). Root only.
 */
void
network_reinstall(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	struct netop *no = netop_lookup(bd, p, NULL, params, r);
	char *cause = NULL;

	if (no == NULL)
		return;
	if (netop_commit(no, &cause) != 0) {
		reply_error(r, PE_ENFORCEMENT, "%s", cause);
		free(cause);
		return;
	}
	netop_publish(no);
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "generation", json_object_new_int64((int64_t)no->no_generation));
}

void
network_start(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	struct netop_spec s;
	struct np_config cfg;
	struct operation *op;
	char *cause = NULL;

	(void)p;
	if (netop_spec_from_file(schema_string(params, "config_path"), &s, &cause, &cfg) != 0) {
		reply_error(r, PE_INVALID_CONFIG, "%s", cause);
		free(cause);
		netop_spec_free(&s);
		return;
	}
	if (s.ns_subject != NFT_SUBJECT_SOURCE_ADDRESS) {
		netop_spec_free(&s);
		reply_error(r, PE_INVALID_CONFIG, "network.start needs a source_address config; "
		    "root_pid configs are given to `gensee run --sandbox linux --network-config`");
		return;
	}
	if ((op = operation_new_address(bd, cfg.nc_operation_id, &cause)) == NULL) {
		netop_spec_free(&s);
		reply_error(r, PE_CONFLICT, "%s", cause);
		free(cause);
		return;
	}
	if (netop_attach(op, &s, 0, &cause) == NULL) {
		netop_spec_free(&s);
		reply_error(r, PE_ENFORCEMENT, "%s", cause);
		free(cause);
		operation_finish(op, OPSTATE_FAILED, "enforcement_failed");
		return;
	}
	mediator_config_changed(op->op_bd, op->op_net);
	r->or_result = netop_summary(op->op_net);
}

/* Up to limit lines of one evidence file, parsed, into arr. */
static void
netop_read_jsonl(int dirfd, const char *name, const char *type, int64_t limit,
    struct json_object *arr)
{
	int fd = safefs_openat(dirfd, name, O_RDONLY, 0);
	char *buf, *line, *save = NULL;

	if (fd < 0)
		return;
	if (util_read_fd(fd, 64u << 20, &buf, NULL) != 0) {
		close(fd);
		return;
	}
	close(fd);
	for (line = strtok_r(buf, "\n", &save); line != NULL && limit > 0;
	    line = strtok_r(NULL, "\n", &save)) {
		struct json_object *o = NULL;
		if (frame_parse_payload((const uint8_t *)line, strlen(line), &o) != FRAME_OK)
			continue;
		json_object_object_add(o, "evidence", json_object_new_string(type));
		json_object_array_add(arr, o);
		limit--;
	}
	free(buf);
}

static int
netop_time_cmp(const void *a, const void *b)
{
	struct json_object *const *x = a, *const *y = b;
	const char *sx = schema_string(*x, "time"), *sy = schema_string(*y, "time");
	return strcmp(sx ? sx : "", sy ? sy : "");
}

void
operation_evidence(struct boundaryd *bd, const struct peer *p, struct json_object *params,
    struct op_reply *r)
{
	const char *id = schema_string(params, "operation_id");
	int64_t limit = schema_int(params, "limit", 10000);
	struct json_object *rec = NULL, *arr;
	char *cause = NULL;
	int dfd;

	if (!ids_valid_operation(id)) {
		reply_error(r, PE_INVALID_PARAMS, "operation_id: malformed id");
		return;
	}
	if (p->pr_in_op && strcmp(id, p->pr_op_id) != 0) {
		reply_error(r, PE_NOT_FOUND, "no such operation");
		return;
	}
	if ((dfd = safefs_opendir(bd->bd_ops_fd, id)) < 0 ||
	    oprecord_read(dfd, id, &rec, &cause) != 0) {
		if (dfd >= 0)
			close(dfd);
		free(cause);
		reply_error(r, PE_NOT_FOUND, "no such operation");
		return;
	}
	close(dfd);
	if (p->pr_uid != 0 &&
	    schema_int(schema_child(rec, "source"), "uid", -1) != (int64_t)p->pr_uid) {
		json_object_put(rec);
		reply_error(r, PE_NOT_FOUND, "no such operation");
		return;
	}
	arr = json_object_new_array();
	/* Exec events from the lineage, so one timeline shows processes and effects. */
	struct json_object *lin = schema_child(rec, "lineage");
	for (size_t i = 0; lin != NULL && i < json_object_array_length(lin); i++) {
		struct json_object *e = json_object_array_get_idx(lin, i), *o = json_object_new_object();
		json_object_object_add(o, "time", json_object_get(schema_child(e, "first_seen")));
		json_object_object_add(o, "evidence", json_object_new_string("lineage"));
		json_object_object_add(o, "kind", json_object_new_string("exec"));
		json_object_object_add(o, "pid", json_object_get(schema_child(e, "pid")));
		json_object_object_add(o, "ppid", json_object_get(schema_child(e, "ppid")));
		json_object_object_add(o, "executable", json_object_get(schema_child(e, "executable")));
		json_object_array_add(arr, o);
		if (schema_child(e, "exited_at") != NULL) {
			struct json_object *x = json_object_new_object();
			json_object_object_add(x, "time", json_object_get(schema_child(e, "exited_at")));
			json_object_object_add(x, "evidence", json_object_new_string("lineage"));
			json_object_object_add(x, "kind", json_object_new_string("exit"));
			json_object_object_add(x, "pid", json_object_get(schema_child(e, "pid")));
			json_object_object_add(x, "exit_status",
			    json_object_get(schema_child(e, "exit_status")));
			json_object_array_add(arr, x);
		}
	}
	/* What the launcher's seccomp listener refused, from its exit report. */
	struct json_object *life = schema_child(rec, "lifecycle");
	struct json_object *den = schema_child(schema_child(life, "exit"), "seccomp_denials");
	if (den != NULL && json_object_is_type(den, json_type_object)) {
		json_object_object_foreach(den, name, n) {
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "time", json_object_get(schema_child(life,
			    "ended_at")));
			json_object_object_add(o, "evidence", json_object_new_string("host"));
			json_object_object_add(o, "kind", json_object_new_string("seccomp_denied"));
			json_object_object_add(o, "syscall", json_object_new_string(name));
			json_object_object_add(o, "count", json_object_get(n));
			json_object_array_add(arr, o);
		}
	}
	/* Which sensors covered it: a refusal a sensor could not see is not in arr. */
	struct json_object *sensors = json_object_get(schema_child(rec, "sensors"));
	json_object_put(rec);
	if ((dfd = safefs_opendir(bd->bd_ops_fd, id)) >= 0) {
		netop_read_jsonl(dfd, "files.jsonl", "file", limit, arr);
		netop_read_jsonl(dfd, "sensors.jsonl", "sensor", limit, arr);
		close(dfd);
	}
	if ((dfd = safefs_opendir(bd->bd_netops_fd, id)) >= 0) {
		netop_read_jsonl(dfd, "effects.jsonl", "effect", limit, arr);
		netop_read_jsonl(dfd, "faults.jsonl", "fault", limit, arr);
		netop_read_jsonl(dfd, "counters.jsonl", "counters", limit, arr);
		close(dfd);
	}
	json_object_array_sort(arr, netop_time_cmp);
	r->or_result = json_object_new_object();
	json_object_object_add(r->or_result, "operation_id", json_object_new_string(id));
	json_object_object_add(r->or_result, "sensors", sensors);
	json_object_object_add(r->or_result, "events", arr);
}
