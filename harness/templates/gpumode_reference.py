"""VAE forward pass returning its evidence lower bound (GPU MODE format), noise as an input.

GPU MODE export of this repository's reference.py (written by `python -m harness export --to
gpumode`). Everything travels in `data`: (x, eps, weights), made by generate_input from a seeded
generator; the weights dict uses reference.Model's state_dict names and nn.Linear's default
init ranges. ref_kernel returns (elbo, recon_loss, kl_div), each (B,) float32:
  h = relu(x We^T + be); mu, logvar = h Wmu^T + bmu, h Wlv^T + blv
  z = mu + exp(0.5 logvar) * eps;  x_recon = sigmoid(W2 relu(W1 z + b1) + b2)
  recon_loss = BCE(x_recon, x).sum(-1); kl_div = -0.5 sum(1 + logvar - mu^2 - e^logvar)
  elbo = -(recon_loss + kl_div)
Self-contained: imports torch and this directory's task.py only.
"""
import torch
import torch.nn.functional as F

from task import input_t, output_t

INPUT_DIM, HIDDEN_DIM, LATENT_DIM = 784, 256, 32
OUTPUT_NAMES = ("elbo", "recon_loss", "kl_div")
# Rule: |got - expected| <= ATOL + RTOL * |expected| per element of each output, and no NaN/inf
# where the reference is finite (the float32 tolerance KernelBench and this repository's harness use).
RTOL = ATOL = 1e-4
SHOW_ROWS = 5
# (name, out_features, in_features): the reference Model's linear layers, in its state_dict order.
LAYERS = (("encoder.0", HIDDEN_DIM, INPUT_DIM), ("fc_mu", LATENT_DIM, HIDDEN_DIM),
          ("fc_logvar", LATENT_DIM, HIDDEN_DIM), ("decoder.0", HIDDEN_DIM, LATENT_DIM),
          ("decoder.2", INPUT_DIM, HIDDEN_DIM))


def generate_input(batchsize: int, seed: int) -> input_t:
    """x, eps and the weights from one generator seeded with `seed`, on CUDA when available.
    (`batchsize`, not batch_size: GPU MODE's eval.py reads test keys as letters only.)"""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    weights = {}
    for name, n_out, n_in in LAYERS:
        bound = n_in ** -0.5  # nn.Linear's default init draws weight and bias from U(-bound, bound)
        for suffix, shape in (("weight", (n_out, n_in)), ("bias", (n_out,))):
            u = torch.rand(shape, generator=gen, device=device)
            weights[f"{name}.{suffix}"] = (u * 2 - 1) * bound
    x = torch.rand(batchsize, INPUT_DIM, generator=gen, device=device)
    eps = torch.randn(batchsize, LATENT_DIM, generator=gen, device=device)
    return x, eps, weights


def ref_kernel(data: input_t) -> output_t:
    x, eps, w = data
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 products, whatever the caller set
    h = F.relu(F.linear(x, w["encoder.0.weight"], w["encoder.0.bias"]))
    mu = F.linear(h, w["fc_mu.weight"], w["fc_mu.bias"])
    logvar = F.linear(h, w["fc_logvar.weight"], w["fc_logvar.bias"])
    z = mu + torch.exp(0.5 * logvar) * eps
    hd = F.relu(F.linear(z, w["decoder.0.weight"], w["decoder.0.bias"]))
    x_recon = torch.sigmoid(F.linear(hd, w["decoder.2.weight"], w["decoder.2.bias"]))
    torch.backends.cuda.matmul.allow_tf32 = tf32
    recon = F.binary_cross_entropy(x_recon, x, reduction="none").sum(-1)
    kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(-1)
    return -(recon + kl), recon, kl


def _bad_rows(name, got, expected) -> str:
    """'' when `got` matches `expected` under the rule; else which rows differ and by how much."""
    if type(got) is not torch.Tensor:
        return f"{name}: got {type(got).__name__}, expected a torch.Tensor"
    if got.shape != expected.shape or got.dtype != expected.dtype or got.device != expected.device:
        return (f"{name}: got {tuple(got.shape)} {got.dtype} on {got.device}, expected "
                f"{tuple(expected.shape)} {expected.dtype} on {expected.device}")
    g, e = got.double(), expected.double()
    finite = torch.isfinite(e)
    bad = ~torch.isclose(g, e, rtol=RTOL, atol=ATOL) | (finite & ~torch.isfinite(g))
    rows = torch.nonzero(bad).flatten().tolist()
    if not rows:
        return ""
    shown = ", ".join(f"{r} (got {float(g[r]):.7g}, expected {float(e[r]):.7g})" for r in rows[:SHOW_ROWS])
    return (f"{name}: {len(rows)} of {e.numel()} rows differ beyond rtol={RTOL:g}, atol={ATOL:g}; "
            f"first rows: {shown}" + (" ..." if len(rows) > SHOW_ROWS else ""))


def check_implementation(data: input_t, output: output_t) -> tuple:
    """(True, '') when each of the three outputs matches ref_kernel's; else (False, a message naming
    each differing output and its first differing rows)."""
    expected = ref_kernel(data)
    if not isinstance(output, (tuple, list)) or len(output) != len(expected):
        return False, (f"expected a tuple of {len(expected)} tensors {OUTPUT_NAMES}, got "
                       f"{type(output).__name__}" + (f" of {len(output)}" if isinstance(output, (tuple, list)) else ""))
    problems = [m for m in (_bad_rows(n, g, e) for n, g, e in zip(OUTPUT_NAMES, output, expected)) if m]
    return (not problems), "; ".join(problems)
