"""Smoke test of an installed fastsoftmax (a wheel in a venv), run from outside the source tree.

    cd /tmp && /path/venv/bin/python /path/to/checkout/tools/installed_smoke.py --tree /path/to/checkout

Checks, each reported as "smoke: ok <check>" or "smoke: FAIL <check>: <why>"; the exit
status is 1 if any failed:
  location  fastsoftmax is the installed one, not the checkout's (with --tree)
  packaging every package and module of the tree's fastsoftmax/ is installed, and the
            installed console scripts are pyproject's [project.scripts] (with --tree)
  version   __version__ is the installed metadata's version, the tree's pyproject version
            with a CUDA wheel's local tag or none (with --tree)
  imports   every module of the installed package imports (pkgutil.walk_packages); a module
            that needs an optional dependency which is not installed (Triton) is listed
  scripts   every console script answers -h
  sampler   alias table, draws with and without replacement
  losses    negative sampling, sampled softmax, NCE, hierarchical softmax (Huffman tree):
            forward and backward
  model     tiny training runs of Word2Vec (hs and negative sampling together; also in
            lockstep rounds; skip-gram with shared negatives)
  fused     the fused exact softmax (Triton kernels; without a GPU under Triton's
            interpreter), forward and backward, when Triton is installed
  ops       every fastsoftmax:: op registered in the dispatcher ran in the checks above
            (the fused softmax's two only where Triton is installed)
Run as a script, sys.path[0] is tools/, so the checkout's fastsoftmax/ cannot shadow the
installed one.
"""

import argparse
import importlib
import importlib.metadata
import os
import pkgutil
import subprocess
import sys
import sysconfig
import tempfile
import traceback

import torch
from torch.utils._python_dispatch import TorchDispatchMode

FAILED = []
OPTIONAL = {"triton"}  # optional dependencies: a module that needs one may be absent
if not torch.cuda.is_available():  # the fused kernels run interpreted; read at their import
    os.environ.setdefault("TRITON_INTERPRET", "1")


def check(name):
    def run(fn):
        try:
            detail = fn()
        except Exception as exc:  # every failure becomes one line and a non-zero exit
            FAILED.append(name)
            print(f"smoke: FAIL {name}: {type(exc).__name__}: {exc}", flush=True)
            if os.environ.get("SMOKE_TRACEBACK"):
                traceback.print_exc()
            return None
        print(f"smoke: ok {name}" + (f": {detail}" if isinstance(detail, str) else ""),
              flush=True)
        return detail
    return run


class OpsSeen(TorchDispatchMode):
    """Records the fastsoftmax:: ops that reach the dispatcher."""

    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.name()
        if name.startswith("fastsoftmax::"):
            self.names.add(name.split("::")[1].split(".")[0])
        return func(*args, **(kwargs or {}))


def registered_ops() -> set:
    return {n.split("::")[1].split(".")[0] for n in torch._C._dispatch_get_all_op_names()
            if n.startswith("fastsoftmax::")}


def tree_modules(tree: str) -> set:
    """Dotted names of every package and module under tree/fastsoftmax."""
    names = set()
    top = os.path.join(tree, "fastsoftmax")
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if os.path.exists(os.path.join(folder, d, "__init__.py"))]
        package = os.path.relpath(folder, tree).replace(os.sep, ".")
        for f in files:
            if f.endswith(".py") and f != "_build_info.py":  # written by the build, not in git
                names.add(package if f == "__init__.py" else f"{package}.{f[:-3]}")
    return names


def installed_modules(fastsoftmax) -> set:
    names = {"fastsoftmax"}
    for info in pkgutil.walk_packages(fastsoftmax.__path__, "fastsoftmax."):
        names.add(info.name)
    return names


def pyproject_scripts(tree: str):
    try:
        import tomllib
    except ImportError:  # Python < 3.11: the installed entry points alone are checked
        return None
    with open(os.path.join(tree, "pyproject.toml"), "rb") as f:
        return dict(tomllib.load(f)["project"]["scripts"])


