#include "proxy/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "proxy/verbs/verbs.h"
#include "protocol/resp_write.h"
#include "proxy/buffer.h"
#include "proxy/config_tls.h"

void conf_defaults(vp_config *c)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->bind, sizeof(c->bind), "127.0.0.1");
    c->port = 6380;
    c->tcp_backlog = 511;
    snprintf(c->upstream, sizeof(c->upstream), "127.0.0.1:6379");
    snprintf(c->upstream_host, sizeof(c->upstream_host), "127.0.0.1");
    c->upstream_port = 6379;
    c->connect_timeout_ms = 2000;
    c->shared_upstreams = 1;
    c->shared_batch_hold = 50;
    c->maxclients = 10000;
    c->proto_max_bulk_len = 512LL * 1024 * 1024;
    c->proto_max_multibulk_len = INT_MAX;
    c->buffer_limit = 1024 * 1024;
    c->client_query_buffer_limit = 1024LL * 1024 * 1024;
    c->loglevel = VP_LOG_NOTICE;
    c->shutdown_timeout = 30;
    c->shutdown_min_drain = 0; /* exit as soon as no client is left (a native sidecar) */
    c->ztick_max_members = 100000;
    c->tcp_keepalive = 300; /* Redis's */
    c->protected_mode = 1;
    snprintf(c->metrics_bind, sizeof(c->metrics_bind), "127.0.0.1");
    c->upstream_tls_conf.verify = 1;
    c->tls.auth_clients = CONF_TLS_AUTH_YES; /* as Redis */
}

void conf_free(vp_config *c)
{
    for (int i = 0; i < c->ncustom_verbs; i++)
        verbs_free_def(c->custom_verbs[i]);
    free(c->custom_verbs);
    c->custom_verbs = NULL;
    c->ncustom_verbs = 0;
    for (int i = 0; i < c->nconveyor_patterns; i++)
        free(c->conveyor_patterns[i]);
    free(c->conveyor_patterns);
    c->conveyor_patterns = NULL;
    c->nconveyor_patterns = 0;
    auth_free(&c->auth);
    OPENSSL_cleanse(c->upstream_pass, sizeof(c->upstream_pass));
    OPENSSL_cleanse(c->sentinel_pass, sizeof(c->sentinel_pass));
    if (c->upstream_auth) {
        OPENSSL_cleanse(c->upstream_auth, c->upstream_auth_len);
        free(c->upstream_auth);
    }
    c->upstream_auth = NULL;
    c->upstream_auth_len = 0;
    if (c->sentinel_auth) {
        OPENSSL_cleanse(c->sentinel_auth, c->sentinel_auth_len);
        free(c->sentinel_auth);
    }
    c->sentinel_auth = NULL;
    c->sentinel_auth_len = 0;
}

/* `verb NAME path numkeys N [arity A] [readonly]`: may be given many times. */
static int conf_add_verb(vp_config *c, const char *value, char *err, size_t errlen)
{
    verb_def *v;
    if (verbs_parse_custom(value, c->conf_dir, &v, err, errlen) < 0) return -1;
    for (int i = 0; i < c->ncustom_verbs; i++) {
        if (strcmp(c->custom_verbs[i]->name, v->name) == 0) {
            snprintf(err, errlen, "verb '%s' is defined twice", v->name);
            verbs_free_def(v);
            return -1;
        }
    }
    verb_def **n = realloc(c->custom_verbs, (size_t)(c->ncustom_verbs + 1) * sizeof(*n));
    if (!n) abort();
    c->custom_verbs = n;
    c->custom_verbs[c->ncustom_verbs++] = v;
    return 0;
}

/* `conveyor PATTERN`: may be given many times (docs/conveyor.md). */
static int conf_add_conveyor(vp_config *c, const char *value, char *err, size_t errlen)
{
    if (!*value) {
        snprintf(err, errlen, "conveyor needs a pattern");
        return -1;
    }
    for (int i = 0; i < c->nconveyor_patterns; i++)
        if (strcmp(c->conveyor_patterns[i], value) == 0) return 0; /* the same keys again */
    char **n = vp_realloc(c->conveyor_patterns, (size_t)(c->nconveyor_patterns + 1) * sizeof(*n));
    c->conveyor_patterns = n;
    size_t len = strlen(value) + 1;
    c->conveyor_patterns[c->nconveyor_patterns] = vp_malloc(len);
    memcpy(c->conveyor_patterns[c->nconveyor_patterns++], value, len);
    return 0;
}

