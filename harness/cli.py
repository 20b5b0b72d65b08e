"""The command line: `python -m harness check|bench|profile|export [options]`: options, dispatch, exit codes.

Exit codes: 0 pass, 1 incorrect (a named defence failed), 2 the solution could not be loaded, built or
run, 3 usage error, 130 interrupted. `--json FILE` writes the whole verdict with its exit_code.
"""
import argparse
import os
import sys

from harness import (EXIT_INTERRUPTED, EXIT_PASS, EXIT_USAGE, UsageError, bench, check, client, export, gpumode,
                     profile, protocol, protocols, report, sweep)


def _batch_sizes(text: str) -> tuple:
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    if any(b < 1 for b in sizes):
        raise argparse.ArgumentTypeError("batch sizes must be >= 1")
    return sizes


def at_least(kind, low, strict=False):
    """An argparse type: a `kind` (int or float) >= low, or > low when `strict`. The commands'
    modules (profile, sweep) use it for their options too."""
    def convert(text):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}")
        if v < low or (strict and v == low) or v != v:
            raise argparse.ArgumentTypeError(f"must be {'>' if strict else '>='} {low:g}, got {text}")
        return v
    convert.__name__ = kind.__name__
    return convert


positive_int = at_least(int, 1)


def _pin_cpu(text):
    if text in ("auto", "off"):
        return text
    try:
        cpu = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a CPU number, 'auto' or 'off', got {text!r}")
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if cpu not in allowed:
        raise argparse.ArgumentTypeError(f"CPU {cpu} is not one this process may run on: {sorted(allowed)}")
    return cpu


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


SUMMARY_BENCH = ["--skip", "compile,compile-ro", "--iters", "200"]  # check --bench: no torch.compile (minutes)
STRICT_HELP = ("leaderboard mode (CUDA only): also fail when the forward launches no kernel of its own, only "
               "torch/cuBLAS/cuDNN/inductor ones (rule: harness/integrity.py, LIBRARY_KERNEL_PREFIXES)")


