/*
 * test_netpolicy.c: envelopes, restricted destinations, dispositions and
 * the schema-3 config parser.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include <json-c/json.h>

#include "netpolicy.h"
#include "unit.h"

static struct np_event
ev(const char *addr, int proto, int port)
{
	struct np_event e;
	memset(&e, 0, sizeof(e));
	ck_assert_int_eq(netpolicy_parse_addr(addr, &e.ne_family, e.ne_addr), 0);
	e.ne_proto = (uint8_t)proto;
	e.ne_port = (uint16_t)port;
	return e;
}

static void
grants(struct np_grants *g, const char *const *v, size_t n)
{
	memset(g, 0, sizeof(*g));
	for (size_t i = 0; i < n; i++) {
		char *cause = NULL;
		ck_assert_msg(netpolicy_parse_grant_string(v[i], g, NULL, &cause) == 0, "%s: %s",
		    v[i], cause);
	}
}

START_TEST(test_ranges)
{
	struct np_range r;
	char buf[128];
	int hostname;

	ck_assert_int_eq(netpolicy_parse_range("192.0.2.77/24", &r, &hostname), 0);
	netpolicy_range_format(&r, buf, sizeof(buf));
	ck_assert_str_eq(buf, "192.0.2.0/24"); /* host bits cleared */
	ck_assert_int_eq(netpolicy_parse_range("2001:db8::1", &r, &hostname), 0);
	netpolicy_range_format(&r, buf, sizeof(buf));
	ck_assert_str_eq(buf, "2001:db8::1");
	ck_assert_int_eq(netpolicy_parse_range("0.0.0.0/0", &r, &hostname), 0);
	netpolicy_range_format(&r, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0.0.0.0/0");
	const char *bad[] = { "192.0.2.1/33", "2001:db8::/129", "192.0.2.1/", "192.0.2.1/-1",
		"192.0.2.1/8x", "", "1.2.3", "::g" };
	for (size_t i = 0; i < nitems(bad); i++)
		ck_assert_msg(netpolicy_parse_range(bad[i], &r, &hostname) == -1 && !hostname,
		    "%s accepted", bad[i]);
	ck_assert_int_eq(netpolicy_parse_range("api.example.com", &r, &hostname), -1);
	ck_assert_int_eq(hostname, 1);
}
END_TEST

START_TEST(test_grant_strings)
{
	struct np_grants g = { 0 };
	char *cause = NULL;
	int hostname = 0;

	/* No protocol: TCP and UDP on every port. */
	ck_assert_int_eq(netpolicy_parse_grant_string("192.0.2.0/24", &g, &hostname, &cause), 0);
	ck_assert_uint_eq(g.g_n, 2);
	ck_assert_int_eq(g.g_v[0].ng_proto, IPPROTO_TCP);
	ck_assert_int_eq(g.g_v[1].ng_proto, IPPROTO_UDP);
	ck_assert_int_eq(g.g_v[0].ng_port_lo, 0);
	ck_assert_int_eq(g.g_v[0].ng_port_hi, 65535);
	ck_assert_int_eq(netpolicy_parse_grant_string("2001:db8::/32,udp,5000-5100", &g,
	    &hostname, &cause), 0);
	ck_assert_uint_eq(g.g_n, 3);
	ck_assert_int_eq(g.g_v[2].ng_port_lo, 5000);
	ck_assert_int_eq(g.g_v[2].ng_port_hi, 5100);
	const char *bad[] = { "192.0.2.1,icmp", "192.0.2.1,tcp,70000", "192.0.2.1,tcp,9-1",
		"192.0.2.1,tcp,80,x", "192.0.2.1,tcp,a" };
	for (size_t i = 0; i < nitems(bad); i++)
		ck_assert_msg(netpolicy_parse_grant_string(bad[i], &g, &hostname, &cause) == -1,
		    "%s accepted", bad[i]);
	ck_assert_int_eq(netpolicy_parse_grant_string("example.com,tcp,443", &g, &hostname,
	    &cause), -1);
	ck_assert_int_eq(hostname, 1);
	np_grants_free(&g);
	free(cause);
}
END_TEST

