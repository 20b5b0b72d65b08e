"""`bench --sweep NAME=V1,V2,...`: the bench at each value of one module-level size of the reference.

One worker (one import and build of the solution) serves every value whose get_init_inputs() is
the same; it is rebuilt when the init args change, or after the solution crashed. At each value
the bench checks correctness first (its check trial), then times every implementation. Timed
calls per implementation are scaled down for big sizes so that each spends about --sweep-budget
seconds (estimated from one eager reference call), never fewer than MIN_ITERS.

Results: one aligned table on stdout, and results/sweep_NAME.{json,md,png} (the plot needs
matplotlib, an optional extra imported only here and only when plotting).
"""
import argparse
import os
import time

import torch

from harness import EXIT_INTERRUPTED, EXIT_PASS, EXIT_SOLUTION_ERROR, UsageError, check, problem, report
from harness.bench import IMPLEMENTATIONS, LABELS, run_bench
from harness.cli import at_least
from harness.worker import SolutionFailure, Worker

MIN_ITERS = 10
PLOT_KINDS = ("solution", "eager", "compile-ro", "graph", "noop")
PLOT_LABELS = {"solution": "solution", "eager": "reference eager",
               "compile-ro": "torch.compile reduce-overhead", "graph": "reference eager, one CUDA graph",
               "noop": "no-op kernel launch (floor)"}
MATPLOTLIB_HINT = "the plot needs matplotlib: `pip install matplotlib`, then run the sweep again"


def parse_sweep(text: str) -> tuple:
    """'batch_size=1,32,128' -> ('batch_size', (1, 32, 128))."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=V1,V2,... (e.g. batch_size=1,32,128), got {text!r}")
    try:
        sizes = tuple(int(v) for v in values.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"sweep values must be integers, got {values!r}")
    if not sizes or any(v < 1 for v in sizes):
        raise argparse.ArgumentTypeError("sweep values must be integers >= 1")
    return name, sizes


def add_arguments(bench_parser):
    bench_parser.add_argument("--sweep", type=parse_sweep, metavar="NAME=V1,V2,...",
                              help="bench at each value of a module-level integer size of the reference, "
                              "e.g. batch_size=1,32,128,1024,4096,16384,65536; writes OUT_DIR/sweep_NAME.{json,md,png}")
    bench_parser.add_argument("--sweep-budget", type=at_least(float, 0.0, strict=True), default=1.5, metavar="SECONDS",
                              help="about this many seconds of timed calls per implementation and value "
                              "(fewer than --iters calls at big sizes; default 1.5)")
    bench_parser.add_argument("--out-dir", default="results", help="where sweep files go (default results/)")


def scaled_iters(estimate_us: float, max_iters: int, budget_s: float) -> int:
    """Timed calls so that one implementation spends about budget_s: the bench makes each call twice
    (once synchronized, once back to back), so budget_s / (2 x one call), within [MIN_ITERS, max_iters]."""
    if estimate_us <= 0:
        return max_iters
    return max(min(MIN_ITERS, max_iters), min(max_iters, int(budget_s * 1e6 / (2.0 * estimate_us))))


def estimate_call_us(model, inputs, device) -> float:
    """Wall time of one eager reference forward (after one warm-up call), synchronized: the slowest
    implementation in most sweeps, so it bounds the time per implementation."""
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    with torch.no_grad():
        model(*inputs)
        sync()
        t0 = time.perf_counter()
        for _ in range(3):
            model(*inputs)
        sync()
    return (time.perf_counter() - t0) / 3 * 1e6


class _Prefixed:
    """Progress lines as "sweep 3/7: batch_size=1024, timing round 1/5: reference eager"."""

    def __init__(self, progress):
        self.progress, self.prefix = progress, ""

    def __call__(self, text):
        if self.progress:
            self.progress(self.prefix if text is None else f"{self.prefix}, {text}")


def _load(worker, args, device, init_args):
    return worker.request({"op": "load", "solution": args.solution, "reference": args.reference,
                           "device": str(device), "init_args": init_args, "seed": args.seed},
                          timeout=args.load_timeout, what="importing and building the solution")


def row_from_bench(value, verdict: dict, code: int, iters: int, warmup: int) -> dict:
    """One sweep row: median µs per implementation and the solution's speedups."""
    medians = {k: r["median_us"] for k, r in verdict.get("results", {}).items() if "median_us" in r}
    sol = medians.get("solution")
    row = {"value": value, "shape": verdict.get("shape"), "exit_code": code, "iters": iters, "warmup": warmup,
           "median_us": medians,
           "speedup_vs_eager": medians["eager"] / sol if sol and "eager" in medians else None,
           "speedup_vs_compile_ro": medians["compile-ro"] / sol if sol and "compile-ro" in medians else None,
           "skipped": {k: r["skipped"] for k, r in verdict.get("results", {}).items() if "skipped" in r},
           "failures": verdict.get("failures", []), "error": verdict.get("error"),
           "rounds": verdict.get("rounds"), "cpu": verdict.get("cpu")}
    if "roofline" in verdict:
        row["roofline_floor_us"] = verdict["roofline"]["floor_us"]
    return row


