#!/usr/bin/env bash
# Several hosts on one machine (issue 15): xvd in one network namespace, two xv-workers in two
# others, each joined to the daemon's by a veth pair; real TCP with TLS (a CA and a server
# certificate made here by openssl), each worker with its own worker token. A round of two runs
# spreads over both workers; then, while a second round runs, the link of one worker is cut: its
# attempt is lost after the lease, requeued and run by the other worker; every experiment ends
# succeeded with exactly one result, also after the cut worker comes back with its late report. Skips (exit 77) when not root or without `ip netns`.
# Needs XV_BINARY_DIR (bin/xvd, bin/xv-worker, bin/xvctl) and XV_SOURCE_DIR (the drift trainer).
set -uo pipefail

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces and veth pairs)"
command -v ip >/dev/null || skip "no ip (iproute2)"
command -v openssl >/dev/null || skip "no openssl CLI"
command -v sqlite3 >/dev/null || skip "no sqlite3 CLI"
BIN=${XV_BINARY_DIR:?}/bin
SRC=${XV_SOURCE_DIR:?}
tag=xv$$
ip netns add ${tag}d 2>/dev/null || skip "ip netns add failed (no CAP_SYS_ADMIN in this container?)"
ip netns add ${tag}b && ip netns add ${tag}c

T=$(mktemp -d /tmp/xv-multihost.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for n in d b c; do ip netns del ${tag}$n 2>/dev/null; done
  rm -rf "$T"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$T"/*.log; do echo "== $f"; tail -n 40 "$f"; done
  exit 1
}

# The daemon's host: 10.77.1.1 towards worker b, 10.77.2.1 towards worker c.
link() {  # link NS_SUFFIX DAEMON_IP WORKER_IP
  ip link add ${tag}d$1 type veth peer name ${tag}w$1
  ip link set ${tag}d$1 netns ${tag}d
  ip link set ${tag}w$1 netns ${tag}$1
  ip -n ${tag}d addr add $2/24 dev ${tag}d$1
  ip -n ${tag}$1 addr add $3/24 dev ${tag}w$1
  ip -n ${tag}d link set ${tag}d$1 up
  ip -n ${tag}$1 link set ${tag}w$1 up
  ip -n ${tag}$1 link set lo up
}
ip -n ${tag}d link set lo up
link b 10.77.1.1 10.77.1.2 || fail "veth b"
link c 10.77.2.1 10.77.2.2 || fail "veth c"

# TLS: a CA and the daemon's certificate for both of its addresses.
cd "$T"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=xv-test-ca -keyout ca.key \
  -out ca.pem 2>/dev/null || fail "CA"
echo "subjectAltName=IP:10.77.1.1,IP:10.77.2.1" > server.ext
openssl req -newkey rsa:2048 -nodes -subj /CN=xvd -keyout server.key -out server.csr 2>/dev/null
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
  -extfile server.ext -out server.pem 2>/dev/null || fail "server certificate"

ip netns exec ${tag}d "$BIN/xvd" --state-dir "$T/state" --listen 0.0.0.0:7470 --http off \
  --tls-cert server.pem --tls-key server.key --lease-ms 3000 --heartbeat-ms 200 \
  >"$T/xvd.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$T/state/xvd.sock" ] && break; sleep 0.2; done
[ -S "$T/state/xvd.sock" ] || fail "xvd did not start"
grep -q "tokens required" "$T/xvd.log" || fail "a non-loopback listener must require tokens"

# Tokens: made over the unix socket (a file: every namespace reaches it) by the daemon's owner.
X="$BIN/xvctl --state-dir $T/state"
$X token create --role worker --worker wb >tb 2>/dev/null || fail "token wb"
$X token create --role worker --worker wc >tc 2>/dev/null || fail "token wc"
chmod 600 tb tc
echo "0 0" >load
cat >worker.yaml <<YAML
trainers:
  - name: drift
    kind: command
    program: $SRC/tests/fixtures/drift_trainer.sh
    env: {XV_NOISY_SIGMA: "0.001", XV_DRIFT_LOAD_FILE: "$T/load"}
    output: upstream
YAML
mkdir -p data
start_worker() {  # start_worker NAME NS DAEMON_IP TOKEN_FILE
  ip netns exec ${tag}$2 "$BIN/xv-worker" --daemon "$3:7470" --tls-ca ca.pem --token-file "$4" \
    --name "$1" --data "$T/data" --no-probe --config worker.yaml --work-dir "$T/work-$1" \
    >"$T/$1.log" 2>&1 &
  pids+=($!)
}
start_worker wb b 10.77.1.1 tb
start_worker wc c 10.77.2.1 tc

