"""How fast can one cluster hand a few KB to another through global memory? (GPU)

Every split measured that cuts the bytes an SM takes in (each of the cluster kernel's 15 clusters reads all 1.6 MB
of weights: ~280 KB an SM) pays a hand-off between clusters, and session 27's (tools/xc_probe.py: data stores,
a fence, a release add on a flag, the consumer's acquire poll, then its reads) cost ~1.75 µs on the path. This
probe times four ways for one block to hand n floats to one partner block, with no math, every block sending and
receiving at once (112 blocks in 14 clusters of 8, one per SM, a cooperative launch: all resident):
- "dsmem": the partner is rank ^ 1 of the same cluster, 16-byte st.async on its mbarrier (the cluster kernel's
  own exchange, for scale);
- "flag": the partner is the same rank of cluster c ^ 1; float4 stores to its inbox, a block barrier, then thread
  0's __threadfence and a release store of its flag; the partner's thread 0 polls the flag (acquire), clears it,
  and its threads read the inbox past L1;
- "ll": the same partner; every float travels with a tag in one 8-byte word (tag << 32 | bits), stored relaxed at
  gpu scope with no fence (an aligned 8-byte access is single-copy atomic, so a word with the tag holds its
  value); the partner's threads poll their own words until the tag shows, then clear them for the next launch
  (NCCL's LL protocol, rebuilt here from its description);
- "ll16": the same words, two to a 16-byte store and load;
- "dsmem8", "ll8": a group's all-to-all, n floats to each of the 7 other blocks of the cluster, by st.async or as
  tagged words through global memory (the exchanges of a group of 8 blocks that is not a cluster).
Optionally thread 0 first issues W = 100 KB of bulk copies into its own smem (a W2 slice), in flight during the
hand-off, since the kernel's exchanges share the SM's inbound path with such copies. All blocks start together
after a grid barrier (outside the timed stretch). Per block, %globaltimer from that start to: its sends issued,
its inbox landed (all values read and checked), its W landed; "one-way" is the inbox's landing minus its last
sender's start. Medians over the blocks, then over 21 launches, in µs. Every received value is checked against
what its sender stored; the probe fails on any mismatch, and on any wait that gives up (20 ms: every wait is
bounded, so a broken hand-off reports instead of hanging the GPU).

Run on the GPU machine from the repository root (about a minute with the build):
    python3 tools/handoff_probe.py
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_launch  # noqa: E402
from probe_launch import COOP_CLUSTER_LAUNCH  # noqa: E402
from tf32_mma import MBAR_HELPERS  # noqa: E402  (solution.py's own mbarrier, bulk-copy and st.async helpers)

CLUSTERS, CL = 14, 8                     # pairs of clusters (c, c ^ 1)
BLOCKS = CLUSTERS * CL
NMAX = 4096                              # floats per hand-off at most
W_BYTES = 98 * 256 * 4                   # one rank's W2 slice, 100 352 bytes
STUCK = 1 << 24                          # the kernel adds this to the error count for each wait that gave up
MODES = ("none", "dsmem", "flag", "ll", "ll16", "dsmem8", "ll8")
GROUP_MODES = ("dsmem8", "ll8")          # n floats to each of the 7 other blocks of the cluster
GROUP_SIZES = (64, 256, 512)             # a partials row, an h2 row, 2 h2 rows (8 slots of n fit NMAX)
SIZES = (64, 256, 1216, 4096)            # a row's mu | logvar, 4 rows, 19 rows, 16 KB

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
""" + MBAR_HELPERS + COOP_CLUSTER_LAUNCH + r"""
constexpr int CL = 8, NB = """ + str(BLOCKS) + r""", NMAX = """ + str(NMAX) + r""", WMAX = 98 * 256;
enum Mode { NONE = 0, DSMEM = 1, FLAG = 2, LL = 3, LL16 = 4, DSMEM8 = 5, LL8 = 6 };

__device__ __forceinline__ long long now_ns() {
  unsigned long long v;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
  return (long long)v;
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_word(unsigned long long* p, unsigned long long v) {
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_word(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_words2(unsigned long long* p, unsigned long long a, unsigned long long b) {
  asm volatile("st.relaxed.gpu.global.v2.b64 [%0], {%1, %2};" :: "l"(p), "l"(a), "l"(b) : "memory");
}
__device__ __forceinline__ void ld_words2(const unsigned long long* p, unsigned long long& a, unsigned long long& b) {
  asm volatile("ld.relaxed.gpu.global.v2.b64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}
constexpr unsigned long long TAG = 1ull << 32;
// the value block `src` sends as its i-th float (exact in fp32)
__device__ __forceinline__ float payload(int src, int i) { return (float)(src * 8192 + i); }
__device__ __forceinline__ unsigned long long tagged(float v) { return TAG | __float_as_uint(v); }

// Every wait here gives up after STUCK_NS (far beyond any hand-off) and adds STUCK to the error count, so a
// wrong probe reports instead of hanging the GPU. The clock is read every 1024th poll only (not to slow the polls).
constexpr long long STUCK_NS = 20000000;
constexpr unsigned STUCK = 1u << 24;
__device__ __forceinline__ bool stuck(unsigned& polls, long long since, unsigned* errors) {
  if ((++polls & 1023u) != 0u || now_ns() - since < STUCK_NS) return false;
  atomicAdd(errors, STUCK);
  return true;
}

// Grid barrier for a cooperative launch (thread 0 of each block): the last of NB arrivals resets the count and
// moves the generation on. gbar = {count, generation}, both kept across launches.
__device__ void grid_barrier(unsigned* gbar, unsigned* errors) {
  const unsigned gen = ld_acquire(gbar + 1);
  if (atomicAdd(gbar, 1u) == NB - 1) {
    atomicExch(gbar, 0u);
    st_release(gbar + 1, gen + 1);
  } else {
    const long long since = now_ns();
    unsigned polls = 0;
    while (ld_acquire(gbar + 1) == gen && !stuck(polls, since, errors)) {}
  }
}

__global__ void __launch_bounds__(256, 1)
handoff_probe(const float* __restrict__ w, int wbytes, int n, int mode, float* inbox, unsigned long long* words,
              unsigned* flags, unsigned* gbar, long long* __restrict__ out, unsigned* errors) {
  extern __shared__ __align__(128) float sm[];   // W [WMAX] | recv [NMAX] | 2 mbarriers
  float* recv = sm + WMAX;
  uint64_t* bars = reinterpret_cast<uint64_t*>(recv + NMAX);
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank(), tid = threadIdx.x, me = blockIdx.x;
  // pair modes: one partner (rank ^ 1 of this cluster for dsmem, this rank of cluster c ^ 1 otherwise), whose
  // values land in slot 0; group modes: the 7 other blocks of this cluster, sender rank s's values in slot s
  const bool group = mode == DSMEM8 || mode == LL8;
  const int base = me - rank, np = group ? CL - 1 : 1, my_slot = group ? rank : 0;
  const int peer = mode == DSMEM ? (me ^ 1) : (me ^ CL);
  auto dst_of = [&](int k) { return group ? base + (rank + 1 + k) % CL : peer; };   // the k-th receiver's block
  auto src_slot = [&](int k) { return group ? (rank + 1 + k) % CL : 0; };           // the k-th sender's slot here
  auto src_of = [&](int k) { return group ? base + src_slot(k) : peer; };           // ... and its block
  if (tid == 0) {
    mbar_init(&bars[0]);
    mbar_init(&bars[1]);
    mbar_expect(&bars[0], (uint32_t)wbytes);
    mbar_expect(&bars[1], mode == DSMEM || mode == DSMEM8 ? (uint32_t)(np * n * 4) : 0u);
    mbar_fence_init();
  }
  cluster.sync();   // every block's mbarriers armed before any st.async
  if (tid == 0) grid_barrier(gbar, errors);
  __syncthreads();
  const long long t0 = now_ns();
  if (tid == 0 && wbytes > 0) {
    const uint32_t chunk = (uint32_t)wbytes / 7;
    for (int c = 0; c < 7; ++c)
      bulk_copy(reinterpret_cast<char*>(sm) + c * chunk, reinterpret_cast<const char*>(w + (size_t)rank * WMAX) + c * chunk,
                chunk, &bars[0]);
  }
  // ---- send
  if (mode == DSMEM || mode == DSMEM8) {
    for (int e = tid; e < np * (n / 4); e += blockDim.x) {
      const int k = e / (n / 4), q = e % (n / 4), dst = dst_of(k) - base;
      st_async(cluster_addr(recv + my_slot * n + 4 * q, dst),
               make_float4(payload(me, 4 * q), payload(me, 4 * q + 1), payload(me, 4 * q + 2), payload(me, 4 * q + 3)),
               cluster_addr(&bars[1], dst));
    }
  } else if (mode == FLAG) {
    float4* dst = reinterpret_cast<float4*>(inbox + (size_t)peer * NMAX);
    for (int q = tid; q < n / 4; q += blockDim.x)
      dst[q] = make_float4(payload(me, 4 * q), payload(me, 4 * q + 1), payload(me, 4 * q + 2), payload(me, 4 * q + 3));
    __syncthreads();
    if (tid == 0) {
      __threadfence();
      st_release(flags + peer, 1u);
    }
  } else if (mode == LL || mode == LL8) {
    for (int e = tid; e < np * n; e += blockDim.x) {
      const int k = e / n, i = e % n;
      st_word(words + (size_t)dst_of(k) * NMAX + my_slot * n + i, tagged(payload(me, i)));
    }
  } else if (mode == LL16) {
    for (int q = tid; q < n / 2; q += blockDim.x)
      st_words2(words + (size_t)peer * NMAX + 2 * q, tagged(payload(me, 2 * q)), tagged(payload(me, 2 * q + 1)));
  }
  const long long t1 = now_ns();
  // ---- receive
  unsigned long long* mine = words + (size_t)me * NMAX;
  if (mode == DSMEM || mode == DSMEM8) {
    if (tid == 0) mbar_wait_cluster(&bars[1], 0);
    __syncthreads();
  } else if (mode == FLAG) {
    if (tid == 0) {
      unsigned polls = 0;
      while (ld_acquire(flags + me) == 0u && !stuck(polls, t0, errors)) {}
      flags[me] = 0u;   // for the next launch (kernel boundaries order it)
    }
    __syncthreads();
    const float4* src = reinterpret_cast<const float4*>(inbox + (size_t)me * NMAX);
    for (int q = tid; q < n / 4; q += blockDim.x) reinterpret_cast<float4*>(recv)[q] = __ldcg(src + q);
    __syncthreads();
  } else if (mode == LL || mode == LL8) {
    for (int e = tid; e < np * n; e += blockDim.x) {
      const int at = src_slot(e / n) * n + e % n;
      unsigned long long v;
      unsigned polls = 0;
      do v = ld_word(mine + at); while ((v >> 32) != 1u && !stuck(polls, t0, errors));
      recv[at] = __uint_as_float((unsigned)v);
    }
    __syncthreads();
  } else if (mode == LL16) {
    for (int q = tid; q < n / 2; q += blockDim.x) {
      unsigned long long a, b;
      unsigned polls = 0;
      do ld_words2(mine + 2 * q, a, b); while (((a >> 32) != 1u || (b >> 32) != 1u) && !stuck(polls, t0, errors));
      recv[2 * q] = __uint_as_float((unsigned)a);
      recv[2 * q + 1] = __uint_as_float((unsigned)b);
    }
    __syncthreads();
  }
  const long long t2 = now_ns();
  if (mode != NONE) {
    unsigned bad = 0;
    for (int e = tid; e < np * n; e += blockDim.x) {
      const int k = e / n, i = e % n;
      bad += recv[src_slot(k) * n + i] != payload(src_of(k), i);
    }
    if (bad) atomicAdd(errors, bad);
    if (mode == LL || mode == LL16 || mode == LL8)   // the words cleared for the next launch, after the stamp
      for (int e = tid; e < np * n; e += blockDim.x) st_word(mine + src_slot(e / n) * n + e % n, 0ull);
  }
  long long t3 = t2;
  if (tid == 0 && wbytes > 0) {
    mbar_wait(&bars[0], 0);
    t3 = now_ns();
  }
  cluster.sync();   // nobody leaves while a peer may still write into it
  if (tid == 0) {
    out[4 * me + 0] = t0;
    out[4 * me + 1] = t1;
    out[4 * me + 2] = t2;
    out[4 * me + 3] = t3;
  }
}

constexpr int SMEM = (WMAX + NMAX) * 4 + 16;

void run_probe(at::Tensor w, int64_t wbytes, int64_t n, int64_t mode, at::Tensor inbox, at::Tensor words,
               at::Tensor flags, at::Tensor gbar, at::Tensor out, at::Tensor errors) {
  TORCH_CHECK(w.is_cuda() && w.dtype() == at::kFloat && w.numel() >= CL * WMAX, "handoff probe: w must hold 8 slices of ", WMAX, " floats");
  TORCH_CHECK(inbox.is_cuda() && inbox.dtype() == at::kFloat && inbox.numel() == (int64_t)NB * NMAX, "handoff probe: inbox float32 (", NB, ", ", NMAX, ")");
  TORCH_CHECK(words.is_cuda() && words.dtype() == at::kLong && words.numel() == (int64_t)NB * NMAX, "handoff probe: words int64 (", NB, ", ", NMAX, ")");
  TORCH_CHECK(flags.is_cuda() && flags.dtype() == at::kInt && flags.numel() == NB, "handoff probe: flags int32 (", NB, ")");
  TORCH_CHECK(gbar.is_cuda() && gbar.dtype() == at::kInt && gbar.numel() == 2, "handoff probe: gbar int32 (2)");
  TORCH_CHECK(out.is_cuda() && out.dtype() == at::kLong && out.numel() == 4 * NB, "handoff probe: out int64 (", NB, ", 4)");
  TORCH_CHECK(errors.is_cuda() && errors.dtype() == at::kInt && errors.numel() == 1, "handoff probe: errors int32 (1)");
  TORCH_CHECK(wbytes >= 0 && wbytes <= WMAX * 4 && wbytes % (7 * 16) == 0, "handoff probe: W a multiple of 112, <= 100352");
  TORCH_CHECK(n >= 0 && n <= NMAX && n % 4 == 0, "handoff probe: n a multiple of 4 in [0, ", NMAX, "]");
  TORCH_CHECK(mode >= NONE && mode <= LL8, "handoff probe: mode 0..6");
  TORCH_CHECK((mode != DSMEM8 && mode != LL8) || n * CL <= NMAX, "handoff probe: group modes take n <= ", NMAX / CL);
  static bool attr = false;
  if (!attr) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(handoff_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
    attr = true;
  }
  launch_coop_cluster(handoff_probe, NB, 256, SMEM, CL, w.data_ptr<float>(), (int)wbytes, (int)n, (int)mode,
                      inbox.data_ptr<float>(), reinterpret_cast<unsigned long long*>(words.data_ptr<int64_t>()),
                      reinterpret_cast<unsigned*>(flags.data_ptr<int>()), reinterpret_cast<unsigned*>(gbar.data_ptr<int>()),
                      reinterpret_cast<long long*>(out.data_ptr<int64_t>()), reinterpret_cast<unsigned*>(errors.data_ptr<int>()));
}
"""
CPP = ("void run_probe(at::Tensor w, int64_t wbytes, int64_t n, int64_t mode, at::Tensor inbox, at::Tensor words,"
       " at::Tensor flags, at::Tensor gbar, at::Tensor out, at::Tensor errors);")


