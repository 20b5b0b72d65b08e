"""Failure: the forward raises (as a TORCH_CHECK in a launcher would). Defence: the worker process
(the harness reports ERROR, exit 2, with the message and traceback)."""
from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        raise ValueError(f"only batch 128 is supported, got {x.shape[0]}")
