/*
 * fuzz_policy.c: a user's policy file on arbitrary input: the schema, the
 * host policy's narrowing against a fixed floor, and every plan built from
 * what validated (seccomp, Landlock, the mount view).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <seccomp.h> /* lib/seccomp.h, which includes libseccomp's */

#include "cli/policy.h"
#include "frame.h"
#include "landlock.h"
#include "mountview.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The floor: seccomp on, a network ceiling, a hidden path. */
static const char fuzz_host[] = "{\"linux\": {\"seccomp\": {\"enabled\": true}, "
    "\"network\": {\"allow\": [\"192.0.2.0/24,tcp\"], \"deny\": [\"192.0.2.66\"]}, "
    "\"mount_view\": {\"mode\": \"best_effort\", \"hide\": [\"/srv/secrets\"]}}}";

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_object *doc = NULL, *host = NULL, *v;
	char *cause = NULL;

	if (frame_parse_payload(data, size, &doc) != FRAME_OK)
		return 0;
	if (policy_validate(doc, NULL, &cause) != 0) {
		if (cause == NULL)
			abort(); /* every refusal says why */
		free(cause);
		json_object_put(doc);
		return 0;
	}
	if (frame_parse_payload((const uint8_t *)fuzz_host, strlen(fuzz_host), &host) != FRAME_OK)
		abort();
	if (hostpolicy_narrow(doc, host, &cause) == 0) {
		/* The floor holds whatever the user said. */
		v = policy_get_effective(doc, "linux.seccomp.enabled");
		if (!json_object_get_boolean(v))
			abort();
		json_object_put(v);
		if (policy_validate(doc, NULL, &cause) != 0)
			abort(); /* narrowing keeps a valid document valid */
		struct seccomp_profile sp;
		if (seccomp_profile_build(doc, SECCOMP_PROFILE_FROM_POLICY, &sp, &cause) == 0)
			seccomp_profile_free(&sp);
		struct landlock_plan lp;
		if (landlock_plan_build(doc, NULL, 7, NULL, &lp, &cause) == 0)
			landlock_plan_free(&lp);
		struct mountview_opts mo = { .mo_home = "/nonexistent", .mo_uid = 1000,
			.mo_gid = 1000 };
		struct mountview_plan mv;
		if (mountview_plan_build(doc, &mo, &mv, &cause) == 0)
			mountview_plan_free(&mv);
	}
	free(cause);
	json_object_put(host);
	json_object_put(doc);
	return 0;
}
