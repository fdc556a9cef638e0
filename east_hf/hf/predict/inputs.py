"""The inputs east-predict reads, with their checks: a file, a folder or a data set read as east-train reads its data,
rows and texts as a DataFrame, images given as paths or PIL images, the columns passed through (the label column, an
id column, every column the model does not read), numeric feature columns holding text named in one line, and text
columns holding values that are not text refused as east-train refuses them."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from east_hf.hf.data.labels import LABEL_COLUMNS, default_label_column
from east_hf.hf.data.text import not_text_message

__all__ = [
    "LABEL_COLUMNS",
    "as_numbers",
    "decode",
    "is_dataset",
    "is_image_item",
    "find_label_column",
    "label_values",
    "name_list",
    "one_line",
    "passed_columns",
    "read_inputs",
    "table_frame",
    "text_frame",
    "text_values",
]


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def name_list(items: Sequence[Any], at_most: int = 8) -> str:
    shown = ", ".join(map(str, items[:at_most]))
    return shown + (f", ... ({len(items)} in all)" if len(items) > at_most else "") if items else "none"


def read_inputs(source: str, split: str | None = None, dataset_config: str | None = None):
    """The rows of ``source`` as a ``datasets.Dataset``, read as ``east-train`` reads its data
    (``east_hf.hf.data.load_raw``): a CSV / TSV / Parquet / JSON file, a folder (an imagefolder, with or without one
    sub-folder per class, or data files split by name), a datasets Hub id (from the cache when offline) or
    ``sklearn:<name>``. ``split`` picks one of several splits; with one split it may be left out."""
    from east_hf.hf.data.sources import load_raw

    dsd = load_raw(source, dataset_config)
    if split is None:
        if len(dsd) > 1:
            raise ValueError(f"Expected a split naming one of the splits of {source!r} ({', '.join(dsd)}), got none")
        split = next(iter(dsd))
    elif split not in dsd:
        raise ValueError(f"Expected a split among the splits of {source!r} ({', '.join(dsd)}), got {split!r}")
    return dsd[split]


def is_dataset(data: Any) -> bool:
    return type(data).__name__ == "Dataset" and hasattr(data, "features") and hasattr(data, "column_names")


def is_image_item(item: Any) -> bool:
    from PIL import Image

    return isinstance(item, (Image.Image, str, os.PathLike))


def find_label_column(columns: Sequence[str], requested: str | None) -> str | None:
    """The label column to pass through: ``requested`` (which must be there), else east-train's default label column
    (the first of ``LABEL_COLUMNS``)."""
    if requested is not None:
        if requested not in columns:
            raise ValueError(f"Expected label column {requested!r} in the input, got the columns {name_list(columns)}")
        return requested
    return default_label_column(columns)


def passed_columns(
    data: Any,
    frame: Any,
    used: Sequence[str],
    label_column: str | None = None,
    id_column: str | None = None,
    keep_columns: bool = False,
    reserved: Sequence[str] = (),
) -> dict[str, list]:
    """The input's columns each prediction row carries, by name: ``id_column`` first (which must be there), then the
    label column (``find_label_column``), or with ``keep_columns`` every column the model does not read (``used``),
    in the input's order. Read from ``data`` where it is a ``datasets.Dataset`` (class names for a
    ``ClassLabel``), else from ``frame`` (a pandas DataFrame). A passed column named as an output column
    (``reserved``) is a one-line ``ValueError``, since the prediction would replace it."""
    present = list(data.column_names) if is_dataset(data) else [str(c) for c in frame.columns]
    names = []
    if id_column is not None:
        if id_column not in present:
            raise ValueError(f"Expected id column {id_column!r} in the input, got the columns {name_list(present)}")
        names.append(id_column)
    label = find_label_column(present, label_column)
    if keep_columns:
        names += [c for c in present if c not in used]
    elif label is not None and label not in used:
        names.append(label)
    names = list(dict.fromkeys(names))
    clash = [c for c in names if c in reserved]
    if clash:
        raise ValueError(
            f"Expected input columns to pass through named otherwise than the output's own columns, got {clash[0]!r}: "
            "rename it in the input"
        )
    if is_dataset(data):
        return {c: label_values(data, c) for c in names}
    by_name = {str(c): c for c in frame.columns}
    return {c: frame[by_name[c]].tolist() for c in names}


def table_frame(data: Any):
    """Tabular input as a pandas DataFrame: a ``datasets.Dataset``, a DataFrame, a dict of columns or one row, or row
    dicts; anything else (strings, images) is a one-line ``TypeError``."""
    import pandas as pd

    if is_dataset(data):
        return data.with_format(None).to_pandas()
    if isinstance(data, pd.DataFrame):
        return data
    if isinstance(data, Mapping):
        one_row = data and not any(hasattr(v, "__len__") and not isinstance(v, (str, bytes)) for v in data.values())
        return pd.DataFrame([data] if one_row else data)
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)) and all(isinstance(r, Mapping) for r in data):
        return pd.DataFrame(list(data))
    got = "images" if isinstance(data, Sequence) and any(map(is_image_item, data)) else type(data).__name__
    raise TypeError(
        "Expected rows for a tabular run (a DataFrame, a dict of columns, a list of row dicts or a "
        f"datasets.Dataset), got {got}"
    )


def text_frame(data: Any, text_columns: Sequence[str]):
    """Text input as a pandas DataFrame: a ``datasets.Dataset``, a DataFrame, a dict of columns or one row, row dicts,
    or strings (the run's one text column, ``text_columns[0]``; a text pair run needs rows)."""
    import pandas as pd

    if is_dataset(data):
        return data.with_format(None).to_pandas()
    if isinstance(data, pd.DataFrame):
        return data
    if isinstance(data, Mapping):  # a dict of columns, or one row
        one_row = not any(hasattr(v, "__len__") and not isinstance(v, (str, bytes)) for v in data.values())
        return pd.DataFrame([data] if one_row else data)
    if isinstance(data, Sequence) and data and all(isinstance(r, Mapping) for r in data):
        return pd.DataFrame(list(data))
    if isinstance(data, Sequence) and not isinstance(data, bytes) and not any(isinstance(r, Mapping) for r in data):
        if len(text_columns) > 1:
            raise ValueError(f"Expected rows with the text pair columns {name_list(text_columns)}, got strings")
        return pd.DataFrame({text_columns[0]: pd.Series(list(data), dtype=object)})  # checked by text_values
    raise TypeError(f"Expected texts (a list of strings, a DataFrame or a datasets.Dataset), got {type(data)}")


def label_values(ds, column: str) -> list[Any]:
    """A data set's label column, class names in place of a ``ClassLabel``'s indices."""
    import datasets

    values = list(ds.with_format(None)[column])
    feature = ds.features[column]
    if isinstance(feature, datasets.ClassLabel):
        return [feature.int2str(int(v)) if v is not None and v >= 0 else None for v in values]
    return list(values)


def decode(item: Any):
    """A PIL image from a PIL image, a file path or datasets' undecoded ``{"bytes", "path"}``, decoded by
    ``datasets.Image`` as east-train's data was (EXIF orientation applied); an unreadable file is a one-line error."""
    import datasets
    from PIL import Image

    if isinstance(item, Image.Image):
        return item
    value = {"path": os.fspath(item), "bytes": None} if isinstance(item, (str, os.PathLike)) else item
    try:
        return datasets.Image().decode_example(value)
    except (OSError, ValueError) as e:  # a missing file, not an image, a truncated one
        name = value.get("path") or "an image of the data set"
        raise ValueError(f"Expected an image file, got {name}: {one_line(e)}") from None


def as_numbers(frame, numeric: Sequence[str]):
    """``frame`` with the run's numeric feature columns as numbers: a column of numbers written as text is parsed, a
    blank cell left missing (imputed, as in training); a cell that is not a number (``n/a``, a typo, a shifted
    column) is a one-line ``ValueError`` naming the column, how many rows hold text, and the first such value and
    its row (counting the input's rows from 1). A copy where a column changes, ``frame`` itself where none does."""
    import pandas as pd

    by_name = {str(c): c for c in frame.columns}
    parsed = {}
    for name in numeric:
        column = frame[by_name[name]]
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            continue
        numbers = pd.to_numeric(column, errors="coerce")  # bools, numbers and numeric strings; the rest NaN
        blank = column.isna() | (column.astype(str).str.strip() == "")
        text = (numbers.isna() & ~blank).to_numpy()  # (N,)
        if text.any():
            rows = np.flatnonzero(text)
            raise ValueError(
                f"Expected numbers in column {name!r} (a numeric feature of the run), got text in {len(rows)} of "
                f"{len(frame)} rows, the first {column.iloc[rows[0]]!r} in row {rows[0] + 1}: fix or empty those "
                "cells (an empty cell is imputed)"
            )
        parsed[by_name[name]] = numbers
    if not parsed:
        return frame
    frame = frame.copy()
    for key, numbers in parsed.items():
        frame[key] = numbers
    return frame


def text_values(frame, column: str, what: str = "text column") -> tuple[list[str], np.ndarray]:
    """(the texts of ``frame[column]``, a missing value (None, NaN) as ``""``; a mask (N,) of the rows without text:
    missing, empty or blank). A value that is not a string (a number, a list) is a one-line ``ValueError`` in
    east-train's words for such a text column (``not_text_message``): the column's type, the first such row
    (counting from 0) and its value; a model fed ``str(3.0)`` would predict a confident class from no text."""
    values = frame[column]
    missing = values.isna().to_numpy()  # (N,)
    text = np.fromiter((isinstance(v, str) for v in values), dtype=bool, count=len(values))  # (N,)
    wrong = np.flatnonzero(~text & ~missing)
    if len(wrong):
        row = int(wrong[0])
        example = values.iloc[row]
        example = example.item() if isinstance(example, np.generic) else example
        kind = type(example).__name__ if values.dtype == object else values.dtype
        raise ValueError(not_text_message(what, column, f"{kind} values", row, example))
    texts = [v if ok else "" for v, ok in zip(values, text)]
    return texts, np.array([not t.strip() for t in texts], dtype=bool)
