/* hashslot.h - which of Redis Cluster's 16384 slots a key belongs to.
 *
 * As Redis's cluster.c keyHashSlot: CRC16 (XMODEM: polynomial 0x1021, init
 * 0, no reflection; Redis's crc16.c) of the key, or of its hash tag, modulo
 * 16384. The hash tag is what lies between the first '{' and the first '}'
 * after it, when that is not empty; otherwise the whole key is hashed
 * ("{}a" and "a{" hash whole; "{a}{b}" hashes "a"; "{{a}}" hashes "{a").
 * Keys are bytes: NUL and any other byte are hashed as they are.
 *
 * Pure, no allocation: the router calls it once per key. */
#ifndef VP_HASHSLOT_H
#define VP_HASHSLOT_H

#include <stddef.h>
#include <stdint.h>

#define HASHSLOT_COUNT 16384

uint16_t hashslot_crc16(const char *buf, size_t len);
/* The slot of a key, 0..HASHSLOT_COUNT-1. */
int hashslot_of(const char *key, size_t len);

#endif