static int parse_ll(const char *s, long long min, long long max, long long *out)
{
    if (!*s) return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int conf_parse_memory(const char *s, long long *out)
{
    const char *u = s;
    while (*u && (isdigit((unsigned char)*u) || (u == s && *u == '-')))
        u++;
    long long mul;
    if (*u == '\0')
        mul = 1;
    else if (!strcasecmp(u, "b"))
        mul = 1;
    else if (!strcasecmp(u, "k"))
        mul = 1000;
    else if (!strcasecmp(u, "kb"))
        mul = 1024;
    else if (!strcasecmp(u, "m"))
        mul = 1000 * 1000;
    else if (!strcasecmp(u, "mb"))
        mul = 1024 * 1024;
    else if (!strcasecmp(u, "g"))
        mul = 1000LL * 1000 * 1000;
    else if (!strcasecmp(u, "gb"))
        mul = 1024LL * 1024 * 1024;
    else
        return -1;
    char num[32];
    size_t n = (size_t)(u - s);
    if (n == 0 || n >= sizeof(num)) return -1;
    memcpy(num, s, n);
    num[n] = '\0';
    long long v;
    if (parse_ll(num, 0, LLONG_MAX / mul, &v) < 0) return -1;
    *out = v * mul;
    return 0;
}

int conf_parse_upstream(vp_config *c, const char *value, char *err, size_t errlen)
{
    if (strlen(value) >= CONF_ADDR_MAX) {
        snprintf(err, errlen, "upstream address too long");
        return -1;
    }
    if (!strncmp(value, "unix:", 5) || value[0] == '/') {
        const char *path = value[0] == '/' ? value : value + 5;
        if (!*path) {
            snprintf(err, errlen, "empty unix socket path in upstream '%s'", value);
            return -1;
        }
        snprintf(c->upstream, sizeof(c->upstream), "%s", path);
        snprintf(c->upstream_host, sizeof(c->upstream_host), "%s", path);
        c->upstream_port = 0;
        return 0;
    }
    const char *colon = strrchr(value, ':');
    if (!colon || colon == value) {
        snprintf(err, errlen, "upstream must be host:port or a unix socket path, got '%s'", value);
        return -1;
    }
    if (conf_parse_hostport(value, c->upstream_host, &c->upstream_port) < 0) {
        snprintf(err, errlen, "invalid upstream port in '%s'", value);
        return -1;
    }
    snprintf(c->upstream, sizeof(c->upstream), "%s", value);
    return 0;
}

int conf_parse_hostport(const char *value, char *host, int *port)
{
    const char *colon = strrchr(value, ':');
    long long p;
    if (!colon || colon == value || strlen(value) >= CONF_ADDR_MAX || parse_ll(colon + 1, 1, 65535, &p) < 0)
        return -1;
    const char *h = value;
    size_t hl = (size_t)(colon - value);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') { /* [::1]:6379 */
        h++;
        hl -= 2;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)p;
    return 0;
}

/* `upstream ADDR [ADDR...]`: the first address is the upstream (a later
 * line replaces it, as any directive); every one is also a cluster seed
 * (conf_finish_cluster decides whether that is allowed). */
static int conf_add_upstream(vp_config *c, const char *value, char *err, size_t errlen)
{
    char item[CONF_ADDR_MAX];
    int items = 0;
    for (const char *s = value; *s;) {
        size_t skip = strspn(s, " ,\t");
        s += skip;
        size_t len = strcspn(s, " ,\t");
        if (!len) break;
        if (len >= sizeof(item)) {
            snprintf(err, errlen, "upstream address too long");
            return -1;
        }
        memcpy(item, s, len);
        item[len] = '\0';
        s += len;
        if (items == 0 && conf_parse_upstream(c, item, err, errlen) < 0) return -1;
        items++;
        if (c->ncluster_seeds == CONF_MAX_SEEDS)
            continue; /* (refused in cluster mode: conf_finish_cluster) */
        int i = c->ncluster_seeds;
        if (conf_parse_hostport(item, c->cluster_seed_hosts[i], &c->cluster_seed_ports[i]) < 0)
            c->cluster_seed_ports[i] = 0; /* a socket path: refused in cluster mode */
        c->ncluster_seeds++;
    }
    if (!items) {
        snprintf(err, errlen, "upstream needs an address");
        return -1;
    }
    c->upstream_items = items;
    return 0;
}

/* Cluster mode: the seeds are host:port, at least one (the default
 * `upstream` when none was given); the other modes take one address. */
