"""Every defence is shown to fail something: one bad solution per exploit (tests/adversarial/), run
through the harness as a user would (`python -m harness check|bench ... --json FILE`, a subprocess),
must get the expected exit code and name the expected defence; the honest ones must pass.

Exit codes: 0 pass, 1 incorrect (a defence named in verdict failures), 2 the solution could not be
loaded, built or run (verdict['error']['kind']: error, crash, timeout), 3 usage. A case's `expect`
holds alternatives: the verdict passes the case when any named defence contains any of them
(errors are named 'error:<kind>'). The harness itself must never print a traceback.
See tests/adversarial/README.md for what each defence catches and how.
"""
import json
import os

import pytest

from harness import integrity, timing
from tests.harness_run import all_failures, named_defences, run_harness_process

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADVERSARIAL = os.path.join("tests", "adversarial")

# check: two shapes (the default 128 and 7) so shape-specific exploits show; one trial unless the
# defence needs a second (fresh weights per trial). bench: eager only, few calls.
CHECK = ["check", "--trials", "1", "--batch-sizes", "7"]
BENCH = ["bench", "--iters", "20", "--warmup", "2", "--skip", "compile,compile-ro,graph,noop"]

gpu = pytest.mark.gpu


def case(file, command, exit_code, expect, device="cpu"):
    solution = file if file.endswith(".py") else os.path.join(ADVERSARIAL, file + ".py")
    expect = (expect,) if isinstance(expect, str) else tuple(expect)
    name = "-".join([os.path.splitext(os.path.basename(solution))[0], command[0], device]
                    + (["strict"] if "--strict" in command else []) + ["|".join(expect) or "pass"])
    return pytest.param(solution, list(command), device, exit_code, expect, id=name,
                        marks=[gpu] if device == "cuda" else [])


# (solution, command, exit code, defence named, run on the GPU too)
ANY_DEVICE = [
    ("mutates_input", CHECK, 1, "input mutation", True),
    ("scales_input", CHECK, 1, "input mutation", False),
    ("mutates_weights", CHECK, 1, "parameter mutation", False),
    ("output_views_input", CHECK, 1, "aliasing", True),
    ("steals_reference_outputs", CHECK, 1, "aliasing", True),
    ("zero_noise", CHECK, 1, "noise", False),
    ("own_generator", CHECK, 1, "noise", True),
    ("extra_noise", CHECK, 1, "noise", True),
    ("bf16", CHECK, 1, ("allclose", "precision"), True),
    ("half_recon", CHECK, 1, "precision", True),
    ("hardcoded_batch", CHECK, 1, "output type", False),
    ("tensor_subclass", CHECK, 1, "output type", False),
    ("weight_snapshot", CHECK, 1, "allclose", True),
    ("returns_nan", CHECK, 1, "allclose", False),
    ("returns_float64", CHECK, 1, "output type", False),
    ("renamed_params", CHECK, 1, "parameters", False),
    ("patches_timers", CHECK, 1, "tampering", False),
    ("replays_previous", CHECK, 1, "noise", False),
    ("pointer_cache", BENCH, 1, "caching/replay", True),
    ("replays_previous", BENCH, 1, "caching/replay", True),
    ("patches_timers_late", BENCH, 1, "tampering", True),
    ("import_error", CHECK, 2, "error:error", False),
    ("raises", CHECK, 2, "error:error", False),
    ("segfault", CHECK, 2, "error:crash", False),
    ("hangs", CHECK + ["--call-timeout", "3"], 2, "error:timeout", True),
    ("tests/solutions/eager_copy.py", CHECK + ["--trials", "2"], 0, (), True),
    ("honest_reordered", CHECK + ["--trials", "2"], 0, (), True),
    ("honest_reordered", BENCH, 0, (), True),
]
GPU_ONLY = [
    ("empty_outputs", CHECK, 1, "allclose"),
    ("stale_empty", CHECK, 1, "allclose"),
    ("honest_compiled", CHECK + ["--trials", "2", "--call-timeout", "600"], 0, ()),
    ("honest_compiled", CHECK + ["--strict", "--call-timeout", "600"], 1, "strict"),
    ("tests/solutions/eager_copy.py", CHECK + ["--strict"], 1, "strict"),
    ("solution.py", CHECK + ["--trials", "2", "--strict"], 0, ()),
    ("solution.py", BENCH + ["--strict", "--iters", "100"], 0, ()),
]
CASES = ([case(f, c, code, e) for f, c, code, e, _ in ANY_DEVICE]
         + [case(f, c, code, e, device="cuda") for f, c, code, e, on_gpu in ANY_DEVICE if on_gpu]
         + [case(f, c, code, e, device="cuda") for f, c, code, e in GPU_ONLY])


