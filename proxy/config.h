/* config.h - verbproxy's settings, from conf/verbproxy.conf style files
 * ("directive value", '#' comments, Redis-style) and command-line flags.
 * Every directive can also be given as a flag: `--port 7000` is the same as
 * the line `port 7000`; flags are applied after the file. */
#ifndef VP_CONFIG_H
#define VP_CONFIG_H

#include <stddef.h>

#include "proxy/auth_users.h"
#include "proxy/log.h"

#define CONF_ADDR_MAX 256
#define CONF_SECRET_MAX 1024
/* The environment variable an upstream password may come from. */
#define CONF_UPSTREAM_PASS_ENV "VERBPROXY_UPSTREAM_PASS"
#define CONF_TEXT_MAX 1024 /* cipher lists */

/* tls-auth-clients: as Redis's. */
typedef enum conf_tls_auth { CONF_TLS_AUTH_YES, CONF_TLS_AUTH_NO, CONF_TLS_AUTH_OPTIONAL } conf_tls_auth;

/* One side's TLS settings (proxy/net/tls.c builds a context from them): the
 * upstream side's `upstream-tls-*` and the client side's `tls-*`. An empty
 * string is "not set". */
typedef struct conf_tls {
    char ca_cert_file[CONF_ADDR_MAX];
    char ca_cert_dir[CONF_ADDR_MAX];
    char cert_file[CONF_ADDR_MAX];
    char key_file[CONF_ADDR_MAX];
    char key_file_pass[CONF_ADDR_MAX]; /* client side only */
    char protocols[CONF_ADDR_MAX];     /* "" = "TLSv1.2 TLSv1.3" */
    char ciphers[CONF_TEXT_MAX];       /* TLSv1.2 and below; "" = OpenSSL's default */
    char ciphersuites[CONF_TEXT_MAX];  /* TLSv1.3; "" = OpenSSL's default */
    char server_name[CONF_ADDR_MAX];   /* upstream: SNI and the name checked; "" = the upstream host */
    int verify;                        /* upstream: check the chain and the name (default 1) */
    conf_tls_auth auth_clients;        /* client side (default yes) */
} conf_tls;

/* upstream-mode: what runs behind `upstream`. */
typedef enum conf_upstream_mode {
    CONF_MODE_STANDALONE, /* one Redis at `upstream` */
    CONF_MODE_SENTINEL,   /* the primary the sentinels name (proxy/route/sentinel.c) */
    CONF_MODE_CLUSTER     /* a Redis Cluster; `upstream` lines are its seed nodes (proxy/route/cluster.c) */
} conf_upstream_mode;
#define CONF_MAX_SENTINELS 16
#define CONF_MAX_SEEDS 16

/* aggregate-count-polyfill: when ZUNION, ZINTER and their STORE variants
 * with AGGREGATE COUNT run as the proxy's script instead of Redis's own
 * command (upstream_server.c). */
typedef enum conf_polyfill {
    CONF_POLYFILL_AUTO, /* where the upstream's name and version say it lacks COUNT */
    CONF_POLYFILL_YES,  /* always */
    CONF_POLYFILL_NO    /* never: passed through, as every other command */
} conf_polyfill;

