/*
 * test_httpurl.c: request-target parsing and canonicalization, SSRF host
 * classification, path attacks and scope matching (lib/httpurl.c).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "httpurl.h"
#include "netpolicy.h"
#include "unit.h"

static struct httpurl u;

static enum httpurl_err
parse(const char *t)
{
	return httpurl_parse(t, strlen(t), &u);
}

/* Parsing the canonical form again gives the same canonical form. */
static void
assert_idempotent(void)
{
	static struct httpurl again;
	char canon[HTTPURL_MAX_TARGET + 1];

	strcpy(canon, u.hu_url);
	ck_assert_msg(httpurl_parse(canon, strlen(canon), &again) == HTTPURL_OK, "%s: %s", canon,
	    httpurl_strerror(httpurl_parse(canon, strlen(canon), &again)));
	ck_assert_str_eq(again.hu_url, canon);
}

/*
 * SSRF-style targets. err: the parse result; host: the canonical host when
 * it parses; restricted: whether netpolicy's built-in ranges refuse one of
 * the addresses it stands for or embeds.
 */
static const struct {
	const char *target;
	enum httpurl_err err;
	const char *host;
	int restricted;
} ssrf[] = {
	/* loopback, every IPv4 spelling */
	{ "http://127.0.0.1/", HTTPURL_OK, "127.0.0.1", 1 },
	{ "http://2130706433/", HTTPURL_OK, "127.0.0.1", 1 },
	{ "http://0177.0.0.1/", HTTPURL_OK, "127.0.0.1", 1 },
	{ "http://0x7f.1/", HTTPURL_OK, "127.0.0.1", 1 },
	{ "http://0X7F.1/", HTTPURL_OK, "127.0.0.1", 1 },
	{ "http://127.1/", HTTPURL_OK, "127.0.0.1", 1 },
	{ "http://127.0.1/", HTTPURL_OK, "127.0.0.1", 1 },
	{ "http://0x7f000001/", HTTPURL_OK, "127.0.0.1", 1 },
	{ "http://017700000001/", HTTPURL_OK, "127.0.0.1", 1 },
	{ "http://0177.1/", HTTPURL_OK, "127.0.0.1", 1 },
	{ "http://0x7f.0x0.0x0.0x1/", HTTPURL_OK, "127.0.0.1", 1 },
	{ "http://00000177.0.0.1/", HTTPURL_OK, "127.0.0.1", 1 },
	{ "http://127.255.255.254:8080/", HTTPURL_OK, "127.255.255.254", 1 },
	{ "http://0/", HTTPURL_OK, "0.0.0.0", 1 },
	{ "http://0x/", HTTPURL_OK, "0.0.0.0", 1 },
	{ "http://0.0.0.0/", HTTPURL_OK, "0.0.0.0", 1 },
	/* cloud metadata */
	{ "http://169.254.169.254/latest/meta-data/", HTTPURL_OK, "169.254.169.254", 1 },
	{ "http://2852039166/", HTTPURL_OK, "169.254.169.254", 1 },
	{ "http://0xa9fea9fe/", HTTPURL_OK, "169.254.169.254", 1 },
	{ "http://0251.0376.0251.0376/", HTTPURL_OK, "169.254.169.254", 1 },
	{ "http://169.254.43518/", HTTPURL_OK, "169.254.169.254", 1 },
	{ "http://0xa9.0xfe.0xa9.0xfe/", HTTPURL_OK, "169.254.169.254", 1 },
	{ "http://169.16689662/", HTTPURL_OK, "169.254.169.254", 1 },
	{ "http://168.63.129.16/", HTTPURL_OK, "168.63.129.16", 1 },
	/* private, CGNAT, benchmark, IETF, multicast, reserved, broadcast */
	{ "http://10.0.0.1/", HTTPURL_OK, "10.0.0.1", 1 },
	{ "http://012.0.0.1/", HTTPURL_OK, "10.0.0.1", 1 },
	{ "http://167772161/", HTTPURL_OK, "10.0.0.1", 1 },
	{ "http://192.168.0.1/", HTTPURL_OK, "192.168.0.1", 1 },
	{ "http://3232235521/", HTTPURL_OK, "192.168.0.1", 1 },
	{ "http://0xc0a80001/", HTTPURL_OK, "192.168.0.1", 1 },
	{ "http://0300.0250.0.1/", HTTPURL_OK, "192.168.0.1", 1 },
	{ "http://172.16.0.1/", HTTPURL_OK, "172.16.0.1", 1 },
	{ "http://172.31.255.255/", HTTPURL_OK, "172.31.255.255", 1 },
	{ "http://100.64.0.1/", HTTPURL_OK, "100.64.0.1", 1 },
	{ "http://198.18.0.1/", HTTPURL_OK, "198.18.0.1", 1 },
	{ "http://192.0.0.170/", HTTPURL_OK, "192.0.0.170", 1 },
	{ "http://224.0.0.1/", HTTPURL_OK, "224.0.0.1", 1 },
	{ "http://255.255.255.255/", HTTPURL_OK, "255.255.255.255", 1 },
	{ "http://4294967295/", HTTPURL_OK, "255.255.255.255", 1 },
	/* IPv6 literals */
	{ "http://[::1]/", HTTPURL_OK, "[::1]", 1 },
	{ "http://[::]/", HTTPURL_OK, "[::]", 1 },
	{ "http://[0:0:0:0:0:0:0:1]/", HTTPURL_OK, "[::1]", 1 },
	{ "http://[0000::0001]:8080/", HTTPURL_OK, "[::1]", 1 },
	{ "http://[fe80::1]/", HTTPURL_OK, "[fe80::1]", 1 },
	{ "http://[FC00::1]/", HTTPURL_OK, "[fc00::1]", 1 },
	{ "http://[fd00:ec2::254]/", HTTPURL_OK, "[fd00:ec2::254]", 1 },
	{ "http://[ff02::1]/", HTTPURL_OK, "[ff02::1]", 1 },
	{ "http://[fec0::1]/", HTTPURL_OK, "[fec0::1]", 1 },
	/* IPv6 embedding a restricted IPv4 address */
	{ "http://[::ffff:127.0.0.1]/", HTTPURL_OK, "[::ffff:127.0.0.1]", 1 },
	{ "http://[::ffff:7f00:1]/", HTTPURL_OK, "[::ffff:127.0.0.1]", 1 },
	{ "http://[0:0:0:0:0:ffff:127.0.0.1]/", HTTPURL_OK, "[::ffff:127.0.0.1]", 1 },
	{ "http://[::ffff:169.254.169.254]/", HTTPURL_OK, "[::ffff:169.254.169.254]", 1 },
	{ "http://[::ffff:a9fe:a9fe]/", HTTPURL_OK, "[::ffff:169.254.169.254]", 1 },
	{ "https://[::ffff:10.0.0.1]:443/", HTTPURL_OK, "[::ffff:10.0.0.1]", 1 },
	{ "http://[::127.0.0.1]/", HTTPURL_OK, "[::127.0.0.1]", 1 },
	{ "http://[::ffff:0:127.0.0.1]/", HTTPURL_OK, "[::ffff:0:7f00:1]", 1 }, /* SIIT */
	{ "http://[64:ff9b::7f00:1]/", HTTPURL_OK, "[64:ff9b::7f00:1]", 1 },
	{ "http://[64:ff9b::169.254.169.254]/", HTTPURL_OK, "[64:ff9b::a9fe:a9fe]", 1 },
	{ "http://[64:ff9b::a00:1]/", HTTPURL_OK, "[64:ff9b::a00:1]", 1 },
	{ "http://[64:ff9b:1::7f00:1]/", HTTPURL_OK, "[64:ff9b:1::7f00:1]", 1 },
	{ "http://[2002:7f00:1::]/", HTTPURL_OK, "[2002:7f00:1::]", 1 },
	{ "http://[2002:a9fe:a9fe::1]/", HTTPURL_OK, "[2002:a9fe:a9fe::1]", 1 },
	{ "http://[2002:c0a8:1::]/", HTTPURL_OK, "[2002:c0a8:1::]", 1 },
	{ "http://[2001:0:7f00:1::]/", HTTPURL_OK, "[2001:0:7f00:1::]", 1 },
	{ "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", HTTPURL_OK,
	    "[2001:0:4136:e378:8000:63bf:80ff:fffe]", 1 },
	/* ambiguous or malformed hosts: refused before any classification */
	{ "http://127.0.0.1.5/", HTTPURL_E_NUMERIC_HOST, NULL, 0 },
	{ "http://256.0.0.1/", HTTPURL_E_NUMERIC_HOST, NULL, 0 },
	{ "http://127.0.0.256/", HTTPURL_E_NUMERIC_HOST, NULL, 0 },
	{ "http://127.65536/", HTTPURL_OK, "127.1.0.0", 1 },
	{ "http://127.16777216/", HTTPURL_E_NUMERIC_HOST, NULL, 0 },
	{ "http://127.0.65536/", HTTPURL_E_NUMERIC_HOST, NULL, 0 },
	{ "http://08.0.0.1/", HTTPURL_E_NUMERIC_HOST, NULL, 0 },
	{ "http://0x7g.1/", HTTPURL_E_NUMERIC_HOST, NULL, 0 },
	{ "http://4294967296/", HTTPURL_E_NUMERIC_HOST, NULL, 0 },
	{ "http://99999999999999999999999/", HTTPURL_E_NUMERIC_HOST, NULL, 0 },
	{ "http://1..1/", HTTPURL_E_NUMERIC_HOST, NULL, 0 },
	{ "http://127.0.0.1./", HTTPURL_E_HOST, NULL, 0 },
	{ "http://%31%32%37.0.0.1/", HTTPURL_E_HOST, NULL, 0 },
	{ "http://evil.com@127.0.0.1/", HTTPURL_E_USERINFO, NULL, 0 },
	{ "http://127.0.0.1:80@evil.com/", HTTPURL_E_USERINFO, NULL, 0 },
	{ "http://:@127.0.0.1/", HTTPURL_E_USERINFO, NULL, 0 },
	{ "http://127.0.0.1\\@evil.com/", HTTPURL_E_BACKSLASH, NULL, 0 },
	{ "http://evil.com#@127.0.0.1/", HTTPURL_E_FRAGMENT, NULL, 0 },
	{ "http://[::1%25eth0]/", HTTPURL_E_IPV6, NULL, 0 },
	{ "http://[fe80::1%eth0]/", HTTPURL_E_IPV6, NULL, 0 },
	{ "http://[v1.fe80::a]/", HTTPURL_E_IPV6, NULL, 0 },
	{ "http://[::ffff:127.1]/", HTTPURL_E_IPV6, NULL, 0 },
	{ "http://[::ffff:0177.0.0.1]/", HTTPURL_E_IPV6, NULL, 0 },
	{ "http://[::ffff:127.000.0.1]/", HTTPURL_E_IPV6, NULL, 0 },
	{ "http://[::1.2.3.4:5]/", HTTPURL_E_IPV6, NULL, 0 },
	{ "http://example.123/", HTTPURL_E_NUMERIC_HOST, NULL, 0 },
	{ "http://a.0x/", HTTPURL_E_NUMERIC_HOST, NULL, 0 },
	{ "http://[::ffff:127.0.0.1/", HTTPURL_E_IPV6, NULL, 0 },
	{ "http://[::1]x/", HTTPURL_E_IPV6, NULL, 0 },
	{ "http://[1:2:3:4:5:6:7:8:9]/", HTTPURL_E_IPV6, NULL, 0 },
	{ "http://\xe2\x91\xa0\xe2\x91\xa1\xe2\x91\xa6.0.0.1/", HTTPURL_E_IDNA, NULL, 0 },
	{ "http://xn--nxasmq6b.com/", HTTPURL_E_IDNA, NULL, 0 },
	{ "http://b\xc3\xbc" "cher.example/", HTTPURL_E_IDNA, NULL, 0 },
	{ "gopher://127.0.0.1:6379/_FLUSHALL", HTTPURL_E_SCHEME, NULL, 0 },
	{ "file:///etc/passwd", HTTPURL_E_SCHEME, NULL, 0 },
	{ "dict://127.0.0.1:11211/", HTTPURL_E_SCHEME, NULL, 0 },
	/* names are classified as names: their DNS answers are checked later */
	{ "http://localhost/", HTTPURL_OK, "localhost", 0 },
	{ "http://LOCALHOST./", HTTPURL_E_HOST, NULL, 0 },
	{ "http://127.0.0.1.nip.io/", HTTPURL_OK, "127.0.0.1.nip.io", 0 },
	{ "http://metadata.google.internal/", HTTPURL_OK, "metadata.google.internal", 0 },
	/* public and documentation addresses stay ordinary */
	{ "http://93.184.216.34/", HTTPURL_OK, "93.184.216.34", 0 },
	{ "http://16843009/", HTTPURL_OK, "1.1.1.1", 0 },
	{ "http://203.0.113.5/", HTTPURL_OK, "203.0.113.5", 0 },
	{ "http://[2606:4700::1111]/", HTTPURL_OK, "[2606:4700::1111]", 0 },
	{ "http://[2002:cb00:7105::]/", HTTPURL_OK, "[2002:cb00:7105::]", 0 }, /* 6to4 of 203.0.113.5 */
};

