"""GPU dev loop for solution.py: build, sanity check, GPU tests, timing table.

Times the working tree's solution.py ("new") side by side with the previous version ("old") saved at
.old/solution_prev.py (`git show HEAD:solution.py > .old/solution_prev.py`; .old is git-ignored, so
carry it), each kernel forced through rows_per_tile, the no-op extension call and eager. The two
files must give their extensions different load_inline names, or one process gets the same module twice.

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


TILES = (8, 9, 16, 32, 64, 128)  # rows_per_tile: 8, 9, 16 cluster kernel (rows per cluster of 8); 32, 64 block-tile
# kernel; 128 tensor-core (wgmma) kernel


def sanity(solution, reference, torch, batches=(1, 7, 33, 129, 1000, 8449)):
    """Quick check before the test suite: every kernel at a few sizes vs the reference."""
    for B in batches:
        torch.manual_seed(0)
        ref = reference.Model(784, 256, 32).cuda()
        new = solution.ModelNew(784, 256, 32).cuda()
        new.load_state_dict(ref.state_dict())
        x = torch.rand(B, 784, device="cuda")
        for R in TILES:
            torch.manual_seed(1)
            want = ref(x)
            torch.manual_seed(1)
            got = new(x, R)
            torch.cuda.synchronize()
            diffs = [(g - w).abs().max().item() for g, w in zip(got, want)]
            log(f"sanity B={B:5d} rows_per_tile={R:2d} max|diff| elbo {diffs[0]:.2e} recon {diffs[1]:.2e} kl {diffs[2]:.2e}")


def build_eps():
    """solution.py's CUDA source compiled with VAE_EPS_INPUT (the leaderboard exports' kernel)."""
    import ast
    from torch.utils.cpp_extension import load_inline
    tree = ast.parse(open(os.path.join(REPO, "solution.py")).read())
    lit = {n.targets[0].id: ast.literal_eval(n.value) for n in tree.body
           if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
           and n.targets[0].id in ("CUDA_SRC", "CPP_DECL_EPS")}
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"   # as solution.py's own build (warpgroup MMA)
    return load_inline(name="vae_eps_dev", cpp_sources=lit["CPP_DECL_EPS"],
                       cuda_sources="#define VAE_EPS_INPUT\n" + lit["CUDA_SRC"], functions=["vae_forward_eps"],
                       extra_cuda_cflags=["-O3"])


def eps_check(solution, eps_ext, torch, batches=(1, 33, 129, 1000, 8449)):
    """The eps-input build fed the noise the drawing build draws must give the same bits."""
    new = solution.ModelNew(784, 256, 32).cuda()
    worst = 0.0
    for B in batches:
        x = torch.rand(B, 784, device="cuda")
        for R in TILES:
            torch.manual_seed(3)
            got = torch.stack(new(x, R))
            torch.manual_seed(3)
            eps = solution._ext.draw_noise(B, 32, 0)
            want = eps_ext.vae_forward_eps(x, eps, *new._params, R)
            worst = max(worst, (got - want).abs().max().item())
    log(f"eps build vs drawing build, same noise: max |diff| {worst:.3e} (want 0)")


def load_prev():
    """The previous version (.old/solution_prev.py, saved from git HEAD), built as its own extension."""
    import importlib.util
    path = os.path.join(REPO, ".old", "solution_prev.py")
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location("solution_prev", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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


def timing(solution, reference, torch, noop, prev, batches=(1, 128, 1024, 2048, 4096, 16384, 65536)):
    """Side by side in one process: no-op call, old (previous version), new (auto and each kernel), eager."""
    rows = []
    a = torch.randn(4096, 4096, device="cuda")
    t0 = time.time()
    while time.time() - t0 < 1.0:          # warm the clocks
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
    for B in batches:
        torch.manual_seed(0)
        ref = reference.Model(784, 256, 32).cuda()
        new = solution.ModelNew(784, 256, 32).cuda()
        new.load_state_dict(ref.state_dict())
        old = None
        if prev is not None:
            old = prev.ModelNew(784, 256, 32).cuda()
            old.load_state_dict(ref.state_dict())
        x = torch.rand(B, 784, device="cuda")
        n = 300 if B <= 4096 else 100
        r = {}
        with torch.no_grad():
            for name, fn in (("noop_call", lambda: noop.noop(x)),
                             ("old_call", (lambda: old(x)) if old else None),
                             ("new_call", lambda: new(x)),
                             ("eager_call", lambda: ref(x))):
                try:
                    r[name] = per_call_us(fn, n=n) if fn else float("nan")
                except Exception as e:      # keep timing the others
                    log(f"timing {name} B={B} failed: {e}")
                    r[name] = float("nan")
            gpu = [("old_gpu", (lambda: old(x)) if old else None), ("new_gpu", lambda: new(x))]
            gpu += [(f"new_R{R}_gpu", (lambda R=R: new(x, R))) for R in TILES]
            gpu += [("eager_gpu", lambda: ref(x))]
            for name, fn in gpu:
                try:
                    calls = 5 if name == "eager_gpu" else 20
                    r[name] = graph_us(fn, calls=calls, reps=20 if B >= 4096 else 50) if fn else float("nan")
                except Exception as e:
                    log(f"timing {name} B={B} failed: {e}")
                    r[name] = float("nan")
        rows.append((B, r))
        log(f"timing B={B}: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items()))
    return rows


def table(rows):
    log("\n  per call (event around one Python call) and GPU (CUDA-graph replay), µs")
    log("  B     | noop call |old call |new call | eager call |old GPU |new GPU |  R=8   |  R=9   |  R=16  |  T=32  |  T=64  | T=128  | eager GPU")
    for B, r in rows:
        log(f"  {B:5d} | {r['noop_call']:9.1f} | {r['old_call']:7.1f} | {r['new_call']:7.1f} | {r['eager_call']:10.1f} | "
            f"{r['old_gpu']:6.1f} | {r['new_gpu']:6.1f} | {r['new_R8_gpu']:6.1f} | {r['new_R9_gpu']:6.1f} | {r['new_R16_gpu']:6.1f} | "
            f"{r['new_R32_gpu']:6.1f} | {r['new_R64_gpu']:6.1f} | {r['new_R128_gpu']:6.1f} | {r['eager_gpu']:9.1f}")


VARIANTS = {"prof": "-DVAE_PROFILE", "skip_enc": "-DVAE_SKIP_ENC", "skip_dec": "-DVAE_SKIP_DEC",
            "skip_both": "-DVAE_SKIP_ENC -DVAE_SKIP_DEC",
            # the cluster kernel ended after the launch, the x tile, the encoder, the h exchange (wrong results)
            "ck_stop0": "-DVAE_CK_STOP=0", "ck_stop1": "-DVAE_CK_STOP=1", "ck_stop2": "-DVAE_CK_STOP=2",
            "ck_stop3": "-DVAE_CK_STOP=3",
            # vae_elbo_kernel_wg: costs by omission (wrong results), chain counts, chunks per wgmma wait
            "wg_base": "", "wg_cheap_epi": "-DVAE_WG_CHEAP_EPI", "wg_no_mma": "-DVAE_WG_NO_MMA",
            "wg_no_load": "-DVAE_WG_NO_LOAD", "wg_no_mma_load": "-DVAE_WG_NO_MMA -DVAE_WG_NO_LOAD",
            "wg_libm_bce": "-DVAE_WG_LIBM_BCE", "wg_chains1": "-DVAE_WG_CHAINS1=1 -DVAE_WG_CHAINS4=1",
            "wg_chains4": "-DVAE_WG_CHAINS1=4 -DVAE_WG_CHAINS4=7", "wg_pair2": "-DVAE_WG_PAIR=2",
            "wg_no_promote": "-DVAE_WG_NO_PROMOTE", "wg_no_exact": "-DVAE_WG_NO_EXACT",
            "wg_no_noise": "-DVAE_WG_NO_NOISE", "wg_no_wsplit": "-DVAE_WG_NO_WSPLIT -DVAE_WG_NO_EXACT",
            "wg_ns5": "-DVAE_WG_NS=5", "wg_kc1_lo26": "-DVAE_WG_KC1_LO=26"}


def start_variant_builds(names):
    procs = {}
    for name in names:
        flags = VARIANTS[name]
        env = dict(os.environ, VAE_EXTRA_CUDA_FLAGS=flags)
        procs[name] = subprocess.Popen([sys.executable, "-c", "import solution"], cwd=REPO, env=env,
                                       stdout=subprocess.DEVNULL, stderr=open(os.path.join(OUT, f"build_{name}.log"), "w"))
    return procs


def error_line(ref, new, ext, B, rows):
    """One forward of `new` (rows_per_tile `rows`) against eager `ref` on B random rows, the same noise:
    max |diff| to eager and the error / eager's error against the float64 truth (elbo, recon, kl)."""
    import torch
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from test_solution import _truth64
    x = torch.rand(B, 784, device="cuda")
    torch.manual_seed(1)
    want = ref(x)
    torch.manual_seed(1)
    got = new(x, rows)
    torch.manual_seed(1)
    truth = _truth64(ref, x, ext.draw_noise(B, 32, 0))
    ratios = [((g.double() - t).norm() / (w.double() - t).norm()).item() for g, w, t in zip(got, want, truth)]
    return (f"B={B} max|diff| " + " ".join(f"{(g - w).abs().max().item():.1e}" for g, w in zip(got, want))
            + ", error / eager's vs float64 " + " ".join(f"{r:.2f}" for r in ratios))


