"""Sphinx configuration of pt_onnxscript's documentation site.

Build it with ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (the
``docs`` extra: Sphinx, pydata-sphinx-theme, MyST-NB). The notebooks are rendered with
their committed outputs (nothing is executed); the table of translations is generated from
the registry at each build (``_ext/translations_table.py``).
"""

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "pt_onnxscript"
author = "the pt_onnxscript developers"
copyright = "2026, the pt_onnxscript developers"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "translations_table",
]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
nb_execution_mode = "off"  # the notebooks' committed outputs, checked by tests/test_notebooks.py
autodoc_member_order = "bysource"
autodoc_typehints = "none"
html_theme = "pydata_sphinx_theme"
html_title = "pt_onnxscript"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
suppress_warnings = ["myst.header"]


def _copy_notebooks() -> None:
    """The repository's notebooks/ into the site's source (notebooks/ is generated here)."""
    target = HERE / "notebooks"
    target.mkdir(exist_ok=True)
    for notebook in sorted((HERE.parent / "notebooks").glob("*.ipynb")):
        shutil.copyfile(notebook, target / notebook.name)


_copy_notebooks()
