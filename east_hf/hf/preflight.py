"""Settings ``EASTTrainer`` refuses when it is made, each in one line, before training.

A warm start in epochs on a training set without a length, transformers' ``EarlyStoppingCallback`` beside the
annealing callback, and uneven batch counts across processes. (The checks of the first batch and of a resumed
checkpoint's schedule are in ``east_hf.hf.resume``.)
"""

from __future__ import annotations

from typing import Any

from transformers import EarlyStoppingCallback

from east_hf.hf.callbacks import TemperatureAnnealingCallback
from east_hf.hf.dataset_stats import dataset_length

__all__ = ["check_early_stopping", "check_even_batches", "check_warm_start_length"]


def check_warm_start_length(annealing: TemperatureAnnealingCallback | None, train_dataset: Any) -> None:
    """A warm start measured in epochs needs the length of an epoch: refuse one on a training set without a length
    (an ``IterableDataset``) now, with the settings that work, rather than when training begins."""
    epochs = None if annealing is None else annealing.schedule.warm_start_epochs
    if epochs is not None and train_dataset is not None and dataset_length(train_dataset) is None:
        raise ValueError(
            f"Expected east_warm_start_steps for a training set without a length ({type(train_dataset).__name__}: "
            f"east_warm_start_epochs={epochs:g} cannot be turned into steps), got None; or east_warm_start_epochs=-1 "
            "(until its own early stopping) or east_warm_start='none'"
        )


def check_even_batches(num_processes: int, even_batches: bool) -> None:
    """Refuse uneven batch counts across processes: every training step all-reduces the loss statistics and every
    evaluation batch its finiteness check, so a process that runs out of batches first would leave the others waiting
    at a collective forever. ``even_batches=True`` (accelerate's default) pads the last batches instead."""
    if num_processes > 1 and not even_batches:
        raise ValueError(
            f"Expected accelerator_config={{'even_batches': True}} with {num_processes} processes (EASTTrainer sums "
            "statistics across processes at every step and evaluation batch, so uneven batch counts would hang), "
            "got even_batches=False"
        )


def check_early_stopping(callbacks: list) -> None:
    """Refuse transformers' ``EarlyStoppingCallback`` beside the annealing callback: it watches
    ``metric_for_best_model`` with its own patience and ends training inside a stage, before the annealing's stopping
    criterion, so the later (colder) stages never run. Without annealing it is allowed: the run's only early stopping.
    ``callbacks`` holds instances or classes, as ``Trainer(callbacks=...)`` takes them."""

    def of(cls: type) -> list:
        return [c for c in callbacks if isinstance(c, cls) or (isinstance(c, type) and issubclass(c, cls))]

    stopping = of(EarlyStoppingCallback)
    if stopping and of(TemperatureAnnealingCallback):
        name = getattr(stopping[0], "__name__", type(stopping[0]).__name__)
        raise ValueError(
            "Expected no EarlyStoppingCallback with temperature annealing (EAST's early stopping is east_patience "
            f"within a stage and east_stage_patience across stages), got {name}; remove it, or set "
            "east_annealing=False to make it the only early stopping"
        )
