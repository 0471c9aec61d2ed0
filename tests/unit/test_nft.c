/*
 * test_nft.c: nftables generations against the real kernel.
 *
 * These tests need root. Every test body runs in a forked child that first
 * unshares a fresh network namespace, so the host's ruleset is never
 * touched and every table dies with the child's namespace. The child
 * reports through its exit status and a pipe; the Check process only
 * asserts on that report. What the kernel holds is read back with nft(8)
 * (fork + exec of /usr/sbin/nft inside the namespace), an independent
 * reader of the same netlink objects.
 */
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cgroup.h"
#include "nft.h"
#include "util.h"

#define NFT_BIN "/usr/sbin/nft"
#define TEST_CHILD_MS 120000	/* one test body */
#define TEST_NFT_MS 30000	/* one nft(8) run */
#define TEST_OUT_MAX (32 * 1024 * 1024)
#define TEST_ERR_MAX 8192
#define TEST_MANY 10000

/* The child's failure report, written to the pipe at exit. */
static char test_err[TEST_ERR_MAX];

/* Record a failure in the child (first one wins). */
static void __attribute__((format(printf, 2, 3)))
test_fail(int line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (test_err[0] != '\0')
		return;
	n = snprintf(test_err, sizeof(test_err), "line %d: ", line);
	if (n < 0 || (size_t)n >= sizeof(test_err))
		return;
	va_start(ap, fmt);
	vsnprintf(test_err + n, sizeof(test_err) - (size_t)n, fmt, ap);
	va_end(ap);
}

/* In a child body: fail the test and return -1 unless cond holds. */
#define T_CHECK(cond, ...) do {						\
	if (!(cond)) {							\
		test_fail(__LINE__, __VA_ARGS__);			\
		return -1;						\
	}								\
} while (0)

/* Same, with the cause of a library call appended. */
#define T_OK(call, cause) do {						\
	if ((call) != 0) {						\
		test_fail(__LINE__, "%s: %s", #call,			\
		    (cause) != NULL ? (cause) : "(no cause)");		\
		return -1;						\
	}								\
} while (0)

/*
 * Read from fd into buf (NUL-terminated) until EOF, a full buffer or the
 * deadline; returns the length, or -1 at the deadline.
 */
static ssize_t
test_read_until(int fd, char *buf, size_t cap, int64_t deadline)
{
	size_t len = 0;

	while (len < cap - 1) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - util_monotonic_ms();
		ssize_t r;

		if (left <= 0) {
			buf[len] = '\0';
			return -1;
		}
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			break;
		r = read(fd, buf + len, cap - 1 - len);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	return (ssize_t)len;
}

/*
 * Reap pid, polling until the deadline, then SIGKILL it. Returns its wait
 * status, with *killed set when it had to be killed.
 */
static int
test_reap(pid_t pid, int64_t deadline, int *killed)
{
	int status = 0;
	pid_t r;

	*killed = 0;
	for (int i = 0; i < 1000000; i++) {
		r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			return -1;
		if (util_monotonic_ms() >= deadline)
			break;
		usleep(5000);
	}
	kill(pid, SIGKILL);
	*killed = 1;
	do
		r = waitpid(pid, &status, 0);
	while (r < 0 && errno == EINTR);
	return status;
}

/* Fail the calling test with a clear message unless we are root. */
static void
test_need_root(void)
{
	ck_assert_msg(geteuid() == 0, "test_nft needs root (a network namespace, nf_tables "
	    "and cgroup writes): run the unit suite as root");
}

/*
 * Run fn(arg) in a forked child inside a fresh network namespace. Returns
 * 0 when it succeeded, else -1 with its report in msg. The child is killed
 * if it overruns. Nothing here asserts, so callers can clean up first.
 */
