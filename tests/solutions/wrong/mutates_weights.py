"""Exploit: computes the right answer, then nudges a weight in place by 2^-20 relative (as a solution
that repacks or pre-scales its weights on the first call would leave them). Defence: parameter
mutation (the state_dict is compared bitwise with the weights loaded for the trial)."""
import torch

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        out = self.honest(x)
        with torch.no_grad():
            self.decoder[2].weight.mul_(1.0 + 2.0 ** -20)
        return out
