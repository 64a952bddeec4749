/* bystander.h - honest clients that keep pipelining during a hostile story.
 *
 * Every hostile integration story (a client sending garbage, a huge reply, a
 * command that upsets Redis) must also prove that nobody else suffered. A
 * group of bystanders does that: each one is a thread with its own
 * connection, sending pipelined batches of commands on keys of its own
 * (INCR, SET, GET, a 20 kB value now and then so replies stream) and checking
 * every reply byte for byte against what it must be, in order, each batch
 * within a deadline. The first lost, wrong, reordered or late reply, or a
 * closed connection, stops that bystander and is kept as the group's verdict.
 *
 * Keys are `vtb:<pid>:<group>:<n>:*`, so several groups can run against one
 * server; a story that flushes or restarts Redis cannot use bystanders.
 *
 * Typical story:
 *     vt_bystanders *b = vt_bystanders_start(env.proxy->port, 4);
 *     cr_assert(vt_bystanders_wait(b, 50, 10000));   // under way
 *     ... the hostile client does its thing ...
 *     cr_assert(vt_bystanders_wait(b, 50, 10000));   // still served after it
 *     vt_assert_bystanders_ok(b);                    // stops, frees, asserts
 *
 * Ownership: the group is the test's; vt_bystanders_stop() joins the threads
 * and frees it. Errors are returned, never asserted here. */
#ifndef VT_BYSTANDER_H
#define VT_BYSTANDER_H

#include <stdbool.h>
#include <stddef.h>

#define VT_BYSTANDERS_MAX 32
/* A batch must be answered within this (a reply "delayed past Redis's own
 * behaviour" fails the story). */
#define VT_BYSTANDER_BATCH_DEADLINE_MS 10000

typedef struct vt_bystanders vt_bystanders;

/* Start n (1..VT_BYSTANDERS_MAX) bystanders against 127.0.0.1:port. NULL
 * (why on stderr) if one cannot connect. */
vt_bystanders *vt_bystanders_start(int port, int n);
/* The same in front of a proxy with a password of its own: each bystander
 * sends AUTH <password> (answered +OK) before its first batch. */
vt_bystanders *vt_bystanders_start_auth(int port, int n, const char *password);
/* The same as a user of its own: AUTH <user> <password>. */
vt_bystanders *vt_bystanders_start_auth_user(int port, int n, const char *user, const char *password);
/* Wait until every bystander has had `more` further replies checked,
 * counted from this call. False on timeout or once any bystander failed. */
bool vt_bystanders_wait(vt_bystanders *b, long long more, int timeout_ms);
/* Has any bystander failed so far? (why, if not NULL, gets the first
 * failure.) */
bool vt_bystanders_failed(vt_bystanders *b, char *why, size_t whylen);
/* Stop every bystander after its current batch, join, free. True if every
 * reply was right; *checked (if not NULL) gets the replies checked in all;
 * why gets the first failure. */
bool vt_bystanders_stop(vt_bystanders *b, long long *checked, char *why, size_t whylen);

#endif
