#include "lua/script_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *verbs_read_script(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read script %s: %s", path, strerror(errno));
        return NULL;
    }
    errno = 0;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) buf = realloc(buf, cap *= 2);
    }
    int failed = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (!buf) abort();
    if (failed) { /* a directory, an I/O error */
        snprintf(err, errlen, "cannot read script %s: %s", path, strerror(failed));
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}
