/* The verb table: pinned SHA-1s against the files in lua/, lookup, every
 * built-in verb's argument checks with Redis's wording, custom verbs from
 * config lines, and the check of what SCRIPT LOAD answers. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proxy/verbs/script_text.h"
#include "proxy/verbs/verb_scripts.h"
#include "proxy/verbs/verbs.h"
#include "proxy/config.h"
#include "proxy/server.h"
#include "proxy/upstream/upstream_internal.h"

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

/* What Redis runs is the script with the helpers it includes from
 * lua/lib/ put in (script_text.h): the embedded body must be exactly that
 * text, no include line may be left in it, and the pinned SHA-1 is the
 * SHA-1 of that text. */
Test(verbs, pinned_sha_and_body_match_the_assembled_files_in_lua)
{
    for (int i = 0; i < verb_scripts_count; i++) {
        const verb_script *e = &verb_scripts[i];
        char path[512], sha[41], err[256];
        snprintf(path, sizeof(path), "%s/lua/%s.lua", SOURCE_DIR, e->name);
        size_t len;
        char *text = script_assemble(path, &len, err, sizeof(err));
        cr_assert(text, "%s", err);
        verbs_sha1_hex(text, len, sha);
        cr_expect_str_eq(e->sha, sha, "%s: pinned %s, assembled file %s", e->name, e->sha, sha);
        cr_expect_eq(e->len, len, "%s: embedded body is not the assembled file", e->name);
        cr_expect(memcmp(e->body, text, len) == 0, "%s: embedded body is not the assembled file", e->name);
        cr_expect_null(strstr(e->body, SCRIPT_INCLUDE_PREFIX), "%s: an include line is left", e->name);
        /* Redis 6.2's text: the same bytes but the shebang's "#!", which
         * is "--"; its own SHA-1 pinned too */
        cr_expect(len > 2 && memcmp(e->body, "#!", 2) == 0, "%s: no shebang", e->name);
        cr_expect(memcmp(e->body_pre7, "--", 2) == 0 && memcmp(e->body_pre7 + 2, text + 2, len - 2) == 0,
                  "%s: the Redis 6.2 text is not the script with its shebang a comment", e->name);
        verbs_sha1_hex(e->body_pre7, len, sha);
        cr_expect_str_eq(e->sha_pre7, sha, "%s: pinned %s for Redis 6.2, its text's %s", e->name, e->sha_pre7,
                         sha);
        cr_expect_str_neq(e->sha_pre7, e->sha);
        free(text);
    }
    /* Every built-in verb runs its own script; the polyfills for ZUNION and
     * ZINTER share zcount.lua, their STORE variants zcountstore.lua; and
     * the conveyor keys' translations have four (conveyor_*.lua): every
     * embedded script is one of those. */
    int n;
    const verb_def *b = verbs_builtin(&n);
    cr_assert_eq(n, 12);
    for (int i = 0; i < n; i++) {
        int found = 0;
        for (int j = 0; j < verb_scripts_count; j++)
            found |= strcmp(verb_scripts[j].name, b[i].name) == 0 &&
                     strcmp(verb_scripts[j].sha, b[i].sha) == 0 && verb_scripts[j].body == b[i].body;
        cr_expect(found, "%s runs lua/%s.lua", b[i].name, b[i].name);
    }
    for (int tr = VERB_TR_READ; tr < VERB_TRANSLATIONS; tr++) {
        verb_table t;
        char err[128];
        cr_assert_eq(verbs_build(&t, NULL, 0, 0, err, sizeof(err)), 0);
        const verb_def *v = verbs_translation(&t, (verb_translation)tr);
        cr_assert(v, "translation %d has an entry", tr);
        cr_expect(strncmp(v->script, "conveyor_", 9) == 0, "%s runs lua/%s.lua", v->name, v->script);
        cr_expect(!verbs_find(&t, v->name, strlen(v->name)), "%s is never found by name", v->name);
        verbs_free(&t);
    }
    cr_expect_eq(verb_scripts_count, n + 2 + (VERB_TRANSLATIONS - 1));
}

/* Redis closes a connection that has not authenticated when it sends an
 * argument longer than this (processMultibulkBuffer: "Protocol error:
 * unauthenticated bulk length"). A verb's SCRIPT LOAD goes ahead of its
 * first call even before the client authenticated (Redis refuses it with
 * -NOAUTH, and it is sent again later), so no script may be longer. */
#define REDIS_PREAUTH_BULK_MAX 16384

