"""Every CUDA path and when it last ran on a GPU (docs/gpu.md, and one line of the README),
from the rows of bench/results/*-cuda.csv.

PATHS below is the whole mapping, declared once so that a reviewer can check it: each path,
its code, which rows measured it, and whether its code was in the wheel of the one recorded
CUDA test run. A path no row measures says "never"; a new benchmark of a path adds its rows
here.
"""

import os

from .common import RESULTS, markdown, rows_of, table

# Rows on CUDA up to these days ran code that has changed since:
RACING_WORD2VEC_UNTIL = "2026-11-26"  # word2vec-runs-cuda: the racing kernel, gone since
STREAMED_ONLY_UNTIL = "2026-11-26"    # cce_headline's "ours": the streamed path (no fused yet)
# The one CUDA test run on record: `pytest -k "cuda or gpu" tests`, 272 passed, in
# bench/results/gpu-run-cuda.log. It kept no outcome per file, so a path counts as tested
# there when its code was in that wheel (commit e4f30a1's tree).
TEST_RUN = "2026-11-26"


def _until(day):
    return lambda t: t[:10] <= day


def _after(day):
    return lambda t: t[:10] > day


def _samples_below(n, below=True):
    """A sampler shape "V=... S=..." whose S is below n (or at least n)."""
    def test(shape):
        s = int(shape.split("S=")[1].split()[0]) if "S=" in shape else None
        return s is not None and (s < n) == below
    return test


def _ours(provider):
    return provider.startswith("ours")


_LM = dict(case=lambda c: c.startswith(("speed/", "breakdown/")))

# (path, code, [(csv name, {column: wanted value, tuple of values or test}), ...], tested)
PATHS = [
    ("alias table build and draws", "csrc/cuda/sampler.cu",
     [("sampler-cuda", dict(case="draw", provider="fastsoftmax.AliasSampler"))], True),
    ("log-uniform draws", "csrc/cuda/sampler.cu", [], True),
    ("uniform draws", "csrc/cuda/sampler.cu", [], True),
    # The one block was sampler.cu's sample_unique_kernel in that wheel (since moved to
    # sample_unique.cu); it drew the candidates of losses-lm-cuda's sampled rows, untimed.
    ("unique sampling, one block (the default)", "csrc/cuda/sample_unique.cu",
     [("sampler-cuda", dict(case="unique", shape=_samples_below(4096)))], True),
    ("unique sampling, multi-block rounds (opt-in, S ≥ 4,096)", "csrc/cuda/unique_rounds.cuh",
     [("sampler-cuda", dict(case="unique", shape=_samples_below(4096, below=False)))], False),
    ("sampled logits: sampled softmax", "csrc/cuda/sampled_logits.cu",
     [("losses-cuda", dict(case="sampled_softmax", provider=_ours)),
      ("losses-lm-cuda", dict(case="sampled_softmax", provider=_ours)),
      ("lm-cuda", dict(_LM, provider="sampled"))], True),
    ("sampled logits: NCE", "csrc/cuda/sampled_logits.cu",
     [("losses-cuda", dict(case="nce", provider=_ours)),
      ("losses-lm-cuda", dict(case="nce", provider=_ours)),
      ("lm-cuda", dict(_LM, provider="nce"))], True),
    ("negative sampling", "csrc/cuda/negative_sampling.cu",
     [("losses-cuda", dict(case="negative_sampling", provider=_ours)),
      ("lm-cuda", dict(_LM, provider="neg"))], True),
    ("hierarchical softmax", "csrc/cuda/hierarchical_softmax.cu",
     [("losses-cuda", dict(case="hierarchical_softmax", provider=_ours)),
      ("lm-cuda", dict(_LM, provider="hs"))], True),
    ("Huffman tree build", "csrc/cuda/huffman_tree.cu", [], True),
    ("margin losses (multi-class hinge, ranking)", "csrc/cuda/margin_losses.cu", [], True),
    ("row scores (sampled ranking, vocabulary-parallel shards)", "csrc/cuda/row_scores.cu",
     [], True),
    ("word2vec in lockstep rounds", "csrc/cuda/word2vec.cu, word2vec_rounds.cuh",
     [("word2vec-runs-cuda", dict(provider="fastsoftmax",
                                  time=_after(RACING_WORD2VEC_UNTIL)))], False),
    ("word2vec, deterministic mode", "csrc/cuda/word2vec.cu", [], False),
    ("exact softmax, fused Triton kernels", "fastsoftmax/ops/_triton_softmax.py",
     [("cce-headline-cuda", dict(case="cce_headline", provider="ours_fused"))], False),
    ("exact softmax, streamed on CUDA", "fastsoftmax/losses/full.py, _softmax_stats.py",
     [("cce-headline-cuda", dict(case="cce_headline", provider="ours_streamed")),
      ("cce-headline-cuda", dict(case="cce_headline", provider="ours",
                                 time=_until(STREAMED_ONLY_UNTIL)))], True),
]


def _matches(row, where):
    for key, want in where.items():
        value = row.get(key) or ""
        if callable(want):
            ok = want(value)
        elif isinstance(want, tuple):
            ok = value in want
        else:
            ok = value == want
        if not ok:
            return False
    return True


def _rows_if_any(csv_name):
    """A csv's rows; none where no run has written the file yet."""
    if not os.path.exists(os.path.join(RESULTS, csv_name + ".csv")):
        return []
    return rows_of(csv_name)


def path_rows(sources, load=_rows_if_any):
    """The rows of one path: those of each (csv, where) in `sources`, each row once."""
    found, seen = [], set()
    for csv_name, where in sources:
        for i, row in enumerate(load(csv_name)):
            if (csv_name, i) not in seen and _matches(row, where):
                seen.add((csv_name, i))
                found.append(row)
    return found


def path_cells(rows):
    """(last ran, commit, device, rows) of one path's rows, or "never"."""
    if not rows:
        return ["never", "", "", "none"]
    latest = max(rows, key=lambda r: r["time"])
    per_file = {}
    for r in rows:
        per_file[r["file"]] = per_file.get(r["file"], 0) + 1
    counts = ", ".join(f"{n} in `{f}`" for f, n in per_file.items())
    commit = latest.get("commit") or "not recorded"
    return [latest["time"][:10], commit if commit == "not recorded" else f"`{commit}`",
            latest["device"], counts]


def status(load=_rows_if_any):
    """[(path, code, cells, tested)] for every path of PATHS."""
    return [(path, code, path_cells(path_rows(sources, load)), tested)
            for path, code, sources, tested in PATHS]


@table("gpu-paths")
def gpu_paths():
    body = [[path, ", ".join(f"`{c}`" for c in code.split(", ")), *cells,
             TEST_RUN if tested else "never"]
            for path, code, cells, tested in status()]
    return markdown(["CUDA path", "code", "last rows on a GPU", "commit", "device", "rows",
                     "CUDA tests"], body) + [
        "", "Rows: `bench/results/*-cuda.csv`, matched to a path by `PATHS` in "
            "`bench/tables/gpu_paths.py`."]


@table("readme-gpu-never")
def readme_gpu_never():
    never = [p for p, _, cells, tested in status() if cells[0] == "never" and not tested]
    unmeasured = [p for p, _, cells, tested in status() if cells[0] == "never" and tested]
    return [f"Never run on a GPU: {'; '.join(never) or 'none'}. Tested on a GPU but never "
            f"measured there: {'; '.join(unmeasured) or 'none'} "
            "([every CUDA path](docs/gpu.md#every-cuda-path))."]
