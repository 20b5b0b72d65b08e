"""Exploit: computes the right answer, then scales its input in place by 1 + 2^-20 (a change far
below any tolerance). Defence: input mutation (the comparison is bitwise, not allclose)."""
from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        out = self.honest(x)
        x.mul_(1.0 + 2.0 ** -20)
        return out
