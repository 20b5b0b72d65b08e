"""Every cluster-kernel block's phase ends on one clock (%globaltimer), so the launch's spread, each phase
across the blocks, and the tail after the last block are seen together (GPU).

Builds solution.py with -DVAE_TIMELINE (each block's thread 0 prints its stamps at exit), runs a few warm
forwards per batch size, and prints for the median call each stamp's earliest / median / latest time over
the blocks, in µs from the first block's entry. Stamps: entry, x tile landed, encoder done and W2 copies
issued, h slices landed, z landed, decoder hidden done, W2 landed, last layer done, row sums pushed, on rank
0 only: peers' sums landed, outputs stored; last, the encoder's arithmetic done (before the W2 copies) and
the BCE pass's start. At R <= 9 (phases 2-3 by row owners) "h landed" is the owned rows' mu | logvar partials
landed, "z landed" the block's own h2 rows pushed, "dec hidden" every h2 row landed, "W2 landed" W2's
operands loaded into registers (before the h2 wait; with notes/ck-s25.patch's VAE_CK_W2A while the partials
travel), "BCE done" the last layer's end, and every block stores its owned rows (the rank-0 columns show
rank 0's). With --warps, per warp slot: when each of the 8 main warps ended the encoder and when the noise
warp handed its values over, and which main warp ended its block's encoder last.

Run on the GPU machine from the repository root (about a minute with the build):
    python3 tools/timeline.py [--sizes 1,128] [--flags="-DVAE_CK_STOP=3"]
"""
import argparse
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAMPS = ("entry", "x landed", "enc + W2 issue", "h landed", "z landed", "dec hidden", "W2 landed", "last layer",
          "sums pushed", "rank0: sums in", "rank0: stored", "encoder math", "BCE done", "partials staged", "partials sent")
EVERY_BLOCK = (11, 12, 13, 14)   # stamps past the printed count that every block takes (13, 14: R <= 9; 0 at R = 16)


def child(sizes, calls, flags):
    os.environ["VAE_EXTRA_CUDA_FLAGS"] = f"-DVAE_TIMELINE {flags}".strip()
    sys.path.insert(0, REPO)
    import torch
    import solution
    model = solution.ModelNew(784, 256, 32).cuda()
    a = torch.randn(4096, 4096, device="cuda")
    for B in sizes:
        x = torch.rand(B, 784, device="cuda")
        for _ in range(5):
            model(x)
        torch.cuda.synchronize()
        for _ in range(200):   # warm the clock
            a @ a
        for k in range(calls):
            print(f"call {B} {k}", flush=True)
            model(x)
            torch.cuda.synchronize()
        print("end", flush=True)


def _by_call(text, tag, add, new):
    """{B: [call, ...]}: the child's lines split at its "call B k" markers, each `tag` line's fields folded into the
    current call by add(call, fields); new() makes an empty call."""
    calls, cur = {}, None
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "call":
            cur = new()
            calls.setdefault(int(f[1]), []).append(cur)
        elif f and f[0] == tag and cur is not None:
            add(cur, f)
    return calls


def parse(text):
    """{B: [call, ...]}, a call a list of (block, last stamp index + 1, stamps)."""
    return _by_call(text, "tl", lambda c, f: c.append((int(f[1]), int(f[3]), [int(v) for v in f[4:]])), list)


def parse_warps(text):
    """{B: [{block: [9 ns stamps]}, ...] per call}: the "tw" lines (warps 0-7's encoder ends, the noise warp's
    hand-over)."""
    return _by_call(text, "tw", lambda c, f: c.__setitem__(int(f[1]), [int(v) for v in f[3:]]), dict)


def per_warp(call, warps):
    """Per warp slot (0-7 the main warps' encoder ends, 8 the noise warp's hand-over): (name, min, median, max) in
    µs from the call's first entry over the blocks, and how often each main warp ended its block's encoder last."""
    t0 = min(s[0] for _, _, s in call)
    rows = []
    for i in range(9):
        v = [(w[i] - t0) / 1e3 for w in warps.values()]
        rows.append(("noise hand-over" if i == 8 else f"warp {i} encoder", min(v), statistics.median(v), max(v)))
    last = [0] * 8
    for w in warps.values():
        last[w[:8].index(max(w[:8]))] += 1
    return rows, last


