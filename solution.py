"""Fused VAE forward pass (ELBO) in one CUDA kernel launch, for Hopper (sm_90).

What it computes: reference.py's Model for (input_dim, hidden_dim, latent_dim) = (784, 256, 32)
(other sizes raise ValueError at construction), fp32-accurate (no fast math; tensor-core layers split every operand into a large and a small
part, TF32 or FP16, and sum three products, fp32-level error):
  x (B, 784) float32 in [0, 1], any B >= 0
  h  = relu(x We^T + be)                    (B, 256)
  mu, logvar = h Wmu^T + bmu, h Wlv^T + blv (B, 32)
  z  = mu + exp(0.5 logvar) * eps           eps bit-identical to torch.randn_like(std)
  xr = sigmoid(W2 relu(W1 z + b1) + b2)     (B, 784), never leaves the chip
  recon = BCE(xr, x).sum(-1), kl = -0.5 sum(1 + logvar - mu^2 - e^logvar)
returns (elbo, recon, kl), each (B,) float32, the rows of one (3, B) allocation.

Build and check: importing this file compiles CUDA_SRC with load_inline (about a minute);
`make check` proves it against reference.py and times it, `make bench` times it in full,
`python -m pytest tests/test_solution.py` tests it (GPU tests skip without a GPU),
`python tools/kernel_dev.py` builds, tests and times every kernel on a GPU machine.

The kernels in CUDA_SRC, one launch per forward, picked on the host by B
(`forward(x, rows_per_tile)` forces one):
- vae_elbo_kernel<R> (R = 8, 9, 16; B up to 1279): a cluster of 8 blocks owns R rows, each
  block 1/8 of the encoder's and the last layer's output units (the encoder's weight loads spread over
  its passes); slices travel between the blocks' shared memory by st.async on mbarriers. R = 8 or 9
  while the batch fits one wave of clusters, else 16. In between, at R = 8, 9 block b owns rows b and
  b + 8: it gets their mu | logvar partials over each block's h slice (an all-to-all) and sums them, runs z
  and the decoder hidden layer of those rows whole and all-gathers their h2 rows (no z exchange), and
  writes their outputs (v21: a ninth warp draws those rows' noise at entry, beside the encoder, and exits; v22: at
  R = 9 every block runs the 9th row's middle); at R = 16
  every block runs 1/8 of those layers' units for all rows (h, z and h2 all-gathered, rank 0 writes).
  Its last layer (h2 W2^T, the block's 98 pixels) runs in fp32 FMAs at R = 8, 9 (W2's operands loaded
  from shared memory into registers while h2 is exchanged) and on the tensor cores at R = 16 (mma.sync
  TF32, 3xTF32 split: the helpers between the `tf32 helpers` markers); the
  other layers are FFMA; the BCE from the logits on the SFU (bce_term_sp), summed per row in the same pass.
- vae_elbo_kernel_tile<BM> (BM = 32, 64; by rows_per_tile only): one block owns BM rows end to end,
  the two big layers as register-tiled SGEMMs streamed through shared memory.
- vae_elbo_kernel_wg<C> (rows_per_tile 128, or 128 + C; B from 481 on the H200): persistent and cooperative,
  one block per SM, in clusters of C = 8, 6, 4, 3, 2 or 1 blocks (the largest whose clusters all run at
  once; in clusters of 8, two blocks share each quarter of layer 1's units, each half of its K; in clusters
  of 6, ranks 4 and 5 each take the last 20 K-chunks of two quarters). Where 64-row tiles all fit clusters
  of 8, else of 6, at once (B <= 960, <= 1088 on the H200; rows_per_tile 72, 70 force them) the tiles have 64
  rows and the two consumer warpgroups take alternate K-chunks of every pass over the same rows
  (vae_elbo_kernel_wg<C, true>, half_combine), which puts up to 15 tiles on 120 SMs or 17 on 102 where
  128-row tiles had at most 64.
  The host launches every cluster that runs at once. Every block first splits weight rows, scaled
  by a power of two into FP16's range, into hi + lo FP16 parts in a workspace (1.7 MB, per call),
  grid sync, then each cluster takes 128-row tiles,
  rank r its share of layer 1's hidden units and of the pixels, layer 2 over its own hidden units
  (the partial sums reduce-scattered by bulk copy and z all-gathered; in clusters of 3 by st.async), layer 3 whole. Per block: 4 producer warps stream
  16-column weight chunks (bulk copies) and x (cp.async) through 4 stages on mbarriers. The noise
  (16 KB of workspace per block) is drawn by the spare clusters (those past the last tile) during
  layer 1 where they are enough, else by the producers during layer 1, and in clusters of 4 and 8 the
  first tile's by every thread at entry, before the split; 2 consumer warpgroups run all four layers on
  warpgroup MMA (wgmma FP16: lo hi + hi lo + hi hi, each chunk's product added into fp32 sums: the
  tensor core's own accumulation is short of fp32), the BCE from the logits on the SFU (bce_term_sp).
  A row whose activations leave FP16's range (|v| >= 65504) is recomputed in plain fp32 by one warp
  (wg_exact_row), so no input that eager handles overflows.
- draw_noise_kernel: test entry, the noise the kernels draw.
Host side: ModelNew.forward hands the extension x and a ParamSet (its 10 Parameters' own tensors, made again
when a parameter or layer is replaced; vae_forward_held), instead of 12 tensor arguments, and the three outputs
are rows of one (3, B) tensor made without select (output_row): ~2-10 us less per call than v12. Error
messages format numbers with std::to_string (see shape_str: streaming an integer crashed on the H200).
Noise: drawn in-kernel with torch's Philox layout and the default CUDA generator's
reservation (CUDA-graph safe); with VAE_EPS_INPUT defined it is read from an input instead
(vae_forward_eps, CPP_DECL_EPS: the leaderboard exports of `python -m harness export`).
Dev switches (-D flags through VAE_EXTRA_CUDA_FLAGS; tools/kernel_dev.py VARIANTS, tools/ab_variants.py), none on
in a default build:
- VAE_PROFILE (phase clocks; VAE_PROFILE_CHUNKS adds the wg kernel's per-chunk and per-layer split), VAE_TIMELINE
  (every cluster-kernel block's %globaltimer per phase, tools/timeline.py);
- VAE_SKIP_ENC, VAE_SKIP_DEC, VAE_CK_STOP=0..3 (the cluster kernel without a layer, or ended after a phase: GPU
  time by prefix), VAE_CK_DEC2 (its last layer run twice, a timeline probe of instruction fetch);
- VAE_CK_PB, VAE_CK_H2B (R <= 9: each partials row, each pushed h2 row, to its peer by one smem -> peer bulk copy
  instead of 16-byte st.async; not yet measured);
- VAE_CK_K2 (R <= 9: the last layer's lane pairs split each warp's 32 k, half the h2 loads per FMA; not yet measured);
- VAE_CK_INIT_RACE (tests/test_sanitizer.py: the init race fixed in session 30, put back so the test sees it);
- VAE_CK_ONLY (only the cluster kernel compiled: half the build time, for ab_variants at B <= 480);
- VAE_WG_* (the wg kernel: costs by omission, NO_LOAD, NO_MMA, NO_NOISE, NO_PROMOTE, NO_EXACT, NO_WSPLIT,
  CHEAP_EPI, LIBM_BCE; shapes, PAIR, CHAINS1, CHAINS4, NS, KC1_LO, N4_C1, NO_HALF, PRODUCER_REGS, ...: see the
  #ifndef block before the wg kernel).
Switches measured and taken out live as patches in notes/ (notes/solution.md, "Dev switches taken out").
Versions and their measured times: notes/solution.md.
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
#include <type_traits>

namespace cg = cooperative_groups;

// ---------------------------------------------------------------------------
// Sizes and tiling (the only place they are defined)
// ---------------------------------------------------------------------------
constexpr int D = 784;                    // input / output features
constexpr int H = 256;                    // hidden units (encoder and decoder)
constexpr int L = 32;                     // latent units
constexpr int CLUSTER = 8;                // cluster kernel: blocks per cluster, each owns 1/8 of every layer
constexpr int THREADS = 256;              // 8 warps per block
constexpr int WARPS = THREADS / 32;
constexpr int H_SLICE = H / CLUSTER;      // 32 hidden units per block
constexpr int L_SLICE = L / CLUSTER;      // 4 latent units per block (mu and logvar each)
constexpr int D_SLICE = D / CLUSTER;      // 98 output pixels per block
constexpr int ENC_U = H_SLICE / WARPS;    // 4 hidden units per warp in the encoder
constexpr int MULV_U = 2 * L_SLICE;       // 8 mu | logvar units per block, one per warp
constexpr int RC = 8;                     // rows per chunk: dot products run on 8 rows, then the R % 8 left
constexpr int HS = H + 4;                 // padded row of W2's slice and of h2 in smem: conflict-free MMA fragments
constexpr int MMA_M = 16;                 // last layer on the tensor cores: m16n8k8 tiles, rows >= R unused
constexpr int DEC_NT = (D_SLICE + 7) / 8; // 13 pixel tiles of 8 (98 pixels -> 104)
constexpr int DEC_KG = 4;                 // k-groups: warp w sums k-steps [8 (w % 4), +8) ...
constexpr int DEC_TPW = (DEC_NT + 1) / 2; // ... of tiles [7 (w / 4), +7), so 8 warps cover 13 tiles x 32 k-steps
constexpr int DEC_KSTEPS = H / 8 / DEC_KG;
constexpr int PART_LD = DEC_NT * 8;       // row of the partial-logit buffers
constexpr int NOISE_BLOCK = 256;          // torch's normal_ launch: block size ...
constexpr int NOISE_UNROLL = 4;           // ... and values per curand_normal4 call
static_assert(D % CLUSTER == 0 && H % CLUSTER == 0 && L % CLUSTER == 0, "layers split evenly over the cluster");
static_assert(D % 4 == 0 && H % 4 == 0 && L % 4 == 0, "rows are read as float4");
static_assert(ENC_U == 4 && H_SLICE % 4 == 0, "encoder: 4 units per warp, slices pushed as float4");
static_assert(MULV_U == WARPS, "mu/logvar layer: one output unit per warp");
static_assert(THREADS == H, "decoder hidden layer: one thread per unit, every block computes all of it");
static_assert(WARPS == 2 * DEC_KG && H % (8 * DEC_KG) == 0, "last layer: 4 k-groups x 2 halves of the tiles");
static_assert((HS * 4) % 16 == 0, "W2 rows land 16-byte aligned (one bulk copy per row)");
static_assert((D_SLICE * H * 4) % 16 == 0 && (D * 4) % 16 == 0, "bulk copies move multiples of 16 bytes");

// Shared memory of one cluster-kernel block, in floats. R = rows owned by the cluster.
template <int R>
struct Smem {
  static_assert(R >= RC && (R % RC == 0 || R % RC == 1), "R = 8 q (+ 1): chunks of 8 rows and one row left");
  static_assert(R <= MMA_M, "the last layer's rows fit one m16 tile");
  static constexpr int X = 0;                         // R x D   input tile (bulk copy)
  static constexpr int W2 = X + R * D + 32;           // this block's 98 rows of W2: R <= 9 98 x H (7 bulk copies),
                                                      // R = 16 104 x HS (a bulk copy per row); the x tile starts up
                                                      // to 31 floats past X (v23: at the source's offset in its line)
  static constexpr int HID = W2 + DEC_NT * 8 * HS;    // R x H   encoder hidden, every block's slice
  static constexpr int Z = HID + R * H;               // R x L   latent sample, every block's slice
  static constexpr int HID2 = Z + R * L;              // 16 x HS decoder hidden (computed whole here)
  static constexpr int MULV = HID2 + MMA_M * HS;      // R x MULV_U  this block's mu | logvar
  static constexpr int KL = MULV + R * MULV_U;        // R x L   KL terms (rank 0 gathers; R = 16)
  static constexpr int KLR = KL;                      // R <= 9, in KL: the owned rows' -KL/2 [2]
  static constexpr int PART = KL + R * L;             // DEC_KG x R x PART_LD  partial logits per k-group
  static constexpr int RECON = PART + DEC_KG * R * PART_LD;   // CLUSTER x R   recon partial sums (rank 0 gathers)
  static constexpr int B2 = RECON + CLUSTER * R;      // D_SLICE  this block's slice of b2
  static constexpr int BARS = (B2 + D_SLICE + 1) / 2 * 2;   // 6 mbarriers, 8-byte aligned
  static constexpr size_t BYTES = BARS * sizeof(float) + 6 * sizeof(uint64_t);
  static_assert(X % 4 == 0 && W2 % 4 == 0 && HID % 4 == 0 && Z % 4 == 0 && HID2 % 4 == 0, "float4 alignment");
  static_assert(BYTES <= 227 * 1024, "fits in one SM's shared memory");
  static_assert(R > 9 || KLR + 2 <= KL + R * L, "R <= 9: at most 2 owned rows' KL sums fit in KL");
};
enum Bar { BAR_X, BAR_W2, BAR_HID, BAR_Z, BAR_OUT, BAR_H2 };   // mbarriers, each completes once per forward
// R <= 9: block `rank` owns rows rank, rank + 8 (< R) in phases 2-3 and writes their outputs
template <int R>
__device__ __forceinline__ int owned_rows(int rank) { return (R - rank + CLUSTER - 1) / CLUSTER; }

// ---------------------------------------------------------------------------
// Helpers: bulk copy (TMA 1-D) with mbarrier completion, cluster barrier halves
// ---------------------------------------------------------------------------
// >>> mbarrier helpers (tools/tf32_mma.py reads this block for the probes)
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Thread 0 only: copy `bytes` (multiple of 16, 16-byte aligned) global -> own shared memory; the
// bytes count on `bar`, whose phase was armed with them by mbar_expect.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
  }
}
// Thread 0 only: this phase of `bar` completes when `bytes` have arrived (and this one arrival).
__device__ __forceinline__ void mbar_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_init_count(uint64_t* bar, int count) {   // mbar_init for `count` arrivals
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_u32(bar)) : "memory");
}
// Wait for a phase whose bytes other blocks of the cluster wrote (st.async): acquire at cluster scope.
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
  }
}
// The address of this block's smem location `p` in block `rank` of the cluster (shared::cluster window).
__device__ __forceinline__ uint32_t cluster_addr(const void* p, int rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_u32(p)), "r"(rank));
  return r;
}
// Remote stores that count their bytes on the destination's mbarrier (no cluster barrier needed).
__device__ __forceinline__ void st_async(uint32_t addr, float v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];"
               :: "r"(addr), "r"(__float_as_uint(v)), "r"(bar) : "memory");
}
__device__ __forceinline__ void st_async(uint32_t addr, float2 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];"
               :: "r"(addr), "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(bar) : "memory");
}
// One arrival on mbarrier `bar` of block `rank` of the cluster, ordered after this thread's (and, after a
// block barrier, its block's) earlier memory accesses.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, int rank) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(cluster_addr(bar, rank)) : "memory");
}
__device__ __forceinline__ void st_async(uint32_t addr, float4 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];"
               :: "r"(addr), "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(__float_as_uint(v.z)),
                  "r"(__float_as_uint(v.w)), "r"(bar) : "memory");
}
// Thread 0 only: copy `bytes` (multiple of 16, 16-byte aligned) of own shared memory to the cluster
// address `dst` (another block's smem, from cluster_addr); the bytes count on that block's mbarrier at
// cluster address `bar`. The writes to `src` before it need fence_proxy_async_smem and a barrier.
__device__ __forceinline__ void bulk_copy_peer(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "r"(smem_u32(src)), "r"(bytes), "r"(bar) : "memory");
}
// This thread's generic writes to shared memory, made visible to the async proxy (bulk copies).
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// <<< mbarrier helpers
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_arrive() {   // this thread's earlier accesses ordered before it
  asm volatile("barrier.cluster.arrive.aligned;" ::: "memory");
}
#if defined(VAE_PROFILE) || defined(VAE_TIMELINE)
__device__ __forceinline__ unsigned long long globaltimer_ns() {   // the GPU's clock in ns, the same on every SM
  unsigned long long v;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
  return v;
}
#endif
#if defined(VAE_TIMELINE)   // dev builds only: every cluster-kernel block's %globaltimer (ns) at its phase ends
#define PROF(i) do { if (tid == 0) prof[i] = (long long)globaltimer_ns(); } while (0)
#elif defined(VAE_PROFILE)   // dev builds only: per-phase SM clock of block 0 and the last block
#define PROF(i) do { if (tid == 0) prof[i] = clock64(); } while (0)
#else
#define PROF(i) do {} while (0)
#endif
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

// >>> tf32 helpers (tools/tf32_mma.py reads this block for the probes)
// v = big + small: three products per multiply-add (big*big + big*small + small*big, fp32 accumulation) give
// fp32-level error on the tensor cores. big = v rounded to TF32 (nearest, ties away) in 2 integer ops; small =
// v - big (exact) as it is, no second rounding: the tensor core takes a TF32 operand's top 19 bits, so small's
// low bits go by truncation (error <= 2^-10 |small| <= 2^-21 |v|, the order of the small*small term dropped
// anyway; measured error against float64 at B = 240 and 400: 1.09 and 1.08 x eager's, cvt.rna's split 1.12 and
// 1.10). cvt.rna.tf32.f32 is emulated on sm_90 (~9 instructions, twice a split): this split saves 0.9 us at
// B = 240 and 1.8 at 400 (v20). A NaN v leaves small NaN (v - big), so its products stay NaN; inf gives small =
// inf - inf = NaN, as cvt.rna's split did.
__device__ __forceinline__ void split(float v, uint32_t& big, uint32_t& small) {
  big = (__float_as_uint(v) + 0x1000u) & 0xffffe000u;
  small = __float_as_uint(v - __uint_as_float(big));
}
// c += a b, mma.sync m16n8k8 TF32 with fp32 accumulation. Fragments (g = lane / 4, t = lane % 4):
// A a0..a3 = (row g, col t), (g+8, t), (g, t+4), (g+8, t+4); B b0, b1 = (k t, n g), (k t+4, n g);
// C c0..c3 = (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
// Not volatile: a pure function of its operands, so the compiler may interleave independent MMAs.
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// warpgroup MMA ordering (sm_90a; no-ops elsewhere): fence before wgmma reads registers / smem,
// commit the issued wgmma as a group, wait until at most P groups are in flight.
__device__ __forceinline__ void wg_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int P> __device__ __forceinline__ void wg_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(P) : "memory");
#endif
}
// <<< tf32 helpers

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

// Warp dot products, K split over lanes: lane l holds float4 columns f = l + 32 it (it < FULL) of a warp's
// rows [unit0, unit0 + U) of a (. x K) matrix and, where K / 4 is not a multiple of 32, one of the TAIL
// columns left (K = 784: 6 passes of 128 and 16 single columns, not a 7th float4 pass on 4 lanes).
template <int U, int K>
struct WarpRows {
  static constexpr int FULL = K / 128, TAIL = K - 128 * FULL;
  static_assert(K % 4 == 0 && TAIL < 32, "the columns past the float4 passes fit one per lane");
  float4 w[FULL][U];
  float t[U];   // column 128 FULL + lane (0 for lanes >= TAIL)
};
// The encoder's We loads spread over its passes (v18; session 22's stall profile: the warps sat ~1 us in the
// lg throttle issuing all 28 LDG.128 a thread before the x wait, and the encoder's FFMAs then waited on We):
// passes 0 .. ENC_AHEAD-1 before the x wait, pass it + ENC_AHEAD at the top of pass it, by weak (not .nc)
// loads after a __syncwarp: ptxas hoisted .nc loads above the x wait and its barrier, but not these.
constexpr int ENC_AHEAD = 3;
__device__ __forceinline__ float4 ldg_in_order(const float* p) {
  float4 v;
  asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ float ldg_in_order1(const float* p) {
  float v;
  asm volatile("ld.global.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  return v;
}
// pass `it` of w for rows [unit0, unit0 + U) of W (. x K) (it == FULL: the tail columns); NC: read-only cache
// loads (__ldg, which ptxas may hoist), else in order (ldg_in_order)
template <bool NC, int U, int K>
__device__ __forceinline__ void load_pass(const float* __restrict__ W, int unit0, int lane, WarpRows<U, K>& w, int it) {
  using WR = WarpRows<U, K>;
  if (it < WR::FULL) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if constexpr (NC) w.w[it][u] = __ldg(reinterpret_cast<const float4*>(W + (size_t)(unit0 + u) * K) + lane + 32 * it);
      else w.w[it][u] = ldg_in_order(W + (size_t)(unit0 + u) * K + 4 * (lane + 32 * it));
    }
  } else if constexpr (NC) {
#pragma unroll
    for (int u = 0; u < U; ++u)
      w.t[u] = WR::TAIL > 0 && lane < WR::TAIL ? __ldg(W + (size_t)(unit0 + u) * K + 128 * WR::FULL + lane) : 0.f;
  } else {
#pragma unroll
    for (int u = 0; u < U; ++u)
      w.t[u] = ldg_in_order1(W + (size_t)(unit0 + u) * K + 128 * WR::FULL + min(lane, WR::TAIL - 1));
    if (lane >= WR::TAIL)
#pragma unroll
      for (int u = 0; u < U; ++u) w.t[u] = 0.f;
  }
}
// w for rows [unit0, unit0 + U) of W (. x K), every pass at once
template <int U, int K>
__device__ __forceinline__ void load_rows(const float* __restrict__ W, int unit0, int lane, WarpRows<U, K>& w) {
#pragma unroll
  for (int it = 0; it <= WarpRows<U, K>::FULL; ++it) load_pass<true>(W, unit0, lane, w, it);
}
// acc[u*R + r] += sum over this lane's columns of w[.][u] . act[r][.]  (act: R x K in smem); pass(it) runs at the
// top of pass it (the encoder's loads of a later pass; nothing by default)
struct NoPass { __device__ __forceinline__ void operator()(int) const {} };
template <int R, int U, int K, class Pass = NoPass>
__device__ __forceinline__ void dot_rows(const WarpRows<U, K>& w, const float* act, int lane, float (&acc)[U * R],
                                         Pass pass = {}) {
  using WR = WarpRows<U, K>;
#pragma unroll
  for (int it = 0; it < WR::FULL; ++it) {
    pass(it);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float4 a = reinterpret_cast<const float4*>(act + r * K)[lane + 32 * it];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float s = acc[u * R + r];
        s = fmaf(w.w[it][u].x, a.x, s);
        s = fmaf(w.w[it][u].y, a.y, s);
        s = fmaf(w.w[it][u].z, a.z, s);
        s = fmaf(w.w[it][u].w, a.w, s);
        acc[u * R + r] = s;
      }
    }
  }
  if constexpr (WR::TAIL > 0) {   // lanes >= TAIL read a valid column and add 0 times it
    const int k = 128 * WR::FULL + min(lane, WR::TAIL - 1);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float a = act[r * K + k];
#pragma unroll
      for (int u = 0; u < U; ++u) acc[u * R + r] = fmaf(w.t[u], a, acc[u * R + r]);
    }
  }
}

// ---------------------------------------------------------------------------
// Noise: the value torch.randn_like gives element i of a contiguous float32
// tensor. torch's normal_ kernel runs T threads; thread i % T inits Philox with
// subsequence i % T and the reserved offset, and element i comes from its
// (q/4)-th curand_normal4 call, component q % 4, where q = i / T.
// ---------------------------------------------------------------------------
// q = i / T, sub = i % T: in 32 bits where they fit (a 64-bit division is a long software loop)
__device__ __forceinline__ void noise_divmod(uint64_t i, uint64_t T, uint64_t& q, uint64_t& sub) {
  if (((i | T) >> 32) == 0) { q = (uint32_t)i / (uint32_t)T; sub = (uint32_t)i - (uint32_t)q * (uint32_t)T; }
  else { q = i / T; sub = i % T; }
}
// torch's offsets are multiples of 4 (it rounds every reservation up): then curand_init's state is the
// counter (offset / 4 in its low, sub in its high words) with no partial block, and the k-th
// curand_normal4 call is Box-Muller on Philox(counter + k), k = q / 4 (Philox_State_Incr adds k as a
// 128-bit number, as k single increments would). The same functions curand uses, without the blocks
// curand_init and curand4 compute and this value never reads, and one Box-Muller pair (selected before
// the call: two calls under a select are both computed). Two steps, so that a run of draws does all
// its Philox blocks (integer work, no branch: the chains interleave) before the Box-Muller steps (their
// sqrtf branches to a slow path for special inputs, which ends a scheduling region).
__device__ __forceinline__ uint2 philox_pair(uint64_t seed, uint64_t offset, uint64_t sub, uint64_t q) {
  curandStatePhilox4_32_10_t s;
  s.ctr = make_uint4(0, 0, 0, 0);
  Philox_State_Incr_hi(&s, sub);
  Philox_State_Incr(&s, offset / 4);
  Philox_State_Incr(&s, q / 4);
  const uint4 r = curand_Philox4x32_10(s.ctr, make_uint2((uint32_t)seed, (uint32_t)(seed >> 32)));
  return q % 4 < 2 ? make_uint2(r.x, r.y) : make_uint2(r.z, r.w);
}
__device__ __forceinline__ float box_muller_pick(uint2 pair, uint64_t q) {
  const float2 bm = _curand_box_muller(pair.x, pair.y);
  return (q & 1 ? bm.y : bm.x) * 1.0f + 0.0f;   // torch's `v * std + mean`: turns -0 into +0
}
__device__ __forceinline__ float philox_normal(uint64_t seed, uint64_t offset, uint64_t sub, uint64_t q) {
  return box_muller_pick(philox_pair(seed, offset, sub, q), q);
}
__device__ __forceinline__ float torch_normal_at(uint64_t seed, uint64_t offset, uint64_t i, uint64_t T) {
  uint64_t q, sub;
  noise_divmod(i, T, q, sub);
  if ((offset & 3) == 0) return philox_normal(seed, offset, sub, q);
  curandStatePhilox4_32_10_t s;   // any other offset: curand's calls as they are
  curand_init(seed, sub, offset, &s);
  float4 r = curand_normal4(&s);
  for (uint64_t k = 0; k < q / 4; ++k) r = curand_normal4(&s);
  const int c = static_cast<int>(q % 4);
  return (c == 0 ? r.x : c == 1 ? r.y : c == 2 ? r.z : r.w) * 1.0f + 0.0f;
}
// Elements i0 .. i0 + N - 1 at once (N <= T): one division, then N independent chains.
template <int N>
__device__ __forceinline__ void torch_normal_run(uint64_t seed, uint64_t offset, uint64_t i0, uint64_t T, float (&v)[N]) {
  if ((offset & 3) != 0) {
#pragma unroll
    for (int u = 0; u < N; ++u) v[u] = torch_normal_at(seed, offset, i0 + u, T);
    return;
  }
  uint64_t q, sub;
  noise_divmod(i0, T, q, sub);
  uint2 pair[N];
  uint64_t qu[N];
#pragma unroll
  for (int u = 0; u < N; ++u) {
    const bool wrap = sub + u >= T;   // the next round of torch's threads
    qu[u] = wrap ? q + 1 : q;
    pair[u] = philox_pair(seed, offset, wrap ? sub + u - T : sub + u, qu[u]);
  }
#pragma unroll
  for (int u = 0; u < N; ++u) v[u] = box_muller_pick(pair[u], qu[u]);
}

// Test entry: fills out[0..n) exactly as torch.randn_like would.
__global__ void draw_noise_kernel(float* __restrict__ out, int64_t n, at::PhiloxCudaState st, uint64_t T) {
  const auto seeds = at::cuda::philox::unpack(st);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = torch_normal_at(std::get<0>(seeds), std::get<1>(seeds), (uint64_t)i, T);
}

// Where the kernels get eps[i] (i = row * L + j). One compile-time switch: by default the noise
// is drawn in-kernel as above; with VAE_EPS_INPUT defined (the leaderboard exports, harness export)
// it is read from an input tensor (B, L) instead. Nothing else in the kernels changes.
#ifdef VAE_EPS_INPUT
struct Noise { const float* eps; };
struct NoiseDraw {
  const float* eps;
  __device__ __forceinline__ float operator()(uint64_t i) const { return __ldg(eps + i); }
  template <int N> __device__ __forceinline__ void run(uint64_t i0, float (&v)[N]) const {
#pragma unroll
    for (int u = 0; u < N; ++u) v[u] = __ldg(eps + i0 + u);
  }
};
__device__ __forceinline__ NoiseDraw noise_source(const Noise& n) { return {n.eps}; }
#else
struct Noise { at::PhiloxCudaState st; uint64_t threads; };
struct NoiseDraw {
  uint64_t seed, offset, threads;
  __device__ __forceinline__ float operator()(uint64_t i) const { return torch_normal_at(seed, offset, i, threads); }
  template <int N> __device__ __forceinline__ void run(uint64_t i0, float (&v)[N]) const {
    torch_normal_run(seed, offset, i0, threads, v);
  }
};
__device__ __forceinline__ NoiseDraw noise_source(const Noise& n) {
  const auto seeds = at::cuda::philox::unpack(n.st);
  return {std::get<0>(seeds), std::get<1>(seeds), n.threads};
}
#endif

// Latent unit j of a row, every operation rounded as eager's: z = mu + exp(logvar / 2) eps, and the
// KL sum's term 1 + logvar - mu^2 - exp(logvar).
__device__ __forceinline__ float reparam_z(float mu, float lv, float eps) {
  return __fadd_rn(mu, __fmul_rn(expf(__fmul_rn(0.5f, lv)), eps));
}
__device__ __forceinline__ float kl_term(float mu, float lv) {
  return __fsub_rn(__fsub_rn(__fadd_rn(1.f, lv), __fmul_rn(mu, mu)), expf(lv));
}
// A row's three outputs (the rows of out (3, B)) from its recon sum and its kl = -0.5 sum of kl_term.
__device__ __forceinline__ void store_row(float* __restrict__ out, int B, int row, float recon, float kl) {
  out[row] = -(recon + kl);
  out[(size_t)B + row] = recon;
  out[2 * (size_t)B + row] = kl;
}

// torch's binary_cross_entropy term from log p and log(1 - p): both clamped at -100 before use
__device__ __forceinline__ float bce_from_logs(float lp, float l1p, float xv) {
  lp = fmaxf(lp, -100.f);
  l1p = fmaxf(l1p, -100.f);
  return __fsub_rn(__fmul_rn(xv - 1.f, l1p), __fmul_rn(xv, lp));
}
// torch's binary_cross_entropy term for one pixel
__device__ __forceinline__ float bce_term(float logit, float xv) {
  const float p = 1.0f / (1.0f + expf(-logit));        // torch's sigmoid
  return bce_from_logs(logf(p), log1pf(-p), xv);
}

__device__ __forceinline__ float exp2f_approx(float v) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}
__device__ __forceinline__ float log2f_approx(float v) {
  float r;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}
// The same term from the logit without forming p: log p = -(max(-l, 0) + s), log(1 - p) =
// -(max(l, 0) + s), s = log1p(exp(-|l|)), on the SFU (exp2 / log2 approximations, u = 1 + e
// rounded and its rounding error e - (u - 1) added back, divided by u through 1.5 - u / 2: within 12%
// of 1 / u on [1, 2], on a correction below 2^-24, so two SFU operations a term, not three), no
// cancellation and no branch. Where torch's fp32
// p saturates it gives torch's values: p = 1 exactly when exp(-l) <= 2^-24 (log(1 - p) = -100),
// p = 0 when exp(-l) overflows (log p = -100). Between, it is closer to the exact term than
// torch's rounded p (tests: the error against float64).
__device__ __forceinline__ float bce_term_sp(float logit, float xv) {
  const float a = fabsf(logit);
  const float e = exp2f_approx(-a * 1.4426950408889634f);           // exp(-|l|) in (0, 1]
  const float u = 1.0f + e;
  const float s = __fmaf_rn(log2f_approx(u), 0.6931471805599453f, (e - (u - 1.0f)) * __fmaf_rn(-0.5f, u, 1.5f));
  float lp = -(fmaxf(-logit, 0.f) + s), l1p = -(fmaxf(logit, 0.f) + s);
  if (logit >= 16.6355324f) l1p = -100.f;                             // torch: p == 1
  if (logit <= -88.7228394f) lp = -100.f;                             // torch: exp overflows, p == 0
  return bce_from_logs(lp, l1p, xv);
}

// The cluster kernel's block barrier. A ninth warp draws the block's noise at entry beside the encoder (v21 at R <= 9,
// v22 at R = 16 too) and exits after handing it over on named barrier 3 (bar.arrive there, bar.sync by the 256 main
// threads where they need it), so the main warps' block barriers are named barrier 1 over their 256 threads. 9 warps
// put 3 on one scheduler: at most 168 registers a thread.
constexpr int CK_THREADS = THREADS + 32;   // launch shape: 8 main warps and the noise warp
__device__ __forceinline__ void ck_sync() { asm volatile("bar.sync 1, %0;" :: "n"(THREADS) : "memory"); }
// The noise's hand-over on named barrier 3: the noise warp arrives once it has written eps, the main threads wait
// there before they read it (both with the barrier's memory ordering).
__device__ __forceinline__ void noise_handed_over() { asm volatile("bar.arrive 3, %0;" :: "n"(THREADS + 32) : "memory"); }
__device__ __forceinline__ void wait_noise() { asm volatile("bar.sync 3, %0;" :: "n"(THREADS + 32) : "memory"); }
// At R = 9 (v22) the 9th row's middle (its mu | logvar partials summed, z, KL, the decoder hidden layer) runs in every
// block instead of in rank 0 alone: its partials go to every block, its h2 row is computed where it is used and not
// exchanged, and rank 0 (which still writes its outputs) no longer runs the middle of two rows on every block's path.
template <int R> constexpr bool row8_all() { return R == 9; }

// Last layer of the cluster kernel on the tensor cores, one warp: partial logits of rows [0, R) x
// pixel tiles [nt0, nt0 + NT) of this block's slice (m16n8 tiles; rows >= R and pixels >= 98 are
// computed and dropped) = h2 . W2 slice^T over k-steps [8 kg, 8 kg + 8), in 3xTF32; written to
// PART[kg] (rows < R). Each product runs over all NT tiles before the next, so NT independent
// accumulator chains are in flight (one dependent chain per warp leaves the tensor cores idle).
template <int R, int NT>
__device__ __forceinline__ void dec_logits_mma(float* smem, int kg, int nt0, int lane) {
  using S = Smem<R>;
  const int g = lane >> 2, t = lane & 3;
  float acc[NT][4];
#pragma unroll
  for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
#ifndef VAE_SKIP_DEC
#pragma unroll 2
  for (int s = 0; s < DEC_KSTEPS; ++s) {
    const int k = (kg * DEC_KSTEPS + s) * 8 + t;
    const float* a = smem + S::HID2 + g * HS + k;
    uint32_t ab[4] = {0u, 0u, 0u, 0u}, as[4] = {0u, 0u, 0u, 0u};
    split(a[0], ab[0], as[0]);
    split(a[4], ab[2], as[2]);
    if constexpr (R > 8) {
      split(a[8 * HS], ab[1], as[1]);
      split(a[8 * HS + 4], ab[3], as[3]);
    }
    uint32_t bb[NT][2], bs[NT][2];
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      const float* b = smem + S::W2 + ((nt0 + i) * 8 + g) * HS + k;
      split(b[0], bb[i][0], bs[i][0]);
      split(b[4], bb[i][1], bs[i][1]);
    }
#pragma unroll
    for (int i = 0; i < NT; ++i) mma(acc[i], as, bb[i][0], bb[i][1]);   // the small products first
#pragma unroll
    for (int i = 0; i < NT; ++i) mma(acc[i], ab, bs[i][0], bs[i][1]);
#pragma unroll
    for (int i = 0; i < NT; ++i) mma(acc[i], ab, bb[i][0], bb[i][1]);
  }
#endif
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int r = g + 8 * (c / 2);
      if (r < R) smem[S::PART + (kg * R + r) * PART_LD + (nt0 + i) * 8 + 2 * t + (c % 2)] = acc[i][c];
    }
}

// Last layer of the cluster kernel at R <= 9, in plain fp32 FMAs (faster there than dec_logits_mma, whose
// m16 tiles would be half empty). Warp w takes k in [32 w, +32), lane l pixels l + 32 j (j < 3) of all R
// rows, with its W2 operands in registers (W2Regs, loaded from shared memory while h2 is exchanged), so the k
// loop reads only h2: per 4 k one h2 load per row and 12 FMAs a row. W2's slice is unpadded in smem (rows H
// apart, 1 KB: same banks), so lane l's float4 i holds k = 4 ((i + l % 8) % 8): the 8 lanes of a quarter-warp
// read 8 different 16-byte columns, conflict-free, both W2 into registers and h2 in the loop (v16 read W2
// from smem inside the loop: 0.2-0.5 us slower at B = 1 and 128). The 2 pixels left (96, 97) by lane parity, 2 k a
// lane, shuffle-summed over the 16 lanes of each parity (a 4th slot of 32 lanes for 2 pixels measured 0.2-0.5
// us slower). Warps 4-7 store their partial logits to PART[w - 4], warps 0-3 add theirs (fixed order), so
// PART holds DEC_KG = 4 k-group sums as the tensor-core version's.
// (Session 29: h2 as float2 loads, VAE_CK_L64 in notes/ck-s29.patch, ran flat: ncu's shared-load wavefronts the
// same, 752 K a forward, at twice the load instructions.)
// dev (VAE_CK_K2): DEC_G = 2, the two lanes of a pair split the warp's 32 k, so each h2 load feeds twice the FMAs.
// Lane l = 2 q + hf: float4 chunks c(m) = 2 ((m + q) % 4) + hf (m < 4) of the warp's 8, which keeps both W2's loads
// into registers and the loop's h2 loads conflict-free (a quarter-warp's 8 lanes read the 8 chunks); slot j holds
// pixel q + 16 ((j + 3 hf) % 6), so that both lanes keep slots 0-2 (pixels q + 16 (j + 3 hf)) and send slots 3-5,
// which are the partner's 0-2: the pair's sums meet by one shuffle each, no selects. DEC_G = 1 is the default.
#ifdef VAE_CK_K2
constexpr int DEC_G = 2;
#else
constexpr int DEC_G = 1;
#endif
constexpr int DEC_J = DEC_G * (D_SLICE / 32), DEC_M = H / WARPS / 4 / DEC_G;   // pixel slots, float4 chunks a lane
struct W2Regs {
  float4 w[DEC_J][DEC_M];   // [slot j][m]: pixel dec_pixel(j, l), k = 32 w + dec_k(m, l) + [0, 4)
  float2 x;                 // pixel 96 + l % 2, k = 32 w + 2 (l / 2) + {0, 1}
};
// The offset in the warp's 32 k of lane l's chunk m: 4 ((m + l % 8) % 8) at DEC_G = 1, 4 c(m) at 2.
__device__ __forceinline__ int dec_k(int m, int lane) {
  if constexpr (DEC_G == 1) return (4 * m + 4 * (lane & 7)) & (H / WARPS - 1);
  else return 4 * (2 * ((m + (lane >> 1)) & 3) + (lane & 1));
}
// The pixel (row of W2's slice) of lane l's slot j: l + 32 j at DEC_G = 1, l / 2 + 16 ((j + 3 (l % 2)) % 6) at 2.
__device__ __forceinline__ int dec_pixel(int j, int lane) {
  if constexpr (DEC_G == 1) return lane + 32 * j;
  else return (lane >> 1) + 16 * ((j + (D_SLICE / 32) * (lane & 1)) % DEC_J);
}
template <int R>
__device__ __forceinline__ void load_w2_regs(const float* smem, int warp, int lane, W2Regs& w) {
  constexpr int NS = D_SLICE / 32, KW = H / WARPS;
  const float* w2 = smem + Smem<R>::W2 + warp * KW;
  if constexpr (DEC_G == 1) {   // the default's own form: the general one below orders the address math
                                // differently, and this keeps the measured default's code exactly
    const int rot = 4 * (lane & 7);
#pragma unroll
    for (int j = 0; j < NS; ++j)
#pragma unroll
      for (int i = 0; i < KW / 4; ++i)
        w.w[j][i] = *reinterpret_cast<const float4*>(w2 + (lane + 32 * j) * H + ((4 * i + rot) & (KW - 1)));
  } else {
#pragma unroll
    for (int j = 0; j < DEC_J; ++j)
#pragma unroll
      for (int m = 0; m < DEC_M; ++m)
        w.w[j][m] = *reinterpret_cast<const float4*>(w2 + dec_pixel(j, lane) * H + dec_k(m, lane));
  }
  w.x = *reinterpret_cast<const float2*>(w2 + (32 * NS + (lane & 1)) * H + 2 * (lane >> 1));
}
template <int R>
__device__ __forceinline__ void dec_logits_ffma(float* smem, int warp, int lane, const W2Regs& wr) {
  using S = Smem<R>;
  constexpr int NS = D_SLICE / 32, KW = H / WARPS, PX = D_SLICE - 32 * NS;
  static_assert(PX == 2 && KW == 32, "the pixels left: one per lane parity, 2 k a lane");
  static_assert(DEC_J == DEC_G * NS && DEC_G * DEC_M * 4 == KW, "DEC_G lanes split the warp's k, DEC_G x 3 slots");
  float acc[DEC_J][R];   // slots j < NS end with pixels px0 + px_step j (below), after the pair's exchange at K2
#pragma unroll
  for (int j = 0; j < DEC_J; ++j)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[j][r] = 0.f;
  const float* h2 = smem + S::HID2 + warp * KW;
#ifndef VAE_SKIP_DEC
#pragma unroll
  for (int m = 0; m < DEC_M; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float4 h = *reinterpret_cast<const float4*>(h2 + r * HS + dec_k(m, lane));
#pragma unroll
      for (int j = 0; j < DEC_J; ++j) {
        float a = acc[j][r];
        a = fmaf(wr.w[j][m].x, h.x, a);
        a = fmaf(wr.w[j][m].y, h.y, a);
        a = fmaf(wr.w[j][m].z, h.z, a);
        a = fmaf(wr.w[j][m].w, h.w, a);
        acc[j][r] = a;
      }
    }
  }
#endif
  if constexpr (DEC_G == 2) {   // K2, the pair's reduce-scatter: keep slots 0-2, add the partner's 3-5 (same pixels)
#pragma unroll
    for (int j = 0; j < NS; ++j)
#pragma unroll
      for (int r = 0; r < R; ++r) acc[j][r] += __shfl_xor_sync(0xffffffffu, acc[j + NS][r], 1);
  }
  float accx[R];   // pixel 32 NS + lane % 2 over this lane's 2 k; then summed over the 16 lanes of its parity
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float2 h = *reinterpret_cast<const float2*>(h2 + r * HS + 2 * (lane >> 1));
    accx[r] = fmaf(wr.x.y, h.y, wr.x.x * h.x);
  }
#pragma unroll
  for (int o = 2; o < 32; o <<= 1)
#pragma unroll
    for (int r = 0; r < R; ++r) accx[r] += __shfl_xor_sync(0xffffffffu, accx[r], o);
  float* part = smem + S::PART + (warp % DEC_KG) * R * PART_LD;
  const int px0 = dec_pixel(0, lane), px_step = 32 / DEC_G;   // acc[j], j < NS: pixel px0 + px_step j
  if (warp >= DEC_KG) {
#pragma unroll
    for (int j = 0; j < NS; ++j)
      if (px0 + px_step * j < D_SLICE)
#pragma unroll
        for (int r = 0; r < R; ++r) part[r * PART_LD + px0 + px_step * j] = acc[j][r];
    if (lane < PX)
#pragma unroll
      for (int r = 0; r < R; ++r) part[r * PART_LD + 32 * NS + lane] = accx[r];
  }
  ck_sync();
  if (warp < DEC_KG) {
#pragma unroll
    for (int j = 0; j < NS; ++j)
      if (px0 + px_step * j < D_SLICE)
#pragma unroll
        for (int r = 0; r < R; ++r) part[r * PART_LD + px0 + px_step * j] += acc[j][r];
    if (lane < PX)
#pragma unroll
      for (int r = 0; r < R; ++r) part[r * PART_LD + 32 * NS + lane] += accx[r];
  }
}
// Phase 5's term of row r, pixel p of this block's slice: the logit (the partial-logit groups summed in fixed
// order, + b2) and its BCE against x.
template <int R>
__device__ __forceinline__ float bce_at(const float* smem, const float* xs, int rank, int r, int p) {
  using S = Smem<R>;
  const float* part = smem + S::PART + r * PART_LD + p;
  float logit = ((part[0] + part[R * PART_LD]) + part[2 * R * PART_LD]) + part[3 * R * PART_LD];
  return bce_term_sp(logit + smem[S::B2 + p], xs[r * D + rank * D_SLICE + p]);
}

// The encoder's per-lane sums acc[u RN + r] of units [unit0, unit0+4) x rows [r0, r0+RN) summed over the warp,
// h = relu(. + be) -> own smem HID.
template <int R, int RN>
__device__ __forceinline__ void enc_store(float* smem, float (&acc)[ENC_U * RN], const float* __restrict__ be,
                                          int unit0, int r0, int lane) {
  using S = Smem<R>;
  constexpr int N = ENC_U * RN;
  warp_reduce_scatter<N>(acc, lane);
#pragma unroll
  for (int t = 0; t < (N >= 32 ? N / 32 : 1); ++t) {
    const int e = scatter_entry<N>(lane, t), u = e / RN, r = r0 + e % RN;
    if (scatter_writer<N>(lane)) smem[S::HID + r * H + unit0 + u] = fmaxf(acc[t] + __ldg(be + unit0 + u), 0.f);
  }
}
// Encoder, one warp: units [unit0, unit0+4) x rows [r0, r0+RN), lanes split K=784 with this warp's
// We rows in registers; h = relu(. + be) -> own smem HID.
template <int R, int RN, class Pass = NoPass>
__device__ __forceinline__ void enc_rows(float* smem, const float* xs, const WarpRows<ENC_U, D>& w,
                                         const float* __restrict__ be, int unit0, int r0, int lane, Pass pass = {}) {
  using S = Smem<R>;
  constexpr int N = ENC_U * RN;
  float acc[N];
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = 0.f;
#ifndef VAE_SKIP_ENC
  dot_rows<RN, ENC_U, D>(w, xs + r0 * D, lane, acc, pass);
#endif
  enc_store<R, RN>(smem, acc, be, unit0, r0, lane);
}


// This block's slice of an activation (R rows, LD floats apart; units [32 rank, +32)) into the same place
// in the other 7 blocks' shared memory, completing `bar` there: float4 e -> destination rank + 1 + e / (8R),
// row, 4 units.
template <int R, int LD>
__device__ __forceinline__ void push_slice(float* act, uint64_t* bar, int rank, int tid) {
  constexpr int PER = R * H_SLICE / 4;
  for (int e = tid; e < (CLUSTER - 1) * PER; e += THREADS) {
    const int dst = (rank + 1 + e / PER) % CLUSTER, q = e % PER;
    float* p = act + (q / (H_SLICE / 4)) * LD + rank * H_SLICE + 4 * (q % (H_SLICE / 4));
    st_async(cluster_addr(p, dst), *reinterpret_cast<const float4*>(p), cluster_addr(bar, dst));
  }
}

// mu | logvar, one warp: unit `warp` of this block's MULV_U x rows [r0, r0+RN), lanes split K=256.
template <int R, int RN>
__device__ __forceinline__ void mulv_rows(float* smem, const WarpRows<1, H>& w, float bias,
                                          int r0, int warp, int lane) {
  using S = Smem<R>;
  float acc[RN];
#pragma unroll
  for (int i = 0; i < RN; ++i) acc[i] = 0.f;
  dot_rows<RN, 1, H>(w, smem + S::HID + r0 * H, lane, acc);
  warp_reduce_scatter<RN>(acc, lane);
  if (scatter_writer<RN>(lane)) smem[S::MULV + (r0 + scatter_entry<RN>(lane, 0)) * MULV_U + warp] = acc[0] + bias;
}

// ---------------------------------------------------------------------------
// The cluster kernel (small B). Cluster c owns rows [c*R, c*R+R); block `rank` of it owns hidden
// units [32 rank, +32), latent units [4 rank, +4), pixels [98 rank, +98). R = 8, 9 or 16: on the
// H200 15 clusters of 8 fit at once, so B = 128 runs in one wave at R = 9 and in two at R = 8.
// Blocks exchange slices with st.async stores into each other's smem, each counted on the
// receiver's mbarrier, so a block waits only for the data it needs: no cluster barrier after the
// one at the start (which makes every block's mbarriers valid before anyone writes to them).
// Dot products run on chunks of 8 rows, then the R % 8 rows left.
//   0  mbarriers; bulk copy of the x tile; We's first ENC_AHEAD passes to registers; warp 8 (the noise warp) draws
//      the noise into Z (R <= 9: the rows whose middle runs here) or PART (R = 16: the block's 4R values), hands it
//      over on named barrier 3 and exits (v21, v22; until then other threads drew it, ~1.2 us a draw, on the path)
//   1  encoder: warp w -> units 32 rank + 4w + [0,4), lanes split K=784 (We's later passes loaded during the
//      first chunk); h slice -> own HID
//   R <= 9 (row owners: block b owns rows b, b + 8):
//   2  mu | logvar partials of every row over the block's h slice (its 8 KB of Wmu | Wlv and W1 in registers,
//      then W2's rows copied into smem), each row's to its owner (all-to-all); the owned rows' mu | logvar
//      (the 8 partials summed in rank order), z, KL sum
//   3  decoder hidden of the owned rows, all 256 units (W1 in registers), h2 rows pushed to the other 7 blocks
//   R = 16 (unit slices):
//   2  h slice pushed to the other 7 blocks; W2's rows copied into smem (the noise: the ninth warp's, v22);
//      mu/logvar: warp w -> one unit (w < 4: mu), lanes split K=256;
//      threads t < 4R: z, KL term; z pushed to every block, KL terms to rank 0
//   3  decoder hidden, the block's 32 units for the R rows (lane -> unit), pushed to the other 7 blocks
//   4  decoder output logits: R <= 9 in fp32 FMAs (dec_logits_ffma: warp w -> k in [32 w, +32)), R = 16
//      on the tensor cores (3xTF32 mma.sync: warp w -> k-group w % 4 of tiles [7 (w / 4), +7));
//      partial logits per k-group to smem (W2's rows unpadded in smem at R <= 9, into registers with k
//      rotated per lane while h2 arrives; padded rows at R = 16)
//   5  warp w -> rows w, w + 8: logits summed, BCE terms (bce_term_sp) and the row's sum in one pass, pushed to
//      the row's gatherer (R <= 9 its owner, else rank 0), which sums in fixed order and writes the outputs.
// ---------------------------------------------------------------------------
template <int R>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(CK_THREADS, 1)
vae_elbo_kernel(const float* __restrict__ x,
                const float* __restrict__ We, const float* __restrict__ be,
                const float* __restrict__ Wmu, const float* __restrict__ bmu,
                const float* __restrict__ Wlv, const float* __restrict__ blv,
                const float* __restrict__ W1, const float* __restrict__ b1,
                const float* __restrict__ W2, const float* __restrict__ b2,
                float* __restrict__ out, int B, Noise noise) {
  using S = Smem<R>;
  constexpr int Q = R / RC, REM = R % RC;   // full chunks of 8 rows, rows left
  extern __shared__ __align__(16) float smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int row0 = (int)(blockIdx.x / CLUSTER) * R;
  const int rows = min(R, B - row0);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + S::BARS);
  const float* const xsrc = x + (size_t)row0 * D;   // the cluster's x tile in global memory
  // the x tile (R x D), placed so that its smem address is the source's mod 128 (v23: at R = 9 the odd clusters'
  // tiles start 64 bytes into a line, and a bulk copy whose ends sit at different line offsets landed ~0.6 us late)
  float* const xs = smem + S::X + (((uint32_t)(uintptr_t)xsrc - smem_u32(smem + S::X)) & 127u) / 4;
#if defined(VAE_PROFILE) || defined(VAE_TIMELINE)
  long long prof[15] = {};   // [13], [14] (the partials): R <= 9's stamps, 0 at R = 16 (zeroed here: with two
                             // stamps set at R > 9 instead, ptxas spilled 16 bytes at R = 8, 9 in VAE_TIMELINE builds)
#endif
#ifdef VAE_TIMELINE
  __shared__ long long tl_warp[WARPS + 1];   // each main warp's encoder end, the noise warp's hand-over ("tw" line)
#define TL_WARP(i) do { if (lane == 0) tl_warp[i] = (long long)globaltimer_ns(); } while (0)
#else
#define TL_WARP(i) do {} while (0)
#endif
  PROF(0);
#if defined(VAE_CK_STOP) && VAE_CK_STOP == 0   // dev (wrong results): the launch alone
  if (B > 0) return;
#endif

  // ---- phase 0: mbarriers (each expects its bytes once), x tile (W2 rows: after phase 1)
  if (tid == 0) {
#pragma unroll
    for (int i = 0; i < 6; ++i) mbar_init(&bars[i]);
    mbar_expect(&bars[BAR_X], (uint32_t)(rows * D * sizeof(float)));
    mbar_expect(&bars[BAR_W2], (uint32_t)(D_SLICE * H * sizeof(float)));   // W2's slice, by bulk copies below
    if constexpr (R <= 9) {   // row owners: mu | logvar partials of own rows in, h2 rows of the others in, recon partials in
      const uint32_t own = (uint32_t)owned_rows<R>(rank);
      if constexpr (row8_all<R>()) {   // rows rank and 8 summed here (row 8's h2 computed, not received)
        mbar_expect(&bars[BAR_HID], (uint32_t)((CLUSTER - 1) * 2 * 2 * L * sizeof(float)));
        mbar_expect(&bars[BAR_OUT], (uint32_t)((CLUSTER - 1) * own * sizeof(float)));
        mbar_expect(&bars[BAR_H2], (uint32_t)((CLUSTER - 1) * H * sizeof(float)));
      } else {
      mbar_expect(&bars[BAR_HID], (uint32_t)((CLUSTER - 1) * own * 2 * L * sizeof(float)));   // mu | logvar partials
      mbar_expect(&bars[BAR_OUT], (uint32_t)((CLUSTER - 1) * own * sizeof(float)));
      mbar_expect(&bars[BAR_H2], (uint32_t)((R - own) * H * sizeof(float)));
      }
    } else {                  // unit slices: every peer's h, z and h2 slices in; rank 0 the recon and KL partials
      mbar_expect(&bars[BAR_HID], (uint32_t)((CLUSTER - 1) * R * H_SLICE * sizeof(float)));
      mbar_expect(&bars[BAR_Z], (uint32_t)((CLUSTER - 1) * R * L_SLICE * sizeof(float)));
      mbar_expect(&bars[BAR_OUT], rank == 0 ? (uint32_t)((CLUSTER - 1) * R * (1 + L_SLICE) * sizeof(float)) : 0u);
      mbar_expect(&bars[BAR_H2], (uint32_t)((CLUSTER - 1) * R * H_SLICE * sizeof(float)));
    }
    mbar_fence_init();
    // split where the source reaches a 128-byte line: a head (< 128 bytes, less than one row) and a line-aligned body
    const uint32_t head = (uint32_t)(-(uintptr_t)xsrc) & 127u;
    if (head > 0) bulk_copy(xs, xsrc, head, &bars[BAR_X]);
    bulk_copy(xs + head / 4, xsrc + head / 4, (uint32_t)(rows * D * sizeof(float)) - head, &bars[BAR_X]);
  }
  cluster_arrive_relaxed();   // "my mbarriers are ready": nobody writes into a block before this
  if (warp == WARPS) {   // the noise warp: it draws, hands the values over and exits
    if constexpr (R <= 9) {   // lane j: latent j of each owned row, into Z (z overwrites it)
      const int own = row8_all<R>() ? 2 : owned_rows<R>(rank);   // row 8 in every block at R = 9
      float e[2] = {0.f, 0.f};
      if constexpr (row8_all<R>()) {
#pragma unroll
        for (int i = 0; i < 2; ++i)
          if ((i ? CLUSTER : rank) < rows) e[i] = noise_source(noise)((uint64_t)(row0 + (i ? CLUSTER : rank)) * L + lane);
      } else {
#pragma unroll
        for (int i = 0; i < 2; ++i)
          if (i < own && rank + CLUSTER * i < rows) e[i] = noise_source(noise)((uint64_t)(row0 + rank + CLUSTER * i) * L + lane);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
        if (i < own) smem[S::Z + i * L + lane] = e[i];
    } else {   // R = 16 (v22): lane l, entries l and l + 32 of the block's R x 4 (row, latent), into PART
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int t = lane + 32 * i;
        smem[S::PART + t] = t < R * L_SLICE && t / L_SLICE < rows
            ? noise_source(noise)((uint64_t)(row0 + t / L_SLICE) * L + rank * L_SLICE + t % L_SLICE) : 0.f;
      }
    }
    TL_WARP(WARPS);
    noise_handed_over();
    cluster_wait();
    return;
  }
  for (int i = rows * D + tid; i < R * D; i += THREADS) xs[i] = 0.f;   // rows past B

  // ---- phase 1: encoder, h = relu(x We^T + be)
  const int unit0 = rank * H_SLICE + warp * ENC_U;
  {
    WarpRows<ENC_U, D> w;
#ifndef VAE_SKIP_ENC
#pragma unroll
    for (int it = 0; it < ENC_AHEAD; ++it) load_pass<false>(We, unit0, lane, w, it);   // the rest inside the first chunk
#endif
#if defined(VAE_CK_INIT_RACE)   // dev (tests/test_sanitizer.py): the order before session 30, the wait first
    mbar_wait(&bars[BAR_X], 0);
    ck_sync();
#else
    ck_sync();   // thread 0's mbarrier inits visible before anyone polls BAR_X (session 30: synccheck's "missing init"
                 // when this barrier followed the wait), and the zero-filled rows past B
    mbar_wait(&bars[BAR_X], 0);
#endif
    PROF(1);
#if defined(VAE_CK_STOP) && VAE_CK_STOP == 1   // dev (wrong results): up to the x tile
    if (B > 0) return;
#endif
    auto later_passes = [&](int it) {
      if (it + ENC_AHEAD <= WarpRows<ENC_U, D>::FULL) {
        __syncwarp();   // a memory barrier for the warp: ptxas keeps the weak loads below after pass it - 1
        load_pass<false>(We, unit0, lane, w, it + ENC_AHEAD);
      }
    };
    enc_rows<R, RC>(smem, xs, w, be, unit0, 0, lane, later_passes);
#pragma unroll 1
    for (int q = 1; q < Q; ++q) enc_rows<R, RC>(smem, xs, w, be, unit0, q * RC, lane);
    if constexpr (REM > 0) enc_rows<R, REM>(smem, xs, w, be, unit0, Q * RC, lane);
  }
  TL_WARP(warp);
#if defined(VAE_CK_STOP) && VAE_CK_STOP == 2   // dev (wrong results): up to the encoder (its h read back)
  ck_sync();
  if (tid < rows) {
    float hs = 0.f;
    for (int u = 0; u < H_SLICE; ++u) hs += smem[S::HID + tid * H + rank * H_SLICE + u];
    out[row0 + tid] = hs;
  }
  if (B > 0) return;
#endif
  PROF(11);   // the encoder's arithmetic done (PROF(2) follows the copies' issue)
  W2Regs w2r;   // R <= 9: the last layer's W2 operands, from smem into registers while h2 arrives
  if constexpr (R <= 9) {
    // ---- phases 2-3 by row owners (v18, v19). Block b owns rows b, b + 8 (< R). Every block computes mu | logvar
    // partials over its own 32 h units for all R rows (8 KB of Wmu | Wlv a block); row r's 64 partials go to its
    // owner r % 8 as 16 float4 (an all-to-all), which sums the 8 in rank order (v19; v18 sent the owner the rows'
    // h slices and held all of Wmu | Wlv, 64 KB a block). The owner then computes z, the KL sum and the decoder
    // hidden layer of its rows whole (W1 in registers, loaded coalesced after the encoder) and all-gathers its h2
    // rows; no z exchange. Recon partials go to each row's owner, which writes the outputs.
    // Thread t: output j = t / 4 (< 32 mu, else logvar), k = 8 (t % 4) .. + 8 of the slice. Partials staged in
    // PART [R][2L] at MVP_STAGE, received in PART [CLUSTER][2][2L] at 0 (PART is free until phase 4).
    const int own = row8_all<R>() ? 2 : owned_rows<R>(rank);   // rows whose middle runs here (R = 9: rank and 8)
    constexpr int MVP_STAGE = CLUSTER * 2 * 2 * L;
    static_assert(MVP_STAGE + R * 2 * L <= DEC_KG * R * PART_LD, "the partials fit in PART");
    const int jp = tid >> 2, gp = tid & 3;
    float4 wp[2];
    {
      const float* M = (jp < L ? Wmu + (size_t)jp * H : Wlv + (size_t)(jp - L) * H) + rank * H_SLICE + 8 * gp;
      wp[0] = __ldg(reinterpret_cast<const float4*>(M));
      wp[1] = __ldg(reinterpret_cast<const float4*>(M) + 1);
    }
    float4 w1r[8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
      w1r[i] = __ldg(reinterpret_cast<const float4*>(W1 + (size_t)(32 * warp + lane / 8 + 4 * i) * L) + lane % 8);
    // W2's slice, 98 rows unpadded (dec_logits_ffma reads them rotated), 7 copies of 14 rows (98 one-row copies
    // kept the issuing warps ~1 us before the partials), issued after the loads above, which are needed first
    constexpr int W2_ROWS = 14;
    static_assert(D_SLICE % W2_ROWS == 0 && D_SLICE / W2_ROWS <= 32, "one copy per lane of warp 0");
    if (warp == 0 && lane < D_SLICE / W2_ROWS)
      bulk_copy(smem + S::W2 + lane * W2_ROWS * H, W2 + ((size_t)rank * D_SLICE + lane * W2_ROWS) * H,
                (uint32_t)(W2_ROWS * H * sizeof(float)), &bars[BAR_W2]);
    const int unit3 = 32 * warp + lane / 8 + 4 * (lane % 8);   // the unit this lane's reduce-scatter ends with
    const float bias3 = __ldg(b1 + unit3);
    const float b2v = tid < D_SLICE ? __ldg(b2 + rank * D_SLICE + tid) : 0.f;   // stored once it has landed
    const int zi = tid / L, zj = tid % L, zr = rank + CLUSTER * zi;   // z, KL: thread -> (owned row zi, latent zj)
    float eps = 0.f, bm = 0.f, bl = 0.f;
    if (zi < own) {
      bm = __ldg(bmu + zj);
      bl = __ldg(blv + zj);
    }
    PROF(2);
    ck_sync();   // own h slice complete
    {
      float* stage = smem + S::PART + MVP_STAGE;   // [R][2L] this block's partials
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float4* hr = reinterpret_cast<const float4*>(smem + S::HID + r * H + rank * H_SLICE + 8 * gp);
        const float4 a0 = hr[0], a1 = hr[1];
        float t = wp[0].x * a0.x;
        t = fmaf(wp[0].y, a0.y, t); t = fmaf(wp[0].z, a0.z, t); t = fmaf(wp[0].w, a0.w, t);
        t = fmaf(wp[1].x, a1.x, t); t = fmaf(wp[1].y, a1.y, t); t = fmaf(wp[1].z, a1.z, t); t = fmaf(wp[1].w, a1.w, t);
        t += __shfl_xor_sync(0xffffffffu, t, 1);
        t += __shfl_xor_sync(0xffffffffu, t, 2);
        if (gp == 0) stage[r * 2 * L + jp] = t;
      }
    }
#ifdef VAE_CK_PB
    fence_proxy_async_smem();   // the staged partials are read by bulk copies below
#endif
    ck_sync();   // partials staged
    PROF(13);
    cluster_wait();    // every block of the cluster has started (cheap by now)
    {
      // row r's 16 float4 -> owner r % 8's slot [rank][r / 8]; own rows into own slots
      constexpr int Q4 = 2 * L / 4;
#ifdef VAE_CK_PB   // dev: a peer's row by one 256-byte bulk copy (smem -> peer smem) instead of 16 st.async
      constexpr int NR = row8_all<R>() ? CLUSTER : R;   // rows sent to their owner (row 8 at R = 9: to everyone)
      const float* stage = smem + S::PART + MVP_STAGE;
      if (tid < NR && tid % CLUSTER != rank)   // lanes of warp 0: row tid to its owner
        bulk_copy_peer(cluster_addr(smem + S::PART + (rank * 2 + tid / CLUSTER) * 2 * L, tid % CLUSTER),
                       stage + tid * 2 * L, (uint32_t)(2 * L * sizeof(float)), cluster_addr(&bars[BAR_HID], tid % CLUSTER));
      if constexpr (row8_all<R>())
        if (tid >= 32 && tid < 32 + CLUSTER - 1) {   // lanes of warp 1: row 8 to the 7 peers
          const int dst = (rank + 1 + tid - 32) % CLUSTER;
          bulk_copy_peer(cluster_addr(smem + S::PART + (rank * 2 + 1) * 2 * L, dst), stage + CLUSTER * 2 * L,
                         (uint32_t)(2 * L * sizeof(float)), cluster_addr(&bars[BAR_HID], dst));
        }
      for (int e = tid; e < (row8_all<R>() ? 2 : owned_rows<R>(rank)) * Q4; e += THREADS) {   // own rows, here
        const int i = e / Q4, q = e % Q4, r = row8_all<R>() && i == 1 ? CLUSTER : rank + CLUSTER * i;
        reinterpret_cast<float4*>(smem + S::PART + (rank * 2 + i) * 2 * L)[q] =
            reinterpret_cast<const float4*>(stage + r * 2 * L)[q];
      }
#else
      for (int e = tid; e < (row8_all<R>() ? CLUSTER : R) * Q4; e += THREADS) {
        const int r = e / Q4, q = e % Q4, dst = r % CLUSTER;
        const float4 v = reinterpret_cast<const float4*>(smem + S::PART + MVP_STAGE + r * 2 * L)[q];
        float* slot = smem + S::PART + (rank * 2 + r / CLUSTER) * 2 * L + 4 * q;
        if (dst == rank) *reinterpret_cast<float4*>(slot) = v;
        else st_async(cluster_addr(slot, dst), v, cluster_addr(&bars[BAR_HID], dst));
      }
      if constexpr (row8_all<R>())   // row 8's partials to every block, into slot [rank][1]
        for (int e = tid; e < CLUSTER * Q4; e += THREADS) {
          const int dst = e / Q4, q = e % Q4;
          const float4 v = reinterpret_cast<const float4*>(smem + S::PART + MVP_STAGE + CLUSTER * 2 * L)[q];
          float* slot = smem + S::PART + (rank * 2 + 1) * 2 * L + 4 * q;
          if (dst == rank) *reinterpret_cast<float4*>(slot) = v;
          else st_async(cluster_addr(slot, dst), v, cluster_addr(&bars[BAR_HID], dst));
        }
#endif
    }
    PROF(14);   // thread 0's partials sent
    mbar_wait_cluster(&bars[BAR_HID], 0);
    wait_noise();   // the partials complete; the noise warp's eps in Z
    if (zi < own) eps = smem[S::Z + zi * L + zj];
    PROF(3);
#if defined(VAE_CK_STOP) && VAE_CK_STOP == 3   // dev (wrong results): up to the h exchange (+ copies, a barrier)
    mbar_wait(&bars[BAR_W2], 0);
    if (tid == 0) out[row0] = eps;
    cluster.sync();
    if (B > 0) return;
#endif
    float* klr = smem + S::KLR;
    if (zi < own) {    // mu | logvar: the 8 blocks' partials summed in rank order
      float mu = 0.f, lv = 0.f;
#pragma unroll
      for (int c = 0; c < CLUSTER; ++c) {
        mu += smem[S::PART + (c * 2 + zi) * 2 * L + zj];
        lv += smem[S::PART + (c * 2 + zi) * 2 * L + L + zj];
      }
      mu += bm;
      lv += bl;
      smem[S::Z + zi * L + zj] = reparam_z(mu, lv, eps);
      float k = kl_term(mu, lv);
#pragma unroll
      for (int o = 16; o >= 1; o >>= 1) k += __shfl_xor_sync(0xffffffffu, k, o);
      if (zj == 0) klr[zi] = -0.5f * k;
    }
    if (tid < D_SLICE) smem[S::B2 + tid] = b2v;   // for phase 5 (barriers follow)
    ck_sync();
    // decoder hidden of owned rows rank + 8 i, all 256 units; both rows side by side where a block may own 2 (R = 9:
    // rank 0's row 8 is on every block's path), a z row past `own` read (Z has R rows) and its h2 dropped (v19)
#pragma unroll
    for (int i = 0; i < (R + CLUSTER - 1) / CLUSTER; ++i) {
      const float4 zc = *reinterpret_cast<const float4*>(smem + S::Z + i * L + 4 * (lane % 8));
      float v[8];
#pragma unroll
      for (int q = 0; q < 8; ++q)
        v[q] = fmaf(w1r[q].w, zc.w, fmaf(w1r[q].z, zc.z, fmaf(w1r[q].y, zc.y, w1r[q].x * zc.x)));
#pragma unroll
      for (int o = 4, n = 8; o >= 1; o >>= 1, n >>= 1) {   // reduce-scatter over the 8 lanes of a unit group
        const bool upper = lane & o;
#pragma unroll
        for (int q = 0; q < n / 2; ++q) {
          const float send = select(upper, v[q], v[q + n / 2]);
          const float keep = select(upper, v[q + n / 2], v[q]);
          v[q] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
      }
      if (i < own)
      smem[S::HID2 + (row8_all<R>() && i == 1 ? CLUSTER : rank + CLUSTER * i) * HS + unit3] = fmaxf(v[0] + bias3, 0.f);
    }
#ifdef VAE_CK_H2B
    fence_proxy_async_smem();   // the h2 rows are read by bulk copies below
#endif
    ck_sync();   // own h2 rows complete
    {
#ifdef VAE_CK_H2B   // dev: each pushed h2 row (1 KB) to each peer by one bulk copy (smem -> peer smem), lanes of warp 0
      const int n = row8_all<R>() ? 1 : own;   // row 8 is not pushed
      if (tid < (CLUSTER - 1) * n) {
        const int dst = (rank + 1 + tid % (CLUSTER - 1)) % CLUSTER;
        float* p = smem + S::HID2 + (rank + CLUSTER * (tid / (CLUSTER - 1))) * HS;
        bulk_copy_peer(cluster_addr(p, dst), p, (uint32_t)(H * sizeof(float)), cluster_addr(&bars[BAR_H2], dst));
      }
#else
      const int per = (row8_all<R>() ? 1 : own) * (H / 4);   // row 8 is not pushed
      for (int e = tid; e < (CLUSTER - 1) * per; e += THREADS) {
        const int dst = (rank + 1 + e / per) % CLUSTER, q = e % per;
        float* p = smem + S::HID2 + (rank + CLUSTER * (q / (H / 4))) * HS + 4 * (q % (H / 4));
        st_async(cluster_addr(p, dst), *reinterpret_cast<const float4*>(p), cluster_addr(&bars[BAR_H2], dst));
      }
#endif
    }
    PROF(4);   // own h2 rows pushed
    mbar_wait(&bars[BAR_W2], 0);
    load_w2_regs<R>(smem, warp, lane, w2r);
    PROF(6);   // W2's operands in registers
    mbar_wait_cluster(&bars[BAR_H2], 0);
    PROF(5);   // h2 landed
  } else {
    // ---- R = 16: phases 2-3 by unit slices, every block all rows. W2 rows into padded smem rows (stride HS, mma
    // fragments), one bulk copy each, 13 per warp: issued here, where the warps wait for h anyway (at the start
    // they delayed the x tile by ~4 K cycles); they land long before phase 4. BAR_W2 was armed with their bytes.
    const int p = warp * ((D_SLICE + WARPS - 1) / WARPS) + lane;
    if (lane < (D_SLICE + WARPS - 1) / WARPS && p < D_SLICE)
      bulk_copy(smem + S::W2 + p * HS, W2 + ((size_t)rank * D_SLICE + p) * H, (uint32_t)(H * sizeof(float)),
                &bars[BAR_W2]);
    // prefetch phase 2 weights: warp w -> unit j2 of mu (w < 4) or logvar
    const int j2 = rank * L_SLICE + warp % L_SLICE;
    const bool is_mu = warp < L_SLICE;
    const float bias2 = __ldg((is_mu ? bmu : blv) + j2);
    WarpRows<1, H> wml;
    load_rows(is_mu ? Wmu : Wlv, j2, lane, wml);
    PROF(2);
    cluster_wait();    // every block of the cluster has started (cheap by now)
    ck_sync();   // own h slice complete
    push_slice<R, H>(smem + S::HID, &bars[BAR_HID], rank, tid);
    // the noise: the ninth warp's (v22; until v21 threads t < 4R drew it here while the peers' h slices arrived)
    float eps = 0.f;   // the noise warp's, read after the mu | logvar layer
    mbar_wait_cluster(&bars[BAR_HID], 0);
    PROF(3);
#if defined(VAE_CK_STOP) && VAE_CK_STOP == 3   // dev (wrong results): up to the h exchange (+ copies, a barrier)
    mbar_wait(&bars[BAR_W2], 0);
    if (tid == 0) out[row0] = eps;
    cluster.sync();
    if (B > 0) return;
#endif

    // ---- phase 2: mu, logvar, noise, z, KL terms
#pragma unroll 1
    for (int q = 0; q < Q; ++q) mulv_rows<R, RC>(smem, wml, bias2, q * RC, warp, lane);
    if constexpr (REM > 0) mulv_rows<R, REM>(smem, wml, bias2, Q * RC, warp, lane);
    wait_noise();   // mu | logvar complete; the noise warp's eps in PART
    if (tid < R * L_SLICE) eps = smem[S::PART + tid];
    if (tid < R * L_SLICE) {
      const int r = tid / L_SLICE, jj = tid % L_SLICE, j = rank * L_SLICE + jj;
      const float mu = smem[S::MULV + r * MULV_U + jj];
      const float lv = smem[S::MULV + r * MULV_U + L_SLICE + jj];
      const float z = reparam_z(mu, lv, eps);
      const float klt = kl_term(mu, lv);
      smem[S::Z + r * L + j] = z;
#pragma unroll
      for (int c = 1; c < CLUSTER; ++c) {
        const int dst = (rank + c) % CLUSTER;
        st_async(cluster_addr(smem + S::Z + r * L + j, dst), z, cluster_addr(&bars[BAR_Z], dst));
      }
      if (rank == 0) smem[S::KL + r * L + j] = klt;
      else st_async(cluster_addr(smem + S::KL + r * L + j, 0), klt, cluster_addr(&bars[BAR_OUT], 0));
    }
    // prefetch phase 3 weights: lane l owns decoder hidden unit 32 rank + l
    const int unit3 = rank * H_SLICE + lane;
    float4 w3[L / 4];
#pragma unroll
    for (int k = 0; k < L / 4; ++k) w3[k] = __ldg(reinterpret_cast<const float4*>(W1 + (size_t)unit3 * L) + k);
    const float bias3 = __ldg(b1 + unit3);
    if (tid < D_SLICE) smem[S::B2 + tid] = __ldg(b2 + rank * D_SLICE + tid);   // for phase 5, from smem
    mbar_wait_cluster(&bars[BAR_Z], 0);
    ck_sync();   // own z slice visible
    PROF(4);

    // ---- phase 3: decoder hidden, h2 = relu(W1 z + b1): this block's 32 units (warp w: rows w, w + 8, lane:
    // unit 32 rank + lane; z reads are warp broadcasts, 4 partial sums keep 4 FMA chains in flight), pushed to
    // the other 7 blocks as h is (each block reads only its 32 rows of W1)
#pragma unroll
    for (int r = warp; r < R; r += WARPS) {
      const float4* zr = reinterpret_cast<const float4*>(smem + S::Z + r * L);
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int k = 0; k < L / 4; ++k) {
        const float4 a = zr[k];
        acc.x = fmaf(w3[k].x, a.x, acc.x); acc.y = fmaf(w3[k].y, a.y, acc.y);
        acc.z = fmaf(w3[k].z, a.z, acc.z); acc.w = fmaf(w3[k].w, a.w, acc.w);
      }
      smem[S::HID2 + r * HS + unit3] = fmaxf((acc.x + acc.y) + (acc.z + acc.w) + bias3, 0.f);
    }
    ck_sync();   // own h2 slice complete
    push_slice<R, HS>(smem + S::HID2, &bars[BAR_H2], rank, tid);
    mbar_wait_cluster(&bars[BAR_H2], 0);
    PROF(5);
  }

  // ---- phase 4: decoder output logits (dec_logits_ffma at R <= 9, W2 already in registers; else
  // dec_logits_mma); partial logits per k-group to PART
  if constexpr (R <= 9) {
#ifdef VAE_CK_DEC2   // dev (wrong results, timeline only): the last layer twice, one copy of its code; PROF(6) after the first
#pragma unroll 1
    for (int rep = 0; rep < 2; ++rep) {
      dec_logits_ffma<R>(smem, warp, lane, w2r);
      if (rep == 0) { ck_sync(); PROF(6); }
    }
#else
    dec_logits_ffma<R>(smem, warp, lane, w2r);
#endif
  } else {
    mbar_wait(&bars[BAR_W2], 0);
    PROF(6);
    if (warp < DEC_KG) dec_logits_mma<R, DEC_TPW>(smem, warp, 0, lane);
    else dec_logits_mma<R, DEC_NT - DEC_TPW>(smem, warp - DEC_KG, DEC_TPW, lane);
  }
  ck_sync();
  PROF(7);

  // ---- phase 5: warp w -> rows w, w + 8, ... (< B: rows past B are dropped), lane -> pixels lane + 32 j: logit =
  // the k-groups summed in fixed order + b2, its BCE term, the row's sum of this block's 98 terms -> the row's
  // gatherer (R <= 9 its owner, else rank 0), in one pass (v18; before, the terms went through smem and a barrier).
  // A warp's rows and a lane's pixels are independent chains, summed after (v19: warp 0's two rows at R = 9 ran
  // one after the other, each pixel's term after the last, ~0.5 us a row); each row's sum keeps its order (pixels
  // lane + 32 j in j order, then the shuffles).
  PROF(12);
  {
    constexpr int RW = (R + WARPS - 1) / WARPS, NP = (D_SLICE + 31) / 32;
    float s[RW];
#pragma unroll
    for (int i = 0; i < RW; ++i) {
      const int r = min(warp + WARPS * i, R - 1);   // rows past R (warps >= R % 8 at i = RW - 1) are dropped
      s[i] = 0.f;
#pragma unroll
      for (int j = 0; j < NP; ++j) {
        const int p = min(lane + 32 * j, D_SLICE - 1);
        const float t = bce_at<R>(smem, xs, rank, r, p);
        if (lane + 32 * j < D_SLICE) s[i] += t;
      }
    }
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1)
#pragma unroll
      for (int i = 0; i < RW; ++i) s[i] += __shfl_xor_sync(0xffffffffu, s[i], o);
#pragma unroll
    for (int i = 0; i < RW; ++i) {
      const int r = warp + WARPS * i;
      if (lane == 0 && r < R) {
        const float v = r < rows ? s[i] : 0.f;
        const int dst = R <= 9 ? r % CLUSTER : 0;
        if (rank == dst) smem[S::RECON + rank * R + r] = v;
        else st_async(cluster_addr(smem + S::RECON + rank * R + r, dst), v, cluster_addr(&bars[BAR_OUT], dst));
      }
    }
  }
  PROF(8);
#ifdef VAE_TIMELINE
#define VAE_TL_PRINT(n) do { if (tid == 0) { \
    printf("tl %d %d %d %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld\n", \
    (int)blockIdx.x, B, n, prof[0], prof[1], prof[2], prof[3], prof[4], prof[5], prof[6], prof[7], prof[8], \
    prof[9], prof[10], prof[11], prof[12], prof[13], prof[14]); \
    printf("tw %d %d %lld %lld %lld %lld %lld %lld %lld %lld %lld\n", (int)blockIdx.x, B, tl_warp[0], \
    tl_warp[1], tl_warp[2], tl_warp[3], tl_warp[4], tl_warp[5], tl_warp[6], tl_warp[7], tl_warp[8]); } } while (0)
  if (rank != 0) VAE_TL_PRINT(9);
#endif
  if constexpr (R <= 9) {   // every block owns rows: the peers' recon partials of them, then their outputs
    mbar_wait_cluster(&bars[BAR_OUT], 0);
    ck_sync();
    PROF(9);
    const int r = rank + CLUSTER * tid;
    if (tid < owned_rows<R>(rank) && r < rows) {   // fixed summation order
      float recon = 0.f;
#pragma unroll
      for (int c = 0; c < CLUSTER; ++c) recon += smem[S::RECON + c * R + r];
      store_row(out, B, row0 + r, recon, smem[S::KLR + tid]);
    }
  } else {
    if (rank != 0) return;   // nothing writes into a block that is past its last wait
    mbar_wait_cluster(&bars[BAR_OUT], 0);
    ck_sync();   // rank 0's own partials visible
    PROF(9);
    if (tid < rows) {   // fixed summation order
      float recon = 0.f, kls = 0.f;
#pragma unroll
      for (int c = 0; c < CLUSTER; ++c) recon += smem[S::RECON + c * R + tid];
#pragma unroll
      for (int j = 0; j < L; ++j) kls += smem[S::KL + tid * L + j];
      store_row(out, B, row0 + tid, recon, -0.5f * kls);
    }
  }
#ifdef VAE_PROFILE
  if (tid == 0 && (blockIdx.x == 0 || blockIdx.x == gridDim.x - CLUSTER))
    printf("prof B=%d R=%d block %d: x-wait %lld enc %lld push+h-wait %lld mulv+z-wait %lld dec1 %lld "
           "w2-wait %lld dec2 %lld sums %lld out-wait %lld cycles\n",
           B, R, (int)blockIdx.x, prof[1] - prof[0], prof[2] - prof[1], prof[3] - prof[2], prof[4] - prof[3],
           prof[5] - prof[4], prof[6] - prof[5], prof[7] - prof[6], prof[8] - prof[7], prof[9] - prof[8]);
#endif
#ifdef VAE_TIMELINE
  PROF(10);
  if (rank == 0) VAE_TL_PRINT(11);
#endif
}

// ---------------------------------------------------------------------------
// The block-tile kernel (large B). No cluster: one 256-thread block owns BM
// rows end to end and reads all weights from L2 (BM = 64: 1.6 MB per 64 rows).
// The two big layers are register-tiled SGEMMs, C (BM x 256) += A (BM x K) W^T:
// thread (ty, tx) = (warp, lane) owns rows ty*4 + 32 i + [0,4) (i < BM/32) and
// columns tx*4 + 128 j + [0,4) (j < 2), so per k it reads BM/32 + 2 float4 from
// shared memory (the A ones are warp broadcasts) for 8*BM/8 FMAs.
// W (and x) come through shared memory in K-chunks of BK, k-major, double
// buffered through registers (global loads of chunk s+1 overlap the FMAs of s).
//   1  encoder GEMM, A = x chunks, W = We; h = relu(. + be) -> ACT as [BM][H]
//   2  mu | logvar (thread -> one of 64 units, BM/4 rows), noise, z, KL terms
//   3  decoder hidden (thread -> row tid % BM, units tid / BM + (256/BM) i);
//      h2 -> ACT transposed as [H][BM], the A operand of the next GEMM
//   4  decoder output GEMM in 3 passes of 256 pixels, A = ACT, W = W2 chunks;
//      sigmoid + BCE in registers, per-row sums in registers
//   5  the last 16 pixels (784 = 3*256 + 16): thread -> one row, 16/(256/BM) pixels
//   6  per-row sums across lanes, then elbo/recon/kl
// ---------------------------------------------------------------------------
constexpr int TT = 256;                   // threads per block
constexpr int BK = 16;                    // K chunk staged per step
constexpr int NC = 256;                   // output columns per GEMM pass
constexpr int BS_STRIDE = NC + 4;         // padded row of the staged W chunk (2-way store conflicts, not 4)
constexpr int D_FULL = (D / NC) * NC;     // 768 pixels in full passes
constexpr int D_TAIL = D - D_FULL;        // 16 pixels left
static_assert(TT == 8 * 32 && NC == 32 * 8, "thread grid 8 warps x 32 lanes, 8 columns per lane");
static_assert(H == NC, "the encoder is a single GEMM sweep of NC columns");
static_assert(D % BK == 0 && H % BK == 0 && BK == 16, "K splits into chunks of 4 float4");
static_assert(NC * BK / 4 == 4 * TT, "W chunk: 4 float4 per thread");
static_assert(D_TAIL > 0, "phase 5 handles the pixels past the full passes");
static_assert(TT == 4 * 2 * L, "mu|logvar layer: 64 units x 4 row groups");
static_assert(TT == H, "decoder hidden layer: the 256 units split over threads");

template <int BM>
struct TileSmem {
  static_assert(BM == 32 || BM == 64, "BM rows: BM/32 float4 row groups per thread");
  static constexpr int AS_STRIDE = BM + 4;          // padded row of the staged x chunk (k-major)
  static constexpr int STAGE_A = BK * AS_STRIDE;
  static constexpr int STAGE_B = BK * BS_STRIDE;
  static constexpr int STAGE_SIZE = STAGE_A + STAGE_B;
  static constexpr int TPR = TT / BM;               // tail: threads per row
  static constexpr int ACT = 0;                     // BM x H: h as [BM][H], then h2 as [H][BM]
  static constexpr int STAGE = ACT + BM * H;        // 2 x (A chunk, W chunk)
  // middle-layer buffers alias the staging area (unused between the two GEMMs)
  static constexpr int MULV = STAGE;                // BM x 2L   mu | logvar
  static constexpr int Z = MULV + BM * 2 * L;       // BM x (L+1)  z, padded rows
  static constexpr int KLT = Z + BM * (L + 1);      // BM x (L+1)  KL terms, padded rows
  static constexpr int KLROW = STAGE + 2 * STAGE_SIZE;   // BM   per-row KL
  static constexpr int RS = KLROW + BM;             // BM   per-row BCE sum of the full passes
  static constexpr int TAIL = RS + BM;              // BM x TPR  tail BCE partials
  static constexpr int END = TAIL + BM * TPR;
  static constexpr size_t BYTES = END * sizeof(float);
  static_assert(KLT + BM * (L + 1) <= KLROW, "middle buffers fit in the staging area");
  static_assert(STAGE % 4 == 0 && STAGE_A % 4 == 0 && STAGE_SIZE % 4 == 0 && AS_STRIDE % 4 == 0, "float4 alignment");
  static_assert(D_TAIL % TPR == 0, "tail pixels split evenly over a row's threads");
  static_assert(2 * (BYTES + 1024) <= 228 * 1024, "two blocks per SM");
};

// One K-chunk of FMAs: acc[r][c] += sum_k A[k][row r] * Bs[k][col c].
// A is k-major with row stride LDA, Bs is k-major with stride BS_STRIDE.
template <int MI, int LDA>
__device__ __forceinline__ void tile_step(const float* A, const float* Bs, int ty, int tx,
                                          float (&acc)[4 * MI][8]) {
#pragma unroll
  for (int k = 0; k < BK; ++k) {
    float a[4 * MI], b[8];
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      const float4 v = *reinterpret_cast<const float4*>(A + k * LDA + ty * 4 + 32 * i);
      a[4 * i] = v.x; a[4 * i + 1] = v.y; a[4 * i + 2] = v.z; a[4 * i + 3] = v.w;
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float4 v = *reinterpret_cast<const float4*>(Bs + k * BS_STRIDE + tx * 4 + 128 * j);
      b[4 * j] = v.x; b[4 * j + 1] = v.y; b[4 * j + 2] = v.z; b[4 * j + 3] = v.w;
    }
#pragma unroll
    for (int r = 0; r < 4 * MI; ++r)
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
  }
}

// W chunk: rows [n0, n0+NC) x columns [k0, k0+BK) of a row-major (. x K) matrix.
// Thread t loads float4 e = t + TT i (i < 4): row e / 4, columns 4 (e % 4) + [0,4).
template <int K>
__device__ __forceinline__ void load_w_chunk(const float* __restrict__ W, int n0, int k0, int tid, float4 (&rb)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int e = tid + TT * i;
    rb[i] = __ldg(reinterpret_cast<const float4*>(W + (size_t)(n0 + (e >> 2)) * K + k0) + (e & 3));
  }
}
__device__ __forceinline__ void store_w_chunk(float* Bs, int tid, const float4 (&rb)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int e = tid + TT * i, n = e >> 2, k = 4 * (e & 3);
    Bs[(k + 0) * BS_STRIDE + n] = rb[i].x;
    Bs[(k + 1) * BS_STRIDE + n] = rb[i].y;
    Bs[(k + 2) * BS_STRIDE + n] = rb[i].z;
    Bs[(k + 3) * BS_STRIDE + n] = rb[i].w;
  }
}
// x chunk: rows [row0, row0+BM) x columns [k0, k0+BK); thread t < 4 BM loads
// row t / 4, columns 4 (t % 4) + [0,4); rows past B read as 0.
template <int BM>
__device__ __forceinline__ float4 load_x_chunk(const float* __restrict__ x, int row0, int rows, int k0, int tid) {
  const int m = tid >> 2;
  if (tid < 4 * BM && m < rows)
    return __ldg(reinterpret_cast<const float4*>(x + (size_t)(row0 + m) * D + k0) + (tid & 3));
  return make_float4(0.f, 0.f, 0.f, 0.f);
}
template <int BM>
__device__ __forceinline__ void store_x_chunk(float* As, int tid, float4 v) {
  if (tid < 4 * BM) {
    constexpr int LDA = TileSmem<BM>::AS_STRIDE;
    const int m = tid >> 2, k = 4 * (tid & 3);
    As[(k + 0) * LDA + m] = v.x; As[(k + 1) * LDA + m] = v.y;
    As[(k + 2) * LDA + m] = v.z; As[(k + 3) * LDA + m] = v.w;
  }
}

template <int BM>
__global__ void __launch_bounds__(TT, 2)
vae_elbo_kernel_tile(const float* __restrict__ x,
                     const float* __restrict__ We, const float* __restrict__ be,
                     const float* __restrict__ Wmu, const float* __restrict__ bmu,
                     const float* __restrict__ Wlv, const float* __restrict__ blv,
                     const float* __restrict__ W1, const float* __restrict__ b1,
                     const float* __restrict__ W2, const float* __restrict__ b2,
                     float* __restrict__ out, int B, Noise noise) {
  using S = TileSmem<BM>;
  constexpr int MI = BM / 32;
  extern __shared__ __align__(16) float smem[];
  float* act = smem + S::ACT;
  const int tid = threadIdx.x, ty = tid >> 5, tx = tid & 31;
  const int row0 = (int)blockIdx.x * BM;
  const int rows = min(BM, B - row0);
  auto stage_a = [&](int buf) { return smem + S::STAGE + buf * S::STAGE_SIZE; };
  auto stage_b = [&](int buf) { return smem + S::STAGE + buf * S::STAGE_SIZE + S::STAGE_A; };

  float acc[4 * MI][8];
#pragma unroll
  for (int r = 0; r < 4 * MI; ++r)
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[r][c] = 0.f;

  // ---- phase 1: encoder GEMM, 49 K-chunks
  {
    constexpr int STEPS = D / BK;
    float4 ra = load_x_chunk<BM>(x, row0, rows, 0, tid);
    float4 rb[4];
    load_w_chunk<D>(We, 0, 0, tid, rb);
    store_x_chunk<BM>(stage_a(0), tid, ra);
    store_w_chunk(stage_b(0), tid, rb);
    __syncthreads();
#pragma unroll 1
    for (int s = 0; s < STEPS; ++s) {
      const int buf = s & 1;
      if (s + 1 < STEPS) {
        ra = load_x_chunk<BM>(x, row0, rows, (s + 1) * BK, tid);
        load_w_chunk<D>(We, 0, (s + 1) * BK, tid, rb);
      }
      tile_step<MI, S::AS_STRIDE>(stage_a(buf), stage_b(buf), ty, tx, acc);
      if (s + 1 < STEPS) {
        store_x_chunk<BM>(stage_a(buf ^ 1), tid, ra);
        store_w_chunk(stage_b(buf ^ 1), tid, rb);
      }
      __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int col = tx * 4 + 128 * j;
      const float4 bias = __ldg(reinterpret_cast<const float4*>(be + col));
#pragma unroll
      for (int r = 0; r < 4 * MI; ++r) {
        const int row = ty * 4 + 32 * (r / 4) + r % 4;
        float4 h;
        h.x = fmaxf(acc[r][4 * j + 0] + bias.x, 0.f);
        h.y = fmaxf(acc[r][4 * j + 1] + bias.y, 0.f);
        h.z = fmaxf(acc[r][4 * j + 2] + bias.z, 0.f);
        h.w = fmaxf(acc[r][4 * j + 3] + bias.w, 0.f);
        *reinterpret_cast<float4*>(act + row * H + col) = h;
      }
    }
    __syncthreads();
  }

  // ---- phase 2: mu | logvar: thread -> unit j = tid % 64 (< 32: mu), rows tid / 64 + 4 i
  {
    constexpr int RPT = BM / 4;
    const int j = tid % (2 * L), rg = tid / (2 * L);
    const float* wrow = j < L ? Wmu + (size_t)j * H : Wlv + (size_t)(j - L) * H;
    const float bias = __ldg(j < L ? bmu + j : blv + (j - L));
    float s[RPT];
#pragma unroll
    for (int i = 0; i < RPT; ++i) s[i] = 0.f;
#pragma unroll 4
    for (int k4 = 0; k4 < H / 4; ++k4) {
      const float4 w = __ldg(reinterpret_cast<const float4*>(wrow) + k4);
#pragma unroll
      for (int i = 0; i < RPT; ++i) {
        const float4 hv = reinterpret_cast<const float4*>(act + (rg + 4 * i) * H)[k4];
        float t = s[i];
        t = fmaf(w.x, hv.x, t); t = fmaf(w.y, hv.y, t);
        t = fmaf(w.z, hv.z, t); t = fmaf(w.w, hv.w, t);
        s[i] = t;
      }
    }
#pragma unroll
    for (int i = 0; i < RPT; ++i) smem[S::MULV + (rg + 4 * i) * 2 * L + j] = s[i] + bias;
  }
  __syncthreads();
  // noise, z, KL terms: thread -> elements e = tid + TT i of the BM x L tile
  {
    const NoiseDraw draw = noise_source(noise);
#pragma unroll 1
    for (int e = tid; e < BM * L; e += TT) {
      const int r = e / L, j = e % L;
      const float mu = smem[S::MULV + r * 2 * L + j];
      const float lv = smem[S::MULV + r * 2 * L + L + j];
      const float eps = r < rows ? draw((uint64_t)(row0 + r) * L + j) : 0.f;
      smem[S::Z + r * (L + 1) + j] = reparam_z(mu, lv, eps);
      smem[S::KLT + r * (L + 1) + j] = kl_term(mu, lv);
    }
  }
  __syncthreads();

  // ---- phase 3: decoder hidden, h2 = relu(W1 z + b1) -> act as [H][BM]
  {
    const int r = tid % BM, ng = tid / BM;
    float zr[L];
#pragma unroll
    for (int k = 0; k < L; ++k) zr[k] = smem[S::Z + r * (L + 1) + k];
#pragma unroll 2
    for (int i = 0; i < BM; ++i) {
      const int n = ng + (TT / BM) * i;
      const float4* w = reinterpret_cast<const float4*>(W1 + (size_t)n * L);
      float s = 0.f;
#pragma unroll
      for (int k4 = 0; k4 < L / 4; ++k4) {
        const float4 wv = __ldg(w + k4);
        s = fmaf(wv.x, zr[4 * k4], s); s = fmaf(wv.y, zr[4 * k4 + 1], s);
        s = fmaf(wv.z, zr[4 * k4 + 2], s); s = fmaf(wv.w, zr[4 * k4 + 3], s);
      }
      act[n * BM + r] = fmaxf(s + __ldg(b1 + n), 0.f);
    }
    if (tid < BM) {   // per-row KL, fixed order
      float kls = 0.f;
#pragma unroll
      for (int k = 0; k < L; ++k) kls += smem[S::KLT + tid * (L + 1) + k];
      smem[S::KLROW + tid] = -0.5f * kls;
    }
  }
  __syncthreads();

  // ---- phase 4: decoder output GEMM, 3 passes x 16 K-chunks of W2; sigmoid + BCE
  float rowsum[4 * MI];
#pragma unroll
  for (int r = 0; r < 4 * MI; ++r) rowsum[r] = 0.f;
  {
    constexpr int KSTEPS = H / BK, STEPS = (D_FULL / NC) * KSTEPS;
#pragma unroll
    for (int r = 0; r < 4 * MI; ++r)
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[r][c] = 0.f;
    float4 rb[4];
    load_w_chunk<H>(W2, 0, 0, tid, rb);
    store_w_chunk(stage_b(0), tid, rb);
    __syncthreads();
#pragma unroll 1
    for (int s = 0; s < STEPS; ++s) {
      const int buf = s & 1, sweep = s / KSTEPS, kc = s % KSTEPS;
      if (s + 1 < STEPS) load_w_chunk<H>(W2, ((s + 1) / KSTEPS) * NC, ((s + 1) % KSTEPS) * BK, tid, rb);
      tile_step<MI, BM>(act + kc * BK * BM, stage_b(buf), ty, tx, acc);
      if (s + 1 < STEPS) store_w_chunk(stage_b(buf ^ 1), tid, rb);
      if (kc == KSTEPS - 1) {   // pass done: BCE of its 8 x 4MI pixels per thread, then reset
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int col = sweep * NC + tx * 4 + 128 * j;
          const float4 bias = __ldg(reinterpret_cast<const float4*>(b2 + col));
#pragma unroll
          for (int r = 0; r < 4 * MI; ++r) {
            const int row = ty * 4 + 32 * (r / 4) + r % 4;
            if (row < rows) {
              const float4 xv = __ldg(reinterpret_cast<const float4*>(x + (size_t)(row0 + row) * D + col));
              float t = rowsum[r];
              t += bce_term(acc[r][4 * j + 0] + bias.x, xv.x);
              t += bce_term(acc[r][4 * j + 1] + bias.y, xv.y);
              t += bce_term(acc[r][4 * j + 2] + bias.z, xv.z);
              t += bce_term(acc[r][4 * j + 3] + bias.w, xv.w);
              rowsum[r] = t;
            }
          }
        }
#pragma unroll
        for (int r = 0; r < 4 * MI; ++r)
#pragma unroll
          for (int c = 0; c < 8; ++c) acc[r][c] = 0.f;
      }
      __syncthreads();
    }
  }

  // ---- phase 5: the last D_TAIL pixels: thread -> row tid / TPR, pixels D_FULL + CPT (tid % TPR) + [0, CPT)
  {
    constexpr int TPR = S::TPR, CPT = D_TAIL / TPR;
    const int r = tid / TPR, p0 = D_FULL + CPT * (tid % TPR);
    float s[CPT];
#pragma unroll
    for (int c = 0; c < CPT; ++c) s[c] = 0.f;
#pragma unroll 2
    for (int k4 = 0; k4 < H / 4; ++k4) {
      float hv[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) hv[q] = act[(4 * k4 + q) * BM + r];
#pragma unroll
      for (int c = 0; c < CPT; ++c) {
        const float4 w = __ldg(reinterpret_cast<const float4*>(W2 + (size_t)(p0 + c) * H) + k4);
        float t = s[c];
        t = fmaf(w.x, hv[0], t); t = fmaf(w.y, hv[1], t);
        t = fmaf(w.z, hv[2], t); t = fmaf(w.w, hv[3], t);
        s[c] = t;
      }
    }
    float part = 0.f;
    if (r < rows) {
#pragma unroll
      for (int c = 0; c < CPT; ++c)
        part += bce_term(s[c] + __ldg(b2 + p0 + c), __ldg(x + (size_t)(row0 + r) * D + p0 + c));
    }
    smem[S::TAIL + tid] = part;   // = TAIL[r * TPR + tid % TPR]
  }

  // ---- phase 6: row sums across the 32 lanes of each warp (fixed butterfly), then outputs
#pragma unroll
  for (int r = 0; r < 4 * MI; ++r) {
    float t = rowsum[r];
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    if (tx == 0) smem[S::RS + ty * 4 + 32 * (r / 4) + r % 4] = t;
  }
  __syncthreads();
  if (tid < rows) {
    float recon = smem[S::RS + tid];
#pragma unroll
    for (int c = 0; c < S::TPR; ++c) recon += smem[S::TAIL + tid * S::TPR + c];
    store_row(out, B, row0 + tid, recon, smem[S::KLROW + tid]);
  }
}

// ---------------------------------------------------------------------------
// Large-batch kernel on Hopper's warpgroup MMA (wgmma, sm_90a), FP16 hi + lo products with fp32
// accumulation. Persistent, 128-row tiles. Warps 0-7 (two warpgroups, 64 rows each) run every layer
// as a GEMM: A = the activations (fp32 in shared memory, each thread's fragment split into hi + lo
// FP16 in registers), B = a weight K-chunk of 16 (64-byte-swizzled rows, hi then lo FP16 of the row
// scaled by a power of two), three wgmma m64nNk16 per chunk (lo*hi, hi*lo, hi*hi); the epilogues undo
// the scale exactly. Warps 8-11 stream the weight chunks (split once per call into a workspace: one
// bulk copy each) and layer 1's x chunks (cp.async) into NS stages, and draw each tile's noise during
// layer 1 (or the spare clusters do; C = 4: the first tile's at entry); full / empty mbarriers hand
// stages over, so the two warpgroups and the producers run decoupled. Layers, with N columns per pass (C = 1; Plan for C > 1):
//   1  h = relu(x We^T + be)        2 passes of N = 128, 49 chunks each                -> ACT
//   2  mu | logvar = h Wml^T + b    N = 64, 16 chunks; z, KL in registers              -> Z
//   3  d = relu(z W1^T + b1)        4 passes of N = 64, 2 chunks each                  -> ACT
//   4  logits = d W2^T + b2         7 passes of N = 112 pixels, 16 chunks each;
//      sigmoid + BCE and the row sums in registers; the reconstruction never leaves the chip.
// ---------------------------------------------------------------------------
#define C8(i) "+f"(c[i]), "+f"(c[i + 1]), "+f"(c[i + 2]), "+f"(c[i + 3]), "+f"(c[i + 4]), "+f"(c[i + 5]), \
              "+f"(c[i + 6]), "+f"(c[i + 7])
// c += a . B, one wgmma.m64n<2 NA>k16 f16 with fp32 accumulation (A: 4 registers per thread, pairs of
// FP16, as mma.sync's m16n8k16 A fragment of warp w's rows 16w..16w+15; B: K-major smem descriptor).
// Issued asynchronously: see wg_commit / wg_wait.
__device__ __forceinline__ void wgmma_f16(float (&c)[64], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %69, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0; }"
      : C8(0), C8(8), C8(16), C8(24), C8(32), C8(40), C8(48), C8(56)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
#endif
}
__device__ __forceinline__ void wgmma_f16(float (&c)[56], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %61, 0; wgmma.mma_async.sync.aligned.m64n112k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55"
      "}, {%56, %57, %58, %59}, %60, p, 1, 1, 0; }"
      : C8(0), C8(8), C8(16), C8(24), C8(32), C8(40), C8(48)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
#endif
}
__device__ __forceinline__ void wgmma_f16(float (&c)[36], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %41, 0; wgmma.mma_async.sync.aligned.m64n72k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35"
      "}, {%36, %37, %38, %39}, %40, p, 1, 1, 0; }"
      : C8(0), C8(8), C8(16), C8(24), "+f"(c[32]), "+f"(c[33]), "+f"(c[34]), "+f"(c[35])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
#endif
}
__device__ __forceinline__ void wgmma_f16(float (&c)[32], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0; }"
      : C8(0), C8(8), C8(16), C8(24)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
#endif
}
__device__ __forceinline__ void wgmma_f16(float (&c)[28], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %33, 0; wgmma.mma_async.sync.aligned.m64n56k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27"
      "}, {%28, %29, %30, %31}, %32, p, 1, 1, 0; }"
      : C8(0), C8(8), C8(16), "+f"(c[24]), "+f"(c[25]), "+f"(c[26]), "+f"(c[27])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
#endif
}
__device__ __forceinline__ void wgmma_f16(float (&c)[24], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %29, 0; wgmma.mma_async.sync.aligned.m64n48k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23"
      "}, {%24, %25, %26, %27}, %28, p, 1, 1, 0; }"
      : C8(0), C8(8), C8(16)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
#endif
}
__device__ __forceinline__ void wgmma_f16(float (&c)[16], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %21, 0; wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, {%16, %17, %18, %19}, %20, p, 1, 1, 0; }"
      : C8(0), C8(8)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
#endif
}
__device__ __forceinline__ void wgmma_f16(float (&c)[8], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %13, 0; wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7"
      "}, {%8, %9, %10, %11}, %12, p, 1, 1, 0; }"
      : C8(0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
#endif
}
#undef C8
// The compiler must neither move nor reuse these registers across an in-flight wgmma.
template <int N> __device__ __forceinline__ void keep(float (&c)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(c[i]) :: "memory");
}

namespace wg {
constexpr int BM = 128;                   // rows per tile: 2 consumer warpgroups x 64
constexpr int CONSUMERS = 256;            // warps 0-7: the MMAs and epilogues
constexpr int PRODUCERS = 128;           // warps 8-11: copies and splits, one weight row per thread
constexpr int THREADS = CONSUMERS + PRODUCERS;
#ifndef VAE_WG_PRODUCER_REGS
#define VAE_WG_PRODUCER_REGS 64           // dev: 56 gives the consumers 224 (main before the spares)
#endif
// setmaxnreg from 168 x 384 at launch: the consumers take what the producers give back, rounded down to 8
constexpr int PRODUCER_REGS = VAE_WG_PRODUCER_REGS, CONSUMER_REGS = (168 + (168 - PRODUCER_REGS) / 2) / 8 * 8;
static_assert(CONSUMER_REGS * CONSUMERS + PRODUCER_REGS * PRODUCERS <= 65536, "the register file");
constexpr int BK = 16;                    // K per chunk: one 64-byte swizzled row per weight row, FP16
constexpr int ROWB = BK * 4;              // bytes per weight row in a chunk: 16 hi, then 16 lo
#ifndef VAE_WG_PAIR
#define VAE_WG_PAIR 1                     // dev: chunks per wgmma wait, each into its own accumulator, where
#endif                                    // a pass has at most VAE_WG_PAIR_MAXACC sums per thread
#ifndef VAE_WG_PAIR_MAXACC
#define VAE_WG_PAIR_MAXACC 32
#endif
constexpr int PAIR = VAE_WG_PAIR, PAIR_MAXACC = VAE_WG_PAIR_MAXACC;
static_assert(PAIR >= 1 && PAIR <= 3, "a pair fits the stages");
#ifndef VAE_WG_CHAINS1
#define VAE_WG_CHAINS1 2                  // independent accumulator chains per chunk, layer 1 (1, 2, 4)
#endif
#ifndef VAE_WG_CHAINS4
#define VAE_WG_CHAINS4 2                  // ... layer 4 (1, 2, 7)
#endif
#ifndef VAE_WG_NS
#define VAE_WG_NS 4                       // dev: 5 stages fit too (218 KB of smem; 6 do not)
#endif
constexpr int NS = VAE_WG_NS;             // stages
#ifndef VAE_WG_NOISE_BATCH
#define VAE_WG_NOISE_BATCH 2              // noise values a producer thread draws at once (1, 2, 4)
#endif
constexpr int WROWS = 128;                // rows of the largest weight chunk (a pass's columns)
constexpr int N2 = 2 * L;                 // columns of layer 2's one pass
constexpr int KC1 = D / BK, KC2 = H / BK, KC3 = L / BK, KC4 = H / BK;   // chunks per pass
// The workspace: per layer, K-chunk after K-chunk, each all of the layer's weight rows (64 bytes each:
// hi, then lo); a pass of n rows from row n0 (n0 % 8 == 0, the swizzle's period) is one contiguous bulk
// copy. Layer 2's rows: Wmu's 32, then Wlv's 32. Then the rows' inverse scales (floats, rows in the
// order of the layers: SC1 ..).
constexpr int SC1 = 0, SC2 = SC1 + H, SC3 = SC2 + N2, SC4 = SC3 + H, WROWS_ALL = SC4 + D;   // 1360 rows
struct Layer { int base, rows, row0; };   // row0: its first row in the layers' order (w_row, the scales)
constexpr Layer WL1 = {0, H, SC1}, WL2 = {WL1.base + KC1 * H * ROWB, N2, SC2},
                WL3 = {WL2.base + KC2 * N2 * ROWB, H, SC3}, WL4 = {WL3.base + KC3 * H * ROWB, D, SC4};
constexpr int WS_SCALES = WL4.base + KC4 * D * ROWB;
constexpr int WS_DONE = WS_SCALES + WROWS_ALL * 4;   // the spare blocks' done count (a u32, 16 bytes kept)
constexpr int WS_BYTES = WS_DONE + 16;
#ifndef VAE_WG_SPARE_DRAWS
#define VAE_WG_SPARE_DRAWS 32             // spare blocks draw the noise where that is at most this many a
#endif                                    // thread (32: ~13 K cycles, well inside layer 1's 40-110 K)
constexpr int SPARE_DRAWS = VAE_WG_SPARE_DRAWS;
static_assert(WS_BYTES % 16 == 0, "the noise buffers after the workspace stay 16-byte aligned");
static_assert(D % BK == 0 && H % BK == 0 && L % BK == 0, "whole K-chunks");
static_assert(WROWS == PRODUCERS && (BM * 4) % PRODUCERS == 0, "a weight row per producer thread");
constexpr int NOISE_BYTES = BM * L * 4;   // per block after the workspace: the tile's eps, [L][BM];
                                          // then per cluster: its first tile's eps (drawn at entry)

// Each 128-row tile is split over a cluster of C blocks (C = 1, 2, 3, 4, 8): rank r computes its share of
// layer 1's hidden units and of layer 4's pixels for all 128 rows, layer 2 over its own hidden units
// only (K-split: C = 2, 4, 8 reduce-scatter the partial mu | logvar sums and all-gather z (RS); C = 3 puts
// them into every peer's ACT by st.async; the partials are added in rank order), layer 3 (K = 32) whole. Passes per tile of rank r,
// in order (n0: first column, n: columns):
//   layer 1  P1 passes of N1: C = 1: 2 x 128; C = 2: 128 (units 128 r ..); C = 4: 64 (units 64 r ..);
//            C = 3: 96 (units 80 r .., so 16 of ranks 1 and 2 are computed twice and not used);
//            C = 8: 64 (units 64 (r % 4) .., K-chunks 0-24 for r < 4, 25-48 for r >= 4)
//   layer 2  1 pass of 64 over the rank's own K-chunks: [KC2 / C r, KC2 / C (r + 1)); C = 3: 0-5 |
//            6-10 | 11-15 (units 0-95 | 96-175 | 176-255); C = 8: ranks 0-3 only, as C = 4
//   layer 3  4 passes of 64 (C = 8: 2 of 128)
//   layer 4  C = 1: 7 x 112; else 784 / C pixels +-8, rank 0's first pass 16 wider (C = 2: 0-399 |
//            400-783 in 3 passes of 128; C = 3: 0-271 | 272-527 | 528-783 in 2 of 128; C = 4: 0-207 |
//            208-399 | 400-591 | 592-783 in 2 of 96; C = 8: 0-111 | 112-207 | ... | 688-783 in 1).
//            A chunk costs about the same from 96 to 144 columns (its fixed steps dominate), so wide
//            passes pay at C = 2 (4096: 83.9 -> 82.2 µs, 8192: 84.4 -> 82.9); at C = 1 144 + 5 x 128
//            was slower (16384: 145.4 -> 152.4). Past WROWS rows a layer-4 pass's weights run on into
//            the stage's x part, which only layer 1 uses.
constexpr int W4 = 128;
#ifndef VAE_WG_N4_C1
#define VAE_WG_N4_C1 112                  // C = 1's pass width (112: 7 passes; 128: 144 + 5 x 128)
#endif
constexpr int W4_C1 = VAE_WG_N4_C1;
#ifndef VAE_WG_KC1_LO
#define VAE_WG_KC1_LO 25                  // dev: C = 8, ranks 0-3's share of layer 1's 49 K-chunks (26: r + 4's
#endif                                    // partials copy, ~2.7 K cycles for 32 KB, overlaps r's last chunks)
#ifndef VAE_WG_KC1_LO6
#define VAE_WG_KC1_LO6 29                 // dev: C = 6, ranks 0-3's share (a helper's chunks are twice
#endif                                    // as wide, ~1.3 K cycles against ~1.05 K, and it sends 64 KB, not 32)
template <int C> struct Plan {
  static_assert((C >= 1 && C <= 4) || C == 6 || C == 8, "clusters of 1 to 4, 6 or 8");
  // C = 8 (KSPLIT1): ranks r and r + 4 (r < 4) both compute layer 1 for rank r's units of a cluster of 4,
  // r over K-chunks [0, KC1_LO) and r + 4 over the rest; r + 4's partial sums reach r by one bulk copy
  // (`hfull`, into r's own ACT quarter, where each thread adds its own entries before storing h). Only
  // ranks 0-3 (the layer-2 group, G2) run layer 2, as a cluster of 4; their z slices go to all 8 (RS).
  // All 8 run layer 3 whole and 1/8 of the pixels (96, rank 0 112).
  // C = 6 (16 or 17 tiles, which clusters of 8 cannot hold (15 at once) and clusters of 6 can (17)): the same
  // with two K-helpers, ranks 4 and 5, each over 2 quarters (N1 = 128: units 128 (rank - 4) ..), sending
  // one partial to each of ranks 2 (rank - 4) and 2 (rank - 4) + 1; 1/6 of the pixels (128, rank 0 144).
  static constexpr bool KSPLIT1 = C == 8 || C == 6;
  static constexpr int G2 = KSPLIT1 ? 4 : C;                          // ranks of the layer-2 K-split
  static constexpr int NH = C == 6 ? 2 : 1;                           // h quarters per K-helper
  static constexpr int KC1_LO = C == 6 ? VAE_WG_KC1_LO6 : KSPLIT1 ? VAE_WG_KC1_LO : KC1;   // C = 8, 6: ranks 0-3's
  static_assert(KC1_LO > 0 && KC1_LO <= KC1 && (!KSPLIT1 || KC1_LO < KC1), "C = 8: both K parts non-empty");
  // Layer 3's pass width: at C = 8, 2 passes of 128 (2 chunks a stage's worth each) against 4 of 64 were
  // -0.7 to -1.1 µs (B = 512-1920); at C = 3 (B = 4096) +3.1, at C = 2 and 4 within 0.2.
  static constexpr int N3 = KSPLIT1 ? 128 : 64;
  static constexpr int P1 = C == 1 ? 2 : 1, N1 = G2 == 4 ? 64 : C == 3 ? 96 : 128, P3 = H / N3;
  static constexpr int KC2_MAX = C == 3 ? 6 : KC2 / G2, KC2_MIN = C == 3 ? 5 : KC2 / G2;   // layer 2's chunks
  static constexpr int WP = C == 6 ? W4 : G2 == 4 ? 96 : C == 1 ? W4_C1 : W4;   // layer 4's pass width,
  static constexpr int EXTRA = C == 1 && WP == 112 ? 0 : 16;          // rank 0's first pass WP + EXTRA,
  static constexpr int P4 = (D - EXTRA) / C / WP;                     // passes per rank
  static constexpr int CHUNKS1 = KSPLIT1 ? KC1 - KC1_LO : P1 * KC1;   // the fewest layer-1 chunks of a rank
  // The noise: during layer 1 the producers draw the tile's eps (producer thread t: row t, NOISE_BATCH
  // values at once, independent chains, every NOISE_EVERY chunks), layer 2 reads it. The next tile's
  // draws overwrite it only after layer 2 read it: the producers run at most NS chunks ahead.
  // EARLY_NOISE: a cluster's first tile's eps is drawn at kernel entry instead, by every thread of its
  // blocks (draw_first_tile), before the weight split. That won at C = 4 (B = 2048: 67.9 -> 61.1 µs)
  // and lost at C = 2 and 1 (4096: 84.1 -> 85.2; 16384: 147.0 -> 164.8): a draw is ~170 instructions,
  // so the entry's 4096 / C draws per block cost 3 K (C = 4) to 18 K (C = 1) cycles.
  // C = 8 (4 columns a rank, 128 of its 384 threads one run of 4 each): where no spares draw, that is 15 tiles
  // (B = 1793-1920), or rows_per_tile 136 beyond one wave, against ~10 K cycles of layer 1 for the producers' draws.
  static constexpr bool EARLY_NOISE = C == 4 || C == 6 || C == 8;   // (C = 3 cannot: 32 columns do not split in 3;
  // C = 6 splits the runs, not the columns)
  static constexpr int NOISE_BATCH = VAE_WG_NOISE_BATCH, NOISE_EVERY = C == 1 ? 3 * NOISE_BATCH : KSPLIT1 ? 1 : NOISE_BATCH;
  // (C = 8: ranks 0-3 draw in 25 chunks, so a batch every chunk)
  static_assert(BM == PRODUCERS && L % NOISE_BATCH == 0 && (L / NOISE_BATCH - 1) * NOISE_EVERY < CHUNKS1 &&
                P3 * KC3 + P4 * KC4 >= NS, "the noise schedule");
  static_assert((C == 3 ? 80 * 2 + N1 == H && 11 + KC2_MIN == KC2 : P1 * N1 * G2 == H && KC2_MAX * G2 == KC2) &&
                N1 <= WROWS, "layers 1 and 2 covered");
  static constexpr int HBYTES = BM * N1 * 4;   // C = 8: the layer-1 partial
  static_assert(!KSPLIT1 || HBYTES == 64 * BM * 4, "C = 8: the partial is one ACT quarter");
  // RS (C = 2, 4, 8): layer 2's exchange as a reduce-scatter by bulk copies, then z all-gathered. Rank s of
  // the layer-2 group owns latent units [UL s, UL s + UL): rank r sends s only the partial sums of those
  // (mu and logvar: RS_E + RS_E of a thread's entries, RSB bytes, not 32 KB), s adds the G2 of them in
  // rank order, computes z and the KL terms of its units and sends its z slice (ZSB bytes) to every
  // other block (C = 8: ranks 4-7 too); each block puts the slices into Z. ACT during that (floats; quarter
  // = 64 BM): staging for peer (rank + j) % G2 at rs_stage(j), sender r's partials at rs_in(r) (second half
  // of r's first h quarter, which the receiver does not use), slot p (owner p's z slice; at p itself the
  // copy's source) at rs_slot(p), Z in quarter 3's first half: all disjoint. A block's own h quarters are
  // written only after its layer-2 reads: by itself, or by copies that follow its partials (a slot).
  // Measured against all 32 KB of partials to every peer by bulk copy (24 + 12 KB out per rank, not
  // 96 + 16): -1.4 to -2.1 µs at C = 8 (B = 512-1920), -3.6 at C = 4 (2048). C = 3 (its windows straddle
  // ACT quarters) and C = 1 push each entry by st.async / keep it.
  static constexpr bool RS = C == 2 || C == 4 || C == 6 || C == 8;
  static_assert(!RS || (16 * KC2_MAX) % 64 == 0, "RS: part_col(s) = 16 KC2_MAX s starts an ACT quarter");
  static constexpr int RS_E = 16 / G2, RS_UL = L / G2;   // a thread's mu entries per owner; units per owner
  static constexpr int RSB = CONSUMERS * 2 * RS_E * 4, ZSB = BM * RS_UL * 4;
  __device__ static int rs_stage(int j) { return G2 == 4 ? (j - 1) * 64 * BM : 0; }
  __device__ static int rs_in(int r) { return part_col(r) * BM + 32 * BM; }   // r's h quarter, free at the receiver
  __device__ static int rs_slot(int p) { return G2 == 4 ? (p >> 1) * 64 * BM + 16 * BM + (p & 1) * 8 * BM : 128 * BM + p * 16 * BM; }
  static_assert(!RS || (BM == 128 && ((G2 == 4 && RSB <= 8192 && ZSB <= 4096) || (G2 == 2 && RSB <= 16384 && ZSB <= 8192))),
                "RS: staging in a quarter's first 8 KB (G2 = 2: 16), slots of 4 KB (8), partials in its second half");
  static constexpr int XBYTES = (G2 - 1) * (RS ? RSB : BM * N2 * 4);   // partial mu | logvar bytes a rank receives per tile
  // RS: z-slice bytes a layer-2 rank / a rank 4-7 receives per tile
  static constexpr int ZRECV_LO = (G2 - 1) * ZSB, ZRECV_HI = G2 * ZSB;
  // Layer 2's K-split: rank r sums over its own units 16 kc2_first(r) .. (kc2_count(r) chunks). Peer s's
  // partial sums (64 columns) go into every other rank's ACT at s's own first unit: C = 1, 2, 4: ACT
  // quarter 4 / C s; C = 3: columns 0 | 96 | 176, none of them inside a receiver's own units nor
  // written by its layer 1 (rank 1 computes 80-175, rank 2 160-255).
  __device__ static int n1(int rank, int p) {
    return C == 6 && rank >= G2 ? NH * (rank - G2) * N1 : C == 3 ? 80 * rank : ((KSPLIT1 ? rank % G2 : rank) * P1 + p) * N1;
  }
  __device__ static int n1w(int rank) { return C == 6 && rank >= G2 ? NH * N1 : N1; }   // layer 1's pass width
  __device__ static int k1_first(int rank) { return KSPLIT1 && rank >= G2 ? KC1_LO : 0; }   // C = 8: ranks 4-7's
  __device__ static bool runs_layer2(int rank) { return !KSPLIT1 || rank < G2; }              // K-half
  __device__ static int kc2_first(int rank) { return C == 3 ? (rank == 0 ? 0 : 1 + 5 * rank) : rank * KC2_MAX; }
  __device__ static int kc2_count(int rank) { return C == 3 && rank > 0 ? KC2_MIN : KC2_MAX; }
  __device__ static int part_col(int s) { return 16 * kc2_first(s); }
  __device__ static int w4(int rank, int p) { return rank == 0 && p == 0 ? WP + EXTRA : WP; }
  __device__ static int n4(int rank, int p) {
    return rank == 0 ? (p == 0 ? 0 : EXTRA + WP * p) : EXTRA + (D - EXTRA) / C * rank + WP * p;
  }
  static_assert(EXTRA + C * P4 * WP == D && (D - EXTRA) / C == P4 * WP, "layer 4 covered");
  static_assert(WP + EXTRA <= WROWS + BM, "a layer-4 pass's weight rows fit a stage (W and x parts)");
};


// Byte offset of 16-byte unit u of weight row n in a chunk (units 0, 1: hi at k positions 0-7, 8-15;
// 2, 3: lo): 64-byte rows, the hardware's 64-byte swizzle (address bits 4-5 ^= bits 7-8), so a
// 512-byte-aligned chunk base.
__device__ __forceinline__ uint32_t b_unit(int n, int u) { return n * ROWB + ((u ^ ((n >> 1) & 3)) << 4); }
// Descriptor of a chunk's hi (j = 0) or lo (j = 1) parts at smem address `base`: K-major, 64-byte
// swizzle, 8-row groups every 512 bytes (SBO), LBO unused.
__device__ __forceinline__ uint64_t b_desc(uint32_t base, int j) {
  const uint32_t s = base + 32 * j;
  return (uint64_t)((s & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(8 * ROWB >> 4) << 32) | ((uint64_t)2 << 62);
}
// ACT (BM x H fp32: h, then d) in quarters of 64 columns; row r's 16-byte unit u (columns 4u .. 4u + 3
// of the quarter) at unit u ^ act_swz(r). Layers 2 and 4 read a row's 4 fragment values (the weights'
// chunk k order below) with one 16-byte load: the 8 threads of two rows cover all 32 banks
// (bit 2 of the swizzle differs between rows 2i and 2i + 1), and so do the epilogues' 8-byte stores of
// four rows. Z (BM x L, z) lies in ACT's last quarter (h's last columns are read before it is written,
// d's after it is read): element (r, k) at 192 BM + 32 r + (k ^ 4 (r % 8)).
__device__ __forceinline__ int act_swz(int r) { return ((r & 3) << 1) ^ ((r & 1) << 2); }
__device__ __forceinline__ int act_at(int r, int k) { return (k >> 6) * (64 * BM) + r * 64 + ((k & 63) ^ (act_swz(r) << 2)); }
__device__ __forceinline__ int z_at(int r, int k) { return 192 * BM + r * L + (k ^ ((r & 7) << 2)); }
// The k order within a chunk: A rows (x in the stage, h, z and d in ACT) are stored in their own
// order and a thread reads its 4 values (k = 4q .. 4q + 3) with one 16-byte load, as the m16n8k16
// fragment's k pairs (2q, 2q + 1) and (2q + 8, 2q + 9); so a weight row's k position kappa in a chunk
// holds its column 4 ((kappa & 7) >> 1) + 2 (kappa >> 3) + (kappa & 1): columns (4v, 4v + 1) at
// positions (2v, 2v + 1), columns (4v + 2, 4v + 3) at (2v + 8, 2v + 9).

// Workspace offset of chunk kc (k = 16 kc ..) of a layer's rows n0 ..
__device__ __forceinline__ int ws_at(Layer l, int kc, int n0) { return l.base + (kc * l.rows + n0) * ROWB; }
}  // namespace wg

struct WgSmem {   // bytes
  static constexpr int ACT = 0;                              // BM x H floats (Z in its last quarter)
  static constexpr int WB = wg::WROWS * wg::ROWB;            // stage: W (hi | lo rows) | x (layer 1)
  static constexpr int STAGE = WB + wg::BM * wg::ROWB;       // + x
  static constexpr int STG = ACT + wg::BM * H * 4;
  static constexpr int RED = STG + wg::NS * STAGE;          // rank 0 of a cluster: the peers' recon sums [7][BM]
  static constexpr int RED_ROWS = 7 + 3;                     // (RS: + the layer-2 peers' KL sums [3][BM])
  static constexpr int ISC = RED + RED_ROWS * wg::BM * 4;    // the weight rows' inverse scales (wg::SC1 ..)
  static constexpr int BARS = ISC + wg::WROWS_ALL * 4;       // full[NS], empty[NS], xfull[NS], nfull, then
  static constexpr int NBARS = 3 * wg::NS + 1 + 7 + 1;       // the cluster's pfull, rfull, pfree, xdone, hfull,
                                                             // zfull, zdone; iscful
  static constexpr int SPARES = BARS + NBARS * 8;            // u32: how many spare blocks draw the noise (0: none)
  static constexpr int BYTES = SPARES + 16 + 1024;           // + alignment slack
  static_assert(STG % 1024 == 0 && STAGE % 1024 == 0 && WB % 1024 == 0, "stages 1024-byte aligned (swizzle)");
  static_assert(ISC % 16 == 0 && wg::WS_SCALES % 16 == 0 && wg::WROWS_ALL * 4 % 16 == 0, "the scales' bulk copy");
  static_assert(BYTES <= 227 * 1024, "fits in one SM's shared memory");
};

// >>> fp16 helpers (tools/tf32_mma.py reads this block for the probes)
// v0, v1 (k even, odd) -> hi = their FP16 pair (round to nearest), lo = the FP16 pair of v - hi:
// hi + lo holds 22 of v's bits (the product terms hi hi + hi lo + lo hi keep fp32-level error) while
// |v| < 65504 and lo is normal; below that lo's absolute error is at most 2^-25.
__device__ __forceinline__ void split16(float v0, float v1, uint32_t& hi, uint32_t& lo) {
  asm("{ .reg .f16 h0, h1; .reg .f32 f0, f1;\n"
      " cvt.rn.f16x2.f32 %0, %3, %2;\n"
      " mov.b32 {h0, h1}, %0;\n"
      " cvt.f32.f16 f0, h0; cvt.f32.f16 f1, h1;\n"
      " sub.f32 f0, %2, f0; sub.f32 f1, %3, f1;\n"
      " cvt.rn.f16x2.f32 %1, f1, f0; }" : "=r"(hi), "=r"(lo) : "f"(v0), "f"(v1));
}
// <<< fp16 helpers

// The largest |component| of v (the split's row scales, the kernel's FP16 range check).
__device__ __forceinline__ float abs_max(float4 v) {
  return fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
}

// Every call, before any tile, each weight row (wg::WROWS_ALL rows, the layers in order) by one warp:
// its largest |w| gives the row's power-of-two scale s (largest |w| s in [2^14, 2^15): FP16's range,
// and lo normal for every w s above 2^-3 of the largest); w s goes as hi | lo FP16 into the
// workspace's layout (64-byte swizzled rows, as in a stage; k in the chunk order above) and 1 / s into
// the scale table; the epilogues multiply the sums by it (exact: a power of two). The producers then
// move each pass's chunk with one bulk copy.
struct WRow { wg::Layer l; const float* src; int n, k4; };   // row n of layer l, k4 float4 units from src
__device__ __forceinline__ WRow w_row(int row, const float* We, const float* Wmu, const float* Wlv,
                                      const float* W1, const float* W2) {
  using namespace wg;
  if (row < SC2) return {WL1, We + (size_t)row * D, row, D / 4};
  if (row < SC3) { const int n = row - SC2; return {WL2, n < L ? Wmu + n * H : Wlv + (n - L) * H, n, H / 4}; }
  if (row < SC4) { const int n = row - SC3; return {WL3, W1 + n * L, n, L / 4}; }
  const int n = row - SC4;
  return {WL4, W2 + (size_t)n * H, n, H / 4};
}
template <int U> __device__ __forceinline__ void w_load(const WRow& r, int lane, float4 (&w)[U]) {
#pragma unroll
  for (int i = 0; i < U; ++i) {
    const int u = lane + 32 * i;
    w[i] = u < r.k4 ? __ldg(reinterpret_cast<const float4*>(r.src) + u) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}
#ifdef VAE_PROFILE
__device__ long long wg_prof_split_loaded;   // block 0's thread 0: its row's loads landed (the max is known)
#endif
// The power-of-two scale sc of values whose largest |w| is m (m sc in [2^14, 2^15): FP16's range) and 1 / sc.
__device__ __forceinline__ void pow2_scale(float m, float& sc, float& inv) {
  const uint32_t e = __float_as_uint(m) >> 23;   // m's biased exponent: m in [2^(e - 127), 2^(e - 126))
  const bool scaled = e >= 15 && e <= 254;       // else 0, tiny (< 2^-112), inf or nan: s = 1
  sc = scaled ? __uint_as_float((268u - e) << 23) : 1.f;     // 2^(141 - e)
  inv = scaled ? __uint_as_float((e - 14u) << 23) : 1.f;     // 2^(e - 141)
}
// Float4 unit u of row r (its columns 4u .. 4u + 3), times sc, as hi | lo FP16 into the workspace.
__device__ __forceinline__ void w_store(uint8_t* __restrict__ ws, const WRow& r, int u, float4 w, float sc) {
  using namespace wg;
  const int v = u & 3;   // columns 4v .. 4v + 3 of chunk u / 4
  uint8_t* dst = ws + ws_at(r.l, u >> 2, 0);
  uint32_t hi0, lo0, hi1, lo1;
  split16(w.x * sc, w.y * sc, hi0, lo0);   // k positions 2v, 2v + 1
  split16(w.z * sc, w.w * sc, hi1, lo1);   // 2v + 8, 2v + 9
  *reinterpret_cast<uint32_t*>(dst + b_unit(r.n, 0) + 4 * v) = hi0;
  *reinterpret_cast<uint32_t*>(dst + b_unit(r.n, 1) + 4 * v) = hi1;
  *reinterpret_cast<uint32_t*>(dst + b_unit(r.n, 2) + 4 * v) = lo0;
  *reinterpret_cast<uint32_t*>(dst + b_unit(r.n, 3) + 4 * v) = lo1;
}
template <int U> __device__ __forceinline__ void w_split(uint8_t* __restrict__ ws, const WRow& r, int row, int lane,
                                                         const float4 (&w)[U]) {
  using namespace wg;
  float m = 0.f;
#pragma unroll
  for (int i = 0; i < U; ++i) m = fmaxf(m, abs_max(w[i]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
#ifdef VAE_PROFILE
  if (threadIdx.x == 0 && blockIdx.x == 0) wg_prof_split_loaded = clock64();
#endif
  float sc, inv;
  pow2_scale(m, sc, inv);
#pragma unroll
  for (int i = 0; i < U; ++i) {
    const int u = lane + 32 * i;
    if (u >= r.k4) break;
    w_store(ws, r, u, w[i], sc);
  }
  if (lane == 0) reinterpret_cast<float*>(ws + wg::WS_SCALES)[row] = inv;
}
// The rows after layer 1's (K <= 256), short warp w of wsh: three rows at a time, all three rows' loads in flight.
__device__ __forceinline__ void ws_split_short(uint8_t* __restrict__ ws, const float* We, const float* Wmu,
                                               const float* Wlv, const float* W1, const float* W2, int w0, int wsh) {
  using namespace wg;
  constexpr int SHORT = WROWS_ALL - H, G = 3;
  const int lane = threadIdx.x & 31;
  for (int s0 = w0; s0 < SHORT; s0 += G * wsh) {
    WRow r[G];
    float4 w[G][(H / 4 + 31) / 32];
#pragma unroll
    for (int j = 0; j < G; ++j) {
      const int row = SC2 + min(s0 + j * wsh, SHORT - 1);   // past the end: a repeat, not split
      r[j] = w_row(row, We, Wmu, Wlv, W1, W2);
      w_load(r[j], lane, w[j]);
    }
#pragma unroll
    for (int j = 0; j < G; ++j)
      if (s0 + j * wsh < SHORT) w_split(ws, r[j], SC2 + s0 + j * wsh, lane, w[j]);
  }
}
// Block b's warps 0 and 1 take layer 1's rows 2b and 2b + 1 (K = 784; then + 2 nblocks ..), one at a time; its other
// 10 warps the rest (K <= 256), one row each with 132 blocks. So every block stores about the same bytes: giving
// the 256 long rows to the first 256 warps (12 in each of the first 22 blocks, 2 352 float4 of stores a block against
// ~1 000) made those blocks' stores the entry's critical path (B = 1024 -1.1 us, 4096 -4.4, session 18).
__device__ __forceinline__ void ws_split_weights(uint8_t* __restrict__ ws, const float* We, const float* Wmu,
                                                 const float* Wlv, const float* W1, const float* W2) {
  using namespace wg;
  constexpr int WPB = wg::THREADS / 32, LW = 2;   // warps a block, of them on long rows
  const int lane = threadIdx.x & 31, wib = threadIdx.x / 32;
  if (wib < LW) {
    for (int row = blockIdx.x * LW + wib; row < H; row += gridDim.x * LW) {
      const WRow r = w_row(SC1 + row, We, Wmu, Wlv, W1, W2);
      float4 w[(D / 4 + 31) / 32];
      w_load(r, lane, w);
      w_split(ws, r, SC1 + row, lane, w);
    }
    return;
  }
  ws_split_short(ws, We, Wmu, Wlv, W1, W2, blockIdx.x * (WPB - LW) + wib - LW, gridDim.x * (WPB - LW));
}

// Noise drawn by whole blocks, in runs of 4 consecutive columns of one row (independent chains; rows
// fastest across threads, so a warp's stores are coalesced) into a tile's eps ([L][BM]); rows past B
// draw row B - 1's values (never stored as outputs).
__device__ __forceinline__ void draw_run4(const NoiseDraw& draw, int row, int j0, int B, float (&v)[4]) {
#ifdef VAE_WG_NO_NOISE   // dev: no draws (wrong results)
#pragma unroll
  for (int k = 0; k < 4; ++k) v[k] = 0.f;
#else
  draw.run((uint64_t)min(row, B - 1) * L + j0, v);
#endif
}
__device__ __forceinline__ void store_run4(float* __restrict__ eps, int r, int j0, const float (&v)[4]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) eps[(j0 + k) * wg::BM + r] = v[k];
}
// The cluster's first tile's noise at kernel entry (EARLY_NOISE): rank r of C the columns
// [L / C r, L / C (r + 1)) of all BM rows into eps0, the cluster's. Layer 2 reads eps0 after the
// cluster barrier that follows the weight split.
template <int C, int TR = wg::BM>   // TR: the tile's rows (64 in the HALF tiles)
__device__ __forceinline__ void draw_first_tile(float* __restrict__ eps0, const NoiseDraw& draw, int row0, int B, int rank) {
  using namespace wg;
  if constexpr (L % (4 * C) != 0 || TR != BM) {   // C = 6: rank r draws runs [r RUNS / C, (r + 1) RUNS / C) of the tile's
    constexpr int RUNS = TR * L / 4;              // run v: row v % TR, columns 4 (v / TR) ..
    static_assert((RUNS + C - 1) / C <= wg::THREADS, "one run a thread");
    const int lo = rank * RUNS / C, hi = (rank + 1) * RUNS / C, v = min(lo + (int)threadIdx.x, hi - 1);
    float e[4];
    draw_run4(draw, row0 + v % TR, 4 * (v / TR), B, e);
    if (lo + (int)threadIdx.x < hi) store_run4(eps0, v % TR, 4 * (v / TR), e);
    return;
  }
  constexpr int UNITS = BM * (L / C / 4), ROUNDS = (UNITS + wg::THREADS - 1) / wg::THREADS;
  float e[ROUNDS][4];
#pragma unroll
  for (int k = 0; k < ROUNDS; ++k) {
    const int u = min((int)threadIdx.x + k * wg::THREADS, UNITS - 1);
    draw_run4(draw, row0 + u % BM, rank * (L / C) + 4 * (u / BM), B, e[k]);
  }
#pragma unroll
  for (int k = 0; k < ROUNDS; ++k) {
    const int u = threadIdx.x + k * wg::THREADS;
    if (u < UNITS) store_run4(eps0, u % BM, rank * (L / C) + 4 * (u / BM), e[k]);
  }
}
// Spare block hb of nhb: its share of every tile's noise (tile t's at eps + t L BM, rows < TR), two runs
// in flight per thread.
template <int TR = wg::BM>   // TR: the tile's rows (64 in the HALF tiles)
__device__ __noinline__ void draw_all_tiles(float* __restrict__ eps, const NoiseDraw draw, int tiles, int B,
                                            int hb, int nhb) {   // (not inlined: its own registers)
  using namespace wg;
  constexpr int PER_TILE = TR * (L / 4);
  const int units = tiles * PER_TILE, stride = nhb * wg::THREADS;
#pragma unroll 1   // (unrolled, its chains made ptxas spill values the workers keep across it)
  for (int u0 = hb * wg::THREADS + (int)threadIdx.x; u0 < units; u0 += 2 * stride) {
    float e[2][4];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int u = min(u0 + k * stride, units - 1), t = u / PER_TILE, v = u % PER_TILE;
      draw_run4(draw, t * TR + v % TR, 4 * (v / TR), B, e[k]);
    }
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int u = u0 + k * stride, t = u / PER_TILE, v = u % PER_TILE;
      if (u < units) store_run4(eps + (size_t)t * L * BM, v % TR, 4 * (v / TR), e[k]);
    }
  }
}
// The grid's size read afresh at each use (volatile: not merged into one value kept live), the worker
// blocks (clusters with a tile) and whether the spare blocks draw the noise (see the wg kernel).
__device__ __forceinline__ unsigned nctaid() {
  unsigned n;
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(n));
  return n;
}
template <int C, int TR = wg::BM> __device__ __forceinline__ unsigned workers(int B) {
  return min((unsigned)(B + TR - 1) / TR, nctaid() / C) * C;
}
template <int C, int TR = wg::BM> __device__ __forceinline__ bool spare_noise(int B) {
  const int64_t values = (int64_t)((B + TR - 1) / TR) * TR * L;   // every tile's, rows past B too
  return (int64_t)(nctaid() - workers<C, TR>(B)) * wg::THREADS * wg::SPARE_DRAWS >= values;
}
__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// A fragments of a chunk (m16n8k16 layout: pairs (row r0, k 2q..), (r0 + 8, 2q..), (r0, 2q + 8..),
// (r0 + 8, 2q + 8..)) from rows r0 and r0 + 8, each given as its 4 values at columns 4q .. 4q + 3,
// split into hi (a[0]) and lo (a[1]) FP16 pairs.
__device__ __forceinline__ void split_frags(float4 v0, float4 v1, uint32_t (&a)[2][4]) {
  split16(v0.x, v0.y, a[0][0], a[1][0]);
  split16(v1.x, v1.y, a[0][1], a[1][1]);
  split16(v0.z, v0.w, a[0][2], a[1][2]);
  split16(v1.z, v1.w, a[0][3], a[1][3]);
}
// ACT row r's columns 16 kc + 4q .. 16 kc + 4q + 3 (chunk kc's values for split_frags), one 16-byte load.
__device__ __forceinline__ float4 act_frag(const float* act, int kc, int r, int q) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(smem_u32(act + wg::act_at(r, kc * 16 + 4 * q))) : "memory");
  return v;
}

// The 3 x CHAINS wgmma of one chunk (its weight rows at smem address `w`): lo hi + hi lo + hi hi
// into the chains' accumulators, which start from 0 when `fresh`.
template <int CHAINS, int SUB>
__device__ __forceinline__ void ws_mma(uint32_t w, const uint32_t (&a)[2][4], float (&acc)[CHAINS][SUB], bool fresh) {
#pragma unroll
  for (int h = 0; h < CHAINS; ++h)   // the chain's first weight row: h (2 SUB)
    wgmma_f16(acc[h], a[1], wg::b_desc(w + h * (2 * SUB) * wg::ROWB, 0), !fresh);   // lo * hi
#pragma unroll
  for (int h = 0; h < CHAINS; ++h) wgmma_f16(acc[h], a[0], wg::b_desc(w + h * (2 * SUB) * wg::ROWB, 1), 1);   // hi * lo
#pragma unroll
  for (int h = 0; h < CHAINS; ++h) wgmma_f16(acc[h], a[0], wg::b_desc(w + h * (2 * SUB) * wg::ROWB, 0), 1);   // hi * hi
}

// A finished chunk's product into the fp32 sums, chain by chain (its registers kept up to here).
template <int NACC, int CHAINS, int SUB>
__device__ __forceinline__ void ws_promote(float (&sum)[NACC], float (&acc)[CHAINS][SUB]) {
#pragma unroll
  for (int h = 0; h < CHAINS; ++h)
#pragma unroll
    for (int i = 0; i < SUB; ++i) sum[h * SUB + i] += acc[h][i];
}

#ifdef VAE_PROFILE_CHUNKS   // dev, with VAE_PROFILE: block 0's consumer thread 0, per chunk: waits, A split,
// wgmma, free + promote, chunks (tools/wg_phases.py --flags -DVAE_PROFILE_CHUNKS; it adds spills)
__device__ long long wg_chunk_prof[6];   // [5]: every chunk's cycles, for the layers' in-chunk share
__device__ __forceinline__ unsigned clock32() { unsigned v; asm volatile("mov.u32 %0, %%clock;" : "=r"(v)); return v; }
#define CPROF(v) const unsigned v = clock32()   // 32-bit stamps: clock64's pairs made ptxas spill
// in the wg kernel, next to PROF(i): chunk cycles so far (block 0, thread 0); layer 2's steps
#define CHPROF(i) do { if (threadIdx.x == 0 && blockIdx.x == 0) inch[i] = wg_chunk_prof[5]; } while (0)
#define L2PROF(i) do { if (threadIdx.x == 0) l2s[i] = clock64(); } while (0)
#else
#define CPROF(v) do {} while (0)
#define CHPROF(i) do {} while (0)
#define L2PROF(i) do {} while (0)
#endif
// Thread's accumulator entry i of an m64nN tile: row 16 w + g + 8 ((i >> 1) & 1) of its warpgroup's
// 64, column 8 (i >> 2) + 2 q + (i & 1).
__device__ __forceinline__ int acc_row(int i) { return ((i >> 1) & 1) * 8; }
__device__ __forceinline__ int acc_col(int i, int q) { return 8 * (i >> 2) + 2 * q + (i & 1); }
// HALF (64-row tiles, the two warpgroups on alternate chunks of every pass, each over the same 64 rows):
// after a pass, warpgroup g keeps row rw + 8 g of its two; entry j of the kept row is accumulator entry
// 4 (j >> 1) + 2 g + (j & 1), column kcol(j, q). The other row's entries go to the partner (tid ^ 128), which adds
// them: a scratch pool in ACT's rows 64-127 (quarters' second halves past the RS partials' 4 KB), 3072 floats in
// each quarter, warpgroup g's slots in quarters 2 g and 2 g + 1. Slot j of thread t (t < 128) of warpgroup g:
// half_scr(g, j, t), a base per thread plus a constant for an unrolled j (as (j 128 + t) / 3072 and % 3072 it
// cost a register per slot, hoisted out of the tile loop and spilled).
__device__ __forceinline__ int kcol(int j, int q) { return 8 * (j >> 1) + 2 * q + (j & 1); }
__device__ __forceinline__ int half_scr(int g, int j, int t) {
  return (2 * g + j / 24) * 64 * wg::BM + 5120 + (j % 24) * 128 + t;   // 24 slots of 128 floats a quarter
}
template <int NACC>
__device__ __forceinline__ void half_combine(const float (&sum)[NACC], float (&keep)[NACC / 2], float* act, int tid) {
  static_assert(NACC / 2 * 128 <= 2 * 3072, "a warpgroup's half of the sums fits its scratch");
  const int g = tid >> 7, t = tid & 127;
#pragma unroll
  for (int j = 0; j < NACC / 2; ++j) {
    const float a = sum[4 * (j >> 1) + (j & 1)], b = sum[4 * (j >> 1) + 2 + (j & 1)];   // rows rw, rw + 8
    keep[j] = g ? b : a;
    act[half_scr(g, j, t)] = g ? a : b;
  }
  asm volatile("bar.sync 1, %0;" :: "n"(wg::CONSUMERS) : "memory");
#pragma unroll
  for (int j = 0; j < NACC / 2; ++j) keep[j] += act[half_scr(1 - g, j, t)];
  asm volatile("bar.sync 1, %0;" :: "n"(wg::CONSUMERS) : "memory");   // the scratch free for the next pass
}
// Consumer warpgroup, one chunk c: wait until the producer filled its stage, 3 wgmma (hi / lo FP16
// products; A rows from a_at(st, g, r) as split_frags takes them, split in registers) into a fresh accumulator, wait for them, free
// the stage, add the chunk into the fp32 sums (the tensor core's own accumulation keeps fewer bits
// than fp32: 6e-6 against 4e-7 over K = 784 when each chunk is added here, notes/solution.md).
template <int NACC, int CHAINS, int G, class AAt, class Wait>
__device__ __forceinline__ void ws_chunk(uint32_t stg_s, uint64_t* full, uint64_t* empty, int c, int r0, int q,
                                         int lane, AAt a_at, float (&sum)[NACC], float (&amax)[2], Wait wait_more) {
  constexpr int SUB = NACC / CHAINS;   // accumulator registers per chain (N / CHAINS columns)
  static_assert(NACC % CHAINS == 0 && SUB % 4 == 0, "whole 8-column groups per chain");
  // G chunks c .. c + G - 1 under one wgmma wait (VAE_WG_PAIR), each into its own accumulator, added in
  // chunk order (the same sums as one by one; summed inside the tensor core they lost accuracy)
  uint32_t a[G][2][4];   // [chunk][hi | lo][fragment]
  CPROF(p0);
#ifdef VAE_PROFILE_CHUNKS
  unsigned pw = 0;
#endif
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int st = (c + g) % wg::NS;
    CPROF(pa);
    mbar_wait(&full[st], ((c + g) / wg::NS) & 1);
    wait_more(st);   // layer 1: x's cp.async too
#ifdef VAE_PROFILE_CHUNKS
    pw += clock32() - pa;
#endif
    const float4 v0 = a_at(st, g, r0), v1 = a_at(st, g, r0 + 8);
    amax[0] = fmaxf(amax[0], abs_max(v0));
    amax[1] = fmaxf(amax[1], abs_max(v1));
    split_frags(v0, v1, a[g]);
  }
  // CHAINS independent accumulators (column blocks): wgmma on one accumulator run one after another,
  // so a single chain of 6 leaves the tensor cores waiting on their latency
  float acc[G][CHAINS][SUB];
  CPROF(p2);
  wg_fence();
#ifdef VAE_WG_NO_MMA   // dev: the loads alone (wrong results)
#pragma unroll
  for (int n = 0; n < G; ++n)
#pragma unroll
    for (int h = 0; h < CHAINS; ++h)
#pragma unroll
      for (int i = 0; i < SUB; ++i) acc[n][h][i] = __uint_as_float(a[n][0][i & 3]);
#else
#pragma unroll
  for (int g = 0; g < G; ++g) ws_mma(stg_s + ((c + g) % wg::NS) * WgSmem::STAGE, a[g], acc[g], true);
#endif
  wg_commit();
  wg_wait<0>();
#pragma unroll
  for (int n = 0; n < G; ++n)
#pragma unroll
    for (int h = 0; h < CHAINS; ++h) keep(acc[n][h]);
  CPROF(p3);
  __syncwarp();
  if (lane == 0)
#pragma unroll
    for (int g = 0; g < G; ++g) mbar_arrive(&empty[(c + g) % wg::NS]);
#ifdef VAE_WG_NO_PROMOTE   // dev: the fp32 adds of one chunk in 16 only (wrong results)
  if ((c & 15) != 0) return;
#endif
#pragma unroll
  for (int n = 0; n < G; ++n) ws_promote(sum, acc[n]);
#ifdef VAE_PROFILE_CHUNKS
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    keep(sum);
    const unsigned p4 = clock32();
    wg_chunk_prof[0] += pw;
    wg_chunk_prof[1] += p2 - p0 - pw;
    wg_chunk_prof[2] += p3 - p2;
    wg_chunk_prof[3] += p4 - p3;
    wg_chunk_prof[4] += G;
    wg_chunk_prof[5] += p4 - p0;
  }
#endif
}

// A pass of PASS chunks from chunk c (advanced past them) into sum, one chunk per wgmma wait (wg::PAIR
// where the pass is narrow enough; ws_chunk). a_at(st, kc, r): A row r's values (stage st, chunk kc of the pass) as split_frags takes
// them; wait_more(st) after each chunk's `full` wait (layer 1: x's own barrier).
template <int NACC, int CHAINS, int PASS, class AAt, class Wait>
__device__ __forceinline__ void ws_run(uint32_t stg_s, uint64_t* full, uint64_t* empty, int& c, int r0, int q,
                                       int lane, AAt a_at, float (&sum)[NACC], float (&amax)[2], Wait wait_more) {
#pragma unroll
  for (int i = 0; i < NACC; ++i) sum[i] = 0.f;
  constexpr int GW = wg::PAIR > 1 && NACC <= wg::PAIR_MAXACC ? wg::PAIR : 1;   // narrow passes: a wait per PAIR chunks
  constexpr int G = PASS >= GW ? GW : 1;
#pragma unroll 1
  for (int kc = 0; kc + G <= PASS; kc += G, c += G)
    ws_chunk<NACC, CHAINS, G>(stg_s, full, empty, c, r0, q, lane,
                              [&](int st, int g, int r) { return a_at(st, kc + g, r); }, sum, amax, wait_more);
#pragma unroll 1
  for (int kc = PASS - PASS % G; kc < PASS; ++kc, ++c)   // the rest one by one
    ws_chunk<NACC, CHAINS, 1>(stg_s, full, empty, c, r0, q, lane,
                              [&](int st, int, int r) { return a_at(st, kc, r); }, sum, amax, wait_more);
}

// 64-row tiles (HALF): the same pass with warpgroup g on its chunks kc = g, g + 2, .. (its `empty` arrivals only); for
// the other warpgroup's chunks skip(st) (layer 1: the x barrier's phase bit flipped without a wait).
template <int NACC, int CHAINS, int PASS, class AAt, class Wait, class Skip>
__device__ __forceinline__ void ws_run_half(uint32_t stg_s, uint64_t* full, uint64_t* empty, int& c, int r0, int q, int lane,
                                            AAt a_at, float (&sum)[NACC], float (&amax)[2], Wait wait_more, Skip skip, int g) {
#pragma unroll
  for (int i = 0; i < NACC; ++i) sum[i] = 0.f;
#pragma unroll 1
  for (int kc = 0; kc < PASS; ++kc) {
    if ((kc & 1) == g)
      ws_chunk<NACC, CHAINS, 1>(stg_s, full, empty, c + kc, r0, q, lane,
                                [&](int st, int, int r) { return a_at(st, kc, r); }, sum, amax, wait_more);
    else
      skip((c + kc) % wg::NS);
  }
  c += PASS;
}

// A weight row's inverse scale (a pair of adjacent rows') for an epilogue: the scale table's entry.
__device__ __forceinline__ float isc_one(const float* p) { return *p; }
__device__ __forceinline__ float2 isc_pair(const float* p) { return *reinterpret_cast<const float2*>(p); }
// relu(sum isc + bias) of an m64nN tile's accumulator layout into ACT columns col0 + [0, N) (isc: the
// columns' inverse weight scales, in smem; the product is exact, so one rounding as sum + bias).
template <int NACC>
__device__ __forceinline__ void store_relu(float* act, const float (&sum)[NACC], const float* __restrict__ bias,
                                           const float* isc, int col0, int rw, int q) {
#pragma unroll
  for (int i = 0; i < NACC; i += 2) {
    const int r = rw + acc_row(i), k = col0 + acc_col(i, q);
    const float2 b = __ldg(reinterpret_cast<const float2*>(bias + k));
    const float2 sc = isc_pair(isc + k);
    // one 8-byte store (written as a float2, the compiler split it in two once act was known to be shared)
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" :: "r"(smem_u32(act + wg::act_at(r, k))),
                 "f"(fmaxf(__fmaf_rn(sum[i], sc.x, b.x), 0.f)), "f"(fmaxf(__fmaf_rn(sum[i + 1], sc.y, b.y), 0.f)) : "memory");
  }
}
// C = 6 and the 64-row tiles: a K-helper's staged layer-1 partial (its own ACT quarters col0 / 64 .., BYTES each) to
// each of its NH owners
// (quarter col0 / 64 + h belongs to rank col0 / 64 + h), once the owners are done with the last tile (pfree).
template <int NH, int BYTES>
__device__ __forceinline__ void push_partials(float* act, int col0, uint64_t* pfree, uint64_t* hfull, int it, int tid) {
  fence_proxy_async_smem();
  asm volatile("bar.sync 1, %0;" :: "n"(wg::CONSUMERS) : "memory");
  if (tid == 0) {
    if (it > 0) mbar_wait_cluster(pfree, (it - 1) & 1);
#pragma unroll
    for (int h = 0; h < NH; ++h) {
      float* part = act + wg::act_at(0, col0 + 64 * h);   // (64-row tiles: the quarter's first 16 KB)
      bulk_copy_peer(cluster_addr(part, col0 / 64 + h), part, BYTES, cluster_addr(hfull, col0 / 64 + h));
    }
  }
}
// RS: this rank's mu and logvar sums of its own latent units, every layer-2 rank's partial in rank order (its own
// from `own`: mu entries s E .., logvar entries NM + s E ..; the peers' from their copies at rs_in(s)).
template <class P, int E, int NM, int N>
__device__ __forceinline__ void rs_gather(const float (&own)[N], const float* act, int rank, int tid, float (&mu_s)[E],
                                          float (&lv_s)[E]) {
#pragma unroll
  for (int e = 0; e < E; ++e) mu_s[e] = lv_s[e] = 0.f;
#pragma unroll
  for (int s2 = 0; s2 < P::G2; ++s2) {
    const float* in = act + P::rs_in(s2) + tid * 2 * E;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      mu_s[e] += s2 == rank ? own[s2 * E + e] : in[e];
      lv_s[e] += s2 == rank ? own[NM + s2 * E + e] : in[E + e];
    }
  }
}
// 64-row tiles (HALF): the same for one kept row (entries j: columns col0 + kcol(j, q)).
template <int NK>
__device__ __forceinline__ void store_relu_row(float* act, const float (&keep)[NK], const float* __restrict__ bias,
                                               const float* isc, int col0, int row, int q) {
#pragma unroll
  for (int j = 0; j < NK; j += 2) {
    const int k = col0 + kcol(j, q);
    const float2 b = __ldg(reinterpret_cast<const float2*>(bias + k));
    const float2 sc = isc_pair(isc + k);
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" :: "r"(smem_u32(act + wg::act_at(row, k))),
                 "f"(fmaxf(__fmaf_rn(keep[j], sc.x, b.x), 0.f)), "f"(fmaxf(__fmaf_rn(keep[j + 1], sc.y, b.y), 0.f)) : "memory");
  }
}
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" :: "n"(wg::CONSUMERS) : "memory"); }

// v[t] summed over the warp, every lane the totals (butterfly: fixed order).
template <int N> __device__ __forceinline__ void warp_allsum(float (&v)[N]) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int t = 0; t < N; ++t) v[t] += __shfl_xor_sync(0xffffffffu, v[t], o);
}
// Entry u of a 32 n vector spread over a warp (entry 32 i + lane in a[i]) set to v, a[] staying in registers.
template <int N> __device__ __forceinline__ void spread_set(float (&a)[N], int u, float v, int lane) {
#pragma unroll
  for (int i = 0; i < N; ++i) a[i] = select(i == (u >> 5) && lane == (u & 31), v, a[i]);
}
__device__ __forceinline__ float dot4(float4 w, float4 v, float acc) {
  return fmaf(w.w, v.w, fmaf(w.z, v.z, fmaf(w.y, v.y, fmaf(w.x, v.x, acc))));
}

// The FP16 products' fallback: row `row` of the forward in plain fp32 by one warp, its 3 outputs
// written. For rows whose activations (x, h, z or d) left FP16's range (|v| > 65504: the hi part
// would be inf; inputs or weights scaled by 1e5, say): rare, so it is written for few registers, not
// speed (it is inlined at the tile's end, where little else is live): h and d spread over the lanes
// (unit 32 i + lane in h[i], d[i]), latent unit j in lane j; dot products 4 outputs at a time, K split
// over the lanes (coalesced weight rows), then summed over the warp; biases added last, as eager does;
// BCE by torch's formula (bce_term).
__device__ __forceinline__ void wg_exact_row(const float* __restrict__ x, const float* __restrict__ We,
                                             const float* __restrict__ be, const float* __restrict__ Wmu,
                                             const float* __restrict__ bmu, const float* __restrict__ Wlv,
                                             const float* __restrict__ blv, const float* __restrict__ W1,
                                             const float* __restrict__ b1, const float* __restrict__ W2,
                                             const float* __restrict__ b2, float* __restrict__ out, int B, int row,
                                             NoiseDraw draw, int lane) {
  constexpr int F1 = D / 4, HI = H / 32;   // x: 196 float4
  static_assert(L == 32 && H % 32 == 0 && D % 4 == 0, "a latent unit per lane, hidden units 32 i + lane");
  const float* xr = x + (size_t)row * D;
  float h[HI] = {};
#pragma unroll 1
  for (int u0 = 0; u0 < H; u0 += 4) {   // h units u0 .. u0 + 3
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int f = lane; f < F1; f += 32) {
      const float4 xf = __ldg(reinterpret_cast<const float4*>(xr) + f);
#pragma unroll
      for (int t = 0; t < 4; ++t) acc[t] = dot4(__ldg(reinterpret_cast<const float4*>(We + (size_t)(u0 + t) * D) + f), xf, acc[t]);
    }
    warp_allsum(acc);
#pragma unroll
    for (int t = 0; t < 4; ++t) spread_set(h, u0 + t, fmaxf(acc[t] + __ldg(be + u0 + t), 0.f), lane);
  }
  float mu = 0.f, lv = 0.f;   // of latent unit lane
#pragma unroll 1
  for (int j = 0; j < L; j += 2) {   // mu, logvar of units j, j + 1
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < HI; ++i) {
      const int k = 32 * i + lane;
      acc[0] = fmaf(__ldg(Wmu + j * H + k), h[i], acc[0]);
      acc[1] = fmaf(__ldg(Wlv + j * H + k), h[i], acc[1]);
      acc[2] = fmaf(__ldg(Wmu + (j + 1) * H + k), h[i], acc[2]);
      acc[3] = fmaf(__ldg(Wlv + (j + 1) * H + k), h[i], acc[3]);
    }
    warp_allsum(acc);
    mu = select(lane == j, acc[0], select(lane == j + 1, acc[2], mu));
    lv = select(lane == j, acc[1], select(lane == j + 1, acc[3], lv));
  }
  mu += __ldg(bmu + lane);
  lv += __ldg(blv + lane);
  const float z = reparam_z(mu, lv, draw((uint64_t)row * L + lane));
  float acc[2] = {0.f, kl_term(mu, lv)};   // recon, KL terms
  float d[HI] = {};
#pragma unroll 1
  for (int j4 = 0; j4 < L / 4; ++j4) {   // z units 4 j4 .. 4 j4 + 3
    const float4 zj = make_float4(__shfl_sync(0xffffffffu, z, 4 * j4), __shfl_sync(0xffffffffu, z, 4 * j4 + 1),
                                  __shfl_sync(0xffffffffu, z, 4 * j4 + 2), __shfl_sync(0xffffffffu, z, 4 * j4 + 3));
#pragma unroll
    for (int i = 0; i < HI; ++i) d[i] = dot4(__ldg(reinterpret_cast<const float4*>(W1 + (32 * i + lane) * L) + j4), zj, d[i]);
  }
#pragma unroll
  for (int i = 0; i < HI; ++i) d[i] = fmaxf(d[i] + __ldg(b1 + 32 * i + lane), 0.f);
#pragma unroll 1
  for (int p0 = 0; p0 < D; p0 += 4) {   // pixels p0 .. p0 + 3; lane t < 4 takes pixel p0 + t's term
    float lg[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < HI; ++i)
#pragma unroll
      for (int t = 0; t < 4; ++t) lg[t] = fmaf(__ldg(W2 + (size_t)(p0 + t) * H + 32 * i + lane), d[i], lg[t]);
    warp_allsum(lg);
    const float l = select(lane == 0, lg[0], select(lane == 1, lg[1], select(lane == 2, lg[2], lg[3])));
    if (lane < 4) acc[0] += bce_term(l + __ldg(b2 + p0 + lane), __ldg(xr + p0 + lane));
  }
  warp_allsum(acc);
  if (lane == 0 && row < B) store_row(out, B, row, acc[0], -0.5f * acc[1]);
}

// Persistent, launched cooperatively in clusters of C blocks (C = 1: no cluster): every block first
// splits its share of the weights into the workspace `ws` (hi + lo FP16 in the stages' layout),
// then, after a grid sync, the blocks of cluster k take tiles k, k + clusters, ... of 128 rows, rank r
// the columns Plan<C> gives it (clusters past the last tile are spares: with enough of them they draw
// all the noise). Warps 8-11 stream each chunk into one of NS stages (the weights by one bulk copy on
// the stage's `full` mbarrier, layer 1's x by cp.async on `xfull`) and draw the tile's noise (`nfull`)
// unless the spares or the entry draw (EARLY_NOISE) do; warps 0-7 run the layers and free each stage (`empty`). In a cluster the ranks push
// their layer-2 partial sums into each other's ACT (counted on `pfull`; C = 2, 4 by one bulk copy per
// peer from their own ACT, whose overwrite waits for every peer's receipt, `xdone`), the peers' recon
// sums into rank 0's RED (`rfull`), and each tells its peers when the next tile's pushes may start
// (`pfree`: its ACT reads of the last tile are done).
template <int C, bool HALF = false>   // HALF: 64-row tiles (C = 6 or 8; see half_combine)
__global__ void __launch_bounds__(wg::THREADS, 1)
vae_elbo_kernel_wg(const float* __restrict__ x,
                   const float* __restrict__ We, const float* __restrict__ be,
                   const float* __restrict__ Wmu, const float* __restrict__ bmu,
                   const float* __restrict__ Wlv, const float* __restrict__ blv,
                   const float* __restrict__ W1, const float* __restrict__ b1,
                   const float* __restrict__ W2, const float* __restrict__ b2,
                   float* __restrict__ out, int B, Noise noise, uint8_t* __restrict__ ws
                   ) {
  using S = WgSmem;
  using namespace wg;
  using P = Plan<C>;
  extern __shared__ uint8_t smem_raw[];
  // 1024-byte aligned (the swizzled stages) as an offset into smem_raw, so the compiler still knows
  // every access is to shared memory (LDS / STS; a pointer rebuilt from an integer gave generic LD / ST)
  uint8_t* sm = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  const uint32_t stg_s = smem_u32(sm + S::STG);
  float* act = reinterpret_cast<float*>(sm + S::ACT);
  float* red = reinterpret_cast<float*>(sm + S::RED);
  float* isc = reinterpret_cast<float*>(sm + S::ISC);   // the weight rows' inverse scales (SC1 ..)
  uint64_t* full = reinterpret_cast<uint64_t*>(sm + S::BARS);
  uint64_t* empty = full + NS;
  uint64_t* xfull = empty + NS;   // layer 1: x's cp.async, one arrival per producer thread
  uint64_t* nfull = xfull + NS;   // the tile's noise drawn, one arrival per producer thread
  uint64_t* pfull = nfull + 1;    // cluster: the peers' partial mu | logvar sums landed (bytes; one local arrival)
  uint64_t* rfull = pfull + 1;    // ... their recon sums (rank 0)
  uint64_t* pfree = rfull + 1;    // ... every peer finished the last tile (one arrival each)
  uint64_t* xdone = pfree + 1;    // ... every peer received this rank's partials (RS; one arrival each)
  uint64_t* hfull = xdone + 1;    // C = 8, ranks 0-3: rank + 4's layer-1 partial sums landed (bytes)
  uint64_t* zfull = hfull + 1;    // RS: the other layer-2 ranks' z slices landed (bytes; C = 8 ranks 4-7: all 4)
  uint64_t* zdone = zfull + 1;    // RS: every block that this rank sent its z slice to received it (one arrival each)
  uint64_t* iscful = zdone + 1;   // the scale table's bulk copy landed
  const int tid = threadIdx.x, lane = tid & 31, q = lane & 3;
  static_assert(!HALF || C == 6 || C == 8, "64-row tiles: clusters of 6 or 8 only");
  constexpr int TR = HALF ? 64 : BM, HDIV = HALF ? 2 : 1;   // the tile's rows; the exchanges' bytes shrink by HDIV
  const int tiles = (B + TR - 1) / TR;
  const int rank = C == 1 ? 0 : (int)cg::this_cluster().block_rank();
  const int cluster = blockIdx.x / C, clusters = gridDim.x / C;
  float* eps_buf = reinterpret_cast<float*>(ws + WS_BYTES + (size_t)blockIdx.x * NOISE_BYTES);   // [L][BM]
  float* eps0 = reinterpret_cast<float*>(ws + WS_BYTES + ((size_t)gridDim.x + cluster) * NOISE_BYTES);   // first tile's
  // Spare blocks: the host launches as many clusters as run at once, so where there are fewer tiles
  // the clusters past them have none. They share the weight split; and where they are enough to draw
  // at most SPARE_DRAWS values a thread (`spare_noise`: then each worker cluster has one tile) they draw
  // all the noise after the grid sync (tile t's into cluster t's eps0) while the workers run layer 1,
  // and count themselves done on WS_DONE (zeroed by block 0 before the sync).
  // (Recomputed where used, from B and %nctaid: values live across the whole kernel made ptxas spill
  // in the producers' 56 registers.)
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (tid == 0) __trap();   // built without sm_90a: no wgmma
#endif
  if (tid == 0) {
    for (int s = 0; s < NS; ++s) {
      mbar_init_count(&full[s], 1);   // producer thread 0's arrival with the stage's byte count
      mbar_init_count(&xfull[s], PRODUCERS);
      mbar_init_count(&empty[s], CONSUMERS / HDIV / 32);   // HALF: the one warpgroup that used the chunk
    }
    mbar_init_count(nfull, PRODUCERS);
    mbar_init(pfull); mbar_init(rfull);
    // pfree: one arrival from each block this one pushes to (C = 8: ranks 0-3 push z slices into every
    // other block, ranks 4-7 their layer-1 partials into rank - 4; C = 6: ranks 4, 5 into two owners each)
    mbar_init_count(pfree, P::KSPLIT1 && rank >= P::G2 ? P::NH : C > 1 ? C - 1 : 1);
    mbar_init_count(xdone, P::G2 > 1 ? P::G2 - 1 : 1);
    if constexpr (P::RS) {   // zdone: every block's receipt of this rank's z slice
      mbar_init(hfull); mbar_init(zfull);
      mbar_init_count(zdone, rank < P::G2 ? C - 1 : 1);
    }
    mbar_init(iscful);
    mbar_fence_init();   // the inits visible to the async proxy (bulk copies' byte counts) and the cluster
  }
#ifdef VAE_PROFILE   // (the globaltimer stamps compare blocks: which one ends the kernel)
  const long long t_entry = clock64();
  const unsigned long long g_entry = globaltimer_ns();
#endif
  // spares_draw's count in smem, read where needed (kept in registers across the tiles, it made the producers
  // spill at their 56 registers)
  const bool spares_draw = spare_noise<C, TR>(B);
  if (tid == 0) *reinterpret_cast<volatile unsigned*>(sm + S::SPARES) = spares_draw ? nctaid() - workers<C, TR>(B) : 0u;
  if (spares_draw && blockIdx.x == 0 && tid == 0)   // the done count zeroed before the grid sync; the spares add after it
    *reinterpret_cast<unsigned*>(ws + WS_DONE) = 0u;
  if constexpr (P::EARLY_NOISE)
    if (!spares_draw && cluster < tiles) draw_first_tile<C, TR>(eps0, noise_source(noise), cluster * TR, B, rank);
#ifdef VAE_PROFILE
  const long long t_drawn = clock64();
#endif
#ifndef VAE_WG_NO_WSPLIT   // dev: no split, the workspace as it was (wrong results)
  ws_split_weights(ws, We, Wmu, Wlv, W1, W2);
#endif
#ifdef VAE_PROFILE
  const long long t_split = clock64();
#endif
  asm volatile("fence.proxy.async.global;" ::: "memory");   // generic writes -> other blocks' bulk copies
  cg::this_grid().sync();
#ifdef VAE_PROFILE
  const long long t_sync = clock64();
#endif
  if ((int)blockIdx.x >= workers<C, TR>(B)) {   // ---- spare blocks: every tile's noise (or nothing), then done
    if (spares_draw) {
      draw_all_tiles<TR>(reinterpret_cast<float*>(ws + WS_BYTES + (size_t)gridDim.x * NOISE_BYTES), noise_source(noise),
                     tiles, B, (int)blockIdx.x - workers<C, TR>(B), (int)gridDim.x - workers<C, TR>(B));
      __threadfence();   // each thread's eps stores, then the block's one release
      __syncthreads();
      if (tid == 0) asm volatile("red.release.gpu.global.add.u32 [%0], 1;" :: "l"(ws + WS_DONE) : "memory");
    }
#ifdef VAE_PROFILE
    if (tid == 0 && (int)blockIdx.x == workers<C, TR>(B))
      printf("prof wg C=%d B=%d spare block %d: split + sync %lld, then draws %lld cycles; globaltimer entry %llu end "
             "%llu ns\n", C, B, (int)blockIdx.x, t_sync - t_drawn, clock64() - t_sync, g_entry, globaltimer_ns());
#endif
    return;
  }
  if (tid == 0) {   // the scale table (other blocks wrote it) by one bulk copy: a loop of L2 loads
    asm volatile("fence.proxy.async.global;" ::: "memory");   // was one round trip per trip; 4 at once spilled
    mbar_expect(iscful, WROWS_ALL * 4);
    bulk_copy(isc, ws + WS_SCALES, WROWS_ALL * 4, iscful);
  }
  if constexpr (C > 1) cg::this_cluster().sync();   // the peers' mbarriers initialized before any remote arrival
  else __syncthreads();                             // (and eps0 written)
  mbar_wait(iscful, 0);

  if (tid >= CONSUMERS) {   // ---- producer warps
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(PRODUCER_REGS));   // registers to the consumers
#endif
    const int pt = tid - CONSUMERS;   // this thread's x row
    if (pt == 0) asm volatile("fence.proxy.async.global;" ::: "memory");
    const NoiseDraw draw = noise_source(noise);
    int c = 0;
    for (int t = cluster; t < tiles; t += clusters) {
      const int row0 = t * TR;
      // chunk of the tile, for the noise schedule: started past it where others draw this tile's noise
      int ci = *reinterpret_cast<volatile unsigned*>(sm + S::SPARES) != 0u || (P::EARLY_NOISE && t == cluster) ||
               !P::runs_layer2(rank) ? 1 << 20 : 0;
      // chunk kc of a pass over rows n0 .. n0 + n - 1 of layer l into the next stage
      auto chunk = [&](Layer l, int n0, int n, int kc, bool with_x) {
        if (c >= NS) mbar_wait(&empty[c % NS], (c / NS - 1) & 1);
        uint8_t* st = sm + S::STG + (c % NS) * S::STAGE;
#ifdef VAE_WG_NO_LOAD   // dev: no copies (wrong results)
        if (pt == 0) mbar_arrive(&full[c % NS]);
        if (with_x) mbar_arrive(&xfull[c % NS]);
#else
        if (pt == 0) {   // the weights' rows (hi | lo); the stage's bytes on `full`
          mbar_expect(&full[c % NS], n * ROWB);
          bulk_copy(st, ws + ws_at(l, kc, n0), n * ROWB, &full[c % NS]);
        }
        if (with_x) {   // layer 1: x row pt of the chunk (rows past B read as 0); its landing arrives on xfull
          const int row = row0 + pt;
          const bool ok = (TR == BM || pt < TR) && row < B;
          const uint32_t xs = smem_u32(st + S::WB + pt * ROWB);
#pragma unroll
          for (int u = 0; u < 4; ++u) cp_async16(xs + 16 * u, x + (ok ? (size_t)row * D + kc * wg::BK + 4 * u : 0), ok);
          asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(smem_u32(&xfull[c % NS])) : "memory");
        }
#endif
        if (ci < P::NOISE_EVERY * (L / P::NOISE_BATCH) && ci % P::NOISE_EVERY == 0) {   // eps of row pt (0 past B)
          const int j0 = ci / P::NOISE_EVERY * P::NOISE_BATCH, row = row0 + pt;   // columns j0 ..
          float e[P::NOISE_BATCH];
#pragma unroll
          for (int u = 0; u < P::NOISE_BATCH; ++u) e[u] = 0.f;
#ifndef VAE_WG_NO_NOISE   // dev: no draws (wrong results)
          if ((TR == BM || pt < TR) && row < B) draw.run((uint64_t)row * L + j0, e);
#endif
#pragma unroll
          for (int u = 0; u < P::NOISE_BATCH; ++u)
            asm volatile("st.global.f32 [%0], %1;" :: "l"(eps_buf + (j0 + u) * BM + pt), "f"(e[u]) : "memory");
          if (j0 + P::NOISE_BATCH == L) mbar_arrive(nfull);   // release: layer 2's loads after its wait see the values
        }
        ++c, ++ci;
      };
      const int k1a = P::k1_first(rank), k1b = P::runs_layer2(rank) ? P::KC1_LO : KC1;   // layer 1's K-chunks
#pragma unroll 1
      for (int p = 0; p < P::P1; ++p)
#pragma unroll 1
        for (int kc = k1a; kc < k1b; ++kc) chunk(WL1, P::n1(rank, p), P::n1w(rank), kc, true);
      if (P::runs_layer2(rank))
#pragma unroll 1
        for (int kc = 0; kc < P::kc2_count(rank); ++kc) chunk(WL2, 0, N2, P::kc2_first(rank) + kc, false);
#pragma unroll 1
      for (int p = 0; p < P::P3; ++p)
#pragma unroll 1
        for (int kc = 0; kc < KC3; ++kc) chunk(WL3, p * P::N3, P::N3, kc, false);
#pragma unroll 1
      for (int p = 0; p < P::P4; ++p)
#pragma unroll 1
        for (int kc = 0; kc < KC4; ++kc) chunk(WL4, P::n4(rank, p), P::w4(rank, p), kc, false);
    }
    return;
  }

  // ---- consumers: warpgroup wgi owns rows 64 wgi .. 64 wgi + 63 of each tile
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(CONSUMER_REGS));
#endif
  const int rw = (HALF ? 0 : 64 * (tid / 128)) + 16 * ((tid / 32) % 4) + (lane >> 2);   // rows rw, rw + 8 of the tile
  const int hg = tid >> 7;   // HALF: the warpgroup, which keeps row rw + 8 hg after each pass
  int c = 0;
  uint32_t xph = 0;   // bit s: the phase parity of xfull[s] to wait for
  for (int t = cluster, it = 0; t < tiles; t += clusters, ++it) {
    const int row0 = t * TR;
    float kl[2] = {0.f, 0.f}, recon[2] = {0.f, 0.f};   // partial sums of rows rw, rw + 8
    float amax[2] = {0.f, 0.f};   // largest |A value| this thread split, rows rw, rw + 8 (FP16 range check)
    if (C > 1 && tid == 0) {   // this tile's bytes from the peers
      if (P::runs_layer2(rank)) mbar_expect(pfull, P::XBYTES / HDIV);
      if constexpr (P::RS) {   // the z slices; C = 8, ranks 0-3: rank + 4's layer-1 partials
        if (P::KSPLIT1 && P::runs_layer2(rank)) mbar_expect(hfull, P::HBYTES / HDIV);
        mbar_expect(zfull, (P::runs_layer2(rank) ? P::ZRECV_LO : P::ZRECV_HI) / HDIV);
      }
      if (rank == 0) mbar_expect(rfull, (C - 1 + (P::RS ? P::G2 - 1 : 0)) * TR * 4);
    }
#if defined(VAE_PROFILE) || defined(VAE_TIMELINE)
    long long prof[6];
#endif
#ifdef VAE_PROFILE_CHUNKS
    long long inch[6] = {}, l2s[4] = {};   // in-chunk cycles at each PROF; layer 2's steps (block 0's thread 0)
#endif
    PROF(0);
    CHPROF(0);
    // ---- layer 1: h = relu(x We^T + be) -> ACT (this rank's units), P1 passes of N1 units
#pragma unroll 1
    for (int p = 0; p < P::P1; ++p) {
      auto x_at = [&](int st, int, int r) {   // x row r's values in stage st, as split_frags takes them
        return *reinterpret_cast<const float4*>(sm + S::STG + st * S::STAGE + S::WB + r * ROWB + 16 * q);
      };
      auto x_wait = [&](int st) {
        mbar_wait(&xfull[st], (xph >> st) & 1);   // the producers' x copies into stage st landed
        xph ^= 1u << st;
      };
      if constexpr (HALF) {   // 64-row tiles: each warpgroup on alternate chunks, then the two halves of K combined
        auto x_skip = [&](int st) { xph ^= 1u << st; };   // the other warpgroup's chunk: its x phase passes by
        if (!P::runs_layer2(rank)) {   // K-helper: NH quarters, one partial (64 rows) to each owner
          float hsum[P::NH * P::N1 / 2], hk[P::NH * P::N1 / 4];
          ws_run_half<P::NH * P::N1 / 2, VAE_WG_CHAINS1, KC1 - P::KC1_LO>(stg_s, full, empty, c, rw, q, lane, x_at, hsum,
                                                                          amax, x_wait, x_skip, hg);
          half_combine(hsum, hk, act, tid);
          const int col0 = P::n1(rank, 0);
#pragma unroll
          for (int j = 0; j < P::NH * P::N1 / 4; j += 2)
            *reinterpret_cast<float2*>(act + act_at(rw + 8 * hg, col0 + kcol(j, q))) = make_float2(hk[j], hk[j + 1]);
          push_partials<P::NH, P::HBYTES / HDIV>(act, col0, pfree, hfull, it, tid);
        } else {   // owner: its K part, the helper's partial added entry by entry, h stored
          float hsum[P::N1 / 2], hk[P::N1 / 4];
          ws_run_half<P::N1 / 2, VAE_WG_CHAINS1, P::KC1_LO>(stg_s, full, empty, c, rw, q, lane, x_at, hsum, amax, x_wait,
                                                          x_skip, hg);
          half_combine(hsum, hk, act, tid);
          mbar_wait_cluster(hfull, it & 1);
#pragma unroll
          for (int j = 0; j < P::N1 / 4; j += 2) {
            const float2 v = *reinterpret_cast<const float2*>(act + act_at(rw + 8 * hg, P::n1(rank, p) + kcol(j, q)));
            hk[j] += v.x;
            hk[j + 1] += v.y;
          }
          store_relu_row(act, hk, be, isc + SC1, P::n1(rank, p), rw + 8 * hg, q);
        }
        continue;
      }
      if constexpr (C == 6) {
      if (!P::runs_layer2(rank)) {   // C = 6's K-helpers: two quarters, one partial to each owner
        float hsum[P::NH * P::N1 / 2];
        ws_run<P::NH * P::N1 / 2, VAE_WG_CHAINS1, KC1 - P::KC1_LO>(stg_s, full, empty, c, rw, q, lane, x_at, hsum, amax,
                                                                   x_wait);
        const int col0 = P::n1(rank, 0);
#pragma unroll
        for (int i = 0; i < P::NH * P::N1 / 2; i += 2)   // into own ACT (free: no h here), then one bulk copy a quarter
          *reinterpret_cast<float2*>(act + act_at(rw + acc_row(i), col0 + acc_col(i, q))) = make_float2(hsum[i], hsum[i + 1]);
        push_partials<P::NH, P::HBYTES / HDIV>(act, col0, pfree, hfull, it, tid);
        continue;
      }
      }   // (C = 6)
      float sum[P::N1 / 2];
      auto run1 = [&](auto pass) {   // this rank's K-chunks of layer 1 (C = 8: 25 or 24)
        ws_run<P::N1 / 2, VAE_WG_CHAINS1, decltype(pass)::value>(stg_s, full, empty, c, rw, q, lane, x_at, sum, amax, x_wait);
      };
      if (P::runs_layer2(rank)) run1(std::integral_constant<int, P::KC1_LO>());
      else if constexpr (P::KSPLIT1) run1(std::integral_constant<int, KC1 - P::KC1_LO>());
      if constexpr (P::KSPLIT1) {   // C = 8: rank + 4's partial sums into rank's, through rank's own h quarter
        float* part = act + act_at(0, P::n1(rank, 0));   // one ACT quarter (64 columns x BM), same in both
        if (!P::runs_layer2(rank)) {   // ranks 4-7: into own ACT (free: no h here), then one bulk copy
#pragma unroll
          for (int i = 0; i < P::N1 / 2; i += 2)
            *reinterpret_cast<float2*>(act + act_at(rw + acc_row(i), P::n1(rank, 0) + acc_col(i, q))) =
                make_float2(sum[i], sum[i + 1]);
          fence_proxy_async_smem();
          consumers_sync();
          if (tid == 0) {
            if (it > 0) mbar_wait_cluster(pfree, (it - 1) & 1);   // rank - 4 is done with the last tile
            bulk_copy_peer(cluster_addr(part, rank - P::G2), part, P::HBYTES, cluster_addr(hfull, rank - P::G2));
          }
        } else {   // ranks 0-3: each thread adds its own entries (the same ones it stores next)
          mbar_wait_cluster(hfull, it & 1);
#pragma unroll
          for (int i = 0; i < P::N1 / 2; i += 2) {
            const float2 v = *reinterpret_cast<const float2*>(act + act_at(rw + acc_row(i), P::n1(rank, 0) + acc_col(i, q)));
            sum[i] += v.x;
            sum[i + 1] += v.y;
          }
        }
      }
      if (P::runs_layer2(rank)) store_relu(act, sum, be, isc + SC1, P::n1(rank, p), rw, q);
    }
    consumers_sync();
    PROF(1);
    CHPROF(1);
    // ---- layer 2: mu | logvar = h [Wmu; Wlv]^T + b; z = mu + exp(logvar / 2) eps -> Z; KL per row
    // The tile's noise for this thread's mu entries i0 .. i0 + E - 1 (E: eps's length; unit acc_col(i, q),
    // row rw + acc_row(i)): drawn by the spares or at entry (L2 reads), else by this block's producers.
    auto load_noise = [&](auto& eps, int i0) {
      constexpr int E = sizeof(eps) / sizeof(eps[0]);
      const unsigned spares = *reinterpret_cast<volatile unsigned*>(sm + S::SPARES);
      if (spares)   // wait for the spare blocks (long done by now, as a rule), then L2 reads
        while (ld_acquire_gpu(reinterpret_cast<const unsigned*>(ws + WS_DONE)) < spares) __nanosleep(64);
      if (spares || (P::EARLY_NOISE && it == 0)) {
#pragma unroll
        for (int e = 0; e < E; ++e)
          asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(eps[e]) : "l"(eps0 + acc_col(i0 + e, q) * BM + rw + acc_row(i0 + e)) : "memory");
      } else {
        mbar_wait(nfull, (it - P::EARLY_NOISE) & 1);   // the producers drew this tile's noise
#pragma unroll
        for (int e = 0; e < E; ++e)
          asm volatile("ld.global.f32 %0, [%1];" : "=f"(eps[e]) : "l"(eps_buf + acc_col(i0 + e, q) * BM + rw + acc_row(i0 + e)) : "memory");
      }
    };
    if (P::runs_layer2(rank)) {
      if constexpr (HALF) {   // 64-row tiles (RS, G2 = 4): the reduce-scatter of one kept row a thread
        constexpr int E = P::RS_E / 2, G2 = P::G2, NM = N2 / 8;   // a thread's mu entries per owner; then logvar's
        float sum[N2 / 2], k2[N2 / 4];
        ws_run_half<N2 / 2, 2, P::KC2_MAX>(stg_s, full, empty, c, rw, q, lane,
            [&](int, int kc, int r) { return act_frag(act, P::kc2_first(rank) + kc, r, q); }, sum, amax, [](int) {},
            [](int) {}, hg);
        half_combine(sum, k2, act, tid);   // (its barrier: every warp's h reads are done, the staging may overwrite h)
        const int i0 = rank * E;           // own entries: units kcol(i0 + e, q), row rw + 8 hg
#pragma unroll
        for (int s2 = 0; s2 < G2; ++s2) {
          if (s2 == rank) continue;
          float* st = act + P::rs_stage((s2 - rank + G2) % G2) + tid * 2 * E;
          *reinterpret_cast<float2*>(st) = make_float2(k2[s2 * E], k2[s2 * E + 1]);
          *reinterpret_cast<float2*>(st + E) = make_float2(k2[NM + s2 * E], k2[NM + s2 * E + 1]);
        }
        const unsigned spares = *reinterpret_cast<volatile unsigned*>(sm + S::SPARES);
        if (tid == 0 && spares)   // the spares drew this tile's noise (then it is the cluster's one tile, in eps0):
          while (ld_acquire_gpu(reinterpret_cast<const unsigned*>(ws + WS_DONE)) < spares) __nanosleep(64);
        fence_proxy_async_smem();   // (the barrier below orders every consumer's eps loads after thread 0's acquire)
        consumers_sync();
        if (tid == 0) {
          if (it > 0) mbar_wait_cluster(pfree, (it - 1) & 1);
#pragma unroll
          for (int j = 1; j < G2; ++j)
            bulk_copy_peer(cluster_addr(act + P::rs_in(rank), (rank + j) % G2), act + P::rs_stage(j), P::RSB / HDIV,
                           cluster_addr(pfull, (rank + j) % G2));
        }
        mbar_wait_cluster(pfull, it & 1);
        if (tid == 0)
#pragma unroll
          for (int j = 1; j < G2; ++j) mbar_arrive_cluster(xdone, (rank + j) % G2);
        float mu_s[E], lv_s[E], eps[E];
        rs_gather<P, E, NM>(k2, act, rank, tid, mu_s, lv_s);
        {   // the tile's noise for the kept row's entries (load_noise's, one row)
          const int off = rw + 8 * hg;
          if (spares || (P::EARLY_NOISE && it == 0)) {   // (spares: waited for above)
#pragma unroll
            for (int e = 0; e < E; ++e)
              asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(eps[e]) : "l"(eps0 + kcol(i0 + e, q) * BM + off) : "memory");
          } else {
            mbar_wait(nfull, (it - P::EARLY_NOISE) & 1);
#pragma unroll
            for (int e = 0; e < E; ++e)
              asm volatile("ld.global.f32 %0, [%1];" : "=f"(eps[e]) : "l"(eps_buf + kcol(i0 + e, q) * BM + off) : "memory");
          }
        }
        float* slot = act + P::rs_slot(rank);
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const int r = rw + 8 * hg, j = kcol(i0 + e, q);
          const float mu = __fmaf_rn(mu_s[e], isc_one(isc + SC2 + j), __ldg(bmu + j));
          const float lv = __fmaf_rn(lv_s[e], isc_one(isc + SC2 + L + j), __ldg(blv + j));
          slot[r * P::RS_UL + j - P::RS_UL * rank] = reparam_z(mu, lv, eps[e]);
          kl[0] += kl_term(mu, lv);
        }
        fence_proxy_async_smem();
        consumers_sync();
        if (tid == 0)
#pragma unroll
          for (int b = 0; b < C; ++b)
            if (b != rank) bulk_copy_peer(cluster_addr(slot, b), slot, P::ZSB / HDIV, cluster_addr(zfull, b));
      } else {
      float sum[N2 / 2];
      auto run2 = [&](auto pass) {   // this rank's own K-chunks (C = 3: 6 or 5)
        ws_run<N2 / 2, 2, decltype(pass)::value>(stg_s, full, empty, c, rw, q, lane,
            [&](int, int kc, int r) { return act_frag(act, P::kc2_first(rank) + kc, r, q); }, sum, amax, [](int) {});
      };
      if (P::kc2_count(rank) == P::KC2_MAX) run2(std::integral_constant<int, P::KC2_MAX>());
      else run2(std::integral_constant<int, P::KC2_MIN>());
      L2PROF(0);
      if constexpr (P::RS) {   // reduce-scatter: each owner's entries to it, z slices back (see Plan)
        constexpr int E = P::RS_E, G2 = P::G2, NM = N2 / 4;   // NM: a thread's mu entries (then logvar's)
        const int i0 = rank * E;   // own mu entries i0 .. i0 + E - 1: unit acc_col(i0 + e, q), row rw + acc_row(e)
        float eps[E];
        consumers_sync();   // every warp's h reads are done: the staging overwrites h
#pragma unroll
        for (int s2 = 0; s2 < G2; ++s2) {   // owner s2's entries (static register indices) -> its staging
          if (s2 == rank) continue;
          float* st = act + P::rs_stage((s2 - rank + G2) % G2) + tid * 2 * E;
#pragma unroll
          for (int e = 0; e < E; e += 4) {
            *reinterpret_cast<float4*>(st + e) =
                make_float4(sum[s2 * E + e], sum[s2 * E + e + 1], sum[s2 * E + e + 2], sum[s2 * E + e + 3]);
            *reinterpret_cast<float4*>(st + E + e) = make_float4(sum[NM + s2 * E + e], sum[NM + s2 * E + e + 1],
                                                                 sum[NM + s2 * E + e + 2], sum[NM + s2 * E + e + 3]);
          }
        }
        fence_proxy_async_smem();
        consumers_sync();
        if (tid == 0) {
          if (it > 0) mbar_wait_cluster(pfree, (it - 1) & 1);   // every block this one pushes to is done with the last tile
#pragma unroll
          for (int j = 1; j < G2; ++j)
            bulk_copy_peer(cluster_addr(act + P::rs_in(rank), (rank + j) % G2), act + P::rs_stage(j), P::RSB,
                           cluster_addr(pfull, (rank + j) % G2));
        }
        L2PROF(1);
        mbar_wait_cluster(pfull, it & 1);
        L2PROF(2);
        if (tid == 0)   // the peers' copies into this ACT are done: so are their reads of their staging
#pragma unroll
          for (int j = 1; j < G2; ++j) mbar_arrive_cluster(xdone, (rank + j) % G2);
        float mu_s[E], lv_s[E];   // own units' sums, every rank's partial in rank order (own from registers)
        rs_gather<P, E, NM>(sum, act, rank, tid, mu_s, lv_s);
        load_noise(eps, i0);
        L2PROF(3);
        float* slot = act + P::rs_slot(rank);   // own z slice [BM][RS_UL]: the copies' source
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const int r = rw + acc_row(e), j = acc_col(i0 + e, q);
          const float mu = __fmaf_rn(mu_s[e], isc_one(isc + SC2 + j), __ldg(bmu + j));
          const float lv = __fmaf_rn(lv_s[e], isc_one(isc + SC2 + L + j), __ldg(blv + j));
          slot[r * P::RS_UL + j - P::RS_UL * rank] = reparam_z(mu, lv, eps[e]);
          kl[(e >> 1) & 1] += kl_term(mu, lv);
        }
        fence_proxy_async_smem();
        consumers_sync();
        if (tid == 0) {   // own slice to every other block of the cluster (their pfree waited above)
#pragma unroll
          for (int b = 0; b < C; ++b)
            if (b != rank) bulk_copy_peer(cluster_addr(slot, b), slot, P::ZSB, cluster_addr(zfull, b));
        }
      } else {
        if constexpr (C > 1) {   // (C = 3) partial sums over this rank's h -> the peers by st.async; theirs
          if (it > 0) mbar_wait_cluster(pfree, (it - 1) & 1);   // added in rank order. The peers are done with
          uint32_t peer_bar[P::G2 - 1];                          // the last tile.
#pragma unroll
          for (int j = 1; j < P::G2; ++j) peer_bar[j - 1] = cluster_addr(pfull, (rank + j) % P::G2);
#pragma unroll
          for (int i = 0; i < N2 / 2; i += 2) {
            const float* at = act + act_at(rw + acc_row(i), P::part_col(rank) + acc_col(i, q));
#pragma unroll
            for (int j = 1; j < P::G2; ++j)
              st_async(cluster_addr(at, (rank + j) % P::G2), make_float2(sum[i], sum[i + 1]), peer_bar[j - 1]);
          }
          L2PROF(1);
          mbar_wait_cluster(pfull, it & 1);
          L2PROF(2);
#pragma unroll
          for (int i = 0; i < N2 / 2; i += 2) {
            float2 tot = make_float2(0.f, 0.f);
#pragma unroll
            for (int s = 0; s < P::G2; ++s) {
              float2 v = make_float2(sum[i], sum[i + 1]);
              if (s != rank) v = *reinterpret_cast<const float2*>(act + act_at(rw + acc_row(i), P::part_col(s) + acc_col(i, q)));
              tot.x += v.x;
              tot.y += v.y;
            }
            sum[i] = tot.x;
            sum[i + 1] = tot.y;
          }
        }
        float eps[N2 / 4];
        load_noise(eps, 0);
        consumers_sync();   // every warp's h (and partial) reads are done: Z overwrites h's last columns
        L2PROF(3);
#pragma unroll
        for (int i = 0; i < N2 / 4; ++i) {   // entries i < 16: mu (columns < 32); i + 16: logvar, same j
          const int r = rw + acc_row(i), j = acc_col(i, q);
          const float mu = __fmaf_rn(sum[i], isc_one(isc + SC2 + j), __ldg(bmu + j));
          const float lv = __fmaf_rn(sum[i + N2 / 4], isc_one(isc + SC2 + L + j), __ldg(blv + j));
          act[z_at(r, j)] = reparam_z(mu, lv, eps[i]);
          kl[(i >> 1) & 1] += kl_term(mu, lv);
        }
      }
      }   // (not HALF)
    }
    consumers_sync();
    if constexpr (P::RS) {   // every owner's z slice into Z
      mbar_wait_cluster(zfull, it & 1);
      if (tid == 0)   // the owners' copies have read their slots: they may overwrite them
#pragma unroll
        for (int p2 = 0; p2 < P::G2; ++p2)
          if (p2 != rank) mbar_arrive_cluster(zdone, p2);
      const int r = tid >> 1;   // thread: row tid / 2, columns 16 (tid & 1) .. + 15, 4 at a time
#pragma unroll
      for (int k4 = 0; k4 < 4; ++k4) {
        if (HALF && r >= TR) break;   // (64-row tiles: threads 0-127)
        const int k = 16 * (tid & 1) + 4 * k4;
        *reinterpret_cast<float4*>(act + z_at(r, k)) =
            *reinterpret_cast<const float4*>(act + P::rs_slot(k / P::RS_UL) + r * P::RS_UL + k % P::RS_UL);
      }
      consumers_sync();
    }
    PROF(2);
    CHPROF(2);
    // ---- layer 3: d = relu(z W1^T + b1) -> ACT, P3 passes of N3 units
#pragma unroll 1
    for (int p = 0; p < P::P3; ++p) {
      if constexpr (HALF) {
        float sum[P::N3 / 2], k3[P::N3 / 4];
        ws_run_half<P::N3 / 2, 2, KC3>(stg_s, full, empty, c, rw, q, lane,
            [&](int, int kc, int r) { return *reinterpret_cast<const float4*>(act + z_at(r, kc * 16 + 4 * q)); },
            sum, amax, [](int) {}, [](int) {}, hg);
        half_combine(sum, k3, act, tid);   // (its barrier: every warp's z reads of this pass are done)
        if (P::RS && p == 0 && P::runs_layer2(rank)) {
          mbar_wait_cluster(xdone, it & 1);
          mbar_wait_cluster(zdone, it & 1);
        }
        if (p == P::P3 - 1) consumers_sync();
        store_relu_row(act, k3, b1, isc + SC3, p * P::N3, rw + 8 * hg, q);
        continue;
      }
      float sum[P::N3 / 2];
      ws_run<P::N3 / 2, 2, KC3>(stg_s, full, empty, c, rw, q, lane,
          [&](int, int kc, int r) { return *reinterpret_cast<const float4*>(act + z_at(r, kc * 16 + 4 * q)); },
          sum, amax, [](int) {});
      if (P::RS && p == 0 && P::runs_layer2(rank)) {   // d's first quarter overwrites the staging and slots:
        mbar_wait_cluster(xdone, it & 1);             // every peer has received this rank's partials
        mbar_wait_cluster(zdone, it & 1);             // and every block its z slice
      }
      if (p == P::P3 - 1) consumers_sync();   // every warp's z reads are done: the last quarter of d overwrites Z
      store_relu(act, sum, b1, isc + SC3, p * P::N3, rw, q);
    }
    consumers_sync();
    PROF(3);
    CHPROF(3);
    // ---- layer 4: logits = d W2^T + b2 over this rank's pixels, P4 passes; BCE against x, row sums
    auto layer4 = [&](auto width, int n0) {
      constexpr int N4 = decltype(width)::value;
      float sum[N4 / 2];
      if constexpr (HALF) {   // one kept row (rw + 8 hg) a thread after the combine
        float k4[N4 / 4];
        ws_run_half<N4 / 2, VAE_WG_CHAINS4, KC4>(stg_s, full, empty, c, rw, q, lane,
            [&](int, int kc, int r) { return act_frag(act, kc, r, q); }, sum, amax, [](int) {}, [](int) {}, hg);
        half_combine(sum, k4, act, tid);
        const int row = row0 + rw + 8 * hg;
        float2 xv[N4 / 8];
#pragma unroll
        for (int j = 0; j < N4 / 4; j += 2)
          xv[j / 2] = row < B ? __ldg(reinterpret_cast<const float2*>(x + (size_t)row * D + n0 + kcol(j, q))) : make_float2(0.f, 0.f);
#pragma unroll
        for (int j = 0; j < N4 / 4; j += 2) {
          const int px = n0 + kcol(j, q);
          const float2 bias = __ldg(reinterpret_cast<const float2*>(b2 + px));
          const float2 sc = isc_pair(isc + SC4 + px);
          const float l0 = __fmaf_rn(k4[j], sc.x, bias.x), l1 = __fmaf_rn(k4[j + 1], sc.y, bias.y);
          const float t = bce_term_sp(l0, xv[j / 2].x) + bce_term_sp(l1, xv[j / 2].y);
          recon[0] += row < B ? t : 0.f;
        }
        return;
      }
      ws_run<N4 / 2, VAE_WG_CHAINS4, KC4>(stg_s, full, empty, c, rw, q, lane,
          [&](int, int kc, int r) { return act_frag(act, kc, r, q); }, sum, amax, [](int) {});
      // every x value of the pass first: one memory latency, not 28. (Issued before the pass's chunks
      // instead, held in registers through them: +1.5-1.8 µs at C = 8, +7 at C = 4.)
      float2 xv[N4 / 4];
#pragma unroll
      for (int i = 0; i < N4 / 2; i += 2) {
        const int row = row0 + rw + acc_row(i), px = n0 + acc_col(i, q);
        xv[i / 2] = row < B ? __ldg(reinterpret_cast<const float2*>(x + (size_t)row * D + px)) : make_float2(0.f, 0.f);
      }
#pragma unroll
      for (int i = 0; i < N4 / 2; i += 2) {
        const int px = n0 + acc_col(i, q), row = row0 + rw + acc_row(i);
#ifdef VAE_WG_CHEAP_EPI   // dev: the epilogue's cost (wrong results)
        recon[(i >> 1) & 1] += sum[i] + sum[i + 1] + xv[i / 2].x;
        (void)row; (void)px;
#else
        const float2 bias = __ldg(reinterpret_cast<const float2*>(b2 + px));
        const float2 sc = isc_pair(isc + SC4 + px);
        const float l0 = __fmaf_rn(sum[i], sc.x, bias.x), l1 = __fmaf_rn(sum[i + 1], sc.y, bias.y);
#ifndef VAE_WG_LIBM_BCE   // dev: torch's formula on libm (the other kernels' bce_term)
        const float t = bce_term_sp(l0, xv[i / 2].x) + bce_term_sp(l1, xv[i / 2].y);
        recon[(i >> 1) & 1] += row < B ? t : 0.f;   // a select: rows past B hold garbage
#else
        if (row < B) recon[(i >> 1) & 1] += bce_term(l0, xv[i / 2].x) + bce_term(l1, xv[i / 2].y);
#endif
#endif
      }
    };
#pragma unroll 1
    for (int p = 0; p < P::P4; ++p) {
      if (p == 0 && rank == 0 && P::EXTRA > 0) layer4(std::integral_constant<int, P::WP + P::EXTRA>(), 0);
      else layer4(std::integral_constant<int, P::WP>(), P::n4(rank, p));
    }
    PROF(4);
    CHPROF(4);
#ifdef VAE_PROFILE_CHUNKS
    if (tid == 0 && t == cluster && blockIdx.x == 0) {   // ws_chunk's stamps over this tile's chunks
      printf("prof wg C=%d B=%d block 0, summed over its %lld chunks: full/x waits %lld, A loads + split %lld, "
             "wgmma %lld, free + promote %lld cycles\n", C, B, wg_chunk_prof[4], wg_chunk_prof[0], wg_chunk_prof[1],
             wg_chunk_prof[2], wg_chunk_prof[3]);
      printf("prof wg C=%d B=%d block 0, in chunks / layer: layer1 %lld / %lld, layer2 %lld / %lld, layer3 %lld / %lld, "
             "layer4 %lld / %lld; layer 2 after its chunks: partials out %lld, peers' wait %lld, sum + noise + syncs %lld, "
             "z + send %lld cycles\n", C, B, inch[1] - inch[0], prof[1] - prof[0], inch[2] - inch[1], prof[2] - prof[1],
             inch[3] - inch[2], prof[3] - prof[2], inch[4] - inch[3], prof[4] - prof[3], l2s[1] - l2s[0], l2s[2] - l2s[1],
             l2s[3] - l2s[2], prof[2] - l2s[3]);
      for (int i = 0; i < 6; ++i) wg_chunk_prof[i] = 0;
    }
#endif
    // ---- row sums over the 4 lanes that share a row (fixed butterfly), the peers' into rank 0, outputs
    // A row whose A values (on any rank) left FP16's range is recomputed in fp32 by wg_exact_row: the
    // peers flag theirs by sending NaN as the recon sum (a NaN sum, from NaN inputs, takes it too).
    // HALF: each thread finishes one row (rw + 8 hg), whose FP16-range max it first takes over both warpgroups
    if constexpr (HALF) {
      act[half_scr(hg, 0, tid & 127)] = amax[1 - hg];
      consumers_sync();
      amax[0] = fmaxf(amax[hg], act[half_scr(1 - hg, 0, tid & 127)]);
      consumers_sync();
    }
    constexpr int NROW = HALF ? 1 : 2;              // rows a thread finishes: rbase + 8 h, h < NROW
    const int rbase = rw + (HALF ? 8 * hg : 0);
    bool exact[2];
#pragma unroll
    for (int h = 0; h < NROW; ++h) {
#pragma unroll
      for (int o = 1; o <= 2; o <<= 1) {
        recon[h] += __shfl_xor_sync(0xffffffffu, recon[h], o);
        kl[h] += __shfl_xor_sync(0xffffffffu, kl[h], o);
        amax[h] = fmaxf(amax[h], __shfl_xor_sync(0xffffffffu, amax[h], o));
      }
      exact[h] = amax[h] >= 65504.f;
    }
    if (C > 1 && rank > 0) {
      if (q == 0)
#pragma unroll
        for (int h = 0; h < NROW; ++h) {
          st_async(cluster_addr(red + (rank - 1) * BM + rbase + 8 * h, 0), exact[h] ? __int_as_float(0x7fffffff) : recon[h],
                   cluster_addr(rfull, 0));
          if (P::RS && rank < P::G2)   // RS: the KL sums of this rank's latent units
            st_async(cluster_addr(red + (7 + rank - 1) * BM + rbase + 8 * h, 0), kl[h], cluster_addr(rfull, 0));
        }
    } else {
      if (C > 1) mbar_wait_cluster(rfull, it & 1);
#pragma unroll
      for (int h = 0; h < NROW; ++h) {
        const int row = row0 + rbase + 8 * h;
#pragma unroll
        for (int j = 1; j < C; ++j) recon[h] += red[(j - 1) * BM + rbase + 8 * h];   // rank order: fixed
        if constexpr (P::RS)
#pragma unroll
          for (int j = 1; j < P::G2; ++j) kl[h] += red[(7 + j - 1) * BM + rbase + 8 * h];
        exact[h] = (exact[h] || isnan(recon[h])) && row < B;
#ifdef VAE_WG_NO_EXACT   // dev: no fp32 fallback (wrong results where activations leave FP16's range)
        exact[h] = false;
#endif
        if (q == 0 && row < B && !exact[h]) store_row(out, B, row, recon[h], -0.5f * kl[h]);
      }
#pragma unroll
      for (int h = 0; h < NROW; ++h)   // the warp's flagged rows one by one (lane 4 g + 0 has row rbase + g)
        for (uint32_t todo = __ballot_sync(0xffffffffu, q == 0 && exact[h]); todo; todo &= todo - 1)
          wg_exact_row(x, We, be, Wmu, bmu, Wlv, blv, W1, b1, W2, b2, out, B,
                       row0 + rbase - (lane >> 2) + ((__ffs(todo) - 1) >> 2) + 8 * h, noise_source(noise), lane);
    }
    consumers_sync();   // the next tile's layer 1 writes ACT, which layer 4 read
    PROF(5);
#ifdef VAE_PROFILE
    if (tid == 0 && t == cluster && (blockIdx.x == 0 || (int)blockIdx.x == workers<C, TR>(B) - 1))   // first, last worker
      printf("prof wg C=%d B=%d block %d: first-tile noise %lld, then split + sync %lld (split %lld (block 0: loads + max "
             "%lld), grid sync %lld, scales + cluster sync %lld); layer1 %lld layer2 %lld layer3 %lld layer4 %lld, row sums + "
             "outputs %lld cycles; globaltimer entry %llu first tile done %llu ns\n", C, B, (int)blockIdx.x,
             t_drawn - t_entry, prof[0] - t_drawn, t_split - t_drawn,
             blockIdx.x == 0 ? wg_prof_split_loaded - t_drawn : 0ll, t_sync - t_split,
             prof[0] - t_sync, prof[1] - prof[0], prof[2] - prof[1], prof[3] - prof[2], prof[4] - prof[3], prof[5] - prof[4],
             g_entry, globaltimer_ns());
#endif
    if (C > 1 && tid == 0 && t + clusters < tiles) {   // the blocks that push into this one may push the next
      if (P::KSPLIT1 && !P::runs_layer2(rank)) {       // tile's (not after the last: they may have exited)
        for (int j = 0; j < P::G2; ++j) mbar_arrive_cluster(pfree, j);   // every layer-2 rank sends a z slice
      } else {
        for (int j = 1; j < P::G2; ++j) mbar_arrive_cluster(pfree, (rank + j) % P::G2);
        if (P::KSPLIT1) mbar_arrive_cluster(pfree, C == 6 ? P::G2 + rank / P::NH : rank + P::G2);   // the helper that
        // sends rank its layer-1 partials
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------
#ifndef VAE_EPS_INPUT
// Reserve Philox offsets for n normals exactly as torch's normal_ does
// (same thread count T and increment), under the generator's mutex.
static Noise reserve_noise(int64_t n, c10::DeviceIndex dev) {
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(dev);
  const uint64_t blocks_per_sm = prop->maxThreadsPerMultiProcessor / NOISE_BLOCK;
  const uint64_t grid = std::min<uint64_t>((uint64_t)prop->multiProcessorCount * blocks_per_sm,
                                           ((uint64_t)n + NOISE_BLOCK - 1) / NOISE_BLOCK);
  const uint64_t T = grid * NOISE_BLOCK;
  const uint64_t increment = (((uint64_t)n - 1) / (T * NOISE_UNROLL) + 1) * NOISE_UNROLL;
  auto gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(
      std::nullopt, at::cuda::detail::getDefaultCUDAGenerator(dev));
  Noise res;
  res.threads = T;
  {
    std::lock_guard<std::mutex> lock(gen->mutex_);
    res.st = gen->philox_cuda_state(increment);
  }
  return res;
}
#endif

// Error messages format numbers with std::to_string, never by streaming them: on the H200 machine (torch 2.11,
// Python 3.12) an integer streamed into c10::str's ostringstream from this extension segfaults (std::ostream's
// _M_insert<long> / <unsigned long>, seen under cuda-gdb); strings, devices and dtypes stream fine.
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
  TORCH_CHECK(shape_ok, "vae_forward: ", name, " has shape ", shape_str(t), ", expected (", std::to_string(rows),
              cols < 0 ? std::string(")") : ", " + std::to_string(cols) + ")");
  TORCH_CHECK(t.is_contiguous() && (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16) == 0,
              "vae_forward: ", name, " must be contiguous and 16-byte aligned");
}

// The 10 parameter pointers in launch order (We, be, Wmu, bmu, Wlv, blv, W1, b1, W2, b2).
struct Params { const float* p[10]; };

// Checks x, the 10 parameters and rows_per_tile; returns the parameter pointers.
static Params check_inputs(const at::Tensor& x, const at::Tensor& We, const at::Tensor& be, const at::Tensor& Wmu,
                           const at::Tensor& bmu, const at::Tensor& Wlv, const at::Tensor& blv, const at::Tensor& W1,
                           const at::Tensor& b1, const at::Tensor& W2, const at::Tensor& b2, int64_t rows_per_tile) {
  TORCH_CHECK(x.is_cuda(), "vae_forward: x must be a CUDA tensor, got device ", x.device());
  TORCH_CHECK_TYPE(x.scalar_type() == at::kFloat, "vae_forward: x must be float32, got ", x.scalar_type());
  TORCH_CHECK(x.dim() == 2 && x.size(1) == D, "vae_forward: x must have shape (B, " + std::to_string(D) + "), got " + shape_str(x));
  TORCH_CHECK(x.size(0) <= (int64_t)1 << 28, "vae_forward: batch size ", std::to_string(x.size(0)), " too large");
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
  TORCH_CHECK(rows_per_tile == 0 || rows_per_tile == 8 || rows_per_tile == 9 || rows_per_tile == 16 ||
              rows_per_tile == 32 || rows_per_tile == 64 || rows_per_tile == 128 || rows_per_tile == 129 ||
              rows_per_tile == 130 || rows_per_tile == 131 || rows_per_tile == 132 || rows_per_tile == 134 ||
              rows_per_tile == 136
#ifndef VAE_WG_NO_HALF
              || rows_per_tile == 70
#ifndef VAE_WG_NO_HALF8
              || rows_per_tile == 72
#endif
#endif
              ,
              "vae_forward: rows_per_tile must be 0 (auto), 8, 9 or 16 (cluster kernel), 32 or 64 (block-tile kernel), "
              "128 (tensor-core kernel, clusters of 1 to 4, 6 or 8 blocks by B), 128 + C (clusters of C = 1 to 4, 6 or 8) "
              "or 64 + C (tensor-core kernel, 64-row tiles in clusters of C = 6 or 8)");
  return {{We.data_ptr<float>(), be.data_ptr<float>(), Wmu.data_ptr<float>(), bmu.data_ptr<float>(),
           Wlv.data_ptr<float>(), blv.data_ptr<float>(), W1.data_ptr<float>(), b1.data_ptr<float>(),
           W2.data_ptr<float>(), b2.data_ptr<float>()}};
}

// A kernel reads x (and eps) as 16-byte rows: anything else is copied once.
static at::Tensor as_kernel_input(const at::Tensor& t) {
  if (t.is_contiguous() && (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16) == 0) return t;
  return t.clone(at::MemoryFormat::Contiguous);
}

// Sets the kernel's shared-memory limit once per device, launches it, checks the launch.
template <typename Kernel>
static void launch(Kernel kernel, size_t smem_bytes, int grid, int threads, bool (&configured)[64],
                   const float* x, const Params& w, float* out, int B, const Noise& noise,
                   cudaStream_t stream, c10::DeviceIndex dev) {
  if (!configured[dev]) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes));
    configured[dev] = true;
  }
  kernel<<<grid, threads, smem_bytes, stream>>>(x, w.p[0], w.p[1], w.p[2], w.p[3], w.p[4], w.p[5], w.p[6],
                                                w.p[7], w.p[8], w.p[9], out, B, noise);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// How many clusters of the cluster kernel fit on the device at once (15 on the H200: 120 of its
// 132 SMs), asked once per device.
static int max_clusters(c10::DeviceIndex dev) {
  static int cached[64];
  if (!cached[dev]) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(vae_elbo_kernel<9>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)Smem<9>::BYTES));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(CLUSTER * 64);
    cfg.blockDim = dim3(CK_THREADS);
    cfg.dynamicSmemBytes = Smem<9>::BYTES;
    int n = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, vae_elbo_kernel<9>, &cfg));
    cached[dev] = n > 0 ? n : 1;
  }
  return cached[dev];
}

// Which kernel runs for B rows when the caller asks for none (rows_per_tile = 0), from H200 runs (GPU
// µs, CUDA-graph replay): the cluster kernel at R=8 while B fits one wave of clusters (B=1: 11.7), R=9
// while that does (B=128: 15.0; R=8 needs two waves there: 21.9), then R=16 for at most R16_MAX_WAVES
// waves (~16 µs a wave of 15 clusters: B=256 33, 512 49, 768 61), then the tensor-core kernel: 64-row
// tiles in clusters of 8, then 6, while they fit one wave (v16: ~30 µs at B = 481-960, ~34 at 961-1088), then
// 128-row tiles split over clusters of 8 while they fit one wave (~39 µs from B=1089 to 1920), then of 6
// (2048: 45), 4, 3, 2, then whole (4096: 67 in clusters of 3; 8192: 82 of 2; 16384: 148, 65536: 577
// whole). On the H200 (15 clusters of 8) the tensor-core kernel takes B >= 481. The block-tile
// kernel (BM=32: 180 up to B=4096) is only asked for by name now, as is BM=64.
constexpr int64_t R16_MAX_WAVES = 2;

// The tensor-core kernel in clusters of C blocks: its shared-memory limit, set once per device, and
// how many clusters fit at once (one block per SM), asked once per device.
template <int C> static int wg_max_clusters(c10::DeviceIndex dev) {
  static int cached[64];
  if (!cached[dev]) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(vae_elbo_kernel_wg<C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)WgSmem::BYTES));
    int n = at::cuda::getDeviceProperties(dev)->multiProcessorCount;
    if (C > 1) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(C * 256);
      cfg.blockDim = dim3(wg::THREADS);
      cfg.dynamicSmemBytes = WgSmem::BYTES;
      cudaLaunchAttribute attr;
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = C;
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, vae_elbo_kernel_wg<C>, &cfg));
    }
    cached[dev] = n > 0 ? n : 1;
  }
  return cached[dev];
}

// Persistent and cooperative (a grid sync after the weight split), in clusters of C: at most one
// block per SM, as many clusters as run at once; cluster k takes tiles k, k + clusters, ... of 128
// rows (the clusters past the tiles are spares: see the kernel). The split weights and the noise go to
// a workspace.
template <int C, bool HALF = false>
static void launch_wg(const float* xp, const Params& w, float* op, int B, const Noise& noise,
                      const at::Tensor& x, cudaStream_t stream, c10::DeviceIndex dv) {
  // every cluster that runs at once: those past the tiles split weights and may draw the noise
  const int grid = wg_max_clusters<C>(dv) * C;
  if constexpr (HALF) {   // (wg_max_clusters set the attribute on the 128-row kernel only)
    static bool attr_set[64];
    if (!attr_set[dv]) {
      C10_CUDA_CHECK(cudaFuncSetAttribute(vae_elbo_kernel_wg<C, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)WgSmem::BYTES));
      attr_set[dv] = true;
    }
  }
  at::Tensor ws = at::empty({(int64_t)wg::WS_BYTES + (int64_t)(grid + grid / C) * wg::NOISE_BYTES},
                            x.options().dtype(at::kByte));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(wg::THREADS);
  cfg.dynamicSmemBytes = WgSmem::BYTES;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = C;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = C > 1 ? 2 : 1;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, vae_elbo_kernel_wg<C, HALF>, xp, w.p[0], w.p[1], w.p[2], w.p[3], w.p[4],
                                    w.p[5], w.p[6], w.p[7], w.p[8], w.p[9], op, B, noise, ws.data_ptr<uint8_t>()));
}

// One forward into out (3, B): picks the kernel by B (or rows_per_tile) and launches it on the
// current stream. x is contiguous and 16-byte aligned, B >= 1, the caller holds a device guard.
static void launch_forward(const at::Tensor& x, const Params& w, const Noise& noise, at::Tensor& out,
                           int64_t rows_per_tile) {
  const int64_t B = x.size(0);
  const c10::DeviceIndex dv = x.device().index();
  cudaStream_t stream = at::cuda::getCurrentCUDAStream(dv);
  int64_t R = rows_per_tile;
  if (R == 0) {   // the cluster kernel with the fewest rows per cluster that runs in one wave, R=16 for up to
    // R16_MAX_WAVES waves, then 128
    const int64_t clusters = max_clusters(dv);
    R = B <= 8 * clusters ? 8 : B <= 9 * clusters ? 9 : B <= 16 * R16_MAX_WAVES * clusters ? 16 : 128;
  }
  const float* xp = x.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const int Bi = (int)B;
  static bool conf8[64], conf9[64], conf16[64], conf32[64], conf64[64];
  switch (R) {
    case 8:  launch(vae_elbo_kernel<8>, Smem<8>::BYTES, (int)((B + 7) / 8) * CLUSTER, CK_THREADS, conf8,
                    xp, w, op, Bi, noise, stream, dv); break;
    case 9:  launch(vae_elbo_kernel<9>, Smem<9>::BYTES, (int)((B + 8) / 9) * CLUSTER, CK_THREADS, conf9,
                    xp, w, op, Bi, noise, stream, dv); break;
    case 16: launch(vae_elbo_kernel<16>, Smem<16>::BYTES, (int)((B + 15) / 16) * CLUSTER, CK_THREADS, conf16,
                    xp, w, op, Bi, noise, stream, dv); break;
#ifndef VAE_CK_ONLY   // dev: only the cluster kernel is compiled (builds in about half the time)
    case 32: launch(vae_elbo_kernel_tile<32>, TileSmem<32>::BYTES, (int)((B + 31) / 32), TT, conf32,
                    xp, w, op, Bi, noise, stream, dv); break;
    case 64: launch(vae_elbo_kernel_tile<64>, TileSmem<64>::BYTES, (int)((B + 63) / 64), TT, conf64,
                    xp, w, op, Bi, noise, stream, dv); break;
    default: {   // the tensor-core kernel: 128 + C forces clusters of C, 128 the largest C whose
      // clusters all fit at once (on the H200: up to 15 tiles x 8 blocks (B = 1920); 16-17 tiles x 6 (B = 2176);
      // up to B = 3840, 30 tiles x 4; B = 4096, 32 tiles x 3; B = 8192, 64 tiles x 2; then 1)
      const int64_t tiles = (B + wg::BM - 1) / wg::BM;
      const bool c8 = tiles <= wg_max_clusters<8>(dv);
      const bool c6 = !c8 && tiles <= wg_max_clusters<6>(dv);   // where those of 8 do not all fit (H200: 16, 17 tiles)
      const int64_t C = R > 128 ? R - 128 : c8 ? 8 : c6 ? 6 : tiles <= wg_max_clusters<4>(dv) ? 4
                      : tiles <= wg_max_clusters<3>(dv) ? 3 : tiles <= wg_max_clusters<2>(dv) ? 2 : 1;
#ifndef VAE_WG_NO_HALF   // 64-row tiles in clusters of 8, else 6, where they all fit at once (the H200: B <= 960,
      // <= 1088; the wg kernel runs from B = 481), or by rows_per_tile 72 and 70 (64 + C) (dev: VAE_WG_NO_HALF,
      // 128-row tiles there as in v14; VAE_WG_NO_HALF8, clusters of 6 as in v15)
      const int64_t tiles64 = (B + 63) / 64;
#ifndef VAE_WG_NO_HALF8
      if (R == 72 || (R == 128 && tiles64 <= wg_max_clusters<8>(dv))) {
        launch_wg<8, true>(xp, w, op, Bi, noise, x, stream, dv);
        break;
      }
#endif
      if (R == 70 || (R == 128 && tiles64 <= wg_max_clusters<6>(dv))) {
        launch_wg<6, true>(xp, w, op, Bi, noise, x, stream, dv);
        break;
      }
#endif
      if (C == 8) launch_wg<8>(xp, w, op, Bi, noise, x, stream, dv);
      else if (C == 6) launch_wg<6>(xp, w, op, Bi, noise, x, stream, dv);
      else if (C == 4) launch_wg<4>(xp, w, op, Bi, noise, x, stream, dv);
      else if (C == 3) launch_wg<3>(xp, w, op, Bi, noise, x, stream, dv);
      else if (C == 2) launch_wg<2>(xp, w, op, Bi, noise, x, stream, dv);
      else launch_wg<1>(xp, w, op, Bi, noise, x, stream, dv);
      break;
    }
#else
    default: TORCH_CHECK(false, "this VAE_CK_ONLY build runs the cluster kernel only (rows_per_tile 0, 8, 9, 16; B <= 480)");
#endif
  }
}

#ifndef VAE_EPS_INPUT
struct ParamSet { at::Tensor t[10]; };   // the 10 parameters, held (CPP_BIND binds the same struct)

// Row k of the (3, B) output as a tensor of its own on the same storage: what out.select(0, k) gives, made
// without the dispatcher and autograd's view records (three selects cost ~2 us of host time a call; no
// gradient flows through these outputs, and each row is a plain contiguous tensor).
static at::Tensor output_row(const at::Tensor& out, int64_t k) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(out.storage()), out.key_set(), out.dtype());
  impl->set_sizes_contiguous({out.size(1)});
  impl->set_storage_offset(out.storage_offset() + k * out.size(1));
  return at::Tensor(std::move(impl));
}

// The forward: returns (elbo, recon, kl), the rows of one (3, B) allocation.
std::tuple<at::Tensor, at::Tensor, at::Tensor> vae_forward(
    at::Tensor x, const at::Tensor& We, const at::Tensor& be, const at::Tensor& Wmu, const at::Tensor& bmu,
    const at::Tensor& Wlv, const at::Tensor& blv, const at::Tensor& W1, const at::Tensor& b1,
    const at::Tensor& W2, const at::Tensor& b2, int64_t rows_per_tile) {
  const Params w = check_inputs(x, We, be, Wmu, bmu, Wlv, blv, W1, b1, W2, b2, rows_per_tile);
  c10::cuda::CUDAGuard guard(x.device());
  const int64_t B = x.size(0);
  at::Tensor out = at::empty({3, B}, x.options());
  if (B > 0) launch_forward(as_kernel_input(x), w, reserve_noise(B * L, x.device().index()), out, rows_per_tile);
  return {output_row(out, 0), output_row(out, 1), output_row(out, 2)};
}

// ModelNew.forward's call: the 10 parameters held in a ParamSet made when they change. It holds the Parameters'
// own tensors (in-place edits and `.data =` are seen); vae_forward checks all 10 again every call.
std::shared_ptr<ParamSet> vae_params(const std::vector<at::Tensor>& t) {
  TORCH_CHECK(t.size() == 10, "vae_params: expected the 10 parameters (We, be, Wmu, bmu, Wlv, blv, W1, b1, W2, b2), "
              "got ", std::to_string(t.size()));
  auto p = std::make_shared<ParamSet>();
  for (int i = 0; i < 10; ++i) p->t[i] = t[i];
  return p;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> vae_forward_held(const at::Tensor& x, const ParamSet& p,
                                                                int64_t rows_per_tile) {
  const at::Tensor* t = p.t;
  return vae_forward(x, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], rows_per_tile);
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
  const Noise nr = reserve_noise(n, dev.index());
  const int64_t grid = std::min<int64_t>((n + NOISE_BLOCK - 1) / NOISE_BLOCK, 65535);
  draw_noise_kernel<<<grid, NOISE_BLOCK, 0, at::cuda::getCurrentCUDAStream(dev.index())>>>(
      out.data_ptr<float>(), n, nr.st, nr.threads);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
#else
// The exports' forward (noise as an input): returns the (3, B) tensor whose rows are elbo, recon, kl.
at::Tensor vae_forward_eps(
    at::Tensor x, at::Tensor eps, const at::Tensor& We, const at::Tensor& be, const at::Tensor& Wmu,
    const at::Tensor& bmu, const at::Tensor& Wlv, const at::Tensor& blv, const at::Tensor& W1,
    const at::Tensor& b1, const at::Tensor& W2, const at::Tensor& b2, int64_t rows_per_tile) {
  const Params w = check_inputs(x, We, be, Wmu, bmu, Wlv, blv, W1, b1, W2, b2, rows_per_tile);
  const int64_t B = x.size(0);
  TORCH_CHECK(eps.device() == x.device(), "vae_forward: eps is on ", eps.device(), " but x is on ", x.device());
  TORCH_CHECK_TYPE(eps.scalar_type() == at::kFloat, "vae_forward: eps must be float32, got ", eps.scalar_type());
  TORCH_CHECK(eps.dim() == 2 && eps.size(0) == B && eps.size(1) == L,
              "vae_forward: eps must have shape (", std::to_string(B), ", ", std::to_string(L), ") to match x, got ", shape_str(eps));
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty({3, B}, x.options());
  if (B > 0) {
    const at::Tensor e = as_kernel_input(eps);
    launch_forward(as_kernel_input(x), w, Noise{e.data_ptr<float>()}, out, rows_per_tile);
  }
  return out;
}
#endif
"""

