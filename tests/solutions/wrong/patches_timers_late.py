"""Exploit: passes the correctness check honestly, then on its fifth call (inside bench's timing)
replaces time.perf_counter_ns and torch.cuda.Event.elapsed_time, hidden from the static scan
behind getattr/setattr on names built at run time. Defence: tampering (the worker compares the
watched functions with its snapshot after timing)."""
import importlib

from tests.solutions.vae_base import VAE


def _swap(module_name, owner_path, attr):
    owner = importlib.import_module(module_name)
    for part in owner_path:
        owner = getattr(owner, part)
    original = getattr(owner, attr)
    patch = getattr(__builtins__, "set" + "attr") if hasattr(__builtins__, "setattr") else __builtins__["set" + "attr"]
    patch(owner, attr, lambda *a: original(*a) / 10)


class ModelNew(VAE):
    def __init__(self, *args):
        super().__init__(*args)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 5:
            _swap("ti" + "me", (), "perf_counter_ns")
            _swap("tor" + "ch", ("cuda", "Event"), "elapsed_time")
        return self.honest(x)