def run_harness(solution, command, device, _tmp_path=None):
    r = run_harness_process(*command, "--device", device, "--solution", solution)
    return r, r.verdict


def log_case(solution, command, device, proc, verdict):
    """With ADVERSARIAL_LOG=FILE set, append one JSON line per case: what the harness decided and why
    (tools/verdict_table.py turns the file into the case -> verdict -> reason table)."""
    path = os.environ.get("ADVERSARIAL_LOG")
    if not path:
        return
    failures = [f"{f['defence']}: {f['message']}" for f in all_failures(verdict)] if verdict else []
    if verdict and verdict.get("error"):
        failures.append(f"error:{verdict['error']['kind']}: {verdict['error']['message']}")
    line = {"solution": os.path.basename(solution), "command": command[0], "device": device,
            "strict": "--strict" in command, "exit_code": proc.returncode,
            "defences": named_defences(verdict) if verdict else [], "reasons": failures}
    with open(path, "a") as f:  # one short write per line: safe with pytest-xdist workers appending
        f.write(json.dumps(line) + "\n")


@pytest.mark.parametrize("solution, command, device, exit_code, expect", CASES)
def test_harness_verdict(solution, command, device, exit_code, expect, tmp_path):
    proc, verdict = run_harness(solution, command, device, tmp_path)
    log_case(solution, command, device, proc, verdict)
    shown = f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, shown
    assert proc.returncode == exit_code, shown
    assert verdict is not None and verdict["exit_code"] == exit_code, shown
    names = named_defences(verdict)
    if exit_code == 0:
        assert names == [], shown
    else:
        assert any(e in n for e in expect for n in names), f"expected one of {expect}, got {names}\n{shown}"


@gpu
def test_side_stream_is_caught_or_timed_in_full(tmp_path):
    """The exploit hides its work from the caller's stream. Usually the events then miss it and the
    side-stream rule fires. On the H200 it sometimes did not hide anything: the end event waited for
    the side stream's work (event median 1313 µs against 1134 µs per call back to back), so the timing
    was honest and nothing fired. Either outcome is correct; a fast time with the work hidden is not."""
    command = BENCH + ["--iters", "50"]
    proc, verdict = run_harness(os.path.join(ADVERSARIAL, "side_stream.py"), command, "cuda", tmp_path)
    log_case("side_stream.py", command, "cuda", proc, verdict)
    shown = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), shown
    if proc.returncode == 1:
        assert named_defences(verdict) == ["side stream"], shown
    else:
        stats = verdict["results"]["solution"]
        assert stats["median_us"] >= 0.9 * stats["back_to_back_us"], shown


@gpu
def test_device_assert_is_reported_not_raised(tmp_path):
    """A device-side assert poisons the worker's CUDA context; the harness survives and says so."""
    proc, verdict = run_harness(os.path.join(ADVERSARIAL, "device_assert.py"), CHECK, "cuda", tmp_path)
    log_case("device_assert.py", CHECK, "cuda", proc, verdict)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert verdict["error"]["kind"] in ("error", "crash")
    assert "assert" in verdict["error"]["message"] + verdict["error"]["detail"]


def test_strict_on_cpu_is_a_usage_error(tmp_path):
    for command in (CHECK, BENCH):
        proc, verdict = run_harness("tests/solutions/eager_copy.py", command + ["--strict"], "cpu", tmp_path)
        assert proc.returncode == 3 and verdict is None
        assert "--strict needs CUDA" in proc.stderr and "Traceback" not in proc.stderr


def test_static_scan_failures_are_named_and_printed_with_lines(tmp_path):
    proc, verdict = run_harness(os.path.join(ADVERSARIAL, "patches_timers.py"), CHECK, "cpu", tmp_path)
    scan_failures = [f["message"] for f in verdict["failures"] if f["defence"] == "static scan"]
    assert scan_failures == ["line 12: monkey-patches time.perf_counter",
                             "line 13: monkey-patches torch.cuda.Event.elapsed_time"]
    assert "line 12: failure: monkey-patches time.perf_counter" in proc.stdout


