"""Run `python -m harness` in a subprocess, as a user would, and read its --json verdict."""
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTIONS = os.path.join(REPO, "tests", "solutions")
ADVERSARIAL = os.path.join(REPO, "tests", "adversarial")


def run_harness(*args, timeout=600):
    """Returns (exit code, verdict dict or None, combined output)."""
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "verdict.json")
        proc = subprocess.run([sys.executable, "-m", "harness", *args, "--json", out_json, "--quiet"],
                              cwd=REPO, capture_output=True, text=True, timeout=timeout)
        verdict = None
        if os.path.exists(out_json):
            with open(out_json) as f:
                verdict = json.load(f)
    return proc.returncode, verdict, proc.stdout + proc.stderr


def all_failures(verdict) -> list:
    """Every failure in a verdict: top-level ones and those of each shape."""
    failures = list(verdict.get("failures", []))
    for shape in verdict.get("shapes", []):
        failures += shape["failures"]
    return failures
