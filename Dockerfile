# verbproxy as a sidecar image: build on Debian 12, run on Debian 12 slim.
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
        build-essential cmake pkg-config libuv1-dev libhiredis-dev libjemalloc-dev libssl-dev libhttp-parser-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVP_TESTS=OFF \
    && cmake --build build --target verbproxy -j"$(nproc)"

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends libuv1 libjemalloc2 libssl3 libhttp-parser2.9 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/verbproxy /usr/local/bin/verbproxy
COPY conf/verbproxy.conf /etc/verbproxy/verbproxy.conf
USER nobody
EXPOSE 6380
# In a pod the service talks to 127.0.0.1:6380; point --upstream at Redis.
ENTRYPOINT ["/usr/local/bin/verbproxy", "--config", "/etc/verbproxy/verbproxy.conf"]
CMD ["--bind", "0.0.0.0"]
