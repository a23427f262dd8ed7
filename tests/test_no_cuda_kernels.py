"""A CPU-only build under torch's CUDA build: a CUDA tensor given to an op reaches no kernel,
and the error says which wheel has them instead of the dispatcher's backend list."""

import pytest

from fastsoftmax._errors import raising_promised_types


def _dispatcher_without_a_cuda_kernel(*args):
    # The dispatcher's own message (torch 2.13) for an op with no CUDA kernel registered.
    raise NotImplementedError(
        "Could not run 'fastsoftmax::sample' with arguments from the 'CUDA' backend. This "
        "could be because the operator doesn't exist for this backend, or was omitted during "
        "the selective/custom build process (if using custom build).\n'fastsoftmax::sample' "
        "is only available for these backends: [CPU, Meta, BackendSelect].")


def test_a_cuda_tensor_without_cuda_kernels_names_the_cuda_wheel():
    op = raising_promised_types(_dispatcher_without_a_cuda_kernel)
    with pytest.raises(NotImplementedError, match=r"no CUDA kernels.*\+cu130") as info:
        op()
    assert "fastsoftmax::sample" in str(info.value)  # the op is still named


def test_other_errors_pass_through_unchanged():
    def fails(*args):
        raise NotImplementedError("something else")

    with pytest.raises(NotImplementedError, match="^something else$"):
        raising_promised_types(fails)()
