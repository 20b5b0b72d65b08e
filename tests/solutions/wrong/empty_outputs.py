"""Exploit (GPU): computes nothing and returns torch.empty outputs, hoping the caching allocator
hands back a block that still holds a result computed earlier in this process. Defence: allclose
(the reference's outputs in the worker are kept alive, so their blocks are never handed out, and
the second run starts from an allocator poisoned with NaN)."""
import torch

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        return tuple(torch.empty(x.shape[0], device=x.device) for _ in range(3))
