"""Variational autoencoder forward pass returning its evidence lower bound, noise as an input.

KernelBench export of this repository's reference.py (written by `python -m harness export
--to kernelbench`): the same Model, parameters and sizes, with two changes KernelBench's
evaluator needs. The noise eps is an input (get_inputs draws it) instead of torch.randn_like
inside forward, since KernelBench seeds once before the reference's forward and not again
before ModelNew's; and the three outputs come stacked in one tensor, since KernelBench
compares output.shape and calls torch.allclose on one tensor.

x: (batch_size, input_dim) float32 in [0, 1]; eps: (batch_size, latent_dim) float32, N(0, 1)
returns (3, batch_size) float32, rows elbo, recon_loss, kl_div:
  h = relu(x W_enc^T + b_enc); mu, logvar = fc_mu(h), fc_logvar(h)
  z = mu + exp(0.5 logvar) * eps;  x_recon = sigmoid(W2 relu(W1 z + b1) + b2)
  recon_loss = BCE(x_recon, x).sum(-1); kl_div = -0.5 sum(1 + logvar - mu^2 - e^logvar)
  elbo = -(recon_loss + kl_div)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, input_dim, hidden_dim, latent_dim):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(input_dim, hidden_dim), nn.ReLU())
        self.fc_mu = nn.Linear(hidden_dim, latent_dim)
        self.fc_logvar = nn.Linear(hidden_dim, latent_dim)
        self.decoder = nn.Sequential(
            nn.Linear(latent_dim, hidden_dim), nn.ReLU(),
            nn.Linear(hidden_dim, input_dim), nn.Sigmoid())

    def forward(self, x, eps):
        h = self.encoder(x)
        mu, logvar = self.fc_mu(h), self.fc_logvar(h)
        z = mu + torch.exp(0.5 * logvar) * eps
        x_recon = self.decoder(z)
        recon = F.binary_cross_entropy(x_recon, x, reduction="none").sum(-1)
        kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(-1)
        return torch.stack([-(recon + kl), recon, kl])


batch_size = 128
input_dim = 784
hidden_dim = 256
latent_dim = 32


def get_inputs():
    return [torch.rand(batch_size, input_dim), torch.randn(batch_size, latent_dim)]


def get_init_inputs():
    return [input_dim, hidden_dim, latent_dim]
