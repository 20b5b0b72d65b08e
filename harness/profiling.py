"""Kernel profiling and the roofline: what a forward launches, how long the GPU spends on it, and the
least time it could take.

- profile_kernels(): kernels per forward from torch.profiler: name, launches per forward, GPU µs per
  forward (the worker runs it on the solution for `profile` and `--strict`; the harness on the
  reference).
- capture_graph(), graph_gpu_us(): GPU-only time per forward: FORWARDS_PER_GRAPH forwards captured in
  one CUDA graph and replayed back to back between two CUDA events (no Python or launch overhead in
  between; one forward a graph would time the host's replay call for a kernel shorter than it).
- measure(): both of the above; where capture fails, the sum of the profiled kernel times.
- measure_ceilings(), roofline_floor_us(), achieved(): copy bandwidth and bf16 matrix rate measured
  now, the floor they give, and how close a measured time comes to them.
"""
import torch
from torch.profiler import ProfilerActivity, profile

from harness import timing


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
    fn()
    timing._synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        timing._synchronize(device)
    return summarize_kernels(prof.events(), calls)


FORWARDS_PER_GRAPH = 20   # a replay costs the host ~5-30 us: one 13 us kernel a graph measured 31 us per forward


def capture_graph(fn, device, forwards: int = 1):
    """`forwards` calls of `fn` captured in one CUDA graph, after three warm-up calls on a side stream (as
    torch's CUDA-graph documentation does it)."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(forwards):
            fn()
    return graph


def graph_gpu_us(fn, device, replays: int) -> tuple:
    """(GPU time per forward, graph replays) from about `replays` forwards: graphs of FORWARDS_PER_GRAPH
    forwards replayed back to back, so the GPU never waits for the host's next replay call."""
    per_graph = min(FORWARDS_PER_GRAPH, replays)
    graphs = -(-replays // per_graph)
    graph = capture_graph(fn, device, per_graph)
    graph.replay()
    timing._synchronize(device)
    start, end = timing._Event(enable_timing=True), timing._Event(enable_timing=True)
    timing._record(start)
    for _ in range(graphs):
        graph.replay()
    timing._record(end)
    timing._synchronize(device)
    return timing._elapsed_time(start, end) * 1e3 / (graphs * per_graph), graphs


def measure(fn, device, calls: int, replays: int) -> dict:
    """Kernels and GPU-only time of `fn`, a zero-argument forward."""
    timing.warm_clock(device)   # an idle clock (345 of 1980 MHz here) makes every figure 1.2-5x worse
    with torch.no_grad():
        kernels = profile_kernels(fn, calls, device)
        out = {"kernels": kernels, "calls": calls, "kernel_sum_us": sum(k["gpu_us_per_forward"] for k in kernels)}
        try:
            out["graph_us"], graphs = graph_gpu_us(fn, device, replays)
            out["forwards_per_graph"] = min(FORWARDS_PER_GRAPH, replays)
            out["replays"] = graphs
        except Exception as e:
            out["graph_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    out["gpu_us"] = out.get("graph_us", out["kernel_sum_us"])
    out["gpu_us_source"] = "CUDA-graph replay" if "graph_us" in out else "sum of profiled kernel times"
    return out


def measure_ceilings(device) -> dict:
    """Copy bandwidth (bytes read + written) and bf16 matrix rate, measured now, for the floor."""
    n = 1 << 28
    a = torch.empty(n, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    m = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)

    def best(fn, reps=5):
        fn()
        start, end = timing._Event(enable_timing=True), timing._Event(enable_timing=True)
        seconds = []
        for _ in range(reps):
            timing._record(start)
            fn()
            timing._record(end)
            timing._event_synchronize(end)
            seconds.append(timing._elapsed_time(start, end) / 1e3)
        return min(seconds)
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


def achieved(gpu_us: float, flops: int, min_bytes: int, ceilings: dict, floor_us: float) -> dict:
    """A measured GPU time as bandwidth (of the fewest bytes) and FLOP rate, and their share of the ceilings."""
    seconds = gpu_us * 1e-6
    bandwidth = min_bytes / seconds
    flop_rate = flops / seconds
    return {"gpu_us": gpu_us, "bytes_per_s": bandwidth, "of_bandwidth": bandwidth / ceilings["bandwidth_bytes_per_s"],
            "flop_per_s": flop_rate, "of_peak": flop_rate / ceilings["peak_flop_per_s"],
            "times_floor": gpu_us / floor_us if floor_us > 0 else None}
