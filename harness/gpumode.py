"""`--protocol gpumode`: GPU MODE's evaluation of a problem directory, reproduced beside this harness's.

A GPU MODE problem directory (what `python -m harness export --to gpumode DIR` writes) holds
reference.py (generate_input(**spec), ref_kernel(data), check_implementation(data, output)), task.py,
task.yml (tests, benchmarks, ranking_by) and a submission.py with custom_kernel(data).

What GPU MODE does (gpu-mode/reference-kernels problems/pmpp_v2/eval.py, the eval.py that task.yml's
`../eval.py` names; gpu-mode/kernelbot src/libkernelbot/run_eval.py and submission.py), as reproduced:
  - kernelbot writes task.yml's tests/benchmarks as lines `k: v; k: v` (build_test_string); eval.py
    parses them back (get_test_cases), adding a secret seed to each `seed` (_combine, a Cantor pairing)
    when POPCORN_SEED is set (its set_seed(seed or 42) seeds the parent, not the spawned worker, so it
    changes nothing the cases see). Here no secret seed is set unless --gpumode-seed.
  - every case runs in one spawned worker process (multiprocessing Pool(1)), `from submission import
    custom_kernel` inside it.
  - test: data = generate_input(**case); synchronize; output = custom_kernel(clone of data); synchronize;
    check_implementation(data, output) -> (ok, message). All cases run; any failure fails the mode.
  - benchmark: one untimed warm-up benchmark of the first case (max 100 runs, 0.1 s); then per case:
    generate once, one checked call, then up to 100 timed calls on the same data, each: synchronize,
    new CUDA events, L2 cleared (a 256 MiB int64 fill), record, custom_kernel(data), record,
    synchronize; after the third call it stops once the standard error is under 0.1% of the mean, or
    mean x runs passes 10 s, or 120 s of wall time. Reported in ns: runs, mean, std, err, best, worst.
  - leaderboard (a ranked submission: kernelbot runs test, then benchmark, then this): warm-up as above
    (0.01 s); per case the same loop with a 30 s cap, but before every timed call the seed goes up by 13
    and the inputs are generated again, and every output is checked; the first failure ends the run.
  - score (kernelbot compute_score): ranking_by `geom` is the geometric mean of the leaderboard
    benchmarks' means (seconds); `last` (the default) uses only the last benchmark line, `mean` the
    arithmetic mean.
Without a GPU the same steps run with the host clock instead of CUDA events and no L2 flush (tests).

The adapter half (reference_view, solution_model) lets this harness's own check and bench run on such a
directory: the problem's weights become the parameters of a Model whose forward takes the inputs.
"""
import importlib.util
import json
import math
import multiprocessing
import os
import re
import sys
import time
import types

import torch

from harness import UsageError, timing

SOURCE = ("gpu-mode/reference-kernels problems/pmpp_v2/eval.py (run_testing, _run_single_benchmark, main); "
          "gpu-mode/kernelbot src/libkernelbot/run_eval.py (run_evaluation), submission.py (compute_score)")
NAME = "gpumode"
COLUMN = "GPU MODE"
WORKER_STEPS = {}   # none: the cases run in a spawned worker of this module's own
TITLE = "GPU MODE's procedure, reproduced (" + SOURCE.replace("{", "{{").replace("}", "}}") + "), on {directory}:"
MAX_REPEATS = 100
WARMUP_MAX_NS = {"benchmark": 10e7, "leaderboard": 1e7}
MAX_TIME_NS = {"benchmark": 10e9, "leaderboard": 30e9}
WALL_MAX_NS = 120e9
REL_ERR = 0.001
SEED_STEP = 13
DEFAULT_BATCH_SIZE = 128


def add_arguments(parser):
    parser.add_argument("--gpumode-seed", type=int, default=None,
                        help="--protocol gpumode: the secret seed GPU MODE's runner sets (POPCORN_SEED); default none")
    parser.add_argument("--gpumode-modes", default="test,benchmark,leaderboard",
                        help="--protocol gpumode: which of GPU MODE's modes to run (default all three)")


# ----- task.yml and test cases ------------------------------------------------------------------------

