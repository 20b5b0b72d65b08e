import os
import sys

# Idle OpenMP threads of the harness must sleep, not spin: the solution's worker process shares the
# CPU cores, and spinning threads made a CPU forward 10x slower on a 2-core machine. Set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from harness import processes  # noqa: E402

processes.start_server_early()  # the worker's server imports torch while this process does

from harness.cli import main  # noqa: E402

sys.exit(main())
