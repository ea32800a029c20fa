#!/bin/bash
# Fails while any drop-in of this package key remains (NodeWright's check always passed).
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
left="$(ls -d "$SYSCTL_FILE" "$LIMITS_FILE" "$GRUB_FILE" /etc/systemd/system/*.service.d/"${NAME}.conf" 2>/dev/null || true)"
[ -z "$left" ] || fail "drop-ins still present: $left"
