"""What an exchange between blocks costs on this GPU, with no math: the two kinds the kernels use or plan.

1. DSMEM, as the wg kernel's layer 2 does: in clusters of C (2, 4, 8; 120 blocks, one per SM), every
   block sends X bytes to each of P peers by one bulk copy each (shared::cta -> shared::cluster, bytes
   counted on the receiver's mbarrier), waits for its own P incoming copies, then a cluster barrier
   before the next round. X = 0 is the barrier alone. "pull": the same bytes read by every thread of
   the receiving block with remote loads instead, then the barrier. Session 10's profile read ~7 K cycles for
   3 x 32 KB (C = 4 and 8): is that the bytes (~14 B/clk out of an SM), and what would 3 x 8 KB take?
2. Through global memory across the whole grid, as a B = 128 kernel that reads the weights once would
   need (notes/solution.md, session 9's sketch): every block writes S bytes, then a release add on one
   counter; every block waits (acquire) until all have added, then reads S bytes of each of 8 other blocks.
   S = 0 is the flag barrier alone.

Each kernel runs R rounds per launch; the table gives GPU µs per launch by CUDA-graph replay (20
launches per replay, median of 50) for R = 1 and R = 9, and the cost of one round, (t9 - t1) / 8,
in µs and SM cycles at the current clock. Run on the GPU machine from the repository root:
python3 tools/exchange_probe.py
"""
import os
import sys

from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__device__ __forceinline__ uint32_t su32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// 1. Clusters of C: X bytes to each of P peers per round (peers rank + 1 .. rank + P, mod the group of
// P + 1 that holds this rank), then wait for the P copies into this block, then a cluster barrier.
__global__ void dsmem_probe(int X, int P, int rounds) {
  extern __shared__ __align__(128) uint8_t sm[];   // [0, X): the outgoing bytes; then P slots of X
  __shared__ __align__(8) uint64_t bar;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank(), G = P + 1, g0 = rank / G * G, me = rank - g0;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(su32(&bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  for (int i = threadIdx.x; i < X / 4; i += blockDim.x) reinterpret_cast<float*>(sm)[i] = (float)(rank + i);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  cluster.sync();
  for (int r = 0; r < rounds; ++r) {
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(su32(&bar)), "r"(P * X) : "memory");
      for (int j = 1; j <= P && X > 0; ++j) {
        const int peer = g0 + (me + j) % G;
        const int slot = (me - (me + j) % G + G) % G - 1;   // this rank's slot at the peer: 0 .. P - 1
        uint32_t dst, rb;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(dst) : "r"(su32(sm + X + slot * X)), "r"(peer));
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(su32(&bar)), "r"(peer));
        asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"(dst), "r"(su32(sm)), "r"(X), "r"(rb) : "memory");
      }
    }
    uint32_t done = 0;
    while (!done)
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done) : "r"(su32(&bar)), "r"(r & 1) : "memory");
    cluster.sync();   // every block's slots were filled before the next round's copies
  }
}

// 1b. The same bytes pulled: every thread of a block reads its share of the X bytes of each of the P
// peers' outgoing areas by remote loads (16 bytes each, the P peers' loads in flight together), then a
// cluster barrier per round (the reads done before the next round).
__global__ void dsmem_pull_probe(int X, int P, int rounds, float* sink) {
  extern __shared__ __align__(128) uint8_t sm[];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank(), G = P + 1, g0 = rank / G * G, me = rank - g0;
  for (int i = threadIdx.x; i < X / 4; i += blockDim.x) reinterpret_cast<float*>(sm)[i] = (float)(rank + i);
  cluster.sync();
  const float4* src[7];
#pragma unroll
  for (int j = 1; j <= 7; ++j)
    src[j - 1] = cluster.map_shared_rank(reinterpret_cast<const float4*>(sm), g0 + (me + (j <= P ? j : 1)) % G);
  float acc = 0.f;
  for (int r = 0; r < rounds; ++r) {
    for (int i = threadIdx.x; i < X / 16; i += blockDim.x) {
      float4 v[7];
#pragma unroll
      for (int j = 0; j < 7; ++j) v[j] = j < P ? src[j][i] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int j = 0; j < 7; ++j) acc += (v[j].x + v[j].y) + (v[j].z + v[j].w);
    }
    cluster.sync();
  }
  if (acc == 12345.f) sink[0] = acc;   // keeps the reads
}

// 2. The whole grid (cooperative: every block resident): S bytes out, a release add, an acquire wait
// for all, S bytes of each of 8 other blocks in. The counter only grows within a launch; the last block
// to finish resets it for the next launch.
__global__ void grid_probe(float* buf, unsigned* counter, float* sink, int S, int rounds) {
  const int nb = gridDim.x, b = blockIdx.x, n = S / 4;
  float acc = 0.f;
  for (int r = 0; r < rounds; ++r) {
    float* mine = buf + ((size_t)(r & 1) * nb + b) * (n > 0 ? n : 1);
    for (int i = threadIdx.x; i < n; i += blockDim.x) mine[i] = (float)(b + r + i);
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" :: "l"(counter) : "memory");
      unsigned v = 0;
      do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
      while (v < (unsigned)((r + 1) * nb));
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {   // the 8 sources' loads in flight together
      float v[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = __ldcg(buf + ((size_t)(r & 1) * nb + (b + 17 * (k + 1)) % nb) * n + i);
#pragma unroll
      for (int k = 0; k < 8; ++k) acc += v[k];
    }
  }
  if (acc == 12345.f) sink[0] = acc;   // keeps the reads
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(counter + 1, 1u) == (unsigned)nb - 1) {   // the last block out: both counters back to 0
      counter[0] = 0;
      counter[1] = 0;
      __threadfence();
    }
  }
}

