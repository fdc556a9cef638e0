"""Tabular rows as model inputs: fit the ``TabularFeatureExtractor`` (one-hot text columns, imputation,
standardisation with training-set statistics) on the training split and turn every split into ``input_features``.

Bounded memory and finite inputs: a text column with more than ``MAX_CATEGORIES`` distinct training values, or one
that is mostly unique (an id, a free-text field), is refused with a message naming ``feature_columns``, since its
one-hot encoding would be as wide as the data set is long; features are float32 throughout; an ``inf`` in any split
is refused with its column and row count (a missing value, NaN, is imputed with the training mean).

The fitted extractor is a transformers ``FeatureExtractionMixin`` (``east_hf.hf.models.tabular_features``): it saves
as ``preprocessor_config.json`` and reloads with ``AutoFeatureExtractor.from_pretrained``. Runs written before it
kept the same statistics in ``tabular_preprocessor.json``; ``load_tabular_features`` reads either.
"""

from __future__ import annotations

import json
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
        if len(values) > MAX_CATEGORIES or (len(values) > 32 and len(values) > UNIQUE_FRACTION * len(frame)):
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
