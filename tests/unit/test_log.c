/*
 * test_log.c: bounded, nonblocking, line-atomic logging (lib/log.c).
 *
 * The log module runs a writer thread with global state, so every test here
 * depends on running in its own forked process (unit.h forces CK_FORK).
 */
#include <poll.h>
#include <pthread.h>

#include <json-c/json.h>

#include "log.h"
#include "unit.h"

#define PAYLOAD_LEN 200

static void
mkpipe(int p[2])
{
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
}

/*
 * Read from fd until it holds at least want newlines, EOF, or the deadline.
 * Returns a NUL-terminated heap buffer; *nlines counts its newlines.
 */
static char *
read_lines(int fd, int want, int timeout_ms, size_t *len, int *nlines)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);
	int lines = 0;
	int64_t deadline = util_monotonic_ms() + timeout_ms;

	ck_assert_ptr_nonnull(buf);
	while (lines < want) {
		int64_t left = deadline - util_monotonic_ms();
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (left <= 0)
			break;
		int pr = poll(&pfd, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		ck_assert_int_ge(pr, 0);
		if (pr == 0)
			break;
		if (n == cap) {
			cap *= 2;
			buf = realloc(buf, cap + 1);
			ck_assert_ptr_nonnull(buf);
		}
		ssize_t r = read(fd, buf + n, cap - n);
		ck_assert_int_ge(r, 0);
		if (r == 0)
			break;
		for (ssize_t i = 0; i < r; i++)
			if (buf[n + (size_t)i] == '\n')
				lines++;
		n += (size_t)r;
	}
	buf[n] = '\0';
	*len = n;
	*nlines = lines;
	return buf;
}

/* Nothing (more) arrives on fd within ms. */
static void
expect_silence(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, ms), 0);
}

/* "TS PROG[PID]: LEVEL: " prefix; returns the message part or NULL. */
static const char *
check_prefix(const char *line, const char *level)
{
	char want[96];
	const char *sp = strchr(line, ' ');

	/* 2026-12-02T14:50:00.123Z */
	if (sp == NULL || sp - line != 24 || line[4] != '-' || line[10] != 'T' || line[23] != 'Z')
		return NULL;
	snprintf(want, sizeof(want), " unit[%d]: %s: ", (int)getpid(), level);
	if (strncmp(sp, want, strlen(want)) != 0)
		return NULL;
	return sp + strlen(want);
}

#define THREADS 4
#define PER_THREAD 200 /* THREADS * PER_THREAD < LOG_QUEUE_LINES: nothing may drop */

static char payload[PAYLOAD_LEN + 1];

static void *
producer(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (int i = 0; i < PER_THREAD; i++)
		log_info("t%d n%d %s", t, i, payload);
	return NULL;
}

START_TEST(test_async_whole_lines)
{
	int p[2], nlines;
	pthread_t th[THREADS];
	size_t len;
	int next[THREADS] = { 0 };

	memset(payload, 'x', PAYLOAD_LEN);
	mkpipe(p);
	log_init("unit", LOG_F_ASYNC);
	log_set_fd(p[1]);
	for (int t = 0; t < THREADS; t++)
		ck_assert_int_eq(pthread_create(&th[t], NULL, producer, (void *)(intptr_t)t), 0);
	/* Read while they write: the pipe holds far less than all of it. */
	char *buf = read_lines(p[0], THREADS * PER_THREAD, 20000, &len, &nlines);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	log_shutdown();
	ck_assert_int_eq(nlines, THREADS * PER_THREAD);
	ck_assert_int_eq(buf[len - 1], '\n');
	ck_assert_int_eq(log_dropped(), 0);

	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		const char *msg = check_prefix(line, "info");
		int t, i, off = 0;
		ck_assert_msg(msg != NULL, "bad line: %.80s", line);
		ck_assert_msg(sscanf(msg, "t%d n%d %n", &t, &i, &off) == 2 && off > 0,
		    "bad message: %.80s", msg);
		ck_assert(t >= 0 && t < THREADS);
		/* Whole: the payload is intact, nothing from another line inside. */
		ck_assert_uint_eq(strlen(msg + off), PAYLOAD_LEN);
		ck_assert_int_eq(strspn(msg + off, "x"), PAYLOAD_LEN);
		/* One producer's lines stay in order, none lost or repeated. */
		ck_assert_int_eq(i, next[t]);
		next[t]++;
	}
	for (int t = 0; t < THREADS; t++)
		ck_assert_int_eq(next[t], PER_THREAD);
	free(buf);
	close(p[0]);
	close(p[1]);
}
END_TEST

