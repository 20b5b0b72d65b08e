"""The large-batch encoder GEMM, h = x We^T (B x 784 times 784 x 256), on Hopper's warpgroup MMA
(wgmma, sm_90a) in 3xTF32, in the variants listed in VARIANTS, beside cuBLAS fp32 and TF32, each with
its error against float64 (issue 11; results in notes/solution.md).

Each block has BM rows (64 per warpgroup) and each warpgroup WN columns: one wgmma.m64n<WN>k8 per
product per k-step, the three products (small*big, big*small, big*big) into one fp32 accumulator.
A (x) comes from registers: each thread's fragment (rows 16w+g, +8; columns q, q+4 of the k-step, as
mma.sync's m16n8k8) read from smem and split into TF32 big + small. B (We) comes from smem through
descriptors, pre-split into big and small TF32 arrays once (the probe measures the GEMM, not the
split), K-major: without swizzle (core matrices of 8 rows x 16 B, SBO = 128 B between 8-row groups,
LBO = 16 N B between a k-step's two 4-wide halves) or with the 64- / 128-byte swizzle (one row of a
K-chunk per 64 / 128 B, 16-byte units XOR-ed by address bits 7-8 / 7-9, SBO = 8 rows, the k-step's
descriptor 32 B further on). x and both We parts arrive by cp.async in K-chunks, STAGES deep; WAIT = 1
keeps one chunk's wgmma in flight (A registers double-buffered); PROMOTE = 1 adds each chunk's
accumulator into fp32 registers (the tensor core's accumulation keeps fewer bits than fp32).
Facts used: PTX ISA 9.7.15 (wgmma, matrix descriptors), CUTLASS's GMMA K-major layouts.
Run on the GPU machine from the repository root (about a minute, most of it the build):
    python3 tools/wgmma_probe.py
"""
import os

import torch
from torch.utils.cpp_extension import load_inline

from gemm_probe import encoder_gemm_table
from tf32_mma import HELPERS


def _wgmma_asm(n: int) -> str:
    """One wgmma.m64n<n>k8 tf32 with A from 4 registers and B from a descriptor, accumulating."""
    acc = n // 2
    d = ", ".join(f"%{i}" for i in range(acc))
    outs = ", ".join(f'"+f"(c[{i}])' for i in range(acc))
    return (
        "__device__ __forceinline__ void wgmma_tf32(float (&c)[%d], const uint32_t (&a)[4], uint64_t desc, int acc = 1) {\n"
        "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n"
        '  asm volatile("{ .reg .pred p; setp.ne.b32 p, %%%d, 0; "\n'
        '               "wgmma.mma_async.sync.aligned.m64n%dk8.f32.tf32.tf32 {%s}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1; }"\n'
        "               : %s\n"
        '               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));\n'
        "#endif\n"
        "}\n" % (acc, acc + 5, n, d, acc, acc + 1, acc + 2, acc + 3, acc + 4, outs))


# (swizzle bytes, rows per block, columns per warpgroup, wgmma groups left in flight, promote): promote = 1
# starts each K-chunk's wgmma accumulator at zero and adds it into fp32 registers after the chunk (the
# tensor core's own accumulation keeps fewer bits than fp32: see the error column)
VARIANTS = [(0, 128, 256, 0, 0), (64, 128, 256, 1, 0), (64, 64, 128, 1, 0), (64, 64, 128, 0, 0), (64, 64, 128, 0, 1)]

SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
""" + HELPERS + _wgmma_asm(256) + _wgmma_asm(128) + r"""
constexpr int K = 784, N = 256;

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
// ---- variant kernel: template on swizzle (0 / 64 / 128 bytes), rows BM, columns per warpgroup WN, wait depth
template <int SWB> struct Sw {
  static constexpr int BK = SWB == 128 ? 32 : 16;            // K per chunk: one swizzle row of tf32
  static constexpr int RB = BK * 4;                            // bytes per W row in a chunk
  static constexpr uint64_t TYPE = SWB == 128 ? 1 : SWB == 64 ? 2 : 0;
  static constexpr uint32_t MASK = SWB == 128 ? 7 : 3;
  // byte offset of (n, k) in a chunk part: rows of RB bytes, 16-byte units XOR-ed by address bits 7..
  __device__ static __forceinline__ uint32_t off(int n, int k) {
    if (SWB == 0) return ((k / 8) * 8 * N + ((k % 8) / 4) * 4 * N + (n / 8) * 32 + (n % 8) * 4 + (k % 4)) * 4;
    const uint32_t o = n * RB + k * 4;
    return o ^ (((o >> 7) & MASK) << 4);
  }
  __device__ static __forceinline__ uint64_t desc(const void* p, int j, int n0) {   // k-step j, rows from n0
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    if (SWB == 0) {
      const uint32_t s = a + (j * 8 * N + (n0 / 8) * 32) * 4;
      return (uint64_t)((s & 0x3FFFF) >> 4) | ((uint64_t)((16 * N) >> 4) << 16) | ((uint64_t)(128 >> 4) << 32);
    }
    const uint32_t s = a + n0 * RB + 32 * j;
    return (uint64_t)((s & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)((8 * RB) >> 4) << 32) | (TYPE << 62);
  }
};

