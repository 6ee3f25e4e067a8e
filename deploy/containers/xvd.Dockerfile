# xv/xvd: the daemon (xvd) and xvctl on Debian 12, built with the packages of `make deps`
# (deploy/install-deps.sh); the runtime stage holds only the shared libraries they load.
#   docker build -f deploy/containers/xvd.Dockerfile -t xv/xvd:latest .
# Runs as uid 10001 with its state in /var/lib/xv (a volume): docs/operations.md § Containers.
FROM debian:12 AS build
WORKDIR /src
COPY deploy/install-deps.sh deploy/install-deps.sh
RUN bash deploy/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# Then the Debian packages that own the libraries the two programs load: the runtime stage's list.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DXV_BUILD_TESTS=OFF \
      -DXV_BUILD_BENCH=OFF \
 && cmake --build /build -j"$(nproc)" --target xvd xvctl \
 && install -D -m 0755 /build/bin/xvd /out/usr/local/bin/xvd \
 && install -D -m 0755 /build/bin/xvctl /out/usr/local/bin/xvctl \
 && install -D -m 0644 deploy/xvd.example.yaml /out/etc/xv/xvd.example.yaml \
 && ldd /out/usr/local/bin/xvd /out/usr/local/bin/xvctl | awk '/=> \//{print $3}' | sort -u \
    | while read -r lib; do dpkg -S "$lib" 2>/dev/null || dpkg -S "$(realpath "$lib")" 2>/dev/null \
      || dpkg -S "/usr$lib" 2>/dev/null; done \
    | cut -d: -f1 | sort -u > /out/runtime-packages \
 && test -s /out/runtime-packages

FROM debian:12-slim
COPY --from=build /out/runtime-packages /tmp/runtime-packages
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive xargs -a /tmp/runtime-packages apt-get install -y -qq \
      --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages \
 && groupadd -g 10001 xv && useradd -u 10001 -g xv -d /var/lib/xv -s /usr/sbin/nologin xv \
 && install -d -o xv -g xv -m 0750 /var/lib/xv
COPY --from=build /out/ /
USER 10001:10001
VOLUME /var/lib/xv
# gRPC (TLS off loopback), the health endpoints (--health-listen); the dashboard stays on loopback.
EXPOSE 7470 8471
ENTRYPOINT ["/usr/local/bin/xvd"]
CMD ["--state-dir", "/var/lib/xv", "--listen", "127.0.0.1:7470", "--health-listen", "0.0.0.0:8471"]
