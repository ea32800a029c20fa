#!/usr/bin/env bash
# Runs shellcheck over every shell script of the repository: tracked files named *.sh or starting with
# a #! line that names sh or bash. The fake host tools of fleetwright/packagetest/fakes source
# their shared helper by its path inside a test root, hence that directory on the source path;
# package steps source their lib.sh from the script's own directory (SCRIPTDIR).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts=()
while IFS= read -r -d '' file; do
  [[ -f $file ]] || continue
  if [[ $file == *.sh ]] || head -n 1 "$file" | grep -qE '^#!.*[/ ](ba)?sh([[:space:]]|$)'; then
    scripts+=("$file")
  fi
done < <(git ls-files -z)
shellcheck --external-sources --source-path=SCRIPTDIR --source-path=fleetwright/packagetest/fakes \
  "$@" "${scripts[@]}"
echo "shellcheck: ${#scripts[@]} scripts clean"
