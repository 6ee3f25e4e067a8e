#!/usr/bin/env bash
# bench/two-gpu-round.sh: one keep/discard round on every GPU of a host (issue 19): xvd and one
# `xv-worker` per device (`--device cuda:K`, each with its own work directory), `xvctl prepare`, a
# campaign with a Welch policy at a fixed time budget, one round of four `upstream-default`
# candidates with replicates and head controls, a `kill -9` of one worker while the round runs (its
# attempt must be requeued to another device), `xvctl wait`, then what a user reads: `xvctl results
# --wide`, `xvctl workers`, `xvctl campaign show`, and bench/round_timeline.py's check of the
# database: the devices' runs overlapped, no live device idled while work was queued, the killed
# worker's attempt ran again elsewhere, every experiment ended once with one result, integrity_check.
#
# Runs from a clean checkout on the GPU machine (../shared/gpu-build.md): unpacks the carried .debs
# when the image lacks gRPC, configures against the installed PyTorch's LibTorch (Release, tests off)
# and builds xvd, xv-worker, xvctl and xv-train. XV_ROUND_STOP_AFTER=build ends after the build and
# the data (the device tool's per-call limit: build in one call, run the round in the next while the
# machine is warm).
#
# XV_ROUND_DEVICE_KIND=cpu runs the same steps without a GPU (two CPU workers, recipes/cpu-tiny.yaml
# at 256-token steps, an 8 s budget, the existing build directory `build`): how the script is checked
# where there is no GPU.
#
# Environment (all optional):
#   XV_ROUND_DEVICE_KIND cuda (default) | cpu
#   XV_ROUND_DEVICES     the workers' devices, one worker each (default: cuda:K for every GPU that
#                        nvidia-smi lists; with a single GPU "cuda:0 cuda:0", two workers sharing
#                        it, which the summary says; "cpu cpu" on cpu)
#   XV_ROUND_RECIPE      the campaign's recipe (default recipes/upstream-default.yaml; on cpu, cpu-tiny
#                        with shorter steps)
#   XV_ROUND_BUDGET_S    the campaign's time_budget_s (default 60; 8 on cpu)
#   XV_ROUND_REPLICATES  runs of each candidate (default 2), XV_ROUND_CONTROLS head controls (2)
#   XV_ROUND_CANDIDATES  the four candidates, ';'-separated (default below)
#   XV_ROUND_DRIFT       the policy's max_throughput_drift (default 0.10)
#   XV_ROUND_EVAL_TOKENS the campaign's eval_tokens (default: the recipe's)
#   XV_ROUND_KILL        1 (default): kill -9 one worker mid-round | 0
#   XV_ROUND_DEADLINE_S  stop waiting this many seconds after the start (default 560)
#   XV_ROUND_TRAINER_BIN the workers' --trainer-bin (default: BUILD/bin/xv-train), e.g.
#                        tests/fixtures/fake_trainer.sh (XV_FAKE_STEPS, XV_FAKE_STEP_SECONDS) to check
#                        the script's orchestration in seconds
#   XV_BENCH_DATA        a data directory made by `xvctl prepare` (vocab 8192); default: BUILD/round-data,
#                        prepared here from XV_BENCH_CORPUS (default /usr/share/games/fortunes, as
#                        `make demo`; the GPU image has none: carry a copy)
#   XV_BENCH_OUT         logs, state and tables (default BUILD/two-gpu-round)
#   XV_BENCH_BUILD       build directory (default build-gpu on cuda, build on cpu)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KIND=${XV_ROUND_DEVICE_KIND:-cuda}
case "$KIND" in
  cuda | cpu) ;;
  *) echo "XV_ROUND_DEVICE_KIND: expected cuda or cpu, got '$KIND'" >&2; exit 2 ;;
esac
T0=$(date +%s)
say() { echo "[two-gpu-round $(date -u +%H:%M:%S)] $*" >&2; }

if [ "$KIND" = cuda ]; then
  BUILD=${XV_BENCH_BUILD:-$ROOT/build-gpu}
  RECIPE=${XV_ROUND_RECIPE:-$ROOT/recipes/upstream-default.yaml}
  BUDGET=${XV_ROUND_BUDGET_S:-60}
  CORPUS=${XV_BENCH_CORPUS:-/usr/share/games/fortunes}
