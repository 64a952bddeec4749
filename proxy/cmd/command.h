/* command.h - what the proxy must know about a command before forwarding it.
 *
 * Almost every command is answered by exactly one reply, and the proxy only
 * needs to count. The exceptions change how many replies come back, or turn
 * the connection into a stream the proxy cannot count: those are classified
 * here, by name (case-insensitive, as Redis does) and argument count. A call
 * with the wrong number of arguments is CMD_PLAIN: Redis answers it with one
 * arity error and changes nothing.
 *
 * Which names have which kind and class is the command table's
 * (command_table.h, kept in scripts/gen_command_table.py's CLASSES); these
 * queries add what depends on the arguments. Each is cheap for a command
 * without a kind or class (two bit tests: cmd_table_may_classify), and one
 * table lookup otherwise. */
#ifndef VP_CMD_COMMAND_H
#define VP_CMD_COMMAND_H

#include "protocol/resp_request.h"
#include "proxy/cmd/command_table.h"

cmd_kind cmd_classify(int argc, const resp_arg *argv);
/* Can a command with this name be anything but CMD_PLAIN, whatever its
 * arguments? (Decides whether a request may be streamed before all of its
 * arguments are in.) */
int cmd_name_may_be_special(const resp_arg *name);
/* Does the proxy read more of a command with this name than its class:
 * credentials (AUTH, HELLO: judged by the proxy's own users, noted for
 * Redis's), or settings it follows (CONFIG, ACL: probed after)? Such a
 * request is never streamed. */
int cmd_name_read_whole(const resp_arg *name);

/* Does the command change what a command sent before it would see if it
 * were run again after it (the database, the user, the protocol), or block
 * the connection? A verb's NOSCRIPT retry must not land behind one of
 * these: see upstream_must_settle_verbs. */
int cmd_changes_session(const resp_arg *name);

/* Does the command need a connection of its own (not a shared one)? Yes
 * when it sets or reads connection state (SELECT, AUTH, HELLO, CLIENT ... but its setters below,
 * WATCH, READONLY, SCRIPT DEBUG), may make the shared connection unsafe (CONFIG SET: an output
 * limit, upstream_outlimit.c), may need to reach a busy Redis (SHUTDOWN), changes how replies are counted
 * (MULTI, SUBSCRIBE, MONITOR, RESET, CLIENT REPLY, replication) or may block the connection (BLPOP and the
 * other blocking commands, WAIT, XREAD BLOCK, SHUTDOWN: it waits for lagging replicas, and SHUTDOWN NOSAVE
 * must reach a Redis busy with a script the shared connection may be waiting on): on a shared connection
 * those would leak into other clients' commands or stall them. SYNC, PSYNC and REPLCONF need one whatever
 * their arguments (a PSYNC with extra arguments is still a replica's). Everything else is stateless and may
 * share. */
int cmd_needs_own_connection(int argc, const resp_arg *argv);
/* A blocking command (BLPOP & co., XREAD ... BLOCK): it needs a connection
 * of its own while it waits, but leaves no state there. */
int cmd_is_blocking(int argc, const resp_arg *argv);

/* SCRIPT KILL, FUNCTION KILL, FUNCTION STATS: what Redis 7.0 answers at
 * once while a script or function is busy (CMD_ALLOW_BUSY) and an operator
 * needs then. From a shared connection, which the busy script may hold
 * up, they go on the side connection (upstream_side.c). (The other such
 * commands set connection state and move the client: AUTH, HELLO, MULTI,
 * WATCH..., or close it: QUIT; SHUTDOWN moves it too, see
 * cmd_needs_own_connection.) */
int cmd_is_out_of_band(int argc, const resp_arg *argv);

/* CLIENT SETNAME name / CLIENT SETINFO attr value: clients send them as
 * they connect (ioredis, redis-py 5, node-redis), so they do not move a
 * client; on a shared connection they are sent there for Redis's verdict
 * and sent again on the client's own connection if it moves. */
int cmd_is_client_setter(int argc, const resp_arg *argv);

/* SELECT 0: on a shared connection (always database 0) answered +OK by the
 * proxy, since clients send it as they connect. */
int cmd_is_select_zero(int argc, const resp_arg *argv);

/* "POST" or "Host:" as a command name (any case, any arguments): an HTTP
 * request sent to Redis, which takes it for a cross-protocol attack
 * (securityWarningCommand, checked before anything else in 7.0's
 * processCommand) and closes the connection without a reply. */
int cmd_is_http_request(int argc, const resp_arg *argv);

/* UNSUBSCRIBE, PUNSUBSCRIBE, SUNSUBSCRIBE (a CMD_SUBSCRIBE that does not
 * subscribe). */
int cmd_name_unsubscribes(const resp_arg *name);

/* QUIT (answered by the proxy on a shared connection: Redis would close it). */
int cmd_is_quit(int argc, const resp_arg *argv);
/* AUTH, or HELLO with an AUTH option: may it authenticate the connection? */
int cmd_may_authenticate(int argc, const resp_arg *argv);

/* Case-insensitive comparison of an argument with a lower-case literal. */
int cmd_arg_is(const resp_arg *a, const char *lower);
/* An argument as Redis's string2ll reads an integer: optional '-', no '+',
 * no leading zeros, no spaces, in range. */
int cmd_arg_ll(const resp_arg *a, long long *out);

#endif
