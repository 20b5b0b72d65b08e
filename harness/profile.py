"""`profile`: what a forward launches, how long the GPU spends on it, and how close that is to the roofline.

For the solution (in its worker, with the reference's weights loaded) and for the reference in eager
mode (here):
  - kernels per forward, from torch.profiler over --calls forwards: name, launches per forward, GPU µs
    per forward;
  - GPU-only time per forward: one forward captured in a CUDA graph and replayed --replays times back
    to back between two CUDA events (no Python or launch overhead in between); where capture fails,
    the sum of the profiled kernel times;
  - achieved bandwidth (the fewest bytes a forward must move, over its GPU time) and FLOP rate, against
    the copy bandwidth and bf16 matrix rate measured now (bench.measure_ceilings) and the floor
    (bench.roofline_floor_us);
  - the Nsight Compute command for the solution's kernels, when `ncu` is on PATH.
"""
import re
import shlex
import shutil

import torch

from harness import EXIT_INCORRECT, EXIT_PASS, EXIT_SOLUTION_ERROR, UsageError, bench, check, problem, report, timing
from harness.cli import positive_int
from harness.worker import SolutionFailure, Worker

NAME_WIDTH = 60



def add_parser(sub, common):
    p = sub.add_parser("profile", parents=[common], help="kernels per forward, GPU-only time, roofline")
    p.add_argument("--batch-size", type=positive_int, help="override the reference's batch_size")
    p.add_argument("--calls", type=positive_int, default=20, help="forwards under torch.profiler (default 20)")
    p.add_argument("--replays", type=positive_int, default=200,
                   help="CUDA-graph replays for the GPU-only time (default 200)")
    p.add_argument("--skip-eager", action="store_true", help="profile the solution only")
    return p


# ----- measuring (used in the worker for the solution, here for the reference) -------------------

def summarize_kernels(events, calls: int) -> list:
    """GPU-side profiler events -> one dict per kernel name, most GPU time first."""
    kernels = {}
    for e in events:
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        us = getattr(e, "device_time_total", None)
        if not us:
            us = e.time_range.elapsed_us()
        k = kernels.setdefault(e.name, {"name": e.name, "count": 0, "gpu_us": 0.0})
        k["count"] += 1
        k["gpu_us"] += float(us)
    rows = sorted(kernels.values(), key=lambda k: -k["gpu_us"])
    for k in rows:
        k["per_forward"] = k["count"] / calls
        k["gpu_us_per_forward"] = k["gpu_us"] / calls
    return rows


def profile_kernels(fn, calls: int, device) -> list:
    from torch.profiler import ProfilerActivity, profile
    fn()
    timing._synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        timing._synchronize(device)
    return summarize_kernels(prof.events(), calls)


