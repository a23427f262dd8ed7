"""pytest plugin for `make gensim-suite`: runs gensim 4.4.0's own word2vec and KeyedVectors
test modules (as installed, under gensim/test) against fastsoftmax's classes.

Before any test module is imported, the names those modules reach the classes by
(`gensim.models.word2vec.Word2Vec`, `gensim.models.Word2Vec`,
`gensim.models.keyedvectors.KeyedVectors`, `gensim.models.KeyedVectors`) are rebound to
fastsoftmax.models.word2vec's `Word2Vec` and `KeyedVectors`, so every test that builds a
model builds ours. Everything else (gensim's LineSentence, its corpora, its test data) is
gensim's. Tests that cannot apply to fastsoftmax are deselected by id below, each with its
reason: those that unpickle gensim's models, and one of behaviour fastsoftmax refuses on
purpose; a test is never skipped wholesale. At the end a line per module gives the counts.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
import tempfile
import types
from collections import Counter

import gensim.models
import gensim.models.keyedvectors
import gensim.models.word2vec

from fastsoftmax.models.word2vec import KeyedVectors, Word2Vec

for _module in (gensim.models, gensim.models.word2vec, gensim.models.keyedvectors):
    if hasattr(_module, "Word2Vec"):
        _module.Word2Vec = Word2Vec
    _module.KeyedVectors = KeyedVectors

_PICKLE = "loads a model pickled by gensim; fastsoftmax never unpickles (it can run code)"

# test id (relative to gensim/test) -> why it cannot apply to fastsoftmax.
EXCLUDED = {
    "test_word2vec.py::TestWord2VecModel::test_persistence_backwards_compatible": _PICKLE,
    "test_word2vec.py::TestWord2VecModel::test_load_old_model": _PICKLE,
    "test_word2vec.py::TestWord2VecModel::test_load_old_model_separates": _PICKLE,
    "test_word2vec.py::TestWord2VecModel::test_load_old_models_1_x": _PICKLE,
    "test_word2vec.py::TestWord2VecModel::test_load_old_models_2_x": _PICKLE,
    "test_word2vec.py::TestWord2VecModel::test_load_old_models_3_x": _PICKLE,
    "test_keyedvectors.py::Gensim320Test::test": _PICKLE,
    "test_word2vec.py::TestWord2VecModel::test_build_vocab_warning":
        "gives a sentence as a str, which gensim trains on character by character with a "
        "warning; fastsoftmax refuses it (TypeError), as it is almost always a bug",
}


def _install_log_capture_shim() -> None:
    """gensim's test_word2vec imports `log_capture` from testfixtures, a test-only package
    the project does not depend on. When it is missing, a stand-in with the behaviour those
    tests use: the decorated test gets an object whose str() lists every record logged
    during the test as `logger LEVEL\\n  message`."""
    try:
        import testfixtures  # noqa: F401
        return
    except ImportError:
        pass

    class _Records(logging.Handler):
        def __init__(self):
            super().__init__(logging.DEBUG)
            self.lines = []

        def emit(self, record):
            self.lines.append(f"{record.name} {record.levelname}\n  {record.getMessage()}")

        def __str__(self):
            return "\n".join(self.lines)

    def log_capture():
        def decorate(test):
            @functools.wraps(test)
            def run(self, *args, **kwargs):
                handler, root = _Records(), logging.getLogger()
                old_level = root.level
                root.addHandler(handler)
                root.setLevel(logging.DEBUG)
                try:
                    return test(self, handler, *args, **kwargs)
                finally:
                    root.removeHandler(handler)
                    root.setLevel(old_level)
            return run
        return decorate

    shim = types.ModuleType("testfixtures")
    shim.log_capture = log_capture
    sys.modules["testfixtures"] = shim


_install_log_capture_shim()


def pytest_configure(config):
    # gensim's script test writes vec.txt into the working directory: run in a scratch one.
    config._gensim_suite_dir = tempfile.mkdtemp(prefix="gensim-suite-")
    os.chdir(config._gensim_suite_dir)


def pytest_unconfigure(config):
    shutil.rmtree(getattr(config, "_gensim_suite_dir", ""), ignore_errors=True)


def _short_id(nodeid: str) -> str:
    return nodeid[nodeid.find("test_"):] if "/" in nodeid else nodeid


def pytest_collection_modifyitems(config, items):
    keep, dropped = [], []
    for item in items:
        (dropped if _short_id(item.nodeid) in EXCLUDED else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_terminal_summary(terminalreporter):
    tr = terminalreporter
    counts: dict = {}
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in tr.stats.get(outcome, []):
            if outcome != "error" and report.when != "call" and outcome != "skipped":
                continue
            module = _short_id(report.nodeid).split("::")[0]
            counts.setdefault(module, Counter())[outcome] += 1
    tr.write_sep("=", "gensim's test suite against fastsoftmax")
    for module in sorted(counts):
        c = counts[module]
        tr.write_line(f"{module}: {c['passed']} passed, {c['failed']} failed, "
                      f"{c['error']} errors, {c['skipped']} skipped")
    for test_id, why in EXCLUDED.items():
        tr.write_line(f"excluded {test_id}: {why}")
