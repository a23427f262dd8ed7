"""The plain reference of fastsoftmax::word2vec_train, re-exported by tests/reference.py."""

import math

import numpy as np

from reference import draw_reference, philox4x32_10

# A plain, one-prediction-at-a-time definition of fastsoftmax::word2vec_train with one
# worker: the same Philox counters (csrc/common/word2vec.h), the same order of updates, in
# float64. Slow; for corpora of a few hundred tokens.

W2V_STREAM_TOKEN, W2V_STREAM_NEGATIVE = 2, 3


def _philox_words(stream: int, seed: int, index: int):
    w = philox4x32_10(np.array([index & 0xFFFFFFFF], dtype=np.uint64),
                      np.array([index >> 32], dtype=np.uint64), stream, seed)
    return [int(x[0]) for x in w]


def w2v_token_draws(seed: int, t: int, window: int, shrink: bool):
    """(subsampling coin in [0, 1), effective half-window in 1..window) of global token t."""
    w0, w1, w2, w3 = _philox_words(W2V_STREAM_TOKEN, seed, t)
    coin = ((w0 << 21) | (w1 >> 11)) * (1.0 / 9007199254740992.0)
    reduce = (((w2 << 32) | w3) * window) >> 64
    return coin, (window - reduce) if shrink else window


def w2v_negatives(seed: int, first: int, count: int, prob, alias) -> np.ndarray:
    return draw_reference(0, seed, W2V_STREAM_NEGATIVE, first, count, len(prob), prob, alias)


def w2v_learning_rate(alpha, min_alpha, words_before, total_words):
    progress = words_before / total_words if total_words > 0 else 0.0
    return max(min_alpha, alpha - (alpha - min_alpha) * progress)


def _sigmoid(f):
    return 1.0 / (1.0 + math.exp(-f))


def _logistic_unit(h, row, label, lr, grad_h):
    """One logistic SGD step: h should score `row` (updated in place) as label; adds the
    update for h to grad_h and returns the loss. A score outside (-6, 6) updates nothing
    (gensim, word2vec_inner.pyx, and word2vec.c's hierarchical softmax skip it); its loss
    still counts."""
    f = float(h @ row)
    loss = -math.log(_sigmoid(f if label else -f))
    if abs(f) < 6.0:
        g = (label - _sigmoid(f)) * lr
        grad_h += g * row
        row += g * h
    return loss


def _w2v_step(h, center, negatives, syn1, lr, hs=None):
    """One prediction of `center` at hidden vector h, word2vec.c's order: with hs = (syn1_hs,
    codes, points) first the center's Huffman path, root first (inner node points[c][j]
    should score 1 - codes[c][j]), then with syn1 the center (label 1) and each negative
    (label 0; one equal to the center is skipped). Updates the tables in place, returns the
    update for h and the loss."""
    grad_h, loss = np.zeros_like(h), 0.0
    if hs is not None:
        syn1_hs, codes, points = hs
        for code, point in zip(codes[center], points[center]):
            loss += _logistic_unit(h, syn1_hs[point], 1.0 - code, lr, grad_h)
    if syn1 is None:
        return grad_h, loss
    for target, label in [(center, 1.0)] + [(int(n), 0.0) for n in negatives]:
        if label == 0.0 and target == center:
            continue
        loss += _logistic_unit(h, syn1[target], label, lr, grad_h)
    return grad_h, loss


def _contexts_and_negatives(kept, i, gid, win, *, seed, sg, window, negative, prob, alias):
    """Centre i's context positions in its sentence's kept ids, and the negatives of each of
    its predictions (skip-gram: one list per context; CBOW: one list)."""
    ctx = [j for j in range(max(0, i - win), min(len(kept), i + win + 1)) if j != i]
    predictions = len(ctx) if sg else 1
    first = gid * 2 * window * negative if sg else gid * negative
    draws = w2v_negatives(seed, first, predictions * negative, prob, alias) \
        if negative and ctx else []
    return ctx, [draws[p * negative:(p + 1) * negative] for p in range(predictions)]


def _lock(lockf, word: int) -> float:
    """gensim's vectors_lockf factor on word's input-vector update."""
    return 1.0 if lockf is None or len(lockf) == 0 else float(lockf[word % len(lockf)])


