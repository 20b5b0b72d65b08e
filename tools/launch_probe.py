"""What a bare launch of the cluster kernel's shape costs, one property at a time (GPU, CUDA-graph replay).

The cluster kernel ended right after its entry (VAE_CK_STOP=0) takes 1.9 µs per forward on the H200, also
with 1 KB of shared memory instead of ~212 KB; the floor probe's empty kernel in clusters of 8 (128 x 256
threads) takes 0.9. This times empty kernels in clusters of 8 over 120 blocks, each differing from the plain
one in one way: the cluster kernel's arguments (13 pointers / ints and the Noise struct), its register count
(a never-taken branch that needs ~200 registers), its dynamic shared memory (212 KB), its code size (a
never-taken branch of ~8 K instructions), and all of them together. Then straight-line code against the same
FFMAs in a loop, run once per launch (does code that runs once per forward pay instruction fetches from L2?).

Run on the GPU machine from the repository root (about a minute, most of it the build):
    python3 tools/launch_probe.py
"""
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

struct Args13 { const float* p[11]; float* out; int B; };   // the cluster kernel's pointers and B
struct NoiseLike { uint64_t seed, offset; uint64_t* ptr; uint32_t inc; bool captured; uint64_t threads; };

__global__ void __cluster_dims__(8, 1, 1) plain_k(float* out, int flag) {
  if (flag == 12345) out[threadIdx.x] = 1.f;
}
__global__ void __cluster_dims__(8, 1, 1) args_k(const float* a0, const float* a1, const float* a2, const float* a3,
    const float* a4, const float* a5, const float* a6, const float* a7, const float* a8, const float* a9,
    const float* a10, float* out, int flag, NoiseLike n) {
  if (flag == 12345) out[threadIdx.x] = a0[0] + a10[0] + (float)n.seed;
}
// registers: a never-taken branch with 192 live accumulators (ptxas -v / cuobjdump -res-usage says how many)
__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(256, 1) regs_k(const float* in, float* out, int flag) {
  if (flag != 12345) return;
  float acc[192];
#pragma unroll
  for (int i = 0; i < 192; ++i) acc[i] = in[i * 256 + threadIdx.x];
#pragma unroll 1
  for (int k = 0; k < flag; ++k)
#pragma unroll
    for (int i = 0; i < 192; ++i) acc[i] = fmaf(acc[i], acc[(i + 1) % 192], 1.f);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 192; ++i) s += acc[i];
  out[threadIdx.x] = s;
}
// code size: a never-taken branch of ~N straight-line FFMAs (8 independent chains)
template <int N>
__global__ void __cluster_dims__(8, 1, 1) code_k(const float* in, float* out, int flag) {
  if (flag != 12345) return;
  float a[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = in[j * 256 + threadIdx.x];
#pragma unroll
  for (int i = 0; i < N / 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = fmaf(a[j], 1.0001f, (float)(i & 7));
  out[threadIdx.x] = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}
// run once per launch: N FFMAs in 8 chains, straight-line (UNROLL = N / 8) or in a loop (UNROLL = 1)
template <int N, int UNROLL>
__global__ void __cluster_dims__(8, 1, 1) run_k(const float* in, float* out, int flag) {
  float a[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = in[j * 256 + threadIdx.x];
#pragma unroll UNROLL
  for (int i = 0; i < N / 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = fmaf(a[j], 1.0001f, (float)(i & 7));
  const float s = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
  if (flag == 12345 || s == 12345.f) out[threadIdx.x] = s;
}
__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(256, 1) all_k(const float* a0, const float* a1,
    const float* a2, const float* a3, const float* a4, const float* a5, const float* a6, const float* a7,
    const float* a8, const float* a9, const float* a10, float* out, int flag, NoiseLike n) {
  if (flag != 12345) return;
  extern __shared__ float sm[];
  float acc[192];
#pragma unroll
  for (int i = 0; i < 192; ++i) acc[i] = a0[i * 256 + threadIdx.x] + a10[i] + (float)n.seed;
#pragma unroll
  for (int i = 0; i < 1024; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j * 24 + i % 24] = fmaf(acc[j * 24 + i % 24], acc[(j * 24 + i + 1) % 192], 1.f);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 192; ++i) s += acc[i];
  sm[threadIdx.x] = s;
  __syncthreads();
  out[threadIdx.x] = sm[(threadIdx.x + 1) % blockDim.x];
}

constexpr int SMEM = 212 * 1024;
static cudaStream_t stream() { return at::cuda::getCurrentCUDAStream(); }
void plain(torch::Tensor o, int64_t blocks, int64_t threads) {
  plain_k<<<blocks, threads, 0, stream()>>>(o.data_ptr<float>(), 0);
}
void args(torch::Tensor i, torch::Tensor o, int64_t blocks, int64_t threads) {
  const float* p = i.data_ptr<float>();
  args_k<<<blocks, threads, 0, stream()>>>(p, p, p, p, p, p, p, p, p, p, p, o.data_ptr<float>(), 0, NoiseLike{});
}
void regs(torch::Tensor i, torch::Tensor o, int64_t blocks, int64_t threads) {
  regs_k<<<blocks, threads, 0, stream()>>>(i.data_ptr<float>(), o.data_ptr<float>(), 0);
}
void smem(torch::Tensor o, int64_t blocks, int64_t threads) {
  static bool set = false;
  if (!set) { C10_CUDA_CHECK(cudaFuncSetAttribute(plain_k, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM)); set = true; }
  plain_k<<<blocks, threads, SMEM, stream()>>>(o.data_ptr<float>(), 0);
}
void code(torch::Tensor i, torch::Tensor o, int64_t blocks, int64_t threads, int64_t n) {
  if (n == 2048) code_k<2048><<<blocks, threads, 0, stream()>>>(i.data_ptr<float>(), o.data_ptr<float>(), 0);
  else code_k<8192><<<blocks, threads, 0, stream()>>>(i.data_ptr<float>(), o.data_ptr<float>(), 0);
}
void run(torch::Tensor i, torch::Tensor o, int64_t blocks, int64_t threads, int64_t n, bool straight) {
  const float* p = i.data_ptr<float>();
  float* q = o.data_ptr<float>();
  if (n == 2048) { if (straight) run_k<2048, 256><<<blocks, threads, 0, stream()>>>(p, q, 0);
                   else run_k<2048, 1><<<blocks, threads, 0, stream()>>>(p, q, 0); }
  else { if (straight) run_k<8192, 1024><<<blocks, threads, 0, stream()>>>(p, q, 0);
         else run_k<8192, 1><<<blocks, threads, 0, stream()>>>(p, q, 0); }
}
void all(torch::Tensor i, torch::Tensor o, int64_t blocks, int64_t threads) {
  static bool set = false;
  if (!set) { C10_CUDA_CHECK(cudaFuncSetAttribute(all_k, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM)); set = true; }
  const float* p = i.data_ptr<float>();
  all_k<<<blocks, threads, SMEM, stream()>>>(p, p, p, p, p, p, p, p, p, p, p, o.data_ptr<float>(), 0, NoiseLike{});
}
"""
CPP = """void plain(torch::Tensor o, int64_t blocks, int64_t threads);
void args(torch::Tensor i, torch::Tensor o, int64_t blocks, int64_t threads);
void regs(torch::Tensor i, torch::Tensor o, int64_t blocks, int64_t threads);
void smem(torch::Tensor o, int64_t blocks, int64_t threads);
void code(torch::Tensor i, torch::Tensor o, int64_t blocks, int64_t threads, int64_t n);
void run(torch::Tensor i, torch::Tensor o, int64_t blocks, int64_t threads, int64_t n, bool straight);
void all(torch::Tensor i, torch::Tensor o, int64_t blocks, int64_t threads);"""


def graph_us(fn, calls=50, reps=20):
    """GPU µs per call: CUDA-graph replay of `calls` calls, `reps` replays, median of 5."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    times = []
    for _ in range(5):
        g.replay()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(reps):
            g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3 / (calls * reps))
    return sorted(times)[2]


def main():
    ext = load_inline("launch_probe", CPP, cuda_sources=SRC,
                      functions=["plain", "args", "regs", "smem", "code", "run", "all"],
                      extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"])
    inp = torch.rand(192 * 256, device="cuda")
    out = torch.zeros(1024, device="cuda")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(50):   # warm the clock
        a @ a
    b, t = 120, 256
    rows = [("plain (120 x 256, clusters of 8)", lambda: ext.plain(out, b, t)),
            ("plain, 128 x 256", lambda: ext.plain(out, 128, t)),
            ("plain, 120 x 128", lambda: ext.plain(out, b, 128)),
            ("13 arguments + Noise-like struct", lambda: ext.args(inp, out, b, t)),
            ("~200 registers (launch_bounds 256, 1)", lambda: ext.regs(inp, out, b, t)),
            ("212 KB dynamic shared memory", lambda: ext.smem(out, b, t)),
            ("~2 K instructions never run", lambda: ext.code(inp, out, b, t, 2048)),
            ("~8 K instructions never run", lambda: ext.code(inp, out, b, t, 8192)),
            ("all of them (args, regs, smem, code)", lambda: ext.all(inp, out, b, t)),
            ("2 K FFMA run once, loop", lambda: ext.run(inp, out, b, t, 2048, False)),
            ("2 K FFMA run once, straight-line", lambda: ext.run(inp, out, b, t, 2048, True)),
            ("8 K FFMA run once, loop", lambda: ext.run(inp, out, b, t, 8192, False)),
            ("8 K FFMA run once, straight-line", lambda: ext.run(inp, out, b, t, 8192, True))]
    print(f"{'kernel':42s} GPU µs per launch (CUDA-graph replay, median of 5)")
    for name, fn in rows:
        print(f"{name:42s} {graph_us(fn):8.2f}", flush=True)


if __name__ == "__main__":
    main()
