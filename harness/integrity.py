"""Defences against faked results that run inside the worker, and the static source scan.

- tamper_snapshot()/tampered(): which functions the harness relies on were replaced after the
  solution was imported or called (timers, synchronisation, events, RNG seeding, comparisons, and
  in the worker every function, method and table entry of the harness modules it has loaded).
- poison_allocator(): empty torch's caching allocator and refill it with NaN, so memory a solution
  allocates but never writes cannot still hold an earlier (reference) result.
- storage_ranges()/aliases(): an output may not share storage with an input, a parameter or a
  reference output.
- scan_source()/scan_failures(): warnings (and unambiguous failures, defence 'static scan') from
  reading the solution's source.
- custom_kernels(): for --strict, which profiled kernel names are not a library's.
"""
import ast
import builtins
import re
import sys
import time
import types
from collections.abc import Mapping

import torch

_WATCHED = {
    "time": (time, ("perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns", "sleep")),
    "builtins": (builtins, ("type", "isinstance", "len", "float", "int", "print", "id", "getattr", "setattr")),
    "torch": (torch, ("manual_seed", "allclose", "isclose", "equal", "randn_like", "randn", "rand", "empty",
                      "empty_like", "zeros", "get_rng_state", "set_rng_state")),
    "torch.cuda": (torch.cuda, ("synchronize", "Event", "Stream", "current_stream", "manual_seed",
                                "get_rng_state", "empty_cache", "graph", "CUDAGraph")),
    "torch.cuda.Event": (torch.cuda.Event, ("record", "elapsed_time", "synchronize", "query", "wait")),
    "torch.Tensor": (torch.Tensor, ("cpu", "to", "clone", "copy_", "__eq__", "data_ptr", "untyped_storage",
                                    "is_contiguous", "contiguous", "numpy", "tolist", "item")),
    "torch.nn.Module": (torch.nn.Module, ("__call__", "load_state_dict", "state_dict", "parameters",
                                          "named_parameters", "buffers")),
}


def tamper_snapshot(extra_modules=()) -> dict:
    """Identities of watched attributes, taken before the solution is imported. `extra_modules`
    (the harness's own modules in the worker) are watched whole: their functions and classes, the
    methods of those classes, and the entries of their tables (dicts of functions or modules)."""
    snap = {}
    for owner_name, (owner, names) in _WATCHED.items():
        for name in names:
            snap[f"{owner_name}.{name}"] = (owner, name, getattr(owner, name, None))
    for module in extra_modules:
        for name, value in list(vars(module).items()):
            if name.startswith("__"):
                continue
            if callable(value):
                snap[f"{module.__name__}.{name}"] = (module, name, value)
            if isinstance(value, type) and value.__module__ == module.__name__:
                members = vars(value)  # the class's own dict, live: what a replaced method changes
                for attr, member in members.items():
                    if callable(member) and (attr == "__init__" or not attr.startswith("__")):
                        snap[f"{module.__name__}.{name}.{attr}"] = (members, attr, member)
            if isinstance(value, dict):
                for key, entry in value.items():
                    if callable(entry) or isinstance(entry, types.ModuleType):
                        snap[f"{module.__name__}.{name}[{key}]"] = (value, key, entry)
    return snap


def _current(owner, name):
    return owner.get(name) if isinstance(owner, Mapping) else getattr(owner, name, None)


def tampered(snapshot: dict) -> list:
    """Names whose current value is not the one recorded in the snapshot."""
    return sorted(key for key, (owner, name, value) in snapshot.items() if _current(owner, name) is not value)


