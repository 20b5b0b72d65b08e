"""Exploit: runs the four matrix products in bfloat16 (the fast path on tensor cores), float32
elsewhere. Defence: allclose (errors of ~1e-2 relative are far above atol = rtol = 1e-4)."""
import torch
import torch.nn.functional as F

from tests.solutions.vae_base import VAE


def linear_bf16(layer, x):
    return F.linear(x.bfloat16(), layer.weight.bfloat16(), layer.bias.bfloat16()).float()


class ModelNew(VAE):
    def forward(self, x):
        h = torch.relu(linear_bf16(self.encoder[0], x))
        mu, logvar = linear_bf16(self.fc_mu, h), linear_bf16(self.fc_logvar, h)
        z = mu + torch.exp(0.5 * logvar) * torch.randn_like(logvar)
        x_recon = torch.sigmoid(linear_bf16(self.decoder[2], torch.relu(linear_bf16(self.decoder[0], z))))
        return self.losses(x, x_recon, mu, logvar)
