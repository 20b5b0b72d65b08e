"""Do a cluster's small DSMEM messages and a block's bulk copies from L2 share one inbound path? (GPU)

The cluster kernel at R <= 9 sends its exchanges (mu | logvar partials, h2 rows) as 16-byte st.async while W2's
100 KB bulk copies land in the same SM; session 42 saw an exchange 8x larger (VAE_CK_PAG: 16 KB) delay W2 by
~0.9 µs. This probe times the two alone and together, with no math: 120 blocks in clusters of 8, one per SM;
thread 0 issues W bytes of bulk copies (7 of W / 7, global -> own smem: rank r reads its 98 x 1 KB slice of a
784 x 256 matrix, as W2), then every block sends nq float4 to each of its 7 peers, either as st.async from all
threads (mode "st.async": 7 nq 16-byte messages a block) or as one bulk copy per peer (mode "bulk": smem ->
peer smem, 7 copies of 16 nq bytes). Per block, %globaltimer from the start (after a cluster barrier) to: its
sends issued (thread 0), every peer's message landed in it, its W landed. Medians over the blocks, then over
21 launches, in µs.

Run on the GPU machine from the repository root (about a minute with the build):
    python3 tools/inbound_probe.py
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_launch  # noqa: E402
from tf32_mma import MBAR_HELPERS  # noqa: E402  (solution.py's own mbarrier, bulk-copy and st.async helpers)

W_BYTES = 98 * 256 * 4   # one rank's W2 slice, 100 352 bytes
SIZES = (16, 64, 144, 512)   # float4 per peer: a partials row, an h2 row, 9 partials rows, 8 KB

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
""" + MBAR_HELPERS + r"""
constexpr int WMAX = 98 * 256;    // floats of W: one rank's 98 rows of 256
constexpr int QMAX = 512;         // float4 per peer at most

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long v;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
  return v;
}

__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(256, 1)
inbound_probe(const float* __restrict__ g, int wbytes, int nq, int bulk, long long* __restrict__ out) {
  extern __shared__ __align__(128) float sm[];   // W [WMAX] | recv [8][nq] float4 | send [nq] float4 | 2 mbarriers
  float4* recv = reinterpret_cast<float4*>(sm + WMAX);
  float4* send = recv + 8 * QMAX;
  uint64_t* bars = reinterpret_cast<uint64_t*>(send + QMAX);
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank(), tid = threadIdx.x;
  if (tid == 0) {
    mbar_init(&bars[0]);
    mbar_init(&bars[1]);
    mbar_expect(&bars[0], (uint32_t)wbytes);
    mbar_expect(&bars[1], (uint32_t)(7 * nq * 16));
    mbar_fence_init();
  }
  for (int i = tid; i < nq; i += blockDim.x) send[i] = make_float4((float)rank, (float)i, 1.f, 2.f);
  fence_proxy_async_smem();
  cluster.sync();   // every block's mbarriers armed, every send buffer written
  const long long t0 = (long long)now_ns();
  if (tid == 0 && wbytes > 0) {
    const uint32_t chunk = (uint32_t)wbytes / 7;
    for (int c = 0; c < 7; ++c)
      bulk_copy(reinterpret_cast<char*>(sm) + c * chunk, reinterpret_cast<const char*>(g + (size_t)rank * WMAX) + c * chunk,
                chunk, &bars[0]);
  }
  if (!bulk) {
    for (int e = tid; e < 7 * nq; e += blockDim.x) {
      const int dst = (rank + 1 + e / nq) % 8, q = e % nq;
      st_async(cluster_addr(recv + rank * nq + q, dst), send[q], cluster_addr(&bars[1], dst));
    }
  } else if (tid < 7 && nq > 0) {
    const int dst = (rank + 1 + tid) % 8;
    bulk_copy_peer(cluster_addr(recv + rank * nq, dst), send, (uint32_t)(nq * 16), cluster_addr(&bars[1], dst));
  }
  const long long t1 = (long long)now_ns();
  long long t2 = t1, t3 = t1;
  if (tid == 0) {
    if (nq > 0) { mbar_wait_cluster(&bars[1], 0); t2 = (long long)now_ns(); }
    if (wbytes > 0) { mbar_wait(&bars[0], 0); t3 = (long long)now_ns(); }
  }
  cluster.sync();   // nobody leaves while a peer may still write into it
  if (tid == 0) {
    out[4 * blockIdx.x + 0] = t0;
    out[4 * blockIdx.x + 1] = t1;
    out[4 * blockIdx.x + 2] = t2;
    out[4 * blockIdx.x + 3] = t3;
  }
}

constexpr int SMEM = (WMAX + 9 * QMAX * 4) * 4 + 16;

void run_probe(at::Tensor g, int64_t wbytes, int64_t nq, bool bulk, at::Tensor out) {
  TORCH_CHECK(g.is_cuda() && g.numel() >= 8 * WMAX, "inbound probe: g must hold 8 slices of ", WMAX, " floats");
  TORCH_CHECK(out.is_cuda() && out.dtype() == at::kLong && out.numel() % 4 == 0, "inbound probe: out int64 (blocks, 4)");
  TORCH_CHECK(wbytes >= 0 && wbytes <= WMAX * 4 && wbytes % (7 * 16) == 0, "inbound probe: W a multiple of 112, <= 100352");
  TORCH_CHECK(nq >= 0 && nq <= QMAX, "inbound probe: nq in [0, ", QMAX, "]");
  const int blocks = (int)(out.numel() / 4);
  TORCH_CHECK(blocks % 8 == 0, "inbound probe: whole clusters of 8");
  static bool attr = false;
  if (!attr) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(inbound_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
    attr = true;
  }
  inbound_probe<<<blocks, 256, SMEM, at::cuda::getCurrentCUDAStream()>>>(
      g.data_ptr<float>(), (int)wbytes, (int)nq, bulk ? 1 : 0, reinterpret_cast<long long*>(out.data_ptr<int64_t>()));
  C10_CUDA_CHECK(cudaGetLastError());
}
"""
CPP = "void run_probe(at::Tensor g, int64_t wbytes, int64_t nq, bool bulk, at::Tensor out);"


