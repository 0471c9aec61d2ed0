/*
 * test_fanotify.c: the fanotify engine on the real kernel (lib/fanotify.c).
 * Needs root; every test fails with a clear message without it.
 *
 * Each test runs in a mount namespace of its own (unshare(CLONE_NEWNS),
 * every mount made private) with a fresh tmpfs mounted on a unit_tmpdir,
 * and every rule lives on that tmpfs, so the filesystem marks see only the
 * test's tree: no other process on the host waits for this test's answers.
 * The tmpfs, its marks and the tree go away with the test process whatever
 * happens (exit closes the groups, which also allows whatever is still
 * queued, and the namespace dies with its last process); the empty mount
 * point is removed by the test's atexit handler or by the runner.
 *
 * A handler thread answers events; the main thread forks the openers and
 * never opens a file on the tmpfs itself while the handler is stopped.
 * Every wait is bounded in count and in time.
 */
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "fanotify.h"
#include "fanpolicy.h"
#include "unit.h"

#define LOG_MAX 512

enum cb_mode {
	MODE_POLICY,		/* decide with fanpolicy_decide (posture enforce) */
	MODE_TIMEOUT,		/* supervised: report FAN_DECIDE_TIMEOUT */
	MODE_SLOW,		/* supervised: sleep past the deadline, then allow */
	MODE_ERROR,		/* supervised: return -1 */
	MODE_BAD,		/* supervised: an invalid response value */
};

struct logent {
	enum fan_phase phase;
	pid_t pid;
	uint64_t mask;
	int by_inode;
	char path[PATH_MAX];
	char marked[PATH_MAX];
	uint32_t response;
	char reason[64];
};

static struct {
	char root[PATH_MAX];	/* the tmpfs */
	char root2[PATH_MAX];	/* a second tmpfs, or "" */
	char home[PATH_MAX + 16];
	char work[PATH_MAX + 16];
	struct fanpolicy pol;
	struct fan_plan plan;
	struct fan_engine *eng;
	pthread_t thr;
	int thr_running;
	volatile int stop;
	pthread_mutex_t eng_mu;	/* the engine is single-threaded */
	pthread_mutex_t mu;	/* what follows */
	pid_t supervised;
	enum cb_mode mode;
	struct logent log[LOG_MAX];
	size_t nlog;
	int decides, answers, losts, handle_errors;
	char lost[64];
} fx = { .eng_mu = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER };

/* The test's decision callback: the policy for the supervised pid, allow for others. */
static int
cb(const struct fan_event *ev, struct fan_verdict *vd, void *arg)
{
	struct logent *le = NULL;
	enum cb_mode mode;
	int supervised;

	(void)arg;
	pthread_mutex_lock(&fx.mu);
	if (fx.nlog < LOG_MAX) {
		le = &fx.log[fx.nlog++];
		memset(le, 0, sizeof(*le));
		le->phase = ev->ev_phase;
		le->pid = ev->ev_pid;
		le->mask = ev->ev_mask;
		le->by_inode = ev->ev_by_inode;
		util_strlcpy(le->marked, ev->ev_inode_path != NULL ? ev->ev_inode_path : "",
		    sizeof(le->marked));
		util_strlcpy(le->path, ev->ev_path != NULL ? ev->ev_path : "", sizeof(le->path));
	}
	switch (ev->ev_phase) {
	case FAN_PHASE_LOST:
		fx.losts++;
		util_strlcpy(fx.lost, ev->ev_lost, sizeof(fx.lost));
		pthread_mutex_unlock(&fx.mu);
		return 0;
	case FAN_PHASE_ANSWERED:
		fx.answers++;
		if (le != NULL) {
			le->response = ev->ev_final->vd_response;
			util_strlcpy(le->reason, ev->ev_final->vd_reason, sizeof(le->reason));
		}
		pthread_mutex_unlock(&fx.mu);
		return 0;
	case FAN_PHASE_DECIDE:
		break;
	}
	fx.decides++;
	supervised = fx.supervised != 0 && ev->ev_pid == fx.supervised;
	mode = fx.mode;
	pthread_mutex_unlock(&fx.mu);

	if (supervised) {
		switch (mode) {
		case MODE_POLICY:
			break;
		case MODE_TIMEOUT:
			return FAN_DECIDE_TIMEOUT;
		case MODE_SLOW:
			while (util_monotonic_ms() <= ev->ev_deadline_ms + 20)
				unit_sleep_ms(10);
			vd->vd_response = FAN_ALLOW;
			vd->vd_reason = FANR_NO_RULE;
			return 0;
		case MODE_ERROR:
			return -1;
		case MODE_BAD:
			vd->vd_response = 7;
			vd->vd_reason = "bad";
			return 0;
		}
	}
	if (ev->ev_rule == NULL) {
		vd->vd_response = FAN_ALLOW;
		vd->vd_reason = FANR_NO_RULE;
		vd->vd_record = 0;
		return 0;
	}
	struct fan_decision d;
	fanpolicy_decide(FAN_POSTURE_ENFORCE, ev->ev_rule->fr_action, supervised, &d);
	vd->vd_response = d.dc_response;
	vd->vd_reason = d.dc_reason;
	vd->vd_record = d.dc_record;
	vd->vd_warning = d.dc_warning;
	return 0;
}

