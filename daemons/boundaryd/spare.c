/*
 * spare.c: one prepared cell for the next network operation.
 *
 * Creating a network operation used to make its cgroup and commit its
 * nftables table (about 1 ms of kernel work on this class of host) while
 * the launcher waited. boundaryd now makes one cell ahead of time: an
 * operation id, its empty cgroup below the base, and that cgroup's table
 * installed deny-all (the envelope with empty sets: every packet of the
 * cgroup is rejected). operation.create takes it when the operation's
 * network layout fits (a cgroup subject without a DNS proxy: the table's
 * chains are the same, only sets and rules differ) and then only refills
 * the sets, or does nothing for a deny-all operation. The next cell is made
 * after the reply.
 *
 * Threats and failure rules:
 * - A spare grants nothing: its table rejects everything of its cgroup,
 *   and its cgroup is root's (mode 0755 below a root-owned base), so no
 *   caller can move a process into it. Nothing joins it before the
 *   operation that takes it has its first record and policy.
 * - A crash leaves a spare behind: STATE/spares/ID marks each one before
 *   its cgroup or table exists, so the next start removes them (its own
 *   ids only; the base may be shared with other instances) instead of
 *   reporting an unknown table. A marker whose operation directory exists
 *   was taken: the operation's own recovery owns its cgroup and table.
 * - When a spare cannot be made (nftables or the cgroup refuse), creates
 *   take the ordinary path; nothing waits on a spare.
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
#include "safefs.h"
#include "util.h"

#define SPARE_DIR "spares"
#define SPARE_RETRY_S 10	/* after a failure: not on every create */
#define SPARE_AFTER_TAKE_MS 20	/* else after the taking operation ends */

static struct {
	int sp_dirfd;			/* STATE/spares, -1 when unavailable */
	int sp_ready;
	char sp_id[OP_ID_MAX];
	char sp_table[NFT_TABLE_NAME_MAX];
	struct cgroup sp_cg;
	struct event *sp_ev;		/* make the next one */
	int64_t sp_retry_ms;		/* monotonic: no attempt before this */
	uint64_t sp_made, sp_taken, sp_failed;
	char sp_error[160];
} spare = { .sp_dirfd = -1 };

/* Remove a spare's table and cgroup (killing anything in it) and its marker. */
static void
spare_discard(struct boundaryd *bd, const char *id, const char *why)
{
	char rel[256], table[NFT_TABLE_NAME_MAX], *cause = NULL;
	struct cgroup cg;

	if (bd->bd_nft != NULL) {
		netop_table_name(bd, id, table);
		if (nft_table_delete(bd->bd_nft, table, &cause) != 0) {
			/* Absent is the usual case after an early failure. */
			log_debug("spare %s: table %s: %s", id, table, cause);
			free(cause);
			cause = NULL;
		}
	}
	snprintf(rel, sizeof(rel), "%s/%s", bd->bd_cgroup_base, id);
	if (bd->bd_have_cgroup && cgroup_open(bd->bd_cgroup_mount, rel, &cg, NULL) == 0) {
		/* Nothing may run in a spare: whatever does is killed, not adopted. */
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
	if (spare.sp_dirfd >= 0 && unlinkat(spare.sp_dirfd, id, 0) != 0 && errno != ENOENT)
		log_warn("spare %s: remove its marker", id);
	log_debug("spare %s: removed (%s)", id, why);
}

/* Make one spare: marker, cgroup, deny-all table. 0 when it is ready. */
static int
spare_make(struct boundaryd *bd)
{
	char rel[256], *cause = NULL;
	struct nft_policy p;
	int fd;

	if (spare.sp_ready || spare.sp_dirfd < 0 || bd->bd_nft == NULL || !bd->bd_have_cgroup ||
	    bd->bd_shutdown)
		return spare.sp_ready ? 0 : -1;
	if (ids_new("op_", spare.sp_id, sizeof(spare.sp_id)) != 0)
		return -1;
	fd = openat(spare.sp_dirfd, spare.sp_id, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600);
	if (fd < 0) {
		util_cause(&cause, "marker: %s", strerror(errno));
		goto fail;
	}
	close(fd);
	snprintf(rel, sizeof(rel), "%s/%s", bd->bd_cgroup_base, spare.sp_id);
	if (op_ensure_base(bd, &cause) != 0 ||
	    cgroup_create(bd->bd_cgroup_mount, rel, &spare.sp_cg, &cause) != 0)
		goto fail;
	netop_table_name(bd, spare.sp_id, spare.sp_table);
	memset(&p, 0, sizeof(p));
	p.np_table = spare.sp_table;
	p.np_subject = NFT_SUBJECT_CGROUP;
	p.np_cgroup_id = spare.sp_cg.cg_id;
	p.np_cgroup_level = NETOP_CGROUP_LEVEL;
	p.np_mode = NFT_MODE_ALLOWLIST;
	p.np_generation = 1;
	p.np_owner = spare.sp_id;
	if (nft_generation_commit(bd->bd_nft, &p, &cause) != 0) {
		cgroup_close(&spare.sp_cg);
		goto fail;
	}
	spare.sp_ready = 1;
	spare.sp_made++;
	spare.sp_error[0] = '\0';
	return 0;
fail:
	spare.sp_failed++;
	snprintf(spare.sp_error, sizeof(spare.sp_error), "%s", cause ? cause : "unknown");
	log_warnx("cannot prepare the next operation's cell (creates take the slower path): %s",
	    spare.sp_error);
	free(cause);
	spare_discard(bd, spare.sp_id, "failed");
	spare.sp_retry_ms = util_monotonic_ms() + SPARE_RETRY_S * 1000;
	return -1;
}

static void
spare_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	spare_make(arg);
}

