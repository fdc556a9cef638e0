"""One class per row: the label column of a data set as a ``ClassLabel`` named ``label``, relabelled and checked.

``find_label_column`` finds the label column (the one given, else ``label`` / ``labels``) for one label per row and
for multi-label data alike (``east_hf.hf.data.multilabel``). ``encode_labels`` makes it a ``ClassLabel`` whose classes
are the column's distinct values (numbers in numeric order, then text), read per split as one Arrow column: Python
sees each distinct value once, never a row. A row whose label is empty, -100 (the ignore index) or one of the
missing-value markers the user names (``label_na_values``: ``east_hf.hf.data.missing``) keeps the label -1, is counted
in ``dropped`` by reason (each marker by its text) and is left out by ``labelled`` once the labels are final.
``binarize`` relabels to binary (``positive_classes``), ``unseen_labels`` refuses or leaves out the validation/test
classes without training rows, and ``warn_untrained_classes`` names the classes left without training rows.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from east_hf.core import class_index
from east_hf.hf.data.messages import closest_columns, columns_message, listed, rows_text
from east_hf.hf.data.missing import LABEL_COLUMNS, marker_reason
from east_hf.hf.data.rows import json_text, read_column
from east_hf.hf.data.sources import DataError

__all__ = [
    "LABEL_COLUMNS",
    "binarize",
    "default_label_column",
    "encode_labels",
    "find_label_column",
    "label_counts",
    "label_ids",
    "labelled",
    "unseen_labels",
    "warn_untrained_classes",
]

logger = logging.getLogger(__name__)

_JSON_KINDS = {'"': "text", "t": "boolean", "f": "boolean", "[": "list", "{": "object", "n": "null"}  # else a number
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_VECTOR = re.compile(rf"\[\s*(?:{_NUMBER}(?:\s*[,;\s]\s*{_NUMBER})*)?\s*\]")  # "[1, 0, 0, 1]", "[0 1]"


def default_label_column(columns: Sequence[str]) -> str | None:
    """The first of ``LABEL_COLUMNS`` among ``columns``; ``None`` without any."""
    return next((c for c in LABEL_COLUMNS if c in columns), None)


def find_label_column(dsd, requested: str | None, dataset_name: str) -> str:
    """The label column of every split: ``requested``, else ``label`` / ``labels``; a missing one is refused in one
    line naming the columns (and the closest names)."""
    first = next(iter(dsd.values()))
    column = requested or default_label_column(first.column_names)
    if column is None:
        raise DataError(
            f"no label column in {dataset_name!r}: set label_column (or label_columns, one 0/1 column per label); "
            f"columns are: {columns_message(first)}"
        )
    for split, ds in dsd.items():
        if column not in ds.column_names:
            raise DataError(
                f"label column {column!r} not found in {dataset_name!r} (split {split!r}); "
                f"{closest_columns(column, ds.column_names)}"
            )
    return column


def encode_labels(dsd, label_column: str | None, dataset_name: str, markers: frozenset[str] = frozenset()):
    """(every split with a ``ClassLabel`` column named ``label``, the same names in every split; the class names; rows
    left out by reason: ``{"empty label": n, "label -100": m, "label 'NA'": k}``, counts of 0 omitted).

    ``markers``: label texts read as missing besides an empty cell (``east_hf.hf.data.missing.missing_markers``)."""
    import datasets
    import pyarrow.compute as pc

    label_column = find_label_column(dsd, label_column, dataset_name)
    dsd = _renamed_to_label(dsd, label_column)
    feature = next(iter(dsd.values())).features["label"]
    if isinstance(feature, datasets.ClassLabel):
        return dsd, list(feature.names), {}
    columns = {
        split: _json_labels(read_column(ds, "label"), label_column, split if len(dsd) > 1 else None)
        for split, ds in dsd.items()
    }
    distinct = {split: pc.value_counts(column).flatten() for split, column in columns.items()}  # [values, counts]
    ordered, dropped = _classes(distinct.values(), label_column, markers)
    names = [_class_name(v) for v in ordered]
    index = {v: i for i, v in enumerate(ordered)}
    encoded = {
        split: _relabel(ds, _class_ids(columns[split], distinct[split][0], index, markers), names)
        for split, ds in dsd.items()
    }
    return datasets.DatasetDict(encoded), names, dropped


def _renamed_to_label(dsd, label_column: str):
    """``dsd`` with ``label_column`` named ``label`` (a column already named ``label`` becomes ``label_original``)."""
    if label_column == "label":
        return dsd
    if "label" in next(iter(dsd.values())).column_names:
        dsd = dsd.rename_column("label", "label_original")
    return dsd.rename_column(label_column, "label")


def _classes(distinct: Iterable, label_column: str, markers: frozenset[str]) -> tuple[list, dict[str, int]]:
    """(the classes in order: numbers numerically, then text; rows without a label by reason) from each split's
    distinct labels and their counts (``pyarrow.compute.value_counts``)."""
    values, dropped = set(), {"empty label": 0, "label -100": 0}
    for uniques, counts in distinct:
        for v, n in zip(uniques.to_pylist(), counts.to_numpy()):
            if _unlabelled(v, markers):
                reason = "empty label" if _empty(v) else "label -100" if _unlabelled(v) else marker_reason(_text(v))
                dropped[reason] = dropped.get(reason, 0) + int(n)
            else:
                values.add(v.strip() if isinstance(v, str) else v)
    _refuse_vectors_as_text(values, label_column)
    if any(isinstance(v, float) and not float(v).is_integer() for v in values):
        raise DataError(
            f"label column {label_column!r} holds non-integer numbers: expected classes, not a regression target"
        )
    ordered = sorted(values, key=lambda v: (isinstance(v, str), v))
    return ordered, {k: n for k, n in dropped.items() if n}


def _class_name(v) -> str:
    return str(int(v)) if isinstance(v, (int, float, np.integer)) and not isinstance(v, bool) else str(v)


def _class_ids(column, uniques, index: dict, markers: frozenset[str]) -> np.ndarray:
    """(N,) int64: the class of each label of ``column`` (a ``pyarrow.ChunkedArray`` whose distinct values are
    ``uniques``), looked up once per distinct value; -1 for a row to leave out."""
    import pyarrow as pa
    import pyarrow.compute as pc

    code = np.array(
        [
            -1 if _unlabelled(v, markers) else index[v.strip() if isinstance(v, str) else v]
            for v in uniques.to_pylist()
        ],
        dtype=np.int64,
    )  # (distinct values,)
    position = pc.index_in(column, value_set=uniques) if len(uniques) else pa.array([], pa.int32())
    return code[position.to_numpy(zero_copy_only=False).astype(np.int64)]


def _json_labels(column, label_column: str, split: str | None):
    """The label ``column`` (a ``pyarrow.ChunkedArray``) as plain values where JSON lines left it as JSON text
    (``datasets.Json``), else as it is.

    ``datasets`` keeps a JSON-lines column as JSON text when its values are of several types. A null or -100 is a row
    without a label, of no type; besides those, values of one type (text, numbers, booleans) are decoded, each
    distinct value once, and values of several types (a number among strings), lists or objects are refused naming
    the rows. Only the first character of each value is read, by Arrow compute, to tell the types apart."""
    import json

    import pyarrow as pa
    import pyarrow.compute as pc

    storage = json_text(column)
    if storage is None:
        return column
    unlabelled = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(storage), "-100"), True)
    first = pc.if_else(unlabelled, "n", pc.utf8_slice_codeunits(pc.utf8_ltrim_whitespace(storage), 0, 1))
    uniques = pc.unique(first)
    names = np.array([_JSON_KINDS.get(c, "number") for c in uniques.to_pylist()] or ["null"])
    kinds = names[pc.index_in(first, value_set=uniques).to_numpy(zero_copy_only=False).astype(np.int64)]  # (N,)
    present = np.flatnonzero(kinds != "null")
    kind = kinds[present[0]] if len(present) else "null"
    where = f" of split {split!r}" if split else ""

    def shown(r: int) -> str:
        return f"row {r}{where}: {json.loads(storage[r].as_py())!r}"

    other = present[kinds[present] != kind]
    if len(other):
        raise DataError(
            f"Expected label values of one type in column {label_column!r}, "
            f"got mixed types ({shown(int(present[0]))}, {shown(int(other[0]))}): "
            "write every label as text, or every label as a number"
        )
    if kind in ("list", "object"):
        raise DataError(
            f"Expected one number or text label per row in column {label_column!r}, got JSON {kind}s "
            f"({shown(int(present[0]))}): for several labels per row give a list of label names or of 0/1 values"
        )
    distinct = pc.unique(storage).drop_null()
    decoded = [json.loads(v) for v in distinct.to_pylist()]
    if kind == "text":  # -100 as the text "-100": still the ignore index
        decoded = [v if isinstance(v, str) else str(v) for v in decoded]
    elif kind == "boolean":
        decoded = [v if isinstance(v, bool) else None for v in decoded]  # -100 among booleans: a missing label
    position = pc.index_in(storage, value_set=distinct)  # null where the value is null
    return pa.chunked_array([pa.array(decoded).take(position.combine_chunks())])


def _refuse_vectors_as_text(values: set, label_column: str) -> None:
    """Refuse labels that are all bracketed lists of numbers written as text (``"[1, 0, 0, 1]"``): multi-hot vectors
    a CSV cannot hold as lists, which would otherwise train one class per distinct vector."""
    if not values or not all(isinstance(v, str) and _VECTOR.fullmatch(v) for v in values):
        return
    example = min(values, key=lambda v: (len(v), v))
    raise DataError(
        f"Expected one class per row in label column {label_column!r}, got values that look like multi-hot vectors "
        f"written as text (e.g. {example!r}): for several labels per row give one 0/1 column per label "
        "(--label_columns a,b,c), a column of separated label names (--label_separator '|'), or a JSON-lines list "
        "column ([1, 0, 0, 1])"
    )


def _empty(v) -> bool:
    return v is None or (isinstance(v, float) and v != v) or (isinstance(v, str) and not v.strip())


def _text(v) -> str:
    """A label as the text of its cell: stripped text, an integral number without its ``.0``."""
    if isinstance(v, str):
        return v.strip()
    return str(v) if isinstance(v, float) and not v.is_integer() else _class_name(v)


def _unlabelled(v, markers: frozenset[str] = frozenset()) -> bool:
    """An empty label cell, -100 (the ignore index of every loss) or one of ``markers``: the row is dropped and
    counted."""
    if _empty(v):
        return True
    if (isinstance(v, str) and v.strip() == "-100") or (not isinstance(v, (str, bool)) and v == -100):
        return True
    return bool(markers) and _text(v) in markers


def label_ids(ds) -> np.ndarray:
    """(N,) int64: the label column of a split read as one Arrow column (no image decoded, no transform run)."""
    return np.asarray(read_column(ds, "label").to_numpy(), dtype=np.int64)


def _relabel(ds, labels: np.ndarray, names: list[str]):
    """``ds`` with its ``label`` column replaced by ``labels`` (N,) int64 (-1: a row to leave out), a ``ClassLabel`` of
    ``names``, in the column's place; ``ds`` has no indices mapping (the other columns stay memory-mapped)."""
    import datasets

    order = ds.column_names
    ds = ds.remove_columns("label").add_column("label", labels, feature=datasets.ClassLabel(names=names))
    return ds.select_columns(order)


