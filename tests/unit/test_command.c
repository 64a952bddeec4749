/* Which commands change reply counting: by name, case-insensitive, and by
 * argument count (a wrong count is one arity error, so CMD_PLAIN). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "proxy/cmd/command.h"

/* Split a line at spaces into argv (pointing into line). */
static int split(const char *line, resp_arg *argv, int max)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", line);
    int argc = 0;
    for (char *t = strtok(buf, " "); t && argc < max; t = strtok(NULL, " ")) {
        argv[argc].ptr = line + (t - buf);
        argv[argc].len = strlen(t);
        argc++;
    }
    return argc;
}

static cmd_kind classify(const char *line)
{
    resp_arg argv[8];
    int argc = split(line, argv, 8);
    return cmd_classify(argc, argv);
}

static int needs_own(const char *line)
{
    resp_arg argv[8];
    int argc = split(line, argv, 8);
    return cmd_needs_own_connection(argc, argv);
}

static int is_http(const char *line)
{
    resp_arg argv[8];
    int argc = split(line, argv, 8);
    return cmd_is_http_request(argc, argv);
}

Test(command, special_commands_by_name_and_arity)
{
    struct {
        const char *line;
        cmd_kind want;
    } cases[] = {
        {"GET k", CMD_PLAIN},
        {"get k", CMD_PLAIN},
        {"SUBSCRIBE a b", CMD_SUBSCRIBE},
        {"subscribe a", CMD_SUBSCRIBE},
        {"SUBSCRIBE", CMD_PLAIN}, /* arity error */
        {"UNSUBSCRIBE", CMD_SUBSCRIBE},
        {"PSUBSCRIBE p*", CMD_SUBSCRIBE},
        {"PUNSUBSCRIBE", CMD_SUBSCRIBE},
        {"SSUBSCRIBE s", CMD_SUBSCRIBE},
        {"SUNSUBSCRIBE", CMD_SUBSCRIBE},
        {"MONITOR", CMD_MONITOR},
        {"MONITOR x", CMD_PLAIN},
        {"RESET", CMD_RESET},
        {"ReSeT", CMD_RESET},
        {"RESET x", CMD_PLAIN},
        {"MULTI", CMD_MULTI},
        {"MULTI x", CMD_PLAIN},
        {"EXEC", CMD_EXEC},
        {"DISCARD", CMD_DISCARD},
        {"CLIENT REPLY ON", CMD_CLIENT_REPLY_ON},
        {"client reply off", CMD_CLIENT_REPLY_OFF},
        {"CLIENT REPLY SKIP", CMD_CLIENT_REPLY_SKIP},
        {"CLIENT REPLY MAYBE", CMD_PLAIN},
        {"CLIENT SETNAME x", CMD_PLAIN},
        {"REPLCONF ACK 0", CMD_UNCOUNTABLE},
        {"REPLCONF GETACK *", CMD_UNCOUNTABLE},
        {"REPLCONF listening-port 1 ack 2", CMD_UNCOUNTABLE},
        {"SYNC", CMD_REPLICATION},
        {"PSYNC ? -1", CMD_REPLICATION},
        {"PSYNC ?", CMD_PLAIN},
        {"PSYNC ? -1 extra", CMD_REPLICATION}, /* 7.0's arity is -3: extra arguments are ignored */
        {"psync ? -1 a b c", CMD_REPLICATION},
        {"SYNC x", CMD_PLAIN}, /* arity 1: an arity error */
        {"SET k v", CMD_PLAIN},
        {"SUBSCRIBEX a", CMD_PLAIN},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        cr_expect_eq(classify(cases[i].line), cases[i].want, "%s: got %d, want %d", cases[i].line,
                     classify(cases[i].line), cases[i].want);
}

Test(command, a_name_that_may_be_special_is_never_streamed)
{
    const char *special[] = {"subscribe", "CLIENT", "Reset", "psync", "replconf", "multi"};
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++) {
        resp_arg a = {special[i], strlen(special[i])};
        cr_expect(cmd_name_may_be_special(&a), "%s", special[i]);
    }
    const char *plain[] = {"SET", "append", "RPUSH", "XADD", "HSET"};
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        resp_arg a = {plain[i], strlen(plain[i])};
        cr_expect(!cmd_name_may_be_special(&a), "%s", plain[i]);
    }
}

