"""The large-batch encoder GEMM, h = x We^T (B x 784 times 784 x 256), on Hopper's warpgroup MMA
(wgmma, sm_90a) in 3xTF32: whether a fused large-batch kernel can reach the ~2.5x-eager speed issue 11
asks for, where mma.sync topped out at 46-50 TFLOP/s fp32-equivalent (tools/gemm_probe.py, H200).

Block: 2 warpgroups (256 threads), BM = 128 rows (64 per warpgroup) x all 256 columns; one
wgmma.m64n256k8 per product per k-step, the three products (small*big, big*small, big*big) into one
fp32 accumulator (128 registers per thread). A (x) comes from registers: each thread's fragment
(rows 16w+g, +8; columns q, q+4 of the k-step, as mma.sync's m16n8k8) read from smem and split into
TF32 big + small. B (We) comes from smem through descriptors, pre-split into big and small TF32
arrays once (the probe measures the GEMM, not the split), laid out K-major without swizzle: core
matrices of 8 rows x 4 tf32 (128 contiguous bytes), 8-row groups every 128 B (SBO), the k4-7 half
of a k-step 16 N bytes after the k0-3 half (LBO). x and both We parts arrive by cp.async in K-chunks
of 16, STAGES deep. Facts used: PTX ISA 9.7.15 (wgmma), CUTLASS's GMMA K-major INTERLEAVE layout.
Run on the GPU machine from the repository root (about a minute, most of it the build):
    python3 tools/wgmma_probe.py
Not yet run on a GPU (written 2026-12-01 without device time left): expect to debug the layout if
the error against float64 is large.
"""
import os

import torch
from torch.utils.cpp_extension import load_inline

from gemm_probe import encoder_gemm_table
from tf32_mma import HELPERS

ACC = 128   # m64n256 f32 accumulator registers per thread


def _wgmma_asm() -> str:
    """One wgmma.m64n256k8 tf32 with A from 4 registers and B from a descriptor, accumulating."""
    d = ", ".join(f"%{i}" for i in range(ACC))
    outs = ", ".join(f'"+f"(c[{i}])' for i in range(ACC))
    return (
        "__device__ __forceinline__ void wgmma_tf32(float (&c)[%d], const uint32_t (&a)[4], uint64_t desc) {\n"
        "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n"
        '  asm volatile("{ .reg .pred p; setp.ne.b32 p, %%%d, 0; "\n'
        '               "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {%s}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1; }"\n'
        "               : %s\n"
        '               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));\n'
        "#endif\n"
        "}\n" % (ACC, ACC + 5, d, ACC, ACC + 1, ACC + 2, ACC + 3, ACC + 4, outs))


SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
""" + HELPERS + _wgmma_asm() + r"""
constexpr int K = 784, N = 256, BM = 128, BK = 16, STAGES = 4, THREADS = 256;
constexpr int XLD = BK + 4;                         // padded x row in smem: conflict-free fragment loads
constexpr int X_STAGE = BM * XLD;                   // floats
constexpr int B_PART = (BK / 8) * 8 * N;            // floats: one part (big or small) of a K-chunk of We
constexpr int STAGE = X_STAGE + 2 * B_PART;         // floats per stage
static_assert(K % BK == 0 && BK % 8 == 0, "whole k-steps and chunks");

__device__ __forceinline__ void wg_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_wait0() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
}
// smem matrix descriptor, no swizzle: start >> 4 (bits 0-13), LBO >> 4 (16-29), SBO >> 4 (32-45)
__device__ __forceinline__ uint64_t desc_noswizzle(const void* p, uint32_t lbo, uint32_t sbo) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32);
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
// We element (n, k) of a K-chunk in the canonical K-major no-swizzle layout (floats from the part's start)
__device__ __forceinline__ int b_offset(int n, int k) {
  return (k / 8) * 8 * N + ((k % 8) / 4) * 4 * N + (n / 8) * 32 + (n % 8) * 4 + (k % 4);
}

