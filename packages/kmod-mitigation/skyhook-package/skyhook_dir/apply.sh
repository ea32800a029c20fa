#!/bin/bash
# Blocks the modules (blacklist stops autoloading; "install <m> /bin/false" stops explicit loads)
# and unloads any that are loaded now.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
mods="$(modules)"
[ -n "$mods" ] || fail "configMap key modules lists no module"
mkdir -p /etc/modprobe.d
{
  echo "# Written by fleetwright package ${PKG}: kernel-module CVE mitigation."
  for m in $mods; do echo "blacklist $m"; echo "install $m /bin/false"; done
} > "$CONF"
for m in $mods; do
  loaded "$m" || continue
  if modprobe -r "$m"; then echo "kmod-mitigation: unloaded $m"
  elif [ "$UNLOAD" = reboot ]; then echo "kmod-mitigation: $m is in use; it goes with the reboot interrupt"
  else fail "$m is in use and cannot be unloaded live; stop its users, or set unload=reboot with a reboot interrupt"
  fi
done