/* The handler thread: poll the engine's fd (20 ms at a time) and handle. */
static void *
handler(void *arg)
{
	(void)arg;
	while (!fx.stop) {
		struct pollfd p = { fanotify_engine_fd(fx.eng), POLLIN, 0 };
		char *cause = NULL;
		if (poll(&p, 1, 20) <= 0)
			continue;
		pthread_mutex_lock(&fx.eng_mu);
		if (fanotify_engine_handle(fx.eng, cb, NULL, &cause) < 0) {
			pthread_mutex_lock(&fx.mu);
			fx.handle_errors++;
			pthread_mutex_unlock(&fx.mu);
			fprintf(stderr, "test_fanotify: handle: %s\n", cause);
		}
		pthread_mutex_unlock(&fx.eng_mu);
		free(cause);
	}
	return NULL;
}

/* Stop the handler thread (bounded: it polls 20 ms at a time). */
static void
fx_stop(void)
{
	if (!fx.thr_running)
		return;
	fx.stop = 1;
	ck_assert_int_eq(pthread_join(fx.thr, NULL), 0);
	fx.thr_running = 0;
	fx.stop = 0;
}

static void
fx_start(void)
{
	ck_assert_int_eq(pthread_create(&fx.thr, NULL, handler, NULL), 0);
	fx.thr_running = 1;
}

/* On a normal exit: stop, close, unmount (the tmp dir itself goes in unit_tmp_atexit). */
static void
fx_atexit(void)
{
	if (fx.thr_running) {
		fx.stop = 1;
		pthread_join(fx.thr, NULL);
		fx.thr_running = 0;
	}
	fanotify_engine_close(fx.eng);
	fx.eng = NULL;
	fanpolicy_plan_free(&fx.plan);
	fanpolicy_free(&fx.pol);
	if (fx.root2[0] != '\0')
		(void)umount2(fx.root2, MNT_DETACH);
	if (fx.root[0] != '\0')
		(void)umount2(fx.root, MNT_DETACH);
	fx.root[0] = fx.root2[0] = '\0';
}

/* mkdir -p one absolute path below the tmpfs, then write a file when data is set. */
static void
mkfile(const char *path, const char *data, mode_t mode)
{
	char dir[PATH_MAX];
	util_strlcpy(dir, path, sizeof(dir));
	for (char *p = dir + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		ck_assert_msg(mkdir(dir, 0700) == 0 || errno == EEXIST, "mkdir %s: %s", dir,
		    strerror(errno));
		*p = '/';
	}
	if (data == NULL)
		return;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ck_assert_int_eq(util_write_all(fd, data, strlen(data)), 0);
	ck_assert_int_eq(close(fd), 0);
}

/* Mount a private tmpfs on a fresh unit_tmpdir and return its real path in out. */
static void
fx_tmpfs(char *out, size_t len)
{
	const char *t = unit_tmpdir("/tmp");
	char *r = realpath(t, NULL);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_lt(util_strlcpy(out, r, len), len);
	free(r);
	ck_assert_msg(mount("gensee-fan", out, "tmpfs", MS_NOSUID | MS_NODEV, "size=8m,mode=0700")
	    == 0, "mount tmpfs on %s: %s", out, strerror(errno));
}

/* A private mount namespace and the test tree; no engine yet. */
static void
fx_tree(void)
{
	char p[PATH_MAX + 64], q[PATH_MAX + 64];

	unit_require_root();
	ck_assert_msg(unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS): %s", strerror(errno));
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	fx_tmpfs(fx.root, sizeof(fx.root));
	atexit(fx_atexit); /* after unit_tmpdir's, so it runs first */
	snprintf(fx.home, sizeof(fx.home), "%s/home", fx.root);
	snprintf(fx.work, sizeof(fx.work), "%s/work", fx.root);

	snprintf(p, sizeof(p), "%s/.ssh/id_ed25519", fx.home);
	mkfile(p, "-----BEGIN OPENSSH PRIVATE KEY-----\n", 0600);
	snprintf(p, sizeof(p), "%s/.ssh/run.sh", fx.home);
	mkfile(p, "#!/bin/sh\nexit 0\n", 0700);
	const char *work_files[] = { "a/b/.env", "a/b/.env.local", "a/b/ok.txt", "a/b/ok2.txt",
		"a/b/other.txt", "a/b/moveme.txt", "a/b/keep.txt", "x.txt" };
	for (size_t i = 0; i < nitems(work_files); i++) {
		snprintf(p, sizeof(p), "%s/%s", fx.work, work_files[i]);
		mkfile(p, "data\n", 0644);
	}
	/* A hard-linked copy of the key, made before any mark. */
	snprintf(p, sizeof(p), "%s/.ssh/id_ed25519", fx.home);
	snprintf(q, sizeof(q), "%s/a/b/idlink", fx.work);
	ck_assert_int_eq(link(p, q), 0);
}

