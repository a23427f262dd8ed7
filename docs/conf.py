"""Sphinx configuration of fastsoftmax's documentation (`make docs`)."""

import os
import re
import sys

# The docs document the checkout they sit in: its fastsoftmax (built in place by `make build`),
# not an installed copy.
sys.path.insert(0, os.path.abspath(".."))

import fastsoftmax  # noqa: E402

project = "fastsoftmax"
copyright = "the fastsoftmax authors"
release = fastsoftmax.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# The Markdown pages (moved from the README) use GitHub's Markdown: tables, `$` is no maths.
myst_enable_extensions = ["deflist"]
myst_heading_anchors = 3

# Docstrings are written with `code` in single backticks, and Google-style sections (Args:).
default_role = "code"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# Quotes in docstrings are Python's ('mean', 'uniform'): keep them straight.
smartquotes = False

autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# Signatures hold default values such as `torch.float32`, shown as written.
autodoc_preserve_defaults = True

html_theme = "furo"
html_title = f"fastsoftmax {release}"


# Docstrings give tensor shapes in brackets, with * for any leading dims: input [*, D],
# target [*] or [*, T]. In reStructuredText a * starts emphasis, so a shape would turn the text
# up to the next one italic; inside brackets that hold no `code`, a * is a literal star.
_SHAPE = re.compile(r"\[([^\[\]`]*)\]")


def _literal_shape_stars(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        lines[i] = _SHAPE.sub(lambda m: "[" + m.group(1).replace("*", "\\*") + "]", line)


def setup(app):
    app.connect("autodoc-process-docstring", _literal_shape_stars)