START_TEST(test_ssrf_table)
{
	struct netpolicy p;

	netpolicy_init(&p);
	ck_assert_uint_ge(nitems(ssrf), 60);
	for (size_t i = 0; i < nitems(ssrf); i++) {
		enum httpurl_err e = parse(ssrf[i].target);
		ck_assert_msg(e == ssrf[i].err, "%s: got %s, want %s", ssrf[i].target,
		    httpurl_strerror(e), httpurl_strerror(ssrf[i].err));
		if (e != HTTPURL_OK)
			continue;
		ck_assert_msg(strcmp(u.hu_host, ssrf[i].host) == 0, "%s: host %s, want %s",
		    ssrf[i].target, u.hu_host, ssrf[i].host);
		const char *why = NULL;
		int r = httpurl_restricted(&u, &p, &why);
		ck_assert_msg(r == ssrf[i].restricted, "%s: restricted %d (%s)", ssrf[i].target, r,
		    why != NULL ? why : "-");
		if (u.hu_kind == HTTPURL_HOST_NAME)
			ck_assert_uint_eq(u.hu_naddrs, 0);
		else
			ck_assert_uint_ge(u.hu_naddrs, 1);
		assert_idempotent();
	}
	netpolicy_free(&p);
}
END_TEST

START_TEST(test_embedded_forms)
{
	uint8_t v4[4];

	ck_assert_int_eq(parse("http://[::ffff:7f00:1]/"), HTTPURL_OK);
	ck_assert_int_eq(u.hu_kind, HTTPURL_HOST_IPV6);
	ck_assert_uint_eq(u.hu_naddrs, 2);
	ck_assert_int_eq(u.hu_addrs[0].ha_family, AF_INET6);
	ck_assert_str_eq(u.hu_addrs[1].ha_form, "ipv4_mapped");
	inet_pton(AF_INET, "127.0.0.1", v4);
	ck_assert_mem_eq(u.hu_addrs[1].ha_addr, v4, 4);

	ck_assert_int_eq(parse("http://[64:ff9b::10.1.2.3]/"), HTTPURL_OK);
	ck_assert_str_eq(u.hu_addrs[1].ha_form, "nat64");
	inet_pton(AF_INET, "10.1.2.3", v4);
	ck_assert_mem_eq(u.hu_addrs[1].ha_addr, v4, 4);

	ck_assert_int_eq(parse("http://[2002:a9fe:a9fe::]/"), HTTPURL_OK);
	ck_assert_str_eq(u.hu_addrs[1].ha_form, "6to4");
	inet_pton(AF_INET, "169.254.169.254", v4);
	ck_assert_mem_eq(u.hu_addrs[1].ha_addr, v4, 4);

	/* Teredo: server in bytes 4..7, client XORed with ones in 12..15 */
	ck_assert_int_eq(parse("http://[2001:0:cb00:7101:8000:63bf:80ff:fffe]/"), HTTPURL_OK);
	ck_assert_uint_eq(u.hu_naddrs, 3);
	ck_assert_str_eq(u.hu_addrs[1].ha_form, "teredo_server");
	inet_pton(AF_INET, "203.0.113.1", v4);
	ck_assert_mem_eq(u.hu_addrs[1].ha_addr, v4, 4);
	ck_assert_str_eq(u.hu_addrs[2].ha_form, "teredo_client");
	inet_pton(AF_INET, "127.0.0.1", v4);
	ck_assert_mem_eq(u.hu_addrs[2].ha_addr, v4, 4);

	ck_assert_int_eq(parse("http://[::ffff:0:a00:1]/"), HTTPURL_OK);
	ck_assert_str_eq(u.hu_addrs[1].ha_form, "siit");

	ck_assert_int_eq(parse("http://[::a00:1]/"), HTTPURL_OK);
	ck_assert_str_eq(u.hu_addrs[1].ha_form, "ipv4_compatible");

	/* :: and ::1 are not IPv4-compatible addresses */
	ck_assert_int_eq(parse("http://[::1]/"), HTTPURL_OK);
	ck_assert_uint_eq(u.hu_naddrs, 1);
	ck_assert_int_eq(parse("http://[::]/"), HTTPURL_OK);
	ck_assert_uint_eq(u.hu_naddrs, 1);
	ck_assert_int_eq(parse("http://[::2]/"), HTTPURL_OK);
	ck_assert_uint_eq(u.hu_naddrs, 2);

	/* A plain global IPv6 address embeds nothing. */
	ck_assert_int_eq(parse("http://[2606:4700::1111]/"), HTTPURL_OK);
	ck_assert_uint_eq(u.hu_naddrs, 1);

	/* IPv4 forms: the literal only, flagged when not dotted decimal */
	ck_assert_int_eq(parse("http://127.0.0.1/"), HTTPURL_OK);
	ck_assert_int_eq(u.hu_kind, HTTPURL_HOST_IPV4);
	ck_assert_int_eq(u.hu_ip_nonstandard, 0);
	ck_assert_uint_eq(u.hu_naddrs, 1);
	ck_assert_int_eq(parse("http://2130706433/"), HTTPURL_OK);
	ck_assert_int_eq(u.hu_ip_nonstandard, 1);
	ck_assert_int_eq(parse("http://127.1/"), HTTPURL_OK);
	ck_assert_int_eq(u.hu_ip_nonstandard, 1);
	ck_assert_int_eq(parse("http://0177.0.0.1/"), HTTPURL_OK);
	ck_assert_int_eq(u.hu_ip_nonstandard, 1);
}
END_TEST

