/*
 * schema.c: strict validation of untrusted JSON objects.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "schema.h"
#include "util.h"

static int
schema_fail(struct schema_error *err, const char *code, const char *field, const char *msg)
{
	if (err != NULL) {
		err->se_code = code;
		util_strlcpy(err->se_field, field != NULL ? field : "", sizeof(err->se_field));
		snprintf(err->se_message, sizeof(err->se_message), "%s%s%s", field ? field : "",
		    field ? ": " : "", msg);
	}
	return -1;
}

/* A string is valid when it has no NUL and its length is within bounds. */
static int
schema_check_string(struct json_object *v, int64_t min, int64_t max, const char *name,
    struct schema_error *err)
{
	const char *s = json_object_get_string(v);
	int len = json_object_get_string_len(v);

	if (s == NULL || (size_t)len != strlen(s))
		return schema_fail(err, SCHEMA_E_STRING, name, "string contains NUL");
	if (len < min || len > max)
		return schema_fail(err, SCHEMA_E_LENGTH, name, "string length out of bounds");
	return 0;
}

static int
schema_check_field(struct json_object *v, const struct schema_field *f, struct schema_error *err)
{
	switch (f->sf_type) {
	case SCHEMA_STRING:
		if (!json_object_is_type(v, json_type_string))
			return schema_fail(err, SCHEMA_E_TYPE, f->sf_name, "expected a string");
		return schema_check_string(v, f->sf_min, f->sf_max, f->sf_name, err);
	case SCHEMA_INT: {
		if (!json_object_is_type(v, json_type_int))
			return schema_fail(err, SCHEMA_E_TYPE, f->sf_name, "expected an integer");
		/* json-c clamps out-of-range literals; reject anything beyond int64. */
		errno = 0;
		int64_t x = json_object_get_int64(v);
		if (errno != 0 || x < f->sf_min || x > f->sf_max)
			return schema_fail(err, SCHEMA_E_RANGE, f->sf_name, "integer out of range");
		if (json_object_get_uint64(v) > (uint64_t)INT64_MAX)
			return schema_fail(err, SCHEMA_E_RANGE, f->sf_name, "integer out of range");
		return 0;
	}
	case SCHEMA_BOOL:
		if (!json_object_is_type(v, json_type_boolean))
			return schema_fail(err, SCHEMA_E_TYPE, f->sf_name, "expected a boolean");
		return 0;
	case SCHEMA_OBJECT:
		if (!json_object_is_type(v, json_type_object))
			return schema_fail(err, SCHEMA_E_TYPE, f->sf_name, "expected an object");
		return 0;
	case SCHEMA_ARRAY:
	case SCHEMA_STRING_ARRAY: {
		if (!json_object_is_type(v, json_type_array))
			return schema_fail(err, SCHEMA_E_TYPE, f->sf_name, "expected an array");
		size_t n = json_object_array_length(v);
		if ((int64_t)n < f->sf_min || (int64_t)n > f->sf_max)
			return schema_fail(err, SCHEMA_E_LENGTH, f->sf_name, "array length out of bounds");
		if (f->sf_type == SCHEMA_ARRAY)
			return 0;
		for (size_t i = 0; i < n; i++) {
			struct json_object *it = json_object_array_get_idx(v, i);
			if (!json_object_is_type(it, json_type_string))
				return schema_fail(err, SCHEMA_E_TYPE, f->sf_name,
				    "expected an array of strings");
			if (schema_check_string(it, 0, f->sf_item_max, f->sf_name, err) != 0)
				return -1;
		}
		return 0;
	}
	}
	return schema_fail(err, SCHEMA_E_TYPE, f->sf_name, "unsupported schema type");
}

int
schema_validate(struct json_object *obj, const struct schema_field *fields, size_t nfields,
    struct schema_error *err)
{
	if (!json_object_is_type(obj, json_type_object))
		return schema_fail(err, SCHEMA_E_NOT_OBJECT, NULL, "expected an object");

	/* Unknown keys first: a request must say exactly what the schema knows. */
	json_object_object_foreach(obj, key, val) {
		size_t i;
		(void)val;
		for (i = 0; i < nfields; i++)
			if (strcmp(fields[i].sf_name, key) == 0)
				break;
		if (i == nfields) {
			char name[64];
			util_strlcpy(name, key, sizeof(name));
			return schema_fail(err, SCHEMA_E_UNKNOWN, name, "unknown field");
		}
	}
	for (size_t i = 0; i < nfields; i++) {
		struct json_object *v;
		const struct schema_field *f = &fields[i];
		if (!json_object_object_get_ex(obj, f->sf_name, &v) ||
		    (v == NULL && (f->sf_flags & SCHEMA_NULLABLE))) {
			if (f->sf_flags & SCHEMA_REQUIRED)
				return schema_fail(err, SCHEMA_E_MISSING, f->sf_name,
				    "required field missing");
			continue;
		}
		if (v == NULL)
			return schema_fail(err, SCHEMA_E_TYPE, f->sf_name, "null is not allowed");
		if (schema_check_field(v, f, err) != 0)
			return -1;
	}
	return 0;
}

struct json_object *
schema_child(struct json_object *obj, const char *name)
{
	struct json_object *v;
	if (obj == NULL || !json_object_object_get_ex(obj, name, &v))
		return NULL;
	return v;
}

const char *
schema_string(struct json_object *obj, const char *name)
{
	struct json_object *v = schema_child(obj, name);
	if (v == NULL || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

int64_t
schema_int(struct json_object *obj, const char *name, int64_t dflt)
{
	struct json_object *v = schema_child(obj, name);
	if (v == NULL || !json_object_is_type(v, json_type_int))
		return dflt;
	return json_object_get_int64(v);
}

int
schema_bool(struct json_object *obj, const char *name, int dflt)
{
	struct json_object *v = schema_child(obj, name);
	if (v == NULL || !json_object_is_type(v, json_type_boolean))
		return dflt;
	return json_object_get_boolean(v);
}
