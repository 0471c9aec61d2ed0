/*
 * fuzz_dnsmsg.c: the DNS proxy's parsers on arbitrary bytes, as a client
 * query and as an upstream reply. What parses must hold the invariants the
 * proxy relies on: names in the text form dnsmsg_valid_name accepts, a
 * chain that starts at the question and whose addresses are of the
 * question's type, and a rebuilt answer that parses back to the same
 * chain and stays within its buffer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dnsmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct dnsmsg_reply r, r2;
	static struct dnsmsg_chain c, c2;
	struct dnsmsg_query q;
	const char *code = NULL;
	uint8_t out[DNSMSG_UDP_MAX * 20];

	if (dnsmsg_parse_query(data, size, &q, &code) == 0) {
		if (!dnsmsg_valid_name(q.dq_name))
			abort();
		int n = dnsmsg_build_error(&q, DNS_RCODE_REFUSED, out, DNSMSG_UDP_MAX);
		if (n < 0 || (size_t)n > DNSMSG_UDP_MAX)
			abort();
	}
	if (dnsmsg_parse_reply(data, size, &r, &code) != 0)
		return 0;
	for (size_t i = 0; i < r.da_n; i++)
		if ((r.da_rr[i].dr_name[0] != '\0' && !dnsmsg_valid_name(r.da_rr[i].dr_name)) ||
		    (r.da_rr[i].dr_type == DNS_TYPE_CNAME && !dnsmsg_valid_name(r.da_rr[i].dr_target)))
			abort();
	if (r.da_qname[0] == '\0' || (r.da_qtype != DNS_TYPE_A && r.da_qtype != DNS_TYPE_AAAA))
		return 0;
	if (dnsmsg_chain(&r, r.da_qname, r.da_qtype, &c, &code) != 0)
		return 0;
	if (c.dc_nnames < 1 || strcmp(c.dc_names[0], r.da_qname) != 0)
		abort();
	memset(&q, 0, sizeof(q));
	memcpy(q.dq_name, r.da_qname, sizeof(q.dq_name));
	q.dq_type = r.da_qtype;
	q.dq_class = DNS_CLASS_IN;
	int n = dnsmsg_build_answer(&q, &c, c.dc_ttl, out, sizeof(out));
	if (n < 0 || (size_t)n > sizeof(out))
		abort();
	if (out[2] & 0x02)
		return 0;
	if (dnsmsg_parse_reply(out, (size_t)n, &r2, &code) != 0 ||
	    dnsmsg_chain(&r2, q.dq_name, q.dq_type, &c2, &code) != 0 ||
	    c2.dc_nnames != c.dc_nnames || c2.dc_naddrs != c.dc_naddrs ||
	    memcmp(c2.dc_addrs, c.dc_addrs, sizeof(c.dc_addrs)) != 0)
		abort();
	return 0;
}
