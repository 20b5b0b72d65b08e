"""Exploit: computes the right answer, then zeroes its input (a later call, or the reference run
after it, would see zeros). Defence: input mutation (inputs compared bitwise before/after the call)."""
from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        out = self.honest(x)
        x.zero_()
        return out
