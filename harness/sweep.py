"""`bench --sweep NAME=V1,V2,...`: the bench at each value of one module-level size of the reference.

One worker (one import and build of the solution) serves every value whose get_init_inputs() is
the same; it is rebuilt when the init args change, or after the solution crashed. At each value
the bench checks correctness first (its check trial), then times every implementation. Timed
calls per implementation are scaled down for big sizes so that each spends about --sweep-budget
seconds (estimated from one eager reference call), never fewer than MIN_ITERS.

Results: the rows, handed to `on_row` after every value (the command line writes
results/sweep_NAME.json there, so a sweep killed half-way leaves its rows); report.py prints the
table and writes the JSON, Markdown and plot.
"""
import argparse
import time

import torch

from harness import EXIT_INCORRECT, EXIT_INTERRUPTED, EXIT_PASS, EXIT_SOLUTION_ERROR, judge, problem
from harness.bench import run_bench
from harness.client import SolutionFailure, Worker

MIN_ITERS = 10


def scaled_iters(estimate_us: float, max_iters: int, budget_s: float) -> int:
    """Timed calls so that one implementation spends about budget_s: the bench makes each call twice
    (once synchronized, once back to back), so budget_s / (2 x one call), within [MIN_ITERS, max_iters]."""
    if estimate_us <= 0:
        return max_iters
    return max(min(MIN_ITERS, max_iters), min(max_iters, int(budget_s * 1e6 / (2.0 * estimate_us))))


def estimate_call_us(model, inputs, device) -> float:
    """Wall time of one eager reference forward (after one warm-up call), synchronized: the slowest
    implementation in most sweeps, so it bounds the time per implementation."""
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    with torch.no_grad():
        model(*inputs)
        sync()
        t0 = time.perf_counter()
        for _ in range(3):
            model(*inputs)
        sync()
    return (time.perf_counter() - t0) / 3 * 1e6


class _Prefixed:
    """Progress lines as "sweep 3/7: batch_size=1024, timing round 1/5: reference eager"."""

    def __init__(self, progress):
        self.progress, self.prefix = progress, ""

    def __call__(self, text):
        if self.progress:
            self.progress(self.prefix if text is None else f"{self.prefix}, {text}")


def row_from_bench(value, verdict: dict, code: int, iters: int, warmup: int) -> dict:
    """One sweep row: median µs per implementation and the solution's speedups."""
    medians = {k: r["median_us"] for k, r in verdict.get("results", {}).items() if "median_us" in r}
    sol = medians.get("solution")
    row = {"value": value, "shape": verdict.get("shape"), "exit_code": code, "iters": iters, "warmup": warmup,
           "median_us": medians,
           "speedup_vs_eager": medians["eager"] / sol if sol and "eager" in medians else None,
           "speedup_vs_compile_ro": medians["compile-ro"] / sol if sol and "compile-ro" in medians else None,
           "skipped": {k: r["skipped"] for k, r in verdict.get("results", {}).items() if "skipped" in r},
           "failures": verdict.get("failures", []), "error": verdict.get("error"),
           "rounds": verdict.get("rounds"), "cpu": verdict.get("cpu")}
    if "roofline" in verdict:
        row["roofline_floor_us"] = verdict["roofline"]["floor_us"]
    return row


class _SharedWorker:
    """One worker, loaded once for every value with the same init args; a fresh one when they change or
    after the solution crashed or hung. Keeps what its import showed (static scan, tampering)."""

    def __init__(self, args, device, progress):
        self.args, self.device, self.progress = args, device, progress
        self.worker, self.init_args, self.import_failures = None, None, []

    def get(self, init_args):
        if self.worker is not None and self.init_args != init_args:
            self.close()
        if self.worker is None:
            self.worker, self.init_args = Worker(self.progress), init_args
            self.import_failures = judge.import_findings(self.worker.load(self.args, self.device, init_args))[1]
        return self.worker

    def close(self):
        if self.worker is not None:
            self.worker.close()
        self.worker = None


def run_sweep(args, progress=None, on_row=None) -> tuple:
    """Returns (sweep data dict, exit code): the worst exit code over the values. `on_row(data)` is
    called after every value."""
    name, values = args.sweep
    device = problem.resolve_device(args.device)
    ref_module = problem.load_reference(args.reference)
    with problem.sizes_overridden(ref_module, {name: values[0]}):
        pass  # a name that is not an integer size of the reference raises a UsageError listing those it has
    fixed = {"batch_size": args.batch_size} if getattr(args, "batch_size", None) and name != "batch_size" else {}
    data = {"command": "sweep", "solution": args.solution, "reference": args.reference, "parameter": name,
            "values": list(values), "default_value": getattr(ref_module, name), "flush_l2": args.flush_l2,
            "max_iters": args.iters, "budget_s": args.sweep_budget, "environment": None, "rows": []}
    status = _Prefixed(progress)
    shared, worst = _SharedWorker(args, device, status), EXIT_PASS
    try:
        for i, value in enumerate(values, 1):
            status.prefix = f"sweep {i}/{len(values)}: {name}={value}"
            row = _bench_at(dict(fixed, **{name: value}), value, ref_module, shared, device, args, status)
            data["environment"] = data["environment"] or row.pop("environment")
            data["rows"].append(row)
            worst = max(worst, row["exit_code"])
            if on_row:
                on_row(data)
    except KeyboardInterrupt:  # keep what was measured: the caller writes and prints the rows done
        data["interrupted"] = f"interrupted (Ctrl-C) after {len(data['rows'])} of {len(values)} values"
        worst = EXIT_INTERRUPTED
    finally:
        shared.close()
        if progress:
            progress(None)
    return data, worst


def _bench_at(shape, value, ref_module, shared, device, args, status) -> dict:
    """The sweep's row at one value: calls scaled to the budget, then the bench in the shared worker."""
    init_args = problem.init_inputs(ref_module, shape)
    ref = problem.build_reference(ref_module, init_args, args.seed, device)
    inputs = problem.make_inputs(ref_module, args.seed, device, shape)
    status("estimating the time per call")
    iters = scaled_iters(estimate_call_us(ref, inputs, device), args.iters, args.sweep_budget)
    del ref, inputs
    run_args = argparse.Namespace(**vars(args))
    run_args.iters, run_args.warmup = iters, min(args.warmup, iters)
    try:
        worker = shared.get(init_args)
        verdict, code = run_bench(run_args, progress=status, worker=worker, shape=shape)
        if shared.import_failures:  # the static scan's failures and the import's tampering count at every value
            verdict["failures"] = shared.import_failures + verdict["failures"]
            code = max(code, EXIT_INCORRECT)
    except SolutionFailure as f:
        verdict = {"shape": problem.shape_label(ref_module, shape), "results": {}, "failures": [],
                   "error": f.verdict()}
        code = EXIT_SOLUTION_ERROR
    if code == EXIT_SOLUTION_ERROR:
        shared.close()  # a crashed or hung solution gets a fresh process at the next value
    return dict(row_from_bench(value, verdict, code, iters, run_args.warmup), environment=verdict.get("environment"))
