"""Timing on the GPU: clock warm-up, per-call CUDA-event timing, L2 flush, statistics.

Method (used for every implementation in one run, so their ratios are comparable):
  1. warm the SM clock: matrix products until NVML reads at least 85% of the maximum SM clock, or
     for about a second without NVML (an idle H200 sits at 345 MHz and every figure then reads
     1.2-5x worse);
  2. warm-up calls;
  3. timed calls: before each, optionally refresh the inputs in place and flush the L2, then
     synchronize the whole device; record a start event, call, record an end event; wait for the
     end event, then time a device-wide synchronize (work the call left running on another stream
     shows up there, against the same synchronize timed with nothing running); the event time is
     the call's time;
  4. back to back: the same number of calls without synchronizing in between, host wall time over
     the whole run divided by the count.
All timers are captured here when this module is imported, before any solution code runs.
"""
import contextlib
import os
import statistics
import time

import torch

_perf_counter_ns = time.perf_counter_ns
_Event = torch.cuda.Event
_record = torch.cuda.Event.record
_elapsed_time = torch.cuda.Event.elapsed_time
_event_synchronize = torch.cuda.Event.synchronize
_synchronize = torch.cuda.synchronize

L2_FLUSH_BYTES = 256 << 20
LEADERBOARD_L2_FLUSH_SHAPE = (32, 1024, 1024)  # int64, 256 MiB


def clear_l2_as_leaderboards(device):
    """The L2 clear KernelBench (timing.py clear_l2_cache) and GPU MODE (utils.clear_l2_cache) run before
    every timed call, allocation included: a fresh 256 MiB int64 buffer filled and freed. The harness's
    own flush (L2Flusher below) reuses one buffer instead."""
    dummy = torch.empty(LEADERBOARD_L2_FLUSH_SHAPE, dtype=torch.int64, device=device)
    dummy.fill_(42)
    del dummy


def summarize(samples_us: list) -> dict:
    s = sorted(samples_us)
    return {"median_us": statistics.median(s), "mean_us": statistics.fmean(s),
            "std_us": statistics.pstdev(s) if len(s) > 1 else 0.0, "min_us": s[0], "max_us": s[-1], "n": len(s)}


def sm_clocks_mhz(device_index: int = 0):
    """(current, maximum) SM clock through NVML (nvidia-ml-py), or None where it is not installed."""
    try:
        import pynvml
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        return (int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
                int(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)))
    except Exception:
        return None


def sm_clock_mhz(device_index: int = 0):
    """Current SM clock through NVML, or None."""
    clocks = sm_clocks_mhz(device_index)
    return clocks[0] if clocks else None


WARM_FRACTION = 0.85   # the clock counts as warm at this share of its maximum (idle: 345 of 1980 MHz)
WARM_MIN_SECONDS = 0.1


def warm_clock(device, seconds: float = 1.0) -> float:
    """Run matrix products until the SM clock has left its idle state: until NVML reads at least
    WARM_FRACTION of the maximum SM clock (after WARM_MIN_SECONDS), for `seconds` at most; without
    NVML, for `seconds`. Returns the seconds spent."""
    device = torch.device(device)
    if device.type != "cuda":
        return 0.0
    a = torch.randn(4096, 4096, device=device)

    def burst():
        nonlocal a
        for _ in range(10):
            a = torch.mm(a, a).clamp_(-1, 1)
        _synchronize(device)
    return run_until_warm(burst, lambda: sm_clocks_mhz(device.index or 0), seconds)


def run_until_warm(burst, read_clocks, seconds: float, min_seconds: float = WARM_MIN_SECONDS) -> float:
    """warm_clock's loop: `burst()` until `read_clocks()` (current, maximum) says warm or `seconds` pass."""
    start = _perf_counter_ns()
    elapsed = 0.0
    while elapsed < seconds:
        burst()
        elapsed = (_perf_counter_ns() - start) / 1e9
        if elapsed >= min_seconds:
            clocks = read_clocks()
            if clocks and clocks[0] >= WARM_FRACTION * clocks[1]:
                break
    return elapsed


class L2Flusher:
    """Writes a buffer larger than the L2 (60 MB on an H200) so the next call starts cold."""

    def __init__(self, device):
        self.buffer = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)

    def __call__(self):
        self.buffer.zero_()


