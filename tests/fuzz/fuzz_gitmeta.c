/*
 * fuzz_gitmeta.c: what tcloned and the launcher read from a repository an
 * agent controls: core.hooksPath out of a .git/config text
 * (lib/mountview.c), and whether a path is repository metadata a merge
 * skips (lib/snapshot.c). The hooks path is always NUL-terminated within
 * its buffer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mountview.h"
#include "snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), out[64];

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	(void)snapshot_git_metadata(text);
	memset(out, 'x', sizeof(out));
	mountview_git_hookspath_in(text, out, sizeof(out));
	if (memchr(out, '\0', sizeof(out)) == NULL)
		abort();
	free(text);
	return 0;
}
