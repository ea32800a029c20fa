#!/bin/bash
# After the reboot: the kernel runs with the drop-in's values and, on Debian/Ubuntu, with the
# kernel arguments.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"

while IFS='=' read -r key value; do
  key="${key% }"; value="${value# }"
  live="$(sysctl -n "$key")"
  [ "$live" = "$value" ] || fail "$key is '$live', expected '$value'"
done <<< "$(settings "$SYSCTL_FILE")"
if debian_grub; then
  for arg in $KERNEL_ARGS; do
    grep -qw -- "$arg" /proc/cmdline || fail "$arg is not on the kernel command line"
  done
fi
log "live kernel settings match"
