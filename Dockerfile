# verbproxy as a sidecar image: build on Debian 12, run on Debian 12 slim.
#
#   docker build -t verbproxy .
#   docker run --rm -p 6380:6380 -p 9380:9380 -e VERBPROXY_UPSTREAM=redis:6379 verbproxy
#
# Configuration: /etc/verbproxy/verbproxy.conf (deploy/docker/verbproxy.conf;
# mount a directory over /etc/verbproxy to replace it) and VERBPROXY_*
# environment variables, which override the file. tests/deploy/ checks this
# file without a Docker engine: every library `ldd verbproxy` needs is
# installed below, and the ports agree with deploy/kubernetes/.
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
        build-essential cmake pkg-config libuv1-dev libjemalloc-dev libssl-dev \
        libhttp-parser-dev liblua5.1-0-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The packager's three commands (docs/install.md); the runtime stage takes
# the binary from where the install rule put it.
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVP_TESTS=OFF \
    && cmake --build build -j"$(nproc)" \
    && cmake --install build --prefix /usr/local

FROM debian:12-slim
# Exactly the runtime libraries (libc6, libgcc-s1 and libstdc++6 are part of
# the slim image: apt needs them), and the CA bundle for upstream-tls against
# a publicly signed Redis.
RUN apt-get update && apt-get install -y --no-install-recommends \
        libuv1 libjemalloc2 libssl3 libhttp-parser2.9 liblua5.1-0 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
# A dedicated user with a fixed numeric uid/gid: Kubernetes' runAsNonRoot can
# only verify a numeric USER (deploy/kubernetes/ sets runAsUser to the same).
RUN groupadd --system --gid 10001 verbproxy \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin verbproxy
COPY --from=build /usr/local/bin/verbproxy /usr/local/bin/verbproxy
COPY deploy/docker/verbproxy.conf /etc/verbproxy/verbproxy.conf
USER 10001:10001
# 6380: clients (RESP); 9380: the admin HTTP endpoint (/metrics, /healthz, /readyz).
EXPOSE 6380 9380
# No curl in the slim image: the binary is its own HTTP client (exit 0 only on 2xx).
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/verbproxy", "--healthcheck", "127.0.0.1:9380/healthz"]
# SIGTERM drains: readiness fails, clients are served until they leave or
# shutdown-timeout; `docker stop -t` must be longer than shutdown-timeout.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/verbproxy", "--config", "/etc/verbproxy/verbproxy.conf"]
