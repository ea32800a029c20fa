#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
left="$(ls -d "$SYSCTL_FILE" /etc/systemd/system/*.service.d/"${NAME}.conf" 2>/dev/null || true)"
[ -z "$left" ] || fail "still present: $left"
