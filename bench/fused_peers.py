"""The fused linear + cross-entropy peers large-model users pick, beside PyTorch's own
F.linear_cross_entropy (bench/peers.py): `torch.compile` of the plain loss, Liger-Kernel's
LigerFusedLinearCrossEntropyLoss (liger-kernel 0.8.5) and Apple's Cut Cross-Entropy
(cut-cross-entropy 25.1.1, cut_cross_entropy.linear_cross_entropy).

Liger and CCE are Triton kernels: they need CUDA and are imported only when asked for, so on
a CPU (or without the packages) their rows are skipped with the reason printed. Neither is a
dependency of this project; on a GPU machine without network, bench/gpu_run.sh installs them
from wheels carried in dist-peers/ (pip download --no-deps liger-kernel==0.8.5
cut-cross-entropy==25.1.1 -d dist-peers).

Every provider is fn(h, w, b, t) -> the summed loss over the rows (b may be None).
CCE 25.1.1 takes no bias, so it is skipped on rows with one; it is called with its defaults
(filter_eps="high": gradient entries below bf16 resolution are skipped, its published
setting).
"""

import torch
import torch.nn.functional as F

_CHECKED = {}


def plain(h, w, b, t):
    return F.cross_entropy(F.linear(h, w, b).float(), t, reduction="sum")


def _liger():
    from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss

    loss = LigerFusedLinearCrossEntropyLoss(reduction="sum")
    return lambda h, w, b, t: loss(w, h, t, bias=b)


def _cce():
    from cut_cross_entropy import linear_cross_entropy

    def fn(h, w, b, t):
        if b is not None:
            raise ValueError("cut_cross_entropy.linear_cross_entropy takes no bias")
        return linear_cross_entropy(h, w, t, reduction="sum")
    return fn


def _compiled():
    return torch.compile(plain)


def candidates(device, want_compile: bool):
    """(name, factory or None, reason when None) for every fused peer on this device."""
    device = torch.device(device)
    out = []
    if want_compile:
        out.append(("torch.compile", _compiled, None))
    else:
        out.append(("torch.compile", None, "torch.compile peer off (--compile to time it; "
                    "compiling takes minutes on a small CPU)"))
    for name, factory in (("liger", _liger), ("cce", _cce)):
        if device.type != "cuda":
            out.append((name, None, f"{name} needs CUDA + Triton (device is {device.type})"))
        else:
            out.append((name, factory, None))
    return out


def _check(name, fn, device, dtype, bias: bool):
    """None when fn agrees with the plain loss on a small case, else the reason it does not
    (an exception, or a loss or gradient that differs)."""
    g = torch.Generator().manual_seed(0)
    n, d, v = 256, 64, 4096
    w = (torch.randn(v, d, generator=g) * 0.05).to(device, dtype).requires_grad_()
    b = torch.zeros(v).to(device, dtype).requires_grad_() if bias else None
    h = torch.randn(n, d, generator=g).to(device, dtype).requires_grad_()
    t = torch.randint(0, v, (n,), generator=g).to(device)
    params = [h, w] + ([b] if bias else [])
    try:
        ref = plain(h, w, b, t)
        ref_grads = torch.autograd.grad(ref, params)
        loss = fn(h, w, b, t)
        grads = torch.autograd.grad(loss, params)
    except Exception as exc:  # an optional peer must not stop the benchmark
        return f"{name} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    tol = 2e-3 if dtype == torch.float32 else 5e-2
    loss, ref = float(loss.detach()), float(ref.detach())
    if abs(loss - ref) > tol * abs(ref):
        return f"{name}: loss {loss:.6g} differs from the plain loss {ref:.6g}"
    for a, r in zip(grads, ref_grads):
        err = float((a.float() - r.float()).abs().max() / r.float().abs().max())
        if err > 10 * tol:
            return f"{name}: gradient differs from the plain loss ({err:.2e})"
    return None


def providers(device, dtype, bias: bool, want_compile: bool, log=print):
    """[(name, fn)] of the fused peers that run here and agree with the plain loss; prints
    why each other one is skipped (once per reason)."""
    out = []
    for name, factory, reason in candidates(device, want_compile):
        key = (name, str(device), dtype, bias)
        if key not in _CHECKED:
            fn = None
            if factory is not None:
                try:
                    fn = factory()
                except ImportError as exc:
                    reason = f"{name} not installed ({exc})"
                if fn is not None:
                    reason = _check(name, fn, device, dtype, bias)
            _CHECKED[key] = (fn if reason is None else None, reason)
            if reason:
                log(f"skipped: {reason}")
        fn, _ = _CHECKED[key]
        if fn is not None:
            out.append((name, fn))
    return out
