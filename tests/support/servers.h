/* servers.h - real redis-server and verbproxy processes for integration tests.
 *
 * Every test starts its own redis-server (and usually its own verbproxy) on a
 * free port, in its own temp dir, and stops them in its .fini. Nothing is
 * mocked: the proxy under test is the binary CMake built (VP_BINARY).
 *
 * Cleanup even when a test dies: criterion runs each test in a forked worker.
 * Every process started here gets PR_SET_PDEATHSIG(SIGKILL), so it dies with
 * the worker whatever happens to the worker (failed assert in .init, crash,
 * criterion's timeout). Each temp dir has a "reaper" child that waits for
 * SIGTERM (sent by vt_*_free, or by the kernel when the worker dies) and then
 * removes the dir. Set VP_TEST_KEEP=1 to keep the dirs for debugging.
 *
 * Waiting is always "poll a condition until a deadline", never a bare sleep.
 *
 * VP_TEST_UPSTREAM_TLS=1 (CTest's integration-tls/ entries): every
 * redis-server also listens on a TLS port (tls-auth-clients no; its plain
 * port stays, so tests can still look at Redis with hiredis, which has no
 * TLS here), and vt_proxy_start() points the proxy at that port with
 * --upstream-tls yes and the test CA (tls_certs.h). A proxy started on a
 * unix socket upstream or with vt_proxy_start_upstream (black hole, fault
 * proxy) stays plaintext.
 *
 * VP_TEST_DIRECT=1: vt_proxy_start() starts no proxy and hands back the
 * redis-server's own address, so the whole suite can be checked against Redis
 * itself. Tests of proxy-only behaviour skip themselves (VT_SKIP_IF_DIRECT in
 * checks.h).
 *
 * Errors are returned (NULL / false) with a line on stderr saying why; the
 * test decides whether that fails it. */
#ifndef VT_SERVERS_H
#define VT_SERVERS_H

#include <stdbool.h>
#include <sys/types.h>

#define VT_START_DEADLINE_MS 10000 /* a server must answer within this */
#define VT_STOP_DEADLINE_MS 10000  /* SIGTERM, then SIGKILL after this */
#define VT_MAX_EXTRA_ARGS 16

/* The server every story starts (Redis, a Sentinel, a cluster's nodes):
 * $VP_TEST_REDIS_SERVER, else Debian's /usr/bin/redis-server. One variable,
 * read by the Python and Node tests too, so any suite runs against any
 * supported server (scripts/upstreams.sh builds them). */
const char *vt_redis_binary(void);
/* The release whose words the proxy uses where it answers by itself
 * (protected mode, its own users, the pre-AUTH limit): Debian 12's Redis
 * 7.0.15. A story comparing those with Redis starts its reference from
 * this (vt_redis_opts.binary), whatever server the proxy fronts. */
#define VT_REDIS_OWN_WORDS_BINARY "/usr/bin/redis-server"
/* Its version as major * 100 + minor (Redis 6.2.16: 602; Valkey 8.0.1:
 * 800; Valkey 7.2 says 7.2), from `--version`; asserted readable. */
int vt_redis_version(void);
/* The name the server's own messages use ("-BUSY Redis is busy ...",
 * HELLO's "server"): "Valkey" from Valkey 8 on, else "Redis" (Valkey 7.2
 * kept Redis's words). */
const char *vt_server_says(void);

/* Does a redis-server listen for TLS (tls_certs.h's certificates)? */
typedef enum vt_redis_tls {
    VT_REDIS_TLS_AUTO, /* a TLS port too when VP_TEST_UPSTREAM_TLS=1 */
    VT_REDIS_TLS_ALSO, /* a TLS port beside the plain one */
    VT_REDIS_TLS_ONLY, /* --port 0: TLS only (hiredis cannot reach it) */
    VT_REDIS_TLS_NONE
} vt_redis_tls;

