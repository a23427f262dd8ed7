"""gensim 4 methods of ``Word2Vec`` kept out of model.py: the vocabulary scan alone
(scan_vocab), starting over from another model's vocabulary (reset_from) and the prediction
of the center word (predict_output_word)."""

from __future__ import annotations

import logging

import numpy as np
import torch

from . import data
from .errors import MissingWeightsError
from .keyedvectors import KeyedVectors

logger = logging.getLogger(__name__)


def scan_vocab(model, corpus_iterable, corpus_file, progress_per, trim_rule):
    if trim_rule is not None:  # gensim applies it only while pruning to max_vocab_size
        raise TypeError("Word2Vec: scan_vocab(trim_rule=...) is not supported: pass trim_rule "
                        "to build_vocab")
    corpus = data.corpus_of(corpus_iterable, corpus_file, passes=1)
    counts, sentences, words = data.scan(corpus, model.max_vocab_size, progress_per, logger)
    model.raw_vocab, model.corpus_count, model.corpus_total_words = counts, sentences, words
    return words, sentences


def vocab_report(model, update, trim_rule, min_count, sample) -> dict:
    """gensim's prepare_vocab report on model.raw_vocab under the settings _prepare_vocab
    applies: words dropped, retained words and their total count, and what subsampling would
    leave (words it downsamples, expected retained tokens)."""
    counts = model.raw_vocab
    if update or min_count is None:
        min_count = model.min_count
    if update or sample is None:
        sample = model.sample
    mc = data.effective_min_count(counts, int(min_count), model.max_final_vocab)
    kept = np.array([c for w, c in counts.items() if data.keep_word(w, c, mc, trim_rule)],
                    dtype=np.int64)
    keep = data.keep_probabilities(kept, int(kept.sum()), float(sample))
    return {"drop_unique": len(counts) - len(kept), "retain_total": int(kept.sum()),
            "downsample_unique": int((keep < 1).sum()),
            "downsample_total": int((keep.astype(np.float64) * kept).sum()),
            "num_retained_words": len(kept)}


def reset_from(model, other) -> None:
    keys = list(other.wv.index_to_key)
    model.wv = KeyedVectors(model.vector_size, len(keys))
    model.wv.index_to_key, model.wv.key_to_index = keys, dict(other.wv.key_to_index)
    model.wv.counts = other.wv.counts.copy()
    model._keep_np = other._keep_np.copy()
    model.corpus_count, model.corpus_total_words = other.corpus_count, other.corpus_total_words
    model.huffman = other.huffman
    model._syn0 = torch.from_numpy(model._initial_vectors(len(keys))).to(model.device)
    model._syn1neg = torch.zeros_like(model._syn0) if model.negative else None
    model._syn1 = model._syn0.new_zeros(len(keys) - 1, model.vector_size) if model.hs else None
    model._sync_vectors()
    model._tables()


def untrainable_reason(model) -> str:
    """Why a model without training state cannot train or predict, for the error message."""
    if len(model.wv):
        return ("this model has no training state: its wv was replaced by vectors alone "
                "(e.g. from load_word2vec_format), which carry no output weights; call "
                "build_vocab on a corpus, or load a model saved by Word2Vec.save")
    return "build the vocabulary first (build_vocab) before train"


def predict_output_word(model, context_words_list, topn):
    if not model.negative:
        raise RuntimeError("predict_output_word needs negative sampling (negative > 0), as "
                           "in gensim; this model was trained with hs=1 and negative=0")
    if model._syn1neg is None:
        raise MissingWeightsError(
            "predict_output_word needs the output weights (syn1neg): "
            + untrainable_reason(model))
    idx = [model.wv.get_index(w) for w in context_words_list if w in model.wv]
    if not idx:
        logger.warning("All the input context words are out-of-vocabulary for the current "
                       "model.")
        return None
    h = model.wv.vectors[idx].sum(axis=0)
    if model.cbow_mean:
        h = h / len(idx)
    scores = model.syn1neg @ h
    p = np.exp(scores - scores.max())
    p /= p.sum()
    top = np.argsort(-p, kind="stable")[:topn]
    return [(model.wv.index_to_key[i], float(p[i])) for i in top]


def estimate_memory(model, vocab_size, report) -> dict:
    v = vocab_size or len(model.wv)
    report = dict(report or {})
    report["vocab"] = v * (700 if model.hs else 500)  # gensim's allowance (codes, points)
    report["vectors"] = v * model.vector_size * 4
    if model.hs:
        report["syn1"] = v * model.layer1_size * 4
    if model.negative:
        report["syn1neg"] = v * model.layer1_size * 4
    report["total"] = sum(report.values())
    logger.info("estimated required memory for %i words and %i dimensions: %i bytes", v,
                model.vector_size, report["total"])
    return report


