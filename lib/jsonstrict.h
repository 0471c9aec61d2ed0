/*
 * jsonstrict.h: an exact RFC 8259 grammar check in front of json-c.
 *
 * json-c, even in strict mode, accepts things other parsers do not
 * (single-quoted strings, NaN and Infinity, "1.", raw control characters in
 * strings, lone surrogates) and silently keeps the last of duplicate keys.
 * When two components parse the same bytes differently, a request can mean
 * one thing to the check and another to the user of the result; so every
 * untrusted payload must pass this scanner first and is refused otherwise.
 */
#ifndef GENSEE_JSONSTRICT_H
#define GENSEE_JSONSTRICT_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

enum jsonstrict_status {
	JSONSTRICT_OK = 0,
	JSONSTRICT_SYNTAX = -1,		/* not RFC 8259 JSON */
	JSONSTRICT_DEPTH = -2,		/* nested deeper than allowed */
	JSONSTRICT_TRAILING = -3,	/* bytes after the value */
	JSONSTRICT_NOMEM = -4,
	JSONSTRICT_DUPLICATE = -5,	/* an object repeats a key */
};

struct jsonstrict {
	uint32_t *js_counts;	/* members of each object, in document order */
	size_t js_ncounts;
	size_t js_cap;
	int js_top;		/* first byte of the top-level value */
};

/* Scan buf; on success js describes the objects for jsonstrict_same_keys. */
int jsonstrict_scan(const uint8_t *buf, size_t len, int max_depth, struct jsonstrict *js);
/*
 * After json-c parsed the same bytes: JSONSTRICT_OK when every object kept
 * all its members (no key was repeated), JSONSTRICT_DUPLICATE otherwise.
 */
int jsonstrict_same_keys(const struct jsonstrict *js, struct json_object *parsed);
void jsonstrict_free(struct jsonstrict *js);

#endif
