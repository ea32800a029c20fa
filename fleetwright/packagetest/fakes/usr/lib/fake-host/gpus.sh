# shellcheck shell=sh
# Sourced by the fake GPU tools (nvidia-smi, dcgmi, dmesg): the fake host's GPUs. By default the
# host has FAKE_GPUS (8) healthy NVIDIA H100s; a test gives it faults through the environment
# (`fleetwright package test --env`), which the agent hands to every step and so to these tools:
#   FAKE_GPUS=N               how many GPUs the driver sees (0: "No devices were found")
#   FAKE_GPU_DRIVER=missing   nvidia-smi cannot talk to the driver (not loaded, or GPUs lost)
#   FAKE_GPU_FAULTS="I:FIELD=VALUE;..."  GPU I's nvidia-smi query FIELD reads VALUE
#       (remapped_rows.pending=1, pcie.link.width.current=8, ...); two more keys:
#       xid=N (an "NVRM: Xid" line for GPU I in the kernel log) and dcgm=TEST (the DCGM
#       diagnostic TEST, e.g. "GPU Memory", fails on GPU I when its level runs it).
gpu_count() {
  if [ "${FAKE_GPU_DRIVER:-}" = missing ]; then echo 0; else echo "${FAKE_GPUS:-8}"; fi
}
# The faults, one "I<TAB>KEY<TAB>VALUE" line each.
gpu_faults() {
  printf '%s\n' "${FAKE_GPU_FAULTS:-}" | tr ';' '\n' | awk '
    { sub(/^[ \t]+/, ""); sub(/[ \t]+$/, "") }
    index($0, ":") && index($0, "=") {
      gpu = substr($0, 1, index($0, ":") - 1); rest = substr($0, index($0, ":") + 1)
      print gpu "\t" substr(rest, 1, index(rest, "=") - 1) "\t" substr(rest, index(rest, "=") + 1)
    }'
}
# The value FIELD of GPU I has (a fault's, else the healthy default); "" for an unknown field.
gpu_field() {
  fault=$(gpu_faults | awk -F '\t' -v g="$1" -v k="$2" '$1 == g && $2 == k { v = $3 } END { print v }')
  if [ -n "$fault" ]; then echo "$fault"; return; fi
  case "$2" in
    index) echo "$1" ;;
    name) echo "NVIDIA H100 80GB HBM3" ;;
    uuid|gpu_uuid) gpu_uuid "$1" ;;
    pci.bus_id|gpu_bus_id) gpu_bus "$1" ;;
    driver_version) echo "570.133.20" ;;
    ecc.errors.uncorrected.volatile.total|ecc.errors.uncorrected.aggregate.total) echo 0 ;;
    retired_pages.pending) echo No ;;
    remapped_rows.correctable|remapped_rows.uncorrectable) echo 0 ;;
    remapped_rows.pending|remapped_rows.failure) echo 0 ;;
    pcie.link.gen.current|pcie.link.gen.max) echo 5 ;;
    pcie.link.width.current|pcie.link.width.max) echo 16 ;;
    temperature.gpu) echo 34 ;;
    *) return 1 ;;
  esac
}
gpu_bus() { printf '00000000:%02X:00.0\n' $(((0x18 + $1 * 0x10) & 0xFF)); }
gpu_uuid() {
  h=$(echo "fake-gpu-$1" | md5sum | cut -c1-32)
  echo "GPU-$(echo "$h" | cut -c1-8)-$(echo "$h" | cut -c9-12)-$(echo "$h" | cut -c13-16)-$(echo "$h" | cut -c17-20)-$(echo "$h" | cut -c21-32)"
}
