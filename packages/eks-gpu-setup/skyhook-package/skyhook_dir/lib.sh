#!/bin/bash
# shellcheck disable=SC2034  # its variables are used by the steps that source it
# Shared helpers for the EKS GPU node steps (sourced, never run as a step). Amazon Linux 2023.
set -euo pipefail
CM="${SKYHOOK_DIR:?SKYHOOK_DIR is not set}/configmaps"
PKG="$(echo "${SKYHOOK_RESOURCE_ID:-local_eks-gpu-setup_0}" | cut -d_ -f2)"
fail() { echo "eks-gpu-setup: $*" >&2; exit 1; }
key() { [ -f "$CM/$1" ] && tr -d ' \n' < "$CM/$1" || echo "${2:-}"; }
KERNEL="$(key kernel_version)"
EFA_URL="$(key efa_installer_url)"
EFA_SHA256="$(key efa_installer_sha256)"
EFA_ARGS="$(cat "$CM/efa_installer_args" 2>/dev/null || echo "-y")"
# Amazon Time Sync Service, reachable from every EC2 instance at a link-local address.
CHRONY_SERVERS="$(cat "$CM/chrony_servers" 2>/dev/null || echo 169.254.169.123)"
CHRONY_FILE="/etc/chrony.d/fleetwright-${PKG}.sources"
require_al2023() {
  grep -q '^ID="\{0,1\}amzn' /etc/os-release 2>/dev/null || fail "this package is for Amazon Linux (EKS AMIs)"
  command -v dnf >/dev/null || fail "dnf is required (Amazon Linux 2023)"
}
[ -n "$KERNEL" ] || fail "configMap key kernel_version is empty"
# Download $1 to $2 with whatever the host has (curl on AL2023); file:// URLs are copied.
fetch() {
  case "$1" in
    file://*) cp "${1#file://}" "$2";;
    *) if command -v curl >/dev/null; then curl -fsSL --retry 3 -o "$2" "$1"
       else wget -q -O "$2" "$1"; fi;;
  esac
}
