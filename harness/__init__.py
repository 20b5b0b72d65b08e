"""Evaluation harness for KernelBench-format problems: `python -m harness check|bench|profile`.

One module per concern:
  problem.py   loading a reference and a solution, sizes, inputs, FLOP and byte counts
  codec.py     the safe message format between the harness and its worker (no pickle)
  worker.py    the spawned process that imports and runs the solution; the client that drives it
  noise.py     recording torch's noise in the float32 reference and replaying it in float64
  compare.py   output comparison (allclose with an explained verdict, error against float64 truth)
  integrity.py defences against faked results: output validation, tamper checks, static scan
  timing.py    clock warm-up, CUDA-event timing, L2 flush, statistics
  check.py     the `check` command
  bench.py     the `bench` command
  report.py    tables and JSON
  sweep.py     `bench --sweep NAME=...`: the bench over one size; table, JSON, Markdown, plot
  profile.py   the `profile` command: kernels per forward, GPU-only time, roofline, ncu command
  protocol.py  `--protocol kernelbench`: KernelBench's published procedure beside this harness's
  cli.py       the command line
"""

EXIT_PASS = 0
EXIT_INCORRECT = 1
EXIT_SOLUTION_ERROR = 2
EXIT_USAGE = 3
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT; a sweep still writes the values it finished


class UsageError(Exception):
    """A bad command line or environment (exit 3), never the solution's fault."""