static int conf_finish_cluster(vp_config *c, char *err, size_t errlen)
{
    if (c->upstream_mode != CONF_MODE_CLUSTER) {
        if (c->upstream_items > 1) {
            snprintf(err, errlen, "several upstream addresses need upstream-mode cluster");
            return -1;
        }
        if (c->cluster_split_writes) {
            snprintf(err, errlen, "cluster-split-writes needs upstream-mode cluster");
            return -1;
        }
        return 0;
    }
    if (c->ncluster_seeds == 0) {
        snprintf(c->cluster_seed_hosts[0], CONF_ADDR_MAX, "%s", c->upstream_host);
        c->cluster_seed_ports[0] = c->upstream_port;
        c->ncluster_seeds = 1;
    }
    if (c->ncluster_seeds == CONF_MAX_SEEDS && c->upstream_items > CONF_MAX_SEEDS) {
        snprintf(err, errlen, "at most %d seed nodes in upstream", CONF_MAX_SEEDS);
        return -1;
    }
    for (int i = 0; i < c->ncluster_seeds; i++) {
        if (c->cluster_seed_ports[i] == 0) {
            snprintf(err, errlen, "upstream-mode cluster: seed nodes are host:port, got '%s'",
                     c->cluster_seed_hosts[i][0] ? c->cluster_seed_hosts[i] : c->upstream);
            return -1;
        }
    }
    if (c->shared_upstreams == 0) {
        snprintf(err, errlen, "upstream-mode cluster needs shared-upstreams of at least 1");
        return -1;
    }
    return 0;
}

/* `sentinel host:port`: may be given many times. */
static int conf_add_sentinel(vp_config *c, const char *value, char *err, size_t errlen)
{
    if (c->nsentinels == CONF_MAX_SENTINELS) {
        snprintf(err, errlen, "at most %d sentinel lines", CONF_MAX_SENTINELS);
        return -1;
    }
    int i = c->nsentinels;
    if (conf_parse_hostport(value, c->sentinel_hosts[i], &c->sentinel_ports[i]) < 0) {
        snprintf(err, errlen, "sentinel must be host:port, got '%s'", value);
        return -1;
    }
    snprintf(c->sentinels[i], CONF_ADDR_MAX, "%s", value);
    c->nsentinels++;
    return 0;
}

typedef enum {
    T_STRING,
    T_PORT,
    T_INT,
    T_MEMORY,
    T_OCTAL,
    T_LOGLEVEL,
    T_UPSTREAM,
    T_VERB,
    T_POLYFILL,
    T_LOGFORMAT, /* vp_log_format */
    T_SECRET,
    T_REQUIREPASS,
    T_USER,
    T_YESNO,    /* int: yes 1, no 0 */
    T_TLS_AUTH, /* conf_tls_auth */
    T_MODE,     /* conf_upstream_mode */
    T_SENTINEL, /* one more sentinel */
    T_CONVEYOR, /* one more conveyor pattern */
    T_TLS       /* a string of a conf_tls, checked by proxy/net/tls.c (max: its size) */
} conf_type;

typedef struct conf_directive {
    const char *name;
    conf_type type;
    size_t offset;
    long long min, max;
} conf_directive;

