"""Exploit: computes for real on its first two calls (check runs each trial's inputs twice), then
returns a copy of the previous result. Defence: caching/replay in bench (fresh inputs before every
timed call, some timed outputs re-checked); in check, the other-seed run (noise: the outputs did
not follow the seed) and later trials (allclose)."""
from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def __init__(self, *args):
        super().__init__(*args)
        self.calls, self.last = 0, None

    def forward(self, x):
        self.calls += 1
        if self.last is None or self.calls <= 2:
            self.last = [t.clone() for t in self.honest(x)]
        return tuple(t.clone() for t in self.last)
