"""The package's layers: core -> hf -> scripts, no import cycle, and a package top that shows only the layers."""

import ast
import importlib
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "east_hf"
LAYERS = ("east_hf.core", "east_hf.hf", "east_hf.scripts")

# The old top-level paths, removed in 0.5; east_hf.train and east_hf.compare were also run with python -m.
OLD_PATHS = (
    "east_hf.functional",
    "east_hf.loss",
    "east_hf.annealing",
    "east_hf.decision",
    "east_hf.config",
    "east_hf.trainer",
    "east_hf.callbacks",
    "east_hf.cards",
    "east_hf.runs",
    "east_hf.models",
    "east_hf.data",
    "east_hf.metrics",
    "east_hf.cli",
    "east_hf.train",
    "east_hf.compare",
)
# The flat modules of east_hf.hf and east_hf.core's decision_* modules, moved into sub-packages in 0.6.
MOVED_PATHS = (
    "east_hf.hf.trainer",
    "east_hf.hf.callbacks",
    "east_hf.hf.build",
    "east_hf.hf.config_checks",
    "east_hf.hf.annealing_checks",
    "east_hf.hf.card_metadata",
    "east_hf.hf.predict_inputs",
    "east_hf.hf.preflight",
    "east_hf.hf.process_sum",
    "east_hf.hf.decision_tuning",
    "east_hf.core.decision_sweep",
)


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


def test_the_config_does_not_import_the_callback():
    """The callback and the config share their checks (east_hf.hf.config.checks): the config, plain data, reaches
    nothing of the callback's, directly or through another module."""
    reached, todo = set(), ["east_hf.hf.config.east_config"]
    while todo:
        for dep in GRAPH.get(todo.pop(), ()):
            if dep not in reached:
                reached.add(dep)
                todo.append(dep)
    assert "east_hf.hf.training.callbacks" not in reached


def test_the_data_layer_imports_nothing_from_the_models():
    """hf.models reads hf.data (rows, the cache, the tabular feature encoder); hf.data, lazy imports included, reaches
    no module of hf.models."""
    data = "east_hf.hf.data"
    models = "east_hf.hf.models"
    found = [
        (name, dep)
        for name, deps in GRAPH.items()
        if name == data or name.startswith(data + ".")
        for dep in deps
        if dep == models or dep.startswith(models + ".")
    ]
    assert found == []


def test_core_imports_nothing_from_transformers_timm_or_evaluate():
    code = "import sys, east_hf, east_hf.core.loss_registry, east_hf.core.decision.rule, east_hf.core.annealing; " + (
        "print(sorted(m for m in ('transformers', 'timm', 'evaluate', 'datasets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_trainer_subclasses_trainer_alone_and_owns_its_helpers():
    """EASTTrainer is composed of helper objects, not mixins that share private state: its only base is Trainer."""
    import transformers

    from east_hf.hf.training.trainer import EASTTrainer

    assert EASTTrainer.__bases__ == (transformers.Trainer,)


def test_the_package_top_holds_the_three_layers_and_its_init():
    top = {path.name for path in PACKAGE.iterdir() if path.name != "__pycache__"}
    assert top == {"__init__.py", "core", "hf", "scripts"}


@pytest.mark.parametrize("old", OLD_PATHS + MOVED_PATHS)
def test_an_old_path_no_longer_imports(old):
    with pytest.raises(ModuleNotFoundError, match=f"No module named '{old}'"):
        importlib.import_module(old)


def test_python_m_runs_the_scripts_from_their_layer():
    out = subprocess.run(
        [sys.executable, "-m", "east_hf.scripts.east_train", "--list_recipes"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "finetune_text" in out.stdout


def test_a_source_tree_that_shadows_the_install_finds_its_recipes_and_card_templates():
    """`pip install .` (not editable), then `python -m east_hf.scripts.east_train` from the clone's root: the clone's
    east_hf shadows the installed one and lacks the install's east_hf.recipes / east_hf.hub_cards mapping. Simulated
    with -I -S (no .pth file runs, so no editable finder maps them) and the repository first on sys.path."""
    site_packages = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    code = (
        f"import runpy, sys; sys.path[:0] = [{str(PACKAGE.parent)!r}]; sys.path += {site_packages!r}; "
        "from east_hf.hf.cards.model_card import TEMPLATE_PATH; print('template', TEMPLATE_PATH.is_file()); "
        "sys.argv = ['east_train', '--list_recipes']; "
        "runpy.run_module('east_hf.scripts.east_train', run_name='__main__', alter_sys=True)"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "template True" in out.stdout and "finetune_text" in out.stdout


MAX_HF_TOP_MODULES = 10  # east_hf.hf's top shows its rooms (sub-packages), not a flat list of helpers
MAX_FUNCTION_LINES = 60  # a function a reader can hold whole: name its steps past this


def test_the_hf_layer_shows_its_rooms():
    """A newcomer finds the trainer, its configuration, the cards and prediction from the tree alone."""
    hf = PACKAGE / "hf"
    modules = sorted(path.name for path in hf.glob("*.py"))
    rooms = {path.name for path in hf.iterdir() if (path / "__init__.py").is_file()}
    assert len(modules) <= MAX_HF_TOP_MODULES, modules
    assert {"training", "config", "cards", "predict", "data", "models", "metrics"} <= rooms
    assert (hf / "training" / "trainer.py").is_file() and (hf / "config" / "east_config.py").is_file()


def test_no_library_module_ends_the_process():
    """A process exit skips the interpreter's exit handlers (a Trainer integration's, a user's): only the command-line
    scripts decide how a process ends."""
    found = [
        module_name(path)
        for layer_dir in (PACKAGE / "core", PACKAGE / "hf")
        for path in layer_dir.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in ("_exit", "exit") and getattr(node.value, "id", "") == "os"
    ]
    assert found == []


def test_no_function_grows_past_its_bound():
    over = {
        f"{module_name(path)}.{node.name}": node.end_lineno - node.lineno + 1
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    }
    assert over == {}, f"Expected at most {MAX_FUNCTION_LINES} lines per function, got {over}: name its steps"


def test_every_package_is_listed_for_the_install():
    """pyproject.toml lists the packages a non-editable install ships: a sub-package missing there imports from a
    clone and fails after ``pip install .``."""
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {module_name(path) for path in PACKAGE.rglob("__init__.py")}
    assert found - listed == set()
