/*
 * test_dnsmsg.c: the DNS proxy's message parser and builder (lib/dnsmsg.c)
 * and the dns config section (lib/dnspolicy.c).
 */
#include <arpa/inet.h>
#include <sys/socket.h>

#include <json-c/json.h>

#include "dnsmsg.h"
#include "dnspolicy.h"
#include "unit.h"

/* A reply header + question for qname/qtype; records appended by the caller. */
static size_t
mk_reply(uint8_t *b, const char *qname, uint16_t qtype, int an, int rcode)
{
	struct dnsmsg_query q;
	int n;

	memset(&q, 0, sizeof(q));
	q.dq_id = 0x1234;
	strcpy(q.dq_name, qname);
	q.dq_type = qtype;
	q.dq_class = DNS_CLASS_IN;
	n = dnsmsg_build_error(&q, rcode, b, 512);
	ck_assert_int_gt(n, 12);
	b[7] = (uint8_t)an;
	return (size_t)n;
}

/* An answer record with its owner as a pointer to the question name (offset 12). */
static size_t
add_rr(uint8_t *b, size_t off, int ptr, const char *owner, uint16_t type, uint32_t ttl,
    const uint8_t *rd, size_t rdlen)
{
	if (ptr) {
		b[off++] = 0xc0;
		b[off++] = 12;
	} else {
		const char *s = owner;
		while (*s) {
			size_t l = strcspn(s, ".");
			b[off++] = (uint8_t)l;
			memcpy(b + off, s, l);
			off += l;
			s += l + (s[l] == '.');
		}
		b[off++] = 0;
	}
	b[off++] = (uint8_t)(type >> 8);
	b[off++] = (uint8_t)type;
	b[off++] = 0;
	b[off++] = 1;
	b[off++] = (uint8_t)(ttl >> 24);
	b[off++] = (uint8_t)(ttl >> 16);
	b[off++] = (uint8_t)(ttl >> 8);
	b[off++] = (uint8_t)ttl;
	b[off++] = (uint8_t)(rdlen >> 8);
	b[off++] = (uint8_t)rdlen;
	memcpy(b + off, rd, rdlen);
	return off + rdlen;
}

START_TEST(test_query_roundtrip)
{
	uint8_t b[512];
	struct dnsmsg_query q;
	const char *code = NULL;
	int n = dnsmsg_build_query(7, "api.example.com", DNS_TYPE_AAAA, b, sizeof(b));

	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(dnsmsg_parse_query(b, (size_t)n, &q, &code), 0);
	ck_assert_str_eq(q.dq_name, "api.example.com");
	ck_assert_uint_eq(q.dq_type, DNS_TYPE_AAAA);
	ck_assert_uint_eq(q.dq_id, 7);
	ck_assert_int_eq(q.dq_rd, 1);
	/* Upper case is folded; trailing bytes, a reply, two questions are refused. */
	b[13] = 'A';
	ck_assert_int_eq(dnsmsg_parse_query(b, (size_t)n, &q, &code), 0);
	ck_assert_str_eq(q.dq_name, "api.example.com");
	ck_assert_int_eq(dnsmsg_parse_query(b, (size_t)n + 1, &q, &code), -1);
	b[2] |= 0x80;
	ck_assert_int_eq(dnsmsg_parse_query(b, (size_t)n, &q, &code), -1);
	ck_assert_str_eq(code, DNSE_NOT_QUERY);
	b[2] &= 0x7f;
	b[5] = 2;
	ck_assert_int_eq(dnsmsg_parse_query(b, (size_t)n, &q, &code), -1);
	ck_assert_str_eq(code, DNSE_COUNTS);
	b[5] = 1;
	/* A '.' or a NUL inside a label would split differently as text. */
	b[14] = '.';
	ck_assert_int_eq(dnsmsg_parse_query(b, (size_t)n, &q, &code), -1);
	ck_assert_str_eq(code, DNSE_NAME);
	b[14] = 0;
	ck_assert_int_eq(dnsmsg_parse_query(b, (size_t)n, &q, &code), -1);
	ck_assert_str_eq(code, DNSE_NAME);
	/* Short messages at every length. */
	b[14] = 'x';
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(dnsmsg_parse_query(b, (size_t)i, &q, &code), -1);
}
END_TEST

