"""Lists of label ids as multi-hot rows: the layout ``EASTTrainer`` trains a multi-label model on.

Hub multi-label sets (go_emotions and most others) give each row a list of its label ids, a
``Sequence(ClassLabel(...))`` or ``Sequence(Value("int64"))`` column. The losses and metrics of a multi-label model
read one float row of L entries per sample instead: 1.0 for a label the row has, 0.0 for one it has not, -100
(``IGNORE``) for an entry left out of every loss and metric. ``multi_hot_labels`` turns the one into the other, a
split at a time, from the Arrow column (no Python object per row); ``EASTTrainer`` calls it on a training or
evaluation set whose label column holds lists of ids (``holds_label_ids``), with L from the model's config, and
``east-train`` reads the same lists through ``east_hf.hf.data.multilabel``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from east_hf.hf.data.rows import read_column
from east_hf.hf.data.sources import DataError

__all__ = ["IGNORE", "holds_label_ids", "id_rows", "multi_hot_labels"]

IGNORE = -100.0  # the ignore index of every loss and metric: an entry that does not count


def _label_column(dataset: Any) -> str | None:
    """``labels``, else ``label``: the column the Trainer's batches carry as ``labels`` (None without either)."""
    names = getattr(dataset, "column_names", None) or []
    return next((name for name in ("labels", "label") if name in names), None)


def _list_feature(dataset: Any, column: str | None) -> Any:
    """The feature inside a list-valued ``column`` of a ``datasets.Dataset`` (a ``ClassLabel``, a ``Value``), or None
    for a column that is not a list."""
    features = getattr(dataset, "features", None)
    if not column or not features or column not in features:
        return None
    return getattr(features[column], "feature", None)


def holds_label_ids(dataset: Any) -> bool:
    """Whether ``dataset`` is a ``datasets.Dataset`` whose ``labels`` / ``label`` column holds a list of integers per
    row (label ids of a ``ClassLabel``, or integers): the layout ``multi_hot_labels`` turns into multi-hot rows."""
    import datasets

    if not isinstance(dataset, datasets.Dataset):
        return False
    inner = _list_feature(dataset, _label_column(dataset))
    return isinstance(inner, datasets.ClassLabel) or (
        isinstance(inner, datasets.Value) and inner.dtype.startswith(("int", "uint"))
    )


def id_rows(values: Any, ids: np.ndarray, width: int) -> np.ndarray:
    """(N, L) float32 of a list column's rows of label ids: ``values`` the Arrow list array (N rows), ``ids`` its
    flattened entries as label indices (-1: none, e.g. a null entry). 1.0 at each row's ids, 0.0 elsewhere; every
    entry of a missing row (a null list) is ``IGNORE``: no label of it is known."""
    import pyarrow.compute as pc

    matrix = np.zeros((len(values), width), dtype=np.float32)
    parents = pc.list_parent_indices(values).to_numpy(zero_copy_only=False)  # the row of each flattened entry
    ok = ids >= 0
    matrix[parents[ok], ids[ok]] = 1.0
    matrix[~values.is_valid().to_numpy(zero_copy_only=False)] = IGNORE
    return matrix