__global__ void __launch_bounds__(THREADS, 1) gemm_wgmma_k(const float* __restrict__ x, const float* __restrict__ wbig,
                                                           const float* __restrict__ wsmall, float* __restrict__ h, int B) {
  extern __shared__ __align__(1024) float sm[];
  const int tid = threadIdx.x, wg = tid / 128, w = (tid / 32) % 4, lane = tid & 31, g = lane >> 2, q = lane & 3;
  const int row0 = blockIdx.x * BM;
  auto load = [&](int kc, int s) {   // K-chunk kc into stage s: x rows (4 x 16 B per row), both We parts
    float* st = sm + s * STAGE;
    const int k0 = kc * BK;
    for (int e = tid; e < BM * (BK / 4); e += THREADS) {
      const int m = e / (BK / 4), c4 = e % (BK / 4), row = row0 + m;
      cp_async16(st + m * XLD + 4 * c4, x + (size_t)min(row, B - 1) * K + k0 + 4 * c4, row < B);
    }
    for (int e = tid; e < N * (BK / 4); e += THREADS) {
      const int n = e / (BK / 4), c4 = e % (BK / 4), off = b_offset(n, 4 * c4);
      cp_async16(st + X_STAGE + off, wbig + (size_t)n * K + k0 + 4 * c4, true);
      cp_async16(st + X_STAGE + B_PART + off, wsmall + (size_t)n * K + k0 + 4 * c4, true);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  float c[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) c[i] = 0.f;
  constexpr int CHUNKS = K / BK;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) load(s, s);
#pragma unroll 1
  for (int kc = 0; kc < CHUNKS; ++kc) {
    asm volatile("cp.async.wait_group %0;" :: "n"(STAGES - 2) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // cp.async wrote it; wgmma reads it
    __syncthreads();   // chunk kc landed for every thread; stage (kc - 1) % STAGES is free (its wgmmas waited)
    if (kc + STAGES - 1 < CHUNKS) load(kc + STAGES - 1, (kc + STAGES - 1) % STAGES);
    else asm volatile("cp.async.commit_group;" ::: "memory");   // keep the group count in step
    const float* st = sm + (kc % STAGES) * STAGE;
    // every A fragment of the chunk first: wgmma reads its A registers asynchronously, so none may be
    // rewritten before the wait below
    uint32_t ab[BK / 8][4], as[BK / 8][4];
#pragma unroll
    for (int j = 0; j < BK / 8; ++j) {
      const float* a = st + (64 * wg + 16 * w + g) * XLD + 8 * j + q;
      split(a[0], ab[j][0], as[j][0]);
      split(a[8 * XLD], ab[j][1], as[j][1]);
      split(a[4], ab[j][2], as[j][2]);
      split(a[8 * XLD + 4], ab[j][3], as[j][3]);
    }
    wg_fence();
#pragma unroll
    for (int j = 0; j < BK / 8; ++j) {
      const float* bb = st + X_STAGE + j * 8 * N;
      const uint64_t dbig = desc_noswizzle(bb, 16 * N, 128), dsmall = desc_noswizzle(bb + B_PART, 16 * N, 128);
      wgmma_tf32(c, as[j], dbig);     // small * big
      wgmma_tf32(c, ab[j], dsmall);   // big * small
      wgmma_tf32(c, ab[j], dbig);     // big * big
    }
    wg_commit();
    wg_wait0();   // the A registers are free again, and the stage may be refilled after the next barrier
  }
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(c[i]) :: "memory");
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#pragma unroll
  for (int i = 0; i < 128; ++i) c[i] = __int_as_float(0x7fc00000);   // built without sm_90a: NaN, not silence
#endif
#pragma unroll
  for (int r = 0; r < 128; ++r) {
    const int row = row0 + 64 * wg + 16 * w + g + 8 * ((r >> 1) & 1), col = 8 * (r >> 2) + 2 * q + (r & 1);
    if (row < B) h[(size_t)row * N + col] = c[r];
  }
}

void gemm_wgmma(torch::Tensor x, torch::Tensor wbig, torch::Tensor wsmall, torch::Tensor h) {
  const int B = x.size(0);
  const size_t smem = (size_t)STAGES * STAGE * sizeof(float);
  C10_CUDA_CHECK(cudaFuncSetAttribute(gemm_wgmma_k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  gemm_wgmma_k<<<(B + BM - 1) / BM, THREADS, smem, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), wbig.data_ptr<float>(), wsmall.data_ptr<float>(), h.data_ptr<float>(), B);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""


def tf32_round(t: torch.Tensor) -> torch.Tensor:
    """Round float32 to the nearest TF32 (10 explicit mantissa bits), ties away from zero as cvt.rna."""
    bits = t.contiguous().view(torch.int32)
    rounded = (bits + 0x1000) & ~0x1FFF   # add half of the dropped 13 bits' range, clear them
    return rounded.view(torch.float32)


def main():
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"   # wgmma needs the arch-specific target
    ext = load_inline("wgmma_probe", "void gemm_wgmma(torch::Tensor x, torch::Tensor wbig, torch::Tensor wsmall, "
                      "torch::Tensor h);", cuda_sources=SRC, functions=["gemm_wgmma"], extra_cuda_cflags=["-O3"])
    torch.manual_seed(0)
    w = torch.randn(256, 784, device="cuda") / 28   # about nn.Linear's init scale
    wbig = tf32_round(w)
    wsmall = tf32_round(w - wbig)
    encoder_gemm_table("h = x We^T, 784 -> 256, wgmma m64n256k8 3xTF32", lambda x, out: [
        ("3xTF32 wgmma, BM=128", lambda: ext.gemm_wgmma(x, wbig, wsmall, out))], w)


if __name__ == "__main__":
    main()
