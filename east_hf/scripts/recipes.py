"""The recipes installed with east_hf (``east_hf.recipes``, the repository's ``recipes/``): found by name, listed.

Kept apart from the parser (``east_hf.scripts.arguments``, over transformers' ``HfArgumentParser``) so that
``east-train --list_recipes`` answers without importing transformers.
"""

from __future__ import annotations

from pathlib import Path

from east_hf.hf.package_data import package_folder

__all__ = ["demo_recipe_path", "packaged_recipes", "recipe_list", "resolve_recipe"]


def packaged_recipes() -> dict[str, Path]:
    """The recipes installed with the package (``east_hf.recipes``, the repository's ``recipes/``), by name."""
    return {p.stem: p for p in sorted(package_folder("recipes").iterdir()) if p.suffix == ".yaml"}


def demo_recipe_path() -> Path:
    """The demo recipe shipped inside the package (``east_hf.recipes``: ``demo.yaml``)."""
    return packaged_recipes()["demo"]


def resolve_recipe(name: str) -> str:
    """A recipe path as given, or the packaged recipe of that name (``cifar10_f1`` or ``cifar10_f1.yaml``)."""
    if Path(name).is_file():
        return name
    recipes = packaged_recipes()
    stem = name.removesuffix(".yaml")
    return str(recipes[stem]) if "/" not in name and stem in recipes else name


def recipe_list() -> str:
    """What ``east-train --list_recipes`` prints: each packaged recipe's name and the first line of its comment."""
    lines = ["Recipes shipped with east_hf (east-train NAME):"]
    for name, path in packaged_recipes().items():
        first = next((line.lstrip("# ").strip() for line in path.read_text().splitlines() if line.startswith("#")), "")
        lines.append(f"  {name:<34} {first}")
    return "\n".join(lines)
