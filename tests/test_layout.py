"""The package's layers: core -> hf -> scripts, no import cycle, and the deprecated old paths re-export and warn."""

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import east_hf

PACKAGE = Path(__file__).resolve().parents[1] / "east_hf"
LAYERS = ("east_hf.core", "east_hf.hf", "east_hf.scripts")

# The old top-level paths, each a module east_hf/<name>.py that re-exports its layer module and warns.
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


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every east_hf module a file imports, anywhere in it (lazy imports inside functions included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.startswith("east_hf.")}


GRAPH = {
    module_name(path): imports(path)
    for path in PACKAGE.rglob("*.py")
    if "metrics/macro_fbeta" not in str(path) and "metrics/mcc" not in str(path)  # evaluate scripts, loaded by path
}
GRAPH = {name: {dep for dep in deps if dep in GRAPH and dep != name} for name, deps in GRAPH.items()}


def layer(name: str) -> int | None:
    return next((i for i, prefix in enumerate(LAYERS) if name == prefix or name.startswith(prefix + ".")), None)


def test_each_layer_imports_only_the_layers_below_it():
    upward = [
        (name, dep)
        for name, deps in GRAPH.items()
        for dep in deps
        if layer(name) is not None and layer(dep) is not None and layer(dep) > layer(name)
    ]
    assert upward == []


def test_no_import_cycle_among_east_hf_modules():
    graph = {name: {dep for dep in deps if dep != "east_hf"} for name, deps in GRAPH.items() if name != "east_hf"}
    # a package imports its own submodules; a submodule importing its package's __init__ is not a cycle of files
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for dep in sorted(graph.get(name, ())):
            if dep.startswith(name + "."):
                continue
            if state.get(dep) == 1 and not name.startswith(dep + "."):
                return [*path, name, dep]
            if dep not in state and (found := visit(dep, [*path, name])):
                return found
        state[name] = 2
        return None

    cycles = [found for name in sorted(graph) if name not in state and (found := visit(name, []))]
    assert cycles == []


def test_core_imports_nothing_from_transformers_timm_or_evaluate():
    code = "import sys, east_hf, east_hf.core.loss, east_hf.core.decision, east_hf.core.annealing; " + (
        "print(sorted(m for m in ('transformers', 'timm', 'evaluate', 'datasets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_old_paths_are_the_top_level_modules():
    shims = {module_name(path) for path in PACKAGE.glob("*.py") if path.name != "__init__.py"}
    assert shims == set(MOVED)


def test_nothing_in_the_package_imports_an_old_path():
    users = {name: sorted(deps & set(MOVED)) for name, deps in GRAPH.items() if name not in MOVED}
    assert {name: deps for name, deps in users.items() if deps} == {}


def fresh_import(name: str):
    """Import ``name`` anew (a module runs, and warns, only on its first import), recording its warnings."""
    sys.modules.pop(name, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(name)
    return module, caught


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_reexports_its_layer_module(old):
    new = importlib.import_module(MOVED[old])
    module, caught = fresh_import(old)
    messages = [str(w.message) for w in caught if w.category is FutureWarning]
    assert messages == [f"{old} is deprecated: import from {MOVED[old]}; the old path is removed in east_hf 0.5"]
    assert module.__all__ == new.__all__ and new.__all__
    assert all(getattr(module, name) is getattr(new, name) for name in new.__all__)


def test_the_warning_points_at_the_importing_line():
    sys.modules.pop("east_hf.loss", None)
    with pytest.warns(FutureWarning, match="east_hf.loss is deprecated") as record:
        from east_hf.loss import EASTLoss
    assert EASTLoss is east_hf.EASTLoss
    assert [w.filename for w in record] == [__file__]


def test_old_submodule_paths_and_python_m_no_longer_work():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the old package path itself still imports, and warns
        for old, submodule in [("east_hf.models", "darknet"), ("east_hf.functional", "surrogate")]:
            with pytest.raises(ModuleNotFoundError, match=f"'{old}' is not a package"):
                importlib.import_module(f"{old}.{submodule}")
    out = subprocess.run([sys.executable, "-m", "east_hf.train", "--list_recipes"], capture_output=True, text=True)
    assert out.returncode == 1 and "python -m east_hf.train is removed: run `east-train`" in out.stderr
