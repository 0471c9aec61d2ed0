/*
 * test_landlock.c: the Landlock plan (lib/landlock.c).
 *
 * Plans are built against a mkdtemp tree, with the kernel's ABI or a
 * stand-in ABI of 0 for a kernel without Landlock. Enforcement is checked
 * in forked children (restricting is irreversible) that prepare the
 * ruleset, restrict themselves and then try reads and writes inside and
 * outside the lists. The enforcement tests need a kernel with Landlock and
 * fail without one.
 */
#include <stdarg.h>
#include <sys/syscall.h>

#include <linux/landlock.h>

#include <json-c/json.h>
#include <seccomp.h>

#include "landlock.h"
#include "unit.h"

#define FS(x) LANDLOCK_ACCESS_FS_##x
#define TRUNCATE_BIT (1ULL << 14)
#define IOCTL_DEV_BIT (1ULL << 15)

static char tree[256];

/* tree/{ro/file, rw/, out/file, solo, solo-sibling}, all under a fresh mkdtemp. */
static void
make_tree(void)
{
	char p[512];

	util_strlcpy(tree, unit_tmpdir("/tmp"), sizeof(tree));
	const char *dirs[] = { "ro", "rw", "out" };
	for (size_t i = 0; i < nitems(dirs); i++) {
		snprintf(p, sizeof(p), "%s/%s", tree, dirs[i]);
		ck_assert_int_eq(mkdir(p, 0700), 0);
	}
	const char *files[] = { "ro/file", "out/file", "solo", "solo-sibling" };
	for (size_t i = 0; i < nitems(files); i++) {
		snprintf(p, sizeof(p), "%s/%s", tree, files[i]);
		unit_write_file(AT_FDCWD, p, "data", 4);
	}
}

/* tree/rel (unit_path's rotating buffers). */
static const char *
at(const char *rel)
{
	return unit_path(tree, rel);
}

/* The kernel's ABI; fails the test without Landlock. */
static int
kernel_abi(void)
{
	const char *why = NULL;
	int abi = landlock_abi(&why);

	ck_assert_msg(abi > 0, "this test needs Landlock: %s", why);
	return abi;
}

/* Parse a formatted test policy. */
static struct json_object *
policy(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static struct json_object *
policy(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	struct json_object *p = json_tokener_parse(buf);
	ck_assert_msg(p != NULL, "bad test policy %s", buf);
	return p;
}

/* The strings of a json array, joined with '|'. */
static const char *
joined(struct json_object *o, const char *key)
{
	static char buf[4096];
	struct json_object *a;

	buf[0] = '\0';
	ck_assert(json_object_object_get_ex(o, key, &a));
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		if (i > 0)
			strncat(buf, "|", sizeof(buf) - strlen(buf) - 1);
		strncat(buf, json_object_get_string(json_object_array_get_idx(a, i)),
		    sizeof(buf) - strlen(buf) - 1);
	}
	return buf;
}

START_TEST(test_access_by_abi)
{
	uint64_t abi1 = (FS(MAKE_SYM) << 1) - 1;

	ck_assert_uint_eq(landlock_handled_access(0), 0);
	ck_assert_uint_eq(landlock_handled_access(1), abi1);
	ck_assert_uint_eq(landlock_handled_access(2), abi1 | FS(REFER));
	ck_assert_uint_eq(landlock_handled_access(3), abi1 | FS(REFER) | TRUNCATE_BIT);
	ck_assert_uint_eq(landlock_handled_access(4), landlock_handled_access(3));
	ck_assert_uint_eq(landlock_handled_access(5),
	    abi1 | FS(REFER) | TRUNCATE_BIT | IOCTL_DEV_BIT);
	ck_assert_uint_eq(landlock_handled_access(7), landlock_handled_access(5));

	uint64_t h = landlock_handled_access(7);
	ck_assert_uint_eq(landlock_path_access(h, 0, 1),
	    FS(EXECUTE) | FS(READ_FILE) | FS(READ_DIR));
	ck_assert_uint_eq(landlock_path_access(h, 0, 0), FS(EXECUTE) | FS(READ_FILE));
	ck_assert_uint_eq(landlock_path_access(h, 1, 1), h);
	ck_assert_uint_eq(landlock_path_access(h, 1, 0), FS(EXECUTE) | FS(WRITE_FILE) |
	    FS(READ_FILE) | TRUNCATE_BIT | IOCTL_DEV_BIT);
	/* Nothing beyond what the ABI handles is ever granted. */
	ck_assert_uint_eq(landlock_path_access(landlock_handled_access(1), 1, 0),
	    FS(EXECUTE) | FS(WRITE_FILE) | FS(READ_FILE));
}
END_TEST