/*
 * Make the next spare in delay_ms (not before a failure's retry time). A
 * timer already set sooner is kept. On a host with few CPUs the table
 * commit competes with the launch it would speed up, so after a take it
 * waits for the operation's end (spare_idle) or SPARE_AFTER_TAKE_MS.
 */
static void
spare_schedule(int64_t delay_ms)
{
	struct timeval tv, left;
	int64_t now = util_monotonic_ms();

	if (spare.sp_ev == NULL || spare.sp_ready)
		return;
	if (spare.sp_retry_ms - now > delay_ms)
		delay_ms = spare.sp_retry_ms - now;
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

/* An operation ended and was cleaned up: a good moment for the next spare. */
void
spare_idle(void)
{
	spare_schedule(0);
}

/*
 * At start, before the operations and tables are recovered: remove every
 * spare a previous instance left (each marker names one).
 */
void
spare_recover(struct boundaryd *bd)
{
	struct stat st;
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
			log_warnx("%s/%s: not a spare marker; left alone", SPARE_DIR, de->d_name);
			continue;
		}
		/* Taken before the crash: the operation's recovery owns it now. */
		if (fstatat(bd->bd_ops_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			unlinkat(spare.sp_dirfd, de->d_name, 0);
			continue;
		}
		spare_discard(bd, de->d_name, "left by a previous instance");
		log_info("recovery: removed the unused prepared cell %s", de->d_name);
	}
	closedir(d);
}

/* After the sandbox is in place: make the first spare from the event loop. */
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
 * Does a network operation with this spec fit a spare's table? The refill
 * keeps the table's chains, so the layout must be the spare's: a cgroup
 * subject without the DNS proxy's nat chain.
 */
int
spare_fits(const struct netop_spec *s)
{
	return spare.sp_ready && s->ns_subject == NFT_SUBJECT_CGROUP && s->ns_dns == NULL;
}

/* The id the operation gets if it takes the spare. */
const char *
spare_id(void)
{
	return spare.sp_ready ? spare.sp_id : NULL;
}

/*
 * Hand the spare to the operation whose directory operations/ID now
 * exists: its cgroup moves to *cg and its table to the operation (whose
 * failure paths delete it); the marker goes. The next one is made after
 * this request.
 */
void
spare_take(struct cgroup *cg)
{
	*cg = spare.sp_cg;
	memset(&spare.sp_cg, 0, sizeof(spare.sp_cg));
	spare.sp_cg.cg_dirfd = -1;
	if (unlinkat(spare.sp_dirfd, spare.sp_id, 0) != 0)
		log_warn("spare %s: remove its marker", spare.sp_id);
	spare.sp_ready = 0;
	spare.sp_taken++;
	spare_schedule(SPARE_AFTER_TAKE_MS);
}

/* system.status: whether the next network operation starts from a prepared cell. */
struct json_object *
spare_status(void)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "enabled", json_object_new_boolean(spare.sp_ev != NULL));
	json_object_object_add(o, "ready", json_object_new_boolean(spare.sp_ready));
	json_object_object_add(o, "made", json_object_new_int64((int64_t)spare.sp_made));
	json_object_object_add(o, "taken", json_object_new_int64((int64_t)spare.sp_taken));
	json_object_object_add(o, "failed", json_object_new_int64((int64_t)spare.sp_failed));
	json_object_object_add(o, "last_error", spare.sp_error[0] ?
	    json_object_new_string(spare.sp_error) : NULL);
	return o;
}

/* At a clean stop: the spare goes with this instance. */
void
spare_shutdown(struct boundaryd *bd)
{
	if (spare.sp_ready) {
		cgroup_close(&spare.sp_cg);
		spare_discard(bd, spare.sp_id, "shutdown");
		spare.sp_ready = 0;
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
