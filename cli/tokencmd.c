/*
 * tokencmd.c: `gensee run network commit-token --socket PATH --operation OP
 * --method M --url URL (--body-file F | --body-sha256 HEX)
 * [--ttl-seconds N] [--json]`: have boundaryd sign a one-use commit token
 * for one exact effectful request through the HTTP mediator
 * (network.commit_token, root only; docs/http.md).
 *
 * --socket is the operation's supervisor.sock or boundary.sock; --operation
 * is always sent and boundaryd checks it against the socket's operation,
 * so a token is never issued for another operation than the one named.
 * With --body-file the body's SHA-256 is computed here from the exact
 * bytes that will be sent ("-" reads stdin); the body never goes to
 * boundaryd. The token is a bearer credential: it goes to stdout only
 * (alone on its line, so `$(gensee run network commit-token ...)` works),
 * never to stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>
#include <sodium.h>

#include "cli.h"
#include "client.h"
#include "schema.h"
#include "util.h"

#define TOKENCMD_MAX_TTL 3600	/* network.commit_token's ceiling */

static const char tokencmd_usage_text[] =
    "usage: gensee run network commit-token --socket PATH --operation OP --method METHOD\n"
    "           --url URL (--body-file FILE | --body-sha256 HEX) [--ttl-seconds N] [--json]\n";

/* SHA-256 of a file's bytes (or stdin's for "-"), as 64 lowercase hex digits. */
static int
tokencmd_digest_file(const char *path, char hex[65])
{
	crypto_hash_sha256_state st;
	unsigned char buf[65536], dg[crypto_hash_sha256_BYTES];
	struct stat sb;
	ssize_t n;
	int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0) {
		fprintf(stderr, "gensee: %s: %s\n", path, strerror(errno));
		return -1;
	}
	/* A directory or a device is no request body. */
	if (fd != 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
		fprintf(stderr, "gensee: %s: not a regular file\n", path);
		close(fd);
		return -1;
	}
	if (crypto_hash_sha256_init(&st) != 0)
		goto fail;
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "gensee: %s: %s\n", path, strerror(errno));
			goto fail;
		}
		if (crypto_hash_sha256_update(&st, buf, (unsigned long long)n) != 0)
			goto fail;
	}
	if (crypto_hash_sha256_final(&st, dg) != 0)
		goto fail;
	sodium_bin2hex(hex, 65, dg, sizeof(dg));
	if (fd != 0)
		close(fd);
	return 0;
fail:
	if (fd != 0)
		close(fd);
	return -1;
}

/* 64 hex digits, taken in lowercase (sha256sum's form); anything else is a usage error. */
static int
tokencmd_hex(const char *in, char hex[65])
{
	if (strlen(in) != 64)
		return -1;
	for (size_t i = 0; i < 64; i++) {
		char ch = in[i];
		if (ch >= 'A' && ch <= 'F')
			ch = (char)(ch - 'A' + 'a');
		if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
			return -1;
		hex[i] = ch;
	}
	hex[64] = '\0';
	return 0;
}

int
cmd_run_commit_token(int argc, char **argv)
{
	static struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "operation", required_argument, NULL, 'o' },
		{ "method", required_argument, NULL, 'm' },
		{ "url", required_argument, NULL, 'u' },
		{ "body-file", required_argument, NULL, 'f' },
		{ "body-sha256", required_argument, NULL, 'd' },
		{ "ttl-seconds", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = NULL, *op = NULL, *method = NULL, *url = NULL, *file = NULL;
	const char *digest = NULL;
	char hex[65];
	int64_t ttl = 0;
	int json = 0, ch;
	struct json_object *params, *res;
	struct client_error err;

	if (cli_help_asked(argc, argv))
		return cli_usage(1, tokencmd_usage_text);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			sock = optarg;
			break;
		case 'o':
			op = optarg;
			break;
		case 'm':
			method = optarg;
			break;
		case 'u':
			url = optarg;
			break;
		case 'f':
			file = optarg;
			break;
		case 'd':
			digest = optarg;
			break;
		case 'T':
			if (util_parse_i64(optarg, 1, TOKENCMD_MAX_TTL, &ttl) != 0)
				return cli_usage(0, tokencmd_usage_text);
			break;
		case 'j':
			json = 1;
			break;
		default:
			return cli_usage(0, tokencmd_usage_text);
		}
	}
	/* Exactly one way to name the body: a token binds one digest, never a guess. */
	if (optind != argc || sock == NULL || op == NULL || method == NULL || url == NULL ||
	    (file == NULL) == (digest == NULL) || (digest != NULL && tokencmd_hex(digest, hex) != 0))
		return cli_usage(0, tokencmd_usage_text);
	if (file != NULL && tokencmd_digest_file(file, hex) != 0)
		return 1;
	params = json_object_new_object();
	json_object_object_add(params, "operation_id", json_object_new_string(op));
	json_object_object_add(params, "method", json_object_new_string(method));
	json_object_object_add(params, "url", json_object_new_string(url));
	json_object_object_add(params, "body_sha256", json_object_new_string(hex));
	if (ttl != 0)
		json_object_object_add(params, "ttl_seconds", json_object_new_int64(ttl));
	if (client_call(sock, "network.commit_token", params, &res, &err) != 0) {
		fprintf(stderr, "gensee: network.commit_token: %s: %s\n", err.ce_code,
		    err.ce_message);
		client_error_clear(&err);
		return 1;
	}
	if (schema_string(res, "token") == NULL) {
		fprintf(stderr, "gensee: network.commit_token: no token in the answer\n");
		json_object_put(res);
		return 1;
	}
	if (json)
		cli_print_json(res);
	else
		printf("%s\n", schema_string(res, "token"));
	json_object_put(res);
	return 0;
}