def read_task(directory: str) -> dict:
    """task.yml's tests, benchmarks, ranking_by and timeouts. PyYAML when installed; otherwise the
    subset the export writes (one JSON object per `- {...}` line, `key: value` scalars)."""
    path = os.path.join(directory, "task.yml")
    if not os.path.isfile(path):
        raise UsageError(f"--protocol gpumode needs a GPU MODE problem directory: no task.yml beside the reference "
                         f"({directory}); write one with `python -m harness export --to gpumode DIR`, then pass "
                         "--reference DIR/reference.py --solution DIR/submission.py")
    with open(path) as f:
        text = f.read()
    if importlib.util.find_spec("yaml"):
        import yaml
        task = yaml.safe_load(text)
    else:
        task, section = {}, None
        for line in text.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            m = re.match(r"^(\w+):\s*(.*)$", line)
            if m:
                section, value = m.group(1), m.group(2).strip().strip('"')
                task[section] = [] if not value or value == "|" else (int(value) if value.isdigit() else value)
            elif line.lstrip().startswith("- {") and isinstance(task.get(section), list):
                task[section].append(json.loads(line.lstrip()[2:]))
    for key in ("tests", "benchmarks"):
        if not task.get(key):
            raise UsageError(f"{path}: no {key}")
    return {"tests": task["tests"], "benchmarks": task["benchmarks"], "ranking_by": task.get("ranking_by", "last")}


def test_line(case: dict) -> str:
    """kernelbot's build_test_string, one case."""
    return "; ".join(f"{k}: {v}" for k, v in case.items())


def parse_test_line(line: str) -> dict:
    """eval.py's get_test_cases, one line: integers where they parse, else the word."""
    case = {}
    for part in line.split(";"):
        m = re.fullmatch(r"\s*([a-zA-Z]+):\s*([a-zA-Z]+|[+-]?[0-9]+)\s*", part)
        if not m:
            raise UsageError(f"GPU MODE's eval.py would reject the test case {line!r} (part {part!r})")
        case[m.group(1)] = int(m.group(2)) if re.fullmatch(r"[+-]?[0-9]+", m.group(2)) else m.group(2)
    return case


