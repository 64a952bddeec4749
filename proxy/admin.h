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

typedef enum admin_patch_kind { ADMIN_PATCH_NONE, ADMIN_PATCH_INFO, ADMIN_PATCH_DOCS } admin_patch_kind;

/* COMMAND INFO|DOCS naming at least one verb: which kind of patch its reply
 * needs, and for each name argument (argv[2..]) the verb id or -1 in
 * *verb_ids (malloc'd, *n entries). ADMIN_PATCH_NONE (nothing allocated)
 * for every other command. */
admin_patch_kind admin_command_patch(const verb_table *t, int argc, const resp_arg *argv, int **verb_ids,
                                     int *n);
/* Rewrite Redis's reply: INFO gets each verb's entry where Redis put nil;
 * DOCS gets the verbs' entries added to its map. Returns 0, or -1 when the
 * reply is not what Redis sends (an error, say): then it goes out as is. */
int admin_patch_reply(const verb_table *t, admin_patch_kind kind, const int *verb_ids, int n,
                      const char *reply, size_t len, vp_buf *out);

#endif