START_TEST(test_tuples_not_cross_product)
{
	const char *v[] = { "192.0.2.1,tcp,443", "198.51.100.1,udp,53" };
	struct np_grants g;
	grants(&g, v, nitems(v));
	struct np_event a = ev("192.0.2.1", IPPROTO_TCP, 443), b = ev("198.51.100.1", IPPROTO_UDP, 53);
	struct np_event x = ev("192.0.2.1", IPPROTO_UDP, 53), y = ev("198.51.100.1", IPPROTO_TCP, 443);
	ck_assert_int_ge(np_grants_find(&g, a.ne_family, a.ne_addr, a.ne_proto, a.ne_port), 0);
	ck_assert_int_ge(np_grants_find(&g, b.ne_family, b.ne_addr, b.ne_proto, b.ne_port), 0);
	ck_assert_int_eq(np_grants_find(&g, x.ne_family, x.ne_addr, x.ne_proto, x.ne_port), -1);
	ck_assert_int_eq(np_grants_find(&g, y.ne_family, y.ne_addr, y.ne_proto, y.ne_port), -1);
	np_grants_free(&g);
}
END_TEST

START_TEST(test_restricted)
{
	const char *yes[] = { "10.1.2.3", "172.16.0.1", "192.168.1.1", "127.0.0.1", "100.64.0.1",
		"169.254.169.254", "169.254.1.1", "198.18.0.1", "198.19.255.255", "224.0.0.1",
		"240.0.0.1", "255.255.255.255", "0.1.2.3", "168.63.129.16", "::1", "::",
		"fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1", "::ffff:10.0.0.1",
		"::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "2002:a00:1::",
		"2002:7f00:1::", "2001:0:a00:1::", "2001:0:cb00:7101:0:0:f5ff:fffe", "::10.0.0.1",
		"2001:2::1" };
	const char *no[] = { "192.0.2.1", "198.51.100.1", "203.0.113.40", "2001:db8::1",
		"8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:203.0.113.40", "64:ff9b::cb00:7128",
		"2002:cb00:7128::" };
	for (size_t i = 0; i < nitems(yes); i++) {
		struct np_event e = ev(yes[i], IPPROTO_TCP, 1);
		const char *why = NULL;
		ck_assert_msg(netpolicy_restricted(NULL, e.ne_family, e.ne_addr, &why) == 1,
		    "%s is not restricted", yes[i]);
		ck_assert_ptr_nonnull(why);
	}
	for (size_t i = 0; i < nitems(no); i++) {
		struct np_event e = ev(no[i], IPPROTO_TCP, 1);
		const char *why = NULL;
		ck_assert_msg(netpolicy_restricted(NULL, e.ne_family, e.ne_addr, &why) == 0,
		    "%s is restricted (%s)", no[i], why);
	}
	/* A policy adds ranges; built-ins stay. */
	struct netpolicy p;
	netpolicy_init(&p);
	struct np_range extra;
	ck_assert_int_eq(netpolicy_parse_range("203.0.113.0/24", &extra, NULL), 0);
	p.np_restricted = &extra;
	p.np_nrestricted = 1;
	struct np_event e = ev("203.0.113.40", IPPROTO_TCP, 443);
	const char *why;
	ck_assert_int_eq(netpolicy_restricted(&p, e.ne_family, e.ne_addr, &why), 1);
	ck_assert_str_eq(why, "policy_restricted");
}
END_TEST

