/*
 * test_hostcaps.c: the host probes and their parsers.
 *
 * The probes run against the real kernel, so the checks compare each
 * answer with what the underlying syscall or file says rather than with a
 * fixed expectation; the parsers are checked on fixed text.
 */
#include <sys/syscall.h>

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/landlock.h>

#include <json-c/json.h>

#include "cgroup.h"
#include "hostcaps.h"
#include "util.h"

static const char *const test_names[] = {
	"fanotify_permission_events", "seccomp", "cgroup_v2", "nftables", "landlock",
	"user_namespaces", "bpf_mount", "apparmor", "selinux", "proc_connector", "speculation_backends",
	"kernel", "running_as_root",
};

/* The entry name of a fresh probe (the test owns *all and puts it). */
static struct json_object *
test_entry(struct json_object **all, const char *name)
{
	struct json_object *e;

	*all = hostcaps_probe();
	ck_assert_ptr_nonnull(*all);
	ck_assert_msg(json_object_object_get_ex(*all, name, &e), "missing %s", name);
	return e;
}

/* Count this process's open fds. */
static int
test_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	ck_assert_int_eq(closedir(d), 0);
	return n;
}

START_TEST(test_probe_shape)
{
	struct json_object *all = hostcaps_probe(), *e, *v;

	ck_assert_ptr_nonnull(all);
	ck_assert_int_eq(json_object_object_length(all), (int)(sizeof(test_names) /
	    sizeof(test_names[0])));
	for (size_t i = 0; i < sizeof(test_names) / sizeof(test_names[0]); i++) {
		ck_assert_msg(json_object_object_get_ex(all, test_names[i], &e), "missing %s",
		    test_names[i]);
		ck_assert(json_object_is_type(e, json_type_object));
		ck_assert_msg(json_object_object_get_ex(e, "available", &v) &&
		    json_object_is_type(v, json_type_boolean), "%s: available", test_names[i]);
		ck_assert_msg(json_object_object_get_ex(e, "detail", &v) &&
		    json_object_is_type(v, json_type_string) &&
		    json_object_get_string_len(v) > 0, "%s: detail", test_names[i]);
	}
	json_object_put(all);
}
END_TEST

START_TEST(test_probe_specific_fields)
{
	struct json_object *all = hostcaps_probe(), *e, *v;

	ck_assert_ptr_nonnull(all);
	e = json_object_object_get(all, "seccomp");
	ck_assert(json_object_object_get_ex(e, "actions", &v) &&
	    json_object_is_type(v, json_type_array));
	e = json_object_object_get(all, "speculation_backends");
	ck_assert(json_object_is_type(json_object_object_get(e, "btrfs"), json_type_boolean));
	ck_assert(json_object_is_type(json_object_object_get(e, "overlayfs"), json_type_boolean));
	ck_assert(json_object_get_boolean(json_object_object_get(e, "copy")));
	e = json_object_object_get(all, "kernel");
	ck_assert(json_object_is_type(json_object_object_get(e, "release"), json_type_string));
	e = json_object_object_get(all, "running_as_root");
	ck_assert_int_eq(json_object_get_boolean(json_object_object_get(e, "available")),
	    geteuid() == 0);
	e = json_object_object_get(all, "nftables");
	ck_assert(json_object_object_get_ex(e, "socket_cgroupv2", &v));
	ck_assert(json_object_object_get_ex(e, "socket_cgroupv2_basis", &v));
	e = json_object_object_get(all, "selinux");
	ck_assert(json_object_object_get_ex(e, "enforcing", &v));
	e = json_object_object_get(all, "apparmor");
	ck_assert(json_object_is_type(json_object_object_get(e, "enabled"), json_type_boolean));
	json_object_put(all);
}
END_TEST

START_TEST(test_probe_landlock_matches_syscall)
{
	struct json_object *all, *e = test_entry(&all, "landlock"), *abi;
	long want = syscall(SYS_landlock_create_ruleset, NULL, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);

	abi = json_object_object_get(e, "abi");
	if (want >= 1) {
		ck_assert(json_object_get_boolean(json_object_object_get(e, "available")));
		ck_assert(json_object_is_type(abi, json_type_int));
		ck_assert_int_eq(json_object_get_int(abi), want);
	} else {
		ck_assert(!json_object_get_boolean(json_object_object_get(e, "available")));
		ck_assert_ptr_null(abi);
	}
	json_object_put(all);
}
END_TEST

