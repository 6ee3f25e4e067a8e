#!/usr/bin/env bash
# bench/gpu-fork-run.sh: an autoresearch fork through the whole system on one CUDA GPU (issue 16):
# xvd, one `xv-worker --device cuda:0` whose config offers the fork (kind autoresearch: xv's prepare
# module, its constants rewritten from the recipe) inside the bubblewrap sandbox (GPU device nodes
# passed through) beside the libtorch trainer, one fork experiment and one xv-train experiment on the
# same data directory, `xvctl wait`, `xvctl results`. The fork is the fixture
# tests/fixtures/autoresearch_fork/train.py (its GPU path: cuda and bf16 autocast) unless
# XV_FORK_SOURCE names another fork-shaped train.py.
#
# Runs from a clean checkout on the GPU machine (../shared/gpu-build.md), as root there: unpacks the
# carried .debs when the image lacks gRPC, and bubblewrap's .deb (carried in .debs/, fetched with
# `apt-get download bubblewrap`) when /usr/bin/bwrap is missing; configures against the installed
# PyTorch's LibTorch (Release, tests off) and builds xvd, xv-worker, xvctl and xv-train.
#
# XV_FORK_RUN_DEVICE=cpu runs the same steps on a machine without a GPU (a CPU worker, Debian's
# /usr/bin/python3 with python3-torch, the existing build directory `build`): how the script is
# checked where CI runs.
#
# Environment (all optional):
#   XV_FORK_RUN_DEVICE   cuda (default) | cpu
#   XV_FORK_RUN_SANDBOX  on (default): bubblewrap or fail | auto: when bwrap cannot make a sandbox
#                        here, run the fork without one, say so and exit 3 at the end | off
#   XV_FORK_SOURCE       the fork's train.py (default: the fixture)
#   XV_FORK_PYTHON       the python that has torch (default: python3 on PATH for cuda, resolved to
#                        its path; /usr/bin/python3 for cpu)
#   XV_FORK_BUDGET       time_budget_s of both experiments (default 30 on cuda, 4 on cpu)
#   XV_FORK_SET          extra --set KEY=VALUE for the fork's experiment (space-separated), e.g.
#                        "train_sequence_len=128"
#   XV_BENCH_DATA        a data directory made by `xvctl prepare` (vocab 512); default: prepared here
#                        from XV_BENCH_CORPUS (default /usr/share/common-licenses)
#   XV_BENCH_OUT         logs, the state directory and the tables (default BUILD/gpu-fork-run)
#   XV_BENCH_BUILD       build directory (default build-gpu on cuda, build on cpu)
#   XV_BENCH_WAIT        seconds `xvctl wait` may take (default 420)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEVICE=${XV_FORK_RUN_DEVICE:-cuda}
case "$DEVICE" in
  cuda | cpu) ;;
  *) echo "XV_FORK_RUN_DEVICE: expected cuda or cpu, got '$DEVICE'" >&2; exit 2 ;;
esac
SANDBOX=${XV_FORK_RUN_SANDBOX:-on}
case "$SANDBOX" in
  on | auto | off) ;;
  *) echo "XV_FORK_RUN_SANDBOX: expected on, auto or off, got '$SANDBOX'" >&2; exit 2 ;;
esac
if [ "$DEVICE" = cuda ]; then
  BUILD=${XV_BENCH_BUILD:-$ROOT/build-gpu}
  BUDGET=${XV_FORK_BUDGET:-30}
else
  BUILD=${XV_BENCH_BUILD:-$ROOT/build}
  BUDGET=${XV_FORK_BUDGET:-4}
fi
OUT_DIR=${XV_BENCH_OUT:-$BUILD/gpu-fork-run}
SOURCE=${XV_FORK_SOURCE:-$ROOT/tests/fixtures/autoresearch_fork/train.py}
mkdir -p "$OUT_DIR"
say() { echo "[gpu-fork-run $(date -u +%H:%M:%S)] $*" >&2; }
# NVLink multicast stays off on the shared GPU hosts (../.library device notes); harmless elsewhere.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# 1. Packages the image lacks (gpu-build.md): gRPC and friends, and bubblewrap.
if [ -d "$ROOT/.debs" ] && [ ! -e /usr/include/grpcpp/grpcpp.h ]; then
  for f in "$ROOT"/.debs/*.deb; do
    case "$f" in */bubblewrap_*) continue ;; esac
    dpkg -x "$f" /
  done
  ldconfig
