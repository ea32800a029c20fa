#!/bin/bash
# Enables kdump and reserves crash kernel memory; the reservation takes effect after a reboot.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
debian_only
case "$COREDIR" in /*) ;; *) fail "configMap key coredir must be an absolute path, got '$COREDIR'";; esac
mkdir -p "$COREDIR"
touch "$DEFAULTS"
for kv in "USE_KDUMP=1" "KDUMP_COREDIR=$COREDIR"; do
  key="${kv%%=*}"
  if grep -q "^${key}=" "$DEFAULTS"; then sed -i "s|^${key}=.*|${kv}|" "$DEFAULTS"; else echo "$kv" >> "$DEFAULTS"; fi
done
mkdir -p /etc/default/grub.d
echo "GRUB_CMDLINE_LINUX_DEFAULT=\"\${GRUB_CMDLINE_LINUX_DEFAULT} crashkernel=${CRASHKERNEL}\"" > "$GRUB_FILE"
update-grub
echo "kdump: crashkernel=${CRASHKERNEL} configured; reboot for it to take effect"
