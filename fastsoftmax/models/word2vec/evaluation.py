"""Evaluation of ``KeyedVectors``: word-pair similarity (Pearson and Spearman against human
scores) and analogy accuracy, with gensim's file formats, restrict_vocab and case folding."""

from __future__ import annotations

import math

import numpy as np




def rank_average(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank (as scipy.stats.rankdata)."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    starts = np.flatnonzero(np.concatenate(([True], xs[1:] != xs[:-1])))
    ends = np.concatenate((starts[1:], [len(x)]))
    ranks = np.empty(len(x), dtype=np.float64)
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e - 1) / 2.0 + 1.0
    return ranks


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    a = a - a.mean()
    b = b - b.mean()
    den = math.sqrt(float((a * a).sum()) * float((b * b).sum()))
    return float((a * b).sum() / den) if den > 0 else float("nan")


def _restricted(kv, restrict_vocab: int, case_insensitive: bool) -> dict:
    """key -> index over the first restrict_vocab keys; upper-cased keys map to the most
    frequent spelling when case_insensitive (gensim's rule)."""
    keys = [str(k) for k in kv.index_to_key[:restrict_vocab]]
    if case_insensitive:
        return {k.upper(): i for i, k in reversed(list(enumerate(keys)))}
    return {k: i for i, k in enumerate(keys)}


def evaluate_word_pairs(kv, pairs, delimiter="\t", restrict_vocab=300000,
                        case_insensitive=True):
    """Correlation of cosine similarities with human scores on a file of
    `word1<delimiter>word2<delimiter>score` lines ('#' lines are comments). Pairs with a word
    outside the first `restrict_vocab` words are skipped and counted as OOV. Returns
    (pearson, spearman, oov_percent) as floats (gensim adds p-values; no scipy needed here)."""
    vocab = _restricted(kv, restrict_vocab, case_insensitive)
    u = kv._unit_rows()
    gold, model, oov = [], [], 0
    with open(pairs, encoding="utf8") as f:
        for line_no, line in enumerate(f, 1):
            if line.startswith("#") or not line.strip():
                continue
            fields = line.rstrip("\n").split(delimiter)
            if len(fields) != 3:
                raise ValueError(f"{pairs}, line {line_no}: expected 3 fields separated by "
                                 f"{delimiter!r}, got {len(fields)}: {line.rstrip()!r}")
            a, b = fields[0].strip(), fields[1].strip()
            try:
                score = float(fields[2])
            except ValueError:
                raise ValueError(f"{pairs}, line {line_no}: score {fields[2].strip()!r} is "
                                 "not a number") from None
            if case_insensitive:
                a, b = a.upper(), b.upper()
            if a not in vocab or b not in vocab:
                oov += 1
                continue
            gold.append(score)
            model.append(float(np.dot(u[vocab[a]], u[vocab[b]])))
    total = len(gold) + oov
    oov_percent = 100.0 * oov / total if total else 0.0
    if len(gold) < 2:
        return float("nan"), float("nan"), oov_percent
    g, m = np.array(gold), np.array(model)
    return pearson(g, m), pearson(rank_average(g), rank_average(m)), oov_percent


def evaluate_word_analogies(kv, analogies, restrict_vocab=300000, case_insensitive=True):
    """Accuracy on a questions-words.txt file (': section' headers, then `a b c d` lines
    meaning a:b = c:d). The answer is the best 3CosAdd word for b - a + c among the first
    `restrict_vocab` words, excluding a, b and c; questions with a word outside them are
    skipped. Returns (accuracy, sections) with sections as gensim's: a list of
    {'section', 'correct', 'incorrect'} dicts ending with 'Total accuracy'."""
    vocab = _restricted(kv, restrict_vocab, case_insensitive)
    u = kv._unit_rows()[:restrict_vocab]
    sections, section = [], None
    with open(analogies, encoding="utf8") as f:
        for line_no, line in enumerate(f, 1):
            if line.startswith(": "):
                if section is not None:
                    sections.append(section)
                section = {"section": line[2:].strip(), "correct": [], "incorrect": []}
                continue
            if not line.strip():
                continue
            if section is None:
                raise ValueError(f"{analogies}, line {line_no}: question before any "
                                 "': section' header")
            words = line.upper().split() if case_insensitive else line.split()
            if len(words) != 4:
                raise ValueError(f"{analogies}, line {line_no}: expected 4 words, got "
                                 f"{len(words)}: {line.rstrip()!r}")
            a, b, c, expected = words
            if any(w not in vocab for w in words):
                continue
            ia, ib, ic = vocab[a], vocab[b], vocab[c]
            query = u[ib] - u[ia] + u[ic]
            dists = u @ (query / max(np.linalg.norm(query), 1e-30))
            dists[[ia, ib, ic]] = -np.inf
            # The best word that is not a question word; with case_insensitive a different
            # spelling of a question word does not count either (gensim).
            guess = None
            k = min(64, len(dists))
            top = np.argpartition(-dists, k - 1)[:k]
            for best in top[np.argsort(-dists[top], kind="stable")].tolist():
                guess = str(kv.index_to_key[best])
                guess = guess.upper() if case_insensitive else guess
                if guess not in (a, b, c):
                    break
            (section["correct"] if guess == expected else section["incorrect"]).append(
                (a, b, c, expected))
    if section is not None:
        sections.append(section)
    total = {"section": "Total accuracy",
             "correct": [q for s in sections for q in s["correct"]],
             "incorrect": [q for s in sections for q in s["incorrect"]]}
    sections.append(total)
    n = len(total["correct"]) + len(total["incorrect"])
    return (len(total["correct"]) / n if n else 0.0), sections
