"""Exploit: when the reference has already run in this process on the same inputs, find its
outputs with gc and return them instead of computing. Defence: aliasing (outputs may not share
storage with the reference outputs the worker keeps alive); the static scan warns about gc."""
import gc

import torch

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        for obj in gc.get_objects():
            if (isinstance(obj, list) and len(obj) == 3 and all(type(t) is torch.Tensor for t in obj)
                    and all(t.shape == (x.shape[0],) and t.device == x.device for t in obj)):
                return tuple(obj)
        return self.honest(x)