def summary(call):
    t0 = min(s[0] for _, _, s in call)
    ends = [s[n - 1] for _, n, s in call]
    rows = []
    for i, name in enumerate(STAMPS):
        v = [(s[i] - t0) / 1e3 for _, n, s in call if (i < n or i in EVERY_BLOCK) and i < len(s) and s[i] > 0]
        if v:
            rows.append((name, min(v), statistics.median(v), max(v), len(v)))
    return rows, (max(ends) - t0) / 1e3


def per_cluster(call, cluster=8):
    """Per cluster (blocks cluster c .. c + 7) of one call, µs from the first entry: its blocks' entry spread, its
    latest x landed and encoder done (the stamp before the exchange), its first and last 'h landed', and the gap
    between its latest encoder and its first 'h landed' (what the exchange takes once every block is ready)."""
    t0 = min(s[0] for _, _, s in call)
    by = {}
    for b, _, s in call:
        by.setdefault(b // cluster, []).append((b % cluster, [(v - t0) / 1e3 for v in s]))
    rows = []
    for c, blocks in sorted(by.items()):
        if len(blocks) < cluster:
            continue
        blocks = [s for _, s in sorted(blocks)]   # by rank
        e = [s[2] for s in blocks]
        h = [s[3] for s in blocks]
        rows.append({"entry spread": max(s[0] for s in blocks) - min(s[0] for s in blocks),
                     "x landed, latest": max(s[1] for s in blocks),
                     "encoder, median": statistics.median(e), "encoder, latest": max(e),
                     "h landed, first": min(h), "h landed, last": max(h), "latest enc -> first h": min(h) - max(e),
                     "slowest encoder's rank": e.index(max(e))})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,128")
    ap.add_argument("--calls", type=int, default=7)
    ap.add_argument("--flags", default="", help="more nvcc flags (dev switches), e.g. -DVAE_CK_XMC")
    ap.add_argument("--clusters", action="store_true", help="per-cluster view of the median call (encoder -> exchange)")
    ap.add_argument("--warps", action="store_true", help="per warp: the encoder's end, the noise warp's hand-over")
    ap.add_argument("--raw", help="also write the child's stamp lines to this file")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    sizes = [int(b) for b in args.sizes.split(",")]
    if args.child:
        child(sizes, args.calls, args.flags)
        return
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--sizes", args.sizes,
                        "--calls", str(args.calls), "--flags=" + args.flags], capture_output=True, text=True, cwd=REPO)
    if p.returncode != 0:
        sys.exit(f"the timeline build or run failed (rc {p.returncode}):\n{p.stderr[-3000:]}")
    if args.raw:
        with open(args.raw, "w") as f:
            f.write(p.stdout)
    warp_calls = parse_warps(p.stdout)
    for B, calls in parse(p.stdout).items():
        spans = sorted((summary(c)[1], k) for k, c in enumerate(calls) if c)
        span, k = spans[len(spans) // 2]
        rows, _ = summary(calls[k])
        print(f"\nB = {B}: {len(calls[k])} blocks; first entry to last exit {span:.2f} us (median of {len(spans)} "
              f"calls: {', '.join(f'{s:.2f}' for s, _ in spans)})")
        print(f"{'stamp':16s} {'first':>7s} {'median':>7s} {'last':>7s} blocks   (us from the first entry)")
        for name, lo, med, hi, n in rows:
            print(f"{name:16s} {lo:7.2f} {med:7.2f} {hi:7.2f} {n:6d}")
        if args.warps and warp_calls.get(B) and len(warp_calls[B]) == len(calls) and warp_calls[B][k]:
            rows, last = per_warp(calls[k], warp_calls[B][k])
            print("per warp: min / median / max over the blocks (us from the first entry)")
            for name, lo, med, hi in rows:
                print(f"  {name:16s} {lo:7.2f} {med:7.2f} {hi:7.2f}")
            print("  blocks whose encoder ended last in warp 0..7: " + " ".join(map(str, last)))
        elif args.warps:
            print("per warp: no `tw` stamps for this call (the build's solution.py predates them, session 38)")
        if args.clusters:
            pc = per_cluster(calls[k])
            if pc:
                print(f"per cluster ({len(pc)}): min / median / max over the clusters")
                for key in pc[0]:
                    v = [r[key] for r in pc]
                    if key.endswith("rank"):
                        print(f"  {key:24s} " + " ".join(str(x) for x in v))
                    else:
                        print(f"  {key:24s} {min(v):7.2f} {statistics.median(v):7.2f} {max(v):7.2f}")


if __name__ == "__main__":
    main()