static int
test_netns_run(const char *what, int (*fn)(void *), void *arg, char *msg, size_t msglen)
{
	size_t len;
	int64_t deadline;
	int pfd[2], status, killed;
	ssize_t r;
	pid_t pid;

	msg[0] = '\0';
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		snprintf(msg, msglen, "%s: pipe: %s", what, strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		snprintf(msg, msglen, "%s: fork: %s", what, strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		int rc;

		close(pfd[0]);
		if (unshare(CLONE_NEWNET) != 0) {
			snprintf(test_err, sizeof(test_err), "unshare(CLONE_NEWNET): %s",
			    strerror(errno));
			rc = -1;
		} else
			rc = fn(arg);
		if (rc != 0 && test_err[0] == '\0')
			snprintf(test_err, sizeof(test_err), "failed without a message");
		if (util_write_all(pfd[1], test_err, strlen(test_err)) != 0)
			rc = -1;
		close(pfd[1]);
		/* exit(), not _exit(): the sanitizer build checks for leaks here. */
		exit(rc == 0 ? 0 : 1);
	}
	close(pfd[1]);
	deadline = util_monotonic_ms() + TEST_CHILD_MS;
	r = test_read_until(pfd[0], msg, msglen, deadline);
	close(pfd[0]);
	len = r < 0 ? strlen(msg) : (size_t)r;
	status = test_reap(pid, deadline, &killed);
	if (killed) {
		snprintf(msg + len, msglen - len, " [%s: timed out after %d ms]", what,
		    TEST_CHILD_MS);
		return -1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(msg + len, msglen - len, " [%s: wait status %d]", what, status);
		return -1;
	}
	return 0;
}

/* Check that the environment can run a kernel test at all. */
static void
test_need_env(void)
{
	test_need_root();
	ck_assert_msg(access(NFT_BIN, X_OK) == 0, "%s not found: install the nftables package "
	    "(apt-get install nftables)", NFT_BIN);
}

/* Run fn(arg) in a fresh network namespace and assert that it succeeded. */
static void
test_in_netns(const char *what, int (*fn)(void *), void *arg)
{
	char msg[TEST_ERR_MAX + 128];

	test_need_env();
	ck_assert_msg(test_netns_run(what, fn, arg, msg, sizeof(msg)) == 0, "%s", msg);
}

/*
 * Run nft(8) with the arguments in args[] (NULL-terminated), stdout and
 * stderr into *out. Returns its exit status, or -1 when it could not be
 * run or overran.
 */
static int
test_nft_argv(char **out, const char *const *args)
{
	const char *argv[16];
	char *buf;
	size_t len = 0, cap = 65536;
	int pfd[2], status, argc = 0, killed;
	int64_t deadline = util_monotonic_ms() + TEST_NFT_MS;
	pid_t pid;

	*out = NULL;
	argv[argc++] = NFT_BIN;
	for (size_t i = 0; args[i] != NULL && argc < 15; i++)
		argv[argc++] = args[i];
	argv[argc] = NULL;
	if ((buf = malloc(cap)) == NULL || pipe2(pfd, O_CLOEXEC) != 0) {
		free(buf);
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		free(buf);
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		if (dup2(pfd[1], 1) < 0 || dup2(pfd[1], 2) < 0)
			_exit(126);
		execv(NFT_BIN, (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		int64_t left = deadline - util_monotonic_ms();
		ssize_t r;

		if (left <= 0 || len >= TEST_OUT_MAX) {
			kill(pid, SIGKILL);
			len = SIZE_MAX;
			break;
		}
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			break;
		if (len + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);
			if (nb == NULL) {
				kill(pid, SIGKILL);
				len = SIZE_MAX;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(pfd[0], buf + len, cap - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(pfd[0]);
	status = test_reap(pid, deadline, &killed);
	if (killed)
		len = SIZE_MAX;
	if (len == SIZE_MAX) {
		free(buf);
		return -1;
	}
	buf[len] = '\0';
	*out = buf;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* test_nft(&out, "list", "table", ...): nft(8) with literal arguments. */
#define test_nft(out, ...) test_nft_argv((out), (const char *const[]){ __VA_ARGS__, NULL })

/* Load text with `nft -f`; returns nft's exit status, its output in *out. */
static int
test_nft_load(const char *text, char **out)
{
	char path[] = "/tmp/test_nft.XXXXXX";
	int fd = mkstemp(path), rc;

	*out = NULL;
	if (fd < 0)
		return -1;
	if (util_write_all(fd, text, strlen(text)) != 0) {
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	rc = test_nft(out, "-f", path);
	unlink(path);
	return rc;
}

/* `nft -j list table inet NAME`, parsed; NULL on any failure (message set). */
static struct json_object *
test_list_json(const char *table)
{
	struct json_object *root;
	char *out;
	int rc = test_nft(&out, "-j", "list", "table", "inet", table);

	if (rc != 0) {
		test_fail(__LINE__, "nft -j list table inet %s: status %d: %s", table, rc,
		    out ? out : "");
		free(out);
		return NULL;
	}
	root = json_tokener_parse(out);
	if (root == NULL)
		test_fail(__LINE__, "nft -j output is not JSON: %.200s", out);
	free(out);
	return root;
}

/* The n-th object of kind ("set", "chain", "rule") matching name/chain. */
static struct json_object *
test_json_find(struct json_object *root, const char *kind, const char *key, const char *val,
    size_t nth)
{
	struct json_object *arr, *k, *v;

	if (!json_object_object_get_ex(root, "nftables", &arr))
		return NULL;
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *o = json_object_array_get_idx(arr, i);

		if (!json_object_object_get_ex(o, kind, &k))
			continue;
		if (!json_object_object_get_ex(k, key, &v) ||
		    strcmp(json_object_get_string(v), val) != 0)
			continue;
		if (nth-- == 0)
			return k;
	}
	return NULL;
}

/* How many objects of kind match key == val. */
static size_t
test_json_count(struct json_object *root, const char *kind, const char *key, const char *val)
{
	size_t n = 0;

	while (test_json_find(root, kind, key, val, n) != NULL)
		n++;
	return n;
}

/* Number of elements of a set (0 when it has no "elem"). */
static size_t
test_json_nelem(struct json_object *set)
{
	struct json_object *e;

	if (set == NULL || !json_object_object_get_ex(set, "elem", &e))
		return 0;
	return json_object_array_length(e);
}

/* 1 when the set has an element whose plain JSON is want. */
static int
test_json_has_elem(struct json_object *set, const char *want)
{
	struct json_object *e;

	if (set == NULL || !json_object_object_get_ex(set, "elem", &e))
		return 0;
	for (size_t i = 0; i < json_object_array_length(e); i++)
		if (strcmp(json_object_to_json_string_ext(json_object_array_get_idx(e, i),
		    JSON_C_TO_STRING_PLAIN), want) == 0)
			return 1;
	return 0;
}

/* The plain JSON of a rule's expressions ("" when missing). */
static const char *
test_json_rule(struct json_object *root, const char *chain, size_t nth)
{
	struct json_object *r = test_json_find(root, "rule", "chain", chain, nth), *x;

	if (r == NULL || !json_object_object_get_ex(r, "expr", &x))
		return "";
	return json_object_to_json_string_ext(x, JSON_C_TO_STRING_PLAIN);
}

/* An element from text: family, address range, protocol, ports. */
static struct nft_elem
test_elem(const char *lo, const char *hi, uint8_t proto, uint16_t plo, uint16_t phi)
{
	struct nft_elem e;

	memset(&e, 0, sizeof(e));
	e.ne_family = strchr(lo, ':') != NULL ? AF_INET6 : AF_INET;
	if (inet_pton(e.ne_family, lo, e.ne_addr_lo) != 1 ||
	    inet_pton(e.ne_family, hi, e.ne_addr_hi) != 1)
		abort();
	e.ne_proto = proto;
	e.ne_port_lo = plo;
	e.ne_port_hi = phi;
	return e;
}

/* A policy with everything but the elements filled in. */
static struct nft_policy
test_policy(const char *table, const char *owner, uint64_t gen, enum nft_subject subject,
    enum nft_mode mode)
{
	struct nft_policy p;

	memset(&p, 0, sizeof(p));
	p.np_table = table;
	p.np_owner = owner;
	p.np_generation = gen;
	p.np_subject = subject;
	p.np_mode = mode;
	p.np_cgroup_id = 4242;
	p.np_cgroup_level = 2;
	p.np_src_family = AF_INET;
	if (inet_pton(AF_INET, "192.0.2.99", p.np_src_addr) != 1)
		abort();
	return p;
}

/* The generation and owner nft_tables_list() reports for table (-1 absent). */
static int
test_table_info(struct nft_ctx *ctx, const char *table, uint64_t *gen, char *owner,
    size_t olen)
{
	struct nft_table_info *v;
	size_t n;
	char *cause = NULL;
	int found = -1;

	if (nft_tables_list(ctx, &v, &n, &cause) != 0) {
		test_fail(__LINE__, "nft_tables_list: %s", cause);
		free(cause);
		return -2;
	}
	for (size_t i = 0; i < n; i++) {
		if (strcmp(v[i].nti_name, table) != 0)
			continue;
		*gen = v[i].nti_generation;
		util_strlcpy(owner, v[i].nti_owner, olen);
		found = 0;
	}
	free(v);
	return found;
}

/* Bring lo up in this namespace. */
static int
test_lo_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = -1;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	util_strlcpy(ifr.ifr_name, "lo", sizeof(ifr.ifr_name));
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) == 0)
			rc = 0;
	}
	close(fd);
	return rc;
}

/* A socket of type bound to 127.0.0.1 on a free port (listening for TCP). */
static int
test_bind_lo(int type, uint16_t *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    (type == SOCK_STREAM && listen(fd, 16) != 0) ||
	    getsockname(fd, (struct sockaddr *)&sin, &sl) != 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(sin.sin_port);
	return fd;
}

/* Connect to 127.0.0.1:port within ms; 0 or the errno, elapsed time in *took. */
static int
test_connect(uint16_t port, int ms, int64_t *took)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int64_t t0 = util_monotonic_ms();
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err = 0;
	socklen_t el = sizeof(err);

	*took = 0;
	if (fd < 0)
		return errno;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		if (errno != EINPROGRESS) {
			err = errno;
		} else {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			int n;
			do
				n = poll(&p, 1, ms);
			while (n < 0 && errno == EINTR);
			if (n == 0)
				err = ETIMEDOUT;
			else if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
				err = errno;
		}
	}
	*took = util_monotonic_ms() - t0;
	close(fd);
	return err;
}

/*
 * The tests
 */

/* A small allowlist: what nft -j sees after one commit. */
static int
body_commit_lists(void *arg)
{
	struct nft_elem allow[] = {
		test_elem("192.0.2.0", "192.0.2.255", IPPROTO_TCP, 443, 443),
		test_elem("10.1.0.1", "10.1.0.9", IPPROTO_UDP, 53, 60),
		test_elem("2001:db8::", "2001:db8::ffff:ffff:ffff:ffff", IPPROTO_TCP, 80, 80),
	};
	struct nft_elem deny[] = { test_elem("192.0.2.7", "192.0.2.7", IPPROTO_TCP, 443, 443) };
	struct nft_policy p = test_policy("gensee_t1", "op_commit", 1, NFT_SUBJECT_CGROUP,
	    NFT_MODE_ALLOWLIST);
	struct json_object *root, *set, *chain;
	static const char *const sets[] = { "allow4", "allow6", "deny4", "deny6" };
	struct nft_ctx *ctx;
	char *cause = NULL, owner[64];
	uint64_t gen = 0;

	(void)arg;
	p.np_allow = allow;
	p.np_nallow = nitems(allow);
	p.np_deny = deny;
	p.np_ndeny = nitems(deny);
	T_OK(nft_open(&ctx, &cause), cause);
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);
	if ((root = test_list_json("gensee_t1")) == NULL)
		return -1;

	for (size_t i = 0; i < nitems(sets); i++) {
		struct json_object *v;

		set = test_json_find(root, "set", "name", sets[i], 0);
		T_CHECK(set != NULL, "no set %s", sets[i]);
		v = json_object_object_get(set, "type");
		T_CHECK(strcmp(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN),
		    sets[i][strlen(sets[i]) - 1] == '4' ?
		    "[\"ipv4_addr\",\"inet_proto\",\"inet_service\"]" :
		    "[\"ipv6_addr\",\"inet_proto\",\"inet_service\"]") == 0, "set %s type %s",
		    sets[i], json_object_to_json_string(v));
		v = json_object_object_get(set, "flags");
		/* The allow sets also take per-element timeouts (lease backstops). */
		T_CHECK(strcmp(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN),
		    strncmp(sets[i], "allow", 5) == 0 ? "[\"interval\",\"timeout\"]" :
		    "[\"interval\"]") == 0, "set %s flags %s", sets[i],
		    json_object_to_json_string(v));
	}
	set = test_json_find(root, "set", "name", "allow4", 0);
	T_CHECK(test_json_nelem(set) == 2, "allow4 has %zu elements", test_json_nelem(set));
	T_CHECK(test_json_has_elem(set,
	    "{\"concat\":[{\"prefix\":{\"addr\":\"192.0.2.0\",\"len\":24}},\"tcp\",443]}"),
	    "allow4: %s", json_object_to_json_string(set));
	T_CHECK(test_json_has_elem(set,
	    "{\"concat\":[{\"range\":[\"10.1.0.1\",\"10.1.0.9\"]},\"udp\",{\"range\":[53,60]}]}"),
	    "allow4: %s", json_object_to_json_string(set));
	set = test_json_find(root, "set", "name", "allow6", 0);
	T_CHECK(test_json_nelem(set) == 1 && test_json_has_elem(set,
	    "{\"concat\":[{\"prefix\":{\"addr\":\"2001:db8::\",\"len\":64}},\"tcp\",80]}"),
	    "allow6: %s", json_object_to_json_string(set));
	set = test_json_find(root, "set", "name", "deny4", 0);
	T_CHECK(test_json_nelem(set) == 1 && test_json_has_elem(set,
	    "{\"concat\":[\"192.0.2.7\",\"tcp\",443]}"), "deny4: %s",
	    json_object_to_json_string(set));
	T_CHECK(test_json_nelem(test_json_find(root, "set", "name", "deny6", 0)) == 0,
	    "deny6 not empty");

	chain = test_json_find(root, "chain", "name", "output", 0);
	T_CHECK(chain != NULL, "no output chain");
	T_CHECK(strcmp(json_object_get_string(json_object_object_get(chain, "hook")),
	    "output") == 0 && strcmp(json_object_get_string(json_object_object_get(chain,
	    "policy")), "accept") == 0 && json_object_get_int(json_object_object_get(chain,
	    "prio")) == 0, "output chain: %s", json_object_to_json_string(chain));
	T_CHECK(test_json_find(root, "chain", "name", "input", 0) == NULL &&
	    test_json_find(root, "chain", "name", "forward", 0) == NULL,
	    "source_address chains in a cgroup policy");
	T_CHECK(test_json_count(root, "rule", "chain", "output") == 1, "output rules");
	T_CHECK(strcmp(test_json_rule(root, "output", 0),
	    "[{\"match\":{\"op\":\"==\",\"left\":{\"socket\":{\"key\":\"cgroupv2\"}},"
	    "\"right\":\"4242\"}},{\"jump\":{\"target\":\"envelope\"}}]") == 0, "output rule %s",
	    test_json_rule(root, "output", 0));
	T_CHECK(test_json_count(root, "rule", "chain", "envelope") == 5, "envelope rules: %zu",
	    test_json_count(root, "rule", "chain", "envelope"));
	T_CHECK(strstr(test_json_rule(root, "envelope", 0), "\"right\":\"@deny4\"") != NULL &&
	    strstr(test_json_rule(root, "envelope", 0), "{\"jump\":{\"target\":\"blocked\"}}"),
	    "envelope rule 0 %s", test_json_rule(root, "envelope", 0));
	T_CHECK(strstr(test_json_rule(root, "envelope", 1), "\"right\":\"@deny6\"") != NULL,
	    "envelope rule 1 %s", test_json_rule(root, "envelope", 1));
	T_CHECK(strcmp(test_json_rule(root, "envelope", 2),
	    "[{\"match\":{\"op\":\"==\",\"left\":{\"concat\":[{\"payload\":{\"protocol\":\"ip\","
	    "\"field\":\"daddr\"}},{\"meta\":{\"key\":\"l4proto\"}},{\"payload\":{\"protocol\":"
	    "\"th\",\"field\":\"dport\"}}]},\"right\":\"@allow4\"}},{\"counter\":\"allowed\"},"
	    "{\"accept\":null}]") == 0, "envelope rule 2 %s",
	    test_json_rule(root, "envelope", 2));
	T_CHECK(strstr(test_json_rule(root, "envelope", 3), "\"right\":\"@allow6\"") != NULL,
	    "envelope rule 3 %s", test_json_rule(root, "envelope", 3));
	T_CHECK(strcmp(test_json_rule(root, "envelope", 4),
	    "[{\"jump\":{\"target\":\"blocked\"}}]") == 0, "envelope rule 4 %s",
	    test_json_rule(root, "envelope", 4));
	T_CHECK(test_json_count(root, "rule", "chain", "blocked") == 7, "blocked rules");
	T_CHECK(strcmp(test_json_rule(root, "blocked", 0),
	    "[{\"mangle\":{\"key\":{\"meta\":{\"key\":\"nftrace\"}},\"value\":1}}]") == 0,
	    "blocked rule 0 %s", test_json_rule(root, "blocked", 0));
	/* Rules 1-4 record the tuple, with a counter, in blocked4 / blocked6. */
	for (int i = 1; i <= 4; i++) {
		const char *r = test_json_rule(root, "blocked", i);
		T_CHECK(strstr(r, "\"op\":\"update\"") != NULL && strstr(r, i <= 2 ?
		    "\"set\":\"@blocked4\"" : "\"set\":\"@blocked6\"") != NULL &&
		    strstr(r, "\"stmt\":[{\"counter\"") != NULL &&
		    strstr(r, i % 2 ? "\"protocol\":\"tcp\",\"field\":\"dport\"" :
		    "\"protocol\":\"udp\",\"field\":\"dport\"") != NULL, "blocked rule %d %s", i, r);
	}
	T_CHECK(strcmp(test_json_rule(root, "blocked", 5),
	    "[{\"match\":{\"op\":\"==\",\"left\":{\"meta\":{\"key\":\"l4proto\"}},\"right\":"
	    "\"tcp\"}},{\"counter\":\"blocked\"},{\"reject\":{\"type\":"
	    "\"tcp reset\"}}]") == 0, "blocked rule 5 %s", test_json_rule(root, "blocked", 5));
	T_CHECK(strcmp(test_json_rule(root, "blocked", 6),
	    "[{\"counter\":\"blocked\"},{\"reject\":{\"type\":\"icmpx\","
	    "\"expr\":\"admin-prohibited\"}}]") == 0, "blocked rule 6 %s",
	    test_json_rule(root, "blocked", 6));
	for (int i = 0; i < 2; i++) {
		struct json_object *v;
		set = test_json_find(root, "set", "name", i == 0 ? "blocked4" : "blocked6", 0);
		T_CHECK(set != NULL, "no evidence set %d", i);
		v = json_object_object_get(set, "flags");
		/* nft -j does not list "dynamic"; an interval flag would show. */
		T_CHECK(v == NULL && json_object_get_int(json_object_object_get(set,
		    "size")) == NFT_BLOCKED_MAX, "evidence set %s", json_object_to_json_string(set));
	}
	T_CHECK(test_json_find(root, "counter", "name", "allowed", 0) != NULL &&
	    test_json_find(root, "counter", "name", "blocked", 0) != NULL, "named counters");
	json_object_put(root);

	T_CHECK(test_table_info(ctx, "gensee_t1", &gen, owner, sizeof(owner)) == 0,
	    "table not listed");
	T_CHECK(gen == 1 && strcmp(owner, "op_commit") == 0, "gen %" PRIu64 " owner %s", gen,
	    owner);
	nft_close(ctx);
	return 0;
}

