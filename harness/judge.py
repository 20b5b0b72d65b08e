"""Judging the solution's runs: the expected outputs, and every failure of one run as a named defence.

Each failure is a dict {defence, message, details?}; an empty list means the run passed. The rules:
  - tampering, input mutation, parameter mutation, aliasing: what the worker found during the call;
  - output type, allclose, precision: each output against the float32 reference and the float64
    truth (compare.py);
  - noise: the default generator's state after the forward must equal the reference's;
  - caching/replay: outputs kept from timed calls, against the reference on the same inputs;
  - static scan, tampering at import: what the source says and what importing it replaced.
"""
import copy

import torch

from harness import compare, integrity, noise, problem


def reference_outputs(model, inputs, seed, device):
    """float32 outputs, the generator state after them, and the float64 truth with the same noise."""
    tape = []
    torch.manual_seed(seed)
    with torch.no_grad(), noise.recording(tape):
        expected = [o.detach() for o in problem.flatten_outputs(model(*inputs))]
    rng_after = noise.rng_state(device)
    model64 = copy.deepcopy(model).double()
    inputs64 = [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs]
    with torch.no_grad(), noise.replaying(tape, torch.float64):
        truth = [o.detach() for o in problem.flatten_outputs(model64(*inputs64))]
    return expected, rng_after, truth


def _call_failures(label: str, run: dict) -> list:
    """What the worker saw the call do besides returning outputs."""
    found = tampered_during(label, run["tampered"])
    if run["mutated_inputs"]:
        found.append({"defence": "input mutation", "message": f"{label}: input(s) {run['mutated_inputs']} "
                      "changed during the call (the solution must not write its inputs)"})
    if run["mutated_params"]:
        found.append({"defence": "parameter mutation", "message": f"{label}: parameters "
                      f"{run['mutated_params'][:4]} changed during the call"})
    if run["aliased"]:
        found.append({"defence": "aliasing", "message": f"{label}: output(s) {run['aliased']} share storage "
                      "with an input, a parameter or a reference output"})
    return found


def judge_run(label: str, run: dict, expected, truth, rng_after, args) -> list:
    """Every failure of one solution run (the worker's reply to a `run` request)."""
    failures = _call_failures(label, run)
    n = len(expected)
    if len(run["metas"]) != n:
        failures.append({"defence": "output type", "message": f"{label}: returned {len(run['metas'])} "
                         f"output(s), the reference returns {n}"})
        return failures
    for i in range(n):
        name = compare.output_name(i, n)
        r = compare.compare_output(name, run["outputs"][i], run["metas"][i], expected[i], args.tol, args.tol)
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


def ignores_seed(expected, expected_other, run, run_other) -> bool:
    """The reference's outputs change with the seed and the solution's do not: it ignores torch's generator."""
    stochastic = any(not torch.equal(a, b) for a, b in zip(expected, expected_other))
    return stochastic and all(torch.equal(a, b) for a, b in zip(run["outputs"], run_other["outputs"])
                              if a is not None and b is not None)


def error_figures(run: dict, expected, truth) -> dict:
    """Per output: max abs diff against float32 eager, and the solution's and eager's error against truth."""
    errors = {}
    for i in range(len(expected)):
        if i < len(run["outputs"]) and run["outputs"][i] is not None:
            got = run["outputs"][i]
            errors[compare.output_name(i, len(expected))] = {
                "max_abs_diff": float((got.double() - expected[i].cpu().double()).abs().max())
                if expected[i].numel() and got.shape == expected[i].shape else 0.0,
                "solution_rel_err": compare.relative_error(got, truth[i]),
                "eager_rel_err": compare.relative_error(expected[i], truth[i])}
    return errors


def judge_checkpoints(checkpoints, ref, device, args) -> list:
    """Outputs the worker kept from timed calls, checked against the reference on the same inputs."""
    failures = []
    for k, cp in enumerate(checkpoints):
        inputs = problem.to_device(cp["inputs"], device)
        expected, _, _ = reference_outputs(ref, inputs, cp["seed"], device)
        for i, e in enumerate(expected):
            if i >= len(cp["metas"]):
                break
            r = compare.compare_output(compare.output_name(i, len(expected)), cp["outputs"][i], cp["metas"][i],
                                       e, args.tol, args.tol)
            if not r["ok"]:
                failures.append({"defence": "caching/replay", "message": f"timed call checkpoint {k + 1}: "
                                 "fresh inputs gave a stale or wrong result: " + compare.format_output_report(r)})
                break
    if not checkpoints:
        failures.append({"defence": "caching/replay", "message": "no timed call could be re-checked"})
    return failures


def import_findings(load: dict) -> tuple:
    """From the worker's reply to `load`: the static scan of the source (findings to print) and the
    failures (the scan's, and functions the import replaced)."""
    scan = integrity.scan_source(load["source"])
    return scan, integrity.scan_failures(scan) + tampered_during("while importing", load["tampered"])


def tampered_during(when: str, names) -> list:
    """A tampering failure naming the watched functions replaced `when` ("while importing"); none: []."""
    names = sorted(names)
    return [{"defence": "tampering", "message": f"{when}, the solution replaced " + ", ".join(names)}] if names else []
