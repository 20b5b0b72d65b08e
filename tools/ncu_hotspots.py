"""Where a kernel's warps stall, from Nsight Compute's source page (SASS with per-instruction samples).

On the GPU machine (tools/gpu_session.sh ncu-wg does all of it):
    ncu -f -o OUT/wg --kernel-name regex:vae_elbo_kernel_wg --launch-skip 1 --launch-count 1 \\
        --section WarpStateStats --section SourceCounters python3 one_forward.py
    ncu -i OUT/wg.ncu-rep --page source --csv --print-source sass > OUT/src.csv
    python3 tools/ncu_hotspots.py OUT/src.csv
Prints the instructions with the most stall samples (with the instructions just before each, which
usually say what is waited for), the samples per stretch of code with its commonest opcodes, the stall
reasons, the phases (the code cut at each mbarrier wait and barrier: each phase's share of the samples, its
length in instructions for one warp and its top stall reasons), and the loads and stores by address space (a generic LD.E that resolves to Shared is a pointer the compiler
lost track of).
"""
import argparse
import collections
import csv
import re

SAMPLES = "Warp Stall Sampling (All Samples)"


def read(path):
    rows = list(csv.reader(open(path, newline="")))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    hdr = rows[head]
    data = [dict(zip(hdr, r)) for r in rows[head + 1:] if len(r) == len(hdr)]
    if not data or SAMPLES not in hdr:
        raise SystemExit(f"{path}: no SASS rows with '{SAMPLES}' (profile with --section SourceCounters)")
    return data


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def opcode(sass):
    return re.sub(r"^@!?U?P\w+\s+", "", sass.strip()).split(" ")[0]


CUTS = ("SYNCS.PHASECHK", "BAR.SYNC", "UCGABAR_WAIT")   # where a phase starts: mbarrier waits, block and cluster barriers


def phases(data):
    """The SASS cut at every wait or barrier: a list of (first, last, samples, warp instructions, warps) per
    stretch, each opening with its cut (the first with the kernel's entry); warps is how many warps executed the
    instruction before it, so warp instructions / warps is the stretch's length for one warp."""
    out, first = [], 0
    for i, r in enumerate(data + [None]):
        if r is not None and not opcode(r["Source"]).startswith(CUTS):
            continue
        if i > first:
            seg = data[first:i]
            out.append((first, i - 1, sum(num(x[SAMPLES]) for x in seg),
                        sum(num(x.get("Instructions Executed")) for x in seg),
                        num(data[max(first - 1, 0)].get("Instructions Executed"))))
        first = i
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--context", type=int, default=4, help="instructions shown before each hot one")
    ap.add_argument("--window", type=int, default=150, help="instructions per stretch in the summary")
    args = ap.parse_args()
    data = read(args.csv)
    total = sum(num(r[SAMPLES]) for r in data) or 1.0
    pct = [num(r[SAMPLES]) / total * 100 for r in data]
    print(f"{len(data)} SASS instructions, {total:.0f} stall samples")

    print(f"\n== the {args.top} instructions with the most samples (index, % of samples, executions, SASS)")
    for i in sorted(range(len(data)), key=lambda i: -pct[i])[:args.top]:
        for j in range(max(0, i - args.context), i + 1):
            mark = ">>" if j == i else "  "
            print(f"{mark}{j:6d} {pct[j]:5.1f}% {num(data[j].get('Instructions Executed')):>10.0f}  {data[j]['Source'][:96]}")
        print()

    print(f"== samples per {args.window} instructions (stretches with >= 1%)")
    for s in range(0, len(data), args.window):
        seg = range(s, min(s + args.window, len(data)))
        share = sum(pct[i] for i in seg)
        if share >= 1.0:
            ops = collections.Counter(opcode(data[i]["Source"]).split(".")[0] for i in seg)
            print(f"{s:6d}-{seg[-1]:6d} {share:5.1f}%  " + ", ".join(f"{k} {v}" for k, v in ops.most_common(8)))

    reasons = [h for h in data[0] if h.startswith("stall_") and "Not Issued" not in h]
    if reasons:   # per-reason sample columns, where this ncu version exports them
        print("\n== stall reasons: share of all samples, and the stretches where each is largest")
        for h in sorted(reasons, key=lambda h: -sum(num(r[h]) for r in data)):
            share = sum(num(r[h]) for r in data) / total * 100
            if share >= 0.5:
                by = [(sum(num(data[i][h]) for i in range(s, min(s + args.window, len(data)))), s)
                      for s in range(0, len(data), args.window)]
                top = ", ".join(f"{s}: {v / total * 100:.1f}%" for v, s in sorted(by, reverse=True)[:4] if v)
                print(f"  {h[:60]:60s} {share:5.1f}%   {top}")
    print("\n== phases: the code cut at each wait or barrier (stretches with >= 0.5% of the samples; while every warp"
          " lives, % ~ share of the time): first-last, %, warp instructions per warp, the cut it opens with, stall reasons")
    for first, last, samples, execs, warps in phases(data):
        if samples / total >= 0.005:
            seg = data[first:last + 1]
            top = sorted(((sum(num(r[h]) for r in seg), h) for h in reasons), reverse=True)[:4]
            why = ", ".join(f"{h[6:]} {v / samples * 100:.0f}%" for v, h in top if v)
            opens = data[first]["Source"].strip()[:54] if first else "(entry)"
            print(f"  {first:5d}-{last:5d} {samples / total * 100:5.1f}%  {execs / max(warps, 1):7.0f}  {opens:54s}  {why}")
    print(f"\n== columns: {', '.join(data[0].keys())}")

    print("\n== loads and stores by address space (instructions in the code, executions)")
    count, execs = collections.Counter(), collections.Counter()
    for r in data:
        op = opcode(r["Source"])
        if op.startswith(("LD", "ST")) and not op.startswith(("LDC", "STL")):
            key = (op, r.get("Address Space", ""))
            count[key] += 1
            execs[key] += num(r.get("Instructions Executed"))
    for key in sorted(count, key=lambda k: -execs[k]):
        print(f"  {key[0]:28s} {key[1] or '-':16s} {count[key]:5d} {execs[key]:12.0f}")


if __name__ == "__main__":
    main()
