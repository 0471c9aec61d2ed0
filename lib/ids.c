/*
 * ids.c: random identifiers.
 */
#include <string.h>

#include <sodium.h>

#include "ids.h"

int
ids_init(void)
{
	return sodium_init() < 0 ? -1 : 0;
}

int
ids_new(const char *prefix, char *out, size_t outlen)
{
	unsigned char raw[ID_RANDOM_BYTES];
	size_t plen = strlen(prefix);

	if (outlen < plen + 2 * ID_RANDOM_BYTES + 1)
		return -1;
	randombytes_buf(raw, sizeof(raw));
	memcpy(out, prefix, plen);
	sodium_bin2hex(out + plen, outlen - plen, raw, sizeof(raw));
	sodium_memzero(raw, sizeof(raw));
	return 0;
}

int
ids_valid(const char *prefix, const char *s)
{
	size_t plen = strlen(prefix);

	if (s == NULL || strncmp(s, prefix, plen) != 0 || strlen(s) != plen + 2 * ID_RANDOM_BYTES)
		return 0;
	for (const char *p = s + plen; *p != '\0'; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return 1;
}

int
ids_valid_operation(const char *s)
{
	size_t n;

	if (s == NULL || strncmp(s, "op_", 3) != 0)
		return 0;
	n = strlen(s + 3);
	if (n == 0 || n > 60)
		return 0;
	for (const char *p = s + 3; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
			return 0;
	return 1;
}
