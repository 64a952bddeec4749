#include "proxy/session/introspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/resp_frame.h"
#include "proxy/cmd/command.h"
#include "proxy/session/metrics_info.h"
#include "proxy/pool.h"

/* Replies are written with proxy/buffer.h's vp_buf_resp_* (protocol/resp_write.h). */

#define PUT_LIT(b, lit) vp_buf_append((b), (lit), sizeof(lit) - 1)

static void put_error(vp_buf *b, const char *s)
{
    vp_buf_resp_error(b, s, strlen(s));
}

/* ---- VERBPROXY ---- */

int introspect_is_own_command(const resp_arg *name)
{
    return name->len == 9 && cmd_arg_is(name, "verbproxy");
}

static void introspect_verbs(const verb_table *t, vp_buf *out)
{
    vp_buf_resp_array(out, t->count);
    for (int i = 0; i < t->count; i++) {
        const verb_def *v = t->verbs[i];
        vp_buf_resp_array(out, 7);
        vp_buf_resp_bulk_str(out, v->name);
        vp_buf_resp_bulk_str(out, v->syntax);
        vp_buf_resp_bulk_str(out, v->sha);
        vp_buf_resp_integer(out, v->arity);
        vp_buf_resp_integer(out, v->numkeys);
        vp_buf_resp_bulk_str(out, v->readonly ? "readonly" : "write");
        vp_buf_resp_bulk_str(out, v->source);
    }
}

static void introspect_stats(const vp_stats *s, vp_buf *out)
{
    char text[3072];
    size_t n = stats_format(s, text, sizeof(text), ":", "\r\n");
    /* And what the pools hold (pool.h): with every client idle, nothing
     * in use but the read buffer of the client asking. */
    n += vp_pool_format(text + n, sizeof(text) - n, ":", "\r\n");
    vp_buf_resp_bulk(out, text, n);
}

static void introspect_help(vp_buf *out)
{
    static const char *const lines[] = {
        "VERBPROXY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "VERBS",
        "    Return the virtual verbs: name, syntax, pinned SHA-1, arity, number of leading keys,",
        "    write|readonly, source (builtin or the script's path).",
        "STATS",
        "    Return the proxy's counters, INFO style (noscript_recoveries, ...).",
        "INFO [<section>]",
        "    Return the figures of the metrics endpoint, INFO style. Sections: server, clients, stats,",
        "    upstream (the default), commandstats, latencystats, all.",
        "CONVEYOR INFO <key>",
        "    Return a conveyor key's offset, members, offset key, last rebase (ms) and rebases.",
        "CONVEYOR REBASE <key>",
        "    Fold a conveyor key's offset into its stored scores (O(N)), then return its INFO.",
        "HELP",
        "    Print this help.",
    };
    int n = (int)(sizeof(lines) / sizeof(lines[0]));
    vp_buf_resp_array(out, n);
    for (int i = 0; i < n; i++) {
        vp_buf_resp_simple(out, lines[i], strlen(lines[i]));
    }
}

void introspect_command(const vp_server *srv, int argc, const resp_arg *argv, vp_buf *out)
{
    if (argc < 2) {
        put_error(out, "ERR wrong number of arguments for 'verbproxy' command");
        return;
    }
    const resp_arg *sub = &argv[1];
    if (cmd_arg_is(sub, "info") && argc <= 3) {
        vp_buf text = {0};
        metrics_info_write(srv, argc == 3 ? argv[2].ptr : NULL, argc == 3 ? argv[2].len : 0, &text);
        vp_buf_resp_bulk(out, text.data ? text.data : "", text.len);
        vp_buf_free(&text);
        return;
    }
    if (cmd_arg_is(sub, "verbs") || cmd_arg_is(sub, "info") || cmd_arg_is(sub, "stats") ||
        cmd_arg_is(sub, "help") || cmd_arg_is(sub, "conveyor")) {
        /* (CONVEYOR with its subcommand and key runs as a script:
         * client_call_conveyor; here only with another count) */
        if (argc != 2 || cmd_arg_is(sub, "conveyor")) {
            char msg[96];
            int n = snprintf(msg, sizeof(msg), "ERR wrong number of arguments for 'verbproxy|%.*s' command",
                             (int)sub->len, sub->ptr);
            for (int i = 4; i < n; i++)
                if (msg[i] >= 'A' && msg[i] <= 'Z') msg[i] = (char)(msg[i] + 32);
            put_error(out, msg);
        } else if (cmd_arg_is(sub, "verbs")) {
            introspect_verbs(&srv->verbs, out);
        } else if (cmd_arg_is(sub, "stats")) {
            introspect_stats(&srv->stats, out);
        } else {
            introspect_help(out);
        }
        return;
    }
    /* Redis's wording for an unknown subcommand (a CR or LF in it becomes
     * a space, vp_buf_resp_error). */
    char msg[160];
    snprintf(msg, sizeof(msg), "ERR unknown subcommand '%.*s'. Try VERBPROXY HELP.",
             (int)(sub->len > 64 ? 64 : sub->len), sub->ptr);
    put_error(out, msg);
}