#define OFF(f) offsetof(vp_config, f)
static const conf_directive conf_directives[] = {
    {"bind", T_STRING, OFF(bind), 0, 0},
    {"port", T_PORT, OFF(port), 0, 65535},
    {"unixsocket", T_STRING, OFF(unixsocket), 0, 0},
    {"unixsocketperm", T_OCTAL, OFF(unixsocketperm), 0, 0777},
    {"tcp-backlog", T_INT, OFF(tcp_backlog), 1, 65535},
    {"upstream", T_UPSTREAM, 0, 0, 0},
    {"upstream-mode", T_MODE, OFF(upstream_mode), 0, 0},
    {"cluster-split-writes", T_YESNO, OFF(cluster_split_writes), 0, 0},
    {"sentinel", T_SENTINEL, 0, 0, 0},
    {"sentinel-master", T_STRING, OFF(sentinel_master), 0, 0},
    {"sentinel-user", T_STRING, OFF(sentinel_user), 0, 0},
    {"sentinel-pass", T_SECRET, OFF(sentinel_pass), 0, 0},
    {"sentinel-pass-file", T_STRING, OFF(sentinel_pass_file), 0, 0},
    {"connect-timeout", T_INT, OFF(connect_timeout_ms), 1, 3600 * 1000},
    {"shared-upstreams", T_INT, OFF(shared_upstreams), 0, 64},
    {"shared-batch-hold", T_INT, OFF(shared_batch_hold), 0, 1000},
    {"maxclients", T_INT, OFF(maxclients), 1, UINT_MAX},
    {"proto-max-bulk-len", T_MEMORY, OFF(proto_max_bulk_len), 1024 * 1024, LLONG_MAX},
    {"proto-max-multibulk-len", T_INT, OFF(proto_max_multibulk_len), 1, INT_MAX},
    {"buffer-limit", T_MEMORY, OFF(buffer_limit), 16 * 1024, 1024LL * 1024 * 1024},
    {"client-query-buffer-limit", T_MEMORY, OFF(client_query_buffer_limit), 1024 * 1024,
     1024LL * 1024 * 1024},
    {"loglevel", T_LOGLEVEL, OFF(loglevel), 0, 0},
    {"log-format", T_LOGFORMAT, OFF(log_format), 0, 0},
    {"shutdown-timeout", T_INT, OFF(shutdown_timeout), 0, 24 * 3600},
    {"shutdown-min-drain", T_INT, OFF(shutdown_min_drain), 0, 24 * 3600},
    {"ztick-max-members", T_INT, OFF(ztick_max_members), 0, LLONG_MAX},
    {"verb", T_VERB, 0, 0, 0},
    {"conveyor", T_CONVEYOR, 0, 0, 0},
    {"aggregate-count-polyfill", T_POLYFILL, OFF(aggregate_count), 0, 0},
    {"timeout", T_INT, OFF(timeout), 0, INT_MAX},
    {"tcp-keepalive", T_INT, OFF(tcp_keepalive), 0, INT_MAX},
    {"protected-mode", T_YESNO, OFF(protected_mode), 0, 0},
    {"metrics-port", T_PORT, OFF(metrics_port), 0, 65535},
    {"metrics-bind", T_STRING, OFF(metrics_bind), 0, 0},
    {"upstream-user", T_STRING, OFF(upstream_user), 0, 0},
    {"upstream-pass", T_SECRET, OFF(upstream_pass), 0, 0},
    {"upstream-pass-file", T_STRING, OFF(upstream_pass_file), 0, 0},
    {"requirepass", T_REQUIREPASS, 0, 0, 0},
    {"user", T_USER, 0, 0, 0},
    /* TLS to the upstream (proxy/net/tls.c). */
    {"upstream-tls", T_YESNO, OFF(upstream_tls), 0, 0},
    {"upstream-tls-ca-cert-file", T_TLS, OFF(upstream_tls_conf.ca_cert_file), 0, CONF_ADDR_MAX},
    {"upstream-tls-ca-cert-dir", T_TLS, OFF(upstream_tls_conf.ca_cert_dir), 0, CONF_ADDR_MAX},
    {"upstream-tls-cert-file", T_TLS, OFF(upstream_tls_conf.cert_file), 0, CONF_ADDR_MAX},
    {"upstream-tls-key-file", T_TLS, OFF(upstream_tls_conf.key_file), 0, CONF_ADDR_MAX},
    {"upstream-tls-protocols", T_TLS, OFF(upstream_tls_conf.protocols), 0, CONF_ADDR_MAX},
    {"upstream-tls-ciphers", T_TLS, OFF(upstream_tls_conf.ciphers), 0, CONF_TEXT_MAX},
    {"upstream-tls-ciphersuites", T_TLS, OFF(upstream_tls_conf.ciphersuites), 0, CONF_TEXT_MAX},
    {"upstream-tls-server-name", T_TLS, OFF(upstream_tls_conf.server_name), 0, CONF_ADDR_MAX},
    {"upstream-tls-verify", T_YESNO, OFF(upstream_tls_conf.verify), 0, 0},
    /* TLS for clients: Redis's directives. */
    {"tls-port", T_PORT, OFF(tls_port), 0, 65535},
    {"tls-cert-file", T_TLS, OFF(tls.cert_file), 0, CONF_ADDR_MAX},
    {"tls-key-file", T_TLS, OFF(tls.key_file), 0, CONF_ADDR_MAX},
    {"tls-key-file-pass", T_TLS, OFF(tls.key_file_pass), 0, CONF_ADDR_MAX},
    {"tls-ca-cert-file", T_TLS, OFF(tls.ca_cert_file), 0, CONF_ADDR_MAX},
    {"tls-ca-cert-dir", T_TLS, OFF(tls.ca_cert_dir), 0, CONF_ADDR_MAX},
    {"tls-auth-clients", T_TLS_AUTH, OFF(tls.auth_clients), 0, 0},
    {"tls-protocols", T_TLS, OFF(tls.protocols), 0, CONF_ADDR_MAX},
    {"tls-ciphers", T_TLS, OFF(tls.ciphers), 0, CONF_TEXT_MAX},
    {"tls-ciphersuites", T_TLS, OFF(tls.ciphersuites), 0, CONF_TEXT_MAX},
};