def _common_parser() -> argparse.ArgumentParser:
    """The options every command takes."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--reference", default="reference.py", help="reference problem file (default reference.py)")
    common.add_argument("--solution", default="solution.py", help="solution file exposing ModelNew (default solution.py)")
    common.add_argument("--device", default="cuda", help="cuda (default) or cpu for pure-PyTorch solutions")
    common.add_argument("--seed", type=int, default=42, help="base seed; trial seeds derive from it")
    common.add_argument("--tol", type=at_least(float, 0.0), default=1e-4, help="atol = rtol for allclose (default 1e-4, float32)")
    common.add_argument("--truth-factor", type=at_least(float, 0.0, strict=True), default=4.0,
                        help="solution error vs float64 truth may be this many times eager float32's (default 4)")
    common.add_argument("--truth-floor", type=at_least(float, 0.0), default=1e-6,
                        help="... plus this relative error (default 1e-6, about 8 float32 ulps)")
    common.add_argument("--load-timeout", type=at_least(float, 0.0, strict=True), default=900.0, help="seconds for import and build (default 900)")
    common.add_argument("--call-timeout", type=at_least(float, 0.0, strict=True), default=60.0, help="seconds for one request to the solution")
    common.add_argument("--json", metavar="FILE", help="write the whole verdict as JSON")
    common.add_argument("--quiet", action="store_true", help="no progress line")
    return common


COMMON_OPTIONS = [a.dest for a in _common_parser()._actions if a.dest != "help"]  # check --bench passes them on


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness", description="Check and time a KernelBench-format solution.")
    common = _common_parser()
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", parents=[common], help="correctness on several trials and shapes")
    c.add_argument("--trials", type=positive_int, default=5)
    c.add_argument("--strict", action="store_true", help=STRICT_HELP)
    c.add_argument("--bench", action="store_true",
                   help="after a passing check, a short bench in the same worker process (what `make check` "
                   "prints second): " + " ".join(SUMMARY_BENCH))
    c.add_argument("--batch-sizes", type=_batch_sizes, default=check.DEFAULT_BATCH_SIZES,
                   help="batch sizes beyond the default inputs (default 1,7,127,129,1000,4096,8193)")
    _bench_options(sub.add_parser("bench", parents=[common], help="time the solution against eager, compile and graphs"))
    for command in (c, sub.choices["bench"]):
        command.add_argument("--protocol", choices=("harness",) + tuple(protocols.PROTOCOLS), default="harness",
                             help="also run another evaluator's published procedure and print its verdict (and, for "
                             "bench, its speedup) beside this harness's: kernelbench (KernelBench's eval.py), gpumode "
                             "(GPU MODE's test mode for check, test/benchmark/leaderboard for bench, on the GPU MODE "
                             "directory of --reference; harness/gpumode.py)")
        gpumode.add_arguments(command)
    f = sub.add_parser("profile", parents=[common], help="kernels per forward, GPU-only time, roofline")
    f.add_argument("--batch-size", type=positive_int, help="override the reference's batch_size")
    f.add_argument("--calls", type=positive_int, default=20, help="forwards under torch.profiler (default 20)")
    f.add_argument("--replays", type=positive_int, default=200,
                   help="forwards timed for the GPU-only time, by CUDA-graph replay of 20 "
                        "forwards a graph (default 200)")
    f.add_argument("--skip-eager", action="store_true", help="profile the solution only")
    export.add_parser(sub)
    return p


def _bench_options(b):
    """bench's own options, its sweep's among them."""
    b.add_argument("--iters", type=positive_int, default=200, help="timed calls per implementation")
    b.add_argument("--warmup", type=at_least(int, 0), default=20, help="untimed calls first (in every round)")
    b.add_argument("--pin-cpu", type=_pin_cpu, default="auto",
                   help="host CPU that the harness and the solution both launch from while timing: a number, "
                        "'auto' (the highest this process may use; default) or 'off'")
    b.add_argument("--rounds", type=positive_int, default=5,
                   help="split the timed calls into this many rounds, alternating the solution and the "
                        "references, so that slow spells of the machine fall on all alike (default 5)")
    b.add_argument("--flush-l2", action="store_true", help="flush the L2 before every timed call")
    b.add_argument("--batch-size", type=positive_int, help="override the reference's batch_size")
    b.add_argument("--skip", default="", help="comma-separated implementations not to time "
                   "(eager, compile, compile-ro, graph, noop)")
    b.add_argument("--trials", type=positive_int, default=1, help="correctness trials before timing")
    b.add_argument("--strict", action="store_true", help=STRICT_HELP)
    b.add_argument("--batch-sizes", type=_batch_sizes, default=(), help=argparse.SUPPRESS)
    b.add_argument("--sweep", type=parse_sweep, metavar="NAME=V1,V2,...",
                   help="bench at each value of a module-level integer size of the reference, "
                   "e.g. batch_size=1,32,128,1024,4096,16384,65536; writes OUT_DIR/sweep_NAME.{json,md,png}")
    b.add_argument("--sweep-budget", type=at_least(float, 0.0, strict=True), default=1.5, metavar="SECONDS",
                   help="about this many seconds of timed calls per implementation and value "
                   "(fewer than --iters calls at big sizes; default 1.5)")
    b.add_argument("--out-dir", default="results", help="where sweep files go (default results/)")


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code not in (0, None) else 0
    if args.command == "export":  # file work only: no device, no worker, no verdict
        try:
            print(export.run_export(args))
        except UsageError as e:
            print(f"usage error: {e}", file=sys.stderr)
            return EXIT_USAGE
        return 0
    progress = report.Progress(enabled=False if args.quiet else None)
    try:
        _require_files(args)
        if getattr(args, "protocol", "harness") == gpumode.NAME:   # its task.yml: a usage error before any work
            gpumode.read_task(os.path.dirname(os.path.abspath(args.reference)))
        if not args.quiet:
            print(_first_line(args), flush=True)
        verdict, code, text = _run_command(args, progress)
        print(text)
        if getattr(args, "protocol", "harness") != "harness" and not getattr(args, "sweep", None):
            verdict[args.protocol] = protocol.run_protocol(args, verdict, progress=progress)
            print(report.format_comparison(verdict, code, args.protocol))
    except UsageError as e:
        print(f"usage error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if args.json:
        verdict["exit_code"] = code
        report.write_json(args.json, verdict)
    return code


def _require_files(args):
    for option in ("solution", "reference"):
        path = getattr(args, option, None)
        if path is not None and not os.path.isfile(path):
            raise UsageError(f"--{option} {path}: {'is a directory' if os.path.isdir(path) else 'no such file'}"
                             + (" (the default; run from the repository root or pass --solution)"
                                if option == "solution" and path == "solution.py" else ""))


def _check_then_bench(args, progress) -> tuple:
    """`check --bench`: the check, then (when it passed) the summary bench in the same worker: one
    Python, one worker and one import of the solution instead of two of each. The bench's verdict is
    verdict["bench"]; the exit code is the check's, or the bench's when the check passed."""
    bench_args = build_parser().parse_args(["bench", *SUMMARY_BENCH])
    for name in COMMON_OPTIONS:
        setattr(bench_args, name, getattr(args, name))
    with client.Worker(progress) as worker:
        verdict, code = check.run_check(args, progress=progress, worker=worker)
        text = report.format_check(verdict, code)
        if code == EXIT_PASS and worker.process.is_alive():
            verdict["bench"], code = bench.run_bench(bench_args, progress=progress, worker=worker)
            text += "\n\n" + report.format_bench(verdict["bench"], code)
    return verdict, code, text


# How long a first build of solution.py's extension took (load_inline; cached afterwards in
# ~/.cache/torch_extensions): notes/harness.md, H200 calls 7-8 (64 s) and `make check` on a fresh machine.
BUILD_NOTE = "a first build of its CUDA extension takes about a minute on the H200; a cached one, seconds"


def _first_line(args) -> str:
    """Said before the work starts, so a long build is expected, not mistaken for a hang."""
    with open(args.solution, errors="replace") as f:
        builds = "load_inline" in f.read()
    return f"{args.command}: importing {args.solution} in a worker process" + (f" ({BUILD_NOTE})" if builds else "")


def _run_command(args, progress) -> tuple:
    """(verdict, exit code, the text to print) of the command args name."""
    if args.command == "check" and args.bench:
        return _check_then_bench(args, progress)
    if args.command == "check":
        verdict, code = check.run_check(args, progress=progress)
        return verdict, code, report.format_check(verdict, code)
    if args.command == "bench" and args.sweep:
        verdict, code = sweep.run_sweep(args, progress=progress,
                                        on_row=lambda data: report.save_sweep_rows(data, args.out_dir))
        report.write_sweep_files(verdict, args.out_dir)
        return verdict, code, report.format_sweep(verdict, code)
    if args.command == "bench":
        verdict, code = bench.run_bench(args, progress=progress)
        return verdict, code, report.format_bench(verdict, code)
    if args.command == "profile":
        verdict, code = profile.run_profile(args, progress=progress)
        return verdict, code, report.format_profile(verdict, code)
    raise UsageError(f"unknown command {args.command}")
