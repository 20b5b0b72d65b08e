"""What people read: each command's verdict as text, the sweep's files and plot, JSON, the progress line.

format_check, format_bench, format_profile, format_sweep (+ write_sweep_files: JSON, Markdown, PNG)
and format_comparison (--protocol: this harness's verdict beside another evaluator's). matplotlib, an
optional extra, is imported only when plotting.
"""
import json
import os
import sys

from harness import EXIT_INTERRUPTED, protocols
from harness.bench import IMPLEMENTATIONS, LABELS


def table(headers: list, rows: list, align=None) -> str:
    """An aligned text table; `align` is a string of 'l'/'r' per column (default: first left, rest right)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    align = align or "l" + "r" * (len(headers) - 1)
    def fmt(r):
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(r, widths, align)).rstrip()
    lines = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    return "\n".join(lines + [fmt(r) for r in cells[1:]])


def write_json(path: str, data: dict):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=2, default=str)
        f.write("\n")


class Progress:
    """One self-overwriting status line on a terminal; silent when stderr is not a terminal (CI logs)."""

    def __init__(self, stream=None, enabled=None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.width = 0

    def __call__(self, text):
        if not self.enabled:
            return
        if text is None:
            self.stream.write("\r" + " " * self.width + "\r")
            self.width = 0
        else:
            text = f"  {text}"
            self.stream.write("\r" + text.ljust(self.width))
            self.width = max(self.width, len(text))
        self.stream.flush()


MAX_FAILURES_SHOWN = 3
ERROR_DETAIL_LINES = 15


def error_lines(verdict: dict) -> list:
    """The solution's error (exit 2) and the last lines of its traceback or log; none without an error."""
    e = verdict.get("error")
    if not e:
        return []
    lines = ["", f"ERROR ({e['kind']}): {e['message']}"]
    if e.get("detail"):
        lines += ["  " + line for line in e["detail"].rstrip().splitlines()[-ERROR_DETAIL_LINES:]]
    return lines


def _fmt_err(x) -> str:
    return f"{x:.1e}" if x is not None else "-"


def format_scan(scan: list) -> list:
    """The static scan's findings, one line per (severity, message) with the lines it was found on."""
    if not scan:
        return []
    groups = {}
    for x in scan:
        groups.setdefault((x["severity"], x["message"]), []).append(x["line"])
    out = ["", "source scan of the solution (warnings mark lines worth a look and do not decide the verdict; "
           "failures do):"]
    for (severity, message), where in groups.items():
        label = f"line {where[0]}" if len(where) == 1 else "lines " + ", ".join(str(n) for n in where)
        out.append(f"  {label}: {severity}: {message}")
    return out


def format_check(verdict: dict, exit_code: int) -> str:
    tol = verdict["tolerance"]
    lines = [f"check: {verdict['solution']} against {verdict['reference']} on {verdict['device']}",
             f"rule: allclose atol=rtol={tol['atol']:g} against float32 eager, and error against float64 truth "
             f"<= {tol['truth_factor']:g} x eager's + {tol['truth_floor']:.0e}; {verdict['trials']} trials per shape, "
             f"base seed {verdict['seed']}"]
    if "import_seconds" in verdict:
        lines.append(f"solution imported (and built) in {verdict['import_seconds']:.1f} s")
    lines += error_lines(verdict)
    for f in verdict.get("failures", []):
        lines += ["", f"FAIL [{f['defence']}] {f['message']}"]
    if verdict["shapes"]:
        rows = []
        for s in verdict["shapes"]:
            worst = s["errors"]
            abs_diff = max((e["max_abs_diff"] for e in worst.values()), default=None)
            ratio = max((e["solution_rel_err"] / max(e["eager_rel_err"], 1e-300) for e in worst.values()), default=None)
            result = "FAIL" if s["failures"] else ("ERROR" if s.get("error") else "pass")
            rows.append([s["shape"], f"{s['trials_passed']}/{verdict['trials']}", result, _fmt_err(abs_diff),
                         f"{ratio:.2f}" if ratio is not None else "-"])
        lines += ["", table(["shape", "trials", "result", "max abs diff", "err/eager err (vs fp64)"], rows)]
        for s in verdict["shapes"]:
            for f in s["failures"][:MAX_FAILURES_SHOWN]:
                lines.append(f"\nFAIL [{f['defence']}] {s['shape']}, trial seed {s.get('failed_trial_seed')}: "
                             f"{f['message']}")
            if len(s["failures"]) > MAX_FAILURES_SHOWN:
                lines.append(f"... and {len(s['failures']) - MAX_FAILURES_SHOWN} more failures for {s['shape']} "
                             "(all of them with --json)")
    lines += format_scan(verdict.get("scan", []))
    verdict_word = {0: "PASS", 1: "FAIL (incorrect)", 2: "ERROR (solution could not be loaded, built or run)"}
    lines += ["", f"{verdict_word.get(exit_code, 'ERROR')}: exit {exit_code}"]
    return "\n".join(lines)


