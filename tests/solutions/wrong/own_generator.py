"""Exploit: draws its noise from a private generator with a fixed seed instead of torch's default
one. Defences: noise (default generator state unchanged after the call) and allclose."""
import torch

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        mu, logvar = self.encode(x)
        std = torch.exp(0.5 * logvar)
        gen = torch.Generator(device=x.device).manual_seed(1234)
        eps = torch.randn(std.shape, generator=gen, device=x.device, dtype=std.dtype)
        return self.losses(x, self.decoder(mu + std * eps), mu, logvar)
