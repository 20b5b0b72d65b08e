"""`python -m harness export`: the KernelBench and GPU MODE exports (harness/export.py, harness/templates/).

CPU tests export into a temporary directory and check what was written: the KernelBench reference
against reference.py fed the same noise, KernelBench's static rules on the exported solutions, the GPU
MODE reference's inputs, computation and check, and the command's refusals. `build` compiles the
exported solution (no GPU needed); `gpu` tests run the exported solutions against their references.
"""
import ast
import importlib.util
import os
import sys
import textwrap

import pytest
import torch

from harness import UsageError, cli, export, gpumode

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTION = os.path.join(REPO, "solution.py")
BATCH_SIZES = (1, 7, 129)
GPUMODE_SIZES = [1, 128, 1024, 16384]


def load(path, name):
    """Import a file as a fresh module, its directory first on sys.path (GPU MODE files import task)."""
    directory = os.path.dirname(path)
    sys.path.insert(0, directory)
    sys.modules.pop("task", None)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(directory)
    return module


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Both exports of the repository's solution.py, written by the command as a user runs it."""
    root = tmp_path_factory.mktemp("export")
    dirs = {}
    for fmt in export.FORMATS:
        dirs[fmt] = str(root / fmt)
        assert cli.main(["export", "--to", fmt, dirs[fmt], "--solution", SOLUTION]) == 0
    return dirs


def read(directory, name):
    with open(os.path.join(directory, name)) as f:
        return f.read()


def cuda_source_of(text):
    """The CUDA_SRC an exported solution compiles: its assignment evaluated from the AST (not run)."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CUDA_SRC":
            parts, value = [], node.value
            while isinstance(value, ast.BinOp):
                parts.insert(0, ast.literal_eval(value.right))
                value = value.left
            return ast.literal_eval(value) + "".join(parts)
    raise AssertionError("no CUDA_SRC")


# ----- the files -----------------------------------------------------------------------------------

def test_both_formats_write_their_files(exported):
    for fmt, names in export.FILES.items():
        assert sorted(os.listdir(exported[fmt])) == sorted(names)


@pytest.mark.parametrize("fmt", export.FORMATS)
def test_exported_cuda_source_is_solutions_with_the_switch(exported, fmt):
    """The same source, once: VAE_EPS_INPUT defined first; the only other changes are the rewrites
    the export announces for KernelBench's static checker (each line that differs held 'pass')."""
    original = export.read_string_constants(SOLUTION, ("CUDA_SRC",))["CUDA_SRC"]
    got = cuda_source_of(read(exported[fmt], export.SOLUTION_FILE[fmt]))
    assert got.startswith(export.EPS_DEFINE)
    got = got[len(export.EPS_DEFINE):]
    assert got.count("__global__") == original.count("__global__")
    if "//" not in got:  # comments stripped too (lines keep their numbers)
        original = export.strip_cpp_comments(original)
    assert len(got.splitlines()) == len(original.splitlines())
    changed = [(a, b) for a, b in zip(original.splitlines(), got.splitlines()) if a != b]
    assert all("pass" in a for a, _ in changed), changed[:3]


def test_solution_strings_are_read_without_running_it(tmp_path):
    """The export reads string literals with ast: a solution whose import would fail still exports."""
    path = tmp_path / "solution.py"
    path.write_text('raise SystemExit("importing this file runs it")\n'
                    'CUDA_SRC = r"""\n#ifdef VAE_EPS_INPUT\n__global__ void k() {}\n'
                    'at::Tensor vae_forward_eps(at::Tensor x, at::Tensor eps) { return x; }\n#endif\n"""\n'
                    'CPP_DECL_EPS = "at::Tensor vae_forward_eps(at::Tensor x, at::Tensor eps);\\n"\n'
                    + MINIMAL_MODELNEW)
    result = export.export("kernelbench", str(tmp_path / "out"), str(path))
    assert cuda_source_of(read(result["directory"], "solution.py")).startswith("#define VAE_EPS_INPUT\n\n#ifdef")


