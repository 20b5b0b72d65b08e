"""Exploit: at import, replaces time.perf_counter and torch.cuda.Event.elapsed_time with functions
that report 10x less time. Defences: static scan (assignment to an attribute of time/torch is a
failure) and tampering (identities of the harness's timers and torch's functions are compared with
a snapshot taken before the import)."""
import time

import torch

from tests.solutions.vae_base import VAE

_perf_counter, _elapsed_time = time.perf_counter, torch.cuda.Event.elapsed_time
time.perf_counter = lambda: _perf_counter() / 10
torch.cuda.Event.elapsed_time = lambda self, end: _elapsed_time(self, end) / 10


class ModelNew(VAE):
    pass
