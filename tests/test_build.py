"""The extension's build facts and the messages a broken install gives."""

import sys

import pytest
import torch

import fastsoftmax
from fastsoftmax import _loader
from cuda_emulator import AVAILABLE as CUDA_EMU


def test_build_info():
    info = fastsoftmax.build_info()
    assert info["torch_version"] == torch.__version__
    assert isinstance(info["cuda"], bool)
    if info["cuda"]:
        assert info["cuda_arch_list"]
    assert set(info) >= {"cuda", "cuda_version", "cuda_arch_list", "torch_version"}


def test_mismatched_torch_is_refused(monkeypatch):
    monkeypatch.setattr(fastsoftmax.ops._C, "build_info", lambda: {"torch_version": "1.0.0"})
    with pytest.raises(ImportError, match="built against torch 1.0.0.*--no-build-isolation"):
        _loader.load()


def test_missing_extension_says_how_to_build(monkeypatch):
    monkeypatch.delattr(fastsoftmax, "_C")
    monkeypatch.setitem(sys.modules, "fastsoftmax._C", None)
    with pytest.raises(ImportError, match="could not be imported.*pip install --no-build-isolation"):
        _loader.load()


OPS = ("alias_build", "sample", "sample_unique", "negative_sampling_forward",
       "negative_sampling_backward", "sampled_logits_forward", "sampled_logits_backward",
       "word2vec_train", "huffman_tree", "hierarchical_softmax_forward",
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
