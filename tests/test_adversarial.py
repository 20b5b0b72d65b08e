"""Every defence is shown to fire: each file in tests/solutions/wrong/ run through the harness's command
line must get the expected exit code and name the expected defence; each in tests/solutions/correct/
must pass. Cases run in-process through cli.main (the solution still runs in a worker process of its own, forked
from the harness's forkserver); those marked `process` run `python -m harness` in a subprocess, as a
user would: exit codes 0, 1 and 2 end to end, with workers forked (the default) or spawned.

Exit codes: 0 pass, 1 incorrect (a defence named in verdict failures), 2 the solution could not be
loaded, built or run (verdict['error']['kind']: error, crash, timeout), 3 usage. A case's `expect`
holds alternatives: the verdict passes the case when any named defence contains any of them
(errors are named 'error:<kind>'). The harness itself must never print a traceback. Each case runs
the fewest shapes and trials that show its point. The GPU bench cases compare timings: they carry
`gpu_timing` and run alone, one after another (`make test` runs them last; README says how).
"""
import json
import os

import pytest

from harness import integrity, timing
from tests.harness_run import EAGER_COPY, all_failures, named_defences, run_cli, run_harness_process, solution

# check: the default shape, one trial; CHECK2 adds batch 7 where a defence needs a second shape (a
# shape-specific exploit, or fresh weights: the first trial's weights are drawn under the seed the
# solution was built with). bench: eager only, few calls.
CHECK = ["check", "--trials", "1", "--batch-sizes="]
CHECK2 = ["check", "--trials", "1", "--batch-sizes", "7"]
BENCH = ["bench", "--iters", "20", "--warmup", "2", "--skip", "compile,compile-ro,graph,noop"]

gpu = pytest.mark.gpu
gpu_timing = pytest.mark.gpu_timing


def case(file, command, exit_code, expect, device="cpu", process=False):
    expect = (expect,) if isinstance(expect, str) else tuple(expect)
    name = "-".join([os.path.splitext(os.path.basename(file))[0], command[0], device]
                    + (["strict"] if "--strict" in command else []) + ["|".join(expect) or "pass"])
    marks = [gpu] if device == "cuda" else []
    if device == "cuda" and command[0] == "bench":
        marks.append(gpu_timing)
    return pytest.param(solution(file), list(command), device, exit_code, expect, process, id=name, marks=marks)


# (solution file, command, exit code, defence named, run on the GPU too, run as `python -m harness` with
# its workers started this way; False: in-process)
ANY_DEVICE = [
    ("mutates_input.py", CHECK, 1, "input mutation", True, False),
    ("scales_input.py", CHECK, 1, "input mutation", False, False),
    ("mutates_weights.py", CHECK, 1, "parameter mutation", False, "forkserver"),
    ("output_views_input.py", CHECK, 1, "aliasing", True, False),
    ("steals_reference_outputs.py", CHECK, 1, "aliasing", True, False),
    ("zero_noise.py", CHECK, 1, "noise", False, False),
    ("own_generator.py", CHECK, 1, "noise", True, False),
    ("extra_noise.py", CHECK, 1, "noise", True, False),
    ("bf16.py", CHECK, 1, ("allclose", "precision"), True, False),
    ("half_recon.py", CHECK, 1, "precision", True, False),
    ("hardcoded_batch.py", CHECK2, 1, "output type", False, False),
    ("tensor_subclass.py", CHECK, 1, "output type", False, False),
    ("weight_snapshot.py", CHECK2, 1, "allclose", True, False),
    ("returns_nan.py", CHECK, 1, "allclose", False, False),
    ("returns_float64.py", CHECK, 1, "output type", False, False),
    ("renamed_params.py", CHECK, 1, "parameters", False, False),
    ("patches_timers.py", CHECK, 1, "tampering", False, False),
    ("patches_harness.py", CHECK, 1, "tampering", True, False),
    ("replays_previous.py", CHECK, 1, "noise", False, False),
    ("pointer_cache.py", BENCH, 1, "caching/replay", True, False),
    ("replays_previous.py", BENCH, 1, "caching/replay", True, False),
    ("patches_timers_late.py", BENCH, 1, "tampering", True, False),
    ("import_error.py", CHECK, 2, "error:error", False, "spawn"),
    ("raises.py", CHECK, 2, "error:error", False, False),
    ("segfault.py", CHECK, 2, "error:crash", False, False),
    ("hangs.py", CHECK + ["--call-timeout", "3"], 2, "error:timeout", True, False),
    ("eager_copy.py", CHECK2 + ["--trials", "2"], 0, (), True, "spawn"),
    ("honest_reordered.py", CHECK2 + ["--trials", "2"], 0, (), True, False),
    ("honest_reordered.py", BENCH, 0, (), True, False),
]
GPU_ONLY = [
    ("empty_outputs.py", CHECK, 1, "allclose"),
    ("stale_empty.py", CHECK, 1, "allclose"),
    ("honest_compiled.py", CHECK2 + ["--trials", "2", "--call-timeout", "600"], 0, ()),
    ("honest_compiled.py", CHECK + ["--strict", "--call-timeout", "600"], 1, "strict"),
    ("eager_copy.py", CHECK + ["--strict"], 1, "strict"),
    ("solution.py", CHECK2 + ["--trials", "2", "--strict"], 0, ()),
    ("solution.py", BENCH + ["--strict", "--iters", "100"], 0, ()),
]
CASES = ([case(f, c, code, e, process=p) for f, c, code, e, _, p in ANY_DEVICE]
         + [case(f, c, code, e, device="cuda", process=p) for f, c, code, e, on_gpu, p in ANY_DEVICE if on_gpu]
         + [case(f, c, code, e, device="cuda") for f, c, code, e in GPU_ONLY])


