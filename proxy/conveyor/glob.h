/* glob.h - Redis's glob-style patterns (KEYS, SCAN MATCH, PSUBSCRIBE): `*`,
 * `?`, `[abc]`, `[^a-z]`, and `\` quoting the next character. The same
 * function as Redis's util.c stringmatchlen, so a `conveyor` pattern
 * matches exactly the keys `KEYS pattern` lists. */
#ifndef VP_GLOB_H
#define VP_GLOB_H

#include <stddef.h>

/* 1 if `string` (len bytes, any bytes) matches the NUL-terminated
 * pattern, else 0. Case matters. */
int glob_match(const char *pattern, const char *string, size_t len);

#endif
