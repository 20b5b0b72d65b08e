"""What the stamp probes share (tools/inbound_probe.py, tools/handoff_probe.py, tools/xc_probe.py).

C++, for the probes that launch cooperative and clustered at once (every block resident, so blocks may wait on
other clusters' flags without deadlock):

    launch_coop_cluster(kernel, blocks, threads, smem_bytes, cluster, args...)

launches `kernel` on the current stream with cudaLaunchKernelEx (cooperative, cluster dimension `cluster` in x)
and checks the launch. The kernel's dynamic shared memory attribute is the caller's to set.

Python: build() (the extension, or exit where there is no GPU, after the build), warm_clock(), and stamps() (a
launch repeated, the first few dropped, each launch's per-block stamps kept).
"""
import sys

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


def build(name, cpp, cuda):
    """The probe's extension (functions=["run_probe"]); exits after the build where there is no GPU to run it."""
    import torch
    from torch.utils.cpp_extension import load_inline
    ext = load_inline(name, cpp, cuda_sources=cuda, functions=["run_probe"], extra_cuda_cflags=["-O3"], verbose=False)
    if not torch.cuda.is_available():
        sys.exit(f"{name}: built; no GPU here to run it on")
    return ext


def warm_clock():
    """The SM clock up before timing (it idles low)."""
    import torch
    a = torch.randn(4096, 4096, device="cuda")
    for _ in range(200):
        a @ a


def stamps(launch, out, launches=21, warmup=5):
    """`launch()` run warmup + launches times; the per-block rows of `out` after each of the last `launches`."""
    import torch
    kept = []
    for k in range(warmup + launches):
        launch()
        if k >= warmup:
            kept.append(out.tolist())
    torch.cuda.synchronize()
    return kept
