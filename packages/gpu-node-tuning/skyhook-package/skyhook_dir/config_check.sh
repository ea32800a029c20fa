#!/bin/bash
# Every wanted setting is in the sysctl drop-in (possibly raised further), the limits drop-in
# exists, and on Debian/Ubuntu the GRUB drop-in carries the kernel arguments.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"

[ -f "$SYSCTL_FILE" ] || fail "$SYSCTL_FILE is missing"
while IFS='=' read -r key _; do
  grep -q "^$key = " "$SYSCTL_FILE" || fail "$key is not in $SYSCTL_FILE"
done <<< "$(wanted)"
grep -q '^\* hard memlock unlimited$' "$LIMITS_FILE" || fail "$LIMITS_FILE lacks the memlock limit"
if debian_grub; then
  grep -q "$KERNEL_ARGS" "$GRUB_FILE" || fail "$GRUB_FILE lacks the kernel arguments"
fi
