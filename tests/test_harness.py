"""The harness's `check` and `bench` on the CPU with small pure-PyTorch solutions, in-process through
cli.main: each case asserts the verdict, the named reason and the exit code (0 pass, 1 incorrect,
2 could not run, 3 usage); then the units below them. That honest solutions pass on several shapes
and trials, and every defence's case, are in test_adversarial.py."""
import os
import subprocess
import sys
import time

import pytest
import torch

from harness import UsageError, bench, codec, compare, noise, problem, report, timing
from harness.cli import main
from tests.harness_run import EAGER_COPY, REFERENCE, REPO, all_failures, run_harness, solution

CHECK = ["check", "--device", "cpu", "--trials", "1", "--batch-sizes="]


@pytest.mark.parametrize("name, defence, needle", [
    ("wrong_math.py", "allclose", "output 2"),          # KL doubled: elbo and kl differ
    ("wrong_noise.py", "allclose", "output 1"),         # uniform noise: recon differs
    ("wrong_shape.py", "output type", "shape is [128, 1], expected [128]"),
    ("renamed_params.py", "parameters", "missing ['encoder.0.bias', 'encoder.0.weight'], unexpected ['enc.0.bias'"),
])
def test_incorrect_solutions_fail_with_named_reason(name, defence, needle):
    code, verdict, out = run_harness(*CHECK, "--solution", solution(name))
    assert code == 1, out
    failures = all_failures(verdict)
    assert failures, out
    assert failures[0]["defence"] == defence, failures[0]
    assert any(needle in f["message"] for f in failures), out
    assert "FAIL" in out


def test_mismatch_report_names_indices_and_values():
    code, verdict, out = run_harness(*CHECK, "--solution", solution("wrong_math.py"))
    details = all_failures(verdict)[0]["details"]
    assert details["mismatched"] > 0 and details["max_abs_diff"] > 1e-4
    first = details["first_mismatches"][0]
    assert abs(first["got"] - first["expected"]) > 1e-4 and len(first["index"]) == 1
    assert f"at ({first['index'][0]},): got" in out


def test_exception_is_a_verdict_not_a_traceback():
    code, verdict, out = run_harness(*CHECK, "--solution", solution("raises.py"))
    assert code == 2, out
    assert verdict["error"]["kind"] == "error"
    assert "only batch 128 is supported, got 128" in verdict["error"]["message"]
    assert "raises.py" in verdict["error"]["detail"]        # the solution's own frame is shown
    assert "harness/worker.py" not in verdict["error"]["detail"]