db() { sqlite3 -readonly "$T/state/xv.db" "$1"; }
wait_for() {  # wait_for SECONDS SQL EXPECTED
  for _ in $(seq $(( $1 * 5 ))); do [ "$(db "$2")" = "$3" ] && return 0; sleep 0.2; done
  fail "after $1 s: $2 gave '$(db "$2")', expected '$3'"
}
wait_for 30 "SELECT COUNT(*) FROM workers WHERE state = 'idle'" 2

# Round 1: two runs, one on each worker (both are free; each worker runs one at a time).
echo "0 2" >load
$X submit "$SRC/recipes/cpu-tiny.yaml" --trainer drift --campaign mh \
  --candidate matrix_lr=0.03 --candidate matrix_lr=0.05 >/dev/null || fail "submit round 1"
wait_for 60 "SELECT COUNT(*) FROM experiments WHERE state = 'succeeded'" 2
wait_for 5 "SELECT COUNT(DISTINCT worker_id) FROM experiments WHERE state = 'succeeded'" 2

# Round 2: long runs; cut worker c's link while both run.
echo "0 8" >load
$X submit "$SRC/recipes/cpu-tiny.yaml" --trainer drift --campaign mh \
  --candidate matrix_lr=0.02 --candidate matrix_lr=0.06 >/dev/null || fail "submit round 2"
wait_for 30 "SELECT COUNT(*) FROM experiments WHERE id > 2 AND state IN ('assigned', 'running')" 2
cut=$(db "SELECT e.id FROM experiments e JOIN workers w ON w.id = e.worker_id
           WHERE e.id > 2 AND w.name = 'wc'")
[ -n "$cut" ] || fail "no round-2 experiment on wc"
ip -n ${tag}d link set ${tag}dc down
echo "0 1" >load
# Lost after the lease (3 s), requeued (attempt 2), run by wb.
wait_for 60 "SELECT state || ' ' || attempt FROM experiments WHERE id = $cut" "succeeded 2"
wait_for 60 "SELECT COUNT(*) FROM experiments WHERE state = 'succeeded'" 4
[ "$(db "SELECT w.name FROM experiments e JOIN workers w ON w.id = e.worker_id
         WHERE e.id = $cut")" = wb ] || fail "experiment $cut did not finish on wb"
# The link comes back: wc reconnects with its spool (its trainer finished attempt 1 meanwhile);
# the late report of the lost attempt adds no result.
ip -n ${tag}d link set ${tag}dc up
wait_for 60 "SELECT state FROM workers WHERE name = 'wc'" idle
sleep 2
# Nothing lost or duplicated: every experiment succeeded once; results are one per finished
# attempt (the cut attempt's late report is kept as attempt 1's, beside attempt 2's), never two
# for one attempt; exactly one attempt was lost and requeued.
[ "$(db "SELECT COUNT(*) FROM experiments WHERE state = 'succeeded'")" = 4 ] || fail "states"
[ "$(db "SELECT COUNT(*) FROM (SELECT DISTINCT experiment_id, attempt FROM results)")" = \
  "$(db "SELECT COUNT(*) FROM results")" ] || fail "two results for one attempt"
[ "$(db "SELECT COUNT(*) FROM results WHERE experiment_id <> $cut")" = 3 ] ||
  fail "results of the other experiments: $(db "SELECT COUNT(*) FROM results WHERE experiment_id <> $cut")"
[ "$(db "SELECT COUNT(*) FROM results WHERE experiment_id = $cut AND attempt = 2")" = 1 ] ||
  fail "no result of attempt 2 of experiment $cut"
[ "$(db "SELECT COUNT(*) FROM events WHERE type = 'lost'")" = 1 ] ||
  fail "lost events: $(db "SELECT COUNT(*) FROM events WHERE type = 'lost'")"
[ "$(db "SELECT COUNT(*) FROM attempts WHERE experiment_id = $cut")" = 2 ] ||
  fail "attempts of experiment $cut: $(db "SELECT COUNT(*) FROM attempts WHERE experiment_id = $cut")"
[ "$(db "SELECT COUNT(*) FROM attempts WHERE experiment_id <> $cut")" = 3 ] || fail "other attempts"
echo "PASS: 4 experiments over 2 namespaced workers with TLS and worker tokens; the cut worker's" \
  "attempt was requeued and finished on the other"
