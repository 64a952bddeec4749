/* script_text.h - the text Redis runs for a built-in verb's script.
 *
 * Helpers that several scripts need (Redis's integer and float parsing,
 * server time, byte order...) are written once, in lua/lib/<name>.lua. A script
 * names each one it uses on a line of its own,
 *
 *     --#include lib/args.lua
 *
 * and that line is replaced by the helper file's code: its text, verbatim,
 * but for its comment-only lines (the helper's comments stay in lua/lib/;
 * a helper may hold no long string or long comment, so such lines are
 * surely comments). Then each helper function that nothing else in the
 * text names is dropped (a closure Redis would make on every call for
 * nothing), until none is. Redis runs the assembled text, so EVALSHA needs
 * nothing but the one script and its pinned SHA-1 covers every byte of
 * what runs. A helper file includes nothing itself (a script includes
 * helpers in the order they need each other).
 *
 * Used at build time by proxy/verbs/embed.c (which pins the SHA-1 of the result)
 * and by the unit test that checks the embedded scripts against lua/. */
#ifndef VP_SCRIPT_TEXT_H
#define VP_SCRIPT_TEXT_H

#include <stddef.h>

#define SCRIPT_INCLUDE_PREFIX "--#include "

/* The assembled text of the script at `path`; helper paths are taken from
 * the script's directory. A malloc'd, NUL-terminated buffer (caller frees)
 * of *len bytes, or NULL with the reason in err (a file that cannot be
 * read, an include line that names no lib/ file, a helper that includes). */
char *script_assemble(const char *path, size_t *len, char *err, size_t errlen);

/* The same text as Redis 6.2 takes it: 6.2 knows no `#!lua flags=...`
 * line (SCRIPT LOAD answers "unexpected symbol near '#'"), so a leading
 * "#!" becomes "--" and the line a comment. Same length, the same lines
 * (an error's line number is the same on every server). A malloc'd,
 * NUL-terminated copy of the len bytes (caller frees). */
char *script_text_pre7(const char *body, size_t len);

#endif