CPP_DECL = (
    "std::tuple<at::Tensor, at::Tensor, at::Tensor> vae_forward(at::Tensor x, const at::Tensor& We, "
    "const at::Tensor& be, const at::Tensor& Wmu, const at::Tensor& bmu, const at::Tensor& Wlv, "
    "const at::Tensor& blv, const at::Tensor& W1, const at::Tensor& b1, const at::Tensor& W2, "
    "const at::Tensor& b2, int64_t rows_per_tile);\n"
    "at::Tensor draw_noise(int64_t rows, int64_t cols, int64_t device_index);\n"
)
# The module's host code and bindings (load_inline's, written out to add a class). ModelNew.forward calls
# vae_forward_held(x, params, rows_per_tile): the 10 parameters ride in a ParamSet made when they change, so a
# call converts 2 Python arguments instead of 12 (~2 us of host time). The ParamSet holds the Parameters'
# own tensors, so in-place edits and `.data =` are seen, and vae_forward checks all 10 again every call.
CPP_BIND = r"""
struct ParamSet { at::Tensor t[10]; };   // as in CUDA_SRC
std::shared_ptr<ParamSet> vae_params(const std::vector<at::Tensor>& t);
std::tuple<at::Tensor, at::Tensor, at::Tensor> vae_forward_held(const at::Tensor& x, const ParamSet& p,
                                                                int64_t rows_per_tile);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("vae_forward", torch::wrap_pybind_function(vae_forward), "vae_forward");
  m.def("draw_noise", torch::wrap_pybind_function(draw_noise), "draw_noise");
  pybind11::class_<ParamSet, std::shared_ptr<ParamSet>>(m, "ParamSet", pybind11::module_local());   // each build its own
  m.def("vae_params", torch::wrap_pybind_function(vae_params), "vae_params");
  m.def("vae_forward_held", torch::wrap_pybind_function(vae_forward_held), "vae_forward_held");
}
"""
# The exports' declaration (harness export): CUDA_SRC compiled with "#define VAE_EPS_INPUT" first.
CPP_DECL_EPS = (
    "at::Tensor vae_forward_eps(at::Tensor x, at::Tensor eps, const at::Tensor& We, const at::Tensor& be, "
    "const at::Tensor& Wmu, const at::Tensor& bmu, const at::Tensor& Wlv, const at::Tensor& blv, "
    "const at::Tensor& W1, const at::Tensor& b1, const at::Tensor& W2, const at::Tensor& b2, "
    "int64_t rows_per_tile);\n"
)


