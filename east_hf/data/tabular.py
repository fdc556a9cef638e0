"""Tabular rows as model inputs: ``TabularPreprocessor`` (one-hot text columns, imputation, standardisation with
training-set statistics) and the splits it turns into ``input_features`` tensors."""

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
        categories = {c: sorted({str(v).strip() for v in frame[c].dropna()}) for c in categorical}
        self = cls(numeric=numeric, categories=categories)
        raw = self._raw(frame)  # (N, F), NaN where missing
        with np.errstate(all="ignore"):
            fill = np.nan_to_num(np.nanmean(raw, axis=0)) if len(raw) else np.zeros(raw.shape[1])
        filled = np.where(np.isnan(raw), fill, raw)
        mean, std = (filled.mean(0), filled.std(0)) if standardize else (np.zeros(raw.shape[1]), np.ones(raw.shape[1]))
        std = np.where(std > 0, std, 1.0)  # a constant column stays constant (0) instead of dividing by zero
        self.fill, self.mean, self.std = fill.tolist(), mean.tolist(), std.tolist()
        return self

    def _raw(self, frame) -> np.ndarray:
        parts = [frame[self.numeric].to_numpy(dtype=np.float64, na_value=np.nan)] if self.numeric else []
        for column, values in self.categories.items():
            text = frame[column].map(lambda v: None if v is None or v != v else str(v).strip()).to_numpy()
            parts.append((text[:, None] == np.asarray(values, dtype=object)[None, :]).astype(np.float64))  # (N, V)
        return np.concatenate(parts, axis=1) if parts else np.zeros((len(frame), 0))

    def __call__(self, frame) -> np.ndarray:
        """(N, F) float32 features of the rows of a pandas DataFrame with the fitted columns."""
        raw = self._raw(frame)
        raw = np.where(np.isnan(raw), np.asarray(self.fill), raw)
        return ((raw - np.asarray(self.mean)) / np.asarray(self.std)).astype(np.float32)

    def save(self, directory: str | os.PathLike) -> Path:
        path = Path(directory) / PREPROCESSOR_NAME
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, directory: str | os.PathLike) -> TabularPreprocessor:
        return cls(**json.loads((Path(directory) / PREPROCESSOR_NAME).read_text()))


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
            {"input_features": preprocessor(frame), "labels": frame["label"].to_numpy()}, features=features
        ).with_format("torch")
        for k, frame in frames.items()
    }
    return out, preprocessor
