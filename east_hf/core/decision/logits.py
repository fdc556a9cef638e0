"""The decision tuner's logits: a tensor in memory, or files on disk read a column, a few rows or a block at a time.

The tuner (``east_hf.core.decision.rule``) reads its (N, C) validation logits in three ways: the column of one class
per sweep (N,), the rows whose top two a kept change may alter (R, C), and every row, a block at a time, for the top
two and the argmax. ``TensorLogits`` serves them from a tensor and its transposed (C, N) copy. ``LogitsFile`` serves
them from disk: the rows as appended, (N, C), and their transposition, (C, N), written through a memory map after the
last append, so that a column is one contiguous read and a row another. Every read is a positioned read into a
fresh array, so the process holds a column, a few rows or a block at a time whatever N and C; the files take memory
only as the operating system's page cache, which it reclaims when others need it. Both give the same values, so the
tuned rule is the same bit for bit.

``LogitsFile.temporary`` keeps the files in a temporary folder, removed when its ``with`` block ends, normally or
not. Pure torch and numpy.

>>> with LogitsFile.temporary(3) as stored:
...     stored.append(torch.tensor([[2.0, 0.0, 1.0], [0.5, 1.0, 0.0]]))
...     stored.append(torch.tensor([[0.0, 0.0, 3.0]]))
...     stored.shape, stored.columns[2].tolist(), stored.rows(torch.tensor([1])).tolist()
((3, 3), [1.0, 0.0, 3.0], [[0.5, 1.0, 0.0]])
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

__all__ = ["LogitsFile", "TensorLogits"]

_TRANSPOSE_ELEMENTS = 1 << 24  # entries of one block of rows transposed into the column file: 64 MiB in float32
_CHECK_ELEMENTS = 1 << 22  # entries of an appended block checked for finiteness at a time
_DTYPES = {torch.float32: np.float32, torch.float64: np.float64}
_PREADV = hasattr(os, "preadv")  # one system call a read, no seek (Linux, BSD, macOS 11+)


class TensorLogits:
    """(N, C) logits held in memory, read as the tuner reads them; the transposed copy is made on the first column
    read (``columns[k]``: a view of one run of memory)."""

    def __init__(self, logits: torch.Tensor):
        self.tensor = logits
        self._columns: torch.Tensor | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.tensor.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.tensor.dtype

    @property
    def device(self) -> torch.device:
        return self.tensor.device

    @property
    def columns(self) -> torch.Tensor:
        """(C, N): ``columns[k]`` is the logits of class k."""
        if self._columns is None:
            self._columns = self.tensor.T.contiguous()
        return self._columns

    def rows(self, index: torch.Tensor) -> torch.Tensor:
        """The rows (R, C) at the indices ``index`` (R,)."""
        return self.tensor.index_select(0, index)

    def block(self, start: int, stop: int) -> torch.Tensor:
        """Rows ``start:stop`` (stop - start, C)."""
        return self.tensor[start:stop]


class _Columns:
    """``columns[k]`` of a ``LogitsFile``: the (N,) logits of class k, one contiguous read; the last one is kept,
    since the tuner reads a class's column for its sweep and again for the check that follows."""

    def __init__(self, stored: LogitsFile):
        self.stored, self.last = stored, (None, None)

    def __getitem__(self, k: int) -> torch.Tensor:
        if self.last[0] != k:
            N, _ = self.stored.shape
            self.last = (k, self.stored._read(self.stored._column_file, k * N, (N,)))
        return self.last[1]


