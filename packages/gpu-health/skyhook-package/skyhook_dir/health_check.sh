#!/bin/bash
# The check step of apply, config and upgrade: are the node's GPUs healthy? It asks the host's
# nvidia-smi for the GPUs (their count against expected_gpus), uncorrectable ECC errors, pending
# page retirement, row remapping and the PCIe link width, reads the kernel log (dmesg) for XIDs
# other than ignored_xids, and runs `dcgmi diag -r <dcgm_diag_level>`. It fails with one line per
# problem, naming the GPU (index and PCI bus id) and the field or DCGM test that found it.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
check_settings

problems=()
declare -A BUS=() INDEX_OF=()
problem() { problems+=("$*"); }
gpu() { echo "GPU $1 (${BUS[$1]:-bus unknown})"; }
first_line() { head -n 1 <<< "$1"; }
trim() { local v="${1#"${1%%[! ]*}"}"; echo "${v%"${v##*[! ]}"}"; }
number() { [[ "$1" =~ ^[0-9]+$ ]]; }
# nvidia-smi's "no" in any of its spellings, and "not there" (older GPUs lack a field).
clear_value() { case "$1" in 0|No|no|False|false|"[N/A]"|N/A|"[Not Supported]"|"") return 0 ;; *) return 1 ;; esac; }
# 00000000:18:00.0 (nvidia-smi) and 0000:18:00 (the kernel's Xid lines) -> 18:00
short_bus() { local b="${1,,}"; b="${b%.*}"; awk -F: '{ print $(NF - 1) ":" $NF }' <<< "$b"; }