def labelled(ds):
    """``ds`` without the rows whose label is -1 (an empty label, -100, or a class left out)."""
    labels = label_ids(ds)
    return ds if (labels >= 0).all() else ds.select(np.flatnonzero(labels >= 0))


def binarize(dsd, positive_classes: Sequence[Any], names: list[str]):
    """Label 1 for ``positive_classes``, 0 for the rest; names ``[rest, pos1+pos2...]``. An entry is a class name or
    an index, except where the classes are numbers (``0``, ``1``, ``7``): then only a name."""
    import datasets

    if all(re.fullmatch(r"-?\d+", n) for n in names):  # classes named by numbers: "3" is a name, never an index
        unknown = [c for c in positive_classes if str(c).strip() not in names]
        if unknown:
            raise DataError(
                f"Expected positive_classes among the class names {names}, got {unknown[0]!r}: the classes are "
                "numbers, so an entry names a class, not an index"
            )
    try:
        positive = sorted(
            {class_index(c, names, len(names), what="positive_classes entries") for c in positive_classes}
        )
    except ValueError as e:
        raise DataError(str(e)) from None
    if not positive or len(positive) == len(names):
        raise DataError(f"positive_classes must leave both classes non-empty, got {list(positive_classes)} of {names}")
    negative = [names[k] for k in range(len(names)) if k not in positive]
    new_names = [negative[0] if len(negative) == 1 else "rest", "+".join(names[k] for k in positive)]
    lookup = np.isin(np.arange(len(names)), positive).astype(np.int64)
    relabelled = {}
    for split, ds in dsd.items():
        labels = label_ids(ds)
        relabelled[split] = _relabel(ds, np.where(labels >= 0, lookup[labels], -1), new_names)
    return datasets.DatasetDict(relabelled), new_names


