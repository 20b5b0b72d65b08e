"""Fused VAE forward (ELBO) in one CUDA kernel launch: KernelBench export of solution.py.

Written by `python -m harness export --to kernelbench` from this repository's solution.py:
the same CUDA source, compiled with VAE_EPS_INPUT defined, so the kernel reads the noise
from the input eps instead of drawing it. forward(x, eps) returns the (3, B) float32 tensor
whose rows are elbo, recon_loss, kl_div (as the exported reference.py's Model). sm_90 only.
"""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

@@BUILD@@
SUPPORTED_SIZES = (784, 256, 32)
# Parameter and submodule registrations anywhere, counted: a weight or a layer replaced after construction
# registers one, and the next forward takes the new tensors (as solution.py does).
_REGISTRATIONS = [0]


def _count_registration(*_args):
    _REGISTRATIONS[0] += 1


torch.nn.modules.module.register_module_parameter_registration_hook(_count_registration)
torch.nn.modules.module.register_module_module_registration_hook(_count_registration)


class ModelNew(nn.Module):
    """Same parameters as Model; forward is one fused CUDA kernel (forward only, no autograd)."""

    _registrations_seen = -1

@@MODEL_METHODS@@
    def forward(self, x, eps):
        if self._registrations_seen != _REGISTRATIONS[0]:   # a parameter or layer may have been replaced
            self._refresh_params()
            self._registrations_seen = _REGISTRATIONS[0]
        return _ext.vae_forward_eps(x, eps, *self._params, 0)