ROUNDS_TEXT = "round(s) alternating the solution and the references"


def pinned_text(cpus) -> str:
    """The CPU (or CPUs, 'a/b') both processes launched from while timing; bench and sweep say it alike."""
    return f"the harness and the solution both timed from CPU {cpus}"


def format_bench(verdict: dict, exit_code: int) -> str:
    env = verdict.get("environment", {})
    lines = [f"bench: {verdict['solution']} on {env.get('gpu', env.get('device'))}, {verdict['shape']}, "
             f"torch {env.get('torch')}, TF32 {'on' if env.get('tf32_matmul') else 'off'}",
             f"method: {verdict['iters']} timed calls each in {verdict.get('rounds', 1)} {ROUNDS_TEXT}, "
             f"{verdict['warmup']} warm-up calls per round, CUDA events around each "
             f"call with a device-wide sync between calls{', L2 flushed before each' if verdict['flush_l2'] else ''}; "
             "inputs refreshed before every call"
             + (f"; {pinned_text(verdict['cpu'])}" if verdict.get("cpu") is not None
                else "")]
    lines += error_lines(verdict)
    rows = []
    for kind, r in verdict["results"].items():
        label = LABELS.get(kind, kind)
        if "skipped" in r:
            rows.append([label] + ["-"] * 6 + [f"skipped: {r['skipped']}"])
            continue
        speed = "1.00x (itself)" if kind == "solution" else f"{r['speedup']:.2f}x"
        rows.append([label, f"{r['median_us']:.1f}", f"{r['mean_us']:.1f}", f"{r['std_us']:.1f}", f"{r['min_us']:.1f}",
                     f"{r['max_us']:.1f}", f"{r['back_to_back_us']:.1f}", speed])
    if rows:
        lines += ["", table(["implementation", "median us", "mean us", "std us", "min us", "max us",
                             "back-to-back us/call", "solution speedup"], rows, align="lrrrrrrl")]
    sol = verdict["results"].get("solution", {})
    if sol.get("sm_clock_mhz_before") is not None:
        warmed = sol.get("clock_warm_seconds")
        lines.append(f"SM clock: {sol['sm_clock_mhz_before']} MHz before timing the solution"
                     f"{f' (after {warmed:.2f} s of warm-up)' if warmed is not None else ''}, "
                     f"{sol['sm_clock_mhz_after']} MHz after")
    if "roofline" in verdict:
        f = verdict["roofline"]
        lines.append(f"roofline floor: {f['floor_us']:.2f} us ({f['flops'] / 1e6:.1f} MFLOP, {f['min_bytes'] / 1e6:.2f} MB"
                     f"{'' if f['memory_floor_applies'] else ', data fits in L2'})")
    for f in verdict.get("failures", []):
        lines += ["", f"FAIL [{f['defence']}] {f['message']}"]
    word = {0: "PASS", 1: "FAIL", 2: "ERROR (solution could not be loaded, built or run)"}
    lines += ["", f"{word.get(exit_code, 'ERROR')}: exit {exit_code}"]
    return "\n".join(lines)


# ----- profile ----------------------------------------------------------------------------------------

KERNEL_NAME_WIDTH = 60


def _short(name: str, width: int = KERNEL_NAME_WIDTH) -> str:
    return name if len(name) <= width else name[:width - 3] + "..."


def format_kernels(title: str, m: dict) -> list:
    launches = sum(k["per_forward"] for k in m["kernels"])
    lines = [f"{title}: {launches:g} kernel launch{'es' if launches != 1 else ''} per forward "
             f"({len(m['kernels'])} distinct)"]
    rows = [[_short(k["name"]), f"{k['per_forward']:g}", f"{k['gpu_us_per_forward']:.2f}",
             f"{100 * k['gpu_us_per_forward'] / m['kernel_sum_us']:.0f}%" if m["kernel_sum_us"] else "-"]
            for k in m["kernels"]]
    lines += ["  " + line for line in table(["kernel", "per forward", "GPU us/forward", "share"],
                                                    rows).splitlines()]
    if "graph_us" in m:
        n = m.get("forwards_per_graph", 1)
        lines.append(f"  GPU-only time per forward: {m['graph_us']:.2f} us ({n} forward{'s' if n != 1 else ''} in one "
                     f"CUDA graph, {m['replays']} replays back to back); profiled kernels sum to {m['kernel_sum_us']:.2f} us")
    else:
        lines.append(f"  GPU-only time per forward: {m['kernel_sum_us']:.2f} us (sum of profiled kernel times; "
                     f"CUDA-graph capture failed: {m.get('graph_error', '?')})")
    return lines


