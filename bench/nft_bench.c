/*
 * nft_bench.c: nftables generation install time and per-connect cost.
 *
 * usage: nft_bench   (root; everything happens in a private network
 * namespace and a scratch cgroup, both removed at the end)
 *
 * 1. Install time of a generation with 10, 1,000 and 10,000 grants through
 *    lib/nft.c (one netlink batch) against `nft -f` of the same ruleset
 *    (nft_policy_text), median of 7 each, in the same run.
 * 2. TCP connect latency to 192.0.2.1 from a process in the cgroup, with no
 *    table, with 10 grants and with 10,000 grants (the allowed destination
 *    among them), median of 2,000 connects each.
 * 3. Time to a refused TCP connect (192.0.2.1:8081, never granted) through
 *    our table with 10,000 grants (deny sets, allow miss, trace bit,
 *    per-destination recording, named counter, reset) against a one-rule
 *    `counter reject with tcp reset` table loaded by `nft -f`: the price of
 *    the evidence on the reject path.
 * Prints one JSON object.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "nft.h"
#include "util.h"

#define RUNS 7
#define CONNECTS 2000

static double
now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double
median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* n distinct /32 grants in 10.0.0.0/8 plus 192.0.2.1 tcp 8080. */
static struct nft_elem *
make_grants(size_t n)
{
	struct nft_elem *v = calloc(n, sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		uint32_t a = htonl(0x0a000000u + (uint32_t)i + 1);
		v[i].ne_family = AF_INET;
		memcpy(v[i].ne_addr_lo, &a, 4);
		memcpy(v[i].ne_addr_hi, &a, 4);
		v[i].ne_proto = IPPROTO_TCP;
		v[i].ne_port_lo = v[i].ne_port_hi = 443;
	}
	uint32_t t = htonl(0xc0000201u); /* 192.0.2.1 */
	memcpy(v[n - 1].ne_addr_lo, &t, 4);
	memcpy(v[n - 1].ne_addr_hi, &t, 4);
	v[n - 1].ne_port_lo = v[n - 1].ne_port_hi = 8080;
	return v;
}

