"""Honest: the reference's math written another way: matrix products as torch.addmm, the noise
drawn with torch.randn on the same shape, dtype and device (the same draw as randn_like), BCE
written out with torch's clamp of the log at -100, and KL as 0.5 * sum(mu^2 + e^logvar - 1 - logvar).
Must PASS: rounding differs from eager's but stays within the float64-truth rule."""
import torch

from tests.solutions.vae_base import VAE


def linear(layer, x):
    return torch.addmm(layer.bias, x, layer.weight.t())


class ModelNew(VAE):
    def forward(self, x):
        h = linear(self.encoder[0], x).clamp_min(0)
        mu, logvar = linear(self.fc_mu, h), linear(self.fc_logvar, h)
        std = (0.5 * logvar).exp()
        z = torch.addcmul(mu, std, torch.randn(std.shape, dtype=std.dtype, device=std.device))
        p = 1 / (1 + torch.exp(-linear(self.decoder[2], linear(self.decoder[0], z).relu())))
        recon = -(x * p.log().clamp_min(-100) + (1 - x) * (1 - p).log().clamp_min(-100)).sum(-1)
        kl = 0.5 * (mu * mu + logvar.exp() - 1 - logvar).sum(-1)
        return -(recon + kl), recon, kl
