"""Vectorised reads of a ``datasets.Dataset``'s columns, through its indices mapping when it has one.

``select``, ``shuffle`` and ``train_test_split`` give a data set an indices mapping, which ``datasets`` applies one
row at a time in Python on every read (``Table.fast_gather`` builds a one-row slice per row). These helpers apply it
with one Arrow ``take`` per batch instead, so a split of millions of rows is read at the speed of its columns.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["json_text", "read_batches", "read_column", "row_numbers"]


def row_numbers(ds) -> np.ndarray | None:
    """(N,) int64: the rows of ``ds``'s Arrow table that ``ds`` holds, in order;
    ``None`` without an indices mapping."""
    indices = getattr(ds, "_indices", None)  # datasets keeps the mapping as a one-column Arrow table
    return None if indices is None else indices.column(0).to_numpy().astype(np.int64, copy=False)


def read_column(ds, name: str):
    """The column ``name`` of ``ds`` as a ``pyarrow.ChunkedArray`` of ``len(ds)`` values (no format, no transform)."""
    import pyarrow as pa

    column = ds.data.table.column(name)
    rows = row_numbers(ds)
    return column if rows is None else column.take(pa.array(rows))


def read_batches(ds, columns: Sequence[str], rows_per_batch: int) -> Iterator:
    """``ds``'s ``columns`` as ``pyarrow.Table`` batches of at most ``rows_per_batch`` rows, in order."""
    import pyarrow as pa

    table = ds.data.table.select(list(columns))
    rows = row_numbers(ds)
    for start in range(0, len(ds), rows_per_batch):
        if rows is None:
            yield table.slice(start, rows_per_batch)
        else:
            yield table.take(pa.array(rows[start : start + rows_per_batch]))


def json_text(column):
    """The JSON text of ``column``, a ``pyarrow.ChunkedArray``, as a string column where ``datasets`` keeps it as JSON
    (``datasets.Json``: a JSON-lines column whose values are of several types); ``None`` for any other column."""
    import pyarrow as pa

    json_type = getattr(pa, "JsonType", None)  # pyarrow >= 19
    if json_type is None or not isinstance(column.type, json_type):
        return None
    return pa.chunked_array([chunk.storage for chunk in column.chunks], column.type.storage_type)