else
  BUILD=${XV_BENCH_BUILD:-$ROOT/build}
  RECIPE=${XV_ROUND_RECIPE:-}
  BUDGET=${XV_ROUND_BUDGET_S:-8}
  CORPUS=${XV_BENCH_CORPUS:-/usr/share/games/fortunes}
fi
OUT_DIR=${XV_BENCH_OUT:-$BUILD/two-gpu-round}
mkdir -p "$OUT_DIR"
if [ -z "$RECIPE" ]; then
  # cpu: recipes/cpu-tiny.yaml at 256-token steps (64-token rows), so that a step of two trainers on
  # a shared 2-core machine takes about a second.
  RECIPE="$OUT_DIR/cpu-tiny-short.yaml"
  sed -e 's/^sequence_len: [0-9]*/sequence_len: 64/' -e 's/^device_batch_size: [0-9]*/device_batch_size: 2/' \
    -e 's/^total_batch_size: [0-9]*/total_batch_size: 256/' -e 's/^eval_tokens: [0-9]*/eval_tokens: 4096/' \
    "$ROOT/recipes/cpu-tiny.yaml" >"$RECIPE"
fi
BIN="$BUILD/bin"

# 1. Packages the image lacks (gpu-build.md), then the build (cpu: the existing build directory).
if [ "$KIND" = cuda ]; then
  if [ -d "$ROOT/.debs" ] && [ ! -e /usr/include/grpcpp/grpcpp.h ]; then
    for f in "$ROOT"/.debs/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || {
    say "no PyTorch in python3: cannot find a CUDA LibTorch"; exit 2; }
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
    -DXV_BUILD_TESTS=OFF -DXV_BUILD_BENCH=OFF -DXV_STATIC_XVCTL=OFF >"$OUT_DIR/configure.log" 2>&1 || {
    tail -30 "$OUT_DIR/configure.log"; say "configure failed"; exit 2; }
  ninja -C "$BUILD" -j"$(nproc)" xvd xv-worker xvctl xv-train >"$OUT_DIR/build.log" 2>&1 || {
    grep -B2 -A12 "error" "$OUT_DIR/build.log" | head -60; say "build failed"; exit 2; }
  say "built xvd xv-worker xvctl xv-train ($(( $(date +%s) - T0 )) s so far)"
fi
for b in xvd xv-worker xvctl xv-train; do
  [ -x "$BIN/$b" ] || { say "$BIN/$b is missing: ninja -C $BUILD xvd xv-worker xvctl xv-train"; exit 2; }
done

# 2. Data.
DATA=${XV_BENCH_DATA:-}
if [ -z "$DATA" ] || [ ! -f "$DATA/prepare.json" ]; then
  DATA="$BUILD/round-data"
  if [ ! -f "$DATA/prepare.json" ]; then
    [ -d "$CORPUS" ] || { say "no corpus $CORPUS: set XV_BENCH_CORPUS or XV_BENCH_DATA"; exit 2; }
    "$BIN/xvctl" prepare --input "$CORPUS" --out "$DATA" >"$OUT_DIR/prepare.log" 2>&1 || {
      tail -20 "$OUT_DIR/prepare.log"; say "xvctl prepare failed"; exit 2; }
  fi
fi
say "data: $DATA"
[ "${XV_ROUND_STOP_AFTER:-}" = build ] && { say "XV_ROUND_STOP_AFTER=build: done"; exit 0; }

# 3. The devices: one worker each.
if [ -n "${XV_ROUND_DEVICES:-}" ]; then
  read -r -a DEVICES <<<"$XV_ROUND_DEVICES"
elif [ "$KIND" = cuda ]; then
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  [ "$GPUS" -ge 1 ] || { say "nvidia-smi lists no GPU"; exit 2; }
  DEVICES=()
  for ((k = 0; k < GPUS; ++k)); do DEVICES+=("cuda:$k"); done
  [ "$GPUS" -eq 1 ] && DEVICES=(cuda:0 cuda:0)
