"""Plain definitions of every fastsoftmax op, written for clarity, used by the tests.

Samplers: a numpy Philox4x32-10 and the draw rules of csrc/common/philox.h, so that the
native draws can be checked value for value (which also pins down that CPU and CUDA agree).
"""

import decimal
import math

import numpy as np
import torch

# ---------------------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------------------

M32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(counter_lo: np.ndarray, counter_hi: np.ndarray, stream: int, seed: int):
    """Philox4x32-10 of counters (lo, hi, stream, 0) under key = 64-bit seed; uint32 words."""
    c0 = counter_lo.astype(np.uint64)
    c1 = counter_hi.astype(np.uint64)
    c2 = np.full_like(c0, stream)
    c3 = np.zeros_like(c0)
    seed &= (1 << 64) - 1
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)
    m0, m1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    for _ in range(10):
        p0, p1 = m0 * c0, m1 * c2  # exact: both factors < 2^32
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0), p1 & M32, ((p0 >> np.uint64(32)) ^ c3 ^ k1), p0 & M32
        k0 = (k0 + np.uint64(0x9E3779B9)) & M32
        k1 = (k1 + np.uint64(0xBB67AE85)) & M32
    return c0, c1, c2, c3


def _uniform_index(hi, lo, n: int) -> np.ndarray:
    bits = [(int(h) << 32) | int(l) for h, l in zip(hi, lo)]
    return np.array([(b * n) >> 64 for b in bits], dtype=np.int64)


def _uniform_double(hi, lo) -> np.ndarray:
    bits = (hi.astype(np.uint64) << np.uint64(21)) | (lo.astype(np.uint64) >> np.uint64(11))
    return bits.astype(np.float64) * (1.0 / 9007199254740992.0)


def draw_reference(kind: int, seed: int, stream: int, first: int, count: int, num_classes: int,
                   prob=None, alias=None) -> np.ndarray:
    """Draws first..first+count-1 of the stream, exactly as the native kernels make them.
    kind: 0 alias table (prob float32, alias int32 numpy arrays), 1 uniform, 2 log-uniform."""
    index = np.arange(first, first + count, dtype=np.uint64)
    w0, w1, w2, w3 = philox4x32_10(index & M32, index >> np.uint64(32), stream, seed)
    if kind == 1:
        return _uniform_index(w0, w1, num_classes)
    if kind == 2:
        u = _uniform_double(w0, w1)
        c = np.floor(np.exp(u * math.log1p(num_classes))).astype(np.int64) - 1
        return np.clip(c, 0, num_classes - 1)
    bucket = _uniform_index(w0, w1, num_classes)
    coin = _uniform_double(w2, w3)
    keep = coin < prob[bucket].astype(np.float64)
    return np.where(keep, bucket, alias[bucket].astype(np.int64))


def unique_reference(kind, seed, num_classes, num_sampled, prob=None, alias=None):
    """TensorFlow's rejection loop over the unique-stream draws: (candidates, num_tries)."""
    picked, seen, tries, first = [], set(), 0, 0
    while len(picked) < num_sampled:
        block = draw_reference(kind, seed, 1, first, 4096, num_classes, prob, alias)
        first += 4096
        for c in block.tolist():
            tries += 1
            if c not in seen:
                seen.add(c)
                picked.append(c)
                if len(picked) == num_sampled:
                    break
    return np.array(picked, dtype=np.int64), tries


def alias_implied_probs(prob: torch.Tensor, alias: torch.Tensor) -> torch.Tensor:
    """The distribution an alias table draws from: (keep mass + mass aliased in) / V."""
    prob = prob.double().cpu()
    mass = prob.clone()
    mass.index_add_(0, alias.long().cpu(), 1.0 - prob)
    return mass / prob.numel()


def log_uniform_probs(num_classes: int) -> torch.Tensor:
    c = torch.arange(num_classes, dtype=torch.float64)
    return torch.log((c + 2) / (c + 1)) / math.log(num_classes + 1)


