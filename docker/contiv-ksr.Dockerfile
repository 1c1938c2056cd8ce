# contiv-ksr, for the contiv-ksr Deployment (k8s/).
# `make images` builds it (docker/README.md) from the directory
# docker/images.sh stages, $(IMAGES_DIR)/context.
# Nothing but the static binary: no shell, no CA bundle (the API server's CA
# comes with the in-cluster config; etcd's, when TLS, with ca-file).
FROM scratch
COPY contiv-ksr /usr/local/bin/contiv-ksr
# 65532 (distroless' nonroot): contiv-ksr needs no file of the host and no
# privilege; the Deployment adds runAsNonRoot.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/contiv-ksr"]
