/*
 * open_bench.c: the cost of open()+close() on files in two classes.
 *
 * usage: open_bench DIR COUNT
 * DIR must hold plain/f0..f63 (outside every sensitive path) and
 * secret/f0..f63 (inside one, allowed by an observe rule). Each class is
 * opened COUNT times round-robin after a warm-up pass; prints the median
 * and the 90th percentile in nanoseconds as one JSON object. The loop is
 * bounded by COUNT (at most 1,000,000).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int
cmp(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return x < y ? -1 : x > y;
}

static long
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Open every file of dir/class COUNT times; fill median and p90 (ns). */
static int
bench_class(const char *dir, const char *cls, long count, long *med, long *p90)
{
	char path[64][512];
	long *v = malloc((size_t)count * sizeof(*v));
	int errors = 0;

	if (v == NULL)
		return -1;
	for (int i = 0; i < 64; i++)
		snprintf(path[i], sizeof(path[i]), "%s/%s/f%d", dir, cls, i);
	for (int i = 0; i < 64; i++) { /* warm-up: caches, ignore marks */
		int fd = open(path[i], O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			close(fd);
	}
	for (long n = 0; n < count; n++) {
		long t0 = now_ns();
		int fd = open(path[n % 64], O_RDONLY | O_CLOEXEC);
		long t1 = now_ns();
		if (fd < 0)
			errors++;
		else
			close(fd);
		v[n] = t1 - t0;
	}
	qsort(v, (size_t)count, sizeof(*v), cmp);
	*med = v[count / 2];
	*p90 = v[count * 9 / 10];
	free(v);
	return errors;
}

int
main(int argc, char **argv)
{
	long count, m1, q1, m2, q2;

	if (argc != 3 || (count = atol(argv[2])) < 100 || count > 1000000) {
		fprintf(stderr, "usage: open_bench DIR COUNT (100..1000000)\n");
		return 2;
	}
	int e1 = bench_class(argv[1], "plain", count, &m1, &q1);
	int e2 = bench_class(argv[1], "secret", count, &m2, &q2);
	printf("{\"count\": %ld, \"plain_median_ns\": %ld, \"plain_p90_ns\": %ld, "
	    "\"secret_median_ns\": %ld, \"secret_p90_ns\": %ld, \"errors\": %d}\n", count, m1, q1,
	    m2, q2, e1 + e2);
	return e1 + e2 ? 1 : 0;
}
