"""The API reference (docs/reference/) documents every public name: each name in the
`__all__` of a public module must be reached by an autodoc directive of a reference page
(automodule of a module whose `__all__` holds it, less its `:exclude-members:`, or autoclass/
autofunction naming it), and each class and function among them must have a docstring of its own (not one
inherited from a base class, nor the signature a dataclass writes). A constant (EOS,
CHUNK_BYTES, HEADS) is documented by a `py:data` directive naming it (autodata would render
the docstring of the value's type, and automodule leaves out a variable with no doc comment),
whose `:value:`, where given, must be the constant's repr; a module in `__all__` by an
automodule of it. The models'
constructors must name every keyword they take in their docstrings. A failure lists the names
that lack documentation."""

import dataclasses
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
    "fastsoftmax.models.word2vec", "fastsoftmax.ops", "fastsoftmax.losses.fused",
    "fastsoftmax.integrations.transformers", "fastsoftmax.atomic",
]
MODEL_CONSTRUCTORS = [
    "fastsoftmax.models.Word2Vec", "fastsoftmax.models.KeyedVectors",
    "fastsoftmax.models.PPMIVectors", "fastsoftmax.models.RNNLanguageModel",
    "fastsoftmax.models.seq2seq.Seq2Seq", "fastsoftmax.models.memn2n.MemN2N",
    "fastsoftmax.models.memnn.MemNN", "fastsoftmax.models.dmn.DMN",
    "fastsoftmax.models.treernn.TreeRNN", "fastsoftmax.models.treernn.SequenceLSTM",
]
DIRECTIVE = re.compile(r"^\.\. (automodule|autoclass|autofunction|py:data|currentmodule)::"
                       r"\s*(\S+)\n((?:   :.*\n)*)", re.M)
OPTION = re.compile(r"^   :([\w-]+):[ ]?(.*)$", re.M)


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
    """ids of the objects the reference pages' directives document, and (name, id) of the
    constants their py:data directives name."""
    found, data = set(), set()
    for page in sorted(os.listdir(REFERENCE)):
        text = open(os.path.join(REFERENCE, page), encoding="utf8").read()
        current = None
        for kind, target, options in DIRECTIVE.findall(text):
            options = dict(OPTION.findall(options))
            if kind == "currentmodule":
                current = target
            elif kind == "automodule":
                module = importlib.import_module(target)
                excluded = {n.strip() for n in options.get("exclude-members", "").split(",")}
                found.add(id(module))
                found.update(id(getattr(module, n)) for n in public_names(module)
                             if n not in excluded and is_documentable(getattr(module, n)))
            else:
                dotted = target if current is None or target.count(".") > 1 or \
                    target.startswith("fastsoftmax") else f"{current}.{target}"
                obj = resolve(dotted)
                if kind == "py:data":
                    assert options.get("value", repr(obj)) == repr(obj), \
                        f"{page}: {dotted} is {obj!r}, the page gives {options['value']}"
                    data.add((dotted.rpartition(".")[2], id(obj)))
                else:
                    found.add(id(obj))
    return found, data


def is_documentable(obj):
    """A class or a function: what automodule documents from `__all__` with no doc comment."""
    return inspect.isclass(obj) or inspect.isroutine(obj)


def own_docstring(obj):
    """The object's own docstring: a class's is not inherited, nor a dataclass's generated
    signature."""
    doc = vars(obj).get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and doc and \
            doc.startswith(obj.__name__ + "("):
        return None
    return inspect.cleandoc(doc) if doc and doc.strip() else None


def test_every_public_name_is_documented():
    documented, data = documented_objects()
    missing, bare = [], []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in public_names(module):
            obj = getattr(module, name)
            if inspect.ismodule(obj) or is_documentable(obj):
                if id(obj) not in documented:
                    missing.append(f"{module_name}.{name}")
            elif (name, id(obj)) not in data:
                missing.append(f"{module_name}.{name}")
            if is_documentable(obj) and not own_docstring(obj):
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
