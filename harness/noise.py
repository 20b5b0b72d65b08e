"""Record the noise a float32 reference forward draws, and replay it in a float64 forward; the state
of the generator a forward draws from.

The float64 "truth" must see the same random numbers as the float32 run, else the two
would differ by the noise and not by rounding. We wrap torch's sampling functions that a
model may call inside forward; each call's result is recorded in order, then replayed
(cast to the requested dtype) in the same order.
"""
import contextlib

import torch

def rng_state(device):
    """The state of the default generator that torch.randn_like on `device` draws from: the harness
    compares it after the reference's forward and after the solution's."""
    return torch.cuda.get_rng_state(device) if device.type == "cuda" else torch.get_rng_state()


SAMPLERS = ("randn_like", "rand_like", "randn", "rand", "normal", "bernoulli", "randint_like", "randint")


@contextlib.contextmanager
def _patched(make_wrapper):
    saved = {name: getattr(torch, name) for name in SAMPLERS}
    try:
        for name, fn in saved.items():
            setattr(torch, name, make_wrapper(name, fn))
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)


@contextlib.contextmanager
def recording(tape: list):
    """Inside the block, every sampler call appends (name, result) to `tape`."""
    def make_wrapper(name, fn):
        def wrapper(*args, **kwargs):
            out = fn(*args, **kwargs)
            tape.append((name, out.detach().clone()))
            return out
        return wrapper
    with _patched(make_wrapper):
        yield


@contextlib.contextmanager
def replaying(tape: list, dtype: torch.dtype):
    """Inside the block, sampler calls return the recorded values in order, cast to `dtype`
    where the recorded value is floating point. A call beyond the tape or of another
    sampler than recorded is an error: the reference must draw the same way each time."""
    position = [0]

    def make_wrapper(name, fn):
        def wrapper(*args, **kwargs):
            i = position[0]
            if i >= len(tape) or tape[i][0] != name:
                raise RuntimeError(f"noise replay: call {i} is torch.{name}, the recorded run had "
                                   f"{tape[i][0] if i < len(tape) else 'no more calls'}")
            position[0] += 1
            value = tape[i][1]
            return value.to(dtype) if value.is_floating_point() else value.clone()
        return wrapper
    with _patched(make_wrapper):
        yield
    if position[0] != len(tape):
        raise RuntimeError(f"noise replay: the float64 run drew {position[0]} samples, the float32 run {len(tape)}")