START_TEST(test_decide)
{
	const char *env[] = { "10.0.0.5,tcp,4000" };
	const char *scopes[] = { "203.0.113.40/32,tcp,443", "127.0.0.1,tcp,443" };
	struct np_grants e, leases = { 0 };
	struct netpolicy p;
	struct np_decision d;
	struct np_event x;

	struct np_boundary b = { .nb_allow = &e, .nb_leases = &leases };

	grants(&e, env, nitems(env));
	netpolicy_init(&p);
	grants(&p.np_lease_scopes, scopes, nitems(scopes));
	p.np_max_lease_ttl = 60;
	/* An exact baseline grant may reach a restricted address. */
	x = ev("10.0.0.5", IPPROTO_TCP, 4000);
	netpolicy_decide(&p, &b, &x, 0, &d);
	ck_assert_int_eq(d.nd_disposition, NP_ALLOW);
	ck_assert_str_eq(d.nd_reason, NPR_WITHIN_ENVELOPE);
	/* In scope: a lease, TTL clamped to the maximum. */
	x = ev("203.0.113.40", IPPROTO_TCP, 443);
	netpolicy_decide(&p, &b, &x, 600, &d);
	ck_assert_int_eq(d.nd_disposition, NP_LEASE);
	ck_assert_int_eq(d.nd_ttl, 60);
	netpolicy_decide(&p, &b, &x, 5, &d);
	ck_assert_int_eq(d.nd_ttl, 5);
	netpolicy_decide(&p, &b, &x, 0, &d);
	ck_assert_int_eq(d.nd_ttl, 60);
	/* Restricted wins over a scope. */
	x = ev("127.0.0.1", IPPROTO_TCP, 443);
	netpolicy_decide(&p, &b, &x, 0, &d);
	ck_assert_int_eq(d.nd_disposition, NP_DENY);
	ck_assert_str_eq(d.nd_reason, NPR_RESTRICTED);
	/* Same address, other port or protocol: not eligible. */
	x = ev("203.0.113.40", IPPROTO_UDP, 443);
	netpolicy_decide(&p, &b, &x, 0, &d);
	ck_assert_str_eq(d.nd_reason, NPR_NOT_ELIGIBLE);
	/* HTTP effects: the mediator, which is unavailable. */
	x = ev("203.0.113.40", IPPROTO_TCP, 443);
	x.ne_http = 1;
	netpolicy_decide(&p, &b, &x, 0, &d);
	ck_assert_int_eq(d.nd_disposition, NP_DENY);
	ck_assert_str_eq(d.nd_reason, NPR_MEDIATOR_UNAVAILABLE);
	/* No TTL configured: no leases. */
	p.np_max_lease_ttl = 0;
	x.ne_http = 0;
	netpolicy_decide(&p, &b, &x, 0, &d);
	ck_assert_str_eq(d.nd_reason, NPR_LEASES_DISABLED);
	/* An active lease allows. */
	np_grants_add(&leases, &p.np_lease_scopes.g_v[0]);
	netpolicy_decide(&p, &b, &x, 0, &d);
	ck_assert_int_eq(d.nd_disposition, NP_ALLOW);
	ck_assert_str_eq(d.nd_reason, NPR_ACTIVE_LEASE);
	np_grants_free(&e);
	np_grants_free(&leases);
	netpolicy_free(&p);
}
END_TEST

/* Decisions agree with the kernel: the deny list first, monitor mode allows the rest. */
START_TEST(test_decide_matches_kernel)
{
	const char *deny[] = { "203.0.113.40,tcp,443" };
	const char *scopes[] = { "203.0.113.0/24,tcp,443" };
	const char *broad[] = { "0.0.0.0/0,tcp,8000", "::/0,tcp,8000", "127.0.0.5,tcp,8000" };
	struct np_grants dn, e, none = { 0 };
	struct netpolicy p;
	struct np_decision d;
	struct np_event x;
	struct np_boundary b = { .nb_allow = &none, .nb_deny = &dn, .nb_leases = &none };

	grants(&dn, deny, nitems(deny));
	grants(&e, broad, nitems(broad));
	netpolicy_init(&p);
	grants(&p.np_lease_scopes, scopes, nitems(scopes));
	p.np_max_lease_ttl = 60;
	/* Inside a lease scope but deny-listed: no lease the kernel would still refuse. */
	x = ev("203.0.113.40", IPPROTO_TCP, 443);
	netpolicy_decide(&p, &b, &x, 0, &d);
	ck_assert_int_eq(d.nd_disposition, NP_DENY);
	ck_assert_str_eq(d.nd_reason, NPR_DENY_LIST);
	x = ev("203.0.113.41", IPPROTO_TCP, 443);
	netpolicy_decide(&p, &b, &x, 0, &d);
	ck_assert_int_eq(d.nd_disposition, NP_LEASE);
	/* Monitor mode: what no deny entry names passes the kernel, so it is allowed. */
	b.nb_monitor = 1;
	x = ev("198.51.100.7", IPPROTO_UDP, 53);
	netpolicy_decide(&p, &b, &x, 0, &d);
	ck_assert_int_eq(d.nd_disposition, NP_ALLOW);
	ck_assert_str_eq(d.nd_reason, NPR_MONITOR);
	x = ev("203.0.113.40", IPPROTO_TCP, 443);
	netpolicy_decide(&p, &b, &x, 0, &d);
	ck_assert_str_eq(d.nd_reason, NPR_DENY_LIST);
	/* A broad grant never opens a restricted address; an exact one does. */
	b.nb_monitor = 0;
	b.nb_allow = &e;
	const char *closed[] = { "127.0.0.2", "10.1.2.3", "169.254.169.254", "::1",
		"::ffff:127.0.0.2", "64:ff9b::a01:203", "2002:7f00:2::1", "2001:0:1:2::3",
		"fe80::1" };
	for (size_t i = 0; i < nitems(closed); i++) {
		x = ev(closed[i], IPPROTO_TCP, 8000);
		netpolicy_decide(&p, &b, &x, 0, &d);
		ck_assert_msg(d.nd_disposition == NP_DENY, "%s allowed", closed[i]);
	}
	const char *open_[] = { "127.0.0.5", "198.51.100.7", "8.8.8.8", "2001:db8::1",
		"::ffff:8.8.8.8" };
	for (size_t i = 0; i < nitems(open_); i++) {
		x = ev(open_[i], IPPROTO_TCP, 8000);
		netpolicy_decide(&p, &b, &x, 0, &d);
		ck_assert_msg(d.nd_disposition == NP_ALLOW, "%s denied", open_[i]);
	}
	np_grants_free(&dn);
	np_grants_free(&e);
	netpolicy_free(&p);
}
END_TEST

