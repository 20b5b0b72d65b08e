"""Exploit (GPU): after four honest calls (bench's correctness check), computes on a side stream and
returns without making the caller's stream wait, so CUDA events recorded on the caller's stream
miss the work. torch.cuda._sleep (about 1 ms) stands for a kernel that runs longer than its
launch takes.
Defence: side stream (the device-wide synchronize after the end event still waits; back-to-back
wall time exceeds the event time)."""
import torch

from tests.solutions.vae_base import VAE


class ModelNew(VAE):
    def __init__(self, *args):
        super().__init__(*args)
        self.calls, self.stream = 0, None

    def forward(self, x):
        self.calls += 1
        if self.calls <= 4:
            return self.honest(x)
        if self.stream is None:
            self.stream = torch.cuda.Stream(x.device)
        self.stream.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(self.stream):
            torch.cuda._sleep(2_000_000)
            return self.honest(x)
