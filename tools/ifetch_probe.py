"""Does code that runs once per launch pay for its instruction fetches? (issue 10: the fused kernels' phases
outside their loops take far longer than their instruction counts say)

vae_elbo_kernel_wg<8> is ~24 K SASS instructions (~390 KB) and most of them run once per tile, straight-line
(unrolled epilogues, exchanges); the cluster kernel is ~3.8 K (~61 KB), all of it run once per forward. This
probe times N FFMAs in 8 independent chains per thread (about one instruction a clock for one warp: 8 chains
cover the FFMA latency), once straight-line (N instructions of code, each fetched once) and once as a loop of
the same FFMAs (a small body fetched once, then cached), on 132 blocks of 1 and of 8 warps, with clock64 around
the FFMAs in each block's thread 0 (median block; one warm-up launch first, so the code is in L2 as it is in a
CUDA-graph replay). Cycles per FFMA above the loop's say what fetching straight-line code costs.
Run on the GPU machine from the repository root (about two minutes, most of it the build):

    python3 tools/ifetch_probe.py
"""
import statistics

import torch
from torch.utils.cpp_extension import load_inline

SIZES = (1024, 4096, 8192, 16384)   # FFMAs per thread: 16, 64, 128, 256 KB of straight-line code (nvcc
# stops unrolling fully past 16 K)

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// N FFMAs in 8 chains; STRAIGHT: fully unrolled (N instructions of code), else a loop of 8 per trip
template <int N, bool STRAIGHT>
__global__ void ffma_k(const float* __restrict__ in, float* __restrict__ out, long long* __restrict__ cycles) {
  float a[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = in[j * 32 + (threadIdx.x & 31)];
  __syncthreads();
  const long long t0 = clock64();
  if constexpr (STRAIGHT) {
#pragma unroll
    for (int i = 0; i < N / 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) a[j] = fmaf(a[j], 1.0001f, (float)(i & 7));
  } else {
#pragma unroll 1
    for (int i = 0; i < N / 8; ++i) {
      const float b = (float)(i & 7);
#pragma unroll
      for (int j = 0; j < 8; ++j) a[j] = fmaf(a[j], 1.0001f, b);
    }
  }
  __syncthreads();
  const long long t1 = clock64();
  const float s = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
  if (s == 12345.f) out[threadIdx.x] = s;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <int N>
static void launch(const float* in, float* out, long long* cyc, int blocks, int threads, bool straight) {
  auto st = at::cuda::getCurrentCUDAStream();
  if (straight) ffma_k<N, true><<<blocks, threads, 0, st>>>(in, out, cyc);
  else ffma_k<N, false><<<blocks, threads, 0, st>>>(in, out, cyc);
}

void run(torch::Tensor in, torch::Tensor out, torch::Tensor cyc, int64_t n, int64_t threads, bool straight) {
  const int blocks = (int)cyc.numel();
  const float* i = in.data_ptr<float>();
  float* o = out.data_ptr<float>();
  long long* c = reinterpret_cast<long long*>(cyc.data_ptr<int64_t>());
  switch (n) {
    case 1024: launch<1024>(i, o, c, blocks, (int)threads, straight); break;
    case 4096: launch<4096>(i, o, c, blocks, (int)threads, straight); break;
    case 16384: launch<16384>(i, o, c, blocks, (int)threads, straight); break;
    case 8192: launch<8192>(i, o, c, blocks, (int)threads, straight); break;
    default: TORCH_CHECK(false, "ifetch_probe: no kernel for n = ", std::to_string(n));
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
CPP_SRC = "void run(torch::Tensor in, torch::Tensor out, torch::Tensor cyc, int64_t n, int64_t threads, bool straight);"


def main():
    ext = load_inline("ifetch_probe", CPP_SRC, cuda_sources=CUDA_SRC, functions=["run"],
                      extra_cuda_cflags=["-O3", "-gencode=arch=compute_90a,code=sm_90a"], verbose=False)
    blocks = torch.cuda.get_device_properties(0).multi_processor_count
    inp = torch.rand(256, device="cuda")
    out = torch.empty(256, device="cuda")
    cyc = torch.zeros(blocks, dtype=torch.int64, device="cuda")
    a = torch.randn(4096, 4096, device="cuda")
    for _ in range(50):   # warm the clock
        a @ a
    print(f"{blocks} blocks; cycles per FFMA (thread 0's clock64 over the FFMAs, median block, second launch)")
    print(f"{'FFMAs':>6} {'code KB':>8} {'warps':>6} {'loop':>7} {'straight':>9} {'extra / FFMA':>13}")
    for n in SIZES:
        for warps in (1, 8):
            per = {}
            for straight in (False, True):
                for _ in range(2):   # the first launch brings the code into L2
                    ext.run(inp, out, cyc, n, 32 * warps, straight)
                torch.cuda.synchronize()
                per[straight] = statistics.median(cyc.tolist()) / n
            print(f"{n:>6} {n * 16 // 1024:>8} {warps:>6} {per[False]:>7.2f} {per[True]:>9.2f} "
                  f"{per[True] - per[False]:>13.2f}", flush=True)


if __name__ == "__main__":
    main()
