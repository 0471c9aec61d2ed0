/*
 * test_snapshot.c: path rules, diffs, merge planning and the transactional
 * apply/rollback of lib/snapshot.c.
 *
 * The threats: a merge path climbing out of the workspace, a symlink
 * planted by an agent steering a root write, a merge that half-applies, a
 * crash in the middle that leaves the source broken.
 */
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <json-c/json.h>

#include "snapshot.h"
#include "unit.h"

static void
put(const char *dir, const char *rel, const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static char *
get(const char *dir, const char *rel)
{
	char p[512], *buf = NULL;
	size_t len;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	if (util_read_path(p, 1 << 20, &buf, &len) != 0)
		return NULL;
	return buf;
}

static void
sub(char *out, size_t len, const char *a, const char *b)
{
	ck_assert_uint_lt((size_t)snprintf(out, len, "%s/%s", a, b), len);
}

static int
dfd(const char *p)
{
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return fd;
}

START_TEST(test_git_metadata_names)
{
	/* Repository metadata anywhere in a path: what merges skip unless named. */
	static const char *meta[] = { ".git", ".git/config", ".git/hooks/post-checkout",
	    "sub/.git", "sub/.git/HEAD", ".gitattributes", "a/b/.gitattributes" };
	static const char *plain[] = { "git", ".gitignore", ".github/workflows/ci.yml",
	    "a.git", "x/.gitattributes.bak", "x/.gitx/y", "dotgit/.git-blame-ignore" };

	for (size_t i = 0; i < sizeof(meta) / sizeof(meta[0]); i++)
		ck_assert_msg(snapshot_git_metadata(meta[i]), "%s not metadata", meta[i]);
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
		ck_assert_msg(!snapshot_git_metadata(plain[i]), "%s metadata", plain[i]);
}
END_TEST

START_TEST(test_path_rules)
{
	char rel[256], *cause = NULL;
	const char *ok[][2] = {
		{ "src/a.c", "src/a.c" }, { "/w/src/a.c", "src/a.c" }, { "/workspace/x", "x" },
		{ "a//b/", "a/b" }, { "/w//c", "c" },
	};
	const char *bad[] = {
		"", "../x", "a/../b", "/etc/passwd", "/w", "/w/", "./x", "/w/../etc", "/wx/y",
		"/workspace", "a/./b", "..",
	};

	for (size_t i = 0; i < nitems(ok); i++) {
		ck_assert_int_eq(snapshot_path_rel("/w", ok[i][0], rel, sizeof(rel), &cause), 0);
		ck_assert_str_eq(rel, ok[i][1]);
	}
	for (size_t i = 0; i < nitems(bad); i++) {
		ck_assert_msg(snapshot_path_rel("/w", bad[i], rel, sizeof(rel), &cause) == -1,
		    "accepted %s", bad[i]);
		ck_assert_ptr_nonnull(cause);
		free(cause);
		cause = NULL;
	}
	/* Too long for the buffer: refused, not truncated. */
	ck_assert_int_eq(snapshot_path_rel("/w", "abcdefghijkl", rel, 8, &cause), -1);
	free(cause);
}
END_TEST

/* base: a, d/b, gone, d2/x; view: a changed, d/b same, gone deleted, new added, d2 -> file */
static void
make_pair(const char **basep, const char **viewp)
{
	const char *base = unit_tmpdir("/tmp"), *view = unit_tmpdir("/tmp");
	char p[512];

	sub(p, sizeof(p), base, "d");
	ck_assert_int_eq(mkdir(p, 0755), 0);
	sub(p, sizeof(p), base, "d2");
	ck_assert_int_eq(mkdir(p, 0755), 0);
	put(base, "a", "one\n");
	put(base, "d/b", "bee\n");
	put(base, "gone", "x\n");
	put(base, "d2/x", "x\n");
	sub(p, sizeof(p), view, "d");
	ck_assert_int_eq(mkdir(p, 0755), 0);
	put(view, "a", "two\n");	/* same size, other bytes */
	put(view, "d/b", "bee\n");
	put(view, "new", "n\n");
	put(view, "d2", "now a file\n");
	*basep = base;
	*viewp = view;
}

START_TEST(test_diff)
{
	const char *base, *view;
	struct snapshot_changes c;
	char *cause = NULL;
	int b, v;

	make_pair(&base, &view);
	b = dfd(base);
	v = dfd(view);
	ck_assert_int_eq(snapshot_diff(b, v, &c, &cause), 0);
	/* Sorted walk: a, d2/x (deleted before d2 turns into a file), d2, gone, new. */
	ck_assert_uint_eq(c.scs_n, 5);
	ck_assert_str_eq(c.scs_v[0].sc_path, "a");
	ck_assert_int_eq(c.scs_v[0].sc_kind, SC_MODIFIED);
	ck_assert_str_eq(c.scs_v[1].sc_path, "d2/x");
	ck_assert_int_eq(c.scs_v[1].sc_kind, SC_DELETED);
	ck_assert_str_eq(c.scs_v[2].sc_path, "d2");
	ck_assert_int_eq(c.scs_v[2].sc_before, SE_DIR);
	ck_assert_int_eq(c.scs_v[2].sc_after, SE_FILE);
	ck_assert_str_eq(c.scs_v[3].sc_path, "gone");
	ck_assert_int_eq(c.scs_v[3].sc_kind, SC_DELETED);
	ck_assert_str_eq(c.scs_v[4].sc_path, "new");
	ck_assert_int_eq(c.scs_v[4].sc_kind, SC_ADDED);
	struct json_object *j = snapshot_changes_json(&c);
	ck_assert_uint_eq(json_object_array_length(j), 5);
	json_object_put(j);
	snapshot_changes_free(&c);
	/* A mode change alone is a change; a symlink is compared by its target. */
	char p[512], q[512];
	sub(p, sizeof(p), view, "d/b");
	ck_assert_int_eq(chmod(p, 0600), 0);
	sub(p, sizeof(p), base, "l");
	ck_assert_int_eq(symlink("/etc", p), 0);
	sub(q, sizeof(q), view, "l");
	ck_assert_int_eq(symlink("/tmp", q), 0);
	ck_assert_int_eq(snapshot_diff(b, v, &c, &cause), 0);
	int seen_b = 0, seen_l = 0;
	for (size_t i = 0; i < c.scs_n; i++) {
		seen_b |= strcmp(c.scs_v[i].sc_path, "d/b") == 0;
		seen_l |= strcmp(c.scs_v[i].sc_path, "l") == 0 && c.scs_v[i].sc_after == SE_LINK;
	}
	ck_assert(seen_b && seen_l);
	snapshot_changes_free(&c);
	close(b);
	close(v);
}
END_TEST

/* base, fork, src trees for planning: fork changes a, b, c; src changes b the same, c differently. */
static void
make_three(const char **bp, const char **fp, const char **sp)
{
	const char *d[3] = { unit_tmpdir("/tmp"), unit_tmpdir("/tmp"), unit_tmpdir("/tmp") };

	for (int i = 0; i < 3; i++) {
		put(d[i], "a", "a0\n");
		put(d[i], "b", "b0\n");
		put(d[i], "c", "c0\n");
		put(d[i], "keep", "k\n");
	}
	put(d[1], "a", "a1\n");
	put(d[1], "b", "b1\n");
	put(d[1], "c", "c1\n");
	put(d[1], "added", "new\n");
	put(d[2], "b", "b1\n");
	put(d[2], "c", "c2\n");
	*bp = d[0];
	*fp = d[1];
	*sp = d[2];
}

START_TEST(test_plan)
{
	const char *base, *fork, *src;
	struct snapshot_plan p;
	char *cause = NULL;

	make_three(&base, &fork, &src);
	int b = dfd(base), f = dfd(fork), s = dfd(src);
	ck_assert_int_eq(snapshot_merge_plan(b, f, s, NULL, 0, &p, &cause), 0);
	ck_assert_uint_eq(p.sp_changes.scs_n, 4);
	ck_assert_uint_eq(p.sp_apply, 2);	/* a, added */
	ck_assert_uint_eq(p.sp_same, 1);	/* b */
	ck_assert_uint_eq(p.sp_conflicts, 1);	/* c */
	struct json_object *cj = snapshot_conflicts_json(&p);
	ck_assert_uint_eq(json_object_array_length(cj), 1);
	ck_assert_str_eq(json_object_get_string(json_object_object_get(
	    json_object_array_get_idx(cj, 0), "path")), "c");
	json_object_put(cj);
	snapshot_plan_free(&p);
	/* Only the selected paths. */
	const char *sel[] = { "a" };
	ck_assert_int_eq(snapshot_merge_plan(b, f, s, sel, 1, &p, &cause), 0);
	ck_assert_uint_eq(p.sp_changes.scs_n, 1);
	ck_assert_uint_eq(p.sp_conflicts, 0);
	snapshot_plan_free(&p);
	close(b);
	close(f);
	close(s);
}
END_TEST

/*
 * Threat: the source replaced a directory with a symlink to a directory
 * outside; a fork's new file below it must not be written through it.
 */
START_TEST(test_plan_symlink_in_source)
{
	const char *base = unit_tmpdir("/tmp"), *fork = unit_tmpdir("/tmp"), *src = unit_tmpdir("/tmp");
	const char *outside = unit_tmpdir("/tmp");
	struct snapshot_plan p;
	char path[512], *cause = NULL;

	for (const char *const *d = (const char *const[]){ base, fork, src, NULL }; *d; d++) {
		sub(path, sizeof(path), *d, "sub");
		if (*d != src)
			ck_assert_int_eq(mkdir(path, 0755), 0);
		else
			ck_assert_int_eq(symlink(outside, path), 0);
	}
	put(fork, "sub/evil", "x\n");
	int b = dfd(base), f = dfd(fork), s = dfd(src);
	ck_assert_int_eq(snapshot_merge_plan(b, f, s, NULL, 0, &p, &cause), 0);
	ck_assert_uint_eq(p.sp_conflicts, 1);
	ck_assert_uint_eq(p.sp_apply, 0);
	snapshot_plan_free(&p);
	sub(path, sizeof(path), outside, "evil");
	ck_assert_int_ne(access(path, F_OK), 0);
	close(b);
	close(f);
	close(s);
}
END_TEST

static int
same_tree(const char *a, const char *b)
{
	struct snapshot_changes c;
	char *cause = NULL;
	int fa = dfd(a), fb = dfd(b);

	ck_assert_int_eq(snapshot_diff(fa, fb, &c, &cause), 0);
	int same = c.scs_n == 0;
	snapshot_changes_free(&c);
	close(fa);
	close(fb);
	return same;
}

static const char *
copy_of(const char *dir)
{
	const char *parent = unit_tmpdir("/tmp");
	struct snapshot_stats st;
	static char out[512];
	char *cause = NULL;
	int s = dfd(dir), p = dfd(parent);

	ck_assert_int_eq(snapshot_copy(s, p, "c", 0, NULL, NULL, &st, &cause), 0);
	close(s);
	close(p);
	sub(out, sizeof(out), parent, "c");
	return out;
}

START_TEST(test_apply_and_copy)
{
	const char *base, *view, *txn = unit_tmpdir("/tmp");
	struct snapshot_plan p;
	char *cause = NULL;
	int rbf;

	make_pair(&base, &view);
	const char *src = copy_of(base);
	ck_assert(same_tree(base, src));
	int b = dfd(base), v = dfd(view), s = dfd(src), t = dfd(txn);
	ck_assert_int_eq(snapshot_merge_plan(b, v, s, NULL, 0, &p, &cause), 0);
	ck_assert_uint_eq(p.sp_conflicts, 0);
	int ar = snapshot_apply(v, s, t, &p, NULL, NULL, &rbf, &cause);
	ck_assert_msg(ar == 0, "apply: %s", cause);
	ck_assert(same_tree(view, src));
	char *a = get(src, "a");
	ck_assert_str_eq(a, "two\n");
	free(a);
	char state[32];
	ck_assert_int_eq(snapshot_txn_state(t, state, sizeof(state)), 0);
	ck_assert_str_eq(state, "committed");
	/* A committed transaction is never rolled back. */
	ck_assert_int_eq(snapshot_rollback(s, t, &cause), -1);
	free(cause);
	snapshot_plan_free(&p);
	close(b);
	close(v);
	close(s);
	close(t);
}
END_TEST

/* Make the last entry fail: its staged copy disappears before it is applied. */
static void
sabotage(size_t i, void *arg)
{
	char p[512];

	if (i != 4)
		return;
	sub(p, sizeof(p), (const char *)arg, "stage/4");
	ck_assert_int_eq(unlink(p), 0);
}

START_TEST(test_apply_failure_rolls_back)
{
	const char *base, *view, *txn = unit_tmpdir("/tmp");
	struct snapshot_plan p;
	char *cause = NULL;
	int rbf;

	make_pair(&base, &view);
	const char *src = copy_of(base);
	int b = dfd(base), v = dfd(view), s = dfd(src), t = dfd(txn);
	ck_assert_int_eq(snapshot_merge_plan(b, v, s, NULL, 0, &p, &cause), 0);
	ck_assert_uint_eq(p.sp_apply, 5);
	ck_assert_int_eq(snapshot_apply(v, s, t, &p, sabotage, (void *)txn, &rbf, &cause), -1);
	ck_assert_ptr_nonnull(cause);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(rbf, 0);
	/* Entries 0..3 were applied, then rolled back: the source is as it was. */
	ck_assert(same_tree(base, src));
	snapshot_plan_free(&p);
	close(b);
	close(v);
	close(s);
	close(t);
}
END_TEST

static void
crash_at_3(size_t i, void *arg)
{
	(void)arg;
	if (i == 3)
		_exit(0);
}

START_TEST(test_crash_midway_rollback)
{
	const char *base, *view, *txn = unit_tmpdir("/tmp");
	struct snapshot_plan p;
	char *cause = NULL, state[32];
	int rbf, status;

	make_pair(&base, &view);
	const char *src = copy_of(base);
	int b = dfd(base), v = dfd(view), s = dfd(src), t = dfd(txn);
	ck_assert_int_eq(snapshot_merge_plan(b, v, s, NULL, 0, &p, &cause), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		snapshot_apply(v, s, t, &p, crash_at_3, NULL, &rbf, &cause);
		_exit(1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert(!same_tree(base, src));	/* half applied */
	ck_assert_int_eq(snapshot_txn_state(t, state, sizeof(state)), 0);
	ck_assert_str_eq(state, "applying");
	ck_assert_int_eq(snapshot_rollback(s, t, &cause), 0);
	ck_assert(same_tree(base, src));
	/* Idempotent: a crash during the rollback is repaired by running it again. */
	ck_assert_int_eq(snapshot_txn_state(t, state, sizeof(state)), 0);
	ck_assert_str_eq(state, "rolled_back");
	snapshot_plan_free(&p);
	close(b);
	close(v);
	close(s);
	close(t);
}
END_TEST

START_TEST(test_copy_skips_devices_and_keeps_links)
{
	const char *src = unit_tmpdir("/tmp"), *dst = unit_tmpdir("/tmp");
	struct snapshot_stats st;
	char p[512], *cause = NULL, t[64];

	put(src, "f", "f\n");
	sub(p, sizeof(p), src, "link");
	ck_assert_int_eq(symlink("/etc/shadow", p), 0);
	sub(p, sizeof(p), src, "fifo");
	ck_assert_int_eq(mkfifo(p, 0600), 0);
	int s = dfd(src), d = dfd(dst);
	ck_assert_int_eq(snapshot_copy(s, d, "c", 0, NULL, NULL, &st, &cause), 0);
	ck_assert_uint_eq(st.ss_files, 1);
	ck_assert_uint_eq(st.ss_links, 1);
	ck_assert_uint_eq(st.ss_skipped, 1);
	sub(p, sizeof(p), dst, "c/link");
	ssize_t n = readlink(p, t, sizeof(t) - 1);
	ck_assert_int_gt(n, 0);
	t[n] = '\0';
	ck_assert_str_eq(t, "/etc/shadow");
	/* An existing destination is refused, never merged into. */
	ck_assert_int_eq(snapshot_copy(s, d, "c", 0, NULL, NULL, &st, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(snapshot_remove(d, "c", &cause), 0);
	ck_assert_int_eq(snapshot_remove(d, "../x", &cause), -1);
	free(cause);
	close(s);
	close(d);
}
END_TEST

/* Threat: root snapshotting a file the user cannot read. */
START_TEST(test_copy_as_user)
{
	const char *src = unit_tmpdir("/tmp"), *dst = unit_tmpdir("/tmp");
	struct snapshot_creds nobody = { 1, 65534, 65534 };
	struct snapshot_stats st;
	char p[512], *cause = NULL;

	if (geteuid() != 0) {
		fprintf(stderr, "test_copy_as_user needs root\n");
		ck_abort();
	}
	ck_assert_int_eq(chmod(src, 0755), 0);
	put(src, "secret", "s\n");
	sub(p, sizeof(p), src, "secret");
	ck_assert_int_eq(chmod(p, 0600), 0);
	int s = dfd(src), d = dfd(dst);
	ck_assert_int_eq(snapshot_copy(s, d, "c", 0, &nobody, NULL, &st, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "secret"));
	free(cause);
	cause = NULL;
	/* The identity is back to root's after the failure. */
	ck_assert_int_eq(setfsuid((uid_t)-1), 0);
	ck_assert_int_eq(snapshot_remove(d, "c", &cause), 0);
	ck_assert_int_eq(chmod(p, 0644), 0);
	ck_assert_int_eq(snapshot_copy(s, d, "c", 0, &nobody, NULL, &st, &cause), 0);
	close(s);
	close(d);
}
END_TEST

static Suite *
snapshot_suite(void)
{
	Suite *s = suite_create("snapshot");
	TCase *tc = tcase_create("snapshot");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_path_rules);
	tcase_add_test(tc, test_diff);
	tcase_add_test(tc, test_plan);
	tcase_add_test(tc, test_plan_symlink_in_source);
	tcase_add_test(tc, test_apply_and_copy);
	tcase_add_test(tc, test_apply_failure_rolls_back);
	tcase_add_test(tc, test_crash_midway_rollback);
	tcase_add_test(tc, test_copy_skips_devices_and_keeps_links);
	tcase_add_test(tc, test_copy_as_user);
	tcase_add_test(tc, test_git_metadata_names);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(snapshot_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
