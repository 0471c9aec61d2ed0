/*
 * explain.h: what a sandboxed run was refused by name, and what allows it.
 */
#ifndef GENSEE_CLI_EXPLAIN_H
#define GENSEE_CLI_EXPLAIN_H

struct json_object;

/*
 * The refusals of operation opid (its evidence: DNS, egress, fanotify and
 * Landlock), once each: [{kind, what, reason, allow_with, policy_key}], or
 * NULL when boundaryd did not answer. *not_reported: the sensors that did
 * not cover the run, as sentences (NULL with the NULL return).
 */
struct json_object *explain_refusals(const char *opid, struct json_object **not_reported);
/* The summary lines on stderr; the sensors' gaps when the run failed or met refusals. */
void explain_print(const char *opid, struct json_object *refused,
    struct json_object *not_reported, int failed);

#endif
