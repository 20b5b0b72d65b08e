"""Exploit: returns NaN everywhere (a NaN compares unequal to everything, so a check written as
`not (abs(a - b) > tol)` would pass it). Defence: allclose (NaN/inf where the reference is finite is
counted as a mismatch)."""
import torch

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        nan = torch.full((x.shape[0],), float("nan"), device=x.device)
        return nan, nan.clone(), nan.clone()
