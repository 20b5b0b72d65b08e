"""Can one launch be both cooperative (a grid-wide sync) and clustered (blocks sharing shared memory)?

Issue 11's cluster split of the tensor-core kernel needs both: the weight split into the workspace
ends in a grid sync, and the ranks of a cluster exchange activations through distributed shared
memory. This launches a kernel through cudaLaunchKernelEx with cudaLaunchAttributeCooperative and a
cluster dimension C (1, 2, 4), one block per SM: each block writes its rank into its peer's shared
memory, syncs the cluster, then the grid, and checks what it received. Prints, per C, whether the
launch was accepted, whether every block saw its peer's value and the grid sync's effect (a global
counter every block read after the sync), and the GPU time per launch (CUDA-graph-free, events).
Run on the GPU machine from the repository root: python3 tools/coop_cluster_probe.py
"""
import os

from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <cooperative_groups.h>
#include <torch/extension.h>
namespace cg = cooperative_groups;

__global__ void probe(int* counter, int* bad, int rounds) {
  __shared__ int got;
  cg::cluster_group cluster = cg::this_cluster();
  cg::grid_group grid = cg::this_grid();
  const unsigned rank = cluster.block_rank(), size = cluster.num_blocks();
  for (int r = 0; r < rounds; ++r) {
    if (threadIdx.x == 0) {
      int* peer = cluster.map_shared_rank(&got, (rank + 1) % size);
      *peer = (int)(rank * 1000 + r);
    }
    cluster.sync();
    if (threadIdx.x == 0) {
      const int want = (int)(((rank + size - 1) % size) * 1000 + r);
      if (got != want) atomicAdd(bad, 1);
      atomicAdd(counter, 1);
    }
    grid.sync();   // every block's increment of this round is visible after it
    if (threadIdx.x == 0 && *(volatile int*)counter < (int)gridDim.x * (r + 1)) atomicAdd(bad, 1);
    cluster.sync();   // `got` is not overwritten before everyone read it
  }
}

std::vector<double> run(int64_t cluster, int64_t rounds) {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const int grid = (sms / (int)cluster) * (int)cluster;
  auto opts = torch::TensorOptions().dtype(torch::kInt32).device(torch::kCUDA);
  torch::Tensor counter = torch::zeros({1}, opts), bad = torch::zeros({1}, opts);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(128);
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = (unsigned)cluster;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 2;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  cudaError_t err = cudaLaunchKernelEx(&cfg, probe, counter.data_ptr<int>(), bad.data_ptr<int>(), (int)rounds);
  cudaEventRecord(b);
  cudaError_t sync = cudaDeviceSynchronize();
  float ms = 0.f;
  cudaEventElapsedTime(&ms, a, b);
  cudaGetLastError();   // clear a launch error so the next configuration starts clean
  return {(double)err, (double)sync, (double)grid, (double)bad.item<int>(), (double)counter.item<int>(), ms * 1e3};
}
"""


def main():
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0a")
    ext = load_inline("coop_cluster_probe", cpp_sources="std::vector<double> run(int64_t, int64_t);",
                      cuda_sources=CUDA, functions=["run"], extra_cuda_cflags=["-O3"], verbose=False)
    rounds = 100
    print(f"{'cluster':>7s} {'launch':>8s} {'sync':>8s} {'grid':>5s} {'wrong':>6s} {'count ok':>8s} {'us/round':>9s}")
    for c in (1, 2, 4):
        err, sync, grid, bad, count, us = ext.run(c, rounds)
        print(f"{c:7d} {int(err):8d} {int(sync):8d} {int(grid):5d} {int(bad):6d} "
              f"{str(int(count) == int(grid) * rounds):>8s} {us / rounds:9.2f}")
    print("launch / sync: cudaError_t codes (0 = success); wrong: blocks that saw a wrong peer value or count")


if __name__ == "__main__":
    main()
