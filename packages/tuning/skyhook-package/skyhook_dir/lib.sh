#!/bin/bash
# shellcheck disable=SC2034  # its variables are used by the steps that source it
# Shared helpers for the tuning steps (sourced, never run as a step).
set -euo pipefail
CM="${SKYHOOK_DIR:?SKYHOOK_DIR is not set}/configmaps"
# Drop-in files are named after the CR's package key (field 2 of SKYHOOK_RESOURCE_ID), so two
# differently-keyed tuning packages can coexist on one node.
PKG="$(echo "${SKYHOOK_RESOURCE_ID:-local_tuning_0}" | cut -d_ -f2)"
NAME="999-${PKG}-tuning"
SYSCTL_FILE="/etc/sysctl.d/${NAME}.conf"
LIMITS_FILE="/etc/security/limits.d/${NAME}.conf"
GRUB_FILE="/etc/default/grub.d/${NAME}.cfg"
ULIMIT_NAMES="memlock nofile fsize stack nproc"

fail() { echo "tuning: $*" >&2; exit 1; }
log() { echo "tuning: $*"; }
# Meaningful lines of a configMap file: no comments, no blank lines, whitespace trimmed.
lines() { sed -e 's/[[:space:]]*#.*$//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' "$1" | grep -v '^$' || true; }
# "key = value" -> "key=value" with the value's inner whitespace squeezed (kernel prints tabs).
norm_kv() { echo "$1" | sed -e 's/[[:space:]]*=[[:space:]]*/=/' -e 's/[[:space:]][[:space:]]*/ /g'; }
service_units() {
  for f in "$CM"/service_*.conf; do
    if [ -f "$f" ]; then b="$(basename "$f" .conf)"; echo "${b#service_}"; fi
  done
}
dropin_for() { echo "/etc/systemd/system/$1.service.d/${NAME}.conf"; }
grub_args() { lines "$CM/grub.conf" | tr '\n' ' ' | sed 's/ *$//'; }
