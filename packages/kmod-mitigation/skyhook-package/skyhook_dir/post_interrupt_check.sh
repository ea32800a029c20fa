#!/bin/bash
# After any interrupt the listed modules must be blocked and not loaded, whatever unload says.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
set +e +o pipefail
bad=0
for m in $(modules); do
  grep -qx "install $m /bin/false" "$CONF" 2>/dev/null || { echo "kmod-mitigation: $m is not blocked" >&2; bad=1; }
  if loaded "$m"; then echo "kmod-mitigation: $m is still loaded: the host is vulnerable" >&2; bad=1; fi
done
exit "$bad"
