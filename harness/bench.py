"""`bench`: time the solution beside the reference's implementations, in one run.

Implementations: the solution (in its worker), reference eager, torch.compile (default and
reduce-overhead), the eager reference captured in one CUDA graph, and a no-op load_inline kernel
call (the floor for any custom-kernel call from Python). Correctness is checked first; during
timing the inputs change before every call and a few calls are re-checked (see worker.py).
"""
import contextlib

import torch

from harness import EXIT_INCORRECT, EXIT_PASS, EXIT_SOLUTION_ERROR, check, compare, integrity, problem, timing
from harness.worker import SolutionFailure, Worker

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
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for _ in range(3):
                model(*inputs)
        torch.cuda.current_stream(device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(*inputs)
        return graph.replay
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


def measure_ceilings(device) -> dict:
    """Copy bandwidth (bytes read + written) and bf16 matrix rate, measured now, for the floor."""
    n = 1 << 28
    a = torch.empty(n, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    m = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    def best(fn, reps=5):
        fn()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(reps):
            s.record(); fn(); e.record(); e.synchronize()
            times.append(s.elapsed_time(e) / 1e3)
        return min(times)
    copy_s = best(lambda: b.copy_(a))
    mm_s = best(lambda: torch.mm(m, m))
    return {"bandwidth_bytes_per_s": 2 * n / copy_s, "peak_flop_per_s": 2 * 8192 ** 3 / mm_s,
            "l2_bytes": torch.cuda.get_device_properties(device).L2_cache_size}


def roofline_floor_us(flops, min_bytes, ceilings, flush_l2) -> dict:
    """The least time a forward can take: FLOPs over the fastest matrix rate (bf16, generous to any
    float32-accurate method), and, where the data cannot sit in the L2 between calls, bytes over the
    copy bandwidth."""
    compute_us = flops / ceilings["peak_flop_per_s"] * 1e6
    bytes_apply = flush_l2 or min_bytes > ceilings["l2_bytes"]
    memory_us = min_bytes / ceilings["bandwidth_bytes_per_s"] * 1e6 if bytes_apply else 0.0
    return {"floor_us": max(compute_us, memory_us), "compute_floor_us": compute_us, "memory_floor_us": memory_us,
            "memory_floor_applies": bytes_apply, "flops": flops, "min_bytes": min_bytes}


def verify_checkpoints(checkpoints, ref, device, args) -> list:
    """Outputs the worker kept from timed calls, checked against the reference on the same inputs."""
    failures = []
    for k, cp in enumerate(checkpoints):
        inputs = [t.to(device) if isinstance(t, torch.Tensor) else t for t in cp["inputs"]]
        expected, _, _ = check.reference_outputs(ref, inputs, cp["seed"], device)
        for i, e in enumerate(expected):
            if i >= len(cp["metas"]):
                break
            r = compare.compare_output(check.output_name(i, len(expected)), cp["outputs"][i], cp["metas"][i],
                                       e, args.tol, args.tol)
            if not r["ok"]:
                failures.append({"defence": "caching/replay", "message": f"timed call checkpoint {k + 1}: "
                                 "fresh inputs gave a stale or wrong result: " + compare.format_output_report(r)})
                break
    if not checkpoints:
        failures.append({"defence": "caching/replay", "message": "no timed call could be re-checked"})
    return failures


def environment(device) -> dict:
    env = {"torch": torch.__version__, "device": str(device), "tf32_matmul": torch.backends.cuda.matmul.allow_tf32}
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cuda"] = torch.version.cuda
    return env


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
    """`worker`: one already loaded with this shape's init args, to reuse (a sweep keeps one for all
    its sizes); `shape`: size overrides (default: --batch-size)."""
    device = check.resolve_device(args.device)
    check.require_strict_device(args, device)
    ref_module = problem.load_reference(args.reference)
    if shape is None:
        shape = {"batch_size": args.batch_size} if args.batch_size else {}
    init_args = problem.init_inputs(ref_module, shape)
    verdict = {"command": "bench", "solution": args.solution, "reference": args.reference,
               "shape": check.shape_label(ref_module, shape), "iters": args.iters, "warmup": args.warmup,
               "flush_l2": args.flush_l2, "environment": environment(device), "results": {}, "failures": []}
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    unknown = skip - set(IMPLEMENTATIONS)
    if unknown:
        from harness import UsageError
        raise UsageError(f"--skip: unknown implementation(s) {sorted(unknown)}; known: {', '.join(IMPLEMENTATIONS)}")
    ref = problem.build_reference(ref_module, init_args, args.seed, device)
    inputs = problem.make_inputs(ref_module, args.seed, device, shape)
    try:
        with contextlib.ExitStack() as stack:
            if worker is None:
                worker = stack.enter_context(Worker(progress))
                load = worker.request({"op": "load", "solution": args.solution, "reference": args.reference,
                                       "device": str(device), "init_args": init_args, "seed": args.seed},
                                      timeout=args.load_timeout, what="importing and building the solution")
                verdict["scan"] = integrity.scan_source(load["source"])
                verdict["failures"] += integrity.scan_failures(verdict["scan"])
                if load["tampered"]:
                    verdict["failures"].append({"defence": "tampering", "message": "importing the solution "
                                                "replaced " + ", ".join(load["tampered"])})
            for trial in range(args.trials):
                if progress:
                    progress(f"checking correctness before timing: trial {trial + 1}/{args.trials}")
                result = check.check_trial(worker, ref_module, init_args, shape, args.seed + trial, device, args,
                                           other_seed=False)
                if result["failures"]:
                    verdict["failures"] += result["failures"]
                    return verdict, EXIT_INCORRECT
            ref = problem.build_reference(ref_module, init_args, args.seed + args.trials - 1, device)
            if getattr(args, "strict", False):
                failures, verdict["custom_kernels"] = check.strict_failures(worker, inputs, args, ref)
                verdict["failures"] += failures
            with torch.no_grad():
                timers = prepare_references(ref, inputs, device, args, skip, verdict, progress)
            solution_rounds, reference_rounds, checkpoints, tampered = [], {kind: [] for kind in timers}, [], set()
            split = split_rounds(args.iters, getattr(args, "rounds", 5))
            verdict["rounds"] = len(split)
            cpu = verdict["cpu"] = pinned_cpu(getattr(args, "pin_cpu", "auto"), device)
            host_inputs = [t.cpu() if isinstance(t, torch.Tensor) else t for t in inputs]
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
    except SolutionFailure as f:
        verdict["error"] = {"kind": f.kind, "message": f.message, "detail": f.detail}
        return verdict, EXIT_SOLUTION_ERROR
    stats = timing.merge_rounds(solution_rounds)
    stats["sm_clock_mhz_before"] = solution_rounds[0].get("sm_clock_mhz_before")
    stats["sm_clock_mhz_after"] = solution_rounds[-1].get("sm_clock_mhz_after")
    verdict["results"]["solution"] = stats
    for kind, rounds in reference_rounds.items():
        verdict["results"][kind] = timing.merge_rounds(rounds)
    if tampered:
        verdict["failures"].append({"defence": "tampering", "message": "during timing the solution replaced "
                                    + ", ".join(sorted(tampered))})
    suspect = timing.side_stream_suspect(stats) if device.type == "cuda" else ""
    if suspect:
        verdict["failures"].append({"defence": "side stream", "message": suspect})
    verdict["failures"] += verify_checkpoints(checkpoints, ref, device, args)
    if device.type == "cuda":
        with torch.no_grad():
            outputs = ref(*inputs)
            floor = roofline_floor_us(problem.count_flops(ref, inputs), problem.count_min_bytes(ref, inputs, outputs),
                                      measure_ceilings(device), args.flush_l2)
        verdict["roofline"] = floor
        if stats["median_us"] < floor["floor_us"]:
            verdict["failures"].append({"defence": "speed sanity", "message": (
                f"the solution's {stats['median_us']:.2f} µs is below the roofline floor "
                f"{floor['floor_us']:.2f} µs: impossible, so its timing missed work")})
    for kind, r in verdict["results"].items():
        if kind != "solution" and "median_us" in r:
            r["speedup"] = r["median_us"] / stats["median_us"]
    return verdict, (EXIT_INCORRECT if verdict["failures"] else EXIT_PASS)