START_TEST(test_commit_lists)
{
	test_in_netns("commit", body_commit_lists, NULL);
}
END_TEST

/* For the equivalence test: the cgroup to use, or none. */
struct test_cg {
	int tc_ok;
	char tc_nftpath[PATH_MAX];	/* as nft(8) resolves it, below /sys/fs/cgroup */
	struct cgroup tc_cg;
	int tc_level;
};

/* Replace every occurrence of from (same length as to) in s. */
static void
test_replace(char *s, const char *from, const char *to)
{
	size_t n = strlen(from);

	for (char *p = strstr(s, from); p != NULL; p = strstr(p + n, from))
		memcpy(p, to, n);
}

/* Commit p as table a, load its text as table b, and compare `nft list`. */
static int
test_same_listing(struct nft_ctx *ctx, struct nft_policy *p, const char *cgpath)
{
	const char *a = "gensee_eq_a", *b = "gensee_eq_b";
	char *cause = NULL, *text, *out = NULL, *la = NULL, *lb = NULL;
	int rc;

	p->np_table = a;
	T_OK(nft_generation_commit(ctx, p, &cause), cause);
	p->np_table = b;
	text = nft_policy_text(p, cgpath);
	T_CHECK(text != NULL, "nft_policy_text returned NULL");
	rc = test_nft_load(text, &out);
	T_CHECK(rc == 0, "nft -f of the policy text: status %d: %s\n%s", rc, out, text);
	free(out);
	/* Loading it again replaces the table, like a second commit. */
	rc = test_nft_load(text, &out);
	T_CHECK(rc == 0, "second nft -f: status %d: %s", rc, out);
	free(out);
	free(text);
	T_CHECK(test_nft(&la, "list", "table", "inet", a) == 0, "list a: %s", la);
	T_CHECK(test_nft(&lb, "list", "table", "inet", b) == 0, "list b: %s", lb);
	test_replace(lb, b, a);
	T_CHECK(strcmp(la, lb) == 0, "listings differ\n--- libnftnl:\n%s\n--- nft -f:\n%s", la,
	    lb);
	T_CHECK(strstr(la, "Error") == NULL && strstr(la, "userdata") == NULL, "nft: %s", la);
	free(la);
	free(lb);
	return 0;
}

/* Same ruleset through both paths: libnftnl and nft_policy_text + nft -f. */
static int
body_equivalence(void *arg)
{
	struct test_cg *tc = arg;
	struct nft_elem allow[] = {
		test_elem("192.0.2.0", "192.0.2.255", IPPROTO_TCP, 443, 443),
		test_elem("198.51.100.1", "198.51.100.1", IPPROTO_TCP, 22, 22),
		test_elem("10.1.0.1", "10.1.0.9", IPPROTO_UDP, 53, 60),
		test_elem("10.2.0.0", "10.2.255.255", IPPROTO_TCP, 1, 65535),
		test_elem("2001:db8::", "2001:db8::ffff:ffff:ffff:ffff", IPPROTO_TCP, 80, 80),
		test_elem("2001:db8:1::5", "2001:db8:1::9", IPPROTO_UDP, 5000, 5010),
		test_elem("::1", "::1", IPPROTO_TCP, 8080, 8080),
	};
	struct nft_elem deny[] = {
		test_elem("192.0.2.7", "192.0.2.7", IPPROTO_TCP, 443, 443),
		test_elem("2001:db8::8", "2001:db8::f", IPPROTO_UDP, 0, 1023),
	};
	struct nft_policy p;
	struct nft_ctx *ctx;
	char *cause = NULL;

	T_OK(nft_open(&ctx, &cause), cause);

	/* source_address, IPv4 source, allowlist. */
	p = test_policy("", "op_eq1", 11, NFT_SUBJECT_SOURCE_ADDRESS, NFT_MODE_ALLOWLIST);
	p.np_allow = allow;
	p.np_nallow = nitems(allow);
	p.np_deny = deny;
	p.np_ndeny = nitems(deny);
	if (test_same_listing(ctx, &p, NULL) != 0)
		return -1;

	/* source_address, IPv6 source, denylist, no allow elements. */
	p = test_policy("", "op_eq2", 12, NFT_SUBJECT_SOURCE_ADDRESS, NFT_MODE_DENYLIST);
	p.np_src_family = AF_INET6;
	T_CHECK(inet_pton(AF_INET6, "2001:db8:ff::1", p.np_src_addr) == 1, "inet_pton");
	p.np_deny = deny;
	p.np_ndeny = nitems(deny);
	if (test_same_listing(ctx, &p, NULL) != 0)
		return -1;

	/* cgroup, allowlist: nft resolves the path to the same id we pass. */
	if (tc->tc_ok) {
		p = test_policy("", "op_eq3", 13, NFT_SUBJECT_CGROUP, NFT_MODE_ALLOWLIST);
		p.np_cgroup_id = tc->tc_cg.cg_id;
		p.np_cgroup_level = tc->tc_level;
		p.np_allow = allow;
		p.np_nallow = nitems(allow);
		if (test_same_listing(ctx, &p, tc->tc_nftpath) != 0)
			return -1;
	} else
		fprintf(stderr, "test_nft: cgroup2 is not below /sys/fs/cgroup, so nft(8) "
		    "cannot name a cgroup; cgroup equivalence skipped\n");
	nft_close(ctx);
	return 0;
}

