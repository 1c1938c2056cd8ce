# contiv-agent and contiv-cni, for the contiv-agent DaemonSet (k8s/).
# `make images` builds it (docker/README.md): the build context is the
# directory docker/images.sh stages, $(IMAGES_DIR)/context, which holds the
# `make static` binaries, busybox (static) and applets/, the symlinks to it.
FROM scratch
# The DaemonSet's install-cni init container runs /bin/sh -c with cp,
# chmod, mv, basename and echo: busybox and a symlink per applet (the
# Makefile's AGENT_APPLETS; tests/manifests checks them against the script).
COPY busybox /bin/busybox
COPY applets/ /bin/
COPY contiv-agent contiv-cni /usr/local/bin/
ENV PATH=/usr/local/bin:/bin
# Root: contiv-cni is run as root by the container runtime and dials the
# agent's socket (mode 0600, the agent's user); the socket and the bolt file
# are in root-owned host directories. The DaemonSet drops every capability.
USER 0:0
ENTRYPOINT ["/usr/local/bin/contiv-agent"]
