/* The command line a user types: --help, --version, flags that override the
 * config file, and start-up refused with file:line:reason and status 1. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/support/servers.h"

/* Run verbproxy with a shell command line suffix; capture both streams. */
static int run(const char *args, char *out, size_t outlen)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "timeout 10 %s %s", VP_BINARY, args);
    return vt_run_capture(cmd, out, outlen);
}

static char tmpfile_path[64];

static const char *write_tmp(const char *text)
{
    snprintf(tmpfile_path, sizeof(tmpfile_path), "/tmp/vp-cli-XXXXXX");
    int fd = mkstemp(tmpfile_path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return tmpfile_path;
}

Test(cli, help_and_version)
{
    char out[4096];
    cr_assert_eq(run("--help", out, sizeof(out)), 0);
    cr_assert(strstr(out, "Usage: verbproxy") && strstr(out, "--upstream"), "%s", out);
    cr_assert_eq(run("--version", out, sizeof(out)), 0);
    cr_assert(strncmp(out, "verbproxy ", 10) == 0, "%s", out);
}

Test(cli, a_bad_directive_stops_start_up_with_file_line_and_reason)
{
    char out[4096], args[256];
    const char *path = write_tmp("port 7000\n# fine so far\nupstream-typo 1\n");
    snprintf(args, sizeof(args), "--config %s", path);
    int rc = run(args, out, sizeof(out));
    unlink(path);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    char want[256];
    snprintf(want, sizeof(want), "%s:3: unknown directive 'upstream-typo'", path);
    cr_assert(strstr(out, want) != NULL, "'%s' not in '%s'", want, out);
}

/* A config that cannot be read whole stops start-up with the reason: a
 * directory given as --config (a mount gone wrong) reads as an error, not
 * as an empty file. Before, the proxy ran on the defaults. (The tests run
 * as root, so a mode 000 file would still be read: the directory is the
 * honest unreadable file here.) */
Test(cli, an_unreadable_config_stops_start_up_with_the_reason)
{
    char dir[64], out[4096], args[256], want[256];
    snprintf(dir, sizeof(dir), "/tmp/vp-cli-dir-XXXXXX");
    cr_assert(mkdtemp(dir) != NULL);
    snprintf(args, sizeof(args), "--config %s --port 0", dir);
    int rc = run(args, out, sizeof(out));
    rmdir(dir);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    snprintf(want, sizeof(want), "%s: cannot read: Is a directory", dir);
    cr_assert(strstr(out, want) != NULL, "'%s' not in '%s'", want, out);
}

/* A FIFO given as --config is refused at once: opening it would wait for a
 * writer (and at a SIGHUP, the whole event loop with it). Before, start-up
 * hung until `timeout` killed it. */
Test(cli, a_fifo_as_config_stops_start_up_at_once)
{
    char dir[64], fifo[96], out[4096], args[256], want[256];
    snprintf(dir, sizeof(dir), "/tmp/vp-cli-fifo-XXXXXX");
    cr_assert(mkdtemp(dir) != NULL);
    snprintf(fifo, sizeof(fifo), "%s/verbproxy.conf", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof(args), "--config %s --port 0", fifo);
    int rc = run(args, out, sizeof(out));
    unlink(fifo);
    rmdir(dir);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    snprintf(want, sizeof(want), "%s: cannot read: a FIFO, not a file", fifo);
    cr_assert(strstr(out, want) != NULL, "'%s' not in '%s'", want, out);
}

/* The same for a password file: a FIFO named by upstream-pass-file is
 * refused at once, not waited on (at a SIGHUP that wait would be the
 * event loop's). Before, start-up hung until `timeout` killed it. */
Test(cli, a_fifo_as_upstream_pass_file_stops_start_up_at_once)
{
    char dir[64], fifo[96], out[4096], args[256], want[256];
    snprintf(dir, sizeof(dir), "/tmp/vp-cli-fifo-XXXXXX");
    cr_assert(mkdtemp(dir) != NULL);
    snprintf(fifo, sizeof(fifo), "%s/pass", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof(args), "--upstream-pass-file %s --port 0", fifo);
    int rc = run(args, out, sizeof(out));
    unlink(fifo);
    rmdir(dir);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    snprintf(want, sizeof(want), "upstream-pass-file %s: cannot read: a FIFO, not a file", fifo);
    cr_assert(strstr(out, want) != NULL, "'%s' not in '%s'", want, out);
}

/* A NUL byte in the file (one half written over zeros) is no config. */
Test(cli, a_config_with_a_nul_byte_stops_start_up)
{
    char out[4096], args[256], want[256];
    const char *path = write_tmp("port 0\n");
    FILE *f = fopen(path, "a");
    cr_assert(f != NULL);
    cr_assert_eq(fwrite("\0\0\0\n", 1, 4, f), 4u);
    fclose(f);
    snprintf(args, sizeof(args), "--config %s", path);
    int rc = run(args, out, sizeof(out));
    unlink(path);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    snprintf(want, sizeof(want), "%s:2: a NUL byte: not a text file", path);
    cr_assert(strstr(out, want) != NULL, "'%s' not in '%s'", want, out);
}

Test(cli, a_bad_flag_value_stops_start_up)
{
    char out[4096];
    cr_assert_eq(run("--port 99999", out, sizeof(out)), 1);
    cr_assert(strstr(out, "'port' must be an integer between 0 and 65535") != NULL, "%s", out);
    cr_assert_eq(run("--no-such-thing 1", out, sizeof(out)), 1);
    cr_assert(strstr(out, "unknown directive 'no-such-thing'") != NULL, "%s", out);
    cr_assert_eq(run("stray", out, sizeof(out)), 1);
}

static bool unix_socket_accepts(void *arg)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", (const char *)arg);
    bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/* The flag wins over the file: the file asks for TCP port 1 (not ours to
 * bind), the flags turn TCP off and listen on a unix socket instead. The
 * proxy must come up on the socket, then stop cleanly on SIGTERM. */
Test(cli, flags_override_the_file)
{
    const char *path = write_tmp("port 1\nloglevel warning\n");
    char sock[64];
    snprintf(sock, sizeof(sock), "/tmp/vp-cli-%d.sock", (int)getpid());
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        execl(VP_BINARY, VP_BINARY, "--config", path, "--port", "0", "--unixsocket", sock, (char *)NULL);
        _exit(127);
    }
    bool up = vt_wait_until(unix_socket_accepts, sock, VT_START_DEADLINE_MS);
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    unlink(path);
    cr_assert(up, "proxy never listened on %s", sock);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    cr_assert(access(sock, F_OK) != 0, "socket file left behind");
}
