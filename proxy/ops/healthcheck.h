/* healthcheck.h - `verbproxy --healthcheck [HOST:]PORT[/PATH]`: GET
 * http://HOST:PORT/PATH (default host 127.0.0.1, path /healthz) and exit 0
 * only on a 2xx answer: the Dockerfile's HEALTHCHECK, where the slim image
 * has no curl (and redis-cli would exit 0 on -NOAUTH). */
#ifndef VP_HEALTHCHECK_H
#define VP_HEALTHCHECK_H

#include <stddef.h>

/* One deadline for connect, request and response (and the attempts after
 * a connection dropped unanswered): below Docker's default HEALTHCHECK
 * --timeout (30 s) and kubelet's usual probe timeouts. */
#define HEALTHCHECK_TIMEOUT_MS 3000

/* Returns 0 on a 2xx answer, 1 otherwise; why gets a one-line account
 * either way ("HTTP 503: draining", "connect to ...: Connection refused"). */
int healthcheck_run(const char *target, int timeout_ms, char *why, size_t whylen);
/* healthcheck_run with HEALTHCHECK_TIMEOUT_MS; prints why (stdout on
 * success, stderr on failure). The process's exit status. */
int healthcheck_main(const char *target);

#endif
