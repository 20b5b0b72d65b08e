"""Is the cluster kernel's encoder bound by L2 bandwidth, and would multicast help? Times the loads of
phases 0-1 alone, by CUDA-graph replay (20 launches a replay, median), on the cluster kernel's grid.

Today (v12, B = 128): 120 blocks in 15 clusters of 8; block `rank` loads hidden units [32 rank, +32) of We
(100 KB, into registers with ld.global) and its cluster's x tile (9 rows, 28 KB, one bulk copy): 15.4 MB
from L2 over 120 SMs, which the timeline puts at ~2 µs (x landed 1.2, encoder math done 3.2). The cases:

  empty           the launch and a cluster barrier, nothing loaded
  x only          the x tile alone (bulk copy, mbarrier wait)
  today           We slice into registers + x tile: phases 0-1's loads as v12 does them
  We half         50 KB of We instead of 100: what halving the We traffic would give
  We bulk         We slice by one bulk copy into smem, then read from smem into registers
  x multicast     today, but the x tile loaded once per cluster: block r copies rows r, r+8 to all 8 blocks
                  (after a cluster barrier, which "today" does without: the price multicast pays)
  c16 ...         clusters of 16 = two row groups of 8 blocks (R rows each); blocks r and r + 8 need the
                  same We slice: "own" = each copies its 100 KB (bulk), "multicast" = each copies half and
                  multicasts it to both (We read from L2 once per cluster), x multicast within each group

Also prints how many clusters of 8 and of 16 (200 KB of smem a block) run at once. Run on the GPU machine
from the repository root (about a minute, most of it the build):

    python3 tools/l2_probe.py
"""
import os
import statistics
import sys

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))

SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

constexpr int D = 784, SLICE_FLOATS = 32 * D, THREADS = 256;
constexpr uint32_t ROW_BYTES = D * 4;

__device__ __forceinline__ uint32_t su32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void bar_init(uint64_t* b) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(su32(b)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void bar_expect(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(su32(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bar_wait(uint64_t* b) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(su32(b)) : "memory");
}
__device__ __forceinline__ void copy(void* dst, const void* src, uint32_t bytes, uint64_t* b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(su32(dst)), "l"(src), "r"(bytes), "r"(su32(b)) : "memory");
}
// the same bytes to the same smem offset (and mbarrier) of every block in `mask`
__device__ __forceinline__ void copy_mc(void* dst, const void* src, uint32_t bytes, uint64_t* b, uint16_t mask) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;"
               :: "r"(su32(dst)), "l"(src), "r"(bytes), "r"(su32(b)), "h"(mask) : "memory");
}
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The We slice into registers as load_rows does: every float4 a thread owns loaded before any is used
constexpr int NF4 = (SLICE_FLOATS / 4 + THREADS - 1) / THREADS;   // 25
__device__ __forceinline__ void load_slice(float4 (&v)[NF4], const float4* p, int n, int tid) {
#pragma unroll
  for (int j = 0; j < NF4; ++j) v[j] = tid + THREADS * j < n ? __ldg(p + tid + THREADS * j) : make_float4(0.f, 0.f, 0.f, 0.f);
}

