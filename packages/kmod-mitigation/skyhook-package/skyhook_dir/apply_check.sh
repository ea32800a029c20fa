#!/bin/bash
# Strict: the block list is in place AND no listed module is loaded (unless unload=reboot).
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
set +e +o pipefail
bad=0
for m in $(modules); do
  grep -qx "install $m /bin/false" "$CONF" 2>/dev/null || { echo "kmod-mitigation: $m is not blocked in $CONF" >&2; bad=1; }
  if loaded "$m" && [ "$UNLOAD" = live ]; then echo "kmod-mitigation: $m is still loaded: the host is vulnerable" >&2; bad=1; fi
done
exit "$bad"
