#!/bin/bash
# shellcheck disable=SC2034  # its variables are used by the steps that source it
# Shared helpers for the kernel-module mitigation steps (sourced, never run as a step).
set -euo pipefail
CM="${SKYHOOK_DIR:?SKYHOOK_DIR is not set}/configmaps"
PKG="$(echo "${SKYHOOK_RESOURCE_ID:-local_kmod-mitigation_0}" | cut -d_ -f2)"
CONF="/etc/modprobe.d/fleetwright-${PKG}.conf"
fail() { echo "kmod-mitigation: $*" >&2; exit 1; }
# Module names from configMap key modules; the image bakes in "tipc" (CVE-2022-0435) as default,
# and the same default applies if an older operator's directory mount hides the baked file.
modules() {
  # shellcheck disable=SC2020  # both blanks become a newline
  if [ -f "$CM/modules" ]; then sed -e 's/#.*$//' "$CM/modules" | tr -s ' \t' '\n\n' | grep -v '^$' || true
  else echo tipc; fi
}
loaded() { grep -q "^$1 " /proc/modules; }
# "live" (default): the module must be unloaded now. "reboot": a busy module may stay loaded
# until the reboot interrupt; only post-interrupt-check then insists.
UNLOAD="$(tr -d ' \n' < "$CM/unload" 2>/dev/null || echo live)"
case "$UNLOAD" in live|reboot) ;; *) fail "configMap key unload must be 'live' or 'reboot', got '$UNLOAD'";; esac