START_TEST(test_policy_restricted)
{
	struct netpolicy p;

	/* A policy's own ranges apply to literals and to their embedded IPv4. */
	netpolicy_init(&p);
	p.np_restricted = calloc(1, sizeof(*p.np_restricted));
	ck_assert_ptr_nonnull(p.np_restricted);
	ck_assert_int_eq(netpolicy_parse_range("203.0.113.0/24", &p.np_restricted[0], NULL), 0);
	p.np_nrestricted = 1;
	const char *why = NULL;
	ck_assert_int_eq(parse("http://203.0.113.9/"), HTTPURL_OK);
	ck_assert_int_eq(httpurl_restricted(&u, &p, &why), 1);
	ck_assert_str_eq(why, "policy_restricted");
	ck_assert_int_eq(parse("http://[::ffff:0:203.0.113.9]/"), HTTPURL_OK);
	ck_assert_int_eq(httpurl_restricted(&u, &p, &why), 1);
	ck_assert_int_eq(parse("http://3405803785/"), HTTPURL_OK); /* 203.0.113.9 */
	ck_assert_int_eq(httpurl_restricted(&u, &p, &why), 1);
	ck_assert_int_eq(parse("http://198.51.100.1/"), HTTPURL_OK);
	ck_assert_int_eq(httpurl_restricted(&u, &p, &why), 0);
	netpolicy_free(&p);
}
END_TEST

