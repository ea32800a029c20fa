#!/bin/bash
# Writes the sysctl, limits and (on Debian/Ubuntu) GRUB drop-ins and applies the sysctl settings
# live. A kernel value already above the preset is kept (the preset only ever raises limits);
# the configMap's own settings are applied as given.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"

: > "$SYSCTL_FILE"
while IFS='=' read -r key value; do
  current="$(sysctl -n "$key")" || fail "$key: not a kernel setting on this host"
  preset_only=; overrides | grep -q "^$key=" || preset_only=1
  if [[ -n $preset_only && $value =~ ^[0-9]+$ && $current =~ ^[0-9]+$ ]] && ((current > value)); then
    log "$key stays at $current (above $value)"
    value=$current
  fi
  echo "$key = $value" >> "$SYSCTL_FILE"
done <<< "$(wanted)"
sysctl -q -p "$SYSCTL_FILE" || fail "the kernel rejected a setting of $SYSCTL_FILE"
printf '* soft memlock unlimited\n* hard memlock unlimited\n* soft nofile 1048576\n* hard nofile 1048576\n' \
  > "$LIMITS_FILE"
if debian_grub; then
  echo "GRUB_CMDLINE_LINUX_DEFAULT=\"\${GRUB_CMDLINE_LINUX_DEFAULT} $KERNEL_ARGS\"" > "$GRUB_FILE"
  update-grub
else
  log "no /etc/default/grub.d and update-grub here: kernel arguments left unchanged"
fi
log "drop-ins written for $KEY; reboot to apply the limits and kernel arguments"
