"""Run `python -m harness` in a subprocess, as a user would, and read its --json verdict."""
import json
import os
import subprocess
import sys
import tempfile
from types import SimpleNamespace

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTIONS = os.path.join(REPO, "tests", "solutions")
ADVERSARIAL = os.path.join(REPO, "tests", "adversarial")


def run_harness_process(*args, timeout=900):
    """Returns returncode, verdict (dict or None), stdout and stderr as attributes."""
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "verdict.json")
        proc = subprocess.run([sys.executable, "-m", "harness", *args, "--json", out_json, "--quiet"],
                              cwd=REPO, capture_output=True, text=True, timeout=timeout)
        verdict = None
        if os.path.exists(out_json):
            with open(out_json) as f:
                verdict = json.load(f)
    return SimpleNamespace(returncode=proc.returncode, verdict=verdict, stdout=proc.stdout, stderr=proc.stderr)


def run_harness(*args, timeout=900):
    """Returns (exit code, verdict dict or None, combined output)."""
    r = run_harness_process(*args, timeout=timeout)
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
