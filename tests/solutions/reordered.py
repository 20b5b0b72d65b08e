"""Honest: the same math in another op order (addmm, KL and BCE rewritten; logs clamped at -100 as torch does)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, input_dim, hidden_dim, latent_dim):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(input_dim, hidden_dim), nn.ReLU())
        self.fc_mu = nn.Linear(hidden_dim, latent_dim)
        self.fc_logvar = nn.Linear(hidden_dim, latent_dim)
        self.decoder = nn.Sequential(
            nn.Linear(latent_dim, hidden_dim), nn.ReLU(),
            nn.Linear(hidden_dim, input_dim), nn.Sigmoid())

    def forward(self, x):
        enc = self.encoder[0]
        h = torch.relu(torch.addmm(enc.bias, x, enc.weight.t()))
        logvar = F.linear(h, self.fc_logvar.weight, self.fc_logvar.bias)
        mu = F.linear(h, self.fc_mu.weight, self.fc_mu.bias)
        eps = torch.randn_like(mu)
        z = torch.addcmul(mu, torch.exp(logvar * 0.5), eps)
        d0, d2 = self.decoder[0], self.decoder[2]
        p = torch.sigmoid(F.linear(torch.relu(F.linear(z, d0.weight, d0.bias)), d2.weight, d2.bias))
        recon = -(x * torch.log(p).clamp_min(-100) + (1 - x) * torch.log1p(-p).clamp_min(-100)).sum(1)
        kl = 0.5 * (mu * mu + logvar.exp() - 1 - logvar).sum(1)
        return -(kl + recon), recon, kl
