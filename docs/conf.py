"""Sphinx configuration of the bayeskern documentation (``make docs``).

Why Sphinx rather than MkDocs: the docstrings are numpydoc with ``.. math::`` blocks and
``:class:``/``:func:`` roles, which Sphinx's autodoc + numpydoc render natively; MyST-NB reads
the results pages (MyST markdown) and the notebooks. Notebooks are rendered with their stored
outputs and never executed (``nb_execution_mode = "off"``): they are long MCMC runs. MyST-NB is
used instead of nbsphinx because nbsphinx needs pandoc, which is not on PyPI.

``make docs`` builds with ``-W --keep-going``: any warning fails the build.
"""

import shutil
from pathlib import Path

import bayeskern
import bayeskern.cli

ROOT = Path(__file__).resolve().parent.parent

project = "bayeskern"
copyright = "bayeskern authors, BSD-3-Clause"
version = release = bayeskern.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_nb",
]

# the notebooks live in ../notebooks (the repository layout); copy them into the source tree
_nb_dir = Path(__file__).parent / "notebooks"
_nb_dir.mkdir(exist_ok=True)
for _nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
    shutil.copy2(_nb, _nb_dir / _nb.name)

# the command line's help, generated from its parser, for cli.md
_gen = Path(__file__).parent / "_generated"
_gen.mkdir(exist_ok=True)
_parser = bayeskern.cli.build_parser()
_help = [_parser.format_help()]
for _name, _sub in _parser._subparsers._group_actions[0].choices.items():
    _help += [f"\n$ bayeskern {_name} --help\n", _sub.format_help()]
(_gen / "cli_help.txt").write_text("".join(_help))

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
templates_path = ["_templates"]
exclude_patterns = ["_build", "_generated", "README.md", "**/.ipynb_checkpoints"]
root_doc = "index"

# notebooks: render the stored outputs, never execute (they are long MCMC runs)
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "none"  # the numpydoc Parameters sections carry the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

html_theme = "alabaster"
html_title = "bayeskern"


def _skip_member(app, what, name, obj, skip, options):
    # scikit-learn generates set_{fit,predict,score,...}_request on every estimator class
    if name.startswith("set_") and name.endswith("_request"):
        return True
    # other libraries' objects: re-exports (diagnostics.InferenceData is ArviZ's) and methods
    # inherited from scikit-learn (get_params, score, ...), documented by scikit-learn
    module = getattr(obj, "__module__", None)
    if isinstance(module, str) and not module.startswith("bayeskern"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
