"""From the tensor cores' peak to the fused kernel's chunk loop, one piece at a time (issue 11).

tools/hgmma_peak.py shows the TF32 wgmma pattern of vae_elbo_kernel_wg (per 16-wide K-chunk: 6 wgmma
m64n128k8 per warpgroup, wait, fp32 promotion) at 100% of the tensor cores' rate with its operands in
place, while the fused kernel runs its chunk loop at about 44%. Each rung here adds one piece of the
fused kernel's loop, on one block per SM with two consumer warpgroups (64 rows each), NS = 4 stages:
  LDSA  each chunk's A fragments read from the stage (2 x 16-byte ld.shared per thread) and split
        into big + small TF32 in registers (as the fused kernel does with x, h and d)
  PIPE  a producer warp hands stages over through full / empty mbarriers (one arrival per consumer
        warp on `empty`, per chunk), as the fused kernel's producers do
  COPY  the producer fills each stage from global memory by bulk copy (B: 16 KB of big + small TF32
        per chunk, cycling through 3.4 MB, the size of the fused kernel's workspace; with LDSA, A too:
        8 KB per chunk)
Prints TFLOP/s of TF32 work and the share of 1024 multiply-adds per clock per SM at the measured clock.
Run on the GPU machine from the repository root (about a minute, most of it the build):
    python3 tools/wg_ladder.py
"""
import os

import torch
from torch.utils.cpp_extension import load_inline

from hgmma_peak import PRELUDE, _wgmma
from tf32_mma import F16_HELPERS

# (name, chains, LDSA, PIPE, COPY, PREC[, NW]): PREC 0 = 3xTF32 (6 wgmma m64nNk8 per 16-wide chunk), 1 = the
# same 3 products in FP16 (v = hi + lo, both FP16: 3 wgmma m64nNk16 per chunk, B rows 64 bytes of hi | lo),
# 2 = FP16 with 32-wide chunks (6 wgmma, one wait and fp32 promotion per 32 k); NW: columns per warpgroup
# (default N = 128; FP16 rungs only). The NW = 64 and 32 rungs ask what a chunk costs when each warpgroup has
# fewer columns: the fused kernel's layer 1 at C = 8 is NW = 64 as 2 x n32; 64-row tiles with the two
# warpgroups splitting the columns would be NW = 32 (session 18's notes, next experiment 4).
RUNGS = [
    ("operands in place (hgmma_peak)", 1, False, False, False, 0),
    ("+ A loaded and split per chunk", 1, True, False, False, 0),
    ("+ full/empty handshake, no copies", 1, False, True, False, 0),
    ("+ A loaded and split + handshake", 1, True, True, False, 0),
    ("+ handshake + B by bulk copy", 1, False, True, True, 0),
    ("+ A and B by bulk copy, A split", 1, True, True, True, 0),
    ("same, 2 chains x n64 (layer 1)", 2, True, True, True, 0),
    ("FP16 x3: operands in place", 1, False, False, False, 1),
    ("FP16 x3: A and B by bulk copy, A split", 1, True, True, True, 1),
    ("FP16 x3: same, 2 chains x n64", 2, True, True, True, 1),
    ("FP16 x3, 32-wide chunks: in place", 1, False, False, False, 2),
    ("FP16 x3, 32-wide chunks: copies, split", 1, True, True, True, 2),
    ("FP16 x3: copies, split, NW 64 = 2 x n32", 2, True, True, True, 1, 64),
    ("FP16 x3: copies, split, NW 32 = 1 x n32", 1, True, True, True, 1, 32),
    ("FP16 x3: copies, split, NW 32 = 2 x n16", 2, True, True, True, 1, 32),
    # KSPLIT: one 64-row tile, the two warpgroups on alternate chunks (each sums half of K; the producer streams
    # every chunk in order, a stage freed by the warpgroup that used it). Against the rungs above (two 64-row
    # halves of a 128-row tile, both warpgroups on every chunk), cycles per 16 k say whether a 64-row tile runs
    # its chunk loop in about half the time (session 19's notes: 64-row tiles in clusters of 6 for B <= 1088).
    ("FP16 x3: NW 64 = 2 x n32, K split over the WGs", 2, True, True, True, 1, 64, True),
    ("FP16 x3: NW 128 = 2 x n64, K split over the WGs", 2, True, True, True, 1, 128, True),
]
RUNGS = [r + (128,) * (7 - len(r)) + (False,) * (8 - max(len(r), 7)) for r in RUNGS]
N, NS, NSRC = 128, 4, 212          # columns per warpgroup, stages, distinct chunks in the sources
B_BYTES, A_BYTES = 2 * N * 64, 128 * 64   # per 16 k (TF32: big and small rows; FP16 32-wide: two 16-k halves)
STAGE = B_BYTES + A_BYTES


