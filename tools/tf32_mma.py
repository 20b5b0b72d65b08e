"""CUDA helpers the tensor-core probes share (tools/mma_probe.py, layer_probe.py, gemm_probe.py,
wgmma_probe.py, hgmma_peak.py, wg_ladder.py, inbound_probe.py): the 3xTF32 operand split, one mma.sync m16n8k8 TF32 with
fp32 accumulation and the wgmma fence / commit / wait (HELPERS), the mbarrier, bulk-copy and cluster-exchange helpers
(MBAR_HELPERS) and the FP16 hi + lo split (F16_HELPERS), read out of solution.py's CUDA source (the
blocks between its `>>> name` and `<<< name` markers) without importing it, so the probes and the kernel
run the same code.
"""
import os

_SOLUTION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "solution.py")


def _block(name: str) -> str:
    with open(_SOLUTION) as f:
        text = f.read()
    start, end = text.index(f"// >>> {name}"), text.index(f"// <<< {name}")
    return text[start:end]


HELPERS = _block("tf32 helpers")
# smem_u32, mbar_init / mbar_init_count / mbar_arrive / mbar_expect / mbar_wait, mbar_fence_init, bulk_copy,
# cp_async16; across the cluster: mbar_wait_cluster, cluster_addr, st_async, mbar_arrive_cluster, bulk_copy_peer,
# fence_proxy_async_smem
MBAR_HELPERS = _block("mbarrier helpers")
# split16: two floats -> their FP16 hi pair and the FP16 pair of the remainders
F16_HELPERS = _block("fp16 helpers")
