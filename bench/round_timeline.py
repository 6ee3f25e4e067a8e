#!/usr/bin/env python3
"""Checks one campaign's round on several devices from xvd's database (bench/two-gpu-round.sh).

Reads the state dir's xv.db read-only (xvd may be running: WAL) and prints, per worker: its runs,
busy seconds, energy and average power (from the results' device health); the seconds the workers'
attempts overlapped, pair by pair; the seconds each live worker was idle while an experiment of the
campaign was queued; what happened to the killed worker's experiment (--kill, written by the
script); every experiment's attempts and result rows; the round's decision; PRAGMA integrity_check.

Exit 0 only when: every experiment ended, once (a succeeded one has exactly one result row, of its
final attempt); some attempts of different workers overlapped; no live worker idled more than
--idle-tolerance seconds in all while work was queued; the killed worker's attempt was lost and ran
again, to success, on another worker; the round was decided; integrity_check says ok.

Timing is the attempts' assignment and finish (the daemon's clock), so a worker counts as busy from
its Assign, its trainer's start-up included. A worker counts as live from its first assignment,
except from the kill until its first assignment after the restart (it probes its device first).
"""
import argparse
import datetime
import json
import sqlite3
import sys


def when(text):
    """Seconds since the epoch of the store's UTC time text ('2026-12-02T07:58:01.123Z')."""
    if not text:
        return None
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if "." in text else "%Y-%m-%dT%H:%M:%SZ"
    dt = datetime.datetime.strptime(text, fmt).replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp()


def measure(intervals):
    """Total length of the union of (start, end) intervals."""
    total, cur_start, cur_end = 0.0, None, None
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if cur_end is None or s > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def intersect(a, b):
    """The pairwise intersections of two interval lists."""
    return [(max(s1, s2), min(e1, e2)) for s1, e1 in a for s2, e2 in b if min(e1, e2) > max(s1, s2)]