/* ---- COMMAND INFO / COMMAND DOCS ---- */

/* Every verb, for the full listings (not the polyfills: those commands
 * are Redis's). */
static int *all_verbs(const verb_table *t, int *n)
{
    int *ids = vp_malloc((size_t)(t->nnamed ? t->nnamed : 1) * sizeof(int));
    for (int i = 0; i < t->nnamed; i++)
        ids[i] = i;
    *n = t->nnamed;
    return ids;
}

introspect_patch_kind introspect_command_patch(const verb_table *t, int argc, const resp_arg *argv,
                                               int **verb_ids, int *n)
{
    if (argv[0].len != 7 || !cmd_arg_is(&argv[0], "command")) return INTROSPECT_PATCH_NONE;
    if (argc == 1) {
        *verb_ids = all_verbs(t, n);
        return INTROSPECT_PATCH_INFO_ALL;
    }
    introspect_patch_kind kind;
    if (cmd_arg_is(&argv[1], "info"))
        kind = INTROSPECT_PATCH_INFO;
    else if (cmd_arg_is(&argv[1], "docs"))
        kind = INTROSPECT_PATCH_DOCS;
    else if (argc == 2 && cmd_arg_is(&argv[1], "count"))
        kind = INTROSPECT_PATCH_COUNT;
    else if (argc == 2 && cmd_arg_is(&argv[1], "list"))
        kind = INTROSPECT_PATCH_LIST;
    else
        return INTROSPECT_PATCH_NONE;
    if (argc == 2) { /* no names: the whole listing */
        *verb_ids = all_verbs(t, n);
        return kind == INTROSPECT_PATCH_INFO ? INTROSPECT_PATCH_INFO_ALL : kind;
    }
    int *ids = NULL; /* allocated at the first verb named */
    for (int i = 2; i < argc; i++) {
        const verb_def *v = verbs_find(t, argv[i].ptr, argv[i].len);
        if (v && !ids) {
            ids = vp_malloc((size_t)(argc - 2) * sizeof(int));
            for (int j = 2; j < i; j++)
                ids[j - 2] = -1;
        }
        if (ids) ids[i - 2] = v ? v->id : -1;
    }
    if (!ids) return INTROSPECT_PATCH_NONE;
    *verb_ids = ids;
    *n = argc - 2;
    return kind;
}

/* Redis 7's COMMAND INFO entry for a verb (the RESP2 shape, which RESP3
 * clients read too). */
static void verb_info(const verb_def *v, vp_buf *out)
{
    vp_buf_resp_array(out, 10);
    vp_buf_resp_bulk_str(out, v->name);
    vp_buf_resp_integer(out, v->arity);
    if (v->readonly)
        PUT_LIT(out, RESP_LIT_ARRAY(1) "+readonly\r\n");
    else
        PUT_LIT(out, RESP_LIT_ARRAY(1) "+write\r\n");
    int k = v->numkeys;
    vp_buf_resp_integer(out, k ? 1 : 0);
    vp_buf_resp_integer(out, k);
    vp_buf_resp_integer(out, k ? 1 : 0);
    PUT_LIT(out, RESP_LIT_ARRAY(1) "+@scripting\r\n");
    PUT_LIT(out, RESP_LIT_ARRAY(0) RESP_LIT_ARRAY(0) RESP_LIT_ARRAY(0)); /* tips, key specs, subcommands */
}

