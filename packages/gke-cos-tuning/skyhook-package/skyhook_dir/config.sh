#!/bin/bash
# sysctl.conf: applied live with sysctl -w and kept in /etc/sysctl.d; service_<unit>.conf: systemd
# drop-ins (pair with a service interrupt naming the units). grub.conf is refused: COS has no GRUB.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
require_cos
[ ! -f "$CM/grub.conf" ] || fail "grub.conf: kernel arguments cannot be changed on COS (read-only boot); use GKE node system configuration"
[ ! -f "$CM/ulimit.conf" ] || fail "ulimit.conf: not supported on COS; set Limit* in a service_<unit>.conf drop-in"
if [ -f "$CM/sysctl.conf" ]; then
  while IFS= read -r entry; do
    [ -n "$entry" ] || continue
    sysctl -w "$(norm_kv "$entry")" || fail "sysctl.conf: the kernel rejected '$entry'"
  done <<< "$(lines "$CM/sysctl.conf")"
  mkdir -p /etc/sysctl.d && cp "$CM/sysctl.conf" "$SYSCTL_FILE"
else
  rm -f "$SYSCTL_FILE"
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
if [ "$reload" = 1 ]; then systemctl daemon-reload; fi
echo "gke-cos-tuning: applied"
