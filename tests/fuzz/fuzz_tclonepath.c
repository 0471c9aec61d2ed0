/*
 * fuzz_tclonepath.c: the path rules of merge --paths (snapshot_path_rel)
 * on arbitrary input. Input: WORKSPACE "\n" PATH. Never crashes, and an
 * accepted path is relative, has no empty, "." or ".." component, fits
 * the buffer, and is a fixed point (accepting it again gives itself).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf, *nl, rel[256], again[256], *cause = NULL;
	const char *ws = "/w", *path;

	if (size > 4096)
		return 0;
	buf = malloc(size + 1);
	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	nl = strchr(buf, '\n');
	if (nl != NULL) {
		*nl = '\0';
		ws = buf;
		path = nl + 1;
	} else {
		path = buf;
	}
	if (snapshot_path_rel(ws, path, rel, sizeof(rel), &cause) == 0) {
		size_t n = strlen(rel);
		if (n == 0 || n >= sizeof(rel) || rel[0] == '/' || rel[n - 1] == '/' ||
		    strstr(rel, "//") != NULL)
			abort();
		for (char *c = rel; c != NULL; c = strchr(c, '/')) {
			if (*c == '/')
				c++;
			if ((c[0] == '.' && (c[1] == '/' || c[1] == '\0')) ||
			    (c[0] == '.' && c[1] == '.' && (c[2] == '/' || c[2] == '\0')))
				abort();
		}
		if (snapshot_path_rel(ws, rel, again, sizeof(again), &cause) != 0 ||
		    strcmp(rel, again) != 0)
			abort();
	}
	free(cause);
	free(buf);
	return 0;
}
