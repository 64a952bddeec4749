/* hang_resolver.c - an LD_PRELOAD shim for test_sentinel: a resolver that
 * hangs on one name.
 *
 * getaddrinfo() of VT_HANG_NAME ("vt-hang.invalid") appends a line to the
 * file named by $VT_HANG_LOG (one per lookup started), then blocks until
 * the file named by $VT_HANG_RELEASE exists (checked every 10 ms: the
 * story creates it before stopping the proxy, whose exit joins libuv's
 * pool threads), then fails with EAI_AGAIN. Any other name goes to the
 * real getaddrinfo. Not part of the proxy; built only with the tests. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VT_HANG_NAME "vt-hang.invalid"

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res)
{
    if (node && strcmp(node, VT_HANG_NAME) == 0) {
        const char *log = getenv("VT_HANG_LOG"), *release = getenv("VT_HANG_RELEASE");
        if (log) {
            FILE *f = fopen(log, "a");
            if (f) {
                fputs("lookup\n", f);
                fclose(f);
            }
        }
        /* (At most ten minutes: never a process that cannot exit.) */
        for (int i = 0; i < 60000 && release && access(release, F_OK) != 0; i++) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        return EAI_AGAIN;
    }
    typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
    getaddrinfo_fn real = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    return real(node, service, hints, res);
}