def format_profile(verdict: dict, exit_code: int) -> str:
    env = verdict.get("environment", {})
    lines = [f"profile: {verdict['solution']} on {env.get('gpu', env.get('device'))}, {verdict['shape']}, "
             f"torch {env.get('torch')}; {verdict['calls']} forwards under torch.profiler"]
    if verdict.get("error"):
        return "\n".join(lines + error_lines(verdict) + ["", f"ERROR: exit {exit_code}"])
    profiles = verdict.get("profiles", {})
    for kind, title in (("solution", "solution"), ("eager", "reference eager")):
        if kind in profiles:
            lines += [""] + format_kernels(title, profiles[kind])
    if "roofline" in verdict:
        f = verdict["roofline"]
        lines += ["", f"roofline (measured now: copy {f['bandwidth_bytes_per_s'] / 1e12:.2f} TB/s, bf16 matrix "
                      f"{f['peak_flop_per_s'] / 1e12:.0f} TFLOP/s; one forward: {f['flops'] / 1e6:.1f} MFLOP, at least "
                      f"{f['min_bytes'] / 1e6:.2f} MB moved):"]
        rows = []
        for kind, label in (("solution", "solution"), ("eager", "reference eager")):
            a = profiles.get(kind, {}).get("achieved")
            if a:
                rows.append([label, f"{a['gpu_us']:.2f}", f"{a['bytes_per_s'] / 1e9:.0f}", f"{100 * a['of_bandwidth']:.1f}%",
                             f"{a['flop_per_s'] / 1e12:.2f}", f"{100 * a['of_peak']:.2f}%",
                             f"{a['times_floor']:.1f}x" if a["times_floor"] else "-"])
        lines += ["  " + line for line in table(
            ["implementation", "GPU us/forward", "GB/s (min bytes)", "of copy bw", "TFLOP/s", "of bf16 peak",
             "x floor"], rows).splitlines()]
        lines.append(f"  floor {f['floor_us']:.2f} us = max(compute {f['compute_floor_us']:.2f} us, memory "
                     f"{f['memory_floor_us']:.2f} us{'' if f['memory_floor_applies'] else ': data fits in L2, not counted'})")
    if verdict.get("ncu_command"):
        lines += ["", "Nsight Compute on the solution's kernels:", "  " + verdict["ncu_command"]]
    else:
        lines += ["", "ncu (Nsight Compute) is not on PATH: no kernel-level command printed"]
    for f in verdict.get("failures", []):
        lines += ["", f"FAIL [{f['defence']}] {f['message']}"]
    lines += ["", f"{'PASS' if exit_code == 0 else 'FAIL'}: exit {exit_code}"]
    return "\n".join(lines)


# ----- sweep ------------------------------------------------------------------------------------------

PLOT_KINDS = ("solution", "eager", "compile-ro", "graph", "noop")
PLOT_LABELS = {"solution": "solution", "eager": "reference eager",
               "compile-ro": "torch.compile reduce-overhead", "graph": "reference eager, one CUDA graph",
               "noop": "no-op kernel launch (floor)"}
MATPLOTLIB_HINT = "the plot needs matplotlib: `pip install matplotlib`, then run the sweep again"


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
        text += f"; timed in {'/'.join(map(str, rounds))} {ROUNDS_TEXT}"
    if cpus:
        text += f"; {pinned_text('/'.join(map(str, cpus)))}"
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
             table(headers, rows, align="l" + "r" * (len(headers) - 1) + "l")]
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


def save_sweep_rows(data: dict, out_dir):
    """results/sweep_NAME.json after every value, so a sweep killed half-way leaves its rows."""
    if out_dir:
        write_json(os.path.join(out_dir, f"sweep_{data['parameter']}.json"), data)


def write_sweep_files(data: dict, out_dir: str) -> dict:
    """results/sweep_NAME.{json,md,png}; records the paths (png None without matplotlib) in data['files']."""
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, f"sweep_{data['parameter']}")
    png, note = write_plot(data, stem + ".png")
    data["files"] = {"json": stem + ".json", "md": stem + ".md", "png": png}
    data["plot_note"] = note
    with open(stem + ".md", "w") as f:
        f.write(markdown_report(data))
    write_json(stem + ".json", data)
    return data["files"]


# ----- --protocol: another evaluator's verdict beside this harness's ---------------------------------

def format_comparison(verdict: dict, exit_code: int, name: str) -> str:
    """The table and notes of protocol `name`, whose result is verdict[name]."""
    procedure, result = protocols.PROTOCOLS[name], verdict[name]
    own = {0: "PASS", 1: "FAIL", 2: "ERROR"}.get(exit_code, "ERROR")
    rows = procedure.comparison_rows(result, verdict, own)
    lines = ["", procedure.TITLE.format(**result),
             table(["", "this harness", procedure.COLUMN], rows, align="lll")]
    notes = procedure.differences(result, verdict)
    if notes:
        lines += ["", "where they differ and why:"] + [f"  - {n}" for n in notes]
    lines.append(f"the exit code is this harness's verdict; {procedure.COLUMN}'s is for comparison")
    return "\n".join(lines)
