# contiv-capi-ipam, for the contiv-capi-ipam Deployment (k8s/capi-ipam/).
# `make images` builds it (docker/README.md) from the directory
# docker/images.sh stages, $(IMAGES_DIR)/context.
# Nothing but the static binary: no shell, no CA bundle (the API server's CA
# comes with the in-cluster config).
FROM scratch
COPY contiv-capi-ipam /usr/local/bin/contiv-capi-ipam
# 65532 (distroless' nonroot): contiv-capi-ipam needs no file of the host
# and no privilege; the Deployment adds runAsNonRoot.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/contiv-capi-ipam"]
