/*
 * fuzz_netpolicy.c: the network policy parsers on arbitrary input: the
 * schema-3 operation config (JSON), grant strings and address ranges, and
 * a decision on whatever parsed.
 */
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "frame.h"
#include "netpolicy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_object *obj = NULL;
	char *cause = NULL;

	if (frame_parse_payload(data, size, &obj) == FRAME_OK) {
		struct np_config c;
		if (netpolicy_parse_config(obj, &c, &cause) == 0) {
			struct np_event ev = { .ne_family = AF_INET, .ne_proto = IPPROTO_TCP,
				.ne_port = 443 };
			struct np_decision d;
			ev.ne_addr[0] = 203;
			ev.ne_addr[2] = 113;
			struct np_boundary b = { .nb_allow = &c.nc_envelope };
			netpolicy_decide(&c.nc_policy, &b, &ev, 0, &d);
			if (d.nd_reason == NULL)
				abort(); /* every disposition carries a reason */
			if (d.nd_disposition == NP_LEASE &&
			    (d.nd_ttl <= 0 || d.nd_ttl > c.nc_policy.np_max_lease_ttl))
				abort();
		} else if (cause == NULL) {
			abort();
		}
		netpolicy_config_free(&c);
		json_object_put(obj);
		free(cause);
		cause = NULL;
	}
	/* The same bytes as a grant string and as a range. */
	char *s = malloc(size + 1);
	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	struct np_grants g = { 0 };
	int hostname = 0;
	if (netpolicy_parse_grant_string(s, &g, &hostname, &cause) == 0) {
		for (size_t i = 0; i < g.g_n; i++) {
			const struct np_grant *x = &g.g_v[i];
			size_t alen = x->ng_dst.nr_family == AF_INET ? 4 : 16;
			if (x->ng_port_lo > x->ng_port_hi ||
			    memcmp(x->ng_dst.nr_lo, x->ng_dst.nr_hi, alen) > 0)
				abort(); /* ranges are always ordered */
			struct json_object *j = netpolicy_grant_json(x);
			json_object_put(j);
		}
	}
	np_grants_free(&g);
	free(cause);
	struct np_range r;
	char buf[128];
	if (netpolicy_parse_range(s, &r, &hostname) == 0)
		netpolicy_range_format(&r, buf, sizeof(buf));
	free(s);
	return 0;
}