static int
run_nft_file(const char *path)
{
	pid_t pid = fork();
	int st;
	if (pid == 0) {
		execl("/usr/sbin/nft", "nft", "-f", path, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* One connect + close to 192.0.2.1:port, in microseconds (-1: refused). */
static double
one_connect(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	double t0, t1;

	inet_pton(AF_INET, "192.0.2.1", &sin.sin_addr);
	t0 = now_us();
	int r = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	t1 = now_us();
	close(fd);
	return r == 0 ? t1 - t0 : -1;
}

/* One connect to 192.0.2.1:port that must be refused at once, in microseconds (-1: not). */
static double
one_refused(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	double t0, t1;

	inet_pton(AF_INET, "192.0.2.1", &sin.sin_addr);
	t0 = now_us();
	int r = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	int e = errno;
	t1 = now_us();
	close(fd);
	return r != 0 && e == ECONNREFUSED ? t1 - t0 : -1;
}

static double
measure_median(double (*one)(int), int port)
{
	static double v[CONNECTS];
	size_t n = 0;
	for (int i = 0; i < CONNECTS; i++) {
		double d = one(port);
		if (d >= 0)
			v[n++] = d;
	}
	return n == CONNECTS ? median(v, n) : -1;
}

static double
connect_median(int port)
{
	return measure_median(one_connect, port);
}

int
main(void)
{
	static const size_t sizes[] = { 10, 1000, 10000 };
	struct nft_ctx *ctx;
	struct cgroup cg;
	char mount[PATH_MAX], rel[64], *cause = NULL;
	int lfd, rc = 1;
	pid_t acceptor = -1;

	if (geteuid() != 0) {
		fprintf(stderr, "nft_bench: needs root\n");
		return 2;
	}
	if (unshare(CLONE_NEWNET) != 0 || system("ip link set lo up && "
	    "ip addr add 192.0.2.1/24 dev lo") != 0) {
		perror("nft_bench: private network namespace");
		return 1;
	}
	if (cgroup_find_mount(mount, sizeof(mount), &cause) != 0 ||
	    cgroup_ensure_base(mount, CGROUP_BASE, &cause) != 0) {
		fprintf(stderr, "nft_bench: %s\n", cause);
		return 1;
	}
	snprintf(rel, sizeof(rel), "%s/bench_%d", CGROUP_BASE, (int)getpid());
	if (cgroup_create(mount, rel, &cg, &cause) != 0 || nft_open(&ctx, &cause) != 0) {
		fprintf(stderr, "nft_bench: %s\n", cause);
		return 1;
	}
	/* nft(8) names the cgroup by its path below /sys/fs/cgroup. */
	const char *below = strncmp(mount, "/sys/fs/cgroup", 14) == 0 ? mount + 14 : "";
	while (*below == '/')
		below++;
	char cgpath[PATH_MAX + 64];
	snprintf(cgpath, sizeof(cgpath), "%s%s%s", below, *below ? "/" : "", rel);

	printf("{\n  \"install\": [\n");
	for (size_t s = 0; s < nitems(sizes); s++) {
		size_t n = sizes[s];
		struct nft_elem *g = make_grants(n);
		double ours[RUNS], theirs[RUNS];
		struct nft_policy p = { .np_table = "gensee_bench", .np_subject = NFT_SUBJECT_CGROUP,
			.np_cgroup_id = cg.cg_id, .np_cgroup_level = 2, .np_mode = NFT_MODE_ALLOWLIST,
			.np_allow = g, .np_nallow = n, .np_generation = 1, .np_owner = "op_bench" };
		struct nft_policy q = p;
		q.np_table = "gensee_benchnft";
		char *text = nft_policy_text(&q, cgpath);
		char path[] = "/tmp/gensee-bench-XXXXXX";
		int fd = mkstemp(path);
		if (text == NULL || fd < 0 || util_write_all(fd, text, strlen(text)) != 0) {
			fprintf(stderr, "nft_bench: ruleset text\n");
			goto out;
		}
		close(fd);
		for (int r = 0; r < RUNS; r++) {
			double t0 = now_us();
			if (nft_generation_commit(ctx, &p, &cause) != 0) {
				fprintf(stderr, "nft_bench: commit: %s\n", cause);
				goto out;
			}
			ours[r] = (now_us() - t0) / 1000;
			t0 = now_us();
			if (run_nft_file(path) != 0) {
				fprintf(stderr, "nft_bench: nft -f failed\n");
				goto out;
			}
			theirs[r] = (now_us() - t0) / 1000;
		}
		unlink(path);
		free(text);
		double mo = median(ours, RUNS), mt = median(theirs, RUNS);
		printf("    {\"grants\": %zu, \"gensee_ms\": %.2f, \"nft_f_ms\": %.2f, "
		    "\"nft_f_over_gensee\": %.2f}%s\n", n, mo, mt, mt / mo,
		    s + 1 < nitems(sizes) ? "," : "");
		nft_table_delete(ctx, "gensee_benchnft", NULL);
		free(g);
	}
	printf("  ],\n");

	/* Connect latency: listener in this namespace, client in the cgroup. */
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(8080) };
	inet_pton(AF_INET, "192.0.2.1", &sin.sin_addr);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) != 0 || listen(lfd, 4096) != 0) {
		perror("nft_bench: listen");
		goto out;
	}
	acceptor = fork();
	if (acceptor == 0) {
		for (;;) {
			int c = accept(lfd, NULL, NULL);
			if (c >= 0)
				close(c);
		}
	}
	if (cgroup_attach(&cg, getpid(), &cause) != 0) {
		fprintf(stderr, "nft_bench: %s\n", cause);
		goto out;
	}
	const size_t lat_sizes[] = { 0, 10, 10000 };
	printf("  \"connect_median_us\": {");
	for (size_t s = 0; s < nitems(lat_sizes); s++) {
		size_t n = lat_sizes[s];
		nft_table_delete(ctx, "gensee_bench", NULL);
		if (n > 0) {
			struct nft_elem *g = make_grants(n);
			struct nft_policy p = { .np_table = "gensee_bench",
				.np_subject = NFT_SUBJECT_CGROUP, .np_cgroup_id = cg.cg_id,
				.np_cgroup_level = 2, .np_mode = NFT_MODE_ALLOWLIST, .np_allow = g,
				.np_nallow = n, .np_generation = 1, .np_owner = "op_bench" };
			if (nft_generation_commit(ctx, &p, &cause) != 0) {
				fprintf(stderr, "nft_bench: %s\n", cause);
				goto out;
			}
			free(g);
		}
		connect_median(8080); /* warm up */
		double m = connect_median(8080);
		printf("%s\"%s\": %.1f", s ? ", " : "", n == 0 ? "no_table" : n == 10 ? "grants_10" :
		    "grants_10000", m);
	}
	printf("},\n");

	/* Refused connects: our 10,000-grant table, then a one-rule peer. */
	measure_median(one_refused, 8081); /* warm up; the tuple is recorded once */
	double ours_rej = measure_median(one_refused, 8081);
	nft_table_delete(ctx, "gensee_bench", NULL);
	char peer[PATH_MAX + 512], ppath[] = "/tmp/gensee-bench-XXXXXX";
	snprintf(peer, sizeof(peer), "table inet gensee_benchpeer {\n\tchain output {\n"
	    "\t\ttype filter hook output priority 0; policy accept;\n"
	    "\t\tsocket cgroupv2 level 2 \"%s\" tcp dport 8081 counter reject with tcp reset\n"
	    "\t}\n}\n", cgpath);
	int pfd = mkstemp(ppath);
	if (pfd < 0 || util_write_all(pfd, peer, strlen(peer)) != 0 || run_nft_file(ppath) != 0) {
		fprintf(stderr, "nft_bench: peer reject table\n");
		if (pfd >= 0)
			unlink(ppath);
		goto out;
	}
	close(pfd);
	unlink(ppath);
	measure_median(one_refused, 8081);
	double peer_rej = measure_median(one_refused, 8081);
	nft_table_delete(ctx, "gensee_benchpeer", NULL);
	printf("  \"refused_connect_median_us\": {\"gensee_10000_grants\": %.1f, "
	    "\"nft_f_one_reject_rule\": %.1f, \"gensee_over_peer\": %.2f}\n}\n", ours_rej, peer_rej,
	    peer_rej > 0 ? ours_rej / peer_rej : -1);
	rc = 0;
out:
	if (acceptor > 0) {
		kill(acceptor, SIGKILL);
		waitpid(acceptor, NULL, 0);
	}
	nft_table_delete(ctx, "gensee_bench", NULL);
	nft_table_delete(ctx, "gensee_benchpeer", NULL);
	nft_close(ctx);
	/* Back to the root cgroup, so the scratch one can be removed. */
	char procs[PATH_MAX + 16];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", mount);
	FILE *f = fopen(procs, "w");
	if (f != NULL) {
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
	cgroup_remove(&cg, NULL);
	return rc;
}
