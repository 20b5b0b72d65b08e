#!POPCORN leaderboard @@LEADERBOARD@@
"""Fused VAE forward (ELBO) in one CUDA kernel launch: GPU MODE export of solution.py.

Written by `python -m harness export --to gpumode` from this repository's solution.py: the
same CUDA source, compiled with VAE_EPS_INPUT defined, so the kernel reads the noise from
data's eps instead of drawing it. custom_kernel returns the three rows (views) of the one
(3, B) float32 tensor the kernel writes: elbo, recon_loss, kl_div. sm_90 only.
"""
import operator
import os

from torch.utils.cpp_extension import load_inline

from task import input_t, output_t

CUDA_SRC = "#define VAE_EPS_INPUT\n" + @@CUDA_SRC@@

CPP_DECL = @@CPP_DECL@@

# sm_90 only (clusters, bulk copy): built for it whatever TORCH_CUDA_ARCH_LIST the evaluator set
# (KernelBench's run_and_check.py sets it from gpu_arch, by default Ada), which is then restored.
_arch_list = os.environ.get("TORCH_CUDA_ARCH_LIST")
os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
_ext = load_inline(
    name="@@EXT_NAME@@",
    cpp_sources=CPP_DECL,
    cuda_sources=CUDA_SRC,
    functions=["vae_forward_eps"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)
if _arch_list is None:
    del os.environ["TORCH_CUDA_ARCH_LIST"]
else:
    os.environ["TORCH_CUDA_ARCH_LIST"] = _arch_list
# The reference Model's state_dict names, in the order vae_forward_eps takes them (one C call per forward).
WEIGHT_NAMES = tuple(f"{layer}.{kind}" for layer in ("encoder.0", "fc_mu", "fc_logvar", "decoder.0", "decoder.2")
                     for kind in ("weight", "bias"))
_weights_in_order = operator.itemgetter(*WEIGHT_NAMES)


def custom_kernel(data: input_t) -> output_t:
    x, eps, weights = data
    return _ext.vae_forward_eps(x, eps, *_weights_in_order(weights), 0).unbind(0)  # 3 row views, no copy
