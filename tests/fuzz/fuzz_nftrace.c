/*
 * fuzz_nftrace.c: the nftables trace parser on arbitrary bytes. Messages
 * reach libnftnl only after our own checks, so nothing here may make it
 * exit (abi_breakage), read past a name or leak; the same bytes at an odd
 * address must parse the same way.
 */
#include <sys/socket.h>

#include <netinet/in.h>

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nftrace.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Check the invariants of one event. */
static void
fuzz_check_event(const struct nftrace_event *e)
{
	static const uint8_t zero[16];
	size_t alen;

	if (memchr(e->te_table, '\0', sizeof(e->te_table)) == NULL ||
	    memchr(e->te_chain, '\0', sizeof(e->te_chain)) == NULL || e->te_lost)
		abort();
	switch (e->te_family) {
	case AF_UNSPEC:
		if (memcmp(e->te_saddr, zero, 16) != 0 || memcmp(e->te_daddr, zero, 16) != 0 ||
		    e->te_proto != 0 || e->te_sport != 0 || e->te_dport != 0)
			abort();
		return;
	case AF_INET:
		alen = 4;
		break;
	case AF_INET6:
		alen = 16;
		break;
	default:
		abort();
	}
	if (memcmp(e->te_saddr + alen, zero, 16 - alen) != 0 ||
	    memcmp(e->te_daddr + alen, zero, 16 - alen) != 0)
		abort();
	if (e->te_proto != IPPROTO_TCP && e->te_proto != IPPROTO_UDP &&
	    (e->te_sport != 0 || e->te_dport != 0))
		abort();
	/* A table name is matched exactly, and only by itself. */
	if (e->te_table[0] != '\0' && !nftrace_table_matches(e, e->te_table))
		abort();
}

/* Whether two parsed events are the same. */
static int
fuzz_same(const struct nftrace_event *a, const struct nftrace_event *b)
{
	return strcmp(a->te_table, b->te_table) == 0 && strcmp(a->te_chain, b->te_chain) == 0 &&
	    a->te_type == b->te_type && a->te_id == b->te_id && a->te_family == b->te_family &&
	    memcmp(a->te_saddr, b->te_saddr, 16) == 0 &&
	    memcmp(a->te_daddr, b->te_daddr, 16) == 0 && a->te_proto == b->te_proto &&
	    a->te_sport == b->te_sport && a->te_dport == b->te_dport &&
	    a->te_has_verdict == b->te_has_verdict && a->te_verdict == b->te_verdict;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nftrace_event v[8], w[8];
	size_t n = 0, m = 0;
	uint8_t *odd;
	int rc, rc2, err, err2;

	errno = 0;
	rc = nftrace_parse(data, size, v, nitems(v), &n);
	err = errno;
	if (n > nitems(v) ||
	    (rc != 0 && (rc != -1 || (err != EBADMSG && err != ENOSPC && err != ENOMEM))))
		abort();
	for (size_t i = 0; i < n; i++)
		fuzz_check_event(&v[i]);

	if ((odd = malloc(size + 1)) == NULL)
		return 0;
	memcpy(odd + 1, data, size);
	errno = 0;
	rc2 = nftrace_parse(odd + 1, size, w, nitems(w), &m);
	err2 = errno;
	free(odd);
	if (rc2 != rc || m != n || (rc != 0 && err2 != err))
		abort();
	for (size_t i = 0; i < n; i++)
		if (!fuzz_same(&v[i], &w[i]))
			abort();
	return 0;
}
