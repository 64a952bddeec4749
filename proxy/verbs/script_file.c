#include "proxy/verbs/script_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Larger scripts are refused: a script is sent whole in every SCRIPT LOAD,
 * and a device given by mistake (/dev/zero) must not grow the heap without
 * end. */
#define SCRIPT_FILE_MAX (16 * 1024 * 1024)

/* Opened for reading, or NULL with the reason. A FIFO is refused before
 * it is read: opening one waits for a writer, reading it for its end, and
 * a reload runs in the event loop (every client would wait with it). */
static FILE *script_open(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot read script %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (S_ISFIFO(st.st_mode)) {
        snprintf(err, errlen, "cannot read script %s: a FIFO, not a file", path);
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read script %s: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

char *verbs_read_script(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = script_open(path, err, errlen);
    if (!f) return NULL;
    errno = 0;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && n <= SCRIPT_FILE_MAX && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) buf = realloc(buf, cap *= 2);
    }
    int failed = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (!buf) abort();
    if (failed || n > SCRIPT_FILE_MAX) { /* a directory, an I/O error, a device */
        if (failed)
            snprintf(err, errlen, "cannot read script %s: %s", path, strerror(failed));
        else
            snprintf(err, errlen, "cannot read script %s: larger than %d bytes", path, SCRIPT_FILE_MAX);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}
