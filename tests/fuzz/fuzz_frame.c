/*
 * fuzz_frame.c: the frame decoder on arbitrary bytes, both the flat and the
 * evbuffer paths, which must agree.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <json-c/json.h>

#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_object *a = NULL, *b = NULL;
	size_t used = 0;
	int ra, rb;

	ra = frame_decode(data, size, 64 * 1024, &a, &used);
	if (ra == FRAME_OK && (used > size || !json_object_is_type(a, json_type_object)))
		abort();

	struct evbuffer *ev = evbuffer_new();
	/* Feed in two pieces to exercise incremental decoding. */
	size_t half = size / 2;
	evbuffer_add(ev, data, half);
	rb = frame_decode_evbuffer(ev, 64 * 1024, &b);
	if (rb == FRAME_NEED_MORE) {
		evbuffer_add(ev, data + half, size - half);
		rb = frame_decode_evbuffer(ev, 64 * 1024, &b);
	} else if (rb == FRAME_OK) {
		/* The first half already held a whole frame: so must the whole. */
		if (ra != FRAME_OK)
			abort();
	}
	if ((ra == FRAME_OK) != (rb == FRAME_OK))
		abort();
	if (ra == FRAME_OK && !json_object_equal(a, b))
		abort();
	evbuffer_free(ev);
	json_object_put(a);
	json_object_put(b);
	return 0;
}