def _wgmma_f16(n: int) -> str:
    acc = n // 2
    d = ", ".join(f"%{i}" for i in range(acc))
    outs = ", ".join(f'"+f"(c[{i}])' for i in range(acc))
    return (f"__device__ __forceinline__ void mma16(float (&c)[{acc}], const uint32_t (&a)[4], uint64_t desc) {{\n"
            f'  asm volatile("{{ .reg .pred p; setp.ne.b32 p, 1, 0; "\n'
            f'               "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16 {{{d}}}, {{%{acc}, %{acc + 1}, '
            f'%{acc + 2}, %{acc + 3}}}, %{acc + 4}, p, 1, 1, 0; }}"\n'
            f'               : {outs} : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));\n}}\n')


CUDA = PRELUDE + "".join(_wgmma(n, False) for n in (64, 128)) + "".join(_wgmma_f16(n) for n in (16, 32, 64, 128)) + f"""
constexpr int N = {N}, NS = {NS}, NSRC = {NSRC}, B_BYTES = {B_BYTES}, A_BYTES = {A_BYTES}, STAGE = {STAGE};
""" + F16_HELPERS + r"""
template <int CHAINS, bool LDSA, bool PIPE, bool COPY, int PREC, int NW, bool KSPLIT>
__global__ void __launch_bounds__(288, 1) ladder(const uint8_t* wsrc, const uint8_t* xsrc, float* sink,
                                                 int64_t* cycles, int iters) {
  // per chunk: KS 16-wide k-slices; B bytes (TF32: big + small rows of 64 B; FP16: hi | lo in one 64-B
  // row per slice); A: 128 rows x 64 B of fp32 per slice
  static_assert(PREC == 1 || NW == N, "fewer columns per warpgroup: FP16 rungs only");
  constexpr int KS = PREC == 2 ? 2 : 1, BB = PREC == 0 ? B_BYTES : KS * NW * 64, AB = KS * A_BYTES, STG = BB + AB;
  extern __shared__ __align__(1024) uint8_t sm[];
  uint64_t* full = reinterpret_cast<uint64_t*>(sm + NS * STG);
  uint64_t* empty = full + NS;
  const int tid = threadIdx.x, lane = tid & 31, q = lane & 3;
  for (int i = tid; i < NS * STG / 4; i += blockDim.x)   // TF32-valued (or pairs of FP16) data in every stage
    reinterpret_cast<uint32_t*>(sm)[i] = PREC == 0 ? __float_as_uint((float)((i * 7) % 13) * 0.125f + 0.01f)
                                                   : 0x3C003800u + ((i * 7) % 13) * 0x00400040u;
  if (tid == 0) {
    for (int s = 0; s < NS; ++s) { mbar_init_count(&full[s], 1); mbar_init_count(&empty[s], KSPLIT ? 4 : 8); }
    mbar_fence_init();
  }
  __syncthreads();
  const int chunks = iters / KS;   // iters: 16-wide k-slices
  if (tid >= 256) {   // producer warp: thread 0 of it hands over / fills the stages
    if constexpr (PIPE) {
      for (int c = 0; tid == 256 && c < chunks; ++c) {
        const int s = c % NS;
        if (c >= NS) mbar_wait(&empty[s], ((c / NS) - 1) & 1);
        if constexpr (COPY) {
          mbar_expect(&full[s], BB + (LDSA ? AB : 0));
          bulk_copy(sm + s * STG, wsrc + (size_t)(c % NSRC) * BB, BB, &full[s]);
          if constexpr (LDSA) bulk_copy(sm + s * STG + BB, xsrc + (size_t)(c % NSRC) * AB, AB, &full[s]);
        } else {
          mbar_arrive(&full[s]);
        }
      }
    }
    return;
  }
  const int r0 = (KSPLIT ? 0 : 64 * (tid / 128)) + 16 * ((tid / 32) % 4) + (lane >> 2);   // A rows r0, r0 + 8
  constexpr int SUB = NW / CHAINS / 2;
  uint32_t a[KS][2][2][4];   // TF32: [0][big | small][k-step][fragment]; FP16: [slice][hi | lo][0][fragment]
  for (int i = 0; i < 16 * KS; ++i)
    a[i / 16][(i / 8) % 2][(i / 4) % 2][i % 4] = PREC == 0 ? __float_as_uint((float)((tid + i) % 9) * 0.5f) & 0xFFFFE000u
                                                           : 0x3C003800u + (tid + i) % 9 * 0x00400040u;
  float acc[CHAINS][SUB], sum[CHAINS][SUB];
  for (int h = 0; h < CHAINS; ++h)
    for (int i = 0; i < SUB; ++i) sum[h][i] = 0.f;
  const long long t0 = clock64();
  for (int c = KSPLIT ? tid / 128 : 0; c < chunks; c += KSPLIT ? 2 : 1) {   // KSPLIT: warpgroup g, chunks g, g + 2, ..
    const int s = PIPE ? c % NS : 0;
    if constexpr (PIPE) mbar_wait(&full[s], (c / NS) & 1);
    const uint32_t big = smem_u32(sm + s * STG), small = big + B_BYTES / 2;
    if constexpr (LDSA) {
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        float4 v0, v1;
        const uint32_t arow = big + BB + ks * A_BYTES;
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v0.x), "=f"(v0.y), "=f"(v0.z), "=f"(v0.w)
                     : "r"(arow + r0 * 64 + 16 * q) : "memory");
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v1.x), "=f"(v1.y), "=f"(v1.z), "=f"(v1.w)
                     : "r"(arow + (r0 + 8) * 64 + 16 * q) : "memory");
        if constexpr (PREC == 0) {
          split(v0.x, a[0][0][0][0], a[0][1][0][0]); split(v1.x, a[0][0][0][1], a[0][1][0][1]);
          split(v0.y, a[0][0][0][2], a[0][1][0][2]); split(v1.y, a[0][0][0][3], a[0][1][0][3]);
          split(v0.z, a[0][0][1][0], a[0][1][1][0]); split(v1.z, a[0][0][1][1], a[0][1][1][1]);
          split(v0.w, a[0][0][1][2], a[0][1][1][2]); split(v1.w, a[0][0][1][3], a[0][1][1][3]);
        } else {   // fragment (row, k pair): 0 = (r0, 2q..), 1 = (r0 + 8, 2q..), 2 = (r0, 2q + 8..), 3 = (r0 + 8, 2q + 8..)
          split16(v0.x, v0.y, a[ks][0][0][0], a[ks][1][0][0]); split16(v1.x, v1.y, a[ks][0][0][1], a[ks][1][0][1]);
          split16(v0.z, v0.w, a[ks][0][0][2], a[ks][1][0][2]); split16(v1.z, v1.w, a[ks][0][0][3], a[ks][1][0][3]);
        }
      }
    }
    wg_fence();
    if constexpr (PREC == 0) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int h = 0; h < CHAINS; ++h) mma(acc[h], a[0][1][j], desc64(big + h * SUB * 2 * 64, j));     // small * big
#pragma unroll
        for (int h = 0; h < CHAINS; ++h) mma(acc[h], a[0][0][j], desc64(small + h * SUB * 2 * 64, j));   // big * small
#pragma unroll
        for (int h = 0; h < CHAINS; ++h) mma(acc[h], a[0][0][j], desc64(big + h * SUB * 2 * 64, j));     // big * big
      }
    } else {
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        const uint32_t b = big + ks * NW * 64;   // slice ks: rows of 64 B, hi at +0, lo at +32 (desc64's j)
#pragma unroll
        for (int h = 0; h < CHAINS; ++h) mma16(acc[h], a[ks][1][0], desc64(b + h * SUB * 2 * 64, 0));   // lo * hi
#pragma unroll
        for (int h = 0; h < CHAINS; ++h) mma16(acc[h], a[ks][0][0], desc64(b + h * SUB * 2 * 64, 1));   // hi * lo
#pragma unroll
        for (int h = 0; h < CHAINS; ++h) mma16(acc[h], a[ks][0][0], desc64(b + h * SUB * 2 * 64, 0));   // hi * hi
      }
    }
    wg_commit();
    wg_wait<0>();
#pragma unroll
    for (int h = 0; h < CHAINS; ++h)
#pragma unroll
      for (int i = 0; i < SUB; ++i) { asm volatile("" : "+f"(acc[h][i]) :: "memory"); sum[h][i] += acc[h][i]; }
    if constexpr (PIPE) {
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
    }
  }
  const long long t1 = clock64();
  float t = 0.f;
  for (int h = 0; h < CHAINS; ++h)
    for (int i = 0; i < SUB; ++i) t += sum[h][i];
  sink[blockIdx.x * 256 + tid] = t;
  if (tid == 0) cycles[blockIdx.x] = t1 - t0;
}

#include <torch/extension.h>
template <int CHAINS, bool LDSA, bool PIPE, bool COPY, int PREC, int NW, bool KSPLIT>
void go(torch::Tensor w, torch::Tensor x, torch::Tensor sink, torch::Tensor cycles, int64_t iters) {
  const int smem = NS * (PREC == 2 ? B_BYTES + 2 * A_BYTES : STAGE) + 2 * NS * 8 + 1024;
  auto k = ladder<CHAINS, LDSA, PIPE, COPY, PREC, NW, KSPLIT>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  k<<<(int)cycles.numel(), 288, smem>>>(w.data_ptr<uint8_t>(), x.data_ptr<uint8_t>(), sink.data_ptr<float>(),
                                         cycles.data_ptr<int64_t>(), (int)iters);
}
void run(int64_t v, torch::Tensor w, torch::Tensor x, torch::Tensor sink, torch::Tensor cycles, int64_t iters) {
  switch (v) {
""" + "".join(
    f"    case {i}: go<{c}, {str(l).lower()}, {str(p).lower()}, {str(cp).lower()}, {pr}, {nw}, {str(ks).lower()}>"
    f"(w, x, sink, cycles, iters); break;\n"
    for i, (_, c, l, p, cp, pr, nw, ks) in enumerate(RUNGS)) + r"""  }
}
"""


