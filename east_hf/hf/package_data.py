"""The folders east_hf ships beside its code: the recipes (``recipes/``) and the card templates (``hub_cards/``).

Both live at the top of the repository. An install maps them into the package as ``east_hf.recipes`` and
``east_hf.hub_cards`` (pyproject.toml's ``package-dir``). A source tree on ``sys.path`` has no such mapping: run from
a clone's root (``python -m east_hf.scripts.east_train``, ``torchrun``, ``accelerate launch``) or with
``PYTHONPATH=.``, its ``east_hf`` shadows the installed one, and the folders are found beside the ``east_hf`` source
package instead. Imports only the standard library, so that ``east-train --list_recipes`` stays light.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

__all__ = ["PACKAGE_FOLDERS", "package_folder"]

PACKAGE_FOLDERS = ("recipes", "hub_cards")
"""The top-level folders installed as ``east_hf.<name>``."""


def package_folder(name: str) -> Path:
    """The folder ``name`` (``"recipes"`` or ``"hub_cards"``): the installed ``east_hf.<name>``, or, when east_hf is
    imported from a source tree, the repository's top-level ``<name>/`` beside the ``east_hf`` source package."""
    if name not in PACKAGE_FOLDERS:
        raise ValueError(f"Expected one of east_hf's folders {PACKAGE_FOLDERS}, got {name!r}")
    try:
        return Path(str(importlib.resources.files(f"east_hf.{name}")))
    except ModuleNotFoundError:
        source = Path(__file__).resolve().parents[2] / name  # east_hf/hf/package_data.py -> the repository
        if source.is_dir():
            return source
        raise ModuleNotFoundError(
            f"east_hf's {name}/ folder is neither installed as east_hf.{name} nor beside the east_hf source package "
            f"({source}): reinstall east_hf (`pip install .` in a clone)"
        ) from None
