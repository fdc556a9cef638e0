"""What the trainer reads of a data set before training: its length, its training labels' class counts (the priors of
``wce`` and ``la``), the validation labels' class counts where they can be read cheaply (a class absent there can only
score 0) and the size of the validation set behind the anneal monitor. Reads a label column without running a data
set's transforms wherever the data set allows it, and checks labels as the losses do before counting them.

Multi-label sets (each label a multi-hot row of L values 0 / 1, -100 for an entry that does not count) are counted
per label: ``training_label_counts`` gives each label's positives and labelled entries, the priors of the multi-label
``wce`` (``pos_weight``) and ``la``; ``has_multi_hot_labels`` tells such a set from a multi-class one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from east_hf.core import check_labels

__all__ = [
    "absent_classes",
    "column_class_counts",
    "dataset_length",
    "has_multi_hot_labels",
    "labels_without_transforms",
    "training_class_counts",
    "training_label_counts",
    "validation_size",
]


def dataset_length(dataset: Any) -> int | None:
    """The number of samples of a data set, or None without a length (an ``IterableDataset``)."""
    try:
        return len(dataset)
    except TypeError:
        return None


def _label_column(dataset: Any, size: int, rows: bool) -> torch.Tensor | None:
    """The labels of a data set without running its transforms where it allows it: a ``datasets.Dataset``'s
    ``labels`` / ``label`` column as one Arrow column (a ``select`` or ``shuffle`` applied by one Arrow take), or a
    ``targets`` attribute with one label per sample (torchvision's ``ImageFolder``, ``CIFAR10``). Otherwise, with
    ``rows``, ``dataset[i]["labels"]`` row by row (its transforms run); without, None."""
    column_names = getattr(dataset, "column_names", None)
    column = next((c for c in ("labels", "label") if column_names and c in column_names), None)
    if column is not None and hasattr(dataset, "with_format"):
        from east_hf.hf.data.rows import read_column  # an indices mapping applied by one Arrow take, not row by row

        return _arrow_labels(read_column(dataset, column))
    targets = getattr(dataset, "targets", None)
    if isinstance(targets, (list, tuple, torch.Tensor)) and len(targets) == size:
        return torch.as_tensor(targets)
    if not rows:
        return None
    first = dataset[0]
    if not isinstance(first, Mapping) or "labels" not in first:
        got = f"keys {sorted(first)}" if isinstance(first, Mapping) else f"a {type(first).__name__}"
        raise ValueError(
            "Expected training samples with a 'labels' column to count the classes' priors, got samples with "
            f"{got}; or pass east_class_priors"
        )
    return torch.stack([torch.as_tensor(dataset[i]["labels"]) for i in range(size)])  # (N,) or multi-hot (N, L)


def _arrow_labels(column) -> torch.Tensor:
    """An Arrow label column as a tensor: (N,) for class ids, (N, L) for a list column of L values per row (a
    multi-hot label), read without a Python object per row; rows of unequal length are a one-line error."""
    import pyarrow as pa

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = column.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)):
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
            present = column.drop_null()
            example = present[0].as_py() if len(present) else None
            raise ValueError(
                f"Expected class ids (integers) or multi-hot rows of 0/1 as labels, got a column of {kind} (e.g. "
                f"{example!r}): encode the classes first (datasets' class_encode_column, or east-train, which does)"
            )
        return torch.tensor(column.to_numpy(zero_copy_only=False))
    if pa.types.is_fixed_size_list(kind):
        values = column.flatten().to_numpy(zero_copy_only=False)
        return torch.tensor(np.asarray(values, dtype=np.float32).reshape(len(column), kind.list_size))
    lengths = column.value_lengths().to_numpy(zero_copy_only=False)
    if len(lengths) and (lengths != lengths[0]).any():
        odd = int(np.flatnonzero(lengths != lengths[0])[0])
        raise ValueError(
            f"Expected every multi-hot label row to hold {int(lengths[0])} values, "
            f"got {int(lengths[odd])} in row {odd}"
        )
    width = int(lengths[0]) if len(lengths) else 0
    values = column.flatten().to_numpy(zero_copy_only=False)
    return torch.tensor(np.asarray(values, dtype=np.float32).reshape(len(column), width))


def _checked_counts(labels: torch.Tensor, num_classes: int | None, split: str) -> list[int]:
    """Samples per class of (N,) labels (-100 ignored), after the label checks every loss makes: integer labels in
    ``[0, num_classes)``, so a bad label is the same one-line error before the priors are counted as in a step."""
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"Expected integer class labels in the {split} set, got dtype {labels.dtype}")
    labels = labels.long().flatten()
    labels = labels[labels != -100]
    if len(labels) and int(labels.min()) < 0:
        raise ValueError(f"Expected labels >= 0 (or -100, ignored) in the {split} set, got {int(labels.min())}")
    if num_classes is not None and len(labels):
        check_labels(labels, len(labels), num_classes)
    width = max(num_classes or 0, int(labels.max()) + 1 if len(labels) else 0)
    return torch.bincount(labels, minlength=width).tolist()


def training_class_counts(dataset: Any, num_classes: int | None) -> list[int]:
    """Training samples per class, the priors of ``wce`` and ``la`` when ``east_class_priors`` is not given.

    The labels are read without running the data set's transforms where it allows it (a ``labels`` / ``label``
    column, a ``targets`` attribute); any other data set is read row by row, ``dataset[i]["labels"]`` (its transforms
    run). They are checked as a loss checks them (integers in ``[0, num_classes)``, -100 ignored) before they are
    counted. A data set without a length (an ``IterableDataset``, a stream) cannot be counted: the error names
    ``east_class_priors``.
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
    return _checked_counts(_label_column(dataset, size, rows=True), num_classes, "training")