/* Depth of a relative cgroup path (gensee/test_x: 2). */
static int
test_depth(const char *rel)
{
	int d = 1;

	for (const char *s = rel; *s != '\0'; s++)
		if (*s == '/')
			d++;
	return d;
}

/* Make MOUNT/gensee/test_<random>; 0, or -1 with a message. */
static int
test_cg_create(struct test_cg *tc, char *msg, size_t len)
{
	char mount[PATH_MAX], rel[64], *cause = NULL;
	uint64_t r;

	memset(tc, 0, sizeof(*tc));
	tc->tc_cg.cg_dirfd = -1;
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		snprintf(msg, len, "getrandom: %s", strerror(errno));
		return -1;
	}
	snprintf(rel, sizeof(rel), "%s/test_%016" PRIx64, CGROUP_BASE, r);
	if (cgroup_find_mount(mount, sizeof(mount), &cause) != 0 ||
	    cgroup_ensure_base(mount, CGROUP_BASE, &cause) != 0 ||
	    cgroup_create(mount, rel, &tc->tc_cg, &cause) != 0) {
		snprintf(msg, len, "cgroup: %s", cause);
		free(cause);
		return -1;
	}
	tc->tc_level = test_depth(rel);
	if (strcmp(mount, "/sys/fs/cgroup") == 0) {
		util_strlcpy(tc->tc_nftpath, rel, sizeof(tc->tc_nftpath));
		tc->tc_ok = 1;
	} else if (strncmp(mount, "/sys/fs/cgroup/", 15) == 0 &&
	    (size_t)snprintf(tc->tc_nftpath, sizeof(tc->tc_nftpath), "%.*s/%s",
	    (int)(sizeof(tc->tc_nftpath) - sizeof(rel) - 1), mount + 15, rel) <
	    sizeof(tc->tc_nftpath)) {
		tc->tc_ok = 1;
	}
	return 0;
}

/* Kill whatever is left in the test cgroup and remove it (bounded retries). */
static void
test_cg_remove(struct test_cg *tc)
{
	char *cause = NULL;
	int i;

	if (tc->tc_cg.cg_dirfd < 0)
		return;
	for (i = 0; i < 100 && cgroup_populated(&tc->tc_cg) == 1; i++) {
		if (cgroup_kill(&tc->tc_cg, &cause) != 0) {
			free(cause);
			cause = NULL;
		}
		usleep(20000);
	}
	for (i = 0; i < 50; i++) {
		if (cgroup_remove(&tc->tc_cg, &cause) == 0)
			return;
		free(cause);
		cause = NULL;
		usleep(20000);
	}
	ck_abort_msg("could not remove test cgroup %s", tc->tc_cg.cg_path);
}

START_TEST(test_equivalence)
{
	struct test_cg tc;
	char msg[TEST_ERR_MAX + 128];
	int rc;

	test_need_env();
	ck_assert_msg(test_cg_create(&tc, msg, sizeof(msg)) == 0, "%s", msg);
	rc = test_netns_run("equivalence", body_equivalence, &tc, msg, sizeof(msg));
	test_cg_remove(&tc);
	ck_assert_msg(rc == 0, "%s", msg);
}
END_TEST

/* A second commit replaces the first: old elements are gone. */
static int
body_replace(void *arg)
{
	struct nft_elem one[] = {
		test_elem("198.51.100.1", "198.51.100.1", IPPROTO_TCP, 22, 22),
		test_elem("2001:db8::1", "2001:db8::1", IPPROTO_UDP, 53, 53),
	};
	/* The same grant twice (two leases) is one element, not an error. */
	struct nft_elem two[] = {
		test_elem("203.0.113.0", "203.0.113.255", IPPROTO_TCP, 443, 443),
		test_elem("203.0.113.0", "203.0.113.255", IPPROTO_TCP, 443, 443),
	};
	struct nft_policy p = test_policy("gensee_rep", "op_one", 1, NFT_SUBJECT_CGROUP,
	    NFT_MODE_ALLOWLIST);
	struct json_object *root, *set;
	struct nft_ctx *ctx;
	char *cause = NULL, owner[64];
	uint64_t gen;

	(void)arg;
	T_OK(nft_open(&ctx, &cause), cause);
	p.np_allow = one;
	p.np_nallow = nitems(one);
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);
	p = test_policy("gensee_rep", "op_two", 2, NFT_SUBJECT_SOURCE_ADDRESS,
	    NFT_MODE_ALLOWLIST);
	p.np_allow = two;
	p.np_nallow = nitems(two);
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);

	if ((root = test_list_json("gensee_rep")) == NULL)
		return -1;
	set = test_json_find(root, "set", "name", "allow4", 0);
	T_CHECK(test_json_nelem(set) == 1 && test_json_has_elem(set,
	    "{\"concat\":[{\"prefix\":{\"addr\":\"203.0.113.0\",\"len\":24}},\"tcp\",443]}"),
	    "allow4 after replace: %s", json_object_to_json_string(set));
	set = test_json_find(root, "set", "name", "allow6", 0);
	T_CHECK(test_json_nelem(set) == 0, "allow6 kept %zu old elements", test_json_nelem(set));
	T_CHECK(test_json_find(root, "chain", "name", "output", 0) == NULL,
	    "the old output chain survived");
	T_CHECK(test_json_count(root, "rule", "chain", "input") == 1 &&
	    test_json_count(root, "rule", "chain", "forward") == 1 &&
	    test_json_count(root, "rule", "chain", "envelope") == 5 &&
	    test_json_count(root, "rule", "chain", "blocked") == 7, "rule counts after replace");
	T_CHECK(strstr(test_json_rule(root, "input", 0), "\"right\":\"192.0.2.99\"") != NULL,
	    "input rule %s", test_json_rule(root, "input", 0));
	json_object_put(root);
	T_CHECK(test_table_info(ctx, "gensee_rep", &gen, owner, sizeof(owner)) == 0 &&
	    gen == 2 && strcmp(owner, "op_two") == 0, "after replace: gen %" PRIu64 " owner %s",
	    gen, owner);
	nft_close(ctx);
	return 0;
}

START_TEST(test_replace_generation)
{
	test_in_netns("replace", body_replace, NULL);
}
END_TEST

/* Fill v[0..n) with distinct elements: IPv4 ranges, every tenth IPv6. */
static void
test_many_elems(struct nft_elem *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct nft_elem *e = &v[i];

		memset(e, 0, sizeof(*e));
		e->ne_proto = i % 3 == 0 ? IPPROTO_UDP : IPPROTO_TCP;
		e->ne_port_lo = (uint16_t)(1000 + i % 100);
		e->ne_port_hi = (uint16_t)(e->ne_port_lo + i % 7);
		if (i % 10 == 9) {
			e->ne_family = AF_INET6;
			e->ne_addr_lo[0] = 0x20;
			e->ne_addr_lo[1] = 0x01;
			e->ne_addr_lo[2] = 0x0d;
			e->ne_addr_lo[3] = 0xb8;
			e->ne_addr_lo[12] = (uint8_t)(i >> 8);
			e->ne_addr_lo[13] = (uint8_t)i;
			memcpy(e->ne_addr_hi, e->ne_addr_lo, 16);
			e->ne_addr_hi[15] = 0xff;
		} else {
			/* 10.x.y.(4k .. 4k+3): a /30 per element. */
			uint32_t a = 0x0a000000u + (uint32_t)i * 4;
			e->ne_family = AF_INET;
			e->ne_addr_lo[0] = (uint8_t)(a >> 24);
			e->ne_addr_lo[1] = (uint8_t)(a >> 16);
			e->ne_addr_lo[2] = (uint8_t)(a >> 8);
			e->ne_addr_lo[3] = (uint8_t)a;
			memcpy(e->ne_addr_hi, e->ne_addr_lo, 4);
			e->ne_addr_hi[3] |= 3;
		}
	}
}