def w2v_train_reference(syn0, syn1neg, sentences, words_before, keep_prob, prob, alias, *,
                        seed, first_token, sg, cbow_mean, window, negative, shrink, alpha,
                        min_alpha, total_words, syn1_hs=None, codes=None, points=None,
                        lockf=None):
    """Returns (syn0, syn1neg, loss, examples, kept) after training `sentences` (lists of ids)
    in order, and syn1_hs last with hierarchical softmax. syn0/syn1neg: float64 numpy [V, D]
    (copied; syn1neg None when negative = 0). Hierarchical softmax: syn1_hs [V - 1, D] with
    each word's codes and points (lists, root first, word2vec.c's)."""
    syn0 = syn0.astype(np.float64).copy()
    syn1 = None if negative == 0 else syn1neg.astype(np.float64).copy()
    hs = None if syn1_hs is None else (syn1_hs.astype(np.float64).copy(), codes, points)
    centres = _kept_stream(sentences, words_before, keep_prob, seed, first_token, window,
                           shrink)
    loss, examples = 0.0, 0
    for kept, i, gid, win, before in centres:
        lr = w2v_learning_rate(alpha, min_alpha, before, total_words)
        center = kept[i]
        ctx, negs = _contexts_and_negatives(kept, i, gid, win, seed=seed, sg=sg, window=window,
                                            negative=negative, prob=prob, alias=alias)
        if not ctx:
            continue
        if sg:
            for c, j in enumerate(ctx):
                grad_h, step_loss = _w2v_step(syn0[kept[j]], center, negs[c], syn1, lr, hs)
                loss += step_loss
                syn0[kept[j]] += _lock(lockf, kept[j]) * grad_h
                examples += 1
        else:
            h = sum(syn0[kept[j]] for j in ctx)
            if cbow_mean:
                h = h / len(ctx)
            grad_h, step_loss = _w2v_step(h, center, negs[0], syn1, lr, hs)
            loss += step_loss
            if not cbow_mean:
                grad_h /= len(ctx)
            for j in ctx:
                syn0[kept[j]] += _lock(lockf, kept[j]) * grad_h
            examples += 1
    kept_total = len(centres)
    if hs is not None:
        return syn0, syn1, loss, examples, kept_total, hs[0]
    return syn0, syn1, loss, examples, kept_total


def _kept_sentences(sentences, words_before, keep_prob, seed, first_token, window, shrink):
    """Each sentence of a batch after subsampling, as the op subsamples: (kept ids, their
    global token counters, their half-windows, words_before of the sentence)."""
    out, t = [], first_token
    for sentence, before in zip(sentences, words_before):
        kept, ids, wins = [], [], []
        for w in sentence:
            coin, b = w2v_token_draws(seed, t, window, shrink)
            if coin < float(keep_prob[w]):
                kept.append(w)
                ids.append(t)
                wins.append(b)
            t += 1
        out.append((kept, ids, wins, before))
    return out


def _kept_stream(sentences, words_before, keep_prob, seed, first_token, window, shrink):
    """The centres of a batch in order: (kept ids of its sentence, position, global token
    counter, half-window, words_before of its sentence), subsampled as the op does."""
    return [(kept, i, ids[i], wins[i], before) for kept, ids, wins, before in
            _kept_sentences(sentences, words_before, keep_prob, seed, first_token, window,
                            shrink) for i in range(len(kept))]