def time_cuda(fn, *, device, iters: int, warmup: int, before_each=None, flush_l2=False, progress=None) -> dict:
    """Time `fn()` as the module docstring describes. `before_each(i)` runs outside the timed
    region before call i (the harness refreshes inputs there). Returns statistics in µs."""
    flusher = L2Flusher(device) if flush_l2 else None
    for i in range(warmup):
        if before_each:
            before_each(i)
        fn()
    _synchronize(device)
    idle_us = idle_leftover_us(device)
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    event_us, wall_us, leftover_us = [], [], []
    for i in range(iters):
        if before_each:
            before_each(i)
        if flusher:
            flusher()
        _synchronize(device)
        t0 = _perf_counter_ns()
        _record(start)
        fn()
        _record(end)
        _event_synchronize(end)
        t1 = _perf_counter_ns()
        _synchronize(device)
        t2 = _perf_counter_ns()
        event_us.append(_elapsed_time(start, end) * 1e3)
        wall_us.append((t1 - t0) / 1e3)
        leftover_us.append((t2 - t1) / 1e3)
        if progress and (i + 1) % max(1, iters // 20) == 0:
            progress(i + 1, iters)
    back_to_back_us = time_back_to_back(fn, device=device, iters=iters, before_each=before_each)
    result = summarize(event_us)
    result.update({"wall_median_us": statistics.median(wall_us),
                   "leftover_median_us": statistics.median(leftover_us),
                   "leftover_max_us": max(leftover_us), "idle_leftover_us": idle_us,
                   "back_to_back_us": back_to_back_us, "flush_l2": bool(flush_l2),
                   "samples_us": event_us, "wall_samples_us": wall_us, "leftover_samples_us": leftover_us})
    return result


def timing_cpu():
    """The host CPU that both processes time on (the highest one this process may use), or None
    where threads cannot be pinned."""
    return max(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


@contextlib.contextmanager
def pinned_to(cpu):
    """Run the calling thread (the one launching the work) on CPU `cpu` only, then restore it. Bench
    pins the harness and the solution's worker to the same CPU: a launch-bound forward measured in
    two processes otherwise depends on which core each landed on."""
    before = os.sched_getaffinity(0) if cpu is not None and hasattr(os, "sched_setaffinity") else set()
    if cpu not in before:
        yield
        return
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def merge_rounds(rounds: list) -> dict:
    """One implementation's statistics from several rounds of timing, its samples pooled: bench
    alternates rounds of the solution and of the references, so that slow spells of the machine
    (the H200's host swung eager's median between 310 and 620 µs from one run to the next) fall on
    all of them alike."""
    pooled = lambda key: [x for r in rounds for x in r[key]]
    samples, leftover = pooled("samples_us"), pooled("leftover_samples_us")
    result = summarize(samples)
    result.update({"wall_median_us": statistics.median(pooled("wall_samples_us")),
                   "leftover_median_us": statistics.median(leftover), "leftover_max_us": max(leftover),
                   "idle_leftover_us": statistics.median(r.get("idle_leftover_us", 0.0) for r in rounds),
                   "back_to_back_us": sum(r["back_to_back_us"] * r["n"] for r in rounds) / result["n"],
                   "flush_l2": rounds[0]["flush_l2"], "rounds": len(rounds),
                   "samples_us": samples})
    return result


def idle_leftover_us(device, reps: int = 21) -> float:
    """What the device-wide synchronize after the end event costs when nothing is left running
    (median µs): the baseline a call's leftover is compared with."""
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        _synchronize(device)
        _record(start)
        _record(end)
        _event_synchronize(end)
        t1 = _perf_counter_ns()
        _synchronize(device)
        samples.append((_perf_counter_ns() - t1) / 1e3)
    return statistics.median(samples)


def time_back_to_back(fn, *, device, iters: int, before_each=None) -> float:
    """Host wall time per call over `iters` calls issued without synchronizing in between."""
    if before_each:
        before_each(0)
    _synchronize(device)
    t0 = _perf_counter_ns()
    for _ in range(iters):
        fn()
    _synchronize(device)
    return (_perf_counter_ns() - t0) / 1e3 / iters


def time_cpu(fn, *, iters: int, warmup: int, before_each=None, progress=None, clock_ns=None) -> dict:
    """Host timing for --device cpu (and for tests, which pass a fake `clock_ns`)."""
    clock_ns = clock_ns or _perf_counter_ns
    for i in range(warmup):
        if before_each:
            before_each(i)
        fn()
    samples = []
    for i in range(iters):
        if before_each:
            before_each(i)
        t0 = clock_ns()
        fn()
        samples.append((clock_ns() - t0) / 1e3)
        if progress and (i + 1) % max(1, iters // 20) == 0:
            progress(i + 1, iters)
    result = summarize(samples)
    result.update({"wall_median_us": result["median_us"], "leftover_median_us": 0.0, "leftover_max_us": 0.0,
                   "back_to_back_us": result["mean_us"], "flush_l2": False, "samples_us": samples,
                   "wall_samples_us": samples, "leftover_samples_us": [0.0] * len(samples)})
    return result


def side_stream_suspect(stats: dict) -> str:
    """A reason when a call's events missed work it started: the device-wide synchronize after the
    end event still waited (beyond what it costs when nothing runs, by 10 µs + a quarter of the event
    time: a 40 µs kernel hidden behind an 8 µs launch shows), or the back-to-back wall time far
    exceeds the event time."""
    idle_us = stats.get("idle_leftover_us", 0.0)
    if stats["leftover_median_us"] > idle_us + 10.0 + 0.25 * stats["median_us"]:
        return (f"work still running after the call returned: the device-wide synchronize after the end event "
                f"waited {stats['leftover_median_us']:.1f} µs (median; {idle_us:.1f} µs when idle), event time "
                f"{stats['median_us']:.1f} µs")
    if stats["back_to_back_us"] > 2.0 * stats["median_us"] + 50.0:
        return (f"events missed work: back-to-back wall time {stats['back_to_back_us']:.1f} µs/call against "
                f"event median {stats['median_us']:.1f} µs")
    return ""