/* Built-ins under the fake home, plus WORK/ ** /.env and WORK/ ** /.env.* (deny). */
static void
fx_policy(struct fanpolicy *pol, const char *extra)
{
	char pat[PATH_MAX + 64], *cause = NULL;

	fanpolicy_init(pol);
	ck_assert_msg(fanpolicy_add_builtins(pol, fx.home, &cause) == 0, "%s", cause);
	snprintf(pat, sizeof(pat), "%s/**/.env", fx.work);
	ck_assert_int_eq(fanpolicy_add(pol, pat, strlen(pat), fx.home, FAN_ACTION_DENY, &cause), 0);
	snprintf(pat, sizeof(pat), "%s/**/.env.*", fx.work);
	ck_assert_int_eq(fanpolicy_add(pol, pat, strlen(pat), fx.home, FAN_ACTION_DENY, &cause), 0);
	if (extra != NULL)
		ck_assert_int_eq(fanpolicy_add(pol, extra, strlen(extra), fx.home,
		    FAN_ACTION_DENY, &cause), 0);
	ck_assert_msg(fanpolicy_resolve(pol, &cause) == 0, "%s", cause);
	free(cause);
}

/* Plan fx.pol, open the engine on it, start the handler. */
static void
fx_engine(void)
{
	char *cause = NULL;

	ck_assert_msg(fanpolicy_plan(&fx.pol, &fx.plan, &cause) == 0, "%s", cause);
	/* Everything is on the test's tmpfs: nothing on the host is marked. */
	struct stat st;
	ck_assert_int_eq(stat(fx.root, &st), 0);
	for (size_t i = 0; i < fx.plan.pl_nmarks; i++) {
		const struct fan_mark *m = &fx.plan.pl_marks[i];
		int ours = m->fm_dev == st.st_dev;
		if (!ours && fx.root2[0] != '\0') {
			struct stat s2;
			ck_assert_int_eq(stat(fx.root2, &s2), 0);
			ours = m->fm_dev == s2.st_dev;
		}
		ck_assert_msg(ours, "the plan marks %s, outside the test's tmpfs", m->fm_path);
	}
	ck_assert_msg(fanotify_engine_open(&fx.eng, &fx.plan, &cause) == 0, "engine: %s", cause);
	struct fan_stats st0;
	fanotify_engine_stats(fx.eng, &st0);
	ck_assert_uint_eq(st0.st_marks_planned, fx.plan.pl_nmarks);
	ck_assert_uint_eq(st0.st_marks_active, fx.plan.pl_nmarks);
	const struct fan_warnings *w = fanotify_engine_warnings(fx.eng);
	for (size_t i = 0; i < w->w_n; i++)
		ck_assert_msg(strstr(w->w_v[i], "refused") == NULL &&
		    strstr(w->w_v[i], "no move watch") == NULL, "engine warning: %s", w->w_v[i]);
	free(cause);
	fx_start();
}

/*
 * Fork a child that, once told, opens path with flags (or execs it) and
 * exits with 0 or the errno. supervised makes it the pid the callback
 * enforces on. Bounded: the child has 20 s, the wait 10 s.
 */
static int
run_child(int supervised, const char *path, int flags, int exec)
{
	int go[2], status;
	char c = 'g';
	pid_t pid;

	ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(20);
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(120);
		if (exec) {
			char *argv[] = { (char *)path, NULL }, *envp[] = { NULL };
			execve(path, argv, envp);
			_exit(errno & 0x7f);
		}
		int fd = open(path, flags | O_CLOEXEC);
		if (fd < 0)
			_exit(errno & 0x7f);
		if ((flags & O_ACCMODE) != O_RDONLY && write(fd, "more\n", 5) != 5)
			_exit(121);
		close(fd);
		_exit(0);
	}
	close(go[0]);
	pthread_mutex_lock(&fx.mu);
	fx.supervised = supervised ? pid : 0;
	pthread_mutex_unlock(&fx.mu);
	ck_assert_int_eq(write(go[1], &c, 1), 1);
	close(go[1]);
	ck_assert_msg(unit_wait_pid(pid, 10000, &status) == 0, "child for %s hung", path);
	/*
	 * The child's DECIDE came before its answer; the cache mark and the
	 * ANSWERED call come after. Wait (bounded: 2 s) until every decided
	 * event is through, so the next open sees the cache as it will be.
	 */
	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(&fx.mu);
		int done = fx.answers >= fx.decides;
		pthread_mutex_unlock(&fx.mu);
		if (done)
			break;
		unit_sleep_ms(2);
	}
	pthread_mutex_lock(&fx.mu);
	fx.supervised = 0;
	pthread_mutex_unlock(&fx.mu);
	ck_assert_msg(WIFEXITED(status), "child for %s: status 0x%x", path, status);
	return WEXITSTATUS(status);
}