def variant_run(name):
    """In a subprocess built with VARIANTS[name]: GPU time (or phase clocks) at a few sizes, and for the
    tensor-core kernel's variants the max |diff| to eager and the error ratio to eager's against float64 at
    B = 4097 (dev switches may be wrong on purpose)."""
    import torch
    import reference
    import solution
    torch.manual_seed(0)
    ref = reference.Model(784, 256, 32).cuda()
    new = solution.ModelNew(784, 256, 32).cuda()
    new.load_state_dict(ref.state_dict())
    res = []
    if name.startswith("wg_"):
        res.append("R=128 " + error_line(ref, new, solution._ext, 4097, 128))
    for B, R in ((128, 9), (128, 16), (1000, 16), (4096, 128), (16384, 128), (65536, 128)):
        x = torch.rand(B, 784, device="cuda")
        if name == "prof":   # the kernel prints per launch: no timing loop
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
    ap.add_argument("--variants", nargs="?", const=",".join(VARIANTS), default="",
                    help="build and time phase-skip / profiling variants (all, or a comma list of " + ", ".join(VARIANTS) + ")")
    ap.add_argument("--variant-run", help=argparse.SUPPRESS)
    ap.add_argument("--build-prev", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--test-timeout", type=int, default=240)
    ap.add_argument("--eps", action="store_true", help="also build the VAE_EPS_INPUT variant and compare its bits")
    args = ap.parse_args()
    t_start = time.time()

    import torch
    if args.sanitize_case:      # small run under compute-sanitizer
        import reference
        import solution
        sanity(solution, reference, torch, batches=(1, 33, 129))
        return
    if args.variant_run:
        variant_run(args.variant_run)
        return
    if args.build_prev:
        load_prev()
        return

    log(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    variant_procs = start_variant_builds([v for v in args.variants.split(",") if v]) if args.variants else {}
    side_procs = [subprocess.Popen([sys.executable, "-c", "import sys; sys.path.insert(0, 'tools'); "
                                    "import kernel_dev; kernel_dev.build_noop()"], cwd=REPO),
                  subprocess.Popen([sys.executable, "tools/kernel_dev.py", "--build-prev"], cwd=REPO)]
    eps_proc = (subprocess.Popen([sys.executable, "-c", "import sys; sys.path.insert(0, 'tools'); "
                                  "import kernel_dev; kernel_dev.build_eps()"], cwd=REPO) if args.eps else None)
    t0 = time.time()
    import reference
    import solution
    log(f"build+import solution (new): {time.time() - t0:.1f} s")
    for p in side_procs:
        p.wait()
    noop = build_noop()
    try:
        prev = load_prev()
    except Exception as e:
        log(f"previous version build failed: {e}")
        prev = None
    log(f"builds done at {time.time() - t_start:.0f} s")
    if eps_proc is not None:
        eps_proc.wait()
        try:
            eps_check(solution, build_eps(), torch)
        except Exception as e:
            log(f"eps check failed: {e}")

    try:
        sanity(solution, reference, torch)
    except Exception as e:
        log(f"sanity failed: {e}")

    if not args.skip_tests:
        t0 = time.time()
        with open(os.path.join(OUT, "pytest.log"), "w") as f:
            try:
                rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "--no-header", "-p", "no:cacheprovider",
                                     "tests/test_solution.py"], cwd=REPO, stdout=f, stderr=subprocess.STDOUT,
                                    timeout=args.test_timeout).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        tail = open(os.path.join(OUT, "pytest.log")).read().strip().splitlines()[-15:]
        log(f"pytest rc={rc} ({time.time() - t0:.0f} s)\n  " + "\n  ".join(tail))

    rows = timing(solution, reference, torch, noop, prev)
    table(rows)

    for name, proc in variant_procs.items():
        proc.wait()
        env = dict(os.environ, VAE_EXTRA_CUDA_FLAGS=VARIANTS[name])
        r = subprocess.run([sys.executable, "tools/kernel_dev.py", "--variant-run", name], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=120)
        lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith(("variant", "prof", "Error", "Runtime"))]
        log("\n".join(lines[-12:]) if lines else f"variant {name}: rc={r.returncode} {r.stderr[-300:]}")

    if args.sanitize and time.time() - t_start < 280:
        t0 = time.time()
        with open(os.path.join(OUT, "sanitizer.log"), "w") as f:
            try:
                rc = subprocess.run(["compute-sanitizer", "--tool", "memcheck", sys.executable, "tools/kernel_dev.py",
                                     "--sanitize-case"], cwd=REPO, stdout=f, stderr=subprocess.STDOUT,
                                    timeout=max(20, 320 - (time.time() - t_start))).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        tail = open(os.path.join(OUT, "sanitizer.log")).read().strip().splitlines()[-4:]
        log(f"compute-sanitizer rc={rc} ({time.time() - t0:.0f} s): " + " | ".join(tail))
        table(rows)


if __name__ == "__main__":
    main()
