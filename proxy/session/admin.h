/* admin.h - replies the proxy writes about itself and its verbs:
 *   VERBPROXY VERBS | STATS | HELP   (the proxy's own command)
 *   COMMAND INFO / COMMAND DOCS      (Redis answers for its commands; the
 *                                     proxy fills in the verbs)
 * Pure functions: they append RESP to a buffer the caller owns. */
#ifndef VP_ADMIN_H
#define VP_ADMIN_H

#include "lua/verbs.h"
#include "protocol/resp_request.h"
#include "proxy/buffer.h"
#include "proxy/server.h"

/* Is this the proxy's own command (VERBPROXY, any case)? */
int admin_is_own_command(const resp_arg *name);
/* Answer VERBPROXY <sub> ...: a reply or an error, appended to out. */
void admin_command(const vp_server *srv, int argc, const resp_arg *argv, vp_buf *out);

typedef enum admin_patch_kind {
    ADMIN_PATCH_NONE,
    ADMIN_PATCH_INFO,     /* COMMAND INFO name...: the verbs' entries where Redis put nil */
    ADMIN_PATCH_INFO_ALL, /* COMMAND, COMMAND INFO: every verb's entry added */
    ADMIN_PATCH_DOCS,     /* COMMAND DOCS [name...]: the verbs' docs added to the map */
    ADMIN_PATCH_COUNT,    /* COMMAND COUNT: the verbs counted */
    ADMIN_PATCH_LIST      /* COMMAND LIST: the verbs' names added */
} admin_patch_kind;

/* Does Redis's reply to this command need the verbs filled in? The kind,
 * and the verb ids concerned in *verb_ids (malloc'd, *n entries; for INFO
 * one per name argument, -1 where it is no verb). ADMIN_PATCH_NONE
 * (nothing allocated) for every other command. */
admin_patch_kind admin_command_patch(const verb_table *t, int argc, const resp_arg *argv, int **verb_ids,
                                     int *n);
/* Rewrite Redis's reply accordingly. Returns 0, or -1 when the reply is not
 * what Redis sends for it (an error, say): then it goes out as is. */
int admin_patch_reply(const verb_table *t, admin_patch_kind kind, const int *verb_ids, int n,
                      const char *reply, size_t len, vp_buf *out);

#endif
