"""Failure: the forward never returns (a deadlocked kernel or spin-wait would look the same).
Defence: the per-request timeout (--call-timeout): the worker is killed and the harness reports
ERROR, timeout, exit 2."""
import time

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def forward(self, x):
        while True:
            time.sleep(1)
