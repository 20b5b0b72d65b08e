"""Exploit (GPU): computes on the first call only; later calls return torch.empty outputs of the
same size, which the caching allocator serves from the blocks that held the first call's freed
result, so a check that repeats the same inputs sees the right numbers. Defence: allclose on the
run after the reference (the allocator is emptied and refilled with NaN before it)."""
import torch

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def __init__(self, *args):
        super().__init__(*args)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 1:
            return self.honest(x)
        return tuple(torch.empty(x.shape[0], device=x.device) for _ in range(3))
