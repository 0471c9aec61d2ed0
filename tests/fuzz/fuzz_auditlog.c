/*
 * fuzz_auditlog.c: the Landlock audit reader (lib/auditlog.c) on arbitrary
 * datagrams: the first byte picks the record type of the text that follows
 * (as auditlog_feed sees it), and the whole input is also parsed as netlink
 * messages. Every completed denial must be NUL-terminated within its
 * fields, and the pending table never passes its bound.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auditlog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(const struct auditlog_denial *d, void *arg)
{
	(void)arg;
	if (memchr(d->ad_blockers, '\0', sizeof(d->ad_blockers)) == NULL ||
	    memchr(d->ad_object, '\0', sizeof(d->ad_object)) == NULL ||
	    memchr(d->ad_exe, '\0', sizeof(d->ad_exe)) == NULL ||
	    memchr(d->ad_domain, '\0', sizeof(d->ad_domain)) == NULL || !d->ad_access ||
	    d->ad_pid < 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned types[] = { AUDITLOG_ACCESS, AUDITLOG_DOMAIN, AUDITLOG_SYSCALL,
		AUDITLOG_EOE };
	struct auditlog *al = malloc(sizeof(*al));

	if (al == NULL || size == 0) {
		free(al);
		return 0;
	}
	auditlog_init(al);
	/* Records split at '\n', each typed by its first byte. */
	size_t off = 0;
	while (off < size) {
		const uint8_t *nl = memchr(data + off, '\n', size - off);
		size_t end = nl ? (size_t)(nl - data) : size;
		if (end > off)
			(void)auditlog_feed(al, types[data[off] % 4], (const char *)data + off + 1,
			    end - off - 1, (int64_t)off, check, NULL);
		if (al->al_npend > AUDITLOG_PENDING)
			abort();
		off = end + 1;
	}
	auditlog_expire(al, 0, -1, check, NULL);
	if (al->al_npend != 0)
		abort();
	(void)auditlog_parse(al, data, size, 0, check, NULL);
	auditlog_expire(al, 0, -1, check, NULL);
	free(al);
	return 0;
}