struct drain {
	int d_fd;
	long d_lines;
	long d_bytes;
};

static void *
drainer(void *arg)
{
	struct drain *d = arg;
	char buf[8192];
	for (;;) {
		ssize_t n = read(d->d_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] == '\n')
				d->d_lines++;
		d->d_bytes += n;
	}
	return NULL;
}

#define FLOOD 5000

START_TEST(test_full_queue_drops_never_blocks)
{
	int p[2];
	int64_t worst = 0, t0, total;

	mkpipe(p);
	/* The smallest pipe the kernel allows, never read: the writer blocks. */
	ck_assert_int_gt(fcntl(p[1], F_SETPIPE_SZ, 4096), 0);
	log_init("unit", LOG_F_ASYNC);
	log_set_fd(p[1]);

	t0 = util_monotonic_ms();
	for (int i = 0; i < FLOOD; i++) {
		int64_t a = util_monotonic_ms();
		log_warnx("flood %d %s", i, "................................................");
		int64_t d = util_monotonic_ms() - a;
		if (d > worst)
			worst = d;
	}
	total = util_monotonic_ms() - t0;
	uint64_t dropped = log_dropped();
	ck_assert_msg(worst < 500, "one log call took %lld ms", (long long)worst);
	ck_assert_msg(total < 5000, "%d log calls took %lld ms", FLOOD, (long long)total);
	ck_assert_msg(dropped > 0, "nothing dropped with a full queue");
	/* At most the queue and what the pipe took can have been kept. */
	ck_assert_uint_ge(dropped, FLOOD - LOG_QUEUE_LINES - 4096 / 60 - 1);

	/* Now drain: every line was either written whole or counted as dropped. */
	struct drain d = { .d_fd = p[0] };
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, drainer, &d), 0);
	log_shutdown();
	close(p[1]);
	pthread_join(th, NULL);
	ck_assert_int_eq(log_dropped(), dropped);
	ck_assert_int_eq((uint64_t)d.d_lines + dropped, FLOOD);
	close(p[0]);
}
END_TEST