Test(verbs, every_script_fits_redis_pre_auth_bulk_limit)
{
    for (int i = 0; i < verb_scripts_count; i++)
        cr_expect_leq(verb_scripts[i].len, REDIS_PREAUTH_BULK_MAX,
                      "lua/%s.lua assembles to %zu bytes: over Redis's pre-auth limit of %d, its SCRIPT LOAD "
                      "before AUTH would get the connection closed",
                      verb_scripts[i].name, verb_scripts[i].len, REDIS_PREAUTH_BULK_MAX);
}

/* An include line is replaced by the helper's code where it stands: its
 * text verbatim but for its comment-only lines; a script without one is
 * embedded as it is. */
Test(verbs, an_include_line_is_replaced_by_the_helper_text)
{
    char path[512], lib[512], err[256];
    snprintf(path, sizeof(path), "%s/lua/qpop.lua", SOURCE_DIR);
    snprintf(lib, sizeof(lib), "%s/lua/lib/int.lua", SOURCE_DIR);
    size_t len, file_len, lib_len;
    char *text = script_assemble(path, &len, err, sizeof(err));
    char *file = read_file(path, &file_len);
    char *helper = read_file(lib, &lib_len);
    cr_assert(text && file && helper);
    cr_assert(strstr(file, "--#include lib/int.lua\n"), "qpop.lua includes lib/int.lua");
    /* int.lua: its comment lines first, then its code, verbatim. */
    const char *code = strstr(helper, "\nlocal function parse_int");
    cr_assert(code, "lib/int.lua starts with comments, then its function");
    cr_expect(strstr(text, code + 1), "the helper's code is in the script, verbatim");
    cr_expect(!strstr(text, "-- lib/int.lua:"), "its comment lines are not");
    cr_expect(strncmp(text, "#!lua\n", 6) == 0, "the shebang stays the first line");
    cr_expect_gt(len, file_len);
    free(text);
    free(file);
    free(helper);
}

/* A directory for a script s.lua (its path in p) and its helper
 * lib/h.lua (in lp), both 256 bytes. */
static void script_dir(char *dir, char *p, char *lp)
{
    cr_assert(mkdtemp(dir));
    snprintf(p, 256, "%s/lib", dir);
    cr_assert_eq(mkdir(p, 0700), 0);
    snprintf(p, 256, "%s/s.lua", dir);
    snprintf(lp, 256, "%s/lib/h.lua", dir);
}

static void script_dir_remove(const char *dir, char *p, const char *lp)
{
    unlink(lp);
    unlink(p);
    snprintf(p, 256, "%s/lib", dir);
    rmdir(p);
    rmdir(dir);
}

/* A helper function nothing else names is dropped, and so is one only a
 * dropped one called; one named anywhere else (a call, a mention) stays,
 * and so does the helper's other code, and a function written off the
 * style (on one line, a body not indented), which is kept whole. */
Test(verbs, helper_functions_nothing_names_are_dropped)
{
    char dir[] = "/tmp/vp_script_text_XXXXXX", p[256], lp[256], err[256] = "";
    script_dir(dir, p, lp);
    FILE *f = fopen(p, "w");
    fputs("#!lua\n--#include lib/h.lua\n-- (see keep_named)\nreturn used(1)\n", f);
    fclose(f);
    f = fopen(lp, "w");
    fputs("-- lib/h.lua\nlocal function only_unused_calls()\n  return 1\nend\n"
          "local function unused(x)\n  if x then\n    return only_unused_calls()\n  end\n  return "
          "unused(x)\nend\n"
          "local function inner()\n  return 2\nend\nlocal function used(x)\n  return x + inner()\nend\n"
          "local function keep_named()\nend\nlocal function one_line() return 4 end\n"
          "local function flat()\nreturn 5\nend\nlocal y = 3\n",
          f);
    fclose(f);
    size_t len;
    char *text = script_assemble(p, &len, err, sizeof(err));
    cr_assert(text, "%s", err);
    cr_expect_str_eq(
        text, "#!lua\nlocal function inner()\n  return 2\nend\nlocal function used(x)\n  return x + "
              "inner()\nend\nlocal function keep_named()\nend\nlocal function one_line() return 4 end\n"
              "local function flat()\nreturn 5\nend\nlocal y = 3\n-- (see keep_named)\n"
              "return used(1)\n");
    cr_expect_eq(len, strlen(text));
    free(text);
    script_dir_remove(dir, p, lp);
}

/* A helper that includes another, or an include of anything but
 * lib/<name>.lua, stops the build with the reason. */