def poison_allocator(device, small_mib: int = 64, large_mib: int = 512):
    """Release cached blocks, then fill both of the caching allocator's pools with NaN and free
    the blocks again: they stay cached, so the next torch.empty/empty_like returns NaN-filled
    memory instead of whatever an earlier computation left there."""
    if torch.device(device).type != "cuda":
        return
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    nan_bits = torch.tensor(0x7FC00000, dtype=torch.int32, device=device)
    blocks = [torch.empty(1 << 20, dtype=torch.uint8, device=device) for _ in range(small_mib)]
    blocks += [torch.empty(64 << 20, dtype=torch.uint8, device=device) for _ in range(large_mib // 64)]
    for b in blocks:
        b.view(torch.int32).copy_(nan_bits.expand(b.numel() // 4))
    torch.cuda.synchronize(device)
    del blocks


def storage_ranges(tensors) -> list:
    """(start, end) byte ranges of the storages under the given tensors (non-tensors skipped)."""
    ranges = []
    for t in tensors:
        if type(t) is torch.Tensor and t.device.type != "meta":
            s = t.untyped_storage()
            if s.nbytes():
                ranges.append((s.data_ptr(), s.data_ptr() + s.nbytes()))
    return ranges


def aliases(output, others: list) -> bool:
    """True when `output`'s storage overlaps any of the ranges in `others`."""
    for start, end in storage_ranges([output]):
        for o_start, o_end in others:
            if start < o_end and o_start < end:
                return True
    return False


# ----- static scan of the solution source ----------------------------------------------------

_SOURCE_PATTERNS = [
    # (regex, severity, what it means); matched line by line, including CUDA source strings
    (r"torch\.cuda\.(Stream|stream|ExternalStream)\s*\(", "warning", "creates or switches to a side stream"),
    (r"\bcudaStreamCreate|\bcudaStreamCreateWithFlags|getStreamFromPool", "warning", "creates a side stream in CUDA"),
    (r"^\s*(import|from)\s+(threading|multiprocessing|subprocess|concurrent|asyncio)\b", "warning",
     "uses threads or processes"),
    (r"\bos\.(fork|system|popen)\b|\bstd::thread\b|\bpthread_create\b", "warning", "uses threads or processes"),
    (r"\b(torch\.backends\.cuda\.matmul\.allow_tf32|set_float32_matmul_precision|allow_bf16|allow_fp16)\b",
     "warning", "changes torch's matmul precision"),
    # PTX operand types too (.f16 / .bf16 / fp8 in inline asm: cvt, mma, wgmma)
    (r"__nv_bfloat16|__half\b|bfloat16|float16|wmma::|\.tf32|allow_tf32|\.(b?f16(x2)?|e4m3|e5m2)\b", "warning",
     "mentions reduced precision"),
    (r"\bgc\.get_(objects|referrers|referents)\b|\bsys\._getframe\b|\binspect\.(stack|currentframe)\b|"
     r"\bsys\.modules\b|^\s*(import|from)\s+ctypes\b", "warning",
     "reaches into the process (gc, frames, sys.modules or ctypes): it could find the harness's state"),
]
_PATCH_ROOTS = {"torch", "time", "builtins", "F", "nn", "np", "numpy", "harness", "sys", "os"}
_ROOT_ALIASES = {"F": "torch.nn.functional", "nn": "torch.nn", "np": "numpy"}
_MISSING = object()
_ALLOWED_FORWARD_TORCH = {"empty", "empty_like", "empty_strided", "is_tensor", "no_grad", "Size", "device",
                          "float32", "float64", "get_default_dtype"}


def _root_name(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _attr_path(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _resolve(path: str):
    """What a dotted path under one of _PATCH_ROOTS names in the harness's own (trusted) modules, or
    _MISSING. Nothing is imported that is not imported already."""
    root, *rest = path.split(".")
    obj = sys.modules.get(_ROOT_ALIASES.get(root, root), _MISSING)
    for part in rest:
        obj = getattr(obj, part, _MISSING) if obj is not _MISSING else _MISSING
    return obj


def _assignment_finding(lineno: int, path: str, exact: bool = True, how: str = "") -> tuple:
    """Replacing a function or class of torch, time, builtins, ... is a failure; assigning a setting
    (torch.backends.cudnn.benchmark, torch._inductor.config.fallback_random) is a warning."""
    value = _resolve(path) if exact else _MISSING
    if callable(value) or not exact:
        return (lineno, "failure", f"monkey-patches {path}{how}")
    if value is _MISSING:
        return (lineno, "warning", f"sets {path}{how} (no such attribute in the harness's process)")
    return (lineno, "warning", f"sets {path}{how} (a setting, currently {value!r:.40})")


def _scan_ast(tree) -> list:
    findings = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Attribute) and _root_name(t) in _PATCH_ROOTS:
                findings.append(_assignment_finding(node.lineno, _attr_path(t)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            if node.args and _root_name(node.args[0]) in _PATCH_ROOTS:
                name = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
                path = _attr_path(node.args[0]) + (f".{name}" if isinstance(name, str) else "")
                findings.append(_assignment_finding(node.lineno, path, exact=isinstance(name, str),
                                                    how=f" via {node.func.id}"))
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]:
        for fn in [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"]:
            for node in ast.walk(fn):
                if isinstance(node, ast.Try):
                    findings.append((node.lineno, "warning", "try/except in forward (a silent fallback?)"))
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    path = _attr_path(node.func)
                    root = path.split(".")[0]
                    if root in ("torch", "F") and path.split(".")[-1] not in _ALLOWED_FORWARD_TORCH:
                        findings.append((node.lineno, "warning", f"calls torch op {path} in forward"))
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                    findings.append((node.lineno, "warning", "matrix product (@) in forward"))
    return findings


def scan_source(source: str) -> list:
    """Findings as dicts {line, severity, message}, sorted by line. Warnings point at things worth a
    look; failures are unambiguous (replacing attributes of torch, time or builtins)."""
    findings = []
    for lineno, line in enumerate(source.splitlines(), 1):
        for pattern, severity, message in _SOURCE_PATTERNS:
            if re.search(pattern, line):
                findings.append((lineno, severity, message))
    try:
        findings += _scan_ast(ast.parse(source))
    except SyntaxError as e:
        findings.append((e.lineno or 0, "warning", f"could not parse: {e.msg}"))
    unique = sorted(set(findings))
    return [{"line": line, "severity": sev, "message": msg} for line, sev, msg in unique]


def scan_failures(findings: list) -> list:
    """The scan's failures as verdict failures (defence 'static scan'); its warnings stay in the report."""
    return [{"defence": "static scan", "message": f"line {x['line']}: {x['message']}"}
            for x in findings if x["severity"] == "failure"]


# ----- --strict: did the forward run a kernel of its own? ------------------------------------------

# A kernel is a library's when its demangled name, without a leading return type ("void ",
# "std::enable_if<...>::type "), starts with one of these: PyTorch/ATen and the CUB/Thrust it bundles,
# cuBLAS/cuBLASLt (sm90_xmma_*, nvjet_*, ampere_sgemm_*, gemv2T_kernel, splitKreduce_kernel, ...),
# cuDNN, CUTLASS as those libraries ship it, flash attention, inductor's generated Triton kernels
# (triton_poi_/per_/red_/tem_/for_), and copies and fills. Everything else counts as custom: a
# load_inline kernel, a hand-written @triton.jit kernel (unless named like inductor's), CUTLASS
# templates instantiated by the solution under its own kernel name. The rule is a list of names, so a
# library kernel it does not know would count as custom: --strict therefore also counts as a library's
# every kernel that the reference's eager forward launches on the same inputs (trial.strict_failures),
# which rejects a copy of the reference whatever its kernels are called. On the H200 in November 2026,
# before that second rule, the eager copy passed --strict through cuBLAS's `sgemm_largek_lds64`.
LIBRARY_KERNEL_PREFIXES = (
    "at::", "c10::", "at_cuda_detail::", "cub::", "thrust::", "pytorch_flash::", "flash_", "fmha",
    "cublas", "cutlass", "cudnn", "nvjet", "xmma", "cask", "internal::gemvx", "gemv", "gemm", "splitKreduce",
    "sgemm", "dgemm", "hgemm", "cgemm", "zgemm", "sgemv", "dgemv",
    "dot_kernel", "reduce_1Block_kernel", "scal_kernel", "axpy_kernel",
    "sm50_", "sm60_", "sm70_", "sm75_", "sm80_", "sm86_", "sm89_", "sm90_", "sm100_", "sm120_",
    "maxwell_", "volta_", "turing_", "ampere_", "hopper_", "blackwell_",
    "triton_poi_", "triton_per_", "triton_red_", "triton_tem_", "triton_for_",
    "Memcpy", "Memset",
)


def bare_kernel_name(name: str) -> str:
    """'void at::native::foo<4>(...)' -> 'at::native::foo<4>(...)'; strips an enable_if return type too."""
    name = name.strip()
    if name.startswith("void "):
        return name[5:].lstrip()
    if name.startswith("std::enable_if"):
        cut = name.find("::type ")
        return name[cut + 7:].lstrip() if cut >= 0 else name
    return name


def custom_kernels(names, also_library=()) -> list:
    """The names (of those given) that are not library kernels by the rule above, nor in also_library
    (the kernels the reference's own forward launched)."""
    known = set(also_library)
    return [n for n in names if n not in known and not bare_kernel_name(n).startswith(LIBRARY_KERNEL_PREFIXES)]
