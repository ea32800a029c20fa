#!/bin/bash
# Verifies every configured setting is in its drop-in file (literal match, comments ignored).
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
# Checks report every problem (no -e), and "grep -q" may close a pipe early (no pipefail).
set +e +o pipefail
bad=0
miss() { echo "tuning: $*" >&2; bad=1; }
if [ -f "$CM/sysctl.conf" ]; then
  while IFS= read -r entry; do
    [ -n "$entry" ] || continue
    want="$(norm_kv "$entry")"
    lines "$SYSCTL_FILE" 2>/dev/null | while IFS= read -r have; do norm_kv "$have"; done | grep -qxF "$want" \
      || miss "sysctl '$want' is not in $SYSCTL_FILE"
  done <<< "$(lines "$CM/sysctl.conf")"
fi
if [ -f "$CM/ulimit.conf" ]; then
  while IFS= read -r entry; do
    [ -n "$entry" ] || continue
    key="$(echo "${entry%%=*}" | tr -d ' ')"; value="$(echo "${entry#*=}" | tr -d ' ')"
    grep -qxF "* hard $key $value" "$LIMITS_FILE" 2>/dev/null || miss "limit '$key=$value' is not in $LIMITS_FILE"
  done <<< "$(lines "$CM/ulimit.conf")"
fi
for unit in $(service_units); do
  cmp -s "$CM/service_${unit}.conf" "$(dropin_for "$unit")" || miss "drop-in for $unit is missing or differs"
done
if [ -f "$CM/grub.conf" ]; then
  grep -qF "$(grub_args)\"" "$GRUB_FILE" 2>/dev/null || miss "kernel arguments are not in $GRUB_FILE"
fi
exit "$bad"