def graph_gpu_us(fn, device, replays: int) -> float:
    """GPU time per forward from `replays` back-to-back replays of one captured forward."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    timing._synchronize(device)
    start, end = timing._Event(enable_timing=True), timing._Event(enable_timing=True)
    timing._record(start)
    for _ in range(replays):
        graph.replay()
    timing._record(end)
    timing._synchronize(device)
    return timing._elapsed_time(start, end) * 1e3 / replays


def measure(fn, device, calls: int, replays: int) -> dict:
    """Kernels and GPU-only time of `fn`, a zero-argument forward."""
    with torch.no_grad():
        kernels = profile_kernels(fn, calls, device)
        out = {"kernels": kernels, "calls": calls, "kernel_sum_us": sum(k["gpu_us_per_forward"] for k in kernels)}
        try:
            out["graph_us"] = graph_gpu_us(fn, device, replays)
            out["replays"] = replays
        except Exception as e:
            out["graph_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    out["gpu_us"] = out.get("graph_us", out["kernel_sum_us"])
    out["gpu_us_source"] = "CUDA-graph replay" if "graph_us" in out else "sum of profiled kernel times"
    return out


def worker_profile(state, m) -> dict:
    """The worker's side: the solution's forward, measured as `measure` says."""
    device, model = state["device"], state["model"]
    inputs = [t.to(device) if isinstance(t, torch.Tensor) else t for t in m["inputs"]]
    return measure(lambda: model(*inputs), device, m["calls"], m["replays"])


# ----- the command ---------------------------------------------------------------------------------

def achieved(gpu_us: float, flops: int, min_bytes: int, ceilings: dict, floor_us: float) -> dict:
    seconds = gpu_us * 1e-6
    bandwidth = min_bytes / seconds
    flop_rate = flops / seconds
    return {"gpu_us": gpu_us, "bytes_per_s": bandwidth, "of_bandwidth": bandwidth / ceilings["bandwidth_bytes_per_s"],
            "flop_per_s": flop_rate, "of_peak": flop_rate / ceilings["peak_flop_per_s"],
            "times_floor": gpu_us / floor_us if floor_us > 0 else None}


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
    device = check.resolve_device(args.device)
    if device.type != "cuda":
        raise UsageError("profile needs a CUDA GPU: it counts CUDA kernel launches and their GPU time")
    ref_module = problem.load_reference(args.reference)
    shape = {"batch_size": args.batch_size} if args.batch_size else {}
    init_args = problem.init_inputs(ref_module, shape)
    ref = problem.build_reference(ref_module, init_args, args.seed, device)
    inputs = problem.make_inputs(ref_module, args.seed, device, shape)
    verdict = {"command": "profile", "solution": args.solution, "reference": args.reference,
               "shape": check.shape_label(ref_module, shape), "calls": args.calls,
               "environment": bench.environment(device), "failures": [], "profiles": {}}
    profiles = verdict["profiles"]
    try:
        with Worker(progress) as worker:
            worker.request({"op": "load", "solution": args.solution, "reference": args.reference,
                            "device": str(device), "init_args": init_args, "seed": args.seed},
                           timeout=args.load_timeout, what="importing and building the solution")
            weights = {k: v.detach().cpu() for k, v in ref.state_dict().items()}
            reply = worker.request({"op": "set_weights", "state": weights}, timeout=args.call_timeout,
                                   what="loading weights")
            if reply["key_mismatch"]:
                verdict["failures"].append({"defence": "parameters", "message": "state_dict keys differ from the "
                                            f"reference's ({reply['key_mismatch']}): profiled with its own weights"})
            if progress:
                progress("profiling the solution")
            profiles["solution"] = worker.request(
                {"op": "profile", "inputs": [t.cpu() if isinstance(t, torch.Tensor) else t for t in inputs],
                 "calls": args.calls, "replays": args.replays},
                timeout=args.call_timeout + args.calls + args.replays * 0.1, what="profiling the solution")
    except SolutionFailure as f:
        verdict["error"] = {"kind": f.kind, "message": f.message, "detail": f.detail}
        return verdict, EXIT_SOLUTION_ERROR
    if profiles["solution"].get("tampered"):
        verdict["failures"].append({"defence": "tampering", "message": "during profiling the solution replaced "
                                    + ", ".join(profiles["solution"]["tampered"])})
    if not args.skip_eager:
        if progress:
            progress("profiling the reference in eager mode")
        profiles["eager"] = measure(lambda: ref(*inputs), device, args.calls, args.replays)
    if progress:
        progress("measuring copy bandwidth and matrix rate")
    with torch.no_grad():
        outputs = ref(*inputs)
        flops, min_bytes = problem.count_flops(ref, inputs), problem.count_min_bytes(ref, inputs, outputs)
    ceilings = bench.measure_ceilings(device)
    floor = bench.roofline_floor_us(flops, min_bytes, ceilings, flush_l2=False)
    verdict["roofline"] = dict(floor, **ceilings)
    for m in profiles.values():
        m["achieved"] = achieved(m["gpu_us"], flops, min_bytes, ceilings, floor["floor_us"])
    verdict["ncu_command"] = ncu_command(verdict, args)
    if progress:
        progress(None)
    return verdict, (EXIT_INCORRECT if verdict["failures"] else EXIT_PASS)


# ----- the report ----------------------------------------------------------------------------------

def _short(name: str, width: int = NAME_WIDTH) -> str:
    return name if len(name) <= width else name[:width - 3] + "..."


def format_kernels(title: str, m: dict) -> list:
    launches = sum(k["per_forward"] for k in m["kernels"])
    lines = [f"{title}: {launches:g} kernel launch{'es' if launches != 1 else ''} per forward "
             f"({len(m['kernels'])} distinct)"]
    rows = [[_short(k["name"]), f"{k['per_forward']:g}", f"{k['gpu_us_per_forward']:.2f}",
             f"{100 * k['gpu_us_per_forward'] / m['kernel_sum_us']:.0f}%" if m["kernel_sum_us"] else "-"]
            for k in m["kernels"]]
    lines += ["  " + line for line in report.table(["kernel", "per forward", "GPU us/forward", "share"],
                                                    rows).splitlines()]
    if "graph_us" in m:
        lines.append(f"  GPU-only time per forward: {m['graph_us']:.2f} us (one forward captured in a CUDA graph, "
                     f"{m['replays']} replays back to back); profiled kernels sum to {m['kernel_sum_us']:.2f} us")
    else:
        lines.append(f"  GPU-only time per forward: {m['kernel_sum_us']:.2f} us (sum of profiled kernel times; "
                     f"CUDA-graph capture failed: {m.get('graph_error', '?')})")
    return lines


def format_profile(verdict: dict, exit_code: int) -> str:
    env = verdict.get("environment", {})
    lines = [f"profile: {verdict['solution']} on {env.get('gpu', env.get('device'))}, {verdict['shape']}, "
             f"torch {env.get('torch')}; {verdict['calls']} forwards under torch.profiler"]
    if verdict.get("error"):
        e = verdict["error"]
        lines += ["", f"ERROR ({e['kind']}): {e['message']}"]
        if e.get("detail"):
            lines += ["  " + line for line in e["detail"].rstrip().splitlines()[-15:]]
        return "\n".join(lines + ["", f"ERROR: exit {exit_code}"])
    profiles = verdict.get("profiles", {})
    for kind, title in (("solution", "solution"), ("eager", "reference eager")):
        if kind in profiles:
            lines += [""] + format_kernels(title, profiles[kind])
    if "roofline" in verdict:
        f = verdict["roofline"]
        lines += ["", f"roofline (measured now: copy {f['bandwidth_bytes_per_s'] / 1e12:.2f} TB/s, bf16 matrix "
                      f"{f['peak_flop_per_s'] / 1e12:.0f} TFLOP/s; one forward: {f['flops'] / 1e6:.1f} MFLOP, at least "
                      f"{f['min_bytes'] / 1e6:.2f} MB moved):"]
        rows = []
        for kind, label in (("solution", "solution"), ("eager", "reference eager")):
            a = profiles.get(kind, {}).get("achieved")
            if a:
                rows.append([label, f"{a['gpu_us']:.2f}", f"{a['bytes_per_s'] / 1e9:.0f}", f"{100 * a['of_bandwidth']:.1f}%",
                             f"{a['flop_per_s'] / 1e12:.2f}", f"{100 * a['of_peak']:.2f}%",
                             f"{a['times_floor']:.1f}x" if a["times_floor"] else "-"])
        lines += ["  " + line for line in report.table(
            ["implementation", "GPU us/forward", "GB/s (min bytes)", "of copy bw", "TFLOP/s", "of bf16 peak",
             "x floor"], rows).splitlines()]
        lines.append(f"  floor {f['floor_us']:.2f} us = max(compute {f['compute_floor_us']:.2f} us, memory "
                     f"{f['memory_floor_us']:.2f} us{'' if f['memory_floor_applies'] else ': data fits in L2, not counted'})")
    if verdict.get("ncu_command"):
        lines += ["", "Nsight Compute on the solution's kernels:", "  " + verdict["ncu_command"]]
    else:
        lines += ["", "ncu (Nsight Compute) is not on PATH: no kernel-level command printed"]
    for f in verdict.get("failures", []):
        lines += ["", f"FAIL [{f['defence']}] {f['message']}"]
    lines += ["", f"{'PASS' if exit_code == 0 else 'FAIL'}: exit {exit_code}"]
    return "\n".join(lines)
