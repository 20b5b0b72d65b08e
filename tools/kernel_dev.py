"""GPU dev loop for solution.py: build, sanity check, GPU tests, timing table.

Run on the GPU machine from the repo root:
    PYTHONUNBUFFERED=1 python3 tools/kernel_dev.py [--skip-tests] [--sanitize]
Logs go to $OUT (or ./dev_out); the timing table is printed last.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
OUT = os.environ.get("OUT", os.path.join(REPO, "dev_out"))
os.makedirs(OUT, exist_ok=True)

NOOP_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void noop_kernel() {}
at::Tensor noop(at::Tensor x) {
  noop_kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>();
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return x;
}
"""


def log(msg):
    print(msg, flush=True)
    with open(os.path.join(OUT, "dev.log"), "a") as f:
        f.write(msg + "\n")


def build_noop():
    from torch.utils.cpp_extension import load_inline
    return load_inline(name="noop_ext", cpp_sources="at::Tensor noop(at::Tensor x);",
                       cuda_sources=NOOP_SRC, functions=["noop"], extra_cuda_cflags=["-O3"])


def sanity(solution, reference, torch):
    """Quick check before the test suite: a few sizes vs the reference."""
    for B in (1, 7, 128, 129, 1000):
        torch.manual_seed(0)
        ref = reference.Model(784, 256, 32).cuda()
        new = solution.ModelNew(784, 256, 32).cuda()
        new.load_state_dict(ref.state_dict())
        x = torch.rand(B, 784, device="cuda")
        for R in (8, 16):
            torch.manual_seed(1)
            want = ref(x)
            torch.manual_seed(1)
            got = new(x, R)
            torch.cuda.synchronize()
            diffs = [(g - w).abs().max().item() for g, w in zip(got, want)]
            log(f"sanity B={B:5d} R={R:2d} max|diff| elbo {diffs[0]:.2e} recon {diffs[1]:.2e} kl {diffs[2]:.2e}")


def per_call_us(fn, n=300):
    """Median CUDA-event time around each single call (host overhead included)."""
    import torch
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))


def graph_us(fn, calls=20, reps=50):
    """GPU time per call: replay a graph of `calls` back-to-back calls."""
    import torch
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


