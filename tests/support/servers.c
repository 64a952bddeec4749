/* servers.c - see servers.h. */
#include "tests/support/servers.h"
#include "tests/support/cluster_env.h"
#include "tests/support/tls_certs.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <poll.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#ifndef VP_BINARY
#error "VP_BINARY (path of the verbproxy binary) must be defined by the build"
#endif

#define POLL_INTERVAL_MS 5
#define PROBE_TIMEOUT_MS 250
#define PORT_LOW 10000   /* ports are picked in [PORT_LOW, ephemeral range start) */
#define START_ATTEMPTS 3 /* a port found free may be taken by a parallel test before we bind it */

/* ---- time, files, small helpers ---- */

long long vt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

bool vt_wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms)
{
    long long deadline = vt_now_ms() + timeout_ms;
    for (;;) {
        if (cond(arg)) return true;
        if (vt_now_ms() >= deadline) return false;
        sleep_ms(POLL_INTERVAL_MS);
    }
}

void vt_ignore_sigpipe(void)
{
    signal(SIGPIPE, SIG_IGN);
}

char *vt_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    if (!s) abort();
    if (f) {
        size_t n;
        while ((n = fread(s + len, 1, cap - len - 1, f)) > 0) {
            len += n;
            if (cap - len - 1 == 0) {
                cap *= 2;
                s = realloc(s, cap);
                if (!s) abort();
            }
        }
        fclose(f);
    }
    s[len] = '\0';
    return s;
}

static void print_file(const char *title, const char *path)
{
    char *s = vt_read_file(path);
    fprintf(stderr, "---- %s (%s) ----\n%s%s---- end ----\n", title, path, s,
            (s[0] && s[strlen(s) - 1] != '\n') ? "\n" : "");
    free(s);
}

static bool env_on(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

const char *vt_redis_binary(void)
{
    const char *b = getenv("VP_TEST_REDIS_SERVER");
    return b && *b ? b : "/usr/bin/redis-server";
}

/* The first line of `<server> --version`: "Redis server v=7.0.15 sha=...",
 * "Valkey server v=8.0.1 ...", Valkey 7.2's "Server v=7.2.7 ...". */
static const char *version_line(void)
{
    static char line[256];
    if (line[0]) return line;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "'%s' --version", vt_redis_binary());
    FILE *p = popen(cmd, "r");
    if (p) {
        if (!fgets(line, sizeof(line), p)) line[0] = '\0';
        pclose(p);
    }
    return line;
}

const char *vt_server_says(void)
{
    return strncmp(version_line(), "Valkey ", 7) == 0 ? "Valkey" : "Redis";
}

int vt_redis_version(void)
{
    static int version;
    if (version) return version;
    const char *line = version_line();
    const char *v = strstr(line, " v=");
    int major = 0, minor = 0;
    if (!v || sscanf(v + 3, "%d.%d", &major, &minor) != 2) {
        fprintf(stderr, "vt: cannot read the version of %s from \"%s\"\n", vt_redis_binary(), line);
        abort();
    }
    version = major * 100 + minor;
    return version;
}

bool vt_direct_mode(void)
{
    return env_on("VP_TEST_DIRECT");
}

bool vt_upstream_tls_mode(void)
{
    return env_on("VP_TEST_UPSTREAM_TLS");
}

/* VP_TEST_SHARED_UPSTREAMS=N: every proxy gets --shared-upstreams N first
 * (a test's own extra_args still override it). */
static const char *shared_upstreams_env(void)
{
    const char *v = getenv("VP_TEST_SHARED_UPSTREAMS");
    return v && v[0] ? v : NULL;
}

int vt_proxy_shared_upstreams(const vt_proxy *p)
{
    if (p->direct) return 0;
    int n = 1; /* verbproxy's default */
    if (shared_upstreams_env()) n = atoi(shared_upstreams_env());
    for (int i = 0; p->opts.extra_args && p->opts.extra_args[i]; i++)
        if (!strcmp(p->opts.extra_args[i], "--shared-upstreams") && p->opts.extra_args[i + 1])
            n = atoi(p->opts.extra_args[i + 1]);
    return n;
}

/* ---- ports ---- */

static int ephemeral_low(void)
{
    int low = 32768, high;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
        fclose(f);
    }
    return low;
}

