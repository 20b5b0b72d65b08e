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

# (name, chains, LDSA, PIPE, COPY)
RUNGS = [
    ("operands in place (hgmma_peak)", 1, False, False, False),
    ("+ A loaded and split per chunk", 1, True, False, False),
    ("+ full/empty handshake, no copies", 1, False, True, False),
    ("+ A loaded and split + handshake", 1, True, True, False),
    ("+ handshake + B by bulk copy", 1, False, True, True),
    ("+ A and B by bulk copy, A split", 1, True, True, True),
    ("same, 2 chains x n64 (layer 1)", 2, True, True, True),
]
N, NS, NSRC = 128, 4, 212          # columns per warpgroup, stages, distinct chunks in the sources
B_BYTES, A_BYTES = 2 * N * 64, 128 * 64
STAGE = B_BYTES + A_BYTES

CUDA = PRELUDE + "".join(_wgmma(n, False) for n in (64, 128)) + f"""
constexpr int N = {N}, NS = {NS}, NSRC = {NSRC}, B_BYTES = {B_BYTES}, A_BYTES = {A_BYTES}, STAGE = {STAGE};
""" + r"""
template <int CHAINS, bool LDSA, bool PIPE, bool COPY>
__global__ void __launch_bounds__(288, 1) ladder(const uint8_t* wsrc, const uint8_t* xsrc, float* sink,
                                                 int64_t* cycles, int iters) {
  extern __shared__ __align__(1024) uint8_t sm[];
  uint64_t* full = reinterpret_cast<uint64_t*>(sm + NS * STAGE);
  uint64_t* empty = full + NS;
  const int tid = threadIdx.x, lane = tid & 31, q = lane & 3;
  for (int i = tid; i < NS * STAGE / 4; i += blockDim.x)   // TF32-valued data in every stage
    reinterpret_cast<uint32_t*>(sm)[i] = __float_as_uint((float)((i * 7) % 13) * 0.125f + 0.01f);
  if (tid == 0) {
    for (int s = 0; s < NS; ++s) { mbar_init_count(&full[s], 1); mbar_init_count(&empty[s], 8); }
    mbar_fence_init();
  }
  __syncthreads();
  if (tid >= 256) {   // producer warp: thread 0 of it hands over / fills the stages
    if constexpr (PIPE) {
      for (int c = 0; tid == 256 && c < iters; ++c) {
        const int s = c % NS;
        if (c >= NS) mbar_wait(&empty[s], ((c / NS) - 1) & 1);
        if constexpr (COPY) {
          mbar_expect(&full[s], B_BYTES + (LDSA ? A_BYTES : 0));
          bulk_copy(sm + s * STAGE, wsrc + (size_t)(c % NSRC) * B_BYTES, B_BYTES, &full[s]);
          if constexpr (LDSA) bulk_copy(sm + s * STAGE + B_BYTES, xsrc + (size_t)(c % NSRC) * A_BYTES, A_BYTES, &full[s]);
        } else {
          mbar_arrive(&full[s]);
        }
      }
    }
    return;
  }
  const int r0 = 64 * (tid / 128) + 16 * ((tid / 32) % 4) + (lane >> 2);   // A rows r0, r0 + 8
  constexpr int SUB = N / CHAINS / 2;
  uint32_t a[2][2][4];   // [big | small][k-step][fragment]
  for (int i = 0; i < 16; ++i) a[i / 8][(i / 4) % 2][i % 4] = __float_as_uint((float)((tid + i) % 9) * 0.5f) & 0xFFFFE000u;
  float acc[CHAINS][SUB], sum[CHAINS][SUB];
  for (int h = 0; h < CHAINS; ++h)
    for (int i = 0; i < SUB; ++i) sum[h][i] = 0.f;
  const long long t0 = clock64();
  for (int c = 0; c < iters; ++c) {
    const int s = PIPE ? c % NS : 0;
    if constexpr (PIPE) mbar_wait(&full[s], (c / NS) & 1);
    const uint32_t big = smem_u32(sm + s * STAGE), small = big + B_BYTES / 2;
    if constexpr (LDSA) {
      float4 v0, v1;
      asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v0.x), "=f"(v0.y), "=f"(v0.z), "=f"(v0.w)
                   : "r"(big + B_BYTES + r0 * 64 + 16 * q) : "memory");
      asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v1.x), "=f"(v1.y), "=f"(v1.z), "=f"(v1.w)
                   : "r"(big + B_BYTES + (r0 + 8) * 64 + 16 * q) : "memory");
      split(v0.x, a[0][0][0], a[1][0][0]); split(v1.x, a[0][0][1], a[1][0][1]);
      split(v0.y, a[0][0][2], a[1][0][2]); split(v1.y, a[0][0][3], a[1][0][3]);
      split(v0.z, a[0][1][0], a[1][1][0]); split(v1.z, a[0][1][1], a[1][1][1]);
      split(v0.w, a[0][1][2], a[1][1][2]); split(v1.w, a[0][1][3], a[1][1][3]);
    }
    wg_fence();
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int h = 0; h < CHAINS; ++h) mma(acc[h], a[1][j], desc64(big + h * SUB * 2 * 64, j));          // small * big
#pragma unroll
      for (int h = 0; h < CHAINS; ++h) mma(acc[h], a[0][j], desc64(small + h * SUB * 2 * 64, j));        // big * small
#pragma unroll
      for (int h = 0; h < CHAINS; ++h) mma(acc[h], a[0][j], desc64(big + h * SUB * 2 * 64, j));          // big * big
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
template <int CHAINS, bool LDSA, bool PIPE, bool COPY>
void go(torch::Tensor w, torch::Tensor x, torch::Tensor sink, torch::Tensor cycles, int64_t iters) {
  const int smem = NS * STAGE + 2 * NS * 8 + 1024;
  auto k = ladder<CHAINS, LDSA, PIPE, COPY>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  k<<<(int)cycles.numel(), 288, smem>>>(w.data_ptr<uint8_t>(), x.data_ptr<uint8_t>(), sink.data_ptr<float>(),
                                         cycles.data_ptr<int64_t>(), (int)iters);
}
void run(int64_t v, torch::Tensor w, torch::Tensor x, torch::Tensor sink, torch::Tensor cycles, int64_t iters) {
  switch (v) {
""" + "".join(
    f"    case {i}: go<{c}, {str(l).lower()}, {str(p).lower()}, {str(cp).lower()}>(w, x, sink, cycles, iters); break;\n"
    for i, (_, c, l, p, cp) in enumerate(RUNGS)) + r"""  }
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
    x = torch.rand(NSRC * A_BYTES // 4, device="cuda").view(torch.uint8)
    sink = torch.empty(sms * 256, device="cuda")
    cycles = torch.empty(sms, dtype=torch.int64, device="cuda")
    iters = 2000
    print(f"{'rung':36s} {'us':>8s} {'TFLOP/s':>8s} {'% peak':>7s} {'cycles/chunk':>13s} {'SM GHz':>7s}")
    for i, (name, *_rest) in enumerate(RUNGS):
        for _ in range(3):   # warm the clock
            ext.run(i, w, x, sink, cycles, iters)
        torch.cuda.synchronize()
        ts = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            ext.run(i, w, x, sink, cycles, iters)
            b.record()
            torch.cuda.synchronize()
            ts.append(a.elapsed_time(b) * 1e3)
        us = sorted(ts)[2]
        macs = 2 * iters * 6 * 64 * N * 8   # two warpgroups, 6 wgmma m64 n128 k8 per chunk
        cyc = cycles.float().median().item()
        clock_hz = cyc / (us * 1e-6)
        tflops = 2 * macs * sms / (us * 1e-6) / 1e12
        print(f"{name:36s} {us:8.1f} {tflops:8.1f} {100 * tflops / (2 * 1024 * sms * clock_hz / 1e12):6.1f}% "
              f"{cyc / iters:13.0f} {clock_hz / 1e9:7.2f}")


if __name__ == "__main__":
    main()