typedef struct vp_config {
    char bind[CONF_ADDR_MAX];       /* TCP listen address */
    int port;                       /* TCP listen port; 0 = no TCP listener */
    char unixsocket[CONF_ADDR_MAX]; /* unix listen socket path, "" = none */
    int unixsocketperm;             /* octal mode for the unix socket, 0 = umask */
    int tcp_backlog;

    /* The upstream address. In sentinel mode a runtime value: "" until the
     * sentinels name a primary, then rewritten by proxy/route/sentinel.c at every
     * switch (and carried over a reload); every upstream connection opens
     * to what it holds at that moment. */
    char upstream[CONF_ADDR_MAX];      /* as written: host:port or a socket path */
    char upstream_host[CONF_ADDR_MAX]; /* host, or the unix socket path */
    int upstream_port;                 /* 0 for a unix socket */
    int upstream_given;                /* `upstream` was set (not the default) */
    conf_upstream_mode upstream_mode;
    /* Cluster mode: every address of every `upstream` line (one line may
     * list several, separated by commas) is a seed node; without
     * any, `upstream`'s default. `upstream_items`: how many the last line
     * listed (more than one is for cluster mode only). */
    char cluster_seed_hosts[CONF_MAX_SEEDS][CONF_ADDR_MAX];
    int cluster_seed_ports[CONF_MAX_SEEDS];
    int ncluster_seeds;
    int upstream_items;
    int cluster_split_writes; /* cluster-split-writes: MSET over several slots is split (not atomic) */
    /* Sentinel mode: `sentinel host:port` lines, `sentinel-master`, and the
     * sentinels' own credentials (sentinel-pass-file, else sentinel-pass),
     * turned by conf_finish into `sentinel_auth`, the AUTH request sent
     * first to every sentinel (owned; NULL: none). */
    char sentinels[CONF_MAX_SENTINELS][CONF_ADDR_MAX]; /* as written */
    char sentinel_hosts[CONF_MAX_SENTINELS][CONF_ADDR_MAX];
    int sentinel_ports[CONF_MAX_SENTINELS];
    int nsentinels;
    char sentinel_master[CONF_ADDR_MAX];
    char sentinel_user[CONF_ADDR_MAX];
    char sentinel_pass[CONF_SECRET_MAX];
    char sentinel_pass_file[CONF_ADDR_MAX];
    char *sentinel_auth;
    size_t sentinel_auth_len;
    long long connect_timeout_ms;
    int upstream_tls;            /* every upstream connection over TLS (upstream-tls yes) */
    conf_tls upstream_tls_conf;  /* upstream-tls-* */
    int tls_port;                /* client-side TLS listener on `bind`; 0 = none */
    conf_tls tls;                /* tls-* (client side), Redis's names */
    long long shared_upstreams;  /* connections shared by stateless clients; 0 = one per client */
    long long shared_batch_hold; /* microseconds a small shared batch may wait for more (upstream_hold.c) */
    long long maxclients;        /* client connections taken at once (limits.h may lower it) */
    long long timeout;           /* seconds a client may stay idle; 0 = forever (client_cron) */
    long long tcp_keepalive;     /* SO_KEEPALIVE idle seconds on every TCP socket, both sides; 0 = off */
    int protected_mode;          /* refuse non-loopback clients while the default user has no password */
    int metrics_port;            /* the admin HTTP endpoint (http_admin.h); 0 = off */
    char metrics_bind[CONF_ADDR_MAX]; /* its address */

    /* Upstream credentials. The password comes from upstream-pass-file (its
     * first line), else $VERBPROXY_UPSTREAM_PASS, else upstream-pass;
     * conf_finish turns them into `upstream_auth`, the AUTH request sent
     * first on every upstream connection (owned; NULL: none). */
    char upstream_user[CONF_ADDR_MAX];
    char upstream_pass[CONF_SECRET_MAX];
    char upstream_pass_file[CONF_ADDR_MAX];
    char *upstream_auth;
    size_t upstream_auth_len;
    const char *upstream_pass_source; /* which of the three gave it (for the log) */
    /* The proxy's own users (requirepass, user lines). */
    auth_table auth;

    long long proto_max_bulk_len;
    long long proto_max_multibulk_len;
    long long buffer_limit;              /* bytes queued towards one side before reading the other pauses */
    long long client_query_buffer_limit; /* a client holding more unparsed bytes is closed */

    vp_log_level loglevel;
    int log_format; /* vp_log_format: redis (Redis's line) or json */
    /* SIGTERM's drain (proxy/ops/lifecycle.c): seconds it waits for clients
     * to leave; seconds it lasts at least, clients or not (0: none). */
    long long shutdown_timeout;
    long long shutdown_min_drain;

    /* Verbs. */
    long long ztick_max_members;    /* a bigger set makes ZTICK fail; 0 = no limit */
    conf_polyfill aggregate_count;  /* ZUNION & co. with AGGREGATE COUNT: by the upstream's version, or always
                                       one way */
    struct verb_def **custom_verbs; /* `verb` lines, in order; owned */
    int ncustom_verbs;
    char **conveyor_patterns; /* `conveyor` lines, in order; owned (proxy/conveyor/conveyor.h) */
    int nconveyor_patterns;
    char conf_dir[CONF_ADDR_MAX * 4]; /* the file being loaded's directory: base of relative script paths */
} vp_config;

void conf_defaults(vp_config *c);
/* After the file and the flags: resolve the upstream password (env_pass:
 * the environment's, or NULL) and check what only the whole settings can
 * say. Returns 0, or -1 with a reason in err. */
int conf_finish(vp_config *c, const char *env_pass, char *err, size_t errlen);
/* Is this directive's value a secret (to be kept out of argv and logs)? */
int conf_is_secret(const char *name);
/* May this directive be given many times, each adding one (`verb`, `user`)? */
int conf_is_repeatable(const char *name);
/* Free what the settings own (the custom verbs, the users, the AUTH
 * request: secrets are wiped first). */
/* "host:port" or "[v6]:port" into host (CONF_ADDR_MAX) and port. */
int conf_parse_hostport(const char *value, char *host, int *port);
void conf_free(vp_config *c);
/* Apply one directive. Returns 0, or -1 with a reason in err. */
int conf_set(vp_config *c, const char *name, const char *value, char *err, size_t errlen);
/* Load a file: read whole (a read error, a directory, a file over 16 MiB
 * refuse it: a config read in part is never applied), then parsed.
 * Returns 0, or -1 with "path: reason" or "path:line: reason" in err. */
int conf_load_file(vp_config *c, const char *path, char *err, size_t errlen);
/* The parser alone, no file read (but a `verb` line's script, a TLS
 * file's existence): the text of a file, len bytes, applied line by line;
 * `path` names it in messages and is the base of relative script paths.
 * Returns 0, or -1 with "path:line: reason" in err (a NUL byte in a line
 * is refused: not a text file). */
int conf_parse_text(vp_config *c, const char *text, size_t len, const char *path, char *err, size_t errlen);
/* Redis's memory units: 1k=1000 1kb=1024 1m 1mb 1g 1gb, case-insensitive. */
int conf_parse_memory(const char *s, long long *out);
/* "host:port", "[v6]:port" or a path starting with '/' or "unix:". */
int conf_parse_upstream(vp_config *c, const char *value, char *err, size_t errlen);

#endif
