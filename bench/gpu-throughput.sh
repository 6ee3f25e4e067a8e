#!/usr/bin/env bash
# bench/gpu-throughput.sh: xv-train's throughput on one CUDA GPU for upstream-default, window patterns
# SSSL and L, with every speed lever on and with each lever switched off alone (trainer/model/
# speed_levers.h), printed as one table with ratios against the full configuration.
#
# Runs from a clean checkout on the GPU machine (../shared/gpu-build.md): unpacks the carried .debs when
# the image lacks gRPC, configures against the installed PyTorch's LibTorch, builds xv-train (and
# xvctl when it has to prepare data), runs `xv-train verify --builtin --device cuda`, then the runs.
# Each figure is xv-train's own summary (tok_per_sec, mfu_percent, peak_vram_mb, attention).
#
# Environment (all optional):
#   XV_BENCH_DATA    a data directory made by `xvctl prepare` (vocab 8192); default: prepared here from
#                    /usr/share/games/fortunes, or from a generated corpus when that is absent
#   XV_BENCH_CORPUS  the text corpus to prepare when XV_BENCH_DATA is unset (default: fortunes, else
#                    a generated one)
#   XV_BENCH_COMMIT  the commit to print (default: git rev-parse HEAD)
#   XV_BENCH_BUDGET  timed seconds per run (default 12; 11 untimed warm-up steps come first)
#   XV_BENCH_OUT     where logs, events and the table go (default BUILD/gpu-throughput)
#   XV_BENCH_BUILD   build directory (default build-gpu)
#   XV_BENCH_ABLATE  patterns that get a row per lever switched off (default "SSSL L", empty: none); both patterns
#                    get the row with every lever off unless XV_BENCH_ALL_OFF=0
#   XV_BENCH_LEVERS  the levers switched off one at a time (default: all of speed_levers.h)
#   XV_BENCH_ALL_OFF 0: no row with every lever off (default 1)
#   XV_BENCH_PROFILE 1: one more run per pattern with a Kineto trace and the kernel table (gpu-kernel-table.py)
#   XV_BENCH_TESTS   1: also build and run trainer_model_test (its CUDA tests run here)
#   XV_BENCH_SET     extra --set KEY=VALUE arguments for every run (space-separated)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${XV_BENCH_BUILD:-$ROOT/build-gpu}
OUT_DIR=${XV_BENCH_OUT:-$BUILD/gpu-throughput}
BUDGET=${XV_BENCH_BUDGET:-12}
ABLATE=${XV_BENCH_ABLATE-"SSSL L"}
# The levers' switches (trainer/model/speed_levers.h), XV_TRAIN_<NAME>=0 each.
LEVERS=${XV_BENCH_LEVERS:-"BF16_EMBEDDINGS CHUNKED_CE FUSED_CE FAST_CE RELU2 FUSED_RELU2 RECOMPUTE_RELU2 FUSED_ROTARY VECTOR_ROTARY FUSED_RESIDUAL CUDNN_ATTENTION"}
mkdir -p "$OUT_DIR"
say() { echo "[gpu-throughput $(date -u +%H:%M:%S)] $*" >&2; }

# 1. Packages the image lacks (gpu-build.md): gRPC, SQLite and PCRE2 development files.
if [ -d "$ROOT/.debs" ] && [ ! -e /usr/include/grpcpp/grpcpp.h ]; then
  for f in "$ROOT"/.debs/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi

# 2. Build.
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || {
  say "no PyTorch in python3: cannot find a CUDA LibTorch"; exit 2; }
TESTS=OFF; [ "${XV_BENCH_TESTS:-0}" = 1 ] && TESTS=ON
t0=$(date +%s)
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
  -DXV_BUILD_TESTS=$TESTS -DXV_BUILD_BENCH=OFF >"$OUT_DIR/configure.log" 2>&1 || {
  tail -30 "$OUT_DIR/configure.log"; say "configure failed"; exit 2; }