/* The kernel's grants: broad ones cut around restricted ranges, exact ones kept. */
START_TEST(test_grants_effective)
{
	const char *in[] = { "0.0.0.0/0,tcp,8000", "10.0.0.5,udp,53", "::/0,tcp,443",
		"192.168.0.0/16,tcp,22" };
	const char *policy_r[] = { "198.51.100.0/24" };
	struct np_grants g, out = { 0 };
	struct netpolicy p;

	grants(&g, in, nitems(in));
	netpolicy_init(&p);
	p.np_restricted = calloc(1, sizeof(*p.np_restricted));
	ck_assert_int_eq(netpolicy_parse_range(policy_r[0], &p.np_restricted[0], NULL), 0);
	p.np_nrestricted = 1;
	ck_assert_int_eq(netpolicy_grants_effective(&p, &g, &out), 0);
	ck_assert_uint_gt(out.g_n, 4);
	/* Every piece agrees with the decision's predicate at both ends and next to them. */
	for (size_t i = 0; i < out.g_n; i++) {
		const struct np_grant *x = &out.g_v[i];
		int exact = memcmp(x->ng_dst.nr_lo, x->ng_dst.nr_hi,
		    x->ng_dst.nr_family == AF_INET ? 4 : 16) == 0;
		if (exact)
			continue;
		ck_assert(!netpolicy_broad_restricted(&p, x->ng_dst.nr_family, x->ng_dst.nr_lo));
		ck_assert(!netpolicy_broad_restricted(&p, x->ng_dst.nr_family, x->ng_dst.nr_hi));
	}
	struct np_event e1 = ev("10.0.0.5", IPPROTO_UDP, 53), e2 = ev("127.0.0.2", IPPROTO_TCP, 8000);
	struct np_event e3 = ev("198.51.100.9", IPPROTO_TCP, 8000), e4 = ev("8.8.8.8", IPPROTO_TCP, 8000);
	struct np_event e5 = ev("::ffff:10.0.0.1", IPPROTO_TCP, 443), e6 = ev("2606:4700::1", IPPROTO_TCP, 443);
	ck_assert_int_ge(np_grants_find(&out, e1.ne_family, e1.ne_addr, e1.ne_proto, e1.ne_port), 0);
	ck_assert_int_lt(np_grants_find(&out, e2.ne_family, e2.ne_addr, e2.ne_proto, e2.ne_port), 0);
	ck_assert_int_lt(np_grants_find(&out, e3.ne_family, e3.ne_addr, e3.ne_proto, e3.ne_port), 0);
	ck_assert_int_ge(np_grants_find(&out, e4.ne_family, e4.ne_addr, e4.ne_proto, e4.ne_port), 0);
	ck_assert_int_lt(np_grants_find(&out, e5.ne_family, e5.ne_addr, e5.ne_proto, e5.ne_port), 0);
	ck_assert_int_ge(np_grants_find(&out, e6.ne_family, e6.ne_addr, e6.ne_proto, e6.ne_port), 0);
	/* 192.168.0.0/16 lies wholly inside a restricted range: nothing of it remains. */
	struct np_event e7 = ev("192.168.1.1", IPPROTO_TCP, 22);
	ck_assert_int_lt(np_grants_find(&out, e7.ne_family, e7.ne_addr, e7.ne_proto, e7.ne_port), 0);
	np_grants_free(&g);
	np_grants_free(&out);
	netpolicy_free(&p);
}
END_TEST

