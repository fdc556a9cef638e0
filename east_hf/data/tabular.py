"""Tabular rows as model inputs: ``TabularPreprocessor`` (one-hot text columns, imputation, standardisation with
training-set statistics) and the splits it turns into ``input_features`` tensors.

Bounded memory and finite inputs: a text column with more than ``MAX_CATEGORIES`` distinct training values, or one
that is mostly unique (an id, a free-text field), is refused with a message naming ``feature_columns``, since its
one-hot encoding would be as wide as the data set is long; features are float32 throughout; an ``inf`` in any split
is refused with its column and row count (a missing value, NaN, is imputed with the training mean).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from east_hf.data.sources import DataError

__all__ = ["PREPROCESSOR_NAME", "TabularPreprocessor", "columns_message", "tabular_splits"]

PREPROCESSOR_NAME = "tabular_preprocessor.json"
MAX_CATEGORIES = 256  # distinct values of a one-hot text column; above it the column is refused
UNIQUE_FRACTION = 0.5  # a text column with more distinct values than this fraction of rows (and > 32) looks like an id


def columns_message(ds) -> str:
    return ", ".join(ds.column_names)


@dataclass
class TabularPreprocessor:
    """Rows -> (N, F) float32: numeric columns as they are, text columns one-hot, missing values the training mean,
    then (x - mean) / std with training-set statistics. Saved beside the model as ``tabular_preprocessor.json``.
    """

    numeric: list[str]
    categories: dict[str, list[str]] = field(default_factory=dict)
    fill: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    std: list[float] = field(default_factory=list)

    @property
    def feature_names(self) -> list[str]:
        return self.numeric + [f"{c}={v}" for c, values in self.categories.items() for v in values]

    @classmethod
    def fit(cls, frame, columns: Sequence[str], standardize: bool = True) -> TabularPreprocessor:
        """Statistics of the training rows ``frame`` (a pandas DataFrame) only."""
        import pandas as pd

        numeric = [
            c for c in columns if pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c])
        ]
        categorical = [c for c in columns if c not in numeric]
        categories = {}
        for c in categorical:
            values = frame[c].dropna().map(lambda v: str(v).strip()).unique()
            if len(values) > MAX_CATEGORIES or (len(values) > 32 and len(values) > UNIQUE_FRACTION * len(frame)):
                raise DataError(
                    f"text column {c!r} has {len(values)} distinct values in {len(frame)} training rows (an id or "
                    f"free text?), too many to one-hot encode (at most {MAX_CATEGORIES}): set feature_columns to the "
                    "columns to use, without it"
                )
            categories[c] = sorted(values)
        self = cls(numeric=numeric, categories=categories)
        raw = self._raw(frame)  # (N, F) float32, NaN where missing
        check_finite_features(raw, self.feature_names, "train")
        with np.errstate(all="ignore"):
            fill = np.nan_to_num(np.nanmean(raw, axis=0, dtype=np.float64)) if len(raw) else np.zeros(raw.shape[1])
        filled = np.where(np.isnan(raw), fill.astype(np.float32), raw)
        if standardize:
            mean, std = filled.mean(0, dtype=np.float64), filled.std(0, dtype=np.float64)
        else:
            mean, std = np.zeros(raw.shape[1]), np.ones(raw.shape[1])
        std = np.where(std > 0, std, 1.0)  # a constant column stays constant (0) instead of dividing by zero
        self.fill, self.mean, self.std = fill.tolist(), mean.tolist(), std.tolist()
        return self

    def _raw(self, frame) -> np.ndarray:
        """(N, F) float32: the numeric columns, then one 0/1 column per category (a value not seen in training: 0)."""
        import pandas as pd

        out = np.zeros((len(frame), len(self.feature_names)), dtype=np.float32)
        if self.numeric:
            out[:, : len(self.numeric)] = frame[self.numeric].to_numpy(dtype=np.float32, na_value=np.nan)
        at, rows = len(self.numeric), np.arange(len(frame))
        for column, values in self.categories.items():
            text = frame[column].map(lambda v: None if v is None or v != v else str(v).strip())
            codes = pd.Categorical(text, categories=values).codes  # (N,), -1 for missing or unseen
            seen = codes >= 0
            out[rows[seen], at + codes[seen]] = 1.0
            at += len(values)
        return out

    def __call__(self, frame, split: str = "rows") -> np.ndarray:
        """(N, F) float32 features of the rows of a pandas DataFrame with the fitted columns; an inf is refused."""
        raw = self._raw(frame)
        check_finite_features(raw, self.feature_names, split)
        raw = np.where(np.isnan(raw), np.asarray(self.fill, dtype=np.float32), raw)
        raw -= np.asarray(self.mean, dtype=np.float32)
        raw /= np.asarray(self.std, dtype=np.float32)
        return raw

    def save(self, directory: str | os.PathLike) -> Path:
        path = Path(directory) / PREPROCESSOR_NAME
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, directory: str | os.PathLike) -> TabularPreprocessor:
        return cls(**json.loads((Path(directory) / PREPROCESSOR_NAME).read_text()))


def check_finite_features(raw: np.ndarray, names: Sequence[str], split: str) -> None:
    """Refuse an inf (or -inf) feature: it would make the training mean inf and every weight NaN."""
    infinite = np.isinf(raw)  # (N, F)
    if infinite.any():
        per_column = infinite.sum(0)
        columns = ", ".join(f"{names[j]!r} ({per_column[j]} rows)" for j in np.flatnonzero(per_column)[:5])
        raise DataError(
            f"expected finite feature values, got inf in the {split} split: {columns}; fix or drop those rows, or "
            "leave the column out of feature_columns"
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
    preprocessor = TabularPreprocessor.fit(frames["train"], columns, standardize)
    width = len(preprocessor.feature_names)
    features = datasets.Features(
        {
            "input_features": datasets.List(datasets.Value("float32"), length=width),
            "labels": datasets.ClassLabel(names=names),
        }
    )
    out = {
        k: datasets.Dataset.from_dict(
            {"input_features": preprocessor(frame, k), "labels": frame["label"].to_numpy()}, features=features
        ).with_format("torch")
        for k, frame in frames.items()
    }
    return out, preprocessor
