/*
 * jsonstrict.c: RFC 8259 grammar scanner and duplicate-key check.
 */
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "jsonstrict.h"

struct jscan {
	const uint8_t *s;
	size_t len, pos;
	int depth, max_depth;
	struct jsonstrict *js;
};

static void
js_ws(struct jscan *j)
{
	while (j->pos < j->len && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' ||
	    j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
		j->pos++;
}

static int
js_hex4(struct jscan *j, unsigned *out)
{
	unsigned v = 0;
	if (j->len - j->pos < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		uint8_t c = j->s[j->pos++];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* A string: no raw control characters, known escapes, paired surrogates. */
static int
js_string(struct jscan *j)
{
	j->pos++; /* the opening quote */
	while (j->pos < j->len) {
		uint8_t c = j->s[j->pos++];
		if (c == '"')
			return 0;
		if (c < 0x20)
			return JSONSTRICT_SYNTAX;
		if (c != '\\')
			continue;
		if (j->pos >= j->len)
			return JSONSTRICT_SYNTAX;
		c = j->s[j->pos++];
		if (strchr("\"\\/bfnrt", c) != NULL && c != '\0')
			continue;
		if (c != 'u')
			return JSONSTRICT_SYNTAX;
		unsigned u;
		if (js_hex4(j, &u) != 0)
			return JSONSTRICT_SYNTAX;
		if (u >= 0xdc00 && u <= 0xdfff)
			return JSONSTRICT_SYNTAX; /* a low surrogate alone */
		if (u >= 0xd800 && u <= 0xdbff) {
			unsigned lo;
			if (j->len - j->pos < 6 || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u')
				return JSONSTRICT_SYNTAX;
			j->pos += 2;
			if (js_hex4(j, &lo) != 0 || lo < 0xdc00 || lo > 0xdfff)
				return JSONSTRICT_SYNTAX;
		} else if (u == 0) {
			return JSONSTRICT_SYNTAX; /* NUL would cut C strings short */
		}
	}
	return JSONSTRICT_SYNTAX;
}

static int
js_digits(struct jscan *j)
{
	size_t start = j->pos;
	while (j->pos < j->len && j->s[j->pos] >= '0' && j->s[j->pos] <= '9')
		j->pos++;
	return j->pos > start ? 0 : -1;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int
js_number(struct jscan *j)
{
	if (j->s[j->pos] == '-')
		j->pos++;
	if (j->pos >= j->len)
		return JSONSTRICT_SYNTAX;
	if (j->s[j->pos] == '0')
		j->pos++;
	else if (js_digits(j) != 0)
		return JSONSTRICT_SYNTAX;
	if (j->pos < j->len && j->s[j->pos] == '.') {
		j->pos++;
		if (js_digits(j) != 0)
			return JSONSTRICT_SYNTAX;
	}
	if (j->pos < j->len && (j->s[j->pos] == 'e' || j->s[j->pos] == 'E')) {
		j->pos++;
		if (j->pos < j->len && (j->s[j->pos] == '+' || j->s[j->pos] == '-'))
			j->pos++;
		if (js_digits(j) != 0)
			return JSONSTRICT_SYNTAX;
	}
	return 0;
}

static int
js_literal(struct jscan *j, const char *word)
{
	size_t n = strlen(word);
	if (j->len - j->pos < n || memcmp(j->s + j->pos, word, n) != 0)
		return JSONSTRICT_SYNTAX;
	j->pos += n;
	return 0;
}

static int js_value(struct jscan *j);

static int
js_count_push(struct jsonstrict *js, size_t *slot)
{
	if (js->js_ncounts == js->js_cap) {
		size_t cap = js->js_cap ? 2 * js->js_cap : 16;
		uint32_t *v = realloc(js->js_counts, cap * sizeof(*v));
		if (v == NULL)
			return JSONSTRICT_NOMEM;
		js->js_counts = v;
		js->js_cap = cap;
	}
	*slot = js->js_ncounts;
	js->js_counts[js->js_ncounts++] = 0;
	return 0;
}

static int
js_container(struct jscan *j, int object)
{
	uint8_t close = object ? '}' : ']';
	size_t slot = 0;
	uint32_t members = 0;
	int r;

	if (++j->depth > j->max_depth)
		return JSONSTRICT_DEPTH;
	if (object && (r = js_count_push(j->js, &slot)) != 0)
		return r;
	j->pos++;
	js_ws(j);
	if (j->pos < j->len && j->s[j->pos] == close) {
		j->pos++;
		j->depth--;
		return 0;
	}
	for (;;) {
		js_ws(j);
		if (object) {
			if (j->pos >= j->len || j->s[j->pos] != '"')
				return JSONSTRICT_SYNTAX;
			if ((r = js_string(j)) != 0)
				return r;
			js_ws(j);
			if (j->pos >= j->len || j->s[j->pos] != ':')
				return JSONSTRICT_SYNTAX;
			j->pos++;
		}
		if ((r = js_value(j)) != 0)
			return r;
		members++;
		js_ws(j);
		if (j->pos >= j->len)
			return JSONSTRICT_SYNTAX;
		if (j->s[j->pos] == ',') {
			j->pos++;
			continue;
		}
		if (j->s[j->pos] != close)
			return JSONSTRICT_SYNTAX;
		j->pos++;
		break;
	}
	if (object)
		j->js->js_counts[slot] = members;
	j->depth--;
	return 0;
}

static int
js_value(struct jscan *j)
{
	js_ws(j);
	if (j->pos >= j->len)
		return JSONSTRICT_SYNTAX;
	switch (j->s[j->pos]) {
	case '{':
		return js_container(j, 1);
	case '[':
		return js_container(j, 0);
	case '"':
		return js_string(j);
	case 't':
		return js_literal(j, "true");
	case 'f':
		return js_literal(j, "false");
	case 'n':
		return js_literal(j, "null");
	default:
		if (j->s[j->pos] == '-' || (j->s[j->pos] >= '0' && j->s[j->pos] <= '9'))
			return js_number(j);
		return JSONSTRICT_SYNTAX;
	}
}

int
jsonstrict_scan(const uint8_t *buf, size_t len, int max_depth, struct jsonstrict *js)
{
	struct jscan j = { buf, len, 0, 0, max_depth, js };
	int r;

	memset(js, 0, sizeof(*js));
	js_ws(&j);
	js->js_top = j.pos < len ? buf[j.pos] : 0;
	if ((r = js_value(&j)) != 0)
		return r;
	js_ws(&j);
	return j.pos == len ? JSONSTRICT_OK : JSONSTRICT_TRAILING;
}

/* Walk json-c's tree in document order, comparing member counts. */
static int
js_walk(struct json_object *o, const struct jsonstrict *js, size_t *i)
{
	if (json_object_is_type(o, json_type_object)) {
		if (*i >= js->js_ncounts || js->js_counts[*i] != (uint32_t)json_object_object_length(o))
			return -1;
		(*i)++;
		json_object_object_foreach(o, k, v) {
			(void)k;
			if (js_walk(v, js, i) != 0)
				return -1;
		}
	} else if (json_object_is_type(o, json_type_array)) {
		for (size_t n = 0; n < json_object_array_length(o); n++)
			if (js_walk(json_object_array_get_idx(o, n), js, i) != 0)
				return -1;
	}
	return 0;
}

int
jsonstrict_same_keys(const struct jsonstrict *js, struct json_object *parsed)
{
	size_t i = 0;
	if (js_walk(parsed, js, &i) != 0 || i != js->js_ncounts)
		return JSONSTRICT_DUPLICATE;
	return JSONSTRICT_OK;
}

void
jsonstrict_free(struct jsonstrict *js)
{
	free(js->js_counts);
	memset(js, 0, sizeof(*js));
}
