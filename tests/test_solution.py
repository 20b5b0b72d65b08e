"""Tests for solution.ModelNew (fused VAE ELBO kernel).

build: compile the extension, no GPU needed (module layout, init, input errors).
gpu:   correctness against reference.Model (fp32 eager) and a float64 truth,
       noise bit-exactness with torch.randn_like, CUDA graphs, one launch per forward.
Inputs are always random (never zeros or constants).
"""
import copy
import importlib.util
import os
import re
import sys

import pytest
import torch
import torch.nn.functional as F

import reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SIZES = (reference.input_dim, reference.hidden_dim, reference.latent_dim)   # (784, 256, 32)
D, H, L = SIZES
BATCHES = [1, 7, 127, 128, 129, 1000, 4096]
SEEDS = [0, 1, 1234]
ATOL = RTOL = 1e-4        # fp32 kernel vs fp32 eager


def _solution():
    """The repository's solution.py, imported by path: a test run earlier in the same process may have
    left an exported solution.py's directory first on sys.path (harness.problem.load_module keeps the
    directories it loads from), where a plain `import solution` found the eps-input export."""
    path = os.path.join(REPO, "solution.py")
    module = sys.modules.get("solution")
    if module is None or os.path.abspath(getattr(module, "__file__", "") or "") != path:
        spec = importlib.util.spec_from_file_location("solution", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["solution"] = module
    return module


@pytest.mark.build
def test_the_repositorys_solution_even_when_another_comes_first_on_sys_path(tmp_path, monkeypatch):
    # as after a harness load of an exported solution.py in the same process (make test's 35 failures
    # of 2026-12-01: `import solution` found the eps-input export)
    (tmp_path / "solution.py").write_text("raise AssertionError('the other solution.py was imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "solution", raising=False)
    assert os.path.abspath(_solution().__file__) == os.path.join(REPO, "solution.py")


def _check_messages(cuda_src):
    """Each TORCH_CHECK in the CUDA source with the message arguments it streams (those after the condition)."""
    calls, i = [], 0
    while (i := cuda_src.find("TORCH_CHECK", i)) >= 0:
        j = cuda_src.index("(", i)
        depth, args, start, k, in_str = 0, [], j + 1, j, False
        while True:
            ch = cuda_src[k]
            if ch == '"' and cuda_src[k - 1] != "\\":
                in_str = not in_str
            elif not in_str and ch in "([{":
                depth += 1
            elif not in_str and ch in ")]}":
                depth -= 1
                if depth == 0:
                    args.append(cuda_src[start:k].strip())
                    break
            elif not in_str and ch == "," and depth == 1:
                args.append(cuda_src[start:k].strip())
                start = k + 1
            k += 1
        calls.append((cuda_src[i:k + 1], args[1:]))
        i = k
    return calls


def _streams_a_number(arg):
    """True where a message argument may be an integer streamed into c10::str: anything but a string literal, a
    std::string built by std::to_string / std::string / shape_str, or a value known to stream as text."""
    safe = (r'\s*("([^"\\]|\\.)*"\s*)+', r".*std::to_string\(.*", r".*std::string\(.*", r"shape_str\(.*\)",
            r"name", r"dev", r"[\w.]+\.device\(\)", r"[\w.]+\.scalar_type\(\)")
    return not any(re.fullmatch(pattern, arg, re.S) for pattern in safe)


def test_error_messages_never_stream_an_integer():
    # On the H200 (torch 2.11, Python 3.12) an integer streamed into a TORCH_CHECK message from this extension
    # segfaults inside std::ostream (session 18, cuda-gdb): every number goes through std::to_string
    cuda_src = re.search(r'^CUDA_SRC = r"""(.*?)"""', open(os.path.join(REPO, "solution.py")).read(), re.S | re.M).group(1)
    calls = _check_messages(cuda_src)
    assert len(calls) >= 10, "the scan found too few checks to mean anything"
    bad = [(call.split("\n")[0], arg) for call, args in calls for arg in args if _streams_a_number(arg)]
    assert not bad, f"TORCH_CHECK messages that stream a value (format it with std::to_string): {bad}"
    # and the scan does see the crash's form
    planted = _check_messages('TORCH_CHECK(n > 0, "got ", t.size(), " rows, expected ", std::to_string(r));')
    assert [arg for _, args in planted for arg in args if _streams_a_number(arg)] == ["t.size()"]


def _models(device="cuda", seed=0):
    torch.manual_seed(seed)
    ref = reference.Model(*SIZES).to(device)
    new = _solution().ModelNew(*SIZES).to(device)
    new.load_state_dict(ref.state_dict())
    return ref, new


def _run(model, x, seed, *args):
    torch.manual_seed(seed)
    return model(x, *args)


def _assert_close(got, want, what):
    for name, g, w in zip(("elbo", "recon", "kl"), got, want):
        assert g.shape == w.shape and g.dtype == torch.float32, f"{what} {name}: {g.shape} {g.dtype}"
        # rule: |got - want| <= ATOL + RTOL * |want| elementwise (fp32 vs fp32, different sum order)
        torch.testing.assert_close(g, w, atol=ATOL, rtol=RTOL, msg=lambda m: f"{what} {name}: {m}")


def _truth64(ref, x, eps):
    """The reference forward in float64 on the same noise eps."""
    p = {k: v.double() for k, v in ref.state_dict().items()}
    xd = x.double()
    h = torch.relu(xd @ p["encoder.0.weight"].T + p["encoder.0.bias"])
    mu = h @ p["fc_mu.weight"].T + p["fc_mu.bias"]
    lv = h @ p["fc_logvar.weight"].T + p["fc_logvar.bias"]
    z = mu + torch.exp(0.5 * lv) * eps.double()
    h2 = torch.relu(z @ p["decoder.0.weight"].T + p["decoder.0.bias"])
    xr = torch.sigmoid(h2 @ p["decoder.2.weight"].T + p["decoder.2.bias"])
    recon = F.binary_cross_entropy(xr, xd, reduction="none").sum(-1)
    kl = -0.5 * (1 + lv - mu.pow(2) - lv.exp()).sum(-1)
    return -(recon + kl), recon, kl


# --------------------------------------------------------------------------- build (CPU)

@pytest.mark.build
def test_replaced_parameters_are_taken_at_the_next_call():
    # a stale tuple would compute with the old weights, silently; the forward refreshes it before its
    # input checks (which reject this CPU x)
    m = _solution().ModelNew(*SIZES)
    old = m.fc_mu.weight
    m.fc_mu.weight = torch.nn.Parameter(torch.randn(L, H))
    m.decoder[2] = torch.nn.Linear(H, D)
    with pytest.raises(RuntimeError, match="CUDA tensor"):
        m(torch.rand(2, D))
    assert m._params[2] is m.fc_mu.weight is not old
    assert m._params[8] is m.decoder[2].weight and m._params[9] is m.decoder[2].bias


@pytest.mark.build
def test_held_parameters_follow_the_tuple_and_stay_out_of_copies():
    # forward hands the extension a ParamSet made from self._params: a new tuple must give a new ParamSet,
    # and copy.deepcopy / pickle (which cannot copy a C++ object) must leave it behind, the copy making its own
    import pickle
    m = _solution().ModelNew(*SIZES)
    with pytest.raises(RuntimeError, match="CUDA tensor"):
        m(torch.rand(2, D))
    first = m._held
    assert m._held_for is m._params
    m.fc_mu.bias = torch.nn.Parameter(torch.randn(L))
    with pytest.raises(RuntimeError, match="CUDA tensor"):
        m(torch.rand(2, D))
    assert m._held is not first and m._held_for is m._params and m._params[3] is m.fc_mu.bias
    for c in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert "_held" not in c.__dict__ and c._held_for is None
        assert torch.equal(c.fc_mu.bias, m.fc_mu.bias)
        with pytest.raises(RuntimeError, match="CUDA tensor"):
            c(torch.rand(2, D))
        assert c._held_for is c._params and c._params[3] is c.fc_mu.bias is not m.fc_mu.bias


@pytest.mark.build
def test_param_set_wants_ten_tensors():
    with pytest.raises(RuntimeError, match="expected the 10 parameters"):
        _solution()._ext.vae_params([torch.zeros(3)])


@pytest.mark.build
def test_state_dict_keys_and_init_match_reference():
    torch.manual_seed(3)
    ref = reference.Model(*SIZES)
    torch.manual_seed(3)
    new = _solution().ModelNew(*SIZES)
    rs, ns = ref.state_dict(), new.state_dict()
    assert list(rs) == list(ns)
    for k in rs:
        assert torch.equal(rs[k], ns[k]), k     # same seed, same creation order: identical init


@pytest.mark.build
@pytest.mark.parametrize("sizes", [(100, 256, 32), (784, 128, 32), (784, 256, 16)])
def test_unsupported_sizes_raise_value_error(sizes):
    with pytest.raises(ValueError, match="supports"):
        _solution().ModelNew(*sizes)


@pytest.mark.build
def test_cpu_input_raises_clear_error():
    new = _solution().ModelNew(*SIZES)
    with pytest.raises(RuntimeError, match="CUDA tensor"):
        new(torch.rand(4, D))


# --------------------------------------------------------------------------- correctness

@pytest.mark.gpu
@pytest.mark.parametrize("B", BATCHES)
@pytest.mark.parametrize("seed", SEEDS)
def test_matches_reference(B, seed):
    ref, new = _models(seed=seed)
    x = torch.rand(B, D, device="cuda")
    want = _run(ref, x, seed)
    state_ref = torch.cuda.get_rng_state()
    got = _run(new, x, seed)
    _assert_close(got, want, f"B={B} seed={seed}")
    # the forward advances the CUDA generator exactly as the reference does
    assert torch.equal(torch.cuda.get_rng_state(), state_ref)


# rows_per_tile: 8, 9, 16 = cluster kernel rows per cluster; 32, 64 = block-tile kernel rows per block;
# 128 = tensor-core (wgmma) kernel, 128-row tiles over clusters of 1 to 4, 6 or 8 blocks by B; 128 + C: clusters of C
# or 64 + C: 64-row tiles in clusters of C = 6 or 8 (not in a build with the dev switch VAE_WG_NO_HALF, nor 72 with
# VAE_WG_NO_HALF8: VAE_EXTRA_CUDA_FLAGS=-DVAE_WG_NO_HALF)
_FLAGS = os.environ.get("VAE_EXTRA_CUDA_FLAGS", "")
HALF_FORCED = [] if re.search(r"VAE_WG_NO_HALF\b", _FLAGS) else [70] if "VAE_WG_NO_HALF8" in _FLAGS else [70, 72]
WG_FORCED = [129, 130, 131, 132, 134, 136] + HALF_FORCED
TILES = [8, 9, 16, 32, 64, 128] + WG_FORCED


@pytest.mark.gpu
@pytest.mark.parametrize("rows_per_tile", TILES)
@pytest.mark.parametrize("B", [1, 7, 31, 33, 65, 129, 1000, 8449])
def test_every_kernel_and_row_tile(B, rows_per_tile):
    """The kernel rows_per_tile picks matches eager at B rows and advances the generator as eager does."""
    ref, new = _models(seed=B)
    x = torch.rand(B, D, device="cuda")
    want = _run(ref, x, 5)
    state_ref = torch.cuda.get_rng_state()
    got = _run(new, x, 5, rows_per_tile)
    _assert_close(got, want, f"B={B} rows_per_tile={rows_per_tile}")
    assert torch.equal(torch.cuda.get_rng_state(), state_ref)


@pytest.mark.gpu
def test_bad_rows_per_tile_raises():
    _, new = _models()
    with pytest.raises(RuntimeError, match="rows_per_tile"):
        new(torch.rand(4, D, device="cuda"), 24)


def _assert_error_within(factor, ref, new, x, noise_seed, rows_per_tile):
    """Rule: each output's relative L2 error against float64 (same noise) within `factor` x fp32 eager's
    (floor 1e-7 for lucky eager runs)."""
    torch.manual_seed(noise_seed)
    eps = torch.randn(x.shape[0], L, device="cuda")
    truth = _truth64(ref, x, eps)
    eager, got = _run(ref, x, noise_seed), _run(new, x, noise_seed, rows_per_tile)
    for name, g, e, t in zip(("elbo", "recon", "kl"), got, eager, truth):
        err_new = ((g.double() - t).norm() / t.norm()).item()
        err_eager = ((e.double() - t).norm() / t.norm()).item()
        assert err_new <= factor * err_eager + 1e-7, f"{name}: {err_new:.3e} vs eager {err_eager:.3e}"


@pytest.mark.gpu
@pytest.mark.parametrize("B, rows_per_tile", [(7, 0), (128, 0), (1000, 0), (1000, 16), (1000, 32), (1000, 64), (1000, 128),
                                              (1000, 130), (4096, 0), (8192, 0), (16384, 128), (16384, 132)])
def test_error_vs_float64_truth(B, rows_per_tile):
    ref, new = _models(seed=B)
    _assert_error_within(4, ref, new, torch.rand(B, D, device="cuda"), 11, rows_per_tile)


@pytest.mark.gpu
@pytest.mark.parametrize("rows_per_tile", WG_FORCED)
@pytest.mark.parametrize("seed", SEEDS)
def test_tensor_core_kernel_error_vs_float64_truth(seed, rows_per_tile):
    """The 3xTF32 wgmma kernel at a large batch, three seeds, each cluster size: within 2x fp32 eager's
    error (issue 11's goal; the general rule above allows 4x), the kernel drawing the same noise as eager."""
    B = 4097   # 33 tiles of 128 rows, the last one a single row
    ref, new = _models(seed=seed)
    _assert_error_within(2, ref, new, torch.rand(B, D, device="cuda"), seed + 100, rows_per_tile)


def _eager_activations(ref, x, eps):
    """Largest |value| of each layer's input (x, h, z, d) in the fp32 reference forward on noise eps."""
    with torch.no_grad():
        h = ref.encoder(x)
        mu, lv = ref.fc_mu(h), ref.fc_logvar(h)
        z = mu + torch.exp(0.5 * lv) * eps
        d = ref.decoder[1](ref.decoder[0](z))
    return {name: v.abs().max().item() for name, v in (("x", x), ("h", h), ("z", z), ("d", d))}


# Each case pushes one layer's input past FP16's largest finite value (65504) and keeps the others in
# range (weights scaled down after the scaled layer): h (encoder weights x 1e5), z (mu bias + 1e5),
# d (decoder bias + 1e5). x cannot leave it: BCE's target must lie in [0, 1] (eager asserts on the device).
BEYOND_FP16 = {
    "h": lambda m: (m.encoder[0].weight.mul_(1e5), m.fc_mu.weight.mul_(1e-5), m.fc_logvar.weight.mul_(1e-5)),
    "z": lambda m: (m.fc_mu.bias.add_(1e5), m.decoder[0].weight.mul_(1e-5)),
    "d": lambda m: (m.decoder[0].bias.add_(1e5), m.decoder[2].weight.mul_(1e-5)),
}


@pytest.mark.gpu
@pytest.mark.parametrize("B, rows_per_tile", [(300, r) for r in WG_FORCED] + [(4096, 0)])
@pytest.mark.parametrize("layer", list(BEYOND_FP16))
def test_tensor_core_kernel_activations_beyond_fp16_range(layer, B, rows_per_tile):
    """The wgmma kernel multiplies FP16 hi + lo parts of each activation: a row whose activations reach
    past 65504 (the hi part would be inf) is recomputed in fp32; its outputs match eager and the float64
    truth like any other row (same rules as above). VAE_WG_NO_EXACT builds without that fallback."""
    ref, new = _models(seed=8)
    x = torch.rand(B, D, device="cuda")
    with torch.no_grad():
        for m in (ref, new):
            BEYOND_FP16[layer](m)
    torch.manual_seed(12)
    amax = _eager_activations(ref, x, torch.randn(B, L, device="cuda"))
    assert amax[layer] > 65504 and all(v < 65504 for k, v in amax.items() if k != layer), amax
    want, got = _run(ref, x, 12), _run(new, x, 12, rows_per_tile)
    assert all(torch.isfinite(w).all() for w in want), "eager itself overflowed: not a test of the kernel"
    _assert_close(got, want, f"{layer} beyond FP16, B={B} rows_per_tile={rows_per_tile}")
    _assert_error_within(2, ref, new, x, 12, rows_per_tile)


@pytest.mark.gpu
def test_tensor_core_kernel_writes_nothing_of_size_b_by_784():
    """B = 262144 works, and the forward allocates only its (3, B) output and a workspace whose size
    does not grow with B (1.7 MB of split weights, 16 KB of noise per block and 16 KB per cluster for its
    first tile's: 5.9 MB on 132 SMs): the
    reconstruction never leaves the chip (a B x 784 float32 buffer would be 822 MB, even B x 32 is 32 MB)."""
    B = 262144
    ref, new = _models(seed=5)
    x = torch.rand(B, D, device="cuda")
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    got = _run(new, x, 6, 128)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base
    assert extra <= 3 * B * 4 + (6 << 20), f"the forward allocated {extra / 2**20:.1f} MiB"
    with torch.no_grad():
        want = _run(ref, x, 6)
    _assert_close(got, want, f"B={B}")


@pytest.mark.gpu
@pytest.mark.parametrize("rows_per_tile", [16, 64, 129, 132, 134, 136] + HALF_FORCED)
@pytest.mark.parametrize("B", [7, 129])
def test_saturated_logits_and_binary_x(B, rows_per_tile):
    ref, new = _models(seed=B)
    with torch.no_grad():
        for m in (ref, new):
            dec = m.decoder[2]
            dec.weight.mul_(1e-3)
            pattern = torch.tensor([100.0, -100.0, 30.0, -30.0, 0.5, -2.0], device="cuda")
            dec.bias.copy_(pattern.repeat(D // 6 + 1)[:D])
    x = torch.rand(B, D, device="cuda")
    x[:, 0::3] = (x[:, 0::3] > 0.5).float()          # exact 0s and 1s
    x[0, :6] = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    want, got = _run(ref, x, 2), _run(new, x, 2, rows_per_tile)
    assert all(torch.isfinite(g).all() for g in got)
    _assert_close(got, want, "saturated")


@pytest.mark.gpu
def test_in_place_weight_change_is_honoured():
    ref, new = _models(seed=4)
    x = torch.rand(33, D, device="cuda")
    _assert_close(_run(new, x, 1), _run(ref, x, 1), "before")
    with torch.no_grad():
        for m in (ref, new):
            m.decoder[2].weight.mul_(-1.5)
            m.encoder[0].bias.add_(0.1)
            m.fc_logvar.weight.mul_(0.5)
    _assert_close(_run(new, x, 1), _run(ref, x, 1), "after in-place change")


@pytest.mark.gpu
def test_replaced_weight_and_layer_are_honoured():
    # a replaced Parameter or layer is a new tensor: ModelNew's tuple of parameters must follow it
    ref, new = _models(seed=5)
    x = torch.rand(33, D, device="cuda")
    before = _run(new, x, 1)
    _assert_close(before, _run(ref, x, 1), "before")
    torch.manual_seed(9)
    w, layer = torch.randn(L, H, device="cuda") * 0.05, torch.nn.Linear(H, D).cuda()
    for m in (ref, new):
        m.fc_logvar.weight = torch.nn.Parameter(w.clone())
        m.decoder[2] = copy.deepcopy(layer)
    after = _run(new, x, 1)
    assert not torch.allclose(after[1], before[1]), "the replacement should change recon"
    _assert_close(after, _run(ref, x, 1), "after replacing fc_logvar.weight and decoder[2]")


@pytest.mark.gpu
def test_data_reassignment_and_copies_are_honoured():
    # `.data =` swaps a Parameter's storage under the same object (no registration): the held tensors are the
    # Parameters' own, so the next call must read the new storage; a deep copy must compute like the original
    ref, new = _models(seed=7)
    x = torch.rand(45, D, device="cuda")
    before = _run(new, x, 2)
    torch.manual_seed(11)
    w = torch.randn(H, L, device="cuda") * 0.2
    for m in (ref, new):
        m.decoder[0].weight.data = w.clone()
    after = _run(new, x, 2)
    assert not torch.allclose(after[1], before[1]), "the new decoder[0].weight should change recon"
    _assert_close(after, _run(ref, x, 2), "after decoder[0].weight.data = w")
    _assert_close(_run(copy.deepcopy(new), x, 2), after, "a deep copy")
    new.fc_mu.weight.data = torch.randn(L, H + 1, device="cuda")
    with pytest.raises(RuntimeError, match=r"fc_mu.weight has shape \(32, 257\), expected \(32, 256\)"):
        new(x)
    new.double()
    with pytest.raises(TypeError, match=r"encoder\[0\]\.weight must be float32"):
        new(x)


@pytest.mark.gpu
def test_outputs_are_plain_rows_of_one_allocation():
    # the three outputs are made by hand on one (3, B) storage (output_row): each must behave as a tensor of
    # its own: right shape, stride and values, outliving the others, usable in-place and in autograd
    ref, new = _models(seed=8)
    x = torch.rand(29, D, device="cuda")
    elbo, recon, kl = _run(new, x, 4)
    want = _run(ref, x, 4)
    _assert_close((elbo, recon, kl), want, "rows")
    assert all(t.is_contiguous() and t.stride() == (1,) and t.shape == (29,) and t.device == x.device
               for t in (elbo, recon, kl))
    assert elbo.untyped_storage().data_ptr() == kl.untyped_storage().data_ptr()
    assert (elbo.storage_offset(), recon.storage_offset(), kl.storage_offset()) == (0, 29, 58)
    assert not any(t.requires_grad for t in (elbo, recon, kl))
    del elbo, recon
    junk = [torch.rand(3, 29, device="cuda") for _ in range(4)]   # would take the (3, B) block were it freed
    torch.testing.assert_close(kl, want[2], atol=ATOL, rtol=RTOL)
    del junk
    kl2 = kl.clone().requires_grad_()
    (kl2 * 2).sum().backward()
    assert torch.equal(kl2.grad, torch.full_like(kl, 2.0))
    kl.mul_(2)
    torch.testing.assert_close(kl, 2 * want[2], atol=2 * ATOL, rtol=RTOL)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["column_slice", "transposed", "misaligned"])
def test_non_contiguous_and_misaligned_input(layout):
    ref, new = _models(seed=6)
    B = 37
    if layout == "column_slice":
        x = torch.rand(B, 2 * D, device="cuda")[:, ::2]
    elif layout == "transposed":
        x = torch.rand(D, B, device="cuda").t()
    else:
        x = torch.rand(B * D + 1, device="cuda")[1:].view(B, D)
    _assert_close(_run(new, x, 3), _run(ref, x, 3), layout)


@pytest.mark.gpu
def test_empty_batch():
    _, new = _models()
    outs = new(torch.rand(0, D, device="cuda"))
    assert len(outs) == 3 and all(o.shape == (0,) and o.dtype == torch.float32 for o in outs)


@pytest.mark.gpu
@pytest.mark.parametrize("bad, exc, match", [
    (lambda: torch.rand(4, D), RuntimeError, "CUDA tensor"),
    (lambda: torch.rand(4, D, device="cuda", dtype=torch.float64), TypeError, "float32"),
    (lambda: torch.rand(4, D, device="cuda").half(), TypeError, "float32"),
    (lambda: torch.rand(2, 4, D, device="cuda"), RuntimeError, "shape"),
    (lambda: torch.rand(4, D + 1, device="cuda"), RuntimeError, "shape"),
    (lambda: torch.rand(D, device="cuda"), RuntimeError, "shape"),
    (lambda: torch.rand(1, D, device="cuda").expand(2**28 + 1, D), RuntimeError, "batch size 268435457 too large"),
])
def test_bad_input_raises(bad, exc, match):
    _, new = _models()
    with pytest.raises(exc, match=match):
        new(bad())
    torch.cuda.synchronize()        # and the context is still healthy


@pytest.mark.gpu
def test_weights_on_other_device_raise():
    new = _solution().ModelNew(*SIZES)          # weights on the CPU
    with pytest.raises(RuntimeError, match="device"):
        new(torch.rand(4, D, device="cuda"))
    if torch.cuda.device_count() > 1:
        new = new.to("cuda:1")
        with pytest.raises(RuntimeError, match="device"):
            new(torch.rand(4, D, device="cuda:0"))


# --------------------------------------------------------------------------- noise

@pytest.mark.gpu
@pytest.mark.parametrize("B", [1, 7, 128, 1000, 8449, 65536])
@pytest.mark.parametrize("seed", SEEDS)
def test_noise_bit_exact_with_randn_like(B, seed):
    ext = _solution()._ext
    torch.manual_seed(seed)
    ours = ext.draw_noise(B, L, torch.cuda.current_device())
    state_ours = torch.cuda.get_rng_state()
    torch.manual_seed(seed)
    want = torch.randn_like(torch.empty(B, L, device="cuda"))
    # rule: bitwise equal, and the generator advanced by the same amount
    assert torch.equal(ours, want)
    assert torch.equal(state_ours, torch.cuda.get_rng_state())


@pytest.mark.gpu
def test_noise_in_cuda_graph_follows_generator():
    ext = _solution()._ext
    B = 1000
    ext.draw_noise(B, L, 0)                          # warm-up outside capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        ours = ext.draw_noise(B, L, 0)
    torch.manual_seed(77)
    start = torch.cuda.get_rng_state()
    g.replay()
    first = ours.clone()
    g.replay()
    second = ours.clone()
    torch.cuda.set_rng_state(start)
    want1 = torch.randn(B, L, device="cuda")
    want2 = torch.randn(B, L, device="cuda")
    # rule: each replay draws bitwise what eager randn draws at that generator offset
    assert torch.equal(first, want1) and torch.equal(second, want2)


@pytest.mark.gpu
@pytest.mark.parametrize("B", [128, 4096])
def test_forward_in_cuda_graph(B):
    ref, new = _models(seed=8)
    x = torch.rand(B, D, device="cuda")
    new(x)                                            # warm-up outside capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = new(x)
    for seed in (21, 22):
        torch.manual_seed(seed)
        g.replay()
        got = [o.clone() for o in outs]
        _assert_close(got, _run(ref, x, seed), f"graph replay seed={seed}")


def _gpu_work(new, x, rows_per_tile, calls):
    """Names of everything the GPU ran during `calls` forwards (after one untimed call: builds, attributes)."""
    new(x, rows_per_tile)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            new(x, rows_per_tile)
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


@pytest.mark.gpu
@pytest.mark.parametrize("B, rows_per_tile", [(B, R) for B in (128, 16384) for R in (0, 16, 64, 128, 132)])
def test_one_kernel_per_forward(B, rows_per_tile):
    _, new = _models()
    gpu_events = _gpu_work(new, torch.rand(B, D, device="cuda"), rows_per_tile, 3)
    # rule: exactly one launch (our kernel) per forward, no memcpy/memset or library kernels
    assert len(gpu_events) == 3 and all("vae_elbo_kernel" in n for n in gpu_events), gpu_events


# The kernel rows_per_tile 0 picks by B on the H200 (15 clusters of 8 fit at once for either kernel, 17 of 6,
# 30 of 4): each boundary that README's and notes/solution.md's figures are quoted by, from both sides.
H200_ROUTES = [(1, "vae_elbo_kernel<8>"), (120, "vae_elbo_kernel<8>"), (121, "vae_elbo_kernel<9>"),
               (135, "vae_elbo_kernel<9>"), (136, "vae_elbo_kernel<16>"), (480, "vae_elbo_kernel<16>"),
               (481, "vae_elbo_kernel_wg<8,true>"), (960, "vae_elbo_kernel_wg<8,true>"),
               (961, "vae_elbo_kernel_wg<6,true>"), (1088, "vae_elbo_kernel_wg<6,true>"),
               (1089, "vae_elbo_kernel_wg<8,false>"), (1920, "vae_elbo_kernel_wg<8,false>"),
               (1921, "vae_elbo_kernel_wg<6,false>"), (2176, "vae_elbo_kernel_wg<6,false>"),
               (2177, "vae_elbo_kernel_wg<4,false>")]


@pytest.mark.gpu
@pytest.mark.parametrize("B, kernel", H200_ROUTES)
def test_kernel_choice_by_batch_size_on_h200(B, kernel):
    if "H200" not in torch.cuda.get_device_name():
        pytest.skip("the boundaries are the H200's cluster fits")
    _, new = _models()
    names = _gpu_work(new, torch.rand(B, D, device="cuda"), 0, 1)
    picked = [re.sub(r"\s", "", m.group(0)) for n in names for m in [re.search(r"vae_elbo_kernel\w*<[^>]*>", n)] if m]
    assert picked == [kernel], names
