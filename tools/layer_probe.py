"""The cluster kernel's last layer alone, as 3xTF32 tensor-core variants, timed per block and checked
against float64: the experiment to run before putting tensor cores into solution.py again
(notes/solution.md, v6: one accumulator per tile made every MMA wait ~150 cycles for the previous one).

One block per SM, 256 threads; each block computes logits (16 rows x 104 pixels, 98 real) = h2 (16 x 256)
W2s^T from its own slices in shared memory (rows padded to 260 floats, conflict-free fragments), then
writes them out. Only the MMA phase is timed (clock64, block-wide barriers around it). Variants:
  chain     warp w -> pixel tiles w, w+8; one accumulator per tile; the three products into it (v6)
  products  the same tiles, one accumulator per product (3 per tile), summed at the end
  kgroups   the same tiles, accumulators per product and per k-group of 8 k-steps (12 per tile)
  ksplit    warp w -> k-steps [4w, 4w+4) of all 13 tiles, one accumulator per tile; the 8 warps'
            partial tiles summed in smem (fixed order)
Run on the GPU machine from the repository root (about a minute, most of it the build):
    python3 tools/layer_probe.py
"""
import torch
from torch.utils.cpp_extension import load_inline

from tf32_mma import HELPERS

SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
""" + HELPERS + r"""
constexpr int M = 16, K = 256, NP = 98, NT = 13, WS = K + 4, WARPS = 8;

// fragments of m16n8k8 (g = lane / 4, t = lane % 4): A (row g|g+8, col t|t+4); B (k t|t+4, n g)
struct Frag { uint32_t big[4], small[4]; };
__device__ __forceinline__ Frag load_a(const float* h, int ks, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const float* p = h + ks * 8 + t;
  Frag f;
  split(p[g * WS], f.big[0], f.small[0]);
  split(p[(g + 8) * WS], f.big[1], f.small[1]);
  split(p[g * WS + 4], f.big[2], f.small[2]);
  split(p[(g + 8) * WS + 4], f.big[3], f.small[3]);
  return f;
}
__device__ __forceinline__ void load_b(const float* w, int nt, int ks, int lane, uint32_t (&bb)[2], uint32_t (&bs)[2]) {
  const float* p = w + (nt * 8 + (lane >> 2)) * WS + ks * 8 + (lane & 3);
  split(p[0], bb[0], bs[0]);
  split(p[4], bb[1], bs[1]);
}

// VARIANT: 0 chain, 1 products, 2 kgroups, 3 ksplit
template <int VARIANT>
__global__ void __launch_bounds__(256, 1) layer_k(const float* __restrict__ h2g, const float* __restrict__ w2g,
                                                  float* __restrict__ out, long long* __restrict__ cycles) {
  extern __shared__ float sm[];
  float* h = sm;                    // M x WS
  float* w = h + M * WS;            // 8 NT x WS (rows past 98 zero)
  float* part = w + 8 * NT * WS;    // WARPS x M x 8 NT (ksplit)
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const float* hb = h2g + (size_t)blockIdx.x * M * K;
  const float* wb = w2g + (size_t)blockIdx.x * NP * K;
  for (int i = tid; i < M * K; i += 256) h[(i / K) * WS + i % K] = hb[i];
  for (int i = tid; i < 8 * NT * K; i += 256) w[(i / K) * WS + i % K] = i < NP * K ? wb[i] : 0.f;
  __syncthreads();
  const long long t0 = clock64();
  float res[2][4] = {};   // chain / products / kgroups: this warp's tiles w, w+8
  if constexpr (VARIANT <= 2) {
    constexpr int KG = VARIANT == 2 ? 4 : 1, P = VARIANT >= 1 ? 3 : 1;
    float acc[2][KG][P][4] = {};
#pragma unroll 2
    for (int kk = 0; kk < (K / 8) / KG; ++kk) {
#pragma unroll
      for (int kg = 0; kg < KG; ++kg) {   // the k-groups' chains interleave
        const int ks = kk * KG + kg;
        const Frag a = load_a(h, ks, lane);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int nt = warp + WARPS * i;
          if (nt < NT) {
            uint32_t bb[2], bs[2];
            load_b(w, nt, ks, lane, bb, bs);
            mma(acc[i][kg][0], a.small, bb[0], bb[1]);
            mma(acc[i][kg][P > 1 ? 1 : 0], a.big, bs[0], bs[1]);
            mma(acc[i][kg][P > 1 ? 2 : 0], a.big, bb[0], bb[1]);
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        float s = 0.f;
#pragma unroll
        for (int kg = 0; kg < KG; ++kg)
#pragma unroll
          for (int p = 0; p < P; ++p) s += acc[i][kg][p][c];
        res[i][c] = s;
      }
  } else {   // ksplit
    float acc[NT][4] = {};
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int ks = warp * 4 + kk;
      const Frag a = load_a(h, ks, lane);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        uint32_t bb[2], bs[2];
        load_b(w, nt, ks, lane, bb, bs);
        mma(acc[nt], a.small, bb[0], bb[1]);
        mma(acc[nt], a.big, bs[0], bs[1]);
        mma(acc[nt], a.big, bb[0], bb[1]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        part[(warp * M + g + 8 * (c / 2)) * 8 * NT + nt * 8 + 2 * t + (c % 2)] = acc[nt][c];
  }
  __syncthreads();
  const long long t1 = clock64();
  float* ob = out + (size_t)blockIdx.x * M * NP;
  if constexpr (VARIANT <= 2) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int nt = warp + WARPS * i;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int r = g + 8 * (c / 2), p = nt * 8 + 2 * t + (c % 2);
        if (nt < NT && p < NP) ob[r * NP + p] = res[i][c];
      }
    }
  } else {
    for (int e = tid; e < M * NP; e += 256) {
      const int r = e / NP, p = e % NP;
      float s = 0.f;
      for (int wp = 0; wp < WARPS; ++wp) s += part[(wp * M + r) * 8 * NT + p];
      ob[e] = s;
    }
  }
  if (tid == 0) cycles[blockIdx.x] = t1 - t0;
}

