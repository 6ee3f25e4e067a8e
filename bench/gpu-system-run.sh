#!/usr/bin/env bash
# bench/gpu-system-run.sh: one `upstream-default` experiment (its own 300 s budget) through the whole
# system on one CUDA GPU, as a user runs it: xvd, one `xv-worker --device cuda:0`, `xvctl submit`,
# `xvctl wait`, `xvctl results`. Prints the results table and the worker's stored probe last.
#
# Runs from a clean checkout on the GPU machine (../shared/gpu-build.md): unpacks the carried .debs when
# the image lacks gRPC, configures against the installed PyTorch's LibTorch (Release, tests off) and
# builds xvd, xv-worker, xvctl and xv-train.
#
# Environment (all optional):
#   XV_BENCH_DATA    a data directory made by `xvctl prepare` (vocab 8192); default: prepared here from
#                    XV_BENCH_CORPUS (default /usr/share/games/fortunes; the GPU image has none: carry a
#                    copy of Debian's fortunes for figures comparable with earlier ones)
#   XV_BENCH_OUT     where logs, the state directory and the tables go (default BUILD/gpu-system-run)
#   XV_BENCH_BUILD   build directory (default build-gpu)
#   XV_BENCH_SET     extra --set KEY=VALUE arguments for the submitted recipe (space-separated)
#   XV_BENCH_WAIT    seconds `xvctl wait` may take (default 560)
#   XV_BENCH_COMMIT  the commit to print (default: git rev-parse HEAD)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${XV_BENCH_BUILD:-$ROOT/build-gpu}
OUT_DIR=${XV_BENCH_OUT:-$BUILD/gpu-system-run}
mkdir -p "$OUT_DIR"
say() { echo "[gpu-system-run $(date -u +%H:%M:%S)] $*" >&2; }

# 1. Packages the image lacks (gpu-build.md), then the build.
if [ -d "$ROOT/.debs" ] && [ ! -e /usr/include/grpcpp/grpcpp.h ]; then
  for f in "$ROOT"/.debs/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || {
  say "no PyTorch in python3: cannot find a CUDA LibTorch"; exit 2; }
t0=$(date +%s)
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
  -DXV_BUILD_TESTS=OFF -DXV_BUILD_BENCH=OFF -DXV_STATIC_XVCTL=OFF >"$OUT_DIR/configure.log" 2>&1 || {
  tail -30 "$OUT_DIR/configure.log"; say "configure failed"; exit 2; }
ninja -C "$BUILD" -j"$(nproc)" xvd xv-worker xvctl xv-train >"$OUT_DIR/build.log" 2>&1 || {
  grep -B2 -A12 "error" "$OUT_DIR/build.log" | head -60; say "build failed"; exit 2; }
say "built xvd xv-worker xvctl xv-train in $(( $(date +%s) - t0 )) s"
BIN="$BUILD/bin"

# 2. Data (the same corpus choice as bench/gpu-throughput.sh).
DATA=${XV_BENCH_DATA:-}
if [ -z "$DATA" ] || [ ! -f "$DATA/prepare.json" ]; then
  DATA="$BUILD/bench-data"
  if [ ! -f "$DATA/prepare.json" ]; then
    CORPUS=${XV_BENCH_CORPUS:-/usr/share/games/fortunes}
    [ -d "$CORPUS" ] || { say "no corpus $CORPUS: set XV_BENCH_CORPUS or XV_BENCH_DATA"; exit 2; }
    "$BIN/xvctl" prepare --input "$CORPUS" --out "$DATA" >"$OUT_DIR/prepare.log" 2>&1 || {
      tail -20 "$OUT_DIR/prepare.log"; say "xvctl prepare failed"; exit 2; }
  fi
fi
say "data: $DATA"

# 3. The system: xvd, one worker on cuda:0, the client over the daemon's unix socket.
STATE="$OUT_DIR/state"
rm -rf "$STATE"
mkdir -p "$STATE"
export XV_STATE_DIR="$STATE" XV_DAEMON="unix:$STATE/xvd.sock"
"$BIN/xvd" --state-dir "$STATE" --listen none >"$OUT_DIR/xvd.log" 2>&1 &
XVD_PID=$!
for _ in $(seq 50); do [ -S "$STATE/xvd.sock" ] && break; sleep 0.2; done
"$BIN/xv-worker" --daemon "$XV_DAEMON" --data "$DATA" --name h200-gpu0 --device cuda:0 \
  --work-dir "$OUT_DIR/work" >"$OUT_DIR/worker.log" 2>&1 &
WORKER_PID=$!
stop() { kill "$WORKER_PID" 2>/dev/null; wait "$WORKER_PID" 2>/dev/null; kill "$XVD_PID" 2>/dev/null;
  wait "$XVD_PID" 2>/dev/null; }
trap stop EXIT
sets=()
for s in ${XV_BENCH_SET:-}; do sets+=(--set "$s"); done
"$BIN/xvctl" submit "$ROOT/recipes/upstream-default.yaml" "${sets[@]}" --campaign h200 \
  >"$OUT_DIR/submit.log" 2>&1 || { cat "$OUT_DIR/submit.log"; say "submit failed"; exit 2; }
say "submitted: $(tr '\n' ' ' <"$OUT_DIR/submit.log")"
"$BIN/xvctl" wait --timeout "${XV_BENCH_WAIT:-560}" >"$OUT_DIR/wait.log" 2>&1
WAIT_RC=$?
say "xvctl wait: exit $WAIT_RC"

# 4. What a user reads.
"$BIN/xvctl" results --json --campaign h200 >"$OUT_DIR/results.json" 2>&1
"$BIN/xvctl" workers >"$OUT_DIR/workers.txt" 2>&1
{
  echo "upstream-default through xvd + xv-worker + xvctl on" \
    "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), LibTorch" \
    "$(python3 -c 'import torch; print(torch.__version__)'), commit" \
    "${XV_BENCH_COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)}, $(date -u +%Y-%m-%d)"
  echo
  "$BIN/xvctl" results --campaign h200 2>&1
  echo
  cat "$OUT_DIR/workers.txt"
} | tee "$OUT_DIR/results.txt"
exit $WAIT_RC