def expected_count(p: torch.Tensor, num_sampled: int, num_tries, unique: bool) -> torch.Tensor:
    """Expected occurrences of classes of probability p in one candidate set."""
    if not unique or num_tries == num_sampled:  # TensorFlow's shortcut, as the native side
        return num_sampled * p
    # 1 - (1 - p)^tries with 50 significant digits: in float64, 1 - p drops every digit of a p
    # near 1e-16 (the fuzz profile found p = 2.6e-16 off by 19%).
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        one = decimal.Decimal(1)
        out = [float(one - (one - decimal.Decimal(x)) ** int(num_tries))
               for x in p.double().reshape(-1).tolist()]
    return torch.tensor(out, dtype=torch.float64).reshape(p.shape)


# ---------------------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------------------
# Per-row losses [N] in float64, from input [N, D], weight [V, D], bias [V] or None,
# target [N, T]. Rows whose first target equals ignore_index give 0. Differentiable, so the
# tests take gradients of these with autograd.


def _row_mask(target: torch.Tensor, ignore_index: int) -> torch.Tensor:
    return target[:, 0] != ignore_index


def sampled_logits_reference(input, weight, bias, target, sampled, true_expected,
                             sampled_expected, remove_accidental_hits, log_z=0.0,
                             ignore_index=-100, dtype=torch.float64):
    """TensorFlow's _compute_sampled_logits: (logits [N, T + S], labels [N, T + S], keep).
    `dtype` is the arithmetic dtype (float64 for the reference; a low-precision dtype gives
    plain PyTorch's own error for comparison)."""
    h, w = input.to(dtype), weight.to(dtype)
    keep = _row_mask(target, ignore_index)
    safe = torch.where(target == ignore_index, torch.zeros_like(target), target)
    true_logits = (h[:, None, :] * w[safe]).sum(-1)  # [N, T]
    sampled_logits = h @ w[sampled].T  # [N, S]
    if bias is not None:
        true_logits = true_logits + bias.to(dtype)[safe]
        sampled_logits = sampled_logits + bias.to(dtype)[sampled]
    true_logits = true_logits - torch.log(true_expected.to(dtype))
    sampled_logits = sampled_logits - torch.log(sampled_expected.to(dtype))
    if remove_accidental_hits:
        hits = (sampled[None, None, :] == target[:, :, None]).any(1)  # [N, S]
        sampled_logits = sampled_logits.masked_fill(hits, -torch.finfo(dtype).max)
    logits = torch.cat([true_logits, sampled_logits], 1) - log_z
    T = target.shape[1]
    labels = torch.cat([torch.full_like(true_logits, 1.0 / T), torch.zeros_like(sampled_logits)], 1)
    return logits, labels, keep


def sampled_softmax_reference(input, weight, bias, target, sampled, true_expected,
                              sampled_expected, remove_accidental_hits=True, ignore_index=-100,
                              dtype=torch.float64):
    logits, labels, keep = sampled_logits_reference(
        input, weight, bias, target, sampled, true_expected, sampled_expected,
        remove_accidental_hits, 0.0, ignore_index, dtype)
    loss = -(labels * torch.log_softmax(logits, 1)).sum(1)
    return torch.where(keep, loss, torch.zeros_like(loss))


def nce_reference(input, weight, bias, target, sampled, true_expected, sampled_expected,
                  remove_accidental_hits=False, log_z=0.0, ignore_index=-100,
                  dtype=torch.float64):
    logits, labels, keep = sampled_logits_reference(
        input, weight, bias, target, sampled, true_expected, sampled_expected,
        remove_accidental_hits, log_z, ignore_index, dtype)
    # sigmoid cross entropy: -y log s(x) - (1 - y) log s(-x)
    loss = -(labels * torch.nn.functional.logsigmoid(logits)
             + (1 - labels) * torch.nn.functional.logsigmoid(-logits)).sum(1)
    return torch.where(keep, loss, torch.zeros_like(loss))


