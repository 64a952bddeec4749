/* bare_forwarder.c - the floor for any one-upstream-connection-per-client
 * proxy: a libuv byte forwarder that parses nothing, frames nothing and
 * keeps no order. bench/run.sh runs it beside verbproxy so the CPU verbproxy
 * spends on top of moving bytes shows in one run. Not part of the product.
 *
 *   bare_forwarder LISTEN_PORT UPSTREAM_PORT     (both on 127.0.0.1)
 */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

typedef struct side {
    uv_tcp_t h; /* first: the handle pointer is the side pointer */
    struct pair *pair;
    char buf[65536];
} side;

typedef struct pair {
    side client, upstream;
    uv_connect_t req;
    int closed;
} pair;

static uv_loop_t *loop;
static struct sockaddr_in upstream_addr;

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *b)
{
    (void)size;
    side *s = (side *)h;
    *b = uv_buf_init(s->buf, sizeof(s->buf));
}

static void on_close(uv_handle_t *h)
{
    pair *p = ((side *)h)->pair;
    if (++p->closed == 2) free(p);
}

static void pair_close(pair *p)
{
    if (!uv_is_closing((uv_handle_t *)&p->client.h)) uv_close((uv_handle_t *)&p->client.h, on_close);
    if (!uv_is_closing((uv_handle_t *)&p->upstream.h)) uv_close((uv_handle_t *)&p->upstream.h, on_close);
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *b)
{
    side *s = (side *)stream;
    pair *p = s->pair;
    side *other = s == &p->client ? &p->upstream : &p->client;
    if (n < 0) {
        pair_close(p);
        return;
    }
    /* The benchmark's replies and requests are small: the kernel takes
     * them whole; anything else ends the pair rather than buffer. */
    uv_buf_t w = uv_buf_init(b->base, (unsigned int)n);
    if (n > 0 && uv_try_write((uv_stream_t *)&other->h, &w, 1) != n) pair_close(p);
}

static void on_connect(uv_connect_t *req, int status)
{
    pair *p = req->data;
    if (status < 0) {
        pair_close(p);
        return;
    }
    uv_read_start((uv_stream_t *)&p->client.h, on_alloc, on_read);
    uv_read_start((uv_stream_t *)&p->upstream.h, on_alloc, on_read);
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0) return;
    pair *p = calloc(1, sizeof(*p));
    p->client.pair = p->upstream.pair = p;
    uv_tcp_init(loop, &p->client.h);
    uv_tcp_init(loop, &p->upstream.h);
    if (uv_accept(server, (uv_stream_t *)&p->client.h) < 0) {
        pair_close(p);
        return;
    }
    uv_tcp_nodelay(&p->client.h, 1);
    uv_tcp_nodelay(&p->upstream.h, 1);
    p->req.data = p;
    uv_tcp_connect(&p->req, &p->upstream.h, (struct sockaddr *)&upstream_addr, on_connect);
}

int main(int argc, char **argv)
{
    if (argc != 3) return 2;
    loop = uv_default_loop();
    uv_ip4_addr("127.0.0.1", atoi(argv[2]), &upstream_addr);
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", atoi(argv[1]), &addr);
    uv_tcp_t server;
    uv_tcp_init(loop, &server);
    if (uv_tcp_bind(&server, (struct sockaddr *)&addr, 0) < 0) return 1;
    if (uv_listen((uv_stream_t *)&server, 511, on_connection) < 0) return 1;
    return uv_run(loop, UV_RUN_DEFAULT);
}
