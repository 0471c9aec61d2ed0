/*
 * test_auditlog.c: Landlock denial groups from audit records (lib/auditlog.c).
 *
 * The records are the kernel's own, as a real denial printed them on Linux
 * 6.18 (ACCESS, DOMAIN, SYSCALL, EOE), plus the ways a task can shape them:
 * file names that force hex encoding, a path holding " key=" text, groups
 * interleaved, a group with no EOE, a full table, malformed values.
 */
#include <linux/netlink.h>

#include "auditlog.h"
#include "unit.h"

#define ACCESS_W "audit(1796592946.977:4): domain=161e18f8d blockers=fs.write_file " \
	"path=\"/tmp/llx/ro/f\" dev=\"vda\" ino=10952897"
#define DOMAIN_A "audit(1796592946.977:4): domain=161e18f8d status=allocated " \
	"mode=enforcing pid=5452 uid=0 exe=\"/usr/bin/python3.11\" comm=\"python3\""
#define SYSCALL_4 "audit(1796592946.977:4): arch=c000003e syscall=257 success=no " \
	"exit=-13 a0=ffffff9c items=0 ppid=5411 pid=5453 auid=4294967295 uid=0 " \
	"tty=(none) ses=4294967295 comm=\"sh\" exe=\"/usr/bin/dash\" key=(null)"
#define EOE_4 "audit(1796592946.977:4): "

struct seen {
	struct auditlog_denial d[8];
	int n;
};

static void
collect(const struct auditlog_denial *d, void *arg)
{
	struct seen *s = arg;
	if (s->n < 8)
		s->d[s->n] = *d;
	s->n++;
}

static struct auditlog *
fresh(void)
{
	struct auditlog *al = malloc(sizeof(*al));
	ck_assert_ptr_nonnull(al);
	auditlog_init(al);
	return al;
}

static void
feed(struct auditlog *al, unsigned type, const char *text, struct seen *s)
{
	ck_assert_int_eq(auditlog_feed(al, type, text, strlen(text), 0, collect, s), 0);
}

START_TEST(test_group_complete)
{
	struct auditlog *al = fresh();
	struct seen s = { .n = 0 };

	feed(al, AUDITLOG_ACCESS, ACCESS_W, &s);
	feed(al, AUDITLOG_DOMAIN, DOMAIN_A, &s);
	feed(al, AUDITLOG_SYSCALL, SYSCALL_4, &s);
	ck_assert_int_eq(s.n, 0);
	feed(al, AUDITLOG_EOE, EOE_4, &s);
	ck_assert_int_eq(s.n, 1);
	ck_assert_str_eq(s.d[0].ad_blockers, "fs.write_file");
	ck_assert_str_eq(s.d[0].ad_object, "/tmp/llx/ro/f");
	ck_assert_str_eq(s.d[0].ad_domain, "161e18f8d");
	/* The denied task (SYSCALL), not the domain's creator (DOMAIN). */
	ck_assert_int_eq(s.d[0].ad_pid, 5453);
	ck_assert_int_eq(s.d[0].ad_task, 1);
	ck_assert_str_eq(s.d[0].ad_exe, "/usr/bin/dash");
	ck_assert_uint_eq(al->al_npend, 0);
	free(al);
}
END_TEST

/* A name with a space or a quote is hex: " pid=1" inside it is not a field. */
START_TEST(test_hex_path_not_fields)
{
	struct auditlog *al = fresh();
	struct seen s = { .n = 0 };
	const char *name = "/tmp/a\" pid=1 blockers=none";
	char hex[256], text[512];
	size_t i;

	for (i = 0; name[i] != '\0'; i++)
		snprintf(hex + 2 * i, 3, "%02X", (unsigned char)name[i]);
	snprintf(text, sizeof(text), "audit(1.2:9): domain=1a blockers=fs.make_reg path=%s "
	    "dev=\"vda\" ino=2", hex);
	feed(al, AUDITLOG_ACCESS, text, &s);
	feed(al, AUDITLOG_EOE, "audit(1.2:9): ", &s);
	ck_assert_int_eq(s.n, 1);
	ck_assert_str_eq(s.d[0].ad_object, name);
	ck_assert_str_eq(s.d[0].ad_blockers, "fs.make_reg");
	ck_assert_int_eq(s.d[0].ad_pid, 0);	/* no SYSCALL, no known domain */
	free(al);
}
END_TEST