def _checked_ids(values: Any, width: int, column: str) -> np.ndarray:
    """The flattened label ids of list array ``values`` as int64, -1 for a null entry; an id outside [0, L) (``L`` =
    ``width``) is refused in one line."""
    ids = np.asarray(values.flatten().fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    bad = ids[(ids >= width) | (ids < -1)]
    if len(bad):
        raise DataError(
            f"Expected label ids in [0, {width - 1}] in label column {column!r} ({width} labels), got {int(bad[0])}: "
            "give the model as many labels (config.num_labels) as the data has"
        )
    return ids


def _is_multi_hot(values: Any, width: int) -> bool:
    """Whether integer lists are multi-hot rows already: every present row holds ``width`` entries, each 0 or 1."""
    import pyarrow.compute as pc

    lengths = pc.list_value_length(values).drop_null().to_numpy(zero_copy_only=False)
    flat = values.flatten().drop_null().to_numpy(zero_copy_only=False)
    return bool(len(lengths)) and bool((lengths == width).all()) and bool(np.isin(flat, (0, 1)).all())


def _integer_rows(values: Any, width: int, column: str) -> np.ndarray:
    """(N, L) float32 of integer lists: multi-hot rows as they are (``_is_multi_hot``; a null entry is ``IGNORE``),
    else label ids (``id_rows``)."""
    if not _is_multi_hot(values, width):
        return id_rows(values, _checked_ids(values, width, column), width)
    flat = values.flatten().fill_null(int(IGNORE)).to_numpy(zero_copy_only=False)
    matrix = np.full((len(values), width), IGNORE, dtype=np.float32)
    matrix[values.is_valid().to_numpy(zero_copy_only=False)] = np.asarray(flat, np.float32).reshape(-1, width)
    return matrix


def _with_column(dataset: Any, column: str, matrix: np.ndarray) -> Any:
    """``dataset`` with ``column`` replaced by the (N, L) float32 ``matrix``, a fixed-size list per row; its format
    and transform are kept."""
    import datasets
    import pyarrow as pa

    width = matrix.shape[1]
    array = pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1), pa.float32()), width)
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # add_column flattens a selection's indices with a bar of its own
    try:
        feature = datasets.List(datasets.Value("float32"), length=width)
        converted = dataset.add_column(
            f"{column}_multi_hot", array, feature=feature
        )  # first: a set of no other column
        return converted.remove_columns([column]).rename_column(f"{column}_multi_hot", column)
    finally:
        if bars:
            datasets.enable_progress_bars()


def multi_hot_labels(dataset: Any, num_labels: int | None = None, column: str | None = None) -> Any:
    """``dataset`` (a ``datasets.Dataset``, or a ``DatasetDict`` split by split) with its label column of lists of
    label ids as multi-hot float rows of L = ``num_labels`` entries, as a multi-label model trains on them.

    ``column``: default ``labels``, else ``label``. A ``Sequence(ClassLabel(...))`` column (go_emotions' layout) gives
    L = its number of names by default; ``num_labels``, where given, must equal it. A ``Sequence(Value("int64"))``
    column needs ``num_labels``: lists whose every row holds L entries of 0 / 1 are multi-hot rows already and only
    become floats; any other lists are label ids. An empty list is a row with no label (every entry 0.0), a missing
    one a row whose entries are all ignored (-100). Float rows are multi-hot already and are returned as they are.
    A label column of another kind, or an id outside [0, L), is a one-line ``DataError`` saying what to do.

    >>> import datasets
    >>> emotions = datasets.ClassLabel(names=["joy", "anger", "fear"])
    >>> features = datasets.Features({"labels": datasets.Sequence(emotions)})
    >>> data = datasets.Dataset.from_dict({"labels": [[0, 2], [], [1]]}, features=features)
    >>> multi_hot_labels(data)["labels"][:]
    [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    import datasets
    import pyarrow as pa

    if isinstance(dataset, (datasets.DatasetDict, dict)):
        return type(dataset)({split: multi_hot_labels(ds, num_labels, column) for split, ds in dataset.items()})
    column = column or _label_column(dataset)
    inner = _list_feature(dataset, column)
    if inner is None:
        raise DataError(
            f"Expected a datasets.Dataset with a list-valued label column ('labels' or 'label'), got "
            f"{type(dataset).__name__} column {column!r} of {getattr(dataset, 'features', {}).get(column)}"
        )
    values = read_column(dataset, column).combine_chunks()
    kind = values.type.value_type
    if isinstance(inner, datasets.ClassLabel):
        if num_labels is not None and num_labels != inner.num_classes:
            raise DataError(
                f"Expected the model's {num_labels} labels (config.num_labels) to match the {inner.num_classes} "
                f"names of the ClassLabel in label column {column!r}: make the model with num_labels="
                f"{inner.num_classes}"
            )
        width = inner.num_classes
        return _with_column(dataset, column, id_rows(values, _checked_ids(values, width, column), width))
    if pa.types.is_floating(kind):
        return dataset
    if not pa.types.is_integer(kind):
        raise DataError(
            f"Expected label ids (a Sequence of ClassLabel or of integers) or 0/1 floats in label column {column!r}, "
            f"got lists of {kind}: map label names to ids first (e.g. with the model's config.label2id)"
        )
    if num_labels is None:
        raise DataError(
            f"Expected num_labels to read the integer lists of label column {column!r} as label ids, got none: "
            "pass num_labels (the model's config.num_labels), or cast the column to Sequence(ClassLabel(names))"
        )
    return _with_column(dataset, column, _integer_rows(values, num_labels, column))
