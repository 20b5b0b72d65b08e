"""One correctness trial through the client, as `check` runs it on every shape and `bench` before timing;
and `--strict`'s question, whether the forward runs a kernel of its own.

A trial (check_trial):
  1. fresh reference weights (drawn under the trial seed) are built here and copied into the
     solution's ModelNew in place (load_state_dict, strict);
  2. fresh inputs under the trial seed;
  3. here: torch.manual_seed(trial_seed), float32 reference forward (noise recorded), then the
     float64 truth with the same noise replayed;
  4. in the worker: torch.manual_seed(trial_seed), solution forward ("first run"); the reference
     forward there too; the caching allocator emptied and poisoned with NaN; the solution again
     ("after the reference"); optionally once more under another seed ("other seed": the noise
     must follow the seed);
  5. each run is judged (judge.py): output type/shape/dtype/device, allclose, float64 truth,
     generator state, input and parameter mutation, aliasing, tampering.
"""
import torch

from harness import UsageError, integrity, judge, problem, profiling

OTHER_SEED_OFFSET = 7919


def check_trial(worker, ref_module, init_args, shape, trial_seed, device, args, other_seed=False) -> dict:
    """{"failures": [...], "errors": per-output figures of the first run} for one trial."""
    ref = problem.build_reference(ref_module, init_args, trial_seed, device)
    inputs = problem.make_inputs(ref_module, trial_seed, device, shape)
    expected, rng_after, truth = judge.reference_outputs(ref, inputs, trial_seed, device)
    weights = {k: v.detach().cpu() for k, v in ref.state_dict().items()}
    reply = worker.request({"op": "set_weights", "state": weights}, timeout=args.call_timeout, what="loading weights")
    if reply["key_mismatch"]:
        km = reply["key_mismatch"]
        return {"failures": [{"defence": "parameters", "message": "state_dict keys differ from the reference's: "
                              f"missing {km['missing']}, unexpected {km['unexpected']}"}]}
    host_inputs = problem.to_device(inputs, "cpu")
    run = {"op": "run", "inputs": host_inputs, "seed": trial_seed}
    first = worker.request(run, timeout=args.call_timeout, what="the solution's forward")
    worker.request({"op": "reference_decoy", "inputs": host_inputs, "seed": trial_seed},
                   timeout=args.call_timeout, what="the reference's forward in the worker")
    second = worker.request(dict(run, poison=True), timeout=args.call_timeout, what="the solution's forward")
    failures = judge.judge_run("first run", first, expected, truth, rng_after, args)
    failures += judge.judge_run("after the reference, allocator poisoned", second, expected, truth, rng_after, args)
    if other_seed:
        seed2 = trial_seed + OTHER_SEED_OFFSET
        expected2, rng2, truth2 = judge.reference_outputs(ref, inputs, seed2, device)
        third = worker.request(dict(run, seed=seed2), timeout=args.call_timeout, what="the solution's forward")
        more = judge.judge_run("other seed", third, expected2, truth2, rng2, args)
        if judge.ignores_seed(expected, expected2, first, third):
            more.insert(0, {"defence": "noise", "message": "other seed: the outputs did not change with the seed, "
                            "the reference's do (the solution ignores torch's generator)"})
        failures += more
    return {"failures": failures, "errors": judge.error_figures(first, expected, truth)}


def require_strict_device(args, device):
    if getattr(args, "strict", False) and device.type != "cuda":
        raise UsageError("--strict needs CUDA: it profiles the CUDA kernels the forward launches and fails when "
                         "none is the solution's own (drop --strict for --device cpu)")


def strict_failures(worker, inputs, args, reference) -> tuple:
    """--strict (leaderboard mode): at least one kernel the forward launches must be the solution's own:
    neither a library's by name (torch/ATen, cuBLAS, cuDNN, inductor's Triton; integrity.custom_kernels
    has the rule) nor one that `reference` (the reference model, on the device) launches on these inputs.
    Returns (failures, the kernels counted as the solution's own)."""
    reply = worker.request({"op": "kernels", "inputs": problem.to_device(inputs, "cpu"), "calls": 2},
                           timeout=args.call_timeout, what="profiling the solution's kernels (--strict)")
    names = [k["name"] for k in reply["kernels"]]
    device = next(t.device for t in inputs if isinstance(t, torch.Tensor))
    with torch.no_grad(), torch.random.fork_rng(devices=[device]):  # leave the harness's generators as they were
        reference_names = [k["name"] for k in profiling.profile_kernels(lambda: reference(*inputs), 2, device)]
    failures = judge.tampered_during("while profiling", reply["tampered"])
    custom = integrity.custom_kernels(names, also_library=reference_names)
    if not custom:
        shown = "; ".join(n[:70] for n in names[:6]) + ("; ..." if len(names) > 6 else "") or "none at all"
        failures.append({"defence": "strict", "message": "no custom kernel ran: every kernel the forward launched "
                         "is a library's (torch/ATen, cuBLAS, cuDNN, CUTLASS, inductor Triton, copies) or one the "
                         f"reference's eager forward launches too: {shown}"})
    return failures, custom
