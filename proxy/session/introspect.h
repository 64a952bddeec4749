/* introspect.h - replies the proxy writes about itself and its verbs:
 *   VERBPROXY VERBS | STATS | HELP   (the proxy's own command)
 *   COMMAND INFO / COMMAND DOCS      (Redis answers for its commands; the
 *                                     proxy fills in the verbs)
 * Pure functions: they append RESP to a buffer the caller owns. */
#ifndef VP_INTROSPECT_H
#define VP_INTROSPECT_H

#include "proxy/verbs/verbs.h"
#include "protocol/resp_request.h"
#include "proxy/buffer.h"
#include "proxy/server.h"

/* Is this the proxy's own command (VERBPROXY, any case)? */
int introspect_is_own_command(const resp_arg *name);
/* Answer VERBPROXY <sub> ...: a reply or an error, appended to out. */
void introspect_command(const vp_server *srv, int argc, const resp_arg *argv, vp_buf *out);

typedef enum introspect_patch_kind {
    INTROSPECT_PATCH_NONE,
    INTROSPECT_PATCH_INFO,     /* COMMAND INFO name...: the verbs' entries where Redis put nil */
    INTROSPECT_PATCH_INFO_ALL, /* COMMAND, COMMAND INFO: every verb's entry added */
    INTROSPECT_PATCH_DOCS,     /* COMMAND DOCS [name...]: the verbs' docs added to the map */
    INTROSPECT_PATCH_COUNT,    /* COMMAND COUNT: the verbs counted */
    INTROSPECT_PATCH_LIST      /* COMMAND LIST: the verbs' names added */
} introspect_patch_kind;

/* Does Redis's reply to this command need the verbs filled in? The kind,
 * and the verb ids concerned in *verb_ids (malloc'd, *n entries; for INFO
 * one per name argument, -1 where it is no verb). INTROSPECT_PATCH_NONE
 * (nothing allocated) for every other command. */
introspect_patch_kind introspect_command_patch(const verb_table *t, int argc, const resp_arg *argv,
                                               int **verb_ids, int *n);
/* Rewrite Redis's reply accordingly. Returns 0, or -1 when the reply is not
 * what Redis sends for it (an error, say): then it goes out as is. */
int introspect_patch_reply(const verb_table *t, introspect_patch_kind kind, const int *verb_ids, int n,
                           const char *reply, size_t len, vp_buf *out);

#endif
