"""CUDA helpers the tensor-core probes share (tools/mma_probe.py, layer_probe.py, gemm_probe.py): the
3xTF32 operand split and one mma.sync m16n8k8 TF32 with fp32 accumulation, read out of solution.py's
CUDA source (the block between its `>>> tf32 helpers` and `<<< tf32 helpers` markers) without importing
it, so the probes and the kernel run the same code.
"""
import os

_SOLUTION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "solution.py")


def _helpers() -> str:
    with open(_SOLUTION) as f:
        text = f.read()
    start, end = text.index("// >>> tf32 helpers"), text.index("// <<< tf32 helpers")
    return text[start:end]


HELPERS = _helpers()
