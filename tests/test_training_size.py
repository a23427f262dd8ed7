"""Every model's training.py stays readable at a glance (issue 46): its `fit` is at most 60
lines and none of its classes is over 100, measured on the source with `ast` (a decorator's
lines aside, a docstring's included)."""

import ast
import glob
import os

import pytest

import fastsoftmax

MODELS = os.path.join(os.path.dirname(os.path.abspath(fastsoftmax.__file__)), "models")
TRAINING = sorted(glob.glob(os.path.join(MODELS, "*", "training.py")))
FIT_LINES, CLASS_LINES = 60, 100


def oversized(path: str) -> list:
    """'name: n lines' for `fit` over FIT_LINES and each class over CLASS_LINES in `path`."""
    tree = ast.parse(open(path, encoding="utf8").read(), path)
    found = []
    for node in tree.body:
        lines = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
        if isinstance(node, ast.FunctionDef) and node.name == "fit" and lines > FIT_LINES:
            found.append(f"fit: {lines} lines (at most {FIT_LINES})")
        if isinstance(node, ast.ClassDef) and lines > CLASS_LINES:
            found.append(f"class {node.name}: {lines} lines (at most {CLASS_LINES})")
    return found


def test_every_model_has_a_training_module():
    names = {os.path.basename(os.path.dirname(p)) for p in TRAINING}
    assert {"dmn", "lm", "memn2n", "memnn", "seq2seq", "treernn", "word2vec"} <= names


@pytest.mark.parametrize("path", TRAINING, ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_fit_and_classes_stay_small(path):
    assert not oversized(path), f"{path}: " + "; ".join(oversized(path))


def test_an_oversized_fit_or_class_is_found(tmp_path):
    path = tmp_path / "training.py"
    path.write_text("def fit():\n" + "    x = 1\n" * 60 + "\n\nclass Run:\n" + "    y = 2\n" * 100
                    + "\n\nclass Small:\n    pass\n")
    assert oversized(str(path)) == ["fit: 61 lines (at most 60)",
                                    "class Run: 101 lines (at most 100)"]
