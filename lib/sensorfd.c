/*
 * sensorfd.c: the request and reply of sensorfd.sock.
 *
 * Only root reaches the socket, but the parser does not lean on that: a
 * request or reply that is not exactly the expected shape is refused, so
 * a confused peer cannot make either side hold or adopt something else.
 */
#include <stdlib.h>
#include <string.h>

#include "schema.h"
#include "sensorfd.h"
#include "util.h"

char *
sensorfd_request(int64_t nofile)
{
	struct json_object *req = json_object_new_object(), *p = json_object_new_object();
	char *s;

	json_object_object_add(p, "nofile", json_object_new_int64(nofile));
	json_object_object_add(req, "method", json_object_new_string(SENSORFD_METHOD));
	json_object_object_add(req, "params", p);
	s = strdup(json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN));
	json_object_put(req);
	return s;
}

/* The whole buffer as one JSON object, or NULL. */
static struct json_object *
sensorfd_parse(const char *buf, size_t len)
{
	struct json_tokener *tok;
	struct json_object *o;

	if (len == 0 || len > SENSORFD_MSG_MAX || memchr(buf, '\0', len) != NULL)
		return NULL;
	if ((tok = json_tokener_new()) == NULL)
		return NULL;
	o = json_tokener_parse_ex(tok, buf, (int)len);
	if (o != NULL && (json_tokener_get_error(tok) != json_tokener_success ||
	    tok->char_offset != (int)len || !json_object_is_type(o, json_type_object))) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

int
sensorfd_parse_request(const char *buf, size_t len, int64_t *nofile, char **cause)
{
	struct json_object *req = sensorfd_parse(buf, len), *params, *v;
	const char *method;

	if (req == NULL) {
		util_cause(cause, "not one JSON object");
		return -1;
	}
	method = schema_string(req, "method");
	params = schema_child(req, "params");
	if (method == NULL || strcmp(method, SENSORFD_METHOD) != 0 || params == NULL ||
	    !json_object_is_type(params, json_type_object)) {
		json_object_put(req);
		util_cause(cause, "expected {\"method\": \"" SENSORFD_METHOD "\", \"params\": {...}}");
		return -1;
	}
	*nofile = SENSORFD_NOFILE_DEFAULT;
	if (json_object_object_get_ex(params, "nofile", &v)) {
		if (!json_object_is_type(v, json_type_int)) {
			json_object_put(req);
			util_cause(cause, "params.nofile is not an integer");
			return -1;
		}
		*nofile = json_object_get_int64(v);
	}
	/* Too small or too large: sweep as far as any sensord's table may reach. */
	if (*nofile < 1 || *nofile > SENSORFD_NOFILE_MAX)
		*nofile = SENSORFD_NOFILE_MAX;
	json_object_put(req);
	return 0;
}

int
sensorfd_parse_reply(const char *buf, size_t len, struct sensorfd_reply *r, char **cause)
{
	struct json_object *rep = sensorfd_parse(buf, len), *res, *err, *cg;

	memset(r, 0, sizeof(*r));
	if (rep == NULL) {
		util_cause(cause, "not one JSON object");
		return -1;
	}
	res = schema_child(rep, "result");
	err = schema_child(rep, "error");
	if ((res == NULL) == (err == NULL)) {
		json_object_put(rep);
		util_cause(cause, "neither result nor error");
		return -1;
	}
	if (err != NULL) {
		const char *code = schema_string(err, "code"), *msg = schema_string(err, "message");
		util_strlcpy(r->sr_error, code != NULL && *code ? code : "internal",
		    sizeof(r->sr_error));
		util_strlcpy(r->sr_message, msg != NULL ? msg : "", sizeof(r->sr_message));
		json_object_put(rep);
		return 0;
	}
	r->sr_adopt = schema_bool(res, "adopt", 0);
	if (r->sr_adopt) {
		size_t n;

		cg = schema_child(res, "cgroups");
		if (cg == NULL || !json_object_is_type(cg, json_type_array) ||
		    (n = json_object_array_length(cg)) > SENSORFD_CGROUPS_MAX) {
			json_object_put(rep);
			util_cause(cause, "adopt without a cgroups array");
			return -1;
		}
		for (size_t i = 0; i < n; i++) {
			struct json_object *c = json_object_array_get_idx(cg, i);
			if (!json_object_is_type(c, json_type_string) ||
			    json_object_get_string_len(c) == 0) {
				json_object_put(rep);
				util_cause(cause, "cgroups[%zu] is not a cgroup path", i);
				return -1;
			}
		}
		r->sr_cgroups = json_object_get(cg);
	}
	json_object_put(rep);
	return 0;
}
