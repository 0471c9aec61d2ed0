/*
 * test_util.c: the small helpers every module leans on (lib/util.c).
 */
#include <pthread.h>

#include "unit.h"

START_TEST(test_parse_rfc3339)
{
	int64_t ms = 0;
	char now[40];

	ck_assert_int_eq(util_parse_rfc3339("1970-01-01T00:00:01Z", &ms), 0);
	ck_assert_int_eq(ms, 1000);
	ck_assert_int_eq(util_parse_rfc3339("2020-01-02T03:04:05.678Z", &ms), 0);
	ck_assert_int_eq(ms, 1577934245678LL);
	ck_assert_int_eq(util_parse_rfc3339("2020-01-02T03:04:05.6Z", &ms), 0);
	ck_assert_int_eq(ms, 1577934245600LL);
	util_now_rfc3339(now, sizeof(now));
	ck_assert_int_eq(util_parse_rfc3339(now, &ms), 0);
	ck_assert(ms > util_now_ms() - 5000 && ms <= util_now_ms());
	ck_assert_int_eq(util_parse_rfc3339("2020-01-02T03:04:05+01:00", &ms), -1);
	ck_assert_int_eq(util_parse_rfc3339("2020-01-02T03:04:05.Z", &ms), -1);
	ck_assert_int_eq(util_parse_rfc3339("2020-01-02 03:04:05Z", &ms), -1);
	ck_assert_int_eq(util_parse_rfc3339("2020-01-02T03:04:05Zx", &ms), -1);
	ck_assert_int_eq(util_parse_rfc3339("", &ms), -1);
	ck_assert_int_eq(util_parse_rfc3339(NULL, &ms), -1);
}
END_TEST

START_TEST(test_path_below)
{
	ck_assert(util_path_below("/a/b", "/a/b"));
	ck_assert(util_path_below("/a/b/c", "/a/b"));
	ck_assert(util_path_below("/a/b/c", "/a/b/"));
	ck_assert(!util_path_below("/a/bc", "/a/b"));
	ck_assert(!util_path_below("/a", "/a/b"));
	ck_assert(util_path_below("/anything", "/"));
	ck_assert(util_path_below("/", "/"));
	ck_assert(!util_path_below("relative", "/"));
}
END_TEST

