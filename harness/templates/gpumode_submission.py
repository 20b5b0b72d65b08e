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

@@BUILD@@
# The reference Model's state_dict names, in the order vae_forward_eps takes them (one C call per forward).
WEIGHT_NAMES = tuple(f"{layer}.{kind}" for layer in ("encoder.0", "fc_mu", "fc_logvar", "decoder.0", "decoder.2")
                     for kind in ("weight", "bias"))
_weights_in_order = operator.itemgetter(*WEIGHT_NAMES)


def custom_kernel(data: input_t) -> output_t:
    x, eps, weights = data
    return _ext.vae_forward_eps(x, eps, *_weights_in_order(weights), 0).unbind(0)  # 3 row views, no copy
