"""Incorrect: draws uniform noise (rand_like) where the reference draws normal noise. Defence:
allclose (recon and elbo differ; the generator advances the same way, so `noise` stays quiet)."""
import torch

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        mu, logvar = self.encode(x)
        z = mu + torch.exp(0.5 * logvar) * torch.rand_like(mu)
        return self.losses(x, self.decoder(z), mu, logvar)
