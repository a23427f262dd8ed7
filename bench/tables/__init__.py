"""The result tables of the README and docs/, one module a page; bench/results_render.py
renders them (make results)."""

from . import readme, roofline, scaling, word2vec, word2vec_gpu  # noqa: F401
from .common import TABLES  # noqa: F401
