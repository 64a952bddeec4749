/* hashslot.c - CRC16/XMODEM and Redis Cluster's hash tags (hashslot.h). */
#include "proxy/route/hashslot.h"

#include <string.h>

/* The CRC16/XMODEM table (polynomial 0x1021), built at first use rather
 * than typed in: 256 entries of a 16-bit shift register, the same values as
 * Redis's crc16.c table (the unit test checks the standard check value,
 * "123456789" -> 0x31C3, and thousands of keys against CLUSTER KEYSLOT). */
static uint16_t table[256];
static int table_ready;

static void build_table(void)
{
    for (int i = 0; i < 256; i++) {
        uint16_t crc = (uint16_t)(i << 8);
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
        table[i] = crc;
    }
    table_ready = 1;
}

uint16_t hashslot_crc16(const char *buf, size_t len)
{
    if (!table_ready) build_table(); /* idempotent: a race writes the same values */
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++)
        crc = (uint16_t)((crc << 8) ^ table[((crc >> 8) ^ (unsigned char)buf[i]) & 0xff]);
    return crc;
}

int hashslot_of(const char *key, size_t len)
{
    /* (memchr: every command's key is scanned; a byte loop cost half as
     * much again as the CRC) */
    const char *open = len ? memchr(key, '{', len) : NULL;
    if (!open) return hashslot_crc16(key, len) & (HASHSLOT_COUNT - 1);
    size_t s = (size_t)(open - key);
    const char *close = memchr(open + 1, '}', len - s - 1);
    /* no '}' after the '{', or "{}": the whole key */
    if (!close || close == open + 1) return hashslot_crc16(key, len) & (HASHSLOT_COUNT - 1);
    return hashslot_crc16(open + 1, (size_t)(close - open - 1)) & (HASHSLOT_COUNT - 1);
}
