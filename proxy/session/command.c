#include "proxy/session/command.h"

#include <string.h>

int cmd_arg_is(const resp_arg *a, const char *lower)
{
    size_t n = strlen(lower);
    if (a->len != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = a->ptr[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c + 32);
        if (c != lower[i]) return 0;
    }
    return 1;
}

/* The hot path: most commands are rejected by length and first letter
 * before any string comparison. Arities are Redis 7.0's. */
cmd_kind cmd_classify(int argc, const resp_arg *argv)
{
    if (argc < 1) return CMD_PLAIN;
    const resp_arg *name = &argv[0];
    if (name->len < 4 || name->len > 12) return CMD_PLAIN;
    switch (name->ptr[0] | 0x20) {
    case 'c':
        if (argc == 3 && cmd_arg_is(name, "client") && cmd_arg_is(&argv[1], "reply")) {
            if (cmd_arg_is(&argv[2], "on")) return CMD_CLIENT_REPLY_ON;
            if (cmd_arg_is(&argv[2], "off")) return CMD_CLIENT_REPLY_OFF;
            if (cmd_arg_is(&argv[2], "skip")) return CMD_CLIENT_REPLY_SKIP;
        }
        return CMD_PLAIN;
    case 'd':
        return argc == 1 && cmd_arg_is(name, "discard") ? CMD_DISCARD : CMD_PLAIN;
    case 'e':
        return argc == 1 && cmd_arg_is(name, "exec") ? CMD_EXEC : CMD_PLAIN;
    case 'm':
        if (argc == 1 && cmd_arg_is(name, "multi")) return CMD_MULTI;
        if (argc == 1 && cmd_arg_is(name, "monitor")) return CMD_MONITOR;
        return CMD_PLAIN;
    case 'p':
        if (argc >= 2 && cmd_arg_is(name, "psubscribe")) return CMD_SUBSCRIBE;
        if (cmd_arg_is(name, "punsubscribe")) return CMD_SUBSCRIBE;
        /* PSYNC replid offset: 7.0's arity is -3, and what follows is
         * ignored. With fewer arguments Redis answers an arity error. */
        if (argc >= 3 && cmd_arg_is(name, "psync")) return CMD_REPLICATION;
        return CMD_PLAIN;
    case 'r':
        if (argc == 1 && cmd_arg_is(name, "reset")) return CMD_RESET;
        if (cmd_arg_is(name, "replconf")) return CMD_UNCOUNTABLE;
        return CMD_PLAIN;
    case 's':
        if (argc >= 2 && (cmd_arg_is(name, "subscribe") || cmd_arg_is(name, "ssubscribe")))
            return CMD_SUBSCRIBE;
        if (cmd_arg_is(name, "sunsubscribe")) return CMD_SUBSCRIBE;
        if (argc == 1 && cmd_arg_is(name, "sync")) return CMD_REPLICATION; /* arity 1 */
        return CMD_PLAIN;
    case 'u':
        return cmd_arg_is(name, "unsubscribe") ? CMD_SUBSCRIBE : CMD_PLAIN;
    default:
        return CMD_PLAIN;
    }
}

