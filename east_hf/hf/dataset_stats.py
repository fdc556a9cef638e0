"""What the trainer reads of a data set before training: its length, its training labels' class counts (the priors of
``wce`` and ``la``) and the size of the validation set behind the anneal monitor. Reads a label column without running
a data set's transforms wherever the data set allows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["dataset_length", "training_class_counts", "validation_size"]


def dataset_length(dataset: Any) -> int | None:
    """The number of samples of a data set, or None without a length (an ``IterableDataset``)."""
    try:
        return len(dataset)
    except TypeError:
        return None


def training_class_counts(dataset: Any, num_classes: int | None) -> list[int]:
    """Training samples per class, the priors of ``wce`` and ``la`` when ``east_class_priors`` is not given.

    A ``datasets.Dataset``'s ``labels`` / ``label`` column is read as one Arrow column (a ``select`` or ``shuffle``
    applied by one Arrow take): no image is decoded and no ``set_transform`` runs. A ``targets`` attribute with one
    label per sample (torchvision's ``ImageFolder``, ``CIFAR10``) is read as it is. Any other data set is read row
    by row, ``dataset[i]["labels"]`` (its transforms run). A data set without a length (an ``IterableDataset``, a
    stream) cannot be counted: the error names ``east_class_priors``.
    """
    size = None if dataset is None else dataset_length(dataset)
    if not size:
        got = (
            "no training set"
            if dataset is None
            else f"a {type(dataset).__name__} " + ("without a length" if size is None else "without samples")
        )
        raise ValueError(
            "Expected east_class_priors (class counts or priors: a list, a {class: count} mapping or a .json / .csv "
            f"file) for 'wce' / 'la' with a training set that cannot be counted, got {got}"
        )
    column_names = getattr(dataset, "column_names", None)
    column = next((c for c in ("labels", "label") if column_names and c in column_names), None)
    if column is not None and hasattr(dataset, "with_format"):
        from east_hf.hf.data.rows import read_column  # an indices mapping applied by one Arrow take, not row by row

        labels = torch.tensor(read_column(dataset, column).to_numpy())  # no Python object per row
    elif (
        isinstance(targets := getattr(dataset, "targets", None), (list, tuple, torch.Tensor)) and len(targets) == size
    ):
        labels = torch.as_tensor(targets)
    else:
        first = dataset[0]
        if not isinstance(first, Mapping) or "labels" not in first:
            got = f"keys {sorted(first)}" if isinstance(first, Mapping) else f"a {type(first).__name__}"
            raise ValueError(
                "Expected training samples with a 'labels' column to count the classes' priors, got samples with "
                f"{got}; or pass east_class_priors"
            )
        labels = torch.as_tensor([int(dataset[i]["labels"]) for i in range(size)])
    labels = labels[labels != -100]
    width = max(num_classes or 0, int(labels.max()) + 1 if len(labels) else 0)
    return torch.bincount(labels, minlength=width).tolist()


def validation_size(eval_dataset: Any, anneal_key: str) -> int | None:
    """The number of samples behind the anneal monitor ``anneal_key``: the length of ``eval_dataset``, or with a
    mapping of evaluation sets (metrics ``eval_<name>_*``) the length of the one the key names; None where unknown
    (no such set, or an iterable dataset without a length)."""
    if isinstance(eval_dataset, Mapping):
        names = [name for name in eval_dataset if anneal_key.startswith(f"eval_{name}_")]
        eval_dataset = eval_dataset[max(names, key=len)] if names else None
    return None if eval_dataset is None else dataset_length(eval_dataset)
