#!/usr/bin/env bash
# Builds cosign from the pinned Go module under tools/cosign into the cache, keyed by version: the
# integration tier signs package images with it (key-based signatures, no transparency log), the
# format the worker's signature check reads (fleetwright/signatures.py).
# A binary already present in the cache is reused; nothing is ever committed or downloaded prebuilt.
#
# Usage: tools/build-cosign.sh            (prints the bin directory on the last line)
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/go-build.sh"

# Pinned version: change it together with tools/cosign/go.mod.
COSIGN_VERSION=v2.6.5
use_go 1.26

build cosign github.com/sigstore/cosign/v2/cmd/cosign "$cache/cosign-$COSIGN_VERSION/cosign" \
  "-X sigs.k8s.io/release-utils/version.gitVersion=$COSIGN_VERSION -X sigs.k8s.io/release-utils/version.gitTreeState=clean"

bin="$cache/bin"
mkdir -p "$bin"
ln -sfn "$cache/cosign-$COSIGN_VERSION/cosign" "$bin/cosign"
echo "$bin"