START_TEST(test_plan_off)
{
	struct landlock_plan lp;
	struct landlock_opts o;
	struct json_object *p, *r, *v;
	char *cause = NULL;

	memset(&o, 0, sizeof(o));
	make_tree();
	/* No section and no options: on, with the default lists (test_plan_defaults). */
	ck_assert_int_eq(landlock_plan_build(NULL, &o, 7, NULL, &lp, &cause), 0);
	ck_assert_int_eq(lp.lp_mode, LANDLOCK_PLAN_REQUIRED);
	ck_assert_int_eq(lp.lp_apply, 1);
	r = landlock_plan_record(&lp);
	ck_assert(json_object_object_get_ex(r, "mode_source", &v));
	ck_assert_str_eq(json_object_get_string(v), "default");
	json_object_put(r);
	landlock_plan_free(&lp);

	/* mode off in the policy: not planned, recorded as off. */
	p = policy("{\"linux\": {\"landlock\": {\"mode\": \"off\"}}}");
	ck_assert_int_eq(landlock_plan_build(p, &o, 7, NULL, &lp, &cause), 0);
	ck_assert_int_eq(lp.lp_mode, LANDLOCK_PLAN_OFF);
	ck_assert_int_eq(lp.lp_apply, 0);
	r = landlock_plan_record(&lp);
	ck_assert(json_object_object_get_ex(r, "mode", &v));
	ck_assert_str_eq(json_object_get_string(v), "off");
	ck_assert(json_object_object_get_ex(r, "applied", &v) && !json_object_get_boolean(v));
	json_object_put(r);
	landlock_plan_free(&lp);
	json_object_put(p);

	/* mode off in the policy: off, even with lists. */
	p = policy("{\"linux\": {\"landlock\": {\"mode\": \"off\", \"default_paths\": false, "
	    "\"read_only\": [\"%s\"]}}}", at("ro"));
	ck_assert_int_eq(landlock_plan_build(p, &o, 7, NULL, &lp, &cause), 0);
	ck_assert_int_eq(lp.lp_apply, 0);
	landlock_plan_free(&lp);

	/* ... but command line paths ask for it: required. */
	o.lo_ro[o.lo_nro++] = at("out");
	ck_assert_int_eq(landlock_plan_build(p, &o, 7, NULL, &lp, &cause), 0);
	ck_assert_int_eq(lp.lp_mode, LANDLOCK_PLAN_REQUIRED);
	ck_assert_int_eq(lp.lp_apply, 1);
	ck_assert_int_eq(lp.lp_npaths, 2);
	landlock_plan_free(&lp);
	json_object_put(p);
}
END_TEST

