"""The large-batch encoder GEMM alone, h = x We^T (B x 784 times 784 x 256), as a 3xTF32 tensor-core
tile kernel: how fast a fused large-batch kernel's biggest layer can run (issue 11), against cuBLAS in
fp32 and in plain TF32, with its error against float64.

Block: BM rows x all 256 columns, 8 warps as 2 (rows) x 4 (columns); a warp owns BM/2 rows x 64 columns
= BM/32 x 8 tiles of m16n8, each its own accumulator (16-32 independent chains: notes/solution.md, v6,
says why that matters). x and We come through shared memory in K-chunks of 16 by cp.async, double
buffered, rows padded to 20 floats so fragment loads hit 32 banks. Each fp32 operand is split into a
TF32 "big" part and a TF32 residual; three MMAs per multiply-add (small*big, big*small, big*big).
Run on the GPU machine from the repository root (about a minute, most of it the build):
    python3 tools/gemm_probe.py
"""
import statistics

import torch
from torch.utils.cpp_extension import load_inline

from tf32_mma import HELPERS

SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
""" + HELPERS + r"""
constexpr int K = 784, N = 256, BK = 16, LDS = BK + 4;
static_assert(K % BK == 0, "whole K-chunks");

__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool valid) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
template <int BM>
__global__ void __launch_bounds__(256, 1) gemm3_k(const float* __restrict__ x, const float* __restrict__ w,
                                                  float* __restrict__ h, int B) {
  constexpr int MT = BM / 32;                    // m16 tiles per warp (the warp has BM/2 rows)
  extern __shared__ __align__(16) float sm[];
  float* xs = sm;                                // 2 x BM x LDS
  float* ws = sm + 2 * BM * LDS;                 // 2 x N x LDS
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int wm = warp >> 2, wn = warp & 3, row0 = blockIdx.x * BM;
  auto load = [&](int kc, int buf) {   // chunk kc of x rows and of all of We
    for (int e = tid; e < BM * (BK / 4); e += 256) {
      const int r = e / (BK / 4), c = 4 * (e % (BK / 4));
      const bool ok = row0 + r < B;
      cp_async16(xs + (buf * BM + r) * LDS + c, x + (size_t)(ok ? row0 + r : 0) * K + kc * BK + c, ok);
    }
    for (int e = tid; e < N * (BK / 4); e += 256) {
      const int n = e / (BK / 4), c = 4 * (e % (BK / 4));
      cp_async16(ws + (buf * N + n) * LDS + c, w + (size_t)n * K + kc * BK + c, true);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  float acc[MT][8][4] = {};
  load(0, 0);
#pragma unroll 1
  for (int kc = 0; kc < K / BK; ++kc) {
    const int buf = kc & 1;
    if (kc + 1 < K / BK) {
      load(kc + 1, buf ^ 1);
      asm volatile("cp.async.wait_group 1;" ::: "memory");
    } else {
      asm volatile("cp.async.wait_group 0;" ::: "memory");
    }
    __syncthreads();
#pragma unroll
    for (int k8 = 0; k8 < BK; k8 += 8) {
      uint32_t ab[MT][4], as[MT][4];
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const float* p = xs + (buf * BM + wm * (BM / 2) + 16 * m) * LDS + k8 + t;
        split(p[g * LDS], ab[m][0], as[m][0]);
        split(p[(g + 8) * LDS], ab[m][1], as[m][1]);
        split(p[g * LDS + 4], ab[m][2], as[m][2]);
        split(p[(g + 8) * LDS + 4], ab[m][3], as[m][3]);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float* q = ws + (buf * N + wn * 64 + 8 * j + g) * LDS + k8 + t;
        uint32_t b0, b0s, b1, b1s;
        split(q[0], b0, b0s);
        split(q[4], b1, b1s);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          mma(acc[m][j], as[m], b0, b1);
          mma(acc[m][j], ab[m], b0s, b1s);
          mma(acc[m][j], ab[m], b0, b1);
        }
      }
    }
    __syncthreads();   // this buffer is refilled next iteration
  }
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = row0 + wm * (BM / 2) + 16 * m + g + 8 * hh, c = wn * 64 + 8 * j + 2 * t;
        if (r < B) *reinterpret_cast<float2*>(h + (size_t)r * N + c) = make_float2(acc[m][j][2 * hh], acc[m][j][2 * hh + 1]);
      }
}