report() {
  local model="${MODEL:-no GPU}"
  if ((${#problems[@]})); then
    echo "gpu-health: FAILED: ${#problems[@]} problem(s) on this node's ${COUNT:-0} GPU(s) ($model):" >&2
    printf '  %s\n' "${problems[@]}" >&2
    exit 1
  fi
  echo "gpu-health: ${COUNT} GPU(s) healthy ($model): ECC, page retirement, row remapping, PCIe link width," \
    "kernel XIDs$( ((DCGM_DIAG_LEVEL > 0)) && echo ", dcgmi diag -r $DCGM_DIAG_LEVEL")"
}

# The GPUs. Without them nothing else can be asked.
if ! inventory="$(nvidia-smi --query-gpu=index,pci.bus_id,uuid,name --format=csv,noheader 2>&1)"; then
  problem "nvidia-smi cannot list the GPUs: $(first_line "$inventory")"
  report
fi
COUNT=0
while IFS=, read -r index bus uuid name; do
  index="$(trim "$index")"
  number "$index" || continue
  BUS[$index]="$(trim "$bus")"
  INDEX_OF[$(short_bus "${BUS[$index]}")]="$index"
  MODEL="$(trim "$name")"
  echo "gpu-health: GPU $index ${BUS[$index]} $(trim "$uuid") $MODEL"
  COUNT=$((COUNT + 1))
done <<< "$inventory"
if ((COUNT == 0)); then
  problem "no GPU visible to nvidia-smi"
elif [[ -n "$EXPECTED_GPUS" ]] && ((COUNT != EXPECTED_GPUS)); then
  problem "GPU count: nvidia-smi sees $COUNT GPU(s), expected_gpus is $EXPECTED_GPUS (a GPU fell off the bus?)"
fi

# Uncorrectable ECC errors, pending page retirement, the PCIe link.
fields=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending,pcie.link.width.current,pcie.link.width.max
if state="$(nvidia-smi --query-gpu="$fields" --format=csv,noheader,nounits 2>&1)"; then
  while IFS=, read -r index ecc retired width max; do
    index="$(trim "$index")" ecc="$(trim "$ecc")" retired="$(trim "$retired")"
    width="$(trim "$width")" max="$(trim "$max")"
    number "$index" || continue
    if number "$ecc" && ((ecc > 0)); then
      problem "$(gpu "$index"): $ecc uncorrectable ECC error(s) since the driver loaded (ecc.errors.uncorrected.volatile.total)"
    fi
    if ! clear_value "$retired"; then
      problem "$(gpu "$index"): page retirement pending (retired_pages.pending: $retired): reset the GPU"
    fi
    if number "$width" && number "$max" && ((width < max)); then
      problem "$(gpu "$index"): PCIe link at x$width of x$max (pcie.link.width.current): a degraded link"
    fi
  done <<< "$state"
else
  problem "nvidia-smi --query-gpu=$fields failed: $(first_line "$state")"
fi

# Row remapping (Ampere and later; older GPUs do not support the query).
fields=gpu_bus_id,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure
if remaps="$(nvidia-smi --query-remapped-rows="$fields" --format=csv,noheader 2>&1)"; then
  while IFS=, read -r bus uncorrectable pending failure; do
    bus="$(trim "$bus")" uncorrectable="$(trim "$uncorrectable")"
    pending="$(trim "$pending")" failure="$(trim "$failure")"
    [[ -n "$bus" ]] || continue
    index="${INDEX_OF[$(short_bus "$bus")]:-?}"
    if ! clear_value "$pending"; then
      problem "$(gpu "$index"): row remapping pending (remapped_rows.pending: $pending, $uncorrectable uncorrectable row(s) remapped): reset the GPU"
    fi
    if ! clear_value "$failure"; then
      problem "$(gpu "$index"): row remapping failed (remapped_rows.failure: $failure): no spare rows left, replace the GPU"
    fi
  done <<< "$remaps"
elif ! grep -qi "not supported" <<< "$remaps"; then
  problem "nvidia-smi --query-remapped-rows failed: $(first_line "$remaps")"
fi

# XIDs the driver logged since boot.
declare -A IGNORED=() SEEN=()
for xid in $IGNORED_XIDS; do IGNORED[$xid]=1; done
xid_line='NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): ([0-9]+),? ?(.*)'
if kernel_log="$(dmesg 2>&1)"; then
  while IFS= read -r line; do
    [[ "$line" =~ $xid_line ]] || continue
    bus="${BASH_REMATCH[1]}" xid="${BASH_REMATCH[2]}" detail="${BASH_REMATCH[3]}"
    index="${INDEX_OF[$(short_bus "$bus")]:-?}"
    [[ -z "${IGNORED[$xid]:-}" && -z "${SEEN[$index/$xid]:-}" ]] || continue
    SEEN[$index/$xid]=1
    problem "$(gpu "$index"): XID $xid in the kernel log: $detail"
  done <<< "$kernel_log"
else
  problem "dmesg cannot read the kernel log, so XIDs are unchecked: $(first_line "$kernel_log")"
fi

# DCGM's diagnostic at the configured level.
if ((DCGM_DIAG_LEVEL > 0)); then
  if ! command -v dcgmi >/dev/null; then
    problem "dcgmi not found: install NVIDIA DCGM on the host, or set the configMap dcgm_diag_level to 0"
  else
    status=0
    diag="$(dcgmi diag -r "$DCGM_DIAG_LEVEL" 2>&1)" || status=$?
    failures="$(awk -f "$STEP_ROOT/dcgm_failures.awk" <<< "$diag")"
    while IFS=$'\t' read -r test index message; do
      [[ -n "$test" ]] || continue
      where="$([[ -n "$index" ]] && gpu "$index" || echo "a GPU")"
      problem "$where: dcgmi diag -r $DCGM_DIAG_LEVEL, test '$test' failed: $message"
    done <<< "$failures"
    if ((status != 0)) && [[ -z "$failures" ]]; then
      problem "dcgmi diag -r $DCGM_DIAG_LEVEL exited $status: $(tail -n 3 <<< "$diag" | tr '\n' ' ')"
    fi
  fi
fi
report
