#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"

for f in "$SYSCTL_FILE" "$LIMITS_FILE" "$GRUB_FILE"; do
  [ ! -e "$f" ] || fail "$f is still present"
done