START_TEST(test_field_forms)
{
	const char *t = "audit(1.2:3): a=1 path=\"/x y\" exe=2F62696E comm=(null) bad=0G "
	    "name=2F00 q=\"open";
	char out[64];

	ck_assert_int_eq(auditlog_field(t, strlen(t), "a", out, sizeof(out)), 1);
	ck_assert_str_eq(out, "1");
	ck_assert_int_eq(auditlog_field(t, strlen(t), "exe", out, sizeof(out)), 1);
	ck_assert_str_eq(out, "/bin");
	ck_assert_int_eq(auditlog_field(t, strlen(t), "comm", out, sizeof(out)), 1);
	ck_assert_str_eq(out, "(null)");
	/* Not a field: "y\"" is part of a quoted value. */
	ck_assert_int_eq(auditlog_field(t, strlen(t), "y", out, sizeof(out)), 0);
	ck_assert_int_eq(auditlog_field(t, strlen(t), "bad", out, sizeof(out)), 1);
	ck_assert_str_eq(out, "0G");		/* not a hex key: taken as is */
	ck_assert_int_eq(auditlog_field(t, strlen(t), "name", out, sizeof(out)), -1); /* a NUL */
	ck_assert_int_eq(auditlog_field(t, strlen(t), "q", out, sizeof(out)), -1);
	ck_assert_int_eq(auditlog_field(t, strlen(t), "none", out, sizeof(out)), 0);
	ck_assert_int_eq(auditlog_field(t, strlen(t), "path", out, 3), -1);	/* no room */
	ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_serial)
{
	uint64_t s = 0;
	ck_assert_int_eq(auditlog_serial("audit(1.2:77): x", 16, &s), 0);
	ck_assert_uint_eq(s, 77);
	ck_assert_int_eq(auditlog_serial("audit(1.2:): x", 14, &s), -1);
	ck_assert_int_eq(auditlog_serial("audit(1.2:99999999999999999999): ", 33, &s), -1);
	ck_assert_int_eq(auditlog_serial("nope", 4, &s), -1);
	ck_assert_int_eq(auditlog_serial("audit(1.2:5", 11, &s), -1);
}
END_TEST

/* Two groups interleaved complete apart; a signal target is named by pid. */
START_TEST(test_interleaved_and_signal)
{
	struct auditlog *al = fresh();
	struct seen s = { .n = 0 };

	feed(al, AUDITLOG_ACCESS, ACCESS_W, &s);
	feed(al, AUDITLOG_DOMAIN, DOMAIN_A, &s);
	feed(al, AUDITLOG_ACCESS, "audit(5.0:8): domain=161e18f8d blockers=scope.signal "
	    "opid=1 ocomm=\"init\"", &s);
	feed(al, AUDITLOG_SYSCALL, "audit(5.0:8): syscall=62 pid=77 exe=\"/usr/bin/dash\"", &s);
	feed(al, AUDITLOG_EOE, "audit(5.0:8): ", &s);
	ck_assert_int_eq(s.n, 1);
	ck_assert_str_eq(s.d[0].ad_object, "pid 1 (init)");
	ck_assert_int_eq(s.d[0].ad_pid, 77);
	/* Group 4 has no SYSCALL: it ends by age, with the domain's creator. */
	auditlog_expire(al, 100, 200, collect, &s);
	ck_assert_int_eq(s.n, 1);
	auditlog_expire(al, 300, 200, collect, &s);
	ck_assert_int_eq(s.n, 2);
	ck_assert_int_eq(s.d[1].ad_pid, 5452);
	ck_assert_int_eq(s.d[1].ad_task, 0);
	/* A later group of the same domain, no DOMAIN record: the creator is remembered. */
	feed(al, AUDITLOG_ACCESS, "audit(6.0:9): domain=161e18f8d blockers=fs.read_file "
	    "path=\"/etc/x\"", &s);
	auditlog_expire(al, 0, -1, collect, &s);
	ck_assert_int_eq(s.n, 3);
	ck_assert_int_eq(s.d[2].ad_pid, 5452);
	/* Deallocated: forgotten. */
	feed(al, AUDITLOG_DOMAIN, "audit(7.0:10): domain=161e18f8d status=deallocated "
	    "denials=3", &s);
	feed(al, AUDITLOG_ACCESS, "audit(8.0:11): domain=161e18f8d blockers=fs.read_file "
	    "path=\"/etc/y\"", &s);
	auditlog_expire(al, 0, -1, collect, &s);
	ck_assert_int_eq(s.n, 4);
	ck_assert_int_eq(s.d[3].ad_pid, 0);
	free(al);
}
END_TEST

