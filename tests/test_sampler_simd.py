"""The CPU alias and uniform draws have two paths, AVX-512 (taken where the CPU has it) and
portable (FASTSOFTMAX_NO_AVX512=1, or any other CPU); both must give the reference draws,
including the tail of a call that is not a multiple of the vector width and (uniform) a
vocabulary of 2^32 or more classes, which the vector arithmetic leaves to the portable path."""

import os
import subprocess
import sys

import numpy as np
import torch

from fastsoftmax import ops

import reference as R
from sampler_helpers import make_sampler

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = -1234567890123456789
# 3 blocks of 128 draws and 13 more: full vectors, then a tail of 5 in the last block.
COUNT = 3 * 128 + 13


KINDS = {"alias": ops.KIND_ALIAS, "uniform": ops.KIND_UNIFORM}
SIZES = {"alias": (1, 7, 5000, 300_000), "uniform": (1, 7, 5000, 2**32 - 1, 2**32, 2**40 + 3)}


def draws_and_reference(v, name="alias"):
    sampler = make_sampler(name, v, "cpu")
    prob, alias = sampler._table
    kind = KINDS[name]
    got = ops.sample(prob, alias, torch.tensor([SEED]), v, kind, (COUNT,)).numpy()
    want = R.draw_reference(kind, SEED, 0, 0, COUNT, v, prob.numpy(), alias.numpy())
    return got, want


def test_draws_equal_reference_with_tail():
    for name, sizes in SIZES.items():
        for v in sizes:
            got, want = draws_and_reference(v, name)
            np.testing.assert_array_equal(got, want, err_msg=f"{name}, V = {v}")


def test_portable_path_gives_the_same_draws():
    code = (
        "import sys; sys.path[:0] = [%r, %r]\n"
        "import numpy as np, test_sampler_simd as t\n"
        "for name, sizes in t.SIZES.items():\n"
        "    for v in sizes:\n"
        "        got, want = t.draws_and_reference(v, name)\n"
        "        np.testing.assert_array_equal(got, want)\n"
        "print('ok')\n" % (HERE, os.path.dirname(HERE))
    )
    env = dict(os.environ, FASTSOFTMAX_NO_AVX512="1")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().endswith("ok")


def test_every_table_layout_draws_the_same():
    """Interleaved (as built: one 8-byte entry a class), flat halves, and any other strides
    (the scalar path) all give the reference draws."""
    sampler = make_sampler("alias", 5000, "cpu")
    prob, alias = sampler._table
    assert prob.stride() == (2,) and alias.data_ptr() == prob.data_ptr() + 4
    wide = torch.zeros(5000, 3, dtype=torch.int32)
    wide[:, 0], wide[:, 2] = prob.view(torch.int32), alias
    want = R.draw_reference(ops.KIND_ALIAS, SEED, 0, 0, COUNT, 5000, prob.numpy(), alias.numpy())
    for p, a in ((prob, alias), (prob.contiguous(), alias.contiguous()),
                 (wide[:, 0].view(torch.float32), wide[:, 2])):
        got = ops.sample(p, a, torch.tensor([SEED]), 5000, ops.KIND_ALIAS, (COUNT,)).numpy()
        np.testing.assert_array_equal(got, want)
