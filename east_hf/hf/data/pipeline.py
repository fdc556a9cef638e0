"""The data pipeline of ``east-train``: relabel, resample and split, then hand tabular rows to the preprocessor.

``load_data(DataArguments)`` returns an ``EASTData``: the label column becomes a ``ClassLabel`` named ``label``;
``positive_classes`` relabels to binary (those classes 1, the rest 0); ``imbalance_ratio`` keeps a fraction
ratio**(k/(C-1)) of class k; missing splits are carved from the training split by the paper's protocol (stratified,
64 % train / 16 % validation / 20 % test of the whole, fixed seed), and ``resplit`` pools every split first.
A validation/test label with no training rows is refused (``unseen_labels="error"``) or left out with its rows
(``"drop"``); any other class left without training rows gets a warning before training.

Multi-label data (``label_columns``, ``label_separator`` or a list-valued label column; ``east_hf.hf.data.multilabel``)
goes the same way with a multi-hot ``label``: (L,) float32 of 0.0 / 1.0, -100 for an entry left out; the splits are
carved stratified by each row's rarest positive label, and a label never positive (or never negative) in training
gets a warning saying what its F1 will be.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from east_hf.core import class_index
from east_hf.hf.data.arguments import multilabel_refusal
from east_hf.hf.data.cache_store import versions_kept
from east_hf.hf.data.fingerprint import one_listing
from east_hf.hf.data.multilabel import (
    encode_multilabel,
    is_list_column,
    label_matrix,
    label_strata,
    mergeable_strata,
    positives,
    warn_untrainable_labels,
)
from east_hf.hf.data.prepared_cache import captured_warnings, prepared_folder, read_prepared, staging, write_prepared
from east_hf.hf.data.rows import json_text, read_column
from east_hf.hf.data.sources import DataError, load_raw, local_path, quiet_datasets
from east_hf.hf.data.tabular import columns_message, tabular_splits
from east_hf.hf.data.text import drop_empty_texts, text_columns

__all__ = ["VALIDATION_NAMES", "EASTData", "load_data"]

logger = logging.getLogger(__name__)

VALIDATION_NAMES = ("validation", "valid", "val", "dev")


@dataclass
class EASTData:
    """The three splits and what the model needs to know about them.

    ``train`` / ``validation`` / ``test``: ``datasets.Dataset``; tabular ones yield ``input_features`` (F,) float32 and
    ``labels``, image ones yield raw rows until ``set_image_transforms``. ``label_names[k]`` names class k.
    Text ones hold ``label`` and the text column(s) until ``east_hf.hf.data.text.tokenize_splits`` replaces them by
    the tokenizer's inputs. ``dropped`` counts the rows left out at load by reason: an empty label cell, the label
    -100 (the ignore index), or an empty text.

    ``multi_label``: every row carries a set of labels (``east_hf.hf.data.multilabel``); ``label_names`` are the L
    labels and each row's label is (L,) float32, 1.0 / 0.0, or -100 for an entry that does not count (an empty cell
    of a 0/1 column); a row with no entry left is dropped and counted as ``"empty label"``.
    """

    train: Any
    validation: Any
    test: Any | None
    label_names: list[str]
    modality: str  # "image", "tabular" or "text"
    image_column: str | None = None
    preprocessor: Any | None = None  # tabular: the fitted TabularFeatureExtractor; text: the tokenizer, once tokenized
    text_column: str | None = None
    text_pair_column: str | None = None
    dropped: dict[str, int] = field(default_factory=dict)  # rows left out at load, by reason ("empty label": 3)
    multi_label: bool = False  # labels are (L,) float multi-hot vectors, not one class index per row

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def id2label(self) -> dict[int, str]:
        return dict(enumerate(self.label_names))

    def class_counts(self, split: str = "train") -> list[int]:
        """Samples per class in a split (multi-label: positives per label), read as one Arrow column (no image
        decoded, no transform run)."""
        ds = getattr(self, split)
        if self.multi_label:
            return positives(ds).tolist()
        column = "labels" if "labels" in ds.column_names else "label"
        labels = read_column(ds, column).to_numpy()
        return np.bincount(np.asarray(labels, dtype=np.int64), minlength=self.num_labels).tolist()


def _list_labels(dsd, label_column: str | None) -> bool:
    """Whether the label column (``label_column``, else ``label`` / ``labels``) holds a list per row: multi-label."""
    first = next(iter(dsd.values()))
    column = label_column or next((c for c in ("label", "labels") if c in first.column_names), None)
    return is_list_column(first, column)


def _encode_labels(dsd, label_column: str | None, dataset_name: str):
    """Every split with a ``ClassLabel`` column named ``label``, the same names in every split.

    The classes are the distinct values of the label column (numbers in numeric order, then text), read per split
    as one Arrow column: Python sees each distinct value once, never a row. A row whose label is empty or -100 keeps
    the label -1 and is counted in ``dropped``; ``_labelled`` leaves such rows out once the labels are final.
    """
    import datasets
    import pyarrow as pa
    import pyarrow.compute as pc

    first = next(iter(dsd.values()))
    if label_column is None:
        label_column = next((c for c in ("label", "labels") if c in first.column_names), None)
        if label_column is None:
            raise DataError(
                f"no label column in {dataset_name!r}: set label_column to one of the columns: {columns_message(first)}"
            )
    for split, ds in dsd.items():
        if label_column not in ds.column_names:
            raise DataError(
                f"label column {label_column!r} not found in {dataset_name!r} (split {split!r}); "
                f"columns are: {columns_message(ds)}"
            )
    if label_column != "label":
        if "label" in first.column_names:
            dsd = dsd.rename_column("label", "label_original")
        dsd = dsd.rename_column(label_column, "label")
    feature = first.features["label"] if "label" in first.features else dsd[next(iter(dsd))].features["label"]
    if isinstance(feature, datasets.ClassLabel):
        return dsd, list(feature.names), {}
    columns = {
        split: _json_labels(read_column(ds, "label"), label_column, split if len(dsd) > 1 else None)
        for split, ds in dsd.items()
    }
    distinct = {split: pc.value_counts(column).flatten() for split, column in columns.items()}  # [values, counts]
    values, dropped = set(), {"empty label": 0, "label -100": 0}
    for uniques, counts in distinct.values():
        for v, n in zip(uniques.to_pylist(), counts.to_numpy()):
            if _unlabelled(v):
                dropped["empty label" if _empty(v) else "label -100"] += int(n)
            else:
                values.add(v.strip() if isinstance(v, str) else v)
    _refuse_vectors_as_text(values, label_column)
    if any(isinstance(v, float) and not float(v).is_integer() for v in values):
        raise DataError(
            f"label column {label_column!r} holds non-integer numbers: expected classes, not a regression target"
        )
    ordered = sorted(values, key=lambda v: (isinstance(v, str), v))  # numbers numerically, then strings
    names = [
        str(int(v)) if isinstance(v, (int, float, np.integer)) and not isinstance(v, bool) else str(v) for v in ordered
    ]
    index = {v: i for i, v in enumerate(ordered)}
    encoded = {}
    for split, ds in dsd.items():
        uniques = distinct[split][0]
        code = np.array(
            [-1 if _unlabelled(v) else index[v.strip() if isinstance(v, str) else v] for v in uniques.to_pylist()],
            dtype=np.int64,
        )  # (distinct values,): the class of each distinct value, -1 for a row to leave out
        position = pc.index_in(columns[split], value_set=uniques) if len(uniques) else pa.array([], pa.int32())
        encoded[split] = _relabel(ds, code[position.to_numpy(zero_copy_only=False).astype(np.int64)], names)
    return datasets.DatasetDict(encoded), names, {k: n for k, n in dropped.items() if n}


_JSON_KINDS = {'"': "text", "t": "boolean", "f": "boolean", "[": "list", "{": "object", "n": "null"}  # else a number
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_VECTOR = re.compile(rf"\[\s*(?:{_NUMBER}(?:\s*[,;\s]\s*{_NUMBER})*)?\s*\]")  # "[1, 0, 0, 1]", "[0 1]"


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
            f"Expected label values of one type in column {label_column!r}, got mixed types ({shown(int(present[0]))}, "
            f"{shown(int(other[0]))}): write every label as text, or every label as a number"
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


def _unlabelled(v) -> bool:
    """An empty label cell, or -100 (the ignore index of every loss): the row is dropped and counted."""
    return _empty(v) or (isinstance(v, str) and v.strip() == "-100") or (not isinstance(v, (str, bool)) and v == -100)


def _labels(ds) -> np.ndarray:
    """(N,) int64: the label column of a split read as one Arrow column (no image decoded, no transform run)."""
    return np.asarray(read_column(ds, "label").to_numpy(), dtype=np.int64)


def _relabel(ds, labels: np.ndarray, names: list[str]):
    """``ds`` with its ``label`` column replaced by ``labels`` (N,) int64 (-1: a row to leave out), a ``ClassLabel`` of
    ``names``, in the column's place; ``ds`` has no indices mapping (the other columns stay memory-mapped)."""
    import datasets

    order = ds.column_names
    ds = ds.remove_columns("label").add_column("label", labels, feature=datasets.ClassLabel(names=names))
    return ds.select_columns(order)