def w2v_batched_reference(syn0, syn1neg, sentences, words_before, keep_prob, prob, alias, *,
                          group, seed, first_token, sg, cbow_mean, window, negative, shrink,
                          alpha, min_alpha, total_words, lockf=None):
    """fastsoftmax::word2vec_train_batched in float64: each sentence's kept centres in groups
    of `group`; the group's K negatives are draws t * K .. t * K + K - 1 of the negative
    stream, t the first centre's token counter; every prediction of a group (skip-gram: each
    context row against its centre; CBOW: each centre's mean or sum of contexts) scores the
    tables as they were when the group began, and the group's updates are applied at its end.
    Returns (syn0, syn1neg, loss, examples, kept) as w2v_train_reference."""
    syn0 = syn0.astype(np.float64).copy()
    syn1 = syn1neg.astype(np.float64).copy()
    loss, examples, kept_total = 0.0, 0, 0
    for kept, ids, wins, before in _kept_sentences(sentences, words_before, keep_prob, seed,
                                                   first_token, window, shrink):
        kept_total += len(kept)
        lr = w2v_learning_rate(alpha, min_alpha, before, total_words)
        for c0 in range(0, len(kept) if len(kept) > 1 else 0, group):
            negs = [int(n) for n in w2v_negatives(seed, ids[c0] * negative, negative, prob,
                                                  alias)]
            predictions = []  # (input vector, centre word, input rows, factor on their update)
            for i in range(c0, min(c0 + group, len(kept))):
                ctx = [j for j in range(max(0, i - wins[i]), min(len(kept), i + wins[i] + 1))
                       if j != i]
                if sg:
                    predictions += [(syn0[kept[j]].copy(), kept[i], [kept[j]], 1.0)
                                    for j in ctx]
                elif ctx:
                    h = sum(syn0[kept[j]] for j in ctx)
                    predictions.append((h / len(ctx) if cbow_mean else h, kept[i],
                                        [kept[j] for j in ctx], 1.0 if cbow_mean else
                                        1.0 / len(ctx)))
            out_updates, in_updates = {}, []
            for h, centre, rows, factor in predictions:
                grad_h = np.zeros_like(h)
                for word, label in [(centre, 1.0)] + [(n, 0.0) for n in negs if n != centre]:
                    f = float(h @ syn1[word])
                    loss += -math.log(_sigmoid(f if label else -f))
                    if abs(f) < 6.0:
                        g = (label - _sigmoid(f)) * lr
                        grad_h += g * syn1[word]
                        out_updates[word] = out_updates.get(word, 0.0) + g * h
                in_updates.append((rows, factor * grad_h))
            for rows, update in in_updates:
                for w in rows:
                    syn0[w] += _lock(lockf, w) * update
            for word, update in out_updates.items():
                syn1[word] += update
            examples += len(predictions)
    return syn0, syn1, loss, examples, kept_total


ROUND_STIFFNESS = 0.025  # csrc/common/word2vec_math.h kRoundStiffness


