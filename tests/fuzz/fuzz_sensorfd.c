/*
 * fuzz_sensorfd.c: both messages of sensorfd.sock (lib/sensorfd.c) on
 * arbitrary bytes. A parsed request has its descriptor bound in range; a
 * parsed reply is either an error with a code or a result, and an adopt
 * result always comes with its array of cgroup paths.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sensorfd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sensorfd_reply r;
	char *cause = NULL;
	int64_t nofile = 0;

	if (sensorfd_parse_request((const char *)data, size, &nofile, &cause) == 0) {
		if (nofile < 1 || nofile > SENSORFD_NOFILE_MAX)
			abort();
	} else if (cause == NULL) {
		abort();
	}
	free(cause);
	cause = NULL;
	if (sensorfd_parse_reply((const char *)data, size, &r, &cause) == 0) {
		if (r.sr_error[0] == '\0' && r.sr_adopt &&
		    (r.sr_cgroups == NULL || !json_object_is_type(r.sr_cgroups, json_type_array)))
			abort();
		if (r.sr_error[0] != '\0' && r.sr_cgroups != NULL)
			abort();
		json_object_put(r.sr_cgroups);
	} else if (cause == NULL || r.sr_cgroups != NULL) {
		abort();
	}
	free(cause);
	return 0;
}