/* One of `words` (NULL-terminated, any case): *out = its index. */
static int conf_keyword(const char *name, const char *value, const char *const *words, int *out, char *err,
                        size_t errlen)
{
    int n = 0;
    for (; words[n]; n++) {
        if (!strcasecmp(value, words[n])) {
            *out = n;
            return 0;
        }
    }
    size_t len = (size_t)snprintf(err, errlen, "'%s' must be ", name);
    for (int i = 0; i < n && len < errlen; i++)
        len += (size_t)snprintf(err + len, errlen - len, "%s%s", words[i],
                                i == n - 1   ? ""
                                : i == n - 2 ? " or "
                                             : ", ");
    if (len < errlen) snprintf(err + len, errlen - len, ", got '%s'", value);
    return -1;
}

int conf_is_secret(const char *name)
{
    return !strcasecmp(name, "upstream-pass") || !strcasecmp(name, "requirepass") ||
           !strcasecmp(name, "user") || !strcasecmp(name, "sentinel-pass") ||
           !strcasecmp(name, "tls-key-file-pass");
}

int conf_set(vp_config *c, const char *name, const char *value, char *err, size_t errlen)
{
    const conf_directive *d = NULL;
    for (size_t i = 0; i < sizeof(conf_directives) / sizeof(conf_directives[0]); i++) {
        if (!strcasecmp(name, conf_directives[i].name)) d = &conf_directives[i];
    }
    if (!d) {
        snprintf(err, errlen, "unknown directive '%s'", name);
        return -1;
    }
    char *field = (char *)c + d->offset;
    long long v;
    switch (d->type) {
    case T_STRING:
        if (strlen(value) >= CONF_ADDR_MAX) {
            snprintf(err, errlen, "'%s' value too long", name);
            return -1;
        }
        snprintf(field, CONF_ADDR_MAX, "%s", value);
        return 0;
    case T_PORT:
    case T_INT:
        if (parse_ll(value, d->min, d->max, &v) < 0) {
            snprintf(err, errlen, "'%s' must be an integer between %lld and %lld, got '%s'", name, d->min,
                     d->max, value);
            return -1;
        }
        if (d->type == T_PORT)
            *(int *)field = (int)v;
        else if (d->offset == OFF(tcp_backlog))
            *(int *)field = (int)v;
        else
            *(long long *)field = v;
        return 0;
    case T_MEMORY:
        if (conf_parse_memory(value, &v) < 0 || v < d->min || v > d->max) {
            snprintf(err, errlen,
                     "'%s' must be a size between %lld and %lld bytes (units k kb m mb g gb), got '%s'", name,
                     d->min, d->max, value);
            return -1;
        }
        *(long long *)field = v;
        return 0;
    case T_OCTAL: {
        char *end;
        errno = 0;
        long m = strtol(value, &end, 8);
        if (!*value || *end || errno || m < 0 || m > 0777) {
            snprintf(err, errlen, "'%s' must be an octal mode like 700, got '%s'", name, value);
            return -1;
        }
        *(int *)field = (int)m;
        return 0;
    }
    case T_LOGLEVEL:
        if (vp_log_parse_level(value, (vp_log_level *)field) < 0) {
            snprintf(err, errlen, "'loglevel' must be debug, verbose, notice or warning, got '%s'", value);
            return -1;
        }
        return 0;
    case T_UPSTREAM:
        c->upstream_given = 1;
        return conf_add_upstream(c, value, err, errlen);
    case T_MODE: /* conf_upstream_mode's order */
        return conf_keyword(name, value, (const char *const[]){"standalone", "sentinel", "cluster", NULL},
                            (int *)field, err, errlen);
    case T_SENTINEL:
        return conf_add_sentinel(c, value, err, errlen);
    case T_VERB:
        return conf_add_verb(c, value, err, errlen);
    case T_CONVEYOR:
        return conf_add_conveyor(c, value, err, errlen);
    case T_SECRET:
        if (strlen(value) >= CONF_SECRET_MAX) {
            snprintf(err, errlen, "'%s' value too long (at most %d bytes)", name, CONF_SECRET_MAX - 1);
            return -1;
        }
        snprintf(field, CONF_SECRET_MAX, "%s", value);
        return 0;
    case T_REQUIREPASS:
        return auth_requirepass(&c->auth, value);
    case T_USER:
        return auth_user_line(&c->auth, value, err, errlen);
    case T_LOGFORMAT: /* vp_log_format's order */
        return conf_keyword(name, value, (const char *const[]){"redis", "json", NULL}, (int *)field, err,
                            errlen);
    case T_POLYFILL: /* conf_polyfill's order */
        return conf_keyword(name, value, (const char *const[]){"auto", "yes", "no", NULL}, (int *)field, err,
                            errlen);
    case T_YESNO:
        return conf_keyword(name, value, (const char *const[]){"no", "yes", NULL}, (int *)field, err, errlen);
    case T_TLS_AUTH: /* conf_tls_auth's order */
        return conf_keyword(name, value, (const char *const[]){"yes", "no", "optional", NULL}, (int *)field,
                            err, errlen);
    case T_TLS:
        if (strlen(value) >= (size_t)d->max) {
            snprintf(err, errlen, "'%s' value too long", name);
            return -1;
        }
        if (conf_tls_check(d->name, value, err, errlen) < 0) return -1;
        snprintf(field, (size_t)d->max, "%s", value);
        return 0;
    }
    return -1;
}

