/*
 * spare.c: prepared cells for the next operations.
 *
 * Creating an operation used to make its directory, its record's lock and
 * temporary files, its cgroup and, for a network operation, its network
 * directory and nftables table, while the launcher waited: on a busy ext4
 * state disk each new inode cost hundreds of microseconds and the table
 * commit about 1 ms. boundaryd now makes two cells ahead of time, one for
 * a network operation and one for an operation without network policy:
 * an operation id, operations/ID with record.json.lock and empty
 * record.json.tmp and record.json.spare0..2 (lib/record.c writes the
 * record's first versions into them), the empty cgroup BASE/ID, and for the network
 * cell network-operations/ID and the cgroup's table installed deny-all
 * (the envelope with empty sets: every packet of the cgroup is rejected).
 * operation.create takes the network cell when the operation's layout
 * fits (a cgroup subject without a DNS proxy: the chains are the same,
 * only sets and rules differ) and then refills the sets, or does nothing
 * for a deny-all operation. The next cell is made when the operation ends.
 *
 * Threats and failure rules:
 * - A spare grants nothing: its table rejects everything of its cgroup,
 *   and its cgroup is root's (mode 0755 below a root-owned base), so no
 *   caller can move a process into it. Nothing joins it before the
 *   operation that takes it has its first record and policy.
 * - A crash leaves cells behind: STATE/spares/ID marks each one before
 *   anything of it exists and goes when an operation takes it, so the
 *   next start removes every cell a marker names (its own ids only; the
 *   base may be shared with other instances) without a recovery note. A
 *   cell taken but without a first record is a half-created operation
 *   (recover.c), which takes its table too.
 * - A cell's directory holds no record: nothing lists it as an operation.
 * - When a cell cannot be made, creates take the ordinary path; nothing
 *   waits on a cell.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "boundaryd.h"
#include "cgroup.h"
#include "ids.h"
#include "log.h"
#include "nft.h"
#include "oprecord.h"
#include "safefs.h"
#include "util.h"

#define SPARE_DIR "spares"
#define SPARE_RETRY_S 10	/* after a failure: not on every create */
#define SPARE_AFTER_TAKE_MS 20	/* else after the taking operation ends */

/* What a cell holds in operations/ID: the first record's files, made ahead. */
static const char *const spare_files[] = { OPRECORD_FILE ".lock", OPRECORD_FILE ".tmp",
    OPRECORD_FILE ".spare0", OPRECORD_FILE ".spare1", OPRECORD_FILE ".spare2" };

struct spare_cell {
	int sc_net;			/* network-operations/ID and the deny-all table too */
	int sc_ready;
	char sc_id[OP_ID_MAX];
	struct cgroup sc_cg;
	int sc_dirfd;			/* operations/ID */
	int64_t sc_retry_ms;		/* monotonic: no attempt before this */
};

static struct {
	int sp_dirfd;			/* STATE/spares, -1 when unavailable */
	struct spare_cell sp_cell[SPARE_KINDS];
	struct event *sp_ev;		/* make the missing ones */
	uint64_t sp_made, sp_taken, sp_failed;
	char sp_error[160];
} spare = { .sp_dirfd = -1, .sp_cell = { { .sc_net = 1, .sc_dirfd = -1 },
    { .sc_net = 0, .sc_dirfd = -1 } } };