START_TEST(test_probe_cgroup_matches_mountinfo)
{
	struct json_object *all, *e = test_entry(&all, "cgroup_v2"), *ctl;
	char mnt[PATH_MAX], *cause = NULL;

	if (cgroup_find_mount(mnt, sizeof(mnt), &cause) == 0) {
		ck_assert(json_object_get_boolean(json_object_object_get(e, "available")));
		ck_assert_str_eq(json_object_get_string(json_object_object_get(e, "mount")), mnt);
		ctl = json_object_object_get(e, "controllers");
		ck_assert(json_object_is_type(ctl, json_type_array));
	} else {
		ck_assert(!json_object_get_boolean(json_object_object_get(e, "available")));
		free(cause);
	}
	json_object_put(all);
}
END_TEST

START_TEST(test_probe_bpf_matches_mountinfo)
{
	struct json_object *all, *e = test_entry(&all, "bpf_mount");
	char mnt[PATH_MAX], *mi;

	ck_assert_int_eq(util_read_path("/proc/self/mountinfo", 4 * 1024 * 1024, &mi, NULL), 0);
	if (hostcaps_mountinfo_find(mi, "bpf", mnt, sizeof(mnt)) == 0) {
		ck_assert(json_object_get_boolean(json_object_object_get(e, "available")));
		ck_assert_str_eq(json_object_get_string(json_object_object_get(e, "mount")), mnt);
	} else {
		ck_assert(!json_object_get_boolean(json_object_object_get(e, "available")));
	}
	free(mi);
	json_object_put(all);
}
END_TEST

START_TEST(test_probe_seccomp_actions_match_file)
{
	struct json_object *all, *e = test_entry(&all, "seccomp"), *want, *got;
	char *text;

	if (util_read_path("/proc/sys/kernel/seccomp/actions_avail", 4096, &text, NULL) != 0) {
		ck_assert(!json_object_get_boolean(json_object_object_get(e, "available")));
		json_object_put(all);
		return;
	}
	want = hostcaps_words(text);
	got = json_object_object_get(e, "actions");
	ck_assert_int_eq(json_object_array_length(got), json_object_array_length(want));
	for (size_t i = 0; i < json_object_array_length(want); i++)
		ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(got, i)),
		    json_object_get_string(json_object_array_get_idx(want, i)));
	json_object_put(want);
	free(text);
	json_object_put(all);
}
END_TEST

START_TEST(test_probe_leaves_no_fds)
{
	int before = test_count_fds();

	json_object_put(hostcaps_probe());
	ck_assert_int_eq(test_count_fds(), before);
}
END_TEST

START_TEST(test_filesystems_has)
{
	const char *text = "nodev\tsysfs\nnodev\tcgroup2\n\text4\nnodev\toverlay\n\tbtrfs";

	ck_assert_int_eq(hostcaps_filesystems_has(text, "btrfs"), 1);
	ck_assert_int_eq(hostcaps_filesystems_has(text, "overlay"), 1);
	ck_assert_int_eq(hostcaps_filesystems_has(text, "ext4"), 1);
	ck_assert_int_eq(hostcaps_filesystems_has(text, "sysfs"), 1);
	ck_assert_int_eq(hostcaps_filesystems_has(text, "cgroup"), 0);
	ck_assert_int_eq(hostcaps_filesystems_has(text, "over"), 0);
	ck_assert_int_eq(hostcaps_filesystems_has(text, "nodev"), 0);
	ck_assert_int_eq(hostcaps_filesystems_has("", "btrfs"), 0);
}
END_TEST

