"""Issue 10's side-by-side table, with its goals' verdicts: per call and GPU time at each batch size against
eager, eager's kernels in one CUDA graph and the no-op call, from one sweep and one profile per size, all on
one machine in one session. On the GPU machine (tools/gpu_session.sh's `goal-table` stage runs all three):

    python3 -m harness bench --skip compile,compile-ro --sweep batch_size=1,128,1024,2048 --out-dir results
    for B in 1 128 1024 2048; do python3 -m harness profile --batch-size $B --json results/profile_$B.json; done
    python3 tools/goal_table.py results

Per call: the sweep's medians (CUDA events around one call, side by side in rounds). GPU time: the profiler's
kernel time per forward, and CUDA-graph replay of the solution against the same of eager's kernels.
"""
import json
import os
import sys

PER_CALL_VS_NOOP = 1.5    # B = 128: solution per call <= 1.5x the no-op call
PER_CALL_VS_EAGER = 20.0  # B = 128: >= 20x eager per call
GPU_VS_GRAPH = 2.5        # every B: GPU time >= 2.5x faster than eager's kernels in one CUDA graph
KERNEL_US_128 = 6.0       # B = 128: the profiler's kernel time per forward


def load(folder: str):
    """The sweep's rows by batch size and the profiles found beside it ({B: verdict})."""
    path = os.path.join(folder, "sweep_batch_size.json")
    if not os.path.isfile(path):
        raise ValueError(f"no {path}: run `python3 -m harness bench --sweep batch_size=... --out-dir {folder}` first")
    with open(path) as f:
        sweep = json.load(f)
    rows = {int(r["value"]): r for r in sweep["rows"]}
    profiles = {}
    for b in rows:
        p = os.path.join(folder, f"profile_{b}.json")
        if os.path.isfile(p):
            with open(p) as f:
                profiles[b] = json.load(f)
    return rows, profiles


def _fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def table(rows: dict, profiles: dict) -> str:
    out = ["| B | solution µs/call | no-op µs/call | / no-op | eager µs/call | x eager | kernel µs (profiler) "
           "| solution GPU µs (graph) | eager graph GPU µs | x eager graph |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    verdicts = []
    for b in sorted(rows):
        med = rows[b]["median_us"]
        sol, noop, eager = med.get("solution"), med.get("noop"), med.get("eager")
        vs_noop = sol / noop if sol and noop else None
        vs_eager = eager / sol if sol and eager else None
        prof = profiles.get(b, {}).get("profiles", {})
        kernel = prof.get("solution", {}).get("kernel_sum_us")
        launches = sum(k["per_forward"] for k in prof.get("solution", {}).get("kernels", []))
        gpu, graph = prof.get("solution", {}).get("graph_us"), prof.get("eager", {}).get("graph_us")
        vs_graph = graph / gpu if gpu and graph else None
        out.append(f"| {b} | {_fmt(sol)} | {_fmt(noop)} | {_fmt(vs_noop, '.2f')} | {_fmt(eager)} | "
                   f"{_fmt(vs_eager)} | {_fmt(kernel, '.2f')} | {_fmt(gpu, '.2f')} | {_fmt(graph)} | "
                   f"{_fmt(vs_graph, '.2f')} |")
        if rows[b].get("exit_code"):
            verdicts.append(f"B = {b}: the sweep's check did not pass (exit {rows[b]['exit_code']}): no figure counts")
        if profiles.get(b, {}).get("failures") or profiles.get(b, {}).get("error"):
            verdicts.append(f"B = {b}: the profile reported a failure or an error: its GPU figures do not count")
        if vs_graph is not None:
            verdicts.append(f"B = {b}: GPU time {vs_graph:.2f}x eager's graph (goal >= {GPU_VS_GRAPH}x): "
                            + ("met" if vs_graph >= GPU_VS_GRAPH else "NOT met"))
        if b == 128:
            if kernel is not None:
                verdicts.append(f"B = 128: {launches:g} kernel launch(es), {kernel:.2f} µs by the profiler (goal one, "
                                f"<= {KERNEL_US_128}): " + ("met" if launches == 1 and kernel <= KERNEL_US_128
                                                            else "NOT met"))
            if vs_noop is not None:
                verdicts.append(f"B = 128: per call {vs_noop:.2f}x the no-op call (goal <= {PER_CALL_VS_NOOP}x): "
                                + ("met" if vs_noop <= PER_CALL_VS_NOOP else "NOT met"))
            if vs_eager is not None:
                verdicts.append(f"B = 128: per call {vs_eager:.1f}x eager (goal >= {PER_CALL_VS_EAGER}x): "
                                + ("met" if vs_eager >= PER_CALL_VS_EAGER else "NOT met"))
    missing = sorted(set(rows) - set(profiles))
    if missing:
        verdicts.append(f"no profile_B.json for B = {', '.join(map(str, missing))}: their GPU columns are blank")
    return "\n".join(out + [""] + ["- " + v for v in verdicts])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 tools/goal_table.py FOLDER  (FOLDER holds sweep_batch_size.json and profile_B.json)")
    try:
        print(table(*load(sys.argv[1])))
    except ValueError as e:
        sys.exit(f"goal_table: {e}")
