/* script_file.h - reading a custom verb's script from its file.
 *
 * Its own unit so that a fuzz target (tests/fuzz/fuzz_config.c) can link
 * the config parser with a reader of its own: no file opened there. */
#ifndef VP_SCRIPT_FILE_H
#define VP_SCRIPT_FILE_H

#include <stddef.h>

/* The whole file, malloc'd and NUL-terminated (*len bytes), or NULL with
 * "cannot read script PATH: reason" in err (a read error or a directory
 * is an error, never a short script; a FIFO and a file over 16 MiB are
 * refused). */
char *verbs_read_script(const char *path, size_t *len, char *err, size_t errlen);

#endif
