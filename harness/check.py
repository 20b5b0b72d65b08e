"""`check`: is the solution correct, on every trial and shape, by every defence?

After the import: the static scan of the source, the tamper check of the import, the state_dict keys,
--strict's kernel question; then per shape (the default inputs, then other batch sizes) and trial,
one trial as harness/trial.py describes, under trial seed = seed + 1000 x shape + trial; each shape's
first trial also runs the solution under another seed. A shape stops at its first failing trial.
"""
import contextlib

from harness import EXIT_INCORRECT, EXIT_PASS, EXIT_SOLUTION_ERROR, judge, problem, trial
from harness.client import SolutionFailure, Worker

DEFAULT_BATCH_SIZES = (1, 7, 127, 129, 1000, 4096, 8193)


def run_check(args, progress=None, worker=None) -> tuple:
    """Returns (verdict dict, exit code). `worker`: a started, not yet loaded client.Worker to use (and
    leave open: `check --bench` times the solution in it afterwards); by default one of its own."""
    device = problem.resolve_device(args.device)
    trial.require_strict_device(args, device)
    ref_module = problem.load_reference(args.reference)
    init_args = problem.init_inputs(ref_module, {})
    verdict = {"command": "check", "solution": args.solution, "reference": args.reference, "device": str(device),
               "tolerance": {"atol": args.tol, "rtol": args.tol, "truth_factor": args.truth_factor,
                             "truth_floor": args.truth_floor},
               "seed": args.seed, "trials": args.trials, "shapes": [], "scan": [], "passed": False}
    try:
        with contextlib.ExitStack() as stack:
            if worker is None:
                worker = stack.enter_context(Worker(progress))
            load = worker.load(args, device, init_args)
            verdict["import_seconds"] = load["import_seconds"]
            verdict["scan"], verdict["failures"] = judge.import_findings(load)
            if load["tampered"]:
                return verdict, EXIT_INCORRECT
            ref_keys = list(problem.build_reference(ref_module, init_args, args.seed, "cpu").state_dict().keys())
            if sorted(load["keys"]) != sorted(ref_keys):
                verdict["failures"] += [{"defence": "parameters", "message": "ModelNew's state_dict keys differ "
                                        f"from Model's: missing {sorted(set(ref_keys) - set(load['keys']))}, "
                                        f"unexpected {sorted(set(load['keys']) - set(ref_keys))}"}]
                return verdict, EXIT_INCORRECT
            if getattr(args, "strict", False):
                inputs = problem.make_inputs(ref_module, args.seed, device, {})
                reference = problem.build_reference(ref_module, init_args, args.seed, device)
                failures, verdict["custom_kernels"] = trial.strict_failures(worker, inputs, args, reference)
                verdict["failures"] += failures
            for s, shape in enumerate(problem.shape_list(ref_module, args.batch_sizes)):
                entry = {"shape": problem.shape_label(ref_module, shape), "trials_passed": 0, "failures": [],
                         "errors": {}}
                verdict["shapes"].append(entry)  # before its trials: an error marks the shape it happened in
                _check_shape(entry, worker, ref_module, init_args, shape, args.seed + 1000 * s, device, args, progress)
    except SolutionFailure as f:
        verdict["error"] = f.verdict()
        if verdict["shapes"]:
            verdict["shapes"][-1]["error"] = True
        return verdict, EXIT_SOLUTION_ERROR
    failed = any(e["failures"] for e in verdict["shapes"]) or bool(verdict.get("failures"))
    verdict["passed"] = not failed
    return verdict, (EXIT_INCORRECT if failed else EXIT_PASS)


def _check_shape(entry, worker, ref_module, init_args, shape, first_seed, device, args, progress):
    """args.trials trials of one shape into its verdict `entry`, stopping at the first that fails."""
    for t in range(args.trials):
        seed = first_seed + t
        if progress:
            progress(f"checking {entry['shape']}: trial {t + 1}/{args.trials}")
        result = trial.check_trial(worker, ref_module, init_args, shape, seed, device, args, other_seed=(t == 0))
        _merge_errors(entry["errors"], result.get("errors", {}))
        if result["failures"]:
            entry["failures"] = result["failures"]
            entry["failed_trial_seed"] = seed
            break
        entry["trials_passed"] += 1
    if progress:
        progress(None)


def _merge_errors(into: dict, new: dict):
    """Keep the worst figure per output across trials."""
    for name, e in new.items():
        cur = into.setdefault(name, dict(e))
        for key in e:
            cur[key] = max(cur[key], e[key])
