"""Other evaluators' published procedures that `--protocol NAME` runs beside this harness's own, by name.

Each is one ground module with the same interface (harness/kernelbench.py's docstring lists it); the
worker finds a procedure's steps here and the `protocol` command and the report find the rest. A new
procedure is one new module and one entry in PROTOCOLS.
GPU MODE's procedure (gpumode.py) runs its cases in a spawned worker of its own, as GPU MODE's
eval.py does, so it offers run() in place of the worker steps, evaluate() and summarize().
"""
from harness import gpumode, kernelbench

PROTOCOLS = {kernelbench.NAME: kernelbench, gpumode.NAME: gpumode}
