/*
 * fuzz_fanpolicy.c: the sensitive-path pattern parser and matcher on
 * arbitrary input. The bytes up to the first newline are a pattern (NUL
 * and all), the rest is both a path to match and a second pattern; the
 * decision table gets two of the bytes; the rest is offered as a
 * workspace too. Nothing here touches the filesystem (no resolve, no
 * plan).
 */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fanpolicy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Invariants every parsed rule keeps. */
static void
check_rules(const struct fanpolicy *p)
{
	for (size_t i = 0; i < p->fp_nrules; i++) {
		const struct fan_rule *r = &p->fp_rules[i], *hit;
		if (r->fr_index != i || r->fr_path == NULL || r->fr_pattern == NULL ||
		    r->fr_pathlen != strlen(r->fr_path) || r->fr_pathlen >= PATH_MAX)
			abort();
		if ((r->fr_kind == FAN_RULE_SUFFIX) != (r->fr_glob != NULL))
			abort();
		/* Every rule path is canonical. */
		int m = fanpolicy_match(p, r->fr_path, &hit);
		if (m < 0)
			abort();
		/* An exact path or a prefix root matches itself (maybe by an earlier rule). */
		if (r->fr_kind != FAN_RULE_SUFFIX && (m != 1 || hit == NULL || hit->fr_kind >
		    r->fr_kind))
			abort();
		if (fanpolicy_affects(p, r->fr_path, 1) != 1)
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t plen = nl != NULL ? (size_t)(nl - data) : size;
	size_t rlen = nl != NULL ? size - plen - 1 : 0;
	const struct fan_rule *hit;
	struct fanpolicy p;
	struct fan_decision d;
	char *cause = NULL, *rest;
	int m;

	fanpolicy_init(&p);
	if (fanpolicy_add(&p, (const char *)data, plen, "/home/fuzz", FAN_ACTION_DENY,
	    &cause) != 0 && cause == NULL)
		abort(); /* a refusal always says why */
	free(cause);
	cause = NULL;
	if (fanpolicy_add(&p, (const char *)data, plen, NULL, FAN_ACTION_OBSERVE, &cause) != 0 &&
	    cause == NULL)
		abort();
	free(cause);
	cause = NULL;

	rest = malloc(rlen + 1);
	if (rest == NULL) {
		fanpolicy_free(&p);
		return 0;
	}
	memcpy(rest, nl != NULL ? nl + 1 : data, rlen);
	rest[rlen] = '\0';
	(void)fanpolicy_add(&p, rest, rlen, "/", FAN_ACTION_WARN, &cause);
	free(cause);
	cause = NULL;
	/* A workspace is taken only as an absolute canonical path, and only once. */
	size_t nws = p.fp_nworkspaces;
	if (fanpolicy_add_workspace(&p, rest, &cause) == 0) {
		if (rest[0] != '/' || strstr(rest, "//") != NULL || strstr(rest, "/./") != NULL ||
		    strstr(rest, "/../") != NULL || p.fp_nworkspaces != nws + 1 ||
		    fanpolicy_add_workspace(&p, rest, &cause) != 0 || p.fp_nworkspaces != nws + 1)
			abort();
	} else if (cause == NULL) {
		abort();
	}
	free(cause);
	check_rules(&p);

	m = fanpolicy_match(&p, rest, &hit);
	if (m < -1 || m > 1 || (m == 1) != (hit != NULL))
		abort();
	if (m == 1 && (hit < p.fp_rules || hit >= p.fp_rules + p.fp_nrules))
		abort();
	if (m == 1 && hit->fr_kind == FAN_RULE_EXACT && strcmp(rest, hit->fr_path) != 0)
		abort();
	if (m != 0 && fanpolicy_affects(&p, rest, 0) != 1)
		abort();
	if (m == 0 && fanpolicy_affects(&p, rest, 0) != 0)
		abort();

	fanpolicy_decide((enum fan_posture)(size > 0 ? data[0] % 5 : 0),
	    (enum fan_action)(size > 1 ? data[1] % 6 : 0), size > 2 ? data[2] & 1 : 1, &d);
	if (d.dc_reason == NULL || (d.dc_response != FAN_ALLOW && d.dc_response != FAN_DENY))
		abort();
	fanpolicy_free(&p);
	free(rest);
	return 0;
}
