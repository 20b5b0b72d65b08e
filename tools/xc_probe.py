"""The front half of a cluster kernel that reads We once per row group, timed with no correctness: is it faster?

Today's cluster kernel (R = 9, B = 128) gives each of its 15 clusters 9 rows and every block 1/8 of We (100 KB)
and of W2 (100 KB): each SM takes in ~230 KB, and the encoder waits on its 100 KB (timeline: x landed 0.85 us,
encoder done ~2.9, mu | logvar partials landed ~5.2 from the first block's entry). The split probed here
("design Y", notes/solution.md session 27) cuts the encoder's intake per SM to ~38 KB:
- 15 clusters of 8 = 3 row groups of 45 rows x 5 unit groups of 52 hidden units (the last 48); block b of a
  cluster takes K-slice b of x and We (25 or 24 float4 columns of 196), 48 rows x 56 units padded;
- encoder partials (48 x 56 over the block's K) reduce-scattered in the cluster by st.async: block b ends with
  rows [6 b, +6) of the cluster's units, h = relu(sum + b);
- mu | logvar partials of those 6 rows over the cluster's 52 units (Wml 64 x 52 a cluster), written to global
  memory, then one release add on the block's flag;
- consumers: block b of cluster c as today's R = 9 row owner (rows 9 c + b and, for b = 0, 9 c + 8) waits
  (acquire) on the 5 producer flags of each of its rows and sums the 5 partials: mu | logvar ready. From there
  on the kernel would be today's (z, decoder hidden, h2 all-gather, last layer, BCE).
STOP selects how far a launch runs: 1 intake, 2 + encoder math, 3 + reduce-scatter, 4 + mu | logvar partials
published, 5 + the consumers' wait and reads. W2 = 0: no W2 copies; 1: W2's 100 KB slice (7 bulk copies) issued
at entry after the x / We loads; 2: issued after the encoder math; with W2 > 0 each block waits for it before it
ends (as today's VAE_CK_STOP=3 build does). FENCE = 1: the producers' __threadfence before the release add; 0: the
release add alone. Every launch is cooperative and clustered (all 120 blocks resident:
the flags cannot deadlock). Flags only grow; each consumer keeps the count it has seen in global memory.

Prints GPU us per launch (CUDA-graph replay, median of 3 rounds) and the median block's %globaltimer stamps (us
from the earliest block's entry). Session 27's result (notes/solution.md): mu | logvar in at 7.2-7.3 us, against
today's partials landed at 5.2; slower at every step but the intake's bytes. Compare with today's kernel by prefix in the same device call:
python3 tools/ab_variants.py --sizes 128 --rows 0 --check-sizes 1 --no-eager \
    "s1=solution.py|-DVAE_CK_ONLY -DVAE_CK_STOP=1" ... "s3=solution.py|-DVAE_CK_ONLY -DVAE_CK_STOP=3"
Run on the GPU machine from the repository root: python3 tools/xc_probe.py (builds here, runs nothing here).
"""
import os
import statistics
import sys

from torch.utils.cpp_extension import load_inline

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_launch import COOP_CLUSTER_LAUNCH  # noqa: E402

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
""" + COOP_CLUSTER_LAUNCH + r"""

constexpr int D = 784, H = 256, L = 32, CL = 8, NCL = 15, UG = 5;
constexpr int RG = 45, RP = 48, UN = 52, UP = 56, KF = 25, LD = 4 * KF;   // rows / units real and padded; float4 columns
constexpr int ROWS_OUT = RP / CL;                 // 6 rows a block after the reduce-scatter
constexpr int SLOT = ROWS_OUT * UP;               // 336 floats: one block's partial for one destination
constexpr int NST = 8;                            // stamps per block
// smem (floats): XS [RP][LD], WS [UP][LD], PB [4][RP][UP], RS [CL][SLOT], HS [ROWS_OUT][UP], MV [2][2L], W2 [98 * 256]
constexpr int XS = 0, WS = XS + RP * LD, PB = WS + UP * LD, RSO = PB + 4 * RP * UP, HSO = RSO + CL * SLOT,
              MVO = HSO + ROWS_OUT * UP, W2O = MVO + 4 * L, BARO = W2O + 98 * H, SMEM_FLOATS = BARO + 8;

__device__ __forceinline__ uint32_t su32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ long long gtime() {
  long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}