static int
config(const char *json, char **cause)
{
	struct json_object *o = json_tokener_parse(json);
	struct np_config c;
	ck_assert_ptr_nonnull(o);
	int r = netpolicy_parse_config(o, &c, cause);
	netpolicy_config_free(&c);
	json_object_put(o);
	return r;
}

#define CFG_HEAD "{\"schema_version\":3,\"operation_id\":\"op_agent_fetch\","
#define CFG_POLICY "\"policy\":{\"schema_version\":1,\"in_place_lease_scopes\":[{\"destination\":" \
	"\"203.0.113.40/32\",\"protocol\":\"tcp\",\"ports\":[443]}],\"max_in_place_lease_ttl_seconds\":60}"
#define CFG_ENV "\"envelope\":{\"grants\":[{\"destination\":\"10.88.0.1\",\"protocol\":\"tcp\",\"ports\":[3128,\"8000-8010\"]}]}"

START_TEST(test_config)
{
	char *cause = NULL;
	ck_assert_msg(config(CFG_HEAD CFG_ENV "," CFG_POLICY ",\"source_address\":\"10.88.0.12\"}",
	    &cause) == 0, "%s", cause);
	const char *bad[] = {
		"{\"schema_version\":2,\"operation_id\":\"op_x\"," CFG_ENV "," CFG_POLICY "}",
		CFG_HEAD CFG_ENV "," CFG_POLICY ",\"extra\":1}",
		"{\"schema_version\":3,\"operation_id\":\"op_../x\"," CFG_ENV "," CFG_POLICY "}",
		"{\"schema_version\":3,\"operation_id\":\"x\"," CFG_ENV "," CFG_POLICY "}",
		CFG_HEAD CFG_POLICY "}",
		CFG_HEAD CFG_ENV "}",
		CFG_HEAD "\"envelope\":{\"grants\":[{\"destination\":\"example.com\",\"protocol\":"
		    "\"tcp\",\"ports\":[1]}]}," CFG_POLICY "}",
		CFG_HEAD "\"envelope\":{\"grants\":[{\"destination\":\"10.0.0.1\",\"protocol\":"
		    "\"icmp\",\"ports\":[1]}]}," CFG_POLICY "}",
		CFG_HEAD "\"envelope\":{\"grants\":[{\"destination\":\"10.0.0.1\",\"protocol\":"
		    "\"tcp\",\"ports\":[70000]}]}," CFG_POLICY "}",
		CFG_HEAD CFG_ENV ",\"policy\":{\"schema_version\":1,\"max_in_place_lease_ttl_seconds\":-1}}",
		CFG_HEAD CFG_ENV ",\"policy\":{\"schema_version\":1,\"restricted_destinations\":[\"x\"]}}",
		CFG_HEAD CFG_ENV "," CFG_POLICY ",\"source_address\":\"not-an-ip\"}",
		CFG_HEAD CFG_ENV "," CFG_POLICY ",\"proxy\":{\"listen\":\"0.0.0.0:3128\"}}",
	};
	for (size_t i = 0; i < nitems(bad); i++) {
		free(cause);
		cause = NULL;
		ck_assert_msg(config(bad[i], &cause) == -1, "config %zu accepted", i);
		ck_assert_ptr_nonnull(cause);
	}
	free(cause);
}
END_TEST

static Suite *
netpolicy_suite(void)
{
	Suite *s = suite_create("netpolicy");
	TCase *tc = tcase_create("logic");
	tcase_add_test(tc, test_ranges);
	tcase_add_test(tc, test_grant_strings);
	tcase_add_test(tc, test_tuples_not_cross_product);
	tcase_add_test(tc, test_restricted);
	tcase_add_test(tc, test_decide);
	tcase_add_test(tc, test_decide_matches_kernel);
	tcase_add_test(tc, test_grants_effective);
	tcase_add_test(tc, test_config);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(netpolicy_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