/* 10,000 elements in one commit; then the same through nft -f for scale. */
static int
body_many(void *arg)
{
	struct nft_elem *v = calloc(TEST_MANY, sizeof(*v));
	struct nft_policy p = test_policy("gensee_many", "op_many", 3, NFT_SUBJECT_CGROUP,
	    NFT_MODE_ALLOWLIST);
	struct json_object *root;
	struct nft_ctx *ctx;
	char *cause = NULL, *text, *out;
	int64_t t0, t1;
	size_t n4, n6;
	int rc;

	(void)arg;
	T_CHECK(v != NULL, "out of memory");
	test_many_elems(v, TEST_MANY);
	p.np_allow = v;
	p.np_nallow = TEST_MANY;
	T_OK(nft_open(&ctx, &cause), cause);
	t0 = util_monotonic_ms();
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);
	t1 = util_monotonic_ms();
	/* Again, so the replace path runs at scale too. */
	p.np_generation = 4;
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);
	if ((root = test_list_json("gensee_many")) == NULL)
		return -1;
	n4 = test_json_nelem(test_json_find(root, "set", "name", "allow4", 0));
	n6 = test_json_nelem(test_json_find(root, "set", "name", "allow6", 0));
	json_object_put(root);
	T_CHECK(n4 == TEST_MANY - TEST_MANY / 10 && n6 == TEST_MANY / 10,
	    "kernel holds %zu + %zu elements", n4, n6);

	/* The text of the same policy loads too (cgroup by path is not needed for size). */
	p.np_subject = NFT_SUBJECT_SOURCE_ADDRESS;
	p.np_table = "gensee_many_text";
	text = nft_policy_text(&p, NULL);
	T_CHECK(text != NULL, "nft_policy_text");
	rc = test_nft_load(text, &out);
	free(text);
	T_CHECK(rc == 0, "nft -f of 10,000 elements: %d: %.500s", rc, out);
	free(out);
	fprintf(stderr, "test_nft: %d elements committed in %" PRId64 " ms\n", TEST_MANY,
	    t1 - t0);
	free(v);
	nft_close(ctx);
	return 0;
}

START_TEST(test_many_elements)
{
	test_in_netns("10,000 elements", body_many, NULL);
}
END_TEST

/* Element updates: add, delete, a failing delete, replace, then a full commit. */
static int
body_update(void *arg)
{
	struct nft_elem base[] = { test_elem("192.0.2.1", "192.0.2.1", IPPROTO_TCP, 80, 80) };
	struct nft_elem add[] = {
		test_elem("198.51.100.0", "198.51.100.255", IPPROTO_TCP, 443, 443),
		test_elem("2001:db8::", "2001:db8:0:ffff:ffff:ffff:ffff:ffff", IPPROTO_UDP, 53, 53),
	};
	struct nft_elem missing[] = { test_elem("203.0.113.9", "203.0.113.9", IPPROTO_TCP, 1,
	    1) };
	struct nft_elem wider[] = { test_elem("198.51.100.0", "198.51.101.255", IPPROTO_TCP,
	    443, 444) };
	struct nft_policy p = test_policy("gensee_upd", "op_upd", 1, NFT_SUBJECT_CGROUP,
	    NFT_MODE_ALLOWLIST);
	struct json_object *root, *set;
	struct nft_ctx *ctx;
	char *cause = NULL, owner[64];
	uint64_t gen;

	(void)arg;
	p.np_allow = base;
	p.np_nallow = nitems(base);
	T_OK(nft_open(&ctx, &cause), cause);
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);

	T_OK(nft_elements_update(ctx, "gensee_upd", 2, add, nitems(add), NULL, 0, &cause), cause);
	if ((root = test_list_json("gensee_upd")) == NULL)
		return -1;
	set = test_json_find(root, "set", "name", "allow4", 0);
	T_CHECK(test_json_nelem(set) == 2 && test_json_has_elem(set,
	    "{\"concat\":[{\"prefix\":{\"addr\":\"198.51.100.0\",\"len\":24}},\"tcp\",443]}"),
	    "allow4 after add: %s", json_object_to_json_string(set));
	set = test_json_find(root, "set", "name", "allow6", 0);
	T_CHECK(test_json_nelem(set) == 1 && test_json_has_elem(set,
	    "{\"concat\":[{\"prefix\":{\"addr\":\"2001:db8::\",\"len\":48}},\"udp\",53]}"),
	    "allow6 after add: %s", json_object_to_json_string(set));
	T_CHECK(test_json_count(root, "chain", "name", "generation") == 1, "no generation chain");
	json_object_put(root);
	T_CHECK(test_table_info(ctx, "gensee_upd", &gen, owner, sizeof(owner)) == 0 &&
	    gen == 2 && strcmp(owner, "op_upd") == 0, "after add: gen %" PRIu64 " owner %s",
	    gen, owner);

	T_OK(nft_elements_update(ctx, "gensee_upd", 3, NULL, 0, add, 1, &cause), cause);
	if ((root = test_list_json("gensee_upd")) == NULL)
		return -1;
	set = test_json_find(root, "set", "name", "allow4", 0);
	T_CHECK(test_json_nelem(set) == 1 && test_json_has_elem(set,
	    "{\"concat\":[\"192.0.2.1\",\"tcp\",80]}"), "allow4 after delete: %s",
	    json_object_to_json_string(set));
	T_CHECK(test_json_nelem(test_json_find(root, "set", "name", "allow6", 0)) == 1,
	    "allow6 lost its element");
	T_CHECK(test_json_count(root, "chain", "name", "generation") == 1,
	    "generation chains: %zu", test_json_count(root, "chain", "name", "generation"));
	json_object_put(root);
	T_CHECK(test_table_info(ctx, "gensee_upd", &gen, owner, sizeof(owner)) == 0 && gen == 3,
	    "after delete: gen %" PRIu64, gen);

	/* Deleting what is not there fails the whole batch, generation included. */
	T_CHECK(nft_elements_update(ctx, "gensee_upd", 4, add, 1, missing, 1, &cause) != 0,
	    "deleting a missing element succeeded");
	T_CHECK(cause != NULL && strstr(cause, "DELSETELEM") != NULL, "cause: %s", cause);
	T_CHECK(test_table_info(ctx, "gensee_upd", &gen, owner, sizeof(owner)) == 0 && gen == 3,
	    "failed update moved the generation to %" PRIu64, gen);
	if ((root = test_list_json("gensee_upd")) == NULL)
		return -1;
	T_CHECK(test_json_nelem(test_json_find(root, "set", "name", "allow4", 0)) == 1,
	    "failed update added an element");
	json_object_put(root);

	/* Replace a grant by an overlapping wider one in one update. */
	T_OK(nft_elements_update(ctx, "gensee_upd", 5, add, 1, NULL, 0, &cause), cause);
	T_OK(nft_elements_update(ctx, "gensee_upd", 6, wider, 1, add, 1, &cause), cause);
	if ((root = test_list_json("gensee_upd")) == NULL)
		return -1;
	set = test_json_find(root, "set", "name", "allow4", 0);
	T_CHECK(test_json_nelem(set) == 2 && test_json_has_elem(set,
	    "{\"concat\":[{\"prefix\":{\"addr\":\"198.51.100.0\",\"len\":23}},\"tcp\","
	    "{\"range\":[443,444]}]}"), "allow4 after replace: %s",
	    json_object_to_json_string(set));
	json_object_put(root);

	/* Updates refuse a missing table and foreign names. */
	T_CHECK(nft_elements_update(ctx, "gensee_nosuch", 1, add, 1, NULL, 0, &cause) != 0,
	    "update of a missing table succeeded");
	T_CHECK(nft_elements_update(ctx, "filter", 1, add, 1, NULL, 0, &cause) != 0,
	    "update of a foreign table name succeeded");

	/* A full commit drops the marker; the table userdata is the truth again. */
	p.np_generation = 7;
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);
	if ((root = test_list_json("gensee_upd")) == NULL)
		return -1;
	T_CHECK(test_json_count(root, "chain", "name", "generation") == 0,
	    "generation chain survived a commit");
	json_object_put(root);
	T_CHECK(test_table_info(ctx, "gensee_upd", &gen, owner, sizeof(owner)) == 0 && gen == 7,
	    "after commit: gen %" PRIu64, gen);
	free(cause);
	nft_close(ctx);
	return 0;
}

START_TEST(test_elements_update)
{
	test_in_netns("elements update", body_update, NULL);
}
END_TEST

/*
 * Refill: the table, sets and chains stay, the contents are replaced in one
 * batch; a missing table makes it fail without creating anything.
 */
static int
body_refill(void *arg)
{
	struct nft_elem one[] = {
		test_elem("192.0.2.1", "192.0.2.1", IPPROTO_TCP, 80, 80),
		test_elem("192.0.2.2", "192.0.2.2", IPPROTO_TCP, 80, 80),
	};
	struct nft_elem two[] = {
		test_elem("192.0.2.2", "192.0.2.2", IPPROTO_TCP, 80, 80),
		test_elem("198.51.100.7", "198.51.100.7", IPPROTO_UDP, 53, 53),
	};
	struct nft_elem deny[] = { test_elem("203.0.113.9", "203.0.113.9", IPPROTO_TCP, 22, 22) };
	struct nft_policy p = test_policy("gensee_refill", "op_refill", 1, NFT_SUBJECT_CGROUP,
	    NFT_MODE_ALLOWLIST);
	struct json_object *root, *set;
	struct nft_ctx *ctx;
	char *cause = NULL, owner[64];
	uint64_t gen;

	(void)arg;
	p.np_allow = one;
	p.np_nallow = nitems(one);
	T_OK(nft_open(&ctx, &cause), cause);
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);
	p.np_allow = two;
	p.np_nallow = nitems(two);
	p.np_deny = deny;
	p.np_ndeny = nitems(deny);
	p.np_generation = 2;
	T_OK(nft_generation_refill(ctx, &p, &cause), cause);
	/* A second refill of the same contents is fine: flushed elements may come back. */
	p.np_generation = 3;
	T_OK(nft_generation_refill(ctx, &p, &cause), cause);
	if ((root = test_list_json("gensee_refill")) == NULL)
		return -1;
	set = test_json_find(root, "set", "name", "allow4", 0);
	T_CHECK(test_json_nelem(set) == 2 && test_json_has_elem(set,
	    "{\"concat\":[\"198.51.100.7\",\"udp\",53]}") && test_json_has_elem(set,
	    "{\"concat\":[\"192.0.2.2\",\"tcp\",80]}"), "allow4 after refill: %s",
	    json_object_to_json_string(set));
	T_CHECK(test_json_nelem(test_json_find(root, "set", "name", "deny4", 0)) == 1,
	    "deny4 after refill");
	/* Rules were replaced, not appended to: one jump in output. */
	T_CHECK(test_json_count(root, "rule", "chain", "output") == 1, "output rules doubled");
	json_object_put(root);
	T_CHECK(test_table_info(ctx, "gensee_refill", &gen, owner, sizeof(owner)) == 0 && gen == 3,
	    "refill generation %" PRIu64, gen);
	p.np_table = "gensee_refillnone";
	T_CHECK(nft_generation_refill(ctx, &p, &cause) != 0, "refill created a missing table");
	T_CHECK((root = test_list_json("gensee_refillnone")) == NULL, "missing table exists now");
	free(cause);
	nft_close(ctx);
	return 0;
}

