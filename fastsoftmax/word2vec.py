"""Command line with word2vec.c's flags:

    python -m fastsoftmax.word2vec -train corpus.txt -output vectors.bin -cbow 0 -size 100 \\
        -window 5 -negative 5 -sample 1e-3 -iter 5 -threads 2 -binary 1

The corpus is a whitespace-tokenised text file, one sentence per line, streamed. Besides
word2vec.c's flags: -device (cpu, cuda), -seed, -eval-pairs FILE (word-similarity pairs,
tab-separated), -eval-analogies FILE (questions-words.txt format) and -quiet. As in word2vec.c
the default learning rate is 0.05 for CBOW and 0.025 for skip-gram, decaying to 1e-4 of it.
Hierarchical softmax (-hs 1) is not implemented and is refused.
"""

import argparse
import sys
import time

from .models.word2vec import Word2Vec


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m fastsoftmax.word2vec",
        description="Train word2vec (skip-gram or CBOW with negative sampling) on a text file.",
    )
    p.add_argument("-train", required=True, metavar="FILE", help="training corpus (text)")
    p.add_argument("-output", required=True, metavar="FILE", help="where to write the vectors")
    p.add_argument("-size", type=int, default=100, help="vector size (100)")
    p.add_argument("-window", type=int, default=5, help="max skip length (5)")
    p.add_argument("-sample", type=float, default=1e-3, help="subsampling threshold (1e-3)")
    p.add_argument("-hs", type=int, default=0, choices=(0,), help="hierarchical softmax: only 0")
    p.add_argument("-negative", type=int, default=5, help="negative samples (5)")
    p.add_argument("-threads", type=int, default=None, help="worker threads (all cores)")
    p.add_argument("-iter", type=int, default=5, help="training epochs (5)")
    p.add_argument("-min-count", dest="min_count", type=int, default=5,
                   help="discard words rarer than this (5)")
    p.add_argument("-alpha", type=float, default=None,
                   help="starting learning rate (0.025 skip-gram, 0.05 CBOW)")
    p.add_argument("-cbow", type=int, default=1, choices=(0, 1),
                   help="1 CBOW (default), 0 skip-gram")
    p.add_argument("-binary", type=int, default=0, choices=(0, 1), help="1: binary output")
    p.add_argument("-save-vocab", dest="save_vocab", metavar="FILE",
                   help="write the vocabulary as 'word count' lines")
    p.add_argument("-seed", type=int, default=1, help="random seed (1)")
    p.add_argument("-device", default="cpu", help="cpu or cuda (cpu)")
    p.add_argument("-eval-pairs", dest="eval_pairs", metavar="FILE",
                   help="word-pair similarity file to score (e.g. WordSim-353)")
    p.add_argument("-eval-analogies", dest="eval_analogies", metavar="FILE",
                   help="analogy questions to score (questions-words.txt format)")
    p.add_argument("-quiet", action="store_true", help="no progress bar")
    return p


class ProgressBar:
    """One self-rewriting stderr line: progress, words/s, learning rate, running loss."""

    def __init__(self, stream=sys.stderr, width: int = 30, every: float = 0.25):
        self.stream, self.width, self.every = stream, width, every
        self._last = 0.0

    def __call__(self, s: dict, final: bool = False) -> None:
        now = time.perf_counter()
        if not final and now - self._last < self.every:
            return
        self._last = now
        frac = min(1.0, s["words_done"] / max(s["words_total"], 1.0))
        filled = int(round(frac * self.width))
        speed = s["raw_words"] / max(s["seconds"], 1e-9)
        line = (
            f"\repoch {s['epoch'] + 1}/{s['epochs']} [{'#' * filled}{'.' * (self.width - filled)}]"
            f" {100 * frac:5.1f}%  {speed / 1e3:8.1f}k words/s  lr {s['lr']:.6f}"
            f"  loss {s['loss']:.4f}"
        )
        self.stream.write(line + ("\n" if final else ""))
        self.stream.flush()


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    alpha = args.alpha if args.alpha is not None else (0.05 if args.cbow else 0.025)
    model = Word2Vec(
        vector_size=args.size, window=args.window, min_count=args.min_count,
        sg=0 if args.cbow else 1, negative=args.negative, sample=args.sample, alpha=alpha,
        min_alpha=alpha * 1e-4, epochs=args.iter, seed=args.seed, workers=args.threads,
        device=args.device,
    )
    started = time.perf_counter()
    try:
        model.build_vocab(corpus_file=args.train)
    except (ValueError, FileNotFoundError, UnicodeDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    vocab_seconds = time.perf_counter() - started
    last = {}
    bar = None if args.quiet else ProgressBar()

    def progress(stats):
        last.update(stats)
        if bar is not None:
            bar(stats)

    model.progress = progress
    trained, raw = model.train(corpus_file=args.train)
    if bar is not None and last:
        bar(last, final=True)
    model.wv.save_word2vec_format(args.output, binary=bool(args.binary))
    if args.save_vocab:
        with open(args.save_vocab, "w", encoding="utf8") as f:
            for w, c in zip(model.wv.index_to_key, model.wv.counts.tolist()):
                f.write(f"{w} {c}\n")
    seconds = model.train_seconds
    print(f"vocabulary      {len(model.wv)} words (min-count {args.min_count}) from "
          f"{model.corpus_total_words} corpus words, {model.corpus_count} sentences "
          f"({vocab_seconds:.1f} s)")
    print(f"training        {'CBOW' if args.cbow else 'skip-gram'}, {args.iter} epochs, "
          f"{raw} raw words ({trained} after subsampling) in {seconds:.1f} s = "
          f"{raw / max(seconds, 1e-9):,.0f} words/s on {args.device}")
    if last:
        print(f"final loss      {last['loss']:.4f} per positive prediction (last epoch)")
    print(f"output          {args.output} ({'binary' if args.binary else 'text'})")
    if args.eval_pairs:
        pearson, spearman, oov = model.wv.evaluate_word_pairs(args.eval_pairs)
        print(f"word pairs      pearson {pearson:.4f}  spearman {spearman:.4f}  "
              f"oov {oov:.1f}%  ({args.eval_pairs})")
    if args.eval_analogies:
        acc, sections = model.wv.evaluate_word_analogies(args.eval_analogies)
        n = len(sections[-1]["correct"]) + len(sections[-1]["incorrect"])
        print(f"analogies       accuracy {acc:.4f} on {n} questions ({args.eval_analogies})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
