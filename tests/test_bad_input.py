"""The bad-input matrix: one table, one row per bad input, covering every public entry point
(samplers, functionals, nn modules, the Word2Vec / KeyedVectors loaders and savers, and the
lm, seq2seq, word2vec and memn2n command lines).

Every row asserts all the guarantees of docs/guarantees.md:
  * a clear error: the exception type and a phrase of its message; for a command line a
    nonzero exit status, the phrase on stderr and no traceback (main() is run in this process:
    an exception escaping it is what would print a traceback, and fails the row);
  * no partial output left: no file appears anywhere in the row's folders (outputs, inputs,
    the working directory), hidden temporaries included;
  * nothing the user had is overwritten: the folders hold sentinel files where the row would
    write (existing.pt, existing.png, existing.txt, existing.json, existing.npz) and every
    file is byte-identical afterwards, the inputs (checkpoints being resumed) included.

Adding a row: append `api(what, entry, call, ErrorType, phrase)` (call receives the Files
object: f["name"] is an input file, f.out / f.unwritable / f.a_file are paths to write to) or
`command(what, prog, argv, phrase, stdin=None)` (argv strings may name {in}, {out},
{unwritable} and {a_file}; prog is a key of COMMANDS, where a new command line's main goes;
stdin is the text the command reads there).
"""

import hashlib
import io
import os
import pickle
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import pytest
import torch

import fastsoftmax as fs
from fastsoftmax.cli import lm as lm_cli
from fastsoftmax.cli import memn2n as mn_cli
from fastsoftmax.cli import seq2seq as s2s_cli
from fastsoftmax.cli import word2vec as w2v_cli
from fastsoftmax.models import KeyedVectors, Word2Vec

COMMANDS = {"fastsoftmax-lm": lm_cli.main, "fastsoftmax-seq2seq": s2s_cli.main,
            "fastsoftmax-word2vec": w2v_cli.main, "fastsoftmax-memn2n": mn_cli.main}
SENTINELS = ("existing.pt", "existing.png", "existing.txt", "existing.json", "existing.npz")


@dataclass
class Row:
    what: str                      # the bad input, in words
    entry: str                     # the API or command it goes to
    error: type                    # exception type (SystemExit for a command line)
    phrase: str                    # a phrase the message must hold
    call: Optional[Callable] = None          # api rows: call(files)
    argv: Optional[Sequence[str]] = None     # command rows
    stdin: Optional[str] = None              # command rows: what they read on stdin

    @property
    def id(self) -> str:
        return f"{self.entry}: {self.what}"


def api(what, entry, call, error, phrase) -> Row:
    return Row(what, entry, error, phrase, call=call)


def command(what, prog, argv, phrase, stdin=None) -> Row:
    return Row(what, prog, SystemExit, phrase, argv=(prog, *argv), stdin=stdin)


def t(*values, dtype=None):
    return torch.tensor(values, dtype=dtype)


H, W, Y = torch.randn(4, 3), torch.randn(10, 3), t(1, 2, 3, 4)  # input [N, D], weight [V, D]
UNI = fs.UnigramSampler(torch.arange(1.0, 11.0))
TREE = fs.ClassTree.huffman(torch.arange(1.0, 11.0))
# lm train options small enough to run in a fraction of a second.
LM = ("--embed-dim", "8", "--hidden-size", "8", "--batch-size", "4", "--bptt", "8",
      "--epochs", "1", "--no-progress")
S2S = ("--epochs", "1", "--hidden-size", "8", "--embed-dim", "8", "--no-progress")
W2V = ("-size", "8", "-iter", "1", "-min-count", "1", "-threads", "1", "-quiet")
MN = ("--train-size", "40", "--test-size", "10", "--epochs", "1", "--embed-dim", "8",
      "--no-progress")

