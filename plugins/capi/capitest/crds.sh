#!/bin/sh
# Writes the Cluster API CRDs of the two older shapes of a management
# cluster that the tests install beside plugins/capi/api/crd/capi (v1beta2
# only, `make generate-crds`), from the pinned sigs.k8s.io/cluster-api/api:
#
#   plugins/capi/api/crd/capi/conversion/  IPAddressClaim and IPAddress
#       serving v1beta1 and v1beta2, storage v1beta2, converted by a webhook
#       (the stanza Cluster API's manifests carry: its controller manager's
#       service; the tests point it at their own loopback server)
#   plugins/capi/api/crd/capi/v1beta1/     IPAddressClaim, IPAddress and
#       Cluster serving v1beta1 only (a Cluster API before v1.11), without
#       the deprecation mark the pinned types carry
#
# Usage (from the repository root): plugins/capi/capitest/crds.sh [controller-gen]
set -eu
gen=${1:-bin/controller-gen}
out=plugins/capi/api/crd/capi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$gen" crd paths=sigs.k8s.io/cluster-api/api/ipam/v1beta1 output:crd:artifacts:config="$tmp/v1beta1"
"$gen" crd 'paths=sigs.k8s.io/cluster-api/api/ipam/v1beta1;sigs.k8s.io/cluster-api/api/ipam/v1beta2' output:crd:artifacts:config="$tmp/both"
"$gen" crd paths=sigs.k8s.io/cluster-api/api/core/v1beta1 output:crd:artifacts:config="$tmp/core"
mkdir -p "$out/v1beta1" "$out/conversion"
for f in ipam.cluster.x-k8s.io_ipaddressclaims.yaml ipam.cluster.x-k8s.io_ipaddresses.yaml; do
  grep -v '^    deprecated: true$' "$tmp/v1beta1/$f" >"$out/v1beta1/$f"
  awk '
    /^  annotations:$/ { print; print "    cert-manager.io/inject-ca-from: capi-system/capi-serving-cert"; next }
    /^spec:$/ { print; print "  conversion:"; print "    strategy: Webhook"; print "    webhook:";
      print "      clientConfig:"; print "        service:"; print "          name: capi-webhook-service";
      print "          namespace: capi-system"; print "          path: /convert";
      print "      conversionReviewVersions:"; print "      - v1"; print "      - v1beta1"; next }
    { print }' "$tmp/both/$f" >"$out/conversion/$f"
done
grep -v '^    deprecated: true$' "$tmp/core/cluster.x-k8s.io_clusters.yaml" >"$out/v1beta1/cluster.x-k8s.io_clusters.yaml"
