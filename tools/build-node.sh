#!/usr/bin/env bash
# Builds the rest of the real test node and the offline image builder from the Go modules under
# tools/ into the cache, keyed by version: containerd with its runc shim and ctr, the CNI plugins the
# node's pod network uses (bridge, host-local, loopback), umoci (OCI image layouts), and kubernetes'
# pause binary built from its C source (build/pause/linux/pause.c of the k8s.io/kubernetes module
# the kubelet comes from) as the pod sandbox. runc is Debian's (tools/setup.sh installs it).
#
# Usage: tools/build-node.sh            (prints the bin directory on the last line)
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/go-build.sh"

# Pinned versions: change them together with the go.mod files beside this script. containerd 2.x:
# kubelet 1.36 on a cgroup v1 host needs it (see docs/real-node.md).
CONTAINERD_VERSION=v2.4.2
CNI_PLUGINS_VERSION=v1.10.0
UMOCI_VERSION=v0.6.0
PAUSE_TAG=3.10.2
use_go 1.26
cdir="$cache/containerd-$CONTAINERD_VERSION"
for cmd in containerd containerd-shim-runc-v2 ctr; do
  build containerd "github.com/containerd/containerd/v2/cmd/$cmd" "$cdir/$cmd" \
    "-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
done
cni="$cache/cni-plugins-$CNI_PLUGINS_VERSION"
for plugin in main/bridge ipam/host-local main/loopback; do
  build cni "github.com/containernetworking/plugins/plugins/$plugin" "$cni/${plugin#*/}" \
    "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION"
done
build umoci github.com/opencontainers/umoci/cmd/umoci "$cache/umoci-$UMOCI_VERSION/umoci" ""
pause="$cache/pause-$PAUSE_TAG/pause"
if [[ ! -x "$pause" ]]; then
  start=$SECONDS
  src="$(cd "$here/kube" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c"
  mkdir -p "$(dirname "$pause")"
  gcc -Os -Wall -Werror -static "-DVERSION=v$PAUSE_TAG-fleetwright" -o "$pause.tmp" "$src"
  mv "$pause.tmp" "$pause"
  echo "built pause in $((SECONDS - start))s" >&2
fi

bin="$cache/bin"
mkdir -p "$bin"
for name in containerd containerd-shim-runc-v2 ctr; do ln -sfn "$cdir/$name" "$bin/$name"; done
ln -sfn "$cni" "$bin/cni"
ln -sfn "$cache/umoci-$UMOCI_VERSION/umoci" "$bin/umoci"
ln -sfn "$pause" "$bin/pause"
echo "$bin"