def negative_sampling_reference(input, weight, target, negatives, ignore_index=-100,
                                dtype=torch.float64):
    """-sum_t log s(w_t.h) - sum_k log s(-w_k.h); negatives [N, K] or [K] (shared)."""
    h, w = input.to(dtype), weight.to(dtype)
    keep = _row_mask(target, ignore_index)
    safe = torch.where(target == ignore_index, torch.zeros_like(target), target)
    if negatives.dim() == 1:
        negatives = negatives.expand(h.shape[0], -1)
    pos = (h[:, None, :] * w[safe]).sum(-1)
    neg = (h[:, None, :] * w[negatives]).sum(-1)
    loss = -(torch.nn.functional.logsigmoid(pos).sum(1)
             + torch.nn.functional.logsigmoid(-neg).sum(1))
    return torch.where(keep, loss, torch.zeros_like(loss))


def full_softmax_reference(input, weight, bias, target, ignore_index=-100, dtype=torch.float64):
    """Softmax cross entropy over all V logits with mass 1/T on each true class: the exact
    loss every output layer computes in eval mode (FullSoftmaxLoss also in training)."""
    h, w = input.to(dtype), weight.to(dtype)
    keep = _row_mask(target, ignore_index)
    safe = torch.where(target == ignore_index, torch.zeros_like(target), target)
    logits = h @ w.T + (0.0 if bias is None else bias.to(dtype))
    loss = -torch.log_softmax(logits, 1).gather(1, safe).mean(1)
    return torch.where(keep, loss, torch.zeros_like(loss))


def reduce_reference(loss, target, reduction, ignore_index=-100):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (target[:, 0] != ignore_index).sum()


def candidate_smoothing_reference(input, weight, bias, target, sampled, true_expected,
                                  sampled_expected, remove_accidental_hits=True,
                                  class_weight=None, label_smoothing=0.0, ignore_index=-100,
                                  dtype=torch.float64):
    """Sampled softmax with a per-class weight and label smoothing over each row's candidates
    (the definition in fastsoftmax/losses/_smoothing.py), written out on the [N, T + S] logits: the
    row's candidates are its T true classes and the sampled classes it keeps; log q is the
    log-softmax over them; loss = (1 - eps) a(y) mean_t(-log q(y_t)) + eps / n sum_j a(j)
    (-log q(j)), n the number of candidates kept, a = class_weight (1 without)."""
    logits, _, keep = sampled_logits_reference(
        input, weight, bias, target, sampled, true_expected, sampled_expected, False, 0.0,
        ignore_index, dtype)
    N, T = target.shape
    safe = torch.where(target == ignore_index, torch.zeros_like(target), target)
    kept = torch.ones_like(logits, dtype=torch.bool)
    if remove_accidental_hits:
        kept[:, T:] = ~(sampled[None, None, :] == safe[:, :, None]).any(1)
    nll = -torch.log_softmax(logits.masked_fill(~kept, -math.inf), 1)
    nll = nll.masked_fill(~kept, 0.0)
    classes = torch.cat([safe, sampled.expand(N, -1)], 1)
    a = (torch.ones_like(nll) if class_weight is None else class_weight.to(dtype)[classes])
    true_term = nll[:, :T].mean(1) * a[:, 0]
    smooth = (a * nll).sum(1) / kept.sum(1)
    loss = (1 - label_smoothing) * true_term + label_smoothing * smooth
    return torch.where(keep, loss, torch.zeros_like(loss))


def weighted_reduce_reference(loss, target, reduction, class_weight=None, ignore_index=-100):
    """As reduce_reference; with class_weight 'mean' divides by the sum of the target
    weights of the rows not ignored (F.cross_entropy's weighted mean)."""
    if class_weight is None or reduction != "mean":
        return reduce_reference(loss, target, reduction, ignore_index)
    keep = target[:, 0] != ignore_index
    return loss.sum() / class_weight.to(loss.dtype)[target[keep][:, 0]].sum()


