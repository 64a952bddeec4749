/* Config parsing: every directive, units, and the errors that stop start-up
 * with the file, the line and the reason. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy/config.h"

static char conf_path[64];

static const char *write_conf(const char *text)
{
    snprintf(conf_path, sizeof(conf_path), "/tmp/vp-conf-XXXXXX");
    int fd = mkstemp(conf_path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return conf_path;
}

static int load(vp_config *c, const char *text, char *err, size_t errlen)
{
    conf_defaults(c);
    int rc = conf_load_file(c, write_conf(text), err, errlen);
    unlink(conf_path);
    return rc;
}

Test(config, defaults_match_the_documented_ones)
{
    vp_config c;
    conf_defaults(&c);
    cr_assert_str_eq(c.bind, "127.0.0.1");
    cr_assert_eq(c.port, 6380);
    cr_assert_str_eq(c.upstream_host, "127.0.0.1");
    cr_assert_eq(c.upstream_port, 6379);
    cr_assert_eq(c.proto_max_bulk_len, 512LL * 1024 * 1024);
    cr_assert_eq(c.proto_max_multibulk_len, 2147483647LL);
    cr_assert_eq(c.connect_timeout_ms, 2000);
    cr_assert_eq(c.maxclients, 10000); /* Redis's */
    cr_assert_eq(c.shutdown_timeout, 30);
    cr_assert_eq(c.shutdown_min_drain, 0); /* exit as soon as no client is left */
}

