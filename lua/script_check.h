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

/* 0 if it compiles, or -1 with the error SCRIPT LOAD of the same body
 * answers (without the leading '-', e.g. "ERR Error compiling script (new
 * function): user_script:1: unexpected symbol near '+'") in err. */
int script_check_compiles(const char *body, size_t len, char *err, size_t errlen);

#endif