/* Every path attack is refused with its own stable code, never normalized. */
static const struct {
	const char *path;
	enum httpurl_err err;
} path_attacks[] = {
	{ "/v1/data/%2e%2e/admin", HTTPURL_E_ENCODED_DELIM },
	{ "/v1/data/%2E%2E/admin", HTTPURL_E_ENCODED_DELIM },
	{ "/v1/data/%2e./admin", HTTPURL_E_ENCODED_DELIM },
	{ "/v1/data/.%2e/admin", HTTPURL_E_ENCODED_DELIM },
	{ "/v1/data/%2e/admin", HTTPURL_E_ENCODED_DELIM },
	{ "/v1/data%2fadmin", HTTPURL_E_ENCODED_DELIM },
	{ "/v1/data%2F..%2Fadmin", HTTPURL_E_ENCODED_DELIM },
	{ "/v1/data%5cadmin", HTTPURL_E_ENCODED_DELIM },
	{ "/v1/data%5C..%5Cadmin", HTTPURL_E_ENCODED_DELIM },
	{ "/v1/data/..%3b/admin", HTTPURL_E_ENCODED_DELIM },
	{ "/v1/data%3fx", HTTPURL_E_ENCODED_DELIM },
	{ "/v1/data%23x", HTTPURL_E_ENCODED_DELIM },
	{ "/v1/data/%252e%252e/admin", HTTPURL_E_DOUBLE_ENCODING },
	{ "/v1/data/%252f", HTTPURL_E_DOUBLE_ENCODING },
	{ "/v1/data/%25", HTTPURL_E_DOUBLE_ENCODING },
	{ "/v1/data/../admin", HTTPURL_E_DOT_SEGMENT },
	{ "/v1/data/./x", HTTPURL_E_DOT_SEGMENT },
	{ "/v1/data/..", HTTPURL_E_DOT_SEGMENT },
	{ "/v1/data/.", HTTPURL_E_DOT_SEGMENT },
	{ "/..", HTTPURL_E_DOT_SEGMENT },
	{ "/./", HTTPURL_E_DOT_SEGMENT },
	{ "/v1/data/..;/admin", HTTPURL_E_DOT_SEGMENT },
	{ "/v1/data/..;jsessionid=1/admin", HTTPURL_E_DOT_SEGMENT },
	{ "/v1/data/.;x/y", HTTPURL_E_DOT_SEGMENT },
	{ "/v1/data\\..\\admin", HTTPURL_E_BACKSLASH },
	{ "/v1/data\\x", HTTPURL_E_BACKSLASH },
	{ "/v1/data/%00", HTTPURL_E_CONTROL },
	{ "/v1/data/%0a", HTTPURL_E_CONTROL },
	{ "/v1/data/%0D%0AHost:%20x", HTTPURL_E_CONTROL },
	{ "/v1/data/%7f", HTTPURL_E_CONTROL },
	{ "/v1/data/%c2%85", HTTPURL_E_CONTROL },
	{ "/v1/data\t", HTTPURL_E_CONTROL },
	{ "/v1/data\r\nHost: evil", HTTPURL_E_CONTROL },
	{ "/v1//data", HTTPURL_E_EMPTY_SEGMENT },
	{ "//v1/data", HTTPURL_E_EMPTY_SEGMENT },
	{ "/v1/data//", HTTPURL_E_EMPTY_SEGMENT },
	{ "/v1/data/%c0%ae%c0%ae/admin", HTTPURL_E_UTF8 },
	{ "/v1/data/%c0%af", HTTPURL_E_UTF8 },
	{ "/v1/data/%e0%80%ae", HTTPURL_E_UTF8 },
	{ "/v1/data/%ed%a0%80", HTTPURL_E_UTF8 },
	{ "/v1/data/%f5%80%80%80", HTTPURL_E_UTF8 },
	{ "/v1/data/%c3", HTTPURL_E_UTF8 },
	{ "/v1/data/%ff", HTTPURL_E_UTF8 },
	{ "/v1/data/%ef%bc%8f..", HTTPURL_E_UTF8 },
	{ "/v1/data/%ef%bc%8e%ef%bc%8e/admin", HTTPURL_E_UTF8 },
	{ "/v1/data/%ef%bc%bc", HTTPURL_E_UTF8 },
	{ "/v1/data/%e2%88%95", HTTPURL_E_UTF8 },
	{ "/v1/data/%zz", HTTPURL_E_ESCAPE },
	{ "/v1/data/%2", HTTPURL_E_ESCAPE },
	{ "/v1/data/%", HTTPURL_E_ESCAPE },
	{ "/v1/data/%u002e%u002e", HTTPURL_E_ESCAPE },
	{ "/v1/data/%%32%65", HTTPURL_E_ESCAPE },
	{ "/v1/data/ x", HTTPURL_E_CHAR },
	{ "/v1/data/<script>", HTTPURL_E_CHAR },
	{ "/v1/data/\"", HTTPURL_E_CHAR },
	{ "/v1/data/{x}", HTTPURL_E_CHAR },
	{ "/v1/data/|", HTTPURL_E_CHAR },
	{ "/v1/data/^", HTTPURL_E_CHAR },
	{ "/v1/data/`", HTTPURL_E_CHAR },
	{ "/v1/data/[0]", HTTPURL_E_CHAR },
	{ "/v1/data/caf\xc3\xa9", HTTPURL_E_CHAR },
};

