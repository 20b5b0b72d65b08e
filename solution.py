"""Fused VAE forward pass (ELBO) in one CUDA kernel launch, for Hopper (sm_90).

Computes what reference.py's Model computes, for input_dim=784, hidden_dim=256,
latent_dim=32 (other sizes raise ValueError at construction):
  x (B, 784) float32 in [0, 1], any B >= 1 (B = 0 gives empty outputs)
  h  = relu(x We^T + be)                    (B, 256)
  mu, logvar = h Wmu^T + bmu, h Wlv^T + blv (B, 32)
  z  = mu + exp(0.5 logvar) * eps           eps bit-identical to torch.randn_like(std)
  xr = sigmoid(W2 relu(W1 z + b1) + b2)     (B, 784), never leaves the chip
  recon = BCE(xr, x).sum(-1), kl = -0.5 sum(1 + logvar - mu^2 - e^logvar)
returns (elbo, recon, kl), each (B,) float32, rows of one (3, B) allocation.
All arithmetic and accumulation is fp32 (no TF32, no fast math).

One launch per forward. A cluster of 8 thread blocks owns R = 16 rows (R = 8
kept as a variant for tests and timing); each block computes 1/8 of every layer's output
units for those rows and pushes its slice into all 8 blocks' shared memory
(distributed shared memory), so each block reads only 1/8 of the weights.
The noise is drawn inside the kernel with torch's own Philox layout and
reservation of the default CUDA generator (CUDA-graph safe).

Build and check: `make check` (tests/test_solution.py; GPU tests need a GPU),
`make bench`; on a GPU machine tools/kernel_dev.py builds, tests and times.

Version log (H200, B=128, CUDA-event median per forward call, GPU time from
CUDA-graph replay; see notes/solution.md):
  v1: cluster-of-8 DSMEM kernel, W2 slice and x tile by bulk copy, warp K-split
      dot products with butterfly reduce-scatter, R=8 for B<=1024:
      33.6 µs per call (no-op kernel call 14.1), 25.5 µs GPU; B=16384 1310 µs GPU (eager 523)
  v2: R=16 for every B: 40.4 µs per call (no-op 21.1 in that run), 20.1 µs GPU
      at B=128, 95.7 at B=1000, 1310 at B=16384 (eager 521): far from the goals;
      constexpr sizes no longer bound by reference in host error messages (segfault fix)
"""
import hashlib
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/PhiloxUtils.cuh>
#include <ATen/core/Generator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
#include <cooperative_groups.h>
#include <curand_kernel.h>
#include <mutex>

namespace cg = cooperative_groups;

// ---------------------------------------------------------------------------
// Sizes and tiling (the only place they are defined)
// ---------------------------------------------------------------------------
constexpr int D = 784;                    // input / output features
constexpr int H = 256;                    // hidden units (encoder and decoder)
constexpr int L = 32;                     // latent units
constexpr int CLUSTER = 8;                // blocks per cluster, each owns 1/8 of every layer
constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;
constexpr int H_SLICE = H / CLUSTER;      // 32 hidden units per block
constexpr int L_SLICE = L / CLUSTER;      // 4 latent units per block (mu and logvar each)
constexpr int D_SLICE = D / CLUSTER;      // 98 output pixels per block
constexpr int ENC_U = H_SLICE / WARPS;    // 4 hidden units per warp in the encoder
constexpr int DEC_U = 4;                  // output pixels per warp pass in the last layer
constexpr int DEC_GROUPS = (D_SLICE + DEC_U - 1) / DEC_U;   // 25 passes per block
constexpr int NOISE_BLOCK = 256;          // torch's normal_ launch: block size ...
constexpr int NOISE_UNROLL = 4;           // ... and values per curand_normal4 call

static_assert(D % CLUSTER == 0 && H % CLUSTER == 0 && L % CLUSTER == 0, "layers split evenly over the cluster");
static_assert(D % 4 == 0 && H % 4 == 0 && L % 4 == 0, "rows are read as float4");
static_assert(H_SLICE % WARPS == 0, "encoder units split evenly over warps");
static_assert(2 * L_SLICE == WARPS, "mu/logvar layer: one output unit per warp");
static_assert(THREADS == H_SLICE * 8, "decoder hidden layer: 8 threads per unit");
static_assert((D_SLICE * H * 4) % 16 == 0 && (D * 4) % 16 == 0, "bulk copies move multiples of 16 bytes");