def senders_of(block: int, mode: str) -> list:
    """The blocks that send to `block`: rank ^ 1 of its cluster for dsmem, the other 7 blocks of its cluster for
    the group modes, else the same rank of the paired cluster."""
    if mode in GROUP_MODES:
        base = block - block % CL
        return [base + r for r in range(CL) if base + r != block]
    return [block ^ 1 if mode == "dsmem" else block ^ CL]


def summarize(launches, mode):
    """launches: a list of launches, each a list of per-block (t0, t1, t2, t3) in ns (t0 the common start, t1 the
    sends issued, t2 the inbox landed, t3 W landed). Returns the medians over the launches of the per-launch
    medians over the blocks of (sent, landed, one-way, W in) in µs: each after that block's own t0, except
    one-way, the inbox's landing after its last sender's t0."""
    per = [[], [], [], []]
    for blocks in launches:
        per[0].append(statistics.median((b[1] - b[0]) / 1000.0 for b in blocks))
        per[1].append(statistics.median((b[2] - b[0]) / 1000.0 for b in blocks))
        per[2].append(statistics.median((b[2] - max(blocks[s][0] for s in senders_of(i, mode))) / 1000.0
                                        for i, b in enumerate(blocks)))
        per[3].append(statistics.median((b[3] - b[0]) / 1000.0 for b in blocks))
    return tuple(statistics.median(v) for v in per)