/* A supervised or unsupervised O_RDONLY open of fx.root-relative rel. */
static int
open_as(int supervised, const char *base, const char *rel)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	return run_child(supervised, p, O_RDONLY, 0);
}

/* How many DECIDE calls named path. */
static int
decides_for(const char *base, const char *rel)
{
	char p[PATH_MAX + 64];
	int n = 0;

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	pthread_mutex_lock(&fx.mu);
	for (size_t i = 0; i < fx.nlog; i++)
		n += fx.log[i].phase == FAN_PHASE_DECIDE && strcmp(fx.log[i].path, p) == 0;
	pthread_mutex_unlock(&fx.mu);
	return n;
}

/* The reason of the last answer for path ("" if none). */
static const char *
last_reason(const char *base, const char *rel)
{
	static char out[64];
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	out[0] = '\0';
	pthread_mutex_lock(&fx.mu);
	for (size_t i = 0; i < fx.nlog; i++)
		if (fx.log[i].phase == FAN_PHASE_ANSWERED && strcmp(fx.log[i].path, p) == 0)
			util_strlcpy(out, fx.log[i].reason, sizeof(out));
	pthread_mutex_unlock(&fx.mu);
	return out;
}

/* The engine's counters (the handler is paused while they are read). */
static void
stats(struct fan_stats *st)
{
	pthread_mutex_lock(&fx.eng_mu);
	fanotify_engine_stats(fx.eng, st);
	pthread_mutex_unlock(&fx.eng_mu);
}

/* Every permission event got exactly one answer, and the callback saw both phases. */
static void
check_one_answer_each(void)
{
	struct fan_stats st;

	stats(&st);
	pthread_mutex_lock(&fx.mu);
	int decides = fx.decides, answers = fx.answers, errors = fx.handle_errors;
	pthread_mutex_unlock(&fx.mu);
	ck_assert_int_eq(errors, 0);
	ck_assert_uint_eq(st.st_unanswered, 0);
	ck_assert_uint_eq(st.st_events, (uint64_t)answers);
	ck_assert_uint_eq(st.st_allowed + st.st_denied, st.st_events);
	ck_assert_int_le(decides, answers); /* a path that could not be resolved skips DECIDE */
	ck_assert_int_gt(answers, 0);
}

/* Wait (bounded: 5 s) until a counter passes a value. */
static int
wait_stat(size_t off, uint64_t above)
{
	for (int i = 0; i < 1000; i++) {
		struct fan_stats st;
		stats(&st);
		if (*(uint64_t *)((char *)&st + off) > above)
			return 0;
		unit_sleep_ms(5);
	}
	return -1;
}

