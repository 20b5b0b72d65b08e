"""Failure: the forward dereferences a null pointer (as a broken extension would) and the process
dies with SIGSEGV. Defence: the worker process (the harness reports ERROR, crash, exit 2)."""
import ctypes

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        ctypes.string_at(0)
        return self.honest(x)
