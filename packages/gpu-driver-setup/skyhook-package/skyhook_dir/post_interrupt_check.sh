#!/bin/bash
# After the reboot: the daemon runs and a login shell finds the driver's tools.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"

systemctl status "$UNIT" || fail "$UNIT is not running after the reboot"
case ":$(bash -lc 'echo "$PATH"'):" in
  *":$PREFIX/bin:"*) ;;
  *) fail "a login shell's PATH lacks $PREFIX/bin" ;;
esac