def run_sweep(args, progress=None) -> tuple:
    """Returns (sweep data dict, exit code): the worst exit code over the values."""
    name, values = args.sweep
    device = check.resolve_device(args.device)
    ref_module = problem.load_reference(args.reference)
    with problem.sizes_overridden(ref_module, {name: values[0]}):
        pass  # a name that is not an integer size of the reference raises a UsageError listing those it has
    fixed = {"batch_size": args.batch_size} if getattr(args, "batch_size", None) and name != "batch_size" else {}
    data = {"command": "sweep", "solution": args.solution, "reference": args.reference, "parameter": name,
            "values": list(values), "default_value": getattr(ref_module, name), "flush_l2": args.flush_l2,
            "max_iters": args.iters, "budget_s": args.sweep_budget, "environment": None, "rows": []}
    status = _Prefixed(progress)
    worker, worker_init, worst = None, None, EXIT_PASS
    try:
        for i, value in enumerate(values, 1):
            shape = dict(fixed, **{name: value})
            status.prefix = f"sweep {i}/{len(values)}: {name}={value}"
            init_args = problem.init_inputs(ref_module, shape)
            ref = problem.build_reference(ref_module, init_args, args.seed, device)
            inputs = problem.make_inputs(ref_module, args.seed, device, shape)
            status("estimating the time per call")
            iters = scaled_iters(estimate_call_us(ref, inputs, device), args.iters, args.sweep_budget)
            del ref, inputs
            run_args = argparse.Namespace(**vars(args))
            run_args.iters, run_args.warmup = iters, min(args.warmup, iters)
            if worker is not None and worker_init != init_args:
                worker.close()
                worker = None
            try:
                if worker is None:
                    worker, worker_init = Worker(status), init_args
                    _load(worker, args, device, init_args)
                verdict, code = run_bench(run_args, progress=status, worker=worker, shape=shape)
            except SolutionFailure as f:
                verdict = {"shape": check.shape_label(ref_module, shape), "results": {}, "failures": [],
                           "error": {"kind": f.kind, "message": f.message, "detail": f.detail}}
                code = EXIT_SOLUTION_ERROR
            if code == EXIT_SOLUTION_ERROR and worker is not None:
                worker.close()  # a crashed or hung solution gets a fresh process at the next value
                worker = None
            data["environment"] = data["environment"] or verdict.get("environment")
            data["rows"].append(row_from_bench(value, verdict, code, iters, run_args.warmup))
            worst = max(worst, code)
            save_rows_so_far(data, getattr(args, "out_dir", None))
    except KeyboardInterrupt:  # keep what was measured: the caller writes and prints the rows done
        data["interrupted"] = f"interrupted (Ctrl-C) after {len(data['rows'])} of {len(values)} values"
        worst = EXIT_INTERRUPTED
    finally:
        if worker is not None:
            worker.close()
        if progress:
            progress(None)
    return data, worst


# ----- tables, files and the plot --------------------------------------------------------------

def timed_kinds(data: dict) -> list:
    """Implementations with a time in any row, in the bench's order."""
    seen = {k for row in data["rows"] for k in row["median_us"]}
    return [k for k in ("solution",) + IMPLEMENTATIONS if k in seen]


def _speedup(x) -> str:
    return f"{x:.2f}x" if x is not None else "-"


def _result_word(row) -> str:
    if row.get("error"):
        return f"ERROR: {row['error']['message'][:60]}"
    if row["failures"]:
        return f"FAIL [{row['failures'][0]['defence']}]"
    return "pass"


def table_rows(data: dict) -> tuple:
    """(headers, rows) shared by the text table and the Markdown table."""
    kinds = timed_kinds(data)
    headers = [data["parameter"]] + [f"{LABELS[k]} us" for k in kinds] + [
        "speedup vs eager", "speedup vs compile-ro", "iters", "result"]
    rows = []
    for row in data["rows"]:
        cells = [str(row["value"])]
        cells += [f"{row['median_us'][k]:.1f}" if k in row["median_us"] else "-" for k in kinds]
        cells += [_speedup(row["speedup_vs_eager"]), _speedup(row["speedup_vs_compile_ro"]), str(row["iters"]),
                  _result_word(row)]
        rows.append(cells)
    return headers, rows


