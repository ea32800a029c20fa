# shellcheck shell=bash
# Sourced by the tools/build-*.sh scripts: the one way a pinned Go module under tools/ is built into
# the cache outside the repository (static, -trimpath, stripped), and the toolchain it needs.
# Env: FLEETWRIGHT_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/fleetwright)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck disable=SC2034 # read by the scripts that source this file
cache="${FLEETWRIGHT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetwright}"

export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:--buildvcs=false} -trimpath"

use_go() { # use_go <minimum version, e.g. 1.26.10>
  # The machine's Go when it is new enough, else the approved toolchain from the module proxy.
  local have
  have="$(GOTOOLCHAIN=local go env GOVERSION)"
  have="${have#go}"
  if [[ "$(printf '%s\n%s\n' "$1" "$have" | sort -V | head -n1)" == "$1" ]]; then
    export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
  else
    export GOTOOLCHAIN=go1.27.3
  fi
}

build() { # build <module dir> <package> <output> <ldflags>
  local dir="$1" pkg="$2" out="$3" ldflags="$4"
  if [[ -x "$out" ]]; then
    echo "cached: $out" >&2
    return
  fi
  mkdir -p "$(dirname "$out")"
  echo "building $pkg -> $out" >&2
  local start=$SECONDS
  (cd "$here/$dir" && go build -o "$out.tmp" -ldflags "-s -w $ldflags" "$pkg")
  mv "$out.tmp" "$out"
  echo "built $(basename "$out") in $((SECONDS - start))s" >&2
}
