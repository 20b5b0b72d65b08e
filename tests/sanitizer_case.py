"""One forward of solution.py per batch size (argv[1], a comma list), for compute-sanitizer (tests/test_sanitizer.py).

Dev flags come from VAE_EXTRA_CUDA_FLAGS as for any build of solution.py. Prints `ok B` per size once the
forward has finished and its outputs are finite; correctness is test_solution.py's (eager is not run here:
its cuBLAS calls fail under racecheck).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402

import solution  # noqa: E402

model = solution.ModelNew(784, 256, 32).cuda()
gen = torch.Generator(device="cuda").manual_seed(0)
for B in (int(b) for b in sys.argv[1].split(",")):
    x = torch.rand(B, 784, device="cuda", generator=gen)
    with torch.no_grad():
        out = model(x)
    torch.cuda.synchronize()
    if not all(bool(torch.isfinite(o).all()) for o in out):
        sys.exit(f"B={B}: non-finite outputs")
    print("ok", B, flush=True)