void layer(torch::Tensor h2, torch::Tensor w2, torch::Tensor out, torch::Tensor cycles, int64_t variant) {
  const int blocks = h2.size(0);
  const size_t smem = (size_t)(M * WS + 8 * NT * WS + WARPS * M * 8 * NT) * sizeof(float);
  auto s = at::cuda::getCurrentCUDAStream();
  const float* a = h2.data_ptr<float>(); const float* b = w2.data_ptr<float>();
  float* o = out.data_ptr<float>(); long long* c = reinterpret_cast<long long*>(cycles.data_ptr<int64_t>());
#define CASE(V) case V: C10_CUDA_CHECK(cudaFuncSetAttribute(layer_k<V>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)); \
                        layer_k<V><<<blocks, 256, smem, s>>>(a, b, o, c); break;
  switch (variant) { CASE(0) CASE(1) CASE(2) CASE(3) default: TORCH_CHECK(false, "variant must be 0..3"); }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
VARIANTS = ("chain", "products", "kgroups", "ksplit")


def main():
    ext = load_inline("layer_probe", "void layer(torch::Tensor h2, torch::Tensor w2, torch::Tensor out, "
                      "torch::Tensor cycles, int64_t variant);", cuda_sources=SRC, functions=["layer"],
                      extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"])
    blocks = torch.cuda.get_device_properties(0).multi_processor_count
    torch.manual_seed(0)
    h2 = torch.rand(blocks, 16, 256, device="cuda")              # relu outputs: non-negative
    w2 = torch.randn(blocks, 98, 256, device="cuda") * 0.06       # about nn.Linear's init scale
    truth = torch.einsum("bmk,bnk->bmn", h2.double(), w2.double())
    fp32_err = (torch.einsum("bmk,bnk->bmn", h2, w2).double() - truth).abs().max().item()
    print(f"{torch.cuda.get_device_name()}: last layer of one cluster-kernel block (16 x 98 x 256), "
          f"{blocks} blocks; fp32 matmul's max error vs float64: {fp32_err:.2e}")
    print(f"{'variant':9} {'cycles (median block)':>22} {'max err vs fp64':>16}")
    for v, name in enumerate(VARIANTS):
        out = torch.zeros(blocks, 16, 98, device="cuda")
        cycles = torch.zeros(blocks, dtype=torch.int64, device="cuda")
        for _ in range(3):   # the first launches warm the clock and the code
            ext.layer(h2, w2, out, cycles, v)
        torch.cuda.synchronize()
        err = (out.double() - truth).abs().max().item()
        print(f"{name:9} {cycles.double().median().item():22.0f} {err:16.2e}")
    print("for comparison, v5's FFMA last layer took 9 900-10 500 cycles at R = 9 (notes/solution.md)")


if __name__ == "__main__":
    main()
