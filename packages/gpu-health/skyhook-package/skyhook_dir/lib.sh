#!/bin/bash
# shellcheck disable=SC2034  # its variables are used by the steps that source it
# Shared helpers for the gpu-health steps (sourced, never run as a step): the configuration, read
# from the configMap files (the image bakes in the defaults) and checked, every bad value named.
set -euo pipefail
CM="${SKYHOOK_DIR:?SKYHOOK_DIR is not set}/configmaps"

fail() { echo "gpu-health: $*" >&2; exit 1; }
# The configMap file KEY without surrounding blanks; DEFAULT when it is absent.
setting() {
  if [[ -f "$CM/$1" ]]; then tr -s '[:space:]' ' ' < "$CM/$1" | sed 's/^ //; s/ $//'; else echo "$2"; fi
}

DCGM_DIAG_LEVEL="$(setting dcgm_diag_level 1)"
EXPECTED_GPUS="$(setting expected_gpus "")"
IGNORED_XIDS="$(setting ignored_xids "")"

# Every bad value at once, each naming its configMap key; nothing runs before they are right.
check_settings() {
  local errors=()
  [[ "$DCGM_DIAG_LEVEL" =~ ^[0-4]$ ]] ||
    errors+=("configMap dcgm_diag_level: '$DCGM_DIAG_LEVEL' is not a DCGM run level 1-4 (0: no dcgmi diag)")
  [[ -z "$EXPECTED_GPUS" || "$EXPECTED_GPUS" =~ ^[1-9][0-9]*$ ]] ||
    errors+=("configMap expected_gpus: '$EXPECTED_GPUS' is not a GPU count (empty: any number from 1)")
  [[ -z "$IGNORED_XIDS" || "$IGNORED_XIDS" =~ ^[0-9]+( [0-9]+)*$ ]] ||
    errors+=("configMap ignored_xids: '$IGNORED_XIDS' is not a list of XID numbers separated by blanks")
  if ((${#errors[@]})); then
    printf 'gpu-health: %s\n' "${errors[@]}" >&2
    exit 1
  fi
}
