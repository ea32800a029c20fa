#!/bin/bash
# shellcheck disable=SC2034  # its variables are used by the steps that source it
# Shared helpers for the gpu-driver-setup steps (sourced, never run as a step).
# Like the catalog's setup packages it uses the host's own package manager (apt on Debian and
# Ubuntu, dnf on Amazon Linux) and the drop-in directories every distribution ships
# (/etc/profile.d, /etc/ld.so.conf.d), creating none of them.
set -euo pipefail
CM="${SKYHOOK_DIR:?SKYHOOK_DIR is not set}/configmaps"
# Drop-ins are named after the NodeProfile's package key (field 2 of SKYHOOK_RESOURCE_ID).
KEY="$(echo "${SKYHOOK_RESOURCE_ID:?SKYHOOK_RESOURCE_ID is not set}" | cut -d_ -f2)"
VERSION="$(tr -d '[:space:]' < "$CM/driver_version")"
DRIVER="gpu-driver-${VERSION}"
PROFILE_FILE="/etc/profile.d/${KEY}.sh"
LD_FILE="/etc/ld.so.conf.d/${KEY}.conf"
PREFIX=/usr/local/gpu
UNIT=gpu-persistenced

fail() { echo "gpu-driver-setup: $*" >&2; exit 1; }
log() { echo "gpu-driver-setup: $*"; }
# The host's package manager: "apt" or "dnf"; fails on hosts without one (e.g. COS).
manager() {
  if command -v apt >/dev/null; then echo apt
  elif command -v dnf >/dev/null; then echo dnf
  else fail "no apt or dnf on this host: use the host's own driver installer (e.g. COS's)"; fi
}
installed() {
  case "$(manager)" in
    apt) dpkg -s "$1" >/dev/null 2>&1 ;;
    dnf) rpm -q "$1" >/dev/null 2>&1 ;;
  esac
}