def run_harness(solution, command, device, process=False):
    """In-process (workers forked from this process's forkserver), or `python -m harness` with workers
    started the way `process` names (forkserver, started before the CLI imports torch, or spawn)."""
    args = (*command, "--device", device, "--solution", solution)
    if process:
        r = run_harness_process(*args, env=dict(os.environ, HARNESS_WORKER_START=process))
    else:
        r = run_cli(*args)
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


@pytest.mark.parametrize("solution, command, device, exit_code, expect, process", CASES)
def test_harness_verdict(solution, command, device, exit_code, expect, process):
    proc, verdict = run_harness(solution, command, device, process)
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
@gpu_timing
def test_side_stream_is_caught_or_timed_in_full():
    """The exploit hides its work from the caller's stream. Usually the events then miss it and the
    side-stream rule fires. On the H200 it sometimes did not hide anything: the end event waited for
    the side stream's work (event median 1313 µs against 1134 µs per call back to back), so the timing
    was honest and nothing fired. Either outcome is correct; a fast time with the work hidden is not."""
    command = BENCH + ["--iters", "50"]
    proc, verdict = run_harness(solution("side_stream.py"), command, "cuda")
    log_case("side_stream.py", command, "cuda", proc, verdict)
    shown = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), shown
    if proc.returncode == 1:
        assert named_defences(verdict) == ["side stream"], shown
    else:
        stats = verdict["results"]["solution"]
        assert stats["median_us"] >= 0.9 * stats["back_to_back_us"], shown


@gpu
def test_device_assert_is_reported_not_raised():
    """A device-side assert poisons the worker's CUDA context; the harness survives and says so."""
    proc, verdict = run_harness(solution("device_assert.py"), CHECK, "cuda")
    log_case("device_assert.py", CHECK, "cuda", proc, verdict)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert verdict["error"]["kind"] in ("error", "crash")
    assert "assert" in verdict["error"]["message"] + verdict["error"]["detail"]


def test_strict_on_cpu_is_a_usage_error():
    for command in (CHECK, BENCH):
        proc, verdict = run_harness(EAGER_COPY, command + ["--strict"], "cpu")
        assert proc.returncode == 3 and verdict is None
        assert "--strict needs CUDA" in proc.stderr and "Traceback" not in proc.stderr


def test_static_scan_failures_are_named_and_printed_with_lines():
    proc, verdict = run_harness(solution("patches_timers.py"), CHECK, "cpu")
    scan_failures = [f["message"] for f in verdict["failures"] if f["defence"] == "static scan"]
    assert scan_failures == ["line 12: monkey-patches time.perf_counter",
                             "line 13: monkey-patches torch.cuda.Event.elapsed_time"]
    assert "line 12: failure: monkey-patches time.perf_counter" in proc.stdout


def test_static_scan_warns_about_reaching_into_the_process():
    with open(solution("steals_reference_outputs.py")) as f:
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


@pytest.mark.parametrize("line, warned", [
    ('asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(h) : "f"(a), "f"(b));', True),
    ('"wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"', True),
    ('"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1}"', True),
    ('"cvt.rna.tf32.f32 %0, %1;"', True),
    ('x = torch.rand(4, dtype=torch.float16)', True),
    ('asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));', False),
    ('y = x.float()  # f16 in a comment without the PTX dot', False),
])
def test_static_scan_warns_about_reduced_precision_types(line, warned):
    # as in a solution's CUDA source string (the scan reads those lines too)
    findings = integrity.scan_source('CUDA_SRC = r"""\n' + line + '\n"""\n')
    assert findings == ([{"line": 2, "severity": "warning", "message": "mentions reduced precision"}] if warned else [])


@pytest.mark.parametrize("leftover_us, event_us, back_to_back_us, suspect", [
    (4.0, 20.0, 18.0, False),      # honest single kernel: the synchronize costs what it costs idle
    (5.0, 150.0, 140.0, False),    # honest eager forward, launch bound
    (35.0, 8.0, 40.0, True),       # 40 µs kernel on a side stream behind an 8 µs launch
    (900.0, 150.0, 1000.0, True),  # tests/solutions/wrong/side_stream.py
    (4.0, 10.0, 200.0, True),      # hidden work only seen back to back
])
def test_side_stream_rule(leftover_us, event_us, back_to_back_us, suspect):
    stats = {"leftover_median_us": leftover_us, "median_us": event_us, "back_to_back_us": back_to_back_us,
             "idle_leftover_us": 3.0}
    assert bool(timing.side_stream_suspect(stats)) == suspect