/* Records of other types and SYSCALLs of tasks we assemble nothing for are ignored. */
START_TEST(test_other_records)
{
	struct auditlog *al = fresh();
	struct seen s = { .n = 0 };

	feed(al, 1325, "audit(1.0:1): table=x family=1 op=nft_register_table", &s);
	feed(al, AUDITLOG_SYSCALL, "audit(1.0:1): syscall=46 pid=3", &s);
	feed(al, AUDITLOG_EOE, "audit(1.0:1): ", &s);
	ck_assert_int_eq(s.n, 0);
	ck_assert_uint_eq(al->al_npend, 0);
	ck_assert_int_eq(auditlog_feed(al, AUDITLOG_ACCESS, "audit(1.0:2): blockers=fs.x", 27,
	    0, collect, &s), -1);
	ck_assert_int_eq(errno, EBADMSG);
	ck_assert_int_eq(auditlog_feed(al, AUDITLOG_ACCESS, "garbage", 7, 0, collect, &s), -1);
	ck_assert_uint_eq(al->al_malformed, 2);
	free(al);
}
END_TEST

/* A table full of groups that never end: the oldest is completed, never lost. */
START_TEST(test_table_full)
{
	struct auditlog *al = fresh();
	struct seen s = { .n = 0 };
	char t[128];

	for (int i = 0; i < AUDITLOG_PENDING + 3; i++) {
		snprintf(t, sizeof(t), "audit(1.0:%d): domain=ab blockers=fs.write_file "
		    "path=\"/f%d\"", 100 + i, i);
		ck_assert_int_eq(auditlog_feed(al, AUDITLOG_ACCESS, t, strlen(t), i, collect, &s),
		    0);
	}
	ck_assert_int_eq(s.n, 3);
	ck_assert_str_eq(s.d[0].ad_object, "/f0");
	ck_assert_uint_eq(al->al_npend, AUDITLOG_PENDING);
	free(al);
}
END_TEST

/* Datagrams: two messages, an odd address, a length that lies. */
START_TEST(test_parse_datagram)
{
	struct auditlog *al = fresh();
	struct seen s = { .n = 0 };
	uint8_t buf[1024], *odd = buf + 1;
	size_t off = 0;
	const char *texts[] = { ACCESS_W, EOE_4 };
	unsigned types[] = { AUDITLOG_ACCESS, AUDITLOG_EOE };

	for (int i = 0; i < 2; i++) {
		struct nlmsghdr h = { .nlmsg_len = (uint32_t)(NLMSG_HDRLEN + strlen(texts[i]) + 1),
			.nlmsg_type = (uint16_t)types[i] };
		memcpy(odd + off, &h, sizeof(h));
		memcpy(odd + off + NLMSG_HDRLEN, texts[i], strlen(texts[i]) + 1);
		off += NLMSG_ALIGN(h.nlmsg_len);
	}
	ck_assert_int_eq(auditlog_parse(al, odd, off, 0, collect, &s), 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_str_eq(s.d[0].ad_object, "/tmp/llx/ro/f");
	struct nlmsghdr lie = { .nlmsg_len = 4000, .nlmsg_type = AUDITLOG_ACCESS };
	memcpy(odd, &lie, sizeof(lie));
	ck_assert_int_eq(auditlog_parse(al, odd, off, 0, collect, &s), -1);
	ck_assert_int_eq(errno, EBADMSG);
	free(al);
}
END_TEST

static Suite *
auditlog_suite(void)
{
	Suite *s = suite_create("auditlog");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_group_complete);
	tcase_add_test(tc, test_hex_path_not_fields);
	tcase_add_test(tc, test_field_forms);
	tcase_add_test(tc, test_serial);
	tcase_add_test(tc, test_interleaved_and_signal);
	tcase_add_test(tc, test_other_records);
	tcase_add_test(tc, test_table_full);
	tcase_add_test(tc, test_parse_datagram);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(auditlog_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