START_TEST(test_words)
{
	struct json_object *a;

	a = hostcaps_words("kill_process kill_thread trap errno user_notif trace log allow\n");
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(json_object_array_length(a), 8);
	ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(a, 0)), "kill_process");
	ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(a, 7)), "allow");
	json_object_put(a);

	a = hostcaps_words("  cpu\tio \n memory  ");
	ck_assert_int_eq(json_object_array_length(a), 3);
	ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(a, 1)), "io");
	ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(a, 2)), "memory");
	json_object_put(a);

	a = hostcaps_words("");
	ck_assert_int_eq(json_object_array_length(a), 0);
	json_object_put(a);
}
END_TEST

START_TEST(test_mountinfo_find)
{
	const char *text =
	    "22 1 0:21 / /sys rw,nosuid shared:7 - sysfs sysfs rw\n"
	    "36 35 98:0 / /bpf rw,noatime master:1 - ext4 /dev/root rw\n"
	    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n"
	    "41 22 0:38 / /sys/fs/my\\040bpf rw - bpf bpf rw,mode=700\n"
	    "42 22 0:39 / /odd rw shared:1 master:2 - - weird rw";
	char buf[PATH_MAX], tiny[4];

	ck_assert_int_eq(hostcaps_mountinfo_find(text, "bpf", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/sys/fs/my bpf");
	ck_assert_int_eq(hostcaps_mountinfo_find(text, "cgroup2", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/sys/fs/cgroup/unified");
	ck_assert_int_eq(hostcaps_mountinfo_find(text, "ext4", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/bpf");
	ck_assert_int_eq(hostcaps_mountinfo_find(text, "-", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/odd");
	ck_assert_int_eq(hostcaps_mountinfo_find(text, "tmpfs", buf, sizeof(buf)), -1);
	ck_assert_int_eq(hostcaps_mountinfo_find(text, "cgroup", buf, sizeof(buf)), -1);
	ck_assert_int_eq(hostcaps_mountinfo_find(text, "cgroup2", tiny, sizeof(tiny)), -1);
	ck_assert_int_eq(hostcaps_mountinfo_find("", "bpf", buf, sizeof(buf)), -1);
	ck_assert_int_eq(hostcaps_mountinfo_find("1 2 3 4 /x rw\n", "rw", buf, sizeof(buf)),
	    -1);
}
END_TEST

START_TEST(test_release_at_least)
{
	ck_assert_int_eq(hostcaps_release_at_least("6.18.44-fc-v1045", 5, 14), 1);
	ck_assert_int_eq(hostcaps_release_at_least("5.14.0-284.el9.x86_64", 5, 14), 1);
	ck_assert_int_eq(hostcaps_release_at_least("5.13.19", 5, 14), 0);
	ck_assert_int_eq(hostcaps_release_at_least("5.4.0-150-generic", 5, 14), 0);
	ck_assert_int_eq(hostcaps_release_at_least("4.19.0", 5, 14), 0);
	ck_assert_int_eq(hostcaps_release_at_least("6", 5, 14), 1);
	ck_assert_int_eq(hostcaps_release_at_least("unknown", 5, 14), 0);
	ck_assert_int_eq(hostcaps_release_at_least("", 5, 14), 0);
}
END_TEST

/* The suite: probes against the real kernel, then the parsers. */
static Suite *
test_hostcaps_suite(void)
{
	Suite *s = suite_create("hostcaps");
	TCase *probe = tcase_create("probe");
	TCase *parse = tcase_create("parse");

	tcase_set_timeout(probe, 30);
	tcase_add_test(probe, test_probe_shape);
	tcase_add_test(probe, test_probe_specific_fields);
	tcase_add_test(probe, test_probe_landlock_matches_syscall);
	tcase_add_test(probe, test_probe_cgroup_matches_mountinfo);
	tcase_add_test(probe, test_probe_bpf_matches_mountinfo);
	tcase_add_test(probe, test_probe_seccomp_actions_match_file);
	tcase_add_test(probe, test_probe_leaves_no_fds);
	suite_add_tcase(s, probe);
	tcase_add_test(parse, test_filesystems_has);
	tcase_add_test(parse, test_words);
	tcase_add_test(parse, test_mountinfo_find);
	tcase_add_test(parse, test_release_at_least);
	suite_add_tcase(s, parse);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(test_hostcaps_suite());
	int failures;

	srunner_run_all(sr, CK_NORMAL);
	failures = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failures ? 1 : 0;
}
