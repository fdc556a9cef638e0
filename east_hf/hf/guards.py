"""Fault guards of ``EASTTrainer``: settings refused when the trainer is made, and non-finite training stopped.

Refused in one line before training: a warm start in epochs on a training set without a length, transformers'
``EarlyStoppingCallback`` beside the annealing callback, and uneven batch counts across processes. During training a
non-finite loss or a label out of range is flagged on the device (no host read in a training step) and raised where
the Trainer already synchronises (a training log, an evaluation, a save, the end of ``train``); a model with NaN or
inf parameters is never saved.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from transformers import EarlyStoppingCallback
from transformers.utils import logging as hf_logging

from east_hf.hf.callbacks import TemperatureAnnealingCallback
from east_hf.hf.dataset_stats import dataset_length

__all__ = [
    "NEAR_EMPTY_RECALL",
    "NonFiniteGuard",
    "check_early_stopping",
    "check_even_batches",
    "check_warm_start_length",
    "warn_near_empty_kept_model",
]

NEAR_EMPTY_RECALL = 0.05  # validation recall of a scored class below which the kept model is warned about
UNPREDICTED_NAMED = 10  # classes a warning names before it counts the rest: one line with many classes

logger = hf_logging.get_logger(__name__)


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


def warn_near_empty_kept_model(log_history: list[dict[str, Any]], best_step: int | None, binary: bool) -> str | None:
    """Warn (and return the message) when the model kept at the end finds almost none of a scored class on
    validation: recall below ``NEAR_EMPTY_RECALL`` for the positive class (``binary``) or for a class reported by
    name (``eval_recall_<name>``, e.g. the classes of a per-class beta). A precision-leaning target (F-beta with beta
    < 1) judged on a few dozen validation positives can keep an epoch that predicted a handful of them by luck; such a
    model predicts almost nothing on new data."""
    if best_step is None:
        return None
    evaluation = next((h for h in log_history if h.get("step") == best_step and "eval_loss" in h), None)
    if evaluation is None:
        return None
    keys = [k for k in evaluation if k.startswith("eval_recall_")] + (["eval_recall"] if binary else [])
    low = {
        k: evaluation[k] for k in keys if isinstance(evaluation[k], (int, float)) and evaluation[k] < NEAR_EMPTY_RECALL
    }
    if not low:
        return None
    which = ", ".join(f"{k.removeprefix('eval_')}={v:.3f}" for k, v in low.items())
    message = (
        f"The model kept (step {best_step}) finds almost none of a scored class on validation ({which}, below "
        f"{NEAR_EMPTY_RECALL}): a near-empty prediction that a few validation samples rewarded; check the test "
        "recall, and consider east_select_window 3 (the best mean over three evaluations)"
    )
    logger.warning(message)
    return message


def warn_unpredicted_kept_classes(
    unpredicted: dict[int, list[tuple[int, float]]] | None,
    best_step: int | None,
    id2label: dict | None,
    multi_label: bool = False,
    supported: dict[int, int] | None = None,
) -> str | None:
    """Warn (and return the message) when the model kept at the end never predicts a class (multi-label: a label)
    that has validation samples (``unpredicted``: per evaluation step, the (class, samples) pairs the trainer
    recorded; ``supported``: per step, how many classes have validation samples). Small or imbalanced data can leave
    a class that no run learned, whatever the loss; its recall and F-beta are 0. A single-label model that predicts
    one class for every validation row has learned nothing: the line says so, and what to try."""
    if not unpredicted or best_step is None or not unpredicted.get(best_step):
        return None
    what, many = ("label", "labels") if multi_label else ("class", "classes")
    classes = unpredicted[best_step]
    names = ", ".join(f"{(id2label or {}).get(k, k)} ({n:g} samples)" for k, n in classes[:UNPREDICTED_NAMED])
    if len(classes) > UNPREDICTED_NAMED:
        names += f" and {len(classes) - UNPREDICTED_NAMED} more {many}"
    if not multi_label and (supported or {}).get(best_step, 0) == len(classes) + 1:
        message = (
            f"The model kept (step {best_step}) predicts one class for every validation row, while {len(classes)} "
            f"other classes have validation samples ({names}): it tells no class apart; try a longer warm start "
            "(east_warm_start_epochs -1: until its own early stopping), a higher learning rate or more epochs, and "
            "compare --loss ce"
        )
        logger.warning(message)
        return message
    message = (
        f"The model kept (step {best_step}) never predicts a {what} that has validation samples: {names}; its "
        f"recall and F-beta of that {what} are 0 (too few training steps or samples of it: more epochs or a higher "
        "learning rate can help)"
    )
    logger.warning(message)
    return message


class NonFiniteGuard:
    """The non-finite guards of ``EASTTrainer`` (a mixin): the trainer calls ``_flag_nonfinite(loss)`` in every
    training step and provides ``east_loss`` and ``warm_start_loss`` (whose label faults are checked too)."""

    _nonfinite_step: torch.Tensor | None = None  # device scalar: the first step with a non-finite loss, -1 if none

    def _flag_nonfinite(self, loss: torch.Tensor) -> None:
        """Record the first step whose loss is NaN or inf, on the device (no host synchronisation)."""
        if self._nonfinite_step is None or self._nonfinite_step.device != loss.device:
            self._nonfinite_step = torch.full((), -1, dtype=torch.long, device=loss.device)
        bad = ~torch.isfinite(loss.detach())
        first = (self._nonfinite_step < 0) & bad
        self._nonfinite_step = torch.where(first, self.state.global_step + 1, self._nonfinite_step)

    def _raise_if_nonfinite(self) -> None:
        """Stop with a one-line error if any training step so far met a label out of range (recorded by the losses
        on the device, ``SetLoss.label_fault``) or had a non-finite loss (one sync for both)."""
        losses = (self.east_loss, self.warm_start_loss)
        faults = [loss.label_fault for loss in losses]
        if self.accelerator.num_processes == 1 and self._nonfinite_step is None and all(f is None for f in faults):
            return  # no training step yet
        device = self._nonfinite_step.device if self._nonfinite_step is not None else self.args.device
        lowest = torch.iinfo(torch.long).min
        none = torch.full((), lowest, dtype=torch.long, device=device)
        step = self._nonfinite_step
        # (3,) the first non-finite step negated (so that the maximum is the earliest; int64 min: none) and each
        # loss's largest label out of range (int64 min: none)
        flags = torch.stack(
            [
                none if step is None else torch.where(step >= 0, -step, none),
                *(none if fault is None else fault.to(device) for fault in faults),
            ]
        )
        if self.accelerator.num_processes > 1:  # every process raises, or none (a lone raise would hang the others)
            torch.distributed.all_reduce(flags, op=torch.distributed.ReduceOp.MAX)
        first, *largest = flags.tolist()
        for loss, fault in zip(losses, largest):
            loss.raise_if_label_fault(fault)
        if first != lowest:
            raise FloatingPointError(
                f"Expected a finite training loss, got NaN or inf at step {-first}: check the training data for NaN "
                "or inf, or lower the learning rate"
            )

    def _check_training_log(self, logs: dict[str, float]) -> None:
        """A training log (the Trainer has just synchronised to read the loss): raise recorded faults, and a
        non-finite gradient norm."""
        self._raise_if_nonfinite()
        grad_norm = logs.get("grad_norm")
        if isinstance(grad_norm, float) and not math.isfinite(grad_norm):
            raise FloatingPointError(
                f"Expected a finite gradient norm, got {grad_norm} by step {self.state.global_step}: check the "
                "training data for NaN or inf, or lower the learning rate"
            )

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False):
        """``Trainer.save_model``, refused (one line, nothing written) after a non-finite loss or with NaN / inf
        parameters: a model that cannot predict is never saved over a good one. Saves draw no progress bar."""
        self._raise_if_nonfinite()
        params = [p.detach() for p in self.model.parameters() if p.numel()]
        if params and not bool(torch.stack([torch.isfinite(p).all() for p in params]).all()):
            bad = next(n for n, p in self.model.named_parameters() if p.numel() and not bool(torch.isfinite(p).all()))
            raise FloatingPointError(
                f"Expected finite model parameters to save, got NaN or inf in {bad!r} at step "
                f"{self.state.global_step}: nothing was written"
            )
        # transformers' save_pretrained draws a "Writing model shards" bar on every save (each checkpoint, the final
        # model): noise beside the Trainer's own bars, so the switch transformers offers is off while saving.
        bars_were_on = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            return super().save_model(output_dir, _internal_call)
        finally:
            if bars_were_on:
                hf_logging.enable_progress_bar()