def _build():
    # The kernels use sm_90a features (clusters, bulk copy, warpgroup MMA): build for sm_90a only.
    saved = os.environ.get("TORCH_CUDA_ARCH_LIST")
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"
    try:
        extra = os.environ.get("VAE_EXTRA_CUDA_FLAGS", "").split()   # dev variants, see tools/kernel_dev.py
        suffix = "_" + hashlib.sha1(" ".join(extra).encode()).hexdigest()[:8] if extra else ""
        return load_inline(
            name="vae_elbo_fused_v15" + suffix,
            cpp_sources=CPP_DECL + CPP_BIND,
            cuda_sources=CUDA_SRC,
            functions=None,   # CPP_BIND's module
            extra_cuda_cflags=["-O3"] + extra,
            verbose=False,
        )
    finally:
        if saved is None:
            del os.environ["TORCH_CUDA_ARCH_LIST"]
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = saved


_ext = _build()
SUPPORTED_SIZES = (784, 256, 32)
# Parameter and submodule registrations anywhere, counted: a weight or a layer replaced after construction
# (`model.fc_mu.weight = nn.Parameter(w)`, `model.decoder[2] = nn.Linear(...)`) registers one, and the next
# forward picks up the new tensors instead of the old ones (in-place edits need nothing: same tensors).
_REGISTRATIONS = [0]


