#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
[ -x /opt/amazon/efa/bin/fi_info ] || fail "EFA software is not installed (/opt/amazon/efa/bin/fi_info missing)"
