/*
 * fuzz_httptxn.c: the HTTP transaction state machine (lib/httptxn.c).
 * The input is a persisted state (JSON, up to the first NUL), restored
 * strictly, then a sequence of lifecycle calls, mediator authorizations
 * and completions driven by the remaining bytes. Invariants checked after
 * every step: a restored state re-serializes to itself, at most one
 * reservation, never more requests than max_requests, the deadline is
 * begin + TTL, a terminal transaction allows nothing, a response limit is
 * never negative and never more than the budget left.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "httptxn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct httptxn_config cfg;
static int ready;

static const char *const urls[] = {
	"http://api.example.test:8080/v1/data",
	"http://api.example.test:8080/v1/data/x?q=1",
	"http://api.example.test:8080/v1/database",
	"https://api.example.test:8080/v1/data",
	"http://api.example.test/v1/data",
	"http://other.test:8080/v1/data/y",
};

static const char *const ids[] = { "tx_a", "tx_b", "tx_c", "", "bad id" };

static void
invariants(const struct httptxn_table *t)
{
	const struct httptxn *x = &t->tt_cur;

	if (x->ht_state == HTXN_NONE)
		return;
	if (x->ht_deadline_ms != x->ht_begun_ms + x->ht_ttl_s * 1000)
		abort();
	if (x->ht_reservation > t->tt_generation)
		abort();
	if (x->ht_reserved_bytes < 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct httptxn_table t;
	struct json_object *o, *again;
	const uint8_t *nul = memchr(data, 0, size);
	size_t jl = nul ? (size_t)(nul - data) : size;
	char *cause = NULL;
	int64_t now = 1000000;

	if (!ready) {
		struct json_object *tx = json_tokener_parse(
		    "{\"effect\":\"external_http_read\",\"scopes\":[{\"scheme\":\"http\","
		    "\"authority\":\"api.example.test:8080\",\"path_prefix\":\"/v1/data\"}],"
		    "\"max_ttl_seconds\":120,\"max_requests\":5,\"max_request_bytes\":100,"
		    "\"max_response_bytes\":1000}");
		if (tx == NULL || httptxn_config_parse(tx, &cfg, &cause) != 0)
			abort();
		json_object_put(tx);
		ready = 1;
	}
	char *js = malloc(jl + 1);
	if (js == NULL)
		return 0;
	memcpy(js, data, jl);
	js[jl] = '\0';
	o = json_tokener_parse(js);
	free(js);
	if (o == NULL || httptxn_from_json(o, &t, &cause) != 0) {
		free(cause);
		cause = NULL;
		json_object_put(o);
		httptxn_table_init(&t);
	} else {
		/* restore(serialize(x)) == x */
		struct httptxn_table t2;
		struct json_object *a = httptxn_to_json(&t);
		if (httptxn_from_json(a, &t2, &cause) != 0)
			abort();
		again = httptxn_to_json(&t2);
		if (strcmp(json_object_to_json_string(a), json_object_to_json_string(again)) != 0)
			abort();
		json_object_put(a);
		json_object_put(again);
		json_object_put(o);
		httptxn_table_free(&t2);
		now = t.tt_cur.ht_begun_ms > 0 ? t.tt_cur.ht_begun_ms : now;
	}
	invariants(&t);
	for (const uint8_t *p = nul ? nul + 1 : data + size; p + 1 < data + size; p += 2) {
		const char *id = ids[p[1] % 5];
		uint64_t res = 0;
		int64_t lim = 0, before_req = t.tt_cur.ht_requests;
		enum httptxn_state before = t.tt_cur.ht_state;
		struct httpurl u;
		const char *url;
		now += (p[1] >> 3) * 997;
		switch (p[0] % 8) {
		case 0:
			(void)httptxn_begin(&t, &cfg, id, (p[1] & 1) ? NULL : "other",
			    (int64_t)(p[1] % 130), now);
			break;
		case 1:
			(void)httptxn_activate(&t, id, now);
			break;
		case 2:
			(void)httptxn_end(&t, id, now);
			break;
		case 3:
			(void)httptxn_revoke(&t, id, now);
			break;
		case 4:
		case 5:
			url = urls[p[1] % 6];
			if (httpurl_parse(url, strlen(url), &u) != HTTPURL_OK)
				abort();
			if (httptxn_authorize(&t, &cfg, &u, p[1] % 60, p[1] & 1, id, now, &res,
			    &lim) == NULL) {
				if (before != HTXN_ACTIVE || t.tt_cur.ht_state != HTXN_ACTIVE ||
				    res == 0 || lim < 0 ||
				    lim > cfg.hc_max_response_bytes - t.tt_cur.ht_response_bytes ||
				    t.tt_cur.ht_requests != before_req + 1 ||
				    t.tt_cur.ht_requests > cfg.hc_max_requests ||
				    now >= t.tt_cur.ht_deadline_ms)
					abort();
			} else if (res != 0 || t.tt_cur.ht_requests != before_req) {
				abort();
			}
			break;
		case 6:
			(void)httptxn_complete(&t, id, t.tt_cur.ht_reservation, p[1] * 7, p[1] & 1,
			    now);
			break;
		case 7:
			(void)httptxn_expire(&t, now);
			if (t.tt_cur.ht_state == HTXN_ACTIVE && now >= t.tt_cur.ht_deadline_ms)
				abort();
			break;
		}
		invariants(&t);
	}
	httptxn_table_free(&t);
	return 0;
}