START_TEST(test_path_attacks)
{
	char t[512], out[HTTPURL_MAX_PATH + 1];

	for (size_t i = 0; i < nitems(path_attacks); i++) {
		snprintf(t, sizeof(t), "http://api.example.test:8080%s", path_attacks[i].path);
		enum httpurl_err e = parse(t);
		ck_assert_msg(e == path_attacks[i].err, "%s: got %s, want %s", t,
		    httpurl_strerror(e), httpurl_strerror(path_attacks[i].err));
		/* the same answer from the path canonicalizer alone */
		e = httpurl_path_canon(path_attacks[i].path, strlen(path_attacks[i].path), out,
		    sizeof(out));
		ck_assert_msg(e == path_attacks[i].err, "%s: got %s", path_attacks[i].path,
		    httpurl_strerror(e));
	}
}
END_TEST

START_TEST(test_nul_inside)
{
	static const char t[] = "http://example.com/a\0b";
	static const char h[] = "http://exa\0mple.com/";
	char out[64];

	ck_assert_int_eq(httpurl_parse(t, sizeof(t) - 1, &u), HTTPURL_E_CONTROL);
	ck_assert_int_eq(httpurl_parse(h, sizeof(h) - 1, &u), HTTPURL_E_CONTROL);
	ck_assert_int_eq(httpurl_path_canon("/a\0b", 4, out, sizeof(out)), HTTPURL_E_CONTROL);
}
END_TEST

static const struct {
	const char *in;
	const char *canon;
} canon_cases[] = {
	{ "HTTP://API.Example.TEST:8080/v1/data", "http://api.example.test:8080/v1/data" },
	{ "https://example.com:443/a", "https://example.com/a" },
	{ "http://example.com:80/a", "http://example.com/a" },
	{ "http://example.com:443/a", "http://example.com:443/a" },
	{ "https://example.com:80/a", "https://example.com:80/a" },
	{ "http://example.com", "http://example.com/" },
	{ "http://example.com?x=1", "http://example.com/?x=1" },
	{ "http://example.com/a?", "http://example.com/a?" },
	{ "http://example.com/%7euser/%41%62%2d%5F", "http://example.com/~user/Ab-_" },
	{ "http://example.com/a%c3%a9", "http://example.com/a%C3%A9" },
	{ "http://example.com/a%20b", "http://example.com/a%20b" },
	{ "http://example.com/a?b=%2f%2e%25&c=d/e?f", "http://example.com/a?b=%2F%2E%25&c=d/e?f" },
	{ "http://example.com/a?q=%0a", "http://example.com/a?q=%0A" },
	{ "http://example.com/v1/data/", "http://example.com/v1/data/" },
	{ "http://example.com/a;b=c/d", "http://example.com/a;b=c/d" },
	{ "http://example.com/...", "http://example.com/..." },
	{ "http://example.com/.well-known/x", "http://example.com/.well-known/x" },
	{ "http://example.com/a.b/..c/d..", "http://example.com/a.b/..c/d.." },
	{ "http://example.com/!$&'()*+,;=:@~", "http://example.com/!$&'()*+,;=:@~" },
	{ "http://[2001:DB8::1]:8080/", "http://[2001:db8::1]:8080/" },
	{ "http://[2001:db8:0:0:0:0:0:1]/", "http://[2001:db8::1]/" },
	{ "http://2130706433:8080/x", "http://127.0.0.1:8080/x" },
	{ "http://0x7f.1/", "http://127.0.0.1/" },
	{ "http://a_b.example/", "http://a_b.example/" },
	{ "http://h:65535/", "http://h:65535/" },
	{ "http://h:1/", "http://h:1/" },
	{ "http://1a.example/", "http://1a.example/" },
	{ "http://0x7f.example/", "http://0x7f.example/" },
};