def combine(a: int, b: int) -> int:
    """eval.py's _combine: the test seed and the secret seed, Cantor-paired."""
    return int(a + (a + b) * (a + b + 1) // 2)


def cases(specs: list, secret_seed) -> list:
    """The cases as eval.py sees them: through the text round trip, the secret seed combined in."""
    out = []
    for spec in specs:
        line = test_line(spec)
        case = parse_test_line(line)
        if secret_seed is not None and "seed" in case:
            case["seed"] = combine(case["seed"], secret_seed)
        out.append({"spec": line, "args": case})
    return out


def stats(durations_ns: list) -> dict:
    """eval.py's calculate_stats (ns; std with n - 1, err = std / sqrt(n))."""
    runs = len(durations_ns)
    mean = sum(durations_ns) / runs
    std = math.sqrt(sum((d - mean) ** 2 for d in durations_ns) / (runs - 1)) if runs > 1 else 0.0
    return {"runs": runs, "mean": mean, "std": std, "err": std / math.sqrt(runs),
            "best": float(min(durations_ns)), "worst": float(max(durations_ns))}


def score_seconds(means_ns: list, ranking_by: str) -> float:
    """kernelbot's compute_score over the leaderboard benchmarks' means."""
    seconds = [m / 1e9 for m in means_ns]
    if ranking_by == "last":
        return seconds[-1]
    if ranking_by == "mean":
        return sum(seconds) / len(seconds)
    return math.prod(seconds) ** (1.0 / len(seconds))


# ----- the adapter: a GPU MODE directory seen as a KernelBench-format pair ---------------------------

def is_gpumode_reference(module) -> bool:
    return all(hasattr(module, n) for n in ("generate_input", "ref_kernel", "check_implementation")) and \
        not hasattr(module, "Model")


def _split_data(data):
    """(input tensors, weights dict): data is (tensor, ..., {name: tensor})."""
    if not isinstance(data, (tuple, list)) or not data or not isinstance(data[-1], dict):
        raise UsageError("the harness runs GPU MODE problems whose data is (tensors..., {weight name: tensor})")
    return list(data[:-1]), data[-1]


class _WeightsModel(torch.nn.Module):
    """Parameters named as the problem's weights dict (dotted names become submodules, so the state_dict
    keys are the names); forward(*inputs) calls `kernel((*inputs, weights))`."""

    def __init__(self, weights: dict, kernel):
        super().__init__()
        for name, value in weights.items():
            owner = self
            *path, leaf = name.split(".")
            for part in path:
                if not hasattr(owner, part):
                    owner.add_module(part, torch.nn.Module())
                owner = getattr(owner, part)
            owner.register_parameter(leaf, torch.nn.Parameter(value.detach().clone(), requires_grad=False))
        self._kernel = kernel
        self._refresh()

    def _refresh(self):
        # The Parameter objects themselves, looked up once: a forward costs no module walk.
        self._weights = dict(self.named_parameters())

    def _apply(self, fn, *args, **kwargs):
        module = super()._apply(fn, *args, **kwargs)
        self._refresh()
        return module

    def load_state_dict(self, *args, **kwargs):
        result = super().load_state_dict(*args, **kwargs)
        self._refresh()
        return result

    def forward(self, *inputs):
        return self._kernel((*inputs, dict(self._weights)))


def _draw_seed() -> int:
    return int(torch.randint(0, 2 ** 31 - 1, (1,)).item())  # from torch's default generator: follows manual_seed


def reference_view(module, batch_size: int = DEFAULT_BATCH_SIZE):
    """A KernelBench-format module over a GPU MODE reference: Model() holds generate_input's weights
    (drawn under a seed from torch's generator), forward = ref_kernel; get_inputs() = its inputs."""
    view = types.ModuleType(f"{module.__name__}_as_kernelbench")
    view.batch_size = batch_size
    view.gpumode_reference = module

    def make_model():
        _, weights = _split_data(module.generate_input(1, _draw_seed()))
        return _WeightsModel({k: v.cpu() for k, v in weights.items()}, module.ref_kernel)

    def get_inputs():
        inputs, _ = _split_data(module.generate_input(view.batch_size, _draw_seed()))
        return [t.cpu() for t in inputs]

    view.Model = make_model
    view.get_inputs = get_inputs
    view.get_init_inputs = lambda: []
    return view


def solution_model(submission, reference_module):
    """ModelNew for a submission with custom_kernel: the reference view's parameters, forward = custom_kernel."""
    def make_model():
        _, weights = _split_data(reference_module.generate_input(1, 0))
        return _WeightsModel({k: v.cpu() for k, v in weights.items()}, submission.custom_kernel)
    return make_model


# ----- the procedure, in GPU MODE's worker process -------------------------------------------------

_loaded = {}


def _load_in_worker(directory: str, submission_path: str):
    """The problem directory first on sys.path (its reference.py and task.py), the submission as the
    module `submission`, as eval.py imports them. Returns an error message, or '' when loaded."""
    sys.path.insert(0, os.path.abspath(directory))
    for name in ("task", "reference", "submission"):
        sys.modules.pop(name, None)
    try:
        for name, path in (("reference", os.path.join(directory, "reference.py")), ("submission", submission_path)):
            spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            _loaded[name] = module
    except BaseException as e:  # the submission's import or build failed: GPU MODE reports it as a failure
        return f"{type(e).__name__}: {e}"
    return ""


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _clone(data):
    """eval.py's _clone_data."""
    if isinstance(data, tuple):
        return tuple(_clone(x) for x in data)
    if isinstance(data, list):
        return [_clone(x) for x in data]
    if isinstance(data, dict):
        return {k: _clone(v) for k, v in data.items()}
    return data.clone() if isinstance(data, torch.Tensor) else data


def _worker_test(args: dict):
    ref, sub = _loaded["reference"], _loaded["submission"]
    data = ref.generate_input(**args)
    _sync()
    output = sub.custom_kernel(_clone(data))
    _sync()
    return ref.check_implementation(data, output)


def _timed_call_ns(fn) -> tuple:
    """(ns, fn's output): synchronize, new events, L2 cleared, record, call, record, synchronize."""
    if not torch.cuda.is_available():
        t0 = time.perf_counter_ns()
        output = fn()
        return float(time.perf_counter_ns() - t0), output
    _sync()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    timing.clear_l2_as_leaderboards("cuda")
    start.record()
    output = fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e6, output


def _worker_benchmark(args: dict, recheck: bool, max_repeats: int, max_time_ns: float):
    """eval.py's _run_single_benchmark: a stats dict, or the failure message."""
    ref, sub = _loaded["reference"], _loaded["submission"]
    args = dict(args)
    data = ref.generate_input(**args)
    check_copy = _clone(data)
    output = sub.custom_kernel(data)
    good, message = ref.check_implementation(check_copy, output)
    if not good:
        return message
    durations, start_ns = [], time.perf_counter_ns()
    for i in range(max_repeats):
        if recheck:
            if "seed" in args:
                args["seed"] += SEED_STEP
            data = ref.generate_input(**args)
            check_copy = _clone(data)
        duration_ns, output = _timed_call_ns(lambda: sub.custom_kernel(data))
        if recheck:
            good, message = ref.check_implementation(check_copy, output)
            if not good:
                return message
        del output
        durations.append(duration_ns)
        if i > 1:
            s = stats(durations)
            if s["err"] / s["mean"] < REL_ERR or s["mean"] * s["runs"] > max_time_ns \
                    or time.perf_counter_ns() - start_ns > WALL_MAX_NS:
                break
    return stats(durations)


# ----- the parent side ---------------------------------------------------------------------------

def run_procedure(directory: str, submission_path: str, modes=("test", "benchmark", "leaderboard"),
                  secret_seed=None, load_timeout: float = 900.0, case_timeout: float = 420.0, progress=None) -> dict:
    """GPU MODE's modes on the directory, in one spawned worker process. Returns a result dict."""
    task = read_task(directory)
    result = {"source": SOURCE, "directory": directory, "ranking_by": task["ranking_by"],
              "secret_seed": secret_seed, "modes": {}}
    tests, benchmarks = cases(task["tests"], secret_seed), cases(task["benchmarks"], secret_seed)
    if task["ranking_by"] == "last":
        benchmarks = benchmarks[-1:]  # kernelbot writes only the last benchmark line for ranking_by last
    pool = multiprocessing.get_context("spawn").Pool(1)
    try:
        error = pool.apply_async(_load_in_worker, (directory, submission_path)).get(load_timeout)
        if error:
            result["error"] = f"importing the submission failed: {error}"
            return result
        for mode in modes:
            if progress:
                progress(f"GPU MODE protocol: {mode}")
            result["modes"][mode] = _run_mode(pool, mode, tests, benchmarks, case_timeout)
            if not result["modes"][mode]["passed"]:
                break  # kernelbot stops a ranked run at the first failing mode
    except multiprocessing.TimeoutError:
        result["error"] = "a case did not finish within its time limit (the worker was stopped)"
    except Exception as e:  # the submission raised inside a case: GPU MODE's run ends with that error
        result["error"] = f"{type(e).__name__}: {e}"
    finally:
        pool.terminate()
        pool.join()
        if progress:
            progress(None)
    lb = result["modes"].get("leaderboard")
    if lb and lb["passed"]:
        result["score_seconds"] = score_seconds([c["stats"]["mean"] for c in lb["cases"]], task["ranking_by"])
    return result


def _run_mode(pool, mode, tests, benchmarks, timeout) -> dict:
    if mode == "test":
        out = []
        for case in tests:
            good, message = pool.apply_async(_worker_test, (case["args"],)).get(timeout)
            out.append({"spec": case["spec"], "passed": bool(good), "message": message})
        return {"passed": all(c["passed"] for c in out), "cases": out}
    if mode not in MAX_TIME_NS:
        raise UsageError(f"unknown GPU MODE mode {mode!r}: test, benchmark or leaderboard")
    recheck = mode == "leaderboard"
    pool.apply_async(_worker_benchmark, (benchmarks[0]["args"], False, MAX_REPEATS, WARMUP_MAX_NS[mode])).get(timeout)
    out = []
    for case in benchmarks:
        r = pool.apply_async(_worker_benchmark, (case["args"], recheck, MAX_REPEATS, MAX_TIME_NS[mode])).get(timeout)
        out.append({"spec": case["spec"], "passed": isinstance(r, dict),
                    "stats": r if isinstance(r, dict) else None, "message": "" if isinstance(r, dict) else str(r)})
        if recheck and not isinstance(r, dict):
            break
    return {"passed": all(c["passed"] for c in out), "cases": out}


def run(args, verdict: dict, progress=None) -> dict:
    """--protocol gpumode for check and bench: the directory is the reference's; `check` runs the test
    mode only, `bench` all modes named by --gpumode-modes."""
    directory = os.path.dirname(os.path.abspath(args.reference))
    modes = ["test"] if verdict.get("command") == "check" else \
        [m.strip() for m in args.gpumode_modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in ("test",) + tuple(MAX_TIME_NS)]
    if unknown:
        raise UsageError(f"--gpumode-modes: unknown mode(s) {unknown}; GPU MODE's are test, benchmark, leaderboard")
    return run_procedure(directory, args.solution, modes, args.gpumode_seed, args.load_timeout,
                         max(args.call_timeout, 420.0), progress)


# ----- the side-by-side report -------------------------------------------------------------------

def _mode_words(mode: dict) -> str:
    bad = [c for c in mode["cases"] if not c["passed"]]
    word = "PASS" if not bad else "FAIL"
    return f"{word} {len(mode['cases']) - len(bad)}/{len(mode['cases'])} cases" + (
        f" (first failure, {bad[0]['spec']}: {bad[0]['message'][:300]})" if bad else "")


def differences(result: dict, verdict: dict) -> list:
    """Notes on where GPU MODE's procedure and this harness's differ, and why, for this run."""
    own_passed = bool(verdict.get("passed"))
    notes = []
    if result.get("error"):
        return [f"GPU MODE's run ended with an error: {result['error']}"]
    passed = all(m["passed"] for m in result["modes"].values())
    if passed != own_passed:
        notes.append("the verdicts differ: GPU MODE checks only task.yml's cases with the problem's own "
                     "check_implementation, once each; this harness checks more shapes and trials, a float64 "
                     "truth, and its defences (noise state, aliasing, mutation, caching, tampering).")
    notes.append("correctness: GPU MODE runs task.yml's tests once each with the problem's check_implementation "
                 "(and, ranked, rechecks every timed call on inputs regenerated with seed + 13); this harness "
                 "runs its trials per shape (check: 5 at 7 batch sizes by default; bench: --trials) twice each, "
                 "with fresh weights loaded into the solution, plus the float64 truth rule.")
    if "benchmark" in result["modes"] or "leaderboard" in result["modes"]:
        notes.append("timing: GPU MODE reports the mean per case of up to 100 calls (stopping at 0.1% standard "
                     "error), each after an L2 flush, on the same inputs in benchmark mode and new inputs per call "
                     "in leaderboard mode, and ranks by the geometric mean over the cases (ranking_by geom); this "
                     "harness reports the median with fresh inputs before each call, in rounds alternating with "
                     "the references.")
    return notes


def comparison_rows(gm: dict, verdict: dict, own_word: str) -> list:
    """Rows [what, this harness, GPU MODE] for the side-by-side table (harness/report.py formats it)."""
    rows = [["verdict", own_word, "ERROR: " + gm["error"][:300] if gm.get("error") else ""]]
    for mode, m in gm.get("modes", {}).items():
        rows.append([f"{mode} mode", "", _mode_words(m)])
        for c in m["cases"]:
            if c.get("stats"):
                s = c["stats"]
                rows.append([f"  {c['spec']}", "", f"mean {s['mean'] / 1e3:.2f} us (runs {s['runs']}, "
                             f"err {s['err'] / s['mean']:.2%}, best {s['best'] / 1e3:.2f} us)"])
    if "score_seconds" in gm:
        rows.append(["score", "", f"{gm['score_seconds'] * 1e6:.2f} us (ranking_by {gm['ranking_by']})"])
    return rows
