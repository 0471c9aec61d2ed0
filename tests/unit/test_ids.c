/*
 * test_ids.c: random identifiers and their exact syntax (lib/ids.c).
 *
 * ids_valid is what stands between a peer-supplied id and a path or cgroup
 * name, so the rejections matter as much as the format.
 */
#include "ids.h"
#include "unit.h"

#define NIDS 10000

static int
is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

START_TEST(test_format)
{
	char id[ID_MAX_LEN];

	ck_assert_int_eq(ids_init(), 0);
	ck_assert_int_eq(ids_new("op_", id, sizeof(id)), 0);
	ck_assert_uint_eq(strlen(id), 3 + 2 * ID_RANDOM_BYTES);
	ck_assert_int_eq(strncmp(id, "op_", 3), 0);
	for (size_t i = 3; i < strlen(id); i++)
		ck_assert_msg(is_lower_hex(id[i]), "byte %zu of %s is not lowercase hex", i, id);
	ck_assert_int_eq(ids_valid("op_", id), 1);
	ck_assert_int_eq(ids_valid("lease_", id), 0);

	/* The longest prefix the header allows still fits ID_MAX_LEN. */
	ck_assert_int_eq(ids_new("abcdefg", id, sizeof(id)), 0);
	ck_assert_int_eq(ids_valid("abcdefg", id), 1);
	ck_assert_int_eq(ids_new("", id, sizeof(id)), 0);
	ck_assert_uint_eq(strlen(id), 2 * ID_RANDOM_BYTES);
	ck_assert_int_eq(ids_valid("", id), 1);
}
END_TEST

START_TEST(test_buffer_too_small)
{
	char id[ID_MAX_LEN];

	memset(id, 'X', sizeof(id));
	ck_assert_int_eq(ids_init(), 0);
	/* prefix + 32 + NUL is needed; one byte less is refused, nothing written */
	ck_assert_int_eq(ids_new("op_", id, 3 + 32), -1);
	ck_assert_int_eq(id[0], 'X');
	ck_assert_int_eq(ids_new("op_", id, 3 + 32 + 1), 0);
	ck_assert_uint_eq(strlen(id), 35);
}
END_TEST

static int
cmp_id(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

START_TEST(test_unique)
{
	char (*v)[ID_MAX_LEN] = calloc(NIDS, sizeof(*v));

	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(ids_init(), 0);
	for (int i = 0; i < NIDS; i++) {
		ck_assert_int_eq(ids_new("op_", v[i], sizeof(v[i])), 0);
		ck_assert_int_eq(ids_valid("op_", v[i]), 1);
	}
	qsort(v, NIDS, sizeof(*v), cmp_id);
	for (int i = 1; i < NIDS; i++)
		ck_assert_msg(strcmp(v[i - 1], v[i]) != 0, "duplicate id %s", v[i]);
	free(v);
}
END_TEST

START_TEST(test_valid_rejects)
{
	const char *bad[] = {
		"",
		"op_",
		"../",
		"op_../",
		"op_..",
		"op_../../../../../../../../etc/passwd",
		"op_0123456789abcdef0123456789abcde/",
		"op_0123456789abcdef0123456789ab/../",
		"op_0123456789ABCDEF0123456789abcdef",
		"op_0123456789abcdef0123456789abcdeF",
		"OP_0123456789abcdef0123456789abcdef",
		"op_0123456789abcdef0123456789abcde",
		"op_0123456789abcdef0123456789abcdef0",
		"op_0123456789abcdef0123456789abcdef\n",
		" op_0123456789abcdef0123456789abcdef",
		"op-0123456789abcdef0123456789abcdef",
		"ip_0123456789abcdef0123456789abcdef",
		"0123456789abcdef0123456789abcdef",
		"op_0123456789abcdef0123456789abcdeg",
		"op_0123456789abcdef 123456789abcdef",
		"op_+123456789abcdef0123456789abcdef",
		"op_\303\25123456789abcdef0123456789abcdef", /* non-ASCII (U+00E9) */
	};

	for (size_t i = 0; i < nitems(bad); i++)
		ck_assert_msg(ids_valid("op_", bad[i]) == 0, "'%s' accepted", bad[i]);
	ck_assert_int_eq(ids_valid("op_", NULL), 0);
	ck_assert_int_eq(ids_valid("op_", "op_0123456789abcdef0123456789abcdef"), 1);
	ck_assert_int_eq(ids_valid("op_", "op_ffffffffffffffffffffffffffffffff"), 1);
	ck_assert_int_eq(ids_valid("op_", "op_00000000000000000000000000000000"), 1);
}
END_TEST

static Suite *
ids_suite(void)
{
	Suite *s = suite_create("ids");
	TCase *tc = tcase_create("ids");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_format);
	tcase_add_test(tc, test_buffer_too_small);
	tcase_add_test(tc, test_unique);
	tcase_add_test(tc, test_valid_rejects);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(ids_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
