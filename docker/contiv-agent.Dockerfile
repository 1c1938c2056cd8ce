# syntax=docker/dockerfile:1
# contiv-agent and contiv-cni, for the contiv-agent DaemonSet (k8s/).
# Build from the repository root: `make images`, or
#   docker build -f docker/contiv-agent.Dockerfile -t contiv-agent .
# docker/README.md says why the final stage is Debian and runs as root.

# The builder runs on the build machine's platform and cross-compiles for
# the target's (docker buildx build --platform linux/arm64 ...): the
# binaries are static, so no C toolchain of the target is needed.
FROM --platform=$BUILDPLATFORM golang:1.26-trixie AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
ARG TARGETOS
ARG TARGETARCH
# The same target a developer runs: static binaries, the Makefile's ldflags.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS="$TARGETOS" GOARCH="$TARGETARCH" make static STATIC_DIR=/out STATIC_CMDS="./cmd/contiv-agent ./cmd/contiv-cni" \
      VERSION="$VERSION" COMMIT="$COMMIT" DATE="$DATE"

# Debian, not distroless: the DaemonSet's init container runs this image's
# /bin/sh, cp and mv to install contiv-cni and the conflist on the host.
FROM debian:trixie-slim
COPY --from=build /out/contiv-agent /out/contiv-cni /usr/local/bin/
# Root: contiv-cni is run as root by the container runtime and dials the
# agent's socket (mode 0600, the agent's user); the socket and the bolt file
# are in root-owned host directories. The DaemonSet drops every capability.
USER 0:0
ENTRYPOINT ["/usr/local/bin/contiv-agent"]