START_TEST(test_plan_lists)
{
	struct landlock_plan lp;
	struct landlock_opts o;
	struct json_object *p, *r, *v;
	char *cause = NULL;
	char want[2048];

	memset(&o, 0, sizeof(o));
	make_tree();
	p = policy("{\"linux\": {\"landlock\": {\"mode\": \"required\", \"default_paths\": false, "
	    "\"read_only\": [\"%s\", \"%s\"], \"read_write\": [\"%s\"]}}}", at("ro"), at("solo"),
	    at("rw"));
	o.lo_rw[o.lo_nrw++] = at("out");
	ck_assert_msg(landlock_plan_build(p, &o, 7, NULL, &lp, &cause) == 0, "%s", cause);
	ck_assert_int_eq(lp.lp_apply, 1);
	ck_assert_uint_eq(lp.lp_handled, landlock_handled_access(7));
	ck_assert_int_eq(lp.lp_npaths, 4);
	ck_assert_int_eq(lp.lp_paths[1].lpp_dir, 0); /* solo is a file */
	r = landlock_plan_record(&lp);
	ck_assert(json_object_object_get_ex(r, "mode", &v));
	ck_assert_str_eq(json_object_get_string(v), "required");
	ck_assert(json_object_object_get_ex(r, "abi", &v));
	ck_assert_int_eq(json_object_get_int(v), 7);
	ck_assert(json_object_object_get_ex(r, "applied", &v) && json_object_get_boolean(v));
	snprintf(want, sizeof(want), "%s|%s", at("ro"), at("solo"));
	ck_assert_str_eq(joined(r, "read_only"), want);
	snprintf(want, sizeof(want), "%s|%s", at("rw"), at("out"));
	ck_assert_str_eq(joined(r, "read_write"), want);
	ck_assert_str_eq(joined(r, "skipped"), "");
	json_object_put(r);
	landlock_plan_free(&lp);
	json_object_put(p);

	/* A section without a mode is required mode. */
	p = policy("{\"linux\": {\"landlock\": {\"read_only\": [\"%s\"]}}}", at("ro"));
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(landlock_plan_build(p, &o, 7, NULL, &lp, &cause), 0);
	ck_assert_int_eq(lp.lp_mode, LANDLOCK_PLAN_REQUIRED);
	landlock_plan_free(&lp);
	json_object_put(p);
}
END_TEST

START_TEST(test_plan_missing_path)
{
	struct landlock_plan lp;
	struct landlock_opts o;
	struct json_object *p, *r;
	char *cause = NULL;

	memset(&o, 0, sizeof(o));
	make_tree();
	/* required: a path that cannot be added fails the plan, with the path named. */
	p = policy("{\"linux\": {\"landlock\": {\"mode\": \"required\", \"read_only\": [\"%s\"], "
	    "\"read_write\": [\"%s\"]}}}", at("ro"), at("missing"));
	ck_assert_int_eq(landlock_plan_build(p, &o, 7, NULL, &lp, &cause), -1);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, at("missing")) != NULL &&
	    strstr(cause, "No such file") != NULL && strstr(cause, "read_write") != NULL,
	    "cause: %s", cause);
	free(cause);
	cause = NULL;
	json_object_put(p);
	/* The same from the command line alone (which implies required). */
	o.lo_rw[o.lo_nrw++] = at("missing");
	ck_assert_int_eq(landlock_plan_build(NULL, &o, 7, NULL, &lp, &cause), -1);
	ck_assert_msg(strstr(cause, at("missing")) != NULL, "cause: %s", cause);
	free(cause);
	cause = NULL;

	/* best_effort: planned without it, and the reason is recorded. */
	p = policy("{\"linux\": {\"landlock\": {\"mode\": \"best_effort\", \"default_paths\": "
	    "false, \"read_only\": [\"%s\"]}}}", at("ro"));
	ck_assert_int_eq(landlock_plan_build(p, &o, 7, NULL, &lp, &cause), 0);
	ck_assert_int_eq(lp.lp_mode, LANDLOCK_PLAN_BEST_EFFORT);
	ck_assert_int_eq(lp.lp_apply, 1);
	ck_assert_int_eq(lp.lp_npaths, 1);
	r = landlock_plan_record(&lp);
	ck_assert_str_eq(joined(r, "read_only"), at("ro"));
	ck_assert_str_eq(joined(r, "read_write"), "");
	ck_assert_msg(strstr(joined(r, "skipped"), at("missing")) != NULL &&
	    strstr(joined(r, "skipped"), "No such file") != NULL, "skipped: %s",
	    joined(r, "skipped"));
	json_object_put(r);
	landlock_plan_free(&lp);
	json_object_put(p);
}
END_TEST