// wmode: 0 none, 1 registers (ld.global), 2 registers, half the bytes, 3 bulk copy to smem, 4 half each + multicast
// to the partner block (clusters of 16); xmode: 0 none, 1 own bulk copy, 2 multicast within the group of 8.
// Without multicast the copies go out at entry as the cluster kernel's do; with it, after a cluster barrier (a
// peer's mbarrier must be valid before a copy lands in it), the register loads issued before that barrier.
__global__ void __launch_bounds__(THREADS, 1)
probe_k(const float* __restrict__ W, const float* __restrict__ X, float* out, int R, int wmode, int xmode) {
  extern __shared__ __align__(128) float sm[];
  uint64_t* bar = reinterpret_cast<uint64_t*>(sm);
  float* ws = sm + 32;
  float* xs = ws + SLICE_FLOATS;
  cg::cluster_group cl = cg::this_cluster();
  const int tid = threadIdx.x, rank = (int)cl.block_rank(), r = rank & 7, half = rank >> 3;
  const int group = blockIdx.x >> 3;   // row group: 8 blocks, R rows
  const float* wslice = W + (size_t)r * SLICE_FLOATS;
  const uint32_t wbytes = SLICE_FLOATS * 4, xbytes = R * ROW_BYTES;
  const uint32_t expect = (wmode >= 3 ? wbytes : 0u) + (xmode ? xbytes : 0u);
  const bool multicast = xmode == 2 || wmode == 4;
  auto issue = [&]() {
    if (xmode == 1) copy(xs, X + (size_t)group * R * D, xbytes, bar);
    if (xmode == 2)
      for (int row = r; row < R; row += 8)
        copy_mc(xs + row * D, X + ((size_t)group * R + row) * D, ROW_BYTES, bar, (uint16_t)(0xFFu << (8 * half)));
    if (wmode == 3) copy(ws, wslice, wbytes, bar);
    if (wmode == 4)
      copy_mc(ws + half * (SLICE_FLOATS / 2), wslice + half * (SLICE_FLOATS / 2), wbytes / 2, bar,
              (uint16_t)((1u << r) | (1u << (r + 8))));
  };
  if (tid == 0) {
    bar_init(bar);
    bar_expect(bar, expect);
    if (!multicast) issue();
  }
  float4 v[NF4];
  if (wmode == 1 || wmode == 2)
    load_slice(v, reinterpret_cast<const float4*>(wslice), SLICE_FLOATS / (wmode == 1 ? 4 : 8), tid);
  if (multicast) {
    cluster_sync_all();   // every block's mbarrier valid before anyone copies into it
    if (tid == 0) issue();
  } else {
    __syncthreads();      // the mbarrier valid before the other threads wait on it
  }
  if (expect) bar_wait(bar);
  float s = 0.f;
  if (wmode == 1 || wmode == 2)
#pragma unroll
    for (int j = 0; j < NF4; ++j) s += (v[j].x + v[j].y) + (v[j].z + v[j].w);
  if (wmode >= 3)
    for (int i = tid; i < SLICE_FLOATS / 4; i += THREADS) {
      const float4 w4 = reinterpret_cast<const float4*>(ws)[i];
      s += (w4.x + w4.y) + (w4.z + w4.w);
    }
  if (xmode) s += xs[tid];
  if (s == 1234.5f) out[blockIdx.x] = s;
  cluster_sync_all();   // no block leaves while a peer's multicast may still write into it
}

