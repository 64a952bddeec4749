/* client.h - talking to Redis or the proxy from a test.
 *
 * Two ways, for two kinds of test:
 *  - hiredis 0.14 (blocking, RESP2 only) for stories told in commands;
 *  - raw sockets plus a byte buffer for tests that check exact bytes: RESP3
 *    (hiredis 0.14 cannot parse it), protocol garbage, CLIENT REPLY, QUIT...
 *
 * Every read has a deadline, so a proxy that hangs fails the test instead of
 * hanging it. */
#ifndef VT_CLIENT_H
#define VT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <hiredis/hiredis.h>

#define VT_CONNECT_TIMEOUT_MS 5000
#define VT_COMMAND_TIMEOUT_MS 15000 /* hiredis read/write timeout */
#define VT_READ_DEADLINE_MS 10000   /* default deadline for raw reads */

/* ---- hiredis ---- */

/* Connect to 127.0.0.1:port (or a unix socket) with VT_CONNECT_TIMEOUT_MS, and
 * set VT_COMMAND_TIMEOUT_MS on reads and writes. NULL on failure (why on stderr). */
redisContext *vt_connect(int port);
redisContext *vt_connect_unix(const char *path);
/* redisCommand that returns NULL (why on stderr) for I/O errors. */
redisReply *vt_cmd(redisContext *c, const char *fmt, ...);
/* Same, argv style; lens may be NULL for NUL-terminated strings. */
redisReply *vt_cmd_argv(redisContext *c, int argc, const char **argv, const size_t *lens);
/* Read one more reply (pushed messages, replies of a multi-reply command). */
redisReply *vt_get_reply(redisContext *c);
/* A field of INFO <section> as an integer ("connected_clients"); -1 if absent. */
long long vt_info_int(redisContext *c, const char *section, const char *field);
/* Poll INFO on the redis-server at redis_port (a direct connection) until
 * field == want, or timeout. Returns whether it got there; *last (if not
 * NULL) is the last value seen. */
bool vt_wait_info(int redis_port, const char *section, const char *field, long long want, int timeout_ms,
                  long long *last);
/* Until Redis has exactly n clients blocked (BLPOP, XREAD BLOCK...). */
bool vt_wait_until_blocked(int redis_port, long long n, int timeout_ms);

/* Describe a reply on one line, like redis-cli would (for failure messages).
 * Long strings are cut. Returns buf. */
char *vt_reply_describe(const redisReply *r, char *buf, size_t len);
/* Deep compare type, value and nested elements. On a difference writes where
 * and what into why (if not NULL) and returns false. */
bool vt_reply_equal(const redisReply *want, const redisReply *got, char *why, size_t whylen);

/* ---- byte buffers ---- */

/* A growable byte buffer. Owned by whoever declared it; vt_buf_free(). */
typedef struct vt_buf {
    char *data;
    size_t len;
    size_t cap;
    bool eof; /* the peer closed (read returned 0) */
    int err;  /* errno of a failed read (ECONNRESET...), 0 if none */
} vt_buf;

void vt_buf_append(vt_buf *b, const void *data, size_t len);
void vt_buf_append_str(vt_buf *b, const char *s);
/* Append one command as a RESP multibulk: vt_buf_cmd(b, "SET", "k", "v", NULL). */
void vt_buf_cmd(vt_buf *b, const char *arg0, ...);
/* Same with explicit lengths (binary-safe). */
void vt_buf_cmd_argv(vt_buf *b, int argc, const char **argv, const size_t *lens);
/* Drop the first n bytes. */
void vt_buf_consume(vt_buf *b, size_t n);
bool vt_buf_contains(const vt_buf *b, const char *needle);
void vt_buf_reset(vt_buf *b);
void vt_buf_free(vt_buf *b);
/* The buffer as a printable, escaped C string (for failure messages; static,
 * overwritten by the next call). */
const char *vt_buf_escaped(const vt_buf *b);
const char *vt_escape(const void *data, size_t len);

/* ---- raw sockets ---- */

/* A blocking TCP connection to 127.0.0.1:port (TCP_NODELAY) or a unix socket.
 * -1 on failure. */
int vt_sock_tcp(int port);
int vt_sock_unix(const char *path);
/* Send everything (MSG_NOSIGNAL). false if the peer is gone. */
bool vt_sock_send(int fd, const void *data, size_t len);
bool vt_sock_send_str(int fd, const char *s);
bool vt_sock_send_buf(int fd, const vt_buf *b);
/* Append EVAL <script> 0 and seven 16,000-byte arguments: a request over
 * 64 KiB (112,000 bytes and more) that keeps Redis's pre-auth limits (10
 * arguments, each under 16 KiB), for the stories of a large request sent
 * in pieces before AUTH. */
void vt_buf_big_preauth_eval(vt_buf *b, const char *script);
/* Wait until the process at the other end of TCP socket fd has read every
 * byte sent on it: none left in fd's send queue (SIOCOUTQ) and none in the
 * peer socket's receive queue (/proc/net/tcp). Lets a test make a server
 * see a request in two reads, the first one taken before the rest is sent.
 * False at the deadline. */
bool vt_sock_wait_taken(int fd, int timeout_ms);
/* The connections waiting in the accept queue of the IPv4 socket listening
 * on port (/proc/net/tcp), -1 if there is none. */
long vt_tcp_accept_queue(int port);

/* Read into b until b->len >= n, the peer closes, or timeout. True if reached. */
bool vt_sock_read_len(int fd, vt_buf *b, size_t n, int timeout_ms);
/* Read until b contains needle. */
bool vt_sock_read_contains(int fd, vt_buf *b, const char *needle, int timeout_ms);
/* Read until b holds at least `count` complete RESP2/RESP3 replies. */
bool vt_sock_read_replies(int fd, vt_buf *b, size_t count, int timeout_ms);
/* Read everything until the peer closes (EOF or reset). True if it closed. */
bool vt_sock_read_eof(int fd, vt_buf *b, int timeout_ms);

/* Length of the first complete RESP2/RESP3 reply at data: >0 complete,
 * 0 incomplete, -1 not RESP. An independent little framer (not the proxy's). */
long long vt_resp_reply_len(const char *data, size_t len);
/* How many complete replies data starts with. */
size_t vt_resp_count_replies(const char *data, size_t len);

#endif
