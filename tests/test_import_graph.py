"""No import loops inside fastsoftmax/.

Every module of the package is parsed with `ast` (nothing is imported), its import statements
become edges of a graph of fastsoftmax's modules, and every cycle of that graph is a failure
that names its modules and the lines of its imports.

The rule (what counts as an edge from module M):
- Every `import` statement of M, wherever it stands: at module level, in a class body, or in
  a function. An import moved into a function still ties the two modules together (it only
  postpones the loop to the first call), so it counts. Imports under `if TYPE_CHECKING:` run
  never and do not count.
- `import a.b.c` is an edge to `a.b.c` (the deepest of those that is a module of the tree).
- `from P import name`, with relative imports resolved against M's package: an edge to the
  submodule `P.name` when there is one (`from . import ops`), otherwise to `P` itself
  (`from .nn import HEADS`, `from .. import __version__`). Several names give several edges.
- Only modules of fastsoftmax count; torch, numpy and the standard library are leaves.

What is not an edge: a submodule's parent packages. Python runs `P/__init__.py` before any of
`P.x`, but that is not an import `P.x` makes: when `P.x` starts, `P` is either fully imported
or already importing (it is the one importing `P.x`), so it cannot loop. A package whose
`__init__` imports its own submodules to re-export them (`fastsoftmax/__init__.py` and
`fastsoftmax.nn`) is no loop by itself. It becomes one when the submodule explicitly imports
that package back (`from .. import Name`, `import fastsoftmax`): then, with the package
importing first, the submodule reads a partly run `__init__` and fails or sees a name
missing, depending on which module a user happens to import first. That is a loop here, as
any other.
"""

import ast
import os

import fastsoftmax

# The folder holding the fastsoftmax that the tests import: the tree's own under `make test`,
# the installed wheel's when the suite runs from a copy of tests/ outside the tree.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(fastsoftmax.__file__)))
PACKAGE = "fastsoftmax"
# Written by the build, not kept in git: modules (without imports) in a fresh checkout too.
BUILT = ("fastsoftmax._C", "fastsoftmax._build_info")


def module_files(root: str = ROOT) -> dict:
    """{dotted module name: path} of every module and package under root/fastsoftmax; a
    compiled extension (fastsoftmax/_C.abi3.so) is a module too, with no imports."""
    out = dict.fromkeys(BUILT)
    top = os.path.join(root, PACKAGE)
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if os.path.exists(os.path.join(folder, d, "__init__.py")))
        package = os.path.relpath(folder, root).replace(os.sep, ".")
        for name in sorted(files):
            if name.endswith(".py"):
                dotted = package if name == "__init__.py" else f"{package}.{name[:-3]}"
                out[dotted] = os.path.join(folder, name)
            elif name.endswith((".so", ".pyd")):
                out.setdefault(f"{package}.{name.split('.')[0]}", None)
    return out


def _under_type_checking(node, parents) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _deepest(name: str, modules) -> str:
    """The longest prefix of dotted `name` that is a module of the tree, or None."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def imports_of(module: str, path: str, modules) -> list:
    """[(imported module, line)] of `module`'s import statements, by the rule above."""
    tree = ast.parse(open(path, encoding="utf8").read(), path)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    is_package = os.path.basename(path) == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    edges = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or \
                _under_type_checking(node, parents):
            continue
        if isinstance(node, ast.Import):
            targets = [_deepest(alias.name, modules) for alias in node.names]
        else:
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets = []
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                targets.append(sub if sub in modules else _deepest(source, modules))
        edges += [(t, node.lineno) for t in targets if t is not None and t != module]
    return edges


def import_graph(root: str = ROOT) -> dict:
    """{module: {imported module: first line}} over the modules of root/fastsoftmax."""
    modules = module_files(root)
    graph = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, {})
        for target, line in imports_of(module, path, modules) if path else ():
            edges.setdefault(target, line)
    return graph


