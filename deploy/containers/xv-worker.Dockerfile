# xv/xv-worker-cuda and xv/xv-worker-rocm: xv-worker, xv-train and xvctl on a vendor's PyTorch image,
# the trainer built against the LibTorch inside it (the recipe of docs/operations.md § Containers:
# find_package(Torch) only in trainer/, through torch.utils.cmake_prefix_path). Both bases are
# Ubuntu 24.04, whose archive has the gRPC 1.51 and protobuf 3.21 the rest of xv builds with.
#   docker build -f deploy/containers/xv-worker.Dockerfile -t xv/xv-worker-cuda:latest \
#     --build-arg BASE=nvcr.io/nvidia/pytorch:25.01-py3 .
#   docker build -f deploy/containers/xv-worker.Dockerfile -t xv/xv-worker-rocm:latest \
#     --build-arg BASE=rocm/pytorch:rocm6.3.4_ubuntu24.04_py3.12_pytorch_release_2.4.0 .
# The vendor image is also the runtime: LibTorch, CUDA or ROCm, cuDNN/MIOpen live in it.
ARG BASE=nvcr.io/nvidia/pytorch:25.01-py3
FROM ${BASE}
# deploy/install-deps.sh's build packages that a PyTorch image lacks (not libtorch-dev: the
# image's LibTorch is used; not the test-only ones).
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config git \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libsqlite3-dev libboost-dev libspdlog-dev libyaml-cpp-dev libpcre2-dev nlohmann-json3-dev \
      libcli11-dev zlib1g-dev libzstd-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# CMAKE_INSTALL_RPATH_USE_LINK_PATH: the installed xv-train keeps the path of the image's
# libtorch*.so (inside Python's site-packages) instead of needing LD_LIBRARY_PATH.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DXV_BUILD_TESTS=OFF \
      -DXV_BUILD_BENCH=OFF -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON \
      -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
 && cmake --build /build -j"$(nproc)" --target xv-worker xv-train xvctl \
 && install -D -m 0755 -t /opt/xv/bin /build/bin/xv-worker /build/bin/xv-train /build/bin/xvctl \
 && /opt/xv/bin/xv-train --help > /dev/null \
 && rm -rf /build /src \
 && groupadd -g 10001 xv && useradd -u 10001 -g xv -G video -d /work -s /usr/sbin/nologin xv \
 && install -d -o xv -g xv /work
ENV PATH=/opt/xv/bin:${PATH}
USER 10001:10001
WORKDIR /work
# xv-worker finds xv-train beside itself. Flags or --config /etc/xv/worker.yaml come from the pod.
ENTRYPOINT ["/opt/xv/bin/xv-worker"]