Test(verbs, bad_include_lines_are_refused)
{
    char dir[] = "/tmp/vp_script_text_XXXXXX", p[256], lp[256], err[256] = "";
    script_dir(dir, p, lp);
    size_t len;
    FILE *f = fopen(p, "w");
    fputs("--#include ../etc/passwd\n", f);
    fclose(f);
    cr_expect_null(script_assemble(p, &len, err, sizeof(err)));
    cr_expect(strstr(err, "lib/<name>.lua"), "%s", err);
    f = fopen(p, "w");
    fputs("--#include lib/h.lua\nreturn 1\n", f);
    fclose(f);
    f = fopen(lp, "w");
    fputs("--#include lib/h.lua\n", f);
    fclose(f);
    cr_expect_null(script_assemble(p, &len, err, sizeof(err)));
    cr_expect(strstr(err, "includes nothing"), "%s", err);
    f = fopen(lp, "w");
    fputs("local x = 1\n", f);
    fclose(f);
    char *text = script_assemble(p, &len, err, sizeof(err));
    cr_assert(text, "%s", err);
    cr_expect_str_eq(text, "local x = 1\nreturn 1\n");
    free(text);
    script_dir_remove(dir, p, lp);
}

Test(verbs, sha1_is_openssls)
{
    char sha[41];
    verbs_sha1_hex("abc", 3, sha);
    cr_assert_str_eq(sha, "a9993e364706816aba3e25717850c26c9cd0d89d");
}

static verb_table table;

static void build(void)
{
    char err[256];
    cr_assert_eq(verbs_build(&table, NULL, 0, 100000, err, sizeof(err)), 0, "%s", err);
}

static void unbuild(void)
{
    verbs_free(&table);
}

TestSuite(verb_checks, .init = build, .fini = unbuild);

Test(verb_checks, lookup_is_case_insensitive_and_exact)
{
    cr_assert(verbs_find(&table, "ZTICK", 5));
    cr_assert(verbs_find(&table, "ztick", 5));
    cr_assert(verbs_find(&table, "zTiCk", 5));
    cr_assert_null(verbs_find(&table, "ztic", 4));
    cr_assert_null(verbs_find(&table, "zticks", 6));
    cr_assert_null(verbs_find(&table, "get", 3));
    cr_assert_null(verbs_find(&table, "", 0));
    cr_assert_str_eq(verbs_find(&table, "LockHandOver", 12)->name, "lockhandover");
    cr_assert_str_eq(table.ztick_max, "100000");
}

/* Split "a b c" into argv (no spaces inside arguments in these tests). */
static int split(char *line, resp_arg *argv)
{
    int n = 0;
    for (char *save = NULL, *w = strtok_r(line, " ", &save); w; w = strtok_r(NULL, " ", &save))
        argv[n++] = (resp_arg){w, strlen(w)};
    return n;
}

/* The error for a call, or "" if it is accepted. */
static const char *check(const char *cmd, verb_call *call)
{
    static char err[VERB_ERR_MAX];
    static char line[512];
    snprintf(line, sizeof(line), "%s", cmd);
    resp_arg argv[32];
    int argc = split(line, argv);
    const verb_def *v = verbs_find(&table, argv[0].ptr, argv[0].len);
    cr_assert(v, "%s is no verb", cmd);
    verb_call dummy;
    err[0] = '\0';
    int rc = verbs_check(v, argc, argv, call ? call : &dummy, err, sizeof(err));
    cr_assert((rc == 0) == (err[0] == '\0'), "%s: rc %d but err '%s'", cmd, rc, err);
    return err;
}

#define OK(cmd) cr_expect_str_eq(check(cmd, NULL), "", "%s", cmd)
#define ERR(cmd, text) cr_expect_str_eq(check(cmd, NULL), text, "%s", cmd)
#define ARITY(cmd, name) ERR(cmd, "ERR wrong number of arguments for '" name "' command")

