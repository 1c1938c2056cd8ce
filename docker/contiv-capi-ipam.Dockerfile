# syntax=docker/dockerfile:1
# contiv-capi-ipam, for the contiv-capi-ipam Deployment (k8s/capi-ipam/).
# Build from the repository root: `make images`, or
#   docker build -f docker/contiv-capi-ipam.Dockerfile -t contiv-capi-ipam .

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
# The same target a developer runs: a static binary, the Makefile's ldflags.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS="$TARGETOS" GOARCH="$TARGETARCH" make static STATIC_DIR=/out STATIC_CMDS=./cmd/contiv-capi-ipam \
      VERSION="$VERSION" COMMIT="$COMMIT" DATE="$DATE"

# No shell, no package manager, CA certificates for the API server's TLS
# (the in-cluster config also mounts the cluster's CA).
FROM gcr.io/distroless/static-debian13:nonroot
COPY --from=build /out/contiv-capi-ipam /usr/local/bin/contiv-capi-ipam
# nonroot (65532): contiv-capi-ipam needs no file of the host and no privilege.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/contiv-capi-ipam"]
