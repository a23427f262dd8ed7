"""fastsoftmax.models exports every model: each package under fastsoftmax/models/ with a
model.py has a class of that module (one its package exports) in fastsoftmax.models, the same
object as its package's."""

import importlib
import inspect
import os

import fastsoftmax.models as models

FOLDER = os.path.dirname(models.__file__)


def model_packages() -> list:
    return sorted(name for name in os.listdir(FOLDER)
                  if os.path.isfile(os.path.join(FOLDER, name, "model.py")))


def test_every_model_package_has_its_class_in_fastsoftmax_models():
    packages = model_packages()
    assert {"lm", "seq2seq", "memn2n", "memnn", "dmn", "treernn"} <= set(packages)
    missing = []
    for name in packages:
        package = importlib.import_module(f"{models.__name__}.{name}")
        module = importlib.import_module(f"{package.__name__}.model")
        classes = [n for n, o in vars(module).items() if inspect.isclass(o)
                   and o.__module__ == module.__name__ and n in package.__all__]
        exported = [n for n in classes if n in models.__all__]
        if not exported:
            missing.append(f"{name}: none of {classes}")
        for n in exported:
            assert getattr(models, n) is getattr(package, n), f"{name}.{n} is another object"
    assert not missing, f"fastsoftmax.models leaves out the model of: {'; '.join(missing)}"


def test_every_exported_name_is_there():
    for n in models.__all__:
        assert hasattr(models, n), n
    assert {"DMN", "TreeRNN", "SequenceLSTM", "Word2Vec", "KeyedVectors",
            "PPMIVectors"} <= set(models.__all__)
