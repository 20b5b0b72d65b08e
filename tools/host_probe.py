"""Where a forward's per-call time goes on the host: the CPU cost of each layer of the call, and the
per-call latency the harness measures (CUDA events around one call, a sync between calls).

Layers, from the floor up: the harness's no-op load_inline kernel call; the solution's extension
function called directly (argument conversion, checks, the noise reservation, the output allocation,
the launch, three output views); ModelNew.forward; model(x) through nn.Module.__call__. Each is timed
two ways: the host's time inside the call (perf_counter_ns around it, the GPU kept from backing up by
a sync every 32 calls, outside the timed part), and the harness's per-call latency (events around the
call, a device sync after it). Run on the GPU machine from the repository root:

    python3 tools/host_probe.py --sizes 1,128
"""
import argparse
import os
import statistics
import sys
import time

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def host_us(fn, calls=3000, sync_every=32):
    """Median CPU µs inside fn(), the GPU synchronized every `sync_every` calls (outside the timing)."""
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    samples = []
    for i in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
        if i % sync_every == sync_every - 1:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return statistics.median(samples) / 1e3


def latency_us(fn, calls=1000):
    """Median µs between CUDA events around one call, a device sync after each (the harness's per call)."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(calls):
        torch.cuda.synchronize()
        a.record()
        fn()
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b) * 1e3)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,128")
    args = ap.parse_args()
    import solution
    from harness import bench, timing
    noop = bench.noop_extension()
    model = solution.ModelNew(784, 256, 32).cuda()
    params = model._params
    ext = solution._ext
    timing.warm_clock(torch.device("cuda"), 2.0)
    print(f"{'B':>5s} {'layer':44s} {'host us':>8s} {'per call us':>12s}")
    for B in (int(b) for b in args.sizes.split(",")):
        x = torch.rand(B, 784, device="cuda")
        layers = [
            ("no-op load_inline kernel call", lambda: noop.noop(x)),
            ("torch.empty((3, B)) + 3 selects", lambda: torch.empty((3, B), device="cuda").unbind(0)),
            ("_ext.vae_forward(x, *params, 0)", lambda: ext.vae_forward(x, *params, 0)),
            ("ModelNew.forward(x)", lambda: model.forward(x)),
            ("model(x) (nn.Module.__call__)", lambda: model(x)),
        ]
        with torch.no_grad():
            for name, fn in layers:
                print(f"{B:5d} {name:44s} {host_us(fn):8.2f} {latency_us(fn):12.2f}", flush=True)


if __name__ == "__main__":
    main()