START_TEST(test_plan_no_landlock)
{
	struct landlock_plan lp;
	struct json_object *p, *r, *v;
	char *cause = NULL;
	const char *why = "the kernel has no Landlock";

	make_tree();
	p = policy("{\"linux\": {\"landlock\": {\"mode\": \"required\", \"read_only\": [\"%s\"]}}}",
	    at("ro"));
	ck_assert_int_eq(landlock_plan_build(p, NULL, 0, why, &lp, &cause), -1);
	ck_assert_str_eq(cause, "landlock: required but the kernel has no Landlock");
	free(cause);
	cause = NULL;
	json_object_put(p);

	p = policy("{\"linux\": {\"landlock\": {\"mode\": \"best_effort\", \"read_only\": "
	    "[\"%s\"]}}}", at("ro"));
	ck_assert_int_eq(landlock_plan_build(p, NULL, 0, why, &lp, &cause), 0);
	ck_assert_int_eq(lp.lp_apply, 0);
	r = landlock_plan_record(&lp);
	ck_assert(json_object_object_get_ex(r, "applied", &v) && !json_object_get_boolean(v));
	ck_assert(json_object_object_get_ex(r, "abi", &v) && json_object_get_int(v) == 0);
	ck_assert_msg(strstr(joined(r, "skipped"), why) != NULL, "%s", joined(r, "skipped"));
	json_object_put(r);
	/* Nothing to prepare: no ruleset. */
	int rfd = 0;
	ck_assert_int_eq(landlock_plan_prepare(&lp, &rfd, NULL, &cause), 0);
	ck_assert_int_eq(rfd, -1);
	landlock_plan_free(&lp);
	json_object_put(p);
}
END_TEST

START_TEST(test_plan_defaults)
{
	struct landlock_plan lp;
	struct landlock_opts o;
	struct json_object *r, *v;
	char *cause = NULL, want[2048], cache[1024];

	make_tree();
	snprintf(cache, sizeof(cache), "%s/.cache", at("rw"));
	ck_assert_int_eq(mkdir(cache, 0700), 0);
	memset(&o, 0, sizeof(o));
	o.lo_workspace = at("out");
	o.lo_home = at("rw");	/* has .cache, and none of the other caches */
	ck_assert_int_eq(landlock_plan_build(NULL, &o, 7, NULL, &lp, &cause), 0);
	ck_assert_uint_eq(lp.lp_scoped, LANDLOCK_PLAN_SCOPE_ABSTRACT_UNIX |
	    LANDLOCK_PLAN_SCOPE_SIGNAL);
	r = landlock_plan_record(&lp);
	ck_assert_str_eq(joined(r, "read_only"), "/");
	snprintf(want, sizeof(want), "/tmp|/dev/null|/dev/zero|/dev/full|/dev/tty|/dev/ptmx|"
	    "/dev/pts|/dev/shm|%s|%s", at("out"), cache);
	ck_assert_str_eq(joined(r, "read_write"), want);
	ck_assert_str_eq(joined(r, "scoped"), "abstract_unix_socket|signal");
	ck_assert(json_object_object_get_ex(r, "default_paths", &v) && json_object_get_boolean(v));
	/* Missing default paths are not worth a word. */
	ck_assert_str_eq(joined(r, "skipped"), "");
	json_object_put(r);
	landlock_plan_free(&lp);

	/* A run in / does not make the host writable; ABI 5 has no scopes. */
	o.lo_workspace = "/";
	ck_assert_int_eq(landlock_plan_build(NULL, &o, 5, NULL, &lp, &cause), 0);
	ck_assert_uint_eq(lp.lp_scoped, 0);
	r = landlock_plan_record(&lp);
	ck_assert_msg(strstr(joined(r, "skipped"), "workspace path /: the root directory") != NULL,
	    "%s", joined(r, "skipped"));
	ck_assert_msg(strstr(joined(r, "skipped"), "scopes: signal and abstract-socket") != NULL,
	    "%s", joined(r, "skipped"));
	ck_assert_str_eq(joined(r, "scoped"), "");
	json_object_put(r);
	landlock_plan_free(&lp);

	/* No Landlock and no word from the policy: best effort, not an error. */
	ck_assert_int_eq(landlock_plan_build(NULL, &o, 0, "no landlock", &lp, &cause), 0);
	ck_assert_int_eq(lp.lp_mode, LANDLOCK_PLAN_BEST_EFFORT);
	ck_assert_int_eq(lp.lp_apply, 0);
	landlock_plan_free(&lp);
}
END_TEST