START_TEST(test_canonical)
{
	for (size_t i = 0; i < nitems(canon_cases); i++) {
		enum httpurl_err e = parse(canon_cases[i].in);
		ck_assert_msg(e == HTTPURL_OK, "%s: %s", canon_cases[i].in, httpurl_strerror(e));
		ck_assert_str_eq(u.hu_url, canon_cases[i].canon);
		assert_idempotent();
	}
	ck_assert_int_eq(parse("HTTPS://Example.COM:8443/A/b?C=D"), HTTPURL_OK);
	ck_assert_str_eq(u.hu_scheme, "https");
	ck_assert_str_eq(u.hu_host, "example.com");
	ck_assert_uint_eq(u.hu_port, 8443);
	ck_assert_str_eq(u.hu_authority, "example.com:8443");
	ck_assert_str_eq(u.hu_path, "/A/b");
	ck_assert_int_eq(u.hu_has_query, 1);
	ck_assert_str_eq(u.hu_query, "C=D");
	ck_assert_int_eq(parse("http://example.com/"), HTTPURL_OK);
	ck_assert_str_eq(u.hu_authority, "example.com:80");
	ck_assert_int_eq(u.hu_has_query, 0);
}
END_TEST

static const struct {
	const char *in;
	enum httpurl_err err;
} bad_cases[] = {
	{ "", HTTPURL_E_SCHEME },
	{ "x", HTTPURL_E_SCHEME },
	{ "/relative", HTTPURL_E_SCHEME },
	{ "//example.com/", HTTPURL_E_SCHEME },
	{ "ftp://example.com/", HTTPURL_E_SCHEME },
	{ "https:example.com", HTTPURL_E_SCHEME },
	{ "http:/example.com/", HTTPURL_E_SCHEME },
	{ "http:\\\\example.com/", HTTPURL_E_SCHEME },
	{ "httpx://example.com/", HTTPURL_E_SCHEME },
	{ "http ://example.com/", HTTPURL_E_SCHEME },
	{ "ws://example.com/", HTTPURL_E_SCHEME },
	{ "http://", HTTPURL_E_HOST },
	{ "http:///x", HTTPURL_E_HOST },
	{ "http://:80/", HTTPURL_E_HOST },
	{ "http://a..b/", HTTPURL_E_HOST },
	{ ".http://a/", HTTPURL_E_SCHEME },
	{ "http://-a.example/", HTTPURL_E_HOST },
	{ "http://a-.example/", HTTPURL_E_HOST },
	{ "http://exa mple.com/", HTTPURL_E_HOST },
	{ "http://exa<mple.com/", HTTPURL_E_HOST },
	{ "http://example.com%2f@x/", HTTPURL_E_USERINFO },
	{ "http://user:pass@example.com/", HTTPURL_E_USERINFO },
	{ "http://example.com/#frag", HTTPURL_E_FRAGMENT },
	{ "http://example.com/a?b#c", HTTPURL_E_FRAGMENT },
	{ "http://example.com:0/", HTTPURL_E_PORT },
	{ "http://example.com:65536/", HTTPURL_E_PORT },
	{ "http://example.com:/", HTTPURL_E_PORT },
	{ "http://example.com:080/", HTTPURL_E_PORT },
	{ "http://example.com:8a/", HTTPURL_E_PORT },
	{ "http://example.com:123456/", HTTPURL_E_PORT },
	{ "http://example.com:80:80/", HTTPURL_E_PORT },
	{ "http://example.com:+80/", HTTPURL_E_PORT },
	{ "http://example.com:-1/", HTTPURL_E_PORT },
	{ "http://[::1]:/", HTTPURL_E_PORT },
	{ "http://example.com/a?b c", HTTPURL_E_CHAR },
	{ "http://example.com/a?b%zz", HTTPURL_E_ESCAPE },
	{ "http://example.com/a?b\\c", HTTPURL_E_BACKSLASH },
	{ "http://example.com/a?b=\xc3\xa9", HTTPURL_E_CHAR },
	{ "http://example.com/a?b=[1]", HTTPURL_E_CHAR },
};

START_TEST(test_refused)
{
	for (size_t i = 0; i < nitems(bad_cases); i++) {
		enum httpurl_err e = parse(bad_cases[i].in);
		ck_assert_msg(e == bad_cases[i].err, "%s: got %s, want %s", bad_cases[i].in,
		    httpurl_strerror(e), httpurl_strerror(bad_cases[i].err));
	}
}
END_TEST

START_TEST(test_lengths)
{
	static char t[HTTPURL_MAX_TARGET + 64];
	char label[80];

	/* A 63-character label is fine, 64 is not; a 254-character name is too long. */
	memset(label, 'a', 63);
	label[63] = '\0';
	snprintf(t, sizeof(t), "http://%s.example/", label);
	ck_assert_int_eq(parse(t), HTTPURL_OK);
	snprintf(t, sizeof(t), "http://%sa.example/", label);
	ck_assert_int_eq(parse(t), HTTPURL_E_HOST);
	strcpy(t, "http://");
	for (int i = 0; i < 4; i++)
		strcat(t, label), strcat(t, ".");
	t[strlen(t) - 1] = '/';
	ck_assert_int_eq(parse(t), HTTPURL_E_TOO_LONG); /* 4*63+3 = 255 */

	/* path: 4096 is the limit */
	strcpy(t, "http://h/");
	memset(t + 9, 'p', HTTPURL_MAX_PATH - 1);
	t[9 + HTTPURL_MAX_PATH - 1] = '\0';
	ck_assert_int_eq(parse(t), HTTPURL_OK);
	ck_assert_uint_eq(strlen(u.hu_path), HTTPURL_MAX_PATH);
	assert_idempotent();
	strcat(t, "p");
	ck_assert_int_eq(parse(t), HTTPURL_E_TOO_LONG);

	/* query: 4096 is the limit */
	strcpy(t, "http://h/?");
	memset(t + 10, 'q', HTTPURL_MAX_QUERY);
	t[10 + HTTPURL_MAX_QUERY] = '\0';
	ck_assert_int_eq(parse(t), HTTPURL_OK);
	strcat(t, "q");
	ck_assert_int_eq(parse(t), HTTPURL_E_TOO_LONG);

	/* a whole target: 8192 */
	memset(t, 'a', sizeof(t));
	memcpy(t, "http://h/", 9);
	ck_assert_int_eq(httpurl_parse(t, HTTPURL_MAX_TARGET + 1, &u), HTTPURL_E_TOO_LONG);

	/*
	 * A target of exactly 8192 bytes whose host grows when canonicalized
	 * ("0" -> "0.0.0.0"): refused, so every canonical form parses again.
	 */
	snprintf(t, sizeof(t), "http://0/");
	size_t n = strlen(t);
	memset(t + n, 'p', HTTPURL_MAX_PATH - 1);
	n += HTTPURL_MAX_PATH - 1;
	t[n++] = '?';
	memset(t + n, 'q', HTTPURL_MAX_TARGET - n);
	n = HTTPURL_MAX_TARGET;
	t[n] = '\0';
	ck_assert_uint_le(n - (HTTPURL_MAX_PATH + 9), HTTPURL_MAX_QUERY);
	enum httpurl_err e = httpurl_parse(t, n, &u);
	ck_assert_msg(e == HTTPURL_E_TOO_LONG, "%s", httpurl_strerror(e));
}
END_TEST