Test(verb_checks, arity_errors_are_told_from_value_errors)
{
    resp_arg argv[5] = {{"ztick", 5}, {"k", 1}, {"x", 1}, {"1", 1}, {"y", 1}};
    verb_call call;
    char err[VERB_ERR_MAX];
    const verb_def *v = verbs_find(&table, "ztick", 5);
    cr_assert_eq(verbs_check(v, 3, argv, &call, err, sizeof(err)), VERB_ERR_ARITY);
    cr_assert_eq(verbs_check(v, 4, argv, &call, err, sizeof(err)), VERB_ERR_VALUE);
    cr_assert_str_eq(err, "ERR value is not a valid float");
    v = verbs_find(&table, "hsetver", 7);
    resp_arg h[6] = {{"hsetver", 7}, {"h", 1}, {"1", 1}, {"f", 1}, {"v", 1}, {"g", 1}};
    /* odd field/value pairs: like HSET's, an error of the command, not of its arity */
    cr_assert_eq(verbs_check(v, 6, h, &call, err, sizeof(err)), VERB_ERR_VALUE);
    cr_assert_str_eq(err, "ERR wrong number of arguments for 'hsetver' command");
}
#define SYNTAX "ERR syntax error"
#define FLOAT "ERR value is not a valid float"
#define INT "ERR value is not an integer or out of range"
#define POSITIVE "ERR value is out of range, must be positive"

Test(verb_checks, ztick)
{
    OK("ZTICK k 15 100");
    OK("ztick k -1.5 1e3 WITHSCORES");
    OK("ZTICK k inf -inf withscores");
    ARITY("ZTICK k 15", "ztick");
    ARITY("ZTICK", "ztick");
    ERR("ZTICK k abc 100", FLOAT);
    ERR("ZTICK k 1 nan", FLOAT);
    ERR("ZTICK k 1 100x", FLOAT);
    ERR("ZTICK k 1 100 WITHSCORE", SYNTAX);
    ERR("ZTICK k 1 100 WITHSCORES x", SYNTAX);
}

Test(verb_checks, qpop_options_and_the_lease_key)
{
    verb_call call;
    cr_assert_str_eq(check("QPOP q", &call), "");
    cr_assert_eq(call.nkeys, 1);
    cr_assert_eq(call.first_arg, 2);
    cr_assert_str_eq(check("QPOP q COUNT 5 LEASE q:lease 30000 MAXSCORE NOW", &call), "");
    cr_assert_eq(call.nkeys, 2);
    cr_assert_eq(call.keys[0], 1);
    cr_assert_eq(call.keys[1], 5, "the lease key is argv[5]");
    cr_assert_eq(call.first_arg, 2);
    OK("qpop q count 0 maxscore -inf");
    OK("QPOP q MAXSCORE 17.5");
    ERR("QPOP q COUNT", SYNTAX);
    ERR("QPOP q COUNT x", INT);
    ERR("QPOP q COUNT -1", POSITIVE);
    ERR("QPOP q COUNT 01", INT);
    ERR("QPOP q MAXSCORE later", FLOAT);
    ERR("QPOP q LEASE q:lease", SYNTAX);
    ERR("QPOP q LEASE q:lease 0", "ERR invalid expire time in 'qpop' command");
    ERR("QPOP q LEASE q:lease -5", "ERR invalid expire time in 'qpop' command");
    ERR("QPOP q LEASE q:lease 1.5", INT);
    ERR("QPOP q BOGUS", SYNTAX);
    ARITY("QPOP", "qpop");
}

Test(verb_checks, queue_helpers)
{
    OK("QACK l m");
    OK("QACK l m1 m2 m3");
    ARITY("QACK l", "qack");
    OK("QEXTEND l m 1000");
    ERR("QEXTEND l m 0", "ERR invalid expire time in 'qextend' command");
    ERR("QEXTEND l m soon", INT);
    ARITY("QEXTEND l m", "qextend");
    ARITY("QEXTEND l m 1 2", "qextend");
    verb_call call;
    cr_assert_str_eq(check("QRECLAIM l q NOW COUNT 10", &call), "");
    cr_assert_eq(call.nkeys, 2);
    cr_assert_eq(call.keys[1], 2);
    cr_assert_eq(call.first_arg, 3);
    OK("QRECLAIM l q 0");
    ERR("QRECLAIM l q x", FLOAT);
    ERR("QRECLAIM l q 0 COUNT", SYNTAX);
    ERR("QRECLAIM l q 0 COUNT -2", POSITIVE);
    ERR("QRECLAIM l q 0 LIMIT 2", SYNTAX);
    ARITY("QRECLAIM l q", "qreclaim");
}

Test(verb_checks, locks)
{
    OK("LOCKRELEASE k t");
    ARITY("LOCKRELEASE k", "lockrelease");
    ARITY("LOCKRELEASE k t x", "lockrelease");
    OK("LOCKRENEW k t 30000");
    ERR("LOCKRENEW k t 0", "ERR invalid expire time in 'lockrenew' command");
    ERR("LOCKRENEW k t 9223372036854775808", INT);
    OK("LOCKHANDOVER k a b 1000");
    ERR("LOCKHANDOVER k a b -1", "ERR invalid expire time in 'lockhandover' command");
    ARITY("LOCKHANDOVER k a b", "lockhandover");
}

