"""The API reference (docs/reference/) documents every public name: each name in the
`__all__` of a public module must have a docstring and be reached by an autodoc directive of a
reference page (automodule of a module whose `__all__` holds it, or autoclass/autofunction/
autodata naming it). The models' constructors must name every keyword they take in their
docstrings. A failure lists the names that lack documentation."""

import importlib
import inspect
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(ROOT, "docs", "reference")
PUBLIC_MODULES = [
    "fastsoftmax", "fastsoftmax.nn", "fastsoftmax.functional", "fastsoftmax.samplers",
    "fastsoftmax.samplers.fit", "fastsoftmax.samplers.frequency", "fastsoftmax.losses.full",
    "fastsoftmax.losses.sampled", "fastsoftmax.losses.negative_sampling",
    "fastsoftmax.losses.hierarchical", "fastsoftmax.losses.in_batch", "fastsoftmax.losses.margin",
    "fastsoftmax.tree", "fastsoftmax.optim", "fastsoftmax.vocab_parallel", "fastsoftmax.models",
    "fastsoftmax.models.lm", "fastsoftmax.models.seq2seq", "fastsoftmax.models.memn2n",
    "fastsoftmax.models.memnn", "fastsoftmax.models.dmn", "fastsoftmax.models.treernn",
    "fastsoftmax.models.word2vec",
]
MODEL_CONSTRUCTORS = [
    "fastsoftmax.models.Word2Vec", "fastsoftmax.models.KeyedVectors",
    "fastsoftmax.models.PPMIVectors", "fastsoftmax.models.RNNLanguageModel",
    "fastsoftmax.models.seq2seq.Seq2Seq", "fastsoftmax.models.memn2n.MemN2N",
    "fastsoftmax.models.memnn.MemNN", "fastsoftmax.models.dmn.DMN",
    "fastsoftmax.models.treernn.TreeRNN", "fastsoftmax.models.treernn.SequenceLSTM",
]
DIRECTIVE = re.compile(r"^\.\. (automodule|autoclass|autofunction|autodata|currentmodule)::"
                       r"\s*(\S+)", re.M)


def public_names(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, o in vars(module).items() if not n.startswith("_")
                 and getattr(o, "__module__", None) == module.__name__]
    return list(names)


def resolve(dotted):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def documented_objects():
    """ids of the objects the reference pages' directives document."""
    found = set()
    for page in sorted(os.listdir(REFERENCE)):
        text = open(os.path.join(REFERENCE, page), encoding="utf8").read()
        current = None
        for kind, target in DIRECTIVE.findall(text):
            if kind == "currentmodule":
                current = target
            elif kind == "automodule":
                module = importlib.import_module(target)
                found.update(id(getattr(module, n)) for n in public_names(module))
            else:
                dotted = target if current is None or target.count(".") > 1 or \
                    target.startswith("fastsoftmax") else f"{current}.{target}"
                found.add(id(resolve(dotted)))
    return found


def test_every_public_name_is_documented():
    documented = documented_objects()
    missing, bare = [], []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in public_names(module):
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isroutine(obj)):
                continue  # constants (UNK, EOS) are named where they are used
            if id(obj) not in documented:
                missing.append(f"{module_name}.{name}")
            if not inspect.getdoc(obj):
                bare.append(f"{module_name}.{name}")
    assert not missing, "not in docs/reference/: " + ", ".join(sorted(set(missing)))
    assert not bare, "no docstring: " + ", ".join(sorted(set(bare)))


def test_model_constructors_name_every_keyword():
    gaps = []
    for dotted in MODEL_CONSTRUCTORS:
        cls = resolve(dotted)
        doc = (inspect.getdoc(cls) or "") + (inspect.getdoc(cls.__init__) or "")
        for param in list(inspect.signature(cls.__init__).parameters.values())[1:]:
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if not re.search(rf"\b{re.escape(param.name)}\b", doc):
                gaps.append(f"{dotted}({param.name})")
    assert not gaps, "keywords no docstring names: " + ", ".join(gaps)