// Shared memory of one block, in floats. R = rows owned by the cluster.
template <int R>
struct Smem {
  static_assert(R % 8 == 0, "R rows split over 8 warps / 8 threads per unit");
  static constexpr int X = 0;                         // R x D   input tile (bulk copy)
  static constexpr int W2 = X + R * D;                // D_SLICE x H  this block's rows of W2 (bulk copy)
  static constexpr int HID = W2 + D_SLICE * H;        // R x H   encoder hidden, all 8 slices
  static constexpr int Z = HID + R * H;               // R x L   latent sample, all 8 slices
  static constexpr int HID2 = Z + R * L;              // R x H   decoder hidden, all 8 slices
  static constexpr int MULV = HID2 + R * H;           // R x 2*L_SLICE  this block's mu | logvar
  static constexpr int KL = MULV + R * 2 * L_SLICE;   // R x L   KL terms (used on rank 0)
  static constexpr int BCE = KL + R * L;              // R x D_SLICE   BCE terms of this block
  static constexpr int RECON = BCE + R * D_SLICE;     // CLUSTER x R  recon partial sums (rank 0)
  static constexpr int BARS = RECON + CLUSTER * R;    // 2 mbarriers (x tile, W2 slice)
  static constexpr size_t BYTES = BARS * sizeof(float) + 2 * sizeof(uint64_t);
  static_assert(X % 4 == 0 && W2 % 4 == 0 && HID % 4 == 0 && Z % 4 == 0 && HID2 % 4 == 0, "float4 alignment");
  static_assert(BARS % 2 == 0, "mbarrier 8-byte alignment");
  static_assert(BYTES <= 227 * 1024, "fits in one SM's shared memory");
};

// ---------------------------------------------------------------------------
// Helpers: bulk copy (TMA 1-D) with mbarrier completion, cluster barrier halves
// ---------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Thread 0 only: copy `bytes` (multiple of 16, 16-byte aligned) global -> own shared memory.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
               :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
  }
}
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
#ifdef VAE_PROFILE   // dev builds only: per-phase SM clock of block 0 and the last block
#define PROF(i) do { if (tid == 0) prof[i] = clock64(); } while (0)
#else
#define PROF(i) do {} while (0)
#endif
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

// c ? a : b as one selp, so the compiler cannot turn a select between two
// register-array entries into a local-memory load from a selected address.
__device__ __forceinline__ float select(bool c, float a, float b) {
  float r;
  asm("{ .reg .pred p; setp.ne.u32 p, %3, 0; selp.f32 %0, %1, %2, p; }" : "=f"(r) : "f"(a), "f"(b), "r"((uint32_t)c));
  return r;
}

// Sum N per-lane partials across the warp (fixed order, deterministic).
// Afterwards, for N >= 32, lane l holds the totals of entries (N/32)*l + t in v[t];
// for N < 32, every lane holds the total of entry l / (32/N) in v[0].
template <int N, int S = 0>
__device__ __forceinline__ void warp_reduce_scatter(float (&v)[N], int lane) {
  if constexpr (S < 5) {
    constexpr int o = 16 >> S, half = N >> (S + 1);
    if constexpr (half >= 1) {   // halve: keep one half of the entries, send the other
      const bool upper = lane & o;
#pragma unroll
      for (int i = 0; i < half; ++i) {
        const float send = select(upper, v[i], v[i + half]);
        const float keep = select(upper, v[i + half], v[i]);
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
      }
    } else {                     // one entry left: plain butterfly sum
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
    }
    warp_reduce_scatter<N, S + 1>(v, lane);
  }
}
template <int N> __device__ __forceinline__ int scatter_entry(int lane, int t) {
  return N >= 32 ? (N / 32) * lane + t : lane / (32 / N);
}
template <int N> __device__ __forceinline__ bool scatter_writer(int lane) {
  return N >= 32 ? true : (lane % (32 / N)) == 0;
}

