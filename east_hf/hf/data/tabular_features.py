"""The tabular MLP's input encoding as a transformers feature extractor: raw rows -> ``input_features``.

``TabularFeatureExtractor`` holds what was fitted on the training rows (which columns are numeric, the categories
of each text column, the imputation values, the standardisation statistics) and applies it to new rows: numeric
columns as they are, text columns one-hot (a value not seen in training: all zeros), a missing value (None, NaN)
the training mean, then ``(x - mean) / std``. ``east-train`` fits it (``east_hf.hf.data.fit_tabular_features``) and
saves it beside the model as ``preprocessor_config.json``; ``AutoFeatureExtractor.from_pretrained(run_dir)`` loads
it after ``import east_hf.hf.models`` (which registers it for the MLP's config), or with ``trust_remote_code=True``
where east_hf is not installed: ``save_pretrained`` copies this file (it imports only numpy and transformers) beside
the JSON and writes an ``auto_map``, as the model's ``east_hf.hf.models.tabular`` does.

>>> fe = TabularFeatureExtractor(numeric=["x"], categories={"colour": ["blue", "red"]}, fill=[1.0, 0.5, 0.5],
...                              mean=[1.0, 0.5, 0.5], std=[2.0, 0.5, 0.5])
>>> fe.feature_names
['x', 'colour=blue', 'colour=red']
>>> fe({"x": [3.0, None], "colour": ["red", "green"]})["input_features"].tolist()
[[1.0, -1.0, 1.0], [0.0, -1.0, -1.0]]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from transformers import BatchFeature, FeatureExtractionMixin

__all__ = ["TabularFeatureExtractor"]


def _is_missing(value: Any) -> bool:
    """None, a float NaN, or pandas' NA / NaT."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")


def _category_codes(values: Any, index: Mapping[str, int], n: int) -> np.ndarray:
    """(N,) int64: the category of each value (its stripped text looked up in ``index``), -1 if missing or unseen.

    A pandas Series is factorised first (in C), so Python looks up each distinct value once, not each row."""
    if hasattr(values, "factorize"):
        rows, distinct = values.factorize()  # rows: (N,) position in distinct, -1 where missing
        code = np.array([index.get(str(v).strip(), -1) for v in distinct] + [-1], dtype=np.int64)
        return code[rows]  # -1 indexes the trailing -1
    return np.fromiter((-1 if _is_missing(v) else index.get(str(v).strip(), -1) for v in values), np.int64, count=n)


def _is_column(values: Any) -> bool:
    return hasattr(values, "__len__") and not isinstance(values, (str, bytes, Mapping))


