/*
 * explain.h: what a sandboxed run was refused by name, and what allows it.
 */
#ifndef GENSEE_CLI_EXPLAIN_H
#define GENSEE_CLI_EXPLAIN_H

struct json_object;

/*
 * The DNS and egress refusals of operation opid (its evidence), once each:
 * [{kind, what, reason, allow_with, policy_key}], or NULL when boundaryd
 * did not answer.
 */
struct json_object *explain_refusals(const char *opid);
/* The summary lines on stderr. */
void explain_print(const char *opid, struct json_object *refused);

#endif
