/* offset_cache.c - the offsets last seen, by key (offset_cache.h). */
#include "proxy/conveyor/offset_cache.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/buffer.h"

static offset_cache_slot *oc_slot(const offset_cache *c, const char *key, size_t klen)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < klen; i++)
        h = (h ^ (unsigned char)key[i]) * 1099511628211ULL;
    return &c->slots[h % OFFSET_CACHE_SLOTS];
}

int offset_cache_get(const offset_cache *c, const char *key, size_t klen, const char **text, size_t *len)
{
    if (!c->slots) return 0;
    const offset_cache_slot *s = oc_slot(c, key, klen);
    if (!s->key || s->klen != klen || memcmp(s->key, key, klen) != 0) return 0;
    *text = s->present ? s->text : NULL;
    *len = s->present ? s->tlen : 0;
    return 1;
}

void offset_cache_put(offset_cache *c, const char *key, size_t klen, const char *text, size_t len)
{
    if (!c->slots) {
        c->slots = calloc(OFFSET_CACHE_SLOTS, sizeof(*c->slots));
        if (!c->slots) abort();
    }
    offset_cache_slot *s = oc_slot(c, key, klen);
    if (text && len >= OFFSET_CACHE_TEXT) {
        free(s->key); /* (not kept: nor is whatever the slot knew) */
        memset(s, 0, sizeof(*s));
        return;
    }
    if (!s->key || s->klen != klen || memcmp(s->key, key, klen) != 0) {
        if (klen + 1 > s->kcap) {
            s->kcap = klen + 1;
            s->key = vp_realloc(s->key, s->kcap);
        }
        memcpy(s->key, key, klen);
        s->klen = klen;
    }
    s->present = text != NULL;
    s->tlen = (unsigned char)(text ? len : 0);
    if (text) memcpy(s->text, text, len);
}

void offset_cache_free(offset_cache *c)
{
    if (c->slots)
        for (int i = 0; i < OFFSET_CACHE_SLOTS; i++)
            free(c->slots[i].key);
    free(c->slots);
    c->slots = NULL;
}
