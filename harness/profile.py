"""`profile`: what a forward launches, how long the GPU spends on it, and how close that is to the roofline.

For the solution (in its worker, with the reference's weights loaded) and for the reference in eager
mode (here):
  - kernels per forward, from torch.profiler over --calls forwards: name, launches per forward, GPU µs
    per forward;
  - GPU-only time per forward: 20 forwards captured in one CUDA graph, replayed back to back between two
    CUDA events until --replays forwards ran (no Python or launch overhead in between); where capture fails,
    the sum of the profiled kernel times;
  - achieved bandwidth (the fewest bytes a forward must move, over its GPU time) and FLOP rate, against
    the copy bandwidth and bf16 matrix rate measured now and the floor (all of it in profiling.py);
  - the Nsight Compute command for the solution's kernels, when `ncu` is on PATH.
"""
import re
import shlex
import shutil

import torch

from harness import EXIT_INCORRECT, EXIT_PASS, EXIT_SOLUTION_ERROR, UsageError, judge, problem, profiling
from harness.client import SolutionFailure, Worker


def kernel_base_name(name: str) -> str:
    """'void ns::vae_kernel<16>(float const*, ...)' -> 'vae_kernel' (for ncu's -k regex:)."""
    name = re.sub(r"^\s*void\s+", "", name).replace("(anonymous namespace)", "")
    name = re.split(r"[<(\s]", name, maxsplit=1)[0]
    return name.split("::")[-1]


def ncu_command(verdict: dict, args) -> str:
    """The Nsight Compute command for the solution's kernels, or '' when ncu is not on PATH."""
    if not shutil.which("ncu"):
        return ""
    kernels = verdict.get("profiles", {}).get("solution", {}).get("kernels", [])
    names = sorted({kernel_base_name(k["name"]) for k in kernels if kernel_base_name(k["name"])})
    regex = "|".join(re.escape(n) for n in names) or "."
    cmd = ["ncu", "--clock-control", "none", "--target-processes", "all", "-k", f"regex:{regex}",
           "--launch-skip", "1", "--launch-count", str(max(1, len(names))), "--set", "full",
           "-o", "results/ncu_solution", "python", "-m", "harness", "profile", "--skip-eager", "--calls", "1",
           "--replays", "1", "--solution", args.solution, "--reference", args.reference]
    if args.batch_size:
        cmd += ["--batch-size", str(args.batch_size)]
    return " ".join(shlex.quote(c) for c in cmd)


def run_profile(args, progress=None) -> tuple:
    device = problem.resolve_device(args.device)
    if device.type != "cuda":
        raise UsageError("profile needs a CUDA GPU: it counts CUDA kernel launches and their GPU time")
    ref_module = problem.load_reference(args.reference)
    shape = {"batch_size": args.batch_size} if args.batch_size else {}
    init_args = problem.init_inputs(ref_module, shape)
    ref = problem.build_reference(ref_module, init_args, args.seed, device)
    inputs = problem.make_inputs(ref_module, args.seed, device, shape)
    verdict = {"command": "profile", "solution": args.solution, "reference": args.reference,
               "shape": problem.shape_label(ref_module, shape), "calls": args.calls,
               "environment": problem.environment(device), "failures": [], "profiles": {}}
    profiles = verdict["profiles"]
    try:
        with Worker(progress) as worker:
            worker.load(args, device, init_args)
            weights = {k: v.detach().cpu() for k, v in ref.state_dict().items()}
            reply = worker.request({"op": "set_weights", "state": weights}, timeout=args.call_timeout,
                                   what="loading weights")
            if reply["key_mismatch"]:
                verdict["failures"].append({"defence": "parameters", "message": "state_dict keys differ from the "
                                            f"reference's ({reply['key_mismatch']}): profiled with its own weights"})
            if progress:
                progress("profiling the solution")
            profiles["solution"] = worker.request(
                {"op": "profile", "inputs": problem.to_device(inputs, "cpu"),
                 "calls": args.calls, "replays": args.replays},
                timeout=args.call_timeout + args.calls + args.replays * 0.1, what="profiling the solution")
    except SolutionFailure as f:
        verdict["error"] = f.verdict()
        return verdict, EXIT_SOLUTION_ERROR
    verdict["failures"] += judge.tampered_during("during profiling", profiles["solution"].get("tampered", []))
    if not args.skip_eager:
        if progress:
            progress("profiling the reference in eager mode")
        profiles["eager"] = profiling.measure(lambda: ref(*inputs), device, args.calls, args.replays)
    if progress:
        progress("measuring copy bandwidth and matrix rate")
    with torch.no_grad():
        outputs = ref(*inputs)
        flops, min_bytes = problem.count_flops(ref, inputs), problem.count_min_bytes(ref, inputs, outputs)
    ceilings = profiling.measure_ceilings(device)
    floor = profiling.roofline_floor_us(flops, min_bytes, ceilings, flush_l2=False)
    verdict["roofline"] = dict(floor, **ceilings)
    for m in profiles.values():
        m["achieved"] = profiling.achieved(m["gpu_us"], flops, min_bytes, ceilings, floor["floor_us"])
    verdict["ncu_command"] = ncu_command(verdict, args)
    if progress:
        progress(None)
    return verdict, (EXIT_INCORRECT if verdict["failures"] else EXIT_PASS)