__global__ void __launch_bounds__(256, 1)
front(const float* __restrict__ x, const float* __restrict__ We, const float* __restrict__ be,
      const float* __restrict__ Wml, const float* __restrict__ W2, float* __restrict__ part,
      unsigned* __restrict__ flags, unsigned* __restrict__ seen, long long* __restrict__ stamps,
      float* __restrict__ sink, int stop, int w2mode, int fence) {
  extern __shared__ __align__(16) float sm[];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank(), c = blockIdx.x / CL, tid = threadIdx.x;
  const int rg = c / UG, ug = c % UG;
  const int kf = rank < 4 ? KF : KF - 1, k0 = 4 * (rank < 4 ? KF * rank : 4 * KF + (KF - 1) * (rank - 4));
  uint64_t* bars = reinterpret_cast<uint64_t*>(sm + BARO);
  long long st[NST] = {};
  st[0] = gtime();
  if (tid == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(su32(&bars[0])) : "memory");   // RS slots
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(su32(&bars[1])) : "memory");   // W2
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(su32(&bars[0])), "r"((CL - 1) * SLOT * 4) : "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(su32(&bars[1])), "r"(w2mode ? 98 * H * 4 : 0) : "memory");
  }
  auto issue_w2 = [&]() {
    if (tid < 7) {
      const float* src = W2 + ((size_t)rank * 98 + 14 * tid) * H;
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   :: "r"(su32(sm + W2O + 14 * tid * H)), "l"(src), "r"(14 * H * 4), "r"(su32(&bars[1])) : "memory");
    }
  };
  cluster.sync();   // mbarriers valid everywhere (ordering through the barrier as today's kernel's arrive / wait)
  st[1] = gtime();
  // intake: x rows [45 rg, +48) and We units [52 ug, +56), float4 columns [k0 / 4, + kf), by cp.async
  for (int i = tid; i < (RP + UP) * kf; i += 256) {
    const int r = i / kf, q = i % kf;
    const float* src = r < RP ? x + (size_t)(RG * rg + r) * D + k0 + 4 * q : We + (size_t)(UN * ug + r - RP) * D + k0 + 4 * q;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(su32(sm + XS + r * LD + 4 * q)), "l"(src) : "memory");
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
  if (w2mode == 1) issue_w2();
  // the mu | logvar weights this thread needs later: output o = tid / 4, units [14 (tid % 4), +14) of the cluster's
  const int o = tid >> 2, qk = tid & 3;
  float wml[14];
