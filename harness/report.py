"""Tables, verdict text, JSON files and the progress line."""
import json
import os
import sys


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


def _fmt_err(x) -> str:
    return f"{x:.1e}" if x is not None else "-"


def format_check(verdict: dict, exit_code: int) -> str:
    tol = verdict["tolerance"]
    lines = [f"check: {verdict['solution']} against {verdict['reference']} on {verdict['device']}",
             f"rule: allclose atol=rtol={tol['atol']:g} against float32 eager, and error against float64 truth "
             f"<= {tol['truth_factor']:g} x eager's + {tol['truth_floor']:.0e}; {verdict['trials']} trials per shape, "
             f"base seed {verdict['seed']}"]
    if "import_seconds" in verdict:
        lines.append(f"solution imported (and built) in {verdict['import_seconds']:.1f} s")
    if verdict.get("error"):
        e = verdict["error"]
        lines += ["", f"ERROR ({e['kind']}): {e['message']}"]
        if e.get("detail"):
            lines += ["  " + line for line in e["detail"].rstrip().splitlines()[-15:]]
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
    scan = verdict.get("scan", [])
    if scan:
        lines += ["", "source scan of the solution:"]
        lines += [f"  line {x['line']}: {x['severity']}: {x['message']}" for x in scan]
    verdict_word = {0: "PASS", 1: "FAIL (incorrect)", 2: "ERROR (solution could not be loaded, built or run)"}
    lines += ["", f"{verdict_word.get(exit_code, 'ERROR')}: exit {exit_code}"]
    return "\n".join(lines)


ROUNDS_TEXT = "round(s) alternating the solution and the references"


def pinned_text(cpus) -> str:
    """The CPU (or CPUs, 'a/b') both processes launched from while timing; bench and sweep say it alike."""
    return f"the harness and the solution both timed from CPU {cpus}"


def format_bench(verdict: dict, exit_code: int) -> str:
    from harness.bench import LABELS
    env = verdict.get("environment", {})
    lines = [f"bench: {verdict['solution']} on {env.get('gpu', env.get('device'))}, {verdict['shape']}, "
             f"torch {env.get('torch')}, TF32 {'on' if env.get('tf32_matmul') else 'off'}",
             f"method: {verdict['iters']} timed calls each in {verdict.get('rounds', 1)} {ROUNDS_TEXT}, "
             f"{verdict['warmup']} warm-up calls per round, CUDA events around each "
             f"call with a device-wide sync between calls{', L2 flushed before each' if verdict['flush_l2'] else ''}; "
             "inputs refreshed before every call"
             + (f"; {pinned_text(verdict['cpu'])}" if verdict.get("cpu") is not None
                else "")]
    if verdict.get("error"):
        e = verdict["error"]
        lines += ["", f"ERROR ({e['kind']}): {e['message']}"]
        if e.get("detail"):
            lines += ["  " + line for line in e["detail"].rstrip().splitlines()[-15:]]
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
        lines.append(f"SM clock: {sol['sm_clock_mhz_before']} MHz before timing the solution, "
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
