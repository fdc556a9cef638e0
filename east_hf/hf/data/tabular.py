"""Tabular rows as model inputs: fit the ``TabularFeatureExtractor`` (one-hot text columns, imputation,
standardisation with training-set statistics) on the training split and turn every split into ``input_features``.

Bounded memory and finite inputs: a text column with more than ``MAX_CATEGORIES`` distinct training values, or one
that is mostly unique (an id, a free-text field), is refused with a message naming ``feature_columns``, since its
one-hot encoding would be as wide as the data set is long; features are float32 throughout; an ``inf`` in any split
is refused with its column and row count (a missing value, NaN, is imputed with the training mean). A column of
numbers read as text because of a few text cells (``n/a``, a typo) is named with one of those cells: refused where its
one-hot encoding would be, a warning where it is not.

The fitted extractor is a transformers ``FeatureExtractionMixin`` (``east_hf.hf.models.tabular_features``): it saves
as ``preprocessor_config.json`` and reloads with ``AutoFeatureExtractor.from_pretrained``. Runs written before it
kept the same statistics in ``tabular_preprocessor.json``; ``load_tabular_features`` reads either.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from east_hf.hf.data.sources import DataError

if TYPE_CHECKING:
    from east_hf.hf.models.tabular_features import TabularFeatureExtractor

__all__ = [
    "LEGACY_PREPROCESSOR_NAME",
    "columns_message",
    "fit_tabular_features",
    "load_tabular_features",
    "tabular_splits",
]

LEGACY_PREPROCESSOR_NAME = "tabular_preprocessor.json"  # east_hf's own format before the feature extractor
MAX_CATEGORIES = 256  # distinct values of a one-hot text column; above it the column is refused
UNIQUE_FRACTION = 0.5  # a text column with more distinct values than this fraction of rows (and > 32) looks like an id
NUMBER_FRACTION = 0.9  # a text column with at least this fraction of number cells is a numeric column with stray text

logger = logging.getLogger(__name__)


def columns_message(ds) -> str:
    return ", ".join(ds.column_names)


def fit_tabular_features(frame, columns: Sequence[str], standardize: bool = True) -> TabularFeatureExtractor:
    """A ``TabularFeatureExtractor`` fitted on the training rows ``frame`` (a pandas DataFrame) only."""
    import pandas as pd

    from east_hf.hf.models.tabular_features import TabularFeatureExtractor

    numeric = [c for c in columns if pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c])]
    categories = {}
    for c in (c for c in columns if c not in numeric):
        values = frame[c].dropna().map(lambda v: str(v).strip()).unique()
        if _too_many_categories(len(values), len(frame)):
            raise DataError(
                f"text column {c!r} has {len(values)} distinct values in {len(frame)} training rows (an id or "
                f"free text?), too many to one-hot encode (at most {MAX_CATEGORIES}): set feature_columns to the "
                "columns to use, without it"
            )
        categories[c] = sorted(values)
    extractor = TabularFeatureExtractor(numeric=numeric, categories=categories)
    raw = extractor.encode(frame)  # (N, F) float32, NaN where missing
    _as_data_error(extractor.check_finite, raw, "train")
    with np.errstate(all="ignore"):
        fill = np.nan_to_num(np.nanmean(raw, axis=0, dtype=np.float64)) if len(raw) else np.zeros(raw.shape[1])
    filled = np.where(np.isnan(raw), fill.astype(np.float32), raw)
    if standardize:
        mean, std = filled.mean(0, dtype=np.float64), filled.std(0, dtype=np.float64)
    else:
        mean, std = np.zeros(raw.shape[1]), np.ones(raw.shape[1])
    std = np.where(std > 0, std, 1.0)  # a constant column stays constant (0) instead of dividing by zero
    extractor.fill, extractor.mean, extractor.std = fill.tolist(), mean.tolist(), std.tolist()
    return extractor


def _too_many_categories(distinct: int, rows: int) -> bool:
    """Whether a text column's one-hot encoding would be too wide: more than ``MAX_CATEGORIES`` values, or mostly
    unique ones (an id, free text)."""
    return distinct > MAX_CATEGORIES or (distinct > 32 and distinct > UNIQUE_FRACTION * rows)


def _check_stray_text(frames: dict[str, Any], columns: Sequence[str]) -> None:
    """Name the column and a text cell of a numeric column read as text because of a few text cells (``n/a``, ``?``,
    a typo) in any split: refused where its one-hot encoding would be refused anyway, a warning where it is not."""
    import pandas as pd

    train = frames["train"]
    for c in columns:
        if pd.api.types.is_numeric_dtype(train[c]) or pd.api.types.is_bool_dtype(train[c]):
            continue
        cells = pd.concat([frame[c] for frame in frames.values()], ignore_index=True).dropna().astype(str).str.strip()
        cells = cells[cells != ""]
        text = pd.to_numeric(cells, errors="coerce").isna().to_numpy()
        if not 0 < text.sum() <= (1 - NUMBER_FRACTION) * len(cells):
            continue
        got = f"text {cells[text].iloc[0]!r} in {int(text.sum())} of {len(cells)} rows"
        fix = "fix or empty those cells (an empty cell is imputed)"
        distinct = train[c].dropna().astype(str).str.strip().nunique()
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
    from east_hf.hf.models.tabular_features import TabularFeatureExtractor

    folder = Path(directory)
    if (folder / "preprocessor_config.json").is_file():
        return TabularFeatureExtractor.from_pretrained(folder)
    if (folder / LEGACY_PREPROCESSOR_NAME).is_file():
        return TabularFeatureExtractor(**json.loads((folder / LEGACY_PREPROCESSOR_NAME).read_text()))
    raise FileNotFoundError(
        f"Expected preprocessor_config.json (or {LEGACY_PREPROCESSOR_NAME}) in {folder}, got neither"
    )


def tabular_splits(splits: dict[str, Any], feature_columns: Sequence[str] | None, standardize: bool, names: list[str]):
    import datasets

    columns = (
        [c for c in splits["train"].column_names if c != "label"] if feature_columns is None else list(feature_columns)
    )
    missing = [c for c in columns if c not in splits["train"].column_names]
    if missing:
        raise DataError(f"feature column(s) {missing} not found; columns are: {columns_message(splits['train'])}")
    if not columns:
        raise DataError("no feature columns: the data set has only a label column")
    frames = {k: ds.select_columns([*columns, "label"]).to_pandas() for k, ds in splits.items() if ds is not None}
    _check_stray_text(frames, columns)
    extractor = fit_tabular_features(frames["train"], columns, standardize)
    width = len(extractor.feature_names)
    features = datasets.Features(
        {
            "input_features": datasets.List(datasets.Value("float32"), length=width),
            "labels": datasets.ClassLabel(names=names),
        }
    )
    out = {
        k: datasets.Dataset.from_dict(
            {"input_features": _as_data_error(extractor.transform, frame, k), "labels": frame["label"].to_numpy()},
            features=features,
        ).with_format("torch")
        for k, frame in frames.items()
    }
    return out, extractor
