#!/bin/bash
# The work step of apply, config and upgrade: checks the configuration (every bad value named)
# and says what the check step will run. It changes nothing on the host.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
check_settings
echo "gpu-health: dcgmi diag level ${DCGM_DIAG_LEVEL} (0: none), expected GPUs ${EXPECTED_GPUS:-any from 1}," \
  "ignored XIDs: ${IGNORED_XIDS:-none}"
