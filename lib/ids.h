/*
 * ids.h: random identifiers (libsodium) and their exact syntax.
 */
#ifndef GENSEE_IDS_H
#define GENSEE_IDS_H

#include <stddef.h>

#define ID_RANDOM_BYTES 16
/* prefix (up to 7 chars) + 32 hex digits + NUL */
#define ID_MAX_LEN 48
/* any operation id, including an administrator-named one, + NUL */
#define OP_ID_MAX 72

int ids_init(void);
/* Write prefix + 32 lowercase hex digits from the kernel CSPRNG. */
int ids_new(const char *prefix, char *out, size_t outlen);
/*
 * 1 when s is exactly prefix + 32 lowercase hex digits. Every id that came
 * from a peer is checked with this before it names a file or a cgroup, so an
 * id can never carry "/" or "..".
 */
int ids_valid(const char *prefix, const char *s);

/*
 * Operation ids: the random "op_" + 32 hex form, or an administrator's
 * "op_" + 1..60 of [a-z0-9_-] from a root-owned network config. Both are
 * safe as one path component.
 */
int ids_valid_operation(const char *s);

#endif