typedef struct vt_redis_opts {
    bool unixsocket; /* also listen on <dir>/redis.sock */
    vt_redis_tls tls;
    const char *tls_cert; /* with TLS: the server certificate's name in tls_certs.h (default "server") */
    const char *tls_auth_clients;  /* with TLS: default "no" */
    const char *requirepass;       /* NULL: no password */
    const char *const *extra_args; /* NULL-terminated, appended as is; may be NULL */
    const char *config_text;       /* written to <dir>/redis.conf, given as the config file (sentinels
                                      rewrite theirs); NULL: none */
    bool sentinel;                 /* --sentinel (with config_text: sentinel.h) */
    bool standalone;               /* a redis-server of its own even in the cluster variant
                                      (cluster_env.h): a reference to compare replies with */
    const char *binary;            /* NULL: vt_redis_binary(); else a server of this path (a
                                      reference pinned to one release), kept as a pointer */
} vt_redis_opts;

/* One redis-server. Owned by the test; vt_redis_free() stops it and removes
 * its dir. The port stays the same over stop/restart. */
typedef struct vt_redis {
    pid_t pid; /* 0 while not running */
    int port;
    int tls_port;         /* 0: no TLS */
    bool tls_only;        /* --port 0 (`port` is then not listened on) */
    char dir[64];         /* working dir: log file, unix socket */
    char unixsocket[128]; /* "" unless opts.unixsocket */
    char log[128];        /* redis-server's stdout/stderr */
    char conf[128];       /* "" unless opts.config_text */
    bool sentinel;
    const char *binary;                     /* opts.binary */
    bool borrowed;                          /* a node of the variant's shared cluster (cluster_env.h):
                                               nothing started here, nothing to stop */
    char *args[2 * VT_MAX_EXTRA_ARGS + 24]; /* copied extra arguments, NULL-terminated */
    pid_t reaper;
} vt_redis;

/* Allocate a port and a dir; start nothing (for "upstream down at start"). */
vt_redis *vt_redis_new(const vt_redis_opts *opts);
/* Start the (stopped) server on its port and wait until PING answers. */
bool vt_redis_launch(vt_redis *r);
/* vt_redis_new + vt_redis_launch. NULL on failure. In the cluster variant
 * (cluster_env.h) plain options borrow the suite's cluster instead. */
vt_redis *vt_redis_start(const vt_redis_opts *opts);
/* SIGTERM, wait; SIGKILL at the deadline. */
void vt_redis_stop(vt_redis *r);
/* kill -9 and reap: the server dies without closing anything gracefully. */
void vt_redis_kill(vt_redis *r);
/* Stop if running, then launch again on the same port. */
bool vt_redis_restart(vt_redis *r);
void vt_redis_free(vt_redis *r);

typedef struct vt_proxy_opts {
    int connect_timeout_ms;        /* --connect-timeout; 0 leaves the proxy's default */
    bool unixsocket;               /* also listen on <dir>/verbproxy.sock */
    bool upstream_unix;            /* --upstream <redis unix socket> instead of host:port */
    const char *const *extra_args; /* NULL-terminated flags appended as is; may be NULL */
    long nofile;                   /* > 0: the proxy's open-file limit, soft and hard (ulimit -n) */
    bool upstream_tls;             /* to the redis's TLS port even without VP_TEST_UPSTREAM_TLS */
    bool no_loglevel;              /* no --loglevel warning flag (a --config file's loglevel is to count) */
    bool upstream_in_config;       /* no --upstream flag: the test's --config file names the upstream
                                      (a flag would override the file's line, at start and at SIGHUP) */
} vt_proxy_opts;

/* One verbproxy in front of one redis. In direct mode (VP_TEST_DIRECT=1) no
 * process runs: port and unixsocket are the redis-server's own. */
typedef struct vt_proxy {
    pid_t pid; /* 0 while not running, and always in direct mode */
    bool direct;
    int port;
    char unixsocket[128]; /* "" unless opts.unixsocket */
    char upstream[160];   /* what --upstream was given */
    bool upstream_tls;    /* --upstream-tls yes was given */
    bool cluster;         /* --upstream-mode cluster (in front of a borrowed cluster node) */
    char dir[64];         /* "" in direct mode */
    char log[128];        /* verbproxy's stdout/stderr */
    vt_proxy_opts opts;
    pid_t reaper;
    bool crashed; /* it exited on its own (not by our signal) */
    bool waited;  /* it exited after a signal of the test's (vt_proxy_wait_exit) */
} vt_proxy;

