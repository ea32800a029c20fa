#!/usr/bin/env bash
# Builds the Kubeflow training operator (PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob) from the
# pinned Go module under tools/training-operator into the cache, keyed by version, with its CRDs
# copied from the same module (manifests/base/crds): `cluster up --workloads` and the integration
# tier's training_operator fixture run it against the local control plane, so training pods carry
# the operator's real owner references.
# A binary already present in the cache is reused; nothing is ever committed or downloaded prebuilt.
#
# Usage: tools/build-training-operator.sh            (prints the bin directory on the last line)
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/go-build.sh"

# Pinned version: change it together with tools/training-operator/go.mod.
TRAINING_OPERATOR_VERSION=v1.8.1
use_go 1.26

module=github.com/kubeflow/training-operator
dir="$cache/training-operator-$TRAINING_OPERATOR_VERSION"
build training-operator "$module/cmd/training-operator.v1" "$dir/training-operator" ""

if [[ ! -d "$dir/crds" ]]; then
  src="$(cd "$here/training-operator" && go list -m -f '{{.Dir}}' "$module")"
  mkdir -p "$dir/crds.tmp"
  cp "$src"/manifests/base/crds/kubeflow.org_*.yaml "$dir/crds.tmp/"
  chmod 0644 "$dir"/crds.tmp/*.yaml
  mv "$dir/crds.tmp" "$dir/crds"
fi

bin="$cache/bin"
mkdir -p "$bin" "$cache/crds"
ln -sfn "$dir/training-operator" "$bin/training-operator"
ln -sfn "$dir/crds" "$cache/crds/training-operator"
echo "$bin"
