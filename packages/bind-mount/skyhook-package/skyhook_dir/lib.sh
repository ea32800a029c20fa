#!/bin/bash
# shellcheck disable=SC2034  # its variables are used by the steps that source it
# Shared helpers for the bind-mount steps (sourced, never run as a step).
set -euo pipefail
CM="${SKYHOOK_DIR:?SKYHOOK_DIR is not set}/configmaps"
PKG="$(echo "${SKYHOOK_RESOURCE_ID:-local_bind-mount_0}" | cut -d_ -f2)"
TAG="# fleetwright:${PKG}"
fail() { echo "bind-mount: $*" >&2; exit 1; }
# "SOURCE TARGET" pairs from configMap key mounts (comments and blank lines skipped).
pairs() { sed -e 's/#.*$//' "$CM/mounts" | awk 'NF {print $1, $2, NF}'; }
mounted() { awk -v t="$1" '$2==t {f=1} END {exit !f}' /proc/mounts; }
tagged_targets() { grep -F "$TAG" /etc/fstab 2>/dev/null | awk '{print $2}' || true; }