Test(config, maxclients_is_a_positive_count)
{
    vp_config c;
    char err[256] = "";
    cr_assert_eq(load(&c, "maxclients 224\n", err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(c.maxclients, 224);
    cr_assert_eq(load(&c, "maxclients 0\n", err, sizeof(err)), -1);
    cr_assert(strstr(err, "'maxclients' must be an integer between 1 and") != NULL, "%s", err);
    cr_assert_eq(load(&c, "maxclients many\n", err, sizeof(err)), -1);
}

Test(config, the_example_file_loads)
{
    vp_config c;
    char err[256] = "";
    conf_defaults(&c);
    int rc = conf_load_file(&c, SOURCE_DIR "/conf/verbproxy.conf", err, sizeof(err));
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_eq(c.port, 6380);
    cr_assert_eq(c.buffer_limit, 1024 * 1024);
    cr_assert_eq(c.maxclients, 10000);
}

Test(config, every_directive_is_applied)
{
    vp_config c;
    char err[256] = "";
    int rc = load(&c,
                  "# comment\n"
                  "\n"
                  "bind ::1\n"
                  "  port 7000  \n"
                  "unixsocket \"/tmp/with space.sock\"\n"
                  "unixsocketperm 770\n"
                  "tcp-backlog 128\n"
                  "upstream redis.default.svc:6390\n"
                  "connect-timeout 250\n"
                  "proto-max-bulk-len 2mb\n"
                  "proto-max-multibulk-len 1000\n"
                  "buffer-limit 64kb\n"
                  "LOGLEVEL warning\n",
                  err, sizeof(err));
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_str_eq(c.bind, "::1");
    cr_assert_eq(c.port, 7000);
    cr_assert_str_eq(c.unixsocket, "/tmp/with space.sock");
    cr_assert_eq(c.unixsocketperm, 0770);
    cr_assert_eq(c.tcp_backlog, 128);
    cr_assert_str_eq(c.upstream_host, "redis.default.svc");
    cr_assert_eq(c.upstream_port, 6390);
    cr_assert_eq(c.connect_timeout_ms, 250);
    cr_assert_eq(c.proto_max_bulk_len, 2 * 1024 * 1024);
    cr_assert_eq(c.proto_max_multibulk_len, 1000);
    cr_assert_eq(c.buffer_limit, 64 * 1024);
    cr_assert_eq(c.loglevel, VP_LOG_WARNING);
}

Test(config, upstream_forms)
{
    vp_config c;
    char err[256];
    conf_defaults(&c);
    cr_assert_eq(conf_parse_upstream(&c, "/var/run/redis.sock", err, sizeof(err)), 0);
    cr_assert_eq(c.upstream_port, 0);
    cr_assert_str_eq(c.upstream_host, "/var/run/redis.sock");
    cr_assert_eq(conf_parse_upstream(&c, "unix:/tmp/r.sock", err, sizeof(err)), 0);
    cr_assert_str_eq(c.upstream_host, "/tmp/r.sock");
    cr_assert_eq(conf_parse_upstream(&c, "[::1]:6379", err, sizeof(err)), 0);
    cr_assert_str_eq(c.upstream_host, "::1");
    cr_assert_eq(c.upstream_port, 6379);
    cr_assert_eq(conf_parse_upstream(&c, "localhost", err, sizeof(err)), -1);
    cr_assert_eq(conf_parse_upstream(&c, "localhost:0", err, sizeof(err)), -1);
    cr_assert_eq(conf_parse_upstream(&c, "localhost:65536", err, sizeof(err)), -1);
    cr_assert_eq(conf_parse_upstream(&c, "unix:", err, sizeof(err)), -1);
}

Test(config, memory_units_are_redis_units)
{
    long long v;
    cr_assert_eq(conf_parse_memory("1k", &v), 0);
    cr_assert_eq(v, 1000);
    cr_assert_eq(conf_parse_memory("1KB", &v), 0);
    cr_assert_eq(v, 1024);
    cr_assert_eq(conf_parse_memory("3m", &v), 0);
    cr_assert_eq(v, 3000000);
    cr_assert_eq(conf_parse_memory("512mb", &v), 0);
    cr_assert_eq(v, 512LL * 1024 * 1024);
    cr_assert_eq(conf_parse_memory("1gb", &v), 0);
    cr_assert_eq(v, 1024LL * 1024 * 1024);
    cr_assert_eq(conf_parse_memory("12", &v), 0);
    cr_assert_eq(v, 12);
    cr_assert_eq(conf_parse_memory("mb", &v), -1);
    cr_assert_eq(conf_parse_memory("1tb", &v), -1);
    cr_assert_eq(conf_parse_memory("-1", &v), -1);
    cr_assert_eq(conf_parse_memory("", &v), -1);
}

/* Each bad file names the file, the line and the reason. */
static void assert_rejected(const char *text, int line, const char *reason)
{
    vp_config c;
    char err[512] = "";
    cr_assert_eq(load(&c, text, err, sizeof(err)), -1, "accepted: %s", text);
    char where[128];
    snprintf(where, sizeof(where), "%s:%d: ", conf_path, line);
    cr_assert(strncmp(err, where, strlen(where)) == 0, "error '%s' does not start with '%s'", err, where);
    cr_assert(strstr(err, reason) != NULL, "error '%s' does not say '%s'", err, reason);
}

Test(config, bad_files_are_rejected_with_file_line_and_reason)
{
    assert_rejected("port 6380\nfrobnicate yes\n", 2, "unknown directive 'frobnicate'");
    assert_rejected("port 70000\n", 1, "'port' must be an integer between 0 and 65535, got '70000'");
    assert_rejected("port six\n", 1, "'port' must be an integer");
    assert_rejected("\n\nport\n", 3, "'port' takes exactly one value");
    assert_rejected("port 1 2\n", 1, "'port' takes exactly one value");
    assert_rejected("upstream nowhere\n", 1, "upstream must be host:port");
    assert_rejected("loglevel loud\n", 1, "'loglevel' must be debug, verbose, notice or warning");
    assert_rejected("proto-max-bulk-len 1k\n", 1, "'proto-max-bulk-len' must be a size");
    assert_rejected("connect-timeout 0\n", 1, "'connect-timeout' must be an integer");
    assert_rejected("unixsocketperm 999\n", 1, "octal");
    assert_rejected("bind \"127.0.0.1\n", 1, "unbalanced quotes");
}

Test(config, a_missing_file_is_an_error)
{
    vp_config c;
    char err[256];
    conf_defaults(&c);
    cr_assert_eq(conf_load_file(&c, "/nonexistent/verbproxy.conf", err, sizeof(err)), -1);
    cr_assert(strstr(err, "/nonexistent/verbproxy.conf: cannot open") != NULL, "%s", err);
}

/* Cluster mode: every address of every upstream line is a seed; the other
 * modes take one address; cluster mode needs shared connections. */
Test(config, cluster_seeds)
{
    vp_config c;
    char err[256];
    cr_assert_eq(load(&c, "upstream-mode cluster\nupstream 10.0.0.1:7000,10.0.0.2:7001\nupstream h3:7002\n",
                      err, sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(conf_finish(&c, NULL, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(c.ncluster_seeds, 3);
    cr_assert_str_eq(c.cluster_seed_hosts[1], "10.0.0.2");
    cr_assert_eq(c.cluster_seed_ports[2], 7002);
    conf_free(&c);

    cr_assert_eq(load(&c, "upstream 10.0.0.1:7000,10.0.0.2:7001\n", err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(conf_finish(&c, NULL, err, sizeof(err)), -1);
    cr_assert_str_eq(err, "several upstream addresses need upstream-mode cluster");
    conf_free(&c);

    cr_assert_eq(load(&c, "upstream-mode cluster\nshared-upstreams 0\n", err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(conf_finish(&c, NULL, err, sizeof(err)), -1);
    cr_assert_str_eq(err, "upstream-mode cluster needs shared-upstreams of at least 1");
    conf_free(&c);

    cr_assert_eq(load(&c, "upstream-mode cluster\nupstream /tmp/r.sock\n", err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(conf_finish(&c, NULL, err, sizeof(err)), -1);
    conf_free(&c);
}

/* shutdown-min-drain: seconds, checked like shutdown-timeout (0 to a day). */
Test(config, shutdown_min_drain_is_seconds_like_shutdown_timeout)
{
    vp_config c;
    char err[256] = "";
    cr_assert_eq(load(&c, "shutdown-min-drain 5\nshutdown-timeout 30\n", err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(c.shutdown_min_drain, 5);
    cr_assert_eq(c.shutdown_timeout, 30);
    /* Above shutdown-timeout is allowed: shutdown-timeout then ends the drain. */
    cr_assert_eq(load(&c, "shutdown-min-drain 86400\nshutdown-timeout 0\n", err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(c.shutdown_min_drain, 86400);
    assert_rejected("shutdown-min-drain -1\n", 1,
                    "'shutdown-min-drain' must be an integer between 0 and 86400, got '-1'");
    assert_rejected("shutdown-min-drain 86401\n", 1,
                    "'shutdown-min-drain' must be an integer between 0 and 86400, got '86401'");
    assert_rejected("shutdown-min-drain 5s\n", 1, "'shutdown-min-drain' must be an integer");
    assert_rejected("shutdown-min-drain\n", 1, "'shutdown-min-drain' takes exactly one value");
}

/* conf_parse_text, the parser alone: the line limit as the 4096-byte fgets
 * buffer had it (4094 bytes and the line end), a last line without its
 * line end, CRLF, and a NUL byte refused with its line number. */
static int parse(vp_config *c, const char *text, size_t len, char *err, size_t errlen)
{
    conf_defaults(c);
    return conf_parse_text(c, text, len, "t.conf", err, errlen);
}

static char *long_comment_line(size_t n, const char *after)
{
    size_t al = strlen(after);
    char *t = malloc(n + al + 1);
    cr_assert(t != NULL);
    t[0] = '#';
    memset(t + 1, 'x', n - 1);
    memcpy(t + n, after, al + 1);
    return t;
}

Test(config, the_text_parser_keeps_the_line_rules_of_the_file_reader)
{
    vp_config c;
    char err[256] = "";
    const char *text = "port 7001\r\n\n# note\r\nmaxclients 9";
    cr_assert_eq(parse(&c, text, strlen(text), err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(c.port, 7001);
    cr_assert_eq(c.maxclients, 9, "the last line, without its line end, is read");
    cr_assert_eq(parse(&c, "", 0, err, sizeof(err)), 0);
    cr_assert_eq(c.port, 6380);

    char *t = long_comment_line(4094, "\nport 7002\n");
    cr_assert_eq(parse(&c, t, strlen(t), err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(c.port, 7002);
    free(t);
    t = long_comment_line(4095, "\nport 7002\n");
    cr_assert_eq(parse(&c, t, strlen(t), err, sizeof(err)), -1);
    cr_assert_str_eq(err, "t.conf:1: line too long");
    free(t);

    static const char nul[] = "port 7003\nmaxclients 5\0\nport 7004\n";
    cr_assert_eq(parse(&c, nul, sizeof(nul) - 1, err, sizeof(err)), -1);
    cr_assert_str_eq(err, "t.conf:2: a NUL byte: not a text file");
}

Test(config, a_directory_is_no_config)
{
    vp_config c;
    char err[256] = "";
    conf_defaults(&c);
    cr_assert_eq(conf_load_file(&c, "/tmp", err, sizeof(err)), -1);
    cr_assert_str_eq(err, "/tmp: cannot read: Is a directory");
}
