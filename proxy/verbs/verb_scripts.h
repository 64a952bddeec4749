/* verb_scripts.h - the built-in verbs' Lua scripts, embedded at build time
 * by proxy/verbs/embed.c from lua/<name>.lua, each with its SHA-1 pinned then,
 * in both dialects (verbs.h, verb_dialect). */
#ifndef VP_VERB_SCRIPTS_H
#define VP_VERB_SCRIPTS_H

#include <stddef.h>

typedef struct verb_script {
    const char *name; /* the file's name without .lua */
    const char *body; /* NUL-terminated too */
    size_t len;
    const char *sha; /* 40 lower-case hex digits */
    /* The text Redis 6.2 runs (script_text_pre7: the shebang a comment),
     * as long as body, and its SHA-1. */
    const char *body_pre7;
    const char *sha_pre7;
} verb_script;

extern const verb_script verb_scripts[];
extern const int verb_scripts_count;

#endif