def test_a_modelnew_without_the_parameter_methods_is_a_usage_error(tmp_path):
    """The KernelBench export takes ModelNew's parameter handling from the solution: missing or out of
    order, it says what it found."""
    path = tmp_path / "solution.py"
    path.write_text('CUDA_SRC = "#ifdef VAE_EPS_INPUT\\nvae_forward_eps\\n#endif\\n"\n'
                    'CPP_DECL_EPS = "void vae_forward_eps();"\n' + MINIMAL_MODELNEW.replace("def _apply", "def apply_"))
    with pytest.raises(UsageError, match="found methods: __init__, _refresh_params, apply_, load_state_dict"):
        export.export("kernelbench", str(tmp_path / "out"), str(path))
    export.export("gpumode", str(tmp_path / "gm"), str(path))   # the GPU MODE export does not use them


def test_a_solution_without_the_switch_is_a_usage_error(tmp_path):
    path = tmp_path / "solution.py"
    path.write_text('CUDA_SRC = "__global__ void k() {}"\nCPP_DECL = "void f();"\n')
    with pytest.raises(UsageError, match="CPP_DECL_EPS"):
        export.export("gpumode", str(tmp_path / "out"), str(path))
    assert not (tmp_path / "out").exists()


# ----- the KernelBench reference --------------------------------------------------------------------

@pytest.mark.parametrize("batch_size", BATCH_SIZES)
def test_kernelbench_model_equals_reference_fed_the_same_noise(exported, batch_size):
    """Both Models are built after the same seed (same constructor, so the same weights); reference.py's
    torch.randn_like is patched to return the eps the exported Model gets as an input. Rule: in float32
    the stacked rows equal reference.py's outputs bit for bit (the same operations in the same order),
    and in float64 they agree to 1e-12 relative (what is left is rounding of float64 itself)."""
    ref = load(os.path.join(REPO, "reference.py"), "ref_original")
    kb = load(os.path.join(exported["kernelbench"], "reference.py"), "ref_kernelbench")
    assert kb.get_init_inputs() == ref.get_init_inputs()
    torch.manual_seed(batch_size)
    original = ref.Model(*ref.get_init_inputs())
    torch.manual_seed(batch_size)
    model = kb.Model(*kb.get_init_inputs())
    for (k1, v1), (k2, v2) in zip(original.state_dict().items(), model.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2)
    kb.batch_size = batch_size
    x, eps = kb.get_inputs()
    original.requires_grad_(False)
    model.requires_grad_(False)
    for dtype in (torch.float32, torch.float64):
        original, model = original.to(dtype), model.to(dtype)
        saved = torch.randn_like
        torch.randn_like = lambda t, **kw: eps.to(t.dtype)
        try:
            want = torch.stack(original(x.to(dtype)))
        finally:
            torch.randn_like = saved
        got = model(x.to(dtype), eps.to(dtype))
        assert got.shape == (3, batch_size) and got.dtype == dtype
        if dtype == torch.float32:
            assert torch.equal(got, want)
        else:
            assert float((got - want).norm() / want.norm()) <= 1e-12


def test_kernelbench_files_work_as_kernelbench_loads_them(exported):
    """KernelBench exec()s both sources into a dict (eval.py load_original_model_and_inputs,
    load_custom_model): no __file__, and the reference's names resolve in that dict."""
    context = {}
    exec(compile(read(exported["kernelbench"], "reference.py"), "<string>", "exec"), context)
    torch.manual_seed(0)
    model = context["Model"](*context["get_init_inputs"]())
    assert model(*context["get_inputs"]()).shape == (3, context["batch_size"])
    for fmt in export.FORMATS:
        assert "__file__" not in read(exported[fmt], export.SOLUTION_FILE[fmt])