/* A replication command on a shared connection would turn it into a replica
 * link: by name, whatever the arguments. */
Test(command, replication_commands_need_an_own_connection_whatever_their_arguments)
{
    const char *own[] = {"SYNC",       "sync x",           "PSYNC",    "PSYNC ?",
                         "PSYNC ? -1", "Psync ? -1 extra", "REPLCONF", "replconf listening-port 1"};
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        cr_expect(needs_own(own[i]), "%s", own[i]);
    const char *shared[] = {"GET k", "SET k v", "SYNCX", "PSYNCX a b", "REPLCONFX", "POST /"};
    for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]); i++)
        cr_expect(!needs_own(shared[i]), "%s", shared[i]);
}

Test(command, http_request_lines_by_name_in_any_case)
{
    const char *http[] = {"POST / HTTP/1.1", "post", "PoSt x", "Host: x", "host:", "HOST: a b c"};
    for (size_t i = 0; i < sizeof(http) / sizeof(http[0]); i++)
        cr_expect(is_http(http[i]), "%s", http[i]);
    const char *not_http[] = {"GET / HTTP/1.1", "host x", "Host:x", "posts", "pos", "PUBLISH c m"};
    for (size_t i = 0; i < sizeof(not_http) / sizeof(not_http[0]); i++)
        cr_expect(!is_http(not_http[i]), "%s", not_http[i]);
    resp_arg a = {"post", 4}, b = {"Host:", 5};
    cr_expect(cmd_name_may_be_special(&a), "a POST request is never streamed upstream");
    cr_expect(cmd_name_may_be_special(&b), "nor a Host: one");
}

Test(command, what_redis_answers_while_a_script_is_busy_goes_out_of_band)
{
    static const char *const yes[] = {"SCRIPT KILL", "script kill", "FUNCTION KILL", "Function Stats",
                                      "SCRIPT KILL extra"}; /* Redis's arity error, from Redis */
    static const char *const no[] = {"SCRIPT",        "SCRIPT FLUSH", "SCRIPT LOAD x", "FUNCTION FLUSH",
                                     "FUNCTION LIST", "SHUTDOWN",     "KILL SCRIPT",   "SCRIPTS KILL"};
    resp_arg argv[8];
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        cr_expect(cmd_is_out_of_band(split(yes[i], argv, 8), argv), "%s: should go out of band", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        cr_expect(!cmd_is_out_of_band(split(no[i], argv, 8), argv), "%s: should not go out of band", no[i]);
    /* SHUTDOWN, any form, takes a connection of its own instead */
    static const char *const own[] = {"SHUTDOWN", "shutdown NOSAVE", "SHUTDOWN ABORT", "SHUTDOWN SAVE NOW"};
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        cr_expect(cmd_needs_own_connection(split(own[i], argv, 8), argv),
                  "%s: should need its own connection", own[i]);
}

static int may_authenticate(const char *line)
{
    resp_arg argv[8];
    int argc = split(line, argv, 8);
    return cmd_may_authenticate(argc, argv);
}

/* What ends "Redis requires AUTH and this client has not sent one" (the
 * proxy's -NOAUTH for verbs, its pre-auth limits): AUTH in any form, and
 * HELLO only with its AUTH option, found among the options as Redis reads
 * them (a SETNAME value "auth" is not one). */
Test(command, auth_and_hello_with_auth_may_authenticate)
{
    cr_assert(may_authenticate("AUTH pass"));
    cr_assert(may_authenticate("auth user pass"));
    cr_assert(may_authenticate("AUTH")); /* an arity error: Redis judges it */
    cr_assert(may_authenticate("HELLO 3 AUTH default pass"));
    cr_assert(may_authenticate("hello 2 SETNAME n auth u p"));
    cr_assert(!may_authenticate("HELLO"));
    cr_assert(!may_authenticate("HELLO 3"));
    cr_assert(!may_authenticate("HELLO 3 SETNAME auth"));
    cr_assert(!may_authenticate("HELLO auth"));
    cr_assert(!may_authenticate("PING auth"));
    cr_assert(!may_authenticate("AUTHX pass"));
}