def w2v_rounds_reference(syn0, syn1neg, sentences, words_before, keep_prob, prob, alias, *,
                         round_size, seed, first_token, sg, cbow_mean, window, negative, shrink,
                         alpha, min_alpha, total_words, syn1_hs=None, codes=None, points=None,
                         lockf=None):
    """fastsoftmax::word2vec_train with round_size > 0 (lockstep rounds, word2vec_math.h), in
    float64: the centres of the batch, in order, in rounds of round_size; every prediction
    of a round reads the tables as they were when it began; at its end each row moves by
    (1 - e^-L) / L times the sum of its updates, L = ROUND_STIFFNESS * sum of alpha |x|^2 over
    them (x: the input for an output row, each output row for an input). Returns what
    w2v_train_reference returns."""
    tables = {"syn0": syn0.astype(np.float64).copy()}
    if negative:
        tables["neg"] = syn1neg.astype(np.float64).copy()
    if syn1_hs is not None:
        tables["hs"] = syn1_hs.astype(np.float64).copy()
    centres = _kept_stream(sentences, words_before, keep_prob, seed, first_token, window,
                           shrink)
    loss, examples = 0.0, 0
    for first in range(0, len(centres), round_size):
        deltas = {}  # (table, row) -> [summed update, summed bound]

        def add(table, row, update, bound):
            entry = deltas.setdefault((table, row), [0.0, 0.0])
            entry[0] = entry[0] + update
            entry[1] += bound

        def unit(h, table, row, label, lr, grad_h):
            out = tables[table][row]
            f = float(h @ out)
            step_loss = -math.log(_sigmoid(f if label else -f))
            if abs(f) >= 6.0:
                return step_loss, 0.0
            g = (label - _sigmoid(f)) * lr
            grad_h += g * out
            add(table, row, g * h, ROUND_STIFFNESS * lr * float(h @ h))
            return step_loss, ROUND_STIFFNESS * lr * float(out @ out)

        def predict(h, center, negs, lr):
            grad_h, total_loss, bound = np.zeros_like(h), 0.0, 0.0
            steps = []
            if syn1_hs is not None:
                steps += [("hs", p, 1.0 - c) for c, p in zip(codes[center], points[center])]
            if negative:
                steps += [("neg", center, 1.0)] + [("neg", int(n), 0.0) for n in negs
                                                   if int(n) != center]
            for table, row, label in steps:
                step_loss, b = unit(h, table, row, label, lr, grad_h)
                total_loss += step_loss
                bound += b
            return grad_h, total_loss, bound

        for kept, i, gid, win, before in centres[first:first + round_size]:
            lr = w2v_learning_rate(alpha, min_alpha, before, total_words)
            ctx, negs = _contexts_and_negatives(kept, i, gid, win, seed=seed, sg=sg,
                                                window=window, negative=negative, prob=prob,
                                                alias=alias)
            if not ctx:
                continue
            if sg:
                for c, j in enumerate(ctx):
                    grad_h, step_loss, bound = predict(tables["syn0"][kept[j]], kept[i],
                                                       negs[c], lr)
                    loss += step_loss
                    add("syn0", kept[j], _lock(lockf, kept[j]) * grad_h, bound)
                    examples += 1
            else:
                h = sum(tables["syn0"][kept[j]] for j in ctx)
                if cbow_mean:
                    h = h / len(ctx)
                grad_h, step_loss, bound = predict(h, kept[i], negs[0], lr)
                loss += step_loss
                scale = 1.0 if cbow_mean else 1.0 / len(ctx)
                for j in ctx:
                    add("syn0", kept[j], scale * _lock(lockf, kept[j]) * grad_h,
                        bound / len(ctx))
                examples += 1
        for (table, row), (update, bound) in deltas.items():
            damping = -math.expm1(-bound) / bound if bound > 0 else 1.0
            tables[table][row] += damping * update
    out = (tables["syn0"], tables.get("neg"), loss, examples, len(centres))
    return out + (tables["hs"],) if syn1_hs is not None else out


def corpus_encode_reference(text: bytes, words: list, max_sentence_words: int):
    """fastsoftmax::corpus_encode in plain Python: (token ids, sentence ends, raw words per
    sentence, offset of the first byte that is not UTF-8 or -1), from LineSentence's reading
    (lines split at b"\\n", decoded strictly, str.split(), long lines cut, an empty line one
    empty sentence). On a bad byte, the sentences of the lines before its line."""
    index = {}
    for i, w in enumerate(words):
        index.setdefault(w, i)
    tokens, ends, raw = [], [], []
    start = 0
    for line in _lines(text):
        try:
            split = line.decode("utf-8").split()
        except UnicodeDecodeError as exc:
            return tokens, ends, raw, start + exc.start
        for first in range(0, max(len(split), 1), max_sentence_words):
            piece = split[first:first + max_sentence_words]
            tokens += [index[w] for w in piece if w in index]
            ends.append(len(tokens))
            raw.append(len(piece))
        start += len(line)
    return tokens, ends, raw, -1


def _lines(text: bytes):
    """Lines ending at b"\\n" only (bytes.splitlines also splits at b"\\r")."""
    parts = text.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    return lines + ([parts[-1]] if parts[-1] else [])


def corpus_count_reference(text: bytes, max_sentence_words: int):
    """fastsoftmax::corpus_count in plain Python: ({word: count} in first-seen order,
    sentences, raw words, offset of the first byte that is not UTF-8 or -1), read as
    corpus_encode_reference reads. With a bad byte only its offset is defined."""
    counts, sentences, words, start = {}, 0, 0, 0
    for line in _lines(text):
        try:
            split = line.decode("utf-8").split()
        except UnicodeDecodeError as exc:
            return None, None, None, start + exc.start
        for w in split:
            counts[w] = counts.get(w, 0) + 1
        sentences += max(1, -(-len(split) // max_sentence_words))
        words += len(split)
        start += len(line)
    return counts, sentences, words, -1