def test_import_failure_is_exit_2(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import torch\nraise ImportError('no module named fused_vae_ext')\n")
    code, verdict, out = run_harness(*CHECK, "--solution", str(bad))
    assert code == 2
    assert "importing the solution failed" in verdict["error"]["message"]
    assert "fused_vae_ext" in verdict["error"]["message"]


def test_missing_modelnew_is_exit_2(tmp_path):
    bad = tmp_path / "nomodel.py"
    bad.write_text("class Model:\n    pass\n")
    code, verdict, out = run_harness(*CHECK, "--solution", str(bad))
    assert code == 2 and "defines no class ModelNew" in verdict["error"]["message"]


@pytest.mark.parametrize("argv, needle", [
    (["check", "--device", "cpu", "--reference", "nope.py"], "--reference nope.py: no such file"),
    (["check", "--device", "cpu", "--solution", "nope.py"], "--solution nope.py: no such file"),
    (["bench", "--device", "cpu", "--solution", "tests"], "--solution tests: is a directory"),
    (["check", "--device", "cpu", "--tol=-1e-4"], "argument --tol: must be >= 0, got -1e-4"),
    (["check", "--device", "cpu", "--call-timeout", "0"], "argument --call-timeout: must be > 0"),
    (["check", "--device", "cpu", "--truth-factor", "four"], "argument --truth-factor: expected a number"),
    (["bench", "--device", "cpu", "--warmup=-1"], "argument --warmup: must be >= 0"),
    (["profile", "--calls", "0"], "argument --calls: must be >= 1, got 0"),
    (["bench", "--device", "cpu", "--iters", "many"], "argument --iters: expected an integer, got 'many'"),
    (["bench", "--device", "cpu", "--sweep", "batch_size=1", "--sweep-budget", "0"], "--sweep-budget: must be > 0"),
    (["check", "--device", "cpu", "--batch-sizes", "0,5"], None),
    (["bench", "--device", "cpu", "--skip", "warp"], "unknown implementation"),
    (["bench", "--device", "cpu", "--pin-cpu", "100000"], "is not one this process may run on"),
    (["bench", "--device", "cpu", "--pin-cpu", "first"], "expected a CPU number, 'auto' or 'off'"),
    (["frobnicate"], None),
])
def test_usage_errors_exit_3(argv, needle, capsys):
    assert main(argv) == 3
    if needle:
        assert needle in capsys.readouterr().err


def test_no_gpu_says_so():
    """Runs everywhere: on a GPU machine the GPU is hidden from the subprocess."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-m", "harness", "check"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "no CUDA GPU is visible" in proc.stderr and "Traceback" not in proc.stderr


def test_bench_cpu_table_and_speedup():
    code, verdict, out = run_harness("bench", "--device", "cpu", "--iters", "5", "--warmup", "1",
                                     "--rounds", "1", "--solution", EAGER_COPY)
    assert code == 0, out
    sol, eager = verdict["results"]["solution"], verdict["results"]["eager"]
    assert sol["n"] == 5 and sol["min_us"] <= sol["median_us"] <= sol["max_us"]
    assert eager["speedup"] == pytest.approx(eager["median_us"] / sol["median_us"])
    assert verdict["results"]["graph"] == {"skipped": "needs a CUDA device"}
    assert "reference eager" in out and "solution speedup" in out


def test_bench_alternates_rounds_and_pools_them():
    code, verdict, out = run_harness("bench", "--device", "cpu", "--iters", "7", "--rounds", "3", "--warmup", "1",
                                     "--solution", EAGER_COPY)
    assert code == 0, out
    assert verdict["rounds"] == 3 and "in 3 round(s) alternating" in out
    for kind in ("solution", "eager"):
        r = verdict["results"][kind]
        assert r["n"] == 7 and r["rounds"] == 3 and len(r["samples_us"]) == 7
        assert r["median_us"] == pytest.approx(sorted(r["samples_us"])[3])


@pytest.mark.parametrize("name, exit_code", [("eager_copy.py", 0), ("pointer_cache.py", 1)])
def test_bench_with_one_call_still_rechecks_a_result(name, exit_code):
    """One timed call and no warm-up reach no checkpoint in the timed loop; the worker then checks one
    more call, untimed, so an honest solution is not refused ('no timed call could be re-checked')
    and a cache keyed on the input pointer is still caught."""
    code, verdict, out = run_harness("bench", "--device", "cpu", "--iters", "1", "--warmup", "0",
                                     "--solution", solution(name))
    assert code == exit_code, out
    assert [f["defence"] for f in verdict["failures"]] == ([] if exit_code == 0 else ["caching/replay"]), out


def test_a_reference_that_cannot_be_timed_is_skipped_with_its_reason():
    skipped_because = bench.skipped_because
    assert skipped_because(RuntimeError("inductor failed\nlong trace")) == {"skipped": "RuntimeError: inductor failed"}
    assert skipped_because(RuntimeError()) == {"skipped": "RuntimeError: "}


def test_split_and_merge_rounds():
    split_rounds, merge_rounds = bench.split_rounds, timing.merge_rounds
    assert split_rounds(200, 5) == [40] * 5 and split_rounds(7, 5) == [2, 2, 1, 1, 1] and split_rounds(2, 5) == [1, 1]

    def rnd(samples, b2b):
        return {"samples_us": samples, "wall_samples_us": [x + 1 for x in samples], "n": len(samples),
                "leftover_samples_us": [0.5] * len(samples), "idle_leftover_us": 0.25,
                "back_to_back_us": b2b, "flush_l2": False}
    m = merge_rounds([rnd([3.0, 1.0, 2.0], 10.0), rnd([30.0, 20.0], 20.0)])
    assert (m["n"], m["median_us"], m["min_us"], m["max_us"], m["rounds"]) == (5, 3.0, 1.0, 30.0, 2)
    assert m["wall_median_us"] == 4.0 and m["leftover_median_us"] == 0.5 and m["idle_leftover_us"] == 0.25
    assert m["back_to_back_us"] == pytest.approx((3 * 10.0 + 2 * 20.0) / 5)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux thread affinity")
def test_clock_warm_up_stops_once_warm_and_not_before():
    """warm_clock's loop ends at the first clock reading of at least 85% of the maximum (after its
    minimum), and runs the whole budget when the clock never gets there or NVML is missing."""
    bursts = []

    def burst():
        bursts.append(1)
        time.sleep(0.01)
    readings = iter([(345, 1980), (900, 1980), (1700, 1980)])
    spent = timing.run_until_warm(burst, lambda: next(readings), seconds=5.0, min_seconds=0.0)
    assert spent < 1.0 and len(bursts) == 3
    for read in (lambda: (1500, 1980), lambda: None):
        bursts.clear()
        spent = timing.run_until_warm(burst, read, seconds=0.3, min_seconds=0.0)
        assert spent >= 0.3 and len(bursts) >= 10


def test_pinned_to_pins_and_restores():
    pinned_to, timing_cpu = timing.pinned_to, timing.timing_cpu
    before, cpu = os.sched_getaffinity(0), timing_cpu()
    with pinned_to(cpu):
        assert os.sched_getaffinity(0) == {cpu}
    assert os.sched_getaffinity(0) == before
    with pinned_to(max(before) + 1):  # not allowed here: left alone
        assert os.sched_getaffinity(0) == before


def test_pinned_cpu_choice():
    pinned_cpu, timing_cpu = bench.pinned_cpu, timing.timing_cpu
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert pinned_cpu("auto", cuda) == timing_cpu() and pinned_cpu(0, cuda) == 0
    assert pinned_cpu("off", cuda) is None and pinned_cpu("auto", cpu) is None and pinned_cpu(0, cpu) is None


def test_bench_refuses_incorrect_solution():
    code, verdict, out = run_harness("bench", "--device", "cpu", "--iters", "5", "--rounds", "1",
                                     "--solution", solution("wrong_math.py"))
    assert code == 1 and "solution" not in verdict["results"]


# ----- units -----------------------------------------------------------------------------------

def test_codec_roundtrip_and_refuses_objects():
    msg = {"a": [torch.randn(3, 5), (1, "x", None)], "b": torch.arange(7, dtype=torch.int64), "c": 2.5,
           "d": torch.empty(0, 4)}
    back = codec.decode(codec.encode(msg))
    assert torch.equal(back["a"][0], msg["a"][0]) and back["a"][1] == (1, "x", None)
    assert torch.equal(back["b"], msg["b"]) and back["c"] == 2.5 and back["d"].shape == (0, 4)
    with pytest.raises(TypeError, match="cannot carry"):
        codec.encode({"x": object()})
    with pytest.raises(ValueError, match="length"):
        codec.decode(codec.encode({"t": torch.randn(4)})[:-3])


def test_compare_output_rules():
    torch.manual_seed(0)
    expected = torch.randn(100)
    meta = compare.describe_tensor(expected)
    ok = compare.compare_output("o", expected + 5e-5, meta, expected, 1e-4, 1e-4)
    assert ok["ok"] and ok["max_abs_diff"] == pytest.approx(5e-5, rel=1e-2)  # float32 rounding of x + 5e-5
    bad = expected.clone()
    bad[[3, 17]] += 1.0
    r = compare.compare_output("o", bad, meta, expected, 1e-4, 1e-4)
    assert not r["ok"] and r["mismatched"] == 2 and [m["index"] for m in r["first_mismatches"]] == [[3], [17]]
    nan = expected.clone()
    nan[5] = float("nan")
    r = compare.compare_output("o", nan, meta, expected, 1e-4, 1e-4)
    assert not r["ok"] and r["nonfinite"] == 1 and "NaN/inf" in r["reason"]
    r = compare.compare_output("o", expected.double(), compare.describe_tensor(expected.double()), expected, 1e-4, 1e-4)
    assert not r["ok"] and r["reason"] == "dtype is torch.float64, expected torch.float32"


def test_truth_rule_rejects_low_precision():
    torch.manual_seed(1)
    truth = torch.randn(1000, dtype=torch.float64) * 100
    eager = truth.float()
    bf16 = truth.to(torch.bfloat16).float()
    assert compare.compare_truth("o", eager, eager, truth, 4.0, 1e-6)["ok"]
    r = compare.compare_truth("o", bf16, eager, truth, 4.0, 1e-6)
    assert not r["ok"] and r["solution_rel_err"] > 1e-3 and "lower precision" in r["reason"]


def test_noise_record_and_replay_in_float64():
    tape = []
    torch.manual_seed(3)
    with noise.recording(tape):
        a = torch.randn_like(torch.empty(4, 3))
    with noise.replaying(tape, torch.float64):
        b = torch.randn_like(torch.empty(4, 3))
    assert b.dtype == torch.float64 and torch.equal(b, a.double())
    with pytest.raises(RuntimeError, match="recorded run had"):
        with noise.replaying(tape, torch.float64):
            torch.rand_like(torch.empty(2))


def test_sizes_overridden_restores_and_names_unknown():
    ref = problem.load_reference(REFERENCE)
    with problem.sizes_overridden(ref, {"batch_size": 5}):
        assert ref.get_inputs()[0].shape == (5, 784)
    assert ref.batch_size == 128
    with pytest.raises(UsageError, match="no integer module-level size `rows`.*batch_size"):
        with problem.sizes_overridden(ref, {"rows": 5}):
            pass


def test_table_aligns_columns():
    text = report.table(["name", "us"], [["a", "1.5"], ["longer", "12.25"]])
    lines = text.splitlines()
    assert lines[0] == "name       us" and lines[2] == "a         1.5" and lines[3] == "longer  12.25"


def test_check_then_bench_in_one_worker(monkeypatch):
    """`check --bench` (make check): the summary bench runs in the worker the check loaded, after a pass;
    not at all after a failure."""
    from harness import cli
    monkeypatch.setattr(cli, "SUMMARY_BENCH", ["--skip", "compile,compile-ro", "--iters", "3", "--rounds", "1",
                                               "--warmup", "1"])
    starts = []
    monkeypatch.setattr(cli.client.Worker, "load", lambda self, *a, _load=cli.client.Worker.load, **k:
                        starts.append(1) or _load(self, *a, **k))
    code, verdict, out = run_harness(*CHECK, "--bench", "--solution", EAGER_COPY)
    assert code == 0 and verdict["passed"] and starts == [1], out
    assert verdict["bench"]["results"]["solution"]["n"] == 3 and "solution speedup" in out
    code, verdict, out = run_harness(*CHECK, "--bench", "--solution", solution("wrong_math.py"))
    assert code == 1 and "bench" not in verdict and "solution speedup" not in out


def test_first_line_says_when_a_build_may_come(tmp_path):
    """Printed before the import (unless --quiet), so a minute of nvcc is expected, not taken for a hang."""
    from argparse import Namespace
    from harness import cli
    built = tmp_path / "built.py"
    built.write_text("from torch.utils.cpp_extension import load_inline\n")
    assert cli._first_line(Namespace(command="check", solution=str(built))) == (
        f"check: importing {built} in a worker process ({cli.BUILD_NOTE})")
    assert cli._first_line(Namespace(command="bench", solution=EAGER_COPY)) == (
        f"bench: importing {EAGER_COPY} in a worker process")