ROWS = [
    # --- samplers --------------------------------------------------------------------------
    api("no weights", "UnigramSampler", lambda f: fs.UnigramSampler([]), ValueError,
        "must not be empty"),
    api("a negative weight", "UnigramSampler", lambda f: fs.UnigramSampler([1.0, -2.0]),
        ValueError, "negative"),
    api("a NaN weight", "UnigramSampler", lambda f: fs.UnigramSampler([1.0, float("nan")]),
        ValueError, "finite"),
    api("all weights zero", "UnigramSampler", lambda f: fs.UnigramSampler([0.0, 0.0]),
        ValueError, "zero"),
    api("2-D weights", "UnigramSampler", lambda f: fs.UnigramSampler(torch.ones(2, 3)),
        ValueError, "1-D"),
    api("text weights", "UnigramSampler", lambda f: fs.UnigramSampler("abc"), TypeError,
        "must be numbers"),
    api("an unknown keyword", "UnigramSampler",
        lambda f: fs.UnigramSampler([1.0, 2.0], temperature=2), TypeError, "temperature"),
    api("zero classes", "LogUniformSampler", lambda f: fs.LogUniformSampler(0), ValueError,
        "num_classes must be positive"),
    api("a float class count", "LogUniformSampler", lambda f: fs.LogUniformSampler(2.5),
        TypeError, "num_classes must be an int"),
    api("a negative class count", "UniformSampler", lambda f: fs.UniformSampler(-3),
        ValueError, "num_classes must be positive"),
    api("an unknown device", "UniformSampler", lambda f: fs.UniformSampler(5, device="gpu9"),
        (ValueError, RuntimeError), "gpu9"),
    api("a negative shape", "Sampler.sample", lambda f: UNI.sample(-1), ValueError,
        "non-negative"),
    api("a float shape", "Sampler.sample", lambda f: UNI.sample(2.5), ValueError,
        "non-negative ints"),
    api("more unique samples than classes", "Sampler.candidates",
        lambda f: UNI.candidates(t(1, 2), 11), ValueError, "11"),
    api("num_sampled 0", "Sampler.candidates", lambda f: UNI.candidates(t(1), 0), ValueError,
        "num_sampled must be positive"),
    api("a true class out of range", "Sampler.candidates",
        lambda f: UNI.candidates(t(1, 10), 3), ValueError, "10"),
    api("float ids", "Sampler.log_prob", lambda f: UNI.log_prob(t(1.0, 2.0)), TypeError,
        "int64"),
    api("an id out of range", "Sampler.log_prob", lambda f: UNI.log_prob(t(3, 12)), ValueError,
        "12"),
    api("a negative id", "Sampler.log_prob", lambda f: UNI.log_prob(t(-1)), ValueError, "-1"),
    # --- functionals -----------------------------------------------------------------------
    api("a 0-d input", "sampled_softmax_loss",
        lambda f: fs.sampled_softmax_loss(H[0, 0], W, Y[0], num_sampled=3), ValueError,
        "input must have at least one dimension"),
    api("one input row, four targets", "sampled_softmax_loss",
        lambda f: fs.sampled_softmax_loss(H[0], W, Y, num_sampled=3), ValueError,
        "target must have shape () or (1,)"),
    api("input and weight of other widths", "sampled_softmax_loss",
        lambda f: fs.sampled_softmax_loss(H, torch.randn(10, 5), Y, num_sampled=3),
        ValueError, "5"),
    api("a target out of range", "sampled_softmax_loss",
        lambda f: fs.sampled_softmax_loss(H, W, t(1, 2, 3, 10), num_sampled=3), ValueError,
        "target"),
    api("a float target", "sampled_softmax_loss",
        lambda f: fs.sampled_softmax_loss(H, W, Y.double(), num_sampled=3), TypeError,
        "target"),
    api("neither num_sampled nor sampled", "sampled_softmax_loss",
        lambda f: fs.sampled_softmax_loss(H, W, Y), ValueError, "num_sampled"),
    api("a sampler over other classes", "sampled_softmax_loss",
        lambda f: fs.sampled_softmax_loss(H, W, Y, num_sampled=3,
                                          sampler=fs.UniformSampler(7)), ValueError, "7"),
    api("an unknown reduction", "sampled_softmax_loss",
        lambda f: fs.sampled_softmax_loss(H, W, Y, num_sampled=3, reduction="avg"), ValueError,
        "avg"),
    api("a bias of the wrong length", "sampled_softmax_loss",
        lambda f: fs.sampled_softmax_loss(H, W, Y, linear_bias=torch.zeros(9),
                                          num_sampled=3), ValueError,
        "bias"),
    api("input and weight of other dtypes", "sampled_softmax_loss",
        lambda f: fs.sampled_softmax_loss(H.double(), W, Y, num_sampled=3), (TypeError,
                                                                              ValueError),
        "dtype"),
    api("num_true not matching the target", "sampled_softmax_loss",
        lambda f: fs.sampled_softmax_loss(H, W, Y, num_sampled=3, num_true=2), ValueError,
        "target must have shape (4, 2)"),
    api("an unknown keyword", "nce_loss",
        lambda f: fs.nce_loss(H, W, Y, num_sampled=3, temperature=1.0), TypeError,
        "temperature"),
    api("num_sampled negative", "nce_loss", lambda f: fs.nce_loss(H, W, Y, num_sampled=-2),
        ValueError, "num_sampled"),
    api("a target with a row too many", "nce_loss",
        lambda f: fs.nce_loss(H, W, t(1, 2, 3, 4, 5), num_sampled=3), ValueError, "target"),
    api("neither num_negatives nor negatives", "negative_sampling_loss",
        lambda f: fs.negative_sampling_loss(H, W, Y), ValueError, "num_negatives"),
    api("negatives of the wrong shape", "negative_sampling_loss",
        lambda f: fs.negative_sampling_loss(H, W, Y, negatives=torch.zeros(3, 2, dtype=torch.long)),
        ValueError, "negatives must have shape"),
    api("float negatives", "negative_sampling_loss",
        lambda f: fs.negative_sampling_loss(H, W, Y, negatives=torch.zeros(4, 2)), TypeError,
        "negatives"),
    api("a negative id out of range", "negative_sampling_loss",
        lambda f: fs.negative_sampling_loss(H, W, Y, negatives=t(1, 99)), ValueError, "99"),
    api("weight with V rows, not V - 1", "hierarchical_softmax_loss",
        lambda f: fs.hierarchical_softmax_loss(H, W, Y, TREE), ValueError, "9"),
    api("a target out of range", "hierarchical_softmax_loss",
        lambda f: fs.hierarchical_softmax_loss(H, W[:9], t(0, 1, 2, 10), TREE), ValueError,
        "target"),
    api("from_vectors of one class", "ClassTree.from_vectors",
        lambda f: fs.ClassTree.from_vectors(torch.randn(1, 4)), ValueError, "V >= 2"),
    api("from_vectors with a NaN vector", "ClassTree.from_vectors",
        lambda f: fs.ClassTree.from_vectors(t(0.0, float("nan"), 1.0, 2.0).view(2, 2)),
        ValueError, "must be finite"),
    api("from_vectors of integer vectors", "ClassTree.from_vectors",
        lambda f: fs.ClassTree.from_vectors(torch.ones(3, 2, dtype=torch.int64)), TypeError,
        "floating point"),
    api("a tree that is not a ClassTree", "hierarchical_softmax_loss",
        lambda f: fs.hierarchical_softmax_loss(H, W[:9], Y, [[0, 1]]), TypeError, "ClassTree"),
    api("query and item of other shapes", "in_batch_softmax_loss",
        lambda f: fs.in_batch_softmax_loss(H, torch.randn(3, 3)), ValueError, "item"),
    api("temperature 0", "in_batch_softmax_loss",
        lambda f: fs.in_batch_softmax_loss(H, H, temperature=0.0), ValueError, "temperature"),
    api("log_q of the wrong length", "in_batch_softmax_loss",
        lambda f: fs.in_batch_softmax_loss(H, H, log_q=torch.zeros(3)), ValueError, "log_q"),
    api("extra_ids without extra_items", "in_batch_softmax_loss",
        lambda f: fs.in_batch_softmax_loss(H, H, item_ids=Y, extra_ids=t(1, 2)), ValueError,
        "extra"),
    # --- nn modules ------------------------------------------------------------------------
    api("zero input features", "FullSoftmaxLoss", lambda f: fs.FullSoftmaxLoss(0, 10),
        ValueError, "in_features"),
    api("num_sampled 0", "SampledSoftmaxLoss", lambda f: fs.SampledSoftmaxLoss(3, 10, 0),
        ValueError, "num_sampled"),
    api("an unknown sampler name", "NCELoss",
        lambda f: fs.NCELoss(3, 10, 4, sampler="zipfian"), ValueError, "zipfian"),
    api("a negative sample count", "NegativeSamplingLoss",
        lambda f: fs.NegativeSamplingLoss(3, 10, -1), ValueError, "-1"),
    api("one class", "HierarchicalSoftmaxLoss", lambda f: fs.HierarchicalSoftmaxLoss(3, 1),
        ValueError, "num_classes"),
    api("input of the wrong width", "SampledSoftmaxLoss.forward",
        lambda f: fs.SampledSoftmaxLoss(5, 10, 3)(H, Y), ValueError, "5"),
    api("an unknown head", "make_head", lambda f: fs.make_head("bogus", 3, 10), ValueError,
        "bogus"),
    api("temperature 0", "InBatchSoftmaxLoss", lambda f: fs.InBatchSoftmaxLoss(0.0),
        ValueError, "temperature"),
    # --- vector files and saved models -----------------------------------------------------
    api("truncated text vectors", "KeyedVectors.load_word2vec_format",
        lambda f: KeyedVectors.load_word2vec_format(f["truncated.txt"]), ValueError,
        "file ends after 2 of the 3 words"),
    api("a header that is not 'V D'", "KeyedVectors.load_word2vec_format",
        lambda f: KeyedVectors.load_word2vec_format(f["no_header.txt"]), ValueError,
        "expected a header"),
    api("a vector of the wrong dimension", "KeyedVectors.load_word2vec_format",
        lambda f: KeyedVectors.load_word2vec_format(f["wrong_dim.txt"]), ValueError,
        "line 3: expected a word and 2 numbers"),
    api("a word that is not UTF-8", "KeyedVectors.load_word2vec_format",
        lambda f: KeyedVectors.load_word2vec_format(f["latin1.txt"]), ValueError,
        "not utf8"),
    api("a value that is not a number", "KeyedVectors.load_word2vec_format",
        lambda f: KeyedVectors.load_word2vec_format(f["nan_text.txt"]), ValueError,
        "not a number"),
    api("truncated binary vectors", "KeyedVectors.load_word2vec_format",
        lambda f: KeyedVectors.load_word2vec_format(f["truncated.bin"], binary=True),
        ValueError, "truncated"),
    api("a binary word that is not UTF-8", "KeyedVectors.load_word2vec_format",
        lambda f: KeyedVectors.load_word2vec_format(f["latin1.bin"], binary=True), ValueError,
        "not utf8"),
    api("a missing file", "KeyedVectors.load_word2vec_format",
        lambda f: KeyedVectors.load_word2vec_format(f["missing.txt"]), FileNotFoundError,
        "missing.txt"),
    api("a key with a space (no overwrite)", "KeyedVectors.save_word2vec_format",
        lambda f: _vectors(["a b", "c"]).save_word2vec_format(f.out("existing.txt")),
        ValueError, "without spaces"),
    api("a folder where the file goes", "KeyedVectors.save",
        lambda f: _vectors(["a", "b"]).save(f.out()), IsADirectoryError, "is a directory"),
    api("a file where the folder goes", "KeyedVectors.save_word2vec_format",
        lambda f: _vectors(["a", "b"]).save_word2vec_format(f.a_file("v.txt")), OSError,
        "cannot write /"),
    api("a missing folder", "Word2Vec.save",
        lambda f: Word2Vec([["a", "b"]], vector_size=2, min_count=1, epochs=1,
                           workers=1).save(f.out("no/such/folder/m.npz")), FileNotFoundError,
        "cannot write"),
    api("a pickle", "KeyedVectors.load", lambda f: KeyedVectors.load(f["pickle.npz"]),
        ValueError, "is a Python pickle: fastsoftmax never unpickles"),
    api("an .npz holding an object array", "KeyedVectors.load",
        lambda f: KeyedVectors.load(f["object_array.npz"]), ValueError, "allow_pickle=False"),
    api("another program's .npz", "KeyedVectors.load",
        lambda f: KeyedVectors.load(f["foreign.npz"]), ValueError, "no 'meta' entry"),
    api("KeyedVectors", "Word2Vec.load", lambda f: Word2Vec.load(f["kv.npz"]), ValueError,
        "holds a 'KeyedVectors'"),
    api("a truncated model", "Word2Vec.load", lambda f: Word2Vec.load(f["truncated.npz"]),
        ValueError, "truncated.npz cannot be read as a model saved by fastsoftmax"),
    api("a text file", "Word2Vec.load", lambda f: Word2Vec.load(f["vectors.txt"]), ValueError,
        "vectors.txt is not an .npz file"),
    api("a pickle", "Word2Vec.load", lambda f: Word2Vec.load(f["pickle.npz"]), ValueError,
        "is a Python pickle: fastsoftmax never unpickles"),
    api("a missing file", "Word2Vec.load", lambda f: Word2Vec.load(f["none.npz"]),
        FileNotFoundError, "none.npz"),
    api("an unknown keyword", "Word2Vec", lambda f: Word2Vec(vector_dim=10), TypeError,
        "vector_dim"),
    api("sentences and corpus_file both", "Word2Vec",
        lambda f: Word2Vec([["a"]], corpus_file=f["corpus.txt"]), TypeError, "not both"),
    api("a model with no vocabulary (no file)", "Word2Vec.save",
        lambda f: Word2Vec(vector_size=4).save(f.out("existing.npz")), RuntimeError,
        "nothing to save"),
    # --- fastsoftmax-lm --------------------------------------------------------------------
    command("a missing --data folder", "fastsoftmax-lm",
            ["train", "--data", "{in}/nowhere", *LM], "nowhere"),
    command("empty data files", "fastsoftmax-lm", ["train", "--data", "{in}/empty_corpus", *LM],
            "empty"),
    command("a corpus that is not UTF-8", "fastsoftmax-lm",
            ["train", "--data", "{in}/latin1_corpus", *LM], "not utf-8 text"),
    command("no --data", "fastsoftmax-lm", ["train", *LM], "training needs --data"),
    command("an unknown --encoding", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--encoding", "klingon", *LM], "klingon"),
    command("a missing --resume file", "fastsoftmax-lm",
            ["train", "--resume", "{in}/none.pt", *LM], "no such checkpoint"),
    command("--resume of a seq2seq checkpoint", "fastsoftmax-lm",
            ["train", "--resume", "{in}/s2s.pt", *LM], "it holds a seq2seq model"),
    command("--resume of a truncated checkpoint", "fastsoftmax-lm",
            ["train", "--resume", "{in}/truncated.pt", *LM], "cannot be read"),
    # A checkpoint whose pickle would create {in}/marker when loaded: refused unread, and
    # the matrix's no-new-file rule checks that the marker never appears.
    command("--resume of a checkpoint whose pickle runs code", "fastsoftmax-lm",
            ["train", "--resume", "{in}/runs_code.pt", *LM],
            "runs_code.pt is refused: it holds a Python object no fastsoftmax checkpoint "
            "holds (io.open), and loading it could run code"),
    command("--resume of a text file", "fastsoftmax-lm",
            ["train", "--resume", "{in}/vectors.txt", *LM], "cannot be read"),
    command("--resume of another program's torch file", "fastsoftmax-lm",
            ["train", "--resume", "{in}/foreign.pt", *LM],
            "is not a fastsoftmax language-model checkpoint"),
    command("--resume with a conflicting --hidden-size", "fastsoftmax-lm",
            ["train", "--resume", "{in}/lm.pt", "--hidden-size", "16"], "--hidden-size 16"),
    command("an existing --checkpoint", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--checkpoint", "{out}/existing.pt", *LM],
            "already exists"),
    command("an existing --plot", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--plot", "{out}/existing.png", *LM],
            "already exists"),
    command("a --checkpoint that is a folder", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--checkpoint", "{out}", *LM],
            "is a directory; give a file name"),
    command("a --checkpoint below a file", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--checkpoint", "{a_file}/run.pt", *LM],
            "corpus.txt is not a folder"),
    command("an unwritable --checkpoint folder", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--checkpoint", "{unwritable}/run.pt", *LM],
            "cannot write"),
    command("an unwritable --plot folder", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--plot", "{unwritable}/ppl.png", *LM],
            "cannot write"),
    command("an unknown --device", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--device", "tpu", *LM], "'tpu' is not a device"),
    command("--save-every -1", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--save-every", "-1", *LM],
            "must be a non-negative integer"),
    command("--epochs 0", "fastsoftmax-lm", ["train", "--data", "{in}/corpus", "--epochs", "0"],
            "must be a positive integer"),
    command("--hs-tree context without --output hs", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--hs-tree", "context", *LM],
            "needs output 'hs'"),
    command("--hs-tree features without --hs-tree-model", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--output", "hs", "--hs-tree", "features", *LM],
            "--hs-tree-model goes with --hs-tree features"),
    command("a missing --hs-tree-model", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--output", "hs", "--hs-tree", "features",
             "--hs-tree-model", "{in}/none.pt", *LM], "no such checkpoint"),
    command("--hs-tree-model of a seq2seq checkpoint", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--output", "hs", "--hs-tree", "features",
             "--hs-tree-model", "{in}/s2s.pt", *LM], "it holds a seq2seq model"),
    command("an unknown --output", "fastsoftmax-lm",
            ["train", "--data", "{in}/corpus", "--output", "softer"], "invalid choice"),
    command("eval of a seq2seq checkpoint", "fastsoftmax-lm",
            ["eval", "--checkpoint", "{in}/s2s.pt", "--data", "{in}/corpus"],
            "it holds a seq2seq model"),
    command("eval on a missing folder", "fastsoftmax-lm",
            ["eval", "--checkpoint", "{in}/lm.pt", "--data", "{in}/nowhere"], "nowhere"),
    command("generate from a truncated checkpoint", "fastsoftmax-lm",
            ["generate", "--checkpoint", "{in}/truncated.pt"], "cannot be read"),
    command("compare with an existing --plot", "fastsoftmax-lm",
            ["compare", "{in}/lm.pt", "--plot", "{out}/existing.png"], "already exists"),
    command("compare with an existing --json", "fastsoftmax-lm",
            ["compare", "{in}/lm.pt", "--json", "{out}/existing.json"], "already exists"),
    command("compare with more --labels than runs", "fastsoftmax-lm",
            ["compare", "{in}/lm.pt", "--labels", "a", "b"], "--labels has 2 names for 1 runs"),
    command("compare with an unwritable --json (and a --plot)", "fastsoftmax-lm",
            ["compare", "{in}/lm.pt", "--plot", "{out}/new.png", "--json",
             "{unwritable}/runs.json"], "cannot write"),
    command("compare of a seq2seq checkpoint", "fastsoftmax-lm",
            ["compare", "{in}/s2s.pt"], "it holds a seq2seq model"),
    # --- fastsoftmax-seq2seq ---------------------------------------------------------------
    command("a missing --data file", "fastsoftmax-seq2seq",
            ["train", "--data", "{in}/none.tsv", *S2S], "none.tsv"),
    command("an empty --data file", "fastsoftmax-seq2seq",
            ["train", "--data", "{in}/empty.txt", *S2S], "no usable pairs"),
    command("lines without a TAB", "fastsoftmax-seq2seq",
            ["train", "--data", "{in}/vectors.txt", *S2S], "no TAB"),
    command("a --data file that is not UTF-8", "fastsoftmax-seq2seq",
            ["train", "--data", "{in}/latin1_pairs.tsv", *S2S], "not utf-8"),
    command("--resume of a language-model checkpoint", "fastsoftmax-seq2seq",
            ["train", "--resume", "{in}/lm.pt", *S2S], "it holds a language-model model"),
    command("--resume of a truncated checkpoint", "fastsoftmax-seq2seq",
            ["train", "--resume", "{in}/truncated.pt", *S2S], "cannot be read"),
    command("--resume with a conflicting --hidden-size", "fastsoftmax-seq2seq",
            ["train", "--resume", "{in}/s2s.pt", "--hidden-size", "16"], "--hidden-size 16"),
    command("an existing --checkpoint", "fastsoftmax-seq2seq",
            ["train", "--data", "{in}/pairs.tsv", "--checkpoint", "{out}/existing.pt", *S2S],
            "already exists"),
    command("an existing --heatmap", "fastsoftmax-seq2seq",
            ["train", "--data", "{in}/pairs.tsv", "--checkpoint", "{out}/new.pt",
             "--heatmap", "{out}/existing.png", *S2S], "already exists"),
    command("an unwritable --checkpoint folder", "fastsoftmax-seq2seq",
            ["train", "--data", "{in}/pairs.tsv", "--checkpoint", "{unwritable}/run.pt", *S2S],
            "cannot write"),
    command("an unwritable --heatmap folder", "fastsoftmax-seq2seq",
            ["train", "--data", "{in}/pairs.tsv", "--checkpoint", "{out}/new.pt",
             "--heatmap", "{unwritable}/h.png", *S2S], "cannot write"),
    command("--valid-fraction 1.5", "fastsoftmax-seq2seq",
            ["train", "--data", "{in}/pairs.tsv", "--valid-fraction", "1.5", *S2S],
            "valid_fraction"),
    command("an unknown --attention", "fastsoftmax-seq2seq",
            ["train", "--data", "{in}/pairs.tsv", "--attention", "bilinear"], "invalid choice"),
    command("translate with a checkpoint whose pickle runs code", "fastsoftmax-seq2seq",
            ["translate", "--checkpoint", "{in}/runs_code.pt"], "loading it could run code"),
    command("translate with a language-model checkpoint", "fastsoftmax-seq2seq",
            ["translate", "--checkpoint", "{in}/lm.pt"], "it holds a language-model model"),
    command("eval of a text file", "fastsoftmax-seq2seq",
            ["eval", "--checkpoint", "{in}/vectors.txt"], "cannot be read"),
    command("eval with a missing --data file", "fastsoftmax-seq2seq",
            ["eval", "--checkpoint", "{in}/s2s.pt", "--data", "{in}/none.tsv"], "none.tsv"),
    command("eval with an existing --heatmap", "fastsoftmax-seq2seq",
            ["eval", "--checkpoint", "{in}/s2s.pt", "--heatmap", "{out}/existing.png"],
            "already exists"),
    command("--attention-mode hard without a score", "fastsoftmax-seq2seq",
            ["train", "--data", "{in}/pairs.tsv", "--attention", "none", "--attention-mode",
             "hard", "--checkpoint", "{out}/new.pt", *S2S], "hard attention"),
    command("a negative --entropy-bonus", "fastsoftmax-seq2seq",
            ["train", "--data", "{in}/pairs.tsv", "--attention-mode", "hard",
             "--entropy-bonus", "-1", "--checkpoint", "{out}/new.pt", *S2S], "entropy"),
    command("--resume switching to --attention-mode hard", "fastsoftmax-seq2seq",
            ["train", "--resume", "{in}/s2s.pt", "--attention-mode", "hard"],
            "--attention-mode hard"),
    # --- fastsoftmax-memn2n ----------------------------------------------------------------
    command("an unknown --task", "fastsoftmax-memn2n", ["train", "--task", "five", *MN],
            "invalid choice"),
    command("a negative --distractors", "fastsoftmax-memn2n",
            ["train", "--distractors", "-1", "--checkpoint", "{out}/new.pt", *MN],
            "distractors must be"),
    command("a negative --support-weight", "fastsoftmax-memn2n",
            ["train", "--support-weight", "-1", "--checkpoint", "{out}/new.pt", *MN],
            "support_weight must be"),
    command("--lr nan", "fastsoftmax-memn2n",
            ["train", "--lr", "nan", "--checkpoint", "{out}/new.pt", *MN], "lr must be"),
    command("an existing --checkpoint", "fastsoftmax-memn2n",
            ["train", "--checkpoint", "{out}/existing.pt", *MN], "already exists"),
    command("an existing --plot", "fastsoftmax-memn2n",
            ["train", "--checkpoint", "{out}/new.pt", "--plot", "{out}/existing.png", *MN],
            "already exists"),
    command("an unwritable --checkpoint folder", "fastsoftmax-memn2n",
            ["train", "--checkpoint", "{unwritable}/run.pt", *MN], "cannot write"),
    command("--resume with a conflicting --hops", "fastsoftmax-memn2n",
            ["train", "--resume", "{in}/memn2n.pt", "--hops", "2", *MN], "--hops 2"),
    command("--resume of a language-model checkpoint", "fastsoftmax-memn2n",
            ["train", "--resume", "{in}/lm.pt", *MN], "memory-network"),
    command("eval of a checkpoint whose pickle runs code", "fastsoftmax-memn2n",
            ["eval", "--checkpoint", "{in}/runs_code.pt"], "loading it could run code"),
    command("eval of a text file", "fastsoftmax-memn2n",
            ["eval", "--checkpoint", "{in}/vectors.txt"], "cannot be read"),
    command("eval of a missing checkpoint", "fastsoftmax-memn2n",
            ["eval", "--checkpoint", "{in}/none.pt"], "no such checkpoint"),
    command("eval with an existing --plot", "fastsoftmax-memn2n",
            ["eval", "--checkpoint", "{in}/memn2n.pt", "--plot", "{out}/existing.png"],
            "already exists"),
    command("eval on --device tpu", "fastsoftmax-memn2n",
            ["eval", "--checkpoint", "{in}/memn2n.pt", "--device", "tpu"], "not a device"),
    command("answer with empty stdin", "fastsoftmax-memn2n",
            ["answer", "--checkpoint", "{in}/memn2n.pt"], "stdin is empty", stdin=""),
    command("answer with unknown words", "fastsoftmax-memn2n",
            ["answer", "--checkpoint", "{in}/memn2n.pt"], "does not know",
            stdin="Mary went to the moonbase.\nWhere is Mary?\n"),
    # --- fastsoftmax-word2vec --------------------------------------------------------------
    command("a missing -train file", "fastsoftmax-word2vec",
            ["-train", "{in}/none.txt", "-output", "{out}/v.txt", *W2V], "does not exist"),
    command("an empty -train file", "fastsoftmax-word2vec",
            ["-train", "{in}/empty.txt", "-output", "{out}/v.txt", *W2V], "empty"),
    command("a -train file that is not UTF-8", "fastsoftmax-word2vec",
            ["-train", "{in}/latin1_corpus/train.txt", "-output", "{out}/v.txt", *W2V],
            "-decode-errors replace"),
    command("a -train folder", "fastsoftmax-word2vec",
            ["-train", "{in}/corpus", "-output", "{out}/v.txt", *W2V], "is a directory"),
    command("an existing -output", "fastsoftmax-word2vec",
            ["-train", "{in}/corpus.txt", "-output", "{out}/existing.txt", *W2V],
            "already exists"),
    command("an existing -save-vocab", "fastsoftmax-word2vec",
            ["-train", "{in}/corpus.txt", "-output", "{out}/v.txt", "-save-vocab",
             "{out}/existing.txt", *W2V], "already exists"),
    command("an -output folder", "fastsoftmax-word2vec",
            ["-train", "{in}/corpus.txt", "-output", "{out}", *W2V], "is a directory"),
    command("an -output below a file", "fastsoftmax-word2vec",
            ["-train", "{in}/corpus.txt", "-output", "{a_file}/v.txt", *W2V], "does not exist"),
    command("an unwritable -output folder", "fastsoftmax-word2vec",
            ["-train", "{in}/corpus.txt", "-output", "{unwritable}/v.txt", *W2V],
            "cannot be written"),
    command("a missing -eval-pairs file", "fastsoftmax-word2vec",
            ["-train", "{in}/corpus.txt", "-output", "{out}/v.txt", "-eval-pairs",
             "{in}/none.tsv", *W2V], "does not exist"),
    command("-size 0", "fastsoftmax-word2vec",
            ["-train", "{in}/corpus.txt", "-output", "{out}/v.txt", *W2V, "-size", "0"],
            "-size must be > 0"),
    command("an unknown -encoding", "fastsoftmax-word2vec",
            ["-train", "{in}/corpus.txt", "-output", "{out}/v.txt", "-encoding", "klingon",
             *W2V], "klingon"),
    command("-min-count above every count", "fastsoftmax-word2vec",
            ["-train", "{in}/corpus.txt", "-output", "{out}/v.txt", *W2V, "-min-count", "9999"],
            "min"),
    command("-cbow 2", "fastsoftmax-word2vec",
            ["-train", "{in}/corpus.txt", "-output", "{out}/v.txt", "-cbow", "2"],
            "invalid choice"),
]
if not torch.cuda.is_available():
    ROWS.append(command("--device cuda without CUDA", "fastsoftmax-lm",
                        ["train", "--data", "{in}/corpus", "--device", "cuda", *LM],
                        "CUDA is not available"))
    ROWS.append(command("--device cuda without CUDA", "fastsoftmax-seq2seq",
                        ["eval", "--checkpoint", "{in}/s2s.pt", "--device", "cuda"],
                        "CUDA is not available"))
    ROWS.append(command("-device cuda without CUDA", "fastsoftmax-word2vec",
                        ["-train", "{in}/corpus.txt", "-output", "{out}/v.txt", "-device",
                         "cuda", *W2V], "CUDA is not available"))


