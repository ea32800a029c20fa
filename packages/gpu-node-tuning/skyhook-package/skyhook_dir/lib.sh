#!/bin/bash
# shellcheck disable=SC2034  # its variables are used by the steps that source it
# Shared helpers for the gpu-node-tuning steps (sourced, never run as a step).
# Like the catalog's tuning packages, it relies on the drop-in directories every distribution
# ships (/etc/sysctl.d, /etc/security/limits.d, /etc/default/grub.d) and creates none of them.
set -euo pipefail
CM="${SKYHOOK_DIR:?SKYHOOK_DIR is not set}/configmaps"
PRESET="${STEP_ROOT:?STEP_ROOT is not set}/preset-sysctl.conf"
# Drop-ins are named after the NodeProfile's package key (field 2 of SKYHOOK_RESOURCE_ID).
KEY="$(echo "${SKYHOOK_RESOURCE_ID:?SKYHOOK_RESOURCE_ID is not set}" | cut -d_ -f2)"
SYSCTL_FILE="/etc/sysctl.d/90-${KEY}.conf"
LIMITS_FILE="/etc/security/limits.d/90-${KEY}.conf"
GRUB_FILE="/etc/default/grub.d/90-${KEY}.cfg"
KERNEL_ARGS="iommu=pt pci=realloc=off"

fail() { echo "gpu-node-tuning: $*" >&2; exit 1; }
log() { echo "gpu-node-tuning: $*"; }
# "key = value" lines of a file, comments and blanks dropped, as "key=value".
settings() { sed -e 's/#.*$//' -e 's/[[:space:]]*=[[:space:]]*/=/' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' "$1" | grep -v '^$' || true; }
# The configMap's sysctl.conf: applied as given.
overrides() { if [ -f "$CM/sysctl.conf" ]; then settings "$CM/sysctl.conf"; fi; }
# The wanted settings, one line per key: the preset, overridden by the configMap's sysctl.conf.
wanted() {
  { settings "$PRESET"; overrides; } \
    | awk -F= '!($1 in v) {order[++n] = $1} {v[$1] = $2} END {for (i = 1; i <= n; i++) print order[i] "=" v[order[i]]}'
}
debian_grub() { [ -d /etc/default/grub.d ] && command -v update-grub >/dev/null; }