def subtract(intervals, holes):
    """`intervals` with every hole cut out."""
    out = list(intervals)
    for hs, he in holes:
        nxt = []
        for s, e in out:
            if he <= s or hs >= e:
                nxt.append((s, e))
                continue
            if s < hs:
                nxt.append((s, hs))
            if he < e:
                nxt.append((he, e))
        out = nxt
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, help="the state dir's xv.db")
    ap.add_argument("--campaign", required=True, help="campaign name")
    ap.add_argument("--kill", help="the kill note: {worker, experiment_id, killed_at, restarted_at}")
    ap.add_argument("--workers", type=int, default=2, help="workers that should have run attempts")
    ap.add_argument("--idle-tolerance", type=float, default=5.0,
                    help="seconds a live worker may idle in all while work is queued")
    args = ap.parse_args()
    db = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    failures = []

    row = db.execute("SELECT id FROM campaigns WHERE name = ?", (args.campaign,)).fetchone()
    if row is None:
        print(f"no campaign {args.campaign!r} in {args.db}")
        return 1
    campaign = row[0]
    experiments = db.execute(
        "SELECT id, name, state, attempt, created_at, device_name FROM experiments "
        "WHERE campaign_id = ? ORDER BY id", (campaign,)).fetchall()
    attempts = db.execute(
        "SELECT a.experiment_id, a.attempt, w.name, a.state, a.assigned_at, a.finished_at "
        "FROM attempts a JOIN workers w ON w.id = a.worker_id JOIN experiments e "
        "ON e.id = a.experiment_id WHERE e.campaign_id = ? ORDER BY a.assigned_at", (campaign,)).fetchall()
    results = {}
    for exp, attempt, energy, power in db.execute(
            "SELECT r.experiment_id, r.attempt, r.energy_j, r.avg_power_w FROM results r "
            "JOIN experiments e ON e.id = r.experiment_id WHERE e.campaign_id = ?", (campaign,)):
        results.setdefault(exp, []).append((attempt, energy, power))
    now = max([when(a[5]) or 0 for a in attempts] + [0])

    # Every experiment ended, once.
    terminal = {"succeeded", "diverged", "failed", "invalid", "cancelled", "timed_out", "lost"}
    by_exp = {}
    for a in attempts:
        by_exp.setdefault(a[0], []).append(a)
    print("experiments (id name state: attempts worker/state ...; result rows by attempt)")
    for exp, name, state, attempt, _, device in experiments:
        trail = " ".join(f"{a[1]}:{a[2]}/{a[3]}" for a in sorted(by_exp.get(exp, []), key=lambda a: a[1]))
        rows = sorted(r[0] for r in results.get(exp, []))
        print(f"  #{exp} {name} {state}: {trail}; results {rows} ({device})")
        if state not in terminal:
            failures.append(f"experiment {exp} did not end: {state}")
        if state == "succeeded" and rows != [attempt]:
            failures.append(f"experiment {exp} succeeded with result rows {rows}, not one of attempt {attempt}")

    # Per worker: runs, busy time, energy.
    busy = {}
    for exp, attempt, worker, state, assigned, finished in attempts:
        busy.setdefault(worker, []).append((when(assigned), when(finished) or now))
    energy = {}
    for exp, attempt, worker, *_ in attempts:
        for r_attempt, e_j, p_w in results.get(exp, []):
            if r_attempt == attempt:
                energy.setdefault(worker, []).append((e_j, p_w))
    print("workers (attempts, busy seconds, energy and mean power of their runs' device health)")
    for worker in sorted(busy):
        es = [e for e, _ in energy.get(worker, []) if e is not None]
        ps = [p for _, p in energy.get(worker, []) if p is not None]
        figures = (f"energy {sum(es):.0f} J, mean power {sum(ps) / len(ps):.0f} W" if es and ps
                   else "no energy figures (no NVML)")
        print(f"  {worker}: {len(busy[worker])} attempts, busy {measure(busy[worker]):.1f} s, {figures}")
    if len(busy) < args.workers:
        failures.append(f"{len(busy)} workers ran attempts, expected {args.workers}")

    # Overlap, pair by pair.
    workers = sorted(busy)
    overlapped = 0.0
    for i, a in enumerate(workers):
        for b in workers[i + 1:]:
            o = measure(intersect(busy[a], busy[b]))
            overlapped += o
            print(f"overlap {a} / {b}: {o:.1f} s")
    if overlapped <= 0:
        failures.append("no two workers ran attempts at the same time")

    # Idle while queued.
    queued = []
    for exp, _, _, _, created, _ in experiments:
        trail = sorted(by_exp.get(exp, []), key=lambda a: a[1])
        start = when(created)
        for a in trail:
            queued.append((start, when(a[4])))
            start = when(a[5]) if a[3] == "lost" else None
            if start is None:
                break
        else:
            if start is not None:
                queued.append((start, now))
    kill = None
    if args.kill:
        try:
            with open(args.kill) as f:
                kill = json.load(f)
        except FileNotFoundError:
            kill = None
    print("idle while work was queued (a live worker without an attempt)")
    for worker in workers:
        live = [(min(s for s, _ in busy[worker]), now)]
        if kill and kill["worker"] == worker:
            killed = when(kill["killed_at"])
            back = [s for s, _ in busy[worker] if s >= when(kill["restarted_at"])]
            live = subtract(live, [(killed, min(back) if back else now)])
        idle = subtract(live, busy[worker])
        waste = measure(intersect(idle, queued))
        print(f"  {worker}: {waste:.2f} s")
        if waste > args.idle_tolerance:
            failures.append(f"{worker} idled {waste:.1f} s while work was queued")

    # The killed worker's experiment.
    if kill:
        exp = kill["experiment_id"]
        trail = sorted(by_exp.get(exp, []), key=lambda a: a[1])
        print(f"kill -9 of {kill['worker']} at {kill['killed_at']} running #{exp}; restarted "
              f"{kill['restarted_at']}; its attempts: " + ", ".join(f"{a[1]} on {a[2]}: {a[3]}" for a in trail))
        first = [a for a in trail if a[2] == kill["worker"] and a[3] == "lost"]
        later = [a for a in trail if a[2] != kill["worker"] and a[3] == "succeeded"]
        if not first or not later or later[0][1] <= first[0][1]:
            failures.append(f"experiment {exp}: the killed attempt was not lost and run again on another worker")

    # The round's decision and the database.
    for rid, state, summary in db.execute(
            "SELECT id, state, COALESCE(decision_summary, '') FROM rounds WHERE campaign_id = ? "
            "ORDER BY id", (campaign,)):
        print(f"round {rid} {state}: {summary}")
        if state != "decided":
            failures.append(f"round {rid} is {state}, not decided")
    check = [r[0] for r in db.execute("PRAGMA integrity_check")]
    print("integrity_check: " + "; ".join(check))
    if check != ["ok"]:
        failures.append("integrity_check: " + "; ".join(check))

    for f in failures:
        print("FAILED: " + f)
    print("round_timeline: " + ("all checks passed" if not failures else f"{len(failures)} checks failed"))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
