/*
 * fuzz_schema.c: request validation on arbitrary payloads: the envelope,
 * every method's params schema and typed parser, and the record validator.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "frame.h"
#include "oprecord.h"
#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_object *msg = NULL;
	struct proto_request req;
	struct schema_error err;
	const char *code = NULL;
	char *cause = NULL;

	if (frame_parse_payload(data, size, &msg) != FRAME_OK)
		return 0;
	memset(&err, 0, sizeof(err));
	if (proto_parse_request(msg, &req, &code, &err) == 0) {
		if (req.pr_info == NULL || req.pr_params == NULL)
			abort();
		if (req.pr_info->pmi_method == PM_OPERATION_CREATE) {
			struct proto_operation_create c;
			proto_parse_operation_create(req.pr_params, &c, &err);
			if (c.oc_pid < 1 || c.oc_timeout_seconds < 0 ||
			    c.oc_timeout_seconds > PROTO_TIMEOUT_MAX)
				abort();
		} else if (req.pr_info->pmi_method == PM_OPERATION_END) {
			struct proto_operation_end e;
			proto_parse_operation_end(req.pr_params, &e, &err);
		}
		for (int s = PS_BOUNDARY; s <= PS_CLIENT; s <<= 1)
			(void)proto_authorized(req.pr_info, (enum proto_socket)s, 1000);
	} else if (code == NULL || err.se_code == NULL) {
		abort(); /* every refusal carries a stable code */
	}
	/* The same object as a record: validation must never crash. */
	if (oprecord_validate(msg, NULL, &cause) != 0 && cause == NULL)
		abort();
	free(cause);
	json_object_put(msg);
	return 0;
}
