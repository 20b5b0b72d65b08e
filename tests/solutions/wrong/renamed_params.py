"""Exploit: names its layers differently from the reference, so the harness cannot load the trial
weights into it and it keeps its own. Defence: parameters (ModelNew's state_dict keys must equal
Model's)."""
import torch.nn as nn

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def __init__(self, input_dim, hidden_dim, latent_dim):
        super().__init__(input_dim, hidden_dim, latent_dim)
        self.enc = self.encoder
        del self.encoder

    def encode(self, x):
        h = self.enc(x)
        return self.fc_mu(h), self.fc_logvar(h)