#pragma unroll
  for (int u = 0; u < 14; ++u) wml[u] = __ldg(Wml + (size_t)o * H + min(UN * ug + 14 * qk + u, H - 1));
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  st[2] = gtime();
  if (stop >= 2) {
    // encoder partials: k-group kq = tid / 64 takes float4 columns kq, kq + 4, ...; thread (i, j): rows 6 i + [0, 6),
    // units 7 j + [0, 7)
    const int kq = tid >> 6, tt = tid & 63, i = tt >> 3, j = tt & 7;
    float acc[6][7];
#pragma unroll
    for (int r = 0; r < 6; ++r)
#pragma unroll
      for (int u = 0; u < 7; ++u) acc[r][u] = 0.f;
#pragma unroll 1
    for (int q = kq; q < kf; q += 4) {
      float4 a[6], w[7];
#pragma unroll
      for (int r = 0; r < 6; ++r) a[r] = *reinterpret_cast<const float4*>(sm + XS + (6 * i + r) * LD + 4 * q);
#pragma unroll
      for (int u = 0; u < 7; ++u) w[u] = *reinterpret_cast<const float4*>(sm + WS + (7 * j + u) * LD + 4 * q);
#pragma unroll
      for (int r = 0; r < 6; ++r)
#pragma unroll
        for (int u = 0; u < 7; ++u) {
          float s = acc[r][u];
          s = fmaf(a[r].x, w[u].x, s); s = fmaf(a[r].y, w[u].y, s);
          s = fmaf(a[r].z, w[u].z, s); s = fmaf(a[r].w, w[u].w, s);
          acc[r][u] = s;
        }
    }
#pragma unroll
    for (int r = 0; r < 6; ++r)
#pragma unroll
      for (int u = 0; u < 7; ++u) sm[PB + (kq * RP + 6 * i + r) * UP + 7 * j + u] = acc[r][u];
    __syncthreads();
    st[3] = gtime();
  }
  if (w2mode == 2) issue_w2();
  if (stop >= 3) {
    // reduce-scatter: destination p gets rows [6 p, +6) x 56 units, the 4 k-groups summed in order
    constexpr int Q4 = SLOT / 4;
    for (int e = tid; e < CL * Q4; e += 256) {
      const int p = e / Q4, q = e % Q4, r = ROWS_OUT * p + q / (UP / 4), u = 4 * (q % (UP / 4));
      float4 v = *reinterpret_cast<const float4*>(sm + PB + r * UP + u);
#pragma unroll
      for (int g = 1; g < 4; ++g) {
        const float4 t = *reinterpret_cast<const float4*>(sm + PB + (g * RP + r) * UP + u);
        v.x += t.x; v.y += t.y; v.z += t.z; v.w += t.w;
      }
      float* slot = sm + RSO + rank * SLOT + 4 * q;
      if (p == rank) {
        *reinterpret_cast<float4*>(slot) = v;
      } else {
        uint32_t dst, bar;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(dst) : "r"(su32(slot)), "r"(p));
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(bar) : "r"(su32(&bars[0])), "r"(p));
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
                     :: "r"(dst), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar) : "memory");
      }
    }
    mbar_wait(su32(&bars[0]), 0);
    __syncthreads();   // own slot visible
    for (int e = tid; e < SLOT; e += 256) {
      float s = 0.f;
#pragma unroll
      for (int src = 0; src < CL; ++src) s += sm[RSO + src * SLOT + e];
      sm[HSO + e] = fmaxf(s + __ldg(be + min(UN * ug + e % UP, H - 1)), 0.f);
    }
    __syncthreads();
    st[4] = gtime();
  }
  if (stop >= 4) {
    // mu | logvar partials of rows [6 rank, +6) of the row group over the cluster's units -> part[c][rank][6][64]
#pragma unroll
    for (int r = 0; r < ROWS_OUT; ++r) {
      float t = 0.f;
#pragma unroll
      for (int u = 0; u < 14; ++u) t = fmaf(wml[u], sm[HSO + r * UP + 14 * qk + u], t);
      t += __shfl_xor_sync(0xffffffffu, t, 1);
      t += __shfl_xor_sync(0xffffffffu, t, 2);
      if (qk == 0) part[(((size_t)c * CL + rank) * ROWS_OUT + r) * 2 * L + o] = t;
    }
    __syncthreads();
    if (tid == 0) {
      if (fence) __threadfence();
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" :: "l"(flags + blockIdx.x) : "memory");
    }
    st[5] = gtime();
  }
  if (stop >= 5) {
    // consumer: rows 9 c + rank (and 9 c + 8 for rank 0); per row, the 5 unit groups' block lr / 6 of its row group
    const unsigned gen = seen[blockIdx.x] + 1;
    const int nrow = rank == 0 ? 2 : 1;
    if (tid < 5 * nrow) {
      const int gr = 9 * c + rank + 8 * (tid / 5), lr = gr % RG;
      const unsigned* f = flags + ((gr / RG) * UG + tid % 5) * CL + lr / ROWS_OUT;
      unsigned v = 0;
      do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(f) : "memory");
      while (v < gen);
    }
    __syncthreads();
    if (tid < 2 * L * nrow) {
      const int ri = tid / (2 * L), oo = tid % (2 * L), gr = 9 * c + rank + 8 * ri, lr = gr % RG;
      float s = 0.f;
#pragma unroll
      for (int u = 0; u < UG; ++u)
        s += __ldcg(part + ((((size_t)(gr / RG) * UG + u) * CL + lr / ROWS_OUT) * ROWS_OUT + lr % ROWS_OUT) * 2 * L + oo);
      sm[MVO + tid] = s;
    }
    __syncthreads();
    st[6] = gtime();
  }
  if (stop >= 4 && tid == 0) seen[blockIdx.x] += 1;   // this launch published: consumers count it seen either way
  if (w2mode) mbar_wait(su32(&bars[1]), 0);
  st[7] = gtime();
  if (tid == 0) {
    float s = sm[HSO] + sm[MVO] + sm[PB] + sm[W2O + 1000];
    if (s == 12345.f) sink[0] = s;   // keeps the work
#pragma unroll
    for (int k = 0; k < NST; ++k) stamps[(size_t)blockIdx.x * NST + k] = st[k];
  }
  cluster.sync();   // no block leaves while a peer may still write into it
}