/* Building from this policy must fail with a cause containing want. */
static void
build_fails(struct json_object *p, const char *want)
{
	struct landlock_plan lp;
	char *cause = NULL;

	ck_assert_int_eq(landlock_plan_build(p, NULL, 7, NULL, &lp, &cause), -1);
	ck_assert_msg(cause != NULL && strstr(cause, want) != NULL, "cause %s, want %s", cause,
	    want);
	free(cause);
	json_object_put(p);
}

START_TEST(test_plan_bad_policy)
{
	build_fails(policy("{\"linux\": {\"landlock\": {\"mode\": \"maybe\"}}}"), "maybe");
	build_fails(policy("{\"linux\": {\"landlock\": {\"read_only\": [\"relative/dir\"]}}}"),
	    "not an absolute path");
	/* Also when there is no Landlock to apply it with. */
	struct landlock_plan lp;
	char *cause = NULL;
	struct json_object *p = policy("{\"linux\": {\"landlock\": {\"mode\": \"best_effort\", "
	    "\"read_write\": [\"\"]}}}");
	ck_assert_int_eq(landlock_plan_build(p, NULL, 0, "none", &lp, &cause), -1);
	ck_assert_msg(strstr(cause, "not an absolute path") != NULL, "%s", cause);
	free(cause);
	json_object_put(p);
	build_fails(policy("{\"linux\": {\"landlock\": {\"read_only\": \"/usr\"}}}"), "read_only");
	build_fails(policy("{\"linux\": {\"landlock\": {\"read_only\": [1]}}}"), "read_only");
	build_fails(policy("{\"linux\": {\"landlock\": {\"readonly\": []}}}"), "unknown field");
	build_fails(policy("{\"linux\": {\"landlock\": true}}"), "linux.landlock");
}
END_TEST

