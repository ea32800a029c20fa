#!/bin/bash
# On COS nothing waits for a reboot, so config-check already checks live sysctl values.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
set +e +o pipefail
bad=0
if [ -f "$CM/sysctl.conf" ]; then
  cmp -s "$CM/sysctl.conf" "$SYSCTL_FILE" || { echo "gke-cos-tuning: $SYSCTL_FILE is missing or stale" >&2; bad=1; }
  while IFS= read -r entry; do
    [ -n "$entry" ] || continue
    want="$(norm_kv "$entry")"; key="${want%%=*}"
    live="$(norm_kv "$key=$(sysctl -n "$key" 2>/dev/null)")"
    [ "$live" = "$want" ] || { echo "gke-cos-tuning: sysctl $key is '${live#*=}', expected '${want#*=}'" >&2; bad=1; }
  done <<< "$(lines "$CM/sysctl.conf")"
fi
for unit in $(service_units); do
  cmp -s "$CM/service_${unit}.conf" "$(dropin_for "$unit")" || { echo "gke-cos-tuning: drop-in for $unit is missing or differs" >&2; bad=1; }
done
exit "$bad"
