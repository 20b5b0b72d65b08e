"""How fast bytes reach the SMs' shared memory from L2, by how many SMs pull at once (GPU, CUDA-graph replay).

The cluster kernel pulls ~228 KB per SM per forward at B = 128 (the x tile, 1/8 of We, 1/8 of W2): 15 clusters
of 8 read every weight 15 times (~27 MB). Whether that is bound by each SM's intake or by L2's total decides
the next design: clusters of 16 halve both the bytes per SM and the total, a multicast x tile cuts the total
only. Each launch here is a grid of clusters whose blocks copy `bytes` into their shared memory and wait:
- weights: rank r of every cluster reads slice r (as the kernel's We / W2 slices: the clusters share the data);
- tile: each block (or, multicast, each cluster) reads its own tile (as the x tile);
- copies of `chunk` bytes by bulk copy (TMA 1-D) from `issuers` lanes of warp 0, or 16-byte loads into
  registers from all 256 threads (ldg), or, multicast, rank r issues every C-th chunk to all C blocks.
Printed: µs per launch, the part above an empty launch of the same grid, and that as bytes per clock per SM
(at 1.98 GHz) and TB/s over all blocks. Also the resolution of %globaltimer (cross-SM time stamps).

Run on the GPU machine from the repository root (about a minute, most of it the build):
    python3 tools/ingest_probe.py
"""
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__device__ __forceinline__ uint32_t s32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ uint32_t cta_rank() { uint32_t r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
__device__ __forceinline__ uint32_t cta_count() { uint32_t r; asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r)); return r; }
__device__ __forceinline__ uint32_t cluster_id() { uint32_t r; asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r)); return r; }
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void wait_bar(uint64_t* bar) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(s32(bar)) : "memory");
}

// mode 0: weights (rank r reads slice r), 1: tile (block b reads tile b), 2: multicast tile (cluster c's tile,
// rank r issues chunks r, r + C, ... to every block of the cluster)
__global__ void __launch_bounds__(256, 1) bulk_k(const char* __restrict__ src, int bytes, int chunk, int issuers,
                                                 int mode, float* out) {
  extern __shared__ __align__(128) char sm[];
  __shared__ __align__(8) uint64_t bar;
  const int tid = threadIdx.x;
  const uint32_t rank = cta_rank(), C = cta_count();
  if (tid == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(s32(&bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(s32(&bar)), "r"(bytes) : "memory");
  }
  if (mode == 2) cluster_sync_all(); else __syncthreads();
  const size_t base = mode == 0 ? (size_t)rank * bytes : mode == 1 ? (size_t)blockIdx.x * bytes : (size_t)cluster_id() * bytes;
  const int n = bytes / chunk;
  if (tid < issuers) {
    if (mode == 2) {
      const uint16_t mask = (uint16_t)((1u << C) - 1);
      for (int c = rank + C * tid; c < n; c += C * issuers)
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;"
                     :: "r"(s32(sm + (size_t)c * chunk)), "l"(src + base + (size_t)c * chunk), "r"(chunk), "r"(s32(&bar)),
                        "h"(mask) : "memory");
    } else {
      for (int c = tid; c < n; c += issuers)
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"(s32(sm + (size_t)c * chunk)), "l"(src + base + (size_t)c * chunk), "r"(chunk), "r"(s32(&bar))
                     : "memory");
    }
  }
  wait_bar(&bar);
  if (mode == 2) cluster_sync_all();   // no block leaves while a peer's multicast may still write into it
  if (tid == 0 && reinterpret_cast<float*>(sm)[bytes / 8] == 12345.f) out[blockIdx.x] = 1.f;
}

// every thread N 16-byte loads in flight (weights pattern: rank r reads slice r of N * 4 KB)
template <int N>
__global__ void __launch_bounds__(256, 1) ldg_k(const float4* __restrict__ src, float* out) {
  const float4* s = src + (size_t)cta_rank() * N * 256;
  float4 v[N];
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = __ldg(s + i * 256 + threadIdx.x);
  float a = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) a += (v[i].x + v[i].y) + (v[i].z + v[i].w);
  if (a == 12345.f) out[blockIdx.x] = a;
}

__global__ void gtime_k(unsigned long long* out) {   // smallest non-zero step of %globaltimer, and %clock64's
  unsigned long long prev, t, step = ~0ull;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(prev));
  for (int i = 0; i < 20000; ++i) {   // ~20 us of reads: many steps
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t != prev) { if (t - prev < step) step = t - prev; prev = t; }
  }
  out[0] = step;
}

static void launch_cluster(const void* fn, void** args, int clusters, int csize, size_t smem) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(clusters * csize);
  cfg.blockDim = dim3(256);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = at::cuda::getCurrentCUDAStream();
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = csize;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  C10_CUDA_CHECK(cudaLaunchKernelExC(&cfg, fn, args));
}