// Warp dot products, K split over lanes: lane owns float4 columns f = lane, lane+32, ...
// w[it][u] = row (unit0+u) of W at column 4*(lane+32*it); rows >= units read as 0.
template <int U, int K>
__device__ __forceinline__ void load_rows(const float* __restrict__ W, int unit0, int units, int lane,
                                          float4 (&w)[(K / 4 + 31) / 32][U]) {
  constexpr int F = K / 4;
#pragma unroll
  for (int it = 0; it < (F + 31) / 32; ++it) {
    const int f = lane + 32 * it;
#pragma unroll
    for (int u = 0; u < U; ++u)
      w[it][u] = (u < units && f < F)
          ? __ldg(reinterpret_cast<const float4*>(W + (size_t)(unit0 + u) * K) + f)
          : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}
// acc[u*R + r] += sum over this lane's columns of w[.][u] . act[r][.]  (act: R x K in smem)
template <int R, int U, int K>
__device__ __forceinline__ void dot_rows(const float4 (&w)[(K / 4 + 31) / 32][U], const float* act, int lane,
                                         float (&acc)[U * R]) {
  constexpr int F = K / 4;
#pragma unroll
  for (int it = 0; it < (F + 31) / 32; ++it) {
    const int f = lane + 32 * it;
    if (F % 32 == 0 || f < F) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float4 a = reinterpret_cast<const float4*>(act + r * K)[f];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          float s = acc[u * R + r];
          s = fmaf(w[it][u].x, a.x, s);
          s = fmaf(w[it][u].y, a.y, s);
          s = fmaf(w[it][u].z, a.z, s);
          s = fmaf(w[it][u].w, a.w, s);
          acc[u * R + r] = s;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Noise: the value torch.randn_like gives element i of a contiguous float32
// tensor. torch's normal_ kernel runs T threads; thread i % T inits Philox with
// subsequence i % T and the reserved offset, and element i comes from its
// (q/4)-th curand_normal4 call, component q % 4, where q = i / T.
// ---------------------------------------------------------------------------
__device__ __forceinline__ float torch_normal_at(uint64_t seed, uint64_t offset, uint64_t i, uint64_t T) {
  const uint64_t q = i / T;
  curandStatePhilox4_32_10_t s;
  curand_init(seed, i % T, offset, &s);
  float4 r = curand_normal4(&s);
  for (uint64_t k = 0; k < q / 4; ++k) r = curand_normal4(&s);
  const int c = static_cast<int>(q % 4);
  const float v = c == 0 ? r.x : c == 1 ? r.y : c == 2 ? r.z : r.w;
  return v * 1.0f + 0.0f;   // torch's `v * std + mean`: turns -0 into +0
}

// Test entry: fills out[0..n) exactly as torch.randn_like would.
__global__ void draw_noise_kernel(float* __restrict__ out, int64_t n, at::PhiloxCudaState st, uint64_t T) {
  const auto seeds = at::cuda::philox::unpack(st);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = torch_normal_at(std::get<0>(seeds), std::get<1>(seeds), (uint64_t)i, T);
}

// ---------------------------------------------------------------------------
// The fused kernel. Cluster c owns rows [c*R, c*R+R); block `rank` of it owns
// hidden units [32 rank, +32), latent units [4 rank, +4), pixels [98 rank, +98).
// Phases, separated by cluster barriers (S1..S4):
//   0  bulk-copy x tile (R x 784) and this block's 98 rows of W2 into smem
//   1  encoder: warp w -> hidden units 32 rank + 4w + [0,4), lanes split K=784;
//      push h slice to all 8 blocks                                        S1
//   2  mu/logvar: warp w -> one unit (w<4: mu, else logvar), lanes split K=256;
//      threads t < 4R: noise, z, KL term; push z to all, KL terms to rank 0 S2
//   3  decoder hidden: thread t -> unit 32 rank + t/8, rows t%8, t%8+8, ...;
//      push to all 8 blocks                                                S3
//   4  decoder output: warp w -> pixel groups w, w+8, ... of 4, lanes split
//      K=256; sigmoid + BCE; per-row sums pushed to rank 0                 S4
//   5  rank 0 sums partials in fixed order, writes elbo/recon/kl.
// ---------------------------------------------------------------------------
template <int R>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
vae_elbo_kernel(const float* __restrict__ x,
                const float* __restrict__ We, const float* __restrict__ be,
                const float* __restrict__ Wmu, const float* __restrict__ bmu,
                const float* __restrict__ Wlv, const float* __restrict__ blv,
                const float* __restrict__ W1, const float* __restrict__ b1,
                const float* __restrict__ W2, const float* __restrict__ b2,
                float* __restrict__ out, int B, at::PhiloxCudaState st, uint64_t noise_threads) {
  using S = Smem<R>;
  extern __shared__ __align__(16) float smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int row0 = (int)(blockIdx.x / CLUSTER) * R;
  const int rows = min(R, B - row0);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + S::BARS);
#ifdef VAE_PROFILE
  long long prof[12];
#endif
  PROF(0);

  // ---- phase 0: async loads of the x tile and this block's W2 rows
  if (tid == 0) { mbar_init(&bars[0]); mbar_init(&bars[1]); mbar_fence_init(); }
  __syncthreads();
  if (tid == 0) {
    bulk_copy(smem + S::X, x + (size_t)row0 * D, (uint32_t)(rows * D * sizeof(float)), &bars[0]);
#ifndef VAE_SKIP_DEC
    bulk_copy(smem + S::W2, W2 + (size_t)rank * D_SLICE * H, (uint32_t)(D_SLICE * H * sizeof(float)), &bars[1]);
#endif
  }
  for (int i = rows * D + tid; i < R * D; i += THREADS) smem[S::X + i] = 0.f;   // rows past B
  cluster_arrive_relaxed();   // "this block has started": needed before anyone writes into it

  // ---- phase 1: encoder, h = relu(x We^T + be)
  {
    const int unit0 = rank * H_SLICE + warp * ENC_U;
    float4 w[(D / 4 + 31) / 32][ENC_U];
#ifndef VAE_SKIP_ENC
    load_rows<ENC_U, D>(We, unit0, ENC_U, lane, w);
#endif
    constexpr int N = ENC_U * R;
    float acc[N];
#pragma unroll
    for (int i = 0; i < N; ++i) acc[i] = 0.f;
    mbar_wait(&bars[0], 0);
    __syncthreads();   // zero-filled rows visible
    PROF(1);
#ifndef VAE_SKIP_ENC
    dot_rows<R, ENC_U, D>(w, smem + S::X, lane, acc);
#endif
    warp_reduce_scatter<N>(acc, lane);
    PROF(2);
    cluster_wait();    // every block of the cluster has started
#pragma unroll
    for (int t = 0; t < (N >= 32 ? N / 32 : 1); ++t) {
      const int e = scatter_entry<N>(lane, t), u = e / R, r = e % R;
      const float h = fmaxf(acc[t] + __ldg(be + unit0 + u), 0.f);
#pragma unroll
      for (int c = 0; c < CLUSTER; ++c)
        cluster.map_shared_rank(smem + S::HID, c)[r * H + unit0 + u] = h;
    }
  }
  // prefetch phase 2 weights across the barrier
  const int j2 = rank * L_SLICE + (warp % L_SLICE);
  const float* W2row = (warp < L_SLICE ? Wmu : Wlv);
  const float bias2 = __ldg((warp < L_SLICE ? bmu : blv) + j2);
  float4 wml[(H / 4 + 31) / 32][1];
  load_rows<1, H>(W2row, j2, 1, lane, wml);
  PROF(3);
  cluster.sync();   // S1: full h in every block
  PROF(4);

  // ---- phase 2: mu, logvar, noise, z, KL terms
  {
    float acc[R];
#pragma unroll
    for (int i = 0; i < R; ++i) acc[i] = 0.f;
    dot_rows<R, 1, H>(wml, smem + S::HID, lane, acc);
    warp_reduce_scatter<R>(acc, lane);
    if (scatter_writer<R>(lane)) smem[S::MULV + scatter_entry<R>(lane, 0) * 2 * L_SLICE + warp] = acc[0] + bias2;
    __syncthreads();
    if (tid < R * L_SLICE) {
      const int r = tid / L_SLICE, jj = tid % L_SLICE, j = rank * L_SLICE + jj;
      const float mu = smem[S::MULV + r * 2 * L_SLICE + jj];
      const float lv = smem[S::MULV + r * 2 * L_SLICE + L_SLICE + jj];
      float eps = 0.f;
      if (r < rows) {
        const auto seeds = at::cuda::philox::unpack(st);
        eps = torch_normal_at(std::get<0>(seeds), std::get<1>(seeds),
                              (uint64_t)(row0 + r) * L + j, noise_threads);
      }
      const float sd = expf(__fmul_rn(0.5f, lv));
      const float z = __fadd_rn(mu, __fmul_rn(sd, eps));
      const float klt = __fsub_rn(__fsub_rn(__fadd_rn(1.f, lv), __fmul_rn(mu, mu)), expf(lv));
#pragma unroll
      for (int c = 0; c < CLUSTER; ++c)
        cluster.map_shared_rank(smem + S::Z, c)[r * L + j] = z;
      cluster.map_shared_rank(smem + S::KL, 0)[r * L + j] = klt;
    }
  }
  // prefetch phase 3 weights across the barrier
  const int u3 = tid / 8, g3 = tid % 8, unit3 = rank * H_SLICE + u3;
  float4 w3[L / 4];
#pragma unroll
  for (int k = 0; k < L / 4; ++k) w3[k] = __ldg(reinterpret_cast<const float4*>(W1 + (size_t)unit3 * L) + k);
  const float bias3 = __ldg(b1 + unit3);
  PROF(5);
  cluster.sync();   // S2: full z in every block

  // ---- phase 3: decoder hidden, h2 = relu(W1 z + b1)
#pragma unroll
  for (int i = 0; i < R / 8; ++i) {
    const int r = g3 + 8 * i;
    const float4* zr = reinterpret_cast<const float4*>(smem + S::Z + r * L);
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < L / 4; ++k) {
      const float4 a = zr[k];
      s = fmaf(w3[k].x, a.x, s); s = fmaf(w3[k].y, a.y, s);
      s = fmaf(w3[k].z, a.z, s); s = fmaf(w3[k].w, a.w, s);
    }
    const float h2 = fmaxf(s + bias3, 0.f);
#pragma unroll
    for (int c = 0; c < CLUSTER; ++c)
      cluster.map_shared_rank(smem + S::HID2, c)[r * H + unit3] = h2;
  }
  cluster.sync();   // S3: full decoder hidden in every block
  PROF(6);

  // ---- phase 4: decoder output logits, sigmoid, BCE terms
#ifndef VAE_SKIP_DEC
  mbar_wait(&bars[1], 0);
#endif
  PROF(7);
  for (int g = warp; g < DEC_GROUPS; g += WARPS) {
    const int p0 = g * DEC_U, valid = min(DEC_U, D_SLICE - p0);
    constexpr int N = DEC_U * R;
    float4 w[(H / 4 + 31) / 32][DEC_U];
#pragma unroll
    for (int it = 0; it < (H / 4 + 31) / 32; ++it)
#pragma unroll
      for (int u = 0; u < DEC_U; ++u)
        w[it][u] = u < valid ? reinterpret_cast<const float4*>(smem + S::W2 + (p0 + u) * H)[lane + 32 * it]
                             : make_float4(0.f, 0.f, 0.f, 0.f);
    float acc[N];
#pragma unroll
    for (int i = 0; i < N; ++i) acc[i] = 0.f;
#ifndef VAE_SKIP_DEC
    dot_rows<R, DEC_U, H>(w, smem + S::HID2, lane, acc);
#endif
    warp_reduce_scatter<N>(acc, lane);
#pragma unroll
    for (int t = 0; t < (N >= 32 ? N / 32 : 1); ++t) {
      const int e = scatter_entry<N>(lane, t), u = e / R, r = e % R;
      if (u < valid) {
        const int d = rank * D_SLICE + p0 + u;
        const float logit = acc[t] + __ldg(b2 + d);
        const float p = 1.0f / (1.0f + expf(-logit));        // torch's sigmoid
        const float xv = smem[S::X + r * D + d];
        const float lp = fmaxf(logf(p), -100.f);               // clamp each log before use
        const float l1p = fmaxf(log1pf(-p), -100.f);
        smem[S::BCE + r * D_SLICE + p0 + u] = __fsub_rn(__fmul_rn(xv - 1.f, l1p), __fmul_rn(xv, lp));
      }
    }
  }
  PROF(8);
  __syncthreads();
  // per-row sums of this block's 98 BCE terms: warp w -> rows w, w+8, ...
#pragma unroll
  for (int i = 0; i < R / 8; ++i) {
    const int r = warp + 8 * i;
    float s = 0.f;
    for (int p = lane; p < D_SLICE; p += 32) s += smem[S::BCE + r * D_SLICE + p];
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) cluster.map_shared_rank(smem + S::RECON, 0)[rank * R + r] = s;
  }
  PROF(9);
  cluster.sync();   // S4: all partials on rank 0; no remote access after this
  PROF(10);
#ifdef VAE_PROFILE
  if (tid == 0 && (blockIdx.x == 0 || blockIdx.x == gridDim.x - 1))
    printf("prof B=%d R=%d block %d: x-wait %lld enc %lld push %lld S1 %lld mulv %lld S2+dec1+S3 %lld w2-wait %lld dec2 %lld sums %lld S4 %lld cycles\n",
           B, R, (int)blockIdx.x, prof[1] - prof[0], prof[2] - prof[1], prof[3] - prof[2], prof[4] - prof[3],
           prof[5] - prof[4], prof[6] - prof[5], prof[7] - prof[6], prof[8] - prof[7], prof[9] - prof[8],
           prof[10] - prof[9]);
#endif

  // ---- phase 5: rank 0 writes elbo, recon, kl (fixed summation order)
  if (rank == 0 && tid < rows) {
    float recon = 0.f, kls = 0.f;
#pragma unroll
    for (int c = 0; c < CLUSTER; ++c) recon += smem[S::RECON + c * R + tid];
#pragma unroll
    for (int j = 0; j < L; ++j) kls += smem[S::KL + tid * L + j];
    const float kl = -0.5f * kls;
    const int row = row0 + tid;
    out[row] = -(recon + kl);
    out[(size_t)B + row] = recon;
    out[2 * (size_t)B + row] = kl;
  }
}