def installed_scripts() -> dict:
    try:
        dist = importlib.metadata.distribution("fastsoftmax")
    except importlib.metadata.PackageNotFoundError:
        raise AssertionError("fastsoftmax is imported but not installed (no distribution "
                             "metadata): install the wheel") from None
    return {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", help="the source checkout the wheel was built from")
    args = parser.parse_args()
    print(f"smoke: python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"from {os.getcwd()}", flush=True)

    fastsoftmax = check("import fastsoftmax")(lambda: importlib.import_module("fastsoftmax"))
    if fastsoftmax is None:
        return 1
    print(f"smoke: fastsoftmax at {os.path.dirname(fastsoftmax.__file__)}, "
          f"build {fastsoftmax.build_info()}", flush=True)
    if args.tree:
        tree = os.path.realpath(args.tree)

        @check("location")
        def _():
            here = os.path.realpath(fastsoftmax.__file__)
            if here.startswith(os.path.join(tree, "fastsoftmax") + os.sep):
                raise AssertionError(f"fastsoftmax was imported from the checkout ({here}), "
                                     "not from the installed wheel")

        @check("packaging")
        def _():
            missing = sorted(tree_modules(tree) - installed_modules(fastsoftmax))
            if missing:
                raise AssertionError("in the tree but not installed from the wheel: "
                                     + ", ".join(missing))
            declared, installed = pyproject_scripts(tree), installed_scripts()
            if declared is not None and declared != installed:
                raise AssertionError(f"pyproject's [project.scripts] {declared} but the wheel "
                                     f"installs {installed}")
            return f"{len(tree_modules(tree))} modules, {len(installed)} console scripts"

        @check("version")
        def _():
            # One source: pyproject's version, through the metadata (+cuXYZ on a CUDA wheel).
            meta = importlib.metadata.version("fastsoftmax")
            if fastsoftmax.__version__ != meta:
                raise AssertionError(f"__version__ {fastsoftmax.__version__}, metadata {meta}")
            with open(os.path.join(tree, "pyproject.toml"), encoding="utf-8") as f:
                declared = f'version = "{meta.split("+")[0]}"\n'
                if declared not in f.read():
                    raise AssertionError(f"{meta} is not the tree's pyproject version")
            return meta

    @check("imports")
    def _():
        names = sorted(installed_modules(fastsoftmax))
        broken, optional = [], []
        for name in names:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                (optional if exc.name in OPTIONAL else broken).append(f"{name} ({exc})")
            except Exception as exc:
                broken.append(f"{name} ({type(exc).__name__}: {exc})")
        if broken:
            raise AssertionError("cannot import " + "; ".join(broken))
        return f"{len(names)} modules" + (
            f"; without an optional dependency: {'; '.join(optional)}" if optional else "")

    @check("scripts")
    def _():
        scripts = installed_scripts()
        if not scripts:
            raise AssertionError("the installed distribution declares no console scripts")
        folder = sysconfig.get_path("scripts")
        for name in sorted(scripts):
            path = os.path.join(folder, name)
            if not os.path.exists(path):
                raise AssertionError(f"console script {name} is not installed in {folder}")
            run = subprocess.run([path, "-h"], capture_output=True, text=True, timeout=300)
            if run.returncode != 0 or "usage" not in run.stdout.lower():
                raise AssertionError(f"`{name} -h` exited {run.returncode}: "
                                     + (run.stderr.strip().splitlines() or ["no output"])[-1])
        return ", ".join(sorted(scripts))

    seen = OpsSeen()
    fs = fastsoftmax
    with seen:
        @check("sampler")
        def _():
            sampler = fs.UnigramSampler(torch.arange(1, 101, dtype=torch.float64), power=0.75)
            draws = sampler.sample(1000, generator=torch.Generator().manual_seed(0))
            if not (draws.min() >= 0 and draws.max() < 100):
                raise AssertionError(f"draws outside [0, 100): {draws.min()}..{draws.max()}")
            unique = sampler.candidates(torch.tensor([[3], [7]]), 8, unique=True,
                                        generator=torch.Generator().manual_seed(1))
            if unique.sampled_candidates.unique().numel() != 8:
                raise AssertionError(f"not unique: {unique.sampled_candidates.tolist()}")

        @check("losses")
        def _():
            torch.manual_seed(0)
            n, d, v = 6, 8, 50
            target = torch.randint(0, v, (n,))
            sampler = fs.UnigramSampler(torch.arange(1, v + 1, dtype=torch.float64))
            tree = fs.ClassTree.huffman(torch.arange(1, v + 1))
            losses = {
                "negative_sampling": lambda h, w: fs.negative_sampling_loss(
                    h, w, target, num_negatives=5, sampler=sampler),
                "sampled_softmax": lambda h, w: fs.sampled_softmax_loss(
                    h, w, target, num_sampled=10, sampler=sampler),
                "nce": lambda h, w: fs.nce_loss(h, w, target, num_sampled=10, sampler=sampler),
                "hierarchical_softmax": lambda h, w: fs.hierarchical_softmax_loss(
                    h, w[: v - 1], target, tree),
                "multi_margin": lambda h, w: fs.multi_margin_loss(h, w, target),
                "margin_ranking": lambda h, w: fs.sampled_margin_ranking_loss(
                    h, w, target, num_sampled=5, sampler=sampler),
            }
            for name, loss_fn in losses.items():
                h = torch.randn(n, d, requires_grad=True)
                w = torch.randn(v, d, requires_grad=True)
                loss = loss_fn(h, w)
                loss.backward()
                if not (torch.isfinite(loss) and h.grad is not None and w.grad is not None
                        and torch.isfinite(h.grad).all() and h.grad.abs().sum() > 0):
                    raise AssertionError(f"{name}: loss {loss.item()} or its gradient is wrong")
            return ", ".join(losses)

        @check("deferred checks")
        def _():  # the loop's checks: a bad target is reported when they are read
            h, w = torch.randn(3, 8), torch.randn(20, 8)
            with fs.deferred_checks() as checks:
                fs.full_softmax_loss(h, w, torch.tensor([1, 2, 3]))
                checks.raise_pending()
            try:
                fs.sampled_softmax_loss(h, w, torch.tensor([1, 2, 25]), num_sampled=4)
            except ValueError as e:
                if "25 (max offending)" not in str(e):
                    raise
            else:
                raise AssertionError("a target of 25 among 20 classes was accepted")
            return f"{fs.ops.device_reads()} device reads so far"

        @check("fused")
        def _():
            if not fs.losses.fused.HAS_TRITON:
                return "skipped: Triton (optional) is not installed"
            device = "cuda" if torch.cuda.is_available() else "cpu"
            # float64: the two paths sum in different orders, which float32 would show in
            # the last bits of near-zero gradients; float64 leaves only the maths to compare
            h = torch.randn(5, 16, device=device, dtype=torch.float64, requires_grad=True)
            w = torch.randn(40, 16, device=device, dtype=torch.float64, requires_grad=True)
            target = torch.randint(0, 40, (5,), device=device)
            fused = fs.full_softmax_loss(h, w, target, fused=True)
            fused.backward()
            grads = h.grad.clone(), w.grad.clone()
            h.grad = w.grad = None
            streamed = fs.full_softmax_loss(h, w, target, fused=False)
            streamed.backward()
            if not (torch.allclose(fused, streamed) and torch.allclose(grads[0], h.grad)
                    and torch.allclose(grads[1], w.grad)):
                raise AssertionError(f"fused loss {fused.item()} != streamed {streamed.item()}")
            return f"on {device}" + (", interpreted" if device == "cpu" else "")

        @check("model")
        def _():
            from fastsoftmax.models import Word2Vec

            words = [f"w{i}" for i in range(30)]
            g = torch.Generator().manual_seed(0)
            sentences = [[words[int(i)] for i in torch.randint(0, 30, (12,), generator=g)]
                         for _ in range(40)]
            model = Word2Vec(sentences, vector_size=16, window=3, min_count=1, hs=1,
                             negative=3, epochs=1, workers=1, seed=1)
            vectors = model.wv[words[0]]
            if len(vectors) != 16 or not all(abs(float(x)) < 1e3 for x in vectors):
                raise AssertionError(f"Word2Vec gave the vector {vectors}")
            with tempfile.TemporaryDirectory() as folder:  # the native corpus_file reader
                path = os.path.join(folder, "corpus.txt")
                with open(path, "w", encoding="utf-8") as f:
                    f.writelines(" ".join(s) + "\n" for s in sentences)
                from_file = Word2Vec(corpus_file=path, vector_size=16, window=3, min_count=1,
                                     hs=1, negative=3, epochs=1, workers=1, seed=1)
                # the reader runs in a thread of its own, where dispatch modes do not reach
                from fastsoftmax.models.word2vec import LineSentence, corpus_file

                list(corpus_file.batches(LineSentence(path), model.wv.key_to_index, 100))
            if (from_file.wv.vectors != model.wv.vectors).any():
                raise AssertionError("Word2Vec from corpus_file differs from the same sentences")
            # The GPU's update order (lockstep rounds), replayed on the CPU: another model.
            rounds = Word2Vec(sentences, vector_size=16, window=3, min_count=1, hs=1,
                              negative=3, epochs=1, workers=1, seed=1, round_size=16)
            if (rounds.wv.vectors == model.wv.vectors).all():
                raise AssertionError("Word2Vec(round_size=16) trained the sequential model")
            # Skip-gram with negative sampling alone: the default order there is minibatches of
            # shared negatives (update="auto"), its own op; "pairs" is word2vec.c's.
            orders = [Word2Vec(sentences, vector_size=16, window=3, min_count=1, sg=1,
                               negative=3, epochs=1, workers=1, seed=1, update=update)
                      for update in ("auto", "batched", "pairs")]
            if (orders[0].wv.vectors != orders[1].wv.vectors).any() or \
                    (orders[1].wv.vectors == orders[2].wv.vectors).all():
                raise AssertionError("Word2Vec(sg=1) in its default order is not shared negatives")
            return ("Word2Vec, 1 epoch, hs + negative sampling, from sentences and corpus_file, "
                    "in lockstep rounds, and skip-gram with shared negatives")

    @check("ops")
    def _():
        fused = (set() if fs.losses.fused.HAS_TRITON
                 else {"fused_softmax_stats", "fused_softmax_stats_backward"})
        missing = sorted(registered_ops() - seen.names - fused)
        if missing:
            raise AssertionError("these registered ops did not run: " + ", ".join(missing))
        return f"{len(seen.names)} ops ran: " + ", ".join(sorted(seen.names))

    print("smoke: " + (f"FAILED {', '.join(FAILED)}" if FAILED else "all checks passed"),
          flush=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
