#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"

systemctl disable "$UNIT"
rm -f "$PROFILE_FILE" "$LD_FILE" "/etc/systemd/system/$UNIT.service"
ldconfig
"$(manager)" remove -y "$DRIVER"