def cycles(graph: dict) -> list:
    """Every strongly connected component of more than one module, as one cycle through it
    (a list of modules, the first repeated at the end), found by Tarjan's algorithm."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_cycle_in(sorted(component), graph))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _cycle_in(component, graph) -> list:
    """A shortest cycle through the first module of a strongly connected component."""
    members, start = set(component), component[0]
    paths, queue = {start: [start]}, [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w == start:
                return paths[v] + [start]
            if w in members and w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    raise AssertionError(f"no cycle through {start}")


def describe(cycle, graph) -> str:
    steps = [f"{a} (line {graph[a][b]}) -> {b}" for a, b in zip(cycle, cycle[1:])]
    return "; ".join(steps)


def test_the_graph_sees_relative_and_submodule_imports():
    graph = import_graph()
    assert "fastsoftmax.ops" in graph["fastsoftmax"]  # from . import ..., ops
    assert "fastsoftmax._loader" in graph["fastsoftmax.ops"]  # from .. import _loader
    assert "fastsoftmax.models" in graph["fastsoftmax.demo"]  # inside a function


def test_a_loop_is_found_and_named(tmp_path):
    package = tmp_path / PACKAGE
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .a import A\n")
    (package / "a.py").write_text("from .sub import b\nA = 1\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("def f():\n    from ..a import A\n    return A\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from . import a\n")
    graph = import_graph(str(tmp_path))
    found = cycles(graph)
    assert found == [["fastsoftmax.a", "fastsoftmax.sub.b", "fastsoftmax.a"]], found
    assert describe(found[0], graph) == ("fastsoftmax.a (line 1) -> fastsoftmax.sub.b; "
                                         "fastsoftmax.sub.b (line 2) -> fastsoftmax.a")
    assert "fastsoftmax.a" not in graph["fastsoftmax.c"]  # TYPE_CHECKING: never runs


def test_no_import_loops():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import loops in fastsoftmax/:\n" + "\n".join(
        describe(c, graph) for c in found)


# The layers, top to bottom: a module may import its own layer and those below it, never one
# above. Every module of the tree but the package itself belongs to exactly one layer (a new
# module needs one here). fastsoftmax/__init__.py gathers the public face of every layer and
# stands outside the order; a module importing it back is test_no_import_loops's business.
LAYERS = (
    ("cli", ("fastsoftmax.cli", "fastsoftmax.demo")),
    ("models", ("fastsoftmax.models",)),
    ("nn/functional", ("fastsoftmax.nn", "fastsoftmax.functional", "fastsoftmax.optim",
                       "fastsoftmax.vocab_parallel", "fastsoftmax.integrations")),
    ("losses", ("fastsoftmax.losses", "fastsoftmax.samplers", "fastsoftmax.tree")),
    ("ops", ("fastsoftmax.ops",)),
    ("base", ("fastsoftmax._loader", "fastsoftmax._errors", "fastsoftmax.atomic",
              "fastsoftmax._version", "fastsoftmax._build_info", "fastsoftmax._C")),
)


def layer_of(module: str):
    """(rank, name) of module's layer, rank 0 the top; None for the package itself."""
    if module == PACKAGE:
        return None
    for rank, (name, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank, name
    raise AssertionError(f"{module} is in no layer of LAYERS")


def upward_imports(graph: dict) -> list:
    """'A (line n) -> B' for every import of a module from a layer above its own."""
    found = []
    for module in sorted(graph):
        own = layer_of(module)
        for target, line in sorted(graph[module].items()):
            theirs = layer_of(target)
            if own is not None and theirs is not None and theirs[0] < own[0]:
                found.append(f"{module} ({own[1]}, line {line}) -> {target} ({theirs[1]})")
    return found


def private_imports_of_models(root: str = ROOT) -> list:
    """'module line n: name' for every private module or name that a module under
    fastsoftmax/models/ imports from outside models/."""
    modules = module_files(root)
    found = []
    for module, path in sorted(modules.items()):
        if path is None or not module.startswith(PACKAGE + ".models"):
            continue
        tree = ast.parse(open(path, encoding="utf8").read(), path)
        package = module if os.path.basename(path) == "__init__.py" else \
            module.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                pairs = [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)] \
                    if node.level else []
                source = ".".join(base + ([node.module] if node.module else []))
                pairs = [(source, alias.name) for alias in node.names]
            else:
                continue
            for source, name in pairs:
                if not source.startswith(PACKAGE) or source.startswith(PACKAGE + ".models"):
                    continue
                dotted = source if name is None else f"{source}.{name}"
                parts = dotted.split(".")[1:]
                if any(p.startswith("_") and not p.startswith("__") for p in parts):
                    found.append(f"{module} line {node.lineno}: {dotted}")
    return found


def test_the_layers_cover_every_module():
    for module in import_graph():
        layer_of(module)  # raises for a module of no layer


def test_no_layer_imports_a_layer_above_it():
    """cli -> models -> nn/functional -> losses -> ops, each importing only downwards."""
    found = upward_imports(import_graph())
    assert not found, "imports from a higher layer:\n" + "\n".join(found)


def test_an_upward_import_is_found():
    graph = {"fastsoftmax.losses.full": {"fastsoftmax.nn": 3},
             "fastsoftmax.nn": {"fastsoftmax.losses.full": 1}}
    assert upward_imports(graph) == [
        "fastsoftmax.losses.full (losses, line 3) -> fastsoftmax.nn (nn/functional)"]


def test_models_import_only_public_names_from_outside_models():
    found = private_imports_of_models()
    assert not found, "private names imported into models/:\n" + "\n".join(found)


def test_a_private_import_of_a_model_is_found(tmp_path):
    package = tmp_path / PACKAGE
    (package / "models" / "lm").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "models" / "__init__.py").write_text("from .lm import _own\n")
    (package / "models" / "lm" / "__init__.py").write_text(
        "from ...losses._shapes import check_size\nfrom ...nn import _SHARED, HEADS\n"
        "from ... import _atomic\nfrom ..._atomic import atomic_path\n")
    assert private_imports_of_models(str(tmp_path)) == [
        "fastsoftmax.models.lm line 1: fastsoftmax.losses._shapes.check_size",
        "fastsoftmax.models.lm line 2: fastsoftmax.nn._SHARED",
        "fastsoftmax.models.lm line 3: fastsoftmax._atomic",
        "fastsoftmax.models.lm line 4: fastsoftmax._atomic.atomic_path"]
