/* command.c - the classification queries over the command table: the
 * kinds and classes it gives a name, and what depends on the arguments. */
#include "proxy/cmd/command.h"

#include <limits.h>
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

int cmd_arg_ll(const resp_arg *a, long long *out)
{
    const char *p = a->ptr;
    size_t n = a->len;
    if (n == 0 || n > 20) return 0;
    if (n == 1 && p[0] == '0') {
        *out = 0;
        return 1;
    }
    int neg = p[0] == '-';
    size_t i = neg;
    if (i >= n || p[i] < '1' || p[i] > '9') return 0;
    unsigned long long v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        unsigned long long d = (unsigned long long)(p[i] - '0');
        if (v > (ULLONG_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (unsigned long long)LLONG_MAX + 1) return 0;
        *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
    } else {
        if (v > (unsigned long long)LLONG_MAX) return 0;
        *out = (long long)v;
    }
    return 1;
}

/* The command a name is, when it may have a kind or a class: NULL for
 * most commands after two bit tests, without a lookup. */
static const cmd_info *cmd_classified(const resp_arg *name)
{
    if (!cmd_table_may_classify(name->ptr, name->len)) return NULL;
    return cmd_table_find(name->ptr, name->len);
}

/* A kind applies to a call with Redis's arity only (a wrong count is one
 * arity error); CLIENT REPLY's mode is read from its argument. */
static cmd_kind cmd_kind_of(const cmd_info *c, int argc, const resp_arg *argv)
{
    if (c->cls & CMD_P_REPLY_MODE) {
        if (argc == 3 && cmd_arg_is(&argv[1], "reply")) {
            if (cmd_arg_is(&argv[2], "on")) return CMD_CLIENT_REPLY_ON;
            if (cmd_arg_is(&argv[2], "off")) return CMD_CLIENT_REPLY_OFF;
            if (cmd_arg_is(&argv[2], "skip")) return CMD_CLIENT_REPLY_SKIP;
        }
        return CMD_PLAIN;
    }
    return cmd_arity_ok(c, argc) ? c->kind : CMD_PLAIN;
}

cmd_kind cmd_classify(int argc, const resp_arg *argv)
{
    if (argc < 1) return CMD_PLAIN;
    const cmd_info *c = cmd_classified(&argv[0]);
    return c ? cmd_kind_of(c, argc, argv) : CMD_PLAIN;
}

/* "POST" or "Host:" (not commands: cmd_is_http_request). */
static int cmd_name_is_http(const resp_arg *name)
{
    return cmd_arg_is(name, "post") || cmd_arg_is(name, "host:");
}

int cmd_name_may_be_special(const resp_arg *name)
{
    const cmd_info *c = cmd_classified(name);
    if (c) return c->kind != CMD_PLAIN || (c->cls & CMD_P_REPLY_MODE);
    return cmd_name_is_http(name);
}

int cmd_name_read_whole(const resp_arg *name)
{
    const cmd_info *c = cmd_classified(name);
    return c && (c->cls & CMD_P_READ_WHOLE);
}

int cmd_changes_session(const resp_arg *name)
{
    const cmd_info *c = cmd_classified(name);
    return c && (c->cls & CMD_P_SESSION);
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

static int cmd_blocks(const cmd_info *c, int argc, const resp_arg *argv)
{
    return (c->cls & CMD_P_BLOCKING) && (!(c->cls & CMD_P_BLOCK_OPTION) || cmd_has_block_option(argc, argv));
}

/* The subcommand argv[1] of a command one of whose subcommands has a
 * class, or NULL. */
static const cmd_info *cmd_classified_sub(const cmd_info *c, int argc, const resp_arg *argv)
{
    if (!(c->cls & CMD_P_SUBS) || argc < 2) return NULL;
    return cmd_table_find_sub(c, argv[1].ptr, argv[1].len);
}

int cmd_needs_own_connection(int argc, const resp_arg *argv)
{
    if (argc < 1) return 0;
    const cmd_info *c = cmd_classified(&argv[0]);
    if (!c) return 0;
    /* MULTI, SUBSCRIBE, MONITOR, RESET, CLIENT REPLY, replication. */
    if (cmd_kind_of(c, argc, argv) != CMD_PLAIN) return 1;
    if (c->cls & CMD_P_OWN) return !cmd_is_client_setter(argc, argv);
    if (c->cls & CMD_P_BLOCKING) return cmd_blocks(c, argc, argv);
    const cmd_info *sub = cmd_classified_sub(c, argc, argv); /* CONFIG SET, SCRIPT DEBUG */
    return sub && (sub->cls & CMD_P_OWN);
}

int cmd_is_blocking(int argc, const resp_arg *argv)
{
    if (argc < 1) return 0;
    const cmd_info *c = cmd_classified(&argv[0]);
    return c && cmd_blocks(c, argc, argv);
}

int cmd_is_out_of_band(int argc, const resp_arg *argv)
{
    if (argc < 2) return 0;
    const cmd_info *c = cmd_classified(&argv[0]);
    const cmd_info *sub = c ? cmd_classified_sub(c, argc, argv) : NULL;
    return sub && (sub->cls & CMD_P_OUT_OF_BAND);
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
    return cmd_name_is_http(&argv[0]);
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
    const cmd_info *c = cmd_classified(name);
    return c && (c->cls & CMD_P_UNSUBSCRIBE);
}