template <int SWB, int BM, int WN, int WAIT>
struct Cfg {
  static constexpr int BK = Sw<SWB>::BK, XLD = BK + 4, WGS = (BM / 64) * (N / WN), THREADS = 128 * WGS;
  static constexpr int X_STAGE = BM * XLD * 4;                 // bytes
  static constexpr int B_PART = N * BK * 4;
  static constexpr int STAGE = ((X_STAGE + 1023) / 1024) * 1024 + 2 * B_PART;
  static constexpr int STAGES_FIT = (220 * 1024) / STAGE;
  static constexpr int STAGES = STAGES_FIT > 4 ? 4 : STAGES_FIT;
  static constexpr int PD = WAIT == 0 ? STAGES - 1 : STAGES - 2;   // chunks loaded ahead
  static constexpr int CHUNKS = (K + BK - 1) / BK;
  static constexpr size_t SMEM = (size_t)STAGES * STAGE + 1024;
  static_assert(PD >= 1, "room to prefetch");
};

template <int SWB, int BM, int WN, int WAIT, int PROMOTE>
__global__ void __launch_bounds__(Cfg<SWB, BM, WN, WAIT>::THREADS, 1)
gemm_v_k(const float* __restrict__ x, const float* __restrict__ wbig, const float* __restrict__ wsmall,
         float* __restrict__ h, int B) {
  using C = Cfg<SWB, BM, WN, WAIT>;
  using S = Sw<SWB>;
  static_assert(!PROMOTE || WAIT == 0, "promotion reads the accumulator, so its wgmma must be done (wait 0)");
  constexpr int BK = C::BK, NACC = WN / 2;
  extern __shared__ uint8_t smraw[];
  uint8_t* sm = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smraw) + 1023) & ~uintptr_t(1023));
  const int tid = threadIdx.x, wg = tid / 128, w = (tid / 32) % 4, lane = tid & 31, g = lane >> 2, q = lane & 3;
  const int mw = wg % (BM / 64), nw = wg / (BM / 64);   // this warpgroup's 64-row block and WN-column block
  const int row0 = blockIdx.x * BM;
  auto load = [&](int kc, int s) {
    uint8_t* st = sm + s * C::STAGE;
    const int k0 = kc * BK;
    for (int e = tid; e < BM * (BK / 4); e += C::THREADS) {
      const int m = e / (BK / 4), c4 = e % (BK / 4), row = row0 + m;
      const bool ok = row < B && k0 + 4 * c4 < K;
      cp_async16(st + (m * C::XLD + 4 * c4) * 4, x + (ok ? (size_t)row * K + k0 + 4 * c4 : 0), ok);
    }
    uint8_t* bb = st + ((C::X_STAGE + 1023) / 1024) * 1024;
    for (int e = tid; e < N * (BK / 4); e += C::THREADS) {
      const int n = e / (BK / 4), c4 = e % (BK / 4);
      const bool ok = k0 + 4 * c4 < K;
      const uint32_t o = S::off(n, 4 * c4);
      const size_t src = ok ? (size_t)n * K + k0 + 4 * c4 : 0;
      cp_async16(bb + o, wbig + src, ok);
      cp_async16(bb + C::B_PART + o, wsmall + src, ok);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  float c[NACC], main_acc[PROMOTE ? NACC : 1];
#pragma unroll
  for (int i = 0; i < NACC; ++i) c[i] = 0.f;
#pragma unroll
  for (int i = 0; i < (PROMOTE ? NACC : 1); ++i) main_acc[i] = 0.f;
  uint32_t ab[2][BK / 8][4], as[2][BK / 8][4];
  auto body = [&](int kc, uint32_t (&cb)[BK / 8][4], uint32_t (&cs)[BK / 8][4],
                  uint32_t (&pb)[BK / 8][4], uint32_t (&ps)[BK / 8][4]) {
    asm volatile("cp.async.wait_group %0;" :: "n"(C::PD - 1) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (kc + C::PD < C::CHUNKS) load(kc + C::PD, (kc + C::PD) % C::STAGES);
    else asm volatile("cp.async.commit_group;" ::: "memory");
    const uint8_t* st = sm + (kc % C::STAGES) * C::STAGE;
    const float* xa = reinterpret_cast<const float*>(st);
#pragma unroll
    for (int j = 0; j < BK / 8; ++j) {
      const float* a = xa + (64 * mw + 16 * w + g) * C::XLD + 8 * j + q;
      split(a[0], cb[j][0], cs[j][0]);
      split(a[8 * C::XLD], cb[j][1], cs[j][1]);
      split(a[4], cb[j][2], cs[j][2]);
      split(a[8 * C::XLD + 4], cb[j][3], cs[j][3]);
    }
    const uint8_t* bb = st + ((C::X_STAGE + 1023) / 1024) * 1024;
    wg_fence();
#pragma unroll
    for (int j = 0; j < BK / 8; ++j) {
      const uint64_t dbig = S::desc(bb, j, nw * WN), dsmall = S::desc(bb + C::B_PART, j, nw * WN);
      wgmma_tf32(c, cs[j], dbig, PROMOTE && j == 0 ? 0 : 1);
      wgmma_tf32(c, cb[j], dsmall);
      wgmma_tf32(c, cb[j], dbig);
    }
    wg_commit();
    if (WAIT == 0) {
      wg_wait<0>();
      if (PROMOTE) {
#pragma unroll
        for (int i = 0; i < NACC; ++i) main_acc[i] += c[i];
      }
    } else {
      wg_wait<1>();
#pragma unroll
      for (int j = 0; j < BK / 8; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(pb[j][i]), "+r"(ps[j][i]));   // kept until here
    }
  };
#pragma unroll
  for (int s = 0; s < C::PD; ++s) load(s, s);
#pragma unroll 1
  for (int kc = 0; kc < C::CHUNKS; kc += 2) {
    body(kc, ab[0], as[0], ab[1], as[1]);
    if (kc + 1 < C::CHUNKS) body(kc + 1, ab[1], as[1], ab[0], as[0]);
  }
  wg_wait<0>();
#pragma unroll
  for (int i = 0; i < NACC; ++i) asm volatile("" : "+f"(c[i]) :: "memory");
  if (PROMOTE) {
#pragma unroll
    for (int i = 0; i < NACC; ++i) c[i] = main_acc[i];
  }
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#pragma unroll
  for (int i = 0; i < NACC; ++i) c[i] = __int_as_float(0x7fc00000);
#endif
#pragma unroll
  for (int r = 0; r < NACC; ++r) {
    const int row = row0 + 64 * mw + 16 * w + g + 8 * ((r >> 1) & 1), col = nw * WN + 8 * (r >> 2) + 2 * q + (r & 1);
    if (row < B) h[(size_t)row * N + col] = c[r];
  }
}
template <int SWB, int BM, int WN, int WAIT, int PROMOTE>
static void launch_v(torch::Tensor x, torch::Tensor wbig, torch::Tensor wsmall, torch::Tensor h) {
  using C = Cfg<SWB, BM, WN, WAIT>;
  const int B = x.size(0);
  auto k = gemm_v_k<SWB, BM, WN, WAIT, PROMOTE>;
  C10_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM));
  k<<<(B + BM - 1) / BM, C::THREADS, C::SMEM, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), wbig.data_ptr<float>(), wsmall.data_ptr<float>(), h.data_ptr<float>(), B);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

