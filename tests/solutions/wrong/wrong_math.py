"""Incorrect: the KL term lacks its factor 0.5. Defence: allclose (elbo and kl differ)."""
from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    @staticmethod
    def losses(x, x_recon, mu, logvar):
        elbo, recon, kl = VAE.losses(x, x_recon, mu, logvar)
        return -(recon + 2 * kl), recon, 2 * kl