def _labelled(ds):
    """``ds`` without the rows whose label is -1 (an empty label, -100, or a class left out)."""
    labels = _labels(ds)
    return ds if (labels >= 0).all() else ds.select(np.flatnonzero(labels >= 0))


def _binarize(dsd, positive_classes: Sequence[Any], names: list[str]):
    """Label 1 for ``positive_classes``, 0 for the rest; names ``[rest, pos1+pos2...]``."""
    import datasets

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
        labels = _labels(ds)
        relabelled[split] = _relabel(ds, np.where(labels >= 0, lookup[labels], -1), new_names)
    return datasets.DatasetDict(relabelled), new_names


def _label_counts(ds, num_classes: int) -> np.ndarray:
    """Rows per class of a split, read from its label column alone: (C,) int64 (rows labelled -1 not counted)."""
    labels = _labels(ds)
    return np.bincount(labels[labels >= 0], minlength=num_classes)


def _rows(n: int) -> str:
    return f"{n} row{'s' if n != 1 else ''}"


def _unseen_labels(splits: dict[str, Any], names: list[str], policy: str):
    """(splits, names) without the classes that have validation/test rows and no training rows.

    A model cannot predict a class it never saw, and a macro average over it counts a 0: ``policy`` "error" refuses
    such labels in one line naming each label and its splits, "drop" leaves their rows and their classes out (the
    remaining classes renumbered in order) with a warning counting the rows.
    """
    counts = {k: _label_counts(ds, len(names)) for k, ds in splits.items() if ds is not None}
    held_out = [k for k in counts if k != "train"]
    unseen = np.flatnonzero((counts["train"] == 0) & (sum((counts[k] for k in held_out), np.zeros(len(names))) > 0))
    if not len(unseen):
        return splits, names
    found = [
        f"{names[c]!r} only in " + " and ".join(f"{k} ({_rows(int(counts[k][c]))})" for k in held_out if counts[k][c])
        for c in unseen
    ]
    listed = ", ".join(found[:5]) + (f" and {len(found) - 5} more labels" if len(found) > 5 else "")
    if policy == "error":
        raise DataError(
            f"Expected every validation/test label to appear in training, got {listed}: a model cannot predict a "
            "class it never saw; add training rows, or set unseen_labels: drop to leave those rows out"
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
            labels = _labels(ds)
            ds = _relabel(ds, np.where(labels >= 0, lookup[labels], -1), new_names)  # unseen classes: -1
        out[k] = ds
    left_out = sum(int(counts[k][unseen].sum()) for k in held_out)
    logger.warning(f"unseen_labels=drop: left out {_rows(left_out)} of labels with no training rows: {listed}")
    return out, new_names


def _warn_untrained_classes(train, names: list[str], others: dict[str, Any]) -> None:
    """One warning line for the classes with no training rows (a class name without rows, a relabelling or a
    ``max_train_samples`` cap that empties a class): the model cannot learn them and macro averages count them as 0."""
    empty = np.flatnonzero(_label_counts(train, len(names)) == 0)
    if not len(empty):
        return
    counts = {k: _label_counts(ds, len(names)) for k, ds in others.items() if ds is not None}
    found = [
        f"{names[c]!r} ("
        + (", ".join(f"{_rows(int(n[c]))} in {k}" for k, n in counts.items() if n[c]) or "no rows anywhere")
        + ")"
        for c in empty
    ]
    listed = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    logger.warning(
        f"no training rows in {'class' if len(found) == 1 else 'classes'} {listed}: the model cannot learn "
        f"{'it' if len(found) == 1 else 'them'} and macro averages count {'it' if len(found) == 1 else 'them'} as 0"
    )


def _imbalance(ds, ratio: float, num_classes: int, seed: int):
    """Keep a fraction ratio**(k/(C-1)) of class k (at least one sample): a long-tailed subsample."""
    labels = _labels(ds)
    rng = np.random.default_rng(seed)
    keep = []
    for k in range(num_classes):
        members = np.flatnonzero(labels == k)
        n = max(1, int(round(len(members) * ratio ** (k / (num_classes - 1))))) if len(members) else 0
        keep.append(rng.permutation(members)[:n])
    return ds.select(np.sort(np.concatenate(keep)))


def _stratified_split(ds, fraction: float, seed: int, what: str, multi_label: bool = False):
    """(rest, carved): ``fraction`` of ``ds`` carved off, stratified by label; multi-label by each row's rarest positive
    label (``east_hf.hf.data.multilabel.label_strata``, strata too small to split merged)."""
    from sklearn.model_selection import train_test_split

    labels = mergeable_strata(label_strata(label_matrix(ds)), fraction) if multi_label else _labels(ds)
    try:
        rest, carved = train_test_split(np.arange(len(ds)), test_size=fraction, stratify=labels, random_state=seed)
    except ValueError as e:
        counts = np.bincount(labels)
        raise DataError(
            f"cannot carve a stratified {what} split ({fraction:.3g} of {len(ds)} samples, smallest "
            f"{'stratum' if multi_label else 'class'} {counts[counts > 0].min() if len(labels) else 0} samples): {e}"
        ) from None
    return ds.select(np.sort(rest)), ds.select(np.sort(carved))


def _cap(ds, n: int | None, seed: int):
    return ds if n is None or n >= len(ds) else ds.shuffle(seed=seed).select(range(n))


def _image_column(ds, requested: str | None, dataset_name: str) -> str | None:
    import datasets

    if requested is not None:
        if requested not in ds.column_names:
            raise DataError(
                f"image column {requested!r} not found in {dataset_name!r}; columns are: {columns_message(ds)}"
            )
        return requested
    return next((c for c, f in ds.features.items() if isinstance(f, datasets.Image)), None)


def _find_split(dsd, requested: str | None, candidates: Sequence[str], what: str):
    if requested is not None:
        if requested not in dsd:
            raise DataError(f"{what} split {requested!r} not found; splits are: {', '.join(dsd)}")
        return requested
    return next((c for c in candidates if c in dsd), None)


def load_data(args, text: bool = False) -> EASTData:
    """Load, relabel, resample and split the data set of a ``DataArguments``; tabular rows are made model-ready.

    Tabular splits prepared from files are written once per content of the data as memory-mapped Arrow files in
    east_hf's cache (``east_hf.hf.data.prepared_cache``): a later call with the same bytes and arguments, such as another
    process of a distributed run after the main one (``TrainingArguments.main_process_first``), maps them instead
    of reading the rows and preparing them again, and the processes share their pages. The warnings of the
    preparation are repeated. The rows themselves are cached by content too (``east_hf.hf.data.rows_cache``).

    ``text``: the model takes text, so a table without ``text_column`` is read as text, its column of long strings
    the input (``east_hf.hf.data.text``); text splits are tokenized once the tokenizer is known, not here.
    """
    versions_kept()  # a bad EAST_HF_CACHE_VERSIONS is refused before anything is read or written
    local = local_path(args.dataset_name)
    with quiet_datasets(), one_listing():
        dsd = None if local is not None else load_raw(args.dataset_name, args.dataset_config)
        text = text or args.text_column is not None or args.text_pair_column is not None
        folder = None if text else prepared_folder(args, local, dsd)
        if folder is not None and (cached := read_prepared(folder)) is not None:
            return EASTData(**cached)
        if dsd is None:
            dsd = load_raw(args.dataset_name, args.dataset_config)
        with staging(folder) as stage, captured_warnings("east_hf.hf.data") as warnings:
            data = _prepare(dsd, args, stage, text)
            if stage is None or data.modality != "tabular":
                return data
            write_prepared(stage, folder, data, warnings)
        return EASTData(**read_prepared(folder, repeat_warnings=False))


def _prepare(dsd, args, folder=None, text: bool = False) -> EASTData:
    """``folder``: where tabular splits are written as Arrow files (``None``: kept in memory); ``text``: read as text."""
    import datasets

    multi_label = args.multi_label or _list_labels(dsd, args.label_column)
    if multi_label:
        for name in ("positive_classes", "imbalance_ratio"):
            if getattr(args, name):
                raise DataError(multilabel_refusal(name))
        dsd, names, dropped = encode_multilabel(dsd, args, args.dataset_name)
    else:
        dsd, names, dropped = _encode_labels(dsd, args.label_column, args.dataset_name)
    text_column = pair_column = None
    if text:
        text_column, pair_column = text_columns(
            next(iter(dsd.values())), args.text_column, args.text_pair_column, args.dataset_name
        )
        keep = ["label", text_column] + ([pair_column] if pair_column else [])
        dsd, empty = drop_empty_texts(
            datasets.DatasetDict({k: ds.select_columns(keep) for k, ds in dsd.items()}), keep[1:]
        )
        if empty:
            dropped["empty text"] = empty
    if args.positive_classes:
        dsd, names = _binarize(dsd, args.positive_classes, names)
    if len(names) < 2:
        raise DataError(f"expected at least 2 classes in {args.dataset_name!r}, got {names}")
    if args.resplit and len(dsd) > 1:
        dsd = datasets.DatasetDict({"train": datasets.concatenate_datasets(list(dsd.values()))})
    train_name = _find_split(dsd, args.train_split, (), "train")
    val_name = _find_split(dsd, args.validation_split, VALIDATION_NAMES, "validation")
    test_name = _find_split(dsd, args.test_split, ("test",), "test")
    splits = {
        "train": dsd[train_name],
        "validation": dsd[val_name] if val_name else None,
        "test": dsd[test_name] if test_name else None,
    }
    if not multi_label:  # multi-label: a label without training positives is warned about below
        splits, names = _unseen_labels(splits, names, args.unseen_labels)
        splits = {k: None if ds is None else _labelled(ds) for k, ds in splits.items()}
    long_tail = args.imbalance_ratio is not None and args.imbalance_ratio < 1
    if long_tail and args.imbalance_splits != "train":  # "all": before carving, so every split has the long tail
        for key in ("train", "validation", "test"):
            if splits[key] is not None:
                splits[key] = _imbalance(splits[key], args.imbalance_ratio, len(names), args.split_seed)
    seed, val, test = args.split_seed, args.val_size, args.test_size
    if splits["test"] is None:
        # Without a validation split both are carved: test_size of the whole, then val_size of the whole from the rest.
        fraction = test if splits["validation"] is None else test / (1 - val)
        splits["train"], splits["test"] = _stratified_split(splits["train"], fraction, seed, "test", multi_label)
    if splits["validation"] is None:
        splits["train"], splits["validation"] = _stratified_split(
            splits["train"], val / (1 - test), seed, "validation", multi_label
        )
    if long_tail and args.imbalance_splits == "train":  # after carving: validation and test keep the original mix
        splits["train"] = _imbalance(splits["train"], args.imbalance_ratio, len(names), args.split_seed)
    for key, cap in (
        ("train", args.max_train_samples),
        ("validation", args.max_eval_samples),
        ("test", args.max_test_samples),
    ):
        splits[key] = _cap(splits[key], cap, seed)
    held_out = {k: splits[k] for k in ("validation", "test")}
    if multi_label:
        warn_untrainable_labels(splits["train"], names, held_out)
    else:
        _warn_untrained_classes(splits["train"], names, held_out)
    if text:
        return EASTData(
            splits["train"],
            splits["validation"],
            splits["test"],
            names,
            "text",
            dropped=dropped,
            text_column=text_column,
            text_pair_column=pair_column,
            multi_label=multi_label,
        )
    image_column = _image_column(splits["train"], args.image_column, args.dataset_name)
    if image_column is not None:
        keep = [image_column, "label"]
        splits = {k: ds.select_columns(keep) for k, ds in splits.items()}
        return EASTData(
            splits["train"],
            splits["validation"],
            splits["test"],
            names,
            "image",
            image_column,
            dropped=dropped,
            multi_label=multi_label,
        )
    splits, preprocessor = tabular_splits(
        splits, args.feature_columns, args.standardize, names, folder, multi_label=multi_label
    )
    return EASTData(
        splits["train"],
        splits["validation"],
        splits["test"],
        names,
        "tabular",
        preprocessor=preprocessor,
        dropped=dropped,
        multi_label=multi_label,
    )