START_TEST(test_deny_allow_cache)
{
	struct fan_stats st;

	fx_tree();
	fx_policy(&fx.pol, NULL);
	fx_engine();

	/* The key: denied for the supervised child, allowed for anyone else. */
	ck_assert_int_eq(open_as(1, fx.home, ".ssh/id_ed25519"), EPERM);
	ck_assert_str_eq(last_reason(fx.home, ".ssh/id_ed25519"), FANR_DENY_ACTION);
	ck_assert_int_eq(open_as(0, fx.home, ".ssh/id_ed25519"), 0);
	ck_assert_str_eq(last_reason(fx.home, ".ssh/id_ed25519"), FANR_OUTSIDE_OPERATION);
	/* Suffix rules in a nested directory. */
	ck_assert_int_eq(open_as(1, fx.work, "a/b/.env"), EPERM);
	ck_assert_int_eq(open_as(1, fx.work, "a/b/.env.local"), EPERM);
	ck_assert_int_eq(open_as(0, fx.work, "a/b/.env"), 0);
	/* Exec of a file under a rule: FAN_OPEN_EXEC_PERM. */
	char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "%s/.ssh/run.sh", fx.home);
	ck_assert_int_eq(run_child(1, p, 0, 1), EPERM);
	int saw_exec = 0;
	pthread_mutex_lock(&fx.mu);
	for (size_t i = 0; i < fx.nlog; i++)
		saw_exec |= fx.log[i].phase == FAN_PHASE_DECIDE && strcmp(fx.log[i].path, p) == 0 &&
		    (fx.log[i].mask & FAN_OPEN_EXEC_PERM);
	pthread_mutex_unlock(&fx.mu);
	ck_assert(saw_exec);
	ck_assert_int_eq(run_child(0, p, 0, 1), 0);

	/* ok.txt: allowed, then cached: the second open raises no event. */
	ck_assert_int_eq(open_as(1, fx.work, "a/b/ok.txt"), 0);
	ck_assert_int_eq(decides_for(fx.work, "a/b/ok.txt"), 1);
	ck_assert_str_eq(last_reason(fx.work, "a/b/ok.txt"), FANR_NO_RULE);
	ck_assert_int_eq(open_as(1, fx.work, "a/b/ok.txt"), 0);
	ck_assert_int_eq(open_as(0, fx.work, "a/b/ok.txt"), 0);
	ck_assert_int_eq(decides_for(fx.work, "a/b/ok.txt"), 1);
	stats(&st);
	ck_assert_uint_ge(st.st_cached, 1);

	/* A denied or matching file is never cached. */
	ck_assert_int_eq(open_as(0, fx.work, "a/b/.env"), 0);
	ck_assert_int_eq(decides_for(fx.work, "a/b/.env"), 3);

	/*
	 * The hard-linked copy of the key: its path matches no rule (a prefix
	 * rule names paths, not inodes), so it is allowed, but it has two names
	 * and is never cached, and the key stays protected.
	 */
	ck_assert_int_eq(open_as(0, fx.work, "a/b/idlink"), 0);
	ck_assert_int_eq(open_as(0, fx.work, "a/b/idlink"), 0);
	ck_assert_int_eq(decides_for(fx.work, "a/b/idlink"), 2);
	ck_assert_int_eq(open_as(1, fx.home, ".ssh/id_ed25519"), EPERM);

	/* A file outside every rule root on the same filesystem is seen once, then cached. */
	ck_assert_int_eq(open_as(1, fx.root, "work/x.txt"), 0);
	ck_assert_int_eq(open_as(1, fx.root, "work/x.txt"), 0);
	ck_assert_int_eq(decides_for(fx.work, "x.txt"), 1);
	check_one_answer_each();
	stats(&st);
	ck_assert_uint_eq(st.st_failed, 0);
	ck_assert_uint_eq(st.st_overflows, 0);
	pthread_mutex_lock(&fx.mu);
	ck_assert_int_eq(fx.losts, 0);
	pthread_mutex_unlock(&fx.mu);
}
END_TEST

START_TEST(test_write_and_rename)
{
	char from[PATH_MAX + 64], to[PATH_MAX + 64];
	struct fan_stats st, before;

	fx_tree();
	fx_policy(&fx.pol, NULL);
	fx_engine();

	/* A write drops the ignore mark: the next open is checked again. */
	ck_assert_int_eq(open_as(0, fx.work, "a/b/ok.txt"), 0);
	ck_assert_int_eq(open_as(0, fx.work, "a/b/ok.txt"), 0);
	ck_assert_int_eq(decides_for(fx.work, "a/b/ok.txt"), 1);
	snprintf(from, sizeof(from), "%s/a/b/ok.txt", fx.work);
	ck_assert_int_eq(run_child(0, from, O_WRONLY | O_APPEND, 0), 0);
	ck_assert_int_eq(open_as(0, fx.work, "a/b/ok.txt"), 0);
	ck_assert_int_ge(decides_for(fx.work, "a/b/ok.txt"), 2);

	/* A cached file moved into ~/.ssh: the cache is dropped, the new name is denied. */
	ck_assert_int_eq(open_as(0, fx.work, "a/b/moveme.txt"), 0);
	ck_assert_int_eq(open_as(0, fx.work, "a/b/moveme.txt"), 0);
	ck_assert_int_eq(decides_for(fx.work, "a/b/moveme.txt"), 1);
	stats(&before);
	snprintf(from, sizeof(from), "%s/a/b/moveme.txt", fx.work);
	snprintf(to, sizeof(to), "%s/.ssh/moveme.txt", fx.home);
	ck_assert_int_eq(rename(from, to), 0);
	ck_assert_msg(wait_stat(offsetof(struct fan_stats, st_flushes), before.st_flushes) == 0,
	    "no cache flush after a move into ~/.ssh");
	ck_assert_int_eq(open_as(1, fx.home, ".ssh/moveme.txt"), EPERM);
	ck_assert_str_eq(last_reason(fx.home, ".ssh/moveme.txt"), FANR_DENY_ACTION);

	/* A move that lands under no rule leaves the cache alone. */
	ck_assert_int_eq(open_as(0, fx.work, "a/b/keep.txt"), 0);
	ck_assert_int_eq(open_as(0, fx.work, "a/b/keep.txt"), 0);
	ck_assert_int_eq(decides_for(fx.work, "a/b/keep.txt"), 1);
	stats(&before);
	snprintf(from, sizeof(from), "%s/a/b/other.txt", fx.work);
	snprintf(to, sizeof(to), "%s/a/b/other2.txt", fx.work);
	ck_assert_int_eq(rename(from, to), 0);
	ck_assert_msg(wait_stat(offsetof(struct fan_stats, st_renames), before.st_renames) == 0,
	    "the move watch saw no rename");
	stats(&st);
	ck_assert_uint_eq(st.st_flushes, before.st_flushes);
	ck_assert_int_eq(open_as(0, fx.work, "a/b/keep.txt"), 0);
	ck_assert_int_eq(decides_for(fx.work, "a/b/keep.txt"), 1);

	/* A directory moved to where a .env below it would match drops the cache too. */
	snprintf(from, sizeof(from), "%s/outside", fx.root);
	mkfile(from, NULL, 0);
	snprintf(to, sizeof(to), "%s/outside/d/", fx.root);
	mkfile(to, NULL, 0);
	stats(&before);
	snprintf(from, sizeof(from), "%s/outside/d", fx.root);
	snprintf(to, sizeof(to), "%s/a/d", fx.work);
	ck_assert_int_eq(rename(from, to), 0);
	ck_assert_msg(wait_stat(offsetof(struct fan_stats, st_flushes), before.st_flushes) == 0,
	    "no cache flush after a directory move under a suffix root");
	check_one_answer_each();
}
END_TEST

