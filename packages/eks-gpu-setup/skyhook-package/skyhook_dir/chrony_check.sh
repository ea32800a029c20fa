#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
for server in $CHRONY_SERVERS; do
  grep -q "^server $server " "$CHRONY_FILE" 2>/dev/null || fail "chrony server $server is not configured in $CHRONY_FILE"
done
systemctl is-active --quiet chronyd || fail "chronyd is not running"
