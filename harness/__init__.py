"""Evaluation harness for KernelBench-format problems: `python -m harness check|bench|profile|export`.

Four layers; a module imports only from its own layer or those below, never inside a function
(tests/test_layers.py parses the package and fails on an upward import, a cycle or a hidden import).

  presentation  cli.py        the command line: options, dispatch, exit codes
                report.py     verdicts as text, the sweep's files and plot, JSON, the progress line
  commands      check.py      `check`: correctness on every trial and shape, by every defence
                bench.py      `bench`: the solution timed beside eager, torch.compile, a CUDA graph, a no-op
                sweep.py      `bench --sweep NAME=...`: the bench at each value of one size
                profile.py    `profile`: kernels per forward, GPU-only time, roofline, ncu command
                protocol.py   `--protocol NAME`: another evaluator's procedure beside this harness's
                export.py     `export --to kernelbench|gpumode DIR`: the problem and solution.py in a
                              leaderboard's own format (file work only; templates/ holds the files)
  worker side   trial.py      one correctness trial (and --strict's kernel question) through the client
                client.py     the harness's side: start the worker, load the solution, send requests,
                              a failure of the solution as a verdict (SolutionFailure.verdict)
                worker.py     the solution's process: serves the requests; imports only ground modules
  ground        problem.py    the reference and solution files, the device, sizes, shapes, inputs, work counts
                codec.py      the message format between the harness and its worker (JSON + raw bytes)
                compare.py    one output against the reference: allclose explained, error against truth
                noise.py      the generator's state; torch's noise recorded in float32, replayed in float64
                judge.py      expected outputs, and a run's failures as named defences
                integrity.py  tamper snapshot, allocator poisoning, aliasing, static scan, --strict's rule
                timing.py     clock warm-up, CUDA-event timing, L2 flush, rounds, statistics
                profiling.py  kernels per forward (torch.profiler), GPU-only time, ceilings, roofline floor
                kernelbench.py  KernelBench's published procedure, both sides of it
                gpumode.py    GPU MODE's test/benchmark/leaderboard modes in a spawned worker of its own,
                              and a GPU MODE directory seen as a KernelBench-format problem
                protocols.py  the procedures --protocol can run, by name (a new one: a module + an entry)
                processes.py  how the worker process starts (forkserver or spawn); torch-free
"""

EXIT_PASS = 0
EXIT_INCORRECT = 1
EXIT_SOLUTION_ERROR = 2
EXIT_USAGE = 3
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT; a sweep still writes the values it finished


class UsageError(Exception):
    """A bad command line or environment (exit 3), never the solution's fault."""
