"""Run folders: which checkpoints are complete, and whether a folder already holds a run.

A checkpoint is complete when it holds both the model weights and ``trainer_state.json``, which the Trainer writes
last but one (after the weights, the optimizer and the RNG state): a save killed part-way leaves a folder without it.
Pure ``pathlib``: nothing from transformers.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

__all__ = ["RUN_FILES", "complete_checkpoints", "is_complete_checkpoint", "last_complete_checkpoint", "run_files"]

logger = logging.getLogger(__name__)

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.safetensors",
)
# What a run leaves in its output folder; another run writing there would replace or delete them.
RUN_FILES = ("model.safetensors", "trainer_state.json", "all_results.json", "train_results.json", "test_results.json")


def is_complete_checkpoint(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a checkpoint folder with model weights and ``trainer_state.json``."""
    path = Path(path)
    return (path / "trainer_state.json").is_file() and any((path / name).is_file() for name in WEIGHT_FILES)


def _checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    folder = Path(output_dir)
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and _CHECKPOINT.match(p.name)]
    return sorted(found, key=lambda p: int(_CHECKPOINT.match(p.name).group(1)))


def complete_checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    """The complete ``checkpoint-<step>`` folders of ``output_dir``, oldest first."""
    return [p for p in _checkpoints(output_dir) if is_complete_checkpoint(p)]


def last_complete_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    """The complete checkpoint of the highest step in ``output_dir``, or None; incomplete ones after it (a save that
    was interrupted) are skipped with a warning naming them."""
    for path in reversed(_checkpoints(output_dir)):
        if is_complete_checkpoint(path):
            return path
        logger.warning(
            f"skipping incomplete checkpoint {path} (no trainer_state.json or weights: its save was cut off)"
        )
    return None


def run_files(output_dir: str | os.PathLike) -> list[str]:
    """The names of what a run left in ``output_dir`` (its results, model, state and checkpoints), sorted."""
    folder = Path(output_dir)
    found = [name for name in RUN_FILES if (folder / name).is_file()]
    return found + [p.name for p in _checkpoints(folder)]