// ---------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------
struct NoiseReservation { at::PhiloxCudaState st; uint64_t threads; };

// Reserve Philox offsets for n normals exactly as torch's normal_ does
// (same thread count T and increment), under the generator's mutex.
static NoiseReservation reserve_noise(int64_t n, c10::DeviceIndex dev) {
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(dev);
  const uint64_t blocks_per_sm = prop->maxThreadsPerMultiProcessor / NOISE_BLOCK;
  const uint64_t grid = std::min<uint64_t>((uint64_t)prop->multiProcessorCount * blocks_per_sm,
                                           ((uint64_t)n + NOISE_BLOCK - 1) / NOISE_BLOCK);
  const uint64_t T = grid * NOISE_BLOCK;
  const uint64_t increment = (((uint64_t)n - 1) / (T * NOISE_UNROLL) + 1) * NOISE_UNROLL;
  auto gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(
      std::nullopt, at::cuda::detail::getDefaultCUDAGenerator(dev));
  NoiseReservation res;
  res.threads = T;
  {
    std::lock_guard<std::mutex> lock(gen->mutex_);
    res.st = gen->philox_cuda_state(increment);
  }
  return res;
}

// "(2, 4, 784)": built by hand so error paths stay trivial
static std::string shape_str(const at::Tensor& t) {
  std::string s = "(";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + ")";
}

