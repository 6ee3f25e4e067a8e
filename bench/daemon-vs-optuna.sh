#!/bin/bash
# xv's daemon against Optuna on the same machine (issue 18): RUNS runs of xv-bench-daemon (with its
# scale phase) and of Optuna's ask/report/tell with JournalStorage on a file and with its SQLite RDB
# storage (bench/daemon/optuna_peer.py), the same workers and step events per run; then one table,
# min / median / max of the runs, with each figure against its goal. See bench/README.md.
#
# Usage: bench/daemon-vs-optuna.sh [--quick] [--throughput-only] [BUILD_DIR]
#   environment: RUNS (3), WORKERS (8), EVENTS (50), EXPERIMENTS (400 per phase), FILL (100000
#   experiments), FILL_METRICS (10000000 rows), BIG_SUBMIT (10000 rows), PROBE_CALLS (200),
#   INGEST_WORKERS (64) and INGEST_EVENTS (2000): the ingestion run of xv (metric rows/s), one run
#   per worker streaming INGEST_EVENTS step events (xv-bench-daemon's stream window).
#   XVD: the xvd binary to measure (BUILD_DIR's by default; another build's to compare).
#   --quick: small sizes (a minute or two), for a smoke test of the script.
#   --throughput-only: runs/s of xv and of the two Optuna peers only (no scale phase, no
#   ingestion run): a few minutes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
quick=0 throughput_only=0
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --throughput-only) throughput_only=1 ;;
    *) echo "daemon-vs-optuna: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
build="${1:-$here/../build}"
bench="$build/bin/xv-bench-daemon"
xvd="${XVD:-$build/bin/xvd}"
py=/usr/bin/python3
peer="$here/daemon/optuna_peer.py"
for f in "$bench" "$xvd"; do
  [[ -x "$f" ]] || { echo "daemon-vs-optuna: $f is missing: ninja -C $build xv-bench-daemon xvd" >&2; exit 2; }
done
if ! "$py" -c 'import optuna' 2>/dev/null; then
  echo "daemon-vs-optuna: Optuna is missing: apt-get install -y python3-optuna" >&2
  exit 2
fi
RUNS="${RUNS:-3}"
if ((quick)); then
  WORKERS="${WORKERS:-2}" EVENTS="${EVENTS:-5}" EXPERIMENTS="${EXPERIMENTS:-24}"
  INGEST_WORKERS="${INGEST_WORKERS:-4}" INGEST_EVENTS="${INGEST_EVENTS:-20}"
  scale=(--quick)
else
  WORKERS="${WORKERS:-8}" EVENTS="${EVENTS:-50}" EXPERIMENTS="${EXPERIMENTS:-400}"
  INGEST_WORKERS="${INGEST_WORKERS:-64}" INGEST_EVENTS="${INGEST_EVENTS:-2000}"
  scale=(--fill-experiments "${FILL:-100000}" --fill-metrics "${FILL_METRICS:-10000000}"
         --big-submit "${BIG_SUBMIT:-10000}" --probe-calls "${PROBE_CALLS:-200}")
fi
((throughput_only)) && scale=()
out="$(mktemp -d /tmp/xv-daemon-vs-optuna.XXXXXX)"
echo "daemon-vs-optuna: xvd $xvd; $RUNS runs each; $WORKERS workers, $EVENTS step events per run, $EXPERIMENTS runs; figures in $out"
xv_json=() journal_json=() rdb_json=()
for i in $(seq 1 "$RUNS"); do
  echo "run $i: xv-bench-daemon (throughput and scale)"
  "$bench" --xvd "$xvd" --workers "$WORKERS" --experiments "$EXPERIMENTS" --events "$EVENTS" \
    --batch 64 "${scale[@]}" --json "$out/xv-$i.json" > "$out/xv-$i.log" 2>&1 ||
    { echo "xv-bench-daemon failed; its output: $out/xv-$i.log" >&2; tail -20 "$out/xv-$i.log" >&2; exit 1; }
  if ((!throughput_only)); then
    echo "run $i: xv-bench-daemon (ingestion: $INGEST_WORKERS workers x $INGEST_EVENTS step events)"
    "$bench" --xvd "$xvd" --workers "$INGEST_WORKERS" --experiments "$INGEST_WORKERS" \
      --events "$INGEST_EVENTS" --batch 64 --json "$out/ingest-$i.json" > "$out/ingest-$i.log" 2>&1 ||
      { echo "xv-bench-daemon (ingestion) failed: $out/ingest-$i.log" >&2; tail -20 "$out/ingest-$i.log" >&2; exit 1; }
    # The ingestion figure of the table comes from the 64-worker run.
    "$py" - "$out/xv-$i.json" "$out/ingest-$i.json" <<'EOF'
import json, sys
main, ingest = (json.load(open(p)) for p in sys.argv[1:3])
for key in ("metric_rows_per_s", "metric_rows_per_s_whole_phase",
            "xvd_busiest_thread_us_per_step_event"):
    main[key] = ingest.get(key)
main["ingest_xvd_rss_peak_kib"] = ingest.get("xvd_rss_peak_kib")
main["ingest_db_bytes_per_step_event"] = ingest.get("db_bytes_per_step_event")
main["ingest_workers"], main["ingest_events"] = ingest["workers"], ingest["events_per_run"]
json.dump(main, open(sys.argv[1], "w"), indent=2)
EOF
  fi
  xv_json+=("$out/xv-$i.json")
  for storage in journal rdb; do
    echo "run $i: Optuna $storage"
    "$py" "$peer" run --storage "$storage" --workers "$WORKERS" --trials "$EXPERIMENTS" \
      --steps "$EVENTS" --dir "$out/optuna-$storage" > "$out/optuna-$storage-$i.json"
    if [[ $storage == journal ]]; then journal_json+=("$out/optuna-$storage-$i.json"); else rdb_json+=("$out/optuna-$storage-$i.json"); fi
  done
done
echo
echo "$(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$py" "$peer" table --xv "${xv_json[@]}" --journal "${journal_json[@]}" --rdb "${rdb_json[@]}"
