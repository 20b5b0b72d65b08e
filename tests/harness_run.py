"""Running the harness in tests: in-process through the command line's entry point (cli.main, the same
code `python -m harness` runs, minus starting Python and torch again), or as a real subprocess where
that is what is tested. Either way the solution runs in the harness's spawned worker process."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from types import SimpleNamespace

from harness.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(REPO, "reference.py")
CORRECT = os.path.join(REPO, "tests", "solutions", "correct")
WRONG = os.path.join(REPO, "tests", "solutions", "wrong")
EAGER_COPY = os.path.join(CORRECT, "eager_copy.py")


def solution(name: str) -> str:
    """The path of a test solution by file name, from correct/ or wrong/ (or the repository's own)."""
    for folder in (CORRECT, WRONG, REPO):
        if os.path.isfile(os.path.join(folder, name)):
            return os.path.join(folder, name)
    return name


def _with_json(args, out_json):
    args = list(args)
    if "--reference" not in args:
        args += ["--reference", REFERENCE]
    return args + ["--json", out_json, "--quiet"]


def _read_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def run_cli(*args):
    """cli.main(args + --json) in this process. Returns returncode, verdict (dict or None), stdout and
    stderr as attributes."""
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "verdict.json")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(_with_json(args, out_json))
        verdict = _read_json(out_json)
    return SimpleNamespace(returncode=code, verdict=verdict, stdout=out.getvalue(), stderr=err.getvalue())


def run_harness_process(*args, timeout=900, env=None):
    """`python -m harness args --json FILE` in a subprocess, as a user would; the same attributes."""
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "verdict.json")
        proc = subprocess.run([sys.executable, "-m", "harness", *_with_json(args, out_json)],
                              cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)
        verdict = _read_json(out_json)
    return SimpleNamespace(returncode=proc.returncode, verdict=verdict, stdout=proc.stdout, stderr=proc.stderr)


def run_harness(*args):
    """In-process; returns (exit code, verdict dict or None, combined output)."""
    r = run_cli(*args)
    return r.returncode, r.verdict, r.stdout + r.stderr


def all_failures(verdict) -> list:
    """Every failure in a verdict: top-level ones and those of each shape."""
    failures = list(verdict.get("failures", []))
    for shape in verdict.get("shapes", []):
        failures += shape["failures"]
    return failures


def named_defences(verdict) -> list:
    """The defences a verdict names, with an error named 'error:<kind>'."""
    names = [f["defence"] for f in all_failures(verdict)]
    if verdict.get("error"):
        names.append(f"error:{verdict['error']['kind']}")
    return names
