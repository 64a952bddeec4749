/* glob.c - Redis's stringmatchlen (src/util.c, Redis 7.4.1), kept as it is
 * apart from names and types: the same matches, the same nesting limit
 * against abusive patterns (1000), and the same early stop once a '*'
 * has tried every position (which keeps "a*a*a*a*b" from going
 * exponential). Case-sensitive only: Redis's KEYS is.
 *
 * Copyright (c) 2009-2012, Salvatore Sanfilippo <antirez at gmail dot com>
 * All rights reserved. Redistribution and use in source and binary forms,
 * with or without modification, are permitted under the three-clause BSD
 * license that Redis 7.4's util.c carries. */
#include "proxy/conveyor/glob.h"

static int glob_impl(const char *pattern, size_t plen, const char *string, size_t slen, int *skip_longer,
                     int nesting)
{
    if (nesting > 1000) return 0;
    while (plen && slen) {
        switch (pattern[0]) {
        case '*':
            while (plen > 1 && pattern[1] == '*') {
                pattern++;
                plen--;
            }
            if (plen == 1) return 1;
            while (slen) {
                if (glob_impl(pattern + 1, plen - 1, string, slen, skip_longer, nesting + 1)) return 1;
                if (*skip_longer) return 0;
                string++;
                slen--;
            }
            /* Nothing after this '*' matches from any position: a longer
             * match for an earlier '*' cannot help either. */
            *skip_longer = 1;
            return 0;
        case '?':
            string++;
            slen--;
            break;
        case '[': {
            pattern++;
            plen--;
            int not = plen && pattern[0] == '^';
            if (not ) {
                pattern++;
                plen--;
            }
            int match = 0;
            for (;;) {
                if (plen >= 2 && pattern[0] == '\\') {
                    pattern++;
                    plen--;
                    if (pattern[0] == string[0]) match = 1;
                } else if (plen == 0) {
                    /* An unclosed '[': Redis steps back so the loop's
                     * advance below lands on the end. */
                    pattern--;
                    plen++;
                    break;
                } else if (pattern[0] == ']') {
                    break;
                } else if (plen >= 3 && pattern[1] == '-') {
                    unsigned char start = (unsigned char)pattern[0], end = (unsigned char)pattern[2];
                    unsigned char c = (unsigned char)string[0];
                    if (start > end) {
                        unsigned char t = start;
                        start = end;
                        end = t;
                    }
                    pattern += 2;
                    plen -= 2;
                    if (c >= start && c <= end) match = 1;
                } else if (pattern[0] == string[0]) {
                    match = 1;
                }
                pattern++;
                plen--;
            }
            if (not ) match = !match;
            if (!match) return 0;
            string++;
            slen--;
            break;
        }
        case '\\':
            if (plen >= 2) {
                pattern++;
                plen--;
            }
            /* fall through */
        default:
            if (pattern[0] != string[0]) return 0;
            string++;
            slen--;
            break;
        }
        pattern++;
        plen--;
        if (slen == 0) {
            while (plen && *pattern == '*') {
                pattern++;
                plen--;
            }
            break;
        }
    }
    return plen == 0 && slen == 0;
}

int glob_match(const char *pattern, const char *string, size_t len)
{
    /* KEYS takes "*" for every key without matching (keysCommand's
     * allkeys): the empty key too, which the matcher itself refuses. */
    if (pattern[0] == '*' && pattern[1] == '\0') return 1;
    size_t plen = 0;
    while (pattern[plen])
        plen++;
    int skip_longer = 0;
    return glob_impl(pattern, plen, string, len, &skip_longer, 0);
}
