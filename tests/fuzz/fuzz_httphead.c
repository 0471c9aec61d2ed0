/*
 * fuzz_httphead.c: strict request framing (lib/httphead.c) on arbitrary
 * bytes. An accepted head must end with CRLF CRLF inside the input, hold
 * no bare LF or CR, and stay accepted with the same length when more bytes
 * follow it (the mediator's filter sees heads with their bodies behind); a
 * refusal is 400 or 431 with a code. The chunk-size and trailer readers
 * run on the first line.
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
	int status = 0, rc;
	uint64_t n;

	rc = httphead_check(buf, size, 4096, &h, &status, &code);
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
	nl = memchr(buf, '\n', size);
	(void)httphead_chunk_size(buf, nl ? (size_t)(nl - buf) : size, &n, &code);
	if (size > 0)
		(void)httphead_trailer_line(buf, nl && nl > buf ? (size_t)(nl - buf) : size, &code);
	return 0;
}
