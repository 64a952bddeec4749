/* route_keys.h - where a Redis command's keys are, and how it may be routed.
 *
 * The first stage of cluster routing (command -> keys -> slot -> node): for
 * a command's arguments, the positions of its keys, found exactly as Redis
 * 7.0 finds them (db.c getKeysFromCommandWithSpecs, which cluster.c's
 * getNodeByQuery uses to route and to answer CROSSSLOT): the command's key
 * specs first, and the command's own key-finding procedure when a spec
 * cannot say (SORT ... STORE, MIGRATE ... KEYS, SET's variable flags, an
 * unparsable numkeys). The data is the command table (proxy/cmd/
 * command_table.h: cmd_table_lookup), generated from a real redis-server's
 * COMMAND INFO; the command flags and request/response policy tips there
 * say which commands write, block, are pub/sub, admin, or fan out over
 * every node.
 *
 * Pure: no libuv, no allocation, no I/O. Arguments are (pointer, length)
 * pairs as the request parser hands them over, not NUL-terminated. */
#ifndef VP_ROUTE_KEYS_H
#define VP_ROUTE_KEYS_H

#include <stddef.h>

#include "proxy/cmd/command_table.h"

/* The positions (into argv) of cmd's keys, in Redis's order: the number of
 * keys, of which the first `cap` are written to pos. 0 for a command
 * without keys and for arguments Redis would refuse (a wrong arity, a
 * numkeys that is no number or too big): Redis answers those with an error
 * whichever node gets them. */
int rkeys_find(const cmd_info *cmd, int argc, const char *const *argv, const size_t *lens, int *pos, int cap);

#endif
