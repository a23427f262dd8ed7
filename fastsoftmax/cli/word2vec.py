"""Command line with word2vec.c's flags:

    python -m fastsoftmax.cli.word2vec -train corpus.txt -output vectors.bin -cbow 0 \\
        -size 100 -window 5 -negative 5 -sample 1e-3 -iter 5 -threads 2 -binary 1

    python -m fastsoftmax.cli.word2vec -train corpus.txt -output vectors.bin -cbow 0 \
        -hs 1 -negative 0          # hierarchical softmax instead of negative sampling

(installed as ``fastsoftmax-word2vec``). The corpus is a whitespace-tokenised text file, one
sentence per line, streamed. Besides word2vec.c's flags: -device (cpu, cuda), -round-size
(the update order: auto, 0 for word2vec.c's sequential order, or centres a lockstep round;
the device's own by default), -seed,
-encoding and -decode-errors (how the corpus bytes are read), -eval-pairs FILE (word-similarity
pairs, tab-separated), -eval-analogies FILE (questions-words.txt format), -force, -verbose
(gensim-style progress logs) and -quiet (no progress bar). As in word2vec.c the default
learning rate is 0.05 for CBOW and 0.025 for skip-gram, decaying to 1e-4 of it.

Every check that can fail (output writable and not already there, input files, settings,
device) runs before training; an error is one line on stderr and exit status 2.
"""

import argparse
import logging
import os
import sys
import tempfile
import time

from ..atomic import atomic_write
from ..models.textfiles import CorpusDecodeError, LineSentence
from ..models.word2vec import Word2Vec


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fastsoftmax-word2vec",
        description="Train word2vec (skip-gram or CBOW with negative sampling and/or "
                    "hierarchical softmax) on a text file.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("-train", required=True, metavar="FILE", help="training corpus (text)")
    p.add_argument("-output", required=True, metavar="FILE", help="where to write the vectors")
    p.add_argument("-force", action="store_true",
                   help="replace -output (and -save-vocab) if they exist")
    p.add_argument("-size", type=int, default=100, help="vector size")
    p.add_argument("-window", type=int, default=5, help="max skip length")
    p.add_argument("-sample", type=float, default=1e-3, help="subsampling threshold")
    p.add_argument("-hs", type=int, default=0, choices=(0, 1),
                   help="1: hierarchical softmax (Huffman tree of the word counts)")
    p.add_argument("-negative", type=int, default=5,
                   help="negative samples (0: none, allowed with -hs 1)")
    p.add_argument("-threads", type=int, default=os.cpu_count() or 1, help="worker threads")
    p.add_argument("-iter", type=int, default=5, help="training epochs")
    p.add_argument("-min-count", dest="min_count", type=int, default=5,
                   help="discard words rarer than this")
    p.add_argument("-alpha", type=float, default=None,
                   help="starting learning rate (default 0.025 skip-gram, 0.05 CBOW)")
    p.add_argument("-cbow", type=int, default=1, choices=(0, 1), help="1 CBOW, 0 skip-gram")
    p.add_argument("-binary", type=int, default=0, choices=(0, 1), help="1: binary output")
    p.add_argument("-save-vocab", dest="save_vocab", metavar="FILE",
                   help="write the vocabulary as 'word count' lines")
    p.add_argument("-seed", type=int, default=1, help="random seed")
    p.add_argument("-device", default="cpu", help="cpu or cuda")
    p.add_argument("-round-size", dest="round_size", default=None,
                   help="update order: auto (lockstep rounds sized to the run, CUDA's "
                        "default), 0 (word2vec.c's sequential order, the CPU's default) or "
                        "centres a round")
    p.add_argument("-update", default="auto", choices=("auto", "pairs", "batched"),
                   help="order of negative sampling's updates: pairs (word2vec.c's), "
                        "batched (minibatches of shared negatives, CPU) or auto (batched "
                        "for skip-gram, pairs for CBOW: the faster that held quality)")
    p.add_argument("-encoding", default="utf8", help="text encoding of -train")
    p.add_argument("-decode-errors", dest="decode_errors", default="strict",
                   choices=("strict", "replace", "ignore"),
                   help="bytes invalid in -encoding: stop (strict) or read them anyway "
                        "(replace, as word2vec.c reads bytes)")
    p.add_argument("-eval-pairs", dest="eval_pairs", metavar="FILE",
                   help="word-pair similarity file to score (e.g. WordSim-353)")
    p.add_argument("-eval-analogies", dest="eval_analogies", metavar="FILE",
                   help="analogy questions to score (questions-words.txt format)")
    p.add_argument("-verbose", action="store_true", help="progress logs (gensim's format)")
    p.add_argument("-quiet", action="store_true", help="no progress bar")
    return p


class UsageError(Exception):
    """A problem with the command line's input, reported as one line."""


def _check_writable(path: str, what: str, force: bool) -> None:
    if os.path.isdir(path):
        raise UsageError(f"{what} {path!r} is a directory; give a file name")
    if os.path.exists(path) and not force:
        raise UsageError(f"{what} {path!r} already exists; remove it or pass -force")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{what} {path!r}: folder {folder!r} does not exist")
    try:  # the only reliable test: create (and remove) a file there
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".w2v-check-"):
            pass
    except OSError as e:
        raise UsageError(f"{what} {path!r} cannot be written: {e.strerror}") from None


def _check_readable(path: str, what: str) -> None:
    if os.path.isdir(path):
        raise UsageError(f"{what} {path!r} is a directory, not a file")
    if not os.path.isfile(path):
        raise UsageError(f"{what} {path!r} does not exist")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{what} {path!r} is not readable")