TARGETS="xv-train"
DATA=${XV_BENCH_DATA:-}
if [ -z "$DATA" ] || [ ! -f "$DATA/prepare.json" ]; then TARGETS="$TARGETS xvctl"; fi
KERNELS=on
if ! ninja -C "$BUILD" -j"$(nproc)" $TARGETS >"$OUT_DIR/build.log" 2>&1; then
  grep -B2 -A12 "error" "$OUT_DIR/build.log" | head -60
  # A broken fused kernel must not cost the measurements: build once more with the fallbacks only.
  say "build failed; building again with -DXV_TRAINER_CUDA_KERNELS=OFF"
  KERNELS="off (their build failed)"
  cmake -S "$ROOT" -B "$BUILD" -DXV_TRAINER_CUDA_KERNELS=OFF >>"$OUT_DIR/configure.log" 2>&1
  ninja -C "$BUILD" -j"$(nproc)" $TARGETS >>"$OUT_DIR/build.log" 2>&1 || {
    grep -B2 -A12 "error" "$OUT_DIR/build.log" | tail -40; say "build failed"; exit 2; }
fi
grep -q "fused CUDA kernels for" "$OUT_DIR/configure.log" || KERNELS="off (not a CUDA build or no nvcc)"
TESTS_BUILT=0
if [ "$TESTS" = ON ]; then
  if ninja -C "$BUILD" -j"$(nproc)" trainer_model_test >"$OUT_DIR/build-tests.log" 2>&1; then
    TESTS_BUILT=1
  else
    grep -B2 -A12 "error" "$OUT_DIR/build-tests.log" | head -40; say "trainer_model_test did not build"
  fi
fi
say "built $TARGETS in $(( $(date +%s) - t0 )) s"
XV_TRAIN="$BUILD/bin/xv-train"

# 3. Data.
if [ -z "$DATA" ] || [ ! -f "$DATA/prepare.json" ]; then
  DATA="$BUILD/bench-data"
  CORPUS=${XV_BENCH_CORPUS:-/usr/share/games/fortunes}
  if [ ! -d "$CORPUS" ]; then
    CORPUS="$BUILD/bench-corpus"
    mkdir -p "$CORPUS"
    # A seeded made-up language: 30k words from syllables, sentences of Zipf-like word choice.
    python3 - "$CORPUS" <<'PY'
import random, sys, os
rng = random.Random(1234)
syl = [a + b for a in "bcdfghjklmnprstvwz" for b in ["a", "e", "i", "o", "u", "ai", "ou", "ee"]]
words = sorted({"".join(rng.choice(syl) for _ in range(rng.randint(1, 4))) for _ in range(40000)})
weights = [1.0 / (i + 1) for i in range(len(words))]
for f in range(8):
    with open(os.path.join(sys.argv[1], f"part{f}.txt"), "w") as out:
        for doc in range(1500):
            sent = []
            for _ in range(rng.randint(3, 30)):
                w = rng.choices(words, weights, k=rng.randint(4, 16))
                sent.append(" ".join(w).capitalize() + rng.choice([".", ".", "!", "?", ","]))
            out.write(" ".join(sent) + "\n\n")
PY
  fi
  "$BUILD/bin/xvctl" prepare --input "$CORPUS" --out "$DATA" >"$OUT_DIR/prepare.log" 2>&1 || {
    tail -20 "$OUT_DIR/prepare.log"; say "xvctl prepare failed"; exit 2; }
fi
say "data: $DATA"

# 4. Numerics on this device.
"$XV_TRAIN" verify --builtin --device cuda >"$OUT_DIR/verify.log" 2>&1
VERIFY_RC=$?
say "xv-train verify --builtin --device cuda: exit $VERIFY_RC ($(grep -c PASS "$OUT_DIR/verify.log") PASS lines)"
if [ "$TESTS_BUILT" = 1 ]; then
  timeout 120 "$BUILD/tests/trainer_model_test" >"$OUT_DIR/trainer_model_test.log" 2>&1
  say "trainer_model_test: exit $? ($(grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$OUT_DIR/trainer_model_test.log" | tr '\n' ' '))"
fi

