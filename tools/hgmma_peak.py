"""How fast can this GPU's tensor cores run TF32 warpgroup MMA (wgmma) at all? (issue 11's ceiling)

One block per SM, WG warpgroups each issuing groups of 6 wgmma.m64n<N>k8 tf32 (a K-chunk of 16 in
3xTF32: 2 k-steps x 3 products) per accumulator chain, `iters` groups, operands already in place (no
loads, no splits): A from registers (RS, as vae_elbo_kernel_wg) or from shared memory (SS), B from
shared memory (64-byte swizzle). WAIT = 0 waits for each group before the next (the fused kernel's
pattern, optionally with its fp32 promotion: PROMOTE adds the accumulator into fp32 sums after each
wait); WAIT = 1 keeps one group in flight (a GEMM main loop). Prints TFLOP/s of TF32 work (2 per MMA
multiply-add) and the share of the nominal dense TF32 peak at the measured SM clock (1024 multiply-adds
per clock per SM on H100/H200).
Run on the GPU machine from the repository root (about a minute, most of it the build):
    python3 tools/hgmma_peak.py
"""
import os

import torch
from torch.utils.cpp_extension import load_inline

from tf32_mma import HELPERS, MBAR_HELPERS

# (name, N, chains, warpgroups, wait, SS, promote)
VARIANTS = [
    ("RS n128 2wg wait1", 128, 1, 2, 1, False, False),
    ("SS n128 2wg wait1", 128, 1, 2, 1, True, False),
    ("RS n256 2wg wait1", 256, 1, 2, 1, False, False),
    ("RS n128 3wg wait1", 128, 1, 3, 1, False, False),
    ("RS n128 2wg wait0", 128, 1, 2, 0, False, False),
    ("RS 2xn64 2wg wait0 (layer 1's shape)", 64, 2, 2, 0, False, False),
    ("RS 2xn64 2wg wait0 + promote (layer 1)", 64, 2, 2, 0, False, True),
    ("RS n128 2wg wait0 + promote", 128, 1, 2, 0, False, True),
]


def _wgmma(n: int, ss: bool) -> str:
    acc = n // 2
    d = ", ".join(f"%{i}" for i in range(acc))
    outs = ", ".join(f'"+f"(c[{i}])' for i in range(acc))
    if ss:
        a_op, a_in, nxt = f"%{acc}", '"l"(adesc)', acc + 1
        sig = f"float (&c)[{acc}], uint64_t adesc, uint64_t desc"
    else:
        a_op, a_in, nxt = f"{{%{acc}, %{acc + 1}, %{acc + 2}, %{acc + 3}}}", \
            '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])', acc + 4
        sig = f"float (&c)[{acc}], const uint32_t (&a)[4], uint64_t desc"
    return (f"__device__ __forceinline__ void mma{'_ss' if ss else ''}({sig}) {{\n"
            f'  asm volatile("{{ .reg .pred p; setp.ne.b32 p, 1, 0; "\n'
            f'               "wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32 {{{d}}}, {a_op}, %{nxt}, p, 1, 1; }}"\n'
            f"               : {outs} : {a_in}, \"l\"(desc));\n}}\n")


# The probes' prelude: solution.py's helpers (smem_u32, mbarriers, split, wg_fence / commit / wait) and
# the descriptor of a K-major operand with the 64-byte swizzle (8-row groups 512 B apart; k-step j of a
# 16-wide chunk 32 B further on), as solution.py's wg::b_desc.
PRELUDE = "#include <cstdint>\n" + MBAR_HELPERS + HELPERS + r"""
__device__ __forceinline__ uint64_t desc64(uint32_t base, int j) {
  const uint32_t s = base + 32 * j;
  return (uint64_t)((s & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(512 >> 4) << 32) | ((uint64_t)2 << 62);
}
"""