START_TEST(test_refill)
{
	test_in_netns("refill", body_refill, NULL);
}
END_TEST

/* An element with a timeout disappears by itself, without any batch. */
static int
body_timeout(void *arg)
{
	struct nft_elem e[] = { test_elem("192.0.2.5", "192.0.2.5", IPPROTO_TCP, 443, 443) };
	struct nft_policy p = test_policy("gensee_tmo", "op_tmo", 1, NFT_SUBJECT_CGROUP,
	    NFT_MODE_ALLOWLIST);
	struct json_object *root;
	struct nft_ctx *ctx;
	char *cause = NULL;
	size_t n = 1;

	(void)arg;
	e[0].ne_timeout_ms = 1000;
	p.np_allow = e;
	p.np_nallow = 1;
	T_OK(nft_open(&ctx, &cause), cause);
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);
	if ((root = test_list_json("gensee_tmo")) == NULL)
		return -1;
	T_CHECK(test_json_nelem(test_json_find(root, "set", "name", "allow4", 0)) == 1,
	    "timed element missing");
	json_object_put(root);
	for (int i = 0; i < 60 && n != 0; i++) {
		usleep(100000);
		if ((root = test_list_json("gensee_tmo")) == NULL)
			return -1;
		n = test_json_nelem(test_json_find(root, "set", "name", "allow4", 0));
		json_object_put(root);
	}
	T_CHECK(n == 0, "element outlived its kernel timeout");
	free(cause);
	nft_close(ctx);
	return 0;
}

START_TEST(test_timeout)
{
	test_in_netns("timeout", body_timeout, NULL);
}
END_TEST

/* The previous generation is still there, untouched. */
static int
test_still_gen1(struct nft_ctx *ctx)
{
	struct json_object *root, *set;
	char owner[64];
	uint64_t gen = 0;

	T_CHECK(test_table_info(ctx, "gensee_bad", &gen, owner, sizeof(owner)) == 0 &&
	    gen == 1 && strcmp(owner, "op_good") == 0, "gen %" PRIu64 " owner %s", gen, owner);
	if ((root = test_list_json("gensee_bad")) == NULL)
		return -1;
	set = test_json_find(root, "set", "name", "allow4", 0);
	T_CHECK(test_json_nelem(set) == 1 && test_json_has_elem(set,
	    "{\"concat\":[\"192.0.2.1\",\"tcp\",80]}"), "allow4: %s",
	    json_object_to_json_string(set));
	T_CHECK(test_json_count(root, "rule", "chain", "output") == 1 &&
	    test_json_count(root, "rule", "chain", "envelope") == 5, "rules changed");
	json_object_put(root);
	return 0;
}

/* Bad generations fail with a cause and leave the previous one in place. */
static int
body_bad_batch(void *arg)
{
	struct nft_elem good[] = { test_elem("192.0.2.1", "192.0.2.1", IPPROTO_TCP, 80, 80) };
	struct nft_elem inverted[] = { test_elem("192.0.2.2", "192.0.2.2", IPPROTO_TCP, 90,
	    80) };
	struct nft_elem overlap[] = {
		test_elem("10.0.0.0", "10.0.0.255", IPPROTO_TCP, 80, 80),
		test_elem("10.0.0.128", "10.0.1.5", IPPROTO_TCP, 80, 80),
	};
	struct nft_policy p = test_policy("gensee_bad", "op_good", 1, NFT_SUBJECT_CGROUP,
	    NFT_MODE_ALLOWLIST);
	struct nft_ctx *ctx;
	char *cause = NULL;

	(void)arg;
	p.np_allow = good;
	p.np_nallow = nitems(good);
	T_OK(nft_open(&ctx, &cause), cause);
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);

	p.np_owner = "op_bad";
	p.np_generation = 2;
	p.np_allow = inverted;
	T_CHECK(nft_generation_commit(ctx, &p, &cause) != 0, "inverted port range accepted");
	T_CHECK(cause != NULL && strstr(cause, "port range 90-80") != NULL, "cause: %s", cause);
	if (test_still_gen1(ctx) != 0)
		return -1;

	p.np_allow = good;
	p.np_cgroup_level = 300;
	T_CHECK(nft_generation_commit(ctx, &p, &cause) != 0, "cgroup level 300 accepted");
	T_CHECK(cause != NULL && strstr(cause, "level 300") != NULL, "cause: %s", cause);
	if (test_still_gen1(ctx) != 0)
		return -1;
	T_CHECK(nft_policy_text(&p, "x") == NULL, "text for level 300");

	/* Overlapping ranges pass our checks; the kernel refuses the batch. */
	p.np_cgroup_level = 2;
	p.np_allow = overlap;
	p.np_nallow = nitems(overlap);
	T_CHECK(nft_generation_commit(ctx, &p, &cause) != 0, "overlapping ranges accepted");
	T_CHECK(cause != NULL && strstr(cause, "NEWSETELEM (allow4) failed") != NULL,
	    "cause: %s", cause);
	if (test_still_gen1(ctx) != 0)
		return -1;

	/* Table names outside our prefix never reach the kernel. */
	p.np_allow = good;
	p.np_nallow = nitems(good);
	p.np_table = "filter";
	T_CHECK(nft_generation_commit(ctx, &p, &cause) != 0, "foreign table name accepted");
	p.np_table = "gensee_bad;x";
	T_CHECK(nft_generation_commit(ctx, &p, &cause) != 0, "bad table name accepted");
	p.np_table = "gensee_bad";
	p.np_owner = "op\"x";
	T_CHECK(nft_generation_commit(ctx, &p, &cause) != 0, "quote in owner accepted");
	if (test_still_gen1(ctx) != 0)
		return -1;
	free(cause);
	nft_close(ctx);
	return 0;
}

START_TEST(test_bad_batch)
{
	test_in_netns("bad batch", body_bad_batch, NULL);
}
END_TEST

/* tables_list: every inet gensee_ table with its generation and owner. */
static int
body_tables_list(void *arg)
{
	struct nft_policy p;
	struct nft_table_info *v;
	struct nft_ctx *ctx;
	char *cause = NULL, *out;
	size_t n;
	int rc, seen = 0;

	(void)arg;
	T_OK(nft_open(&ctx, &cause), cause);
	T_OK(nft_tables_list(ctx, &v, &n, &cause), cause);
	T_CHECK(n == 0, "fresh namespace lists %zu tables", n);
	free(v);
	p = test_policy("gensee_l1", "op_a", 5, NFT_SUBJECT_CGROUP, NFT_MODE_ALLOWLIST);
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);
	p = test_policy("gensee_l2", "op_b", 7, NFT_SUBJECT_SOURCE_ADDRESS, NFT_MODE_DENYLIST);
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);
	rc = test_nft_load("table inet other_t {\n}\ntable ip gensee_ipfam {\n}\n"
	    "table inet gensee_foreign {\n\tcomment \"not ours\"\n}\n", &out);
	T_CHECK(rc == 0, "nft -f: %s", out);
	free(out);

	T_OK(nft_tables_list(ctx, &v, &n, &cause), cause);
	T_CHECK(n == 3, "listed %zu tables", n);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(v[i].nti_name, "gensee_l1") == 0) {
			T_CHECK(v[i].nti_generation == 5 && strcmp(v[i].nti_owner, "op_a") == 0,
			    "l1: %" PRIu64 " %s", v[i].nti_generation, v[i].nti_owner);
			seen |= 1;
		} else if (strcmp(v[i].nti_name, "gensee_l2") == 0) {
			T_CHECK(v[i].nti_generation == 7 && strcmp(v[i].nti_owner, "op_b") == 0,
			    "l2: %" PRIu64 " %s", v[i].nti_generation, v[i].nti_owner);
			seen |= 2;
		} else if (strcmp(v[i].nti_name, "gensee_foreign") == 0) {
			T_CHECK(v[i].nti_generation == 0 && v[i].nti_owner[0] == '\0',
			    "foreign: %" PRIu64 " %s", v[i].nti_generation, v[i].nti_owner);
			seen |= 4;
		} else
			T_CHECK(0, "listed %s", v[i].nti_name);
	}
	T_CHECK(seen == 7, "missing tables (%d)", seen);
	free(v);
	nft_close(ctx);
	return 0;
}

START_TEST(test_tables_list)
{
	test_in_netns("tables list", body_tables_list, NULL);
}
END_TEST