# ---------------------------------------------------------------------------------------
# The files the rows read and write
# ---------------------------------------------------------------------------------------
def _vectors(keys):
    kv = KeyedVectors(2, len(keys))
    kv.index_to_key = list(keys)
    kv.key_to_index = {k: i for i, k in enumerate(keys)}
    kv.vectors[:] = np.arange(2 * len(keys), dtype=np.float32).reshape(-1, 2)
    return kv


def _unwritable_folder(base: str) -> Optional[str]:
    """A folder this process cannot create files in: a read-only one, or, for root (who may
    write anywhere), /sys, whose file system takes no new files."""
    folder = os.path.join(base, "read-only")
    os.makedirs(folder, exist_ok=True)
    os.chmod(folder, 0o555)
    for candidate in (folder, "/sys"):
        try:
            tempfile.NamedTemporaryFile(dir=candidate).close()
        except OSError:
            return candidate
    return None


class Files:
    def __init__(self, inputs: str, out: str, unwritable: Optional[str]):
        self.inputs, self.out_dir, self.unwritable_dir = inputs, out, unwritable

    def __getitem__(self, name: str) -> str:
        return os.path.join(self.inputs, name)

    def out(self, name: str = "") -> str:
        return os.path.join(self.out_dir, name) if name else self.out_dir

    def a_file(self, name: str) -> str:
        return os.path.join(self.inputs, "corpus.txt", name)

    def format(self, arg: str) -> str:
        if "{unwritable}" in arg and self.unwritable_dir is None:
            pytest.skip("no folder this process cannot write to")
        return arg.format(**{"in": self.inputs, "out": self.out_dir,
                             "unwritable": self.unwritable_dir,
                             "a_file": os.path.join(self.inputs, "corpus.txt")})