CUDA = PRELUDE + "".join(_wgmma(n, ss) for n in (64, 128, 256) for ss in (False, True)) + r"""
template <int N, int CHAINS, int WAIT, bool SS, bool PROMOTE>
__global__ void __launch_bounds__(384, 1) peak(float* sink, int64_t* cycles, int iters) {
  __shared__ __align__(1024) float bsm[256 * 16];   // B: 256 rows x 64 B
  __shared__ __align__(1024) float asm_[3][64 * 16]; // A (SS): 64 rows x 64 B per warpgroup
  const int tid = threadIdx.x, wgi = tid / 128;
  for (int i = tid; i < 256 * 16; i += blockDim.x) bsm[i] = (float)((i * 7) % 13) * 0.125f;
  for (int i = tid; i < 3 * 64 * 16; i += blockDim.x) (&asm_[0][0])[i] = (float)((i * 5) % 11) * 0.25f;
  __syncthreads();
  uint32_t a[4];
  for (int i = 0; i < 4; ++i) a[i] = __float_as_uint((float)((tid + i) % 9) * 0.5f) & 0xFFFFE000u;
  float acc[CHAINS][N / 2], sum[CHAINS][N / 2];
  for (int h = 0; h < CHAINS; ++h)
    for (int i = 0; i < N / 2; ++i) acc[h][i] = sum[h][i] = 0.f;
  const uint32_t b0 = smem_u32(bsm), a0 = smem_u32(asm_[wgi]);
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    wg_fence();
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int p = 0; p < 3; ++p)
#pragma unroll
        for (int h = 0; h < CHAINS; ++h) {
          const uint64_t bd = desc64(b0 + h * N * 64, j);
          if constexpr (SS) mma_ss(acc[h], desc64(a0, j), bd); else mma(acc[h], a, bd);
        }
    wg_commit();
    wg_wait<WAIT>();
    if constexpr (PROMOTE) {
#pragma unroll
      for (int h = 0; h < CHAINS; ++h)
#pragma unroll
        for (int i = 0; i < N / 2; ++i) { asm volatile("" : "+f"(acc[h][i]) :: "memory"); sum[h][i] += acc[h][i]; }
    }
  }
  wg_wait<0>();
  const long long t1 = clock64();
  float s = 0.f;
  for (int h = 0; h < CHAINS; ++h)
    for (int i = 0; i < N / 2; ++i) s += acc[h][i] + sum[h][i];
  sink[blockIdx.x * blockDim.x + tid] = s;
  if (tid == 0) cycles[blockIdx.x] = t1 - t0;
}

#include <torch/extension.h>
template <int N, int CHAINS, int WAIT, bool SS, bool PROMOTE>
void go(torch::Tensor sink, torch::Tensor cycles, int64_t iters, int64_t wgs) {
  peak<N, CHAINS, WAIT, SS, PROMOTE><<<(int)cycles.numel(), (int)(128 * wgs)>>>(
      sink.data_ptr<float>(), cycles.data_ptr<int64_t>(), (int)iters);
}
void run(int64_t v, torch::Tensor sink, torch::Tensor cycles, int64_t iters, int64_t wgs) {
  switch (v) {
""" + "".join(
    f"    case {i}: go<{n}, {c}, {w}, {'true' if ss else 'false'}, {'true' if pr else 'false'}>(sink, cycles, iters, wgs); break;\n"
    for i, (_, n, c, _, w, ss, pr) in enumerate(VARIANTS)) + r"""  }
}
"""


def main():
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0a")
    ext = load_inline("hgmma_peak", cpp_sources="void run(int64_t, torch::Tensor, torch::Tensor, int64_t, int64_t);",
                      cuda_sources=CUDA, functions=["run"], extra_cuda_cflags=["-O3"], verbose=False)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sink = torch.empty(sms * 384, device="cuda")
    cycles = torch.empty(sms, dtype=torch.int64, device="cuda")
    iters = 4000
    print(f"{'variant':42s} {'us':>8s} {'TFLOP/s':>8s} {'% nominal':>9s} {'cycles/wgmma/SM':>16s}")
    for i, (name, n, chains, wgs, *_rest) in enumerate(VARIANTS):
        for _ in range(3):   # warm the clock
            ext.run(i, sink, cycles, iters, wgs)
        torch.cuda.synchronize()
        ts = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            ext.run(i, sink, cycles, iters, wgs)
            b.record()
            torch.cuda.synchronize()
            ts.append(a.elapsed_time(b) * 1e3)
        us = sorted(ts)[2]
        macs_per_sm = wgs * iters * 6 * chains * 64 * n * 8
        cyc = cycles.float().median().item()
        clock_hz = cyc / (us * 1e-6)   # the kernel is one wave: its time ~ the blocks' clock64 span
        tflops = 2 * macs_per_sm * sms / (us * 1e-6) / 1e12
        nominal = 2 * 1024 * sms * clock_hz / 1e12
        print(f"{name:42s} {us:8.1f} {tflops:8.1f} {100 * tflops / nominal:8.1f}% "
              f"{cyc / (wgs * iters * 6 * chains):16.1f}   (SM clock {clock_hz / 1e9:.2f} GHz)")


if __name__ == "__main__":
    main()