START_TEST(test_prefix)
{
	ck_assert(httpurl_path_has_prefix("/v1/data", "/v1/data"));
	ck_assert(httpurl_path_has_prefix("/v1/data/", "/v1/data"));
	ck_assert(httpurl_path_has_prefix("/v1/data/x", "/v1/data"));
	ck_assert(httpurl_path_has_prefix("/v1/data/x/y", "/v1/data"));
	ck_assert(httpurl_path_has_prefix("/v1/data;x", "/v1/data") == 0);
	ck_assert(httpurl_path_has_prefix("/v1/database", "/v1/data") == 0);
	ck_assert(httpurl_path_has_prefix("/v1/data-x", "/v1/data") == 0);
	ck_assert(httpurl_path_has_prefix("/v1/dat", "/v1/data") == 0);
	ck_assert(httpurl_path_has_prefix("/v1", "/v1/data") == 0);
	ck_assert(httpurl_path_has_prefix("/V1/data", "/v1/data") == 0);
	ck_assert(httpurl_path_has_prefix("/v1/data/x", "/v1/data/"));
	ck_assert(httpurl_path_has_prefix("/v1/data/", "/v1/data/"));
	ck_assert(httpurl_path_has_prefix("/v1/data", "/v1/data/") == 0);
	ck_assert(httpurl_path_has_prefix("/anything", "/"));
	ck_assert(httpurl_path_has_prefix("/", "/"));
	ck_assert(httpurl_path_has_prefix("/x", "") == 0);
}
END_TEST

static int
in_scope(const struct httpurl_scope *s, const char *t)
{
	enum httpurl_err e = parse(t);
	if (e != HTTPURL_OK)
		return -(int)e;
	return httpurl_scope_match(s, &u);
}