std::string describe(int64_t v) {
  switch (v) {
@@DESCRIBE@@
  }
  return "?";
}

void gemm_wgmma(torch::Tensor x, torch::Tensor wbig, torch::Tensor wsmall, torch::Tensor h, int64_t v) {
  switch (v) {
@@CASES@@
  }
}
"""
SRC = SRC.replace("@@CASES@@", "\n".join(
    f"    case {i}: launch_v<{a}, {b}, {c}, {d}, {e}>(x, wbig, wsmall, h); break;" for i, (a, b, c, d, e) in enumerate(VARIANTS)))
SRC = SRC.replace("@@DESCRIBE@@", "\n".join(
    f"    case {i}: return \"st=\" + std::to_string(Cfg<{a}, {b}, {c}, {d}>::STAGES);"
    for i, (a, b, c, d, e) in enumerate(VARIANTS)))


def tf32_round(t: torch.Tensor) -> torch.Tensor:
    """Round float32 to the nearest TF32 (10 explicit mantissa bits), ties away from zero as cvt.rna."""
    bits = t.contiguous().view(torch.int32)
    rounded = (bits + 0x1000) & ~0x1FFF   # add half of the dropped 13 bits' range, clear them
    return rounded.view(torch.float32)


def main():
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"   # wgmma needs the arch-specific target
    ext = load_inline("wgmma_probe3", "void gemm_wgmma(torch::Tensor x, torch::Tensor wbig, torch::Tensor wsmall, "
                      "torch::Tensor h, int64_t v);\nstd::string describe(int64_t v);", cuda_sources=SRC,
                      functions=["gemm_wgmma", "describe"], extra_cuda_cflags=["-O3"])
    torch.manual_seed(0)
    w = torch.randn(256, 784, device="cuda") / 28   # about nn.Linear's init scale
    wbig = tf32_round(w)
    wsmall = tf32_round(w - wbig)
    encoder_gemm_table("h = x We^T, 784 -> 256, wgmma m64n256k8 3xTF32", lambda x, out: [
        (f"sw{sw} bm{bm} wn{wn} w{wt}{' pr' if pr else ''} {ext.describe(i)}",
         lambda i=i: ext.gemm_wgmma(x, wbig, wsmall, out, i))
        for i, (sw, bm, wn, wt, pr) in enumerate(VARIANTS)], w)


if __name__ == "__main__":
    main()
