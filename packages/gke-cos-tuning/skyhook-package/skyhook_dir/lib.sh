#!/bin/bash
# shellcheck disable=SC2034  # its variables are used by the steps that source it
# Shared helpers for the COS tuning steps (sourced, never run as a step).
# Container-Optimized OS: the root filesystem is read-only (dm-verity), /etc is a writable tmpfs
# that is rebuilt at boot, and there is no GRUB to edit. So everything lives under /etc and is
# re-applied by config (run it again after a reboot, e.g. with NodeWright's REAPPLY_ON_REBOOT).
set -euo pipefail
CM="${SKYHOOK_DIR:?SKYHOOK_DIR is not set}/configmaps"
PKG="$(echo "${SKYHOOK_RESOURCE_ID:-local_gke-cos-tuning_0}" | cut -d_ -f2)"
NAME="99-${PKG}"
SYSCTL_FILE="/etc/sysctl.d/${NAME}.conf"
fail() { echo "gke-cos-tuning: $*" >&2; exit 1; }
lines() { sed -e 's/[[:space:]]*#.*$//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' "$1" | grep -v '^$' || true; }
norm_kv() { echo "$1" | sed -e 's/[[:space:]]*=[[:space:]]*/=/' -e 's/[[:space:]][[:space:]]*/ /g'; }
service_units() {
  for f in "$CM"/service_*.conf; do
    if [ -f "$f" ]; then b="$(basename "$f" .conf)"; echo "${b#service_}"; fi
  done
}
dropin_for() { echo "/etc/systemd/system/$1.service.d/${NAME}.conf"; }
require_cos() {
  grep -q '^ID=cos$' /etc/os-release 2>/dev/null \
    || fail "this package is for Container-Optimized OS (ID=cos in /etc/os-release); use the tuning package elsewhere"
}
