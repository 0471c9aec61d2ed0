/*
 * client.h: the CLI's side of the wire protocol (blocking, one request per
 * connection).
 */
#ifndef GENSEE_CLIENT_H
#define GENSEE_CLIENT_H

#include <stdint.h>

struct json_object;

#define CLIENT_TIMEOUT_MS 10000
#define CLIENT_DEFAULT_RUNTIME_DIR "/run/gensee"

struct client_error {
	char *ce_code;    /* stable code from the daemon, or "unavailable" / "protocol" */
	char *ce_message;
};

/* $GENSEE_RUNTIME_DIR or /run/gensee. */
const char *client_runtime_dir(void);
/* Connect to RUNTIME_DIR/name; -1 with *cause on failure. */
int client_connect(const char *name, char **cause);
/* Connect to an absolute socket path (however long). */
int client_connect_path(const char *path, char **cause);
/*
 * Send one request on socket name (a name in the runtime dir, or an
 * absolute path) and wait for the reply. Returns 0 and
 * *result (caller puts), or -1 with err filled (caller frees with
 * client_error_clear).
 */
int client_call(const char *name, const char *method, struct json_object *params,
    struct json_object **result, struct client_error *err);
/*
 * client_call in two halves, for a caller with something to do meanwhile:
 * send returns the connection (or -1 with err), recv reads its reply and
 * closes it.
 */
int client_send(const char *name, const char *method, struct json_object *params, int64_t *id,
    struct client_error *err);
int client_recv(int fd, int64_t id, struct json_object **result, struct client_error *err);
/*
 * client_recv without closing fd: the connection serves the next request
 * (the caller closes it; after an "unavailable" error it is of no use).
 */
int client_recv_keep(int fd, int64_t id, struct json_object **result, struct client_error *err);
/*
 * client_send on fd, a connection made earlier with client_connect (its
 * peer credentials are the caller's as well); fd -1 connects to name now.
 */
int client_send_on(int fd, const char *name, const char *method, struct json_object *params,
    int64_t *id, struct client_error *err);
void client_error_clear(struct client_error *err);
/* How long a reply may take (default CLIENT_TIMEOUT_MS). */
void client_set_timeout_ms(int ms);

#endif
