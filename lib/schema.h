/*
 * schema.h: strict field validation over json-c objects.
 *
 * A schema is a table of fields. Validation rejects unknown fields, missing
 * required ones, wrong types, out-of-range integers and strings that are too
 * long, empty where not allowed, or contain NUL. Each rejection carries a
 * stable code and the field name, so callers can answer with a precise error.
 */
#ifndef GENSEE_SCHEMA_H
#define GENSEE_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

enum schema_type {
	SCHEMA_STRING,
	SCHEMA_INT,
	SCHEMA_BOOL,
	SCHEMA_OBJECT,
	SCHEMA_ARRAY,		/* any items; count bounded */
	SCHEMA_STRING_ARRAY,	/* every item a string within the length bounds */
};

#define SCHEMA_REQUIRED 0x01
#define SCHEMA_NULLABLE 0x02 /* JSON null is accepted as "absent" */

struct schema_field {
	const char *sf_name;
	enum schema_type sf_type;
	int sf_flags;
	int64_t sf_min; /* int value, string length, or array count */
	int64_t sf_max;
	int64_t sf_item_max; /* string length bound of SCHEMA_STRING_ARRAY items */
};

/* Stable error codes. */
#define SCHEMA_E_NOT_OBJECT "not_object"
#define SCHEMA_E_MISSING "missing_field"
#define SCHEMA_E_UNKNOWN "unknown_field"
#define SCHEMA_E_TYPE "wrong_type"
#define SCHEMA_E_RANGE "out_of_range"
#define SCHEMA_E_LENGTH "bad_length"
#define SCHEMA_E_STRING "invalid_string"

struct schema_error {
	const char *se_code;
	char se_field[64];
	char se_message[192];
};

int schema_validate(struct json_object *obj, const struct schema_field *fields,
    size_t nfields, struct schema_error *err);

/* Accessors for already-validated objects (NULL / default when absent). */
const char *schema_string(struct json_object *obj, const char *name);
int64_t schema_int(struct json_object *obj, const char *name, int64_t dflt);
int schema_bool(struct json_object *obj, const char *name, int dflt);
struct json_object *schema_child(struct json_object *obj, const char *name);

#endif