void run(at::Tensor x, at::Tensor We, at::Tensor be, at::Tensor Wml, at::Tensor W2, at::Tensor part,
         at::Tensor flags, at::Tensor seen, at::Tensor stamps, at::Tensor sink, int64_t stop, int64_t w2mode, int64_t fence) {
  static bool attr = false;
  if (!attr) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(front, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_FLOATS * 4));
    attr = true;
  }
  launch_coop_cluster(front, NCL * CL, 256, SMEM_FLOATS * 4, CL, x.data_ptr<float>(), We.data_ptr<float>(),
                      be.data_ptr<float>(), Wml.data_ptr<float>(), W2.data_ptr<float>(), part.data_ptr<float>(),
                      (unsigned*)flags.data_ptr<int>(), (unsigned*)seen.data_ptr<int>(),
                      (long long*)stamps.data_ptr<int64_t>(), sink.data_ptr<float>(), (int)stop, (int)w2mode, (int)fence);
}
"""
CPP = ("void run(at::Tensor x, at::Tensor We, at::Tensor be, at::Tensor Wml, at::Tensor W2, at::Tensor part,"
       " at::Tensor flags, at::Tensor seen, at::Tensor stamps, at::Tensor sink, int64_t stop, int64_t w2mode, int64_t fence);")
STAMPS = ("entry", "synced", "intake", "encoder", "rs", "published", "mulv in", "end")


def main():
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from kernel_dev import graph_us
    ext = load_inline("xc_probe", CPP, cuda_sources=CUDA, functions=["run"], extra_cuda_cflags=["-O3"], verbose=False)
    if not torch.cuda.is_available():
        sys.exit("xc_probe: built; no GPU here to run it on")
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.rand(144, 784, device=dev, generator=g)
    We = torch.randn(264, 784, device=dev, generator=g) * 0.03
    be = torch.randn(256, device=dev, generator=g) * 0.1
    Wml = torch.randn(64, 256, device=dev, generator=g) * 0.06
    W2 = torch.randn(784, 256, device=dev, generator=g) * 0.06
    part = torch.zeros(15 * 8 * 6 * 64, device=dev)
    flags = torch.zeros(120, dtype=torch.int32, device=dev)
    seen = torch.zeros(120, dtype=torch.int32, device=dev)
    stamps = torch.zeros(120, 8, dtype=torch.int64, device=dev)
    sink = torch.zeros(1, device=dev)

    def call(stop, w2, fence=1):
        ext.run(x, We, be, Wml, W2, part, flags, seen, stamps, sink, stop, w2, fence)

    for _ in range(3000):   # the clock up
        call(5, 1)
    torch.cuda.synchronize()
    # (stop, w2, fence): fence 0 publishes by the release add alone (no __threadfence before it)
    cases = [(s, 0, 1) for s in (1, 2, 3, 4, 5)] + [(4, 0, 0), (5, 0, 0), (5, 1, 1), (5, 2, 1), (1, 1, 1)]
    print(f"{'stop':>4s} {'w2':>3s} {'fence':>5s} {'us/launch':>9s}   median block's stamps, us from the first entry:")
    print(" " * 26 + " ".join(f"{n:>9s}" for n in STAMPS[1:]))
    rows = []
    for rnd in range(3):
        for case in cases:
            us = graph_us(lambda: call(*case))
            call(*case)
            torch.cuda.synchronize()
            s = stamps.cpu()
            t0 = int(s[:, 0].min())
            med = [statistics.median(float(v) for v in (s[:, k] - t0)) / 1e3 for k in range(1, len(STAMPS))]
            rows.append((case, us, med))
    for case in cases:
        mine = [r for r in rows if r[0] == case]
        us = statistics.median(r[1] for r in mine)
        med = [statistics.median(r[2][k] for r in mine) for k in range(len(STAMPS) - 1)]
        print(f"{case[0]:4d} {case[1]:3d} {case[2]:5d} {us:9.2f}   "
              + " ".join(f"{v:9.2f}" if v > 0 else f"{'-':>9s}" for v in med))

if __name__ == "__main__":
    main()
