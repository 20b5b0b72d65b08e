"""`check`: is the solution correct, on every trial and shape, by every defence?

Per shape (the default inputs, then other batch sizes) and trial:
  1. fresh reference weights (drawn under the trial seed) are built here and copied into the
     solution's ModelNew in place (load_state_dict, strict);
  2. fresh inputs under the trial seed;
  3. here: torch.manual_seed(trial_seed), float32 reference forward (noise recorded), then the
     float64 truth with the same noise replayed;
  4. in the worker: torch.manual_seed(trial_seed), solution forward ("first run"); the reference
     forward there too; the caching allocator emptied and poisoned with NaN; the solution again
     ("after the reference"); on each shape's first trial once more under another seed
     ("other seed": the noise must follow the seed);
  5. each run is judged: output type/shape/dtype/device, allclose, float64 truth, generator state,
     input and parameter mutation, aliasing, tampering.
"""
import torch

from harness import EXIT_INCORRECT, EXIT_PASS, EXIT_SOLUTION_ERROR, UsageError, compare, integrity, noise, problem
from harness.worker import SolutionFailure, Worker

DEFAULT_BATCH_SIZES = (1, 7, 127, 129, 1000, 4096)


def resolve_device(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError("no CUDA GPU is visible on this machine: `check` and `bench` time and verify CUDA "
                         "solutions on a GPU (use --device cpu for a pure-PyTorch solution)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return device


def rng_state(device):
    return torch.cuda.get_rng_state(device) if device.type == "cuda" else torch.get_rng_state()


def reference_outputs(model, inputs, seed, device):
    """float32 outputs, the generator state after them, and the float64 truth with the same noise."""
    tape = []
    torch.manual_seed(seed)
    with torch.no_grad(), noise.recording(tape):
        expected = [o.detach() for o in problem.flatten_outputs(model(*inputs))]
    rng_after = rng_state(device)
    model64 = _double_copy(model)
    inputs64 = [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs]
    with torch.no_grad(), noise.replaying(tape, torch.float64):
        truth = [o.detach() for o in problem.flatten_outputs(model64(*inputs64))]
    return expected, rng_after, truth


def _double_copy(model):
    import copy
    return copy.deepcopy(model).double()


def output_name(i: int, n: int) -> str:
    return f"output {i}" if n > 1 else "output"


def judge_run(label: str, run: dict, expected, truth, rng_after, args) -> list:
    """Every failure of one solution run, as {defence, message, details?} dicts (empty: it passed)."""
    failures = []
    if run["tampered"]:
        failures.append({"defence": "tampering", "message": f"{label}: the solution replaced "
                         + ", ".join(run["tampered"])})
    if run["mutated_inputs"]:
        failures.append({"defence": "input mutation", "message": f"{label}: input(s) {run['mutated_inputs']} "
                         "changed during the call (the solution must not write its inputs)"})
    if run["mutated_params"]:
        failures.append({"defence": "parameter mutation", "message": f"{label}: parameters "
                         f"{run['mutated_params'][:4]} changed during the call"})
    if run["aliased"]:
        failures.append({"defence": "aliasing", "message": f"{label}: output(s) {run['aliased']} share storage "
                         "with an input, a parameter or a reference output"})
    n = len(expected)
    if len(run["metas"]) != n:
        failures.append({"defence": "output type", "message": f"{label}: returned {len(run['metas'])} "
                         f"output(s), the reference returns {n}"})
        return failures
    for i in range(n):
        name = output_name(i, n)
        meta = run["metas"][i]
        r = compare.compare_output(name, run["outputs"][i], meta, expected[i], args.tol, args.tol)
        if not r["ok"]:
            defence = "output type" if "elements" not in r else "allclose"
            failures.append({"defence": defence, "message": f"{label}: " + compare.format_output_report(r),
                             "details": r})
            continue
        t = compare.compare_truth(name, run["outputs"][i], expected[i], truth[i], args.truth_factor, args.truth_floor)
        if not t["ok"]:
            failures.append({"defence": "precision", "message": f"{label}: {name}: {t['reason']}", "details": t})
    if not torch.equal(run["rng_state"], rng_after):
        failures.append({"defence": "noise", "message": f"{label}: the default generator's state after the forward "
                         "differs from the reference's (the solution drew more, fewer or other random numbers "
                         "than torch.randn_like would)"})
    return failures


def shape_list(ref_module, batch_sizes):
    default = getattr(ref_module, "batch_size", None)
    shapes = [{}]
    if isinstance(default, int):
        shapes += [{"batch_size": b} for b in batch_sizes if b != default]
    return shapes


def shape_label(ref_module, shape: dict) -> str:
    if not shape:
        b = getattr(ref_module, "batch_size", None)
        return f"batch_size={b} (default)" if b is not None else "default inputs"
    return ", ".join(f"{k}={v}" for k, v in shape.items())


def check_trial(worker, ref_module, init_args, shape, trial_seed, device, args, other_seed=False) -> dict:
    ref = problem.build_reference(ref_module, init_args, trial_seed, device)
    inputs = problem.make_inputs(ref_module, trial_seed, device, shape)
    expected, rng_after, truth = reference_outputs(ref, inputs, trial_seed, device)
    weights = {k: v.detach().cpu() for k, v in ref.state_dict().items()}
    reply = worker.request({"op": "set_weights", "state": weights}, timeout=args.call_timeout, what="loading weights")
    if reply["key_mismatch"]:
        km = reply["key_mismatch"]
        return {"failures": [{"defence": "parameters", "message": "state_dict keys differ from the reference's: "
                              f"missing {km['missing']}, unexpected {km['unexpected']}"}]}
    cpu_inputs = [t.cpu() if isinstance(t, torch.Tensor) else t for t in inputs]
    run = {"op": "run", "inputs": cpu_inputs, "seed": trial_seed}
    first = worker.request(run, timeout=args.call_timeout, what="the solution's forward")
    worker.request({"op": "reference_decoy", "inputs": cpu_inputs, "seed": trial_seed},
                   timeout=args.call_timeout, what="the reference's forward in the worker")
    second = worker.request(dict(run, poison=True), timeout=args.call_timeout, what="the solution's forward")
    failures = judge_run("first run", first, expected, truth, rng_after, args)
    failures += judge_run("after the reference, allocator poisoned", second, expected, truth, rng_after, args)
    errors = {}
    for i in range(len(expected)):
        if i < len(first["outputs"]) and first["outputs"][i] is not None:
            errors[output_name(i, len(expected))] = {
                "max_abs_diff": float((first["outputs"][i].double() - expected[i].cpu().double()).abs().max())
                if expected[i].numel() and first["outputs"][i].shape == expected[i].shape else 0.0,
                "solution_rel_err": compare.relative_error(first["outputs"][i], truth[i]),
                "eager_rel_err": compare.relative_error(expected[i], truth[i])}
    if other_seed:
        seed2 = trial_seed + 7919
        expected2, rng2, truth2 = reference_outputs(ref, inputs, seed2, device)
        third = worker.request(dict(run, seed=seed2), timeout=args.call_timeout, what="the solution's forward")
        more = judge_run("other seed", third, expected2, truth2, rng2, args)
        stochastic = any(not torch.equal(a, b) for a, b in zip(expected, expected2))
        if stochastic and all(torch.equal(a, b) for a, b in zip(first["outputs"], third["outputs"])
                              if a is not None and b is not None):
            more.insert(0, {"defence": "noise", "message": "other seed: the outputs did not change with the seed, "
                            "the reference's do (the solution ignores torch's generator)"})
        failures += more
    return {"failures": failures, "errors": errors}


def require_strict_device(args, device):
    if getattr(args, "strict", False) and device.type != "cuda":
        raise UsageError("--strict needs CUDA: it profiles the CUDA kernels the forward launches and fails when "
                         "none is the solution's own (drop --strict for --device cpu)")


def strict_failures(worker, inputs, args, reference) -> tuple:
    """--strict (leaderboard mode): at least one kernel the forward launches must be the solution's own:
    neither a library's by name (torch/ATen, cuBLAS, cuDNN, inductor's Triton; integrity.custom_kernels
    has the rule) nor one that `reference` (the reference model, on the device) launches on these inputs.
    Returns (failures, the kernels counted as the solution's own)."""
    reply = worker.request({"op": "kernels", "inputs": [t.cpu() if isinstance(t, torch.Tensor) else t for t in inputs],
                            "calls": 2}, timeout=args.call_timeout, what="profiling the solution's kernels (--strict)")
    names = [k["name"] for k in reply["kernels"]]
    from harness import profile  # here: profile imports this module
    device = next(t.device for t in inputs if isinstance(t, torch.Tensor))
    with torch.no_grad(), torch.random.fork_rng(devices=[device]):  # leave the harness's generators as they were
        reference_names = [k["name"] for k in profile.profile_kernels(lambda: reference(*inputs), 2, device)]
    failures = [{"defence": "tampering", "message": "while profiling, the solution replaced "
                 + ", ".join(reply["tampered"])}] if reply["tampered"] else []
    custom = integrity.custom_kernels(names, also_library=reference_names)
    if not custom:
        shown = "; ".join(n[:70] for n in names[:6]) + ("; ..." if len(names) > 6 else "") or "none at all"
        failures.append({"defence": "strict", "message": "no custom kernel ran: every kernel the forward launched "
                         "is a library's (torch/ATen, cuBLAS, cuDNN, CUTLASS, inductor Triton, copies) or one the "
                         f"reference's eager forward launches too: {shown}"})
    return failures, custom


def run_check(args, progress=None, log=print) -> tuple:
    """Returns (verdict dict, exit code)."""
    device = resolve_device(args.device)
    require_strict_device(args, device)
    ref_module = problem.load_reference(args.reference)
    init_args = problem.init_inputs(ref_module, {})
    verdict = {"command": "check", "solution": args.solution, "reference": args.reference, "device": str(device),
               "tolerance": {"atol": args.tol, "rtol": args.tol, "truth_factor": args.truth_factor,
                             "truth_floor": args.truth_floor},
               "seed": args.seed, "trials": args.trials, "shapes": [], "scan": [], "passed": False}
    try:
        with Worker(progress) as worker:
            load = worker.request({"op": "load", "solution": args.solution, "reference": args.reference,
                                   "device": str(device), "init_args": init_args, "seed": args.seed},
                                  timeout=args.load_timeout, what="importing and building the solution")
            verdict["import_seconds"] = load["import_seconds"]
            verdict["scan"] = integrity.scan_source(load["source"])
            verdict["failures"] = integrity.scan_failures(verdict["scan"])
            if load["tampered"]:
                verdict["failures"] += [{"defence": "tampering", "message": "importing the solution replaced "
                                        + ", ".join(load["tampered"])}]
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
                failures, verdict["custom_kernels"] = strict_failures(worker, inputs, args, reference)
                verdict["failures"] += failures
            for s, shape in enumerate(shape_list(ref_module, args.batch_sizes)):
                label = shape_label(ref_module, shape)
                entry = {"shape": label, "trials_passed": 0, "failures": [], "errors": {}}
                verdict["shapes"].append(entry)
                for trial in range(args.trials):
                    seed = args.seed + 1000 * s + trial
                    if progress:
                        progress(f"checking {label}: trial {trial + 1}/{args.trials}")
                    result = check_trial(worker, ref_module, init_args, shape, seed, device, args,
                                         other_seed=(trial == 0))
                    _merge_errors(entry["errors"], result.get("errors", {}))
                    if result["failures"]:
                        entry["failures"] = result["failures"]
                        entry["failed_trial_seed"] = seed
                        break
                    entry["trials_passed"] += 1
                if progress:
                    progress(None)
    except SolutionFailure as f:
        verdict["error"] = {"kind": f.kind, "message": f.message, "detail": f.detail}
        if verdict["shapes"]:
            verdict["shapes"][-1]["error"] = True
        return verdict, EXIT_SOLUTION_ERROR
    failed = any(e["failures"] for e in verdict["shapes"]) or bool(verdict.get("failures"))
    verdict["passed"] = not failed
    return verdict, (EXIT_INCORRECT if failed else EXIT_PASS)


def _merge_errors(into: dict, new: dict):
    """Keep the worst figure per output across trials."""
    for name, e in new.items():
        cur = into.setdefault(name, dict(e))
        for key in e:
            cur[key] = max(cur[key], e[key])
