"""The result tables of the README and docs/, one module a page; bench/results_render.py
renders them (make results)."""

from . import benchmarks, gpu, models, readme, roofline, scaling, word2vec, word2vec_gpu  # noqa: F401,E501
from .common import TABLES  # noqa: F401