# settings copied as they are by from_gensim (hashfxn is not: fastsoftmax takes only hash)
_GENSIM_SETTINGS = ("vector_size", "window", "min_count", "sg", "hs", "negative",
                    "ns_exponent", "cbow_mean", "sample", "alpha", "min_alpha", "epochs",
                    "seed", "workers", "max_vocab_size", "max_final_vocab", "null_word",
                    "sorted_vocab", "batch_words", "compute_loss", "comment", "shrink_windows")


def from_gensim(cls, g, device):
    """A fastsoftmax Word2Vec holding gensim's trained state (see Word2Vec.from_gensim)."""
    if not len(g.wv) or (g.negative and not hasattr(g, "syn1neg")) or (
            g.hs and not hasattr(g, "syn1")):
        raise ValueError("from_gensim needs a gensim Word2Vec with a vocabulary and weights "
                         "(after build_vocab)")
    model = cls(**{k: getattr(g, k) for k in _GENSIM_SETTINGS}, device=device)
    model.wv = KeyedVectors.from_gensim(g.wv)
    for attr in ("corpus_count", "corpus_total_words", "effective_min_count",
                 "running_training_loss", "min_alpha_yet_reached"):
        setattr(model, attr, getattr(g, attr))
    model.raw_vocab = dict(g.raw_vocab)
    counts = model.wv.counts
    sample_int = model.wv.expandos.pop("sample_int", None)  # kept as _keep_np here
    if sample_int is not None:  # gensim's keep probability, scaled to 2**32 - 1
        model._keep_np = (sample_int / (2.0 ** 32 - 1)).astype(np.float32)
    else:
        model._keep_np = data.keep_probabilities(counts, int(counts.sum()), model.sample)
    model._syn0 = torch.from_numpy(model.wv.vectors).to(device)
    model._syn1neg = (torch.from_numpy(np.array(g.syn1neg, dtype=np.float32)).to(device)
                      if model.negative else None)
    model._syn1 = None
    if model.hs:  # gensim's syn1 is [V, D]; rows of the V - 1 inner nodes, the last unused
        model._syn1 = torch.from_numpy(np.array(g.syn1[:-1], dtype=np.float32)).to(device)
    model._sync_vectors()
    model._tables()
    if model.hs:  # rebuilt from the counts: must be the tree gensim trained syn1 on
        for key in model.wv.index_to_key:
            for attr in ("code", "point"):
                if not np.array_equal(model.wv.get_vecattr(key, attr),
                                      g.wv.get_vecattr(key, attr)):
                    raise ValueError(f"from_gensim: gensim's Huffman tree differs from the "
                                     f"one rebuilt from the counts ({attr} of {key!r}); "
                                     "its syn1 cannot be used")
    return model


def update_vocab(model, counts: dict, min_count: int, trim_rule) -> None:
    """gensim's online update: retained words of the new corpus that are new are appended;
    all counts grow by the new counts; keep probabilities are recomputed for the words of
    the new corpus (from its counts), new rows get fresh vectors, old rows keep theirs."""
    logger.info("Updating model with new vocabulary")
    kv, old_v = model.wv, len(model.wv)
    retained = [w for w, c in counts.items() if data.keep_word(w, c, min_count, trim_rule)]
    new = [w for w in retained if w not in kv.key_to_index]
    for w in new:
        kv.key_to_index[w] = len(kv.index_to_key)
        kv.index_to_key.append(w)
    total = np.concatenate((kv.counts, np.zeros(len(new), dtype=np.int64)))
    rows = np.array([kv.key_to_index[w] for w in retained], dtype=np.int64)
    added = np.array([counts[w] for w in retained], dtype=np.int64)
    total[rows] += added
    kv.counts = total
    keep = np.concatenate((model._keep_np, np.ones(len(new), dtype=np.float32)))
    keep[rows] = data.keep_probabilities(added, int(added.sum()), model.sample)
    model._keep_np = keep
    logger.info("added %i new unique words (%i pre-existing updated)", len(new),
                len(retained) - len(new))
    logger.info("updating layer weights")
    fresh = torch.from_numpy(model._initial_vectors(len(kv))[old_v:]).to(model.device)
    model._syn0 = torch.cat((model._syn0, fresh))
    if model._syn1neg is not None:
        model._syn1neg = torch.cat((model._syn1neg, torch.zeros_like(fresh)))
    if model._syn1 is not None:  # one inner node per new word; the tree is rebuilt
        model._syn1 = torch.cat((model._syn1, torch.zeros_like(fresh)))