int cmd_name_may_be_special(const resp_arg *name)
{
    static const char *const names[] = {"client",     "discard",      "exec",         "multi", "monitor",
                                        "psubscribe", "punsubscribe", "psync",        "reset", "replconf",
                                        "subscribe",  "ssubscribe",   "sunsubscribe", "sync",  "unsubscribe",
                                        "post",       "host:"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (cmd_arg_is(name, names[i])) return 1;
    return 0;
}

int cmd_name_read_whole(const resp_arg *name)
{
    return cmd_arg_is(name, "auth") || cmd_arg_is(name, "hello") || cmd_arg_is(name, "config") ||
           cmd_arg_is(name, "acl");
}

int cmd_changes_session(const resp_arg *name)
{
    static const char *const names[] = {"select",   "hello",      "auth",       "reset",    "swapdb",
                                        "blpop",    "brpop",      "brpoplpush", "blmove",   "blmpop",
                                        "bzpopmin", "bzpopmax",   "bzmpop",     "wait",     "waitaof",
                                        "xread",    "xreadgroup", "readonly",   "readwrite"};
    if (name->len < 4 || name->len > 10) return 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (cmd_arg_is(name, names[i])) return 1;
    return 0;
}

/* XREAD / XREADGROUP with a BLOCK option before STREAMS. Options are
 * stepped over with their values (GROUP group consumer, COUNT n), so a group
 * or consumer named "block" or "streams" is not taken for one. */
static int cmd_has_block_option(int argc, const resp_arg *argv)
{
    for (int i = 1; i < argc;) {
        if (cmd_arg_is(&argv[i], "streams")) return 0;
        if (cmd_arg_is(&argv[i], "block")) return 1;
        if (cmd_arg_is(&argv[i], "group"))
            i += 3;
        else if (cmd_arg_is(&argv[i], "count"))
            i += 2;
        else
            i += 1; /* NOACK, or something Redis will refuse */
    }
    return 0;
}

/* The hot path again: one switch on length and first letter. */
int cmd_needs_own_connection(int argc, const resp_arg *argv)
{
    if (argc < 1) return 0;
    const resp_arg *name = &argv[0];
    if (name->len < 4 || name->len > 12) return 0;
    /* MULTI, SUBSCRIBE, MONITOR, RESET, CLIENT REPLY, replication. */
    if (cmd_classify(argc, argv) != CMD_PLAIN) return 1;
    switch (name->ptr[0] | 0x20) {
    case 'a':
        return cmd_arg_is(name, "auth") || cmd_arg_is(name, "asking");
    case 'b':
        return cmd_is_blocking(argc, argv);
    case 'c':
        /* CONFIG SET may set an output limit that makes sharing unsafe:
         * what the client sends next must not run on the shared connection
         * before the proxy has learned it (upstream_outlimit.c). */
        if (argc >= 2 && cmd_arg_is(name, "config") && cmd_arg_is(&argv[1], "set")) return 1;
        return cmd_arg_is(name, "client") && !cmd_is_client_setter(argc, argv);
    case 'h':
        return cmd_arg_is(name, "hello");
    case 'p':
        return cmd_arg_is(name, "psync"); /* whatever its arguments (an arity error changes nothing) */
    case 'r':
        return cmd_arg_is(name, "readonly") || cmd_arg_is(name, "readwrite") || cmd_arg_is(name, "replconf");
    case 's':
        if (cmd_arg_is(name, "select") || cmd_arg_is(name, "sync") || cmd_arg_is(name, "shutdown")) return 1;
        return argc >= 2 && cmd_arg_is(name, "script") && cmd_arg_is(&argv[1], "debug");
    case 'u':
        return cmd_arg_is(name, "unwatch");
    case 'w':
        return cmd_arg_is(name, "watch") || cmd_arg_is(name, "wait") || cmd_arg_is(name, "waitaof");
    case 'x':
        return cmd_is_blocking(argc, argv);
    default:
        return 0;
    }
}

int cmd_is_blocking(int argc, const resp_arg *argv)
{
    if (argc < 1) return 0;
    const resp_arg *name = &argv[0];
    switch (name->ptr[0] | 0x20) {
    case 'b':
        return cmd_arg_is(name, "blpop") || cmd_arg_is(name, "brpop") || cmd_arg_is(name, "brpoplpush") ||
               cmd_arg_is(name, "blmove") || cmd_arg_is(name, "blmpop") || cmd_arg_is(name, "bzpopmin") ||
               cmd_arg_is(name, "bzpopmax") || cmd_arg_is(name, "bzmpop");
    case 'x':
        return (cmd_arg_is(name, "xread") || cmd_arg_is(name, "xreadgroup")) &&
               cmd_has_block_option(argc, argv);
    default:
        return 0;
    }
}

int cmd_is_out_of_band(int argc, const resp_arg *argv)
{
    if (argc < 2) return 0;
    const resp_arg *name = &argv[0];
    if (name->len == 6 && cmd_arg_is(name, "script")) return cmd_arg_is(&argv[1], "kill");
    if (name->len == 8 && cmd_arg_is(name, "function"))
        return cmd_arg_is(&argv[1], "kill") || cmd_arg_is(&argv[1], "stats");
    return 0;
}

int cmd_is_client_setter(int argc, const resp_arg *argv)
{
    return argc >= 2 && cmd_arg_is(&argv[0], "client") &&
           ((argc == 3 && cmd_arg_is(&argv[1], "setname")) || (argc == 4 && cmd_arg_is(&argv[1], "setinfo")));
}

int cmd_is_select_zero(int argc, const resp_arg *argv)
{
    return argc == 2 && argv[1].len == 1 && argv[1].ptr[0] == '0' && cmd_arg_is(&argv[0], "select");
}

int cmd_is_http_request(int argc, const resp_arg *argv)
{
    if (argc < 1 || argv[0].len < 4 || argv[0].len > 5) return 0;
    return cmd_arg_is(&argv[0], "post") || cmd_arg_is(&argv[0], "host:");
}

int cmd_is_quit(int argc, const resp_arg *argv)
{
    return argc >= 1 && cmd_arg_is(&argv[0], "quit");
}

int cmd_may_authenticate(int argc, const resp_arg *argv)
{
    if (argc < 1) return 0;
    if (cmd_arg_is(&argv[0], "auth")) return 1;
    if (!cmd_arg_is(&argv[0], "hello")) return 0;
    /* HELLO protover [AUTH user pass] [SETNAME name]: options from the third. */
    for (int j = 2; j < argc; j += cmd_arg_is(&argv[j], "auth") ? 3 : 2)
        if (cmd_arg_is(&argv[j], "auth")) return 1;
    return 0;
}

int cmd_name_unsubscribes(const resp_arg *name)
{
    return cmd_arg_is(name, "unsubscribe") || cmd_arg_is(name, "punsubscribe") ||
           cmd_arg_is(name, "sunsubscribe");
}