def full_softmax_extras_reference(input, weight, bias, target, class_weight=None,
                                  label_smoothing=0.0, z_loss=0.0, softcap=None,
                                  ignore_index=-100, dtype=torch.float64):
    """(per-row loss, per-row logsumexp) of the full softmax with its large-model options,
    written out on the whole [N, V] logits (target [N], one true class): logits capped to
    softcap * tanh(logits / softcap) (Gemma 2); the smoothed, weighted cross entropy of
    F.cross_entropy; plus z_loss * lse^2 (PaLM), scaled like the rest of the row by its class
    weight; ignored rows 0 (their lse is still returned)."""
    h, w = input.to(dtype), weight.to(dtype)
    logits = h @ w.T + (0.0 if bias is None else bias.to(dtype))
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    lse = torch.logsumexp(logits, 1)
    log_p = logits - lse[:, None]
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    a = (torch.ones(w.shape[0], dtype=dtype) if class_weight is None
         else class_weight.to(dtype))
    nll = -log_p.gather(1, safe[:, None])[:, 0] * a[safe]
    smooth = -(log_p * a).sum(1) / w.shape[0]
    loss = (1 - label_smoothing) * nll + label_smoothing * smooth + z_loss * lse**2 * a[safe]
    return torch.where(keep, loss, torch.zeros_like(loss)), lse


# ---------------------------------------------------------------------------------------
# Hierarchical softmax
# ---------------------------------------------------------------------------------------


def huffman_reference(counts, sort=True):
    """word2vec.c's CreateBinaryTree, one node at a time: (codes, points) as lists of lists,
    root first. With `sort`, the vocabulary order is falling count, ties by rising id."""
    V = len(counts)
    order = sorted(range(V), key=lambda v: (-counts[v], v)) if sort else list(range(V))
    count = [counts[v] for v in order] + [math.inf] * (V - 1)
    parent, bit = [None] * (2 * V - 1), [0] * (2 * V - 1)
    leaf, inner = V - 1, V
    for a in range(V - 1):
        picked = []
        for _ in range(2):
            # the leaf head wins only when strictly smaller than the inner head
            if leaf >= 0 and count[leaf] < count[inner]:
                picked.append(leaf)
                leaf -= 1
            else:
                picked.append(inner)
                inner += 1
        count[V + a] = count[picked[0]] + count[picked[1]]
        parent[picked[0]] = parent[picked[1]] = V + a
        bit[picked[1]] = 1
    codes, points = [None] * V, [None] * V
    for position, cls in enumerate(order):
        code, point, x = [], [], position
        while parent[x] is not None:
            code.append(bit[x])
            point.append(parent[x] - V)
            x = parent[x]
        codes[cls], points[cls] = code[::-1], point[::-1]
    return codes, points


def _padded_paths(codes, points):
    L = max(len(p) for p in points)
    c = torch.tensor([list(r) + [0] * (L - len(r)) for r in codes], dtype=torch.int64)
    p = torch.tensor([list(r) + [-1] * (L - len(r)) for r in points], dtype=torch.int64)
    return c, p


def hierarchical_softmax_reference(input, weight, target, codes, points, ignore_index=-100,
                                   dtype=torch.float64):
    """Per-row -sum_j log sigmoid((1 - 2 code_j) w_{point_j}.h) [N], gathering the [N, L, D]
    path weights. codes/points: lists of lists (root first) or padded tensors (points -1)."""
    c, p = (codes, points) if isinstance(points, torch.Tensor) else _padded_paths(codes, points)
    c, p = c.to(input.device).long(), p.to(input.device)
    h, w = input.to(dtype), weight.to(dtype)
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    node, code = p[safe], c[safe]  # [N, L]
    valid = node >= 0
    scores = (w[node.clamp_min(0)] * h[:, None, :]).sum(-1)  # [N, L]
    terms = torch.nn.functional.logsigmoid((1 - 2 * code).to(dtype) * scores)
    loss = -(terms * valid).sum(1)
    return torch.where(keep, loss, torch.zeros_like(loss))


