"""The properties of the other fuzz files run against the CUDA kernels, executed on the CPU by
the emulator of CUDA's execution model (tests/cuda_emulator.py, built by make cuda-emu), with
a tenth of the profile's examples per property (at least 10): samplers' draws equal the
Philox reference, the losses (sampled softmax, NCE, negative sampling, hierarchical softmax)
agree with tests/reference.py within the same dtype-derived bounds, and word2vec's one-warp
sequential step and its lockstep rounds replay their reference trainers. In-batch softmax has
no kernel of its own (matmuls and cross entropy), so nothing of it runs here.

Not asserted here: bit-identical repeats of the losses' backward (CUDA adds the weight
gradient with atomics, whose order the emulator varies launch after launch)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_emulator import AVAILABLE, emulated_cuda
from fastsoftmax import ops
from fuzz_support import passed
from loss_cases import loss_cases
from test_fuzz_losses import check_functional
from test_fuzz_samplers import KINDS, assert_draws_equal_reference, samplers, seeds
from test_fuzz_tree_inbatch import check_tree, tree_cases
from test_fuzz_word2vec import check_one_worker, w2v_cases

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="the emulated CUDA build is missing "
                                                      "(make cuda-emu)")
emulator_budget = settings(max_examples=max(10, settings().max_examples // 10))


@emulator_budget
@given(kind_sampler=samplers(), seed=seeds,
       shape=st.lists(st.integers(0, 7), min_size=0, max_size=3))
def test_emulated_draws_equal_reference(kind_sampler, seed, shape):
    kind, sampler = kind_sampler
    prob, alias = sampler._table
    with emulated_cuda():
        got = ops.sample(prob, alias, torch.tensor([seed]), sampler.num_classes, KINDS[kind],
                         (math.prod(shape),)).numpy()
    assert_draws_equal_reference(kind, sampler, seed, 0, got)
    passed("cuda_emu: sample")


@pytest.mark.parametrize("kind", ["softmax", "nce", "negsamp"])
@emulator_budget
@given(data=st.data())
def test_emulated_sampled_losses_match_reference(kind, data):
    case = data.draw(loss_cases(kind))
    with emulated_cuda():
        check_functional(case, repeat_bits=False)
    passed(f"cuda_emu: {case.kind} loss")


@emulator_budget
@given(case=tree_cases())
def test_emulated_hierarchical_softmax_matches_reference(case):
    with emulated_cuda():
        check_tree(case, repeat_bits=False)
    passed("cuda_emu: hierarchical_softmax_loss")


@emulator_budget
@given(c=w2v_cases())
def test_emulated_word2vec_one_worker_matches_reference(c):
    with emulated_cuda():
        check_one_worker(c)
    passed("cuda_emu: word2vec_train (1 worker)")


@emulator_budget
@given(c=w2v_cases(), round_size=st.integers(1, 12))
def test_emulated_word2vec_rounds_match_reference(c, round_size):
    with emulated_cuda():
        check_one_worker(c, round_size)
    passed("cuda_emu: word2vec_train (rounds)")