static bool port_is_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/* A port handed out here is reserved until the server binds it: a lock on
 * a file named after it, which other test processes see (suites run side
 * by side, and a port free when one picked it was once bound by another's
 * server before its own: "Address already in use"). The lock goes with its
 * process, so nothing needs cleaning up; the newest PORT_HOLDS are held,
 * long after any server started on them bound them. */
#define PORT_HOLDS 256

static bool port_reserve(int port)
{
    static int held[PORT_HOLDS];
    static int next;
    char dir[256], path[300];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/vt-ports", tmp && *tmp ? tmp : "/tmp");
    mkdir(dir, 0777); /* (exists after the first) */
    snprintf(path, sizeof(path), "%s/%d", dir, port);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return true; /* no lock to be had: the bind check alone, as before */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd); /* another process's (or ours, handed out already) */
        return false;
    }
    if (held[next] > 0) close(held[next]);
    held[next] = fd;
    next = (next + 1) % PORT_HOLDS;
    return true;
}

bool vt_port_claim(int port)
{
    return port_is_free(port) && port_reserve(port);
}

/* Why not "bind port 0 and read getsockname": that hands out a port from the
 * ephemeral range, which outgoing connections use too. A test that stops a
 * server and starts it again on the same port (or lets the proxy dial a port
 * nobody listens on yet) could then find it taken by some client socket, or
 * see the proxy's connect to 127.0.0.1:P from local port P "succeed" as a TCP
 * self-connect. Below the ephemeral range no client socket ever gets a port,
 * so a port stays ours for the whole test. Free is checked by binding it. */
int vt_free_port(void)
{
    static unsigned seed;
    int high = ephemeral_low();
    if (high <= PORT_LOW + 1000) high = 65535; /* odd port range config: fall back to anything */
    if (!seed) seed = (unsigned)getpid() * 2654435761u ^ (unsigned)vt_now_ms();
    for (int attempt = 0; attempt < 1000; attempt++) {
        seed = seed * 1103515245u + 12345u;
        int port = PORT_LOW + (int)((seed >> 8) % (unsigned)(high - PORT_LOW));
        if (port == 6379 || port == 26379) continue;
        if (port_is_free(port) && port_reserve(port)) return port;
    }
    return -1;
}

/* ---- a black hole ---- */

bool vt_blackhole_open(vt_blackhole *b)
{
    b->listen_fd = b->filler_fd = -1;
    /* Port 0: the kernel's free port, bound at once (a port from
     * vt_free_port was taken by another suite before the bind once, under
     * load: "Address already in use"). */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t salen = sizeof(sa);
    b->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (b->listen_fd < 0 || bind(b->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(b->listen_fd, (struct sockaddr *)&sa, &salen) != 0 || listen(b->listen_fd, 0) != 0) {
        fprintf(stderr, "vt: black hole listener: %s\n", strerror(errno));
        vt_blackhole_close(b);
        return false;
    }
    b->port = ntohs(sa.sin_port);
    /* the one connection the queue holds */
    b->filler_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(b->filler_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        fprintf(stderr, "vt: black hole filler: %s\n", strerror(errno));
        vt_blackhole_close(b);
        return false;
    }
    /* check: a further connect must not complete */
    int probe = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    connect(probe, (struct sockaddr *)&sa, sizeof(sa));
    struct pollfd pfd = {.fd = probe, .events = POLLOUT};
    int ready = poll(&pfd, 1, 200);
    close(probe);
    if (ready != 0) {
        fprintf(stderr, "vt: this kernel completes connects to a full accept queue\n");
        vt_blackhole_close(b);
        return false;
    }
    return true;
}

void vt_blackhole_close(vt_blackhole *b)
{
    if (b->filler_fd >= 0) close(b->filler_fd);
    if (b->listen_fd >= 0) close(b->listen_fd);
    b->filler_fd = b->listen_fd = -1;
}

/* ---- processes ---- */

/* fork + exec with stdout/stderr to `log`, cwd `dir`, dying with us;
 * nofile > 0 sets its open-file limit (soft and hard). */
static pid_t spawn(char *const argv[], const char *dir, const char *log, long nofile)
{
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "vt: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid > 0) return pid;

    /* child: only async-signal-safe calls from here on */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127); /* the test process is already gone */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    int in = open("/dev/null", O_RDONLY);
    int out = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0 || chdir(dir) != 0) _exit(127);
    struct rlimit files = {.rlim_cur = (rlim_t)nofile, .rlim_max = (rlim_t)nofile};
    if (nofile > 0 && setrlimit(RLIMIT_NOFILE, &files) != 0) _exit(127);
    dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    close_range(3, ~0u, 0); /* criterion's pipes and our sockets are not theirs */
    execv(argv[0], argv);
    _exit(127);
}