/* open(2) as a probe: 0 when it worked, else errno. */
static int
try_open(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

/* In a child: restrict to ro/, solo and rw/, then try reads and writes. */
static void
child_enforced(int rep)
{
	struct landlock_plan lp;
	struct landlock_opts o;
	char *cause = NULL, buf[8];
	int rfd, e;

	struct json_object *p = json_tokener_parse(
	    "{\"linux\": {\"landlock\": {\"default_paths\": false}}}");

	memset(&o, 0, sizeof(o));
	o.lo_ro[o.lo_nro++] = at("ro");
	o.lo_ro[o.lo_nro++] = at("solo");
	o.lo_rw[o.lo_nrw++] = at("rw");
	CHILD_CHECK(landlock_plan_build(p, &o, landlock_abi(&(const char *){ NULL }), NULL, &lp,
	    &cause) == 0, "plan: %s", cause);
	CHILD_CHECK(landlock_plan_prepare(&lp, &rfd, NULL, &cause) == 0 && rfd >= 0, "prepare: %s",
	    cause);
	CHILD_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no_new_privs: %m");
	CHILD_CHECK(landlock_plan_restrict(rfd, &cause) == 0, "restrict: %s", cause);

	/* Outside the lists: neither writes nor reads. */
	CHILD_CHECK((e = try_open(at("out/new"), O_WRONLY | O_CREAT)) == EACCES,
	    "create outside: %s", strerror(e));
	CHILD_CHECK((e = try_open(at("out/file"), O_WRONLY)) == EACCES, "write outside: %s",
	    strerror(e));
	CHILD_CHECK((e = try_open(at("out/file"), O_RDONLY)) == EACCES, "read outside: %s",
	    strerror(e));
	CHILD_CHECK(mkdir(at("out/d"), 0700) == -1 && errno == EACCES, "mkdir outside: %m");
	/* read_only: reads work, writes of any kind fail. */
	int fd = open(at("ro/file"), O_RDONLY | O_CLOEXEC);
	CHILD_CHECK(fd >= 0, "read read_only: %m");
	CHILD_CHECK(read(fd, buf, sizeof(buf)) == 4 && memcmp(buf, "data", 4) == 0, "read data");
	close(fd);
	CHILD_CHECK((e = try_open(at("ro"), O_RDONLY | O_DIRECTORY)) == 0, "list read_only: %s",
	    strerror(e));
	CHILD_CHECK((e = try_open(at("ro/file"), O_WRONLY)) == EACCES, "write read_only: %s",
	    strerror(e));
	CHILD_CHECK((e = try_open(at("ro/new"), O_WRONLY | O_CREAT)) == EACCES,
	    "create in read_only: %s", strerror(e));
	CHILD_CHECK(unlink(at("ro/file")) == -1 && errno == EACCES, "unlink in read_only: %m");
	if (lp.lp_abi >= 3)
		CHILD_CHECK(truncate(at("ro/file"), 0) == -1 && errno == EACCES,
		    "truncate in read_only: %m");
	/* A file entry covers that file only. */
	CHILD_CHECK((e = try_open(at("solo"), O_RDONLY)) == 0, "read read_only file: %s",
	    strerror(e));
	CHILD_CHECK((e = try_open(at("solo-sibling"), O_RDONLY)) == EACCES, "read its sibling: %s",
	    strerror(e));
	/* read_write: create, write, rename within; moving out is refused. */
	fd = open(at("rw/new"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHILD_CHECK(fd >= 0, "create in read_write: %m");
	CHILD_CHECK(write(fd, "x", 1) == 1, "write in read_write: %m");
	close(fd);
	CHILD_CHECK(mkdir(at("rw/d"), 0700) == 0, "mkdir in read_write: %m");
	CHILD_CHECK(rename(at("rw/new"), at("rw/d/new")) == 0, "rename within read_write: %m");
	CHILD_CHECK(rename(at("rw/d/new"), at("out/new")) == -1 &&
	    (errno == EACCES || errno == EXDEV), "rename out of read_write: %m");
	landlock_plan_free(&lp);
}

START_TEST(test_enforced)
{
	char msg[512];

	kernel_abi();
	make_tree();
	int status = unit_in_child(child_enforced, msg, sizeof(msg));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "restricted child: %s (0x%x)",
	    msg, status);
}
END_TEST

START_TEST(test_plan_warnings)
{
	struct landlock_plan lp;
	struct json_object *p, *w;
	char *cause = NULL;

	make_tree();
	/* required with no paths at all: nothing could even be executed. */
	p = policy("{\"linux\": {\"landlock\": {\"mode\": \"required\", \"default_paths\": false}}}");
	ck_assert_int_eq(landlock_plan_build(p, NULL, 7, NULL, &lp, &cause), 0);
	w = json_object_new_array();
	landlock_plan_warnings(&lp, at("out"), w);
	ck_assert_int_eq(json_object_array_length(w), 1);
	ck_assert_msg(strstr(json_object_get_string(json_object_array_get_idx(w, 0)),
	    "with no paths") != NULL, "%s", json_object_to_json_string(w));
	json_object_put(w);
	landlock_plan_free(&lp);
	json_object_put(p);
	/* A workspace below no read_write path; then one below rw/. */
	p = policy("{\"linux\": {\"landlock\": {\"default_paths\": false, \"read_only\": [\"/\"], "
	    "\"read_write\": [\"%s\"]}}}", at("rw"));
	ck_assert_int_eq(landlock_plan_build(p, NULL, 7, NULL, &lp, &cause), 0);
	w = json_object_new_array();
	landlock_plan_warnings(&lp, at("out"), w);
	ck_assert_int_eq(json_object_array_length(w), 1);
	ck_assert_msg(strstr(json_object_get_string(json_object_array_get_idx(w, 0)),
	    "below no read_write path") != NULL, "%s", json_object_to_json_string(w));
	json_object_put(w);
	w = json_object_new_array();
	landlock_plan_warnings(&lp, at("rw"), w);
	ck_assert_int_eq(json_object_array_length(w), 0);
	json_object_put(w);
	landlock_plan_free(&lp);
	json_object_put(p);
}
END_TEST

/* In a child: the default plan with out/ as the workspace; then reads, writes, signals. */
static void
child_defaults(int rep)
{
	struct landlock_plan lp;
	struct landlock_opts o;
	char *cause = NULL;
	int rfd, e;

	memset(&o, 0, sizeof(o));
	o.lo_workspace = at("out");
	CHILD_CHECK(landlock_plan_build(NULL, &o, landlock_abi(&(const char *){ NULL }), NULL, &lp,
	    &cause) == 0, "plan: %s", cause);
	CHILD_CHECK(landlock_plan_prepare(&lp, &rfd, NULL, &cause) == 0 && rfd >= 0, "prepare: %s",
	    cause);
	CHILD_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no_new_privs: %m");
	CHILD_CHECK(landlock_plan_restrict(rfd, &cause) == 0, "restrict: %s", cause);
	/* Read everywhere, write the workspace, /tmp (the tree is there) and /dev/null. */
	CHILD_CHECK((e = try_open("/etc/passwd", O_RDONLY)) == 0, "read: %s", strerror(e));
	CHILD_CHECK((e = try_open("/etc/passwd", O_WRONLY)) == EACCES, "write outside: %s",
	    strerror(e));
	CHILD_CHECK((e = try_open(at("out/new"), O_WRONLY | O_CREAT)) == 0, "create in the "
	    "workspace: %s", strerror(e));
	CHILD_CHECK((e = try_open("/dev/null", O_WRONLY)) == 0, "/dev/null: %s", strerror(e));
	CHILD_CHECK((e = try_open("/etc/gensee-landlock-probe", O_WRONLY | O_CREAT)) == EACCES,
	    "create in /etc: %s", strerror(e));
	/* The signal scope: the parent (outside the domain) cannot be signalled. */
	if (lp.lp_scoped & LANDLOCK_PLAN_SCOPE_SIGNAL)
		CHILD_CHECK(kill(getppid(), 0) == -1 && errno == EPERM, "kill(parent, 0): %m");
	landlock_plan_free(&lp);
}

START_TEST(test_defaults_enforced)
{
	char msg[512];

	kernel_abi();
	make_tree();
	int status = unit_in_child(child_defaults, msg, sizeof(msg));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "restricted child: %s (0x%x)",
	    msg, status);
}
END_TEST

static struct landlock_plan race_plan;

/* In a child: required mode refuses a planned path that is gone. */
static void
child_race_required(int rep)
{
	char *cause = NULL;
	int rfd;

	CHILD_CHECK(landlock_plan_prepare(&race_plan, &rfd, NULL, &cause) == -1,
	    "prepare accepted a path that is gone");
	CHILD_CHECK(strstr(cause, "required") != NULL && strstr(cause, at("rw")) != NULL,
	    "cause: %s", cause);
}

/* In a child: best_effort skips it with a warning. */
static void
child_race_best_effort(int rep)
{
	struct json_object *w = json_object_new_array();
	char *cause = NULL;
	int rfd;

	CHILD_CHECK(landlock_plan_prepare(&race_plan, &rfd, w, &cause) == 0 && rfd >= 0,
	    "prepare: %s", cause);
	CHILD_CHECK(json_object_array_length(w) == 1 && strstr(json_object_get_string(
	    json_object_array_get_idx(w, 0)), at("rw")) != NULL, "warnings: %s",
	    json_object_to_json_string(w));
	json_object_put(w);
}

START_TEST(test_prepare_path_gone)
{
	struct json_object *p;
	char *cause = NULL, msg[512];
	int status;

	kernel_abi();
	make_tree();
	/* Planned while it existed; gone when the child opens it. */
	p = policy("{\"linux\": {\"landlock\": {\"mode\": \"required\", \"default_paths\": false, "
	    "\"read_only\": [\"%s\"], \"read_write\": [\"%s\"]}}}", at("ro"), at("rw"));
	ck_assert_int_eq(landlock_plan_build(p, NULL, kernel_abi(), NULL, &race_plan, &cause), 0);
	json_object_put(p);
	ck_assert_int_eq(rmdir(at("rw")), 0);
	status = unit_in_child(child_race_required, msg, sizeof(msg));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s (0x%x)", msg, status);
	race_plan.lp_mode = LANDLOCK_PLAN_BEST_EFFORT;
	status = unit_in_child(child_race_best_effort, msg, sizeof(msg));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s (0x%x)", msg, status);
	landlock_plan_free(&race_plan);
}
END_TEST

START_TEST(test_abi_matches_kernel)
{
	const char *why = NULL;
	long want = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	int abi = landlock_abi(&why);

	if (want > 0) {
		ck_assert_int_eq(abi, (int)want);
	} else {
		ck_assert_int_eq(abi, 0);
		ck_assert_ptr_nonnull(why);
	}
}
END_TEST

/*
 * Under a seccomp filter that refuses landlock_create_ruleset with EPERM
 * (a systemd unit's SystemCallFilter= without the landlock calls), the
 * kernel's answer is unknown: the default plan stays required and fails
 * closed instead of running the agent without Landlock.
 */
START_TEST(test_abi_refused_by_seccomp_fails_closed)
{
	const char *why = NULL;
	char *cause = NULL;
	struct landlock_plan lp;
	struct landlock_opts o;
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);

	ck_assert_ptr_nonnull(ctx);
	ck_assert_int_eq(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
	    SCMP_SYS(landlock_create_ruleset), 0), 0);
	ck_assert_int_eq(seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1), 0);
	ck_assert_int_eq(seccomp_load(ctx), 0);	/* this forked test process only */
	seccomp_release(ctx);
	int abi = landlock_abi(&why);
	ck_assert_int_eq(abi, -1);
	ck_assert_ptr_nonnull(strstr(why, "refused"));
	memset(&o, 0, sizeof(o));
	o.lo_workspace = "/tmp";
	o.lo_tmpdir = "/tmp";
	ck_assert_int_eq(landlock_plan_build(NULL, &o, abi, why, &lp, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "landlock: required but landlock_create_ruleset was "
	    "refused"));
	free(cause);
}
END_TEST

static Suite *
landlock_suite(void)
{
	Suite *s = suite_create("landlock");
	TCase *tc = tcase_create("plan");

	tcase_add_test(tc, test_access_by_abi);
	tcase_add_test(tc, test_plan_off);
	tcase_add_test(tc, test_plan_lists);
	tcase_add_test(tc, test_plan_defaults);
	tcase_add_test(tc, test_plan_warnings);
	tcase_add_test(tc, test_plan_missing_path);
	tcase_add_test(tc, test_plan_no_landlock);
	tcase_add_test(tc, test_plan_bad_policy);
	tcase_add_test(tc, test_abi_matches_kernel);
	suite_add_tcase(s, tc);
	tc = tcase_create("kernel");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_enforced);
	tcase_add_test(tc, test_defaults_enforced);
	tcase_add_test(tc, test_prepare_path_gone);
	tcase_add_test(tc, test_abi_refused_by_seccomp_fails_closed);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(landlock_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
