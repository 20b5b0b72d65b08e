"""Failure (GPU): triggers a device-side assert (an out-of-range index on the GPU), which poisons
the process's CUDA context. Defence: the worker process (the harness survives and reports
ERROR, exit 2, with CUDA's message)."""
import torch

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        out = self.honest(x)
        bad = torch.full((1,), x.shape[0] + 1000, device=x.device, dtype=torch.long)
        return tuple(t[bad] for t in out)