Test(verb_checks, hsetver)
{
    OK("HSETVER h 3 f v");
    OK("HSETVER h -9223372036854775808 f v g w");
    OK("HSETVER h 9223372036854775807 f v");
    ERR("HSETVER h 9223372036854775808 f v", INT);
    ERR("HSETVER h +3 f v", INT);
    ERR("HSETVER h 3.0 f v", INT);
    ARITY("HSETVER h 3 f", "hsetver");
    ARITY("HSETVER h 3 f v g", "hsetver");
}

Test(verb_checks, zwindow)
{
    OK("ZWINDOW k 1000 m");
    OK("ZWINDOW k 1000 m LIMIT 0");
    ERR("ZWINDOW k 0 m", "ERR invalid expire time in 'zwindow' command");
    ERR("ZWINDOW k x m", INT);
    ERR("ZWINDOW k 1000 m LIMIT", SYNTAX);
    ERR("ZWINDOW k 1000 m LIMIT -1", POSITIVE);
    ERR("ZWINDOW k 1000 m MAX 3", SYNTAX);
    ARITY("ZWINDOW k 1000", "zwindow");
}

#define CURSOR "ERR invalid cursor"

Test(verb_checks, zpage)
{
    verb_call call;
    cr_assert_str_eq(check("ZPAGE k 0 10", &call), "");
    cr_assert_eq(call.nkeys, 1);
    cr_assert_eq(call.keys[0], 1);
    cr_assert_eq(call.range_count, 0);
    cr_assert_eq(call.first_arg, 2, "ARGV: cursor, count, options");
    OK("ZPAGE k 0 1 REV WITHSCORES");
    OK("zpage k 0 1 withscores rev Rev");
    OK("ZPAGE k a5:6d31 3");
    OK("ZPAGE k r5:6d31 3 REV");
    OK("ZPAGE k a7: 1"); /* the empty member */
    OK("ZPAGE k r-inf: 1 rev");
    OK("ZPAGE k ainf:00ff 1");
    OK("ZPAGE k a4.9406564584124654e-324:00 1");
    OK("ZPAGE k a-1.7976931348623157e+308:61 1");
    OK("ZPAGE k a1:61 9223372036854775807");
    ARITY("ZPAGE k 0", "zpage");
    ARITY("ZPAGE k", "zpage");
    ARITY("ZPAGE", "zpage");
    ERR("ZPAGE k 0 x", INT);
    ERR("ZPAGE k 0 1.5", INT);
    ERR("ZPAGE k 0 01", INT);
    ERR("ZPAGE k 0 9223372036854775808", INT);
    ERR("ZPAGE k 0 0", POSITIVE);
    ERR("ZPAGE k 0 -3", POSITIVE);
    ERR("ZPAGE k 0 1 FOO", SYNTAX);
    ERR("ZPAGE k 0 1 REV LIMIT", SYNTAX);
    /* a cursor of the other direction, or not one ZPAGE gives */
    ERR("ZPAGE k r1:61 1", CURSOR);
    ERR("ZPAGE k a1:61 1 REV", CURSOR);
    ERR("ZPAGE k a1:6 1", CURSOR);
    ERR("ZPAGE k a1:6g 1", CURSOR);
    ERR("ZPAGE k a1:6A 1", CURSOR);
    ERR("ZPAGE k a1:61:62 1", CURSOR);
    ERR("ZPAGE k a:61 1", CURSOR);
    ERR("ZPAGE k a1 1", CURSOR);
    ERR("ZPAGE k a 1", CURSOR);
    ERR("ZPAGE k ax:61 1", CURSOR);
    ERR("ZPAGE k anan:61 1", CURSOR);
    ERR("ZPAGE k a1e999:61 1", CURSOR);
    ERR("ZPAGE k a1e-999:61 1", CURSOR);
    ERR("ZPAGE k b1:61 1", CURSOR);
    ERR("ZPAGE k A1:61 1", CURSOR);
    ERR("ZPAGE k 00 1", CURSOR);
    ERR("ZPAGE k -0 1", CURSOR);
    /* options, then count, then the cursor */
    ERR("ZPAGE k bad x FOO", SYNTAX);
    ERR("ZPAGE k bad x", INT);
    ERR("ZPAGE k bad 0", POSITIVE);
    ERR("ZPAGE k bad 1", CURSOR);
}