/* Split a line into at most `max` words; "double quoted" words may hold
 * spaces. Returns the word count or -1 on an unbalanced quote. */
static int conf_split(char *line, char **words, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p && isspace((unsigned char)*p))
            p++;
        if (!*p) return n;
        if (n == max) return max + 1;
        if (*p == '"') {
            char *end = strchr(p + 1, '"');
            if (!end) return -1;
            *end = '\0';
            words[n++] = p + 1;
            p = end + 1;
            if (*p && !isspace((unsigned char)*p)) return -1;
        } else {
            words[n++] = p;
            while (*p && !isspace((unsigned char)*p))
                p++;
            if (*p) *p++ = '\0';
        }
    }
}

/* The directives that take the rest of the line and may be given many
 * times (each line adds one). */
static const char *const conf_repeatable[] = {"verb", "user", "sentinel", "conveyor"};

int conf_is_repeatable(const char *name)
{
    for (size_t i = 0; i < sizeof(conf_repeatable) / sizeof(conf_repeatable[0]); i++) {
        if (!strcasecmp(name, conf_repeatable[i])) return 1;
    }
    return 0;
}

/* `verb` and `user` take the rest of the line: their name if the line
 * starts with one, else NULL. */
static const char *conf_rest_of_line_directive(const char *line)
{
    for (size_t i = 0; i < sizeof(conf_repeatable) / sizeof(conf_repeatable[0]); i++) {
        size_t n = strlen(conf_repeatable[i]);
        if (strncasecmp(line, conf_repeatable[i], n) == 0 && (line[n] == ' ' || line[n] == '\t'))
            return conf_repeatable[i];
    }
    return NULL;
}

/* The file opened for reading, or NULL with "path: reason" in err. A FIFO
 * is refused before it is read: opening one waits for a writer, reading it
 * for its end, and a reload runs in the event loop (every client would
 * wait with it). Devices are read (/dev/null is an empty config). */
