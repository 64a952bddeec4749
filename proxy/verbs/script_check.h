/* script_check.h - would Redis 7.0 take this script?
 *
 * A custom verb's script is checked when the config is read (start-up and
 * every reload), as Redis's SCRIPT LOAD checks it (eval.c's
 * luaCreateFunction): the `#!lua flags=...` line first, then the body
 * compiled as one chunk named "@user_script" by Lua 5.1, the Lua Redis
 * embeds. A script Redis would refuse is refused here with Redis's own
 * words, instead of becoming a verb whose every call answers -NOSCRIPT. */
#ifndef VP_SCRIPT_CHECK_H
#define VP_SCRIPT_CHECK_H

#include <stddef.h>

/* What its shebang says, for the verb's own checks: a script with a
 * shebang but without flags=no-writes is refused by EVALSHA_RO at every
 * call. */
typedef struct script_flags {
    int shebang;   /* it has a `#!` line */
    int no_writes; /* 1: flags=no-writes; 0: not; -1: not known (a line with quotes, not judged here) */
} script_flags;

/* 0 if it compiles, or -1 with the error SCRIPT LOAD of the same body
 * answers (without the leading '-', e.g. "ERR Error compiling script (new
 * function): user_script:1: unexpected symbol near '+'") in err. *flags
 * (if not NULL) is filled either way. */
int script_check_compiles(const char *body, size_t len, script_flags *flags, char *err, size_t errlen);

#endif
