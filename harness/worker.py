"""What runs in the solution's process: a spawned worker that imports the solution and serves requests.

A compile error, an exception, an illegal memory access, a device-side assert or a hang then
becomes a verdict with its message instead of a harness traceback, and the harness's timers,
comparisons and expected outputs live where the solution cannot reach or patch them. The harness
drives it through harness/client.py; messages cross as codec.py's JSON and raw bytes, never pickle.

Requests (op): load, set_weights, run, reference_decoy, time, profile, kernels (--strict), and
protocol (a step of another evaluator's procedure, harness/protocols.py). Only ground modules are
imported here, and the tamper snapshot taken at load watches every harness module this process has
loaded: all the harness code the worker runs.
"""
import importlib
import os
import sys
import time
import traceback

import torch

from harness import codec, compare, integrity, noise, problem, profiling, protocols, timing

_perf_counter = time.perf_counter


def harness_modules() -> list:
    """Every harness module loaded in this process (in the worker: all the code it runs)."""
    return [m for name, m in sorted(sys.modules.items()) if name == "harness" or name.startswith("harness.")]


def worker_main(conn, log_path):
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    state = {}
    while True:
        try:
            message = codec.decode(conn.recv_bytes())
        except (EOFError, OSError):
            return
        op = message.get("op")
        if op == "exit":
            return
        try:
            reply = _HANDLERS[op](state, message)
            reply["ok"] = True
        except Exception as e:
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}".strip(), "traceback": _solution_traceback(e)}
        try:
            payload = codec.encode(reply)
        except Exception as e:
            payload = codec.encode({"ok": False, "error": f"cannot send the reply: {e}"})
        conn.send_bytes(payload)


def _solution_traceback(e: BaseException) -> str:
    """The traceback without the harness's and torch's own frames: what the competitor needs to see."""
    skip = (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(torch.__file__))
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(skip)]
    lines = traceback.format_list(frames[-8:]) + traceback.format_exception_only(type(e), e)
    return "".join(lines)


def _load(state, m):
    state["device"] = device = torch.device(m["device"])
    # Importing torch._dynamo wraps torch.manual_seed: done before the snapshot, so that a solution
    # using torch.compile is not taken for one replacing torch's functions.
    importlib.import_module("torch._dynamo")
    state["snapshot"] = integrity.tamper_snapshot(harness_modules())
    reference = problem.kernelbench_view(problem.load_module(m["reference"], "harness_reference"))
    t0 = _perf_counter()
    try:
        solution = problem.load_module(m["solution"], "harness_solution")
    except Exception as e:
        raise RuntimeError(f"importing the solution failed: {type(e).__name__}: {e}") from e
    import_s = _perf_counter() - t0
    model_new = problem.solution_class(solution, reference)   # a GPU MODE submission: over its weights
    if model_new is None:
        raise RuntimeError(f"the solution {m['solution']} defines no class ModelNew")
    torch.manual_seed(m["seed"])
    state["model"] = model_new(*m["init_args"]).to(device).eval()
    torch.manual_seed(m["seed"])
    state["decoy"] = reference.Model(*m["init_args"]).to(device).eval()
    source = open(m["solution"], errors="replace").read()
    return {"import_seconds": import_s, "keys": list(state["model"].state_dict().keys()),
            "tampered": integrity.tampered(state["snapshot"]), "source": source}


def _set_weights(state, m):
    model, weights = state["model"], m["state"]
    have = set(model.state_dict().keys())
    missing, unexpected = sorted(set(weights) - have), sorted(have - set(weights))
    if missing or unexpected:
        return {"key_mismatch": {"missing": missing, "unexpected": unexpected}}
    device = state["device"]
    with torch.no_grad():
        model.load_state_dict({k: v.to(device) for k, v in weights.items()}, strict=True)
        state["decoy"].load_state_dict({k: v.to(device) for k, v in weights.items()}, strict=True)
    state["weights"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return {"key_mismatch": None}


def _bitwise_equal(a, b) -> bool:
    if type(b) is not torch.Tensor or a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    return bool(torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))


def _run(state, m):
    """One forward of the solution, with every check that must happen inside its process."""
    device, model = state["device"], state["model"]
    pristine = problem.to_device(m["inputs"], device)
    given = [t.clone() if isinstance(t, torch.Tensor) else t for t in pristine]
    if m.get("poison"):
        integrity.poison_allocator(device)
    torch.manual_seed(m["seed"])
    t0 = _perf_counter()
    with torch.no_grad():
        out = model(*given)
    outputs = problem.flatten_outputs(out)
    rng = noise.rng_state(device)
    metas = [compare.describe_tensor(o) for o in outputs]
    # Copied on the current stream only: work left on another stream is not waited for.
    values = [o.detach().to("cpu") if meta["type"] == "torch.Tensor" else None for o, meta in zip(outputs, metas)]
    seconds = _perf_counter() - t0
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    guarded = [t for t in given if isinstance(t, torch.Tensor)] + list(model.parameters()) + list(model.buffers())
    guarded += state.get("decoy_outputs", [])
    forbidden = integrity.storage_ranges(guarded)
    return {
        "outputs": values, "metas": metas, "rng_state": rng, "seconds": seconds,
        "mutated_inputs": [i for i, (p, g) in enumerate(zip(pristine, given))
                           if isinstance(p, torch.Tensor) and not _bitwise_equal(p, g)],
        "mutated_params": [k for k, v in model.state_dict().items()
                           if k in state.get("weights", {}) and not _bitwise_equal(state["weights"][k], v)],
        "aliased": [i for i, o in enumerate(outputs) if type(o) is torch.Tensor and integrity.aliases(o, forbidden)],
        "tampered": integrity.tampered(state["snapshot"]),
    }


