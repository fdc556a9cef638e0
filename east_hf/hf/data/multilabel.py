"""Multi-label labels for ``east-train``: every row carries a set of labels, stored as a multi-hot float vector.

Three ways a table says which labels a row has (``DataArguments``):

- ``label_columns``: several columns of 0/1 values (numbers, booleans, or the text ``0``/``1``/``true``/``false``),
  one per label, named after the column; an empty cell (or -100) leaves that entry out of every loss and metric
  (-100, the ignore index), so a row keeps its other labels;
- ``label_separator``: one text column whose cells list the row's labels, e.g. ``drama|comedy``; the labels are the
  sorted distinct names; an empty cell is a row with no label (every entry 0);
- a list-valued label column (a ``datasets`` list / ``Sequence``, a JSON-lines list), without a separator: a list of
  label names (strings, or ids of a ``ClassLabel``) is a set of labels; a list of numbers is a multi-hot vector of 0/1
  entries (the labels named ``0``, ``1``, ...), every row the same length.

Each split's ``label`` column becomes a fixed-length list of L float32 entries, 0.0 / 1.0 or -100 (ignore); a row
with no entry left (a missing cell of a list column, every 0/1 column empty) is dropped and counted in
``EASTData.dropped`` as ``"empty label"``. Bad input is refused in one line naming the column: values that are not
0/1 (with the values), list rows of another length, a label column that is not there (with the closest names), a
``label_separator`` found in no cell, or one that cuts label names into fragments (with the separator to pass:
``east_hf.hf.data.separators``). A cell that is one of ``label_na_values`` is missing, as an empty one is (a warning
counts them).

Splits are carved as for one label per row (64 / 16 / 20 %, ``split_seed``), stratified by ``label_strata``: each row's
stratum is its rarest positive label (rows without a positive label form their own stratum), so every label's positives
are spread over the splits in proportion, however rare the label. This is a simpler scheme than iterative
stratification (Sechidis et al., 2011; the ``iterative-stratification`` package): it needs only scikit-learn's
``train_test_split``, and it keeps every label with at least a few positives in every split, which is what the
per-label thresholds and macro averages need; iterative stratification balances label pairs better, which no part of
east_hf uses.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from east_hf.hf.data.labels import default_label_column, find_label_column
from east_hf.hf.data.messages import closest_columns, listed
from east_hf.hf.data.missing import missing_markers, warn_markers
from east_hf.hf.data.rows import read_column
from east_hf.hf.data.separators import check_separator
from east_hf.hf.data.sources import DataError

__all__ = [
    "IGNORE",
    "encode_multilabel",
    "has_list_labels",
    "is_list_column",
    "label_matrix",
    "label_strata",
    "positives",
    "warn_untrainable_labels",
]

logger = logging.getLogger(__name__)

IGNORE = -100.0  # the ignore index of every loss and metric: an entry that does not count
_TRUE, _FALSE = ("1", "1.0", "true"), ("0", "0.0", "false")


def _column_type(ds, name: str):
    return ds.data.table.schema.field(name).type


def is_list_column(ds, name: str | None) -> bool:
    """Whether column ``name`` of ``ds`` holds a list per row (a multi-label column without a separator)."""
    import pyarrow as pa

    if name is None or name not in ds.column_names:
        return False
    kind = _column_type(ds, name)
    return pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)


def has_list_labels(dsd, label_column: str | None) -> bool:
    """Whether the label column (``label_column``, else ``label`` / ``labels``) holds a list per row: multi-label."""
    first = next(iter(dsd.values()))
    return is_list_column(first, label_column or default_label_column(first.column_names))


def label_matrix(ds, column: str = "label") -> np.ndarray:
    """(N, L) float32: the multi-hot label column of a split, read as one Arrow column (no image decoded)."""
    values = read_column(ds, column).combine_chunks()
    width = values.type.list_size
    return np.asarray(values.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, width)


def positives(ds) -> np.ndarray:
    """(L,) int64: rows of a split where each label is positive (entries -100 not counted)."""
    column = "labels" if "labels" in ds.column_names else "label"
    return (label_matrix(ds, column) == 1).sum(0).astype(np.int64)


def encode_multilabel(dsd, args, dataset_name: str):
    """(``dsd`` with a multi-hot ``label`` column in every split, the L label names, rows dropped by reason).

    ``args``: the ``DataArguments`` (``label_columns``, ``label_column``, ``label_separator``, ``label_na_values``).
    The 0/1 columns (or the list / separated column) are removed from the splits, so they never reach the tabular
    features.
    """
    first = next(iter(dsd.values()))
    markers = missing_markers(getattr(args, "label_na_values", None))
    if args.label_columns:
        for split, ds in dsd.items():
            missing = [c for c in args.label_columns if c not in ds.column_names]
            if missing:
                raise DataError(
                    f"label column {missing[0]!r} not found in {dataset_name!r} (split {split!r}); "
                    f"{closest_columns(missing[0], ds.column_names)}"
                )
        names = list(args.label_columns)
        matrices = {split: _binary_columns(ds, names, markers) for split, ds in dsd.items()}
        drop = names
    else:
        column = find_label_column(dsd, args.label_column, dataset_name)
        if args.label_separator is not None:
            kind = _column_type(first, column)
            if not _is_text(kind):
                raise DataError(
                    f"label_separator splits a text column, got label column {column!r} of {kind} values: "
                    "drop label_separator for a list column, or pass the column of text"
                )
            names, matrices = _separated(dsd, column, args.label_separator, markers)
        elif is_list_column(first, column):
            names, matrices = _lists(dsd, column)
        else:
            raise DataError(
                f"label column {column!r} holds one value per row, not a list: set label_separator for a column of "
                "separated labels, or label_columns for 0/1 columns"
            )
        drop = [column]
    if len(names) < 2:
        raise DataError(f"expected at least 2 labels in {dataset_name!r}, got {names}")
    warn_markers(dsd, drop, markers)
    dsd, dropped = _attach(dsd, matrices, drop, len(names))
    return dsd, names, dropped


def _is_text(kind) -> bool:
    import pyarrow as pa

    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _attach(dsd, matrices: dict[str, np.ndarray], drop: Sequence[str], width: int):
    """(splits with ``drop`` removed, ``label`` the (N, L) matrix, rows without an entry left out; dropped counts)."""
    import datasets
    import pyarrow as pa

    feature = datasets.List(datasets.Value("float32"), length=width)
    out, empty = {}, 0
    for split, ds in dsd.items():
        matrix = matrices[split]  # (N, L) float32
        ds = ds.remove_columns(list(drop))
        if "label" in ds.column_names:  # a column named label that is not the labels: kept as a feature
            ds = ds.rename_column("label", "label_original")
        column = pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1), pa.float32()), width)
        ds = ds.add_column("label", column, feature=feature)
        keep = (matrix != IGNORE).any(1)  # (N,)
        if not keep.all():
            empty += int((~keep).sum())
            ds = ds.select(np.flatnonzero(keep))
        out[split] = ds
    return datasets.DatasetDict(out), ({"empty label": empty} if empty else {})


def _binary_columns(ds, columns: Sequence[str], markers: frozenset[str] = frozenset()) -> np.ndarray:
    """(N, L) float32 of the 0/1 ``columns``: 1.0 / 0.0, -100 for an empty cell, -100 or one of ``markers``; other
    values refused."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = np.empty((len(ds), len(columns)), dtype=np.float32)
    for k, name in enumerate(columns):
        column = read_column(ds, name)
        kind = column.type
        if pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_floating(kind):
            values = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)  # nulls: NaN
            values = np.where(np.isnan(values) | (values == IGNORE), IGNORE, values)
            bad = np.unique(values[(values != 0) & (values != 1) & (values != IGNORE)])
            _refuse_values(name, bad.tolist())
        elif _is_text(kind) or pa.types.is_null(kind):
            uniques = pc.unique(column).drop_null() if len(column) else pa.array([], pa.string())
            text = [str(v).strip() for v in uniques.to_pylist()]
            code = np.array(
                [IGNORE if v in markers else _text_value(v.lower()) for v in text], dtype=np.float64
            )  # (distinct,): NaN for a bad value
            _refuse_values(name, [v for v, c in zip(uniques.to_pylist(), code) if np.isnan(c)])
            position = _positions(column, uniques)  # -1 for a null
            values = np.where(position >= 0, code[position], IGNORE) if len(code) else np.full(len(column), IGNORE)
        else:
            raise DataError(f"label column {name!r} holds {kind} values: expected 0/1 values, one label per column")
        out[:, k] = values
    return out