class TabularFeatureExtractor(FeatureExtractionMixin):
    """Rows -> ``input_features`` (N, F) float32 with the statistics of the training rows.

    Args:
        numeric: the numeric (or boolean) columns, in feature order.
        categories: text column -> its sorted training values; one 0/1 feature per value, after the numeric ones.
        fill: per feature (F,), the value a missing entry takes (the training mean).
        mean, std: per feature (F,), the standardisation ``(x - mean) / std`` (0 and 1 when it was switched off).

    Calling it accepts a dict of columns (``{"x": [1.0, 2.0], ...}``), one row as a dict of scalars, a list of row
    dicts, or a pandas DataFrame; extra columns are ignored, a missing one is an error.
    """

    model_input_names = ["input_features"]

    def __init__(
        self,
        numeric: Sequence[str] = (),
        categories: Mapping[str, Sequence[str]] | None = None,
        fill: Sequence[float] = (),
        mean: Sequence[float] = (),
        std: Sequence[float] = (),
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.numeric = list(numeric)
        self.categories = {str(c): [str(v) for v in values] for c, values in (categories or {}).items()}
        self.fill, self.mean, self.std = list(fill), list(mean), list(std)
        width = len(self.feature_names)
        for name in ("fill", "mean", "std"):
            got = len(getattr(self, name))
            if got not in (0, width):  # 0: not fitted yet (encode still works, __call__ needs the statistics)
                raise ValueError(f"Expected {name} with {width} values (one per feature), got {got}")

    @property
    def feature_names(self) -> list[str]:
        """The F feature names: the numeric columns, then ``column=value`` per category."""
        return self.numeric + [f"{c}={v}" for c, values in self.categories.items() for v in values]

    @property
    def columns(self) -> list[str]:
        """The raw columns a row must have."""
        return self.numeric + list(self.categories)

    def _column_table(self, rows: Any) -> tuple[dict[str, Any], int]:
        """(column -> values, number of rows) from a dict of columns, one row dict, row dicts or a DataFrame."""
        if hasattr(rows, "columns") and hasattr(rows, "iloc"):  # a pandas DataFrame
            present = set(map(str, rows.columns))
            table = {c: rows[c] for c in self.columns if c in present}
            n = len(rows)
        elif isinstance(rows, Mapping):
            if rows and not any(_is_column(v) for v in rows.values()):  # one row
                rows = {k: [v] for k, v in rows.items()}
            table = {c: rows[c] for c in self.columns if c in rows}
            lengths = {c: len(v) for c, v in table.items()}
            if len(set(lengths.values())) > 1:
                raise ValueError(f"Expected columns of one length, got lengths {lengths}")
            n = next(iter(lengths.values()), 0)
        elif isinstance(rows, Sequence) and not isinstance(rows, (str, bytes)):
            if not all(isinstance(r, Mapping) for r in rows):
                kinds = sorted({type(r).__name__ for r in rows if not isinstance(r, Mapping)})
                raise TypeError(f"Expected a list of row dicts, got a list holding {', '.join(kinds)}")
            table = {c: [r.get(c) for r in rows] for c in self.columns if all(c in r for r in rows)}
            n = len(rows)
        else:
            raise TypeError(
                "Expected rows as a dict of columns, one row dict, a list of row dicts or a pandas DataFrame, "
                f"got {type(rows).__name__}"
            )
        missing = [c for c in self.columns if c not in table]
        if missing:
            raise ValueError(f"Expected the columns {self.columns}, got rows without {missing}")
        return table, n

    def encode(self, rows: Any) -> np.ndarray:
        """(N, F) float32 before imputation and standardisation: NaN where missing, 0/1 per category."""
        table, n = self._column_table(rows)
        out = np.zeros((n, len(self.feature_names)), dtype=np.float32)
        for j, column in enumerate(self.numeric):
            values = table[column]
            if hasattr(values, "to_numpy"):  # a pandas Series: pd.NA / None become NaN
                values = values.to_numpy(dtype=np.float64, na_value=np.nan)
            try:
                out[:, j] = np.asarray(values, dtype=np.float64)
            except (TypeError, ValueError):
                bad = next(v for v in values if not isinstance(v, (int, float, np.number, bool)) and v is not None)
                raise ValueError(f"Expected numbers in column {column!r}, got {bad!r}") from None
        at = len(self.numeric)
        for column, values in self.categories.items():
            codes = _category_codes(table[column], {v: k for k, v in enumerate(values)}, n)  # (N,), -1: none
            seen = np.flatnonzero(codes >= 0)
            out[seen, at + codes[seen]] = 1.0
            at += len(values)
        return out

    def transform(self, rows: Any, split: str = "rows") -> np.ndarray:
        """(N, F) float32 model inputs; an inf is refused (naming ``split``), a missing value is imputed."""
        width = len(self.feature_names)
        if len(self.mean) != width:
            raise ValueError(f"Expected a fitted extractor with statistics for {width} features, got none")
        raw = self.encode(rows)
        self.check_finite(raw, split)
        return self.normalize(raw)

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        """``encode``'s (N, F) float32 made model inputs in place: a missing value (NaN) imputed, then standardised."""
        np.copyto(raw, np.asarray(self.fill, dtype=np.float32), where=np.isnan(raw))
        raw -= np.asarray(self.mean, dtype=np.float32)
        raw /= np.asarray(self.std, dtype=np.float32)
        return raw

    def check_finite(self, raw: np.ndarray, split: str = "rows") -> None:
        """Refuse an inf (or -inf) in ``raw`` (N, F): it would make the training mean inf and every weight NaN."""
        self.refuse_infinite(np.isinf(raw).sum(0), split)

    def refuse_infinite(self, per_feature: np.ndarray, split: str = "rows") -> None:
        """Refuse a split whose count of inf per feature ``per_feature`` (F,) is not all 0
        (summed over its batches)."""
        if per_feature.any():
            names = self.feature_names
            columns = ", ".join(f"{names[j]!r} ({per_feature[j]} rows)" for j in np.flatnonzero(per_feature)[:5])
            raise ValueError(
                f"expected finite feature values, got inf in the {split} split: {columns}; fix or drop those rows, "
                "or leave the column out of feature_columns"
            )

    def __call__(self, rows: Any, return_tensors: str | None = None, **kwargs) -> BatchFeature:
        """``BatchFeature({"input_features": (N, F)})``; ``return_tensors="pt"`` gives a torch tensor."""
        if kwargs:
            raise TypeError(f"Expected rows and return_tensors, got unexpected arguments {sorted(kwargs)}")
        return BatchFeature({"input_features": self.transform(rows)}, tensor_type=return_tensors)


# save_pretrained copies this file beside preprocessor_config.json and writes its auto_map there.
TabularFeatureExtractor.register_for_auto_class()
