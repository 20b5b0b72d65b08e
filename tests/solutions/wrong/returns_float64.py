"""Exploit: computes and returns float64 (more accurate, but not the contract, and twice the bytes).
Defence: output type (dtype must equal the reference's)."""
from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        return tuple(t.double() for t in self.honest(x))
