#!/bin/bash
# Applies configMap keys sysctl.conf, ulimit.conf, service_<unit>.conf and grub.conf as drop-in
# files named after the package key; drop-ins for keys no longer present are removed.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"

if [ -f "$CM/sysctl.conf" ]; then
  sysctl -p "$CM/sysctl.conf" || fail "sysctl.conf: the kernel rejected a setting (see above)"
  mkdir -p /etc/sysctl.d && cp "$CM/sysctl.conf" "$SYSCTL_FILE"
  log "sysctl settings applied and persisted in $SYSCTL_FILE"
else
  rm -f "$SYSCTL_FILE"
fi

if [ -f "$CM/ulimit.conf" ]; then
  mkdir -p /etc/security/limits.d
  : > "$LIMITS_FILE.tmp"
  while IFS= read -r entry; do
    [ -n "$entry" ] || continue
    key="$(echo "${entry%%=*}" | tr -d ' ')"; value="$(echo "${entry#*=}" | tr -d ' ')"
    case " $ULIMIT_NAMES " in *" $key "*) ;; *) rm -f "$LIMITS_FILE.tmp"; fail "ulimit.conf: unknown limit '$key' (known: $ULIMIT_NAMES)";; esac
    echo "* hard $key $value" >> "$LIMITS_FILE.tmp"
  done <<< "$(lines "$CM/ulimit.conf")"
  mv "$LIMITS_FILE.tmp" "$LIMITS_FILE"
  for pam in /etc/pam.d/common-session /etc/pam.d/common-session-noninteractive; do
    if [ -f "$pam" ] && ! grep -q pam_limits "$pam"; then echo "session required pam_limits.so" >> "$pam"; fi
  done
  log "limits written to $LIMITS_FILE"
else
  rm -f "$LIMITS_FILE"
fi

reload=0
for dropin in /etc/systemd/system/*.service.d/"${NAME}.conf"; do
  [ -f "$dropin" ] || continue
  unit="$(basename "$(dirname "$dropin")" .service.d)"
  if [ ! -f "$CM/service_${unit}.conf" ]; then rm -f "$dropin"; reload=1; fi
done
for unit in $(service_units); do
  target="$(dropin_for "$unit")"
  mkdir -p "$(dirname "$target")"
  if ! cmp -s "$CM/service_${unit}.conf" "$target"; then cp "$CM/service_${unit}.conf" "$target"; reload=1; fi
done
if [ "$reload" = 1 ]; then systemctl daemon-reload; log "systemd drop-ins updated"; fi

if [ -f "$CM/grub.conf" ]; then
  { command -v update-grub >/dev/null && [ -f /etc/default/grub ]; } \
    || fail "grub.conf: GRUB kernel arguments need a Debian/Ubuntu host with /etc/default/grub and update-grub"
  mkdir -p /etc/default/grub.d
  # Appends to the distribution's default instead of replacing it (NodeWright replaced it).
  echo "GRUB_CMDLINE_LINUX_DEFAULT=\"\${GRUB_CMDLINE_LINUX_DEFAULT} $(grub_args)\"" > "$GRUB_FILE"
  update-grub
  log "kernel arguments '$(grub_args)' take effect after a reboot"
elif [ -f "$GRUB_FILE" ]; then
  rm -f "$GRUB_FILE"; update-grub
fi
