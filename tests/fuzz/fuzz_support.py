"""Shared pieces of the property-based tests: hypothesis profiles, the count of examples each
op passed, dtypes and memory layouts.

FASTSOFTMAX_FUZZ_PROFILE picks the profile:
  ci   (default) fixed seed (derandomize), no example database, 220 examples per property:
       the same examples on every run, so CI is repeatable. The emulated-CUDA properties
       (test_fuzz_cuda_emu.py) take a tenth of a profile's examples, at least 10.
  fuzz random examples, 10,000 per property, failures kept in .hypothesis/ and replayed
       first on the next run (`make fuzz`).
FASTSOFTMAX_FUZZ_EXAMPLES overrides the number of examples per property of either profile.
"""

import collections
import os

import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# No deadline: the machine is shared and the first example of a test compiles nothing but
# still pays for torch's lazy initialisation. data_too_large: some strategies draw ids per row.
_COMMON = dict(deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

settings.register_profile("ci", max_examples=220, derandomize=True, database=None, **_COMMON)
settings.register_profile(
    "fuzz", max_examples=10_000,
    database=DirectoryBasedExampleDatabase(os.path.join(_ROOT, ".hypothesis", "examples")),
    **_COMMON)

PROFILE = os.environ.get("FASTSOFTMAX_FUZZ_PROFILE", "ci")
if os.environ.get("FASTSOFTMAX_FUZZ_EXAMPLES"):
    settings.register_profile(PROFILE + "-sized", settings.get_profile(PROFILE),
                              max_examples=int(os.environ["FASTSOFTMAX_FUZZ_EXAMPLES"]))
    PROFILE += "-sized"
settings.load_profile(PROFILE)

# Examples that ran a property to its end (passed), per op. tests/conftest.py prints them.
PASSED = collections.Counter()


def passed(op: str) -> None:
    PASSED[op] += 1


def report(terminalreporter) -> None:
    if not PASSED:
        return
    terminalreporter.section(f"fuzz examples passed (hypothesis profile '{PROFILE}')")
    for op, n in sorted(PASSED.items()):
        terminalreporter.write_line(f"{op:<40} {n:>7}")
    terminalreporter.write_line(f"{'total':<40} {sum(PASSED.values()):>7}")


# ---------------------------------------------------------------------------------------
# dtypes and layouts
# ---------------------------------------------------------------------------------------

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
dtypes = st.sampled_from(DTYPES)

# The largest |logit| each dtype is fuzzed with: exp overflows past 88 in float32 and past 709
# in float64, so these reach the edge of what a naive exp(x) survives. float16 and bfloat16
# hold 80 too (their inputs are float32-accumulated).
EXTREME_LOGIT = {torch.float64: 700.0, torch.float32: 80.0, torch.float16: 80.0,
                 torch.bfloat16: 80.0}


def eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps


LAYOUTS = ["contiguous", "transposed", "strided", "expanded"]
layouts = st.sampled_from(LAYOUTS)


def with_layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """x with the same shape and dtype in another memory layout. 'expanded' repeats x's first
    entry along dim 0 with stride 0 (so it changes the values: callers compute references
    from the returned tensor). Differentiable: gradients flow back to x."""
    if layout == "transposed" and x.dim() >= 2:
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "strided" and x.dim() >= 1:
        return _strided(x)
    if layout == "expanded" and x.dim() >= 1 and x.shape[0] > 0:
        return x[:1].expand(x.shape)
    return x


def _strided(x: torch.Tensor) -> torch.Tensor:
    # Every second element of a twice-as-long last dim: a view with stride 2.
    return torch.stack([x, torch.zeros_like(x)], -1).flatten(-2)[..., ::2]
