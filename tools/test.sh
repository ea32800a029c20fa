#!/usr/bin/env bash
# The whole test suite, as CI runs it: the commit message rule (tools/commitmsg.py), lint and type
# gates, layering contracts, shellcheck and generated-file drift, beside all three pytest tiers
# (unit, workflow with fake activities on Temporal, integration on the real local control plane and
# the Temporal dev server or temporal-server on PostgreSQL, which the fixtures start themselves).
# Extra arguments go to pytest, e.g. tools/test.sh -m unit
#
# Each gate runs in the background into a log of its own, printed (each line prefixed with the
# gate's name) once pytest has ended, then a summary; the script fails if any gate or pytest
# fails. Without arguments each tier runs in a pytest process of its own: the integration tier
# mostly waits on servers, so the unit tier (tests/unit: pure, no servers), the workflow tier (its
# own Temporal servers, workers in-process) and, once the unit tier has ended, the node tier (its
# own control plane, real node and Temporal dev server) run beside it, and once the workflow tier
# has ended, the integration tests that start whole stacks of their own (demo, cluster up); no two
# share a server, a port or a directory.
# The workflow tier's process (and the own stacks') leaves the CRD fields it drove and the files it
# ran in a shared directory as it ends; the CRD field coverage test, last in the integration tier,
# waits for those records and judges them all.
# With arguments one pytest process runs exactly what they ask.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=.venv/bin
logs=$(mktemp -d)
names=()
pids=()
# Jobs still running when the script stops early (pytest interrupted) go with it: a script's
# background jobs ignore the terminal's SIGINT.
trap '((${#pids[@]} == 0)) || kill "${pids[@]}" 2>/dev/null || true; rm -rf "$logs"' EXIT

# background NAME COMMAND...: run COMMAND into NAME's log, which ends with how long it took; the
# job's shell passes a SIGTERM on to COMMAND.
background() {
  local name=$1
  shift
  {
    local began=$SECONDS rc=0 command
    "$@" &
    command=$!
    trap 'kill "$command" 2>/dev/null' TERM
    wait "$command" || rc=$?
    echo "($((SECONDS - began)) s)"
    exit "$rc"
  } >"$logs/$name" 2>&1 &
  names+=("$name")
  pids+=("$!")
}

# after PID COMMAND...: once PID (a job of this script's, not this shell's child) has ended, become
# COMMAND.
# shellcheck disable=SC2317 # run through background, which shellcheck does not follow
after() {
  local pid=$1
  shift
  while kill -0 "$pid" 2>/dev/null; do sleep 1; done
  exec "$@"
}

background "commit messages" "$bin/python" tools/commitmsg.py
background ruff "$bin/ruff" check .
background "mypy --strict" "$bin/mypy"
background import-linter "$bin/lint-imports"
background shellcheck tools/shellcheck.sh
background "CRD drift" "$bin/python" -m fleetwright.api.crdgen --check

# The integration tests that start whole stacks of their own and use none of the session's
# servers: a pytest process of their own once the workflow tier has ended.
own_stacks=(tests/integration/test_demo.py tests/integration/test_cluster_up.py)

status=0 result=ok
if (($# == 0)); then
  coverage="$logs/field-coverage"
  mkdir "$coverage"
  # Niced: the integration tier's servers answer within their timeouts first, the workflow tier
  # takes most of what CPU is left, the unit tier the rest.
  background "pytest unit tier" nice -n 10 "$bin/pytest" tests/unit
  unit=${pids[-1]}
  background "pytest node tier" after "$unit" "$bin/pytest" tests/integration/node
  background "pytest workflow tier" env FIELD_COVERAGE_DIR="$coverage" \
    nice -n 5 "$bin/pytest" tests/workflow
  workflow=${pids[-1]}
  background "pytest integration tier, own stacks" after "$workflow" \
    env FIELD_COVERAGE_DIR="$coverage" "$bin/pytest" "${own_stacks[@]}"
  name="pytest integration tier"
  echo "== $name"
  FIELD_COVERAGE_DIR=$coverage "$bin/pytest" tests --ignore=tests/unit --ignore=tests/workflow \
    --ignore=tests/integration/node "${own_stacks[@]/#/--ignore=}" ||
    result=FAILED status=1
else
  name="pytest"
  echo "== $name"
  "$bin/pytest" "$@" || result=FAILED status=1
fi
summary=("$name: $result")

for i in "${!pids[@]}"; do
  name=${names[$i]}
  if wait "${pids[$i]}"; then result=ok; else result=FAILED status=1; fi
  echo "== $name: $result"
  sed "s/^/[$name] /" "$logs/$name"
  summary+=("$name: $result")
done
pids=()
echo "== summary"
printf '%s\n' "${summary[@]}"
exit "$status"