def label_counts(ds, num_classes: int) -> np.ndarray:
    """Rows per class of a split, read from its label column alone: (C,) int64 (rows labelled -1 not counted)."""
    labels = label_ids(ds)
    return np.bincount(labels[labels >= 0], minlength=num_classes)


def unseen_labels(splits: dict[str, Any], names: list[str], policy: str):
    """(splits, names) without the classes that have validation/test rows and no training rows.

    A model cannot predict a class it never saw, and a macro average over it counts a 0: ``policy`` "error" refuses
    such labels in one line naming each label and its splits, "drop" leaves their rows and their classes out (the
    remaining classes renumbered in order) with a warning counting the rows.
    """
    counts = {k: label_counts(ds, len(names)) for k, ds in splits.items() if ds is not None}
    held_out = [k for k in counts if k != "train"]
    unseen = np.flatnonzero((counts["train"] == 0) & (sum((counts[k] for k in held_out), np.zeros(len(names))) > 0))
    if not len(unseen):
        return splits, names
    found = [
        f"{names[c]!r} only in "
        + " and ".join(f"{k} ({rows_text(int(counts[k][c]))})" for k in held_out if counts[k][c])
        for c in unseen
    ]
    if policy == "error":
        raise DataError(
            f"Expected every validation/test label to appear in training, got {listed(found, 'labels')}: "
            "a model cannot predict a class it never saw; add training rows, "
            "or set unseen_labels: drop to leave those rows out"
        )
    keep = np.ones(len(names), dtype=bool)
    keep[unseen] = False
    lookup = np.where(keep, np.cumsum(keep) - 1, -1)  # old class index -> new index; -1: the row is left out
    new_names = [n for n, k in zip(names, keep) if k]
    if len(new_names) < 2:
        raise DataError(f"Expected at least 2 classes with training rows, got {new_names} of {names}")
    out = {}
    for k, ds in splits.items():
        if ds is not None:  # only the label column is read: images stay undecoded
            labels = label_ids(ds)
            ds = _relabel(ds, np.where(labels >= 0, lookup[labels], -1), new_names)  # unseen classes: -1
        out[k] = ds
    left_out = sum(int(counts[k][unseen].sum()) for k in held_out)
    logger.warning(
        f"unseen_labels=drop: left out {rows_text(left_out)} of labels with no training rows: "
        f"{listed(found, 'labels')}"
    )
    return out, new_names


def warn_untrained_classes(train, names: list[str], others: dict[str, Any]) -> None:
    """One warning line for the classes with no training rows (a class name without rows, a relabelling or a
    ``max_train_samples`` cap that empties a class): the model cannot learn them and macro averages count them as 0."""
    empty = np.flatnonzero(label_counts(train, len(names)) == 0)
    if not len(empty):
        return
    counts = {k: label_counts(ds, len(names)) for k, ds in others.items() if ds is not None}
    found = [
        f"{names[c]!r} ("
        + (", ".join(f"{rows_text(int(n[c]))} in {k}" for k, n in counts.items() if n[c]) or "no rows anywhere")
        + ")"
        for c in empty
    ]
    one = len(found) == 1
    logger.warning(
        f"no training rows in {'class' if one else 'classes'} {listed(found)}: the model cannot learn "
        f"{'it' if one else 'them'} and macro averages count {'it' if one else 'them'} as 0"
    )
