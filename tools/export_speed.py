"""Speed of the exported solutions against solution.py, side by side in one process (needs a GPU).

    python3 tools/export_speed.py --kernelbench DIR_KB --gpumode DIR_GM [--batch-sizes 128,16384]

For each batch size: the three implementations get the same weights and inputs (solution.py draws its
own noise, the exports read eps) and are timed in alternating rounds (--rounds, --iters calls each per
round, --warmup untimed calls first): CUDA events around each call, a synchronize between calls, the
median per call; and back-to-back (no sync between calls) as mean wall time per call. The ratio is
solution.py's median over the export's: >= 0.95 keeps 95% of its speed. Each export's outputs are
also checked against solution.py's formulas fed the same eps (allclose 1e-4). Last line: a table.
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(path, name):
    directory = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, directory)
    sys.modules.pop("task", None)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.path.remove(directory)
    return module


def time_rounds(fns: dict, rounds: int, iters: int, warmup: int) -> dict:
    """{name: (median us with a sync between calls, back-to-back us per call)}, rounds alternating."""
    samples = {n: [] for n in fns}
    back_to_back = {n: [] for n in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(warmup):
                fn()
            torch.cuda.synchronize()
            for _ in range(iters):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize()
                samples[name].append(start.elapsed_time(end) * 1e3)
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            torch.cuda.synchronize()
            back_to_back[name].append((time.perf_counter() - t0) / iters * 1e6)
    return {n: (statistics.median(samples[n]), statistics.median(back_to_back[n])) for n in fns}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernelbench", required=True, help="directory written by `python -m harness export --to kernelbench`")
    p.add_argument("--gpumode", required=True, help="directory written by `python -m harness export --to gpumode`")
    p.add_argument("--batch-sizes", default="128,16384")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    sys.path.insert(0, REPO)
    solution = load(os.path.join(REPO, "solution.py"), "solution")
    kb_ref = load(os.path.join(args.kernelbench, "reference.py"), "kb_reference")
    kb_sol = load(os.path.join(args.kernelbench, "solution.py"), "kb_solution")
    gm_sub = load(os.path.join(args.gpumode, "submission.py"), "gm_submission")
    rows = []
    for b in [int(v) for v in args.batch_sizes.split(",")]:
        torch.manual_seed(b)
        ref = kb_ref.Model(784, 256, 32).cuda().eval()
        original = solution.ModelNew(784, 256, 32).cuda().eval()
        exported = kb_sol.ModelNew(784, 256, 32).cuda().eval()
        original.load_state_dict(ref.state_dict())
        exported.load_state_dict(ref.state_dict())
        weights = {k: v.detach() for k, v in ref.state_dict().items()}
        x, eps = torch.rand(b, 784, device="cuda"), torch.randn(b, 32, device="cuda")
        data = (x, eps, weights)
        with torch.no_grad():
            want = ref(x, eps)
            ok_kb = bool(torch.allclose(exported(x, eps), want, atol=1e-4, rtol=1e-4))
            ok_gm = bool(torch.allclose(torch.stack(gm_sub.custom_kernel(data)), want, atol=1e-4, rtol=1e-4))
            times = time_rounds({"solution.py": lambda: original(x),
                                 "kernelbench export": lambda: exported(x, eps),
                                 "gpumode export": lambda: gm_sub.custom_kernel(data)},
                                args.rounds, args.iters, args.warmup)
        base = times["solution.py"][0]
        for name, (median_us, b2b_us) in times.items():
            correct = {"kernelbench export": ok_kb, "gpumode export": ok_gm}.get(name)
            rows.append([str(b), name, f"{median_us:.1f}", f"{b2b_us:.1f}", f"{base / median_us:.3f}",
                         "-" if correct is None else ("pass" if correct else "FAIL")])
    headers = ["B", "implementation", "median us", "back-to-back us", "speed vs solution.py", "allclose 1e-4"]
    widths = [max(len(r[i]) for r in rows + [headers]) for i in range(len(headers))]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {args.rounds} rounds x {args.iters} calls, "
          "alternating; speed = solution.py's median / this one's (>= 0.95 keeps 95%)")
    for r in [headers, ["-" * w for w in widths]] + rows:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    worst = min(float(r[4]) for r in rows if r[1] != "solution.py")
    bad = [r for r in rows if r[5] == "FAIL"]
    print(f"slowest export keeps {worst:.1%} of solution.py's speed; " + ("outputs: all pass" if not bad else
          f"outputs: {len(bad)} FAIL"))
    return 0 if worst >= 0.95 and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
