"""How fast mma.sync m16n8k8 TF32 runs on this GPU, against FFMA: the numbers a tensor-core version of
solution.py's layers must be designed around (notes/solution.md, v6: about 150 cycles per MMA in a
dependent chain on the H200, which made the 3xTF32 layers slower than FFMA).

Each block of WARPS warps (one block per SM) runs ITERS rounds; in a round every warp issues one
MMA (1024 FMAs) or 16 FFMAs per lane (4 chains of 4; 512 FMAs per warp) into each of its ACC independent
accumulators, so every chain is ITERS long and ACC chains are in flight per warp. clock64() around
the loop gives cycles per round:
  latency-bound  cycles per round stay near one instruction's latency as ACC grows
  issue-bound    cycles per round grow with ACC x WARPS (the SM's throughput, FMA/clk/SM column)
Run on the GPU machine from the repository root (about a minute, most of it the build):
    python3 tools/mma_probe.py
"""
import torch
from torch.utils.cpp_extension import load_inline

from tf32_mma import HELPERS

ITERS = 256
SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
""" + f"constexpr int ITERS = {ITERS};\n" + HELPERS + r"""

// out[block * warps + warp] = cycles for ITERS rounds of ACC independent MMAs (or FFMA groups)
template <int ACC, bool MMA>
__global__ void probe_k(float* sink, long long* cycles) {
  const uint32_t a = __float_as_uint(1.0f + threadIdx.x * 1e-7f), b = __float_as_uint(0.5f);
  const uint32_t av[4] = {a, a, a, a};
  float c[ACC][4];
#pragma unroll
  for (int i = 0; i < ACC; ++i) c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.f;
  __syncthreads();
  const long long t0 = clock64();
#pragma unroll 1
  for (int it = 0; it < ITERS; ++it) {
#pragma unroll
    for (int i = 0; i < ACC; ++i) {
      if (MMA) {
        mma(c[i], av, b, b);
      } else {   // 16 dependent FFMAs per lane (4 per register of the accumulator)
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          c[i][0] = fmaf(c[i][0], 0.999f, 1e-3f); c[i][1] = fmaf(c[i][1], 0.999f, 1e-3f);
          c[i][2] = fmaf(c[i][2], 0.999f, 1e-3f); c[i][3] = fmaf(c[i][3], 0.999f, 1e-3f);
        }
      }
    }
  }
  const long long t1 = clock64();
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < ACC; ++i) s += c[i][0] + c[i][1] + c[i][2] + c[i][3];
  if (s == 1234.5f) sink[0] = s;
  if ((threadIdx.x & 31) == 0) cycles[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = t1 - t0;
}

void probe(torch::Tensor sink, torch::Tensor cycles, int64_t acc, bool use_mma, int64_t blocks, int64_t warps) {
  auto s = at::cuda::getCurrentCUDAStream();
  float* p = sink.data_ptr<float>();
  long long* q = reinterpret_cast<long long*>(cycles.data_ptr<int64_t>());
#define CASE(N) case N: if (use_mma) probe_k<N, true><<<blocks, warps * 32, 0, s>>>(p, q); \
                        else probe_k<N, false><<<blocks, warps * 32, 0, s>>>(p, q); break;
  switch (acc) { CASE(1) CASE(2) CASE(4) CASE(8) CASE(16) default: TORCH_CHECK(false, "acc must be 1, 2, 4, 8 or 16"); }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""


def main():
    ext = load_inline("mma_probe", "void probe(torch::Tensor sink, torch::Tensor cycles, int64_t acc, bool use_mma, "
                      "int64_t blocks, int64_t warps);", cuda_sources=SRC, functions=["probe"],
                      extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"])
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sink = torch.zeros(1, device="cuda")
    print(f"{torch.cuda.get_device_name()}, {sms} SMs, one block per SM, {ITERS} rounds; cycles per round "
          "(median over warps); a round = ACC MMAs m16n8k8 TF32 (1024 FMA each) or ACC x 16 FFMA per lane (512 per warp)")
    print(f"{'kind':5} {'warps':>5} {'acc':>4} {'cycles/round':>13} {'FMA/clk/SM':>11}")
    for mma in (False, True):
        for warps in (1, 4, 8, 16):
            for acc in (1, 2, 4, 8, 16):
                cycles = torch.zeros(sms * warps, dtype=torch.int64, device="cuda")
                for _ in range(2):   # the first launch warms the clock and the code
                    ext.probe(sink, cycles, acc, mma, sms, warps)
                torch.cuda.synchronize()
                per_round = cycles.double().median().item() / ITERS
                fma_per_round = acc * warps * (1024 if mma else 512)
                print(f"{'mma' if mma else 'ffma':5} {warps:5d} {acc:4d} {per_round:13.1f} {fma_per_round / per_round:11.1f}")


if __name__ == "__main__":
    main()
