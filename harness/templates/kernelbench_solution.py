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


class ModelNew(nn.Module):
    """Same parameters as Model; forward is one fused CUDA kernel (forward only, no autograd)."""

    def __init__(self, input_dim, hidden_dim, latent_dim):
        super().__init__()
        if (input_dim, hidden_dim, latent_dim) != SUPPORTED_SIZES:
            raise ValueError(
                f"ModelNew supports (input_dim, hidden_dim, latent_dim) = {SUPPORTED_SIZES} only, "
                f"got ({input_dim}, {hidden_dim}, {latent_dim})")
        self.encoder = nn.Sequential(nn.Linear(input_dim, hidden_dim), nn.ReLU())
        self.fc_mu = nn.Linear(hidden_dim, latent_dim)
        self.fc_logvar = nn.Linear(hidden_dim, latent_dim)
        self.decoder = nn.Sequential(
            nn.Linear(latent_dim, hidden_dim), nn.ReLU(),
            nn.Linear(hidden_dim, input_dim), nn.Sigmoid())
        self._refresh_params()

    def _refresh_params(self):
        # The Parameter objects themselves (not copies): in-place updates are seen on every call.
        enc, dec = self.encoder[0], self.decoder
        self._params = (enc.weight, enc.bias, self.fc_mu.weight, self.fc_mu.bias,
                        self.fc_logvar.weight, self.fc_logvar.bias,
                        dec[0].weight, dec[0].bias, dec[2].weight, dec[2].bias)

    def _apply(self, fn, *args, **kwargs):
        module = super()._apply(fn, *args, **kwargs)
        self._refresh_params()
        return module

    def load_state_dict(self, *args, **kwargs):
        result = super().load_state_dict(*args, **kwargs)
        self._refresh_params()
        return result

    def forward(self, x, eps):
        return _ext.vae_forward_eps(x, eps, *self._params, 0)
