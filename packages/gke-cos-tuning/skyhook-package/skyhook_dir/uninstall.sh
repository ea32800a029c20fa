#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
rm -f "$SYSCTL_FILE"
reload=0
for dropin in /etc/systemd/system/*.service.d/"${NAME}.conf"; do
  if [ -f "$dropin" ]; then rm -f "$dropin"; reload=1; fi
done
if [ "$reload" = 1 ]; then systemctl daemon-reload; fi
