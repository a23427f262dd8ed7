"""When the exact losses take the fused softmax: _softmax_stats.py's per-row figures (lse,
true, total) and their gradients computed by the Triton kernels of ops/_triton_softmax.py,
whose logit tiles live in registers and are recomputed in backward, so no block of logits
reaches memory. The two torch ops (`fastsoftmax::fused_softmax_stats` and its backward) are
defined in fastsoftmax/ops/fused_softmax.py; this module holds the dispatch policy.

`fused=` of the exact losses picks the path (resolve()):

- None (default): the streamed path, on CUDA too. The fused kernels have run only under
  Triton's interpreter so far, and the streamed path is the one measured on a GPU (an H200,
  bench/results/cce-headline-cuda.csv). DEFAULT_ON_CUDA lists the dtypes for which the
  default takes the kernels on CUDA: none yet (see the rule below);
- True: the fused kernels, or a ValueError that says why they cannot run. On CPU tensors they
  run under Triton's interpreter only (TRITON_INTERPRET=1 in the environment before
  fastsoftmax first runs them): that is how CI tests them, float64 included;
- False: the streamed path.

The rule for defaults: a new CUDA path replaces a measured one as the default only once a
real GPU run has committed its rows to `bench/results/*-cuda.csv`. The first GPU run of the
kernels adds a dtype to DEFAULT_ON_CUDA only if, in that dtype, ours_fused is faster than
ours_streamed at Cut Cross-Entropy's headline shape (N = 8192, V = 256,000, D = 2304) and at
Liger-Kernel's shapes (bench_cce_headline.py --shape 8192,100000,1024 and 8192,800000,1024),
and its loss, grad_h and grad_W errors against the float32-logit reference are no larger
than the streamed path's at each of them. A dtype that wins at some shapes only stays off
the list until the default can tell those shapes apart (a predicate instead of a set).

Even then the default keeps the streamed path:

- under autocast: the op is opaque to autocast, so float32 inputs would reach the kernels as
  float32 (float32 dots: TF32 where torch allows it, else IEEE on CUDA cores) where the
  streamed path's matmuls are autocast to 16 bits; fused=True runs them all the same;
- under torch.use_deterministic_algorithms(True): the backward sums with float atomics, so
  the last bits of the gradients vary from run to run on a GPU (fused=True is refused; on
  the CPU the interpreter's atomics run in program order and are deterministic);
- where unavailable() gives a reason (Triton missing, mixed dtypes or devices, ...), and
  the streamed path then gives its own error if the call cannot run at all.
"""

import importlib.util
import os
import sys
from typing import Optional

import torch
from torch import Tensor

from ..ops.fused_softmax import device_mismatch

HAS_TRITON = importlib.util.find_spec("triton") is not None


def interpreted() -> bool:
    """Whether the kernels run under Triton's interpreter. Triton reads TRITON_INTERPRET when
    it decorates a kernel, so once the kernels are imported their mode is fixed."""
    kernels = sys.modules.get("fastsoftmax.ops._triton_softmax")
    if kernels is not None:
        return kernels.INTERPRETED
    return os.environ.get("TRITON_INTERPRET", "0") == "1"

_NATIVE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# The dtypes whose fused kernels the default takes on CUDA: none until a GPU run commits rows
# that meet the module's rule.
DEFAULT_ON_CUDA: frozenset = frozenset()


def unavailable(h: Tensor, linear_weight: Tensor, linear_bias: Optional[Tensor],
                weight: Optional[Tensor], targets: Optional[Tensor] = None) -> Optional[str]:
    """Why the fused kernels cannot compute this call, or None when they can."""
    if not HAS_TRITON:
        return "Triton is not installed (pip install triton; torch's CUDA wheels bring it)"
    mismatch = device_mismatch(h, linear_weight=linear_weight, linear_bias=linear_bias,
                               targets=targets, weight=weight)
    if mismatch is not None:
        return f"they take tensors of one device: {mismatch}"
    if h.device.type == "cpu" and not interpreted():
        return ("on CPU tensors they run only under Triton's interpreter: set "
                "TRITON_INTERPRET=1 in the environment before fastsoftmax first uses them")
    if h.device.type not in ("cpu", "cuda"):
        return f"they run on CUDA (or CPU, interpreted) tensors, not {h.device.type}"
    if linear_weight.dtype != h.dtype or (linear_bias is not None
                                          and linear_bias.dtype != h.dtype):
        return (f"the input, linear_weight and linear_bias must share one dtype, got "
                f"{h.dtype}, {linear_weight.dtype} and "
                f"{None if linear_bias is None else linear_bias.dtype}")
    if h.dtype not in _NATIVE_DTYPES + (torch.float64,):
        return f"they take float16, bfloat16, float32 or float64, got {h.dtype}"
    if weight is not None and weight.requires_grad:
        return "they give no gradient to a per-class weight that requires one"
    if torch.are_deterministic_algorithms_enabled() and not h.is_cpu:
        return ("their backward sums with float atomics, and "
                "torch.use_deterministic_algorithms(True) is set")
    if h.shape[0] == 0:
        return "there are no rows"
    return None


def check_fused(fused) -> Optional[bool]:
    """`fused` as given, once it is None, True or False (a module's setting, a call's)."""
    if fused is not None and not isinstance(fused, bool):
        raise TypeError(f"fused must be None, True or False, got {fused!r}")
    return fused


def _default_takes_kernels(h: Tensor) -> bool:
    """Whether fused=None may take the kernels for this input, before unavailable() asks:
    native CUDA runs of a dtype on DEFAULT_ON_CUDA, outside autocast (module docstring)."""
    return (h.is_cuda and h.dtype in DEFAULT_ON_CUDA and not interpreted()
            and not torch.is_autocast_enabled(h.device.type))


def resolve(fused, h: Tensor, linear_weight: Tensor, linear_bias: Optional[Tensor],
            weight: Optional[Tensor] = None, targets: Optional[Tensor] = None) -> bool:
    """Whether this call takes the fused kernels (see the module's docstring for `fused`)."""
    if check_fused(fused) is False:
        return False
    if fused is None:
        return (_default_takes_kernels(h)
                and unavailable(h, linear_weight, linear_bias, weight, targets) is None)
    reason = unavailable(h, linear_weight, linear_bias, weight, targets)
    if reason is not None:
        raise ValueError(f"fused=True: the fused softmax kernels cannot run: {reason}")
    return True


__all__ = ["DEFAULT_ON_CUDA", "HAS_TRITON", "check_fused", "interpreted", "resolve",
           "unavailable"]
