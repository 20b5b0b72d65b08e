"""Side-by-side GPU time of solution.py variants, in one process, rounds interleaved.

Each variant is NAME=SOURCE[|FLAGS]: SOURCE is a solution file or @REV (solution.py at a git revision,
written to build/ab/REV/solution.py), FLAGS extra nvcc flags (the dev switches in tools/kernel_dev.py
VARIANTS). The GPU machine gets no .git: write the revisions here first (--save) and carry build/ab.
Every variant is built as its own extension (in parallel, one process each), checked in its own
process (max |diff| to eager and error / eager's error against float64; a variant that crashes or
hangs is reported and left out), then timed: CUDA-graph replay of 20 calls per sample, the variants
alternating within each of `--rounds` rounds, the median printed. Run on the GPU machine from the
repository root, e.g.

    python3 tools/ab_variants.py main=@main new=solution.py "noload=solution.py|-DVAE_WG_NO_LOAD"

(here, before that device call: python3 tools/ab_variants.py --save main=@main; carry build/ab)
"""
import argparse
import importlib.util
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK_SIZES = (1, 129, 8193)


def parse_spec(spec: str):
    """'name=source|flags' -> (name, source, flags); a name and a source are required."""
    name, eq, rest = spec.partition("=")
    source, _, flags = rest.partition("|")
    if not eq or not name.isidentifier() or not source:
        raise ValueError(f"variant {spec!r}: expected NAME=SOURCE[|FLAGS], NAME a Python identifier")
    return name, source, flags.strip()


def source_path(source: str) -> str:
    """A solution file for SOURCE: the path itself, or for '@REV' solution.py at git revision REV, written
    to build/ab/REV/solution.py (where git does not know REV, as on the GPU machine, the copy written before)."""
    if not source.startswith("@"):
        if not os.path.isfile(source):
            raise ValueError(f"no such solution file: {source}")
        return source
    rev = source[1:]
    if not rev or not all(ch.isalnum() or ch in "-_.~^" for ch in rev):
        raise ValueError(f"revision {rev!r}: letters, digits and - _ . ~ ^ only")
    out = os.path.join(REPO, "build", "ab", rev.replace("~", "_t").replace("^", "_c"), "solution.py")
    try:
        text = subprocess.run(["git", "-C", REPO, "show", f"{rev}:solution.py"], capture_output=True, text=True)
    except FileNotFoundError:
        text = None
    if text is None or text.returncode != 0:
        if os.path.isfile(out):   # saved where the branch was (the GPU machine's copy has main only)
            print(f"{source}: git show failed, using the saved {os.path.relpath(out, REPO)}", file=sys.stderr)
            return out
        why = text.stderr.strip() if text is not None else "no git on this machine"
        raise ValueError(f"git show {rev}:solution.py failed: {why} (no saved copy: run --save {source} where git is)")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(text.stdout)
    return out


def build_flags(name: str, flags: str) -> str:
    """The variant's own define makes its extension name unique even where two sources share flags."""
    return f"{flags} -DVAE_AB_{name}".strip()


