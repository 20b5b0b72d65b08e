import os
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def _cuda_headers_for_cpu_builds():
    """Without a GPU, point load_inline at the CUDA headers inside torch's wheel (this machine's own
    toolkit lacks curand and cusparse headers), as .ci/run does, so `pytest` alone builds solution.py."""
    if torch.cuda.is_available():
        return
    try:
        import nvidia
        include = os.path.join(list(nvidia.__path__)[0], "cu13", "include")
    except (ImportError, IndexError):
        return
    if os.path.isdir(include) and include not in os.environ.get("CPATH", "").split(":"):
        os.environ["CPATH"] = include + (":" + os.environ["CPATH"] if os.environ.get("CPATH") else "")
    if os.path.isdir("/usr/local/cuda"):
        os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")


_cuda_headers_for_cpu_builds()
