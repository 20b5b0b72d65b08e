"""Failure: importing the solution raises (a missing dependency, a compile error in load_inline).
Defence: the worker process (the harness reports ERROR, exit 2, with the exception)."""
from tests.solutions.vae_base import VAE

raise ImportError("this solution needs a module that is not installed")


class ModelNew(VAE):
    pass
