"""`--protocol NAME` (on check or bench): another evaluator's published procedure, run beside this
harness's own on the same solution, so the report can say where their verdicts differ and why.

The procedures live in ground modules listed by name in harness/protocols.py (kernelbench.py:
KernelBench's). This command only starts a worker for the procedure, hands it over, and records a
failure of the solution as the procedure's error; the exit code stays this harness's verdict.
"""
from harness import problem, protocols
from harness.client import SolutionFailure, Worker


def run_protocol(args, verdict: dict, progress=None) -> dict:
    """The result of procedure args.protocol on args.solution (timed too when `verdict` is bench's)."""
    procedure = protocols.PROTOCOLS[args.protocol]
    if hasattr(procedure, "run"):   # runs its own worker (GPU MODE's procedure)
        return procedure.run(args, verdict, progress=progress)
    device = problem.resolve_device(args.device)
    ref_module = problem.load_reference(args.reference)
    shape = {"batch_size": args.batch_size} if getattr(args, "batch_size", None) else {}
    result = {"protocol": args.protocol, "seed": args.seed, "trials": []}
    try:
        with Worker(progress) as worker:
            procedure.evaluate(worker, result, args, ref_module, shape, device,
                               timed=verdict.get("command") == "bench", progress=progress)
    except SolutionFailure as f:
        result["error"] = f.verdict()
    finally:
        if progress:
            progress(None)
    return procedure.summarize(result)
