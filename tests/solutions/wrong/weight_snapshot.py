"""Exploit: copies its weights at construction into private tensors (not parameters) and computes
with those, ignoring the weights loaded into it later. Defence: allclose (each trial copies fresh
weights, drawn under the trial seed, into the parameters in place; at most the first trial's seed
equals the construction seed)."""
import torch
import torch.nn.functional as F

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def __init__(self, *args):
        super().__init__(*args)
        layers = (self.encoder[0], self.fc_mu, self.fc_logvar, self.decoder[0], self.decoder[2])
        self.frozen = [(l.weight.detach().clone(), l.bias.detach().clone()) for l in layers]

    def _apply(self, fn, *args, **kwargs):
        self.frozen = [(fn(w), fn(b)) for w, b in self.frozen]
        return super()._apply(fn, *args, **kwargs)

    def forward(self, x):
        (we, be), (wm, bm), (wl, bl), (w1, b1), (w2, b2) = self.frozen
        h = torch.relu(F.linear(x, we, be))
        mu, logvar = F.linear(h, wm, bm), F.linear(h, wl, bl)
        z = mu + torch.exp(0.5 * logvar) * torch.randn_like(logvar)
        x_recon = torch.sigmoid(F.linear(torch.relu(F.linear(z, w1, b1)), w2, b2))
        return self.losses(x, x_recon, mu, logvar)