def load(name: str, path: str, flags: str):
    os.environ["VAE_EXTRA_CUDA_FLAGS"] = build_flags(name, flags)
    spec = importlib.util.spec_from_file_location(f"ab_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def models(module):
    import torch
    import reference
    torch.manual_seed(0)
    ref = reference.Model(784, 256, 32).cuda()
    new = module.ModelNew(784, 256, 32).cuda()
    new.load_state_dict(ref.state_dict())
    return ref, new


def check(module, rows: list, sizes=CHECK_SIZES) -> str:
    """Max |diff| to eager (elbo, recon, kl) and error / eager's error against float64, per rows_per_tile
    and B (a rows_per_tile the variant rejects is named so)."""
    from kernel_dev import error_line
    ref, new = models(module)
    def one(B, r):
        try:
            return error_line(ref, new, module._ext, B, r)
        except RuntimeError as e:
            return f"B={B} rejected ({str(e).splitlines()[0][:80]})"
    return " | ".join(f"rows {r}: " + "; ".join(one(B, r) for B in sizes) for r in rows)


def child(args, spec: str, what: str, timeout_s: int):
    """Run this tool on one variant in its own process; (ok, last line of its output)."""
    cmd = [sys.executable, os.path.abspath(__file__), f"--{what}", "--rows", args.rows,
           "--check-sizes", args.check_sizes, spec]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=REPO)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout_s} s"
    lines = (p.stdout + p.stderr).strip().splitlines() or ["(no output)"]
    return p.returncode == 0, lines[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="+", help="NAME=SOURCE[|FLAGS]")
    ap.add_argument("--sizes", default="4096,16384,65536", help="batch sizes to time (comma list)")
    ap.add_argument("--rows", default="0", help="rows_per_tile passed to forward, comma list: a column per "
                    "variant and value (default 0: the automatic pick, what the harness times)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--check-sizes", default=",".join(map(str, CHECK_SIZES)),
                    help="batch sizes each variant is checked at against eager before timing (comma list)")
    ap.add_argument("--no-eager", action="store_true", help="leave out the eager-in-a-CUDA-graph column")
    ap.add_argument("--back-to-back", action="store_true",
                    help="time all replays between one event pair (no host gap), not an event pair per replay")
    ap.add_argument("--per-call", action="store_true",
                    help="time each call as the harness does (CUDA events around one call and a sync, 200 calls "
                    "per sample): host work counts, for host-path changes")
    ap.add_argument("--save", action="store_true", help="only write the @REV sources under build/ab (no GPU needed)")
    ap.add_argument("--build", action="store_true", help=argparse.SUPPRESS)   # one variant, in a child
    ap.add_argument("--check", action="store_true", help=argparse.SUPPRESS)   # one variant, in a child
    args = ap.parse_args()
    sys.path.insert(0, REPO)
    sys.path.insert(0, os.path.join(REPO, "tools"))
    specs = [parse_spec(s) for s in args.variants]
    if args.save:
        for name, source, _ in specs:
            print(f"{name}: {source_path(source)}")
        return
    if args.build or args.check:
        name, source, flags = specs[0]
        module = load(name, source_path(source), flags)
        print(check(module, [int(r) for r in args.rows.split(",")], [int(b) for b in args.check_sizes.split(",")])
              if args.check else f"built {name}")
        return
    import concurrent.futures as cf
    with cf.ThreadPoolExecutor(len(specs)) as pool:   # nvcc runs in parallel, one process per variant
        built = list(pool.map(lambda s: child(args, s, "build", 900), args.variants))
    timed = []
    for spec, (name, source, flags), (ok, line) in zip(args.variants, specs, built):
        if ok:
            ok, line = child(args, spec, "check", 120)
        print(f"{name:>12s}: {'ok ' if ok else 'FAILED '}{line}", flush=True)
        if ok:
            timed.append((name, load(name, source_path(source), flags)))
    if not timed:
        sys.exit("no variant built and ran")
    import torch
    from kernel_dev import graph_us
    from launch_probe import graph_us as back_to_back_us   # 20 replays between one event pair, median of 5
    timer = back_to_back_us if args.back_to_back else graph_us
    if args.per_call:
        from harness import timing
        timing.warm_clock(torch.device("cuda"), 2.0)
        def timer(fn, calls):
            with torch.no_grad():
                return timing.time_cuda(fn, device=torch.device("cuda"), iters=200, warmup=20)["median_us"]
    rows = [int(r) for r in args.rows.split(",")]
    x1 = torch.rand(1, 784, device="cuda")
    nets = []   # (column, forward of x): each variant at each rows_per_tile it accepts
    for name, module in timed:
        net = models(module)[1]
        for r in rows:
            try:
                net(x1, r)
            except RuntimeError:
                continue
            nets.append((name if len(rows) == 1 else f"{name}/{r}", lambda x, net=net, r=r: net(x, r)))
    eager = models(timed[0][1])[0]
    eager_name = "eager" if args.per_call else "eager graph"   # per call: eager's own call, else its kernels
    if not args.no_eager:   # the reference's kernels in one graph: the yardstick, same process
        nets.append((eager_name, lambda x: eager(x)))
    if args.per_call:   # the other yardstick: a load_inline call that launches an empty kernel
        from harness.bench import noop_extension
        noop = noop_extension()
        nets.insert(len(nets) - (not args.no_eager), ("no-op call", lambda x: noop.noop(x)))
    how = ("us per call (CUDA events around one call and a sync, median of 200 calls" if args.per_call else
           "GPU us per forward (CUDA-graph replay of 20 calls, " +
           ("20 replays back to back" if args.back_to_back else "an event pair per replay"))
    print(f"\n{how}, median of {args.rounds} interleaved rounds), rows_per_tile {args.rows}")
    print(f"{'B':>7s} " + " ".join(f"{name:>12s}" for name, _ in nets))
    for B in (int(b) for b in args.sizes.split(",")):
        x = torch.rand(B, 784, device="cuda")
        samples = {name: [] for name, _ in nets}
        for _ in range(args.rounds):
            for name, net in nets:
                try:
                    samples[name].append(timer(lambda: net(x), calls=20))
                except RuntimeError:   # this rows_per_tile rejects this B (a variant with other limits)
                    samples[name].append(float("nan"))
        med = {name: statistics.median(samples[name]) for name, _ in nets}
        ratios = "" if args.no_eager else f"   x {eager_name}: " + " ".join(
            f"{name} {med[eager_name] / med[name]:.2f}" for name, _ in nets[:-1])
        print(f"{B:7d} " + " ".join(f"{med[name]:12.1f}" for name, _ in nets) + ratios, flush=True)


if __name__ == "__main__":
    main()
