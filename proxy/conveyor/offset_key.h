/* offset_key.h - the name of the key that holds a conveyor key's offset.
 *
 * A conveyor key K (docs/conveyor.md) stores score = position - offset;
 * the offset is a string (the double as %.17g) in
 *
 *     verbproxy-offset:{T}:K
 *
 * where T is the slot tag of K's hash slot: a short string of letters and
 * digits whose own slot is K's. So the offset key hashes to K's slot
 * whatever K's name (a hash tag of its own or none, braces anywhere),
 * which a script that touches both needs in Redis Cluster, and which keeps
 * the two together when a slot migrates. T is the first of the strings
 * "0".."9", "A".."Z", "a".."z", then their two- and three-character
 * combinations in that order, whose CRC16 gives the slot: a fixed
 * function, the same in every version of the proxy (changing it would
 * lose every offset already stored). The name is one-to-one: T has no
 * braces, so the first '}' ends it and K is what follows ":" after it.
 *
 * Pure: no allocation beyond a table of the 16384 tags built on first use. */
#ifndef VP_OFFSET_KEY_H
#define VP_OFFSET_KEY_H

#include <stddef.h>

#define OFFSET_KEY_PREFIX "verbproxy-offset:{"
/* The most the name adds to K: the prefix, a tag of up to 3, "}:". */
#define OFFSET_KEY_EXTRA (sizeof(OFFSET_KEY_PREFIX) - 1 + 3 + 2)

/* The tag of a slot (0..16383), NUL-terminated. */
const char *offset_key_tag(int slot);

/* Writes the name's part before K ("verbproxy-offset:{T}:") to head
 * (OFFSET_KEY_EXTRA bytes at least) and returns its length: the name is
 * head followed by the key's bytes. */
size_t offset_key_head(const char *key, size_t len, char *head);

#endif
