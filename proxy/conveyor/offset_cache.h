/* offset_cache.h - the offset each conveyor key held when the proxy last
 * read it (in a wrapped read's transaction: conveyor_wrap.h), so a score
 * range read can be written with the offset it will most likely meet.
 *
 * A guess, never trusted: the read that uses it is checked against the
 * offset in the same transaction, and a wrong guess costs a script, not a
 * wrong answer. Hence a small table with no invalidation: a slot per hash
 * of the key's name (OFFSET_CACHE_SLOTS of them), the newest key in it
 * wins. Offsets longer than OFFSET_CACHE_TEXT (only one written by hand)
 * are not kept. One per event loop; allocates only for a longer key name
 * than its slot held. */
#ifndef VP_OFFSET_CACHE_H
#define VP_OFFSET_CACHE_H

#include <stddef.h>

#define OFFSET_CACHE_SLOTS 1024
#define OFFSET_CACHE_TEXT 48 /* %.17g of any double fits */

typedef struct offset_cache_slot {
    char *key; /* owned; NULL: empty */
    size_t klen, kcap;
    unsigned char present; /* the key had an offset: text (else none) */
    unsigned char tlen;
    char text[OFFSET_CACHE_TEXT];
} offset_cache_slot;

typedef struct offset_cache {
    offset_cache_slot *slots; /* OFFSET_CACHE_SLOTS, made on first put */
} offset_cache;

/* The offset last seen for key: 1 with *text, *len (*text NULL: the key had
 * none), 0 when none is known. *text stays valid until the next put. */
int offset_cache_get(const offset_cache *c, const char *key, size_t klen, const char **text, size_t *len);

/* Note what key's offset key held: text (NULL: no offset). */
void offset_cache_put(offset_cache *c, const char *key, size_t klen, const char *text, size_t len);

void offset_cache_free(offset_cache *c);

#endif