START_TEST(test_newlines_flattened)
{
	int p[2], nlines;
	size_t len;
	char *buf;

	mkpipe(p);
	log_init("unit", 0);
	log_set_fd(p[1]);
	log_warnx("first\nforged: line\r\nend\n");
	buf = read_lines(p[0], 1, 2000, &len, &nlines);
	ck_assert_int_eq(nlines, 1);
	ck_assert_int_eq(buf[len - 1], '\n');
	ck_assert_ptr_null(strchr(buf, '\r'));
	const char *msg = check_prefix(buf, "warn");
	ck_assert_ptr_nonnull(msg);
	ck_assert_str_eq(msg, "first forged: line  end \n");
	free(buf);
	expect_silence(p[0], 50);

	/* The same through the async writer. */
	log_init("unit", LOG_F_ASYNC);
	log_info("a\nb");
	buf = read_lines(p[0], 1, 2000, &len, &nlines);
	ck_assert_int_eq(nlines, 1);
	ck_assert_str_eq(check_prefix(buf, "info"), "a b\n");
	free(buf);
	log_shutdown();
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(test_long_line_truncated)
{
	int p[2], nlines;
	size_t len;
	char *big = malloc(3 * LOG_LINE_MAX);

	ck_assert_ptr_nonnull(big);
	memset(big, 'y', 3 * LOG_LINE_MAX - 1);
	big[3 * LOG_LINE_MAX - 1] = '\0';
	mkpipe(p);
	log_init("unit", 0);
	log_set_fd(p[1]);
	errno = EACCES;
	log_warn("%s", big);
	char *buf = read_lines(p[0], 1, 2000, &len, &nlines);
	ck_assert_int_eq(nlines, 1);
	ck_assert_uint_le(len, LOG_LINE_MAX);
	ck_assert_int_eq(buf[len - 1], '\n');
	free(buf);
	free(big);
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(test_levels_and_errno)
{
	int p[2], nlines;
	size_t len;
	char *buf;

	mkpipe(p);
	log_init("unit", 0);
	log_set_fd(p[1]);
	errno = ENOENT;
	log_warn("open %s", "/nowhere");
	ck_assert_int_eq(errno, ENOENT); /* logging does not clobber errno */
	buf = read_lines(p[0], 1, 2000, &len, &nlines);
	ck_assert_str_eq(check_prefix(buf, "warn"), "open /nowhere: No such file or directory\n");
	free(buf);

	log_debug("hidden %d", 1);
	expect_silence(p[0], 50);
	log_init("unit", LOG_F_DEBUG);
	log_debug("shown %d", 2);
	buf = read_lines(p[0], 1, 2000, &len, &nlines);
	ck_assert_str_eq(check_prefix(buf, "debug"), "shown 2\n");
	free(buf);
	close(p[0]);
	close(p[1]);
}
END_TEST

/*
 * fatal must drain the queue before exiting. The pipe is made small and
 * left unread for a while, so at the fatal call most lines are still
 * queued; an exit without log_shutdown would lose them.
 */
#define BEFORE_FATAL 300

START_TEST(test_fatal_flushes)
{
	int p[2], nlines, status;
	size_t len;

	mkpipe(p);
	ck_assert_int_gt(fcntl(p[1], F_SETPIPE_SZ, 4096), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		alarm(20);
		close(p[0]);
		log_init("unit", LOG_F_ASYNC);
		log_set_fd(p[1]);
		for (int i = 0; i < BEFORE_FATAL; i++)
			log_info("before %d ..................................................", i);
		fatalx("boom %d", 42);
	}
	close(p[1]);
	unit_sleep_ms(200);
	char *buf = read_lines(p[0], BEFORE_FATAL + 2, 10000, &len, &nlines);
	ck_assert_int_eq(unit_wait_pid(pid, 5000, &status), 0);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	ck_assert_int_eq(nlines, BEFORE_FATAL + 1);
	ck_assert_uint_gt(len, 20);
	ck_assert_ptr_nonnull(strstr(buf, "]: info: before 299 ."));
	/* The fatal line is the last one. */
	buf[len - 1] = '\0';
	const char *last = strrchr(buf, '\n');
	ck_assert_ptr_nonnull(last);
	ck_assert_ptr_nonnull(strstr(last, "]: fatal: boom 42"));
	free(buf);
	close(p[0]);
}
END_TEST

static struct json_object *
get(struct json_object *o, const char *k)
{
	struct json_object *v;
	ck_assert_msg(json_object_object_get_ex(o, k, &v) && v != NULL, "no %s", k);
	return v;
}

START_TEST(test_ocsf_record)
{
	struct json_object *um = json_object_new_object();
	json_object_object_add(um, "operation_id", json_object_new_string("op_x"));
	int64_t before = util_now_ms();
	struct json_object *o = log_ocsf_record(1007, 1, 2, "process launched", um);
	int64_t after = util_now_ms();
	json_object_put(um); /* the record holds its own reference */

	ck_assert_int_eq(json_object_get_int(get(o, "class_uid")), 1007);
	ck_assert_int_eq(json_object_get_int(get(o, "category_uid")), 1);
	ck_assert_int_eq(json_object_get_int(get(o, "activity_id")), 1);
	ck_assert_int_eq(json_object_get_int64(get(o, "type_uid")), 100701);
	ck_assert_int_eq(json_object_get_int(get(o, "severity_id")), 2);
	ck_assert(json_object_is_type(get(o, "time"), json_type_int));
	int64_t t = json_object_get_int64(get(o, "time"));
	ck_assert(t >= before && t <= after);
	ck_assert_str_eq(json_object_get_string(get(o, "message")), "process launched");
	ck_assert_str_eq(json_object_get_string(get(get(get(o, "metadata"), "product"), "name")),
	    "gensee");
	ck_assert_str_eq(json_object_get_string(get(get(o, "unmapped"), "operation_id")), "op_x");

	/* It serializes to valid JSON that parses back to the same record. */
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	struct json_object *back = json_tokener_parse(s);
	ck_assert_ptr_nonnull(back);
	ck_assert(json_object_equal(o, back));
	json_object_put(back);
	json_object_put(o);
}
END_TEST

START_TEST(test_ocsf_emitted)
{
	int p[2], nlines;
	size_t len;

	mkpipe(p);
	log_init("unit", LOG_F_OCSF | LOG_F_ASYNC);
	log_set_fd(p[1]);
	log_ocsf(4001, 5, 3, "deny\nforged", NULL);
	char *buf = read_lines(p[0], 1, 2000, &len, &nlines);
	ck_assert_int_eq(nlines, 1);
	ck_assert_int_eq(buf[len - 1], '\n');
	struct json_tokener *tok = json_tokener_new();
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	struct json_object *o = json_tokener_parse_ex(tok, buf, (int)len - 1);
	ck_assert_msg(o != NULL, "OCSF line is not JSON: %s", buf);
	ck_assert_uint_eq(json_tokener_get_parse_end(tok), len - 1);
	json_tokener_free(tok);
	ck_assert_int_eq(json_object_get_int(get(o, "class_uid")), 4001);
	ck_assert(json_object_is_type(get(o, "time"), json_type_int));
	ck_assert_str_eq(json_object_get_string(get(get(get(o, "metadata"), "product"), "name")),
	    "gensee");
	ck_assert_str_eq(json_object_get_string(get(o, "message")), "deny\nforged");
	json_object_put(o);
	free(buf);

	/* A record too long for one line is dropped and counted, never cut. */
	char *big = malloc(LOG_LINE_MAX + 1);
	ck_assert_ptr_nonnull(big);
	memset(big, 'z', LOG_LINE_MAX);
	big[LOG_LINE_MAX] = '\0';
	uint64_t d0 = log_dropped();
	log_ocsf(4001, 5, 3, big, NULL);
	ck_assert_int_eq(log_dropped(), d0 + 1);
	free(big);
	log_shutdown();
	expect_silence(p[0], 50);
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(test_ocsf_silent_without_flag)
{
	const int modes[] = { 0, LOG_F_ASYNC, LOG_F_ASYNC | LOG_F_DEBUG };

	for (size_t m = 0; m < nitems(modes); m++) {
		int p[2], nlines;
		size_t len;
		mkpipe(p);
		log_init("unit", modes[m]);
		log_set_fd(p[1]);
		log_ocsf(1007, 1, 1, "must not appear", NULL);
		log_info("marker");
		/* Lines leave in order: once the marker is here, OCSF would be too. */
		char *buf = read_lines(p[0], 1, 2000, &len, &nlines);
		ck_assert_int_eq(nlines, 1);
		ck_assert_ptr_null(strstr(buf, "must not appear"));
		ck_assert_str_eq(check_prefix(buf, "info"), "marker\n");
		free(buf);
		log_shutdown();
		expect_silence(p[0], 20);
		close(p[0]);
		close(p[1]);
	}
}
END_TEST

static Suite *
log_suite(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("lines");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_async_whole_lines);
	tcase_add_test(tc, test_full_queue_drops_never_blocks);
	tcase_add_test(tc, test_newlines_flattened);
	tcase_add_test(tc, test_long_line_truncated);
	tcase_add_test(tc, test_levels_and_errno);
	tcase_add_test(tc, test_fatal_flushes);
	suite_add_tcase(s, tc);

	tc = tcase_create("ocsf");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_ocsf_record);
	tcase_add_test(tc, test_ocsf_emitted);
	tcase_add_test(tc, test_ocsf_silent_without_flag);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(log_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
