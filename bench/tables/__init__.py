"""The result tables of the README and docs/, one module a page; bench/results_render.py
renders them (make results)."""

from . import (benchmarks, gpu, gpu_paths, huggingface, models, pretraining,  # noqa: F401
               readme, roofline, scaling, word2vec, word2vec_gpu, word2vec_scaling,
               word2vec_update)
from .common import TABLES  # noqa: F401