START_TEST(test_pointers)
{
	uint8_t b[512];
	struct dnsmsg_reply r;
	const char *code = NULL;
	size_t off = mk_reply(b, "a.example", DNS_TYPE_A, 1, 0);
	uint8_t addr[4] = { 192, 0, 2, 10 };

	off = add_rr(b, off, 1, NULL, DNS_TYPE_A, 60, addr, 4);
	ck_assert_int_eq(dnsmsg_parse_reply(b, off, &r, &code), 0);
	ck_assert_uint_eq(r.da_n, 1);
	ck_assert_str_eq(r.da_rr[0].dr_name, "a.example");
	/* A pointer to itself or forwards is a loop or a forgery. */
	size_t at = off - 16;
	b[at + 1] = (uint8_t)at;
	ck_assert_int_eq(dnsmsg_parse_reply(b, off, &r, &code), -1);
	ck_assert_str_eq(code, DNSE_POINTER);
	b[at + 1] = 200;
	ck_assert_int_eq(dnsmsg_parse_reply(b, off, &r, &code), -1);
	ck_assert_str_eq(code, DNSE_POINTER);
	b[at + 1] = 12;
	/* A wrong rdata length for A. */
	b[off - 5] = 5;
	ck_assert_int_eq(dnsmsg_parse_reply(b, off, &r, &code), -1);
	b[off - 5] = 4;
	/* TC is refused: never half an answer. */
	b[2] |= 0x02;
	ck_assert_int_eq(dnsmsg_parse_reply(b, off, &r, &code), -1);
	ck_assert_str_eq(code, DNSE_TC);
}
END_TEST

START_TEST(test_chain)
{
	uint8_t b[1024], out[512];
	struct dnsmsg_reply r;
	struct dnsmsg_chain c;
	struct dnsmsg_query q;
	const char *code = NULL;
	uint8_t tgt[64], a1[4] = { 192, 0, 2, 11 }, a2[4] = { 192, 0, 2, 99 };
	size_t off = mk_reply(b, "cdn.example.com", DNS_TYPE_A, 3, 0), tl = 0;
	const char *t = "edge.cdn.example.net";

	while (*t) {
		size_t l = strcspn(t, ".");
		tgt[tl++] = (uint8_t)l;
		memcpy(tgt + tl, t, l);
		tl += l;
		t += l + (t[l] == '.');
	}
	tgt[tl++] = 0;
	off = add_rr(b, off, 1, NULL, DNS_TYPE_CNAME, 50, tgt, tl);
	off = add_rr(b, off, 0, "edge.cdn.example.net", DNS_TYPE_A, 20, a1, 4);
	/* Off the chain: dropped, never answered or leased. */
	off = add_rr(b, off, 0, "other.example.org", DNS_TYPE_A, 5, a2, 4);
	ck_assert_int_eq(dnsmsg_parse_reply(b, off, &r, &code), 0);
	ck_assert_int_eq(dnsmsg_chain(&r, "cdn.example.com", DNS_TYPE_A, &c, &code), 0);
	ck_assert_uint_eq(c.dc_nnames, 2);
	ck_assert_str_eq(c.dc_names[1], "edge.cdn.example.net");
	ck_assert_uint_eq(c.dc_naddrs, 1);
	ck_assert_mem_eq(c.dc_addrs[0], a1, 4);
	ck_assert_uint_eq(c.dc_ttl, 20);
	/* The rebuilt answer parses back to the same chain. */
	memset(&q, 0, sizeof(q));
	strcpy(q.dq_name, "cdn.example.com");
	q.dq_type = DNS_TYPE_A;
	q.dq_class = DNS_CLASS_IN;
	int n = dnsmsg_build_answer(&q, &c, 7, out, sizeof(out));
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(dnsmsg_parse_reply(out, (size_t)n, &r, &code), 0);
	ck_assert_uint_eq(r.da_n, 2);
	ck_assert_uint_eq(r.da_rr[0].dr_ttl, 7);
	ck_assert_str_eq(r.da_rr[1].dr_name, "edge.cdn.example.net");
	/* Too small: the question alone with TC. */
	n = dnsmsg_build_answer(&q, &c, 7, out, 40);
	ck_assert_int_gt(n, 0);
	ck_assert_int_ne(out[2] & 0x02, 0);
	ck_assert_int_eq(out[7], 0);
}
END_TEST

START_TEST(test_cname_loop)
{
	struct dnsmsg_reply r;
	struct dnsmsg_chain c;
	const char *code = NULL;

	memset(&r, 0, sizeof(r));
	r.da_n = 2;
	strcpy(r.da_rr[0].dr_name, "a.example");
	strcpy(r.da_rr[0].dr_target, "b.example");
	r.da_rr[0].dr_type = DNS_TYPE_CNAME;
	strcpy(r.da_rr[1].dr_name, "b.example");
	strcpy(r.da_rr[1].dr_target, "a.example");
	r.da_rr[1].dr_type = DNS_TYPE_CNAME;
	ck_assert_int_eq(dnsmsg_chain(&r, "a.example", DNS_TYPE_A, &c, &code), -1);
	ck_assert_str_eq(code, DNSE_CHAIN);
	/* Two CNAMEs for one name: ambiguous. */
	strcpy(r.da_rr[1].dr_name, "a.example");
	strcpy(r.da_rr[1].dr_target, "c.example");
	ck_assert_int_eq(dnsmsg_chain(&r, "a.example", DNS_TYPE_A, &c, &code), -1);
}
END_TEST