def _reference_decoy(state, m):
    """Run the reference here too, as a leaderboard would in one process, and keep its outputs
    alive: a solution returning them (or memory that held them) must still be caught."""
    device = state["device"]
    inputs = problem.to_device(m["inputs"], device)
    torch.manual_seed(m["seed"])
    with torch.no_grad():
        state["decoy_outputs"] = [o for o in problem.flatten_outputs(state["decoy"](*inputs))
                                  if isinstance(o, torch.Tensor)]
    return {}


class _InputRefresher:
    """Fresh input values before every timed call, in place (same address), drawn from a private
    generator so the default one is untouched; new addresses at each segment start. The last call of
    each segment is kept for checking: same address as the calls before it, new values, so a cache
    keyed on the input pointer or a replay of an earlier result returns a stale answer there."""

    def __init__(self, inputs, device, seed, iters, segments):
        self.device, self.current = device, [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
        self.gen = torch.Generator(device=device).manual_seed(seed)
        self.domains = [problem.input_domain(t) for t in inputs]
        self.segment_len = max(2, iters // max(1, segments))
        self.count, self.iters, self.seed = 0, iters, seed
        self.checkpoints, self.pending = [], None

    def refresh(self, index_in_run):
        self.collect()
        if index_in_run % self.segment_len == 0:
            self.current = [t.clone() if isinstance(t, torch.Tensor) else t for t in self.current]
        problem.refresh_inputs_(self.current, self.domains, self.gen)
        if (index_in_run + 1) % self.segment_len == 0:
            self.arm()

    def arm(self):
        """Make the next call a checkpoint: its seed and inputs are recorded, its output kept."""
        seed = self.seed * 1000 + len(self.checkpoints) + 1
        torch.manual_seed(seed)
        self.pending = {"seed": seed, "inputs": problem.to_device(self.current, "cpu")}

    def checkpoint_now(self):
        """Fresh values, and make the next call a checkpoint (for a run too short to reach one)."""
        problem.refresh_inputs_(self.current, self.domains, self.gen)
        self.arm()

    def keep(self, out):
        """Called with every timed call's output: holds the first one after a checkpoint was armed."""
        if self.pending is not None and "held" not in self.pending:
            self.pending["held"] = out

    def collect(self):
        if self.pending is not None and "held" in self.pending:
            outs = problem.flatten_outputs(self.pending.pop("held"))
            self.pending["metas"] = [compare.describe_tensor(o) for o in outs]
            self.pending["outputs"] = [o.detach().to("cpu") if type(o) is torch.Tensor else None for o in outs]
            self.checkpoints.append(self.pending)
            self.pending = None


def _time(state, m):
    device, model = state["device"], state["model"]
    inputs = problem.to_device(m["inputs"], device)
    refresher = _InputRefresher(inputs, device, m["seed"], m["iters"], m.get("checkpoints", 4))
    calls = {"n": 0}

    def before_each(_i):
        refresher.refresh(calls["n"])
        calls["n"] += 1

    def fn():
        refresher.keep(model(*refresher.current))

    warmed = timing.warm_clock(device, m.get("warm_seconds", 1.0))
    clock_before = timing.sm_clock_mhz(device.index or 0) if device.type == "cuda" else None
    with torch.no_grad(), timing.pinned_to(m.get("cpu")):
        if device.type == "cuda":
            stats = timing.time_cuda(fn, device=device, iters=m["iters"], warmup=m["warmup"],
                                     before_each=before_each, flush_l2=m.get("flush_l2", False))
        else:
            stats = timing.time_cpu(fn, iters=m["iters"], warmup=m["warmup"], before_each=before_each)
        refresher.collect()
        if not refresher.checkpoints:  # too few calls to reach one (--iters 1, say): one more, untimed
            refresher.checkpoint_now()
            fn()
            refresher.collect()
    stats["sm_clock_mhz_before"] = clock_before
    stats["clock_warm_seconds"] = warmed
    stats["sm_clock_mhz_after"] = timing.sm_clock_mhz(device.index or 0) if device.type == "cuda" else None
    return {"stats": stats, "checkpoints": refresher.checkpoints, "tampered": integrity.tampered(state["snapshot"])}


def _profile(state, m):
    """Kernels per forward (torch.profiler) and GPU-only time per forward (CUDA-graph replay where the
    solution can be captured): profiling.measure on the solution's forward."""
    device, model = state["device"], state["model"]
    inputs = problem.to_device(m["inputs"], device)
    return dict(profiling.measure(lambda: model(*inputs), device, m["calls"], m["replays"]),
                tampered=integrity.tampered(state["snapshot"]))


def _kernels(state, m):
    """Kernels launched by `calls` forwards (torch.profiler), for --strict: name, count, GPU µs."""
    device, model = state["device"], state["model"]
    inputs = problem.to_device(m["inputs"], device)
    with torch.no_grad():
        kernels = profiling.profile_kernels(lambda: model(*inputs), m["calls"], device)
    return {"kernels": kernels, "tampered": integrity.tampered(state["snapshot"])}


def _protocol(state, m):
    """One step of another evaluator's procedure (harness/protocols.py), e.g. a KernelBench trial."""
    return protocols.PROTOCOLS[m["protocol"]].WORKER_STEPS[m["step"]](state, m)


_HANDLERS = {"load": _load, "set_weights": _set_weights, "run": _run, "reference_decoy": _reference_decoy,
             "time": _time, "profile": _profile, "kernels": _kernels, "protocol": _protocol}