def hierarchical_log_prob_reference(input, weight, codes, points, dtype=torch.float64):
    """log p(c | h) of every class [N, V], each class's path summed separately."""
    V = len(points) if not isinstance(points, torch.Tensor) else points.shape[0]
    every = torch.arange(V, device=input.device).repeat(input.shape[0])
    h = input.repeat_interleave(V, 0)
    loss = hierarchical_softmax_reference(h, weight, every, codes, points, dtype=dtype)
    return -loss.reshape(input.shape[0], V)


# ---------------------------------------------------------------------------------------
# In-batch softmax (two-tower retrieval) and the streaming frequency estimator
# ---------------------------------------------------------------------------------------


def in_batch_softmax_loss(query, item, item_ids=None, log_q=None, temperature=1.0,
                          extra_items=None, extra_ids=None, extra_log_q=None,
                          remove_accidental_hits=True, reduction="mean"):
    """Row by row: the softmax over every kept column j of q_i.c_j / temperature - log_q[j],
    where a column other than i holding the id of row i's positive is dropped."""
    cands = list(item) + ([] if extra_items is None else list(extra_items))
    ids = None if item_ids is None else [int(x) for x in item_ids] + (
        [] if extra_ids is None else [int(x) for x in extra_ids])
    lq = None if log_q is None else list(log_q) + ([] if extra_log_q is None else list(extra_log_q))
    losses = []
    for i, q in enumerate(query):
        scores, positive = [], None
        for j, c in enumerate(cands):
            if remove_accidental_hits and ids is not None and j != i and ids[j] == ids[i]:
                continue
            s = (q * c).sum() / temperature - (0.0 if lq is None else lq[j])
            scores.append(s)
            if j == i:
                positive = s
        losses.append(torch.logsumexp(torch.stack(scores), 0) - positive)
    loss = torch.stack(losses) if losses else query.new_zeros(0)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


class FrequencyEstimatorReference:
    """Yi et al.'s Algorithm 2, one hit at a time: B <- (1-a) B + a (t - A), A <- t,
    frequency 1 / B; with warm_start, a = max(alpha, 1 / hits of the bucket). An id present k
    times in a step makes k hits of gap (t - A) / k each (fastsoftmax's rule for duplicates)."""

    def __init__(self, num_buckets, alpha, warm_start=True):
        self.h, self.alpha, self.warm = num_buckets, alpha, warm_start
        self.A, self.B, self.n, self.t = [0] * num_buckets, [0.0] * num_buckets, [0] * num_buckets, 0

    def update(self, ids):
        self.t += 1
        buckets = [int(x) % self.h for x in ids]
        for b in dict.fromkeys(buckets):  # each bucket once, in order of first appearance
            k = buckets.count(b)
            gap = (self.t - self.A[b]) / k
            for _ in range(k):
                self.n[b] += 1
                a = max(self.alpha, 1.0 / self.n[b]) if self.warm else self.alpha
                self.B[b] = (1 - a) * self.B[b] + a * gap
            self.A[b] = self.t

    def frequency(self, ids):
        out = []
        for x in ids:
            b = int(x) % self.h
            out.append(1.0 / self.B[b] if self.n[b] else 1.0 / max(self.t, 1))
        return np.array(out)


# word2vec: one prediction at a time, in its own file for length.
from reference_word2vec import *  # noqa: E402,F401,F403


# The margin (hinge) losses: tests/reference_margin.py.
from reference_margin import *  # noqa: E402,F401,F403


# The causal-LM loss of transformers: tests/reference_hf.py.
from reference_hf import *  # noqa: E402,F401,F403