def has_multi_hot_labels(dataset: Any) -> bool:
    """Whether a data set's labels are multi-hot rows (a float vector per sample: multi-label classification), read
    from its label column without running transforms where it can, else from its first sample."""
    size = None if dataset is None or isinstance(dataset, Mapping) else dataset_length(dataset)
    if size is None and dataset is not None and not isinstance(dataset, Mapping) and hasattr(dataset, "__iter__"):
        try:  # a stream: its first sample tells
            first = next(iter(dataset))
        except (StopIteration, TypeError, ValueError, RuntimeError):
            return False
        labels = first.get("labels", first.get("label")) if isinstance(first, Mapping) else None
        labels = None if labels is None else torch.as_tensor(labels)
        return labels is not None and labels.ndim == 1 and labels.is_floating_point()
    if not size:
        return False
    try:
        labels = _label_column(dataset, size, rows=False)
        if labels is None:
            first = dataset[0]
            if not isinstance(first, Mapping) or "labels" not in first:
                return False
            labels = torch.as_tensor(first["labels"]).unsqueeze(0)
    except (TypeError, ValueError, RuntimeError):
        return False
    return labels.ndim == 2 and labels.is_floating_point()


def training_label_counts(dataset: Any, num_labels: int | None) -> tuple[list[float], list[float]]:
    """(positives, labelled entries) per label of a multi-label training set: each label's positive rate is
    ``positives / labelled``, the prior of the multi-label ``wce`` and ``la``. Labels are checked first (0 / 1 or -100,
    ``num_labels`` wide); a set that cannot be counted is the error of ``training_class_counts``."""
    size = None if dataset is None else dataset_length(dataset)
    if not size:
        training_class_counts(dataset, num_labels)  # raises its one-line error
    labels = _label_column(dataset, size, rows=True).float()
    if labels.ndim != 2 or (num_labels is not None and labels.shape[1] != num_labels):
        raise ValueError(f"Expected multi-hot training labels of shape (N, {num_labels}), got {tuple(labels.shape)}")
    labelled = labels != -100
    bad = labelled & (labels != 0) & (labels != 1)
    if bool(bad.any()):
        values = sorted({float(v) for v in labels[bad].unique()[:5].tolist()})
        raise ValueError(f"Expected multi-hot training labels of 0 or 1 (or -100, ignored), got values {values}")
    positives = torch.where(labelled, labels, 0.0).sum(0)
    return positives.tolist(), labelled.sum(0).float().tolist()


def labels_without_transforms(dataset: Any) -> bool:
    """Whether a data set's labels can be read without running its transforms (a label column, a ``targets``
    attribute), as ``column_class_counts`` reads them."""
    size = None if dataset is None or isinstance(dataset, Mapping) else dataset_length(dataset)
    return bool(size) and _label_column(dataset, size, rows=False) is not None


def column_class_counts(dataset: Any, num_classes: int | None, split: str = "validation") -> list[int] | None:
    """Samples per class of a data set whose labels can be read without running its transforms (a label column, a
    ``targets`` attribute), checked as ``training_class_counts`` checks them; None for any other data set."""
    size = None if dataset is None or isinstance(dataset, Mapping) else dataset_length(dataset)
    labels = _label_column(dataset, size, rows=False) if size else None
    return None if labels is None else _checked_counts(labels, num_classes, split)


def absent_classes(counts: list[int], num_classes: int | None, id2label: Mapping[Any, str] | None = None) -> list[str]:
    """The names (``id2label``, else the index) of the classes with no sample in ``counts``."""
    labels = {int(k): str(v) for k, v in (id2label or {}).items()}
    width = max(len(counts), num_classes or 0)
    return [labels.get(k, str(k)) for k in range(width) if k >= len(counts) or counts[k] == 0]


def validation_size(eval_dataset: Any, anneal_key: str) -> int | None:
    """The number of samples behind the anneal monitor ``anneal_key``: the length of ``eval_dataset``, or with a
    mapping of evaluation sets (metrics ``eval_<name>_*``) the length of the one the key names; None where unknown
    (no such set, or an iterable dataset without a length)."""
    if isinstance(eval_dataset, Mapping):
        names = [name for name in eval_dataset if anneal_key.startswith(f"eval_{name}_")]
        eval_dataset = eval_dataset[max(names, key=len)] if names else None
    return None if eval_dataset is None else dataset_length(eval_dataset)
