/*
 * fuzz_ocsf.c: evidence lines (what sensord and supervised processes
 * reported, read back from files) mapped to OCSF events: every kind, and
 * the time parser on whatever "time" holds. The mapping must never crash
 * and must always produce the base attributes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "frame.h"
#include "ocsf.h"
#include "schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *kinds[] = { "effect", "fault", "lineage", "host", "file", "sensor",
		"violation", "counters" };
	struct json_object *line = NULL;
	char buf[64];

	/* The raw bytes as a time string too. */
	if (size < sizeof(buf)) {
		memcpy(buf, data, size);
		buf[size] = '\0';
		(void)ocsf_time_ms(buf);
	}
	if (frame_parse_payload(data, size, &line) != FRAME_OK)
		return 0;
	(void)ocsf_time_ms(schema_string(line, "time"));
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		struct json_object *o = ocsf_map(kinds[i], line);
		if (o == NULL)
			continue;
		int64_t cls = schema_int(o, "class_uid", 0), act = schema_int(o, "activity_id", -1);
		if (schema_int(o, "type_uid", 0) != cls * 100 + act || schema_int(o, "time", -1) < 0 ||
		    schema_child(o, "metadata") == NULL || schema_child(o, "status_id") == NULL)
			abort();
		size_t len;
		if (json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len) == NULL)
			abort();
		json_object_put(o);
	}
	json_object_put(line);
	return 0;
}