def main():
    import torch
    ext = probe_launch.build("handoff_probe", CPP, CUDA)
    dev = "cuda"
    w = torch.rand(8 * 98 * 256, device=dev)
    inbox = torch.zeros(BLOCKS, NMAX, device=dev)
    words = torch.zeros(BLOCKS, NMAX, dtype=torch.int64, device=dev)
    flags = torch.zeros(BLOCKS, dtype=torch.int32, device=dev)
    gbar = torch.zeros(2, dtype=torch.int32, device=dev)
    out = torch.zeros(BLOCKS, 4, dtype=torch.int64, device=dev)
    errors = torch.zeros(1, dtype=torch.int32, device=dev)
    probe_launch.warm_clock()
    pair_modes = [m for m in MODES[1:] if m not in GROUP_MODES]
    cases = ([("none", 0, W_BYTES)] + [(m, n, wb) for n in SIZES for m in pair_modes for wb in (0, W_BYTES)]
             + [(m, n, wb) for n in GROUP_SIZES for m in GROUP_MODES for wb in (0, W_BYTES)])
    print(f"{'mode':<6s} {'B/peer':>6s} {'W':>3s} {'sent':>7s} {'landed':>7s} {'one-way':>7s} {'W in':>7s}"
          "   (µs after the common start, medians)")
    for mode, n, wb in cases:
        kept = probe_launch.stamps(
            lambda: ext.run_probe(w, wb, n, MODES.index(mode), inbox, words, flags, gbar, out, errors), out)
        bad = int(errors.item())
        if bad >= STUCK:
            sys.exit(f"handoff_probe: {mode} n={n}: a wait gave up after 20 ms ({bad // STUCK} times): "
                     "the hand-off is broken")
        if bad:
            sys.exit(f"handoff_probe: {mode} n={n}: {bad} received values differ from what was sent")
        sent, landed, one_way, w_in = summarize(kept, mode)
        nan = float("nan")
        print(f"{mode:<6s} {4 * n:6d} {'yes' if wb else 'no':>3s} {sent:7.2f} {landed if n else nan:7.2f} "
              f"{one_way if n else nan:7.2f} {w_in if wb else nan:7.2f}", flush=True)


if __name__ == "__main__":
    main()
