# syntax=docker/dockerfile:1
# toolbroker image. Two targets:
#   runtime       (default) the broker alone; serves the built-in demo server out of the box
#   runtime-node  + Node.js and npm, Python and uv, for MCP servers started with `npx` or `uvx`
#   docker build -t toolbroker:latest .
#   docker build --target runtime-node -t toolbroker:runtime-node .
# (podman build works the same.) No protoc needed: build.rs compiles the .proto with protox.

ARG RUST_IMAGE=rust:1-bookworm
ARG DEBIAN_IMAGE=debian:bookworm-slim

FROM ${RUST_IMAGE} AS builder
WORKDIR /build
# No debug info in the image's binary (symbols stay, so a panic's backtrace names functions);
# Cargo.toml keeps line tables for local profiling.
ENV CARGO_PROFILE_RELEASE_DEBUG=false \
    CARGO_PROFILE_RELEASE_STRIP=debuginfo
# Dependencies first: this layer is rebuilt only when Cargo.toml or Cargo.lock change.
# A stub crate (same targets as the real one) builds every dependency into the image layer.
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto ./proto
RUN mkdir -p src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && cargo build --release --locked --bin toolbroker \
    && rm -rf src target/release/.fingerprint/toolbroker-* \
        target/release/deps/toolbroker-* target/release/deps/libtoolbroker-*
COPY src ./src
RUN cargo build --release --locked --bin toolbroker \
    && install -m 0755 target/release/toolbroker /usr/local/bin/toolbroker

FROM ${DEBIAN_IMAGE} AS runtime-base
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="toolbroker" \
      org.opencontainers.image.description="A gRPC broker that serves the tools of many MCP servers to agents in any language" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# Versions come from the pinned Debian release (bookworm) and its security updates.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates tini \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 toolbroker \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/toolbroker --create-home \
        --shell /usr/sbin/nologin toolbroker
COPY --from=builder /usr/local/bin/toolbroker /usr/local/bin/toolbroker
COPY deploy/config.yaml /etc/toolbroker/config.yaml
USER 10001:10001
WORKDIR /home/toolbroker
ENV HOME=/home/toolbroker
# gRPC (with health and reflection), Prometheus metrics
EXPOSE 50051 9090
# tini reaps the MCP servers' orphans and forwards SIGTERM for the graceful shutdown.
ENTRYPOINT ["tini", "--", "toolbroker"]
CMD ["serve", "--config", "/etc/toolbroker/config.yaml"]

# uv (for `uvx` MCP servers) from its PyPI package, which carries a static binary.
FROM ${DEBIAN_IMAGE} AS uv
ARG UV_VERSION=0.13.9
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3-pip \
    && rm -rf /var/lib/apt/lists/*
# Behind a TLS-inspecting proxy, pass its CA bundle as the optional build secret `ca`.
RUN --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && pip install --no-cache-dir --break-system-packages --target /opt/uv "uv==${UV_VERSION}" \
    && /opt/uv/bin/uv --version

FROM runtime-base AS runtime-node
USER 0:0
# Debian's Node.js (18 in bookworm) for `npx`, Python 3.11 for `uvx`; both download MCP servers
# into $HOME (~/.npm, ~/.cache/uv) at run time.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm python3 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=uv /opt/uv/bin/uv /opt/uv/bin/uvx /usr/local/bin/
USER 10001:10001

# Last, so that it is the default target.
FROM runtime-base AS runtime
