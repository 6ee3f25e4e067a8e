#!/usr/bin/env bash
# xv-enable-workers: enables and starts one xv-worker@N (deploy/systemd/xv-worker@.service) per GPU
# this machine has, or xv-worker@cpu when it has none. GPUs are counted by `nvidia-smi -L` (NVIDIA)
# and the KFD topology nodes with a GPU id (AMD, /sys/class/kfd/kfd/topology/nodes/*/gpu_id != 0);
# on a box with both vendors the larger count is used (the instance number is the device ordinal
# within a vendor): set XV_GPU_COUNT, or enable instances by hand.
#
#   xv-enable-workers [--dry-run] [--now|--no-now]
#     --dry-run   print the systemctl commands instead of running them
#     --no-now    enable only (start at the next boot)
# Environment: XV_GPU_COUNT (skip detection), XV_SYSFS_ROOT (default /sys; tests), SYSTEMCTL
# (default systemctl).
set -euo pipefail

dry_run=0
now=--now
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry_run=1 ;;
    --now) now=--now ;;
    --no-now) now= ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "xv-enable-workers: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

count_nvidia() {
  command -v nvidia-smi >/dev/null 2>&1 || { echo 0; return; }
  nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true
}

count_amd() {
  local root="${XV_SYSFS_ROOT:-/sys}" n=0 f
  for f in "$root"/class/kfd/kfd/topology/nodes/*/gpu_id; do
    [ -r "$f" ] || continue
    [ "$(cat "$f")" != "0" ] && n=$((n + 1))
  done
  echo "$n"
}

if [ -n "${XV_GPU_COUNT:-}" ]; then
  gpus="$XV_GPU_COUNT"
else
  nvidia=$(count_nvidia)
  amd=$(count_amd)
  gpus=$((nvidia > amd ? nvidia : amd))
  echo "xv-enable-workers: found $nvidia NVIDIA and $amd AMD GPU(s)"
fi

units=()
if [ "$gpus" -eq 0 ]; then
  units=(xv-worker@cpu)
else
  for ((i = 0; i < gpus; i++)); do units+=("xv-worker@$i"); done
fi

systemctl_cmd=("${SYSTEMCTL:-systemctl}" enable $now "${units[@]}")
if [ "$dry_run" -eq 1 ]; then
  echo "${systemctl_cmd[*]}"
else
  "${systemctl_cmd[@]}"
  echo "xv-enable-workers: enabled ${units[*]}"
fi
