"""Exploit: written for the default batch of 128 only: pads or truncates to 128 rows and returns
(128,) outputs whatever the batch. Defence: output type (shape checked against the reference's at
batch sizes other than the default)."""
import torch

from tests.solutions.vae_base import VAE

BATCH = 128


class ModelNew(VAE):
    def forward(self, x):
        rows = torch.zeros(BATCH, x.shape[1], device=x.device)
        n = min(BATCH, x.shape[0])
        rows[:n] = x[:n]
        return self.honest(rows.clamp(1e-6, 1 - 1e-6) if n < BATCH else rows)
