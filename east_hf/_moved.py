"""Old import paths of modules that live in a layer package: ``east_hf.loss`` is ``east_hf.core.loss``.

A meta-path finder maps each old name to the module at its new path, so that ``import east_hf.trainer``,
``from east_hf.functional import fbeta`` and ``python -m east_hf.train`` keep working and give the very same module
objects (one class, one registry) as the new paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

MOVED = {
    "east_hf.functional": "east_hf.core",
    "east_hf.loss": "east_hf.core.loss",
    "east_hf.annealing": "east_hf.core.annealing",
    "east_hf.decision": "east_hf.core.decision",
    "east_hf.config": "east_hf.hf.config",
    "east_hf.trainer": "east_hf.hf.trainer",
    "east_hf.callbacks": "east_hf.hf.callbacks",
    "east_hf.cards": "east_hf.hf.cards",
    "east_hf.runs": "east_hf.hf.checkpoints",
    "east_hf.models": "east_hf.hf.models",
    "east_hf.data": "east_hf.hf.data",
    "east_hf.metrics": "east_hf.hf.metrics",
    "east_hf.cli": "east_hf.scripts.arguments",
    "east_hf.train": "east_hf.scripts.east_train",
    "east_hf.compare": "east_hf.scripts.east_compare",
}


def new_name(name: str) -> str | None:
    """The current path of a module named by an old path (submodules included), or None."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return None


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old path as the module at its new path, registered under both names."""

    def find_spec(self, fullname, path=None, target=None):
        target_name = new_name(fullname)
        if target_name is None or importlib.util.find_spec(target_name) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module(new_name(spec.name))
        self._real_spec = module.__spec__  # the import system overwrites __spec__ next; exec_module restores it
        return module

    def exec_module(self, module):
        module.__spec__ = self._real_spec

    def get_code(self, fullname):
        """The code of the module at the new path, for ``python -m <old path>``."""
        target_name = new_name(fullname)
        return importlib.util.find_spec(target_name).loader.get_code(target_name)


def install() -> None:
    """Put the finder first: after ``import east_hf.models`` the path finder would otherwise find
    ``east_hf.models.darknet`` in the new package's folder and load a second copy under the old name."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
