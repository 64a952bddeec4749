#include "proxy/verbs/script_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

/* Redis 7.0's script flags (script.c's scripts_flags_def). */
static const char *const script_flag_names[] = {"no-writes", "allow-oom", "allow-stale", "no-cluster",
                                                "allow-cross-slot-keys"};

static int script_flag_known(const char *f, size_t n)
{
    for (size_t i = 0; i < sizeof(script_flag_names) / sizeof(script_flag_names[0]); i++) {
        if (strlen(script_flag_names[i]) == n && memcmp(script_flag_names[i], f, n) == 0) return 1;
    }
    return 0;
}

/* "flags=a,b": every comma-separated name known (an empty list is; an
 * empty name between commas is not, as sdssplitlen gives it). */
static int script_check_flags(const char *list, size_t n, script_flags *flags, char *err, size_t errlen)
{
    if (n == 0) return 0;
    for (const char *p = list, *end = list + n;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t fl = comma ? (size_t)(comma - p) : (size_t)(end - p);
        if (fl == 9 && memcmp(p, "no-writes", 9) == 0) flags->no_writes = 1;
        if (!script_flag_known(p, fl)) {
            snprintf(err, errlen, "ERR Unexpected flag in script shebang: %.*s", (int)fl, p);
            return -1;
        }
        if (!comma) return 0;
        p = comma + 1;
    }
}

static int is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* The `#!` line (without its '\n'), as evalExtractShebangFlags reads it:
 * words split at spaces, the first "#!lua", the others "flags=...". A line
 * with quotes is not judged (Redis splits it with sdssplitargs, whose
 * quoting rules are not copied here): Redis will say. */
static int script_check_shebang(const char *line, size_t n, script_flags *flags, char *err, size_t errlen)
{
    flags->shebang = 1;
    if (memchr(line, '"', n) || memchr(line, '\'', n)) {
        flags->no_writes = -1;
        return 0;
    }
    int first = 1;
    for (size_t i = 0; i < n;) {
        while (i < n && is_space(line[i]))
            i++;
        if (i == n) break;
        size_t w = i;
        while (i < n && !is_space(line[i]))
            i++;
        size_t wl = i - w;
        if (first) {
            if (wl != 5 || memcmp(line + w, "#!lua", 5) != 0) {
                snprintf(err, errlen, "ERR Unexpected engine in script shebang: %.*s", (int)wl, line + w);
                return -1;
            }
            first = 0;
        } else if (wl >= 6 && memcmp(line + w, "flags=", 6) == 0) {
            if (script_check_flags(line + w + 6, wl - 6, flags, err, errlen) < 0) return -1;
        } else {
            snprintf(err, errlen, "ERR Unknown lua shebang option: %.*s", (int)wl, line + w);
            return -1;
        }
    }
    return 0;
}

int script_check_compiles(const char *body, size_t len, script_flags *flags, char *err, size_t errlen)
{
    script_flags scratch;
    if (!flags) flags = &scratch;
    flags->shebang = flags->no_writes = 0;
    size_t skip = 0;
    if (len >= 2 && body[0] == '#' && body[1] == '!') {
        /* (Redis finds the line end with strchr: a NUL byte ends the search) */
        const char *nl = memchr(body, '\n', strnlen(body, len));
        if (!nl) {
            snprintf(err, errlen, "ERR Invalid script shebang");
            return -1;
        }
        skip = (size_t)(nl - body); /* the '\n' stays: line numbers are the file's */
        if (script_check_shebang(body, skip, flags, err, errlen) < 0) return -1;
    }
    if (skip < len && body[skip] == LUA_SIGNATURE[0]) {
        /* Redis's Lua reads no bytecode: its parser takes the ESC byte for
         * a symbol, where a stock Lua 5.1 would load (unchecked) bytecode. */
        snprintf(err, errlen,
                 "ERR Error compiling script (new function): user_script:1: unexpected symbol "
                 "near 'char(27)'");
        return -1;
    }
    lua_State *L = luaL_newstate();
    if (!L) abort();
    int rc = 0;
    if (luaL_loadbuffer(L, body + skip, len - skip, "@user_script") != 0) {
        const char *why = lua_tostring(L, -1);
        snprintf(err, errlen, "ERR Error compiling script (new function): %s", why ? why : "(no message)");
        rc = -1;
        /* (Redis's error replies carry no line ends: it makes them spaces) */
        for (char *p = err; *p; p++)
            if (*p == '\r' || *p == '\n') *p = ' ';
    }
    lua_close(L);
    return rc;
}
