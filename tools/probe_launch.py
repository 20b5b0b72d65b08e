"""C++ for the probes that launch cooperative and clustered at once (tools/xc_probe.py, tools/handoff_probe.py):
every block resident, so blocks may wait on other clusters' flags without deadlock.

    launch_coop_cluster(kernel, blocks, threads, smem_bytes, cluster, args...)

launches `kernel` on the current stream with cudaLaunchKernelEx (cooperative, cluster dimension `cluster` in x)
and checks the launch. The kernel's dynamic shared memory attribute is the caller's to set.
"""

COOP_CLUSTER_LAUNCH = r"""
template <class Kernel, class... Args>
void launch_coop_cluster(Kernel kernel, int blocks, int threads, int smem_bytes, int cluster, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = at::cuda::getCurrentCUDAStream();
  cudaLaunchAttribute a[2];
  a[0].id = cudaLaunchAttributeCooperative;
  a[0].val.cooperative = 1;
  a[1].id = cudaLaunchAttributeClusterDimension;
  a[1].val.clusterDim.x = cluster;
  a[1].val.clusterDim.y = 1;
  a[1].val.clusterDim.z = 1;
  cfg.attrs = a;
  cfg.numAttrs = 2;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
}
"""
