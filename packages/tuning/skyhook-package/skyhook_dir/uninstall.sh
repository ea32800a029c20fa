#!/bin/bash
# Removes every drop-in this package key wrote. Live values persist until the next reload/reboot:
# pair the uninstall with an interrupt if they must go at once.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
rm -f "$SYSCTL_FILE" "$LIMITS_FILE"
reload=0
for dropin in /etc/systemd/system/*.service.d/"${NAME}.conf"; do
  if [ -f "$dropin" ]; then rm -f "$dropin"; reload=1; fi
done
if [ "$reload" = 1 ]; then systemctl daemon-reload; fi
if [ -f "$GRUB_FILE" ]; then rm -f "$GRUB_FILE"; update-grub; fi
log "drop-ins for ${PKG} removed"
