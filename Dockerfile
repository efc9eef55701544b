# syntax=docker/dockerfile:1
# The kubeleased image: built with the same steps as the README build, run on
# a slim Debian base as a non-root user with only the runtime libraries.
#
#   docker build -t <registry>/kubelease/kubeleased:0.1.0 .
#
# No container engine runs on the development machines, so this file is kept
# deliberately plain: the builder stage is exactly the README build.

FROM debian:bookworm AS build
WORKDIR /src
# scripts/setup.sh (without --test) installs the build dependencies with apt.
COPY scripts/setup.sh scripts/setup.sh
RUN bash scripts/setup.sh
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKL_BUILD_TESTS=OFF \
 && cmake --build build \
 && cmake --install build --prefix /usr/local

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libprotobuf-c1 libmicrohttpd12 libcurl4 libcjson1 libyaml-0-2 libssl3 libgnutls30 \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/kubeleased /usr/local/bin/kubeleased
# A numeric UID, so Kubernetes can verify runAsNonRoot without /etc/passwd.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/kubeleased"]
