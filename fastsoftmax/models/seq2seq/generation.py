"""Decoding with a trained seq2seq model: scores of held-out pairs (exact cross entropy,
exact match, corpus BLEU), translation of raw lines, attention heatmaps."""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence

import torch

from ...atomic import atomic_path
from ..vocabulary import Vocabulary
from .data import EOS, Batch, decode_output, detokenize, tokenize
from .model import Seq2Seq


def corpus_bleu(
    hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]], max_n: int = 4
) -> float:
    """Corpus BLEU (Papineni et al. 2002) in percent, one reference per sentence: geometric mean
    of clipped n-gram precisions for n = 1..max_n, counts summed over the corpus before dividing,
    times the brevity penalty exp(1 - r/c) when the hypotheses are shorter than the references.
    No smoothing: a corpus with no matching max_n-gram scores 0."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    match = [0] * max_n
    total = [0] * max_n
    hyp_len = ref_len = 0
    for hyp, ref in zip(hypotheses, references):
        hyp_len += len(hyp)
        ref_len += len(ref)
        for n in range(1, max_n + 1):
            h = Counter(tuple(hyp[i : i + n]) for i in range(len(hyp) - n + 1))
            r = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
            match[n - 1] += sum(min(c, r[g]) for g, c in h.items())
            total[n - 1] += max(len(hyp) - n + 1, 0)
    if hyp_len == 0 or min(match) == 0:
        return 0.0
    log_p = sum(math.log(m / t) for m, t in zip(match, total)) / max_n
    bp = 1.0 if hyp_len > ref_len else math.exp(1.0 - ref_len / hyp_len)
    return 100.0 * bp * math.exp(log_p)


@torch.no_grad()
def evaluate(model: Seq2Seq, pairs: Sequence[tuple[str, str]], examples, task: str,
             tgt_vocab: Vocabulary, *, beam_size: int = 1, alpha: float = 1.0,
             batch_size: int = 256, max_len: int | None = None, device="cpu") -> dict:
    """Exact cross entropy per target token, exact-match accuracy of decoded outputs (token
    sequences equal) and corpus BLEU (word tasks). Batches keep data order, so hyps[i] answers
    pairs[i]."""
    was_training = model.training
    model.eval()
    loss_sum, tokens = 0.0, 0
    hyps: list[list[str]] = []
    refs = [tokenize(t, task) for _, t in pairs]
    if max_len is None:
        max_len = max(len(r) for r in refs) * 2 + 5
    for i in range(0, len(examples), batch_size):
        b = Batch(examples[i : i + batch_size]).to(device)
        n = int((b.tgt_out != 0).sum())
        loss_sum += float(model(b.src, b.src_len, b.tgt_in, b.tgt_out)) * n
        tokens += n
        out = model.decode(b.src, b.src_len, beam_size=beam_size, max_len=max_len, alpha=alpha)
        hyps += [decode_output(tgt_vocab, row.tolist()) for row in out]
    model.train(was_training)
    exact = sum(h == r for h, r in zip(hyps, refs)) / max(len(refs), 1)
    res = {"loss": loss_sum / max(tokens, 1), "exact": 100.0 * exact, "hyps": hyps}
    if task == "pairs":
        res["bleu"] = corpus_bleu(hyps, refs)
    return res


def translate_lines(
    model: Seq2Seq,
    lines: Sequence[str],
    task: str,
    src_vocab: Vocabulary,
    tgt_vocab: Vocabulary,
    *,
    beam_size: int = 1,
    alpha: float = 1.0,
    max_len: int = 100,
    batch_size: int = 64,
    device="cpu",
) -> tuple[list[str], list[tuple[int, str]]]:
    """Translates every line; returns (one output per input line, [(line number, what is
    wrong)] for the lines that could not be translated, whose output is empty)."""
    model.eval()
    outputs = [""] * len(lines)
    bad = []
    todo = []
    for n, line in enumerate(lines, 1):
        toks = tokenize(line.strip() if task == "chars" else line, task)
        if not toks:
            bad.append((n, "empty line"))
        else:
            todo.append((n - 1, src_vocab.encode(toks)))
    for i in range(0, len(todo), batch_size):
        chunk = todo[i : i + batch_size]
        b = Batch([(ids, []) for _, ids in chunk]).to(device)
        rows = model.decode(b.src, b.src_len, beam_size=beam_size, max_len=max_len, alpha=alpha)
        for (index, _), row in zip(chunk, rows):
            outputs[index] = detokenize(decode_output(tgt_vocab, row.tolist()), task)
    return outputs, bad


def save_heatmap(
    model: Seq2Seq,
    source: str,
    task: str,
    src_vocab: Vocabulary,
    tgt_vocab: Vocabulary,
    path: str,
    max_len: int | None = None,
    device="cpu",
) -> str:
    """Greedy-decodes `source` and draws its attention weights (rows: output tokens, columns:
    source tokens) to a PNG. Returns the decoded output."""
    if model.attention is None:
        raise ValueError("a heatmap needs a model with attention")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model.eval()
    src_toks = tokenize(source, task)
    b = Batch([(src_vocab.encode(src_toks), [])]).to(device)
    if max_len is None:
        max_len = 2 * len(src_toks) + 10
    tokens, _, attn = model.greedy(b.src, b.src_len, max_len)
    row = tokens[0].tolist()
    n_out = row.index(EOS) + 1 if EOS in row else len(row)
    # Rows name every emitted token, <eos> included, so they line up with the weights.
    out_toks = [tgt_vocab.itos[i] for i in row[:n_out]]
    weights = attn[0, :n_out].cpu().numpy()
    fig, ax = plt.subplots(
        figsize=(max(4, 0.35 * len(src_toks) + 1.5), max(3, 0.35 * len(out_toks) + 1.5))
    )
    ax.imshow(weights, cmap="gray_r", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(src_toks)))
    ax.set_xticklabels([t if t != " " else "␣" for t in src_toks], rotation=90)
    ax.set_yticks(range(len(out_toks)))
    ax.set_yticklabels(out_toks)
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    ax.set_title(f"attention of {detokenize(src_toks, task)!r}")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_path(path) as tmp:  # the format from path's extension, not the temporary's
        fig.savefig(tmp, dpi=120, format=os.path.splitext(path)[1][1:] or None)
    plt.close(fig)
    return detokenize(decode_output(tgt_vocab, row), task)