/* true if pid has exited (and is reaped); *status filled. */
static bool reap(pid_t pid, int *status)
{
    pid_t r;
    do {
        r = waitpid(pid, status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    return r == pid || (r < 0 && errno == ECHILD);
}

/* Ask nicely (sig), then insist. Returns the wait status. */
static int terminate(pid_t pid, int sig)
{
    int status = 0;
    if (reap(pid, &status)) return status | 0x10000; /* marker: it had already exited */
    kill(pid, sig);
    long long deadline = vt_now_ms() + VT_STOP_DEADLINE_MS;
    while (vt_now_ms() < deadline) {
        if (reap(pid, &status)) return status;
        sleep_ms(POLL_INTERVAL_MS);
    }
    fprintf(stderr, "vt: pid %d ignored signal %d for %d ms, sending SIGKILL\n", (int)pid, sig,
            VT_STOP_DEADLINE_MS);
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

static void kill9(pid_t pid)
{
    int status;
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
}

/* ---- temp dirs and their reapers ---- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void rm_rf(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A child that removes `dir` when told (SIGTERM) or when the test process
 * dies (PDEATHSIG SIGTERM), so the dir goes even if the test crashed. */
static pid_t spawn_reaper(const char *dir)
{
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, &old);
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() == parent) {
            int sig;
            sigwait(&term, &sig);
        }
        if (!env_on("VP_TEST_KEEP")) {
            /* servers die at the same moment; one of them may still write */
            long long deadline = vt_now_ms() + 2000;
            do {
                rm_rf(dir);
                if (access(dir, F_OK) != 0) break;
                sleep_ms(20);
            } while (vt_now_ms() < deadline);
        }
        _exit(0);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return pid > 0 ? pid : 0;
}

static bool make_dir(char *dir, size_t len, const char *what)
{
    snprintf(dir, len, "/tmp/vt-%s-XXXXXX", what);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "vt: mkdtemp %s: %s\n", dir, strerror(errno));
        return false;
    }
    return true;
}

static void release_dir(const char *dir, pid_t reaper)
{
    if (reaper > 0) {
        kill(reaper, SIGTERM);
        int status;
        while (waitpid(reaper, &status, 0) < 0 && errno == EINTR) {
        }
    }
    if (env_on("VP_TEST_KEEP")) fprintf(stderr, "vt: kept %s\n", dir);
}

/* ---- connecting probes ---- */

/* Does process `pid` hold the socket listening on 127.0.0.1:port? A probe
 * that connects cannot tell: when a parallel test took the same port
 * between our free-port check and the bind, the other test's server
 * answers while ours is failing to bind. */
static bool pid_listens_on(pid_t pid, int port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f) return false;
    char line[512];
    unsigned long inode = 0;
    while (!inode && fgets(line, sizeof(line), f)) {
        unsigned addr, lport, state;
        unsigned long ino;
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*d: %x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &addr, &lport, &state,
                   &ino) == 4 &&
            lport == (unsigned)port && state == 0x0A /* LISTEN */)
            inode = ino;
    }
    fclose(f);
    if (!inode) return false;
    char dir[64], want[64];
    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    DIR *d = opendir(dir);
    if (!d) return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        char path[320], link[64];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n <= 0) continue;
        link[n] = '\0';
        found = strcmp(link, want) == 0;
    }
    closedir(d);
    return found;
}