fi
if [ "$SANDBOX" != off ] && [ ! -x /usr/bin/bwrap ]; then
  for f in "$ROOT"/.debs/bubblewrap_*.deb; do
    [ -f "$f" ] || continue
    say "unpacking $(basename "$f")"
    dpkg -x "$f" / && break
  done
  [ -x /usr/bin/bwrap ] || say "no /usr/bin/bwrap and no .debs/bubblewrap_*.deb to unpack"
fi

# 2. The python that runs the fork (it must import torch; on cuda it must see the GPU).
if [ "$DEVICE" = cuda ]; then
  PYTHON=${XV_FORK_PYTHON:-$(command -v python3)}
else
  PYTHON=${XV_FORK_PYTHON:-/usr/bin/python3}
fi
case "$PYTHON" in
  /*) ;;
  *) say "XV_FORK_PYTHON: expected an absolute path, got '$PYTHON'"; exit 2 ;;
esac
"$PYTHON" -c 'import torch, numpy' >"$OUT_DIR/python.log" 2>&1 || {
  cat "$OUT_DIR/python.log"; say "$PYTHON cannot import torch and numpy"; exit 2; }
if [ "$DEVICE" = cuda ]; then
  # Also creates the device nodes the driver makes on first use (/dev/nvidia-uvm), before the
  # worker lists them for the sandbox.
  "$PYTHON" -c 'import torch; assert torch.cuda.is_available(); torch.zeros(1, device="cuda");
print(torch.__version__, torch.cuda.get_device_name(0))' >>"$OUT_DIR/python.log" 2>&1 || {
    cat "$OUT_DIR/python.log"; say "$PYTHON sees no CUDA GPU"; exit 2; }
fi
say "python: $PYTHON ($(tail -1 "$OUT_DIR/python.log"))"

# 3. The build.
t0=$(date +%s)
if [ "$DEVICE" = cuda ]; then
  TORCH_PREFIX=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)') || {
    say "no PyTorch in $PYTHON: cannot find a CUDA LibTorch"; exit 2; }
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DXV_BUILD_TESTS=OFF -DXV_BUILD_BENCH=OFF -DXV_STATIC_XVCTL=OFF \
    >"$OUT_DIR/configure.log" 2>&1 || {
    tail -30 "$OUT_DIR/configure.log"; say "configure failed"; exit 2; }
elif [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja >"$OUT_DIR/configure.log" 2>&1 || {
    tail -30 "$OUT_DIR/configure.log"; say "configure failed"; exit 2; }
fi
cmake --build "$BUILD" -j"$(nproc)" --target xvd xv-worker xvctl xv-train \
  >"$OUT_DIR/build.log" 2>&1 || {
  grep -B2 -A12 "error" "$OUT_DIR/build.log" | head -60; say "build failed"; exit 2; }
say "built xvd xv-worker xvctl xv-train in $(($(date +%s) - t0)) s"
BIN="$BUILD/bin"

# 4. The sandbox: can bwrap make one here (as root, or through user namespaces)?
SANDBOX_USED=off
if [ "$SANDBOX" != off ]; then
  if /usr/bin/bwrap --die-with-parent --unshare-net --unshare-ipc --unshare-uts \
    --ro-bind / / --proc /proc --dev /dev --tmpfs /tmp -- /bin/true >"$OUT_DIR/bwrap-check.log" 2>&1; then
    SANDBOX_USED=bubblewrap
  elif [ "$SANDBOX" = on ]; then
    cat "$OUT_DIR/bwrap-check.log"
    say "bubblewrap cannot make a sandbox here (XV_FORK_RUN_SANDBOX=auto runs without one)"
    exit 2
  else
    say "bubblewrap cannot make a sandbox here: $(head -c 300 "$OUT_DIR/bwrap-check.log");" \
      "the fork runs WITHOUT the sandbox"
  fi
fi
if [ "$SANDBOX_USED" = bubblewrap ] && [ "$DEVICE" = cuda ]; then
  # Diagnostic only: the fork's python in a sandbox like the worker's (system, its venv, GPU nodes,
  # /sys). The experiment's own failure says more if this already fails.
  prefix=$("$PYTHON" -c 'import sys; print(sys.prefix); print(sys.base_prefix)' | sort -u)
  binds=()
  for p in $prefix; do case "$p" in /usr | /usr/*) ;; *) binds+=(--ro-bind "$p" "$p") ;; esac; done
  for n in /dev/nvidia* /dev/dri /dev/kfd; do [ -e "$n" ] && binds+=(--dev-bind "$n" "$n"); done
  /usr/bin/bwrap --die-with-parent --unshare-net --ro-bind /usr /usr --ro-bind /etc /etc \
    --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/bin /bin \
    --proc /proc --dev /dev --tmpfs /tmp --ro-bind /sys /sys "${binds[@]}" -- \
    env -i "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" "$PYTHON" -c \
    'import torch; print("in the sandbox: cuda", torch.cuda.is_available(), torch.cuda.device_count())' \
    >"$OUT_DIR/sandbox-cuda-check.log" 2>&1
  say "$(tail -1 "$OUT_DIR/sandbox-cuda-check.log")"
fi

# 5. Data: one directory for both trainers.
DATA=${XV_BENCH_DATA:-}
if [ -z "$DATA" ] || [ ! -f "$DATA/prepare.json" ]; then
  DATA="$BUILD/fork-bench-data"
  if [ ! -f "$DATA/prepare.json" ]; then
    CORPUS=${XV_BENCH_CORPUS:-/usr/share/common-licenses}
    [ -d "$CORPUS" ] || { say "no corpus $CORPUS: set XV_BENCH_CORPUS or XV_BENCH_DATA"; exit 2; }
    "$BIN/xvctl" prepare --input "$CORPUS" --out "$DATA" --vocab-size 512 --val-fraction 0.2 \
      >"$OUT_DIR/prepare.log" 2>&1 || {
      tail -20 "$OUT_DIR/prepare.log"; say "xvctl prepare failed"; exit 2; }
  fi
fi
VOCAB=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' \
  "$DATA/tokenizer/tokenizer.json") || { say "cannot read $DATA/tokenizer/tokenizer.json"; exit 2; }
say "data: $DATA (vocab $VOCAB)"

# 6. The worker's trainers and the recipe both experiments share.
CONFIG="$OUT_DIR/worker.yaml"
{
  echo "trainers:"
  echo "  - name: libtorch"
  echo "    kind: libtorch"
  echo "  - name: fork"
  echo "    kind: autoresearch"
  echo "    source: $SOURCE"
  echo "    program: $PYTHON"
  echo "    prepare: $ROOT/python/xv_autoresearch"
  echo "    output: upstream"
  [ "$SANDBOX_USED" = bubblewrap ] && echo "    sandbox: bubblewrap"
  # A command trainer's environment is clean: pass on what the GPU runtime may need.
  echo "    env: [LD_LIBRARY_PATH, CUDA_HOME, NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES,"
  echo "          NCCL_NVLS_ENABLE, TORCH_SYMM_MEM_DISABLE_MULTICAST, NVSHMEM_DISABLE_NVLS]"
} >"$CONFIG"
RECIPE="$OUT_DIR/fork-recipe.yaml"
if [ "$DEVICE" = cuda ]; then
  cat >"$RECIPE" <<EOF
depth: 4
aspect_ratio: 64
head_dim: 64
window_pattern: SL
vocab_size: $VOCAB
sequence_len: 256
device_batch_size: 32
total_batch_size: 16384
time_budget_s: $BUDGET
eval_tokens: 262144
EOF
else
  cat >"$RECIPE" <<EOF
depth: 2
aspect_ratio: 32
head_dim: 32
window_pattern: SL
vocab_size: $VOCAB
sequence_len: 64
device_batch_size: 4
total_batch_size: 512
time_budget_s: $BUDGET
eval_tokens: 2048
threads: 1
EOF
fi

# 7. The system: xvd, one worker, the client over the daemon's unix socket.
STATE="$OUT_DIR/state"
rm -rf "$STATE" "$OUT_DIR/work"
mkdir -p "$STATE"
export XV_STATE_DIR="$STATE" XV_DAEMON="unix:$STATE/xvd.sock"
"$BIN/xvd" --state-dir "$STATE" --listen none >"$OUT_DIR/xvd.log" 2>&1 &
XVD_PID=$!
WORKER_PID=
# shellcheck disable=SC2317  # called by the EXIT trap
stop() {
  [ -n "$WORKER_PID" ] && kill "$WORKER_PID" 2>/dev/null && wait "$WORKER_PID" 2>/dev/null
  kill "$XVD_PID" 2>/dev/null
  wait "$XVD_PID" 2>/dev/null
}
trap stop EXIT
for _ in $(seq 100); do [ -S "$STATE/xvd.sock" ] && break; sleep 0.2; done
[ -S "$STATE/xvd.sock" ] || { tail -20 "$OUT_DIR/xvd.log"; say "xvd did not start"; exit 2; }
if [ "$DEVICE" = cuda ]; then WORKER_DEVICE=cuda:0; else WORKER_DEVICE=cpu; fi
"$BIN/xv-worker" --daemon "$XV_DAEMON" --data "$DATA" --name "fork-$DEVICE" \
  --device "$WORKER_DEVICE" --config "$CONFIG" --work-dir "$OUT_DIR/work" \
  >"$OUT_DIR/worker.log" 2>&1 &
WORKER_PID=$!

submit() {  # submit LOG ARGS...: prints the experiment ids
  local log=$1
  shift
  "$BIN/xvctl" submit "$RECIPE" --campaign gpu-fork "$@" --json >"$OUT_DIR/$log" 2>&1 || {
    cat "$OUT_DIR/$log" >&2; say "submit $* failed"; exit 2; }
  "$PYTHON" -c 'import json, sys; print(*json.load(open(sys.argv[1]))["experiment_ids"])' \
    "$OUT_DIR/$log"
}
fork_sets=()
for s in ${XV_FORK_SET:-}; do fork_sets+=(--set "$s"); done
FORK_ID=$(submit submit-fork.json --trainer fork "${fork_sets[@]}") || exit 2
if [ "$DEVICE" = cuda ]; then
  TRAIN_ID=$(submit submit-xv-train.json --trainer libtorch) || exit 2
else
  # The CPU path trains in fp32 (bf16 autocast on a CPU is slow); the fork has no DTYPE constant,
  # so only xv-train's experiment sets it.
  TRAIN_ID=$(submit submit-xv-train.json --trainer libtorch --set dtype=float32 \
    --set attention_backend=math) || exit 2
fi
say "submitted: fork #$FORK_ID, xv-train #$TRAIN_ID (time_budget_s $BUDGET, sandbox $SANDBOX_USED)"
"$BIN/xvctl" wait --timeout "${XV_BENCH_WAIT:-420}" >"$OUT_DIR/wait.log" 2>&1
WAIT_RC=$?
say "xvctl wait: exit $WAIT_RC"

# 8. What a user reads; the failures' details and the worker's log when something failed.
"$BIN/xvctl" results --json --campaign gpu-fork >"$OUT_DIR/results.json" 2>&1
FAILED=$("$PYTHON" -c '
import json, sys
rows = json.load(open(sys.argv[1])).get("experiments", [])
print(sum(1 for e in rows if e.get("state") != "succeeded"))' "$OUT_DIR/results.json" 2>/dev/null ||
  echo unknown)
{
  if [ "$DEVICE" = cuda ]; then
    where="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  else
    where="the CPU ($(nproc) cores)"
  fi
  echo "an autoresearch fork ($(basename "$(dirname "$SOURCE")")/$(basename "$SOURCE")) next to" \
    "xv-train through xvd + xv-worker + xvctl on $where, torch" \
    "$("$PYTHON" -c 'import torch; print(torch.__version__)'), sandbox $SANDBOX_USED, commit" \
    "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null), $(date -u +%Y-%m-%d)"
  echo
  "$BIN/xvctl" results --campaign gpu-fork 2>&1
  for id in $FORK_ID $TRAIN_ID; do
    echo
    "$BIN/xvctl" show "$id" 2>&1 | head -40
  done
  if [ "$FAILED" != 0 ]; then
    echo
    echo "--- worker.log (tail) ---"
    tail -40 "$OUT_DIR/worker.log"
  fi
} | tee "$OUT_DIR/results.txt"
[ "$WAIT_RC" = 0 ] || exit "$WAIT_RC"
[ "$FAILED" = 0 ] || exit 1
[ "$SANDBOX" = off ] || [ "$SANDBOX_USED" = bubblewrap ] || exit 3
exit 0
