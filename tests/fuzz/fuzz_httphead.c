/*
 * fuzz_httphead.c: strict request framing (lib/httphead.c) on arbitrary
 * bytes. An accepted head must end with CRLF CRLF inside the input, hold
 * no bare LF or CR, and stay accepted with the same length when more bytes
 * follow it (the mediator's framing check sees heads with their bodies behind); a
 * refusal is 400 or 431 with a code; read in two parts
 * (httphead_check_from) the verdict is the same. The chunk-size and
 * trailer readers run on the first line.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "httphead.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *code = NULL, *nl;
	struct httphead h, h2;
	const char *rcode;
	int status = 0, rstatus, rc;
	uint64_t n;

	rc = httphead_check(buf, size, 4096, &h, &status, &code);
	rstatus = status;
	rcode = code;
	if (rc == 1) {
		if (code != NULL || h.hh_len < 4 || h.hh_len > size ||
		    memcmp(buf + h.hh_len - 4, "\r\n\r\n", 4) != 0)
			abort();
		for (size_t i = 0; i < h.hh_len; i++)
			if ((buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r')) ||
			    (buf[i] == '\r' && buf[i + 1] != '\n'))
				abort();
		if (h.hh_chunked && h.hh_content_length != 0)
			abort();
		if (httphead_check(buf, h.hh_len, 4096, &h2, &status, &code) != 1 ||
		    h2.hh_len != h.hh_len)
			abort();
	} else if (rc == -1) {
		if (code == NULL || (status != 400 && status != 431))
			abort();
	} else if (rc != 0) {
		abort();
	}
	/* Read in two parts, the same verdict (httphead_check_from). */
	if (httphead_check(buf, size / 2, 4096, &h2, &status, &code) == 0) {
		const char *c2 = NULL;
		int s2 = 0;
		if (httphead_check_from(buf, size, size / 2, 4096, &h2, &s2, &c2) != rc ||
		    (rc == 1 && h2.hh_len != h.hh_len) || (rc == -1 && (s2 != rstatus ||
		    strcmp(c2, rcode) != 0)))
			abort();
	}
	nl = memchr(buf, '\n', size);
	(void)httphead_chunk_size(buf, nl ? (size_t)(nl - buf) : size, &n, &code);
	if (size > 0)
		(void)httphead_trailer_line(buf, nl && nl > buf ? (size_t)(nl - buf) : size, &code);
	return 0;
}