else
  DEVICES=(cpu cpu)
fi
[ "${#DEVICES[@]}" -ge 2 ] || { say "need at least two workers, got devices: ${DEVICES[*]}"; exit 2; }
say "workers on: ${DEVICES[*]}"

STATE="$OUT_DIR/state"
rm -rf "$STATE" "$OUT_DIR"/work-* "$OUT_DIR"/kill.json "$OUT_DIR"/worker-*.log
mkdir -p "$STATE"
export XV_STATE_DIR="$STATE" XV_DAEMON="unix:$STATE/xvd.sock"
[ "$KIND" = cpu ] && export OMP_NUM_THREADS=1
"$BIN/xvd" --state-dir "$STATE" --listen none >"$OUT_DIR/xvd.log" 2>&1 &
XVD_PID=$!
for _ in $(seq 100); do [ -S "$STATE/xvd.sock" ] && break; sleep 0.2; done
[ -S "$STATE/xvd.sock" ] || { tail -20 "$OUT_DIR/xvd.log"; say "xvd did not start"; exit 2; }

TRAINER_BIN=${XV_ROUND_TRAINER_BIN:-$BIN/xv-train}
WORKER_PIDS=()
start_worker() {  # start_worker K: worker K on DEVICES[K], named wK, work dir work-K
  local k=$1
  "$BIN/xv-worker" --daemon "$XV_DAEMON" --data "$DATA" --name "w$k-${DEVICES[$k]/:/}" \
    --device "${DEVICES[$k]}" --work-dir "$OUT_DIR/work-$k" --trainer-bin "$TRAINER_BIN" \
    >>"$OUT_DIR/worker-$k.log" 2>&1 &
  WORKER_PIDS[$k]=$!
}
stop_all() {
  for pid in "${WORKER_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${WORKER_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  kill "$XVD_PID" 2>/dev/null
  wait "$XVD_PID" 2>/dev/null
}
trap stop_all EXIT
for k in "${!DEVICES[@]}"; do start_worker "$k"; done

# 4. The campaign and its round.
POLICY="$OUT_DIR/policy.yaml"
cat >"$POLICY" <<EOF
mode: welch
confidence: 0.95
min_effect: 0.0005
replicates: ${XV_ROUND_REPLICATES:-2}
head_controls: ${XV_ROUND_CONTROLS:-2}
max_keeps_per_round: 1
correction: bonferroni
max_throughput_drift: ${XV_ROUND_DRIFT:-0.10}
EOF
BUDGET_JSON="{\"time_budget_s\": $BUDGET${XV_ROUND_EVAL_TOKENS:+, \"eval_tokens\": $XV_ROUND_EVAL_TOKENS}}"
"$BIN/xvctl" campaign create round --recipe "$RECIPE" --policy "$POLICY" --budget "$BUDGET_JSON" >"$OUT_DIR/campaign.log" 2>&1 || {
  cat "$OUT_DIR/campaign.log"; say "campaign create failed"; exit 2; }
IFS=';' read -r -a CANDIDATES <<<"${XV_ROUND_CANDIDATES:-matrix_lr=0.03;matrix_lr=0.05;embedding_lr=0.4;warmdown_ratio=0.3}"
[ "${#CANDIDATES[@]}" -eq 4 ] || say "note: ${#CANDIDATES[@]} candidates, not four"
cand_args=()
for c in "${CANDIDATES[@]}"; do cand_args+=(--candidate "$c"); done
"$BIN/xvctl" submit --campaign round "${cand_args[@]}" --json >"$OUT_DIR/submit.json" 2>"$OUT_DIR/submit.err" || {
  cat "$OUT_DIR/submit.err"; say "submit failed"; exit 2; }
say "submitted: $(cat "$OUT_DIR/submit.json")"