def _positions(values, uniques) -> np.ndarray:
    """(N,) int64: where each of ``values`` is in ``uniques`` (Arrow's ``index_in``), -1 where it is not (a null)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not len(uniques):
        return np.full(len(values), -1, dtype=np.int64)
    position = pc.index_in(values, value_set=uniques).fill_null(-1)
    return np.asarray(
        position.to_numpy(zero_copy_only=False) if not isinstance(position, pa.ChunkedArray) else position.to_numpy(),
        dtype=np.int64,
    )


def _text_value(text: str) -> float:
    if text in _TRUE:
        return 1.0
    if text in _FALSE:
        return 0.0
    return IGNORE if text in ("", "-100") else float("nan")


def _refuse_values(name: str, bad: list) -> None:
    if not bad:
        return
    shown = listed([repr(v) for v in sorted(bad, key=str)])
    raise DataError(
        f"label column {name!r} holds values that are not 0/1: {shown}; expected one 0/1 column per label "
        "(an empty cell leaves the entry out; label_na_values names other cells to read as missing)"
    )


def _separated(
    dsd, column: str, separator: str, markers: frozenset[str] = frozenset()
) -> tuple[list[str], dict[str, np.ndarray]]:
    """(sorted label names, per split (N, L) float32) of a text column of ``separator``-separated labels, read per
    distinct cell: Python sees each distinct cell once, never a row. An empty (or missing) cell is a row with no
    label, every entry 0: in tags or toxicity data such rows are usually the majority, and a separated column has no
    other way to write them. A cell that is one of ``markers`` is missing, as an empty one is."""
    import pyarrow.compute as pc

    cells = {}
    for split, ds in dsd.items():
        values = read_column(ds, column)
        uniques = pc.unique(values)
        sets = [
            None if v is None or v.strip() in markers else {p.strip() for p in v.split(separator)} - {""}
            for v in uniques.to_pylist()
        ]
        cells[split] = (values, uniques, sets)
    check_separator(column, separator, [v for _, uniques, _ in cells.values() for v in uniques.to_pylist()])
    names = sorted({name for _, _, sets in cells.values() for s in sets if s for name in s})
    index = {name: k for k, name in enumerate(names)}
    matrices = {}
    for split, (values, uniques, sets) in cells.items():
        code = np.zeros((len(sets), len(names)), dtype=np.float32)  # (distinct cells, L)
        for i, s in enumerate(sets):
            if s:  # an empty cell stays all 0: no label
                code[i, [index[name] for name in s]] = 1.0
        matrices[split] = code[_positions(values, uniques)]  # every cell, null included, is one of uniques
    return names, matrices


def _lists(dsd, column: str) -> tuple[list[str], dict[str, np.ndarray]]:
    """(label names, per split (N, L) float32) of a list column: label names / ``ClassLabel`` ids (a set per row),
    or 0/1 numbers (a multi-hot vector per row, every row as long)."""
    import datasets
    import pyarrow as pa
    import pyarrow.compute as pc

    first = next(iter(dsd.values()))
    inner = getattr(first.features[column], "feature", None)
    lists = {split: read_column(ds, column).combine_chunks() for split, ds in dsd.items()}
    value_type = next(iter(lists.values())).type.value_type
    if isinstance(inner, datasets.ClassLabel) or _is_text(value_type):
        names = (
            list(inner.names)
            if isinstance(inner, datasets.ClassLabel)
            else sorted(
                {str(v).strip() for a in lists.values() for v in pc.unique(a.flatten()).drop_null().to_pylist()} - {""}
            )
        )
        index = {name: k for k, name in enumerate(names)}
        matrices = {}
        for split, values in lists.items():
            matrix = np.zeros((len(values), len(names)), dtype=np.float32)
            parents = pc.list_parent_indices(values).to_numpy(zero_copy_only=False)
            flat = values.flatten()
            if isinstance(inner, datasets.ClassLabel):
                ids = np.asarray(flat.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
            else:
                uniques = pc.unique(flat).drop_null()
                lookup = np.array([index.get(str(v).strip(), -1) for v in uniques.to_pylist()] + [-1], dtype=np.int64)
                ids = lookup[_positions(flat, uniques)]  # a null entry: -1, the lookup's last
            ok = ids >= 0
            matrix[parents[ok], ids[ok]] = 1.0
            matrix[~values.is_valid().to_numpy(zero_copy_only=False)] = IGNORE  # a missing cell: no labels known
            matrices[split] = matrix
        return names, matrices
    if not (pa.types.is_integer(value_type) or pa.types.is_floating(value_type) or pa.types.is_boolean(value_type)):
        raise DataError(f"label column {column!r} holds lists of {value_type}: expected label names or 0/1 values")
    width = _list_width(lists, column)
    matrices = {}
    for split, values in lists.items():
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        flat = pc.cast(values.flatten(), pa.float64()).to_numpy(zero_copy_only=False)  # nulls: NaN
        flat = np.where(np.isnan(flat) | (flat == IGNORE), IGNORE, flat)
        _refuse_values(column, np.unique(flat[(flat != 0) & (flat != 1) & (flat != IGNORE)]).tolist())
        matrix = np.full((len(values), width), IGNORE, dtype=np.float32)
        matrix[valid] = flat.reshape(-1, width)
        matrices[split] = matrix
    return [str(k) for k in range(width)], matrices


def _list_width(lists: dict[str, Any], column: str) -> int:
    """The one length of the multi-hot lists of every split; rows of another length are refused in one line."""
    import pyarrow.compute as pc

    width = None
    for split, values in lists.items():
        lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)  # (N,), NaN for a missing row
        lengths = lengths[~np.isnan(lengths)].astype(np.int64) if lengths.dtype.kind == "f" else lengths
        if width is None and len(lengths):
            width = int(np.bincount(lengths).argmax())  # the most common length
        other = np.flatnonzero(lengths != width)
        if len(other):
            raise DataError(
                f"label column {column!r} has rows with a different label count: {len(other)} row(s) of "
                f"{sorted(set(lengths[other].tolist()))} entries in {split!r} (row {int(other[0])}), expected {width} "
                "0/1 entries in every row"
            )
    return width or 0


def label_strata(labels: np.ndarray) -> np.ndarray:
    """(N,) int64: the stratum of each row of ``labels`` (N, L): the index of its rarest positive label (rarest in
    ``labels``, ties to the lower index), L for a row without a positive label."""
    positive = labels == 1  # (N, L)
    counts = positive.sum(0)  # (L,)
    order = np.lexsort((np.arange(len(counts)), counts))  # labels from the rarest
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    ranked = np.where(positive, rank[None, :], len(order))  # (N, L): a positive label's rank, L elsewhere
    best = ranked.min(1) if labels.shape[1] else np.full(len(labels), 0)
    return np.where(best < len(order), order[np.minimum(best, len(order) - 1)], labels.shape[1]).astype(np.int64)


def mergeable_strata(strata: np.ndarray, fraction: float) -> np.ndarray:
    """``strata`` (N,) with the strata too small for ``train_test_split`` (carving ``fraction``) merged into one: every
    stratum of one row, then the smallest while there are more strata than rows on either side of the cut; a merged
    stratum left with one row joins the largest."""
    strata = strata.copy()
    if not len(strata):
        return strata
    n_test = int(np.ceil(fraction * len(strata)))
    limit = max(1, min(n_test, len(strata) - n_test))
    merged = int(strata.max()) + 1
    while True:
        values, counts = np.unique(strata, return_counts=True)
        too_small, others = counts < 2, values != merged
        if len(values) <= 1 or (not too_small.any() and len(values) <= limit):
            return strata
        if (too_small & others).any():
            strata[np.isin(strata, values[too_small & others])] = merged
        elif len(values) > limit:
            strata[strata == values[others][np.argmin(counts[others])]] = merged
        else:  # only the merged stratum is too small
            strata[strata == merged] = values[np.argmax(counts)]


def warn_untrainable_labels(train, names: list[str], others: dict[str, Any]) -> None:
    """One warning line for the labels never positive, and one for those never negative, in the training split.

    Nothing trains a label never positive apart from the rest: its predictions are untrained, its F1 in a split without
    positives of it is 0 (scikit-learn's zero_division) and near 0 elsewhere; a label positive in every training row
    is predicted for every row, so its F1 is that of always predicting it, 2p / (1 + p) for a split with a share p of
    positives."""
    matrix = label_matrix(train, "labels" if "labels" in train.column_names else "label")
    labelled = (matrix != IGNORE).sum(0)
    pos = (matrix == 1).sum(0)
    held = {
        k: label_matrix(ds, "labels" if "labels" in ds.column_names else "label")
        for k, ds in others.items()
        if ds is not None
    }

    never = np.flatnonzero(pos == 0)
    if len(never):
        found = [
            f"{names[k]!r} ("
            + (
                ", ".join(f"{int((m[:, k] == 1).sum())} in {s}" for s, m in held.items() if (m[:, k] == 1).any())
                or "no positive anywhere"
            )
            + ")"
            for k in never
        ]
        one = len(found) == 1
        logger.warning(
            f"{'label' if one else 'labels'} {listed(found)} never positive in the {int(len(matrix))} training rows: "
            f"the model cannot learn {'it' if one else 'them'} ({'its' if one else 'their'} predictions are "
            f"untrained), {'its' if one else 'their'} F1 will be about 0 and macro averages count "
            f"{'it' if one else 'them'} as such"
        )
    always = np.flatnonzero((pos == labelled) & (labelled > 0))
    if len(always):

        def f1_of_always(k: int) -> str:
            parts = []
            for s, m in held.items():
                present = m[:, k] != IGNORE
                if present.any():
                    p = float((m[present, k] == 1).mean())
                    parts.append(f"{2 * p / (1 + p):.3f} on {s}")
            return f"{names[k]!r} (F1 {', '.join(parts)})" if parts else repr(names[k])

        found = [f1_of_always(k) for k in always]
        one = len(found) == 1
        logger.warning(
            f"{'label' if one else 'labels'} {listed(found)} positive in every training row: the model will predict "
            f"{'it' if one else 'them'} for every row, so {'its' if one else 'their'} F1 will be that of always "
            "predicting it, 2p / (1 + p) for a share p of positives"
        )