START_TEST(test_read_line)
{
	int p[2];
	char buf[16];

	/* One line, in two writes, with more after it. */
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(write(p[1], "op_1", 4), 4);
	ck_assert_int_eq(write(p[1], "2\nrest", 7), 7);
	ck_assert_int_eq(util_read_line(p[0], buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "op_12");
	close(p[0]);
	close(p[1]);
	/* The writer gone before a whole line: no line (the child must not run). */
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(write(p[1], "op_", 3), 3);
	close(p[1]);
	ck_assert_int_eq(util_read_line(p[0], buf, sizeof(buf)), -1);
	close(p[0]);
	/* Longer than the buffer without a newline: no line either. */
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(write(p[1], "0123456789abcdefXYZ\n", 20), 20);
	ck_assert_int_eq(util_read_line(p[0], buf, sizeof(buf)), -1);
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(test_strlcpy)
{
	char buf[8];

	memset(buf, 'Z', sizeof(buf));
	ck_assert_uint_eq(util_strlcpy(buf, "abc", sizeof(buf)), 3);
	ck_assert_str_eq(buf, "abc");
	ck_assert_uint_eq(util_strlcpy(buf, "0123456789", sizeof(buf)), 10);
	ck_assert_str_eq(buf, "0123456");
	ck_assert_uint_eq(util_strlcpy(buf, "1234567", sizeof(buf)), 7);
	ck_assert_str_eq(buf, "1234567");
	memset(buf, 'Z', sizeof(buf));
	ck_assert_uint_eq(util_strlcpy(buf, "abc", 0), 3);
	ck_assert_int_eq(buf[0], 'Z');
	ck_assert_uint_eq(util_strlcpy(buf, "abc", 1), 3);
	ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(test_parse_i64)
{
	int64_t v = 77;

	ck_assert_int_eq(util_parse_i64("42", 1, 100, &v), 0);
	ck_assert_int_eq(v, 42);
	ck_assert_int_eq(util_parse_i64("1", 1, 100, &v), 0);
	ck_assert_int_eq(util_parse_i64("100", 1, 100, &v), 0);
	ck_assert_int_eq(v, 100);
	ck_assert_int_eq(util_parse_i64("-5", -5, 0, &v), 0);
	ck_assert_int_eq(v, -5);
	ck_assert_int_eq(util_parse_i64("9223372036854775807", INT64_MIN, INT64_MAX, &v), 0);
	ck_assert_int_eq(v, INT64_MAX);

	v = 77;
	const char *bad[] = { "0", "101", "", "abc", "12abc", "12 ", "1.5", "0x10",
		"9223372036854775808", "-9223372036854775809", "99999999999999999999" };
	for (size_t i = 0; i < nitems(bad); i++)
		ck_assert_msg(util_parse_i64(bad[i], 1, 100, &v) == -1, "'%s' accepted", bad[i]);
	ck_assert_int_eq(util_parse_i64(NULL, 1, 100, &v), -1);
	ck_assert_int_eq(v, 77); /* untouched on failure */
	ck_assert_int_eq(util_parse_i64("9223372036854775808", INT64_MIN, INT64_MAX, &v), -1);
}
END_TEST

START_TEST(test_cause)
{
	char *cause = NULL;

	util_cause(&cause, "x=%d %s", 5, "y");
	ck_assert_str_eq(cause, "x=5 y");
	util_cause(&cause, "second"); /* replaces (and frees) the first */
	ck_assert_str_eq(cause, "second");
	util_cause(NULL, "ignored %d", 1);
	free(cause);
}
END_TEST

START_TEST(test_read_limits)
{
	const char *d = unit_tmpdir("/tmp");
	int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char *buf, path[512];
	size_t len;
	const size_t sizes[] = { 0, 1, 4095, 4096, 4097, 10000 };

	ck_assert_int_ge(dfd, 0);
	char *data = malloc(10001);
	ck_assert_ptr_nonnull(data);
	for (size_t i = 0; i < 10000; i++)
		data[i] = (char)('a' + i % 26);

	for (size_t s = 0; s < nitems(sizes); s++) {
		size_t n = sizes[s];
		unit_write_file(dfd, "f", data, n);
		snprintf(path, sizeof(path), "%s/f", d);
		/* exactly max: read whole and NUL-terminated */
		ck_assert_int_eq(util_read_path(path, n, &buf, &len), 0);
		ck_assert_uint_eq(len, n);
		ck_assert_int_eq(buf[n], '\0');
		ck_assert_int_eq(memcmp(buf, data, n), 0);
		free(buf);
		/* one byte over: EFBIG, nothing returned */
		if (n > 0) {
			buf = (char *)1;
			errno = 0;
			ck_assert_int_eq(util_read_path(path, n - 1, &buf, &len), -1);
			ck_assert_int_eq(errno, EFBIG);
			ck_assert_ptr_eq(buf, (char *)1);
		}
	}
	/* A symlink is not followed. */
	ck_assert_int_eq(symlinkat("f", dfd, "ln"), 0);
	snprintf(path, sizeof(path), "%s/ln", d);
	ck_assert_int_eq(util_read_path(path, 100000, &buf, &len), -1);
	ck_assert_int_eq(errno, ELOOP);
	snprintf(path, sizeof(path), "%s/missing", d);
	ck_assert_int_eq(util_read_path(path, 100, &buf, &len), -1);
	ck_assert_int_eq(errno, ENOENT);
	free(data);
	close(dfd);
}
END_TEST

struct sink {
	int s_fd;
	size_t s_got;
	int s_ok;
};

static void *
sink_main(void *arg)
{
	struct sink *s = arg;
	char buf[4096];
	s->s_ok = 1;
	for (;;) {
		ssize_t n = read(s->s_fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != (char)((s->s_got + (size_t)i) % 251))
				s->s_ok = 0;
		s->s_got += (size_t)n;
	}
	return NULL;
}

START_TEST(test_write_all)
{
	int p[2];
	size_t n = 1 << 20; /* far more than a pipe holds: many short writes */
	char *buf = malloc(n);
	struct sink s = { 0 };
	pthread_t th;

	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)(i % 251);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	s.s_fd = p[0];
	ck_assert_int_eq(pthread_create(&th, NULL, sink_main, &s), 0);
	ck_assert_int_eq(util_write_all(p[1], buf, n), 0);
	close(p[1]);
	pthread_join(th, NULL);
	ck_assert_uint_eq(s.s_got, n);
	ck_assert(s.s_ok);
	close(p[0]);
	ck_assert_int_eq(util_write_all(p[1], buf, 1), -1); /* closed fd */
	ck_assert_int_eq(errno, EBADF);
	free(buf);
}
END_TEST

START_TEST(test_time)
{
	char ts[40];
	int y, mo, d, h, mi, s, ms;
	char z;

	util_now_rfc3339(ts, sizeof(ts));
	ck_assert_uint_eq(strlen(ts), 24);
	ck_assert_int_eq(sscanf(ts, "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &y, &mo, &d, &h, &mi, &s, &ms,
	    &z), 8);
	ck_assert_int_eq(z, 'Z');
	ck_assert(y >= 2024 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h < 24 && mi < 60 &&
	    s < 61 && ms < 1000);
	int64_t now = util_now_ms();
	ck_assert_int_le(llabs(now - (int64_t)time(NULL) * 1000), 2000);
	int64_t a = util_monotonic_ms();
	unit_sleep_ms(20);
	int64_t b = util_monotonic_ms();
	ck_assert_int_ge(b - a, 19);
	ck_assert_int_lt(b - a, 5000);
	/* A short buffer is truncated, still terminated. */
	util_now_rfc3339(ts, 5);
	ck_assert_uint_eq(strlen(ts), 4);
}
END_TEST

static Suite *
util_suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("util");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_strlcpy);
	tcase_add_test(tc, test_read_line);
	tcase_add_test(tc, test_path_below);
	tcase_add_test(tc, test_parse_rfc3339);
	tcase_add_test(tc, test_parse_i64);
	tcase_add_test(tc, test_cause);
	tcase_add_test(tc, test_read_limits);
	tcase_add_test(tc, test_write_all);
	tcase_add_test(tc, test_time);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(util_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