/* table_delete: removes ours, a missing one is fine, others are refused. */
static int
body_table_delete(void *arg)
{
	struct nft_policy p = test_policy("gensee_del", "op_del", 1, NFT_SUBJECT_CGROUP,
	    NFT_MODE_ALLOWLIST);
	struct nft_table_info *v;
	struct nft_ctx *ctx;
	char *cause = NULL, *out;
	size_t n;
	int rc;

	(void)arg;
	T_OK(nft_open(&ctx, &cause), cause);
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);
	T_OK(nft_table_delete(ctx, "gensee_del", &cause), cause);
	T_OK(nft_tables_list(ctx, &v, &n, &cause), cause);
	T_CHECK(n == 0, "%zu tables after delete", n);
	free(v);
	rc = test_nft(&out, "list", "table", "inet", "gensee_del");
	T_CHECK(rc != 0, "table still listed: %s", out);
	free(out);
	T_OK(nft_table_delete(ctx, "gensee_del", &cause), cause);
	T_OK(nft_table_delete(ctx, "gensee_never_existed", &cause), cause);

	rc = test_nft_load("table inet filter {\n}\n", &out);
	T_CHECK(rc == 0, "nft -f: %s", out);
	free(out);
	T_CHECK(nft_table_delete(ctx, "filter", &cause) != 0, "deleted a foreign table");
	rc = test_nft(&out, "list", "table", "inet", "filter");
	T_CHECK(rc == 0, "foreign table gone: %s", out);
	free(out);
	free(cause);
	nft_close(ctx);
	return 0;
}

START_TEST(test_table_delete)
{
	test_in_netns("table delete", body_table_delete, NULL);
}
END_TEST

/* Counters: accepted and rejected UDP from 127.0.0.1 (source_address subject). */
static int
body_counters(void *arg)
{
	struct nft_policy p = test_policy("gensee_cnt", "op_cnt", 1, NFT_SUBJECT_SOURCE_ADDRESS,
	    NFT_MODE_ALLOWLIST);
	struct sockaddr_in to = { .sin_family = AF_INET };
	struct nft_counters c, c2;
	struct nft_blocked *bl = NULL;
	size_t nbl = 0;
	struct nft_elem allow[1];
	struct nft_ctx *ctx;
	char *cause = NULL, payload[100] = "x";
	uint16_t p1, p2;
	int s1, s2, tx;

	(void)arg;
	T_CHECK(test_lo_up() == 0, "lo up: %s", strerror(errno));
	s1 = test_bind_lo(SOCK_DGRAM, &p1);
	s2 = test_bind_lo(SOCK_DGRAM, &p2);
	tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	T_CHECK(s1 >= 0 && s2 >= 0 && tx >= 0, "sockets: %s", strerror(errno));
	allow[0] = test_elem("127.0.0.1", "127.0.0.1", IPPROTO_UDP, p1, p1);
	T_CHECK(inet_pton(AF_INET, "127.0.0.1", p.np_src_addr) == 1, "inet_pton");
	p.np_allow = allow;
	p.np_nallow = 1;
	T_OK(nft_open(&ctx, &cause), cause);
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);
	T_OK(nft_counters_read(ctx, "gensee_cnt", &c, &cause), cause);
	T_CHECK(c.nc_allowed_packets == 0 && c.nc_blocked_packets == 0 &&
	    c.nc_allowed_bytes == 0 && c.nc_blocked_bytes == 0, "fresh counters not zero");

	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < 3; i++) {
		to.sin_port = htons(p1);
		T_CHECK(sendto(tx, payload, sizeof(payload), 0, (struct sockaddr *)&to,
		    sizeof(to)) == (ssize_t)sizeof(payload), "sendto: %s", strerror(errno));
	}
	for (int i = 0; i < 2; i++) {
		to.sin_port = htons(p2);
		T_CHECK(sendto(tx, payload, sizeof(payload), 0, (struct sockaddr *)&to,
		    sizeof(to)) == (ssize_t)sizeof(payload), "sendto: %s", strerror(errno));
	}
	/* Loopback delivery is synchronous; the counters are final now. */
	T_OK(nft_counters_read(ctx, "gensee_cnt", &c, &cause), cause);
	T_CHECK(c.nc_allowed_packets == 3 && c.nc_allowed_bytes == 3 * (20 + 8 +
	    sizeof(payload)), "allowed %" PRIu64 " packets %" PRIu64 " bytes",
	    c.nc_allowed_packets, c.nc_allowed_bytes);
	T_CHECK(c.nc_blocked_packets >= 2 && c.nc_blocked_bytes >= 2 * (20 + 8 +
	    sizeof(payload)), "blocked %" PRIu64 " packets %" PRIu64 " bytes",
	    c.nc_blocked_packets, c.nc_blocked_bytes);
	T_CHECK(recv(s1, payload, sizeof(payload), MSG_DONTWAIT) == (ssize_t)sizeof(payload),
	    "allowed datagram not delivered");
	T_CHECK(recv(s2, payload, sizeof(payload), MSG_DONTWAIT) < 0 && errno == EAGAIN,
	    "rejected datagram delivered");
	/*
	 * Per destination: exactly the rejected tuple, with its own count (the
	 * ICMP error the reject sends back is blocked too, but is no TCP/UDP
	 * tuple, so it is only in the total).
	 */
	T_OK(nft_blocked_read(ctx, "gensee_cnt", &bl, &nbl, &cause), cause);
	T_CHECK(nbl == 1 && bl[0].nb_family == AF_INET && bl[0].nb_proto == IPPROTO_UDP &&
	    bl[0].nb_port == p2 && memcmp(bl[0].nb_addr, "\x7f\0\0\1", 4) == 0 &&
	    bl[0].nb_packets == 2 && bl[0].nb_bytes == 2 * (20 + 8 + sizeof(payload)),
	    "blocked destinations: %zu, first port %u proto %u packets %" PRIu64 "; last port %u"
	    " proto %u packets %" PRIu64 " (want %u)", nbl,
	    nbl ? bl[0].nb_port : 0, nbl ? bl[0].nb_proto : 0, nbl ? bl[0].nb_packets : 0,
	    nbl ? bl[nbl - 1].nb_port : 0, nbl ? bl[nbl - 1].nb_proto : 0,
	    nbl ? bl[nbl - 1].nb_packets : 0, p2);
	free(bl);

	/* A refill (the next generation) keeps every count. */
	p.np_generation = 2;
	T_OK(nft_generation_refill(ctx, &p, &cause), cause);
	to.sin_port = htons(p2);
	T_CHECK(sendto(tx, payload, sizeof(payload), 0, (struct sockaddr *)&to,
	    sizeof(to)) == (ssize_t)sizeof(payload), "sendto: %s", strerror(errno));
	T_OK(nft_counters_read(ctx, "gensee_cnt", &c2, &cause), cause);
	T_CHECK(c2.nc_allowed_packets == 3 && c2.nc_blocked_packets >= c.nc_blocked_packets + 1,
	    "after refill: allowed %" PRIu64 " blocked %" PRIu64 " (before %" PRIu64 ")",
	    c2.nc_allowed_packets, c2.nc_blocked_packets, c.nc_blocked_packets);
	T_OK(nft_blocked_read(ctx, "gensee_cnt", &bl, &nbl, &cause), cause);
	T_CHECK(nbl == 1 && bl[0].nb_packets == 3, "after refill: %zu destinations, %" PRIu64
	    " packets", nbl, nbl ? bl[0].nb_packets : 0);
	free(bl);

	T_CHECK(nft_counters_read(ctx, "gensee_nosuch", &c, &cause) != 0,
	    "counters of a missing table");
	T_CHECK(nft_blocked_read(ctx, "gensee_nosuch", &bl, &nbl, &cause) != 0,
	    "blocked destinations of a missing table");
	close(s1);
	close(s2);
	close(tx);
	free(cause);
	nft_close(ctx);
	return 0;
}

START_TEST(test_counters)
{
	test_in_netns("counters", body_counters, NULL);
}
END_TEST

/*
 * More rejected destinations than a blocked set holds: the set stops at
 * NFT_BLOCKED_MAX, and every datagram past that is still rejected and still
 * in the total.
 */
static int
body_blocked_full(void *arg)
{
	struct nft_policy p = test_policy("gensee_full", "op_full", 1,
	    NFT_SUBJECT_SOURCE_ADDRESS, NFT_MODE_ALLOWLIST);
	enum { EXTRA = 50 };
	struct sockaddr_in to = { .sin_family = AF_INET };
	struct nft_counters c;
	struct nft_blocked *bl = NULL;
	size_t nbl = 0;
	struct nft_ctx *ctx;
	char *cause = NULL, payload[8] = "x";
	uint16_t last;
	int rx, tx;

	(void)arg;
	T_CHECK(test_lo_up() == 0, "lo up: %s", strerror(errno));
	T_CHECK(inet_pton(AF_INET, "127.0.0.1", p.np_src_addr) == 1, "inet_pton");
	T_OK(nft_open(&ctx, &cause), cause);
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);
	/* The last destination of the run has a listener: it must see nothing. */
	rx = test_bind_lo(SOCK_DGRAM, &last);
	tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	T_CHECK(rx >= 0 && tx >= 0, "sockets: %s", strerror(errno));
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < NFT_BLOCKED_MAX + EXTRA; i++) {
		uint16_t port = i == NFT_BLOCKED_MAX + EXTRA - 1 ? last :
		    (uint16_t)(last == 10000 + i ? 9999 : 10000 + i);
		to.sin_port = htons(port);
		T_CHECK(sendto(tx, payload, sizeof(payload), 0, (struct sockaddr *)&to,
		    sizeof(to)) == (ssize_t)sizeof(payload), "sendto %d: %s", i, strerror(errno));
	}
	T_CHECK(recv(rx, payload, sizeof(payload), MSG_DONTWAIT) < 0 && errno == EAGAIN,
	    "a datagram past the full set was delivered");
	T_OK(nft_blocked_read(ctx, "gensee_full", &bl, &nbl, &cause), cause);
	T_OK(nft_counters_read(ctx, "gensee_full", &c, &cause), cause);
	T_CHECK(nbl == NFT_BLOCKED_MAX, "%zu destinations recorded", nbl);
	T_CHECK(c.nc_blocked_packets >= NFT_BLOCKED_MAX + EXTRA, "blocked total %" PRIu64,
	    c.nc_blocked_packets);
	free(bl);
	close(rx);
	close(tx);
	nft_close(ctx);
	return 0;
}

