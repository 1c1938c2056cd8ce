#!/usr/bin/env bash
# docker/images.sh: what `make images` runs (docker/README.md). It stages
# the build context, builds docker/<name>.Dockerfile for each image and
# writes each image as an archive $IMAGES_DIR/<name>.tar.
#
# Usage (the Makefile sets every variable):
#   ENGINE=buildah IMAGES_DIR=... STATIC_DIR=... BUSYBOX=... \
#   AGENT_APPLETS="sh cp ..." VERSION=... COMMIT=... \
#   docker/images.sh <agent image> <ksr image> <capi image>
#
# ENGINE buildah (the default) needs no daemon and no registry: its storage
# lives in $IMAGES_DIR/storage (vfs, removed afterwards), and each archive
# is an OCI archive whose index names the image by its full reference
# (org.opencontainers.image.ref.name), which `ctr -n k8s.io images import`
# takes as the image's name. ENGINE docker or podman builds with that
# engine's daemon and saves the image with `<engine> save`.
set -euo pipefail

cd "$(dirname "$0")/.."
: "${ENGINE:?}" "${IMAGES_DIR:?}" "${STATIC_DIR:?}" "${BUSYBOX:?}" "${AGENT_APPLETS:?}"
VERSION=${VERSION:-dev}
COMMIT=${COMMIT:-unknown}
if [ $# -ne 3 ]; then
	echo "usage: $0 <agent image> <ksr image> <capi image>" >&2
	exit 2
fi
# name=image; each name has a docker/<name>.Dockerfile.
images=("contiv-agent=$1" "contiv-ksr=$2" "contiv-capi-ipam=$3")

fail() {
	echo "make images: $*" >&2
	exit 1
}

case "$IMAGES_DIR" in
/*) ;;
*) fail "IMAGES_DIR must be an absolute path, not $IMAGES_DIR" ;;
esac
case "$IMAGES_DIR" in
*:*) fail "IMAGES_DIR must not hold a ':' (oci-archive:<path>:<name>): $IMAGES_DIR" ;;
esac

case "$ENGINE" in
buildah) command -v buildah >/dev/null || fail "buildah is not installed (apt-get install buildah; make images installs it when it runs as root or with sudo)" ;;
docker | podman)
	if ! "$ENGINE" info >/dev/null 2>&1; then
		fail "CONTAINER_ENGINE=$ENGINE, but '$ENGINE info' fails (no daemon?); leave CONTAINER_ENGINE unset to build with buildah, which needs none"
	fi
	;;
*) fail "CONTAINER_ENGINE must be buildah, docker or podman, not '$ENGINE'" ;;
esac

# The build context: the static binaries, busybox and its applets; nothing
# else, so that no COPY can take a file the image should not hold.
ctx=$IMAGES_DIR/context
store=
cleanup() { rm -rf "$ctx" ${store:+"$store"} "$IMAGES_DIR"/.*.tar.tmp; }
trap cleanup EXIT
rm -rf "$ctx"
mkdir -p "$ctx/applets"
for bin in contiv-agent contiv-cni contiv-ksr contiv-capi-ipam; do
	[ -x "$STATIC_DIR/$bin" ] || fail "$STATIC_DIR/$bin is missing: make static STATIC_DIR=$STATIC_DIR builds it"
	ln -f "$STATIC_DIR/$bin" "$ctx/$bin" 2>/dev/null || cp -f "$STATIC_DIR/$bin" "$ctx/$bin"
done
[ -x "$BUSYBOX" ] || fail "$BUSYBOX is missing (apt-get install busybox-static)"
# ldd says "not a dynamic executable" (and fails) for a static binary.
if command -v ldd >/dev/null && ldd "$BUSYBOX" >/dev/null 2>&1; then
	fail "$BUSYBOX is dynamically linked; the image has no libc: apt-get install busybox-static (or BUSYBOX=<a static busybox>)"
fi
cp -f "$BUSYBOX" "$ctx/busybox"
for applet in $AGENT_APPLETS; do
	ln -s busybox "$ctx/applets/$applet"
done

labels=(--label "org.opencontainers.image.version=$VERSION" --label "org.opencontainers.image.revision=$COMMIT")

# under reports whether path $1 is $2 or below it.
under() {
	case "$1/" in "$2"/*) return 0 ;; esac
	return 1
}

if [ "$ENGINE" = buildah ]; then
	# Everything buildah keeps is under $IMAGES_DIR/storage: the store, its
	# temporary files, the network configuration it loads even with no RUN
	# (CNI, in a directory of the store: netavark's would be
	# /run/containers/networks); the machine's storage.conf,
	# registries.conf, containers.conf and policy.json are not read.
	store=$IMAGES_DIR/storage
	rm -rf "$store"
	mkdir -p "$store/tmp" "$store/cni" "$store/varlib"
	printf '[network]\nnetwork_backend = "cni"\nnetwork_config_dir = "%s"\n' "$store/cni" >"$store/containers.conf"
	export CONTAINERS_CONF=$store/containers.conf
	export CONTAINERS_STORAGE_CONF=$PWD/docker/buildah/storage.conf
	export CONTAINERS_REGISTRIES_CONF=$PWD/docker/buildah/registries.conf
	export TMPDIR=$store/tmp
	# buildah 1.28's commit writes a blob-info cache into
	# /var/lib/containers/cache whatever --root says. Where it can, each
	# buildah runs in a private mount namespace in which /var/lib/containers
	# is $store/varlib (bind) or, where it does not exist, /var/lib is an
	# empty tmpfs (unless the repository or IMAGES_DIR are under /var/lib).
	isolate=
	if [ -d /var/lib/containers ]; then
		under "$IMAGES_DIR" /var/lib/containers || isolate='mount --bind "$VARLIB" /var/lib/containers'
	elif ! under "$IMAGES_DIR" /var/lib && ! under "$PWD" /var/lib; then
		isolate='mount -t tmpfs -o size=16m,mode=0755 contiv-images /var/lib'
	fi
	if [ -n "$isolate" ] && ! VARLIB=$store/varlib unshare --mount --propagation private -- sh -c "$isolate" 2>/dev/null; then
		isolate=
	fi
	if [ -z "$isolate" ]; then
		echo "make images: no private mount namespace here (unshare --mount needs root): buildah may write /var/lib/containers/cache" >&2
	fi
	bah() {
		if [ -n "$isolate" ]; then
			VARLIB=$store/varlib unshare --mount --propagation private -- sh -c "$isolate"' && exec "$@"' sh \
				buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs "$@"
		else
			buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs "$@"
		fi
	}
fi

for entry in "${images[@]}"; do
	name=${entry%%=*}
	image=${entry#*=}
	out=$IMAGES_DIR/$name.tar
	tmp=$IMAGES_DIR/.$name.tar.tmp
	rm -f "$tmp"
	echo "== $ENGINE build -f docker/$name.Dockerfile -t $image $ctx"
	case "$ENGINE" in
	buildah)
		bah build --pull=never --layers=false "${labels[@]}" -f "docker/$name.Dockerfile" -t "$image" "$ctx"
		bah push -q --signature-policy "$PWD/docker/buildah/policy.json" "$image" "oci-archive:$tmp:$image"
		;;
	docker)
		docker build "${labels[@]}" -f "docker/$name.Dockerfile" -t "$image" "$ctx"
		docker save -o "$tmp" "$image"
		;;
	podman)
		podman build --pull=never "${labels[@]}" -f "docker/$name.Dockerfile" -t "$image" "$ctx"
		podman save --format oci-archive -o "$tmp" "$image"
		;;
	esac
	# A rename: an importer never reads a half-written archive.
	mv -f "$tmp" "$out"
done

echo "== images (import on a node: ctr -n k8s.io images import <archive>):"
for entry in "${images[@]}"; do
	name=${entry%%=*}
	out=$IMAGES_DIR/$name.tar
	size=$(du -k "$out" | cut -f1)
	printf '%s\t%s MiB\t%s\n' "$out" "$((size / 1024))" "${entry#*=}"
done
