#include "proxy/session/auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "protocol/resp_write.h"
#include "proxy/buffer.h"
#include "proxy/cmd/command.h"

/* Redis 7.0's texts, byte for byte (checked against redis-server by
 * tests/integration/test_proxy_auth.c). */
#define AUTH_OK "+OK\r\n"
#define AUTH_NOAUTH "-NOAUTH Authentication required.\r\n"
#define AUTH_RESET_ARITY "-ERR wrong number of arguments for 'reset' command\r\n"
#define AUTH_EXECABORT_NOAUTH                                                                                \
    "-EXECABORT Transaction discarded because of: NOAUTH Authentication required.\r\n"
#define AUTH_WRONGPASS "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
#define AUTH_ARITY "-ERR wrong number of arguments for 'auth' command\r\n"
#define AUTH_SYNTAX "-ERR syntax error\r\n"
#define AUTH_NO_DEFAULT_PASS                                                                                 \
    "-ERR AUTH <password> called without any password configured for the default user. Are you sure "        \
    "your configuration is correct?\r\n"
#define HELLO_NOAUTH                                                                                         \
    "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH "          \
    "<user> <pass> option can be used to authenticate the client and select the RESP protocol version "      \
    "at the same time\r\n"
#define HELLO_BAD_VERSION "-ERR Protocol version is not an integer or out of range\r\n"
#define HELLO_NOPROTO "-NOPROTO unsupported protocol version\r\n"
#define HELLO_BAD_NAME "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"

static auth_verdict auth_answer(const char *line, char *reply, size_t *len)
{
    *len = strlen(line);
    memcpy(reply, line, *len + 1);
    return AUTH_ANSWER;
}

/* Redis's string2ll: an optional '-', digits, no leading zero, no sign
 * '+', no spaces; in range of a long long. */
static int auth_strict_ll(const resp_arg *a, long long *out)
{
    const char *p = a->ptr;
    size_t n = a->len, i = 0;
    int neg = 0;
    if (n == 0 || n > 20) return -1;
    if (n == 1 && p[0] == '0') {
        *out = 0;
        return 0;
    }
    if (p[0] == '-') {
        neg = 1;
        i = 1;
        if (n == 1) return -1;
    }
    if (p[i] < '1' || p[i] > '9') return -1;
    unsigned long long v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        if (v > (~0ULL - (unsigned)(p[i] - '0')) / 10) return -1;
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    if (neg ? v > (unsigned long long)1 << 63 : v > (unsigned long long)(~0ULL >> 1)) return -1;
    *out = neg ? (long long)(0 - v) : (long long)v;
    return 0;
}

static auth_verdict auth_judge_auth(const auth_table *t, int argc, const resp_arg *argv, int *authed,
                                    char *reply, size_t *len)
{
    if (argc < 2) return auth_answer(AUTH_ARITY, reply, len);
    if (argc > 3) return auth_answer(AUTH_SYNTAX, reply, len);
    int ok;
    if (argc == 2) {
        if (auth_default_nopass(t)) return auth_answer(AUTH_NO_DEFAULT_PASS, reply, len);
        ok = auth_check(t, "default", 7, argv[1].ptr, argv[1].len);
    } else {
        ok = auth_check(t, argv[1].ptr, argv[1].len, argv[2].ptr, argv[2].len);
    }
    if (!ok) return auth_answer(AUTH_WRONGPASS, reply, len);
    *authed = 1;
    return auth_answer(AUTH_OK, reply, len);
}

/* helloCommand's order: the version, then each option as it is read: an
 * AUTH authenticates there and then (so `AUTH good AUTH bad` answers
 * WRONGPASS with the client authenticated, `AUTH bad AUTH good` leaves it
 * not), a SETNAME's name is checked, and the first error ends it (an
 * error after a good AUTH leaves the client authenticated); then whether
 * the client may go on. The proxy strips every AUTH option before the
 * HELLO goes upstream (auth_hello_strip). */
