#!/bin/bash
# Removes the drop-ins; the live values stay until the next reboot (pair with a reboot interrupt).
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"

rm -f "$SYSCTL_FILE" "$LIMITS_FILE"
if [ -f "$GRUB_FILE" ]; then
  rm -f "$GRUB_FILE"
  update-grub
fi
