"""`bench`: time the solution beside the reference's implementations, in one run.

Implementations: the solution (in its worker), reference eager, torch.compile (default and
reduce-overhead), the eager reference captured in one CUDA graph, and a no-op load_inline kernel
call (the floor for any custom-kernel call from Python). Correctness is checked first; during
timing the inputs change before every call and a few calls are re-checked (worker.py's
_InputRefresher, judge.judge_checkpoints).
"""
import contextlib

import torch

from harness import EXIT_INCORRECT, EXIT_PASS, EXIT_SOLUTION_ERROR, UsageError, judge, problem, profiling, timing, trial
from harness.client import SolutionFailure, Worker

IMPLEMENTATIONS = ("eager", "compile", "compile-ro", "graph", "noop")
LABELS = {"solution": "solution", "eager": "reference eager", "compile": "torch.compile (default)",
          "compile-ro": "torch.compile (reduce-overhead)", "graph": "reference eager in one CUDA graph",
          "noop": "no-op load_inline kernel call"}

_NOOP_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void harness_noop_kernel() {}
void noop(torch::Tensor x) {
    harness_noop_kernel<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>();
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""


def noop_extension():
    from torch.utils.cpp_extension import load_inline
    return load_inline(name="harness_noop", cpp_sources="void noop(torch::Tensor x);", cuda_sources=_NOOP_SOURCE,
                       functions=["noop"], extra_cuda_cflags=["-O3"], verbose=False)


def reference_callables(kind: str, model, inputs, device, progress=None):
    """A zero-argument callable running the reference `kind` way on `inputs` (refreshed in place)."""
    if kind == "eager":
        return lambda: model(*inputs)
    if kind in ("compile", "compile-ro"):
        compiled = torch.compile(model, mode="reduce-overhead" if kind == "compile-ro" else None)
        if progress:
            progress(f"torch.compile ({kind}) of the reference: compiling")
        for _ in range(3):
            compiled(*inputs)
        if kind == "compile-ro":
            def call():
                torch.compiler.cudagraph_mark_step_begin()
                return compiled(*inputs)
            return call
        return lambda: compiled(*inputs)
    if kind == "graph":
        return profiling.capture_graph(lambda: model(*inputs), device).replay
    if kind == "noop":
        ext = noop_extension()
        x = next(t for t in inputs if isinstance(t, torch.Tensor))
        return lambda: ext.noop(x)
    raise ValueError(kind)


class ReferenceTimer:
    """One reference implementation, ready to time in rounds: its callable is built (and compiled)
    once, on its own copy of the inputs, refreshed before every call from its own generator."""

    def __init__(self, kind, model, inputs, device, args, progress=None):
        self.kind, self.device, self.args = kind, device, args
        self.inputs = [t.clone() for t in inputs]
        self.domains = [problem.input_domain(t) for t in self.inputs]
        self.gen = torch.Generator(device=device).manual_seed(args.seed)
        self.fn = reference_callables(kind, model, self.inputs, device, progress)

    def time(self, iters: int) -> dict:
        before = lambda _i: problem.refresh_inputs_(self.inputs, self.domains, self.gen)
        if self.device.type == "cuda":
            return timing.time_cuda(self.fn, device=self.device, iters=iters, warmup=self.args.warmup,
                                    before_each=before, flush_l2=self.args.flush_l2)
        return timing.time_cpu(self.fn, iters=iters, warmup=self.args.warmup, before_each=before)


def pinned_cpu(choice, device):
    """The CPU both processes time from (--pin-cpu), or None: not pinned ('off', or --device cpu,
    where pinning would take the threads of the computation itself)."""
    if device.type != "cuda" or choice == "off":
        return None
    return timing.timing_cpu() if choice == "auto" else choice


def split_rounds(iters: int, rounds: int) -> list:
    """`iters` calls as `rounds` nearly equal rounds (fewer rounds when there are fewer calls)."""
    rounds = max(1, min(rounds, iters))
    return [iters // rounds + (1 if r < iters % rounds else 0) for r in range(rounds)]


def prepare_references(ref, inputs, device, args, skip, verdict, progress) -> dict:
    """A ReferenceTimer for each implementation to time; one that cannot be built (torch.compile
    failing, say) is recorded as skipped with the reason."""
    timers = {}
    for kind in IMPLEMENTATIONS:
        if kind in skip:
            continue
        if device.type != "cuda" and kind != "eager":
            verdict["results"][kind] = {"skipped": "needs a CUDA device"}
            continue
        try:
            timers[kind] = ReferenceTimer(kind, ref, inputs, device, args, progress)
        except Exception as e:
            verdict["results"][kind] = skipped_because(e)
    return timers


def skipped_because(e: Exception) -> dict:
    """A reference implementation that could not be built or timed (not the solution's fault)."""
    first_line = (str(e).splitlines() or [""])[0]
    return {"skipped": f"{type(e).__name__}: {first_line[:200]}"}


def run_bench(args, progress=None, worker=None, shape=None) -> tuple:
    """Returns (verdict, exit code). `worker`: one already loaded with this shape's init args, to reuse
    (a sweep keeps one for all its sizes); `shape`: size overrides (default: --batch-size)."""
    device = problem.resolve_device(args.device)
    trial.require_strict_device(args, device)
    ref_module = problem.load_reference(args.reference)
    if shape is None:
        shape = {"batch_size": args.batch_size} if args.batch_size else {}
    init_args = problem.init_inputs(ref_module, shape)
    verdict = {"command": "bench", "solution": args.solution, "reference": args.reference,
               "shape": problem.shape_label(ref_module, shape), "iters": args.iters, "warmup": args.warmup,
               "flush_l2": args.flush_l2, "environment": problem.environment(device), "results": {}, "failures": []}
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    unknown = skip - set(IMPLEMENTATIONS)
    if unknown:
        raise UsageError(f"--skip: unknown implementation(s) {sorted(unknown)}; known: {', '.join(IMPLEMENTATIONS)}")
    inputs = problem.make_inputs(ref_module, args.seed, device, shape)
    try:
        with contextlib.ExitStack() as stack:
            if worker is None:
                worker = stack.enter_context(Worker(progress))
                verdict["scan"], verdict["failures"] = judge.import_findings(worker.load(args, device, init_args))
            for t in range(args.trials):
                if progress:
                    progress(f"checking correctness before timing: trial {t + 1}/{args.trials}")
                result = trial.check_trial(worker, ref_module, init_args, shape, args.seed + t, device, args)
                if result["failures"]:
                    verdict["failures"] += result["failures"]
                    return verdict, EXIT_INCORRECT
            ref = problem.build_reference(ref_module, init_args, args.seed + args.trials - 1, device)
            if getattr(args, "strict", False):
                failures, verdict["custom_kernels"] = trial.strict_failures(worker, inputs, args, ref)
                verdict["failures"] += failures
            with torch.no_grad():
                timers = prepare_references(ref, inputs, device, args, skip, verdict, progress)
            timed = time_in_rounds(worker, timers, inputs, device, args, verdict, progress)
    except SolutionFailure as f:
        verdict["error"] = f.verdict()
        return verdict, EXIT_SOLUTION_ERROR
    judge_timing(timed, ref, inputs, device, args, verdict)
    return verdict, (EXIT_INCORRECT if verdict["failures"] else EXIT_PASS)


def time_in_rounds(worker, timers, inputs, device, args, verdict, progress) -> dict:
    """The solution (in its worker) and each reference timer, alternating in rounds; the pooled
    statistics go into verdict["results"]. Returns what the solution's rounds left to judge:
    its statistics, the checkpoints kept and the functions it replaced."""
    solution_rounds, reference_rounds, checkpoints, tampered = [], {kind: [] for kind in timers}, [], set()
    split = split_rounds(args.iters, getattr(args, "rounds", 5))
    verdict["rounds"] = len(split)
    cpu = verdict["cpu"] = pinned_cpu(getattr(args, "pin_cpu", "auto"), device)
    host_inputs = problem.to_device(inputs, "cpu")
    for r, iters in enumerate(split):
        if progress:
            progress(f"timing round {r + 1}/{len(split)}: the solution")
        reply = worker.request({"op": "time", "inputs": host_inputs,
                                "seed": args.seed + 7919 * r, "iters": iters, "warmup": args.warmup,
                                "flush_l2": args.flush_l2, "checkpoints": max(1, 4 // len(split)),
                                "warm_seconds": 1.0 if r == 0 else 0.1, "cpu": cpu},
                               timeout=args.call_timeout + iters * 1.0, what="timing the solution")
        solution_rounds.append(reply["stats"])
        checkpoints += reply["checkpoints"]
        tampered.update(reply["tampered"])
        with torch.no_grad(), timing.pinned_to(cpu):
            if device.type == "cuda" and r == 0:
                timing.warm_clock(device)
            for kind, timer in list(timers.items()):
                if progress:
                    progress(f"timing round {r + 1}/{len(split)}: {LABELS[kind]}")
                try:
                    reference_rounds[kind].append(timer.time(iters))
                except Exception as e:
                    verdict["results"][kind] = skipped_because(e)
                    del timers[kind], reference_rounds[kind]
        if progress:
            progress(None)
    stats = timing.merge_rounds(solution_rounds)
    stats["sm_clock_mhz_before"] = solution_rounds[0].get("sm_clock_mhz_before")
    stats["sm_clock_mhz_after"] = solution_rounds[-1].get("sm_clock_mhz_after")
    stats["clock_warm_seconds"] = solution_rounds[0].get("clock_warm_seconds")
    verdict["results"]["solution"] = stats
    for kind, rounds in reference_rounds.items():
        verdict["results"][kind] = timing.merge_rounds(rounds)
    return {"stats": stats, "checkpoints": checkpoints, "tampered": tampered}


def judge_timing(timed, ref, inputs, device, args, verdict):
    """The defences that read the timing: tampering during it, side stream, caching/replay, speed
    sanity (on CUDA, against the roofline floor); then each reference's speedup."""
    stats = timed["stats"]
    verdict["failures"] += judge.tampered_during("during timing", timed["tampered"])
    suspect = timing.side_stream_suspect(stats) if device.type == "cuda" else ""
    if suspect:
        verdict["failures"].append({"defence": "side stream", "message": suspect})
    verdict["failures"] += judge.judge_checkpoints(timed["checkpoints"], ref, device, args)
    if device.type == "cuda":
        with torch.no_grad():
            outputs = ref(*inputs)
            floor = profiling.roofline_floor_us(problem.count_flops(ref, inputs),
                                                problem.count_min_bytes(ref, inputs, outputs),
                                                profiling.measure_ceilings(device), args.flush_l2)
        verdict["roofline"] = floor
        if stats["median_us"] < floor["floor_us"]:
            verdict["failures"].append({"defence": "speed sanity", "message": (
                f"the solution's {stats['median_us']:.2f} µs is below the roofline floor "
                f"{floor['floor_us']:.2f} µs: impossible, so its timing missed work")})
    for kind, r in verdict["results"].items():
        if kind != "solution" and "median_us" in r:
            r["speedup"] = r["median_us"] / stats["median_us"]