def main():
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0a")
    ext = load_inline("wg_ladder", cpp_sources="void run(int64_t, torch::Tensor, torch::Tensor, torch::Tensor, "
                      "torch::Tensor, int64_t);", cuda_sources=CUDA, functions=["run"],
                      extra_cuda_cflags=["-O3"], verbose=False)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    # TF32-valued sources (low 13 bits clear), not zeros: the tensor cores' power depends on the data
    w = (torch.rand(NSRC * B_BYTES // 4, device="cuda") + 0.5).view(torch.int32).bitwise_and(-8192).view(torch.uint8)
    w16 = (torch.rand(NSRC * B_BYTES // 2, device="cuda") + 0.5).half().view(torch.uint8)   # FP16 rungs' B
    x = torch.rand(2 * NSRC * A_BYTES // 4, device="cuda").view(torch.uint8)
    sink = torch.empty(sms * 256, device="cuda")
    cycles = torch.empty(sms, dtype=torch.int64, device="cuda")
    iters = 2000
    print(f"{'rung':42s} {'us':>8s} {'TFLOP/s':>8s} {'% peak':>7s} {'cycles/16 k':>13s} {'SM GHz':>7s}")
    for i, (name, *_rest, prec, nw, ksplit) in enumerate(RUNGS):
        src = w16 if prec else w
        for _ in range(3):   # warm the clock
            ext.run(i, src, x, sink, cycles, iters)
        torch.cuda.synchronize()
        ts = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            ext.run(i, src, x, sink, cycles, iters)
            b.record()
            torch.cuda.synchronize()
            ts.append(a.elapsed_time(b) * 1e3)
        us = sorted(ts)[2]
        macs = (1 if ksplit else 2) * iters * 3 * 64 * nw * 16   # per 16 k: 3 products of m64 nNW, on each warpgroup
        # (KSPLIT: on one of them)
        cyc = cycles.float().median().item()
        clock_hz = cyc / (us * 1e-6)
        tflops = 2 * macs * sms / (us * 1e-6) / 1e12
        print(f"{name:42s} {us:8.1f} {tflops:8.1f} {100 * tflops / (2 * 1024 * sms * clock_hz / 1e12):6.1f}% "
              f"{cyc / iters:13.0f} {clock_hz / 1e9:7.2f}")


if __name__ == "__main__":
    main()