/* Remove whatever of cell id exists (killing anything in its cgroup), marker last. */
static void
spare_discard(struct boundaryd *bd, const char *id, const char *why)
{
	char rel[256], table[NFT_TABLE_NAME_MAX], *cause = NULL;
	struct cgroup cg;

	if (bd->bd_nft != NULL) {
		netop_table_name(bd, id, table);
		if (nft_table_delete(bd->bd_nft, table, &cause) != 0) {
			/* Absent for a plain cell and after an early failure. */
			log_debug("spare %s: table %s: %s", id, table, cause);
			free(cause);
			cause = NULL;
		}
	}
	snprintf(rel, sizeof(rel), "%s/%s", bd->bd_cgroup_base, id);
	if (bd->bd_have_cgroup && cgroup_open(bd->bd_cgroup_mount, rel, &cg, NULL) == 0) {
		/* Nothing may run in a cell: whatever does is killed, not adopted. */
		if (cgroup_populated(&cg) > 0) {
			log_warnx("spare %s: its cgroup held processes: killed", id);
			cgroup_kill(&cg, NULL);
			for (int i = 0; i < 250 && cgroup_populated(&cg) > 0; i++)
				usleep(2000);
		}
		if (cgroup_remove(&cg, &cause) != 0) {
			log_warnx("spare %s: %s", id, cause);
			free(cause);
			cause = NULL;
		}
		cgroup_close(&cg);
	}
	if (safefs_remove_dir(bd->bd_ops_fd, id) != 0 && errno != ENOENT)
		log_warn("spare %s: remove operations/%s", id, id);
	if (bd->bd_netops_fd >= 0 && unlinkat(bd->bd_netops_fd, id, AT_REMOVEDIR) != 0 &&
	    errno != ENOENT)
		log_warn("spare %s: remove network-operations/%s", id, id);
	if (spare.sp_dirfd >= 0 && unlinkat(spare.sp_dirfd, id, 0) != 0 && errno != ENOENT)
		log_warn("spare %s: remove its marker", id);
	log_debug("spare %s: removed (%s)", id, why);
}

