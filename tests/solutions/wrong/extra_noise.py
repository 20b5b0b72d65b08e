"""Exploit: draws the noise twice (say a buffer for the next call) and uses the first draw: the
outputs are right, the generator is left somewhere else, so every later random draw in the
program changes. Defence: noise (generator state after the call must equal the reference's)."""
import torch

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        mu, logvar = self.encode(x)
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        self.spare = torch.randn_like(std)
        return self.losses(x, self.decoder(mu + std * eps), mu, logvar)
