#!/bin/bash
# Makes every "SOURCE TARGET" line of configMap key mounts a persistent (fstab) and live bind
# mount; mounts this package made earlier but no longer listed are unmounted and removed.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
wanted=""
while read -r src dst fields; do
  [ -n "$src" ] || continue
  [ "$fields" = 2 ] || fail "mounts: each line must be 'SOURCE TARGET', got '$src $dst ...'"
  case "$src" in /*) ;; *) fail "mounts: source '$src' must be absolute";; esac
  case "$dst" in /*) ;; *) fail "mounts: target '$dst' must be absolute";; esac
  [ -e "$src" ] || fail "mounts: source $src does not exist on the host"
  wanted="$wanted $dst"
done <<< "$(pairs)"
for old in $(tagged_targets); do
  case " $wanted " in *" $old "*) continue;; esac
  if mounted "$old"; then umount "$old"; fi
  grep -vF "$old none bind,nofail 0 0 $TAG" /etc/fstab > /etc/fstab.fleetwright || true
  cat /etc/fstab.fleetwright > /etc/fstab && rm -f /etc/fstab.fleetwright
  echo "bind-mount: removed $old"
done
while read -r src dst _; do
  [ -n "$src" ] || continue
  if [ -d "$src" ]; then mkdir -p "$dst"; elif [ ! -e "$dst" ]; then mkdir -p "$(dirname "$dst")"; touch "$dst"; fi
  line="$src $dst none bind,nofail 0 0 $TAG"
  grep -qxF "$line" /etc/fstab || echo "$line" >> /etc/fstab
  if ! mounted "$dst"; then mount --bind "$src" "$dst"; fi
  echo "bind-mount: $src -> $dst"
done <<< "$(pairs)"
