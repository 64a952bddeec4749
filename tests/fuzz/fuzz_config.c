/* fuzz_config.c - the config-file parser on arbitrary bytes.
 *
 * The input is the text of a config file, given to conf_parse_text (the
 * pure part of conf_load_file: no file read) as "fuzz/verbproxy.conf".
 * Checked on every input:
 *   - a refusal says where: "fuzz/verbproxy.conf:N: reason", 1 <= N <= the
 *     number of lines, and the reason is not empty;
 *   - an accepted text: every custom verb has a lower-case name of 1 to
 *     VERB_NAME_MAX-1 characters and a 40-digit SHA, 0..VERB_MAX_KEYS keys;
 *     the ports are ports; then conf_finish (unless a password file is
 *     named: that is a file) and the verb table built from the verbs;
 *   - the same text parsed twice gives the same answer (no state left
 *     behind), and everything is freed (LeakSanitizer).
 *
 * No file is opened: a `verb` line's script comes from
 * fuzz_read_script below (this file's verbs_read_script, linked instead of
 * proxy/verbs/script_file.c), and the TLS directives' checks from the stub
 * conf_tls_check (proxy/config_tls.c is not linked: it is a file's
 * existence, or OpenSSL's cipher parser). Built by CMake with VP_FUZZ=ON. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/verbs/script_file.h"
#include "proxy/verbs/verbs.h"
#include "proxy/config.h"
#include "proxy/config_tls.h"

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (!(cond)) __builtin_trap();                                                                       \
    } while (0)

#define FUZZ_PATH "fuzz/verbproxy.conf"

/* A script "read" from its path's last part: '+' is a space and '|' a
 * line end (a config word holds neither), so the fuzzer can write Lua and
 * shebangs in a verb line; a name starting "missing" cannot be read. */
char *verbs_read_script(const char *path, size_t *len, char *err, size_t errlen)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, "missing", 7) == 0) {
        snprintf(err, errlen, "cannot read script %s: No such file or directory", path);
        return NULL;
    }
    size_t n = strlen(base);
    char *body = malloc(n + 1);
    if (!body) abort();
    for (size_t i = 0; i < n; i++)
        body[i] = base[i] == '+' ? ' ' : base[i] == '|' ? '\n' : base[i];
    body[n] = '\0';
    *len = n;
    return body;
}

/* No file, no OpenSSL: every value is taken. */
int conf_tls_check(const char *name, const char *value, char *err, size_t errlen)
{
    (void)name;
    (void)value;
    (void)err;
    (void)errlen;
    return 0;
}

static int count_lines(const char *text, size_t len)
{
    int n = 0;
    for (size_t pos = 0; pos < len; n++) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        pos = nl ? (size_t)(nl - text) + 1 : len;
    }
    return n;
}

static void check_refusal(const char *err, int lines)
{
    size_t pl = strlen(FUZZ_PATH);
    CHECK(strncmp(err, FUZZ_PATH ":", pl + 1) == 0);
    char *end;
    long line = strtol(err + pl + 1, &end, 10);
    CHECK(line >= 1 && line <= lines);
    CHECK(end[0] == ':' && end[1] == ' ' && end[2] != '\0');
}

static void check_verb(const verb_def *v)
{
    size_t n = strlen(v->name);
    CHECK(n >= 1 && n < VERB_NAME_MAX);
    for (size_t i = 0; i < n; i++)
        CHECK(v->name[i] < 'A' || v->name[i] > 'Z');
    CHECK(strlen(v->sha) == 40);
    CHECK(v->numkeys >= 0 && v->numkeys <= VERB_MAX_KEYS);
    CHECK(v->body != NULL);
}

/* What an accepted text became, checked, finished and built. */
static void check_accepted(vp_config *c)
{
    CHECK(c->port >= 0 && c->port <= 65535);
    CHECK(c->tls_port >= 0 && c->tls_port <= 65535);
    CHECK(c->ncustom_verbs >= 0);
    for (int i = 0; i < c->ncustom_verbs; i++)
        check_verb(c->custom_verbs[i]);
    char err[1024];
    if (!c->upstream_pass_file[0] && !c->sentinel_pass_file[0] &&
        conf_finish(c, NULL, err, sizeof(err)) == 0) {
        CHECK(!c->upstream_auth == !c->upstream_pass[0]);
    }
    verb_table t;
    if (verbs_build(&t, c->custom_verbs, c->ncustom_verbs, c->ztick_max_members, err, sizeof(err)) == 0) {
        for (int i = 0; i < c->ncustom_verbs; i++)
            CHECK(verbs_find(&t, c->custom_verbs[i]->name, strlen(c->custom_verbs[i]->name)) != NULL);
        verbs_free(&t); /* (the verbs stay the config's) */
    }
}

static int parse_once(const char *text, size_t len, char *err, size_t errlen)
{
    vp_config c;
    conf_defaults(&c);
    int rc = conf_parse_text(&c, text, len, FUZZ_PATH, err, errlen);
    if (rc == 0) check_accepted(&c);
    conf_free(&c);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* (the parser takes a NUL-terminated copy, as conf_read_text gives) */
    char *text = malloc(size + 1);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = '\0';
    char err1[1024] = "", err2[1024] = "";
    int rc1 = parse_once(text, size, err1, sizeof(err1));
    if (rc1 < 0) check_refusal(err1, count_lines(text, size));
    int rc2 = parse_once(text, size, err2, sizeof(err2));
    CHECK(rc1 == rc2 && strcmp(err1, err2) == 0);
    free(text);
    return 0;
}