#define EXPIRE "ERR invalid expire time in 'zsnapshot' command"
#define NUMKEYS "ERR at least 1 input key is needed for 'zsnapshot' command"
#define WEIGHT "ERR weight value is not a float"

/* KEYS = dest, then the numkeys run; ARGV = everything after dest. */
Test(verb_checks, zsnapshot_keys_are_dest_and_the_numkeys_run)
{
    verb_call call;
    cr_assert_str_eq(check("ZSNAPSHOT d 1000 3 a b c WEIGHTS 1 2 3 AGGREGATE COUNT", &call), "");
    cr_assert_eq(call.nkeys, 1);
    cr_assert_eq(call.keys[0], 1, "dest is argv[1]");
    cr_assert_eq(call.range_first, 4, "the sources start at argv[4]");
    cr_assert_eq(call.range_count, 3);
    cr_assert_eq(call.first_arg, 2, "ARGV: ttl-ms, numkeys, the sources, the options");
    cr_assert_str_eq(check("zsnapshot d 1 1 a", &call), "");
    cr_assert_eq(call.range_first, 4);
    cr_assert_eq(call.range_count, 1);
    /* the next call's keys start afresh */
    cr_assert_str_eq(check("QPOP q", &call), "");
    cr_assert_eq(call.nkeys, 1);
    cr_assert_eq(call.range_count, 0);
}

Test(verb_checks, zsnapshot)
{
    OK("ZSNAPSHOT d 1000 2 a b");
    OK("zsnapshot d 1 1 a aggregate min weights -inf");
    OK("ZSNAPSHOT d 1000 2 a b WEIGHTS 0.5 1e3 AGGREGATE max AGGREGATE Count WEIGHTS 1 2");
    OK("ZSNAPSHOT d 1000 1 d");
    /* whether server time + ttl passes int64 only the script can tell */
    OK("ZSNAPSHOT d 9223372036854775807 1 a");
    ARITY("ZSNAPSHOT d 1000 1", "zsnapshot");
    ARITY("ZSNAPSHOT d 1000", "zsnapshot");
    ARITY("ZSNAPSHOT", "zsnapshot");
    ERR("ZSNAPSHOT d x 1 a", INT);
    ERR("ZSNAPSHOT d 1.5 1 a", INT);
    ERR("ZSNAPSHOT d 9223372036854775808 1 a", INT);
    ERR("ZSNAPSHOT d 0 1 a", EXPIRE);
    ERR("ZSNAPSHOT d -5 1 a", EXPIRE);
    ERR("ZSNAPSHOT d 1000 x a", INT);
    ERR("ZSNAPSHOT d 1000 01 a", INT);
    ERR("ZSNAPSHOT d 1000 9223372036854775808 a", INT);
    ERR("ZSNAPSHOT d 1000 0 a", NUMKEYS);
    ERR("ZSNAPSHOT d 1000 -1 a", NUMKEYS);
    ERR("ZSNAPSHOT d 1000 2 a", SYNTAX);
    ERR("ZSNAPSHOT d 1000 9223372036854775807 a", SYNTAX);
    ERR("ZSNAPSHOT d 1000 1 a WEIGHTS", SYNTAX);
    ERR("ZSNAPSHOT d 1000 2 a b WEIGHTS 1", SYNTAX);
    ERR("ZSNAPSHOT d 1000 1 a WEIGHTS 1 2", SYNTAX);
    ERR("ZSNAPSHOT d 1000 1 a WEIGHTS x", WEIGHT);
    ERR("ZSNAPSHOT d 1000 1 a WEIGHTS nan", WEIGHT);
    ERR("ZSNAPSHOT d 1000 2 a b WEIGHTS 1 1e999", WEIGHT);
    ERR("ZSNAPSHOT d 1000 1 a AGGREGATE", SYNTAX);
    ERR("ZSNAPSHOT d 1000 1 a AGGREGATE AVG", SYNTAX);
    ERR("ZSNAPSHOT d 1000 1 a AGGREGATE SUM x", SYNTAX);
    ERR("ZSNAPSHOT d 1000 1 a WITHSCORES", SYNTAX);
    /* ttl, numkeys, then the options from left to right */
    ERR("ZSNAPSHOT d 0 x a", EXPIRE);
    ERR("ZSNAPSHOT d x 0 a", INT);
    ERR("ZSNAPSHOT d 1000 0 a AGGREGATE AVG", NUMKEYS);
    ERR("ZSNAPSHOT d 1000 1 a WEIGHTS x AGGREGATE AVG", WEIGHT);
    ERR("ZSNAPSHOT d 1000 1 a AGGREGATE AVG WEIGHTS x", SYNTAX);
}

