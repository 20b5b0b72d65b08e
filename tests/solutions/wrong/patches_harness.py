"""Exploit: at import, replaces the worker's own kernel listing (harness.profiling.profile_kernels, what
--strict reads) with one that reports a custom kernel, hidden from the static scan behind importlib
and a setattr on names built at run time. Defence: tampering (the worker's snapshot, taken before the
import, watches every function of every harness module loaded in the solution's process)."""
import importlib

from tests.solutions.vae_base import VAE

_profiling = importlib.import_module("harness." + "profiling")
_patch = getattr(__builtins__, "set" + "attr") if hasattr(__builtins__, "setattr") else __builtins__["set" + "attr"]
_patch(_profiling, "profile_" + "kernels", lambda fn, calls, device: [
    {"name": "fused_vae_kernel", "count": calls, "gpu_us": 1.0, "per_forward": 1.0, "gpu_us_per_forward": 1.0}])


class ModelNew(VAE):
    pass
