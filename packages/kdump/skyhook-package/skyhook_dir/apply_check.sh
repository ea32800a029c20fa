#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
command -v kdump-config >/dev/null || fail "kdump-config is not installed"