START_TEST(test_blocked_full)
{
	test_in_netns("blocked_full", body_blocked_full, NULL);
}
END_TEST

/* In the cgroup: A connects, B is reset at once. Exit status says which failed. */
static int
test_cgroup_client(struct cgroup *cg, uint16_t a, uint16_t b, int fd)
{
	char msg[256] = "";
	char *cause = NULL;
	int64_t took;
	int err, rc = 0;

	/* The socket's cgroup is fixed when it is created: join first. */
	if (cgroup_attach(cg, getpid(), &cause) != 0) {
		snprintf(msg, sizeof(msg), "cgroup_attach: %s", cause);
		rc = 1;
	} else if ((err = test_connect(a, 3000, &took)) != 0) {
		snprintf(msg, sizeof(msg), "in cgroup, allowed port %u: %s", a, strerror(err));
		rc = 2;
	} else if ((err = test_connect(b, 3000, &took)) != ECONNREFUSED) {
		snprintf(msg, sizeof(msg), "in cgroup, blocked port %u: %s after %" PRId64 " ms",
		    b, err ? strerror(err) : "connected", took);
		rc = 3;
	} else if (took > 1000) {
		snprintf(msg, sizeof(msg), "reset took %" PRId64 " ms", took);
		rc = 4;
	}
	if (util_write_all(fd, msg, strlen(msg)) != 0)
		rc = 5;
	free(cause);
	return rc;
}

/* A real packet test: a cgroup allowlist on loopback. */
static int
body_packet(void *arg)
{
	struct test_cg *tc = arg;
	struct nft_policy p = test_policy("gensee_pkt", "op_pkt", 1, NFT_SUBJECT_CGROUP,
	    NFT_MODE_ALLOWLIST);
	struct nft_elem allow[1];
	struct nft_counters c;
	struct nft_ctx *ctx;
	char *cause = NULL, msg[256];
	uint16_t pa, pb;
	int la, lb, pfd[2], status, err, killed;
	int64_t took, deadline;
	ssize_t r;
	pid_t pid;

	T_CHECK(test_lo_up() == 0, "lo up: %s", strerror(errno));
	la = test_bind_lo(SOCK_STREAM, &pa);
	lb = test_bind_lo(SOCK_STREAM, &pb);
	T_CHECK(la >= 0 && lb >= 0, "listeners: %s", strerror(errno));
	allow[0] = test_elem("127.0.0.1", "127.0.0.1", IPPROTO_TCP, pa, pa);
	p.np_cgroup_id = tc->tc_cg.cg_id;
	p.np_cgroup_level = tc->tc_level;
	p.np_allow = allow;
	p.np_nallow = 1;
	T_OK(nft_open(&ctx, &cause), cause);
	T_OK(nft_generation_commit(ctx, &p, &cause), cause);

	T_CHECK(pipe2(pfd, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	T_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(pfd[0]);
		_exit(test_cgroup_client(&tc->tc_cg, pa, pb, pfd[1]));
	}
	close(pfd[1]);
	/* The client's connects take at most 3 s each. */
	deadline = util_monotonic_ms() + 10000;
	r = test_read_until(pfd[0], msg, sizeof(msg), deadline);
	close(pfd[0]);
	status = test_reap(pid, deadline, &killed);
	T_CHECK(r >= 0 && !killed, "client in cgroup timed out: %s", msg);
	T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "client in cgroup: %s (%d)",
	    msg, status);

	/* Outside the cgroup the policy does not apply. */
	err = test_connect(pb, 3000, &took);
	T_CHECK(err == 0, "outside the cgroup, port %u: %s", pb, strerror(err));

	T_OK(nft_counters_read(ctx, "gensee_pkt", &c, &cause), cause);
	T_CHECK(c.nc_allowed_packets >= 2 && c.nc_blocked_packets >= 1,
	    "counters: allowed %" PRIu64 " blocked %" PRIu64, c.nc_allowed_packets,
	    c.nc_blocked_packets);
	close(la);
	close(lb);
	nft_close(ctx);
	return 0;
}

START_TEST(test_packet_cgroup)
{
	struct test_cg tc;
	char msg[TEST_ERR_MAX + 128];
	int rc;

	test_need_env();
	ck_assert_msg(test_cg_create(&tc, msg, sizeof(msg)) == 0, "%s", msg);
	rc = test_netns_run("packet", body_packet, &tc, msg, sizeof(msg));
	test_cg_remove(&tc);
	ck_assert_msg(rc == 0, "%s", msg);
}
END_TEST

/* nft_policy_text on its own: shape, CIDR and range printing, refusals. */
START_TEST(test_policy_text)
{
	struct nft_elem allow[] = {
		test_elem("192.0.2.0", "192.0.2.255", IPPROTO_TCP, 443, 443),
		test_elem("192.0.2.1", "192.0.2.9", IPPROTO_UDP, 53, 60),
		test_elem("2001:db8::", "2001:db8::ff", IPPROTO_TCP, 1, 2),
	};
	struct nft_policy p = test_policy("gensee_txt", "op_txt", 9, NFT_SUBJECT_CGROUP,
	    NFT_MODE_ALLOWLIST);
	char *t;

	p.np_allow = allow;
	p.np_nallow = nitems(allow);
	ck_assert_ptr_null(nft_policy_text(&p, NULL));
	ck_assert_ptr_null(nft_policy_text(&p, "gensee/\"x"));
	t = nft_policy_text(&p, "gensee/op_x");
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_nonnull(strstr(t, "table inet gensee_txt\ndelete table inet gensee_txt\n"
	    "table inet gensee_txt {\n\tcomment \"gen=9;owner=op_txt\"\n"));
	ck_assert_ptr_nonnull(strstr(t, "elements = { 192.0.2.0/24 . tcp . 443,\n"
	    "\t\t\t     192.0.2.1-192.0.2.9 . udp . 53-60 }"));
	ck_assert_ptr_nonnull(strstr(t, "elements = { 2001:db8::/120 . tcp . 1-2 }"));
	ck_assert_ptr_nonnull(strstr(t, "socket cgroupv2 level 2 \"gensee/op_x\" jump envelope"));
	ck_assert_ptr_null(strstr(t, "accept\n\t\tjump blocked\n\t\tcounter"));
	ck_assert_ptr_nonnull(strstr(t, "\t\tmeta nfproto ipv6 meta l4proto udp update @blocked6 "
	    "{ ip6 daddr . meta l4proto . th dport counter }\n"));
	ck_assert_ptr_nonnull(strstr(t, "\tcounter blocked {\n\t}\n"));
	free(t);
	p.np_mode = NFT_MODE_DENYLIST;
	p.np_subject = NFT_SUBJECT_SOURCE_ADDRESS;
	t = nft_policy_text(&p, NULL);
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_nonnull(strstr(t, "\t\tip saddr 192.0.2.99 jump envelope\n"));
	/* Monitor: grants accept, the rest is counted per destination and accepted. */
	ck_assert_ptr_nonnull(strstr(t, "@allow6 counter name \"allowed\" accept\n"
	    "\t\tmeta nfproto ipv4 meta l4proto tcp update @blocked4 "));
	ck_assert_ptr_nonnull(strstr(t, "{ ip6 daddr . meta l4proto . th dport counter }\n"
	    "\t\tcounter name \"allowed\" accept\n\t}\n"));
	ck_assert_ptr_null(strstr(t, "accept\n\t\tjump blocked"));
	free(t);
}
END_TEST

/* The suite: kernel tests (root, private netns) and the pure text test. */
static Suite *
test_nft_suite(void)
{
	Suite *s = suite_create("nft");
	TCase *k = tcase_create("kernel");
	TCase *txt = tcase_create("text");

	tcase_set_timeout(k, 300);
	tcase_add_test(k, test_commit_lists);
	tcase_add_test(k, test_equivalence);
	tcase_add_test(k, test_replace_generation);
	tcase_add_test(k, test_many_elements);
	tcase_add_test(k, test_elements_update);
	tcase_add_test(k, test_refill);
	tcase_add_test(k, test_timeout);
	tcase_add_test(k, test_bad_batch);
	tcase_add_test(k, test_tables_list);
	tcase_add_test(k, test_table_delete);
	tcase_add_test(k, test_counters);
	tcase_add_test(k, test_blocked_full);
	tcase_add_test(k, test_packet_cgroup);
	suite_add_tcase(s, k);
	tcase_add_test(txt, test_policy_text);
	suite_add_tcase(s, txt);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(test_nft_suite());
	int failures;

	if (geteuid() != 0)
		fprintf(stderr, "test_nft: not root: every kernel test will fail; run the unit "
		    "suite as root\n");
	srunner_run_all(sr, CK_NORMAL);
	failures = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failures ? 1 : 0;
}
