#!/bin/bash
# Disables kdump and drops the reservation (freed after the next reboot). kdump-tools stays
# installed: removing packages from a host is left to its image.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
if [ -f "$DEFAULTS" ]; then sed -i 's|^USE_KDUMP=.*|USE_KDUMP=0|' "$DEFAULTS"; fi
if [ -f "$GRUB_FILE" ]; then rm -f "$GRUB_FILE"; update-grub; fi
