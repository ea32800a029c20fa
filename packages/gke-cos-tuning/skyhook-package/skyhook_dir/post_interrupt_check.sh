#!/bin/bash
# After the service interrupt: live sysctl values, systemd loaded the drop-in properties, and every
# tuned unit is active again.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
"$STEP_ROOT/config_check.sh" || exit 1
set +e +o pipefail
bad=0
for unit in $(service_units); do
  while IFS= read -r entry; do
    case "$entry" in [A-Z]*=*) ;; *) continue;; esac
    prop="${entry%%=*}"; want="${entry#*=}"
    live="$(systemctl show -p "$prop" --value "${unit}.service")"
    [ "$live" = "$want" ] || { echo "gke-cos-tuning: $unit $prop is '$live', expected '$want'" >&2; bad=1; }
  done <<< "$(lines "$CM/service_${unit}.conf")"
  systemctl is-active --quiet "${unit}.service" || { echo "gke-cos-tuning: $unit is not active" >&2; bad=1; }
done
exit "$bad"
