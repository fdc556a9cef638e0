"""What ``EASTTrainer`` is given, and the settings it refuses when it is made, each in one line, before training.

Its arguments after ``args`` are read by name as the Trainer reads them; training and evaluation sets whose label
column holds lists of label ids become multi-hot rows; the first-batch check collates only the entries of a row the
model takes, as the Trainer's dataloaders do with ``remove_unused_columns``.

Refused: a warm start in epochs on a training set without a length, transformers' ``EarlyStoppingCallback`` beside
the annealing callback, uneven batch counts across processes, and a sharded model (FSDP1, DeepSpeed ZeRO-3) with the
annealing's weight copies; FSDP asked for where accelerate does not shard is one warning line. (The checks of the
first batch and of a resumed checkpoint's schedule are in ``east_hf.hf.training.resume``.)
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from transformers import EarlyStoppingCallback

from east_hf.hf.config.build import multi_hot_datasets
from east_hf.hf.devices import fsdp_request, runs_on_cpu
from east_hf.hf.training.callbacks import TemperatureAnnealingCallback
from east_hf.hf.training.dataset_stats import dataset_length

__all__ = [
    "TRAINER_ARGUMENTS",
    "check_distributed",
    "check_early_stopping",
    "check_even_batches",
    "check_sharding",
    "check_unsharded",
    "check_warm_start_length",
    "model_collator",
    "sharding",
    "trainer_arguments",
]

logger = logging.getLogger(__name__)

TRAINER_ARGUMENTS = (
    "data_collator",
    "train_dataset",
    "eval_dataset",
    "processing_class",
    "model_init",
    "compute_loss_func",
    "compute_metrics",
)
"""``Trainer.__init__``'s positional arguments after ``args``, in order, up to ``compute_metrics``."""


def trainer_arguments(model: Any, pargs: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The Trainer's arguments after ``args`` by name: ``pargs`` in ``TRAINER_ARGUMENTS``' order, then ``kwargs``; a
    training or evaluation set of label-id lists becomes multi-hot rows of the model's labels
    (``east_hf.hf.config.build.multi_hot_datasets``)."""
    if len(pargs) > len(TRAINER_ARGUMENTS):
        raise TypeError(
            f"Expected at most {len(TRAINER_ARGUMENTS)} positional arguments after args "
            f"({', '.join(TRAINER_ARGUMENTS)}), got {len(pargs)}; pass the others by name"
        )
    given = dict(zip(TRAINER_ARGUMENTS, pargs)) | dict(kwargs)
    return given | multi_hot_datasets(model, given)


def model_collator(
    model: Any, collator: Callable[[list], dict], remove_unused_columns: bool, label_names: Sequence[str] = ()
) -> Callable[[list], dict]:
    """``collator`` over the entries of each row that the model's ``forward`` takes and the labels (``label``,
    ``label_ids``, ``label_names``), as the Trainer's dataloaders keep them with ``remove_unused_columns`` (a tokenized
    set's text column is dropped); rows that are not mappings, or every entry without it, as they are."""
    forward = getattr(model, "forward", None)
    if not remove_unused_columns or forward is None:
        return collator
    kept = {*inspect.signature(forward).parameters, "label", "label_ids", *label_names}

    def collate(rows: list) -> dict:
        return collator(
            [{k: v for k, v in row.items() if k in kept} if isinstance(row, Mapping) else row for row in rows]
        )

    return collate


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


def sharding(accelerator) -> str | None:
    """How ``accelerator`` shards the model across processes: ``"FSDP2"``, ``"FSDP"`` (version 1),
    ``"DeepSpeed ZeRO-3"``, or None (each process holds the whole model: one device, DDP, ZeRO-1/2)."""
    state = accelerator.state
    kind = str(getattr(state, "distributed_type", ""))
    if kind.endswith("FSDP"):
        return "FSDP2" if getattr(getattr(state, "fsdp_plugin", None), "fsdp_version", 1) == 2 else "FSDP"
    plugin = getattr(state, "deepspeed_plugin", None)
    if kind.endswith("DEEPSPEED") and getattr(plugin, "zero_stage", None) == 3:
        return "DeepSpeed ZeRO-3"
    return None


def check_sharding(args: Any, accelerator, annealing: TemperatureAnnealingCallback | None) -> None:
    """Refuse the annealing's weight copies where a sharded model makes them wrong or whole on every process.

    A stage's best weights (``east_restore_best_per_stage``) are ``trainable_state_dict`` of the model as each
    process holds it: under FSDP2 that is the process's own shard of each parameter (``DTensor``), copied and
    restored as such (measured with two gloo processes: each keeps half the parameters, and a restore gives back the
    forward pass of the copied weights); under FSDP1 a full state dict gathered on every process, and under ZeRO-3
    empty placeholders: both refused. The moving average (``east_ema_decay``, a deep copy updated in place) is
    refused under any sharding. FSDP asked for (the ``fsdp`` flag or accelerate's ``ACCELERATE_USE_FSDP``) where
    accelerate does not shard is one warning line, since nothing is sharded and the run is otherwise correct; on CPU
    processes the config says it when it is made (``east_hf.hf.devices.resolve_devices``), before the model loads."""
    kind = sharding(accelerator)
    request = fsdp_request(args)
    if request and kind not in ("FSDP", "FSDP2") and not runs_on_cpu(args):
        logger.warning(
            f"{request} is set, but accelerate runs {accelerator.state.distributed_type}: the model is not sharded; "
            "each process trains a whole copy"
        )
    if kind is None or annealing is None:
        return
    restore = annealing.restore_best_per_stage and kind != "FSDP2"
    copies = [
        name for name, on in (("east_restore_best_per_stage", restore), ("east_ema_decay", annealing.ema_decay)) if on
    ]
    if copies:
        fix = "fsdp_version 2 (each process keeps its shard)" if restore and kind == "FSDP" else "DDP"
        raise ValueError(
            f"Expected {' and '.join(copies)} off with a model sharded by {kind} (the annealing's weight copies would "
            f"be whole on every process or empty), got {', '.join(copies)} on; turn them off, or train with {fix}"
        )


def check_unsharded(accelerator, what: str) -> None:
    """Refuse ``what`` (an edit of the weights in place, e.g. a decision rule folded into the head's bias) on a model
    sharded across processes, where no process holds the whole head."""
    kind = sharding(accelerator)
    if kind is not None:
        raise ValueError(f"Expected an unsharded model for {what}, got one sharded by {kind}")


def check_distributed(args: Any, accelerator, annealing: TemperatureAnnealingCallback | None) -> None:
    """The checks of a run across processes, once the accelerator is made: ``check_even_batches`` and
    ``check_sharding``."""
    check_even_batches(accelerator.num_processes, accelerator.even_batches)
    check_sharding(args, accelerator, annealing)