class RunsCode:
    """Unpickled, it calls open(path, "w"): a file appears where none should."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf8"))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    torch.set_num_threads(1)
    root = str(tmp_path_factory.mktemp("inputs"))
    words = [f"w{i}" for i in range(12)]
    sentences = [" ".join(words[(i + j) % 12] for j in range(6)) for i in range(60)]
    for split in ("train", "valid", "test"):
        _write(f"{root}/corpus/{split}.txt", "\n".join(sentences) + "\n")
        _write(f"{root}/empty_corpus/{split}.txt", "")
        _write(f"{root}/latin1_corpus/{split}.txt", "w1 w2\nw3 caf\xe9 w4\n".encode("latin-1"))
    _write(f"{root}/corpus.txt", "\n".join(sentences) + "\n")
    _write(f"{root}/empty.txt", "")
    pairs = [f"{a} {b}\t{b} {a}" for a in words[:4] for b in words[:4]] * 3
    _write(f"{root}/pairs.tsv", "\n".join(pairs) + "\n")
    _write(f"{root}/latin1_pairs.tsv", "caf\xe9\tw1\n".encode("latin-1"))
    # vector files: a good one and one damaged in each way a loader must name
    _write(f"{root}/vectors.txt", "3 2\na 1 2\nb 3 4\nc 5 6\n")
    _write(f"{root}/truncated.txt", "3 2\na 1 2\nb 3 4\n")
    _write(f"{root}/no_header.txt", "vectors of my model\na 1 2\n")
    _write(f"{root}/wrong_dim.txt", "3 2\na 1 2\nb 3\nc 5 6\n")
    _write(f"{root}/latin1.txt", "2 2\na 1 2\n".encode() + "caf\xe9 3 4\n".encode("latin-1"))
    _write(f"{root}/nan_text.txt", "2 2\na 1 2\nb x 4\n")
    binary = io.BytesIO()
    binary.write(b"2 2\n")
    for word, row in ((b"a", [1.0, 2.0]), ("caf\xe9".encode("latin-1"), [3.0, 4.0])):
        binary.write(word + b" " + np.array(row, dtype="<f4").tobytes() + b"\n")
    _write(f"{root}/latin1.bin", binary.getvalue())
    _vectors(["a", "b", "c"]).save_word2vec_format(f"{root}/good.bin", binary=True)
    with open(f"{root}/good.bin", "rb") as f:
        _write(f"{root}/truncated.bin", f.read()[:-7])
    _vectors(["a", "b"]).save(f"{root}/kv.npz")
    model = Word2Vec([s.split() for s in sentences], vector_size=4, min_count=1, epochs=1,
                     workers=1)
    model.save(f"{root}/w2v.npz")
    with open(f"{root}/w2v.npz", "rb") as f:
        _write(f"{root}/truncated.npz", f.read()[:300])
    with open(f"{root}/pickle.npz", "wb") as f:
        pickle.dump({"vectors": np.zeros((2, 2))}, f)
    with open(f"{root}/foreign.npz", "wb") as f:
        np.savez(f, weights=np.zeros((2, 2)))
    with open(f"{root}/object_array.npz", "wb") as f:
        np.savez(f, meta=np.array([{"class": "KeyedVectors"}], dtype=object))
    # checkpoints: one of each kind, a truncated one, another program's torch file
    assert lm_cli.main(["train", "--data", f"{root}/corpus", "--checkpoint", f"{root}/lm.pt",
                        *LM]) == 0
    assert s2s_cli.main(["train", "--data", f"{root}/pairs.tsv", "--checkpoint",
                         f"{root}/s2s.pt", *S2S]) == 0
    assert mn_cli.main(["train", "--checkpoint", f"{root}/memn2n.pt", *MN]) == 0
    with open(f"{root}/lm.pt", "rb") as f:
        _write(f"{root}/truncated.pt", f.read()[:2000])
    torch.save({"state_dict": {"w": torch.zeros(2)}}, f"{root}/foreign.pt")
    with open(f"{root}/lm.pt", "rb") as f:  # a real checkpoint, plus an object that runs code
        state = torch.load(f, weights_only=True)
    torch.save(dict(state, extra=RunsCode(f"{root}/marker")), f"{root}/runs_code.pt")
    unwritable = _unwritable_folder(str(tmp_path_factory.mktemp("locked")))
    yield root, unwritable
    if unwritable and unwritable != "/sys":
        os.chmod(unwritable, 0o755)


def snapshot(*folders) -> dict:
    """Every file under the folders (hidden ones included): path -> digest of its bytes."""
    out = {}
    for folder in folders:
        for base, _, names in os.walk(folder):
            for name in names:
                path = os.path.join(base, name)
                with open(path, "rb") as f:
                    out[path] = hashlib.sha256(f.read()).hexdigest()
    return out


def run_command(argv, capsys) -> str:
    """stderr of the command line `argv`, which must fail with a nonzero status."""
    prog, *args = argv
    capsys.readouterr()
    try:
        code = COMMANDS[prog](list(args))
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    except BaseException as exc:  # what a console script would print as a traceback
        pytest.fail(f"{prog} {' '.join(args)} raised {type(exc).__name__}: {exc} (a traceback "
                    f"for the user)")
    err = capsys.readouterr().err
    assert code not in (0, None), f"{prog} {' '.join(args)} exited with status {code}"
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input(row, inputs, tmp_path, monkeypatch, capsys):
    root, unwritable = inputs
    out = str(tmp_path / "out")
    os.makedirs(out)
    for name in SENTINELS:
        _write(os.path.join(out, name), f"the user's own {name}: must survive\n")
    files = Files(root, out, unwritable)
    monkeypatch.chdir(out)  # where a default checkpoint name would land
    before = snapshot(root, out)
    if row.stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(row.stdin))
    if row.argv is not None:
        argv = [files.format(a) for a in row.argv]
        message = run_command(argv, capsys)
    else:
        with pytest.raises(row.error) as info:
            row.call(files)
        message = str(info.value)
    assert row.phrase in message, f"{row.phrase!r} not in the message: {message!r}"
    assert snapshot(root, out) == before, "a file was written, changed or left behind"
    if unwritable == "/sys":
        assert not any(n.endswith((".pt", ".png", ".json", ".txt", ".tmp"))
                       for n in os.listdir("/sys"))


def test_the_table_covers_every_public_entry_point():
    entries = {r.entry.split(".")[0] for r in ROWS}
    public = {"UnigramSampler", "LogUniformSampler", "UniformSampler", "Sampler",
              "sampled_softmax_loss", "nce_loss", "negative_sampling_loss",
              "hierarchical_softmax_loss", "in_batch_softmax_loss", "FullSoftmaxLoss",
              "SampledSoftmaxLoss", "NCELoss", "NegativeSamplingLoss",
              "HierarchicalSoftmaxLoss", "InBatchSoftmaxLoss", "make_head", "KeyedVectors",
              "Word2Vec", *COMMANDS}
    assert public <= entries, sorted(public - entries)
    assert len({r.id for r in ROWS}) == len(ROWS), "two rows share a description"

