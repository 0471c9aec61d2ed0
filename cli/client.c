/*
 * client.c: blocking request/reply over a Unix socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "client.h"
#include "frame.h"
#include "proto.h"
#include "util.h"

const char *
client_runtime_dir(void)
{
	const char *d = getenv("GENSEE_RUNTIME_DIR");
	return d != NULL && *d != '\0' ? d : CLIENT_DEFAULT_RUNTIME_DIR;
}

/*
 * Connect to an absolute socket path. A path longer than sun_path allows is
 * reached through an O_PATH fd of its directory (/proc/self/fd/N/name).
 */
int
client_connect_path(const char *path, char **cause)
{
	struct sockaddr_un sun;
	char dir[PATH_MAX];
	int fd, dfd = -1;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) < sizeof(sun.sun_path)) {
		util_strlcpy(sun.sun_path, path, sizeof(sun.sun_path));
	} else {
		const char *slash = strrchr(path, '/');
		if (slash == NULL || (size_t)(slash - path) >= sizeof(dir)) {
			util_cause(cause, "%s: socket path too long", path);
			return -1;
		}
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
		dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || (size_t)snprintf(sun.sun_path, sizeof(sun.sun_path),
		    "/proc/self/fd/%d/%s", dfd, slash + 1) >= sizeof(sun.sun_path)) {
			util_cause(cause, "%s: %s", path, dfd < 0 ? strerror(errno) : "name too long");
			if (dfd >= 0)
				close(dfd);
			return -1;
		}
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		util_cause(cause, "socket: %s", strerror(errno));
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		util_cause(cause, "%s: %s", path, strerror(errno));
		close(fd);
		fd = -1;
	}
	if (dfd >= 0)
		close(dfd);
	return fd;
}

int
client_connect(const char *name, char **cause)
{
	char path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", client_runtime_dir(), name) >=
	    sizeof(path)) {
		util_cause(cause, "socket path too long");
		return -1;
	}
	return client_connect_path(path, cause);
}

static void
client_fail(struct client_error *err, const char *code, char *msg)
{
	err->ce_code = strdup(code);
	err->ce_message = msg != NULL ? msg : strdup(code);
}

int
client_send(const char *name, const char *method, struct json_object *params, int64_t *id,
    struct client_error *err)
{
	return client_send_on(-1, name, method, params, id, err);
}

int
client_send_on(int fd, const char *name, const char *method, struct json_object *params,
    int64_t *id, struct client_error *err)
{
	static int64_t next_id = 1;
	struct json_object *req;
	char *cause = NULL;

	memset(err, 0, sizeof(*err));
	if (fd < 0)
		fd = name[0] == '/' ? client_connect_path(name, &cause) :
		    client_connect(name, &cause);
	if (fd < 0) {
		json_object_put(params);
		client_fail(err, "unavailable", cause);
		return -1;
	}
	*id = next_id++;
	req = proto_request_new(*id, method, params);
	if (frame_write_fd(fd, req, &cause) != 0) {
		json_object_put(req);
		close(fd);
		client_fail(err, "unavailable", cause);
		return -1;
	}
	json_object_put(req);
	return fd;
}

static int client_timeout_ms = CLIENT_TIMEOUT_MS;

void
client_set_timeout_ms(int ms)
{
	client_timeout_ms = ms;
}

int
client_recv(int fd, int64_t id, struct json_object **result, struct client_error *err)
{
	int rv = client_recv_keep(fd, id, result, err);
	close(fd);
	return rv;
}

int
client_recv_keep(int fd, int64_t id, struct json_object **result, struct client_error *err)
{
	struct json_object *reply = NULL, *v;
	char *cause = NULL;

	memset(err, 0, sizeof(*err));
	*result = NULL;
	if (frame_read_fd(fd, FRAME_MAX_DEFAULT, client_timeout_ms, &reply, &cause) != 0) {
		client_fail(err, "unavailable", cause);
		return -1;
	}
	if (json_object_object_get_ex(reply, "error", &v) && v != NULL) {
		const char *code = json_object_get_string(json_object_object_get(v, "code"));
		const char *msg = json_object_get_string(json_object_object_get(v, "message"));
		err->ce_code = strdup(code ? code : "protocol");
		err->ce_message = strdup(msg ? msg : "error without message");
		json_object_put(reply);
		return -1;
	}
	if (!json_object_object_get_ex(reply, "result", &v) || v == NULL ||
	    !json_object_is_type(v, json_type_object) ||
	    json_object_get_int64(json_object_object_get(reply, "id")) != id) {
		json_object_put(reply);
		client_fail(err, "protocol", strdup("malformed reply"));
		return -1;
	}
	*result = json_object_get(v);
	json_object_put(reply);
	return 0;
}

int
client_call(const char *name, const char *method, struct json_object *params,
    struct json_object **result, struct client_error *err)
{
	int64_t id;
	int fd = client_send(name, method, params, &id, err);

	*result = NULL;
	if (fd < 0)
		return -1;
	return client_recv(fd, id, result, err);
}

void
client_error_clear(struct client_error *err)
{
	free(err->ce_code);
	free(err->ce_message);
	err->ce_code = err->ce_message = NULL;
}