static void configure(int smem) {
  static int done = -1;
  if (done == smem) return;
  C10_CUDA_CHECK(cudaFuncSetAttribute(probe_k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  C10_CUDA_CHECK(cudaFuncSetAttribute(probe_k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  done = smem;
}

static cudaLaunchConfig_t config(int blocks, int csize, int smem, cudaStream_t stream, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = csize;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

int64_t max_clusters(int64_t csize, int64_t smem) {
  configure((int)smem);
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg = config((int)csize * 16, (int)csize, (int)smem, 0, &attr);
  int n = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, probe_k, &cfg));
  return n;
}

void probe(torch::Tensor W, torch::Tensor X, torch::Tensor out, int64_t blocks, int64_t csize, int64_t R,
           int64_t wmode, int64_t xmode, int64_t smem) {
  TORCH_CHECK(blocks % csize == 0 && (csize == 8 || csize == 16) && R >= 1 && R <= 16, "probe: bad shape");
  TORCH_CHECK(W.numel() >= 8 * SLICE_FLOATS && X.numel() >= (blocks / 8) * R * D && out.numel() >= blocks, "probe: small");
  TORCH_CHECK(wmode != 4 || csize == 16, "probe: the We multicast pairs blocks r and r + 8 of a cluster of 16");
  configure((int)smem);
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg = config((int)blocks, (int)csize, (int)smem, at::cuda::getCurrentCUDAStream(), &attr);
  C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, probe_k, (const float*)W.data_ptr<float>(), (const float*)X.data_ptr<float>(),
                                    out.data_ptr<float>(), (int)R, (int)wmode, (int)xmode));
}
"""
CPP = """int64_t max_clusters(int64_t csize, int64_t smem);
void probe(torch::Tensor W, torch::Tensor X, torch::Tensor out, int64_t blocks, int64_t csize, int64_t R,
           int64_t wmode, int64_t xmode, int64_t smem);"""

SMEM = 200 << 10   # as the cluster kernel: one block per SM
# (name, blocks, cluster size, rows per group of 8, We mode, x mode)
CASES = [
    ("empty (launch + a cluster barrier)", 120, 8, 9, 0, 0),
    ("x only (28 KB bulk)", 120, 8, 9, 0, 1),
    ("today: We 100 KB regs + x", 120, 8, 9, 1, 1),
    ("We half (50 KB regs) + x", 120, 8, 9, 2, 1),
    ("We 100 KB bulk -> smem -> regs + x", 120, 8, 9, 3, 1),
    ("We regs + x multicast", 120, 8, 9, 1, 2),
    ("c16 empty (launch + a cluster barrier)", 128, 16, 9, 0, 0),
    ("c16 We regs + x own", 128, 16, 9, 1, 1),
    ("c16 We bulk own + x multicast", 128, 16, 9, 3, 2),
    ("c16 We multicast + x multicast", 128, 16, 9, 4, 2),
]


def main():
    from torch.utils.cpp_extension import load_inline
    from kernel_dev import graph_us
    from harness import timing
    saved = os.environ.get("TORCH_CUDA_ARCH_LIST")
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"
    try:
        ext = load_inline("vae_l2_probe", CPP, cuda_sources=SRC, functions=["max_clusters", "probe"],
                          extra_cuda_cflags=["-O3"], verbose=False)
    finally:
        if saved is None:
            del os.environ["TORCH_CUDA_ARCH_LIST"]
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = saved
    dev = torch.device("cuda")
    W = torch.rand(256 * 784, device=dev)
    X = torch.rand(16 * 16 * 784, device=dev)
    out = torch.zeros(256, device=dev)
    c8, c16 = ext.max_clusters(8, SMEM), ext.max_clusters(16, SMEM)
    print(f"clusters at once with {SMEM >> 10} KB of smem a block: of 8: {c8} ({8 * c8} SMs), "
          f"of 16: {c16} ({16 * c16} SMs)")
    timing.warm_clock(dev, 2.0)
    runs = {name: [] for name, *_ in CASES}
    for _ in range(5):   # interleaved rounds
        for name, blocks, csize, R, wmode, xmode in CASES:
            runs[name].append(graph_us(lambda: ext.probe(W, X, out, blocks, csize, R, wmode, xmode, SMEM)))
    print(f"\n{'case':42s} {'blocks':>6s} {'L2 MB':>6s} {'us':>6s}   (graph replay of 20 launches, median of 5 rounds)")
    for name, blocks, csize, R, wmode, xmode in CASES:
        groups = blocks // 8
        w_mb = {0: 0, 1: 100352, 2: 50176, 3: 100352, 4: 50176}[wmode] * blocks / 1e6
        x_mb = {0: 0, 1: R * 3136 * blocks, 2: R * 3136 * groups}[xmode] / 1e6
        waves = "" if blocks // csize <= (c8 if csize == 8 else c16) else "  (more clusters than run at once)"
        print(f"{name:42s} {blocks:6d} {w_mb + x_mb:6.1f} {statistics.median(runs[name]):6.2f}{waves}")


if __name__ == "__main__":
    main()