# 5. kill -9 of the worker that last took an experiment, once every worker is running one; it is
# started again (same work dir) once its experiment's next attempt was assigned to another worker.
deadline=$((T0 + ${XV_ROUND_DEADLINE_S:-560}))
KILL_NOTE="$OUT_DIR/kill.json"
if [ "${XV_ROUND_KILL:-1}" = 1 ]; then
  victim="" victim_exp=""
  while [ "$(date +%s)" -lt "$deadline" ]; do
    # Every worker name with the running experiment it holds; all busy for >= 20 % of the budget.
    # Prints "WORKER ID" once every worker runs an experiment, "done" when nothing is left to run.
    pick=$("$BIN/xvctl" results --campaign round --json 2>/dev/null | python3 -c '
import json, sys
rows = json.load(sys.stdin)["experiments"]
running = {r["worker"]: r["id"] for r in rows
           if r["state"] == "running" and r.get("progress", 0) >= 0.2}
if len(running) >= int(sys.argv[1]):
    w = sorted(running)[-1]
    print(w, running[w])
elif all(r["state"] not in ("queued", "assigned", "running") for r in rows):
    print("done")
' "${#DEVICES[@]}")
    [ "$pick" = done ] && break
    if [ -n "$pick" ]; then read -r victim victim_exp <<<"$pick"; break; fi
    sleep 2
  done
  if [ -n "$victim" ]; then
    k=${victim#w}
    k=${k%%-*}
    kill -9 "${WORKER_PIDS[$k]}"
    wait "${WORKER_PIDS[$k]}" 2>/dev/null
    killed_at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
    say "kill -9 of worker $victim (pid ${WORKER_PIDS[$k]}) running experiment $victim_exp"
    restarted_at=""
    while [ "$(date +%s)" -lt "$deadline" ]; do
      # The experiment's current attempt > 1 and held by another worker: the requeue went elsewhere.
      if "$BIN/xvctl" show "$victim_exp" --json 2>/dev/null | python3 -c '
import json, sys
e = json.load(sys.stdin)
e = e.get("experiment", e)
sys.exit(0 if e["attempt"] > 1 and e["worker"] not in ("", sys.argv[1]) else 1)
' "$victim"; then
        start_worker "$k"
        restarted_at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
        say "experiment $victim_exp requeued to another worker; worker $victim started again"
        break
      fi
      sleep 1
    done
    [ -n "$restarted_at" ] || { start_worker "$k"; restarted_at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ);
      say "the requeue of $victim_exp was not seen on another worker before the deadline"; }
    printf '{"worker": "%s", "experiment_id": %s, "killed_at": "%s", "restarted_at": "%s"}\n' \
      "$victim" "$victim_exp" "$killed_at" "$restarted_at" >"$KILL_NOTE"
  else
    say "no moment with every worker running: no kill"
  fi
fi

# 6. Wait, then what a user reads.
left=$((deadline - $(date +%s)))
[ "$left" -lt 10 ] && left=10
"$BIN/xvctl" wait --timeout "$left" >"$OUT_DIR/wait.log" 2>&1
WAIT_RC=$?
say "xvctl wait: exit $WAIT_RC"
{
  echo "## $(basename "$RECIPE") round on ${DEVICES[*]}, ${BUDGET} s budget; commit" \
    "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%Y-%m-%d)" \
    "$( [ "$KIND" = cuda ] && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c | tr '\n' ' ')"
  echo
  echo "### xvctl results --campaign round --wide"
  "$BIN/xvctl" results --campaign round --wide 2>&1
  echo
  echo "### xvctl workers"
  "$BIN/xvctl" workers 2>&1
  echo
  echo "### xvctl campaign show round"
  "$BIN/xvctl" campaign show round 2>&1
  echo
  echo "### bench/round_timeline.py"
  kill_args=()
  [ -f "$KILL_NOTE" ] && kill_args=(--kill "$KILL_NOTE")
  python3 "$ROOT/bench/round_timeline.py" --db "$STATE/xv.db" --campaign round "${kill_args[@]}" \
    --workers "${#DEVICES[@]}"
  echo "round_timeline: exit $?"
} 2>&1 | tee "$OUT_DIR/summary.txt"
TIMELINE_RC=$(grep -c '^round_timeline: exit 0$' "$OUT_DIR/summary.txt")
[ "$WAIT_RC" -eq 0 ] && [ "$TIMELINE_RC" -eq 1 ]
