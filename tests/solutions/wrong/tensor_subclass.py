"""Exploit: returns its outputs as a torch.Tensor subclass whose __eq__ and allclose-style
comparisons could be made to lie. Defence: output type (the type must be exactly torch.Tensor; the
values cross to the harness as raw bytes, never as the object)."""
import torch

from tests.solutions.vae_base import VAE


class AlwaysClose(torch.Tensor):
    def __eq__(self, other):
        return True


class ModelNew(VAE):
    def forward(self, x):
        return tuple(t.as_subclass(AlwaysClose) for t in self.honest(x))
