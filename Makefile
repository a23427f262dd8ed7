# Developer entry points. Each target installs what it needs into .venv (which sees the
# system's packages, so an installed torch is reused rather than downloaded again).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
DEPS := numpy scipy pytest pytest-benchmark ninja setuptools wheel matplotlib

.PHONY: setup build test demo bench lint cuda-check wheel-check clean

$(VENV)/.deps: Makefile
	test -x $(BIN)/python || $(PY) -m venv --system-site-packages $(VENV)
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)" $(DEPS)
	touch $@

setup: $(VENV)/.deps

build: setup
	MAX_JOBS=2 $(BIN)/python setup.py -q build_ext --inplace

test: build
	$(BIN)/python -m pytest -q tests

demo: build
	$(BIN)/python -m fastsoftmax.demo

bench: build
	$(BIN)/python bench/bench_sampler.py

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
	MAX_JOBS=2 $(BIN)/python -m pip wheel -q --no-build-isolation --no-deps -w dist .
	$(PY) -m venv --system-site-packages .wheel-venv
	.wheel-venv/bin/python -m pip install -q "torch==$$($(BIN)/python -c 'import torch; print(torch.__version__.split("+")[0])')" numpy
	.wheel-venv/bin/python -m pip install -q --no-deps dist/fastsoftmax-*.whl
	cd /tmp && $(CURDIR)/.wheel-venv/bin/python -c "import fastsoftmax, torch; \
	  assert fastsoftmax.__file__.startswith('$(CURDIR)/.wheel-venv'), fastsoftmax.__file__; \
	  s = fastsoftmax.UnigramSampler(torch.arange(1, 101).double()); \
	  print('wheel ok:', fastsoftmax.build_info(), s.sample(5).tolist())"

clean:
	rm -rf build dist .wheel-venv fastsoftmax/_C*.so *.egg-info