void bulk(torch::Tensor src, torch::Tensor out, int64_t clusters, int64_t csize, int64_t bytes, int64_t chunk,
          int64_t issuers, int64_t mode) {
  static bool set = false;
  if (!set) {
    C10_CUDA_CHECK(cudaFuncSetAttribute((const void*)bulk_k, cudaFuncAttributeMaxDynamicSharedMemorySize, 220 * 1024));
    C10_CUDA_CHECK(cudaFuncSetAttribute((const void*)bulk_k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    set = true;
  }
  TORCH_CHECK(bytes <= 220 * 1024 && bytes % chunk == 0 && chunk % 16 == 0, "bulk: bad sizes");
  const char* s = (const char*)src.data_ptr<float>();
  float* o = out.data_ptr<float>();
  int b = (int)bytes, c = (int)chunk, is = (int)issuers, m = (int)mode;
  void* args[] = {&s, &b, &c, &is, &m, &o};
  launch_cluster((const void*)bulk_k, args, (int)clusters, (int)csize, (size_t)bytes + 128);
}

void ldg(torch::Tensor src, torch::Tensor out, int64_t clusters, int64_t csize) {
  static bool set = false;
  if (!set) {
    C10_CUDA_CHECK(cudaFuncSetAttribute((const void*)ldg_k<28>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    set = true;
  }
  const float4* s = (const float4*)src.data_ptr<float>();
  float* o = out.data_ptr<float>();
  void* args[] = {&s, &o};
  launch_cluster((const void*)ldg_k<28>, args, (int)clusters, (int)csize, 0);
}

int64_t gtime_step() {
  auto t = torch::zeros({1}, torch::dtype(torch::kInt64).device(torch::kCUDA));
  gtime_k<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>((unsigned long long*)t.data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return t.item<int64_t>();
}
"""
CPP = """void bulk(torch::Tensor src, torch::Tensor out, int64_t clusters, int64_t csize, int64_t bytes, int64_t chunk,
          int64_t issuers, int64_t mode);
void ldg(torch::Tensor src, torch::Tensor out, int64_t clusters, int64_t csize);
int64_t gtime_step();"""

CLOCK_GHZ = 1.98
WEIGHTS, TILE, MCAST = 0, 1, 2


def main():
    from launch_probe import graph_us
    ext = load_inline("ingest_probe", CPP, cuda_sources=SRC, functions=["bulk", "ldg", "gtime_step"],
                      extra_cuda_cflags=["-O3", "-gencode=arch=compute_90a,code=sm_90a"])
    src = torch.rand(16 * 1024 * 1024 // 4 * 4, device="cuda")   # 64 MB: every slice and tile below fits
    out = torch.zeros(4096, device="cuda")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(50):   # warm the clock
        a @ a
    print(f"%globaltimer smallest step: {ext.gtime_step()} ns")
    empty = {}
    def row(name, clusters, csize, bytes_per_block, fn):
        key = (clusters, csize)
        if key not in empty:
            empty[key] = graph_us(lambda: ext.bulk(src, out, clusters, csize, 0, 16, 1, WEIGHTS))
        t = graph_us(fn)
        extra = max(t - empty[key], 1e-3)
        blocks = clusters * csize
        per_clk = bytes_per_block / (extra * 1e-6) / (CLOCK_GHZ * 1e9)
        total = blocks * bytes_per_block / (extra * 1e-6) / 1e12
        print(f"{name:52s} {clusters:3d} x {csize:2d} {bytes_per_block // 1024:5d} KB {t:7.2f} {extra:7.2f} "
              f"{per_clk:7.1f} {total:7.2f}", flush=True)
    print(f"{'case':52s} clusters    per SM      us   extra  B/clk/SM  TB/s")
    K = 1024
    for cl in (1, 4, 15):
        for kb in (32, 96, 192):
            row(f"weights, bulk 16 KB chunks, 8 issuers", cl, 8, kb * K,
                lambda cl=cl, kb=kb: ext.bulk(src, out, cl, 8, kb * K, 16 * K, 8, WEIGHTS))
    for cl in (1, 15):
        row("weights, bulk 1 KB chunks (W2 rows), 32 issuers", cl, 8, 96 * K,
            lambda cl=cl: ext.bulk(src, out, cl, 8, 96 * K, K, 32, WEIGHTS))
        row("weights, bulk 96 KB in one copy", cl, 8, 96 * K,
            lambda cl=cl: ext.bulk(src, out, cl, 8, 96 * K, 96 * K, 1, WEIGHTS))
        row("weights, ldg 28 x 16 B per thread (the encoder's We)", cl, 8, 112 * K,
            lambda cl=cl: ext.ldg(src, out, cl, 8))
    for cl in (1, 7):
        for kb in (48, 96):
            row("weights, clusters of 16, bulk 16 KB chunks", cl, 16, kb * K,
                lambda cl=cl, kb=kb: ext.bulk(src, out, cl, 16, kb * K, 16 * K, 8, WEIGHTS))
    row("weights, 132 blocks alone (no cluster), 16 KB chunks", 132, 1, 96 * K,
        lambda: ext.bulk(src, out, 132, 1, 96 * K, 16 * K, 8, WEIGHTS))
    for cl, cs, kb in ((15, 8, 28), (7, 16, 60)):
        row("x tile per block, bulk 4 KB chunks", cl, cs, kb * K,
            lambda cl=cl, cs=cs, kb=kb: ext.bulk(src, out, cl, cs, kb * K, 4 * K, 8, TILE))
        row("x tile per cluster, multicast 4 KB chunks", cl, cs, kb * K,
            lambda cl=cl, cs=cs, kb=kb: ext.bulk(src, out, cl, cs, kb * K, 4 * K, 8, MCAST))


if __name__ == "__main__":
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
