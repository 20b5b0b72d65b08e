"""Where a forward's per-call time goes on the host: the CPU cost of each layer of the call, and the
per-call latency the harness measures (CUDA events around one call, a sync between calls).

Layers, from the floor up: the harness's no-op load_inline kernel call; pieces of a host path in a probe
extension of their own (12 tensor arguments converted and checked; the (3, B) output and its three row
views by select, v12's way; torch's Philox reservation; an empty kernel launched as the cluster kernel is:
120 blocks of 256 threads in clusters of 8 with 200 KB of dynamic shared memory); the solution's
extension function called directly, with 12 tensor arguments and as its ModelNew calls it (x and the
ParamSet holding the 10); ModelNew.forward; model(x) through nn.Module.__call__. Each is timed two ways:
the host's time inside the call (perf_counter_ns around it, the GPU kept from backing up by a sync every
32 calls, outside the timed part), and the harness's per-call latency (events around the call, a device
sync after it). Run on the GPU machine from the repository root:

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


PROBE_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/core/DistributionsHelper.h>
#include <mutex>
__global__ void __cluster_dims__(8, 1, 1) probe_cluster_kernel(float* out) { if (out && threadIdx.x == 1024) out[0] = 0.f; }
int64_t args12(at::Tensor x, const at::Tensor& a, const at::Tensor& b, const at::Tensor& c, const at::Tensor& d,
               const at::Tensor& e, const at::Tensor& f, const at::Tensor& g, const at::Tensor& h, const at::Tensor& i,
               const at::Tensor& j, int64_t k) {
  const at::Tensor* ts[11] = {&x, &a, &b, &c, &d, &e, &f, &g, &h, &i, &j};
  int64_t n = 0;
  for (const at::Tensor* t : ts) n += t->is_contiguous() && t->scalar_type() == at::kFloat && t->device() == x.device();
  return n + k;
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> out3(const at::Tensor& x) {
  at::Tensor out = at::empty({3, x.size(0)}, x.options());
  return {out.select(0, 0), out.select(0, 1), out.select(0, 2)};
}
int64_t philox(const at::Tensor& x) {
  auto gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(
      std::nullopt, at::cuda::detail::getDefaultCUDAGenerator(x.device().index()));
  std::lock_guard<std::mutex> lock(gen->mutex_);
  return (int64_t)gen->philox_cuda_state(4).offset_.val;
}
void cluster_launch(const at::Tensor& x, int64_t blocks, int64_t smem) {
  static bool configured = false;
  if (!configured) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(probe_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    configured = true;
  }
  probe_cluster_kernel<<<(int)blocks, 256, (size_t)smem, at::cuda::getCurrentCUDAStream()>>>(nullptr);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
PROBE_DECL = """int64_t args12(at::Tensor x, const at::Tensor& a, const at::Tensor& b, const at::Tensor& c, const at::Tensor& d,
               const at::Tensor& e, const at::Tensor& f, const at::Tensor& g, const at::Tensor& h, const at::Tensor& i,
               const at::Tensor& j, int64_t k);
std::tuple<at::Tensor, at::Tensor, at::Tensor> out3(const at::Tensor& x);
int64_t philox(const at::Tensor& x);
void cluster_launch(const at::Tensor& x, int64_t blocks, int64_t smem);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("args12", &args12);
  m.def("out3", &out3);
  m.def("philox", &philox);
  m.def("cluster_launch", &cluster_launch);
}
"""


def probe_extension():
    from torch.utils.cpp_extension import load_inline
    return load_inline(name="vae_host_probe", cpp_sources=PROBE_DECL, cuda_sources=PROBE_SRC,
                       functions=None, extra_cuda_cflags=["-O3"],
                       verbose=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,128")
    args = ap.parse_args()
    import solution
    from harness import bench, timing
    noop = bench.noop_extension()
    probe = probe_extension()
    model = solution.ModelNew(784, 256, 32).cuda()
    params = model._params
    ext = solution._ext
    held = ext.vae_params(list(params))   # what ModelNew.forward passes
    timing.warm_clock(torch.device("cuda"), 2.0)
    print(f"{'B':>5s} {'layer':44s} {'host us':>8s} {'per call us':>12s}")
    for B in (int(b) for b in args.sizes.split(",")):
        x = torch.rand(B, 784, device="cuda")
        layers = [
            ("no-op load_inline kernel call", lambda: noop.noop(x)),
            ("12 tensor arguments converted and checked", lambda: probe.args12(x, *params, 0)),
            ("(3, B) output and its 3 rows by select (C++)", lambda: probe.out3(x)),
            ("Philox reservation (C++, generator mutex)", lambda: probe.philox(x)),
            ("empty cluster kernel, 120 x 256, 200 KB smem", lambda: probe.cluster_launch(x, 120, 200 << 10)),
            ("_ext.vae_forward(x, *params, 0)", lambda: ext.vae_forward(x, *params, 0)),
            ("_ext.vae_forward_held(x, held, 0)", lambda: ext.vae_forward_held(x, held, 0)),
            ("ModelNew.forward(x)", lambda: model.forward(x)),
            ("model(x) (nn.Module.__call__)", lambda: model(x)),
        ]
        with torch.no_grad():
            for name, fn in layers:
                print(f"{B:5d} {name:44s} {host_us(fn):8.2f} {latency_us(fn):12.2f}", flush=True)


if __name__ == "__main__":
    main()
