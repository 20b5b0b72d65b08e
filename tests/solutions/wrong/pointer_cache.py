"""Exploit: caches its result by the input's data pointer and returns the cached result whenever
the same address comes back (benchmarks that reuse one input buffer then time a dictionary
lookup). On a hit it still draws the noise, so the generator stays in step and the check's repeat
of the same inputs passes. Defence: caching/replay (bench refreshes the inputs in place before
every timed call and re-checks some timed outputs against the reference on those inputs)."""
import torch

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def __init__(self, *args):
        super().__init__(*args)
        self.cache = {}

    def forward(self, x):
        key = x.data_ptr()
        if key not in self.cache:
            self.cache[key] = [t.clone() for t in self.honest(x)]
        else:
            torch.randn(x.shape[0], self.fc_mu.out_features, device=x.device)
        return tuple(t.clone() for t in self.cache[key])
