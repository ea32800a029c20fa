#!/bin/bash
# After the interrupt, verifies LIVE values: sysctl read back from the kernel, kernel arguments in
# /proc/cmdline, and the systemd properties of units with a service_<unit>.conf drop-in.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
# Checks report every problem (no -e), and "grep -q" may close a pipe early (no pipefail).
set +e +o pipefail
bad=0
miss() { echo "tuning: $*" >&2; bad=1; }
if [ -f "$CM/sysctl.conf" ]; then
  while IFS= read -r entry; do
    [ -n "$entry" ] || continue
    want="$(norm_kv "$entry")"; key="${want%%=*}"
    live="$(norm_kv "$key=$(sysctl -n "$key" 2>/dev/null)")"
    [ "$live" = "$want" ] || miss "sysctl $key is '${live#*=}', expected '${want#*=}'"
  done <<< "$(lines "$CM/sysctl.conf")"
fi
if [ -f "$CM/grub.conf" ]; then
  for arg in $(grub_args); do
    tr ' ' '\n' < /proc/cmdline | grep -qxF "$arg" || miss "kernel argument '$arg' is not in /proc/cmdline (reboot pending?)"
  done
fi
for unit in $(service_units); do
  while IFS= read -r entry; do
    [ -n "$entry" ] || continue
    case "$entry" in Limit*=*) ;; *) continue;; esac
    prop="${entry%%=*}"; want="${entry#*=}"
    live="$(systemctl show -p "$prop" --value "${unit}.service")"
    [ "$live" = "$want" ] || miss "$unit $prop is '$live', expected '$want' (daemon-reload/restart pending?)"
  done <<< "$(lines "$CM/service_${unit}.conf")"
done
exit "$bad"
