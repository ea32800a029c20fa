#!/usr/bin/env bash
# The whole test suite, as CI runs it: the commit message rule (tools/commitmsg.py), lint and type
# gates, layering contracts, shellcheck, generated-file drift, then all three pytest tiers (unit,
# workflow with fake activities on Temporal, integration on the real local control plane and the
# Temporal dev server or temporal-server on PostgreSQL, which the fixtures start themselves).
# Extra arguments go to pytest, e.g. tools/test.sh -m unit
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=.venv/bin

echo "== commit messages"; "$bin/python" tools/commitmsg.py
echo "== ruff"; "$bin/ruff" check .
echo "== mypy --strict"; "$bin/mypy"
echo "== import-linter"; "$bin/lint-imports"
echo "== shellcheck"; tools/shellcheck.sh
echo "== CRD drift"; "$bin/python" -m fleetwright.api.crdgen --check
echo "== pytest"; "$bin/pytest" "$@"
