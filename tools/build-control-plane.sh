#!/usr/bin/env bash
# Builds the real local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kwok, helm) and the real test node's kubelet from the Go modules under tools/ into a cache
# directory outside the repository, keyed by version.
# A binary already present in the cache is reused; nothing is ever committed or downloaded prebuilt.
#
# Usage: tools/build-control-plane.sh            (prints the bin directory on the last line)
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/go-build.sh"

# Pinned versions: change them together with the go.mod files beside this script.
KUBE_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
HELM_VERSION=v3.22.0
use_go 1.26

kube_ldflags() {
  local v="${KUBE_VERSION#v}" pkg
  local major="${v%%.*}" minor
  minor="${v#*.}"; minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean -X %s.buildDate=%s ' \
      "$pkg" "$KUBE_VERSION" "$pkg" "$major" "$pkg" "$minor" "$pkg" "$pkg" "2026-01-01T00:00:00Z"
  done
}

kdir="$cache/kubernetes-$KUBE_VERSION"
build kube k8s.io/kubernetes/cmd/kube-apiserver "$kdir/kube-apiserver" "$(kube_ldflags)"
build kube k8s.io/kubernetes/cmd/kube-controller-manager "$kdir/kube-controller-manager" "$(kube_ldflags)"
build kube k8s.io/kubernetes/cmd/kube-scheduler "$kdir/kube-scheduler" "$(kube_ldflags)"
# The real test node's kubelet comes from the same module as the apiserver (tools/build-node.sh
# builds the rest of that node).
build kube k8s.io/kubernetes/cmd/kubelet "$kdir/kubelet" "$(kube_ldflags)"
build etcd go.etcd.io/etcd/server/v3 "$cache/etcd-$ETCD_VERSION/etcd" ""
build kwok sigs.k8s.io/kwok/cmd/kwok "$cache/kwok-$KWOK_VERSION/kwok" \
  "-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
build helm helm.sh/helm/v3/cmd/helm "$cache/helm-$HELM_VERSION/helm" \
  "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"

# One stable directory of symlinks so callers need a single path.
bin="$cache/bin"
mkdir -p "$bin"
ln -sfn "$kdir/kube-apiserver" "$bin/kube-apiserver"
ln -sfn "$kdir/kube-controller-manager" "$bin/kube-controller-manager"
ln -sfn "$kdir/kube-scheduler" "$bin/kube-scheduler"
ln -sfn "$kdir/kubelet" "$bin/kubelet"
ln -sfn "$cache/etcd-$ETCD_VERSION/etcd" "$bin/etcd"
ln -sfn "$cache/kwok-$KWOK_VERSION/kwok" "$bin/kwok"
ln -sfn "$cache/helm-$HELM_VERSION/helm" "$bin/helm"
echo "$bin"
