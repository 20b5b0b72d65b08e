"""Incorrect: returns (B, 1) columns instead of (B,) vectors. Defence: output type (shape)."""
from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        return tuple(o.unsqueeze(-1) for o in self.honest(x))
