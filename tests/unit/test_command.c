/* Which commands change reply counting: by name, case-insensitive, and by
 * argument count (a wrong count is one arity error, so CMD_PLAIN). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "proxy/command.h"

static cmd_kind classify(const char *line)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", line);
    resp_arg argv[8];
    int argc = 0;
    for (char *t = strtok(buf, " "); t && argc < 8; t = strtok(NULL, " ")) {
        argv[argc].ptr = line + (t - buf);
        argv[argc].len = strlen(t);
        argc++;
    }
    return cmd_classify(argc, argv);
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

/* argv of a space-separated line, pointing into `line` (at most 8). */
static int split(const char *line, resp_arg *argv)
{
    int argc = 0;
    const char *p = line;
    while (*p && argc < 8) {
        while (*p == ' ')
            p++;
        const char *start = p;
        while (*p && *p != ' ')
            p++;
        if (p > start) argv[argc++] = (resp_arg){.ptr = start, .len = (size_t)(p - start)};
    }
    return argc;
}

Test(command, what_redis_answers_while_a_script_is_busy_goes_out_of_band)
{
    static const char *const yes[] = {"SCRIPT KILL", "script kill", "FUNCTION KILL", "Function Stats",
                                      "SCRIPT KILL extra"}; /* Redis's arity error, from Redis */
    static const char *const no[] = {"SCRIPT",        "SCRIPT FLUSH", "SCRIPT LOAD x", "FUNCTION FLUSH",
                                     "FUNCTION LIST", "SHUTDOWN",     "KILL SCRIPT",   "SCRIPTS KILL"};
    resp_arg argv[8];
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        cr_expect(cmd_is_out_of_band(split(yes[i], argv), argv), "%s: should go out of band", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        cr_expect(!cmd_is_out_of_band(split(no[i], argv), argv), "%s: should not go out of band", no[i]);
    /* SHUTDOWN, any form, takes a connection of its own instead */
    static const char *const own[] = {"SHUTDOWN", "shutdown NOSAVE", "SHUTDOWN ABORT", "SHUTDOWN SAVE NOW"};
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        cr_expect(cmd_needs_own_connection(split(own[i], argv), argv), "%s: should need its own connection",
                  own[i]);
}