def _check(args) -> None:
    """Everything that can be checked before training."""
    _check_readable(args.train, "-train")
    for flag in ("eval_pairs", "eval_analogies"):
        if getattr(args, flag):
            _check_readable(getattr(args, flag), "-" + flag.replace("_", "-"))
    _check_writable(args.output, "-output", args.force)
    if args.save_vocab:
        _check_writable(args.save_vocab, "-save-vocab", args.force)
    if args.negative < 0:
        raise UsageError(f"-negative must be >= 0, got {args.negative}")
    if args.negative == 0 and args.hs == 0:
        raise UsageError("-negative must be > 0 when -hs is 0: with neither there is no "
                         "output layer to train (use -hs 1 -negative 0 for hierarchical "
                         "softmax alone)")
    for flag in ("size", "window", "iter", "threads"):
        if getattr(args, flag) <= 0:
            raise UsageError(f"-{flag} must be > 0, got {getattr(args, flag)}")
    if args.round_size not in (None, "auto"):
        if not args.round_size.isdigit():
            raise UsageError(f"-round-size must be auto or an integer >= 0, got "
                             f"{args.round_size!r}")
        args.round_size = int(args.round_size)
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise UsageError("-device cuda: CUDA is not available on this machine (no GPU "
                             "or a CPU-only torch); use -device cpu")
    try:
        "".encode(args.encoding)
    except LookupError:
        raise UsageError(f"-encoding {args.encoding!r} is not a known text encoding") from None


def _progress_bar(quiet: bool):
    """(callback for Word2Vec.progress, closer): a tqdm bar over the words of all epochs."""
    if quiet:
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=1, unit=" words", unit_scale=True, dynamic_ncols=True, file=sys.stderr)
    state = {"done": 0}

    def update(s: dict) -> None:
        bar.total = int(s["words_total"])
        step = int(s["words_done"]) - state["done"]
        state["done"] = int(s["words_done"])
        bar.set_postfix_str(f"epoch {s['epoch'] + 1}/{s['epochs']} lr {s['lr']:.5f} "
                            f"loss {s['loss']:.3f}", refresh=False)
        bar.update(step)

    return update, bar.close


def _write_atomically(path: str, write) -> None:
    """Writes through a temporary file in the same folder, renamed over `path` at the end:
    an interrupted run never leaves half a file (fastsoftmax.atomic)."""
    atomic_write(path, write)


def run(args) -> int:
    _check(args)
    if args.verbose:
        logging.basicConfig(format="%(asctime)s : %(levelname)s : %(message)s",
                            level=logging.INFO)
    alpha = args.alpha if args.alpha is not None else (0.05 if args.cbow else 0.025)
    model = Word2Vec(vector_size=args.size, window=args.window, min_count=args.min_count,
                     sg=0 if args.cbow else 1, hs=args.hs, negative=args.negative,
                     sample=args.sample,
                     alpha=alpha, min_alpha=alpha * 1e-4, epochs=args.iter, seed=args.seed,
                     workers=args.threads, device=args.device, round_size=args.round_size,
                     update=args.update)
    corpus = LineSentence(args.train, encoding=args.encoding, errors=args.decode_errors)
    started = time.perf_counter()
    try:
        model.build_vocab(corpus)
    except CorpusDecodeError as e:
        raise UsageError(f"{e} (command line: -encoding ENCODING, or -decode-errors replace to "
                         "read the bytes as word2vec.c does)") from None
    vocab_seconds = time.perf_counter() - started
    model.progress, close_bar = _progress_bar(args.quiet)
    try:
        trained, raw = model.train(corpus, total_words=model.corpus_total_words,
                                   epochs=model.epochs)
    finally:
        close_bar()
    _write_atomically(args.output, lambda p: model.wv.save_word2vec_format(
        p, binary=bool(args.binary)))
    if args.save_vocab:
        def write_vocab(p):
            with open(p, "w", encoding="utf8") as f:
                for w, c in zip(model.wv.index_to_key, model.wv.counts.tolist()):
                    f.write(f"{w} {c}\n")
        _write_atomically(args.save_vocab, write_vocab)
    seconds = model.train_seconds
    print(f"vocabulary      {len(model.wv)} words (min-count {args.min_count}) from "
          f"{model.corpus_total_words} corpus words, {model.corpus_count} sentences "
          f"({vocab_seconds:.1f} s)")
    layers = " + ".join((["hierarchical softmax"] if args.hs else []) +
                        ([f"{args.negative} negatives"] if args.negative else []))
    print(f"training        {'CBOW' if args.cbow else 'skip-gram'} ({layers}), {args.iter} "
          f"epochs, {raw} raw words ({trained} after subsampling) in {seconds:.1f} s = "
          f"{raw / max(seconds, 1e-9):,.0f} words/s on {args.device}")
    print(f"output          {args.output} ({'binary' if args.binary else 'text'})")
    if args.eval_pairs:
        (pearson, _), (spearman, _), oov = model.wv.evaluate_word_pairs(args.eval_pairs)
        print(f"word pairs      pearson {pearson:.4f}  spearman {spearman:.4f}  "
              f"oov {oov:.1f}%  ({args.eval_pairs})")
    if args.eval_analogies:
        acc, sections = model.wv.evaluate_word_analogies(args.eval_analogies)
        n = len(sections[-1]["correct"]) + len(sections[-1]["incorrect"])
        print(f"analogies       accuracy {acc:.4f} on {n} questions ({args.eval_analogies})")
    return 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        return run(args)
    except (UsageError, ValueError, TypeError, OSError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: no output written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