static FILE *conf_open(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (S_ISFIFO(st.st_mode)) {
        snprintf(err, errlen, "%s: cannot read: a FIFO, not a file", path);
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

/* The first line of a file, without its line end. */
static int conf_read_first_line(const char *what, const char *path, char *out, size_t cap, char *err,
                                size_t errlen)
{
    char why[512];
    FILE *f = conf_open(path, why, sizeof(why));
    if (!f) {
        snprintf(err, errlen, "%s %s", what, why);
        return -1;
    }
    errno = 0;
    int ok = fgets(out, (int)cap, f) != NULL;
    int failed = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (failed) { /* a directory, an I/O error: not an empty first line */
        OPENSSL_cleanse(out, cap);
        snprintf(err, errlen, "%s %s: cannot read: %s", what, path, strerror(failed));
        return -1;
    }
    size_t n = ok ? strlen(out) : 0;
    if (n == cap - 1 && out[n - 1] != '\n') {
        OPENSSL_cleanse(out, cap);
        snprintf(err, errlen, "%s %s: the password is longer than %zu bytes", what, path, cap - 2);
        return -1;
    }
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = '\0';
    if (n == 0) {
        snprintf(err, errlen, "%s %s: the first line is empty", what, path);
        return -1;
    }
    return 0;
}

/* AUTH [user] pass as a RESP request (malloc'd, *len its length). */
static char *conf_build_auth(const char *user, const char *pass, size_t *len)
{
    resp_arg argv[3] = {{"AUTH", 4}, {user, strlen(user)}, {pass, strlen(pass)}};
    int argc = 3;
    if (!argv[1].len) argv[1] = argv[--argc]; /* AUTH pass */
    char *auth = vp_malloc(resp_write_command_size(argc, argv));
    *len = resp_write_command(auth, argc, argv);
    return auth;
}

static void conf_build_upstream_auth(vp_config *c)
{
    c->upstream_auth = conf_build_auth(c->upstream_user, c->upstream_pass, &c->upstream_auth_len);
}

/* Sentinel mode's settings: the sentinels and the master's name are
 * needed, `upstream` is not (the sentinels name it). */
static int conf_finish_sentinel(vp_config *c, char *err, size_t errlen)
{
    if (c->upstream_mode != CONF_MODE_SENTINEL) {
        if (c->nsentinels || c->sentinel_master[0]) {
            snprintf(err, errlen, "sentinel and sentinel-master need upstream-mode sentinel");
            return -1;
        }
        return 0;
    }
    if (!c->nsentinels || !c->sentinel_master[0]) {
        snprintf(err, errlen, "upstream-mode sentinel needs %s",
                 !c->nsentinels ? "at least one 'sentinel host:port'" : "'sentinel-master NAME'");
        return -1;
    }
    /* No primary until the sentinels name one (proxy/route/sentinel.c). */
    c->upstream[0] = c->upstream_host[0] = '\0';
    c->upstream_port = 0;
    if (c->sentinel_pass_file[0] &&
        conf_read_first_line("sentinel-pass-file", c->sentinel_pass_file, c->sentinel_pass,
                             sizeof(c->sentinel_pass), err, errlen) < 0)
        return -1;
    if (c->sentinel_user[0] && !c->sentinel_pass[0]) {
        snprintf(err, errlen,
                 "sentinel-user '%s' is given without a password: set sentinel-pass-file or sentinel-pass",
                 c->sentinel_user);
        return -1;
    }
    if (c->sentinel_pass[0])
        c->sentinel_auth = conf_build_auth(c->sentinel_user, c->sentinel_pass, &c->sentinel_auth_len);
    return 0;
}

int conf_finish(vp_config *c, const char *env_pass, char *err, size_t errlen)
{
    /* The file, then the environment, then the directive: the safer
     * source wins (a file or the environment stay out of `ps`). */
    if (c->upstream_pass_file[0]) {
        if (conf_read_first_line("upstream-pass-file", c->upstream_pass_file, c->upstream_pass,
                                 sizeof(c->upstream_pass), err, errlen) < 0)
            return -1;
        c->upstream_pass_source = "upstream-pass-file";
    } else if (env_pass && *env_pass) {
        if (strlen(env_pass) >= sizeof(c->upstream_pass)) {
            snprintf(err, errlen, "%s is longer than %d bytes", CONF_UPSTREAM_PASS_ENV, CONF_SECRET_MAX - 1);
            return -1;
        }
        snprintf(c->upstream_pass, sizeof(c->upstream_pass), "%s", env_pass);
        c->upstream_pass_source = CONF_UPSTREAM_PASS_ENV;
    } else if (c->upstream_pass[0]) {
        c->upstream_pass_source = "upstream-pass";
    }
    if (c->upstream_user[0] && !c->upstream_pass[0]) {
        snprintf(
            err, errlen,
            "upstream-user '%s' is given without a password: set upstream-pass-file, %s or upstream-pass",
            c->upstream_user, CONF_UPSTREAM_PASS_ENV);
        return -1;
    }
    if (c->upstream_pass[0]) conf_build_upstream_auth(c);
    if (conf_finish_cluster(c, err, errlen) < 0) return -1;
    return conf_finish_sentinel(c, err, errlen);
}

/* ---- the file ---- */

/* Files larger than this are refused: a config is a few KiB, and the whole
 * of it is held in memory while it is parsed (a FIFO or a device given by
 * mistake must not grow the heap without end). */
#define CONF_FILE_MAX (16 * 1024 * 1024)

/* The whole of `path` into a malloc'd, NUL-terminated buffer (*len bytes,
 * which may hold NUL bytes themselves). A read error, a directory, a file
 * over CONF_FILE_MAX: -1 with "path: reason" in err, never a short read
 * taken for the end of the file (a half-read config is no config). */
static char *conf_read_text(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = conf_open(path, err, errlen);
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = vp_malloc(cap);
    int failed = 0;
    for (;;) {
        if (n + 1 == cap) {
            if (cap > CONF_FILE_MAX) break;
            cap *= 2;
            buf = vp_realloc(buf, cap);
        }
        errno = 0;
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) failed = errno ? errno : EIO; /* EISDIR for a directory */
            break;
        }
    }
    int too_big = n > CONF_FILE_MAX;
    fclose(f);
    if (failed || too_big) {
        if (failed)
            snprintf(err, errlen, "%s: cannot read: %s", path, strerror(failed));
        else
            snprintf(err, errlen, "%s: cannot read: larger than %d bytes", path, CONF_FILE_MAX);
        OPENSSL_cleanse(buf, n); /* (what was read may hold a password) */
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* One line of a config (NUL-terminated, without its line end): a comment,
 * a blank, or a directive applied with conf_set. 0, or -1 with the reason
 * in why. */
static int conf_parse_line(vp_config *c, char *line, char *why, size_t whylen)
{
    char *start = line;
    while (isspace((unsigned char)*start))
        start++;
    if (*start == '#' || *start == '\0') return 0;
    const char *rest_of_line = conf_rest_of_line_directive(start);
    if (rest_of_line) {
        /* The directives with several words: the rest of the line. */
        char *value = start + strlen(rest_of_line) + 1;
        size_t vl = strlen(value);
        while (vl && isspace((unsigned char)value[vl - 1]))
            value[--vl] = '\0';
        return conf_set(c, rest_of_line, value, why, whylen);
    }
    char *words[3];
    int n = conf_split(line, words, 2);
    if (n < 0) {
        snprintf(why, whylen, "unbalanced quotes");
        return -1;
    }
    if (n != 2) {
        snprintf(why, whylen, "'%s' takes exactly one value", words[0]);
        return -1;
    }
    return conf_set(c, words[0], words[1], why, whylen);
}

/* The longest line, line end excluded (what a 4096-byte fgets buffer
 * took before the parser read the file whole). */
#define CONF_LINE_MAX 4094

int conf_parse_text(vp_config *c, const char *text, size_t len, const char *path, char *err, size_t errlen)
{
    /* Script paths in `verb` lines are relative to the file's directory. */
    char saved_dir[sizeof(c->conf_dir)];
    memcpy(saved_dir, c->conf_dir, sizeof(saved_dir));
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(c->conf_dir, sizeof(c->conf_dir), ".");
    else if (slash == path)
        snprintf(c->conf_dir, sizeof(c->conf_dir), "/");
    else
        snprintf(c->conf_dir, sizeof(c->conf_dir), "%.*s", (int)(slash - path), path);
    char line[CONF_LINE_MAX + 2];
    int lineno = 0, rc = 0;
    for (size_t pos = 0; pos < len && rc == 0;) {
        lineno++;
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        size_t n = end - pos;
        char why[1024];
        if (n > CONF_LINE_MAX) {
            snprintf(why, sizeof(why), "line too long");
            rc = -1;
        } else if (memchr(text + pos, '\0', n)) {
            /* (a file half written over zeros, or not a config at all) */
            snprintf(why, sizeof(why), "a NUL byte: not a text file");
            rc = -1;
        } else {
            memcpy(line, text + pos, n);
            line[n] = '\0';
            rc = conf_parse_line(c, line, why, sizeof(why));
        }
        if (rc < 0) snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
        pos = end + 1;
    }
    OPENSSL_cleanse(line, sizeof(line)); /* (it may hold a password) */
    memcpy(c->conf_dir, saved_dir, sizeof(saved_dir));
    return rc;
}

int conf_load_file(vp_config *c, const char *path, char *err, size_t errlen)
{
    size_t len;
    char *text = conf_read_text(path, &len, err, errlen);
    if (!text) return -1;
    int rc = conf_parse_text(c, text, len, path, err, errlen);
    /* (it may hold passwords) */
    OPENSSL_cleanse(text, len);
    free(text);
    return rc;
}
