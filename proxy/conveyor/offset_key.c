/* offset_key.c - the slot tags and the offset key's name (offset_key.h). */
#include "proxy/conveyor/offset_key.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/route/hashslot.h"

static const char tag_alphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
#define TAG_LETTERS 62

static char tags[HASHSLOT_COUNT][4];
static int tags_ready;

/* Every string of `len` letters in order, each setting the tag of its slot
 * if that has none yet. */
static void tags_fill(int len)
{
    int idx[3] = {0, 0, 0};
    for (;;) {
        char s[4];
        for (int i = 0; i < len; i++)
            s[i] = tag_alphabet[idx[i]];
        s[len] = '\0';
        int slot = hashslot_of(s, (size_t)len);
        if (!tags[slot][0]) memcpy(tags[slot], s, (size_t)len + 1);
        int i = len - 1; /* the last letter turns fastest */
        while (i >= 0 && ++idx[i] == TAG_LETTERS)
            idx[i--] = 0;
        if (i < 0) return;
    }
}

static void tags_build(void)
{
    for (int len = 1; len <= 3; len++)
        tags_fill(len);
    for (int s = 0; s < HASHSLOT_COUNT; s++) {
        if (!tags[s][0]) {
            /* Three letters reach every slot (checked by unit/test_offset_key). */
            fprintf(stderr, "verbproxy: no slot tag for slot %d\n", s);
            abort();
        }
    }
    tags_ready = 1;
}

const char *offset_key_tag(int slot)
{
    if (!tags_ready) tags_build();
    return tags[slot];
}

size_t offset_key_head(const char *key, size_t len, char *head)
{
    const char *tag = offset_key_tag(hashslot_of(key, len));
    size_t n = sizeof(OFFSET_KEY_PREFIX) - 1, tl = strlen(tag);
    memcpy(head, OFFSET_KEY_PREFIX, n);
    memcpy(head + n, tag, tl);
    n += tl;
    head[n++] = '}';
    head[n++] = ':';
    return n;
}