START_TEST(test_exact_marks)
{
	char p[PATH_MAX + 64], q[PATH_MAX + 64], pat[PATH_MAX + 64], *cause = NULL;
	struct fan_stats st;
	size_t inode = 0, children = 0, fs = 0;

	fx_tree();
	/* A second tmpfs with exact rules only: inode and directory marks, no filesystem mark. */
	fx_tmpfs(fx.root2, sizeof(fx.root2));
	snprintf(p, sizeof(p), "%s/dir/secret.txt", fx.root2);
	mkfile(p, "secret\n", 0600);
	snprintf(p, sizeof(p), "%s/dir/sibling.txt", fx.root2);
	mkfile(p, "x\n", 0600);
	snprintf(p, sizeof(p), "%s/other/x.txt", fx.root2);
	mkfile(p, "x\n", 0600);
	fanpolicy_init(&fx.pol);
	snprintf(pat, sizeof(pat), "%s/dir/secret.txt", fx.root2);
	ck_assert_int_eq(fanpolicy_add(&fx.pol, pat, strlen(pat), NULL, FAN_ACTION_DENY, &cause),
	    0);
	snprintf(pat, sizeof(pat), "%s/dir/later.txt", fx.root2);
	ck_assert_int_eq(fanpolicy_add(&fx.pol, pat, strlen(pat), NULL, FAN_ACTION_DENY, &cause),
	    0);
	ck_assert_int_eq(fanpolicy_resolve(&fx.pol, &cause), 0);
	fx_engine();
	for (size_t i = 0; i < fx.plan.pl_nmarks; i++) {
		inode += fx.plan.pl_marks[i].fm_kind == FAN_PLAN_INODE;
		children += fx.plan.pl_marks[i].fm_kind == FAN_PLAN_CHILDREN;
		fs += fx.plan.pl_marks[i].fm_kind == FAN_PLAN_FILESYSTEM;
	}
	ck_assert_uint_eq(inode, 1);
	ck_assert_uint_eq(children, 1);
	ck_assert_uint_eq(fs, 0);

	ck_assert_int_eq(open_as(1, fx.root2, "dir/secret.txt"), EPERM);
	ck_assert_int_eq(open_as(0, fx.root2, "dir/secret.txt"), 0);
	/* A sibling: seen through the directory mark, then cached. */
	ck_assert_int_eq(open_as(1, fx.root2, "dir/sibling.txt"), 0);
	ck_assert_int_eq(open_as(1, fx.root2, "dir/sibling.txt"), 0);
	ck_assert_int_eq(decides_for(fx.root2, "dir/sibling.txt"), 1);
	/* Elsewhere on that filesystem nothing is marked: no event at all. */
	ck_assert_int_eq(open_as(1, fx.root2, "other/x.txt"), 0);
	ck_assert_int_eq(decides_for(fx.root2, "other/x.txt"), 0);

	/* A file that appears later at an exact path is caught by the directory mark. */
	snprintf(p, sizeof(p), "%s/dir/later.txt", fx.root2);
	mkfile(p, "later\n", 0600); /* our own open: answered by the handler thread */
	ck_assert_int_eq(open_as(1, fx.root2, "dir/later.txt"), EPERM);

	/* A hard link elsewhere: the inode mark follows it and the rule is found by inode. */
	snprintf(p, sizeof(p), "%s/dir/secret.txt", fx.root2);
	snprintf(q, sizeof(q), "%s/other/link.txt", fx.root2);
	ck_assert_int_eq(link(p, q), 0);
	ck_assert_int_eq(open_as(1, fx.root2, "other/link.txt"), EPERM);
	int by_inode = 0;
	pthread_mutex_lock(&fx.mu);
	for (size_t i = 0; i < fx.nlog; i++)
		by_inode |= fx.log[i].phase == FAN_PHASE_DECIDE && strcmp(fx.log[i].path, q) == 0 &&
		    fx.log[i].by_inode && strcmp(fx.log[i].marked, p) == 0;
	pthread_mutex_unlock(&fx.mu);
	ck_assert(by_inode);

	/* Replaced by rename (a new inode): the directory mark and the path still catch it. */
	snprintf(q, sizeof(q), "%s/dir/new.tmp", fx.root2);
	mkfile(q, "new secret\n", 0600);
	stats(&st);
	uint64_t flushes = st.st_flushes;
	ck_assert_int_eq(rename(q, p), 0);
	/* The move lands on a rule: wait for the cache to go (the documented window). */
	ck_assert_msg(wait_stat(offsetof(struct fan_stats, st_flushes), flushes) == 0,
	    "no cache flush after a move onto an exact path");
	ck_assert_int_eq(open_as(1, fx.root2, "dir/secret.txt"), EPERM);
	check_one_answer_each();
	stats(&st);
	ck_assert_uint_eq(st.st_failed, 0);
	free(cause);
}
END_TEST