START_TEST(test_patterns)
{
	ck_assert(dnsmsg_name_match("api.example.com", "api.example.com"));
	ck_assert(!dnsmsg_name_match("api.example.com", "xapi.example.com"));
	ck_assert(dnsmsg_name_match("*.pypi.org", "files.pypi.org"));
	ck_assert(dnsmsg_name_match("*.pypi.org", "a.b.pypi.org"));
	ck_assert(!dnsmsg_name_match("*.pypi.org", "pypi.org"));
	ck_assert(!dnsmsg_name_match("*.pypi.org", "evilpypi.org"));
	ck_assert(!dnsmsg_name_match("*.pypi.org", "pypi.org.evil.com"));
	ck_assert(dnsmsg_valid_pattern("*.pypi.org"));
	ck_assert(!dnsmsg_valid_pattern("*.org"));
	ck_assert(!dnsmsg_valid_pattern("*"));
	ck_assert(!dnsmsg_valid_pattern("a.*.org"));
	ck_assert(!dnsmsg_valid_pattern("API.example.com"));
	ck_assert(!dnsmsg_valid_pattern("api.example.com."));
	ck_assert(!dnsmsg_valid_pattern("a..b"));
}
END_TEST

START_TEST(test_policy)
{
	struct dnspolicy p;
	char *cause = NULL;
	struct json_object *o = json_tokener_parse(
	    "{\"listen\":\"198.51.100.1:53\",\"client_address\":\"198.51.100.12\","
	    "\"allow\":[{\"name\":\"*.pypi.org\",\"protocol\":\"tcp\",\"ports\":[443,80]}],"
	    "\"min_ttl_seconds\":2,\"max_ttl_seconds\":30}");

	ck_assert_int_eq(dnspolicy_parse(o, &p, &cause), 0);
	ck_assert_uint_eq(p.dp_n, 1);
	ck_assert_uint_eq(p.dp_v[0].de_nports, 2);
	ck_assert_int_eq(dnspolicy_match(&p, "files.pypi.org", 0), 0);
	ck_assert_int_eq(dnspolicy_match(&p, "pypi.org", 0), -1);
	ck_assert_int_eq(dnspolicy_ttl(&p, 0), 2);
	ck_assert_int_eq(dnspolicy_ttl(&p, 86400), 30);
	ck_assert_int_eq(dnspolicy_ttl(&p, 10), 10);
	dnspolicy_free(&p);
	json_object_put(o);
	const char *bad[] = {
		"{\"listen\":\"api.example.com:53\",\"client_address\":\"198.51.100.12\",\"allow\":[]}",
		"{\"listen\":\"198.51.100.1:53\",\"client_address\":\"x\",\"allow\":[]}",
		"{\"listen\":\"198.51.100.1:53\",\"client_address\":\"198.51.100.12\",\"allow\":[],"
		"\"extra\":1}",
		"{\"listen\":\"198.51.100.1:53\",\"client_address\":\"198.51.100.12\",\"allow\":"
		"[{\"name\":\"*.com\",\"protocol\":\"tcp\",\"ports\":[443]}]}",
		"{\"listen\":\"198.51.100.1:53\",\"client_address\":\"198.51.100.12\",\"allow\":"
		"[{\"name\":\"a.example\",\"protocol\":\"icmp\",\"ports\":[443]}]}",
		"{\"listen\":\"198.51.100.1:53\",\"client_address\":\"198.51.100.12\",\"allow\":"
		"[{\"name\":\"a.example\",\"protocol\":\"tcp\",\"ports\":[0]}]}",
		"{\"listen\":\"198.51.100.1:53\",\"client_address\":\"198.51.100.12\",\"allow\":[],"
		"\"min_ttl_seconds\":60,\"max_ttl_seconds\":30}",
	};
	for (size_t i = 0; i < nitems(bad); i++) {
		o = json_tokener_parse(bad[i]);
		ck_assert_ptr_nonnull(o);
		ck_assert_int_eq(dnspolicy_parse(o, &p, &cause), -1);
		free(cause);
		cause = NULL;
		json_object_put(o);
	}
}
END_TEST

static Suite *
dnsmsg_suite(void)
{
	Suite *s = suite_create("dnsmsg");
	TCase *tc = tcase_create("dnsmsg");

	tcase_add_test(tc, test_query_roundtrip);
	tcase_add_test(tc, test_pointers);
	tcase_add_test(tc, test_chain);
	tcase_add_test(tc, test_cname_loop);
	tcase_add_test(tc, test_patterns);
	tcase_add_test(tc, test_policy);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(dnsmsg_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
