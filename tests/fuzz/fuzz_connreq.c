/*
 * fuzz_connreq.c: the CONNECT egress's request head on arbitrary bytes.
 * What parses holds what the mediator relies on: a valid lower-case DNS
 * name that is not an address literal, a port of 1-65535, and exactly
 * one Proxy-Authorization header decoding to the expected credential.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "connreq.h"
#include "netpolicy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct connreq cr;
	const char *code = NULL;
	int status = 0, fam;
	uint8_t a[16];
	unsigned char out[64];
	size_t n;

	(void)connreq_b64decode((const char *)data, size, out, sizeof(out), &n);
	if (connreq_parse((const char *)data, size, "gensee:x", &cr, &status, &code) != 0) {
		if (code == NULL || (status != 400 && status != 403 && status != 405 && status != 407))
			abort();
		return 0;
	}
	if (!dnsmsg_valid_name(cr.cr_host) || cr.cr_port == 0 ||
	    netpolicy_parse_addr(cr.cr_host, &fam, a) == 0 ||
	    ((strrchr(cr.cr_host, '.') ? strrchr(cr.cr_host, '.')[1] : cr.cr_host[0]) >= '0' &&
	    (strrchr(cr.cr_host, '.') ? strrchr(cr.cr_host, '.')[1] : cr.cr_host[0]) <= '9') ||
	    memmem(data, size, "Z2Vuc2VlOng=", 12) == NULL)	/* base64("gensee:x") */
		abort();
	return 0;
}