static void verb_docs(const verb_def *v, int resp3, vp_buf *out)
{
    char summary[1024];
    snprintf(summary, sizeof(summary), "%s Syntax: %s", v->summary, v->syntax);
    vp_buf_resp_bulk_str(out, v->name);
    if (resp3)
        vp_buf_resp_header(out, RESP_MAP, 4);
    else
        vp_buf_resp_array(out, 8);
    vp_buf_resp_bulk_str(out, "summary");
    vp_buf_resp_bulk_str(out, summary);
    vp_buf_resp_bulk_str(out, "since");
    vp_buf_resp_bulk_str(out, VP_VERSION);
    vp_buf_resp_bulk_str(out, "group");
    vp_buf_resp_bulk_str(out, v->group);
    vp_buf_resp_bulk_str(out, "complexity");
    vp_buf_resp_bulk_str(out, "O(N) where N is the number of members the script reads or writes.");
}

/* The aggregate header at r: its type and count, and where its elements
 * start. -1 if it is not one. */
static int read_header(const char *r, size_t len, char *type, long long *count, size_t *body)
{
    if (len < 4 || (r[0] != '*' && r[0] != '%')) return -1;
    const char *crlf = memchr(r, '\r', len);
    if (!crlf) return -1;
    char num[24];
    size_t nl = (size_t)(crlf - r - 1);
    if (nl == 0 || nl >= sizeof(num)) return -1;
    memcpy(num, r + 1, nl);
    num[nl] = '\0';
    char *end;
    *count = strtoll(num, &end, 10);
    if (*end || *count < 0) return -1;
    *type = r[0];
    *body = (size_t)(crlf - r) + 2;
    return 0;
}

int introspect_patch_reply(const verb_table *t, introspect_patch_kind kind, const int *verb_ids, int n,
                           const char *reply, size_t len, vp_buf *out)
{
    char type;
    long long count;
    size_t body;
    if (kind == INTROSPECT_PATCH_COUNT) {
        char *end;
        if (len < 4 || reply[0] != ':') return -1;
        long long c = strtoll(reply + 1, &end, 10);
        if (end != reply + len - 2) return -1;
        vp_buf_resp_integer(out, c + n);
        return 0;
    }
    if (read_header(reply, len, &type, &count, &body) < 0) return -1;
    if (kind == INTROSPECT_PATCH_INFO_ALL || kind == INTROSPECT_PATCH_LIST) {
        if (type != '*') return -1;
        vp_buf_resp_array(out, count + n);
        vp_buf_append(out, reply + body, len - body);
        for (int i = 0; i < n; i++) {
            if (kind == INTROSPECT_PATCH_LIST)
                vp_buf_resp_bulk_str(out, t->verbs[verb_ids[i]]->name);
            else
                verb_info(t->verbs[verb_ids[i]], out);
        }
        return 0;
    }
    if (kind == INTROSPECT_PATCH_DOCS) {
        int m = 0;
        for (int i = 0; i < n; i++)
            m += verb_ids[i] >= 0;
        int resp3 = type == '%';
        vp_buf_resp_header(out, resp3 ? RESP_MAP : RESP_ARRAY, count + (resp3 ? m : 2 * m));
        vp_buf_append(out, reply + body, len - body);
        for (int i = 0; i < n; i++)
            if (verb_ids[i] >= 0) verb_docs(t->verbs[verb_ids[i]], resp3, out);
        return 0;
    }
    /* INFO: one element per name, nil where Redis knows no such command. */
    if (type != '*' || count != n) return -1;
    vp_buf_append(out, reply, body);
    size_t pos = body;
    for (int i = 0; i < n; i++) {
        resp_framer f;
        resp_frame_reset(&f);
        size_t used = 0;
        if (resp_frame_scan(&f, reply + pos, len - pos, &used) != RESP_FRAME_DONE) return -1;
        if (verb_ids[i] >= 0)
            verb_info(t->verbs[verb_ids[i]], out);
        else
            vp_buf_append(out, reply + pos, used);
        pos += used;
    }
    return pos == len ? 0 : -1;
}
