"""Exploit: writes its outputs into the input's first three columns and returns views of them
(no allocation). Defence: aliasing (output storage overlaps an input), input mutation, and the
outputs are not contiguous (output type)."""
from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        elbo, recon, kl = self.honest(x)
        x[:, 0].copy_(elbo)
        x[:, 1].copy_(recon)
        x[:, 2].copy_(kl)
        return x[:, 0], x[:, 1], x[:, 2]
