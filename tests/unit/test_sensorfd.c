/*
 * test_sensorfd.c: the fanotify group handover's messages (lib/sensorfd.c)
 * and the descriptor passing under them (lib/fdpass.c).
 */
#include <sys/socket.h>

#include "fdpass.h"
#include "sensorfd.h"
#include "unit.h"

START_TEST(test_request_round_trip)
{
	char *req = sensorfd_request(4096), *cause = NULL;
	int64_t nofile = 0;

	ck_assert_ptr_nonnull(req);
	ck_assert_int_eq(sensorfd_parse_request(req, strlen(req), &nofile, &cause), 0);
	ck_assert_int_eq(nofile, 4096);
	free(req);
	/* No bound: the default. Out of range: as far as any table reaches. */
	const char *dflt = "{\"method\":\"sensor.fanotify_group\",\"params\":{}}";
	ck_assert_int_eq(sensorfd_parse_request(dflt, strlen(dflt), &nofile, &cause), 0);
	ck_assert_int_eq(nofile, SENSORFD_NOFILE_DEFAULT);
	const char *huge = "{\"method\":\"sensor.fanotify_group\",\"params\":{\"nofile\":-5}}";
	ck_assert_int_eq(sensorfd_parse_request(huge, strlen(huge), &nofile, &cause), 0);
	ck_assert_int_eq(nofile, SENSORFD_NOFILE_MAX);
}
END_TEST

START_TEST(test_request_refused)
{
	static const char *bad[] = {
		"",
		"[]",
		"{\"method\":\"sensor.register\",\"params\":{}}",
		"{\"method\":\"sensor.fanotify_group\"}",
		"{\"method\":\"sensor.fanotify_group\",\"params\":[]}",
		"{\"method\":\"sensor.fanotify_group\",\"params\":{\"nofile\":\"9\"}}",
		/* Trailing bytes: not one object. */
		"{\"method\":\"sensor.fanotify_group\",\"params\":{}}{}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *cause = NULL;
		int64_t nofile = 7;
		ck_assert_msg(sensorfd_parse_request(bad[i], strlen(bad[i]), &nofile, &cause) == -1,
		    "accepted %s", bad[i]);
		ck_assert_ptr_nonnull(cause);
		free(cause);
	}
	/* An embedded NUL is refused, not read up to. */
	char *cause = NULL;
	int64_t nofile;
	const char nul[] = "{\"method\":\"sensor.fanotify_group\",\"params\":{}}\0x";
	ck_assert_int_eq(sensorfd_parse_request(nul, sizeof(nul) - 1, &nofile, &cause), -1);
	free(cause);
}
END_TEST

START_TEST(test_replies)
{
	struct sensorfd_reply r;
	char *cause = NULL;
	const char *hold = "{\"result\":{\"adopt\":false}}";
	const char *adopt = "{\"result\":{\"adopt\":true,\"cgroups\":[\"gensee/op_1\"]}}";
	const char *conflict = "{\"error\":{\"code\":\"conflict\",\"message\":\"held\"}}";

	ck_assert_int_eq(sensorfd_parse_reply(hold, strlen(hold), &r, &cause), 0);
	ck_assert(!r.sr_adopt && r.sr_cgroups == NULL && r.sr_error[0] == '\0');
	ck_assert_int_eq(sensorfd_parse_reply(adopt, strlen(adopt), &r, &cause), 0);
	ck_assert(r.sr_adopt && json_object_array_length(r.sr_cgroups) == 1);
	json_object_put(r.sr_cgroups);
	ck_assert_int_eq(sensorfd_parse_reply(conflict, strlen(conflict), &r, &cause), 0);
	ck_assert_str_eq(r.sr_error, "conflict");
	ck_assert_str_eq(r.sr_message, "held");

	static const char *bad[] = {
		"{}",
		"{\"result\":{\"adopt\":true}}",
		"{\"result\":{\"adopt\":true,\"cgroups\":[1]}}",
		"{\"result\":{\"adopt\":true,\"cgroups\":[\"\"]}}",
		"{\"result\":{},\"error\":{\"code\":\"x\"}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(sensorfd_parse_reply(bad[i], strlen(bad[i]), &r, &cause) == -1,
		    "accepted %s", bad[i]);
		ck_assert_ptr_null(r.sr_cgroups);
		free(cause);
		cause = NULL;
	}
}
END_TEST

/* One message, one descriptor; two descriptors are refused and closed. */
START_TEST(test_fdpass)
{
	int sv[2], p[2], got = -1;
	char buf[64];
	struct stat a, b;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(fdpass_send(sv[0], "hi", 2, p[0]), 0);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), &got), 2);
	ck_assert_int_ge(got, 0);
	ck_assert_int_eq(fstat(got, &a), 0);
	ck_assert_int_eq(fstat(p[0], &b), 0);
	ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	ck_assert_int_eq(fcntl(got, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(got);

	/* Without a descriptor. */
	ck_assert_int_eq(fdpass_send(sv[0], "no", 2, -1), 0);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), &got), 2);
	ck_assert_int_eq(got, -1);

	/* Two at once, by hand. */
	union { struct cmsghdr h; char b[CMSG_SPACE(2 * sizeof(int))]; } u;
	struct iovec iov = { .iov_base = "xx", .iov_len = 2 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
		.msg_controllen = sizeof(u.b) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	int two[2] = { p[0], p[1] };
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(two));
	memcpy(CMSG_DATA(c), two, sizeof(two));
	ck_assert_int_eq(sendmsg(sv[0], &m, 0), 2);
	errno = 0;
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), &got), -1);
	ck_assert_int_eq(errno, EBADMSG);
	ck_assert_int_eq(got, -1);
	close(sv[0]);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}
END_TEST

static Suite *
sensorfd_suite(void)
{
	Suite *s = suite_create("sensorfd");
	TCase *tc = tcase_create("sensorfd");

	tcase_add_test(tc, test_request_round_trip);
	tcase_add_test(tc, test_request_refused);
	tcase_add_test(tc, test_replies);
	tcase_add_test(tc, test_fdpass);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(sensorfd_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