void run_dsmem(int64_t C, int64_t X, int64_t P, int64_t rounds, int64_t blocks, bool pull, at::Tensor sink) {
  const int smem = (int)(X + P * X);
  static bool attr = false;
  if (!attr) {
    for (const void* k : {(const void*)dsmem_probe, (const void*)dsmem_pull_probe}) {
      C10_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
      C10_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    }
    attr = true;
  }
  TORCH_CHECK(smem <= 200 * 1024, "dsmem probe: X (1 + P) must fit 200 KB");
  TORCH_CHECK(P >= 1 && P <= 7 && P < C && C % (P + 1) == 0, "dsmem probe: P + 1 must divide C (P <= 7)");
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)blocks);
  cfg.blockDim = dim3(256);
  cfg.dynamicSmemBytes = 200 * 1024;   // one block per SM whatever X
  cfg.stream = at::cuda::getCurrentCUDAStream();
  cudaLaunchAttribute a;
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = (unsigned)C;
  a.val.clusterDim.y = 1;
  a.val.clusterDim.z = 1;
  cfg.attrs = &a;
  cfg.numAttrs = 1;
  if (pull) C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, dsmem_pull_probe, (int)X, (int)P, (int)rounds, sink.data_ptr<float>()));
  else C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, dsmem_probe, (int)X, (int)P, (int)rounds));
}

void run_grid(at::Tensor buf, at::Tensor counter, at::Tensor sink, int64_t S, int64_t rounds, int64_t blocks) {
  TORCH_CHECK(buf.numel() >= 2 * blocks * std::max<int64_t>(S / 4, 1), "grid probe: buffer too small");
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)blocks);
  cfg.blockDim = dim3(256);
  cfg.stream = at::cuda::getCurrentCUDAStream();
  cudaLaunchAttribute a;
  a.id = cudaLaunchAttributeCooperative;
  a.val.cooperative = 1;
  cfg.attrs = &a;
  cfg.numAttrs = 1;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, grid_probe, buf.data_ptr<float>(), (unsigned*)counter.data_ptr<int>(),
                                    sink.data_ptr<float>(), (int)S, (int)rounds));
}
"""
CPP = ("void run_dsmem(int64_t C, int64_t X, int64_t P, int64_t rounds, int64_t blocks, bool pull, at::Tensor sink);\n"
       "void run_grid(at::Tensor buf, at::Tensor counter, at::Tensor sink, int64_t S, int64_t rounds, int64_t blocks);")


def main():
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from kernel_dev import graph_us
    ext = load_inline("exchange_probe", CPP, cuda_sources=CUDA, functions=["run_dsmem", "run_grid"],
                      extra_cuda_cflags=["-O3"], verbose=False)
    if not torch.cuda.is_available():
        sys.exit("exchange_probe: built; no GPU here to run it on")
    blocks = 120   # 15 clusters of 8, 30 of 4, 60 of 2: the wg kernel's one block per SM
    sink = torch.zeros(1, device="cuda")
    for _ in range(2000):   # the clock up before any timing
        ext.run_dsmem(4, 1024, 3, 9, blocks, False, sink)
    torch.cuda.synchronize()
    try:
        clock = torch.cuda.clock_rate()   # MHz, through NVML
    except Exception:
        clock = 1980
    ghz = clock / 1000.0

    def line(what, fn):
        t1, t9 = graph_us(lambda: fn(1)), graph_us(lambda: fn(9))
        per = (t9 - t1) / 8
        print(f"{what:<40s} {t1:8.2f} {t9:8.2f} {per:8.3f} {per * ghz * 1e3:9.0f}", flush=True)

    print(f"SM clock {clock} MHz after warm-up (cycles below use it)")
    print(f"{'case':<40s} {'R=1 us':>8s} {'R=9 us':>8s} {'round us':>8s} {'cycles':>9s}")
    for pull in (False, True):
        for C, P in ((2, 1), (4, 3), (8, 3), (8, 7)):
            for X in (0, 4096, 8192, 16384, 32768):
                if X * (1 + P) > 200 * 1024:
                    continue
                line(f"dsmem {'pull' if pull else 'push'} C={C} peers={P} X={X // 1024} KB",
                     lambda R, C=C, P=P, X=X, pull=pull: ext.run_dsmem(C, X, P, R, blocks, pull, sink))
    counter = torch.zeros(2, dtype=torch.int32, device="cuda")
    for nb in (120, 132):
        for S in (0, 1024, 4096, 16384):
            buf = torch.zeros(2 * nb * max(S // 4, 1), device="cuda")
            line(f"grid blocks={nb} S={S // 1024 if S >= 1024 else S} {'KB' if S >= 1024 else 'B'}",
                 lambda R, S=S, buf=buf, nb=nb: ext.run_grid(buf, counter, sink, S, R, nb))
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
