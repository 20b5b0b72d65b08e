"""Comparing a solution's outputs with the reference's, with verdicts that explain themselves.

Two rules, both must hold:
  1. allclose: |got - expected| <= atol + rtol * |expected| elementwise against the float32
     reference, with no NaN/inf where the reference is finite.
  2. truth: ||got - truth|| / ||truth|| <= factor * (eager's same error) + floor, where truth is
     the reference in float64 fed the same noise. A bf16 or TF32 solution can pass rule 1 on
     some outputs; it cannot pass rule 2.
"""
import torch

SHOW_MISMATCHES = 5


def output_name(i: int, n: int) -> str:
    """How verdicts name output i of n: "output 2", or "output" when there is one."""
    return f"output {i}" if n > 1 else "output"


def describe_tensor(t) -> dict:
    """What the harness checks about an output before looking at its values (runs in the worker)."""
    if type(t) is not torch.Tensor:
        return {"type": f"{type(t).__module__}.{type(t).__qualname__}"}
    return {"type": "torch.Tensor", "dtype": str(t.dtype), "shape": list(t.shape),
            "device": t.device.type, "contiguous": bool(t.is_contiguous())}


def _mismatch_list(got, expected, bad, limit=SHOW_MISMATCHES):
    rows = []
    for flat in torch.nonzero(bad.reshape(-1)).reshape(-1)[:limit].tolist():
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), got.shape)) if got.dim() else ()
        rows.append({"index": list(index), "got": float(got.reshape(-1)[flat]),
                     "expected": float(expected.reshape(-1)[flat])})
    return rows


def compare_output(name: str, got, meta: dict, expected, atol: float, rtol: float) -> dict:
    """One output against the float32 reference. `got` is a CPU tensor, `meta` its description."""
    report = {"output": name, "ok": False, "atol": atol, "rtol": rtol}
    want = describe_tensor(expected)
    want["contiguous"] = True
    for key in ("type", "dtype", "shape", "device", "contiguous"):
        if meta.get(key) != want.get(key):
            report["reason"] = f"{key} is {meta.get(key)}, expected {want.get(key)}"
            return report
    expected = expected.detach().cpu()
    n = expected.numel()
    report["elements"] = n
    if n == 0:
        report["ok"] = True
        return report
    g, e = got.double(), expected.double()
    diff = (g - e).abs()
    finite = torch.isfinite(e)
    bad_nonfinite = ~torch.isfinite(g) & finite
    mismatched = ~torch.isclose(g, e, rtol=rtol, atol=atol) | bad_nonfinite
    safe = torch.where(finite & torch.isfinite(g), diff, torch.zeros_like(diff))
    report["max_abs_diff"] = float(diff.max()) if bool(torch.isfinite(diff).all()) else float("inf")
    report["max_rel_diff"] = float((safe / e.abs().clamp_min(1e-30)).max())
    report["mismatched"] = int(mismatched.sum())
    report["nonfinite"] = int(bad_nonfinite.sum())
    report["first_mismatches"] = _mismatch_list(g, e, mismatched)
    if report["nonfinite"]:
        report["reason"] = f"{report['nonfinite']} of {n} elements are NaN/inf where the reference is finite"
    elif report["mismatched"]:
        report["reason"] = (f"{report['mismatched']} of {n} elements differ beyond atol={atol:g}, rtol={rtol:g} "
                            f"(max abs diff {report['max_abs_diff']:.3e})")
    else:
        report["ok"] = True
    return report


def relative_error(out, truth) -> float:
    """||out - truth|| / ||truth|| in float64 (absolute norm where the truth is all zero)."""
    o, t = out.detach().cpu().double(), truth.detach().cpu().double()
    if o.shape != t.shape:
        return float("inf")
    num = torch.linalg.vector_norm(o - t)
    den = torch.linalg.vector_norm(t)
    value = float(num / den) if float(den) > 0 else float(num)
    return value if value == value else float("inf")


def compare_truth(name: str, got, eager, truth, factor: float, floor: float) -> dict:
    """Rule 2: the solution's error against float64 truth may not exceed factor x eager's + floor."""
    sol_err = relative_error(got, truth)
    eager_err = relative_error(eager, truth)
    limit = factor * eager_err + floor
    report = {"output": name, "solution_rel_err": sol_err, "eager_rel_err": eager_err,
              "limit": limit, "factor": factor, "floor": floor, "ok": sol_err <= limit}
    if not report["ok"]:
        report["reason"] = (f"error against float64 truth {sol_err:.2e} exceeds {factor:g} x eager float32's "
                            f"{eager_err:.2e} + {floor:.0e} = {limit:.2e} (lower precision than float32?)")
    return report


def format_output_report(r: dict) -> str:
    """One line per output, plus the first mismatches, in the manner of GPU MODE's verbose_allclose."""
    if r.get("ok"):
        if "max_abs_diff" in r:
            return f"{r['output']}: ok (max abs diff {r['max_abs_diff']:.2e}, max rel diff {r['max_rel_diff']:.2e})"
        return f"{r['output']}: ok"
    lines = [f"{r['output']}: FAIL: {r.get('reason', 'mismatch')}"]
    for m in r.get("first_mismatches", []):
        lines.append(f"    at {tuple(m['index'])}: got {m['got']:.7g}, expected {m['expected']:.7g}")
    return "\n".join(lines)