def test_kernelbench_get_inputs_shapes(exported):
    kb = load(os.path.join(exported["kernelbench"], "reference.py"), "ref_kernelbench_inputs")
    kb.batch_size = 129
    torch.manual_seed(0)
    x, eps = kb.get_inputs()
    assert x.shape == (129, 784) and eps.shape == (129, 32)
    assert x.dtype == eps.dtype == torch.float32
    assert 0 <= float(x.min()) and float(x.max()) <= 1 and float(eps.std()) > 0.5  # uniform x, N(0, 1) noise


# ModelNew's methods that hold the parameters (everything but forward): the KernelBench export copies
# them from the solution into its stand-alone file (export.read_model_methods).
SHARED_METHODS = export.MODEL_METHODS
MINIMAL_MODELNEW = ("class ModelNew:\n    def __init__(self):\n        return None\n\n    def _refresh_params(self):\n"
                    "        return None\n\n    def _apply(self, fn):\n        return None\n\n"
                    "    def load_state_dict(self, d):\n        return None\n")


def model_new_methods(source: str) -> dict:
    """ast dumps of ModelNew's SHARED_METHODS in a Python source (docstrings and comments do not count)."""
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    return {f.name: ast.dump(f) for f in cls.body if isinstance(f, ast.FunctionDef) and f.name in SHARED_METHODS}


def test_kernelbench_modelnew_keeps_solutions_parameter_handling(exported):
    with open(SOLUTION) as f:
        ours = model_new_methods(f.read())
    theirs = model_new_methods(read(exported["kernelbench"], "solution.py"))
    assert sorted(ours) == sorted(SHARED_METHODS) and ours == theirs


def test_modelnew_drift_is_seen():
    """The comparison above fails when one method's body changes."""
    with open(SOLUTION) as f:
        source = f.read()
    changed = source.replace("self._refresh_params()\n        return module", "return module", 1)
    assert changed != source
    assert model_new_methods(changed)["_apply"] != model_new_methods(source)["_apply"]


# ----- KernelBench's static checker ------------------------------------------------------------------

@pytest.mark.parametrize("fmt", export.FORMATS)
def test_exported_solutions_pass_kernelbench_static_rules(exported, fmt):
    assert export.static_check(read(exported[fmt], export.SOLUTION_FILE[fmt])) == []


@pytest.mark.parametrize("snippet, rule", [
    ("try:\n    x = 1\nexcept Exception:\n    x = 2\n", "code_bypass"),
    ("class ModelNew(Model):\n    pass\n", "code_bypass"),
    ("import threading\n", "thread_injection"),
    ("torch.cuda.synchronize = lambda: None\n", "timing_event_patch"),
    ("class Lazy(torch.Tensor):\n    x = 1\n", "lazy_eval"),
])
def test_static_check_rejects_what_kernelbench_rejects(snippet, rule):
    ok = 'from torch.utils.cpp_extension import load_inline\nSRC = "__global__ void k() {}"\n'
    assert export.static_check(ok) == []
    errors = export.static_check(ok + snippet)
    assert errors and errors[0].startswith(rule)


def test_static_check_ignores_what_kernelbench_strips():
    """KernelBench cuts each line at '#' and '//': words there are not matched; '/* */' comments and
    string literals are, and a file with no __global__ or no load_inline fails the CUDA rule."""
    ok = 'from torch.utils.cpp_extension import load_inline\nSRC = "__global__ void k() {}"\n'
    assert export.static_check(ok + "x = 1  # try: pass\n// one pass\n") == []
    assert export.static_check(ok + "/* one pass */\n")
    assert any("__global__" in e for e in export.static_check('load_inline\n// __global__\n'))
    assert any("load_inline" in e for e in export.static_check('SRC = "__global__ void k() {}"\n'))


