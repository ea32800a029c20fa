#!/bin/bash
# Unmounts and forgets every bind mount this package key made (found by its fstab tag).
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
for dst in $(tagged_targets); do
  if mounted "$dst"; then umount "$dst"; fi
done
grep -vF "$TAG" /etc/fstab > /etc/fstab.fleetwright || true
cat /etc/fstab.fleetwright > /etc/fstab && rm -f /etc/fstab.fleetwright
