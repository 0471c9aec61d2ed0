/*
 * sensorfd.h: the messages of sensorfd.sock, where gensee-sensord and
 * gensee-boundaryd trade the fanotify permission group (see
 * daemons/boundaryd/fanhold.c). One request and one reply, each a JSON
 * object in one SOCK_SEQPACKET message with at most one descriptor.
 */
#ifndef GENSEE_SENSORFD_H
#define GENSEE_SENSORFD_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#define SENSORFD_SOCK "sensorfd.sock"
#define SENSORFD_METHOD "sensor.fanotify_group"
#define SENSORFD_MSG_MAX 65536
#define SENSORFD_NOFILE_DEFAULT 1024
#define SENSORFD_NOFILE_MAX (1 << 20)
/* More cgroups than an instance runs operations are refused. */
#define SENSORFD_CGROUPS_MAX 4096

/* {"method":"sensor.fanotify_group","params":{"nofile":N}}, N its descriptor limit. */
char *sensorfd_request(int64_t nofile);
/*
 * Parse a request: 0 with *nofile (clamped to 1..SENSORFD_NOFILE_MAX,
 * SENSORFD_NOFILE_DEFAULT when absent), or -1 with *cause (invalid_params).
 */
int sensorfd_parse_request(const char *buf, size_t len, int64_t *nofile, char **cause);

/*
 * A parsed reply. adopt: the sensord takes the attached group in place of
 * its own; cgroups (adopt only) are the running operations' cgroups, an
 * array of strings the caller owns (json_object_put), never NULL then.
 * Or error set: the code of a refusal (conflict, invalid_params,
 * internal) and its message.
 */
struct sensorfd_reply {
	int sr_adopt;
	struct json_object *sr_cgroups;
	char sr_error[32];
	char sr_message[256];
};

/* Parse a reply: 0 (result or error filled), or -1 with *cause when malformed. */
int sensorfd_parse_reply(const char *buf, size_t len, struct sensorfd_reply *r, char **cause);

#endif
