import os
import sys

# Idle OpenMP threads must sleep, not spin: the test processes, the harness's workers and pytest-xdist's
# processes share the cores (harness/__main__.py sets the same for `python -m harness`). Before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402
import torch  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)


def pytest_collection_modifyitems(config, items):
    # The extension build (`build`, about 100 s on a 2-core machine) goes first, so that the rest of the
    # suite runs on the other processes while one compiles, instead of after them.
    items.sort(key=lambda item: "build" not in item.keywords)
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def pytest_terminal_summary(terminalreporter, config):
    if config.getoption("markexpr") == "not gpu_timing":
        terminalreporter.write_line("gpu_timing cases left out (they compare timings, so they run alone): "
                                    "python -m pytest -m gpu_timing -n 0 (the second half of `make test`)")


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
