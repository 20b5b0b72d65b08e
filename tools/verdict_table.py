"""Turn the JSON lines that tests/test_adversarial.py writes under ADVERSARIAL_LOG=FILE into a
Markdown table: case -> verdict -> reason.

    ADVERSARIAL_LOG=/tmp/cases.jsonl python -m pytest tests/test_adversarial.py
    python tools/verdict_table.py /tmp/cases.jsonl
"""
import json
import sys

VERDICTS = {0: "PASS", 1: "FAIL (incorrect)", 2: "ERROR (could not run)", 3: "usage error"}


def rows(lines):
    seen = {}
    for line in lines:
        case = json.loads(line)
        key = (case["solution"], case["command"], case["device"], case["strict"])
        seen[key] = case  # a rerun replaces the earlier line
    return [seen[k] for k in sorted(seen)]


def table(cases) -> str:
    out = ["| solution | command | device | exit | verdict | defences named | first reason |",
           "|---|---|---|---|---|---|---|"]
    for c in cases:
        command = c["command"] + (" --strict" if c["strict"] else "")
        reason = c["reasons"][0] if c["reasons"] else "—"
        reason = reason.replace("|", "\\|").replace("\n", " ")
        if len(reason) > 120:
            reason = reason[:117] + "..."
        named = ", ".join(dict.fromkeys(c["defences"])) or "—"
        out.append(f"| {c['solution']} | {command} | {c['device']} | {c['exit_code']} | "
                   f"{VERDICTS.get(c['exit_code'], c['exit_code'])} | {named} | {reason} |")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/verdict_table.py CASES.jsonl")
    with open(sys.argv[1]) as f:
        print(table(rows(f)))