void gemm3(torch::Tensor x, torch::Tensor w, torch::Tensor h, int64_t bm) {
  const int B = x.size(0);
  auto s = at::cuda::getCurrentCUDAStream();
  if (bm == 64) {
    const size_t smem = (size_t)2 * (64 + N) * LDS * sizeof(float);
    C10_CUDA_CHECK(cudaFuncSetAttribute(gemm3_k<64>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    gemm3_k<64><<<(B + 63) / 64, 256, smem, s>>>(x.data_ptr<float>(), w.data_ptr<float>(), h.data_ptr<float>(), B);
  } else {
    TORCH_CHECK(bm == 128, "bm must be 64 or 128");
    const size_t smem = (size_t)2 * (128 + N) * LDS * sizeof(float);
    C10_CUDA_CHECK(cudaFuncSetAttribute(gemm3_k<128>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    gemm3_k<128><<<(B + 127) / 128, 256, smem, s>>>(x.data_ptr<float>(), w.data_ptr<float>(), h.data_ptr<float>(), B);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""


def gpu_us(fn, reps=20):
    """Median time of one call by CUDA events, after warm-up calls."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def encoder_gemm_table(title, custom_rows, w):
    """For B = 1000 ... 65536: each custom kernel beside cuBLAS fp32 and plain TF32, as time, TFLOP/s
    (counting the fp32 work 2 B 784 256) and max relative error against float64. `custom_rows(x, out)`
    gives [(name, fn)], fn writing h = x w^T into out (filled with NaN first)."""
    print(f"{torch.cuda.get_device_name()}: {title}; TFLOP/s counts 2 B 784 256 (fp32 work)")
    print(f"{'B':>6} {'implementation':22} {'us':>9} {'TFLOP/s':>8} {'max rel err vs fp64':>20}")
    for B in (1000, 4096, 16384, 65536):
        x = torch.rand(B, 784, device="cuda")
        truth = x.double() @ w.double().t()
        flops = 2 * B * 784 * 256
        out = torch.full((B, 256), float("nan"), device="cuda")
        rows = [(name, fn, lambda: out) for name, fn in custom_rows(x, out)]
        for tf32 in (False, True):
            def run(tf32=tf32):
                torch.backends.cuda.matmul.allow_tf32 = tf32
                return x @ w.t()
            rows.append((f"cuBLAS {'TF32' if tf32 else 'fp32'}", run, run))
        for name, fn, result in rows:
            us = gpu_us(fn)
            got = result()
            torch.cuda.synchronize()
            err = ((got.double() - truth).abs().max() / truth.abs().max()).item()
            print(f"{B:6d} {name:22} {us:9.1f} {flops / us / 1e6:8.1f} {err:20.2e}")
        torch.backends.cuda.matmul.allow_tf32 = False


def main():
    ext = load_inline("gemm_probe", "void gemm3(torch::Tensor x, torch::Tensor w, torch::Tensor h, int64_t bm);",
                      cuda_sources=SRC, functions=["gemm3"],
                      extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"])
    torch.manual_seed(0)
    w = torch.randn(256, 784, device="cuda") / 28   # about nn.Linear's init scale
    encoder_gemm_table("h = x We^T, 784 -> 256", lambda x, out: [
        (f"3xTF32 mma, BM={bm}", lambda bm=bm: ext.gemm3(x, w, out, bm)) for bm in (64, 128)], w)


if __name__ == "__main__":
    main()