def test_static_scan_warns_about_reaching_into_the_process():
    with open(os.path.join(REPO, ADVERSARIAL, "steals_reference_outputs.py")) as f:
        findings = integrity.scan_source(f.read())
    assert {"line": 13, "severity": "warning", "message": "reaches into the process (gc, frames, sys.modules "
            "or ctypes): it could find the harness's state"} in findings


# ----- the rules themselves, in-process -------------------------------------------------------

@pytest.mark.parametrize("name, custom", [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float>>(int, float*)", False),
    ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4>(long)", False),
    ("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off", False),
    ("nvjet_tst_128x64_64x6_1x2_h_bz_coopA_TNT", False),
    ("ampere_sgemm_128x64_tn", False),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(float)", False),
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, false>(float)", False),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_tn_align1>(Params)", False),
    ("void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>(float)", False),
    ("triton_poi_fused_add_exp_mul_0", False),
    ("triton_per_fused_binary_cross_entropy_sum_1", False),
    ("Memcpy DtoH (Device -> Pinned)", False),
    ("Memset (Device)", False),
    # seen in eager's forward on the H200 (torch 2.11, cuBLAS 13):
    ("void sgemm_largek_lds64<true, false, 5, 5, 4, 4, 4, 34>(float*, float const*, float const*, int)", False),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(cutlass_80_simt_sgemm_64x64_8x5_tn_align1::Params)", False),
    ("void cublasLt::epilogue::impl::globalKernel<8, 32, float, float, float, true, true, 1>(int, int, long)", False),
    ("void scal_kernel<float, float, 1, true, 6, 5, 5, 3>(cublasTransposeParams<float>, float const*, float*)", False),
    ("vae_elbo_kernel(float const*, float const*, float*, int)", True),
    ("void draw_noise_kernel(float*, long, at::PhiloxCudaState, unsigned long)", True),
    ("void (anonymous namespace)::fused_vae<8>(float const*)", True),
    ("_vae_forward_kernel", True),
])
def test_strict_kernel_name_rule(name, custom):
    assert integrity.custom_kernels([name]) == ([name] if custom else [])


def test_strict_counts_the_references_kernels_as_library():
    unknown = "void some_new_library_kernel<4>(float const*)"
    mine = "vae_elbo_kernel(float const*, float*)"
    assert integrity.custom_kernels([unknown, mine]) == [unknown, mine]
    assert integrity.custom_kernels([unknown, mine], also_library=[unknown]) == [mine]
    assert integrity.custom_kernels([unknown], also_library=[unknown]) == []


@pytest.mark.parametrize("line, severity", [
    ("time.perf_counter = lambda: 0.0", "failure"),
    ("torch.cuda.Event.elapsed_time = fake", "failure"),
    ("setattr(torch, 'randn_like', fake)", "failure"),
    ("setattr(torch, name, fake)", "failure"),
    ("F.linear = my_linear", "failure"),
    ("torch._inductor.config.fallback_random = True", "warning"),
    ("torch.backends.cudnn.benchmark = True", "warning"),
])
def test_static_scan_patch_versus_setting(line, severity):
    findings = integrity.scan_source("import time\nimport torch\nimport torch.nn.functional as F\n" + line + "\n")
    assert [(f["line"], f["severity"]) for f in findings] == [(4, severity)]


@pytest.mark.parametrize("leftover_us, event_us, back_to_back_us, suspect", [
    (4.0, 20.0, 18.0, False),      # honest single kernel: the synchronize costs what it costs idle
    (5.0, 150.0, 140.0, False),    # honest eager forward, launch bound
    (35.0, 8.0, 40.0, True),       # 40 µs kernel on a side stream behind an 8 µs launch
    (900.0, 150.0, 1000.0, True),  # tests/adversarial/side_stream.py
    (4.0, 10.0, 200.0, True),      # hidden work only seen back to back
])
def test_side_stream_rule(leftover_us, event_us, back_to_back_us, suspect):
    stats = {"leftover_median_us": leftover_us, "median_us": event_us, "back_to_back_us": back_to_back_us,
             "idle_leftover_us": 3.0}
    assert bool(timing.side_stream_suspect(stats)) == suspect