def summarize(stamps):
    """stamps: a list of launches, each a list of per-block (t0, t1, t2, t3) in ns. Returns the medians over the
    launches of the per-launch medians over the blocks of (sends issued, exchange landed, W landed), in µs after
    that block's t0."""
    per = [[], [], []]
    for launch in stamps:
        for i in range(3):
            per[i].append(statistics.median((b[i + 1] - b[0]) / 1000.0 for b in launch))
    return tuple(statistics.median(v) for v in per)


def main():
    import torch
    ext = probe_launch.build("inbound_probe", CPP, CUDA)
    g = torch.rand(8 * 98 * 256, device="cuda")
    out = torch.zeros(120, 4, dtype=torch.int64, device="cuda")
    probe_launch.warm_clock()
    cases = [("W alone", W_BYTES, 0, False)]
    for nq in SIZES:
        for bulk in (False, True):
            for w in (0, W_BYTES):
                cases.append((f"{'bulk' if bulk else 'st.async'} {nq * 16} B/peer{' + W' if w else ''}", w, nq, bulk))
    print(f"{'case':<30s} {'sent':>7s} {'landed':>7s} {'W in':>7s}   (µs after the start, medians)")
    for name, w, nq, bulk in cases:
        sent, landed, w_in = summarize(probe_launch.stamps(lambda: ext.run_probe(g, w, nq, bulk, out), out))
        print(f"{name:<30s} {sent:7.2f} {landed if nq else float('nan'):7.2f} {w_in if w else float('nan'):7.2f}",
              flush=True)


if __name__ == "__main__":
    main()