def timing(solution, reference, torch, noop):
    rows = []
    a = torch.randn(4096, 4096, device="cuda")
    t0 = time.time()
    while time.time() - t0 < 1.0:          # warm the clocks
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
    for B in (128, 1000, 16384):
        torch.manual_seed(0)
        ref = reference.Model(784, 256, 32).cuda()
        new = solution.ModelNew(784, 256, 32).cuda()
        new.load_state_dict(ref.state_dict())
        x = torch.rand(B, 784, device="cuda")
        with torch.no_grad():
            r = {}
            r["noop_call"] = per_call_us(lambda: noop.noop(x))
            r["new_call"] = per_call_us(lambda: new(x))
            r["eager_call"] = per_call_us(lambda: ref(x), n=100)
            r["new_gpu"] = graph_us(lambda: new(x))
            r["new_gpu_R8"] = graph_us(lambda: new(x, 8))
            r["new_gpu_R16"] = graph_us(lambda: new(x, 16))
            r["eager_gpu"] = graph_us(lambda: ref(x), calls=5, reps=20)
        rows.append((B, r))
        log(f"timing B={B}: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items()))
    return rows


VARIANTS = {"prof": "-DVAE_PROFILE", "skip_enc": "-DVAE_SKIP_ENC", "skip_dec": "-DVAE_SKIP_DEC",
            "skip_both": "-DVAE_SKIP_ENC -DVAE_SKIP_DEC"}


def start_variant_builds():
    procs = {}
    for name, flags in VARIANTS.items():
        env = dict(os.environ, VAE_EXTRA_CUDA_FLAGS=flags)
        procs[name] = subprocess.Popen([sys.executable, "-c", "import solution"], cwd=REPO, env=env,
                                       stdout=subprocess.DEVNULL, stderr=open(os.path.join(OUT, f"build_{name}.log"), "w"))
    return procs


def variant_run(name):
    """In a subprocess built with VARIANTS[name]: GPU time (or phase clocks) at a few sizes."""
    import torch
    import solution
    new = solution.ModelNew(784, 256, 32).cuda()
    res = []
    for B, R in ((128, 8), (128, 16), (16384, 8), (16384, 16)):
        x = torch.rand(B, 784, device="cuda")
        if name == "prof":
            new(x, R)
            torch.cuda.synchronize()
            new(x, R)
            torch.cuda.synchronize()
        else:
            res.append(f"B={B} R={R}: {graph_us(lambda: new(x, R)):.2f}")
    if res:
        print(f"variant {name}: " + ", ".join(res), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--sanitize", action="store_true")
    ap.add_argument("--sanitize-case", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--variants", action="store_true", help="build and time phase-skip / profiling variants")
    ap.add_argument("--variant-run", help=argparse.SUPPRESS)
    args = ap.parse_args()

    import torch
    if args.sanitize_case:      # small run under compute-sanitizer
        import reference
        import solution
        sanity(solution, reference, torch)
        return

    if args.variant_run:
        variant_run(args.variant_run)
        return

    log(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    variant_procs = start_variant_builds() if args.variants else {}
    noop_proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.path.insert(0, 'tools'); "
                                  "import kernel_dev; kernel_dev.build_noop()"], cwd=REPO)
    t0 = time.time()
    import reference
    import solution
    log(f"build+import solution: {time.time() - t0:.1f} s")
    noop_proc.wait()
    noop = build_noop()

    sanity(solution, reference, torch)

    if not args.skip_tests:
        t0 = time.time()
        with open(os.path.join(OUT, "pytest.log"), "w") as f:
            rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "--maxfail=15", "--no-header", "-p", "no:cacheprovider",
                                 "tests/test_solution.py"], cwd=REPO, stdout=f, stderr=subprocess.STDOUT).returncode
        tail = open(os.path.join(OUT, "pytest.log")).read().strip().splitlines()[-15:]
        log(f"pytest rc={rc} ({time.time() - t0:.0f} s)\n  " + "\n  ".join(tail))

    rows = timing(solution, reference, torch, noop)

    for name, proc in variant_procs.items():
        proc.wait()
        env = dict(os.environ, VAE_EXTRA_CUDA_FLAGS=VARIANTS[name])
        r = subprocess.run([sys.executable, "tools/kernel_dev.py", "--variant-run", name], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=120)
        lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith(("variant", "prof", "Error", "Runtime"))]
        log("\n".join(lines[-12:]) if lines else f"variant {name}: rc={r.returncode} {r.stderr[-300:]}")

    if args.sanitize:
        t0 = time.time()
        with open(os.path.join(OUT, "sanitizer.log"), "w") as f:
            rc = subprocess.run(["compute-sanitizer", "--tool", "memcheck", sys.executable, "tools/kernel_dev.py",
                                 "--sanitize-case"], cwd=REPO, stdout=f, stderr=subprocess.STDOUT,
                                timeout=150).returncode
        tail = open(os.path.join(OUT, "sanitizer.log")).read().strip().splitlines()[-4:]
        log(f"compute-sanitizer rc={rc} ({time.time() - t0:.0f} s): " + " | ".join(tail))

    log("\n  B     | noop call | new call | eager call | new GPU | R=8 GPU | R=16 GPU | eager GPU   (µs)")
    for B, r in rows:
        log(f"  {B:5d} | {r['noop_call']:9.1f} | {r['new_call']:8.1f} | {r['eager_call']:10.1f} | "
            f"{r['new_gpu']:7.2f} | {r['new_gpu_R8']:7.2f} | {r['new_gpu_R16']:8.2f} | {r['eager_gpu']:9.1f}")


if __name__ == "__main__":
    main()