static auth_verdict auth_judge_hello(const auth_table *t, int argc, const resp_arg *argv, int *authed,
                                     char *reply, size_t *len)
{
    if (argc >= 2) {
        long long ver;
        if (auth_strict_ll(&argv[1], &ver) < 0) return auth_answer(HELLO_BAD_VERSION, reply, len);
        if (ver < 2 || ver > 3) return auth_answer(HELLO_NOPROTO, reply, len);
    }
    int auth_option = 0;
    for (int j = 2; j < argc; j++) {
        int more = argc - 1 - j;
        if (cmd_arg_is(&argv[j], "auth") && more >= 2) {
            if (!auth_check(t, argv[j + 1].ptr, argv[j + 1].len, argv[j + 2].ptr, argv[j + 2].len))
                return auth_answer(AUTH_WRONGPASS, reply, len);
            *authed = 1;
            auth_option = 1;
            j += 2;
        } else if (cmd_arg_is(&argv[j], "setname") && more) {
            const resp_arg *name = &argv[j + 1];
            for (size_t k = 0; k < name->len; k++)
                if (name->ptr[k] < '!' || name->ptr[k] > '~') return auth_answer(HELLO_BAD_NAME, reply, len);
            j++;
        } else {
            /* Redis prints the option as a C string: up to a NUL byte. */
            size_t ol = strnlen(argv[j].ptr, argv[j].len);
            if (ol > AUTH_REPLY_MAX - 48) ol = AUTH_REPLY_MAX - 48;
            *len = resp_write_errorf(reply, AUTH_REPLY_MAX, "ERR Syntax error in HELLO option '%.*s'",
                                     (int)ol, argv[j].ptr);
            return AUTH_ANSWER;
        }
    }
    if (!*authed) return auth_answer(HELLO_NOAUTH, reply, len);
    return auth_option ? AUTH_FORWARD_HELLO : AUTH_FORWARD;
}

auth_verdict auth_judge(const auth_table *t, int argc, const resp_arg *argv, int *authed, char *reply,
                        size_t *len)
{
    if (argc < 1) return AUTH_FORWARD;
    if (cmd_arg_is(&argv[0], "auth")) return auth_judge_auth(t, argc, argv, authed, reply, len);
    if (cmd_arg_is(&argv[0], "hello")) return auth_judge_hello(t, argc, argv, authed, reply, len);
    if (*authed || cmd_is_quit(argc, argv) || cmd_is_http_request(argc, argv)) return AUTH_FORWARD;
    /* Nothing of a client that has not authenticated has reached Redis
     * (but QUIT), so its RESET has nothing there to reset: answered here,
     * as Redis would, it costs no upstream connection (forwarded, it would
     * take one of its own: every unauthenticated client could hold one of
     * Redis's maxclients). */
    if (cmd_arg_is(&argv[0], "reset"))
        return auth_answer(argc == 1 ? "+RESET\r\n" : AUTH_RESET_ARITY, reply, len);
    /* Redis's rejectCommand answers a refused EXEC as an aborted
     * transaction (execCommandAbort), whether or not MULTI came first. */
    if (cmd_arg_is(&argv[0], "exec")) return auth_answer(AUTH_EXECABORT_NOAUTH, reply, len);
    return auth_answer(AUTH_NOAUTH, reply, len);
}

/* Argument a at buf + off (cap bytes in all); cap + 1 once it does not fit. */
static size_t auth_put_arg(char *buf, size_t cap, size_t off, const resp_arg *a)
{
    if (off > cap || resp_write_bulk_size(a->len) > cap - off) return cap + 1;
    return off + resp_write_bulk(buf + off, a->ptr, a->len);
}

size_t auth_hello_strip(int argc, const resp_arg *argv, char *buf, size_t cap)
{
    /* The options as auth_judge read them: AUTH user pass, or SETNAME name. */
    int keep = argc;
    for (int j = 2; j < argc; j += cmd_arg_is(&argv[j], "auth") ? 3 : 2)
        if (cmd_arg_is(&argv[j], "auth")) keep -= 3;
    if (cap < RESP_HEADER_MAX) return 0;
    size_t off = resp_write_array_len(buf, keep);
    for (int j = 0; j < argc && j < 2; j++)
        off = auth_put_arg(buf, cap, off, &argv[j]);
    for (int j = 2; j + 1 < argc && off <= cap; j += 2) {
        if (cmd_arg_is(&argv[j], "auth")) {
            j++; /* and its user and password */
            continue;
        }
        off = auth_put_arg(buf, cap, off, &argv[j]);
        off = auth_put_arg(buf, cap, off, &argv[j + 1]);
    }
    return off <= cap ? off : 0;
}