/* ---- custom verbs ---- */

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/vp-verbs-XXXXXX");
    cr_assert(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof(path), "%s/mine.lua", dir);
    FILE *f = fopen(path, "w");
    fputs("return redis.call('GET', KEYS[1])\n", f);
    fclose(f);
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(custom_verbs, .init = make_dir, .fini = remove_dir);

Test(custom_verbs, a_config_line_adds_a_verb)
{
    verb_def *v;
    char err[256] = "";
    cr_assert_eq(verbs_parse_custom("MyGet mine.lua numkeys 1 arity 2 readonly", dir, &v, err, sizeof(err)),
                 0, "%s", err);
    cr_assert_str_eq(v->name, "myget");
    cr_assert_eq(v->arity, 2);
    cr_assert_eq(v->numkeys, 1);
    cr_assert(v->readonly);
    char sha[41];
    const char *body = "return redis.call('GET', KEYS[1])\n";
    verbs_sha1_hex(body, strlen(body), sha);
    cr_assert_str_eq(v->sha, sha);
    char want[160];
    snprintf(want, sizeof(want), "%s/mine.lua", dir);
    cr_assert_str_eq(v->source, want);

    verb_table t;
    cr_assert_eq(verbs_build(&t, &v, 1, 0, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(verbs_find(&t, "MYGET", 5), v);
    cr_assert(verbs_find(&t, "qpop", 4));
    cr_assert_str_eq(t.ztick_max, "0");
    resp_arg argv[3] = {{"myget", 5}, {"k", 1}, {"x", 1}};
    verb_call call;
    cr_assert_eq(verbs_check(v, 3, argv, &call, err, sizeof(err)), VERB_ERR_ARITY);
    cr_assert_str_eq(err, "ERR wrong number of arguments for 'myget' command");
    cr_assert_eq(verbs_check(v, 2, argv, &call, err, sizeof(err)), 0);
    cr_assert_eq(call.nkeys, 1);
    cr_assert_eq(call.first_arg, 2);
    /* the SCRIPT LOAD round holds every verb's body */
    cr_assert(memmem(t.load_cmds[VERB_DIALECT_7], t.load_len[VERB_DIALECT_7], body, strlen(body)));
    /* and Redis 6.2's, the same text without a shebang to turn into a comment */
    cr_assert(memmem(t.load_cmds[VERB_DIALECT_PRE7], t.load_len[VERB_DIALECT_PRE7], body, strlen(body)));
    cr_assert_str_eq(v->sha_pre7, v->sha);
    verbs_free(&t);
    verbs_free_def(v);
}

/* A custom verb's shebang is a comment in Redis 6.2's text, which is as
 * long, with its own SHA-1; the rest is the operator's bytes. */
Test(custom_verbs, a_shebang_is_a_comment_in_redis_6_2s_text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/flagged.lua", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])\n", f);
    fclose(f);
    verb_def *v;
    char err[256] = "";
    cr_assert_eq(verbs_parse_custom("flagged flagged.lua numkeys 1 readonly", dir, &v, err, sizeof(err)), 0,
                 "%s", err);
    cr_assert_str_eq(verbs_body(v, VERB_DIALECT_7),
                     "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])\n");
    cr_assert_str_eq(verbs_body(v, VERB_DIALECT_PRE7),
                     "--lua flags=no-writes\nreturn redis.call('GET', KEYS[1])\n");
    char sha[41];
    verbs_sha1_hex(v->body_pre7, v->body_len, sha);
    cr_assert_str_eq(verbs_sha(v, VERB_DIALECT_PRE7), sha);
    cr_assert_str_neq(verbs_sha(v, VERB_DIALECT_7), sha);
    verbs_free_def(v);
}

static void refused(const char *line, const char *why)
{
    verb_def *v = NULL;
    char err[256] = "";
    cr_expect_eq(verbs_parse_custom(line, dir, &v, err, sizeof(err)), -1, "%s accepted", line);
    cr_expect(strstr(err, why), "%s: '%s' does not say '%s'", line, err, why);
}

Test(custom_verbs, shadowing_and_bad_lines_are_refused)
{
    refused("get mine.lua numkeys 1", "shadow the Redis command get");
    refused("EVALSHA mine.lua numkeys 1", "shadow the Redis command evalsha");
    refused("ZTick mine.lua numkeys 1", "shadow the built-in verb ztick");
    refused("verbproxy mine.lua numkeys 1", "VERBPROXY");
    refused("mine missing.lua numkeys 1", "cannot read script");
    refused("mine mine.lua numkeys x", "numkeys");
    refused("mine mine.lua keys 1", "expected NAME path numkeys N");
    refused("mine mine.lua numkeys 2 arity 2", "no room for 2 keys");
    refused("mine mine.lua numkeys 1 arity 0", "arity");
    refused("mine mine.lua numkeys 1 fast", "unexpected 'fast'");
    refused("my/verb mine.lua numkeys 1", "may hold only");
}

Test(custom_verbs, from_the_config_file_relative_to_it)
{
    char conf[128];
    snprintf(conf, sizeof(conf), "%s/vp.conf", dir);
    FILE *f = fopen(conf, "w");
    fputs("# custom verbs\nverb myget mine.lua numkeys 1\nztick-max-members 5\n", f);
    fclose(f);
    vp_config c;
    conf_defaults(&c);
    cr_assert_eq(c.ztick_max_members, 100000);
    char err[512] = "";
    cr_assert_eq(conf_load_file(&c, conf, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(c.ncustom_verbs, 1);
    cr_assert_str_eq(c.custom_verbs[0]->name, "myget");
    cr_assert_eq(c.custom_verbs[0]->arity, -2);
    cr_assert_eq(c.ztick_max_members, 5);
    conf_free(&c);

    f = fopen(conf, "w");
    fputs("verb myget mine.lua numkeys 1\nverb MYGET mine.lua numkeys 1\n", f);
    fclose(f);
    conf_defaults(&c);
    cr_assert_eq(conf_load_file(&c, conf, err, sizeof(err)), -1);
    cr_assert(strstr(err, "vp.conf:2: verb 'myget' is defined twice"), "%s", err);
    conf_free(&c);

    f = fopen(conf, "w");
    fputs("verb set mine.lua numkeys 1\n", f);
    fclose(f);
    conf_defaults(&c);
    cr_assert_eq(conf_load_file(&c, conf, err, sizeof(err)), -1);
    cr_assert(strstr(err, "vp.conf:1: verb 'set' would shadow the Redis command set"), "%s", err);
    conf_free(&c);
}

/* ---- what SCRIPT LOAD answers ----
 * A real Redis always answers the SHA of what it was sent, so a mismatch
 * cannot be produced by a server in a test: the check itself is tested
 * here, on the answers Redis gives (a bulk SHA, an error). */

Test(script_load_answers, a_foreign_sha_disables_the_verb_an_error_reloads_later)
{
    static vp_server srv;
    char err[256];
    cr_assert_eq(verbs_build(&srv.verbs, NULL, 0, 0, err, sizeof(err)), 0, "%s", err);
    upstream_conn up = {.srv = &srv, .scripts_loaded = UP_SCRIPTS_ALL};
    const verb_def *z = verbs_find(&srv.verbs, "ztick", 5);
    void *e = (void *)(intptr_t)z->id; /* the ask's argument: which verb */
    char reply[64];

    snprintf(reply, sizeof(reply), "$40\r\n%s\r\n", z->sha);
    up_check_script_load(&up, e, reply, strlen(reply));
    cr_assert_not(srv.verbs.broken[z->id], "the pinned SHA is accepted");
    cr_assert_eq(up.scripts_loaded, UP_SCRIPTS_ALL);

    const char *noauth = "-NOAUTH Authentication required.\r\n";
    up_check_script_load(&up, e, noauth, strlen(noauth));
    cr_assert_not(srv.verbs.broken[z->id]);
    cr_assert_eq(up.scripts_loaded & (1ULL << srv.verbs.script_of[z->id]), 0,
                 "a refused load is repeated before the verb's next call");
    cr_assert_neq(up.scripts_loaded, 0, "the other scripts stay loaded");

    const char *other = "$40\r\n0000000000000000000000000000000000000000\r\n";
    up_check_script_load(&up, e, other, strlen(other));
    cr_assert(srv.verbs.broken[z->id], "another SHA disables the verb");
    const verb_def *q = verbs_find(&srv.verbs, "qpop", 4);
    cr_assert_not(srv.verbs.broken[q->id], "and only that verb");
    verbs_free(&srv.verbs);
}