bool vt_direct_mode(void);
/* VP_TEST_UPSTREAM_TLS=1: the integration-tls/ variant. */
bool vt_upstream_tls_mode(void);
/* How many shared upstream connections the proxy runs with (0: every client
 * has its own; always 0 in direct mode). VP_TEST_SHARED_UPSTREAMS=N runs
 * every proxy with --shared-upstreams N (CTest's integration-own/ entries
 * use 0). */
int vt_proxy_shared_upstreams(const struct vt_proxy *p);
/* Start verbproxy in front of `upstream` (which need not be running) and wait
 * until its port accepts connections. opts may be NULL. NULL on failure. */
vt_proxy *vt_proxy_start(const vt_redis *upstream, const vt_proxy_opts *opts);
/* Start verbproxy in front of an arbitrary upstream address ("host:port" or a
 * unix socket path), e.g. a black hole. Not available in direct mode. */
vt_proxy *vt_proxy_start_upstream(const char *upstream, const vt_proxy_opts *opts);
/* Is the proxy process still running? (Always true in direct mode.) */
bool vt_proxy_alive(vt_proxy *p);
/* SIGQUIT (the proxy closes everything at once: SIGTERM would drain while
 * clients stay), wait; SIGKILL at the deadline. Returns false if the proxy
 * had already died on its own or exited with a failure status. */
bool vt_proxy_stop(vt_proxy *p);
/* Send a signal to the proxy (false in direct mode or when not running). */
bool vt_proxy_signal(vt_proxy *p, int sig);
/* Wait up to timeout_ms for the proxy to exit on its own (after a signal
 * the test sent): true with the wait status in *status (the proxy is then
 * reaped, pid 0); false if it is still running (or in direct mode). */
bool vt_proxy_wait_exit(vt_proxy *p, int timeout_ms, int *status);
void vt_proxy_kill(vt_proxy *p);
/* The proxy's stderr so far (malloc'd, "" in direct mode). */
char *vt_proxy_log(const vt_proxy *p);
/* Stop; print the proxy's log if it crashed or VP_TEST_VERBOSE=1; remove dir. */
void vt_proxy_free(vt_proxy *p);

/* A TCP port where connect() hangs: a listener whose accept queue is full
 * (backlog 0 and one connection never accepted), so the kernel drops every
 * further SYN. For connect-timeout tests; everything stays on 127.0.0.1. */
typedef struct vt_blackhole {
    int port;
    int listen_fd;
    int filler_fd;
} vt_blackhole;

/* false (why on stderr) if this kernel still completes connects to it. */
bool vt_blackhole_open(vt_blackhole *b);
void vt_blackhole_close(vt_blackhole *b);

/* A free TCP port on 127.0.0.1, outside the kernel's ephemeral range,
 * reserved against other test processes until a server binds it. */
int vt_free_port(void);
/* Take this port the same way, if it is free and nobody reserved it. */
bool vt_port_claim(int port);

/* Milliseconds on the monotonic clock. */
long long vt_now_ms(void);
/* Poll cond(arg) every few ms until it is true or timeout_ms passed. */
bool vt_wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms);
/* Ignore SIGPIPE (a test writes to sockets the other side closes). */
void vt_ignore_sigpipe(void);
/* The peak resident set of a process, from /proc (VmHWM), in KiB; -1 if
 * unreadable. (Says nothing under ASan: see VP_SANITIZED.) */
long long vt_peak_rss_kb(pid_t pid);
/* Does /proc/<pid>/<what> (e.g. "cmdline", "environ": NULs and all, its
 * first 64 KiB) hold `needle`? 1 or 0; -1 if it cannot be read. */
int vt_proc_file_holds(pid_t pid, const char *what, const char *needle);
/* Run a shell command line with its stderr joined to its stdout, and keep
 * the first outlen - 1 bytes of that in out (NUL-terminated). Its exit
 * status; -1 if it did not exit (or could not be started). */
int vt_run_capture(const char *cmd, char *out, size_t outlen);
/* Read a whole file (malloc'd, NUL-terminated; "" if it can't be read). */
char *vt_read_file(const char *path);

#endif
