/*
 * fuzz_proccn.c: the proc connector datagram parser on arbitrary bytes,
 * at the address libFuzzer gives and again at an odd one (the parser must
 * copy structs out, never cast into the buffer), with the same result.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proccn.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Check what one parse returned. */
static void
fuzz_check(int rc, int err, const struct proccn_event *v, size_t n, size_t max)
{
	if (n > max)
		abort();
	if (rc != 0 && (rc != -1 || (err != EBADMSG && err != ENOSPC)))
		abort();
	for (size_t i = 0; i < n; i++) {
		switch (v[i].pe_type) {
		case PROCCN_FORK:
		case PROCCN_EXEC:
		case PROCCN_EXIT:
			break;
		case PROCCN_LOST:
		default:
			abort();	/* only the reader reports losses */
		}
		if (v[i].pe_type == PROCCN_EXEC && (v[i].pe_parent_pid || v[i].pe_parent_tgid))
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proccn_event v[8], w[8];
	size_t n = 0, m = 0;
	uint8_t *odd;
	int rc, rc2, err, err2;

	errno = 0;
	rc = proccn_parse(data, size, v, nitems(v), &n);
	err = errno;
	fuzz_check(rc, err, v, n, nitems(v));

	if ((odd = malloc(size + 1)) == NULL)
		return 0;
	memcpy(odd + 1, data, size);
	errno = 0;
	rc2 = proccn_parse(odd + 1, size, w, nitems(w), &m);
	err2 = errno;
	free(odd);
	if (rc2 != rc || m != n || (rc != 0 && err2 != err))
		abort();
	for (size_t i = 0; i < n; i++)
		if (v[i].pe_type != w[i].pe_type || v[i].pe_pid != w[i].pe_pid ||
		    v[i].pe_tgid != w[i].pe_tgid || v[i].pe_parent_pid != w[i].pe_parent_pid ||
		    v[i].pe_parent_tgid != w[i].pe_parent_tgid ||
		    v[i].pe_exit_code != w[i].pe_exit_code ||
		    v[i].pe_exit_signal != w[i].pe_exit_signal ||
		    v[i].pe_timestamp_ns != w[i].pe_timestamp_ns)
			abort();

	/* A caller with room for one event gets the first of them. */
	rc2 = proccn_parse(data, size, w, 1, &m);
	if (m > 1 || (n > 0 && m != 1) || (n > 1 && rc2 == 0))
		abort();
	return 0;
}
