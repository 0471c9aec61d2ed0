/*
 * test_record.c: the locked shared-update protocol (lib/record.c).
 *
 * What must hold: an update only ever changes the freshly loaded record, so
 * concurrent writers lose nothing; an invalid record (tampering or a bug) is
 * never overwritten; no file of the record is reached through a symlink;
 * and a reader without the lock always sees one whole, valid record.
 */
#include <poll.h>
#include <sys/prctl.h>

#include <json-c/json.h>

#include "ids.h"
#include "oprecord.h"
#include "record.h"
#include "syncq.h"
#include "unit.h"

#define NAME "rec.json"

/* A tiny record: {"id": ID, "n": int}. */
static int
simple_validate(struct json_object *rec, const char *expected_id, char **cause)
{
	struct json_object *v;
	if (!json_object_is_type(rec, json_type_object) ||
	    !json_object_object_get_ex(rec, "id", &v) || !json_object_is_type(v, json_type_string) ||
	    !json_object_object_get_ex(rec, "n", &v) || !json_object_is_type(v, json_type_int)) {
		util_cause(cause, "bad shape");
		return -1;
	}
	json_object_object_get_ex(rec, "id", &v);
	if (expected_id != NULL && strcmp(json_object_get_string(v), expected_id) != 0) {
		util_cause(cause, "identity mismatch");
		return -1;
	}
	return 0;
}

static int mutate_calls;

static int
mut_incr(struct json_object *rec, void *arg, char **cause)
{
	struct json_object *v;
	(void)cause;
	mutate_calls++;
	json_object_object_get_ex(rec, "n", &v);
	json_object_object_add(rec, "n",
	    json_object_new_int64(json_object_get_int64(v) + (arg ? *(int *)arg : 1)));
	return 0;
}

static int
mut_noop(struct json_object *rec, void *arg, char **cause)
{
	(void)cause;
	mutate_calls++;
	/* Even a change made before saying "unchanged" must not reach the disk. */
	json_object_object_add(rec, "n", json_object_new_int64(*(int *)arg));
	return 1;
}

static int
mut_refuse(struct json_object *rec, void *arg, char **cause)
{
	(void)arg;
	mutate_calls++;
	json_object_object_add(rec, "n", json_object_new_int64(-1));
	util_cause(cause, "refused");
	return -1;
}

