"""Plain definitions of the margin (hinge) losses, written for clarity, in float64: one row
at a time, one class at a time. Imported into tests/reference.py beside the other ops."""

import torch


def scores_reference(input, weight, bias=None):
    s = input.double() @ weight.double().T
    return s if bias is None else s + bias.double()


def harmonic_reference(r: int) -> float:
    return sum(1.0 / i for i in range(1, r + 1))


def multi_margin_reference(input, weight, bias, target, margin=1.0, p=1, class_weight=None,
                           ignore_index=-100):
    """torch's multi_margin_loss per row: sum_{i != y} w[y] max(0, margin - x_y + x_i)^p / V."""
    x = scores_reference(input, weight, bias)
    V = x.shape[1]
    out = torch.zeros(x.shape[0], dtype=torch.float64)
    for n, y in enumerate(target.tolist()):
        if y == ignore_index:
            continue
        for i in range(V):
            if i != y:
                out[n] += max(0.0, margin - x[n, y] + x[n, i]) ** p
        out[n] *= (1.0 if class_weight is None else float(class_weight[y])) / V
    return out


def ranking_reference(input, weight, bias, target, candidates, margin=1.0, mean=False,
                      ignore_index=-100):
    """sum (or mean) over the row's candidates c != y of max(0, margin - s_y + s_c);
    candidates [N, K] or [K]."""
    x = scores_reference(input, weight, bias)
    out = torch.zeros(x.shape[0], dtype=torch.float64)
    for n, y in enumerate(target.tolist()):
        if y == ignore_index:
            continue
        row = candidates[n] if candidates.dim() == 2 else candidates
        kept = [c for c in row.tolist() if c != y]
        for c in kept:
            out[n] += max(0.0, margin - x[n, y] + x[n, c])
        if mean and kept:
            out[n] /= len(kept)
    return out


def full_ranking_reference(input, weight, bias, target, margin=1.0, ignore_index=-100):
    V = weight.shape[0]
    return ranking_reference(input, weight, bias, target, torch.arange(V), margin,
                             ignore_index=ignore_index)


def warp_reference(input, weight, bias, target, candidates, margin=1.0, ignore_index=-100):
    """The first candidate (in order, the target skipped and not counted) with
    margin - s_y + s_c > 0, found at trial N: L(floor((V - 1) / N)) times its hinge."""
    x = scores_reference(input, weight, bias)
    V = x.shape[1]
    out = torch.zeros(x.shape[0], dtype=torch.float64)
    for n, y in enumerate(target.tolist()):
        if y == ignore_index:
            continue
        row = candidates[n] if candidates.dim() == 2 else candidates
        trials = 0
        for c in row.tolist():
            if c == y:
                continue
            trials += 1
            z = margin - x[n, y] + x[n, c]
            if z > 0:
                out[n] = harmonic_reference((V - 1) // trials) * z
                break
    return out


def full_warp_reference(input, weight, bias, target, margin=1.0, ignore_index=-100):
    """L(r) / r times the sum of the r violators' hinges (0 when r = 0)."""
    x = scores_reference(input, weight, bias)
    V = x.shape[1]
    out = torch.zeros(x.shape[0], dtype=torch.float64)
    for n, y in enumerate(target.tolist()):
        if y == ignore_index:
            continue
        z = [margin - x[n, y] + x[n, c] for c in range(V) if c != y]
        hinges = [v for v in z if v > 0]
        if hinges:
            out[n] = harmonic_reference(len(hinges)) / len(hinges) * sum(hinges)
    return out
