# Developer entry points. Each target installs what it needs into .venv (which sees the
# system's packages, so an installed torch is reused rather than downloaded again).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
DEPS := numpy scipy pytest pytest-benchmark ninja setuptools wheel matplotlib tqdm gensim==4.4.0 hypothesis
# Builds run the venv's ninja: a system ninja of another version would find the other's build
# log "too old" and recompile everything (make demo followed by make test did).
WITH_VENV := PATH="$(CURDIR)/$(BIN):$$PATH"

.PHONY: setup build cuda-emu test cuda-emu-test demo bench lint cuda-check wheel-check fuzz sanitize sanitize-subset clean

$(VENV)/.deps: Makefile
	test -x $(BIN)/python || $(PY) -m venv --system-site-packages $(VENV)
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)" $(DEPS)
	touch $@

setup: $(VENV)/.deps

build: setup
	$(WITH_VENV) MAX_JOBS=2 $(BIN)/python setup.py -q build_ext --inplace

# The CUDA sources built by the host compiler against the execution emulator (tests only;
# see tests/cuda_emulator.py): build/cuda_emu/fastsoftmax_emu.so.
cuda-emu: setup
	$(WITH_VENV) MAX_JOBS=2 $(BIN)/python tools/build_cuda_emu.py

# Every test, on the CPU and on the emulated CUDA kernels (the "cuda_emu" device).
test: build cuda-emu
	$(BIN)/python -m pytest -q tests

# Only the tests that run the CUDA code path through the emulator.
cuda-emu-test: build cuda-emu
	$(BIN)/python -m pytest -q tests -k "cuda_emu or emulator"

demo: build
	$(BIN)/python -m fastsoftmax.demo

bench: build
	$(BIN)/python bench/bench_sampler.py

# Property-based tests, random profile: 10,000 examples per property (make test runs the
# fixed-seed CI profile); failures are kept in .hypothesis/ and replayed first on the next
# run. Prints the number of examples each op passed.
fuzz: build
	FASTSOFTMAX_FUZZ_PROFILE=fuzz $(BIN)/python -m pytest -q -p no:warnings tests/fuzz

# The extension and the emulated CUDA build with AddressSanitizer + UndefinedBehaviorSanitizer
# in build/sanitize (the in-place build and build/cuda_emu are left alone); runs the op-level
# tests, the emulator's tests and the CI fuzz profile there, on the CPU and emulated CUDA.
sanitize: setup
	PY=$(CURDIR)/$(BIN)/python tools/sanitize.sh

# The part of make sanitize that CI runs (see tools/sanitize.sh --subset).
sanitize-subset: setup
	PY=$(CURDIR)/$(BIN)/python tools/sanitize.sh --subset

lint: setup
	$(BIN)/python -m pip install -q ruff
	$(BIN)/ruff check fastsoftmax tests bench setup.py

# nvcc compile of every CUDA source for sm_80 and sm_90 (no GPU needed).
cuda-check: setup
	PY=$(BIN)/python tools/compile_cuda.sh

# Build a wheel, install it in a fresh virtual environment with the same torch and import
# it from outside the source tree.
wheel-check: build
	rm -rf dist .wheel-venv
	$(WITH_VENV) MAX_JOBS=2 $(BIN)/python -m pip wheel -q --no-build-isolation --no-deps -w dist .
	$(PY) -m venv --system-site-packages .wheel-venv
	.wheel-venv/bin/python -m pip install -q "torch==$$($(BIN)/python -c 'import torch; print(torch.__version__.split("+")[0])')" numpy
	.wheel-venv/bin/python -m pip install -q --no-deps dist/fastsoftmax-*.whl
	cd /tmp && $(CURDIR)/.wheel-venv/bin/python -c "import fastsoftmax, torch; \
	  assert fastsoftmax.__file__.startswith('$(CURDIR)/.wheel-venv'), fastsoftmax.__file__; \
	  s = fastsoftmax.UnigramSampler(torch.arange(1, 101).double()); \
	  print('wheel ok:', fastsoftmax.build_info(), s.sample(5).tolist())"

# The documentation site (docs/, Sphinx with MyST Markdown) into docs/_build/html, warnings as
# errors. Sphinx and its theme go into their own virtual environment, .docs-venv (no system
# packages); the build runs the .venv's Python, which imports fastsoftmax (so torch and the
# built extension) for the API reference, with .docs-venv's packages on PYTHONPATH.
DOCS_VENV ?= .docs-venv
DOCS_DEPS := sphinx==9.0.4 myst-parser==5.0.0 furo==2025.12.19

$(DOCS_VENV)/.deps: Makefile $(VENV)/.deps
	test -x $(DOCS_VENV)/bin/python || $(BIN)/python -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install -q $(DOCS_DEPS)
	touch $@

.PHONY: docs
docs: build $(DOCS_VENV)/.deps
	rm -rf docs/_build
	PYTHONPATH="$$($(DOCS_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
	  $(BIN)/python -m sphinx -W --keep-going -q -b html docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

clean:
	rm -rf build dist .wheel-venv fastsoftmax/_C*.so *.egg-info
