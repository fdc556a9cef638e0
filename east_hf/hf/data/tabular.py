"""Tabular rows as model inputs: fit the ``TabularFeatureExtractor`` (one-hot text columns, imputation,
standardisation with training-set statistics) on the training split and turn every split into ``input_features``.

Bounded memory and finite inputs: a text column with more than ``MAX_CATEGORIES`` distinct training values, or one
that is mostly unique (an id, a free-text field), is refused with a message naming ``feature_columns``, since its
one-hot encoding would be as wide as the data set is long; features are float32 throughout; an ``inf`` in any split
is refused with its column and row count (a missing value, NaN, is imputed with the training mean). A column of
numbers read as text because of a few text cells (``n/a``, a typo) is named with one of those cells: refused where its
one-hot encoding would be, a warning where it is not.

Any number of rows: the splits are read as Arrow columns in batches of ``BATCH_CELLS`` cells (categories, stray text
and statistics from each column's distinct values and batch sums, never row by row in Python), and each split is
written as one float32 fixed-size-list column, to a memory-mapped Arrow file when ``load_data`` caches it.

The fitted extractor is a transformers ``FeatureExtractionMixin`` (``east_hf.hf.data.tabular_features``): it saves
as ``preprocessor_config.json`` and reloads with ``AutoFeatureExtractor.from_pretrained``. Runs written before it
kept the same statistics in ``tabular_preprocessor.json``; ``load_tabular_features`` reads either.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from east_hf.hf.data.messages import columns_message, listed, rows_text
from east_hf.hf.data.rows import read_batches, read_column
from east_hf.hf.data.sources import DataError

if TYPE_CHECKING:
    from east_hf.hf.data.tabular_features import TabularFeatureExtractor

__all__ = [
    "LEGACY_PREPROCESSOR_NAME",
    "fit_tabular_features",
    "load_tabular_features",
    "tabular_splits",
]

LEGACY_PREPROCESSOR_NAME = "tabular_preprocessor.json"  # east_hf's own format before the feature extractor
MAX_CATEGORIES = 256  # distinct values of a one-hot text column; above it the column is refused
BATCH_CELLS = 1 << 22  # raw cells read per batch (32 MiB as float64): bounds the memory of preparing any size
UNIQUE_FRACTION = 0.5  # a text column with more distinct values than this fraction of rows (and > 32) looks like an id
NUMBER_FRACTION = 0.9  # a text column with at least this fraction of number cells is a numeric column with stray text

logger = logging.getLogger(__name__)


def fit_tabular_features(rows, columns: Sequence[str], standardize: bool = True) -> TabularFeatureExtractor:
    """A ``TabularFeatureExtractor`` fitted on the training rows only: a pandas DataFrame or a ``datasets.Dataset``.

    A column of numbers (or booleans) is a numeric feature, any other column is one-hot encoded over its distinct
    training values (stripped text). The rows are read in batches of ``BATCH_CELLS`` cells: the imputation value of
    a feature is the mean of its present values, the standardisation statistics the mean and the (population)
    standard deviation after imputation, accumulated in float64 (Chan et al.'s pairwise update).
    """
    from east_hf.hf.data.tabular_features import TabularFeatureExtractor

    numeric = [c for c in columns if _is_numeric(rows, c)]
    categories = {}
    for c in (c for c in columns if c not in numeric):
        values = sorted({str(v).strip() for v in _distinct(rows, c)})
        if _too_many_categories(len(values), len(rows)):
            raise DataError(
                f"text column {c!r} has {len(values)} distinct values in {len(rows)} training rows (an id or "
                f"free text?), too many to one-hot encode (at most {MAX_CATEGORIES}): set feature_columns to the "
                "columns to use, without it"
            )
        categories[c] = values
    extractor = TabularFeatureExtractor(numeric=numeric, categories=categories)
    width = len(extractor.feature_names)
    moments = _Moments(width)
    infinite = np.zeros(width, dtype=np.int64)
    for frame in _frames(rows, columns):
        raw = extractor.encode(frame)  # (n, F) float32, NaN where missing
        infinite += np.isinf(raw).sum(0)
        if not infinite.any():
            moments.update(raw)
    _as_data_error(extractor.refuse_infinite, infinite, "train")
    fill, mean, std = moments.result()
    if not standardize:
        mean, std = np.zeros(width), np.ones(width)
    std = np.where(std > 0, std, 1.0)  # a constant column stays constant (0) instead of dividing by zero
    extractor.fill, extractor.mean, extractor.std = fill.tolist(), mean.tolist(), std.tolist()
    return extractor


class _Moments:
    """Per feature, the count, mean and sum of squared deviations of the present values of (n, F) batches, merged
    batch by batch in float64 (Chan, Golub and LeVeque's pairwise update), then the statistics after imputation."""

    def __init__(self, width: int):
        self.n = np.zeros(width)
        self.mean = np.zeros(width)
        self.m2 = np.zeros(width)
        self.rows = 0

    def update(self, raw: np.ndarray) -> None:
        present = ~np.isnan(raw)  # (n, F)
        n = present.sum(0).astype(np.float64)
        values = np.where(present, raw, 0).astype(np.float64)  # (n, F)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, values.sum(0) / n, 0.0)
        m2 = (np.where(present, values - mean, 0) ** 2).sum(0)
        total = self.n + n
        with np.errstate(invalid="ignore", divide="ignore"):
            delta = mean - self.mean
            self.mean = np.where(total > 0, self.mean + delta * n / total, 0.0)
            self.m2 = self.m2 + m2 + np.where(total > 0, delta**2 * self.n * n / total, 0.0)
        self.n, self.rows = total, self.rows + len(raw)

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(fill, mean, std), each (F,) float64: ``fill`` the mean of the present values (0 for a column without
        any), ``mean`` and ``std`` those of the column with its missing values set to ``fill`` as float32."""
        if not self.rows:
            zeros = np.zeros_like(self.mean)
            return zeros, zeros, zeros
        fill = self.mean
        filled = fill.astype(np.float32).astype(np.float64)
        missing = self.rows - self.n
        mean = (self.n * self.mean + missing * filled) / self.rows
        m2 = self.m2 + self.n * (self.mean - mean) ** 2 + missing * (filled - mean) ** 2
        return fill, mean, np.sqrt(m2 / self.rows)


def _is_numeric(rows, column: str) -> bool:
    """Whether a column holds numbers or booleans: pandas' dtype of a DataFrame's column, or the Arrow type of a
    Dataset's (a boolean column with missing cells is text, as pandas reads it)."""
    if hasattr(rows, "iloc"):
        import pandas as pd

        return pd.api.types.is_numeric_dtype(rows[column]) or pd.api.types.is_bool_dtype(rows[column])
    import pyarrow as pa

    arrow = read_column(rows, column)
    kind = arrow.type
    if pa.types.is_boolean(kind):
        return arrow.null_count == 0
    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)


def _distinct(rows, column: str) -> list:
    """The distinct present values of a column, found in C (pandas or Arrow): Python sees each value once."""
    if hasattr(rows, "iloc"):
        return list(rows[column].dropna().unique())
    import pyarrow.compute as pc

    return pc.unique(read_column(rows, column)).drop_null().to_pylist()


def _frames(rows, columns: Sequence[str]):
    """``rows`` (a DataFrame or a Dataset) as pandas DataFrames of ``columns`` and at most ``BATCH_CELLS`` cells."""
    step = max(1024, BATCH_CELLS // max(1, len(columns)))
    if hasattr(rows, "iloc"):
        for start in range(0, len(rows), step):
            yield rows.iloc[start : start + step]
        return
    for table in read_batches(rows, columns, step):
        yield table.to_pandas()


def _too_many_categories(distinct: int, rows: int) -> bool:
    """Whether a text column's one-hot encoding would be too wide: more than ``MAX_CATEGORIES`` values, or mostly
    unique ones (an id, free text)."""
    return distinct > MAX_CATEGORIES or (distinct > 32 and distinct > UNIQUE_FRACTION * rows)


def _check_stray_text(splits: dict[str, Any], columns: Sequence[str]) -> None:
    """Name the column and a text cell of a numeric column read as text because of a few text cells (``n/a``, ``?``,
    a typo) in any split: refused where its one-hot encoding would be refused anyway, a warning where it is not.

    Each split's column is read as one Arrow column and Python sees its distinct values only: a cell is text when its
    stripped value is not empty and not a number (``pd.to_numeric``)."""
    import pandas as pd
    import pyarrow.compute as pc

    train = splits["train"]
    for c in columns:
        if _is_numeric(train, c):
            continue
        text_cells = cells = 0
        first = None  # the first text cell, in split order
        for ds in splits.values():
            column = read_column(ds, c)
            values, counts = pc.value_counts(column.drop_null()).flatten()
            stripped = pd.Series([str(v).strip() for v in values.to_pylist()], dtype=object)
            present = (stripped != "").to_numpy()
            text = present & pd.to_numeric(stripped, errors="coerce").isna().to_numpy()  # (distinct values,)
            counts = counts.to_numpy()
            cells += int(counts[present].sum())
            text_cells += int(counts[text].sum())
            if first is None and text.any():
                position = pc.index_in(column, value_set=values).to_numpy(zero_copy_only=False)
                at = np.isin(position, np.flatnonzero(text))  # (N,): the rows holding a text cell
                first = stripped[int(position[np.argmax(at)])]
        if not 0 < text_cells <= (1 - NUMBER_FRACTION) * cells:
            continue
        got = f"text {first!r} in {text_cells} of {cells} rows"
        fix = "fix or empty those cells (an empty cell is imputed)"
        distinct = len({str(v).strip() for v in _distinct(train, c)})
        if _too_many_categories(distinct, len(train)):
            raise DataError(
                f"Expected numbers in column {c!r}, got {got}: {fix}, or leave the column out with feature_columns"
            )
        logger.warning(
            f"column {c!r} holds numbers and {got}, so it is one-hot encoded as text ({distinct} categories): {fix} "
            "to use it as numbers"
        )


def _as_data_error(step, *args):
    try:
        return step(*args)
    except ValueError as e:  # an inf: the user's data to fix, reported in one line by east-train
        raise DataError(str(e)) from None


def load_tabular_features(directory: str | os.PathLike) -> TabularFeatureExtractor:
    """The feature extractor saved in a run folder: ``preprocessor_config.json``, or an older run's
    ``tabular_preprocessor.json``."""
    from east_hf.hf.data.tabular_features import TabularFeatureExtractor

    folder = Path(directory)
    if (folder / "preprocessor_config.json").is_file():
        return TabularFeatureExtractor.from_pretrained(folder)
    if (folder / LEGACY_PREPROCESSOR_NAME).is_file():
        return TabularFeatureExtractor(**json.loads((folder / LEGACY_PREPROCESSOR_NAME).read_text()))
    raise FileNotFoundError(
        f"Expected preprocessor_config.json (or {LEGACY_PREPROCESSOR_NAME}) in {folder}, got neither"
    )


def tabular_splits(
    splits: dict[str, Any],
    feature_columns: Sequence[str] | None,
    standardize: bool,
    names: list[str],
    folder: Path | None = None,
    multi_label: bool = False,
    fitted_rows: int | None = None,
):
    """(splits of ``input_features`` (F,) float32 and ``labels``, the fitted extractor) from the raw splits.

    ``labels``: a ``ClassLabel`` of ``names``, or with ``multi_label`` the (L,) float32 multi-hot vector of the
    ``label`` column (the label columns themselves were removed before: never an input).

    The extractor is fitted on the training split; every split is then encoded batch by batch (``BATCH_CELLS``) into
    an Arrow fixed-size-list column, written to ``folder/<split>.arrow`` and memory-mapped, or kept in memory
    without ``folder``. An inf in a split is refused with its column and row count. ``fitted_rows``: the training
    split is the first rows of a stream, so many (``east_hf.hf.data.streaming``), which the warnings name.
    """
    columns = _feature_columns(splits["train"], feature_columns)
    present = {k: ds for k, ds in splits.items() if ds is not None}
    _check_stray_text(present, columns)
    extractor = fit_tabular_features(present["train"], columns, standardize)
    _warn_unseen_categories(present, extractor, fitted_rows)
    schema = _schema(len(extractor.feature_names), names, multi_label)
    out = {}
    for k, ds in present.items():
        out[k] = _encode_split(
            ds, k, extractor, columns, schema, None if folder is None else Path(folder) / f"{k}.arrow"
        )
    return out, extractor


def _warn_unseen_categories(splits: dict[str, Any], extractor, fitted_rows: int | None = None) -> None:
    """One warning line for the values of a one-hot column that the validation / test rows hold and the training rows
    do not: the extractor encodes them as all zeros, no category. ``fitted_rows``: the training rows are the first
    ones of a stream, so many; later training rows may hold such a value (the stream's first pass names those)."""
    import pyarrow.compute as pc

    found = []
    for column, categories in extractor.categories.items():
        known, values, rows = set(categories), set(), []
        for split, ds in splits.items():
            if split == "train":
                continue
            distinct, counts = pc.value_counts(read_column(ds, column).drop_null()).flatten()
            unseen = [(str(v).strip(), n) for v, n in zip(distinct.to_pylist(), counts.to_pylist())]
            unseen = [(v, n) for v, n in unseen if v and v not in known]
            values.update(v for v, _ in unseen)
            if unseen:
                rows.append(f"{rows_text(sum(n for _, n in unseen))} of {split}")
        if values:
            found.append(f"{column!r}: {listed([repr(v) for v in sorted(values)], 'values')} ({', '.join(rows)})")
    if found:
        seen = "never seen in training" if fitted_rows is None else (
            f"not in the first {fitted_rows} training rows, which the encoder was fitted on,"
        )
        logger.warning(f"values {seen} are encoded as all zeros (no category) in {listed(found, 'columns')}")


def _feature_columns(train, feature_columns: Sequence[str] | None) -> list[str]:
    """``feature_columns``, else every column of ``train`` but ``label``; a missing column, or none, is refused."""
    columns = [c for c in train.column_names if c != "label"] if feature_columns is None else list(feature_columns)
    missing = [c for c in columns if c not in train.column_names]
    if missing:
        raise DataError(f"feature column(s) {missing} not found; columns are: {columns_message(train)}")
    if not columns:
        raise DataError("no feature columns: the data set has only a label column")
    return columns


def _schema(width: int, names: list[str], multi_label: bool):
    """The Arrow schema of a prepared split: ``input_features`` (F,) float32 and ``labels``, a ``ClassLabel`` of
    ``names`` or (L,) float32."""
    import datasets

    labels = (
        datasets.List(datasets.Value("float32"), length=len(names))
        if multi_label
        else datasets.ClassLabel(names=names)
    )
    features = datasets.Features(
        {"input_features": datasets.List(datasets.Value("float32"), length=width), "labels": labels}
    )
    return features.arrow_schema


def _encode_split(ds, split: str, extractor, columns: Sequence[str], schema, path: Path | None):
    """``ds`` encoded batch by batch (``BATCH_CELLS``) into a torch-formatted Dataset of ``schema``, memory-mapped
    from ``path`` (kept in memory without one); an inf is refused once the whole split is counted."""
    import datasets
    import pyarrow as pa

    width = len(extractor.feature_names)
    step = max(1024, BATCH_CELLS // max(1, len(columns)))
    infinite = np.zeros(width, dtype=np.int64)
    with _SplitWriter(path, schema) as write:
        for table in read_batches(ds, [*columns, "label"], step):
            raw = extractor.encode(table.drop_columns(["label"]).to_pandas())  # (n, F) float32
            infinite += np.isinf(raw).sum(0)
            if infinite.any():  # refused once the split is counted
                continue
            inputs = pa.FixedSizeListArray.from_arrays(pa.array(extractor.normalize(raw).reshape(-1)), width)
            labels = table.column("label").combine_chunks().cast(schema.field("labels").type)
            write(pa.Table.from_arrays([inputs, labels], schema=schema))
    _as_data_error(extractor.refuse_infinite, infinite, split)
    dataset = datasets.Dataset.from_file(str(path)) if path is not None else datasets.Dataset(write.table)
    return dataset.with_format("torch")


class _SplitWriter(contextlib.AbstractContextManager):
    """Collects Arrow tables of one schema into an Arrow stream file at ``path`` (``datasets``' cache format), or into
    ``self.table`` (an in-memory ``datasets`` table) when ``path`` is ``None``."""

    def __init__(self, path: Path | None, schema):
        import pyarrow as pa

        self.schema, self.parts = schema, []
        self.writer = None if path is None else pa.ipc.new_stream(str(path), schema)
        self.table = None

    def __call__(self, table) -> None:
        if self.writer is None:
            self.parts.append(table)
        else:
            self.writer.write_table(table)

    def __exit__(self, *exc) -> None:
        import pyarrow as pa
        from datasets.table import InMemoryTable

        if self.writer is not None:
            self.writer.close()
        else:
            self.table = InMemoryTable(pa.concat_tables(self.parts) if self.parts else self.schema.empty_table())