/* Make one cell. 0 when it is ready. */
static int
spare_make(struct boundaryd *bd, struct spare_cell *c)
{
	char rel[256], *cause = NULL;
	struct nft_policy p;
	int fd;

	if (c->sc_ready || spare.sp_dirfd < 0 || !bd->bd_have_cgroup || bd->bd_shutdown ||
	    (c->sc_net && (bd->bd_nft == NULL || bd->bd_netops_fd < 0)) ||
	    c->sc_retry_ms > util_monotonic_ms())
		return c->sc_ready ? 0 : -1;
	if (ids_new("op_", c->sc_id, sizeof(c->sc_id)) != 0)
		return -1;
	fd = openat(spare.sp_dirfd, c->sc_id, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600);
	if (fd < 0) {
		util_cause(&cause, "marker: %s", strerror(errno));
		goto fail;
	}
	close(fd);
	if (mkdirat(bd->bd_ops_fd, c->sc_id, 0700) != 0 ||
	    (c->sc_dirfd = safefs_opendir(bd->bd_ops_fd, c->sc_id)) < 0) {
		util_cause(&cause, "operations/%s: %s", c->sc_id, strerror(errno));
		goto fail;
	}
	for (size_t i = 0; i < nitems(spare_files); i++) {
		fd = openat(c->sc_dirfd, spare_files[i], O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
		if (fd < 0) {
			util_cause(&cause, "operations/%s/%s: %s", c->sc_id, spare_files[i],
			    strerror(errno));
			goto fail;
		}
		close(fd);
	}
	if (c->sc_net && mkdirat(bd->bd_netops_fd, c->sc_id, 0700) != 0) {
		util_cause(&cause, "network-operations/%s: %s", c->sc_id, strerror(errno));
		goto fail;
	}
	snprintf(rel, sizeof(rel), "%s/%s", bd->bd_cgroup_base, c->sc_id);
	if (op_ensure_base(bd, &cause) != 0 ||
	    cgroup_create(bd->bd_cgroup_mount, rel, &c->sc_cg, &cause) != 0)
		goto fail;
	if (c->sc_net) {
		char table[NFT_TABLE_NAME_MAX];
		netop_table_name(bd, c->sc_id, table);
		memset(&p, 0, sizeof(p));
		p.np_table = table;
		p.np_subject = NFT_SUBJECT_CGROUP;
		p.np_cgroup_id = c->sc_cg.cg_id;
		p.np_cgroup_level = NETOP_CGROUP_LEVEL;
		p.np_mode = NFT_MODE_ALLOWLIST;
		p.np_generation = 1;
		p.np_owner = c->sc_id;
		if (nft_generation_commit(bd->bd_nft, &p, &cause) != 0) {
			cgroup_close(&c->sc_cg);
			goto fail;
		}
	}
	c->sc_ready = 1;
	spare.sp_made++;
	spare.sp_error[0] = '\0';
	return 0;
fail:
	spare.sp_failed++;
	snprintf(spare.sp_error, sizeof(spare.sp_error), "%s", cause ? cause : "unknown");
	log_warnx("cannot prepare a cell for the next operation (creates take the slower "
	    "path): %s", spare.sp_error);
	free(cause);
	if (c->sc_dirfd >= 0) {
		close(c->sc_dirfd);
		c->sc_dirfd = -1;
	}
	spare_discard(bd, c->sc_id, "failed");
	c->sc_retry_ms = util_monotonic_ms() + SPARE_RETRY_S * 1000;
	return -1;
}

/*
 * Make the missing cells in delay_ms (not before a failure's retry time).
 * A timer already set sooner is kept. On a host with few CPUs a cell's
 * making competes with the launch it would speed up, so after a take it
 * waits for the operation's end (spare_idle) or SPARE_AFTER_TAKE_MS.
 */
static void
spare_schedule(int64_t delay_ms)
{
	struct timeval tv, left;
	int64_t now = util_monotonic_ms(), retry = -1;

	if (spare.sp_ev == NULL)
		return;
	for (int k = 0; k < SPARE_KINDS; k++) {
		const struct spare_cell *c = &spare.sp_cell[k];
		if (!c->sc_ready && (retry < 0 || c->sc_retry_ms < retry))
			retry = c->sc_retry_ms;
	}
	if (retry < 0)
		return;	/* all ready */
	if (retry - now > delay_ms)
		delay_ms = retry - now;
	tv.tv_sec = delay_ms / 1000;
	tv.tv_usec = (delay_ms % 1000) * 1000;
	if (evtimer_pending(spare.sp_ev, &left)) {
		struct timeval nowtv;
		event_base_gettimeofday_cached(event_get_base(spare.sp_ev), &nowtv);
		int64_t due = (int64_t)(left.tv_sec - nowtv.tv_sec) * 1000 +
		    (left.tv_usec - nowtv.tv_usec) / 1000;
		if (due <= delay_ms)
			return;
	}
	evtimer_add(spare.sp_ev, &tv);
}

static void
spare_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	for (int k = 0; k < SPARE_KINDS; k++)
		spare_make(arg, &spare.sp_cell[k]);
	spare_schedule(0);	/* a failed one, at its retry time */
}

/* An operation ended and was cleaned up: a good moment for the next cells. */
void
spare_idle(void)
{
	spare_schedule(0);
}

/*
 * At start, before the operations and tables are recovered: remove every
 * cell a previous instance left (each marker names one not taken).
 */
void
spare_recover(struct boundaryd *bd)
{
	struct dirent *de;
	DIR *d;
	int fd;

	if (mkdirat(bd->bd_state_fd, SPARE_DIR, 0700) != 0 && errno != EEXIST) {
		log_warn("mkdir %s/%s (no prepared cells)", bd->bd_state_root, SPARE_DIR);
		return;
	}
	if ((spare.sp_dirfd = safefs_opendir(bd->bd_state_fd, SPARE_DIR)) < 0) {
		log_warn("open %s/%s (no prepared cells)", bd->bd_state_root, SPARE_DIR);
		return;
	}
	if ((fd = dup(spare.sp_dirfd)) < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (!ids_valid_operation(de->d_name)) {
			log_warnx("%s/%s: not a cell marker; left alone", SPARE_DIR, de->d_name);
			continue;
		}
		spare_discard(bd, de->d_name, "left by a previous instance");
		log_info("recovery: removed the unused prepared cell %s", de->d_name);
	}
	closedir(d);
}

