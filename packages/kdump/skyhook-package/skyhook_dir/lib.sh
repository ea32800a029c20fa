#!/bin/bash
# shellcheck disable=SC2034  # its variables are used by the steps that source it
# Shared helpers for the kdump steps (sourced, never run as a step).
set -euo pipefail
CM="${SKYHOOK_DIR:?SKYHOOK_DIR is not set}/configmaps"
PKG="$(echo "${SKYHOOK_RESOURCE_ID:-local_kdump_0}" | cut -d_ -f2)"
GRUB_FILE="/etc/default/grub.d/999-${PKG}-kdump.cfg"
DEFAULTS=/etc/default/kdump-tools
# The crash kernel reservation scales with RAM; GPU nodes have a lot of it.
CRASHKERNEL="$(cat "$CM/crashkernel" 2>/dev/null || echo '1G-4G:192M,4G-64G:256M,64G-:512M')"
COREDIR="$(cat "$CM/coredir" 2>/dev/null || echo /var/crash)"
CRASHKERNEL="$(echo "$CRASHKERNEL" | tr -d ' \n')"
COREDIR="$(echo "$COREDIR" | tr -d ' \n')"
fail() { echo "kdump: $*" >&2; exit 1; }
debian_only() {
  { command -v update-grub >/dev/null && [ -f /etc/default/grub ]; } \
    || fail "this package supports Debian/Ubuntu hosts (kdump-tools, update-grub); not found here"
}
