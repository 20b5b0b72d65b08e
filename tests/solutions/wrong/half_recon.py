"""Exploit: rounds the reconstruction to float16 before the loss (as a kernel keeping it in half
precision on chip would). Each element is off by ~5e-4 relative, the row sums by less than the
allclose tolerance, so only the float64-truth rule sees it. Defence: precision (error against the
float64 truth exceeds 4x eager float32's + 1e-6)."""
import torch

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        mu, logvar = self.encode(x)
        z = mu + torch.exp(0.5 * logvar) * torch.randn_like(logvar)
        x_recon = self.decoder(z).half().float()
        return self.losses(x, x_recon, mu, logvar)