START_TEST(test_decision_failures)
{
	struct fan_stats st;

	fx_tree();
	fx_policy(&fx.pol, NULL);
	fx_engine();
	pthread_mutex_lock(&fx.eng_mu);
	fanotify_engine_set_timeout(fx.eng, 100);
	pthread_mutex_unlock(&fx.eng_mu);

	static const struct {
		enum cb_mode mode;
		const char *reason;
	} cases[] = {
		{ MODE_TIMEOUT, FANR_DECISION_TIMEOUT },
		{ MODE_SLOW, FANR_DECISION_TIMEOUT },
		{ MODE_ERROR, FANR_DECISION_ERROR },
		{ MODE_BAD, FANR_DECISION_ERROR },
	};
	for (size_t i = 0; i < nitems(cases); i++) {
		pthread_mutex_lock(&fx.mu);
		fx.mode = cases[i].mode;
		pthread_mutex_unlock(&fx.mu);
		/* A file no rule names: only the failure can deny it. */
		ck_assert_int_eq(open_as(1, fx.work, "a/b/ok2.txt"), EPERM);
		ck_assert_str_eq(last_reason(fx.work, "a/b/ok2.txt"), cases[i].reason);
		/* Unsupervised openers are decided normally meanwhile. */
		ck_assert_int_eq(open_as(0, fx.work, "a/b/.env"), 0);
	}
	pthread_mutex_lock(&fx.mu);
	fx.mode = MODE_POLICY;
	pthread_mutex_unlock(&fx.mu);
	/* Failed answers are never cached: the next open is checked and allowed. */
	int before = decides_for(fx.work, "a/b/ok2.txt");
	ck_assert_int_eq(open_as(1, fx.work, "a/b/ok2.txt"), 0);
	ck_assert_int_eq(decides_for(fx.work, "a/b/ok2.txt"), before + 1);
	stats(&st);
	ck_assert_uint_eq(st.st_timeouts, 2);
	ck_assert_uint_eq(st.st_failed, 4);
	check_one_answer_each();
}
END_TEST

START_TEST(test_dispatch)
{
	struct fanotify_event_metadata m[3];
	struct fan_stats st;
	char *cause = NULL;
	int fd;

	fx_tree();
	fx_policy(&fx.pol, NULL);
	fx_engine();
	fx_stop(); /* dispatch by hand */

	/* An overflow: reported as lost coverage. */
	memset(m, 0, sizeof(m));
	m[0].event_len = sizeof(m[0]);
	m[0].vers = FANOTIFY_METADATA_VERSION;
	m[0].metadata_len = sizeof(m[0]);
	m[0].mask = FAN_Q_OVERFLOW;
	m[0].fd = FAN_NOFD;
	/* A permission record without an fd: cannot be answered, reported. */
	m[1] = m[0];
	m[1].mask = FAN_OPEN_PERM;
	m[1].pid = getpid();
	/* A permission record the kernel never sent: the answer fails, the fd is closed. */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	m[2] = m[1];
	m[2].fd = fd;
	ck_assert_int_eq(fanotify_engine_dispatch(fx.eng, m, sizeof(m), cb, NULL, &cause), 3);
	ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
	ck_assert_int_eq(errno, EBADF);
	fanotify_engine_stats(fx.eng, &st);
	ck_assert_uint_eq(st.st_overflows, 1);
	ck_assert_uint_eq(st.st_unanswered, 1);
	ck_assert_uint_eq(st.st_events, 1);
	ck_assert_int_eq(fx.losts, 2);
	ck_assert_int_eq(fx.answers, 1);
	ck_assert_str_eq(fx.lost, FAN_LOST_NO_FD);

	/* A notification record (not a permission event): its fd is closed, nothing else. */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	m[0].mask = FAN_OPEN;
	m[0].fd = fd;
	ck_assert_int_eq(fanotify_engine_dispatch(fx.eng, m, sizeof(m[0]), cb, NULL, &cause), 1);
	ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
	ck_assert_int_eq(fx.answers, 1);

	/* Malformed buffers are refused. */
	m[0].fd = FAN_NOFD;
	m[0].mask = FAN_Q_OVERFLOW;
	ck_assert_int_eq(fanotify_engine_dispatch(fx.eng, m, 10, cb, NULL, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "truncated"));
	m[0].event_len = 8;
	ck_assert_int_eq(fanotify_engine_dispatch(fx.eng, m, sizeof(m[0]), cb, NULL, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "malformed"));
	m[0].event_len = sizeof(m[0]) * 2;
	ck_assert_int_eq(fanotify_engine_dispatch(fx.eng, m, sizeof(m[0]), cb, NULL, &cause), -1);
	m[0].event_len = sizeof(m[0]);
	m[0].vers = FANOTIFY_METADATA_VERSION + 1;
	ck_assert_int_eq(fanotify_engine_dispatch(fx.eng, m, sizeof(m[0]), cb, NULL, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "version"));
	ck_assert_int_eq(fanotify_engine_dispatch(fx.eng, m, 0, cb, NULL, &cause), 0);
	free(cause);
	fx_start();
}
END_TEST

