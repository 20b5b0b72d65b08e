"""Loading a KernelBench-format problem (reference) and a solution; the device, sizes, shapes, inputs,
work counts."""
import contextlib
import importlib.util
import os
import sys

import torch

from harness import UsageError, gpumode

SWEEPABLE_TYPES = (int,)


def load_module(path: str, name: str):
    """Import a Python file as a fresh module. Errors propagate (the worker turns them into verdicts)."""
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    spec.loader.exec_module(module)
    return module


def kernelbench_view(module):
    """A GPU MODE reference (generate_input, ref_kernel, check_implementation) seen as a KernelBench-format
    problem (harness/gpumode.py); any other module as it is."""
    return gpumode.reference_view(module) if gpumode.is_gpumode_reference(module) else module


def solution_class(solution, reference):
    """ModelNew, or for a GPU MODE submission (custom_kernel) a ModelNew over the reference's weights."""
    if not hasattr(solution, "ModelNew") and hasattr(solution, "custom_kernel") and \
            hasattr(reference, "gpumode_reference"):
        return gpumode.solution_model(solution, reference.gpumode_reference)
    return getattr(solution, "ModelNew", None)


def load_reference(path: str):
    """The reference is trusted code; a broken one is a usage error."""
    try:
        module = kernelbench_view(load_module(path, "harness_reference"))
    except Exception as e:
        raise UsageError(f"cannot import reference {path}: {type(e).__name__}: {e}") from e
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise UsageError(f"reference {path} has no `{attr}` (KernelBench format needs Model, get_inputs, get_init_inputs)")
    return module


@contextlib.contextmanager
def sizes_overridden(module, overrides: dict):
    """Temporarily set module-level sizes (e.g. batch_size) before get_inputs()/get_init_inputs()."""
    saved = {}
    for name, value in overrides.items():
        if not isinstance(getattr(module, name, None), SWEEPABLE_TYPES):
            have = ", ".join(sorted(n for n, v in vars(module).items()
                                    if isinstance(v, SWEEPABLE_TYPES) and not n.startswith("_")))
            raise UsageError(f"the reference has no integer module-level size `{name}` (it has: {have or 'none'})")
        saved[name] = getattr(module, name)
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def resolve_device(name: str) -> torch.device:
    """The device to check and time on, with TF32 off; a CUDA device on a machine without one is a
    usage error."""
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError("no CUDA GPU is visible on this machine: `check` and `bench` time and verify CUDA "
                         "solutions on a GPU (use --device cpu for a pure-PyTorch solution)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return device


def environment(device) -> dict:
    """What a timing depends on besides the code: torch, the device, TF32, the GPU and CUDA versions."""
    env = {"torch": torch.__version__, "device": str(device), "tf32_matmul": torch.backends.cuda.matmul.allow_tf32}
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cuda"] = torch.version.cuda
    return env


def to_device(values, device) -> list:
    """The tensors among `values` moved to `device` (the host: "cpu"); other values as they are."""
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def make_inputs(ref_module, seed: int, device: str, overrides: dict):
    """get_inputs() under a fixed seed, with sizes overridden, moved to `device`."""
    with sizes_overridden(ref_module, overrides):
        torch.manual_seed(seed)
        inputs = ref_module.get_inputs()
    return to_device(inputs, device)


def shape_list(ref_module, batch_sizes) -> list:
    """The shapes `check` runs: the default inputs ({}), then each other batch size."""
    default = getattr(ref_module, "batch_size", None)
    shapes = [{}]
    if isinstance(default, int):
        shapes += [{"batch_size": b} for b in batch_sizes if b != default]
    return shapes


def shape_label(ref_module, shape: dict) -> str:
    if not shape:
        b = getattr(ref_module, "batch_size", None)
        return f"batch_size={b} (default)" if b is not None else "default inputs"
    return ", ".join(f"{k}={v}" for k, v in shape.items())


def init_inputs(ref_module, overrides: dict):
    with sizes_overridden(ref_module, overrides):
        return list(ref_module.get_init_inputs())


def build_reference(ref_module, init_args, seed: int, device: str):
    """A fresh reference model whose weights are drawn under `seed`."""
    torch.manual_seed(seed)
    return ref_module.Model(*init_args).to(device).eval()


def flatten_outputs(out):
    """A forward may return one tensor or a (nested) tuple/list; compare them as a flat list."""
    if isinstance(out, (tuple, list)):
        flat = []
        for o in out:
            flat.extend(flatten_outputs(o))
        return flat
    return [out]


def count_flops(model, inputs) -> int:
    """FLOPs of one forward as torch's FlopCounterMode counts them (matrix products: 2*M*N*K)."""
    from torch.utils.flop_counter import FlopCounterMode
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(*inputs)
    return int(counter.get_total_flops())


def count_min_bytes(model, inputs, outputs) -> int:
    """The fewest bytes a forward must move: each input and parameter read once, each output written once."""
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    tensors += list(model.parameters()) + list(model.buffers())
    tensors += [o for o in flatten_outputs(outputs) if isinstance(o, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def input_domain(t):
    """How to draw fresh values like `t`'s: uniform on [0, 1] when all of t lies there, else a normal
    with t's mean and std; None for tensors that are not floating point (they are left alone)."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() == 0:
        return None
    lo, hi = float(t.min()), float(t.max())
    if lo >= 0.0 and hi <= 1.0:
        return ("uniform", 0.0, 1.0)
    return ("normal", float(t.double().mean()), float(t.double().std()) if t.numel() > 1 else 1.0)


def refresh_inputs_(tensors, domains, generator):
    """Overwrite the inputs in place with fresh values (same addresses), from a private generator."""
    for t, d in zip(tensors, domains):
        if d and d[0] == "uniform":
            t.uniform_(d[1], d[2], generator=generator)
        elif d:
            t.normal_(d[1], d[2], generator=generator)
