#!/usr/bin/env python3
"""Ranks the GPU kernels of a Kineto trace (xv-train with XV_TRAIN_PROFILE_TRACE) by time.

usage: gpu-kernel-table.py TRACE.json [--steps N] [--top K]

Prints, per optimizer step (the trace's kernel time divided by --steps): the GPU time of each kernel
family (matmul, attention, elementwise, reductions, copies, ...), then the top K kernels by total time
with their share and launch count. Kernel names are shortened to 100 characters.
"""
import argparse
import collections
import json
import re


# First match wins: flash kernels' names mention cutlass types, so attention comes before matmul.
FAMILIES = [
    ("attention (flash, cuDNN)", re.compile(r"flash|fmha|sdpa|cudnn", re.I)),
    ("xv fused kernels", re.compile(r"xv::trainer::kernels", re.I)),
    ("matmul (cuBLAS/CUTLASS)", re.compile(r"gemm|nvjet|xmma|cutlass|sm90_|sm80_", re.I)),
    ("reduction / norm / softmax", re.compile(r"reduce|norm|softmax|logsumexp", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled", re.I)),
    ("copy / cast / fill", re.compile(r"copy|memcpy|memset|fill|cat", re.I)),
]


def family(name):
    for label, pattern in FAMILIES:
        if pattern.search(name):
            return label
    return "other"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    events = trace.get("traceEvents", trace) if isinstance(trace, dict) else trace
    by_name = collections.defaultdict(lambda: [0.0, 0])
    total = 0.0
    first, last = None, None
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = str(ev.get("cat", "")).lower()
        if cat not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        dur = float(ev.get("dur", 0.0))
        ts = float(ev.get("ts", 0.0))
        name = ev.get("name", "?")
        by_name[name][0] += dur
        by_name[name][1] += 1
        total += dur
        first = ts if first is None else min(first, ts)
        last = ts + dur if last is None else max(last, ts + dur)
    if total == 0:
        print("no GPU kernels in the trace")
        return 1
    steps = max(1, args.steps)
    span = (last - first) / 1000.0 / steps
    print(f"GPU kernel time per step: {total / 1000.0 / steps:.1f} ms busy over a {span:.1f} ms span "
          f"({100.0 * total / 1000.0 / steps / span:.0f} % busy), {sum(c for _, c in by_name.values()) // steps} launches")
    fam = collections.defaultdict(float)
    for name, (dur, _) in by_name.items():
        fam[family(name)] += dur
    print()
    print("| kernel family | ms / step | share |")
    print("| --- | --- | --- |")
    for label, dur in sorted(fam.items(), key=lambda kv: -kv[1]):
        print(f"| {label} | {dur / 1000.0 / steps:.1f} | {100.0 * dur / total:.1f} % |")
    print()
    print(f"| top kernels | ms / step | share | launches / step |")
    print("| --- | --- | --- | --- |")
    for name, (dur, count) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[: args.top]:
        short = re.sub(r"\s+", " ", name)[:100].replace("|", "/")
        print(f"| `{short}` | {dur / 1000.0 / steps:.2f} | {100.0 * dur / total:.1f} % | {count // steps} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