def rounds_and_cpu(data: dict) -> str:
    """How the rows were timed, as bench's method line says it: "; in 5 rounds alternating ..., from CPU 15"."""
    rounds = sorted({row["rounds"] for row in data["rows"] if row.get("rounds")})
    cpus = sorted({row["cpu"] for row in data["rows"] if row.get("cpu") is not None})
    text = ""
    if rounds:
        text += f"; timed in {'/'.join(map(str, rounds))} {report.ROUNDS_TEXT}"
    if cpus:
        text += f"; {report.pinned_text('/'.join(map(str, cpus)))}"
    return text


def format_sweep(data: dict, exit_code: int) -> str:
    env = data.get("environment") or {}
    headers, rows = table_rows(data)
    lines = [f"sweep: {data['solution']} over {data['parameter']} = {', '.join(map(str, data['values']))} "
             f"on {env.get('gpu', env.get('device'))}, torch {env.get('torch')}",
             f"median us per call ({'CUDA events, device-wide sync between calls' if env.get('gpu') else 'host clock'}"
             f", inputs refreshed before each"
             f"{', L2 flushed' if data['flush_l2'] else ''}); up to {data['max_iters']} timed calls per "
             f"implementation, fewer at big sizes (about {data['budget_s']:g} s each); correctness checked at "
             f"each value before timing{rounds_and_cpu(data)}", "",
             report.table(headers, rows, align="l" + "r" * (len(headers) - 1) + "l")]
    for row in data["rows"]:
        if row.get("error"):
            lines.append(f"\n{data['parameter']}={row['value']}: ERROR ({row['error']['kind']}): "
                         f"{row['error']['message']}")
        for f in row["failures"]:
            lines.append(f"\n{data['parameter']}={row['value']}: FAIL [{f['defence']}] {f['message']}")
    files = data.get("files", {})
    if files:
        lines.append("")
        lines += [f"wrote {path}" for path in files.values() if path]
    if data.get("plot_note"):
        lines.append(data["plot_note"])
    if data.get("interrupted"):
        lines += ["", data["interrupted"] + "; the rows above are complete"]
    word = {0: "PASS", 1: "FAIL", 2: "ERROR (the solution could not be loaded, built or run at some value)",
            EXIT_INTERRUPTED: "INTERRUPTED"}
    lines += ["", f"{word.get(exit_code, 'ERROR')}: exit {exit_code}"]
    return "\n".join(lines)


def markdown_table(data: dict) -> str:
    headers, rows = table_rows(data)
    headers = [h.replace(" us", " µs") for h in headers]
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join(["---:"] * (len(headers) - 1) + [":---"]) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def markdown_report(data: dict) -> str:
    env = data.get("environment") or {}
    return "\n".join([
        f"## Sweep over `{data['parameter']}`: {data['solution']}", "",
        f"{env.get('gpu', env.get('device'))}, torch {env.get('torch')}, CUDA {env.get('cuda', '-')}. "
        f"Median µs per call; speedups are the reference's median over the solution's, measured side by side "
        f"in one run{rounds_and_cpu(data)}.", "", markdown_table(data), ""])


def make_figure(data: dict):
    """A log-log matplotlib figure: median µs per call against the swept size, one line per implementation."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for kind in PLOT_KINDS:
        points = [(row["value"], row["median_us"][kind]) for row in data["rows"] if kind in row["median_us"]]
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o", linewidth=2 if kind == "solution" else 1.2,
                    linestyle=":" if kind == "noop" else "-", label=PLOT_LABELS[kind])
    ax.set_xscale("log")
    ax.set_yscale("log")
    values = [row["value"] for row in data["rows"]]
    ax.set_xticks(values, [str(v) for v in values])
    ax.minorticks_off()
    ax.set_xlabel(data["parameter"])
    ax.set_ylabel("median µs per call")
    env = data.get("environment") or {}
    ax.set_title(f"{os.path.basename(data['solution'])} vs the reference, {env.get('gpu', env.get('device', ''))}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def write_plot(data: dict, path: str):
    """Writes the PNG; returns (path or None, a note for the user)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None, f"no plot: {MATPLOTLIB_HINT}"
    import matplotlib.pyplot as plt
    fig = make_figure(data)
    fig.savefig(path)
    plt.close(fig)
    return path, ""


def save_rows_so_far(data: dict, out_dir):
    """results/sweep_NAME.json after every value, so a sweep killed half-way leaves its rows."""
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        report.write_json(os.path.join(out_dir, f"sweep_{data['parameter']}.json"), data)


def write_outputs(data: dict, out_dir: str) -> dict:
    """results/sweep_NAME.{json,md,png}; records the paths (png None without matplotlib) in data['files']."""
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, f"sweep_{data['parameter']}")
    png, note = write_plot(data, stem + ".png")
    data["files"] = {"json": stem + ".json", "md": stem + ".md", "png": png}
    data["plot_note"] = note
    with open(stem + ".md", "w") as f:
        f.write(markdown_report(data))
    report.write_json(stem + ".json", data)
    return data["files"]
