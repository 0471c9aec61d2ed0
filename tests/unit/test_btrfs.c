/*
 * test_btrfs.c: lib/btrfs.c off btrfs (the real-filesystem behaviour is
 * proved by test_tclone.btrfs_* on a loop-file btrfs). The threat: an
 * ioctl issued at the wrong object, a name that is not one component, a
 * plain directory taken for a subvolume, an error that reads as success.
 */
#include <sys/stat.h>
#include <sys/vfs.h>

#include <linux/magic.h>

#include "btrfs.h"
#include "snapshot.h"
#include "unit.h"

static int
dfd(const char *p)
{
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	return fd;
}

START_TEST(test_not_btrfs_fails_closed)
{
	const char *dir = unit_tmpdir("/tmp");
	struct statfs sf;
	char p[512], *cause = NULL;
	uint64_t id = 0;
	int d = dfd(dir);

	ck_assert_int_eq(fstatfs(d, &sf), 0);
	if (sf.f_type == BTRFS_SUPER_MAGIC)
		ck_abort_msg("/tmp is btrfs here: this case needs a non-btrfs /tmp");
	snprintf(p, sizeof(p), "%s/sub", dir);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	int s = dfd(p);

	ck_assert_int_eq(gbtrfs_is_btrfs(d), 0);
	ck_assert_int_eq(gbtrfs_is_subvol(s), 0);
	/* A plain directory is never snapshotted (the ioctl is not even made). */
	ck_assert_int_eq(gbtrfs_snapshot(s, d, "snap", 1, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "not a btrfs subvolume"));
	ck_assert_int_eq(access(p, F_OK), 0);
	/* Nor destroyed: it is left as it was. */
	ck_assert_int_eq(gbtrfs_subvol_destroy(d, "sub", &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "not a btrfs subvolume"));
	ck_assert_int_eq(access(p, F_OK), 0);
	/* The kernel's refusals come back as errors with a cause. */
	ck_assert_int_eq(gbtrfs_subvol_create(d, "new", &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "btrfs: create subvolume new:"));
	ck_assert_int_eq(gbtrfs_subvol_id(d, &id, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "btrfs: subvolume id:"));
	free(cause);
	close(s);
	close(d);
}
END_TEST

START_TEST(test_names)
{
	const char *dir = unit_tmpdir("/tmp");
	char *cause = NULL, longname[4100];
	int d = dfd(dir);

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	const char *bad[] = { "", ".", "..", "a/b", "/etc", longname };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		ck_assert_int_eq(gbtrfs_subvol_create(d, bad[i], &cause), -1);
		ck_assert_int_eq(errno, EINVAL);
		ck_assert_ptr_nonnull(strstr(cause, "not one path component"));
		ck_assert_int_eq(gbtrfs_snapshot(d, d, bad[i], 0, &cause), -1);
		ck_assert_int_eq(gbtrfs_subvol_destroy(d, bad[i], &cause), -1);
	}
	free(cause);
	close(d);
}
END_TEST

/* SNAPSHOT_F_INTO fills an existing (empty) directory and gives it the source root's mode. */
START_TEST(test_copy_into)
{
	const char *src = unit_tmpdir("/tmp"), *dst = unit_tmpdir("/tmp");
	struct snapshot_stats st;
	char p[512], *cause = NULL;
	struct stat sb;

	snprintf(p, sizeof(p), "%s/f", src);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs("x\n", f);
	fclose(f);
	ck_assert_int_eq(chmod(src, 0751), 0);
	snprintf(p, sizeof(p), "%s/into", dst);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	int s = dfd(src), d = dfd(dst);
	ck_assert_int_eq(snapshot_copy(s, d, "into", SNAPSHOT_F_INTO, NULL, NULL, &st, &cause), 0);
	ck_assert_uint_eq(st.ss_files, 1);
	ck_assert_int_eq(stat(p, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 07777, 0751);
	snprintf(p, sizeof(p), "%s/into/f", dst);
	ck_assert_int_eq(access(p, F_OK), 0);
	/* Without the flag an existing destination is still refused. */
	ck_assert_int_eq(snapshot_copy(s, d, "into", 0, NULL, NULL, &st, &cause), -1);
	/* With it, a missing one is not created. */
	ck_assert_int_eq(snapshot_copy(s, d, "absent", SNAPSHOT_F_INTO, NULL, NULL, &st, &cause), -1);
	free(cause);
	close(s);
	close(d);
}
END_TEST

static Suite *
btrfs_suite(void)
{
	Suite *s = suite_create("btrfs");
	TCase *tc = tcase_create("btrfs");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_not_btrfs_fails_closed);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_copy_into);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(btrfs_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
