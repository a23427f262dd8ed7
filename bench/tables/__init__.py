"""The result tables of the README and docs/, one module a page; bench/results_render.py
renders them (make results)."""

from . import (benchmarks, gpu, gpu_paths, models, readme, roofline, scaling, word2vec,  # noqa: F401
               word2vec_gpu)
from .common import TABLES  # noqa: F401
