"""Phase clocks of the tensor-core kernel (VAE_PROFILE build) at a few batch sizes and cluster sizes.

The VAE_PROFILE build prints, for the first tile of block 0 and of the last worker block, the cycles of the
first-tile noise, the weight split with its grid sync and each of the four layers, and for the first spare
block (where there are spares) its split + sync and its noise draws; each line ends with %globaltimer stamps
(ns, one clock for all SMs: which block ends the kernel, and when). This builds it as
its own extension, runs each (B, rows_per_tile) twice and keeps the second (warm) launch's lines. Run on the GPU machine from the repository root, e.g.

    python3 tools/wg_phases.py --cases 1024:132,2048:0,4096:0
    python3 tools/wg_phases.py --flags=-DVAE_PROFILE_CHUNKS --cases 1024:136   (per-chunk stamps too)

(--flags takes its value after '=': a separate "-D..." reads as an option.)
"""
import argparse
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cases(cases):
    import ctypes
    import torch
    sys.path.insert(0, REPO)
    import reference
    import solution
    libc = ctypes.CDLL(None)   # the kernel's printf lands in C's stdout buffer: flush it in order with ours
    torch.manual_seed(0)
    ref = reference.Model(784, 256, 32).cuda()
    new = solution.ModelNew(784, 256, 32).cuda()
    new.load_state_dict(ref.state_dict())
    for B, rows in cases:
        x = torch.rand(B, 784, device="cuda")
        for launch in ("cold", "warm"):
            try:
                new(x, rows)
                torch.cuda.synchronize()
            except RuntimeError as e:
                print(f"case B={B} rows_per_tile={rows}: {str(e).splitlines()[0]}", flush=True)
                break
            libc.fflush(None)
            print(f"case B={B} rows_per_tile={rows} {launch} launch above", flush=True)


def parse_cases(text):
    """'1024:132,2048:0' -> [(1024, 132), (2048, 0)]."""
    cases = []
    for item in text.split(","):
        b, _, r = item.partition(":")
        if not b.strip().isdigit() or not (r.strip() or "0").isdigit():
            raise SystemExit(f"--cases: {item!r} is not B:ROWS_PER_TILE")
        cases.append((int(b), int(r or 0)))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="1024:132,2048:0,4096:0", help="comma list of B:rows_per_tile")
    ap.add_argument("--flags", default="", help="more nvcc flags for the build (dev switches), as --flags=-DVAE_...")
    ap.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    cases = parse_cases(args.cases)
    if args.run:
        run_cases(cases)
        return
    env = dict(os.environ, VAE_EXTRA_CUDA_FLAGS=f"-DVAE_PROFILE {args.flags}".strip(),
               TORCH_EXTENSIONS_DIR=os.path.join(REPO, "build", "torch_extensions_prof"))
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--run", "--cases", args.cases],
                       env=env, capture_output=True, text=True, timeout=600)
    # each case's lines come before its "cold" / "warm" marker: keep the warm launch's
    kept, block = [], []
    for ln in (r.stdout + r.stderr).splitlines():
        if ln.startswith("prof "):   # "prof wg ...", "prof B=..." (the cluster kernel)
            block.append(ln)
        elif ln.startswith("case"):
            if not ln.endswith("cold launch above"):
                kept += block + [ln]
            block = []
    print("\n".join(kept))
    if r.returncode != 0:
        print((r.stdout + r.stderr)[-3000:])
        raise SystemExit(r.returncode)


if __name__ == "__main__":
    main()
