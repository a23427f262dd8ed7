"""The extension's build facts and the messages a broken install gives."""

import sys

import pytest
import torch

import fastsoftmax
from fastsoftmax import _loader
from cuda_emulator import AVAILABLE as CUDA_EMU


def test_build_info():
    info = fastsoftmax.build_info()
    assert isinstance(info["cuda"], bool)
    if info["cuda"]:
        assert info["cuda_arch_list"] and info["cuda_version"]
    assert set(info) >= {"cuda", "cuda_version", "cuda_arch_list", "torch_version",
                         "torch_target_version"}
    assert info["torch_target_version"] == "2.11"


def test_torch_older_than_the_stable_target_is_refused(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.10.0+cpu")
    with pytest.raises(ImportError, match="needs torch 2.11 or newer, but torch 2.10.0"):
        _loader.load()


def test_a_later_torch_is_accepted(monkeypatch):
    """The stable ABI: a build loads under any torch from its target version on."""
    monkeypatch.setattr(torch, "__version__", "2.99.0+cu999")
    assert _loader.load() is fastsoftmax.ops._C


CUDA_BUILD = {"cuda": True, "cuda_version": "13.0", "cuda_arch_list": "8.0;9.0",
              "torch_version": "2.14.1+cu130", "torch_target_version": "2.11"}


def test_cuda_build_under_cpu_only_torch_names_the_cpu_wheel(monkeypatch):
    """The cu130 wheel under a CPU-only torch: one sentence naming the wheel that fits, raised
    before the library is loaded (that would fail on libtorch_cuda.so)."""
    monkeypatch.setattr(_loader, "build_info", lambda: dict(CUDA_BUILD))
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(ImportError, match=r"carries CUDA 13.0 kernels .* is a CPU-only build: "
                       r"install the CPU wheel with `pip install --force-reinstall --no-deps "
                       r"fastsoftmax==\d+\.\d+\.\d+` from the main index, not the \w+ one\.$"):
        _loader.load()


def test_cuda_build_under_another_cuda_major_names_that_wheel(monkeypatch):
    monkeypatch.setattr(_loader, "build_info", lambda: dict(CUDA_BUILD))
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    with pytest.raises(ImportError, match=r"is built for CUDA 12.8: install the wheel for "
                       r"CUDA 12.8 \(from the cu128 index\)"):
        _loader.load()


def test_cuda_build_under_same_cuda_major_loads(monkeypatch):
    monkeypatch.setattr(_loader, "build_info", lambda: dict(CUDA_BUILD))
    monkeypatch.setattr(torch.version, "cuda", "13.2")
    assert _loader.load() is fastsoftmax.ops._C


def test_version_is_pyprojects():
    """One source: pyproject.toml's [project] version (the metadata's, once installed)."""
    import pathlib
    import re
    root = pathlib.Path(__file__).resolve().parents[1]
    text = (root / "pyproject.toml").read_text()
    if pathlib.Path(fastsoftmax.__file__).resolve().parent == root / "fastsoftmax":
        declared = re.search(r'^version = "(.+)"', text, re.MULTILINE).group(1)
        assert fastsoftmax.__version__ == declared
    else:  # an installed copy (make cuda-wheel-check): its metadata, perhaps with a +cuXYZ tag
        assert re.fullmatch(r"\d+\.\d+\.\d+(\+cu\d+)?", fastsoftmax.__version__)


def test_missing_build_record_says_how_to_build(monkeypatch):
    monkeypatch.setitem(sys.modules, "fastsoftmax._build_info", None)
    with pytest.raises(ImportError, match="_build_info.py is missing.*--no-build-isolation"):
        _loader.load()


def test_missing_extension_says_how_to_build(monkeypatch):
    monkeypatch.delattr(fastsoftmax, "_C")
    monkeypatch.setitem(sys.modules, "fastsoftmax._C", None)
    with pytest.raises(ImportError, match="could not be imported.*pip install --no-build-isolation"):
        _loader.load()


OPS = ("alias_build", "sample", "sample_unique", "negative_sampling_forward",
       "negative_sampling_backward", "sampled_logits_forward", "sampled_logits_backward",
       "word2vec_train", "word2vec_train_batched", "huffman_tree",
       "hierarchical_softmax_forward",
       "hierarchical_softmax_backward")


def test_ops_registered():
    """Every schema csrc/ops.cpp declares, each with a CPU kernel."""
    for name in OPS:
        assert hasattr(torch.ops.fastsoftmax, name)
        op = getattr(torch.ops.fastsoftmax, name).default
        assert op._schema.name == f"fastsoftmax::{name}"
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CPU"), name


@pytest.mark.skipif(not CUDA_EMU, reason="emulated CUDA build not built")
def test_emulated_build_has_every_op_with_the_same_schema():
    for name in OPS:
        ours = str(getattr(torch.ops.fastsoftmax, name).default._schema)
        emulated = str(getattr(torch.ops.fastsoftmax_emu, name).default._schema)
        assert emulated == ours.replace("fastsoftmax::", "fastsoftmax_emu::")


def _find_cuda():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "tools", "find_cuda.py")
    if not os.path.exists(path):
        pytest.skip("tools/find_cuda.py is not in this copy")
    spec = importlib.util.spec_from_file_location("find_cuda", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cuda_toolkit_is_found_through_a_wrapper_nvcc(tmp_path, monkeypatch):
    """An nvcc on PATH that is a script outside the toolkit: the toolkit is the TOP that
    nvcc --dryrun reports. CUDA_HOME, when set, wins."""
    find_cuda = _find_cuda()
    toolkit = tmp_path / "cuda-13.0"
    (toolkit / "include").mkdir(parents=True)
    (toolkit / "include" / "cuda.h").write_text("#define CUDA_VERSION 13000\n")
    bin_dir = tmp_path / "wrappers"
    bin_dir.mkdir()
    nvcc = bin_dir / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho '#$ TOP={toolkit}/bin/..' >&2\n")
    nvcc.chmod(0o755)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", str(bin_dir))
    home, tried = find_cuda.cuda_home()
    assert home == str(toolkit.resolve()), tried
    assert find_cuda.cuda_version(home) == "13.0"
    monkeypatch.setenv("CUDA_HOME", "/opt/my-cuda")
    assert find_cuda.cuda_home()[0] == "/opt/my-cuda"


def test_missing_cuda_toolkit_names_the_places_tried(tmp_path, monkeypatch):
    find_cuda = _find_cuda()
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(find_cuda, "DEFAULT", str(tmp_path / "no-cuda"))
    home, tried = find_cuda.cuda_home()
    assert home is None
    message = find_cuda.not_found(tried)
    assert "nvcc (not on PATH)" in message and str(tmp_path / "no-cuda") in message