def _count_registration(*_args):
    _REGISTRATIONS[0] += 1   # returns None: the registration goes ahead unchanged


torch.nn.modules.module.register_module_parameter_registration_hook(_count_registration)
torch.nn.modules.module.register_module_module_registration_hook(_count_registration)


class ModelNew(nn.Module):
    """Same parameters as reference.Model; forward is one fused CUDA kernel (forward only, no autograd)."""

    _registrations_seen = -1   # _REGISTRATIONS when self._params was last taken (-1: take them at the first call)
    _held_for = None           # the self._params tuple that self._held (the extension's ParamSet) was made from

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

    def forward(self, x, rows_per_tile=0):
        if self._registrations_seen != _REGISTRATIONS[0]:   # a parameter or layer may have been replaced
            self._refresh_params()
            self._registrations_seen = _REGISTRATIONS[0]
        if self._held_for is not self._params:   # new tensors (construction, refresh, .to(), load_state_dict)
            self._held = _ext.vae_params(self._params)
            self._held_for = self._params
        return _ext.vae_forward_held(x, self._held, rows_per_tile)

    def __getstate__(self):
        # copy.deepcopy, pickle, torch.save: the ParamSet is a C++ object; the copy makes its own at its first call
        state = super().__getstate__()
        state.pop("_held", None)
        state.pop("_held_for", None)
        return state
