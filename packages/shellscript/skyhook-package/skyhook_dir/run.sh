#!/bin/bash
# Runs the stage script the user supplied as configMap key "<word>.sh" (for example apply.sh),
# sourced into this shell so that $1 is the stage word and its exit status is the step's.
# Unlike NodeWright's shellscript, a missing key FAILS the stage: a forgotten apply_check.sh must
# not pass silently. Add the key with "exit 0" to make a stage a deliberate no-op.
set -u
word="${1:?usage: run.sh <apply|apply_check|config|config_check|post_interrupt|...>}"
script="${SKYHOOK_DIR:?SKYHOOK_DIR is not set}/configmaps/${word}.sh"
if [ ! -f "$script" ]; then
  echo "shellscript: configMap key '${word}.sh' is missing, so stage '${word}' has nothing to run." >&2
  echo "shellscript: add the key to the package's configMap (use 'exit 0' for a deliberate no-op)." >&2
  exit 1
fi
echo "shellscript: running configMap key ${word}.sh"
set -- "$word"
# shellcheck source=/dev/null
. "$script"
