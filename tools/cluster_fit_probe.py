"""How many clusters of each size run at once on this GPU, for the fused kernels' launch shapes? (issue 10)

B = 1024 runs 8 tiles of 128 rows on 8 clusters of 8 (64 SMs) and B = 2048 16 tiles on 16 clusters of 4 (64 SMs):
clusters of 8 stop at 15 on the H200 (GPC sizes), and the rest of the SMs only draw noise. Other cluster sizes
could put more SMs on each tile: 16 clusters of 6 would run 2048's tiles on 96 SMs, 8 clusters of 12 (a
non-portable size) 1024's. This asks cudaOccupancyMaxActiveClusters, for cluster sizes 1-16, with a kernel of
the tensor-core kernel's shape (384 threads, one block per SM, ~204 KB of dynamic shared memory) and of the
cluster kernel's (256 threads, ~212 KB), and prints clusters and the SMs they cover. Run on the GPU machine
from the repository root (under a minute, most of it the build):

    python3 tools/cluster_fit_probe.py
"""
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>

__global__ void __launch_bounds__(384, 1) shape_k(float* out) {
  extern __shared__ float sm[];
  if (out == nullptr) return;
  sm[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  out[blockIdx.x] = sm[(threadIdx.x + 1) % blockDim.x];
}

// Clusters of `size` blocks of `threads` threads and `smem` bytes that run at once (0 where the size is refused).
int64_t max_clusters(int64_t size, int64_t threads, int64_t smem) {
  C10_CUDA_CHECK(cudaFuncSetAttribute(shape_k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  C10_CUDA_CHECK(cudaFuncSetAttribute(shape_k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t cfg = {};
  int dev = 0;
  C10_CUDA_CHECK(cudaGetDevice(&dev));
  int sms = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cfg.gridDim = dim3((unsigned)(size * (sms / size)));
  cfg.blockDim = dim3((unsigned)threads);
  cfg.dynamicSmemBytes = (size_t)smem;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = (unsigned)size;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int n = 0;
  const cudaError_t err = cudaOccupancyMaxActiveClusters(&n, shape_k, &cfg);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}
"""
CPP_SRC = "int64_t max_clusters(int64_t size, int64_t threads, int64_t smem);"


def main():
    import torch
    ext = load_inline("cluster_fit_probe", CPP_SRC, cuda_sources=CUDA_SRC, functions=["max_clusters"],
                      extra_cuda_cflags=["-O3", "-gencode=arch=compute_90a,code=sm_90a"], verbose=False)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    shapes = (("tensor-core kernel (384 threads, 204 KB)", 384, 204 * 1024),
              ("cluster kernel (256 threads, 212 KB)", 256, 212 * 1024))
    print(f"{sms} SMs; clusters that run at once (cudaOccupancyMaxActiveClusters) x size = SMs covered")
    print(f"{'size':>4} " + " ".join(f"{name:>44}" for name, _, _ in shapes))
    for size in range(1, 17):
        cells = []
        for _, threads, smem in shapes:
            n = ext.max_clusters(size, threads, smem)
            cells.append(f"{n:>3} clusters, {n * size:>3} SMs")
        print(f"{size:>4} " + " ".join(f"{c:>44}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