class LogitsFile:
    """(N, C) logits on disk, appended a block of rows at a time and read as the tuner reads them (module docstring).

    ``append`` writes rows (any float dtype, any device; stored as ``dtype``, float32 or float64) and refuses
    non-finite ones. ``finish`` (or the first read) writes the transposed file through a memory map, a block of rows
    at a time, after which nothing more can be appended. The files are ``rows.bin`` and ``columns.bin`` in
    ``directory``: twice the logits' size on disk. Reads do not go through a map: a mapped page counts towards the
    process's resident memory until it is unmapped, the kernel may map a whole large folio (up to 2 MiB) for one
    row's fault, and a map per read costs more than a column's read. ``num_classes`` may be left to the first
    append. ``close`` releases the files; ``temporary`` also removes them.
    """

    def __init__(self, directory: str | os.PathLike, num_classes: int | None = None, dtype=torch.float32):
        if dtype not in _DTYPES:
            raise ValueError(f"Expected dtype torch.float32 or torch.float64, got {dtype}")
        if num_classes is not None and (isinstance(num_classes, bool) or not isinstance(num_classes, int)):
            raise TypeError(f"Expected num_classes as an int, got {type(num_classes).__name__}")
        if num_classes is not None and num_classes < 2:
            raise ValueError(f"Expected at least 2 classes (num_classes >= 2), got {num_classes}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.rows_path, self.columns_path = self.directory / "rows.bin", self.directory / "columns.bin"
        self.dtype, self._np_dtype = dtype, _DTYPES[dtype]
        self.num_rows, self.num_classes = 0, num_classes
        self._writer = open(self.rows_path, "wb")  # noqa: SIM115  (closed by finish or close)
        self._row_file = self._column_file = None
        self._columns: _Columns | None = None
        self._closed = False

    @classmethod
    @contextmanager
    def temporary(
        cls, num_classes: int | None = None, dtype=torch.float32, dir: str | os.PathLike | None = None
    ) -> Iterator[LogitsFile]:
        """A ``LogitsFile`` in a new temporary folder under ``dir`` (default: the system's), removed with its files
        when the ``with`` block ends, also on an error."""
        with tempfile.TemporaryDirectory(prefix="east-logits-", dir=dir) as folder:
            stored = cls(folder, num_classes, dtype)
            try:
                yield stored
            finally:
                stored.close()

    @property
    def shape(self) -> tuple[int, int]:
        return (self.num_rows, self.num_classes or 0)

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def append(self, logits: torch.Tensor) -> None:
        """Write the rows of ``logits`` (b, C) after those already written."""
        if self._writer is None:
            state = "closed" if self._closed else "finished"
            raise RuntimeError(f"Expected appends to a LogitsFile before it is finished, got one after it is {state}")
        if not isinstance(logits, torch.Tensor) or logits.ndim != 2 or not logits.is_floating_point():
            got = type(logits).__name__
            if isinstance(logits, torch.Tensor):
                got = f"shape {tuple(logits.shape)} and dtype {logits.dtype}"
            raise ValueError(f"Expected floating-point logits of shape (b, C), got {got}")
        if self.num_classes is None:
            if logits.shape[1] < 2:
                raise ValueError(f"Expected at least 2 classes (C >= 2), got logits of shape {tuple(logits.shape)}")
            self.num_classes = logits.shape[1]
        if logits.shape[1] != self.num_classes:
            raise ValueError(f"Expected logits of shape (b, {self.num_classes}), got {tuple(logits.shape)}")
        block = logits.detach().to("cpu", self.dtype).contiguous()
        rows = max(1, _CHECK_ELEMENTS // self.num_classes)  # isfinite's temporary stays small
        if not all(bool(torch.isfinite(part).all()) for part in block.split(rows)):
            raise ValueError(f"Expected finite logits, got NaN or inf in logits of shape {tuple(block.shape)}")
        self._writer.write(memoryview(block.numpy()).cast("B"))
        self.num_rows += block.shape[0]

    @property
    def columns(self) -> _Columns:
        """``columns[k]``: the (N,) logits of class k."""
        self.finish()
        return self._columns

    def rows(self, index: torch.Tensor) -> torch.Tensor:
        """The rows (R, C) at the indices ``index`` (R,), one positioned read each."""
        self.finish()
        C = self.num_classes
        out = np.empty((len(index), C), dtype=self._np_dtype)
        for j, row in enumerate(index.tolist()):
            self._read_into(self._row_file, out[j], row * C)
        return torch.from_numpy(out)

    def block(self, start: int, stop: int) -> torch.Tensor:
        """Rows ``start:stop`` (stop - start, C)."""
        self.finish()
        N, C = self.shape
        stop = min(stop, N)
        return self._read(self._row_file, start * C, (max(stop - start, 0), C))

    def finish(self) -> LogitsFile:
        """End the appends and write the transposed file (C, N), a block of rows at a time; returns self."""
        if self._closed:
            raise RuntimeError("Expected an open LogitsFile, got a closed one")
        if self._writer is None:
            return self
        self._writer.close()
        self._writer = None
        N, C = self.shape
        self._row_file = open(self.rows_path, "rb", buffering=0)  # noqa: SIM115  (closed by close)
        with open(self.columns_path, "wb") as f:
            f.truncate(N * C * np.dtype(self._np_dtype).itemsize)
        step = max(1, _TRANSPOSE_ELEMENTS // max(C, 1))
        for start in range(0, N, step):
            block = self.block(start, start + step).numpy()
            # A map of the whole column file per block: the pages it writes leave the process with the map.
            columns = np.memmap(self.columns_path, dtype=self._np_dtype, mode="r+", shape=(C, N))
            columns[:, start : start + len(block)] = block.T
            del columns
        self._column_file = open(self.columns_path, "rb", buffering=0)  # noqa: SIM115  (closed by close)
        self._columns = _Columns(self)
        return self

    def close(self) -> None:
        """Close the files; later reads fail."""
        for f in (self._writer, self._row_file, self._column_file):
            if f is not None:
                f.close()
        self._writer = self._row_file = self._column_file = self._columns = None
        self._closed = True

    def _read(self, f, offset: int, shape: tuple[int, ...]) -> torch.Tensor:
        """A fresh tensor of ``shape`` entries of file ``f`` from entry ``offset`` on."""
        out = np.empty(shape, dtype=self._np_dtype)
        self._read_into(f, out, offset)
        return torch.from_numpy(out)

    def _read_into(self, f, out: np.ndarray, offset: int) -> None:
        """Fill the contiguous array ``out`` with the entries of file ``f`` from entry ``offset`` on."""
        if not out.size:
            return
        view, start = memoryview(out.reshape(-1)).cast("B"), offset * out.itemsize
        done = 0
        while done < len(view):
            if _PREADV:
                got = os.preadv(f.fileno(), [view[done:]], start + done)
            else:
                f.seek(start + done)
                got = f.readinto(view[done:])
            if not got:
                raise EOFError(f"Expected {len(view)} bytes at entry {offset} of {f.name}, got {done}")
            done += got
