/* redirect.h - what a cluster node's error reply asks the router to do.
 *
 *   -MOVED 3999 127.0.0.1:6381   the slot lives there now: update that one
 *                                slot of the map, resend, refresh soon
 *   -ASK 3999 127.0.0.1:6381     this one command: ASKING then the command
 *                                to that node; the map does not change
 *   -TRYAGAIN ...                a multi-key command during a slot's
 *                                migration: retry shortly
 *   -CLUSTERDOWN ...             pass it on, refresh the map
 *
 * The address is Redis's "host:port" with the port after the last ':', so
 * an IPv6 address needs no brackets ("::1:6381"); an empty host (":6381",
 * a node whose endpoint is unknown) means the host of the connection that
 * got the error. Pure: the host points into the caller's bytes. */
#ifndef VP_REDIRECT_H
#define VP_REDIRECT_H

#include <stddef.h>

typedef enum redirect_kind {
    REDIRECT_NONE, /* any other error (or a malformed MOVED/ASK: passed on as it is) */
    REDIRECT_MOVED,
    REDIRECT_ASK,
    REDIRECT_TRYAGAIN,
    REDIRECT_CLUSTERDOWN
} redirect_kind;

typedef struct redirect {
    redirect_kind kind;
    int slot;         /* MOVED/ASK: 0..16383 */
    const char *host; /* MOVED/ASK: into the error's bytes; hostlen 0: the same host */
    size_t hostlen;
    int port; /* MOVED/ASK: 1..65535 */
} redirect;

/* An error reply's text, with or without its leading '-' and trailing
 * CRLF. Fills *out (kind NONE for anything else) and returns out->kind. */
redirect_kind redirect_parse(const char *err, size_t len, redirect *out);

#endif
