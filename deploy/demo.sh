#!/usr/bin/env bash
# The main job of `make demo`: prepare a small real English corpus, start xvd and one local worker, create a
# campaign with an acceptance policy (recipes/policies/demo.yaml), submit a round of two cpu-tiny candidates
# (the daemon adds two head controls), wait until the round is decided, print the results table (each run's
# decision and its reason), results.tsv and the progress plot, stop what it started, and leave the database
# for `xvctl results --state-dir $STATE_DIR` to read again.
#
#   deploy/demo.sh data   only prepare the corpus (idempotent)
#   deploy/demo.sh all    everything (default)
#
# Environment: BUILD_DIR (build), DATA_DIR (data/demo), STATE_DIR (.xv/demo), CORPUS
# (/usr/share/games/fortunes, from Debian's `fortunes` package: ~2.5 MB of English, one fortune a document).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
DATA_DIR=${DATA_DIR:-data/demo}
STATE_DIR=${STATE_DIR:-.xv/demo}
CORPUS=${CORPUS:-/usr/share/games/fortunes}
BIN=$BUILD_DIR/bin
mode=${1:-all}

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

prepare_data() {
  say "Preparing the demo corpus: $CORPUS -> $DATA_DIR (BPE vocab 8192, token shards; skipped when up to date)"
  "$BIN/xvctl" prepare --input "$CORPUS" --out "$DATA_DIR"
}

prepare_data
[ "$mode" = data ] && exit 0

mkdir -p "$STATE_DIR"
SOCK="$STATE_DIR/xvd.sock"
DAEMON="unix:$SOCK"
pids=()
cleanup() {
  if [ ${#pids[@]} -gt 0 ]; then
    say "Stopping the worker and the daemon (SIGTERM)"
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
      kill -TERM "${pids[$i]}" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "${pids[$i]}" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "${pids[$i]}" 2>/dev/null || true
    done
  fi
}
trap cleanup EXIT

say "Starting xvd (state: $STATE_DIR, socket: $SOCK, log: $STATE_DIR/xvd.log)"
"$BIN/xvd" --state-dir "$STATE_DIR" --listen none >"$STATE_DIR/xvd.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { echo "xvd did not start; see $STATE_DIR/xvd.log"; tail -20 "$STATE_DIR/xvd.log"; exit 1; }

say "Starting one local CPU worker (log: $STATE_DIR/worker.log)"
"$BIN/xv-worker" --daemon "$DAEMON" --data "$DATA_DIR" --name "$(hostname)-cpu" --device cpu \
  --work-dir "$STATE_DIR/worker" >"$STATE_DIR/worker.log" 2>&1 &
pids+=($!)

CAMPAIGN="demo-$(date -u +%Y%m%d-%H%M%S)"
XVCTL=("$BIN/xvctl" --daemon "$DAEMON")
say "Creating campaign $CAMPAIGN: recipes/cpu-tiny.yaml (25 s training budget) as its head, decided by recipes/policies/demo.yaml (a noise band from 2 head controls)"
"${XVCTL[@]}" campaign create "$CAMPAIGN" --recipe recipes/cpu-tiny.yaml --policy recipes/policies/demo.yaml

say "Submitting a round of two candidates from the head: matrix_lr=0.02 and matrix_lr=0.06 (plus the policy's 2 head controls: 4 runs)"
"${XVCTL[@]}" submit --campaign "$CAMPAIGN" --candidate "matrix_lr=0.02" --candidate "matrix_lr=0.06"

say "Waiting for the 4 runs (one after the other on the single CPU worker) and the round's decision"
"${XVCTL[@]}" wait --timeout 900
"${XVCTL[@]}" watch --campaign "$CAMPAIGN" --since 0 --kind decision --kind head --until-idle

say "Results (decision and reason per run)"
"${XVCTL[@]}" results --campaign "$CAMPAIGN"

say "The round's statistics"
"${XVCTL[@]}" campaign show "$CAMPAIGN"

say "The same rows as upstream's results.tsv ($STATE_DIR/results.tsv)"
"${XVCTL[@]}" results --campaign "$CAMPAIGN" --format tsv | tee "$STATE_DIR/results.tsv"

say "The progress plot"
"${XVCTL[@]}" plot --campaign "$CAMPAIGN" -o "$STATE_DIR/progress.svg"

cleanup
pids=()

say "The same rows, straight from the SQLite file ($STATE_DIR/xv.db)"
sqlite3 -header -column "$STATE_DIR/xv.db" \
  "SELECT e.id, e.name, e.state, printf('%.6f', r.val_bpb) AS val_bpb, printf('%.0f', r.tok_per_sec) AS tok_per_sec
     FROM experiments e LEFT JOIN results r ON r.experiment_id = e.id ORDER BY e.id;"

say "Done. Read the results again at any time with: $BIN/xvctl results --state-dir $STATE_DIR --campaign $CAMPAIGN"
echo "Or in a browser (read-only dashboard, docs/dashboard.md): $BIN/xvd --state-dir $STATE_DIR --listen 127.0.0.1:0 --http 127.0.0.1:8470 &"
echo "then open http://127.0.0.1:8470/ (stop it with: kill %1)"
