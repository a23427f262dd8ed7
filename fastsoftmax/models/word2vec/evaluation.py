"""Evaluation of ``KeyedVectors``: word-pair similarity (Pearson and Spearman against human
scores) and analogy accuracy, with gensim's file formats, restrict_vocab and case folding."""

from __future__ import annotations

import math

import numpy as np


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz
    method), converging for x < (a + 1) / (a + b + 2)."""
    tiny = 1e-300

    def guard(v):
        return v if abs(v) > tiny else tiny

    c, d = 1.0, 1.0 / guard(1.0 - (a + b) * x / (a + 1.0))
    f = d
    for m in range(1, 1000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 / guard(1.0 + num * d)
            c = guard(1.0 + num / c)
            f *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return f


def incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function (scipy.special.betainc)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def correlation_p_value(r: float, n: int) -> float:
    """Two-sided p-value of a correlation r over n pairs under no correlation: Student's t
    with n - 2 degrees of freedom, P(|T| >= |t|) = I_{1 - r^2}((n - 2) / 2, 1 / 2) (the
    p-value of scipy.stats.pearsonr and spearmanr, which gensim reports)."""
    if math.isnan(r) or n < 2:
        return float("nan")
    if n == 2:
        return 1.0
    return incomplete_beta((n - 2) / 2.0, 0.5, max(0.0, 1.0 - r * r))


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


def evaluate_word_pairs(kv, pairs, delimiter="\t", encoding="utf8", restrict_vocab=300000,
                        case_insensitive=True, dummy4unknown=False):
    """Correlation of cosine similarities with human scores on a file of
    `word1<delimiter>word2<delimiter>score` lines ('#' lines are comments). Pairs with a word
    outside the first `restrict_vocab` words count as OOV: skipped, or (dummy4unknown) scored
    0.0 and kept. Returns gensim's ((pearson, p-value), (spearman, p-value), oov_percent),
    the p-values two-sided (as scipy's, computed here without scipy)."""
    vocab = _restricted(kv, restrict_vocab, case_insensitive)
    u = kv._unit_rows()
    gold, model, oov = [], [], 0
    with open(pairs, encoding=encoding) as f:
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
                if dummy4unknown:
                    gold.append(score)
                    model.append(0.0)
                continue
            gold.append(score)
            model.append(float(np.dot(u[vocab[a]], u[vocab[b]])))
    # gensim's ratio: with dummy4unknown the OOV pairs are among the scored ones
    total = len(gold) if dummy4unknown else len(gold) + oov
    oov_percent = 100.0 * oov / total if total else 0.0
    if len(gold) < 2:
        return (float("nan"), float("nan")), (float("nan"), float("nan")), oov_percent
    g, m = np.array(gold), np.array(model)
    r, rho = pearson(g, m), pearson(rank_average(g), rank_average(m))
    n = len(gold)
    return (r, correlation_p_value(r, n)), (rho, correlation_p_value(rho, n)), oov_percent


def evaluate_word_analogies(kv, analogies, restrict_vocab=300000, case_insensitive=True,
                            dummy4unknown=False, similarity_function="most_similar"):
    """Accuracy on a questions-words.txt file (': section' headers, then `a b c d` lines
    meaning a:b = c:d). The answer is the best word for b - a + c among the first
    `restrict_vocab` words, excluding a, b and c, by 3CosAdd (similarity_function
    'most_similar') or 3CosMul ('most_similar_cosmul'; gensim 4.4.0 accepts the name but
    always uses 3CosAdd). Questions with a word outside them are skipped, or counted as
    incorrect with dummy4unknown. Returns (accuracy, sections) with sections as gensim's: a
    list of {'section', 'correct', 'incorrect'} dicts ending with 'Total accuracy'."""
    if similarity_function not in ("most_similar", "most_similar_cosmul"):
        raise ValueError("similarity_function must be 'most_similar' or "
                         f"'most_similar_cosmul', got {similarity_function!r}")
    cosmul = similarity_function == "most_similar_cosmul"
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
                if dummy4unknown:
                    section["incorrect"].append((a, b, c, expected))
                continue
            ia, ib, ic = vocab[a], vocab[b], vocab[c]
            if cosmul:  # Levy and Goldberg's 3CosMul on cosines shifted to [0, 1]
                pos_b, neg_a, pos_c = ((1.0 + u @ u[i]) / 2.0 for i in (ib, ia, ic))
                dists = pos_b * pos_c / (neg_a + 1e-6)
            else:
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