/* After the sandbox is in place: make the first cells from the event loop. */
void
spare_start(struct boundaryd *bd)
{
	spare.sp_ev = evtimer_new(bd->bd_base, spare_cb, bd);
	if (spare.sp_ev == NULL) {
		log_warnx("no prepared cells: cannot make a timer");
		return;
	}
	spare_schedule(0);
}

/*
 * The cell an operation can take: for a network operation (s != NULL) the
 * network cell when the refill keeps its table's chains (a cgroup subject
 * without the DNS proxy's nat chain), else none; for one without network
 * policy the plain cell. -1: none ready or none fits.
 */
int
spare_kind_for(const struct netop_spec *s)
{
	int k = s != NULL ? SPARE_NET : SPARE_PLAIN;

	if (s != NULL && (s->ns_subject != NFT_SUBJECT_CGROUP || s->ns_dns != NULL))
		return -1;
	return spare.sp_cell[k].sc_ready ? k : -1;
}

/*
 * Hand cell kind to the operation being created: its id, operations/ID
 * (*dirfd) and its cgroup (*cg); its table, for the network cell, goes
 * with the id (the operation's failure paths delete it until its network
 * state owns it). The marker goes: from now on a crash leaves a
 * half-created operation, not a cell.
 */
void
spare_take(int kind, char *id, size_t idlen, struct cgroup *cg, int *dirfd)
{
	struct spare_cell *c = &spare.sp_cell[kind];

	util_strlcpy(id, c->sc_id, idlen);
	*cg = c->sc_cg;
	*dirfd = c->sc_dirfd;
	memset(&c->sc_cg, 0, sizeof(c->sc_cg));
	c->sc_cg.cg_dirfd = -1;
	c->sc_dirfd = -1;
	if (unlinkat(spare.sp_dirfd, c->sc_id, 0) != 0)
		log_warn("spare %s: remove its marker", c->sc_id);
	c->sc_ready = 0;
	spare.sp_taken++;
	spare_schedule(SPARE_AFTER_TAKE_MS);
}

/* system.status: whether the next operations start from prepared cells. */
struct json_object *
spare_status(void)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "enabled", json_object_new_boolean(spare.sp_ev != NULL));
	json_object_object_add(o, "ready",
	    json_object_new_boolean(spare.sp_cell[SPARE_NET].sc_ready));
	json_object_object_add(o, "plain_ready",
	    json_object_new_boolean(spare.sp_cell[SPARE_PLAIN].sc_ready));
	json_object_object_add(o, "made", json_object_new_int64((int64_t)spare.sp_made));
	json_object_object_add(o, "taken", json_object_new_int64((int64_t)spare.sp_taken));
	json_object_object_add(o, "failed", json_object_new_int64((int64_t)spare.sp_failed));
	json_object_object_add(o, "last_error", spare.sp_error[0] ?
	    json_object_new_string(spare.sp_error) : NULL);
	return o;
}

/* At a clean stop: the cells go with this instance. */
void
spare_shutdown(struct boundaryd *bd)
{
	for (int k = 0; k < SPARE_KINDS; k++) {
		struct spare_cell *c = &spare.sp_cell[k];
		if (!c->sc_ready)
			continue;
		cgroup_close(&c->sc_cg);
		close(c->sc_dirfd);
		c->sc_dirfd = -1;
		spare_discard(bd, c->sc_id, "shutdown");
		c->sc_ready = 0;
	}
	if (spare.sp_ev != NULL) {
		event_free(spare.sp_ev);
		spare.sp_ev = NULL;
	}
	if (spare.sp_dirfd >= 0) {
		close(spare.sp_dirfd);
		spare.sp_dirfd = -1;
	}
}