static bool tcp_accepts(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

static bool unix_accepts(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        close(fd);
        return false;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/* PING answered at all: +PONG, or -NOAUTH when a password is set. */
static bool redis_answers(int port)
{
    struct timeval tv = {0, PROBE_TIMEOUT_MS * 1000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    bool ok = false;
    if (c && !c->err) {
        redisSetTimeout(c, tv);
        redisReply *r = redisCommand(c, "PING");
        ok = r && ((r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) ||
                   (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0));
        if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
}

/* ---- redis-server ---- */

vt_redis *vt_redis_new(const vt_redis_opts *opts)
{
    vt_ignore_sigpipe();
    vt_redis *r = calloc(1, sizeof(*r));
    if (!r) abort();
    if (!make_dir(r->dir, sizeof(r->dir), "redis")) {
        free(r);
        return NULL;
    }
    r->reaper = spawn_reaper(r->dir);
    snprintf(r->log, sizeof(r->log), "%s/redis.log", r->dir);
    r->port = vt_free_port();

    int n = 0;
    if (opts && opts->config_text) {
        snprintf(r->conf, sizeof(r->conf), "%s/redis.conf", r->dir);
        FILE *f = fopen(r->conf, "w");
        if (!f || fputs(opts->config_text, f) < 0) abort();
        fclose(f);
    }
    r->sentinel = opts && opts->sentinel;
    r->binary = opts ? opts->binary : NULL;
    vt_redis_tls tls = opts ? opts->tls : VT_REDIS_TLS_AUTO;
    if (tls == VT_REDIS_TLS_AUTO) tls = vt_upstream_tls_mode() ? VT_REDIS_TLS_ALSO : VT_REDIS_TLS_NONE;
    if (tls != VT_REDIS_TLS_NONE) {
        if (!vt_certs_get()) {
            vt_redis_free(r);
            return NULL;
        }
        char name[64];
        const char *cert = opts && opts->tls_cert ? opts->tls_cert : "server";
        r->tls_port = vt_free_port();
        r->tls_only = tls == VT_REDIS_TLS_ONLY;
        char port[16];
        snprintf(port, sizeof(port), "%d", r->tls_port);
        r->args[n++] = strdup("--tls-port");
        r->args[n++] = strdup(port);
        snprintf(name, sizeof(name), "%s.crt", cert);
        r->args[n++] = strdup("--tls-cert-file");
        r->args[n++] = strdup(vt_cert_path(name));
        snprintf(name, sizeof(name), "%s.key", cert);
        r->args[n++] = strdup("--tls-key-file");
        r->args[n++] = strdup(vt_cert_path(name));
        r->args[n++] = strdup("--tls-ca-cert-file");
        r->args[n++] = strdup(vt_cert_path("ca.crt"));
        r->args[n++] = strdup("--tls-auth-clients");
        r->args[n++] = strdup(opts && opts->tls_auth_clients ? opts->tls_auth_clients : "no");
    }
    if (opts && opts->unixsocket) {
        snprintf(r->unixsocket, sizeof(r->unixsocket), "%s/redis.sock", r->dir);
        r->args[n++] = strdup("--unixsocket");
        r->args[n++] = strdup(r->unixsocket);
        r->args[n++] = strdup("--unixsocketperm");
        r->args[n++] = strdup("700");
    }
    if (opts && opts->requirepass) {
        r->args[n++] = strdup("--requirepass");
        r->args[n++] = strdup(opts->requirepass);
    }
    for (int i = 0; opts && opts->extra_args && opts->extra_args[i]; i++) {
        if (i >= VT_MAX_EXTRA_ARGS * 2) abort();
        r->args[n++] = strdup(opts->extra_args[i]);
    }
    r->args[n] = NULL;
    return r;
}

typedef struct redis_wait {
    vt_redis *r;
    bool died;
    int status;
} redis_wait;

static bool redis_up(void *arg)
{
    redis_wait *w = arg;
    if (reap(w->r->pid, &w->status)) {
        w->died = true; /* stop waiting: it will never answer */
        return true;
    }
    if (w->r->tls_only) return pid_listens_on(w->r->pid, w->r->tls_port);
    return pid_listens_on(w->r->pid, w->r->port) && redis_answers(w->r->port) &&
           (!w->r->tls_port || pid_listens_on(w->r->pid, w->r->tls_port));
}

static bool launch_once(vt_redis *r)
{
    char port[16];
    snprintf(port, sizeof(port), "%d", r->tls_only ? 0 : r->port);
    char *argv[80] = {(char *)(r->binary ? r->binary : vt_redis_binary()),
                      "--port",
                      port,
                      "--bind",
                      "127.0.0.1",
                      "--dir",
                      r->dir,
                      "--save",
                      "",
                      "--appendonly",
                      "no",
                      "--daemonize",
                      "no"};
    int n = 13;
    if (r->conf[0]) { /* the config file goes first, as redis-server wants it */
        memmove(argv + 2, argv + 1, (size_t)(n - 1) * sizeof(argv[0]));
        argv[1] = r->conf;
        n++;
    }
    if (r->sentinel) argv[n++] = "--sentinel";
    for (int i = 0; r->args[i]; i++)
        argv[n++] = r->args[i];
    argv[n] = NULL;

    r->pid = spawn(argv, r->dir, r->log, 0);
    if (r->pid < 0) {
        r->pid = 0;
        return false;
    }
    redis_wait w = {.r = r};
    bool answered = vt_wait_until(redis_up, &w, VT_START_DEADLINE_MS);
    if (answered && !w.died) return true;
    if (w.died) {
        fprintf(stderr, "vt: redis-server on port %d exited at start (status 0x%x)\n", r->port, w.status);
    } else {
        fprintf(stderr, "vt: redis-server on port %d did not answer PING within %d ms\n", r->port,
                VT_START_DEADLINE_MS);
        kill9(r->pid);
    }
    r->pid = 0;
    return false;
}

bool vt_redis_launch(vt_redis *r)
{
    if (r->pid) return true;
    if (r->borrowed) {
        fprintf(stderr, "vt: a borrowed cluster node (cluster_env.h) is not started by a test\n");
        return false;
    }
    if (r->port <= 0) {
        fprintf(stderr, "vt: no free port\n");
        return false;
    }
    if (launch_once(r)) return true;
    print_file("redis-server log", r->log);
    return false;
}

/* Options a redis-server of the cluster variant's cluster also has. */
static bool plain_opts(const vt_redis_opts *o)
{
    return !o || (!o->unixsocket && (o->tls == VT_REDIS_TLS_AUTO || o->tls == VT_REDIS_TLS_NONE) &&
                  !o->requirepass && !o->extra_args && !o->config_text && !o->sentinel && !o->standalone &&
                  !o->binary);
}

vt_redis *vt_redis_start(const vt_redis_opts *opts)
{
    if (vt_cluster_mode() && plain_opts(opts)) return vt_cluster_env_borrow();
    for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
        vt_redis *r = vt_redis_new(opts);
        if (!r) return NULL;
        if (r->port > 0 && launch_once(r)) return r;
        /* Most likely a parallel test took the port between our check and
         * redis's bind: try a new port. The last failure is shown in full. */
        if (attempt == START_ATTEMPTS - 1) print_file("redis-server log", r->log);
        vt_redis_free(r);
    }
    return NULL;
}

void vt_redis_stop(vt_redis *r)
{
    if (!r || !r->pid) return;
    terminate(r->pid, SIGTERM);
    r->pid = 0;
}

void vt_redis_kill(vt_redis *r)
{
    if (!r || !r->pid) return;
    kill9(r->pid);
    r->pid = 0;
}

bool vt_redis_restart(vt_redis *r)
{
    vt_redis_stop(r);
    return vt_redis_launch(r);
}

void vt_redis_free(vt_redis *r)
{
    if (!r) return;
    if (r->borrowed) { /* the suite's cluster: cluster_run.py stops it */
        free(r);
        return;
    }
    vt_redis_stop(r);
    release_dir(r->dir, r->reaper);
    for (int i = 0; r->args[i]; i++)
        free(r->args[i]);
    free(r);
}

/* ---- verbproxy ---- */

static bool proxy_up(void *arg)
{
    vt_proxy *p = arg;
    int status;
    if (reap(p->pid, &status)) {
        p->crashed = true;
        return true;
    }
    if (!pid_listens_on(p->pid, p->port) || !tcp_accepts(p->port)) return false;
    return !p->unixsocket[0] || unix_accepts(p->unixsocket);
}

static bool proxy_launch_once(vt_proxy *p)
{
    char port[16], timeout[16];
    snprintf(port, sizeof(port), "%d", p->port);
    char *argv[64] = {VP_BINARY, "--port", port, "--bind", "127.0.0.1"};
    int n = 5;
    if (!p->opts.upstream_in_config) {
        argv[n++] = "--upstream";
        argv[n++] = p->upstream;
    }
    if (!p->opts.no_loglevel) {
        argv[n++] = "--loglevel";
        argv[n++] = "warning";
    }
    if (p->cluster) {
        argv[n++] = "--upstream-mode";
        argv[n++] = "cluster";
    }
    if (p->upstream_tls) {
        argv[n++] = "--upstream-tls";
        argv[n++] = "yes";
        argv[n++] = "--upstream-tls-ca-cert-file";
        argv[n++] = (char *)vt_cert_path("ca.crt");
    }
    /* Over TLS, a story opening a thousand connections at once waits for
     * a thousand handshakes on Redis's one thread (on a busy 2-core CI
     * machine, more than the default 2 s): unless the test says, 10 s. */
    int connect_timeout = p->opts.connect_timeout_ms;
    if (connect_timeout <= 0 && p->upstream_tls) connect_timeout = 10000;
    if (connect_timeout > 0) {
        snprintf(timeout, sizeof(timeout), "%d", connect_timeout);
        argv[n++] = "--connect-timeout";
        argv[n++] = timeout;
    }
    if (p->unixsocket[0]) {
        argv[n++] = "--unixsocket";
        argv[n++] = p->unixsocket;
    }
    if (shared_upstreams_env()) {
        argv[n++] = "--shared-upstreams";
        argv[n++] = (char *)shared_upstreams_env();
    }
    for (int i = 0; p->opts.extra_args && p->opts.extra_args[i] && n < 63; i++)
        argv[n++] = (char *)p->opts.extra_args[i];
    argv[n] = NULL;

    p->crashed = false;
    p->pid = spawn(argv, p->dir, p->log, p->opts.nofile);
    if (p->pid < 0) {
        p->pid = 0;
        return false;
    }
    bool up = vt_wait_until(proxy_up, p, VT_START_DEADLINE_MS);
    if (up && !p->crashed) return true;
    if (!up) {
        fprintf(stderr, "vt: verbproxy did not accept on port %d within %d ms\n", p->port,
                VT_START_DEADLINE_MS);
        kill9(p->pid);
    } else {
        fprintf(stderr, "vt: verbproxy exited at start (port %d)\n", p->port);
    }
    p->pid = 0;
    return false;
}

/* Start a verbproxy process for p (upstream and opts already filled in). */
static vt_proxy *proxy_spawn(vt_proxy *p)
{
    if (!make_dir(p->dir, sizeof(p->dir), "proxy")) {
        free(p);
        return NULL;
    }
    p->reaper = spawn_reaper(p->dir);
    snprintf(p->log, sizeof(p->log), "%s/verbproxy.log", p->dir);
    if (p->opts.unixsocket) snprintf(p->unixsocket, sizeof(p->unixsocket), "%s/verbproxy.sock", p->dir);
    for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
        p->port = vt_free_port();
        if (p->port > 0 && proxy_launch_once(p)) return p;
    }
    print_file("verbproxy log", p->log);
    release_dir(p->dir, p->reaper);
    free(p);
    return NULL;
}

static vt_proxy *proxy_new(const vt_proxy_opts *opts)
{
    vt_ignore_sigpipe();
    vt_proxy *p = calloc(1, sizeof(*p));
    if (!p) abort();
    if (opts) p->opts = *opts;
    return p;
}

vt_proxy *vt_proxy_start(const vt_redis *upstream, const vt_proxy_opts *opts)
{
    vt_proxy *p = proxy_new(opts);
    if (p->opts.upstream_unix && !upstream->unixsocket[0]) {
        fprintf(stderr, "vt: upstream_unix needs a redis started with opts.unixsocket\n");
        free(p);
        return NULL;
    }
    if (p->opts.upstream_unix) {
        snprintf(p->upstream, sizeof(p->upstream), "%s", upstream->unixsocket);
    } else if (upstream->tls_port && (upstream->tls_only || p->opts.upstream_tls || vt_upstream_tls_mode())) {
        p->upstream_tls = true;
        snprintf(p->upstream, sizeof(p->upstream), "127.0.0.1:%d", upstream->tls_port);
    } else {
        snprintf(p->upstream, sizeof(p->upstream), "127.0.0.1:%d", upstream->port);
    }
    p->cluster = upstream->borrowed;

    if (vt_direct_mode()) {
        p->direct = true;
        p->port = upstream->port;
        if (p->opts.unixsocket) {
            if (!upstream->unixsocket[0]) {
                fprintf(stderr, "vt: direct mode with a unix socket needs redis opts.unixsocket\n");
                free(p);
                return NULL;
            }
            snprintf(p->unixsocket, sizeof(p->unixsocket), "%s", upstream->unixsocket);
        }
        return p;
    }
    return proxy_spawn(p);
}

vt_proxy *vt_proxy_start_upstream(const char *upstream, const vt_proxy_opts *opts)
{
    if (vt_direct_mode()) {
        fprintf(stderr, "vt: vt_proxy_start_upstream has no direct mode\n");
        return NULL;
    }
    vt_proxy *p = proxy_new(opts);
    snprintf(p->upstream, sizeof(p->upstream), "%s", upstream);
    return proxy_spawn(p);
}

bool vt_proxy_alive(vt_proxy *p)
{
    if (p->direct) return true;
    int status;
    if (!p->pid) return p->waited; /* an exit the test waited for (and judged) is no death */
    if (reap(p->pid, &status)) {
        fprintf(stderr, "vt: verbproxy (port %d) died: status 0x%x\n", p->port, status);
        p->crashed = true;
        p->pid = 0;
        return false;
    }
    return true;
}

bool vt_proxy_stop(vt_proxy *p)
{
    if (!p || p->direct || !p->pid) return p && !p->crashed;
    /* SIGQUIT: at once, whoever is still connected (SIGTERM would drain
     * until the test's clients leave: test_lifecycle.c's stories). */
    int status = terminate(p->pid, SIGQUIT);
    p->pid = 0;
    if (status & 0x10000) {
        p->crashed = true;
        fprintf(stderr, "vt: verbproxy (port %d) had exited by itself: status 0x%x\n", p->port,
                status & 0xffff);
        return false;
    }
    bool clean = (WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
                 (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    if (!clean) {
        p->crashed = true;
        fprintf(stderr, "vt: verbproxy (port %d) stopped badly: status 0x%x\n", p->port, status);
    }
    return clean;
}

bool vt_proxy_signal(vt_proxy *p, int sig)
{
    return p && !p->direct && p->pid && kill(p->pid, sig) == 0;
}

bool vt_proxy_wait_exit(vt_proxy *p, int timeout_ms, int *status)
{
    if (!p || p->direct || !p->pid) return false;
    long long deadline = vt_now_ms() + timeout_ms;
    do {
        int st = 0;
        if (reap(p->pid, &st)) {
            p->pid = 0;
            p->waited = true;
            if (status) *status = st;
            return true;
        }
        sleep_ms(POLL_INTERVAL_MS);
    } while (vt_now_ms() < deadline);
    return false;
}

void vt_proxy_kill(vt_proxy *p)
{
    if (!p || p->direct || !p->pid) return;
    kill9(p->pid);
    p->pid = 0;
}

char *vt_proxy_log(const vt_proxy *p)
{
    if (p->direct) return strdup("");
    return vt_read_file(p->log);
}

void vt_proxy_free(vt_proxy *p)
{
    if (!p) return;
    if (!p->direct) {
        vt_proxy_stop(p);
        if (p->crashed || env_on("VP_TEST_VERBOSE")) print_file("verbproxy log", p->log);
        release_dir(p->dir, p->reaper);
    }
    free(p);
}

int vt_proc_file_holds(pid_t pid, const char *what, const char *needle)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
    static char buf[65536];
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    if (n == 0) return -1;
    return memmem(buf, n, needle, strlen(needle)) != NULL;
}

long long vt_peak_rss_kb(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    char *status = vt_read_file(path);
    const char *line = strstr(status, "VmHWM:");
    long long kb = line ? strtoll(line + 6, NULL, 10) : -1;
    free(status);
    return kb;
}

int vt_run_capture(const char *cmd, char *out, size_t outlen)
{
    char line[4096];
    snprintf(line, sizeof(line), "%s 2>&1", cmd);
    out[0] = '\0';
    FILE *f = popen(line, "r");
    if (!f) return -1;
    size_t n = fread(out, 1, outlen - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