START_TEST(test_scope)
{
	struct httpurl_scope s;
	static const char *const inside[] = {
		"http://api.example.test:8080/v1/data",
		"http://api.example.test:8080/v1/data/",
		"http://api.example.test:8080/v1/data/x",
		"http://api.example.test:8080/v1/data/x/y?q=1",
		"http://api.example.test:8080/v1/data?x",
		"HTTP://API.EXAMPLE.TEST:8080/v1/data/x",
		"http://api.example.test:8080/v1/%64ata/x",
		"http://api.example.test:8080/v1/data/x.json",
	};
	static const char *const outside[] = {
		"http://api.example.test:8080/v1/database",
		"http://api.example.test:8080/v1/dat",
		"http://api.example.test:8080/v1",
		"http://api.example.test:8080/v1/",
		"http://api.example.test:8080/",
		"http://api.example.test:8080/v1/data-x",
		"http://api.example.test:8080/v1/datax/y",
		"http://api.example.test:8080/V1/data",
		"http://api.example.test:8080/v1/data;x",
		"https://api.example.test:8080/v1/data",
		"http://api.example.test/v1/data",
		"http://api.example.test:8081/v1/data",
		"http://api.example.test.evil:8080/v1/data",
		"http://evil.api.example.test:8080/v1/data",
		"http://api.example.tes:8080/v1/data",
	};
	static const char *const refused[] = {
		"http://api.example.test:8080/v1/data/../admin",
		"http://api.example.test:8080/v1/data/%2e%2e/admin",
		"http://api.example.test:8080/v1/data/..%2fadmin",
		"http://api.example.test:8080/v1/data%2f..%2fadmin",
		"http://api.example.test:8080/v1/data/%252e%252e/admin",
		"http://api.example.test:8080/v1/data/..;/admin",
		"http://api.example.test:8080/v1/data\\..\\admin",
		"http://api.example.test:8080/v1/data//x",
		"http://x@api.example.test:8080/v1/data",
		"http://api.example.test:8080/v1/data#x",
	};

	ck_assert_int_eq(httpurl_scope_init(&s, "http", "api.example.test:8080", "/v1/data"),
	    HTTPURL_OK);
	ck_assert_str_eq(s.hs_authority, "api.example.test:8080");
	for (size_t i = 0; i < nitems(inside); i++)
		ck_assert_msg(in_scope(&s, inside[i]) == 1, "%s", inside[i]);
	for (size_t i = 0; i < nitems(outside); i++)
		ck_assert_msg(in_scope(&s, outside[i]) == 0, "%s", outside[i]);
	for (size_t i = 0; i < nitems(refused); i++)
		ck_assert_msg(in_scope(&s, refused[i]) < 0, "%s", refused[i]);

	/* trailing slash: only what is below */
	ck_assert_int_eq(httpurl_scope_init(&s, "http", "api.example.test:8080", "/v1/data/"),
	    HTTPURL_OK);
	ck_assert_int_eq(in_scope(&s, "http://api.example.test:8080/v1/data/x"), 1);
	ck_assert_int_eq(in_scope(&s, "http://api.example.test:8080/v1/data/"), 1);
	ck_assert_int_eq(in_scope(&s, "http://api.example.test:8080/v1/data"), 0);

	/* root prefix: the whole authority */
	ck_assert_int_eq(httpurl_scope_init(&s, "https", "api.example.test", "/"), HTTPURL_OK);
	ck_assert_str_eq(s.hs_authority, "api.example.test:443");
	ck_assert_int_eq(in_scope(&s, "https://api.example.test/anything"), 1);
	ck_assert_int_eq(in_scope(&s, "https://api.example.test:443/"), 1);
	ck_assert_int_eq(in_scope(&s, "https://api.example.test:8443/"), 0);
	ck_assert_int_eq(in_scope(&s, "http://api.example.test:443/"), 0);

	/* the scope itself is canonicalized */
	ck_assert_int_eq(httpurl_scope_init(&s, "HTTP", "API.Example.Test:80", "/v1/%64ata"),
	    HTTPURL_OK);
	ck_assert_str_eq(s.hs_scheme, "http");
	ck_assert_str_eq(s.hs_authority, "api.example.test:80");
	ck_assert_str_eq(s.hs_prefix, "/v1/data");
	ck_assert_int_eq(in_scope(&s, "http://api.example.test/v1/data/1"), 1);
	ck_assert_int_eq(httpurl_scope_init(&s, "http", "[2001:DB8::1]:8080", "/"), HTTPURL_OK);
	ck_assert_str_eq(s.hs_authority, "[2001:db8::1]:8080");
	ck_assert_int_eq(in_scope(&s, "http://[2001:db8:0::1]:8080/x"), 1);
	ck_assert_int_eq(httpurl_scope_init(&s, "http", "0x7f.1", "/"), HTTPURL_OK);
	ck_assert_str_eq(s.hs_authority, "127.0.0.1:80");

	/* scopes that cannot be canonical are refused */
	ck_assert_int_eq(httpurl_scope_init(&s, "ftp", "h", "/"), HTTPURL_E_SCOPE);
	ck_assert_int_eq(httpurl_scope_init(&s, "", "h", "/"), HTTPURL_E_SCOPE);
	ck_assert_int_eq(httpurl_scope_init(&s, "httpss", "h", "/"), HTTPURL_E_SCOPE);
	ck_assert_int_eq(httpurl_scope_init(&s, "http", "user@h", "/"), HTTPURL_E_USERINFO);
	ck_assert_int_eq(httpurl_scope_init(&s, "http", "h:0", "/"), HTTPURL_E_PORT);
	ck_assert_int_eq(httpurl_scope_init(&s, "http", "h/x", "/"), HTTPURL_E_HOST);
	ck_assert_int_eq(httpurl_scope_init(&s, "http", "", "/"), HTTPURL_E_HOST);
	ck_assert_int_eq(httpurl_scope_init(&s, "http", "h", "/v1/../x"), HTTPURL_E_DOT_SEGMENT);
	ck_assert_int_eq(httpurl_scope_init(&s, "http", "h", "v1"), HTTPURL_E_CHAR);
	ck_assert_int_eq(httpurl_scope_init(&s, "http", "h", ""), HTTPURL_E_CHAR);
	ck_assert_int_eq(httpurl_scope_init(&s, "http", "h", "/v1/%2e"), HTTPURL_E_ENCODED_DELIM);
	ck_assert_int_eq(httpurl_scope_init(&s, "http", "h", "/v1?x"), HTTPURL_E_CHAR);
	ck_assert_int_eq(httpurl_scope_init(&s, "http", "h", "/v1#x"), HTTPURL_E_CHAR);
}
END_TEST

START_TEST(test_authority_canon)
{
	char out[HTTPURL_AUTHORITY_BUF];

	ck_assert_int_eq(httpurl_authority_canon("https", "Example.COM", out, sizeof(out)),
	    HTTPURL_OK);
	ck_assert_str_eq(out, "example.com:443");
	ck_assert_int_eq(httpurl_authority_canon("http", "[::FFFF:7f00:1]:81", out, sizeof(out)),
	    HTTPURL_OK);
	ck_assert_str_eq(out, "[::ffff:127.0.0.1]:81");
	ck_assert_int_eq(httpurl_authority_canon("http", "h", out, 4), HTTPURL_E_TOO_LONG);
	ck_assert_int_eq(httpurl_authority_canon("gopher", "h", out, sizeof(out)),
	    HTTPURL_E_SCHEME);
	ck_assert_int_eq(httpurl_authority_canon("http", "h\\x", out, sizeof(out)),
	    HTTPURL_E_BACKSLASH);
}
END_TEST

START_TEST(test_strerror)
{
	static const char *const names[] = { "ok", "too_long", "bad_scheme", "userinfo",
		"fragment", "bad_host", "ambiguous_numeric_host", "idna_host", "bad_ipv6",
		"bad_port", "bad_char", "control_char", "backslash", "bad_escape",
		"encoded_delimiter", "double_encoding", "dot_segment", "empty_segment",
		"bad_utf8", "bad_scope" };

	for (size_t i = 0; i < nitems(names); i++)
		ck_assert_str_eq(httpurl_strerror((enum httpurl_err)i), names[i]);
	ck_assert_int_eq(HTTPURL_E_SCOPE + 1, (int)nitems(names));
}
END_TEST

static Suite *
httpurl_suite(void)
{
	Suite *s = suite_create("httpurl");
	TCase *tc = tcase_create("httpurl");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_ssrf_table);
	tcase_add_test(tc, test_embedded_forms);
	tcase_add_test(tc, test_policy_restricted);
	tcase_add_test(tc, test_path_attacks);
	tcase_add_test(tc, test_nul_inside);
	tcase_add_test(tc, test_canonical);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_lengths);
	tcase_add_test(tc, test_prefix);
	tcase_add_test(tc, test_scope);
	tcase_add_test(tc, test_authority_canon);
	tcase_add_test(tc, test_strerror);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	unit_init();
	sr = srunner_create(httpurl_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unit_cleanup_leftovers();
	return failed ? 1 : 0;
}
