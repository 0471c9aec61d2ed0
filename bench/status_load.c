/*
 * status_load.c: system.status requests per second over client.sock.
 *
 * usage: status_load SOCKET CLIENTS SECONDS MAX_REQUESTS_PER_CLIENT
 * Forks CLIENTS processes; each keeps one connection and sends requests
 * back to back until SECONDS pass or it has sent MAX requests (the load is
 * bounded both ways). Prints one JSON line with the totals.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "frame.h"
#include "proto.h"
#include "util.h"

static int
bench_connect(const char *path)
{
	struct sockaddr_un sun;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	util_strlcpy(sun.sun_path, path, sizeof(sun.sun_path));
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		perror("connect");
		exit(1);
	}
	return fd;
}

/* One client: returns the number of answered requests through a pipe. */
static void __attribute__((noreturn))
bench_client(const char *path, int64_t until_ms, long max, int out)
{
	int fd = bench_connect(path);
	long done = 0, errors = 0;
	char *cause = NULL;

	while (done < max && util_monotonic_ms() < until_ms) {
		struct json_object *req = proto_request_new(done, "system.status", NULL), *rep;
		if (frame_write_fd(fd, req, &cause) != 0 ||
		    frame_read_fd(fd, FRAME_MAX_DEFAULT, 10000, &rep, &cause) != 0) {
			errors++;
			json_object_put(req);
			break;
		}
		if (!json_object_object_get_ex(rep, "result", NULL))
			errors++;
		json_object_put(req);
		json_object_put(rep);
		done++;
	}
	long v[2] = { done, errors };
	if (write(out, v, sizeof(v)) != (ssize_t)sizeof(v))
		_exit(1);
	_exit(0);
}

int
main(int argc, char **argv)
{
	int p[2];
	long total = 0, errors = 0;

	if (argc != 5) {
		fprintf(stderr, "usage: status_load SOCKET CLIENTS SECONDS MAX_PER_CLIENT\n");
		return 2;
	}
	int clients = atoi(argv[2]);
	double seconds = atof(argv[3]);
	long max = atol(argv[4]);
	if (clients < 1 || clients > 1024 || seconds <= 0 || seconds > 120 || max < 1) {
		fprintf(stderr, "status_load: bad arguments\n");
		return 2;
	}
	if (pipe(p) != 0)
		return 1;
	int64_t t0 = util_monotonic_ms();
	int64_t until = t0 + (int64_t)(seconds * 1000);
	for (int i = 0; i < clients; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0)
			bench_client(argv[1], until, max, p[1]);
	}
	close(p[1]);
	for (int i = 0; i < clients; i++) {
		long v[2];
		if (read(p[0], v, sizeof(v)) == (ssize_t)sizeof(v)) {
			total += v[0];
			errors += v[1];
		}
	}
	while (wait(NULL) > 0)
		;
	double elapsed = (double)(util_monotonic_ms() - t0) / 1000.0;
	printf("{\"clients\": %d, \"requests\": %ld, \"errors\": %ld, \"seconds\": %.3f, "
	    "\"requests_per_second\": %.0f}\n", clients, total, errors, elapsed,
	    (double)total / elapsed);
	return errors ? 1 : 0;
}