static void check_param(const at::Tensor& t, const char* name, int64_t rows, int64_t cols,
                        const at::Device& dev) {
  TORCH_CHECK(t.device() == dev, "vae_forward: ", name, " is on ", t.device(),
              " but x is on ", dev, "; move the model to x's device");
  TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat, "vae_forward: ", name, " must be float32, got ", t.scalar_type());
  const bool shape_ok = cols < 0 ? (t.dim() == 1 && t.size(0) == rows)
                                 : (t.dim() == 2 && t.size(0) == rows && t.size(1) == cols);
  TORCH_CHECK(shape_ok, "vae_forward: ", name, " has shape ", shape_str(t), ", expected (", rows,
              cols < 0 ? std::string(")") : ", " + std::to_string(cols) + ")");
  TORCH_CHECK(t.is_contiguous() && (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16) == 0,
              "vae_forward: ", name, " must be contiguous and 16-byte aligned");
}

template <int R>
static void launch(const at::Tensor& x, const std::vector<const float*>& p, float* out, int B,
                   const NoiseReservation& nr, cudaStream_t stream, c10::DeviceIndex dev) {
  static bool configured[64] = {false};
  if (!configured[dev]) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(vae_elbo_kernel<R>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)Smem<R>::BYTES));
    configured[dev] = true;
  }
  const int clusters = (B + R - 1) / R;
  vae_elbo_kernel<R><<<clusters * CLUSTER, THREADS, Smem<R>::BYTES, stream>>>(
      x.data_ptr<float>(), p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9],
      out, B, nr.st, nr.threads);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> vae_forward(
    at::Tensor x, const at::Tensor& We, const at::Tensor& be, const at::Tensor& Wmu, const at::Tensor& bmu,
    const at::Tensor& Wlv, const at::Tensor& blv, const at::Tensor& W1, const at::Tensor& b1,
    const at::Tensor& W2, const at::Tensor& b2, int64_t rows_per_cluster) {
  TORCH_CHECK(x.is_cuda(), "vae_forward: x must be a CUDA tensor, got device ", x.device());
  TORCH_CHECK_TYPE(x.scalar_type() == at::kFloat, "vae_forward: x must be float32, got ", x.scalar_type());
  TORCH_CHECK(x.dim() == 2 && x.size(1) == D, "vae_forward: x must have shape (B, " + std::to_string(D) + "), got " + shape_str(x));
  TORCH_CHECK(x.size(0) <= (int64_t)1 << 28, "vae_forward: batch size ", x.size(0), " too large");
  const at::Device dev = x.device();
  check_param(We, "encoder[0].weight", H, D, dev);
  check_param(be, "encoder[0].bias", H, -1, dev);
  check_param(Wmu, "fc_mu.weight", L, H, dev);
  check_param(bmu, "fc_mu.bias", L, -1, dev);
  check_param(Wlv, "fc_logvar.weight", L, H, dev);
  check_param(blv, "fc_logvar.bias", L, -1, dev);
  check_param(W1, "decoder[0].weight", H, L, dev);
  check_param(b1, "decoder[0].bias", H, -1, dev);
  check_param(W2, "decoder[2].weight", D, H, dev);
  check_param(b2, "decoder[2].bias", D, -1, dev);
  TORCH_CHECK(rows_per_cluster == 0 || rows_per_cluster == 8 || rows_per_cluster == 16,
              "vae_forward: rows_per_cluster must be 0 (auto), 8 or 16");

  c10::cuda::CUDAGuard guard(dev);
  const int64_t B = x.size(0);
  at::Tensor out = at::empty({3, B}, x.options());
  if (B > 0) {
    if (!x.is_contiguous() || (reinterpret_cast<uintptr_t>(x.data_ptr()) % 16) != 0)
      x = x.clone(at::MemoryFormat::Contiguous);
    const NoiseReservation nr = reserve_noise(B * L, dev.index());
    const std::vector<const float*> p = {We.data_ptr<float>(), be.data_ptr<float>(), Wmu.data_ptr<float>(),
        bmu.data_ptr<float>(), Wlv.data_ptr<float>(), blv.data_ptr<float>(), W1.data_ptr<float>(),
        b1.data_ptr<float>(), W2.data_ptr<float>(), b2.data_ptr<float>()};
    cudaStream_t stream = at::cuda::getCurrentCUDAStream(dev.index());
    const int64_t R = rows_per_cluster ? rows_per_cluster : 16;   // R=16 measured faster at B=128..16384
    if (R == 8) launch<8>(x, p, out.data_ptr<float>(), (int)B, nr, stream, dev.index());
    else        launch<16>(x, p, out.data_ptr<float>(), (int)B, nr, stream, dev.index());
  }
  return {out.select(0, 0), out.select(0, 1), out.select(0, 2)};
}

