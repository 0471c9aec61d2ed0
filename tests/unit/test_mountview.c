/*
 * test_mountview.c: the private mount view (lib/mountview.c).
 *
 * Plans are built against a mkdtemp tree from policy texts and launcher
 * options alone. The view itself is applied for real in forked children
 * (it needs a user and mount namespace of their own, which this host
 * allows): a workspace under /tmp with a $HOME inside it, the hardest case,
 * since the workspace is bound back into the private /tmp from a copy taken
 * before anything was hidden.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <json-c/json.h>

#include "mountview.h"
#include "unit.h"

static char tree[256];

/* tree/rel (unit_path's rotating buffers). */
static const char *
at(const char *rel)
{
	return unit_path(tree, rel);
}

/* Write text to a path of the tree. */
static void
put(const char *rel, const char *text)
{
	FILE *f = fopen(at(rel), "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/*
 * tree/{outside.txt, xdg/bus.txt, ws/{home/{.ssh/id_ed25519, .netrc,
 * .gensee/policy.json}}}, under a fresh /tmp dir.
 */
static void
make_tree(void)
{
	util_strlcpy(tree, unit_tmpdir("/tmp"), sizeof(tree));
	ck_assert_int_eq(mkdir(at("xdg"), 0700), 0);
	ck_assert_int_eq(mkdir(at("ws"), 0755), 0);
	ck_assert_int_eq(mkdir(at("ws/home"), 0755), 0);
	ck_assert_int_eq(mkdir(at("ws/home/.ssh"), 0700), 0);
	ck_assert_int_eq(mkdir(at("ws/home/.gensee"), 0700), 0);
	put("outside.txt", "OUTSIDE\n");
	put("xdg/bus.txt", "BUS\n");
	put("ws/home/.ssh/id_ed25519", "PRIVATE KEY\n");
	put("ws/home/.netrc", "NETRC\n");
	put("ws/home/.gensee/policy.json", "{}\n");
}

/* The launcher's options for the tree. */
static void
opts(struct mountview_opts *o)
{
	static char home[512], gh[512], ws[512], xdg[512];

	memset(o, 0, sizeof(*o));
	util_strlcpy(home, at("ws/home"), sizeof(home));
	util_strlcpy(gh, at("ws/home/.gensee"), sizeof(gh));
	util_strlcpy(ws, at("ws"), sizeof(ws));
	util_strlcpy(xdg, at("xdg"), sizeof(xdg));
	o->mo_home = home;
	o->mo_gensee_home = gh;
	o->mo_workspace = ws;
	o->mo_xdg_runtime_dir = xdg;
	o->mo_uid = getuid();
	o->mo_gid = getgid();
}

/* Parse a test policy. */
static struct json_object *
policy(const char *text)
{
	struct json_object *p = json_tokener_parse(text);

	ck_assert_msg(p != NULL, "bad test policy %s", text);
	return p;
}

/* Whether the JSON array a holds string s. */
static int
has(struct json_object *a, const char *s)
{
	for (size_t i = 0; a != NULL && i < json_object_array_length(a); i++)
		if (strcmp(json_object_get_string(json_object_array_get_idx(a, i)), s) == 0)
			return 1;
	return 0;
}

START_TEST(test_plan_defaults)
{
	struct mountview_opts o;
	struct mountview_plan mv;
	struct json_object *r, *v;
	char *cause = NULL;

	make_tree();
	opts(&o);
	ck_assert_msg(mountview_plan_build(NULL, &o, &mv, &cause) == 0, "%s", cause);
	ck_assert_int_eq(mv.mv_mode, MOUNTVIEW_REQUIRED);
	ck_assert_int_eq(mv.mv_apply, 1);
	r = mountview_plan_record(&mv);
	ck_assert(json_object_object_get_ex(r, "hidden", &v));
	/* What exists is hidden (canonical paths); what does not is not listed. */
	ck_assert(has(v, at("xdg")));
	ck_assert(has(v, at("ws/home/.ssh")));
	ck_assert(has(v, at("ws/home/.netrc")));
	ck_assert(!has(v, at("ws/home/.aws")));
	ck_assert(json_object_object_get_ex(r, "read_only", &v));
	ck_assert(has(v, at("ws/home/.gensee")));
	ck_assert(json_object_object_get_ex(r, "private_tmp", &v) && json_object_get_boolean(v));
	ck_assert_str_eq(json_object_get_string(json_object_object_get(r, "mode")), "required");
	json_object_put(r);
	/* The workspace is bound back (it is under the private /tmp). */
	ck_assert_int_eq(mv.mv_nexpose, 1);
	ck_assert_str_eq(mv.mv_expose[0], at("ws"));
	mountview_plan_free(&mv);
}
END_TEST

START_TEST(test_plan_policy)
{
	struct mountview_opts o;
	struct mountview_plan mv;
	struct json_object *p;
	char *cause = NULL, sock[600];
	struct sockaddr_un sun;
	int fd;

	make_tree();
	opts(&o);
	/* off: nothing applied, and a socket let through is noted as moot. */
	o.mo_allow_unix[o.mo_nallow_unix++] = "/nonexistent.sock";
	p = policy("{\"linux\": {\"mount_view\": {\"mode\": \"off\"}}}");
	ck_assert_int_eq(mountview_plan_build(p, &o, &mv, &cause), 0);
	ck_assert_int_eq(mv.mv_apply, 0);
	ck_assert_int_eq(json_object_array_length(mv.mv_skipped), 1);
	mountview_plan_free(&mv);
	json_object_put(p);
	/* A bad mode, a relative hide path, something that is not a socket: refused. */
	p = policy("{\"linux\": {\"mount_view\": {\"mode\": \"sometimes\"}}}");
	ck_assert_int_eq(mountview_plan_build(p, &o, &mv, &cause), -1);
	ck_assert_msg(strstr(cause, "sometimes") != NULL, "%s", cause);
	free(cause);
	cause = NULL;
	json_object_put(p);
	p = policy("{\"linux\": {\"mount_view\": {\"hide\": [\"relative\"]}}}");
	ck_assert_int_eq(mountview_plan_build(p, &o, &mv, &cause), -1);
	ck_assert_msg(strstr(cause, "not an absolute path") != NULL, "%s", cause);
	free(cause);
	cause = NULL;
	json_object_put(p);
	o.mo_allow_unix[0] = at("outside.txt");
	ck_assert_int_eq(mountview_plan_build(NULL, &o, &mv, &cause), -1);
	ck_assert_msg(strstr(cause, "not a Unix socket") != NULL, "%s", cause);
	free(cause);
	cause = NULL;
	/* A real socket under a hidden place: let through, recorded, bound back. */
	snprintf(sock, sizeof(sock), "%s", at("xdg/agent.sock"));
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	util_strlcpy(sun.sun_path, sock, sizeof(sun.sun_path));
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	o.mo_allow_unix[0] = sock;
	p = policy("{\"linux\": {\"mount_view\": {\"hide\": [\"/nonexistent-gensee\"]}}}");
	ck_assert_msg(mountview_plan_build(p, &o, &mv, &cause) == 0, "%s", cause);
	ck_assert_int_eq(mv.mv_nsockets, 1);
	ck_assert_str_eq(mv.mv_sockets[0], sock);
	ck_assert_int_eq(mv.mv_nexpose, 2);
	mountview_plan_free(&mv);
	json_object_put(p);
	close(fd);
}
END_TEST

static struct mountview_plan child_plan;

/* Read up to 63 bytes of path into buf; 0 or errno. */
static int
slurp(const char *path, char *buf)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	buf[0] = '\0';
	if (fd < 0)
		return errno;
	n = read(fd, buf, 63);
	close(fd);
	if (n < 0)
		return errno;
	buf[n] = '\0';
	return 0;
}

/* In a child: apply the view, then look at the tree through it. */
static void
child_apply(int rep)
{
	struct json_object *w = json_object_new_array();
	char *cause = NULL, buf[64], cwd[512];
	int e, fd;

	CHILD_CHECK(mountview_apply(&child_plan, w, &cause) == 0, "apply: %s", cause);
	CHILD_CHECK(json_object_array_length(w) == 0, "warnings: %s",
	    json_object_to_json_string(w));
	/* The host's /tmp is gone, but for the workspace bound back. */
	CHILD_CHECK((e = slurp(at("outside.txt"), buf)) == ENOENT, "outside.txt: %s %s",
	    strerror(e), buf);
	CHILD_CHECK((e = slurp(at("xdg/bus.txt"), buf)) == ENOENT, "xdg: %s", strerror(e));
	/* Inside the workspace, the credentials are still hidden. */
	CHILD_CHECK((e = slurp(at("ws/home/.ssh/id_ed25519"), buf)) == ENOENT, "key: %s %s",
	    strerror(e), buf);
	CHILD_CHECK((e = slurp(at("ws/home/.netrc"), buf)) == 0 && buf[0] == '\0', ".netrc: %s %s",
	    strerror(e), buf);
	/* $GENSEE_HOME is read-only, the workspace is not. */
	fd = open(at("ws/home/.gensee/new"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHILD_CHECK(fd < 0 && errno == EROFS, "GENSEE_HOME writable: %m");
	fd = open(at("ws/made"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHILD_CHECK(fd >= 0, "workspace: %m");
	close(fd);
	/* The hidden places are sealed: nothing can be planted in them. */
	fd = open(at("ws/home/.ssh/authorized_keys"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHILD_CHECK(fd < 0 && errno == EROFS, "planted in .ssh: %m");
	/* The working directory is the workspace as the view shows it. */
	CHILD_CHECK(getcwd(cwd, sizeof(cwd)) != NULL && strcmp(cwd, at("ws")) == 0, "cwd %s", cwd);
	/* A private /tmp of its own, writable. */
	fd = open("/tmp/gensee-mountview-probe", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHILD_CHECK(fd >= 0, "private /tmp: %m");
	close(fd);
	json_object_put(w);
}

START_TEST(test_apply)
{
	struct mountview_opts o;
	char *cause = NULL, msg[512];

	make_tree();
	opts(&o);
	ck_assert_msg(mountview_plan_build(NULL, &o, &child_plan, &cause) == 0, "%s", cause);
	int status = unit_in_child(child_apply, msg, sizeof(msg));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %s (0x%x)", msg,
	    status);
	/* Nothing of the view reached the host. */
	ck_assert_int_eq(access("/tmp/gensee-mountview-probe", F_OK), -1);
	ck_assert_int_eq(access(at("ws/made"), F_OK), 0);
	ck_assert_int_eq(access(at("ws/home/.ssh/id_ed25519"), F_OK), 0);
	mountview_plan_free(&child_plan);
}
END_TEST

static Suite *
mountview_suite(void)
{
	Suite *s = suite_create("mountview");
	TCase *tc = tcase_create("plan");

	tcase_add_test(tc, test_plan_defaults);
	tcase_add_test(tc, test_plan_policy);
	suite_add_tcase(s, tc);
	tc = tcase_create("kernel");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_apply);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(mountview_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