def test_rewrites_keep_the_cuda_program():
    src = textwrap.dedent('''\
        // pass one: "quoted" it's
        static_assert(N > 0, "one GEMM pass; url http://x");
        int pass = 2; /* try: pass */ int passes = pass + 1;
        const char c = '"';
        ''')
    words = export.avoid_flagged_words(src)
    assert 'int pass_ = 2;' in words and "int passes = pass_ + 1;" in words
    assert '"one GEMM pas" "s; url http://x"' in words and "// pass one" in words  # comments left alone
    stripped = export.strip_cpp_comments(src)
    assert len(stripped.splitlines()) == len(src.splitlines())
    assert "http://x" in stripped and "//" not in stripped.replace("http://x", "") and "try" not in stripped
    assert "const char c = '\"';" in stripped
    both = export.strip_cpp_comments(words)
    assert not export.static_check('load_inline\nSRC = r"""\n__global__\n' + both + '"""\n')


def test_renamed_identifier_does_not_collide():
    assert "int pass__ = pass_ + 1" in export.avoid_flagged_words("int pass = pass_ + 1")


# ----- the GPU MODE directory ------------------------------------------------------------------------

def gpumode_reference(exported, name):
    return load(os.path.join(exported["gpumode"], "reference.py"), name)


def test_gpumode_reference_imports_only_torch_and_task(exported):
    tree = ast.parse(read(exported["gpumode"], "reference.py"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported == {"torch", "task"}


def test_gpumode_inputs_follow_the_seed(exported):
    ref = gpumode_reference(exported, "gm_seed")
    a, b, c = ref.generate_input(7, 1234), ref.generate_input(7, 1234), ref.generate_input(7, 1235)
    flat = lambda d: [d[0], d[1]] + [d[2][k] for k in sorted(d[2])]
    assert all(torch.equal(p, q) for p, q in zip(flat(a), flat(b)))
    assert not any(torch.equal(p, q) for p, q in zip(flat(a), flat(c)))
    x, eps, w = a
    assert x.shape == (7, 784) and eps.shape == (7, 32)
    assert list(w) == [k for k in load(os.path.join(REPO, "reference.py"), "ref_keys").Model(784, 256, 32).state_dict()]


def test_gpumode_ref_kernel_equals_reference_with_its_weights_and_noise(exported):
    """reference.py's Model given data's weights (load_state_dict) and data's eps (randn_like patched)
    computes what ref_kernel computes. Rule: equal to 1e-6 relative per output (float32; F.linear and
    nn.Linear are the same operation, so only rounding could separate them)."""
    ref = gpumode_reference(exported, "gm_ref")
    x, eps, w = data = ref.generate_input(129, 7)   # on CUDA where there is one
    original = load(os.path.join(REPO, "reference.py"), "ref_gm").Model(784, 256, 32).requires_grad_(False)
    original = original.to(x.device)
    original.load_state_dict(w)
    saved = torch.randn_like
    torch.randn_like = lambda t, **kw: eps
    try:
        want = original(x)
    finally:
        torch.randn_like = saved
    got = ref.ref_kernel(data)
    for g, e in zip(got, want):
        assert g.shape == (129,) and float((g - e).norm() / e.norm()) <= 1e-6


def test_gpumode_check_accepts_the_reference_and_names_a_wrong_output(exported):
    ref = gpumode_reference(exported, "gm_check")
    data = ref.generate_input(128, 42)
    output = ref.ref_kernel(data)
    assert ref.check_implementation(data, tuple(o.clone() for o in output)) == (True, "")
    bad = [o.clone() for o in output]
    bad[1][3] += 1e-2 * abs(float(bad[1][3])) + 1e-3
    bad[1][70] += 1.0
    ok, message = ref.check_implementation(data, tuple(bad))
    assert not ok
    assert message.startswith("recon_loss: 2 of 128 rows differ") and "first rows: 3 (got" in message
    assert "70 (got" in message and "elbo" not in message and "kl_div" not in message
    ok, message = ref.check_implementation(data, output[0])
    assert not ok and "tuple of 3" in message
    ok, message = ref.check_implementation(data, (output[0], output[1], output[2].double()))
    assert not ok and message.startswith("kl_div: got (128,) torch.float64")


def test_gpumode_task_yml(exported):
    import yaml  # requirements.txt lists pyyaml: a missing parser fails here rather than skipping the check
    task = yaml.safe_load(read(exported["gpumode"], "task.yml"))
    assert [t["batchsize"] for t in task["tests"]] == GPUMODE_SIZES
    assert [t["batchsize"] for t in task["benchmarks"]] == GPUMODE_SIZES
    seeds = [t["seed"] for t in task["tests"] + task["benchmarks"]]
    assert len(set(seeds)) == len(seeds)
    assert task["ranking_by"] == "geom"  # kernelbot ranks by the last benchmark only, unless told otherwise
    assert {f["name"] for f in task["files"]} == {"submission.py", "task.py", "utils.py", "reference.py", "eval.py"}
    ref = gpumode_reference(exported, "gm_yml")
    assert set(task["tests"][0]) == set(ref.generate_input.__code__.co_varnames[:2])


def test_gpumode_submission_shape(exported):
    text = read(exported["gpumode"], "submission.py")
    assert text.splitlines()[0] == f"#!POPCORN leaderboard {export.DEFAULT_LEADERBOARD}"
    tree = ast.parse(text)
    assert any(isinstance(n, ast.FunctionDef) and n.name == "custom_kernel" for n in tree.body)
    calls = [n.value.func.id for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
             and isinstance(n.value.func, ast.Name)]
    assert "load_inline" in calls  # built at import, at module level


# ----- the command ----------------------------------------------------------------------------------

def test_non_empty_directory_is_refused_without_force(tmp_path, capsys):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("the user's")
    assert cli.main(["export", "--to", "kernelbench", str(target), "--solution", SOLUTION]) == 3
    err = capsys.readouterr().err
    assert "not empty" in err and "--force" in err
    assert sorted(os.listdir(target)) == ["notes.txt"]
    assert cli.main(["export", "--to", "kernelbench", str(target), "--solution", SOLUTION, "--force"]) == 0
    assert sorted(os.listdir(target)) == ["notes.txt", "reference.py", "solution.py"]
    assert (target / "notes.txt").read_text() == "the user's"


def test_unknown_format_is_a_usage_error(tmp_path, capsys):
    assert cli.main(["export", "--to", "triton", str(tmp_path / "x")]) == 3
    err = capsys.readouterr().err
    assert "kernelbench" in err and "gpumode" in err
    assert not (tmp_path / "x").exists()


# ----- built or run (not in CPU CI's quick path) ------------------------------------------------------

@pytest.mark.build
def test_exported_kernelbench_solution_builds(exported):
    """Compiles the exported CUDA source with VAE_EPS_INPUT defined (nvcc only; no GPU needed)."""
    module = load(os.path.join(exported["kernelbench"], "solution.py"), "kb_solution_build")
    assert hasattr(module._ext, "vae_forward_eps")
    model = module.ModelNew(784, 256, 32)
    with pytest.raises(RuntimeError, match="CUDA"):
        model(torch.rand(2, 784), torch.randn(2, 32))


@pytest.mark.gpu
def test_exported_solution_rejects_mismatched_noise(exported):
    sol = load(os.path.join(exported["kernelbench"], "solution.py"), "kb_sol_gpu")
    model = sol.ModelNew(784, 256, 32).cuda()
    with pytest.raises(RuntimeError, match=r"eps must have shape \(2, 32\) to match x, got \(3, 32\)"):
        model(torch.rand(2, 784, device="cuda"), torch.randn(3, 32, device="cuda"))
    torch.cuda.synchronize()   # and the context is still healthy


@pytest.mark.gpu
@pytest.mark.parametrize("batch_size", [1, 128, 1000, 16384])
def test_exported_kernelbench_solution_matches_its_reference(exported, batch_size):
    """Rule: allclose atol = rtol = 1e-4 against the exported float32 reference (KernelBench's fp32 rule)."""
    kb = load(os.path.join(exported["kernelbench"], "reference.py"), "kb_ref_gpu")
    sol = load(os.path.join(exported["kernelbench"], "solution.py"), "kb_sol_gpu")
    torch.manual_seed(batch_size)
    ref = kb.Model(*kb.get_init_inputs()).cuda()
    model = sol.ModelNew(*kb.get_init_inputs()).cuda()
    model.load_state_dict(ref.state_dict())
    kb.batch_size = batch_size
    x, eps = (t.cuda() for t in kb.get_inputs())
    with torch.no_grad():
        want, got = ref(x, eps), model(x, eps)
    assert got.shape == want.shape == (3, batch_size)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("batch_size", GPUMODE_SIZES)
def test_exported_gpumode_submission_passes_its_check(exported, batch_size):
    ref = gpumode_reference(exported, "gm_ref_gpu")
    sub = load(os.path.join(exported["gpumode"], "submission.py"), "gm_sub_gpu")
    data = ref.generate_input(batch_size, 5236)
    assert ref.check_implementation(data, sub.custom_kernel(data)) == (True, "")


# ----- GPU MODE's procedure reproduced (harness/gpumode.py) -------------------------------------------

def test_gpumode_case_lines_round_trip_as_eval_py_reads_them():
    case = {"batchsize": 128, "seed": 5236}
    assert gpumode.test_line(case) == "batchsize: 128; seed: 5236"
    assert gpumode.parse_test_line(gpumode.test_line(case)) == case
    with pytest.raises(UsageError, match="would reject"):  # pmpp_v2's eval.py: keys are [a-zA-Z]+
        gpumode.parse_test_line("batch_size: 128; seed: 1")
    assert gpumode.cases([case], 7)[0]["args"]["seed"] == gpumode.combine(5236, 7) == 5236 + 5243 * 5244 // 2


def test_gpumode_stats_and_score():
    s = gpumode.stats([1.0, 2.0, 3.0, 6.0])
    assert s["runs"] == 4 and s["mean"] == 3.0 and s["best"] == 1.0 and s["worst"] == 6.0
    assert s["std"] == pytest.approx((14 / 3) ** 0.5) and s["err"] == pytest.approx(s["std"] / 2)
    assert gpumode.score_seconds([1e3, 1e6], "geom") == pytest.approx(1e-6 * 1e3 ** 0.5)
    assert gpumode.score_seconds([1e3, 1e6], "last") == pytest.approx(1e-3)


def test_gpumode_task_reader_without_yaml(exported, monkeypatch):
    with_yaml = gpumode.read_task(exported["gpumode"])
    real_find_spec = gpumode.importlib.util.find_spec
    monkeypatch.setattr(gpumode.importlib.util, "find_spec", lambda n: None if n == "yaml" else real_find_spec(n))
    assert gpumode.read_task(exported["gpumode"]) == with_yaml
    assert [c["batchsize"] for c in with_yaml["tests"]] == GPUMODE_SIZES and with_yaml["ranking_by"] == "geom"


SUBMISSIONS = {
    "eager": "def custom_kernel(data):\n    return ref_kernel(data)\n",
    "perturbed": "def custom_kernel(data):\n    e, r, k = ref_kernel(data)\n    return e, r + 1.0, k\n",
    # a cache keyed on the batch size: right in test mode (one call per size) and in benchmark mode
    # (the same data every call), stale in leaderboard mode (new inputs before every call)
    "shape_cache": "_seen = {}\ndef custom_kernel(data):\n    b = data[0].shape[0]\n"
                   "    if b not in _seen:\n        _seen[b] = ref_kernel(data)\n    return _seen[b]\n",
}


@pytest.fixture(scope="module")
def small_gpumode_dir(exported, tmp_path_factory):
    """The exported GPU MODE reference and task.py with small CPU-sized cases, and three submissions."""
    d = tmp_path_factory.mktemp("gpumode_small")
    for name in ("reference.py", "task.py"):
        (d / name).write_text(read(exported["gpumode"], name))
    (d / "task.yml").write_text('tests:\n  - {"batchsize": 3, "seed": 11}\n  - {"batchsize": 17, "seed": 12}\n'
                                'benchmarks:\n  - {"batchsize": 5, "seed": 21}\n  - {"batchsize": 9, "seed": 22}\n'
                                'ranking_by: "geom"\n')
    for name, body in SUBMISSIONS.items():
        (d / f"{name}.py").write_text("from reference import ref_kernel\n\n" + body)
    return str(d)


@pytest.mark.parametrize("name, expected", [
    ("eager", {"test": True, "benchmark": True, "leaderboard": True}),
    ("perturbed", {"test": False}),
    ("shape_cache", {"test": True, "benchmark": True, "leaderboard": False}),
])
def test_gpumode_procedure_modes(small_gpumode_dir, name, expected):
    r = gpumode.run_procedure(small_gpumode_dir, os.path.join(small_gpumode_dir, f"{name}.py"))
    assert "error" not in r, r.get("error")
    assert {m: v["passed"] for m, v in r["modes"].items()} == expected
    if name == "perturbed":
        assert r["modes"]["test"]["cases"][0]["message"].startswith("recon_loss: 3 of 3 rows differ")
    if name == "eager":
        assert [c["spec"] for c in r["modes"]["leaderboard"]["cases"]] == ["batchsize: 5; seed: 21",
                                                                           "batchsize: 9; seed: 22"]
        assert all(3 <= c["stats"]["runs"] <= gpumode.MAX_REPEATS for c in r["modes"]["benchmark"]["cases"])
        assert r["score_seconds"] > 0


def test_harness_check_runs_a_gpumode_pair_with_the_gpumode_protocol(small_gpumode_dir, capsys):
    """The harness's own check on a GPU MODE directory (the adapter), then GPU MODE's test mode beside it."""
    ref = os.path.join(small_gpumode_dir, "reference.py")
    args = ["check", "--device", "cpu", "--reference", ref, "--trials", "1", "--batch-sizes", "7",
            "--protocol", "gpumode", "--quiet"]
    assert cli.main(args + ["--solution", os.path.join(small_gpumode_dir, "eager.py")]) == 0
    out = capsys.readouterr().out
    assert "test mode" in out and "PASS 2/2 cases" in out
    assert cli.main(args + ["--solution", os.path.join(small_gpumode_dir, "perturbed.py")]) == 1
    out = capsys.readouterr().out
    assert "FAIL 0/2 cases" in out and "recon_loss" in out


def test_gpumode_protocol_needs_a_task_yml(capsys):
    code = cli.main(["check", "--device", "cpu", "--solution", os.path.join(REPO, "tests", "solutions", "correct", "eager_copy.py"),
                     "--protocol", "gpumode"])
    assert code == 3 and "task.yml" in capsys.readouterr().err


@pytest.mark.gpu
def test_exported_pairs_pass_the_harness_and_both_procedures(exported):
    """On a GPU: harness check with --protocol kernelbench on the KernelBench pair, and with
    --protocol gpumode (test mode) on the GPU MODE directory; both must pass both verdicts."""
    from tests.harness_run import run_harness
    kb, gm = exported["kernelbench"], exported["gpumode"]
    code, verdict, out = run_harness("check", "--solution", f"{kb}/solution.py", "--reference", f"{kb}/reference.py",
                                     "--protocol", "kernelbench", "--trials", "1", "--batch-sizes", "1,16384")
    assert code == 0 and verdict["kernelbench"]["correct"], out[-3000:]
    code, verdict, out = run_harness("check", "--solution", f"{gm}/submission.py", "--reference", f"{gm}/reference.py",
                                     "--protocol", "gpumode", "--trials", "1", "--batch-sizes", "1,16384")
    assert code == 0 and verdict["gpumode"]["modes"]["test"]["passed"], out[-3000:]
