"""Exploit: skips the noise (z = mu), which is cheaper and deterministic. Defences: noise (the
default generator's state after the call differs from the reference's: nothing was drawn) and
allclose (the outputs differ)."""
from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        mu, logvar = self.encode(x)
        return self.losses(x, self.decoder(mu), mu, logvar)