static int
open_dir(const char *d)
{
	int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static int64_t
get_int(struct json_object *o, const char *k)
{
	struct json_object *v;
	ck_assert_msg(json_object_object_get_ex(o, k, &v), "no %s", k);
	ck_assert(json_object_is_type(v, json_type_int));
	return json_object_get_int64(v);
}

/* Create {"id":"A","n":0} in a fresh directory. */
static int
setup_simple(void)
{
	int dfd = open_dir(unit_tmpdir("/tmp"));
	struct json_object *r = json_object_new_object();
	char *cause = NULL;

	json_object_object_add(r, "id", json_object_new_string("A"));
	json_object_object_add(r, "n", json_object_new_int64(0));
	ck_assert_msg(record_create(dfd, NAME, r, &cause) == 0, "create: %s", cause);
	json_object_put(r);
	return dfd;
}

START_TEST(test_create_update)
{
	int dfd = setup_simple();
	struct json_object *out = NULL;
	char *cause = NULL;
	struct stat st;

	/* The file is owner-only and revision starts at 1. */
	ck_assert_int_eq(fstatat(dfd, NAME, &st, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(st.st_mode & 077, 0);
	ck_assert_int_eq(record_read(dfd, NAME, "A", simple_validate, &out, &cause), 0);
	ck_assert_int_eq(get_int(out, "revision"), 1);
	ck_assert_int_eq(get_int(out, "n"), 0);
	json_object_put(out);

	for (int i = 1; i <= 5; i++) {
		ck_assert_msg(record_update(dfd, NAME, "A", simple_validate, mut_incr, NULL, &out,
		    &cause) == 0, "update %d: %s", i, cause);
		/* *result is the record as written... */
		ck_assert_int_eq(get_int(out, "revision"), 1 + i);
		ck_assert_int_eq(get_int(out, "n"), i);
		json_object_put(out);
		/* ...and it is what is on disk. */
		ck_assert_int_eq(record_read(dfd, NAME, "A", simple_validate, &out, &cause), 0);
		ck_assert_int_eq(get_int(out, "revision"), 1 + i);
		ck_assert_int_eq(get_int(out, "n"), i);
		json_object_put(out);
	}
	/* No temporary file is left behind. */
	ck_assert_int_eq(fstatat(dfd, NAME ".tmp", &st, AT_SYMLINK_NOFOLLOW), -1);
	/* The lock file is owner-only. */
	ck_assert_int_eq(fstatat(dfd, NAME ".lock", &st, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert_int_eq(st.st_mode & 077, 0);
	/* result may be NULL. */
	ck_assert_int_eq(record_update(dfd, NAME, "A", simple_validate, mut_incr, NULL, NULL,
	    &cause), 0);
	close(dfd);
}
END_TEST

/*
 * Files made ahead (boundaryd's prepared cells): NAME.tmp and NAME.spare0..
 * become the record's versions in turn, before any new inode is made; every
 * version is still its own inode, never rewritten.
 */
START_TEST(test_premade_files_used_first)
{
	int dfd = open_dir(unit_tmpdir("/tmp"));
	const char *names[] = { NAME ".tmp", NAME ".spare0", NAME ".spare1", NAME ".spare2" };
	ino_t ino[4];
	struct stat st;
	struct json_object *r = json_object_new_object(), *out = NULL;
	char *cause = NULL;

	for (size_t i = 0; i < 4; i++) {
		int fd = openat(dfd, names[i], O_WRONLY | O_CREAT | O_EXCL, 0600);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(fstat(fd, &st), 0);
		ino[i] = st.st_ino;
		close(fd);
	}
	json_object_object_add(r, "id", json_object_new_string("A"));
	json_object_object_add(r, "n", json_object_new_int64(0));
	ck_assert_msg(record_create(dfd, NAME, r, &cause) == 0, "create: %s", cause);
	json_object_put(r);
	ck_assert_int_eq(fstatat(dfd, NAME, &st, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert_uint_eq(st.st_ino, ino[0]);
	for (int i = 1; i <= 4; i++) {
		ck_assert_int_eq(record_update(dfd, NAME, "A", simple_validate, mut_incr, NULL, NULL,
		    &cause), 0);
		ck_assert_int_eq(fstatat(dfd, NAME, &st, AT_SYMLINK_NOFOLLOW), 0);
		if (i < 4)
			ck_assert_uint_eq(st.st_ino, ino[i]);	/* the spares, in order */
		for (int j = 1; j <= i && j < 4; j++)
			ck_assert_int_eq(fstatat(dfd, names[j], &st, AT_SYMLINK_NOFOLLOW), -1);
	}
	ck_assert_int_eq(record_read(dfd, NAME, "A", simple_validate, &out, &cause), 0);
	ck_assert_int_eq(get_int(out, "n"), 4);
	json_object_put(out);
	ck_assert_int_eq(fstatat(dfd, NAME ".tmp", &st, AT_SYMLINK_NOFOLLOW), -1);
	close(dfd);
}
END_TEST

START_TEST(test_create_exists)
{
	int dfd = setup_simple();
	struct json_object *r = json_object_new_object();
	char *cause = NULL, *before, *after;
	size_t lb, la;

	before = unit_read_file(dfd, NAME, &lb);
	json_object_object_add(r, "id", json_object_new_string("B"));
	json_object_object_add(r, "n", json_object_new_int64(99));
	errno = 0;
	ck_assert_int_eq(record_create(dfd, NAME, r, &cause), -1);
	ck_assert_int_eq(errno, EEXIST);
	after = unit_read_file(dfd, NAME, &la);
	ck_assert_uint_eq(la, lb);
	ck_assert_mem_eq(after, before, lb);
	free(before);
	free(after);
	free(cause);
	json_object_put(r);
	close(dfd);
}
END_TEST

/* Replace NAME by bytes, run an update that must fail, check nothing changed. */
static void
expect_untouched(int dfd, const char *bytes, size_t len, const char *what)
{
	char *cause = NULL, *after;
	size_t la;
	struct json_object *out = (struct json_object *)1;

	unit_write_file(dfd, NAME, bytes, len);
	mutate_calls = 0;
	ck_assert_msg(record_update(dfd, NAME, "A", simple_validate, mut_incr, NULL, &out,
	    &cause) == -1, "update over %s succeeded", what);
	ck_assert_ptr_null(out);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(mutate_calls == 0, "mutate ran on %s", what);
	after = unit_read_file(dfd, NAME, &la);
	ck_assert_msg(la == len && memcmp(after, bytes, len) == 0, "%s was overwritten", what);
	free(after);
	free(cause);
	/* A reader refuses it too. */
	cause = NULL;
	ck_assert_int_eq(record_read(dfd, NAME, "A", simple_validate, &out, &cause), -1);
	ck_assert_ptr_null(out);
	free(cause);
}

START_TEST(test_invalid_never_overwritten)
{
	int dfd = setup_simple();
	static const char garbage[] = "\x01\x02not json at all\xff";
	static const char trunc[] = "{\"id\":\"A\",\"n\":1,\"revision\":";
	static const char other[] = "{\"id\":\"B\",\"n\":7,\"revision\":3}\n";
	static const char shape[] = "{\"id\":\"A\",\"n\":\"7\",\"revision\":3}\n";
	static const char array[] = "[{\"id\":\"A\",\"n\":1}]";
	static const char two[] = "{\"id\":\"A\",\"n\":1}{\"id\":\"A\",\"n\":2}";

	expect_untouched(dfd, garbage, sizeof(garbage) - 1, "garbage");
	expect_untouched(dfd, trunc, sizeof(trunc) - 1, "a truncated record");
	expect_untouched(dfd, other, sizeof(other) - 1, "another record's identity");
	expect_untouched(dfd, shape, sizeof(shape) - 1, "a record of the wrong shape");
	expect_untouched(dfd, array, sizeof(array) - 1, "an array");
	expect_untouched(dfd, two, sizeof(two) - 1, "two objects");
	expect_untouched(dfd, "", 0, "an empty file");
	close(dfd);
}
END_TEST

START_TEST(test_mutate_unchanged_or_refused)
{
	int dfd = setup_simple();
	struct json_object *out = NULL;
	char *cause = NULL, *before, *after;
	size_t lb, la;
	int val = 12345;
	struct stat s1, s2;

	ck_assert_int_eq(record_update(dfd, NAME, "A", simple_validate, mut_incr, NULL, NULL,
	    &cause), 0);
	before = unit_read_file(dfd, NAME, &lb);
	ck_assert_int_eq(fstatat(dfd, NAME, &s1, AT_SYMLINK_NOFOLLOW), 0);

	/* mutate returns 1: success, no write, revision unchanged. */
	ck_assert_int_eq(record_update(dfd, NAME, "A", simple_validate, mut_noop, &val, &out,
	    &cause), 0);
	json_object_put(out);
	after = unit_read_file(dfd, NAME, &la);
	ck_assert_uint_eq(la, lb);
	ck_assert_mem_eq(after, before, lb);
	free(after);
	ck_assert_int_eq(fstatat(dfd, NAME, &s2, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert_uint_eq(s1.st_ino, s2.st_ino); /* not even renamed over */
	ck_assert_int_eq(record_read(dfd, NAME, "A", simple_validate, &out, &cause), 0);
	ck_assert_int_eq(get_int(out, "revision"), 2);
	ck_assert_int_eq(get_int(out, "n"), 1);
	json_object_put(out);

	/* mutate returns -1: the update fails and nothing is written. */
	ck_assert_int_eq(record_update(dfd, NAME, "A", simple_validate, mut_refuse, NULL, &out,
	    &cause), -1);
	ck_assert_ptr_null(out);
	ck_assert_str_eq(cause, "refused");
	after = unit_read_file(dfd, NAME, &la);
	ck_assert_uint_eq(la, lb);
	ck_assert_mem_eq(after, before, lb);
	free(after);
	free(before);
	free(cause);
	close(dfd);
}
END_TEST

START_TEST(test_symlinks_refused)
{
	int dfd = setup_simple();
	const char *out_dir = unit_tmpdir("/tmp");
	char target[512], *cause = NULL, *s;
	size_t len;
	struct stat st;
	struct json_object *o;
	static const char victim[] = "{\"id\":\"A\",\"n\":500,\"revision\":9}\n";

	/* record.json -> a valid record elsewhere: update and read fail, target untouched. */
	snprintf(target, sizeof(target), "%s/victim.json", out_dir);
	unit_write_file(AT_FDCWD, target, victim, sizeof(victim) - 1);
	ck_assert_int_eq(unlinkat(dfd, NAME, 0), 0);
	ck_assert_int_eq(symlinkat(target, dfd, NAME), 0);
	ck_assert_int_eq(record_update(dfd, NAME, "A", simple_validate, mut_incr, NULL, NULL,
	    &cause), -1);
	ck_assert_int_eq(record_read(dfd, NAME, "A", simple_validate, &o, &cause), -1);
	s = unit_read_file(AT_FDCWD, target, &len);
	ck_assert_uint_eq(len, sizeof(victim) - 1);
	ck_assert_mem_eq(s, victim, len);
	free(s);
	ck_assert_int_eq(fstatat(dfd, NAME, &st, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert(S_ISLNK(st.st_mode));
	/* record_create of a name that is a symlink does not write through it. */
	struct json_object *r = json_object_new_object();
	json_object_object_add(r, "id", json_object_new_string("C"));
	json_object_object_add(r, "n", json_object_new_int64(1));
	ck_assert_int_eq(symlinkat(target, dfd, "new.json"), 0);
	(void)record_create(dfd, "new.json", r, &cause);
	json_object_put(r);
	s = unit_read_file(AT_FDCWD, target, &len);
	ck_assert_uint_eq(len, sizeof(victim) - 1);
	ck_assert_mem_eq(s, victim, len);
	free(s);
	free(cause);
	close(dfd);
}
END_TEST

START_TEST(test_tmp_and_lock_symlinks)
{
	int dfd = setup_simple();
	const char *out_dir = unit_tmpdir("/tmp");
	char target[512], *cause = NULL, *s, *before, *after;
	size_t len, lb, la;

	/* A planted NAME.tmp symlink must not be followed or truncated. */
	snprintf(target, sizeof(target), "%s/precious", out_dir);
	unit_write_file(AT_FDCWD, target, "precious", 8);
	ck_assert_int_eq(symlinkat(target, dfd, NAME ".tmp"), 0);
	before = unit_read_file(dfd, NAME, &lb);
	ck_assert_int_eq(record_update(dfd, NAME, "A", simple_validate, mut_incr, NULL, NULL,
	    &cause), -1);
	s = unit_read_file(AT_FDCWD, target, &len);
	ck_assert_uint_eq(len, 8);
	ck_assert_mem_eq(s, "precious", 8);
	free(s);
	after = unit_read_file(dfd, NAME, &la);
	ck_assert_uint_eq(la, lb);
	ck_assert_mem_eq(after, before, lb);
	free(after);
	ck_assert_int_eq(unlinkat(dfd, NAME ".tmp", 0), 0);

	/* A planted hard link as NAME.tmp is not rewritten in place: it is replaced. */
	ck_assert_int_eq(linkat(AT_FDCWD, target, dfd, NAME ".tmp", 0), 0);
	ck_assert_int_eq(record_update(dfd, NAME, "A", simple_validate, mut_incr, NULL, NULL,
	    &cause), 0);
	s = unit_read_file(AT_FDCWD, target, &len);
	ck_assert_uint_eq(len, 8);
	ck_assert_mem_eq(s, "precious", 8);
	free(s);
	free(before);
	before = unit_read_file(dfd, NAME, &lb);

	/* Nor a planted NAME.lock symlink (O_CREAT through it would create a file). */
	ck_assert_int_eq(unlinkat(dfd, NAME ".lock", 0), 0);
	snprintf(target, sizeof(target), "%s/created-through-lock", out_dir);
	ck_assert_int_eq(symlinkat(target, dfd, NAME ".lock"), 0);
	ck_assert_int_eq(record_update(dfd, NAME, "A", simple_validate, mut_incr, NULL, NULL,
	    &cause), -1);
	ck_assert_int_eq(access(target, F_OK), -1);
	after = unit_read_file(dfd, NAME, &la);
	ck_assert_mem_eq(after, before, lb);
	free(after);
	free(before);
	free(cause);
	close(dfd);
}
END_TEST

START_TEST(test_append_jsonl)
{
	int dfd = open_dir(unit_tmpdir("/tmp"));
	char *cause = NULL, *s, *line, *save = NULL;
	size_t len;
	int n = 0;

	for (int i = 0; i < 3; i++) {
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "i", json_object_new_int(i));
		json_object_object_add(o, "text", json_object_new_string("a\nb"));
		ck_assert_int_eq(record_append_jsonl(dfd, "ev.jsonl", o, &cause), 0);
		json_object_put(o);
	}
	s = unit_read_file(dfd, "ev.jsonl", &len);
	ck_assert_int_eq(s[len - 1], '\n');
	for (line = strtok_r(s, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		struct json_object *o = json_tokener_parse(line);
		ck_assert_ptr_nonnull(o);
		ck_assert_int_eq(get_int(o, "i"), n);
		json_object_put(o);
		n++;
	}
	ck_assert_int_eq(n, 3);
	free(s);
	ck_assert_int_eq(symlinkat("ev.jsonl", dfd, "ln.jsonl"), 0);
	struct json_object *o = json_object_new_object();
	ck_assert_int_eq(record_append_jsonl(dfd, "ln.jsonl", o, &cause), -1);
	json_object_put(o);
	free(cause);
	close(dfd);
}
END_TEST

/*
 * The hammer: 4 writers x 2000 oprecord_mut_counts updates while a reader
 * that never takes the lock checks every read is a whole, valid record whose
 * revision and count never go backwards. Zero lost updates at the end.
 */
#define HAMMER_WRITERS 4
#define HAMMER_UPDATES 2000
#define HAMMER_SECONDS 240

static void
hammer_writer(int dfd, const char *id)
{
	struct oprecord_counts c = { .oc_effects = 1 };
	char *cause = NULL;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm(HAMMER_SECONDS);
	for (int i = 0; i < HAMMER_UPDATES; i++) {
		if (oprecord_update(dfd, id, oprecord_mut_counts, &c, NULL, &cause) != 0) {
			fprintf(stderr, "writer %d: update %d: %s\n", (int)getpid(), i, cause);
			_exit(2);
		}
	}
	_exit(0);
}

struct hammer_seen {
	long hs_reads;
	long hs_mid; /* reads that saw neither the first nor the last state */
};

/*
 * Exit 0 after at least one good read, 3 on any bad read, 4 on no reads;
 * what it saw goes to resfd.
 */
static void
hammer_reader(int dfd, const char *id, int stopfd, int resfd, int64_t rev0)
{
	int64_t last_rev = 0, last_eff = -1;
	long reads = 0, mid = 0;
	struct pollfd pfd = { .fd = stopfd, .events = POLLIN };

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm(HAMMER_SECONDS);
	for (long iter = 0; iter < 10000000; iter++) {
		struct json_object *rec, *counts, *v;
		char *cause = NULL;
		int stop = poll(&pfd, 1, 0) > 0;

		if (oprecord_read(dfd, id, &rec, &cause) != 0) {
			fprintf(stderr, "reader: read %ld: %s\n", reads, cause);
			_exit(3);
		}
		json_object_object_get_ex(rec, "revision", &v);
		int64_t rev = json_object_get_int64(v);
		json_object_object_get_ex(rec, "counts", &counts);
		json_object_object_get_ex(counts, "effects", &v);
		int64_t eff = json_object_get_int64(v);
		json_object_put(rec);
		if (rev < last_rev || eff < last_eff) {
			fprintf(stderr, "reader: went backwards: rev %lld -> %lld, effects %lld -> %lld\n",
			    (long long)last_rev, (long long)rev, (long long)last_eff, (long long)eff);
			_exit(3);
		}
		last_rev = rev;
		last_eff = eff;
		reads++;
		if (rev > rev0 && rev < rev0 + HAMMER_WRITERS * HAMMER_UPDATES)
			mid++;
		if (stop)
			break;
	}
	struct hammer_seen seen = { reads, mid };
	if (write(resfd, &seen, sizeof(seen)) != (ssize_t)sizeof(seen))
		_exit(5);
	_exit(reads > 0 ? 0 : 4);
}

START_TEST(test_hammer)
{
	const char *dir = unit_tmpdir(unit_fast_base());
	int dfd = open_dir(dir);
	char id[ID_MAX_LEN], *cause = NULL;
	struct oprecord_init in = {
		.oi_id = id, .oi_source_run = "unit", .oi_action_class = "local_process",
		.oi_root_pid = getpid(), .oi_root_start = 1,
	};
	struct json_object *rec;
	pid_t writers[HAMMER_WRITERS], reader;
	int stop[2], res[2], status;
	struct hammer_seen seen = { 0, 0 };

	ck_assert_int_eq(ids_init(), 0);
	ck_assert_int_eq(ids_new("op_", id, sizeof(id)), 0);
	rec = oprecord_new(&in);
	ck_assert_int_eq(record_create(dfd, OPRECORD_FILE, rec, &cause), 0);
	json_object_put(rec);
	ck_assert_int_eq(oprecord_read(dfd, id, &rec, &cause), 0);
	int64_t rev0 = get_int(rec, "revision");
	json_object_put(rec);

	ck_assert_int_eq(pipe2(stop, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(res, O_CLOEXEC), 0);
	reader = fork();
	ck_assert_int_ge(reader, 0);
	if (reader == 0) {
		close(stop[1]);
		close(res[0]);
		hammer_reader(dfd, id, stop[0], res[1], rev0);
	}
	close(stop[0]);
	close(res[1]);
	for (int w = 0; w < HAMMER_WRITERS; w++) {
		writers[w] = fork();
		ck_assert_int_ge(writers[w], 0);
		if (writers[w] == 0)
			hammer_writer(dfd, id);
	}
	int bad = 0;
	for (int w = 0; w < HAMMER_WRITERS; w++) {
		if (unit_wait_pid(writers[w], HAMMER_SECONDS * 1000, &status) != 0 ||
		    !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			bad++;
	}
	close(stop[1]); /* POLLHUP: the reader does one last read and stops */
	ck_assert_int_eq(unit_wait_pid(reader, 30000, &status), 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "unlocked reader saw a bad record (status 0x%x)", status);
	ck_assert_msg(bad == 0, "%d writer(s) failed", bad);
	ck_assert_int_eq(read(res[0], &seen, sizeof(seen)), (ssize_t)sizeof(seen));
	close(res[0]);
	/* The reader really ran alongside the writers, not only before or after. */
	ck_assert_msg(seen.hs_mid > 0, "reader saw no intermediate state in %ld reads",
	    seen.hs_reads);

	ck_assert_int_eq(oprecord_read(dfd, id, &rec, &cause), 0);
	struct json_object *counts;
	ck_assert(json_object_object_get_ex(rec, "counts", &counts));
	ck_assert_int_eq(get_int(counts, "effects"), HAMMER_WRITERS * HAMMER_UPDATES);
	ck_assert_int_eq(get_int(rec, "revision"), rev0 + HAMMER_WRITERS * HAMMER_UPDATES);
	json_object_put(rec);
	close(dfd);
}
END_TEST

/* Read NAME straight from the disk, bypassing what is pending in memory. */
static int64_t
disk_n(int dfd)
{
	char buf[4096];
	int fd = openat(dfd, NAME, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	ck_assert_int_gt(n, 0);
	close(fd);
	buf[n] = '\0';
	struct json_object *o = json_tokener_parse(buf);
	ck_assert_ptr_nonnull(o);
	int64_t v = get_int(o, "n");
	json_object_put(o);
	return v;
}

/*
 * A full or read-only disk loses no truth: updates are kept in memory (and
 * read back from there), evidence lines queue in order, and a flush writes
 * both once the disk takes writes again. A refusal that is not the disk's
 * still fails the update.
 */
START_TEST(test_disk_failure_kept_in_memory)
{
	int dfd = setup_simple();
	struct json_object *out = NULL, *line;
	struct record_disk rd;
	char *cause = NULL;
	uint64_t fails = record_disk_failures();

	record_fault_inject(ENOSPC);
	ck_assert_msg(record_update(dfd, NAME, "A", simple_validate, mut_incr, NULL, NULL,
	    &cause) == 0, "update on a full disk: %s", cause);
	ck_assert_int_gt(record_disk_failures(), fails);
	ck_assert(record_is_pending(dfd, NAME));
	/* Another fd of the same directory finds the pending version. */
	int dfd2 = dup(dfd);
	ck_assert_int_eq(record_update(dfd2, NAME, "A", simple_validate, mut_incr, NULL, NULL,
	    &cause), 0);
	ck_assert_int_eq(record_read(dfd2, NAME, "A", simple_validate, &out, &cause), 0);
	ck_assert_int_eq(get_int(out, "n"), 2);
	ck_assert_int_eq(get_int(out, "revision"), 3);
	json_object_put(out);
	close(dfd2);
	ck_assert_int_eq(disk_n(dfd), 0);
	for (int i = 0; i < 3; i++) {
		line = json_object_new_object();
		json_object_object_add(line, "i", json_object_new_int(i));
		ck_assert_int_eq(record_append_jsonl(dfd, "ev.jsonl", line, &cause), 0);
		json_object_put(line);
	}
	record_disk_status(&rd);
	ck_assert_int_eq(rd.rd_state, RECORD_DISK_FULL);
	ck_assert_str_eq(record_disk_state_name(rd.rd_state), "full");
	ck_assert_uint_eq(rd.rd_pending_records, 1);
	ck_assert_uint_eq(rd.rd_pending_lines, 3);
	ck_assert(rd.rd_since[0] != '\0');
	/* Still full: nothing is written, nothing is lost. */
	ck_assert_int_eq(record_flush(dfd), -1);
	ck_assert_int_eq(disk_n(dfd), 0);
	record_fault_inject(EROFS);
	ck_assert_int_eq(record_flush(dfd), -1);
	record_disk_status(&rd);
	ck_assert_str_eq(record_disk_state_name(rd.rd_state), "read_only");
	/* The disk is back: the newest version and every line, in order. */
	record_fault_inject(0);
	ck_assert_int_eq(record_flush(dfd), 0);
	ck_assert(!record_is_pending(dfd, NAME));
	ck_assert_int_eq(disk_n(dfd), 2);
	record_disk_status(&rd);
	ck_assert_int_eq(rd.rd_state, RECORD_DISK_OK);
	ck_assert_uint_eq(rd.rd_pending_lines, 0);
	char buf[256];
	int fd = openat(dfd, "ev.jsonl", O_RDONLY | O_CLOEXEC);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_str_eq(buf, "{\"i\":0}\n{\"i\":1}\n{\"i\":2}\n");
	/* Not a disk condition: the update fails and nothing is kept. */
	record_fault_inject(EACCES);
	ck_assert_int_eq(record_update(dfd, NAME, "A", simple_validate, mut_incr, NULL, NULL,
	    &cause), -1);
	ck_assert(!record_is_pending(dfd, NAME));
	record_fault_inject(0);
	ck_assert_int_eq(disk_n(dfd), 2);
	/* A record that was never written is refused, never kept. */
	record_fault_inject(ENOSPC);
	struct json_object *r = json_object_new_object();
	json_object_object_add(r, "id", json_object_new_string("B"));
	json_object_object_add(r, "n", json_object_new_int64(0));
	ck_assert_int_eq(record_create(dfd, "b.json", r, &cause), -1);
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert(!record_is_pending(dfd, "b.json"));
	json_object_put(r);
	record_fault_inject(0);
	record_forget(dfd, NULL);
	free(cause);
	close(dfd);
}
END_TEST

/*
 * With the sync thread (boundaryd's case) an update is whole on disk when
 * record_update returns, and its fsyncs are done once drained.
 */
START_TEST(test_deferred_sync)
{
	int dfd = setup_simple();
	struct json_object *out = NULL;
	struct syncq_stats st;
	char *cause = NULL;

	ck_assert_int_eq(syncq_start(), 0);
	ck_assert(syncq_active());
	for (int i = 1; i <= 20; i++) {
		ck_assert_msg(record_update(dfd, NAME, "A", simple_validate, mut_incr, NULL, NULL,
		    &cause) == 0, "update %d: %s", i, cause);
		ck_assert_int_eq(record_read(dfd, NAME, "A", simple_validate, &out, &cause), 0);
		ck_assert_int_eq(get_int(out, "n"), i);
		json_object_put(out);
	}
	syncq_drain();
	syncq_get_stats(&st);
	ck_assert_int_eq(st.ss_pending, 0);
	ck_assert_int_eq(st.ss_synced, st.ss_deferred + st.ss_inline);
	ck_assert_uint_ge(st.ss_deferred + st.ss_inline, 20);
	ck_assert_int_eq(st.ss_errors, 0);
	syncq_stop();
	ck_assert(!syncq_active());
	close(dfd);
}
END_TEST

/* A sync that fails is counted with its errno; without the thread a push syncs inline. */
START_TEST(test_sync_errors_counted)
{
	struct syncq_stats st;
	int p[2];

	ck_assert_int_eq(pipe(p), 0);
	/* Not started: inline, and fsync of a pipe fails with EINVAL. */
	ck_assert_int_eq(syncq_push(p[0], -1), -1);
	ck_assert_int_eq(errno, EINVAL);
	syncq_get_stats(&st);
	ck_assert_int_eq(st.ss_inline, 1);
	ck_assert_int_eq(st.ss_errors, 1);
	ck_assert_int_eq(st.ss_last_errno, EINVAL);
	/* Started: deferred, and counted once drained. */
	ck_assert_int_eq(syncq_start(), 0);
	ck_assert_int_eq(syncq_push(p[1], -1), 0);
	syncq_drain();
	syncq_get_stats(&st);
	ck_assert_int_eq(st.ss_deferred, 1);
	ck_assert_int_eq(st.ss_errors, 2);
	syncq_stop();
	/* Both fds were closed by syncq. */
	ck_assert_int_eq(fcntl(p[0], F_GETFD), -1);
	ck_assert_int_eq(fcntl(p[1], F_GETFD), -1);
}
END_TEST

static Suite *
record_suite(void)
{
	Suite *s = suite_create("record");
	TCase *tc = tcase_create("update");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_create_update);
	tcase_add_test(tc, test_premade_files_used_first);
	tcase_add_test(tc, test_create_exists);
	tcase_add_test(tc, test_invalid_never_overwritten);
	tcase_add_test(tc, test_mutate_unchanged_or_refused);
	tcase_add_test(tc, test_symlinks_refused);
	tcase_add_test(tc, test_tmp_and_lock_symlinks);
	tcase_add_test(tc, test_append_jsonl);
	tcase_add_test(tc, test_disk_failure_kept_in_memory);
	tcase_add_test(tc, test_deferred_sync);
	tcase_add_test(tc, test_sync_errors_counted);
	suite_add_tcase(s, tc);

	tc = tcase_create("concurrency");
	tcase_set_timeout(tc, HAMMER_SECONDS + 60);
	tcase_add_test(tc, test_hammer);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(record_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