// Test-only: the noise the fused kernel draws for a (rows, cols) tensor, through the
// same device function and the same generator reservation.
at::Tensor draw_noise(int64_t rows, int64_t cols, int64_t device_index) {
  TORCH_CHECK(rows >= 0 && cols >= 0, "draw_noise: sizes must be non-negative");
  const at::Device dev(at::kCUDA, (c10::DeviceIndex)device_index);
  c10::cuda::CUDAGuard guard(dev);
  at::Tensor out = at::empty({rows, cols}, at::TensorOptions().dtype(at::kFloat).device(dev));
  const int64_t n = rows * cols;
  if (n == 0) return out;
  const NoiseReservation nr = reserve_noise(n, dev.index());
  const int64_t grid = std::min<int64_t>((n + NOISE_BLOCK - 1) / NOISE_BLOCK, 65535);
  draw_noise_kernel<<<grid, NOISE_BLOCK, 0, at::cuda::getCurrentCUDAStream(dev.index())>>>(
      out.data_ptr<float>(), n, nr.st, nr.threads);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

CPP_DECL = (
    "std::tuple<at::Tensor, at::Tensor, at::Tensor> vae_forward(at::Tensor x, const at::Tensor& We, "
    "const at::Tensor& be, const at::Tensor& Wmu, const at::Tensor& bmu, const at::Tensor& Wlv, "
    "const at::Tensor& blv, const at::Tensor& W1, const at::Tensor& b1, const at::Tensor& W2, "
    "const at::Tensor& b2, int64_t rows_per_cluster);\n"
    "at::Tensor draw_noise(int64_t rows, int64_t cols, int64_t device_index);\n"
)


def _build():
    # The kernel uses sm_90 features (clusters, bulk copy): build for sm_90 only.
    saved = os.environ.get("TORCH_CUDA_ARCH_LIST")
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
    try:
        extra = os.environ.get("VAE_EXTRA_CUDA_FLAGS", "").split()   # dev variants, see tools/kernel_dev.py
        suffix = "_" + hashlib.sha1(" ".join(extra).encode()).hexdigest()[:8] if extra else ""
        return load_inline(
            name="vae_elbo_fused" + suffix,
            cpp_sources=CPP_DECL,
            cuda_sources=CUDA_SRC,
            functions=["vae_forward", "draw_noise"],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"] + extra,
            verbose=False,
        )
    finally:
        if saved is None:
            del os.environ["TORCH_CUDA_ARCH_LIST"]
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = saved


_ext = _build()
SUPPORTED_SIZES = (784, 256, 32)


class ModelNew(nn.Module):
    """Same parameters as reference.Model; forward is one fused CUDA kernel (forward only, no autograd)."""

    def __init__(self, input_dim, hidden_dim, latent_dim):
        super().__init__()
        if (input_dim, hidden_dim, latent_dim) != SUPPORTED_SIZES:
            raise ValueError(
                f"ModelNew supports (input_dim, hidden_dim, latent_dim) = {SUPPORTED_SIZES} only, "
                f"got ({input_dim}, {hidden_dim}, {latent_dim})")
        self.encoder = nn.Sequential(nn.Linear(input_dim, hidden_dim), nn.ReLU())
        self.fc_mu = nn.Linear(hidden_dim, latent_dim)
        self.fc_logvar = nn.Linear(hidden_dim, latent_dim)
        self.decoder = nn.Sequential(
            nn.Linear(latent_dim, hidden_dim), nn.ReLU(),
            nn.Linear(hidden_dim, input_dim), nn.Sigmoid())
        self._refresh_params()

    def _refresh_params(self):
        # The Parameter objects themselves (not copies): in-place updates are seen on every call.
        enc, dec = self.encoder[0], self.decoder
        self._params = (enc.weight, enc.bias, self.fc_mu.weight, self.fc_mu.bias,
                        self.fc_logvar.weight, self.fc_logvar.bias,
                        dec[0].weight, dec[0].bias, dec[2].weight, dec[2].bias)

    def _apply(self, fn, *args, **kwargs):
        module = super()._apply(fn, *args, **kwargs)
        self._refresh_params()
        return module

    def load_state_dict(self, *args, **kwargs):
        result = super().load_state_dict(*args, **kwargs)
        self._refresh_params()
        return result

    def forward(self, x, rows_per_cluster=0):
        return _ext.vae_forward(x, *self._params, rows_per_cluster)
