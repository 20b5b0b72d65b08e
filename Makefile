# make check:   correctness on the GPU, then a short speedup summary (one process: check --bench)
# make test:    the test suite in parallel, then the GPU timing cases alone (GPU tests skip without a GPU)
# make bench:   the full timing table, JSON under results/
# make sweep:   latency against batch size (table, Markdown, JSON, PNG under results/)
# make profile: kernels per forward, GPU-only time, roofline
PYTHON ?= python3
SOLUTION ?= solution.py
REFERENCE ?= reference.py
HARNESS = $(PYTHON) -m harness
# Python's bytecode cache under build/pycache, also where the environment turns writing it off: the H200
# image sets PYTHONDONTWRITEBYTECODE=1, so every Python process (the harness, its worker, each pytest
# worker) compiled torch's sources again, about 5 s each.
export PYTHONPYCACHEPREFIX ?= $(CURDIR)/build/pycache
unexport PYTHONDONTWRITEBYTECODE
ARGS = --solution $(SOLUTION) --reference $(REFERENCE)

.PHONY: deps check bench sweep profile test

# Install only what is missing: the GPU machine reaches no package registry and already has all of it.
deps:
	@$(PYTHON) -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('torch', 'ninja', 'pytest', 'xdist', 'numpy')))" \
		|| $(PYTHON) -m pip install -r requirements.txt

check: deps
	$(HARNESS) check $(ARGS) --bench

bench: deps
	@mkdir -p results
	$(HARNESS) bench $(ARGS) --json results/bench.json

sweep: deps
	@mkdir -p results
	$(HARNESS) bench $(ARGS) --sweep batch_size=1,32,128,1024,4096,16384,65536

profile: deps
	$(HARNESS) profile $(ARGS)

# The suite runs in parallel (pytest.ini); the GPU cases that compare timings want a quiet machine, so
# they run after it, one at a time (on a machine without a GPU they skip).
test: deps
	$(PYTHON) -m pytest
	$(PYTHON) -m pytest -m gpu_timing -n 0 -q