# 5. Runs. Each: name, pattern, then VAR=VALUE switches.
ROWS="$OUT_DIR/rows.tsv"
: >"$ROWS"
field() { awk -v k="$1:" '$1 == k { print $2 }' "$2" | tail -1; }
run_one() {
  local name=$1 pattern=$2; shift 2
  local log="$OUT_DIR/$name-$pattern.log"
  local sets=(--set time_budget_s="$BUDGET" --set eval_tokens=524288 --set window_pattern="$pattern")
  for s in ${XV_BENCH_SET:-}; do sets+=(--set "$s"); done
  env "$@" "$XV_TRAIN" --recipe "$ROOT/recipes/upstream-default.yaml" --data "$DATA" --device cuda \
    "${sets[@]}" >"$OUT_DIR/$name-$pattern.events" 2>"$log"
  local rc=$?
  local tok mfu mem att
  tok=$(field tok_per_sec "$log"); mfu=$(field mfu_percent "$log")
  mem=$(field peak_vram_mb "$log"); att=$(field attention "$log")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$pattern" "${tok:-0}" "${mfu:-0}" "${mem:-0}" \
    "${att:-?}" "$rc" >>"$ROWS"
  say "$name $pattern: exit $rc, tok/s ${tok:-?}, MFU ${mfu:-?} %, peak ${mem:-?} MiB, attention ${att:-?}"
  [ $rc -eq 0 ] || tail -5 "$log" >&2
}
for pattern in SSSL L; do run_one full "$pattern"; done
if [ "${XV_BENCH_PROFILE:-0}" = 1 ]; then
  for pattern in SSSL L; do
    XV_TRAIN_PROFILE_TRACE="$OUT_DIR/trace-$pattern.json" XV_TRAIN_PROFILE_STEPS=12:2 \
      "$XV_TRAIN" --recipe "$ROOT/recipes/upstream-default.yaml" --data "$DATA" --device cuda \
      --set time_budget_s=4 --set eval_tokens=262144 --set window_pattern="$pattern" \
      >/dev/null 2>"$OUT_DIR/profile-$pattern.log"
    python3 "$ROOT/bench/gpu-kernel-table.py" "$OUT_DIR/trace-$pattern.json" --steps 2 \
      >"$OUT_DIR/kernels-$pattern.txt" 2>&1 && gzip -f "$OUT_DIR/trace-$pattern.json"
  done
fi
for pattern in SSSL L; do
  case " $ABLATE " in
    *" $pattern "*)
      for lever in $LEVERS; do
        run_one "no-$(echo "$lever" | tr 'A-Z_' 'a-z-')" "$pattern" "XV_TRAIN_$lever=0"
      done
      ;;
  esac
  [ "${XV_BENCH_ALL_OFF:-1}" = 0 ] && continue
  all_off=()
  for lever in $LEVERS; do all_off+=("XV_TRAIN_$lever=0"); done
  run_one all-levers-off "$pattern" "${all_off[@]}"
done

# 6. The table.
{
  echo "upstream-default on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)," \
    "LibTorch $(python3 -c 'import torch; print(torch.__version__)'), commit" \
    "${XV_BENCH_COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)}, $(date -u +%Y-%m-%d)," \
    "${BUDGET} s timed per run; fused CUDA kernels: $KERNELS; CUDA graphs: off (not implemented);" \
    "verify exit $VERIFY_RC"
  echo
  echo "| configuration | window | tok/s | MFU % | peak alloc GiB | attention | tok/s vs full | memory vs full |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
  awk -F'\t' '
    $1 == "full" { tok[$2] = $3; mem[$2] = $5 }
    { rows[NR] = $0 }
    END {
      for (i = 1; i <= NR; i++) {
        split(rows[i], f, "\t")
        rt = (tok[f[2]] > 0) ? sprintf("%.2fx", f[3] / tok[f[2]]) : "-"
        rm = (mem[f[2]] > 0) ? sprintf("%.2fx", f[5] / mem[f[2]]) : "-"
        fail = (f[7] != 0) ? " (exit " f[7] ")" : ""
        printf "| %s%s | %s | %.0f | %.1f | %.1f | %s | %s | %s |\n", f[1], fail, f[2], f[3], f[4],
               f[5] / 1024, f[6], rt, rm
      }
    }' "$ROWS"
  for pattern in SSSL L; do
    if [ -f "$OUT_DIR/kernels-$pattern.txt" ]; then echo; echo "Kernel time, $pattern:"; cat "$OUT_DIR/kernels-$pattern.txt"; fi
  done
} | tee "$OUT_DIR/table.md"
