#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
left="$(tagged_targets)"
[ -z "$left" ] || fail "fstab still has mounts of ${PKG}: $left"
if [ -f "$CM/mounts" ]; then
  while read -r _src dst _; do
    if [ -n "$dst" ] && mounted "$dst"; then fail "$dst is still mounted"; fi
  done <<< "$(pairs)"
fi
