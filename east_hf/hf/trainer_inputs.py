"""What ``EASTTrainer`` is given, read as the Trainer reads it: its arguments after ``args`` by name, training and
evaluation sets whose label column holds lists of label ids as multi-hot rows, and the entries of a row the model takes
(the first-batch check collates those alone, as the Trainer's dataloaders do with ``remove_unused_columns``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from east_hf.hf.build import multi_hot_datasets

__all__ = ["TRAINER_ARGUMENTS", "model_collator", "trainer_arguments"]

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
    (``east_hf.hf.build.multi_hot_datasets``)."""
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
