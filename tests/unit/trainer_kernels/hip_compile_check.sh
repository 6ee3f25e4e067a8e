#!/usr/bin/env bash
# Compiles every trainer/kernels/*.cu with hipcc for the AMD targets Debian's hipcc (ROCm 5.2,
# clang 15) knows: gfx90a (MI200), gfx940 (MI300) and gfx1030 (RDNA2). Compile only; warnings are
# errors. Usage: hip_compile_check.sh HIPCC SOURCE_DIR OUT_DIR
set -euo pipefail
HIPCC=$1 SRC=$2 OUT=$3
ARCHS=(--offload-arch=gfx90a --offload-arch=gfx940 --offload-arch=gfx1030)
mkdir -p "$OUT"
n=0
for cu in "$SRC"/trainer/kernels/*.cu; do
  t0=$(date +%s)
  "$HIPCC" -std=c++17 -x hip "${ARCHS[@]}" -Wall -Werror -I"$SRC" -c "$cu" \
    -o "$OUT/$(basename "$cu" .cu).o"
  echo "hipcc ${ARCHS[*]}: $(basename "$cu") compiled in $(( $(date +%s) - t0 )) s"
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "no trainer/kernels/*.cu under $SRC"; exit 1; }
echo "$n kernel files compiled for AMD"
