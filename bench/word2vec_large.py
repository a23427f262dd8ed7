"""word2vec on a large synthetic corpus file: bounded memory and words/s of corpus_file=.

    python bench/word2vec_large.py [--gigabytes 1] [--vocab 100000] [--workers 2]
        [--epochs 1] [--folder /tmp] [--keep]

Writes a corpus of about --gigabytes GB (Zipf-distributed words "w<rank>", lines of 1 to 60
words, and one line of 25,000 words per 100 MB, past gensim's 10,000-word sentence limit) to
--folder, then trains CBOW with negative sampling from it in a fresh process and reports:
build_vocab and train() seconds, words/s, the process's peak RSS, and what that peak should
be made of: the interpreter with torch before the corpus (measured), the model (Word2Vec's
estimate_memory), and, with more than one epoch, the buffer every epoch replays (int32 tokens
and three int64 per sentence).
Rows go to bench/results/word2vec-large-cpu.csv. The corpus is deleted unless --keep.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

LONG_LINE_WORDS = 25_000
PARAMS = dict(vector_size=100, window=5, negative=5, sample=1e-3, min_count=5, sg=0)


def write_corpus(path: str, gigabytes: float, vocab: int, seed: int = 0) -> dict:
    """Zipf(1) words over `vocab` ranks, written in blocks of 2^22 words. Each block's bytes
    are gathered from one string of every word followed by a space, with numpy."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(1.0 / np.arange(1, vocab + 1))
    cdf /= cdf[-1]
    spelled = np.frombuffer("".join(f"w{i} " for i in range(vocab)).encode(), dtype=np.uint8)
    size = np.array([len(f"w{i} ") for i in range(vocab)])  # the word and its space
    start = np.cumsum(size) - size
    target, written, words, lines, next_long = gigabytes * 1e9, 0, 0, 0, 0
    with open(path, "wb") as f:
        while written < target:
            lengths = rng.integers(1, 61, size=(1 << 22) // 30)
            if written >= next_long:  # a line past the 10,000-word limit
                lengths[0] = LONG_LINE_WORDS
                next_long += 100e6
            n = int(lengths.sum())
            ids = np.minimum(np.searchsorted(cdf, rng.random(n)), vocab - 1)
            out_start = np.cumsum(size[ids]) - size[ids]
            total = int(out_start[-1] + size[ids[-1]])
            source = np.repeat(start[ids] - out_start, size[ids]) + np.arange(total)
            block = spelled[source]
            block[out_start[np.cumsum(lengths) - 1] + size[ids[np.cumsum(lengths) - 1]] - 1] = 10
            f.write(block.tobytes())
            written += total
            words += n
            lines += len(lengths)
    return dict(bytes=written, words=words, lines=lines)


def _status_bytes(field: str) -> int:
    """A /proc/self/status size: VmRSS now, VmHWM the peak of this process's image (ru_maxrss
    would count the parent's too: it survives exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def train(path: str, workers: int, epochs: int) -> dict:
    """In this (fresh) process: the peak RSS before the corpus, build_vocab, train."""
    import torch  # noqa: F401  (the baseline includes torch, as any user's process does)

    from fastsoftmax.models.word2vec import Word2Vec

    base = _status_bytes("VmRSS")
    m = Word2Vec(workers=workers, epochs=epochs, **PARAMS)
    t = time.perf_counter()
    m.build_vocab(corpus_file=path)
    vocab_s = time.perf_counter() - t
    t = time.perf_counter()
    m.train(corpus_file=path, total_examples=m.corpus_count, epochs=epochs)
    train_s = time.perf_counter() - t
    peak = _status_bytes("VmHWM")
    in_vocab = int(m.wv.counts.sum())  # corpus words in the vocabulary: the buffer's tokens
    # the replayed batches: 4 bytes per token, 3 int64 per sentence (end, words and
    # sentences before it)
    return dict(build_vocab_s=vocab_s, train_s=train_s, raw_words=m.corpus_total_words,
                words_per_s=m.corpus_total_words * epochs / train_s, vocab=len(m.wv),
                peak_rss_bytes=peak, baseline_rss_bytes=base,
                model_bytes=m.estimate_memory()["total"],
                token_buffer_bytes=4 * in_vocab + 24 * m.corpus_count if epochs > 1 else 0,
                sentences=m.corpus_count)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gigabytes", type=float, default=1.0)
    ap.add_argument("--vocab", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--folder", default=tempfile.gettempdir())
    ap.add_argument("--keep", action="store_true", help="keep the corpus file")
    ap.add_argument("--train", metavar="FILE", help=argparse.SUPPRESS)  # the child process
    args = ap.parse_args()
    if args.train:
        print(json.dumps(train(args.train, args.workers, args.epochs)))
        return
    from common import write_results

    path = os.path.join(args.folder, f"fastsoftmax-synthetic-{args.gigabytes:g}gb.txt")
    t = time.perf_counter()
    made = write_corpus(path, args.gigabytes, args.vocab)
    print(f"wrote {made['bytes'] / 1e9:.2f} GB, {made['words']:,} words, {made['lines']:,} "
          f"lines to {path} in {time.perf_counter() - t:.0f} s", flush=True)
    try:
        child = subprocess.run([sys.executable, __file__, "--train", path, "--workers",
                                str(args.workers), "--epochs", str(args.epochs)],
                               capture_output=True, text=True, check=True)
    except subprocess.CalledProcessError as e:
        sys.exit(f"training failed:\n{e.stderr[-3000:]}")
    finally:
        if not args.keep:
            os.remove(path)
    r = json.loads(child.stdout.strip().splitlines()[-1])
    bound = r["baseline_rss_bytes"] + r["model_bytes"] + r["token_buffer_bytes"]
    shape = (f"{made['bytes'] / 1e9:.2f}GB vocab={args.vocab} workers={args.workers} "
             f"epochs={args.epochs} cbow negative=5")
    rows = [dict(case="word2vec-large/synthetic-zipf", provider="ours corpus_file", shape=shape,
                 metric=k, value=round(v, 2) if isinstance(v, float) else v)
            for k, v in dict(r, file_bytes=made["bytes"]).items()]
    write_results("word2vec-large", "cpu", rows)
    mib = 1 << 20
    print(f"build_vocab {r['build_vocab_s']:.0f} s, train {r['train_s']:.0f} s, "
          f"{r['words_per_s']:,.0f} words/s, vocabulary {r['vocab']:,}")
    print(f"peak RSS {r['peak_rss_bytes'] / mib:,.0f} MiB = baseline (python + torch) "
          f"{r['baseline_rss_bytes'] / mib:,.0f} + model {r['model_bytes'] / mib:,.0f} + token "
          f"buffer {r['token_buffer_bytes'] / mib:,.0f} + {(r['peak_rss_bytes'] - bound) / mib:,.0f}"
          " MiB of the rest (reader chunks, counts)")


if __name__ == "__main__":
    main()