START_TEST(test_set_plan)
{
	struct fanpolicy pol2;
	struct fan_plan plan2;
	char pat[PATH_MAX + 64], *cause = NULL;

	fx_tree();
	fx_policy(&fx.pol, NULL);
	fx_engine();
	ck_assert_int_eq(open_as(1, fx.work, "a/b/ok.txt"), 0);
	ck_assert_int_eq(open_as(1, fx.work, "a/b/ok.txt"), 0);
	ck_assert_int_eq(decides_for(fx.work, "a/b/ok.txt"), 1);

	/* A new policy that names ok.txt: the cache must not hide it. */
	snprintf(pat, sizeof(pat), "%s/a/b/ok.txt", fx.work);
	fx_policy(&pol2, pat);
	ck_assert_int_eq(fanpolicy_plan(&pol2, &plan2, &cause), 0);
	pthread_mutex_lock(&fx.eng_mu);
	ck_assert_msg(fanotify_engine_set_plan(fx.eng, &plan2, &cause) == 0, "%s", cause);
	pthread_mutex_unlock(&fx.eng_mu);
	ck_assert_int_eq(open_as(1, fx.work, "a/b/ok.txt"), EPERM);
	ck_assert_int_eq(open_as(1, fx.home, ".ssh/id_ed25519"), EPERM);

	/* Back to the first policy, then swap the stores (the engine borrows the policy). */
	pthread_mutex_lock(&fx.eng_mu);
	ck_assert_int_eq(fanotify_engine_set_plan(fx.eng, &fx.plan, &cause), 0);
	pthread_mutex_unlock(&fx.eng_mu);
	fanpolicy_plan_free(&plan2);
	fanpolicy_free(&pol2);
	ck_assert_int_eq(open_as(1, fx.work, "a/b/ok.txt"), 0);
	ck_assert_int_eq(open_as(1, fx.home, ".ssh/id_ed25519"), EPERM);
	pthread_mutex_lock(&fx.eng_mu);
	ck_assert_int_eq(fanotify_engine_flush_cache(fx.eng, &cause), 0);
	pthread_mutex_unlock(&fx.eng_mu);
	int before = decides_for(fx.work, "a/b/ok.txt");
	ck_assert_int_eq(open_as(1, fx.work, "a/b/ok.txt"), 0);
	ck_assert_int_eq(decides_for(fx.work, "a/b/ok.txt"), before + 1);
	check_one_answer_each();
	free(cause);
}
END_TEST

START_TEST(test_close)
{
	struct fan_engine *e;
	char *cause = NULL;

	fx_tree();
	fx_policy(&fx.pol, NULL);
	ck_assert_int_eq(fanpolicy_plan(&fx.pol, &fx.plan, &cause), 0);
	/* Open and close twice: the second engine starts from nothing. */
	for (int i = 0; i < 2; i++) {
		ck_assert_msg(fanotify_engine_open(&e, &fx.plan, &cause) == 0, "%s", cause);
		ck_assert_int_ge(fanotify_engine_fd(e), 0);
		fanotify_engine_close(e);
	}
	fanotify_engine_close(NULL);
	/* With no engine left, opens on the tree raise nothing and succeed. */
	ck_assert_int_eq(open_as(1, fx.home, ".ssh/id_ed25519"), 0);
	free(cause);
}
END_TEST

static Suite *
fanotify_suite(void)
{
	Suite *s = suite_create("fanotify");
	TCase *tc = tcase_create("engine");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_deny_allow_cache);
	tcase_add_test(tc, test_write_and_rename);
	tcase_add_test(tc, test_exact_marks);
	tcase_add_test(tc, test_decision_failures);
	tcase_add_test(tc, test_dispatch);
	tcase_add_test(tc, test_set_plan);
	tcase_add_test(tc, test_close);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(fanotify_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
